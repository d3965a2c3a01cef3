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
 * Starts worker.js. Browsers start a worker only from a script of the page's own origin; when this
 * module came from another origin (a CDN, a course's asset host), the worker is a same-origin blob
 * whose one line imports worker.js by its absolute URL. That needs CORS on the asset host and
 * `worker-src blob:` in a page's Content-Security-Policy, if it has one.
 */
function startWorker(conn) {
  if (host.startWorker) return host.startWorker(WORKER, WORKER_OPTIONS);
  const here = typeof location === 'undefined' ? null : location.origin;
  const direct = ['blob:', 'data:'].includes(WORKER.protocol) || WORKER.origin === here;
  if (direct) return new Worker(WORKER, WORKER_OPTIONS);
  conn.blob = URL.createObjectURL(new Blob([`import ${JSON.stringify(WORKER.href)};\n`], { type: 'text/javascript' }));
  return new Worker(conn.blob, WORKER_OPTIONS);
}

export function connection() {
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
  globalThis.removeEventListener?.('securitypolicyviolation', conn.onViolation);
  if (conn.blob) URL.revokeObjectURL(conn.blob);
  if (shared === conn) shared = null;
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
