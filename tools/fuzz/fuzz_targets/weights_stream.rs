//! config.json + model.safetensors or pytorch_model.bin (zip + pickle) → the weights' reader alone,
//! streamed whole and in 7-byte chunks; no model built. Seeds: load_model's.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    gpt2_web::fuzzing::weights_stream(data);
});
