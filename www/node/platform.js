// What Node lacks of a browser, for gpt2-web's worker and API: a Web Worker made of a
// worker_threads one (`WebWorker`: postMessage, onmessage / 'message' listeners, onerror,
// terminate), and `fetch` for file: URLs (`fetchFile`: a streamed Response, 404 for a missing file,
// as a web server would answer). Used by ../node.js (the model's worker) and ./worker.js (inside
// it: the engine's files, and rayon's threads, which start workers of their own).

import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';

const BOOT = new URL('./worker.js', import.meta.url);

const TYPES = { '.wasm': 'application/wasm', '.js': 'text/javascript', '.mjs': 'text/javascript', '.json': 'application/json' };

/** A Web Worker running `url` (a module) in a worker_threads thread, with a browser's worker globals (worker.js). */
export class WebWorker extends EventTarget {
  constructor(url, options = {}) {
    super();
    this.onmessage = null;
    this.onerror = null;
    this.onmessageerror = null;
    this.thread = new Worker(BOOT, { workerData: { url: String(url), name: options.name ?? '' } });
    this.thread.on('message', (data) => {
      const ev = new MessageEvent('message', { data });
      this.onmessage?.(ev);
      this.dispatchEvent(ev);
    });
    this.thread.on('messageerror', (e) => this.onmessageerror?.(e));
    this.thread.on('error', (e) => this.fail(e.message));
    this.thread.on('exit', (code) => {
      if (!this.terminated) this.fail(`the worker thread exited with code ${code}`);
    });
  }

  fail(message) {
    if (this.terminated) return;
    const ev = Object.assign(new Event('error'), { message });
    this.onerror?.(ev);
    this.dispatchEvent(ev);
  }

  postMessage(data, transfer) {
    this.thread.postMessage(data, transfer);
  }

  terminate() {
    this.terminated = true;
    this.thread.terminate();
  }
}

/** `fetch` for file: URLs (a file's bytes streamed, with its size and type), the rest as Node's own. */
export function fetchFiles(fetch) {
  return async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    if (url.protocol !== 'file:') return fetch(input, init);
    const file = fileURLToPath(url);
    let size;
    try {
      const stat = await fs.promises.stat(file);
      if (!stat.isFile()) throw Object.assign(new Error('not a file'), { code: 'EISDIR' });
      size = stat.size;
    } catch (e) {
      const status = e.code === 'ENOENT' || e.code === 'ENOTDIR' ? 404 : 403;
      return new Response(`${file}: ${e.message}`, { status, statusText: status === 404 ? 'Not Found' : 'Forbidden' });
    }
    const body = Readable.toWeb(fs.createReadStream(file, { signal: init?.signal }));
    const headers = { 'content-length': String(size), 'content-type': TYPES[path.extname(file)] ?? 'application/octet-stream' };
    const res = new Response(body, { status: 200, statusText: 'OK', headers });
    Object.defineProperty(res, 'url', { value: url.href });
    return res;
  };
}
