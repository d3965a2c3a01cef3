// Writes dist/gpt2-demo.html: the demo page (www/index.html) as ONE file that works when opened
// from disk (file://) with no server and no network, e.g. from a USB stick. Node, no dependencies.
//
//   node tools/bundle.mjs [--model www/models/gpt2-shakespeare/gpt2-shakespeare-q8_0.gguf]
//                         [--out dist/gpt2-demo.html]
//   (--model: a .gguf file, which holds its tokenizer, or a folder: config.json, model.safetensors
//   and tokenizer.json)
//   (./build.sh bundle builds www/pkg first, then runs this.)
//
// What goes in, and how it runs from file:// (where Chromium refuses module workers from blob:
// URLs, and a worker may not fetch or import blob: URLs):
//   - the model (one GGUF file, or a folder's three files) and the wasm, as base64 in
//     <script type="application/octet-stream"> elements of at most 1 MiB each (WebKit's HTML parser
//     is superlinear in one element's text: 43 MB in one element took 105 s to parse, in 1 MiB
//     pieces 1.2 s); a small script decodes the model into Files, which gpt2.js's
//     Gpt2.load({ model: { weights } }) (or { config, weights, tokenizer }) accepts;
//   - the worker (tools/join_worker.mjs, without the tests' requests) as a CLASSIC worker from a
//     blob: URL; gpt2.js tells it to import the wasm-bindgen glue (www/pkg/gpt2_web.js) and the
//     wasm from data: URLs;
//   - page/app.js as a module from a data: URL, its imports (../api/gpt2.js,
//     ../widget/loop-view.js, ...) rewritten to data: URLs, with www/api/assets.js (where every
//     file is) replaced as a whole by ASSETS below;
//   - style.css inline.
// The page's own two tags (style sheet, app.js) are exact text replacements: each must match once,
// so a change to those lines fails here with a sentence instead of making a broken file.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { joinWorker } from './join_worker.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const WWW = path.join(ROOT, 'www');

function args() {
  const out = { model: path.join(WWW, 'models/gpt2-shakespeare/gpt2-shakespeare-q8_0.gguf'), out: path.join(ROOT, 'dist/gpt2-demo.html') };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const key = argv[i].replace(/^--/, '');
    if (!(key in out) || argv[i + 1] === undefined) {
      throw new Error(`usage: node tools/bundle.mjs [--model DIR] [--out FILE] (got ${argv[i]})`);
    }
    out[key] = path.resolve(argv[++i]);
  }
  return out;
}

function read(file, encoding) {
  try {
    return fs.readFileSync(file, encoding);
  } catch {
    const hint = file.includes(`${path.sep}pkg${path.sep}`) ? ' (run ./build.sh build first)' : '';
    throw new Error(`cannot read ${path.relative(ROOT, file)}${hint}`);
  }
}

/** Replaces `from` with `to` in `text`, which must hold `from` exactly once. */
function replaceOnce(text, name, from, to) {
  const n = text.split(from).length - 1;
  if (n !== 1) {
    throw new Error(`www/${name}: expected ${JSON.stringify(from)} exactly once, found it ${n} times; ` +
      'tools/bundle.mjs must be updated to match');
  }
  return text.replace(from, typeof to === 'function' ? to : () => to);
}

const b64 = (bytes) => Buffer.from(bytes).toString('base64');
/** Base64 characters per inlined element: a multiple of 4, so that each piece decodes alone. */
const PIECE = 1 << 20;
const jsDataUrl = (source) => `data:text/javascript;base64,${b64(Buffer.from(source, 'utf8'))}`;

/**
 * A page module (its path under www/, e.g. page/app.js) as a data: URL, with its relative imports
 * (`from './x.js'`, `from '../api/y.js'`) inlined the same way; `replaced` maps a module's path to
 * the source that stands in for it.
 */
function moduleUrl(name, replaced = {}, seen = []) {
  if (seen.includes(name)) throw new Error(`import cycle: ${[...seen, name].join(' → ')}`);
  let source = replaced[name] ?? read(path.join(WWW, name), 'utf8');
  // Static imports only (a line starting with `import`); comments that show imports stay as they are.
  source = source.replace(/^(import\b[^;]*?\bfrom\s+)(['"])(\.\.?\/[\w./-]+\.js)\2/gm,
    (_, head, q, dep) => `${head}${q}${moduleUrl(path.posix.join(path.posix.dirname(name), dep), replaced, [...seen, name])}${q}`);
  if (/\bimport\.meta\b/.test(source)) throw new Error(`www/${name} uses import.meta, which has no base URL in the bundle`);
  return jsDataUrl(source);
}

/**
 * What stands in for www/api/assets.js: the worker is a classic script from a blob: URL, the one build
 * (pkg) comes from data: URLs, and the demo model is the Files the bootstrap made.
 */
const ASSETS = `
const b = globalThis.gpt2Bundle;
export const WORKER = new URL(b.worker);
export const WORKER_OPTIONS = { name: 'gpt2-web' };
export const BUILDS = { pkg: { js: b.pkg, wasm: b.wasm } };
export const DEMO_MODEL = b.model;
`;

/**
 * The worker, without the tests' requests (tools/join_worker.mjs), which must run as a classic
 * script (file:// forbids module workers from blob:).
 */
function workerSource() {
  const { source } = joinWorker({ testing: false });
  if (/\bimport\.meta\b|^\s*(import|export)\s/m.test(source)) {
    throw new Error('the joined worker has module syntax (import.meta, import or export) that a classic worker cannot run');
  }
  return source;
}

/** Decodes the base64 elements, starts nothing: makes the worker's blob: URL and the model's Files. */
const BOOTSTRAP = `
(() => {
  // Each payload's pieces, in order; every piece but the last is a whole number of base64 quanta.
  const pieces = (id) => [...document.querySelectorAll('script[data-gpt2="' + id + '"]')].map((e) => e.textContent);
  const decode = (text) => (Uint8Array.fromBase64 ? Uint8Array.fromBase64(text)
    : Uint8Array.from(atob(text), (c) => c.charCodeAt(0)));
  const base64 = (id) => pieces(id).join('');
  const bytes = (id) => decode(base64(id));
  const file = (id, name) => new File(pieces(id).map(decode), name);
  window.gpt2Bundle = {
    worker: URL.createObjectURL(new Blob([bytes('gpt2-worker')], { type: 'text/javascript' })),
    pkg: 'data:text/javascript;base64,' + base64('gpt2-pkg'),
    wasm: 'data:application/wasm;base64,' + base64('gpt2-wasm'),
    model: pieces('gpt2-config').length === 0 ? { weights: file('gpt2-weights', MODEL_NAME) } : {
      config: file('gpt2-config', 'config.json'),
      weights: file('gpt2-weights', MODEL_NAME),
      tokenizer: file('gpt2-tokenizer', 'tokenizer.json'),
    },
  };
})();
`;

function main() {
  const opts = args();
  const gguf = opts.model.endsWith('.gguf');
  const modelName = path.basename(opts.model, '.gguf');
  // A GGUF file alone (its header holds the config and the tokenizer), or a folder's three files.
  const model = gguf ? { weights: read(opts.model) } : {
    config: read(path.join(opts.model, 'config.json')),
    weights: read(path.join(opts.model, 'model.safetensors')),
    tokenizer: read(path.join(opts.model, 'tokenizer.json')),
  };
  const wasm = read(path.join(WWW, 'pkg/gpt2_web_bg.wasm'));
  const pkg = read(path.join(WWW, 'pkg/gpt2_web.js'));

  const app = moduleUrl('page/app.js', { 'api/assets.js': ASSETS });

  let html = read(path.join(WWW, 'index.html'), 'utf8');
  const css = read(path.join(WWW, 'style.css'), 'utf8');
  html = replaceOnce(html, 'index.html', '<link rel="stylesheet" href="style.css">', () => `<style>\n${css}</style>`);
  html = replaceOnce(html, 'index.html', '<script type="module" src="page/app.js"></script>\n', '');
  // early.js only starts the demo's load ahead of app.js's modules; here app.js imports it inline.
  html = replaceOnce(html, 'index.html', '  <script type="module" src="page/early.js" async></script>\n', '');
  html = html.replace('served with this page)', `inside this file: ${modelName})`); // cosmetic, optional
  const data = (id, bytes) => {
    const text = b64(bytes);
    let out = '';
    for (let at = 0; at === 0 || at < text.length; at += PIECE) {
      out += `<script type="application/octet-stream" data-gpt2="${id}">${text.slice(at, at + PIECE)}</script>\n`;
    }
    return out;
  };
  const tail = [
    '<!-- Inlined by tools/bundle.mjs: the engine, its worker and the demo model (base64). -->\n',
    data('gpt2-wasm', wasm),
    data('gpt2-pkg', pkg),
    data('gpt2-worker', Buffer.from(workerSource(), 'utf8')),
    gguf ? '' : data('gpt2-config', model.config),
    gguf ? '' : data('gpt2-tokenizer', model.tokenizer),
    data('gpt2-weights', model.weights),
    `<script>${BOOTSTRAP.replace('MODEL_NAME', JSON.stringify(`${modelName} (in this file)`))}</script>\n`,
    `<script type="module" src="${app}"></script>\n`,
  ].join('');
  html = replaceOnce(html, 'index.html', '</body>', () => `${tail}</body>`);

  fs.mkdirSync(path.dirname(opts.out), { recursive: true });
  fs.writeFileSync(opts.out, html);
  const size = fs.statSync(opts.out).size;
  const mb = (n) => `${(n / 1e6).toFixed(1)} MB`;
  console.log(`${path.relative(ROOT, opts.out)}: ${mb(size)} (model ${mb(model.weights.length)}, ` +
    `wasm ${mb(wasm.length)}, base64); open it from disk in a browser, no server needed`);
}

try {
  main();
} catch (e) {
  console.error(`tools/bundle.mjs: ${e.message}`);
  process.exit(1);
}
