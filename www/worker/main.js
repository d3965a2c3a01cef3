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
// Concurrency: each model has a FIFO queue. Generations of the plain loop (no beams, no draft,
// the KV cache on, no profile: the engine's `Params.batchable`) at its head run as one batch:
// one forward pass per step for all of them (up to BATCH_LIMIT at once; at most QUEUE_LIMIT wait), each with its own sampler, stops
// and end; one that ends leaves at once and the next queued one joins at the next step
// (continuous batching). Others (beams, drafts, model.logits) run alone, in their turn. An
// aborted queued request is answered at once. Models in the same worker take turns step by step,
// since the loops yield after every step.

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
  if (m.crashed) throw Object.assign(new Error(`the model stopped working after an earlier failure (${m.crashed}); load it again`), { code: 'crash' });
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
  const adding = params?.n > 1 ? params.n : 1;
  if (m.queue.length + adding > QUEUE_LIMIT) {
    params?.free();
    return reply(msg.id, 'error', {
      message: `${m.queue.length} requests are waiting for this model already and at most ${QUEUE_LIMIT} may wait; ` +
        'try again when some have finished',
      code: 'busy',
    });
  }
  if (params?.n > 1) {
    // n choices: one job per choice (seed + i), answered together (`answer`), run as a batch.
    const group = { id: msg.id, subs: [], results: [], left: params.n, failed: false };
    for (let i = 0; i < params.n; i++) {
      group.subs.push({ id: msg.id, model: msg.model, prompt: msg.prompt, params: params.choice(i), group, choice: i, aborted: false });
    }
    params.free();
    jobs.set(msg.id, group);
    m.queue.push(...group.subs);
  } else {
    const job = msg.op === 'logits'
      ? { id: msg.id, model: msg.model, logits: { ids: Uint32Array.from(msg.ids), cache: msg.cache !== false }, aborted: false }
      : { id: msg.id, model: msg.model, prompt: msg.prompt, params, draftModel: msg.draftModel, aborted: false };
    jobs.set(job.id, job);
    m.queue.push(job);
  }
  if (!m.running) pump(m);
}

/**
 * A reply about `job`: to its request, or for a choice of an `n` request, folded into the
 * request's: tokens carry their `choice`, the first error ends every choice, and the answer
 * comes when every choice has ended: choice 0's result with `choices`, each `{ index, text,
 * tokens, stopReason, metrics }` (null when every choice was aborted before it ran).
 */
function answer(job, type, payload) {
  const g = job.group;
  if (!g) return reply(job.id, type, payload);
  if (g.failed) return undefined;
  if (type === 'token') return reply(g.id, 'token', { token: { ...payload.token, choice: job.choice } });
  if (type === 'error') {
    g.failed = true;
    jobs.delete(g.id);
    for (const sub of g.subs) sub.aborted = true;
    const m = models.get(job.model);
    if (m) {
      // The request's choices still queued leave the queue (the running ones end at their next step).
      for (const q of m.queue.filter((q) => q.group === g)) forget(q);
      m.queue = m.queue.filter((q) => q.group !== g);
    }
    return reply(g.id, 'error', payload);
  }
  if (type !== 'done') return reply(g.id, type, payload);
  g.results[job.choice] = payload.value;
  if (--g.left > 0) return undefined;
  jobs.delete(g.id);
  if (g.results.every((r) => r === null)) return reply(g.id, 'done', { value: null });
  const choices = g.results.map((r, index) => ({
    index, text: r?.text ?? '', tokens: r?.tokens ?? [], stopReason: r?.stopReason ?? 'abort', metrics: r?.metrics ?? null,
  }));
  return reply(g.id, 'done', { value: { ...(g.results[0] ?? g.results.find(Boolean)), choices } });
}

/** A job that has ended or left its queue: its checked options (engine memory) are freed. */
function forget(job) {
  if (!job.group) jobs.delete(job.id); // a choice's request stays until `answer` ends it
  job.params?.free();
  job.params = null;
}

/** The most generations of one model stepped together; more wait in the queue for a place. */
const BATCH_LIMIT = 16;

/** The most requests (each choice of an `n` request counts) that wait for one model; more are refused. */
const QUEUE_LIMIT = 256;

/** A queued generate whose options let it share forward passes with others. */
const batchable = (job) => !job.logits && job.draftModel === undefined && job.params.batchable();

async function pump(m) {
  while (m.queue.length > 0 && !m.disposed && !m.crashed) {
    if (batchable(m.queue[0])) {
      await runBatch(m);
      continue;
    }
    const job = m.queue.shift();
    m.running = job;
    try {
      answer(job, 'done', { value: await (job.logits ? nextLogits(m, job) : run(m, job)) });
    } catch (e) {
      answer(job, 'error', failure(e));
    } finally {
      forget(job);
      m.running = null;
    }
  }
  if (m.disposed) finishDispose(m);
  for (const job of m.crashed ? m.queue.splice(0) : []) {
    forget(job);
    answer(job, 'error', { message: `the model stopped working (${m.crashed}); load it again`, code: 'crash' });
  }
}

/**
 * One engine call that runs the model (a step, a logits pass): the engine is taken meanwhile
 * (tokenize and dispose wait for `m.stepping`), a trap (a Rust panic) marks the model crashed so
 * later requests say so instead of "busy", and a change of backend during the call (the GPU was
 * lost) is told to the request `ids` (one, or a batch's) before their answers.
 */
async function engineCall(m, ids, call) {
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
    for (const id of [ids].flat()) reply(id, 'backend', { backend, reason: m.engine.gpuUnavailable });
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
    if (token !== null) answer(job, 'token', { token }); // null: a beam step settled none
    await nextTask(); // lets an 'abort' message in
  }
  if (m.disposed) throw new Error('the model was disposed during generation');
  return { ...engine.result(), backend: engine.backend };
}

/**
 * The batchable generations at the head of the queue, stepped together until none is left: each
 * step joins the ones queued since (while there is room: BATCH_LIMIT, and the memory for one more
 * KV cache, else it waits for a member to leave), asks the engine for one step of all, posts each
 * member's token, and answers each member that ended with its result.
 */
async function runBatch(m) {
  const { engine } = m;
  const members = new Map(); // the engine's batch slot → job
  let room = Infinity; // members memory allows, once a join found none for one more
  m.running = { members };
  try {
    for (;;) {
      while (m.queue.length > 0 && members.size < Math.min(BATCH_LIMIT, room) && !m.disposed && batchable(m.queue[0])) {
        const job = m.queue.shift();
        try {
          members.set(await engineCall(m, job.id, () => engine.join(job.prompt, job.params)), job);
        } catch (e) {
          if (m.crashed) throw e;
          if (failure(e).code === 'memory' && members.size > 0) {
            // No memory for another KV cache now: it waits for a member to leave.
            m.queue.unshift(job);
            room = members.size;
            break;
          }
          forget(job);
          answer(job, 'error', failure(e));
        }
      }
      if (members.size === 0) return;
      for (const [slot, job] of members) if (job.aborted || m.disposed) engine.cancelIn(slot); // ends before the next pass
      const ids = [...new Set([...members.values()].map((j) => j.id))]; // the choices of one request share its id
      for (const { slot, token, done } of await engineCall(m, ids, () => engine.stepBatch())) {
        const job = members.get(slot);
        if (token) answer(job, 'token', { token });
        if (!done) continue;
        members.delete(slot);
        room = Infinity; // its KV cache is free again: a waiting one may fit
        try {
          const result = await engineCall(m, job.id, () => engine.leave(slot));
          if (m.disposed) throw new Error('the model was disposed during generation');
          forget(job);
          answer(job, 'done', { value: { ...result, backend: engine.backend } });
        } catch (e) {
          forget(job);
          answer(job, 'error', failure(e));
        }
      }
      await nextTask(); // lets an 'abort' (and new requests) in
    }
  } catch (e) {
    // A step failed: every member fails with it, and leaves.
    for (const [slot, job] of members) {
      forget(job);
      answer(job, 'error', failure(e));
      if (!m.crashed) await engine.leave(slot).catch(() => {});
    }
  } finally {
    m.running = null;
  }
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
  const found = jobs.get(id);
  if (!found) return; // already finished
  for (const job of found.subs ?? [found]) {
    job.aborted = true;
    const m = models.get(job.model);
    const queued = m ? m.queue.indexOf(job) : -1;
    if (queued >= 0) {
      m.queue.splice(queued, 1);
      forget(job);
      answer(job, 'done', { value: null }); // gpt2.js makes the aborted result
    }
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
    answer(job, 'error', { message: 'the model was disposed before this generation ran' });
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
