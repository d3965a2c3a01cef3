// What a `model` option of Gpt2.load names, resolved to the worker's `source`: a model folder's
// URL (its three files), a GGUF file's URL, a Hugging Face model id (the Hub's URLs), or the files
// themselves (Blobs or ArrayBuffers); in Node, a path on disk (host.js). Imported by gpt2.js,
// which re-exports the public names.

import { host } from './host.js';

/** The three files of a model folder, by the key the API (and the worker) names them with. */
export const MODEL_FILES = Object.freeze({ config: 'config.json', weights: 'model.safetensors', tokenizer: 'tokenizer.json' });

function baseUrl() {
  return host.baseUrl ?? (typeof document !== 'undefined' ? document.baseURI : self.location.href);
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
  let hub;
  try {
    hub = new URL(String(hubHost));
  } catch {
    throw new Error(`hubHost "${hubHost}" is not a URL`);
  }
  if (!['http:', 'https:'].includes(hub.protocol)) throw new Error(`hubHost "${hubHost}" is not an http(s) URL`);
  if (typeof revision !== 'string' || revision === '') throw new Error(`revision must be a branch, tag or commit, not ${JSON.stringify(revision)}`);
  if (file !== undefined && !(typeof file === 'string' && /^[^/]+(\/[^/]+)*\.gguf$/i.test(file) && !file.split('/').includes('..'))) {
    throw new Error(`file must name a .gguf file of the repository, not ${JSON.stringify(file)}`);
  }
  const base = `${hub.href.replace(/\/$/, '')}/${id}/resolve/${encodeURIComponent(revision)}/`;
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
export function modelSource(model, hub = {}) {
  model = host.modelUrl?.(model) ?? model;
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
export async function readHere(files) {
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
