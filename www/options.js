// Generated from src/generate/options.rs by `GPT2_BLESS=1 cargo test --test generated`; do not edit.

/**
 * Which backend to run on. 'auto' picks WebGPU when a hardware adapter is available and the
 * model fits, else the CPU (a software adapter such as SwiftShader is slower than the CPU
 * backend, so 'auto' never picks one). 'webgpu' takes any adapter, and load rejects when there
 * is none.
 */
export const BACKENDS = Object.freeze(['auto', 'cpu', 'webgpu']);

/**
 * Weight format: 'q8' or 'f32' on the CPU (WebGPU then runs f32); 'f16' on WebGPU (q8 on the
 * CPU).
 */
export const DTYPES = Object.freeze(['q8', 'f32', 'f16']);

/** The CPU's 8-bit kernel in the browser: 'auto' (the engine's choice) or one by name. */
export const KERNELS = Object.freeze(['auto', 'dot-add', 'dot-i16', 'widen']);

/** Why generation ended. */
export const STOP_REASONS = Object.freeze(['eos', 'stop', 'max_tokens', 'context', 'abort']);
