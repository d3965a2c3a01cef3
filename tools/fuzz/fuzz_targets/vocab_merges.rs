//! vocab.json + merges.txt → tokenizer.json → Tokenizer, then encode and decode.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    gpt2_web::fuzzing::vocab_merges(data);
});
