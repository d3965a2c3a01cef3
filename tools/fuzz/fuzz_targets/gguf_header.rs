//! A GGUF file → its header, tensor table, config and tokenizer (built from its lists and run),
//! its first third and half scanned as a header still arriving; no model built. Seeds: load_gguf's.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    gpt2_web::fuzzing::gguf_header(data);
});
