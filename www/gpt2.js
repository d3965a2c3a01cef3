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
// Types and full documentation: gpt2.d.ts. The model runs in worker.js; all models loaded by one
// page share that worker, which is started on the first load and stopped when the last model is
// disposed. A `generate` while another runs on the same model is queued, not rejected.
// Loading the same folder URL with the same backend again (e.g. several <gpt2-generator> widgets)
// shares one download and one model: each load returns its own handle, and the model is freed
// when the last handle is disposed.

import { WORKER, WORKER_OPTIONS, BUILDS, DEMO_MODEL } from './assets.js';
import { PRESETS } from './presets.js';

const BACKENDS = ['auto', 'cpu', 'webgpu'];
const DTYPES = ['q8', 'f32', 'f16'];
/** The three files of a model folder, by the key the API (and the worker) names them with. */
export const MODEL_FILES = Object.freeze({ config: 'config.json', weights: 'model.safetensors', tokenizer: 'tokenizer.json' });
/** What a page embedding gpt2-web from another origin must allow; the README says it in full. */
const EMBED_HELP = "see the README's \"Embedding\" section";

/** What generate() accepts besides signal and onToken, with each value's JS type. */
const OPTION_TYPES = {
  maxTokens: 'number', temperature: 'number', topK: 'number', topP: 'number', minP: 'number',
  repetitionPenalty: 'number', seed: 'number', stop: 'string[]', topLogprobs: 'number',
  ignoreEos: 'boolean', profile: 'boolean', draft: 'string', draftTokens: 'number', kvCache: 'boolean',
  numBeams: 'number', lengthPenalty: 'number', earlyStopping: 'boolean or "never"',
};

// ---------------------------------------------------------------------------------------------
// The shared worker and its requests.

let shared = null; // { worker, pending: Map<id, handlers>, models: number, loads: Map<key, Load>, dead, ready, blocked }
let nextId = 1;

/**
 * Starts worker.js. Browsers start a worker only from a script of the page's own origin; when this
 * module came from another origin (a CDN, a course's asset host), the worker is a same-origin blob
 * whose one line imports worker.js by its absolute URL. That needs CORS on the asset host and
 * `worker-src blob:` in a page's Content-Security-Policy, if it has one.
 */
function startWorker(conn) {
  const here = typeof location === 'undefined' ? null : location.origin;
  const direct = ['blob:', 'data:'].includes(WORKER.protocol) || WORKER.origin === here;
  if (direct) return new Worker(WORKER, WORKER_OPTIONS);
  conn.blob = URL.createObjectURL(new Blob([`import ${JSON.stringify(WORKER.href)};\n`], { type: 'text/javascript' }));
  return new Worker(conn.blob, WORKER_OPTIONS);
}

function connection() {
  if (shared) return shared;
  // models counts live handles; loads holds each folder URL's model: key → { key, promise, refs, listeners }.
  const conn = { worker: null, pending: new Map(), models: 0, loads: new Map(), dead: null, ready: false, blocked: [] };
  // A Content-Security-Policy that blocks the worker says so only in this event: keep what it
  // names, when it is about the worker (a blob:) or a file of ours.
  conn.onViolation = (e) => {
    if (e.blockedURI === 'blob' || e.blockedURI.startsWith('blob:') || e.blockedURI.startsWith(WORKER.origin)) {
      conn.blocked.push(`${e.effectiveDirective} ${e.blockedURI}`);
    }
  };
  globalThis.addEventListener?.('securitypolicyviolation', conn.onViolation);
  try {
    conn.worker = startWorker(conn);
  } catch (e) {
    // e.g. a CSP that forbids blob: workers throws here in some browsers
    stop(conn, `the model's worker could not be started (${e.message}); ${EMBED_HELP}`);
    return conn;
  }
  const worker = conn.worker;
  worker.onmessage = ({ data }) => {
    if (data.type === 'ready') {
      conn.ready = true;
      if (conn.blob) URL.revokeObjectURL(conn.blob);
      return;
    }
    const h = conn.pending.get(data.id);
    if (!h) return; // settled already (e.g. the onToken callback threw)
    if (data.type === 'progress') h.progress?.(data);
    else if (data.type === 'token') h.token?.(data.token);
    else if (data.type === 'backend') h.backend?.(data);
    else {
      conn.pending.delete(data.id);
      if (data.type === 'done') h.resolve(data.value);
      else h.reject(new Error(data.message));
      idle(conn);
    }
  };
  worker.onerror = (e) => {
    e.preventDefault();
    if (conn.ready) {
      fail(conn, `the model's worker stopped (${e.message || 'it crashed'}); load the model again`);
    } else if (!conn.diagnosing) {
      conn.diagnosing = true;
      whyNoStart(conn, e.message).then((why) => fail(conn, why));
    }
  };
  worker.onmessageerror = () => fail(conn, "a message from the model's worker could not be read");
  shared = conn;
  return conn;
}

/**
 * Why worker.js did not start, as a sentence with the way out. The error event itself says nothing
 * (browsers hide the reasons of cross-origin failures), so the file is fetched again to find out.
 */
async function whyNoStart(conn, message) {
  const url = WORKER.href;
  const start = `the model's worker could not start from ${url}`;
  await new Promise((resolve) => setTimeout(resolve, 50)); // a CSP violation event comes as a task of its own
  if (conn.blocked.length > 0) {
    return `${start}: the page's Content-Security-Policy blocked ${conn.blocked.join(', ')}; ` +
      `worker-src needs blob: and the asset host (${EMBED_HELP})`;
  }
  let res;
  try {
    res = await fetch(url, { cache: 'no-store' });
  } catch {
    return `${start}: it could not be fetched from this page (${location.origin}): the host is unreachable, ` +
      `or, from another origin, does not send Access-Control-Allow-Origin (${EMBED_HELP})`;
  }
  if (!res.ok) return `${start}: the server answered ${res.status} ${res.statusText}`.trim() + '; is gpt2-web installed there?';
  const type = res.headers.get('Content-Type') || 'no Content-Type';
  if (!/javascript|ecmascript/i.test(type)) return `${start}: the server sent it as ${type}, not text/javascript`;
  if (conn.blob) {
    // A worker's imports are checked against worker-src (in the worker, which reports nothing).
    return `${start}: the file is there, so the page's Content-Security-Policy may not let the worker import it: ` +
      `worker-src needs blob: and the asset host (${EMBED_HELP})`;
  }
  return `${start}${message ? ` (${message})` : ''}; the browser console may say more`;
}

/** The worker is gone: every pending request and later call rejects with `message`. */
function fail(conn, message) {
  for (const h of conn.pending.values()) h.reject(new Error(message));
  conn.pending.clear();
  conn.models = 0;
  stop(conn, message);
}

function stop(conn, message) {
  conn.dead = message; // models on this worker are gone: their later calls reject with this
  conn.worker?.terminate();
  globalThis.removeEventListener?.('securitypolicyviolation', conn.onViolation);
  if (conn.blob) URL.revokeObjectURL(conn.blob);
  if (shared === conn) shared = null;
}

/** No model and no request left: stop the worker so its memory (wasm never shrinks) is freed. */
function idle(conn) {
  if (conn.models === 0 && conn.pending.size === 0) {
    stop(conn, "the model's worker was stopped after its last model was disposed");
  }
}

/** Posts one request; resolves with the worker's 'done' value, rejects with its error sentence. */
function request(conn, msg, handlers = {}) {
  const id = nextId++;
  if (conn.dead) return { id, promise: Promise.reject(new Error(conn.dead)) };
  const promise = new Promise((resolve, reject) => {
    conn.pending.set(id, { ...handlers, resolve, reject });
  });
  conn.worker.postMessage({ ...msg, id });
  return { id, promise };
}

// ---------------------------------------------------------------------------------------------
// Argument checks: a wrong call fails at once with a sentence, before anything is downloaded.

function baseUrl() {
  return typeof document !== 'undefined' ? document.baseURI : self.location.href;
}

/** The model folder's three file URLs, resolved against the page; the folder gets its '/'. */
function folderUrls(model) {
  let folder;
  try {
    folder = new URL(String(model), baseUrl());
  } catch {
    throw new Error(`the model folder "${model}" is not a valid URL`);
  }
  if (!folder.pathname.endsWith('/')) folder.pathname += '/';
  const urls = {};
  for (const [key, file] of Object.entries(MODEL_FILES)) urls[key] = new URL(file, folder).href;
  return { folder: folder.href, urls };
}

function isBytes(v) {
  return v instanceof ArrayBuffer || ArrayBuffer.isView(v) || (typeof Blob !== 'undefined' && v instanceof Blob);
}

/** The Hugging Face Hub, where a model id such as 'openai-community/gpt2' is looked up. */
export const HUB_HOST = 'https://huggingface.co';

/**
 * Whether `model` is a Hub model id, `owner/name` (no scheme, no leading '/' or '.', no trailing
 * '/'), rather than a URL: a relative folder is written with its trailing '/' ('models/x/').
 */
export function isHubId(model) {
  return typeof model === 'string' && /^[A-Za-z0-9][\w.-]*\/[A-Za-z0-9][\w.-]*$/.test(model) && !/\.gguf$/i.test(model);
}

/**
 * The URL a Hub id resolves to, as the Hub serves a repository's files: `<host>/<id>/resolve/<revision>/`
 * (the folder) or `…/<file>` (a GGUF repository's file).
 */
export function hubUrl(id, { revision = 'main', file, hubHost = HUB_HOST } = {}) {
  let host;
  try {
    host = new URL(String(hubHost));
  } catch {
    throw new Error(`hubHost "${hubHost}" is not a URL`);
  }
  if (!['http:', 'https:'].includes(host.protocol)) throw new Error(`hubHost "${hubHost}" is not an http(s) URL`);
  if (typeof revision !== 'string' || revision === '') throw new Error(`revision must be a branch, tag or commit, not ${JSON.stringify(revision)}`);
  if (file !== undefined && !(typeof file === 'string' && /^[^/]+(\/[^/]+)*\.gguf$/i.test(file) && !file.split('/').includes('..'))) {
    throw new Error(`file must name a .gguf file of the repository, not ${JSON.stringify(file)}`);
  }
  const base = `${host.href.replace(/\/$/, '')}/${id}/resolve/${encodeURIComponent(revision)}/`;
  return file === undefined ? base : base + file.split('/').map(encodeURIComponent).join('/');
}

/** Whether a model URL names a GGUF file (which holds its config and tokenizer) rather than a folder. */
function isGgufUrl(model) {
  try {
    return /\.gguf$/i.test(new URL(String(model), baseUrl()).pathname);
  } catch {
    return false; // folderUrls says why
  }
}

/** The last part of a URL's path, for the sentences that name the file. */
const fileName = (url) => decodeURIComponent(new URL(url).pathname.split('/').pop()) || url;

/**
 * Where the model comes from (`source`, posted to the worker), a name for sharing loads, and the
 * files' names for its sentences: a folder URL, a GGUF file's URL, the three files as bytes, or a
 * GGUF file alone as `{ weights }`.
 */
function modelSource(model, hub = {}) {
  const given = Object.entries(hub).filter(([, v]) => v !== undefined).map(([k]) => k);
  if (isHubId(model)) {
    model = hubUrl(model, hub);
  } else if (given.length > 0) {
    throw new Error(`${given.join(', ')} ${given.length > 1 ? 'apply' : 'applies'} to a Hugging Face model id such as ` +
      `'openai-community/gpt2', not to ${typeof model === 'string' ? `"${model}"` : 'files'}`);
  }
  if (typeof model === 'string' || model instanceof URL) {
    if (isGgufUrl(model)) {
      const url = new URL(String(model), baseUrl()).href;
      return { name: url, source: { urls: { weights: url } }, names: { ...MODEL_FILES, weights: fileName(url) } };
    }
    const { folder, urls } = folderUrls(model);
    return { name: folder, source: { urls }, names: MODEL_FILES };
  }
  if (model && typeof model === 'object' && isBytes(model.weights) && model.config === undefined && model.tokenizer === undefined) {
    // A GGUF file alone: its header holds the config and the tokenizer.
    const name = model.weights.name || 'model.gguf';
    return { name, source: { files: { weights: model.weights } }, names: { ...MODEL_FILES, weights: name } };
  }
  if (model && typeof model === 'object') {
    const missing = Object.keys(MODEL_FILES).filter((k) => !isBytes(model[k]));
    if (missing.length > 0) {
      throw new Error('model files must be given as { config, weights, tokenizer } (ArrayBuffer, typed array, ' +
        `File or Blob); missing or not bytes: ${missing.join(', ')}`);
    }
    const files = { config: model.config, weights: model.weights, tokenizer: model.tokenizer };
    return { name: model.weights.name || 'local files', source: { files }, names: MODEL_FILES };
  }
  throw new Error('Gpt2.load needs { model }: a Hugging Face model id, a model folder URL, a .gguf file\'s URL, ' +
    '{ config, weights, tokenizer } or { weights } (a GGUF file)');
}

/**
 * On a page opened from file:// (the offline bundle), WebKit cannot read a Blob or File inside the
 * worker it was posted to (every read fails: "The I/O read operation failed"), though the page
 * itself can. There the page reads each file and the worker gets its bytes; elsewhere the worker
 * streams the File itself, so a big one is never whole in memory.
 */
async function readHere(files) {
  const out = {};
  for (const [k, f] of Object.entries(files)) {
    if (!(f instanceof Blob)) {
      out[k] = f;
      continue;
    }
    try {
      out[k] = new Uint8Array(await f.arrayBuffer());
    } catch (e) {
      throw new Error(`could not read ${f.name || MODEL_FILES[k]} (${e.message}); on a page opened from disk the browser ` +
        'must hold the whole file in memory, so a model this size needs the page served over http(s)');
    }
  }
  return out;
}

function checkOptions(options) {
  if (options === null || typeof options !== 'object') throw new Error('generate options must be an object');
  const { signal, onToken, ...rest } = options;
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw new Error('the signal option must be an AbortSignal');
  if (onToken !== undefined && typeof onToken !== 'function') throw new Error('the onToken option must be a function');
  const clean = {};
  for (const [key, value] of Object.entries(rest)) {
    const type = OPTION_TYPES[key];
    if (!type) {
      throw new Error(`unknown generate option "${key}"; the options are ${Object.keys(OPTION_TYPES).join(', ')}, signal, onToken`);
    }
    if (value === undefined) continue;
    let v = value;
    if (key === 'stop' && typeof v === 'string') v = [v];
    const ok = type === 'string[]' ? Array.isArray(v) && v.every((s) => typeof s === 'string')
      : type === 'number' ? typeof v === 'number' && Number.isFinite(v)
        : type === 'boolean or "never"' ? typeof v === 'boolean' || v === 'never'
          : typeof v === type;
    if (!ok) throw new Error(`invalid ${key}: ${JSON.stringify(value)} is not ${type === 'string[]' ? 'a list of strings' : `a ${type}`}`);
    clean[key] = v;
  }
  return { signal, onToken, options: clean };
}

/** The result of a generation aborted before it started (here, or while queued in the worker). */
function emptyResult() {
  return {
    text: '', tokens: [], stopReason: 'abort',
    metrics: {
      ttftMs: 0, tpotMs: 0, tpotP50Ms: 0, tpotP95Ms: 0, totalMs: 0, prefillMs: 0,
      promptTokens: 0, outputTokens: 0, prefillTokensPerSec: 0, decodeTokensPerSec: 0,
      targetForwards: 0, draftedTokens: 0, acceptedDraftTokens: 0,
    },
  };
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
  static async load({
    model = DEMO_MODEL, backend = 'auto', dtype = 'q8', threads, build, memoryLimit, onProgress, onBackendChange,
    revision, file, hubHost,
  } = {}) {
    if (!BACKENDS.includes(backend)) {
      throw new Error(`unknown backend "${backend}"; choose ${BACKENDS.join(', ')}`);
    }
    if (!DTYPES.includes(dtype)) {
      throw new Error(`unknown dtype "${dtype}"; choose ${DTYPES.join(', ')}`);
    }
    if (threads !== undefined && !(Number.isInteger(threads) && threads >= 1 && threads <= 64)) {
      throw new Error(`invalid threads: ${JSON.stringify(threads)} is not a whole number from 1 to 64`);
    }
    if (build !== undefined && !Object.hasOwn(BUILDS, build)) {
      throw new Error(`unknown build "${build}"; choose ${Object.keys(BUILDS).join(', ')}`);
    }
    if (memoryLimit !== undefined && !(Number.isFinite(memoryLimit) && memoryLimit >= 1)) {
      throw new Error(`invalid memoryLimit: ${JSON.stringify(memoryLimit)} is not a number of bytes`);
    }
    const platform = memoryLimit !== undefined
      ? { bytes: memoryLimit, what: `the memoryLimit given to Gpt2.load (${(memoryLimit / 1e9).toFixed(2)} GB)` }
      : platformMemory();
    if (onProgress !== undefined && typeof onProgress !== 'function') {
      throw new Error('the onProgress option must be a function');
    }
    if (onBackendChange !== undefined && typeof onBackendChange !== 'function') {
      throw new Error('the onBackendChange option must be a function');
    }
    const { name, source, names } = modelSource(model, { revision, file, hubHost });
    if (source.files && globalThis.location?.protocol === 'file:') source.files = await readHere(source.files);
    const conn = connection();
    // Files given as bytes are never shared; a folder URL is, per backend and dtype.
    const key = source.urls ? `${backend} ${dtype} ${build} ${name}` : null;
    let load = key !== null ? conn.loads.get(key) : undefined;
    if (!load) {
      load = { key, refs: 0, listeners: new Set() };
      const progress = ({ file, loaded, total, tensor, cached, plan }) => {
        for (const f of load.listeners) f({ file, loaded, total, tensor, cached, ...(plan ? { plan } : {}) });
      };
      const { id, promise } = request(conn, { op: 'load', source, backend, dtype, threads, build, platform, builds: BUILDS, files: names }, { progress });
      load.promise = promise.then((info) => ({ id, info }));
      if (key !== null) conn.loads.set(key, load);
    }
    load.refs++;
    conn.models++; // counted from the start, so the worker is not stopped under a loading model
    if (onProgress) load.listeners.add(onProgress);
    let loaded;
    try {
      loaded = await load.promise;
    } catch (e) {
      load.refs--;
      if (conn.loads.get(key) === load) conn.loads.delete(key); // a later load tries again
      conn.models--;
      idle(conn);
      const demo = model === DEMO_MODEL && / 404/.test(e.message)
        ? ' (the demo model is not beside gpt2.js, as in the npm package: pass Gpt2.load({ model: URL }))' : '';
      const id = isHubId(model)
        ? ` ("${model}" was taken as a Hugging Face model id; a folder beside the page is written "${model}/")` : '';
      throw new Error(`could not load the model: ${e.message}${demo}${id}`);
    } finally {
      if (onProgress) load.listeners.delete(onProgress);
    }
    // What runs where, shared by the handles of this model: it changes if the GPU is lost.
    const { info } = loaded;
    load.live ??= { backend: info.backend, dtype: info.dtype, cpuDtype: dtype === 'f16' ? 'q8' : dtype, threads: info.threads, build: info.build, adapter: info.adapter, gpuUnavailable: info.gpuUnavailable, plan: info.plan, loadTimings: Object.freeze({ ...info.timings }), handles: new Set() };
    const handle = new Gpt2(conn, loaded.id, info.config, name, load);
    handle.#onBackendChange = onBackendChange;
    handle.#onProgress = onProgress;
    return handle;
  }

  /** The worker moved the model to another backend (the GPU was lost): tell every handle. */
  #backendChanged({ backend, reason }) {
    const live = this.#load.live;
    if (live.backend === backend) return;
    Object.assign(live, { backend, dtype: backend === 'cpu' ? live.cpuDtype : 'f32', gpuUnavailable: reason, adapter: backend === 'cpu' ? undefined : live.adapter });
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

  /** The weight format in use: 'q8' or 'f32' on the CPU, 'f32' on WebGPU. */
  get dtype() { return this.#load.live.dtype; }

  /** The GPU adapter in words while on WebGPU, else undefined. */
  get adapter() { return this.#load.live.adapter; }

  /** Why the model runs on the CPU when WebGPU was wanted ('auto' found none, or it was lost); else undefined. */
  get gpuUnavailable() { return this.#load.live.gpuUnavailable; }

  /** The model's shape: { nLayer, nHead, nEmbd, nPositions, vocabSize, nParams }. */
  get config() { return this.#config; }

  /** The model folder's URL, or the weights file's name for local files. */
  get name() { return this.#name; }

  /** Generates a continuation of `prompt`. See gpt2.d.ts for the options and the result. */
  async generate(prompt, options = {}) {
    if (this.#disposed) throw new Error('this model has been disposed');
    if (typeof prompt !== 'string') throw new Error('the prompt must be a string');
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
      throw new Error("invalid draft: pass the loaded draft model itself (draft: await Gpt2.load(…)), not 'model'");
    }
    const { signal, onToken, options: opts } = checkOptions(options);
    if (signal?.aborted) return emptyResult();
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
      if (result === null) return emptyResult(); // aborted while queued
      delete result.backend; // model.backend has it (a 'backend' message came if it changed)
      return result;
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
    if (options === null || typeof options !== 'object') throw new Error('stream options must be an object');
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
   * the last model is disposed and the worker stops, so it is also the peak), and on the CPU this
   * model's `weights` and `kvCache` bytes.
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
   * TEST HOOK, not part of the API (tests/e2e/webgpu.test.mjs): destroys the model's GPU device
   * between two steps, as a driver reset would; the model then continues on the CPU. Resolves to
   * whether the model was on the GPU.
   */
  _loseDevice() {
    if (this.#disposed) return Promise.reject(new Error('this model has been disposed'));
    return request(this.#conn, { op: 'loseDevice', model: this.#id }).promise;
  }

  /**
   * TEST HOOK, not part of the API (tests/e2e/api.test.mjs): makes the shared worker throw an
   * uncaught error, as a crash or an out-of-memory would; every pending request then rejects and
   * the next load starts a fresh worker.
   */
  _crashWorker() {
    this.#conn.worker?.postMessage({ op: 'crash' });
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
/** The lesson's settings by use: autocomplete, creative, extraction (`{ label, why, options }`). */
export { PRESETS };
