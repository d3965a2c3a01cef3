//! What every model of this wasm instance runs with, set by the worker: the 8-bit kernels (asked,
//! timed, remembered or named) and whether `backend: 'auto'` races a software adapter.

use super::js_err;
use wasm_bindgen::prelude::*;

/// The CPU's 8-bit kernel in this instance: "dot-add", "dot-i16" or "widen" (relaxed SIMD's
/// four-way dot, its 16-bit dot widened, bytes widened to 16 bits: `q8::choice`), or "A (prompt),
/// B (decode)" when timing chose two.
#[wasm_bindgen]
pub fn kernel() -> String {
    crate::backend::cpu::q8::kernel()
}

/// Where the engine cannot tell its 8-bit kernels apart by itself (the relaxed-SIMD builds: the
/// engine's 8-bit dot against bytes widened to 16 bits), times them (about 30 ms, once per
/// instance) and makes the faster one, for a decode step and for a prompt, the automatic choice:
/// what it measured, or undefined where there is nothing to decide (the portable build, or a
/// kernel named by `setKernel`).
#[wasm_bindgen(js_name = calibrateKernels)]
pub fn calibrate_kernels() -> Option<String> {
    crate::backend::cpu::q8::calibrate()
}

/// The 8-bit kernels `calibrateKernels` times here, by name (empty where there is nothing to
/// decide): the worker times a decode step of its model under each (`setKernel`) and gives its
/// choice to `useTimedKernels`.
#[wasm_bindgen(js_name = undecidedKernels)]
pub fn undecided_kernels() -> Vec<String> {
    crate::backend::cpu::q8::undecided()
        .into_iter()
        .map(String::from)
        .collect()
}

/// The 8-bit kernels timing chose, `[decode, prompt]` by name (for the page to remember per
/// device), or undefined before `calibrateKernels` or where there was nothing to decide.
#[wasm_bindgen(js_name = timedKernels)]
pub fn timed_kernels() -> Option<Vec<String>> {
    crate::backend::cpu::q8::timed().map(|(d, p)| vec![d.to_string(), p.to_string()])
}

/// Makes `decode` and `prompt` this instance's automatic 8-bit kernels without timing them (an
/// earlier load's `timedKernels` on this device): false where they are not the kernels
/// `calibrateKernels` would time here, and then nothing changes.
#[wasm_bindgen(js_name = useTimedKernels)]
pub fn use_timed_kernels(decode: &str, prompt: &str) -> bool {
    crate::backend::cpu::q8::use_timed(decode, prompt)
}

/// Lets `backend: 'auto'` race a software adapter (SwiftShader) as if it were hardware, for the
/// loads after this call (the load option `raceSoftwareGpu`: tests and benchmarks).
#[wasm_bindgen(js_name = setRaceSoftwareGpu)]
pub fn set_race_software_gpu(on: bool) {
    crate::model::set_software_gpu_races(on)
}

/// Makes every later 8-bit product of this instance use the kernel `name` ("auto", or one of
/// this build's: see `kernel`), for benchmarks; the numbers are the same in each. Throws the
/// sentence for a name this build does not have.
#[wasm_bindgen(js_name = setKernel)]
pub fn set_kernel(name: &str) -> Result<(), JsValue> {
    crate::backend::cpu::q8::set_kernel(name).map_err(js_err)
}
