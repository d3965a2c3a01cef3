// The model's thread: a module Web Worker that owns the WebAssembly engine(s), so the page never
// freezes while GPT-2 runs. `gpt2.js` is its only client; this file is not a public API.
//
// Protocol: protocol.js, one table of the requests and the replies; HANDLERS below answers each
// request there.
//
// Parts: main.js (this: the requests' handlers, the job queues, tokenize and dispose) → load.js
// (a load) → engine.js (the wasm builds, the warm-up) and files.js (fetching, caching, reading the
// model's files) → base.js (replies, shared state); protocol.js (the table of messages). They are joined into ONE script, www/worker.js, by
// tools/join_worker.mjs (./build.sh build runs it): imports and exports taken out, the parts in
// the order of their imports. That file has no imports and never looks at its own URL (gpt2.js
// passes every URL it needs, resolved against gpt2.js's own URL), so it runs the same when
// started directly, from a same-origin blob that imports it by absolute URL (a page of another
// origin), as a classic worker (the offline bundle), or copied and renamed by a bundler.
//
// Concurrency: the engine runs one generation at a time. Each model has a FIFO queue: a second
// `generate` while one runs waits for it; an aborted queued request is answered at once. Models
// in the same worker take turns token by token, since the loop yields after every step.

import { describe, failure, jobs, models, reply } from './base.js';
import { engineModule, wasmMemory } from './engine.js';
import { load } from './load.js';
import { REQUESTS } from './protocol.js';

/**
 * What the worker does for each request (protocol.js: REQUESTS; a test checks the two agree). The
 * worker that `./build.sh serve` and the tests use also has testing.js's requests.
 */
export const HANDLERS = {
  load: (msg) => respond(msg.id, () => load(msg)),
  generate: (msg) => enqueue(msg),
  logits: (msg) => enqueue(msg),
  abort: (msg) => abort(msg.id),
  tokenize: (msg) => respond(msg.id, () => tokenize(msg)),
  decode: (msg) => respond(msg.id, () => decode(msg)),
  dispose: (msg) => respond(msg.id, () => dispose(msg)),
  memory: (msg) => respond(msg.id, () => ({
    wasmBytes: wasmMemory?.buffer.byteLength ?? 0, ...(models.get(msg.model)?.engine.memoryUse ?? {}),
  })),
};

self.onmessage = ({ data: msg }) => {
  const op = msg?.op;
  if (typeof op !== 'string' || !Object.hasOwn(HANDLERS, op) || !Object.hasOwn(REQUESTS, op)) {
    return reply(msg?.id, 'error', { message: `unknown request "${String(op)}"` });
  }
  return HANDLERS[op](msg);
};

export async function respond(id, fn) {
  try {
    reply(id, 'done', { value: await fn() });
  } catch (e) {
    reply(id, 'error', failure(e));
  }
}

// ---------------------------------------------------------------------------------------------
// Generation: per-model FIFO queue; each step is posted the moment it exists. A `logits` request
// (model.logits: a student's own loop) waits in the same queue, since both use the KV cache.

function model(id) {
  const m = models.get(id);
  if (!m || m.disposed) throw new Error('this model has been disposed');
  if (m.crashed) throw new Error(`the model stopped working after an earlier failure (${m.crashed}); load it again`);
  return m;
}

function enqueue(msg) {
  let m;
  try {
    m = model(msg.model);
  } catch (e) {
    return reply(msg.id, 'error', failure(e));
  }
  let params;
  try {
    // Read and checked once, now, not when a queued request's turn comes.
    if (msg.op === 'generate') params = engineModule.parseOptions(msg.options);
  } catch (e) {
    return reply(msg.id, 'error', failure(e));
  }
  if (msg.draftModel !== undefined && !models.has(msg.draftModel)) {
    params?.free();
    return reply(msg.id, 'error', { message: 'the draft model is not loaded (disposed?)' });
  }
  const job = msg.op === 'logits'
    ? { id: msg.id, model: msg.model, logits: { ids: Uint32Array.from(msg.ids), cache: msg.cache !== false }, aborted: false }
    : { id: msg.id, model: msg.model, prompt: msg.prompt, params, draftModel: msg.draftModel, aborted: false };
  jobs.set(job.id, job);
  m.queue.push(job);
  if (!m.running) pump(m);
}

/** A job that has ended or left its queue: its checked options (engine memory) are freed. */
function forget(job) {
  jobs.delete(job.id);
  job.params?.free();
}

async function pump(m) {
  while (m.queue.length > 0 && !m.disposed && !m.crashed) {
    const job = m.queue.shift();
    m.running = job;
    try {
      reply(job.id, 'done', { value: await (job.logits ? nextLogits(m, job) : run(m, job)) });
    } catch (e) {
      reply(job.id, 'error', failure(e));
    } finally {
      forget(job);
      m.running = null;
    }
  }
  if (m.disposed) finishDispose(m);
  for (const job of m.crashed ? m.queue.splice(0) : []) {
    forget(job);
    reply(job.id, 'error', { message: `the model stopped working (${m.crashed}); load it again` });
  }
}

/**
 * One engine call that runs the model (a step, a logits pass): the engine is taken meanwhile
 * (tokenize and dispose wait for `m.stepping`), a trap (a Rust panic) marks the model crashed so
 * later requests say so instead of "busy", and a change of backend during the call (the GPU was
 * lost) is told to the request `id` before its answer.
 */
async function engineCall(m, id, call) {
  let out;
  try {
    m.stepping = call();
    out = await m.stepping;
  } catch (e) {
    if (e instanceof WebAssembly.RuntimeError) m.crashed = describe(e);
    throw e;
  } finally {
    m.stepping = null;
  }
  const { backend } = m.engine;
  if (backend !== m.backend) {
    m.backend = backend;
    reply(id, 'backend', { backend, reason: m.engine.gpuUnavailable });
  }
  return out;
}

async function run(m, job) {
  const { engine } = m;
  engine.start(job.prompt, job.params);
  for (;;) {
    if (job.aborted || m.disposed) engine.cancel(); // ends before the next forward pass
    const draft = job.draftModel === undefined ? null : models.get(job.draftModel);
    if (job.draftModel !== undefined && !draft) throw new Error('the draft model was disposed during generation');
    const token = await engineCall(m, job.id, () => (draft ? engine.stepWith(draft.engine) : engine.step()));
    if (token === undefined) break;
    if (token !== null) reply(job.id, 'token', { token }); // null: a beam step settled none
    await nextTask(); // lets an 'abort' message in
  }
  if (m.disposed) throw new Error('the model was disposed during generation');
  return { ...engine.result(), backend: engine.backend };
}

/** One forward pass for model.logits: `{ logits, reused, ms }` (ms: the engine's time for it). */
async function nextLogits(m, job) {
  const t0 = performance.now();
  const { logits, reused } = await engineCall(m, job.id, () => m.engine.logits(job.logits.ids, job.logits.cache));
  return { logits, reused, ms: performance.now() - t0 };
}

// Yield to the event loop without setTimeout's clamping: a message to ourselves is a new task,
// queued behind any message the page has already sent.
const channel = new MessageChannel();
const waiting = [];
channel.port1.onmessage = () => waiting.shift()();
function nextTask() {
  return new Promise((resolve) => {
    waiting.push(resolve);
    channel.port2.postMessage(null);
  });
}

function abort(id) {
  const job = jobs.get(id);
  if (!job) return; // already finished
  job.aborted = true;
  const m = models.get(job.model);
  const queued = m ? m.queue.indexOf(job) : -1;
  if (queued >= 0) {
    m.queue.splice(queued, 1);
    forget(job);
    reply(id, 'done', { value: null }); // gpt2.js makes the aborted result
  }
}

// ---------------------------------------------------------------------------------------------
// The rest: tokenize between steps, dispose when the running step is done.

async function tokenize({ model: id, text }) {
  let m = model(id);
  while (m.stepping) await m.stepping.catch(() => {}); // the engine is taken while a step runs
  m = model(id); // it may have been disposed (and freed) meanwhile
  return Array.from(m.engine.tokenize(text));
}

async function decode({ model: id, ids }) {
  let m = model(id);
  while (m.stepping) await m.stepping.catch(() => {}); // the engine is taken while a step runs
  m = model(id);
  return m.engine.decode(Uint32Array.from(ids));
}

function dispose({ model: id }) {
  const m = models.get(id);
  if (!m || m.disposed) return;
  m.disposed = true;
  for (const job of m.queue.splice(0)) {
    forget(job);
    reply(job.id, 'error', { message: 'the model was disposed before this generation ran' });
  }
  if (!m.running) finishDispose(m); // else the loop notices and frees it after its step
}

function finishDispose(m) {
  for (const [id, other] of models) {
    if (other === m) models.delete(id);
  }
  try {
    m.engine.free();
  } catch (e) {
    console.warn(`freeing the model failed: ${describe(e)}`);
  }
}

self.postMessage({ type: 'ready' });
