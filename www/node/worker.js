// The start of every worker thread gpt2-web runs in Node: the model's worker (../worker.js) and the
// threads rayon starts from it (the pkg-threads build). It gives the thread a browser worker's
// globals — self, postMessage, onmessage and 'message' listeners, location, navigator,
// crossOriginIsolated (false: see below), Worker, and fetch that reads file: URLs — then imports
// the script it was started for.

import os from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { WebWorker, fetchFiles } from './platform.js';

const events = new EventTarget();
globalThis.self = globalThis;
globalThis.location = new URL(workerData.url);
globalThis.name = workerData.name;
// One thread: the threaded build on worker threads gave wrong tokens in one of several runs (a
// degenerate repetition, not rounding), so Node runs the single-thread builds until that is
// understood; `model.threads` says 1.
globalThis.crossOriginIsolated = false;
if (!globalThis.navigator) globalThis.navigator = { hardwareConcurrency: os.availableParallelism?.() ?? os.cpus().length };
globalThis.Worker = WebWorker;
globalThis.fetch = fetchFiles(globalThis.fetch);
globalThis.postMessage = (data, transfer) => parentPort.postMessage(data, transfer);
globalThis.addEventListener = (type, fn, opts) => events.addEventListener(type, fn, opts);
globalThis.removeEventListener = (type, fn, opts) => events.removeEventListener(type, fn, opts);
globalThis.close = () => process.exit(0);
// As a browser's worker, messages that come before the script has run wait for it.
let early = [];
const deliver = (data) => {
  const ev = new MessageEvent('message', { data });
  globalThis.onmessage?.(ev);
  events.dispatchEvent(ev);
};
parentPort.on('message', (data) => (early ? early.push(data) : deliver(data)));

await import(workerData.url);
for (const data of early) deliver(data);
early = null;
