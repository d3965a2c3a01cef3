// The pump: the worker's one Scheduler (src/wasm/scheduler.rs over src/scheduler) holds every model
// of this worker and every request on them; this part steps it while it has work and routes each
// step's events: to the page (they are the protocol's replies as they are), or to a request of the
// worker's own (the warm-up, the kernels' timing). (Part of the worker: see www/worker/main.js.)

import { describe, failure, models } from './base.js';

/** Whether `pump` is running; the step under way, which tokenize, decode and memory wait for. */
export let pumping = false;
export let stepping = null;
/** Requests of the worker's own (the warm-up, the kernels' timing): id → their handlers. */
const own = new Map();
let ownIds = 2 ** 40; // above any id the page uses

/**
 * Steps the scheduler while it has work, posting each event the moment its step ends, and
 * yielding between steps so that aborts and new requests come in. A trap inside a step (a Rust
 * panic, a WebAssembly.RuntimeError) fails that step's model only: its requests are answered with
 * the sentence, and later ones are refused.
 */
export async function pump() {
  if (pumping || !scheduler) return;
  pumping = true;
  try {
    while (scheduler.hasWork) {
      let events;
      try {
        stepping = scheduler.step();
        const index = scheduler.inFlight;
        events = await stepping.catch((e) => {
          crashed(index, e);
          return [];
        });
      } finally {
        stepping = null;
      }
      for (const ev of events) route(ev);
      await nextTask(); // lets an 'abort' (and new requests) in
    }
  } finally {
    pumping = false;
  }
}

/**
 * Model `index` failed inside a step (a trap; a step's own errors are its requests' events, so
 * nothing else rejects): it is gone, its requests fail with the sentence.
 */
function crashed(index, e) {
  const { message, code } = failure(e);
  for (const m of models.values()) if (m.index === index) m.crashed = describe(e);
  if (index !== undefined) scheduler.failModel(index, message);
  if (code !== 'crash') console.warn(`gpt2-web: ${message}`);
}

/** An event to the page, or to the worker's own request it is about. */
function route(ev) {
  const handlers = own.get(ev.id);
  if (!handlers) return self.postMessage(ev);
  if (ev.type === 'token') handlers.token?.(ev.token);
  if (ev.type === 'done' || ev.type === 'error') {
    own.delete(ev.id);
    if (ev.type === 'done') handlers.resolve(ev.value);
    else handlers.reject(Object.assign(new Error(ev.message), { code: ev.code }));
  }
}

/**
 * A generation of the worker's own on model `index`, through the scheduler: its result; `token(ev)`
 * per token; `state`: the load it is part of (`loading`), whose abort aborts it.
 */
export function generateOwn(index, prompt, options, token, state) {
  const id = ownIds++;
  state?.own.add(id); // a load's: aborted with it
  const done = new Promise((resolve, reject) => own.set(id, { token, resolve, reject }));
  scheduler.submit(id, index, prompt, options, undefined);
  pump();
  return done;
}

/** The worker's one scheduler (src/wasm/scheduler.rs), made by the first load (`startScheduler`). */
export let scheduler = null;
export function startScheduler(mod) {
  scheduler ??= new mod.Scheduler();
  return scheduler;
}

// Yield to the event loop without setTimeout's clamping: a message to ourselves is a new task,
// queued behind any message the page has already sent.
const channel = new MessageChannel();
const waiting = [];
channel.port1.onmessage = () => waiting.shift()();
function nextTask() {
  // Node (node/worker.js): a port of its own may be served again before the thread's messages;
  // setImmediate runs after the I/O poll, where the page's (the main thread's) messages come in.
  if (typeof setImmediate === 'function') return new Promise((resolve) => setImmediate(resolve));
  return new Promise((resolve) => {
    waiting.push(resolve);
    channel.port2.postMessage(null);
  });
}

