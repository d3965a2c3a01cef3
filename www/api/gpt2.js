// gpt2-web's JavaScript API: GPT-2 in a Web Worker, one callback per generated token.
//
//   import { Gpt2 } from './gpt2.js';
//   const model = await Gpt2.load({ model: 'models/gpt2-shakespeare/', backend: 'auto', dtype: 'q8',
//                                   onProgress: ({ file, loaded, total }) => {} });
//   const r = await model.generate('ROMEO:', { maxTokens: 40, temperature: 0.8, seed: 1,
//                                               onToken: ({ text }) => out.append(text) });
//   r.text; r.stopReason; r.metrics.ttftMs; r.metrics.tpotMs; r.metrics.totalMs;
//   model.dispose();
//
// Types and full documentation: gpt2.d.ts. What a `model` option names is sources.js's. The
// model runs in worker.js; all models loaded by one
// page share that worker, which is started on the first load and stopped when the last model is
// disposed. A `generate` while another runs on the same model is queued, not rejected.
// Loading the same folder URL with the same backend again (e.g. several <gpt2-generator> widgets)
// shares one download and one model: each load returns its own handle, and the model is freed
// when the last handle is disposed.

import { BUILDS, DEMO_MODEL } from './assets.js';
import { buildOrder, compileOnPage } from './builds.js';
import { completionsOf } from './completions.js';
import { rememberedRace, rememberRace, rememberedKernels, rememberKernels, rememberedHeads, rememberHeads } from './memory.js';
import { LIMITS, LOAD_OPTIONS } from './options.js';
import { EMBED_HELP, connection, idle, request, withCode } from './connection.js';
import { PRESETS } from './presets.js';
import { argmax, softmax, topK, topP, minP, penalize, distribution, entropy, sample, rng } from './sampling.js';
import { MODEL_FILES, HUB_HOST, isHubId, hubUrl, modelSource, readHere } from './sources.js';

/**
 * The load's phases as the worker timed them (ms from its start), and `startedMs`: when it started
 * in the worker, in ms from this page's time origin (its navigation), from the clock both share.
 */
function loadTimings({ startedAt, ...phases }) {
  const startedMs = startedAt == null ? undefined : Math.round((startedAt - performance.timeOrigin) * 10) / 10;
  return Object.freeze({ startedMs, ...phases });
}

/** An option or argument the API refuses: an Error with code 'param' (gpt2.d.ts Gpt2Error). */
const invalid = (message) => withCode(new Error(message), 'param');

// ---------------------------------------------------------------------------------------------
// Argument checks: a wrong call fails at once with a sentence, before anything is downloaded.
// The generate options themselves are read and checked once, by the engine, when the worker
// queues the request (src/generate/options.rs defines them; an error names the option).

function checkOptions(options) {
  if (options === null || typeof options !== 'object') throw invalid('generate options must be an object');
  const { signal, onToken, ...rest } = options;
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw invalid('the signal option must be an AbortSignal');
  if (onToken !== undefined && typeof onToken !== 'function') throw invalid('the onToken option must be a function');
  return { signal, onToken, options: rest };
}

/**
 * Checks Gpt2.load's options against their table (LOAD_OPTIONS: options.js, generated from
 * src/model/load_options.rs): an option it does not name, or a value of the wrong kind, is refused
 * with a sentence naming it. Undefined means the default.
 */
function checkLoadOptions(options) {
  if (options === null || typeof options !== 'object') throw invalid('load options must be an object');
  for (const [name, value] of Object.entries(options)) {
    if (!Object.hasOwn(LOAD_OPTIONS, name)) {
      throw invalid(`unknown load option "${name}"; the load options are ${Object.keys(LOAD_OPTIONS).join(', ')}`);
    }
    const rule = LOAD_OPTIONS[name];
    const ok = value === undefined || {
      any: () => true,
      text: () => typeof value === 'string',
      list: () => rule.list.includes(value),
      whole: () => Number.isInteger(value) && value >= rule.min && value <= rule.max,
      number: () => Number.isFinite(value) && value >= rule.min,
      boolean: () => typeof value === 'boolean',
      function: () => typeof value === 'function',
      signal: () => value instanceof AbortSignal,
    }[rule.check]();
    if (ok) continue;
    const text = JSON.stringify(value) ?? String(value);
    throw invalid({
      text: `invalid ${name}: ${text} is not a string`,
      list: `unknown ${name} ${text}; choose ${rule.list?.join(', ')}`,
      whole: `invalid ${name}: ${text} is not a whole number from ${rule.min} to ${rule.max}`,
      number: `invalid ${name}: ${text} is not a number of at least ${rule.min}`,
      boolean: `the ${name} option must be true or false`,
      function: `the ${name} option must be a function`,
      signal: `the ${name} option must be an AbortSignal`,
    }[rule.check]);
  }
}

/**
 * The result of a generation aborted before it was sent (with its `n` choices, each as empty), as
 * the engine answers one aborted while queued.
 */
function emptyResult(n = 1) {
  const r = {
    text: '', tokens: [], stopReason: 'abort',
    metrics: {
      ttftMs: 0, tpotMs: 0, tpotP50Ms: 0, tpotP95Ms: 0, totalMs: 0, prefillMs: 0,
      promptTokens: 0, outputTokens: 0, prefillTokensPerSec: 0, decodeTokensPerSec: 0,
      targetForwards: 0, draftedTokens: 0, acceptedDraftTokens: 0, batchSize: 0,
      cachedPromptTokens: 0,
    },
  };
  if (n > 1) r.choices = Array.from({ length: n }, (_, index) => ({ index, text: '', tokens: [], stopReason: 'abort', metrics: null }));
  return r;
}

/**
 * Where the platform stops a tab below what a wasm build can address: iOS and iPadOS (every browser
 * there is WebKit) close a page at about 1.5 GB, so a model that needs more is refused with that
 * reason before its weights download. iPadOS reports itself as a Mac with a touch screen.
 */
export function platformMemory(nav = globalThis.navigator) {
  const ua = nav?.userAgent ?? '';
  const ios = /\b(iPhone|iPad|iPod)\b/.test(ua) || (/\bMacintosh\b/.test(ua) && nav.maxTouchPoints > 1);
  return ios ? { bytes: 1.5e9, what: 'the about 1.5 GB at which iOS and iPadOS close a browser tab' } : null;
}

// ---------------------------------------------------------------------------------------------
// The public class.

export class Gpt2 {
  #conn;
  #id;
  #config;
  #name;
  #load; // the shared model this handle counts on: { key, refs }
  #disposed = false;
  #onBackendChange;
  #onProgress; // the load's, also told while a lost GPU's model is read again (fallBack: true)
  #lastCall = null; // the last logits call's timings
  #completions = null;

  /** Use Gpt2.load(). */
  constructor(conn, id, config, name, load) {
    if (!conn) throw new Error('use Gpt2.load() to make a model');
    this.#conn = conn;
    this.#id = id;
    this.#load = load;
    load.live?.handles.add(this);
    this.#config = Object.freeze({ ...config });
    this.#name = name;
  }

  /** Downloads (or reads) a model and builds it in the worker. See gpt2.d.ts. */
  static async load(options = {}) {
    checkLoadOptions(options);
    const {
      model = DEMO_MODEL, backend = 'auto', dtype = 'q8', threads, build, kernel, memoryLimit, onProgress, onBackendChange,
      revision, file, hubHost, raceSoftwareGpu = false, signal,
    } = options;
    signal?.throwIfAborted();
    const platform = memoryLimit !== undefined
      ? { bytes: memoryLimit, what: `the memoryLimit given to Gpt2.load (${(memoryLimit / 1e9).toFixed(2)} GB)` }
      : platformMemory();
    const { name, source, names } = modelSource(model, { revision, file, hubHost });
    if (source.files && globalThis.location?.protocol === 'file:') source.files = await readHere(source.files);
    const conn = connection();
    // 'auto' whose CPU won a race for this model and dtype in this browser goes straight to the CPU.
    const raceAt = backend === 'auto' && source.urls ? `gpt2-web:auto:${dtype}:${raceSoftwareGpu ? 'software:' : ''}${name}` : null;
    const past = raceAt ? rememberedRace(raceAt) : null;
    const runOn = past ? 'cpu' : backend;
    // Files given as bytes are never shared; a folder URL is, per backend, dtype, build and kernel.
    const key = source.urls ? `${past ? 'auto-cpu' : backend} ${dtype} ${build} ${kernel} ${raceSoftwareGpu} ${name}` : null;
    let load = key !== null ? conn.loads.get(key) : undefined;
    if (!load) {
      load = { key, refs: 0, listeners: new Set() };
      const progress = ({ file, loaded, total, tensor, cached, plan }) => {
        for (const f of load.listeners) f({ file, loaded, total, tensor, cached, ...(plan ? { plan } : {}) });
      };
      // The worker's first load starts its engine: the first build it tries is compiled here, on
      // the page (builds.js says why), and sent to it once compiled.
      const tries = buildOrder(threads, build);
      const compiled = conn.engineAsked ? null : compileOnPage(BUILDS[tries[0][0]]?.wasm);
      conn.engineAsked = true;
      const { id, promise } = request(conn, { op: 'load', source, backend: runOn, dtype, tries, compiling: compiled ? tries[0][0] : null, kernel, raceSoftwareGpu, timedKernels: rememberedKernels(), headsVerdicts: source.urls ? rememberedHeads(name) : null, platform, builds: BUILDS, files: names }, { progress });
      compiled?.then((module) => conn.worker?.postMessage({ op: 'engine', module }));
      load.id = id; // the model's id in the worker (connection.js forgets a crashed one by it)
      load.promise = promise.then((info) => ({ id, info }));
      if (key !== null) conn.loads.set(key, load);
    }
    load.refs++;
    conn.models++; // counted from the start, so the worker is not stopped under a loading model
    if (onProgress) load.listeners.add(onProgress);
    let loaded;
    let onAbort;
    try {
      // The signal rejects this call at once, as fetch does; the load itself stops (the worker's
      // download, build and warm-up) when no other call waits for it.
      const aborted = signal && new Promise((resolve, reject) => {
        onAbort = () => reject(signal.reason);
        signal.addEventListener('abort', onAbort, { once: true });
      });
      loaded = await (aborted ? Promise.race([load.promise, aborted]) : load.promise);
    } catch (e) {
      load.refs--;
      if (conn.loads.get(key) === load && (load.refs === 0 || !signal?.aborted)) conn.loads.delete(key); // a later load tries again
      conn.models--;
      if (signal?.aborted && e === signal.reason) {
        if (load.refs === 0) {
          conn.worker.postMessage({ op: 'abort', id: load.id });
          // Finished before the worker heard of the abort: nobody holds it, so it is freed.
          load.promise.then(({ id }) => request(conn, { op: 'dispose', model: id }).promise, () => {}).catch(() => {});
        }
        idle(conn);
        throw e;
      }
      idle(conn);
      const demo = model === DEMO_MODEL && / 404/.test(e.message)
        ? ' (the demo model is not beside gpt2.js, as in the npm package: pass Gpt2.load({ model: URL }))' : '';
      const id = isHubId(model)
        ? ` ("${model}" was taken as a Hugging Face model id; a folder beside the page is written "${model}/")` : '';
      throw withCode(new Error(`could not load the model: ${e.message}${demo}${id}`), e.code);
    } finally {
      if (onProgress) load.listeners.delete(onProgress);
      if (onAbort) signal.removeEventListener('abort', onAbort);
    }
    // What runs where, shared by the handles of this model: it changes if the GPU is lost.
    const info = { ...loaded.info };
    if (raceAt && info.backendTimes?.chosen === 'cpu') rememberRace(raceAt, info.backendTimes);
    if (info.timedKernels) rememberKernels(info.kernelsAt, info.timedKernels, info.kernelTimes);
    if (past) {
      info.backendTimes = past;
      info.gpuUnavailable = `${past.why} (on an earlier load, remembered in this browser)`;
    }
    load.live ??= { backend: info.backend, dtype: info.dtype, cpuDtype: dtype === 'f16' ? 'q8' : dtype, threads: info.threads, build: info.build, kernel: info.kernel, kernelTimes: info.kernelTimes, adapter: info.adapter, gpuKernel: info.gpuKernel, gpuUnavailable: info.gpuUnavailable, mtpHeads: info.mtpHeads ? Object.freeze({ ...info.mtpHeads }) : null, backendTimes: info.backendTimes ? Object.freeze({ ...info.backendTimes }) : null, notCached: info.notCached ?? null, headsAt: info.headsAt ?? null, plan: info.plan, loadTimings: loadTimings(info.timings), handles: new Set() };
    const handle = new Gpt2(conn, loaded.id, info.config, name, load);
    handle.#onBackendChange = onBackendChange;
    handle.#onProgress = onProgress;
    return handle;
  }

  /** The worker moved the model to another backend (the GPU was lost): tell every handle. */
  #backendChanged({ backend, reason }) {
    const live = this.#load.live;
    if (live.backend === backend) return;
    Object.assign(live, { backend, dtype: backend === 'cpu' ? live.cpuDtype : 'f32', gpuUnavailable: reason, adapter: backend === 'cpu' ? undefined : live.adapter, gpuKernel: backend === 'cpu' ? undefined : live.gpuKernel });
    for (const h of live.handles) {
      try {
        h.#onBackendChange?.({ backend, reason });
      } catch (e) {
        console.error('an onBackendChange callback failed:', e);
      }
    }
  }

  /** 'webgpu' or 'cpu': what actually runs (it changes to 'cpu' if the GPU is lost). */
  get backend() { return this.#load.live.backend; }

  /** Threads of the CPU engine: more than 1 only on a cross-origin isolated page (see gpt2.d.ts). */
  get threads() { return this.#load.live.threads; }

  /** Which wasm build runs: 'pkg' (simd128), 'pkg-relaxed' (relaxed SIMD) or 'pkg-threads'. */
  get build() { return this.#load.live.build; }

  /** The CPU's 8-bit kernel in the worker: 'dot-add', 'dot-i16', 'widen' or one for each shape (see gpt2.d.ts). */
  get kernel() { return this.#load.live.kernel; }

  /** What the load timed to choose the 8-bit kernel, or null (see gpt2.d.ts). */
  get kernelTimes() { return this.#load.live.kernelTimes; }

  /** The weight format in use: 'q8' or 'f32' on the CPU, 'q8', 'f32' or 'f16' on WebGPU. */
  get dtype() { return this.#load.live.dtype; }

  /** The GPU adapter in words while on WebGPU, else undefined. */
  get adapter() { return this.#load.live.adapter; }
  /** How the GPU's q8 kernels take their products ('dot4I8Packed' or 'bytes') while on WebGPU with q8 weights, else undefined. */
  get gpuKernel() { return this.#load.live.gpuKernel; }

  /** Why the model runs on the CPU when WebGPU was wanted ('auto' found none, or it was lost); else undefined. */
  get gpuUnavailable() { return this.#load.live.gpuUnavailable; }

  /** For a model from another origin that could not be kept in the browser's storage, the sentence that says so; else null. */
  get notCached() { return this.#load.live.notCached; }

  /** The model's multi-token prediction heads, `{ heads, draftVocab }` (for `draft: 'mtp'`), or null. */
  get mtpHeads() { return this.#load.live.mtpHeads; }

  /**
   * What `backend: 'auto'` measured when it raced a GPU against the CPU: `{ webgpuMs, cpuMs,
   * logitDiff, chosen, why }`, or null when there was no race (no hardware adapter, or a backend
   * asked for by name).
   */
  get backendTimes() { return this.#load.live.backendTimes; }

  /** The model's shape: { nLayer, nHead, nEmbd, nPositions, vocabSize, nParams, eosTokenId }. */
  get config() { return this.#config; }

  /** The model folder's URL, or the weights file's name for local files. */
  get name() { return this.#name; }

  /** The end-of-text token's id (50256 for GPT-2): a loop stops when it picks it. */
  get eosTokenId() { return this.#config.eosTokenId; }

  /** Token ids as a list of whole numbers in 0..vocabSize, or a sentence naming what is wrong. */
  #ids(ids, what) {
    if (!(Array.isArray(ids) || ArrayBuffer.isView(ids))) throw invalid(`${what} needs an array of token ids`);
    const v = this.#config.vocabSize;
    for (const id of ids) {
      if (!(Number.isInteger(id) && id >= 0 && id < v)) {
        throw invalid(`${what}: ${JSON.stringify(id)} is not a token id (a whole number from 0 to ${v - 1})`);
      }
    }
    return Array.from(ids);
  }

  /**
   * The next-token logits after `ids`, a Float32Array of config.vocabSize: the lesson's "logits of
   * the sequence", to write the loop with. `cache: true` (the default) keeps the KV cache of what
   * `ids` shares from its start with the last call's ids and runs only the rest; `false` runs the
   * whole sequence, as the naive loop. A generation in between empties that cache. Timings of the
   * call: `model.lastCall`. See gpt2.d.ts.
   */
  async logits(ids, { cache = true } = {}) {
    if (this.#disposed) throw new Error('this model has been disposed');
    if ((Array.isArray(ids) || ArrayBuffer.isView(ids)) && ids.length > this.#config.nPositions) {
      throw withCode(new Error(`logits: ${ids.length} ids do not fit the model's context of ${this.#config.nPositions} tokens`), 'prompt_too_long');
    }
    const list = this.#ids(ids, 'logits');
    if (list.length === 0) throw invalid('logits needs at least one token id');
    if (typeof cache !== 'boolean') throw invalid('the cache option must be true or false');
    const t0 = performance.now();
    const backend = (change) => this.#backendChanged(change);
    const out = await request(this.#conn, { op: 'logits', model: this.#id, ids: list, cache }, { backend }).promise;
    this.#lastCall = Object.freeze({
      ms: performance.now() - t0, engineMs: out.ms, positions: list.length - out.reused, reused: out.reused,
    });
    return out.logits;
  }

  /**
   * The last logits call's timings: `{ ms, engineMs, positions, reused }` (ms from the call to the
   * answer; engineMs of it in the engine; positions run; positions taken from the cache); null before.
   */
  get lastCall() { return this.#lastCall; }

  /** The text of token ids (whole characters; a character split across the ids' end shows as U+FFFD). */
  async decode(ids) {
    if (this.#disposed) throw new Error('this model has been disposed');
    return request(this.#conn, { op: 'decode', model: this.#id, ids: this.#ids(ids, 'decode') }).promise;
  }

  /**
   * OpenAI's completions API on this model: `model.completions.create({ prompt, max_tokens,
   * temperature, top_p, stop, seed, stream })` (completions.js, gpt2.d.ts).
   */
  get completions() { return (this.#completions ??= completionsOf(this)); }

  /** Generates a continuation of `prompt`. See gpt2.d.ts for the options and the result. */
  async generate(prompt, options = {}) {
    if (this.#disposed) throw new Error('this model has been disposed');
    if (typeof prompt !== 'string') throw invalid('the prompt must be a string');
    // A loaded model as the draft: the worker steps the two together.
    let draftModel;
    if (options?.draft instanceof Gpt2) {
      const d = options.draft;
      if (d.#disposed) throw new Error('the draft model has been disposed');
      if (d.#id === this.#id) {
        throw new Error('the draft model is this model (loads of one folder with one backend share it); load a smaller one');
      }
      draftModel = d.#id;
      options = { ...options, draft: 'model' };
    } else if (options?.draft === 'model') {
      throw invalid("invalid draft: pass the loaded draft model itself (draft: await Gpt2.load(…)), not 'model'");
    }
    const { signal, onToken, options: opts } = checkOptions(options);
    if (signal?.aborted) return emptyResult(); // nothing sent, nothing checked
    let settle;
    const token = onToken && ((ev) => {
      try {
        onToken(ev);
      } catch (e) {
        // The caller's callback failed: stop generating and report its error.
        this.#conn.worker.postMessage({ op: 'abort', id });
        this.#conn.pending.delete(id);
        settle.reject(e);
        idle(this.#conn);
      }
    });
    const backend = (change) => this.#backendChanged(change);
    const progress = ({ file, loaded, total, tensor, cached, fallBack }) => {
      try {
        this.#onProgress?.({ file, loaded, total, tensor, cached, fallBack });
      } catch (e) {
        console.error('an onProgress callback failed:', e);
      }
    };
    const { id, promise } = request(this.#conn, { op: 'generate', model: this.#id, prompt, options: opts, draftModel }, { token, backend, progress });
    const onAbort = () => this.#conn.worker.postMessage({ op: 'abort', id });
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const result = await new Promise((resolve, reject) => {
        settle = { reject };
        promise.then(resolve, reject);
      });
      // Heads measured now, on the backend the model loaded on: the next visit need not measure.
      const heads = result?.metrics?.mtp?.verdict;
      const live = this.#load.live;
      if (heads && !heads.remembered && this.#load.key !== null && live.headsAt?.includes(` ${live.backend} `)) {
        rememberHeads(this.#name, live.headsAt, heads);
      }
      return result; // aborted while queued: the engine's result of a generation that never ran
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /**
   * One generation as an async iterator of its token events (the same events as onToken):
   * `for await (const t of model.stream(prompt, options))`. Leaving the loop early (`break`,
   * `return`, a throw) aborts the generation; `.result` resolves with the result either way
   * (stopReason 'abort' after a break). Options as generate's, without onToken.
   */
  stream(prompt, options = {}) {
    if (options === null || typeof options !== 'object') throw invalid('stream options must be an object');
    if ('onToken' in options) throw new Error('stream() yields the tokens itself: leave out the onToken option');
    const { signal, ...rest } = options;
    if (signal !== undefined && !(signal instanceof AbortSignal)) throw new Error('the signal option must be an AbortSignal');
    const controller = new AbortController();
    const forward = () => controller.abort();
    if (signal?.aborted) controller.abort();
    signal?.addEventListener('abort', forward, { once: true });
    const events = [];
    let finished = false;
    let wake = null;
    const notify = () => {
      wake?.();
      wake = null;
    };
    const result = this.generate(prompt, {
      ...rest,
      signal: controller.signal,
      onToken: (ev) => {
        events.push(ev);
        notify();
      },
    }).finally(() => {
      finished = true;
      signal?.removeEventListener('abort', forward);
      notify();
    });
    result.catch(() => {}); // not unhandled: next() rethrows it, and `.result` still rejects for whoever awaits it
    return {
      result,
      [Symbol.asyncIterator]() {
        return this;
      },
      async next() {
        for (;;) {
          if (events.length > 0) return { value: events.shift(), done: false };
          if (finished) {
            await result; // rethrows the generation's error
            return { value: undefined, done: true };
          }
          await new Promise((resolve) => { wake = resolve; });
        }
      },
      async return() {
        controller.abort();
        events.length = 0;
        await result.catch(() => {});
        return { value: undefined, done: true };
      },
    };
  }

  /**
   * Memory: `wasmBytes`, the size of the WebAssembly memory of the worker all models of this page
   * share (weights, KV caches and buffers of every loaded model; it grows and never shrinks until
   * the last model is disposed and the worker stops, so it is also the peak), and this model's
   * `weights` and `kvCache` bytes in the dtype it runs: in that memory on the CPU, in the device's
   * buffers on WebGPU (`on`: 'cpu' or 'webgpu').
   */
  async memory() {
    if (this.#disposed) throw new Error('this model has been disposed');
    return request(this.#conn, { op: 'memory', model: this.#id }).promise;
  }

  /**
   * What this model was predicted to need on the CPU before it loaded (from config.json alone):
   * `{ weights, kvCache, activations, file, conversion, peak, limit }` in bytes, `file` being the
   * most of the weights file held at once (one tensor: the file streams in).
   */
  get plan() { return this.#load.live.plan; }
  get loadTimings() { return this.#load.live.loadTimings; }

  /** Token ids of `text` under this model's tokenizer. */
  async tokenize(text) {
    if (this.#disposed) throw new Error('this model has been disposed');
    if (typeof text !== 'string') throw new Error('tokenize needs a string');
    return request(this.#conn, { op: 'tokenize', model: this.#id, text }).promise;
  }

  /**
   * Frees this handle; later calls on it reject. When it was the model's last handle (see load), the
   * model is freed: a running generation ends, queued ones reject.
   */
  dispose() {
    if (this.#disposed) return;
    this.#disposed = true;
    const conn = this.#conn;
    conn.models--;
    this.#load.live?.handles.delete(this);
    if (--this.#load.refs > 0) return; // another handle still uses this model
    if (conn.loads.get(this.#load.key) === this.#load) conn.loads.delete(this.#load.key);
    request(conn, { op: 'dispose', model: this.#id }).promise.catch(() => {});
  }
}

export default Gpt2;
export { MODEL_FILES, HUB_HOST, isHubId, hubUrl };
/** The loop's parts for model.logits (sampling.js): argmax, softmax, topK, topP, minP, penalize, distribution (generate's whole rule), entropy, sample, rng. */
export { argmax, softmax, topK, topP, minP, penalize, distribution, entropy, sample, rng };
/** The lesson's settings by use: autocomplete, creative, extraction (`{ label, why, options }`). */
export { PRESETS };
/** The engine's limits: maxBatch, maxQueue, maxChoices (options.js, generated from src/scheduler). */
export { LIMITS };
