// The model's thread: a module Web Worker that owns the WebAssembly engine(s), so the page never
// freezes while GPT-2 runs. `gpt2.js` is its only client; this file is not a public API.
//
// Protocol: protocol.js, one table of the requests and the replies; HANDLERS below answers each
// request there.
//
// Parts: main.js (this: the requests' handlers, tokenize and dispose) → load.js (a load) →
// engine.js (the wasm builds, the warm-up) and files.js (fetching, caching, reading the model's
// files) → pump.js (the scheduler and its pump) → base.js (replies, shared state); protocol.js
// (the table of messages). They are joined into ONE script, www/worker.js, by
// tools/join_worker.mjs (./build.sh build runs it): imports and exports taken out, the parts in
// the order of their imports. That file has no imports and never looks at its own URL (gpt2.js
// passes every URL it needs, resolved against gpt2.js's own URL), so it runs the same when
// started directly, from a same-origin blob that imports it by absolute URL (a page of another
// origin), as a classic worker (the offline bundle), or copied and renamed by a bundler.
//
// Concurrency is the engine's: one Scheduler (src/scheduler, through src/wasm/scheduler.rs) holds
// every model of this worker and every request on them. This file only pumps: each request is
// submitted as it arrives (checked there: options, the queue limit), `step` runs between messages
// (one model step of one model: models take turns), and each step's events are posted to the
// page as they come. The scheduler batches, fans `n` out, assembles choices, aborts and disposes.

import { describe, failure, models, reply } from './base.js';
import { pageCompiled, wasmMemory } from './engine.js';
import { abortLoad, load } from './load.js';
import { REQUESTS } from './protocol.js';
import { pump, pumping, scheduler, stepping } from './pump.js';

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
  memory: (msg) => respond(msg.id, () => memory(msg)),
  engine: (msg) => pageCompiled(msg.module),
  // The page's answer to the threaded build's `threads`: that build's own listener takes it.
  threads: () => {},
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
// Requests in, events out.

/** The worker's model `id` (its load request's id), or an error for one disposed or crashed. */
function model(id) {
  const m = models.get(id);
  if (!m || m.disposed) throw new Error('this model has been disposed');
  if (m.crashed) throw Object.assign(new Error(`the model stopped working after an earlier failure (${m.crashed}); load it again`), { code: 'crash' });
  return m;
}

function enqueue(msg) {
  try {
    const m = model(msg.model);
    if (msg.op === 'logits') {
      scheduler.submitLogits(msg.id, m.index, Uint32Array.from(msg.ids), msg.cache !== false);
    } else {
      const draft = msg.draftModel === undefined ? undefined : models.get(msg.draftModel)?.index;
      if (msg.draftModel !== undefined && draft === undefined) throw new Error('the draft model is not loaded (disposed?)');
      scheduler.submit(msg.id, m.index, msg.prompt, msg.options, draft);
    }
  } catch (e) {
    return reply(msg.id, 'error', failure(e));
  }
  pump();
}

function abort(id) {
  if (abortLoad(id)) return;
  scheduler?.abort(id);
  pump();
}

// ---------------------------------------------------------------------------------------------
// The rest: tokenize and the model's memory between steps, dispose.

/** Waits for the step under way (the model may be in it), then `fn(m)` of the model again (it may have gone meanwhile). */
async function between(id, fn) {
  model(id);
  while (stepping) await stepping.catch(() => {});
  return fn(model(id));
}

const tokenize = ({ model: id, text }) => between(id, (m) => Array.from(scheduler.tokenize(m.index, text)));
const decode = ({ model: id, ids }) => between(id, (m) => scheduler.decode(m.index, Uint32Array.from(ids)));
const memory = ({ model: id }) => between(id, (m) => ({ wasmBytes: wasmMemory?.buffer.byteLength ?? 0, ...(scheduler.memoryUse(m.index) ?? {}) }));

/** Disposes the model: its requests end with a sentence (from the scheduler's next step), its memory is freed. */
function dispose({ model: id }) {
  const m = models.get(id);
  if (!m || m.disposed) return;
  m.disposed = true;
  if (!m.crashed) scheduler.dispose(m.index); // freed now, or when the step under way ends
  models.delete(id);
  pump(); // posts the requests' endings
}

self.postMessage({ type: 'ready' });
