// Generated from src/generate/options.rs by `GPT2_BLESS=1 cargo test --test generated`; do not edit.

/**
 * Which backend to run on. 'auto' picks WebGPU when a hardware adapter is available and the
 * model fits, else the CPU (a software adapter such as SwiftShader is slower than the CPU
 * backend, so 'auto' never picks one). 'webgpu' takes any adapter, and load rejects when there
 * is none.
 */
export const BACKENDS = Object.freeze(['auto', 'cpu', 'webgpu']);

/** Weight format: 'q8' or 'f32', on the CPU and on WebGPU; 'f16' on WebGPU (q8 on the CPU). */
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

/**
 * The wasm builds (./build.sh): 'pkg' (simd128, every engine), 'pkg-relaxed' (relaxed SIMD),
 * 'pkg-threads' (relaxed SIMD and threads, on a cross-origin isolated page).
 */
export const WASM_BUILDS = Object.freeze(['pkg', 'pkg-relaxed', 'pkg-threads']);

/** Why generation ended. */
export const STOP_REASONS = Object.freeze(['eos', 'stop', 'max_tokens', 'context', 'abort']);

/**
 * The engine's limits (src/scheduler): maxBatch: the most generations of one model that share
 * a step. maxQueue: the most requests (each choice of n counts) that wait for one model; more
 * are refused with code 'busy'. maxChoices: the most choices (n) of one call.
 */
export const LIMITS = Object.freeze({ maxBatch: 16, maxQueue: 256, maxChoices: 16 });

/**
 * Each numeric generate option's range and default, as the engine checks them: `min..=max`, or
 * `(min, max]` where `minOpen`; `whole` for whole numbers. Every page input, widget attribute and
 * preset follows it (tests/e2e/ranges.test.mjs).
 */
export const RANGES = Object.freeze({
  maxTokens: Object.freeze({ min: 1, max: 1000000000, minOpen: false, whole: true, default: 64 }),
  temperature: Object.freeze({ min: 0, max: 100, minOpen: false, whole: false, default: 0 }),
  topK: Object.freeze({ min: 0, max: 1000000000, minOpen: false, whole: true, default: 0 }),
  topP: Object.freeze({ min: 0, max: 1, minOpen: true, whole: false, default: 1 }),
  minP: Object.freeze({ min: 0, max: 1, minOpen: false, whole: false, default: 0 }),
  repetitionPenalty: Object.freeze({ min: 0, max: 100, minOpen: true, whole: false, default: 1 }),
  seed: Object.freeze({ min: 0, max: 9007199254740991, minOpen: false, whole: true, default: 0 }),
  n: Object.freeze({ min: 1, max: 16, minOpen: false, whole: true, default: 1 }),
  topLogprobs: Object.freeze({ min: 0, max: 100, minOpen: false, whole: true, default: 0 }),
  draftTokens: Object.freeze({ min: 1, max: 15, minOpen: false, whole: true, default: 8 }),
  numBeams: Object.freeze({ min: 1, max: 16, minOpen: false, whole: true, default: 1 }),
  lengthPenalty: Object.freeze({ min: -100, max: 100, minOpen: false, whole: false, default: 1 }),
});

/** Gpt2.load's options and how gpt2.js checks each (an unknown one is refused). */
export const LOAD_OPTIONS = Object.freeze({
  model: Object.freeze({ check: 'any' }),
  revision: Object.freeze({ check: 'text' }),
  file: Object.freeze({ check: 'text' }),
  hubHost: Object.freeze({ check: 'text' }),
  backend: Object.freeze({ check: 'list', list: BACKENDS }),
  dtype: Object.freeze({ check: 'list', list: DTYPES }),
  threads: Object.freeze({ check: 'whole', min: 1, max: 64 }),
  memoryLimit: Object.freeze({ check: 'number', min: 1 }),
  build: Object.freeze({ check: 'list', list: WASM_BUILDS }),
  kernel: Object.freeze({ check: 'list', list: KERNELS }),
  raceSoftwareGpu: Object.freeze({ check: 'boolean' }),
  onProgress: Object.freeze({ check: 'function' }),
  onBackendChange: Object.freeze({ check: 'function' }),
  signal: Object.freeze({ check: 'signal' }),
});
