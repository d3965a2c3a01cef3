// The worker's shared pieces: the replies to the page, the models it holds, the model files' names
// of the load in progress, what a Content-Security-Policy blocked, and the sentence for an error.
// Imports nothing. (Part of the worker: see www/worker/main.js.)

/** model id (its load request's) → { index (the scheduler's name for it), disposed, crashed (the sentence of a trap in it) } */
export const models = new Map();
/** load request id → { aborted, own: Set of the ids of its own generations (the warm-up) } while it runs */
export const loading = new Map();

/** Throws the error of an aborted load when `state` (a `loading` entry) was aborted. */
export function checkAborted(state) {
  if (state?.aborted) throw Object.assign(new Error('the load was aborted'), { code: 'abort' });
}

/** The model files' names by key: gpt2.js's MODEL_FILES, sent with each load (the worker has no imports). */
export let FILES = null;
/** Sets FILES (an importer cannot assign it). */
export function setFiles(names) {
  FILES = names;
}

export function reply(id, type, payload = {}) {
  self.postMessage({ id, type, ...payload });
}

// What a Content-Security-Policy blocked here (a blob worker runs under its page's policy): the
// failing fetch or compile only says that it failed.
export const blocked = [];
self.addEventListener('securitypolicyviolation', (e) => blocked.push(`${e.effectiveDirective} ${e.blockedURI || "'inline'"}`));

/**
 * An error reply's fields: a sentence for a person (wasm traps and memory failures translated, the
 * rest passed through) and the error's kind as `code` when it has one (the engine's: 'gpu',
 * 'param', 'weights', … — Error::code in src/error.rs; a wasm trap 'crash'; out of memory
 * 'memory'), so that nothing downstream decides by matching the sentence.
 */
export function failure(e) {
  const msg = e instanceof Error ? e.message : String(e);
  if (e instanceof WebAssembly.RuntimeError) {
    return { message: `the model crashed inside WebAssembly (${msg}); the browser console has details; load the model again`, code: 'crash' };
  }
  if (e instanceof RangeError && /memory|allocation/i.test(msg)) {
    return { message: `out of memory (${msg}); try a smaller model or close other tabs`, code: 'memory' };
  }
  return typeof e?.code === 'string' ? { message: msg, code: e.code } : { message: msg };
}

/** The sentence of `failure`. */
export function describe(e) {
  return failure(e).message;
}
