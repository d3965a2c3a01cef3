//! config.json + model.safetensors or pytorch_model.bin (zip + pickle) → the weights' reader alone,
//! streamed whole and in chunks of a size that varies with the input; no model built. Seeds: load_model's.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    gpt2_web::fuzzing::weights_stream(data);
});
