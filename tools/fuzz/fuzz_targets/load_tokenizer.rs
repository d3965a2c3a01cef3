//! tokenizer.json → `Tokenizer`, then encode and decode a text with every byte value.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    gpt2_web::fuzzing::load_tokenizer(data);
});
