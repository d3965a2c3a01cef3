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

/**
 * The kind of failure a rejected promise's Error carries as `code` (decide by it, not by the
 * sentence; Error::code in src/error.rs): 'param' an option out of range, 'gpu' a WebGPU
 * failure, after which 'auto' runs on the CPU, 'memory' an allocation refused, 'budget' the
 * memory budget refusing a model, 'state' the engine used out of turn, 'busy' the model's
 * queue is full (LIMITS.maxQueue requests wait; try again later), 'crash' a trap inside
 * WebAssembly (load the model again), …
 */
export const ERROR_CODES = Object.freeze(['io', 'config', 'weights', 'tokenizer', 'param', 'prompt_too_long', 'memory', 'budget', 'state', 'busy', 'crash', 'backend', 'gpu', 'cpu']);

/** Why generation ended. */
export const STOP_REASONS = Object.freeze(['eos', 'stop', 'max_tokens', 'context', 'abort']);

/**
 * The engine's limits (src/scheduler): maxBatch: the most generations of one model that share
 * a step. maxQueue: the most requests (each choice of n counts) that wait for one model; more
 * are refused with code 'busy'. maxChoices: the most choices (n) of one call.
 */
export const LIMITS = Object.freeze({ maxBatch: 16, maxQueue: 256, maxChoices: 16 });
