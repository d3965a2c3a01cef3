//! A GGUF file → its config and tokenizer → `Model` on the CPU (both dtypes), one forward pass,
//! and the file streamed in small chunks. tools/fuzz/make_seeds.py writes a tiny GPT-2 GGUF seed.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    gpt2_web::fuzzing::load_gguf(data);
});
