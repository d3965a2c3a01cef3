//! config.json + model.safetensors → `Model` on the CPU (both dtypes), then one forward pass.
//! Input: the config's length as two little-endian bytes, the config, then the safetensors bytes
//! (tools/fuzz/make_seeds.py writes seeds in this form from a tiny checkpoint).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    gpt2_web::fuzzing::load_model(data);
});
