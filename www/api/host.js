// What the API needs from where it runs, when that is not a browser page: how the model's worker
// is started, the URL relative model folders resolve against, and a model given as a path on disk.
// A browser leaves it empty (a Web Worker, the page's base URL, URLs only); gpt2-web's Node entry
// (../node.js) fills it before anything loads. Imports nothing.

export const host = {
  /** `(url: URL, options) => Worker-like` (postMessage, terminate, onmessage, onerror), or null: `new Worker`. */
  startWorker: null,
  /** The URL relative model URLs resolve against, or null: the page's (`document.baseURI`). */
  baseUrl: null,
  /** `(model) => URL string | undefined`: a model named as a path on disk, as the file: URL to load it from. */
  modelUrl: null,
};
