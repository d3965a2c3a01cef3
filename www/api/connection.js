// The page's one model worker (worker.js) and its requests: started on the first load, stopped
// when the last model is disposed, every pending request rejected with a sentence when it cannot
// start or dies. Imported by gpt2.js.

import { WORKER, WORKER_OPTIONS } from './assets.js';
import { host } from './host.js';

/** `error` with the kind `code` (when there is one) beside its sentence (gpt2.d.ts Gpt2Error). */
export function withCode(error, code) {
  if (typeof code === 'string') error.code = code;
  return error;
}

/** What a page embedding gpt2-web from another origin must allow; the README says it in full. */
export const EMBED_HELP = "see the README's \"Embedding\" section";

let shared = null; // { worker, pending: Map<id, handlers>, models: number, loads: Map<key, Load>, dead, ready, blocked }
let nextId = 1;

/**
 * A module worker running the script at `url` → { worker, blob (a URL to revoke once it runs, or
 * null) }. Browsers start a worker only from a script of the page's own origin; when the script is
 * of another origin (gpt2-web from a CDN, a course's asset host), the worker is a same-origin blob
 * whose one line imports the script by its absolute URL. That needs CORS on the asset host and
 * `worker-src blob:` in a page's Content-Security-Policy, if it has one.
 */
function startScript(url, options) {
  if (host.startWorker) return { worker: host.startWorker(url, options), blob: null };
  const here = typeof location === 'undefined' ? null : location.origin;
  if (['blob:', 'data:'].includes(url.protocol) || url.origin === here) return { worker: new Worker(url, options), blob: null };
  const blob = URL.createObjectURL(new Blob([`import ${JSON.stringify(url.href)};\n`], { type: 'text/javascript' }));
  return { worker: new Worker(blob, options), blob };
}

export function connection() {
  if (shared) return shared;
  // models counts live handles; loads holds each folder URL's model: key → { key, promise, refs, listeners }.
  // threads: the threaded build's workers (startThreads).
  const conn = { worker: null, pending: new Map(), models: 0, loads: new Map(), dead: null, ready: false, blocked: [], threads: [] };
  // A Content-Security-Policy that blocks the worker says so only in this event: keep what it
  // names, when it is about the worker (a blob:) or a file of ours.
  conn.onViolation = (e) => {
    if (e.blockedURI === 'blob' || e.blockedURI.startsWith('blob:') || e.blockedURI.startsWith(WORKER.origin)) {
      conn.blocked.push(`${e.effectiveDirective} ${e.blockedURI}`);
    }
  };
  globalThis.addEventListener?.('securitypolicyviolation', conn.onViolation);
  try {
    ({ worker: conn.worker, blob: conn.blob } = startScript(WORKER, WORKER_OPTIONS));
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
    if (data.type === 'threads') return startThreads(conn, data);
    const h = conn.pending.get(data.id);
    if (!h) return; // settled already (e.g. the onToken callback threw)
    if (data.type === 'progress') h.progress?.(data);
    else if (data.type === 'token') h.token?.(data.token);
    else if (data.type === 'backend') h.backend?.(data);
    else {
      // done or error end the request (worker/protocol.js); nothing else may come.
      conn.pending.delete(data.id);
      if (data.type === 'done') h.resolve(data.value);
      else if (data.type === 'error') h.reject(withCode(new Error(data.message), data.code));
      else h.reject(new Error(`the model's worker sent a reply its protocol does not have ("${data.type}")`));
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
  for (const thread of conn.threads) thread.terminate();
  globalThis.removeEventListener?.('securitypolicyviolation', conn.onViolation);
  if (conn.blob) URL.revokeObjectURL(conn.blob);
  if (shared === conn) shared = null;
}

/** How long the threaded build's threads may take to start before its load goes on with one thread. */
const THREADS_START_MS = 20_000;

/**
 * The threaded build's `n` threads (rayon's), which the engine's worker asks the page to start
 * rather than starting them itself (tools/patch_rayon.mjs: in Firefox a worker that starts a worker
 * is sometimes blocked for good): `n` workers of wasm-bindgen-rayon's script at `url`, each sent
 * `init`, started once each has said it is ready. The answer goes back to the engine's worker: with
 * a sentence when they could not start, or not within THREADS_START_MS, so that its load goes on
 * with one thread. The page keeps them (Firefox collects a worker that shares memory and nothing
 * references) and stops them with the engine's worker.
 */
async function startThreads(conn, { n, init, url }) {
  const started = [];
  let timer;
  try {
    const late = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`its ${n} threads did not start within ${THREADS_START_MS / 1000} s`)), THREADS_START_MS);
    });
    for (let i = 0; i < n; i++) started.push(startThread(new URL(url), init));
    conn.threads = started.map((s) => s.worker); // one pool per engine: asked for once, or again after a failure
    await Promise.race([Promise.all(started.map((s) => s.ready)), late]);
    conn.worker?.postMessage({ op: 'threads' });
  } catch (e) {
    for (const { worker } of started) worker.terminate();
    conn.threads = [];
    conn.worker?.postMessage({ op: 'threads', error: e.message });
  } finally {
    clearTimeout(timer);
    for (const { blob } of started) if (blob) URL.revokeObjectURL(blob);
  }
}

/** One of the threads: its worker, and `ready`, which settles when it has said so or failed. */
function startThread(url, init) {
  const { worker, blob } = startScript(url, { ...WORKER_OPTIONS, name: 'gpt2-web thread' });
  const ready = new Promise((resolve, reject) => {
    worker.addEventListener('message', function answer({ data }) {
      if (data?.type !== 'wasm_bindgen_worker_ready') return;
      worker.removeEventListener('message', answer);
      resolve();
    });
    worker.addEventListener('error', (e) => {
      e.preventDefault();
      reject(new Error(`a thread's worker could not start from ${url.href}${e.message ? ` (${e.message})` : ''}`));
    }, { once: true });
  });
  worker.postMessage(init);
  return { worker, blob, ready };
}

/** No model and no request left: stop the worker so its memory (wasm never shrinks) is freed. */
export function idle(conn) {
  if (conn.models === 0 && conn.pending.size === 0) {
    stop(conn, "the model's worker was stopped after its last model was disposed");
  }
}

/** Posts one request; resolves with the worker's 'done' value, rejects with its error sentence. */
export function request(conn, msg, handlers = {}) {
  const id = nextId++;
  if (conn.dead) return { id, promise: Promise.reject(new Error(conn.dead)) };
  const promise = new Promise((resolve, reject) => {
    conn.pending.set(id, { ...handlers, resolve, reject });
  }).catch((e) => {
    // A model that crashed (a trap in its engine) is no longer shared: the next load of its
    // folder makes a new one.
    if (e.code === 'crash' && msg.model !== undefined) {
      for (const [key, load] of conn.loads) if (load.id === msg.model) conn.loads.delete(key);
    }
    throw e;
  });
  try {
    conn.worker.postMessage({ ...msg, id });
  } catch (e) {
    // A value the worker cannot receive (a function, a DOM node) among the options.
    conn.pending.delete(id);
    return { id, promise: Promise.reject(withCode(new Error(`invalid options: ${e.message}`), 'param')) };
  }
  return { id, promise };
}
