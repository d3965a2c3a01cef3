// The worker's message protocol, written down once: every request the page sends (`op`) and every
// reply the worker sends (`type`), with their fields. main.js dispatches through a table whose keys
// must be REQUESTS' own; tests/e2e/protocol.test.mjs checks that, that every op gpt2.js sends and
// every type the worker replies with is here, and that connection.js handles every reply type.
//
// Every request from the page carries a fresh numeric `id`; every reply carries the id of the
// request it answers (but `threads`, the one message the worker starts, and the page's answer). A loaded model is named by the id of its load request, so several models
// (and several page widgets) share one worker. `done` and `error` end a request (every one but
// `abort`); the others may come any number of times before.

/** page → worker: op → what the request holds, and what answers it. */
export const REQUESTS = {
  load: '{ id, op, source: { urls } | { files } (a GGUF file: `weights` alone; its header holds the rest), backend, dtype, ' +
    'tries: [[build, threads], …] (the builds to start the engine with, in order: api/builds.js), compiling: a build\'s ' +
    'name | null (the page compiles that build\'s wasm and sends it: engine), platform: { bytes, what } | null (a lower memory limit: gpt2.js\'s platformMemory), kernel (the CPU\'s 8-bit kernel by name, or undefined), raceSoftwareGpu (auto races a software adapter), timedKernels: { [kernelsAt]: { decode, prompt, times } } | null (kernel timings of earlier loads in this browser), headsVerdicts: { [headsAt]: verdict } | null (the model\'s heads as earlier visits measured them: metrics.mtp.verdict), builds: { [name]: { js, wasm } } (assets.js: absolute URLs), ' +
    'files: { config, weights, tokenizer } (their names, for sentences) } → progress…, done { backend, dtype, threads, build, ' +
    'kernel, kernelTimes, timedKernels: [decode, prompt] | null (timed by this load), config, adapter, gpuUnavailable, plan, timings (startedAt: the load\'s start in epoch ms; then each phase\'s end in ms from it), mtpHeads: { heads, draftVocab } | null, ' +
    'backendTimes: { webgpuMs, cpuMs, logitDiff, chosen, why } | null, headsAt (build, threads, backend and dtype: where a heads verdict is kept), kernelsAt (build, threads and the model\'s parameter count: where timedKernels are kept) }',
  generate: '{ id, op, model, prompt, options, draftModel? (a loaded model\'s id, for options.draft === \'model\') } → ' +
    'token… (backend, progress while a lost GPU\'s model is read again), done { …result }; with options.n > 1 ' +
    'each token has its `choice` and done is choice 0\'s result with `choices`',
  abort: '{ op, id (the generate request\'s, or a load\'s) } → nothing of its own: the generation ends with done ' +
    '(stopReason \'abort\'; a logits call still queued: null); a load ends with error { code: \'abort\' }',
  logits: '{ id, op, model, ids (token ids), cache (false: the whole sequence again) } → backend?, done { logits ' +
    '(Float32Array, vocabSize), reused (ids the KV cache held), ms (the engine\'s time) }; queued behind generations',
  tokenize: '{ id, op, model, text } → done [ids]',
  decode: '{ id, op, model, ids } → done text',
  dispose: '{ id, op, model } → done; the model\'s requests, queued or running, get error',
  memory: '{ id, op, model } → done { wasmBytes, weights, kvCache, on }',
  engine: '{ op, module: WebAssembly.Module | null } the wasm of the build a load said it is `compiling`, compiled ' +
    'by the page (or null: the worker compiles it); no id, no reply',
  threads: '{ op, error? } the answer to a `threads` message: the page started the workers (or could not: error, a ' +
    'sentence); no id, no reply (the threaded build\'s script waits for it: tools/patch_rayon.mjs)',
};

/** worker → page: type → what the reply holds. */
export const REPLIES = {
  ready: '{ type } once, when the worker\'s script has run',
  threads: '{ type, n, init, url } the threaded build asks the page to start its n threads: n workers of the script at ' +
    'url (wasm-bindgen-rayon\'s, as tools/patch_rayon.mjs changes it), each sent init; answered by the request threads',
  progress: '{ id, type, file, loaded, total, tensor, cached, plan? } while a load reads its files',
  token: '{ id, type, token } once per generated token',
  backend: '{ id, type, backend, reason } the backend changed during a generation (e.g. the GPU was lost), before that token',
  done: '{ id, type, value } the request\'s result',
  error: '{ id, type, message, code? } the request failed: a sentence, and its kind when it has one (\'gpu\', \'param\', \'weights\', …: src/error.rs Error::code; \'crash\', \'memory\')',
};
