// Writes the site a static host serves (`./build.sh site`): dist/site/, where every file that a
// release changes lives under a folder named by the content hash of them all, and the demo model
// under a name with its own content hash, so a host can send `Cache-Control: immutable` for both
// and a return visit asks the server about nothing but the page it opens:
//
//   index.html, embed.html, embed-example.html   the entry pages: no-cache (their URLs are what
//                                                 people link to); each points into v/<hash>/
//   widget.js, gpt2.js                           stable URLs for course pages (no-cache): one line
//                                                 each, re-exporting v/<hash>/widget.js, gpt2.js
//   v/<hash>/…                                   the modules (api/, widget/, page/ and the public
//                                                 stubs), the worker (without the tests' requests:
//                                                 tools/join_worker.mjs), the style sheet and the
//                                                 three wasm builds: immutable
//   models/gpt2-shakespeare/<name>.<hash>.gguf   the demo model: immutable; v/<hash>/api/assets.js
//                                                 names it (a retrained model gets a new name)
//   _headers                                     those rules, in the syntax Netlify and Cloudflare
//                                                 Pages read (the README gives nginx's)
//
// Imports stay relative (../api/gpt2.js), so nothing inside v/<hash>/ is rewritten but assets.js's
// path to the model. A release that changes one byte of code changes the folder's name (the old
// one can stay on the host for pages still open); a code change leaves the model's name alone.
//
//   node tools/site.mjs [--out dist/site]     (./build.sh site builds the wasm first, then runs this)
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { joinWorker } from './join_worker.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The pages people open or link to: they stay where they are and point into the versioned folder. */
export const ENTRIES = ['index.html', 'embed.html', 'embed-example.html'];
/** Modules a course page imports by a stable URL: a stub of one line each at the top. */
export const STUBS = ['widget.js', 'gpt2.js'];
/** The folders of modules (www/api/, www/widget/, www/page/): the release holds every file of each. */
const FOLDERS = ['api', 'widget', 'page'];
const BUILDS = ['pkg', 'pkg-relaxed', 'pkg-threads'];
const BUILD_FILES = ['gpt2_web.js', 'gpt2_web_bg.wasm'];
/** Where the demo model is, in the source tree and as assets.js names it. */
const DEMO_DIR = 'models/gpt2-shakespeare';
const DEMO_FILE = 'gpt2-shakespeare-q8_0.gguf';
const DEMO_PATH = `../${DEMO_DIR}/${DEMO_FILE}`;
/** The module that names the demo model (by DEMO_PATH), three levels down in the site (v/<hash>/api/). */
const ASSETS = 'api/assets.js';

export const IMMUTABLE = 'public, max-age=31536000, immutable';
export const REVALIDATE = 'no-cache';

const sha256 = (bytes) => crypto.createHash('sha256').update(bytes).digest('hex');

/**
 * The files of the versioned folder, relative to www/: every module and style sheet (top level
 * and FOLDERS; www/worker.js is replaced by the worker without the tests' requests), the builds.
 */
function releaseFiles(www) {
  const code = (dir) => fs.readdirSync(path.join(www, dir)).filter((f) => /\.(js|css)$/.test(f)).map((f) => path.posix.join(dir, f));
  // node.js is Node's entry (the npm package's), which a site has no use for.
  const modules = ['.', ...FOLDERS].flatMap(code).filter((f) => f !== 'worker.js' && f !== 'node.js').sort();
  const missing = BUILDS.filter((b) => !fs.existsSync(path.join(www, b, 'gpt2_web_bg.wasm')));
  if (missing.length) throw new Error(`${missing.map((b) => `www/${b}`).join(', ')} missing: run ./build.sh build first`);
  // A build's glue imports its snippets (pkg-threads: wasm-bindgen-rayon's script for the threads).
  const snippets = (b) => fs.readdirSync(path.join(www, b), { recursive: true })
    .filter((f) => f.startsWith('snippets') && f.endsWith('.js')).map((f) => path.posix.join(b, f.split(path.sep).join('/')));
  return [...modules, 'worker.js', ...BUILDS.flatMap((b) => [...BUILD_FILES.map((f) => `${b}/${f}`), ...snippets(b)])];
}

/**
 * Writes the site from `www` into `out` (emptied first). Returns { hash, model, files }: the
 * versioned folder's name, the model's path and every file written, relative to `out`.
 */
export function writeSite({ www = path.join(ROOT, 'www'), out = path.join(ROOT, 'dist/site') } = {}) {
  const modelBytes = fs.readFileSync(path.join(www, DEMO_DIR, DEMO_FILE));
  const model = `${DEMO_DIR}/${DEMO_FILE.replace(/\.gguf$/, `.${sha256(modelBytes).slice(0, 12)}.gguf`)}`;

  // The folder's content: assets.js names the versioned model, from three levels down
  // (v/<hash>/api/); the worker is the one without the tests' requests.
  const contents = new Map();
  for (const rel of releaseFiles(www)) {
    let bytes = rel === 'worker.js' ? Buffer.from(joinWorker({ testing: false }).source) : fs.readFileSync(path.join(www, rel));
    if (rel === ASSETS) {
      const text = bytes.toString('utf8');
      if (!text.includes(`'${DEMO_PATH}'`)) throw new Error(`www/${ASSETS} does not name ${DEMO_PATH}: tools/site.mjs needs updating`);
      bytes = Buffer.from(text.replace(`'${DEMO_PATH}'`, `'../../../${model}'`));
    }
    contents.set(rel, bytes);
  }
  const digest = crypto.createHash('sha256');
  for (const [rel, bytes] of contents) digest.update(`${rel}\0${bytes.length}\0`).update(bytes);
  const hash = digest.digest('hex').slice(0, 12);
  const v = `v/${hash}`;

  fs.rmSync(out, { recursive: true, force: true });
  const files = [];
  const write = (rel, bytes) => {
    fs.mkdirSync(path.dirname(path.join(out, rel)), { recursive: true });
    fs.writeFileSync(path.join(out, rel), bytes);
    files.push(rel);
  };
  for (const [rel, bytes] of contents) write(`${v}/${rel}`, bytes);
  write(model, modelBytes);

  // The entry pages: each src/href naming a file of the folder points into it, and each module
  // script's whole static import graph is preloaded (<link rel="modulepreload">), so a first
  // visit asks for every module at once instead of a level of imports per round trip. Each
  // script's preloads come just before it, in the page's order, so that a browser reading its
  // cache one file at a time (Firefox) has the first script's graph (index.html's early.js: the
  // model's load) before the modules only a later script needs.
  for (const page of ENTRIES) {
    let html = fs.readFileSync(path.join(www, page), 'utf8');
    const script = /<script type="module" src="([^"]+)"( async)?><\/script>/g;
    const preloaded = new Set([...html.matchAll(script)].map((m) => m[1])); // the entries load themselves
    html = html.replace(script, (tag, entry) => {
      const graph = importGraph(contents, entry).filter((m) => !preloaded.has(m));
      for (const m of graph) preloaded.add(m);
      return graph.map((m) => `<link rel="modulepreload" href="${m}">\n  `).join('') + tag;
    });
    html = html.replace(/\b(src|href)="([^"]+)"/g, (all, attr, url) => (contents.has(url) ? `${attr}="${v}/${url}"` : all));
    write(page, html);
  }
  for (const stub of STUBS) {
    const source = contents.get(stub).toString('utf8');
    const lines = [`// gpt2-web, release ${hash}: this URL stays; the release behind it is versioned (immutable).`,
      `export * from './${v}/${stub}';`];
    if (/^export default /m.test(source)) lines.push(`export { default } from './${v}/${stub}';`);
    write(stub, `${lines.join('\n')}\n`);
  }
  write('_headers', headersFile(hash, model));
  return { hash, model, files };
}

/**
 * The modules `entry` imports, directly or not, by static `import … from` / `export … from`
 * (relative paths, as every module of the release writes them), from `contents` (path → bytes).
 */
function importGraph(contents, entry) {
  const seen = new Set();
  const visit = (rel) => {
    if (seen.has(rel) || !contents.has(rel)) return;
    seen.add(rel);
    const text = contents.get(rel).toString('utf8');
    for (const m of text.matchAll(/^\s*(?:import|export)\s[^;]*?\sfrom\s+'(\.{1,2}\/[^']+)'/gms)) {
      visit(path.posix.normalize(path.posix.join(path.posix.dirname(rel), m[1])));
    }
  };
  visit(entry);
  return [...seen];
}

/** The `_headers` file: what a host sends for each path (Netlify and Cloudflare Pages syntax). */
function headersFile(hash, model) {
  const rule = (pattern, headers) => `${pattern}\n${Object.entries(headers).map(([k, val]) => `  ${k}: ${val}`).join('\n')}\n`;
  return [
    '# gpt2-web: the versioned release and the versioned model never change; the rest is revalidated.',
    '# Every file may be fetched from another origin (a course page importing widget.js).',
    rule('/*', { 'Access-Control-Allow-Origin': '*', 'Cross-Origin-Resource-Policy': 'cross-origin', 'X-Content-Type-Options': 'nosniff' }),
    rule(`/v/${hash}/*`, { 'Cache-Control': IMMUTABLE }),
    rule(`/${model}`, { 'Cache-Control': IMMUTABLE }),
    ...['/', ...ENTRIES.map((p) => `/${p}`), ...STUBS.map((p) => `/${p}`)].map((p) => rule(p, { 'Cache-Control': REVALIDATE })),
  ].join('\n');
}

/**
 * Reads a `_headers` file into [{ pattern: RegExp, headers }], for `headersFor`. The syntax: a
 * path pattern on a line of its own (`*` matches anything), then indented `Name: value` lines.
 */
export function readHeaders(text) {
  const rules = [];
  for (const line of text.split('\n')) {
    if (!line.trim() || line.trim().startsWith('#')) continue;
    if (!/^\s/.test(line)) {
      const source = line.trim().split('*').map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*');
      rules.push({ pattern: new RegExp(`^${source}$`), headers: {} });
      continue;
    }
    const m = /^\s+([^:]+):\s*(.*)$/.exec(line);
    if (!m || !rules.length) throw new Error(`_headers: "${line.trim()}" is neither a path nor an indented "Name: value"`);
    rules.at(-1).headers[m[1]] = m[2];
  }
  return rules;
}

/** The headers every matching rule gives `urlPath`, later rules' values for the same name winning. */
export function headersFor(rules, urlPath) {
  const out = {};
  for (const { pattern, headers } of rules) if (pattern.test(urlPath)) Object.assign(out, headers);
  return out;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const argv = process.argv.slice(2);
  const at = argv.indexOf('--out');
  const out = path.resolve(at >= 0 ? argv[at + 1] : path.join(ROOT, 'dist/site'));
  const { hash, model, files } = writeSite({ out });
  const bytes = files.reduce((n, f) => n + fs.statSync(path.join(out, f)).size, 0);
  console.log(`${path.relative(ROOT, out) || out}: ${files.length} files, ${(bytes / 1e6).toFixed(1)} MB; release v/${hash}/, model ${model}`);
  console.log('serve it with the headers in its _headers file (README "Embedding", Caching): immutable for v/ and the model, no-cache for the rest');
}
