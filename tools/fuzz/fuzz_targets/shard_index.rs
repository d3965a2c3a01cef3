//! config.json + model.safetensors.index.json → the shard index parsed and checked.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    gpt2_web::fuzzing::shard_index(data);
});
