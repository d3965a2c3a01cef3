// Cold start, measured (`./build.sh bench --cold`): from opening a page to its first token, on a
// first visit (a fresh browser profile, nothing cached) and a return visit (the same profile, the
// page opened again), over loopback and throttled networks, for
//   page       gpt2-web's page (www/index.html) with the demo model, Generate clicked once ready
//   widget     a course page with the widget (www/embed-example.html), its first widget's generate()
//   tjs        transformers.js (tools/peer/peer.js) loading the same model as ONNX (q8) from the same server
//   wllama     wllama (tools/peer/wllama.js) loading the same GGUF file from the same server
// All from one static-host server in this process, which does what a static host does (and what
// the README's hosting section asks of one): brotli or gzip for text and wasm (precompressed, by
// Accept-Encoding), weights as they are (--compress-weights compresses .gguf/.onnx/.safetensors
// too), an ETag on every file, and, for a throttled network, one shared link of that many Mbit/s
// with that round trip before every response's first byte. Nothing leaves 127.0.0.1.
// gpt2-web is served as a host serves `./build.sh site` (tools/site.mjs, written to a scratch
// folder): the headers of its _headers file, so the versioned release and model are `immutable`
// and only the entry pages are revalidated (`no-cache`: a 304); the peers' libraries and models,
// versioned by their releases as a CDN and the Hub serve them, are immutable too. `--tree www`
// serves www/ as it is instead, every file `no-cache` (a 304 per file on a return visit).
//
//   node tools/bench_cold.mjs [--engines chromium] [--targets page,widget,tjs,wllama]
//       [--networks loopback,25:20,5:100] [--tree site|www] [--onnx DIR] [--wllama-gguf FILE]
//       [--compress-weights] [--json FILE]
//       [--repeat N]
//
// Printed per target, network and visit: bytes over the wire (and the largest files), open → ready
// (the model usable: performance.now() at that moment, from the page's navigation), click → first
// token (of the first generation; for gpt2-web also of the second, which the warm-up at load is
// for), and open → first token (the two added: a student who clicks the moment it is ready). Then
// gpt2-web's load phase by phase (Gpt2#loadTimings), and the targets: the return visit ≤ 0.3 s and
// the first generation ≤ 1.1× a later one on loopback, the first visit ≤ 1.2× its bytes' transfer time.
// Each configuration runs once unmeasured first (the server compresses each file once; the OS
// caches the files), then measured: one first visit and one return visit per engine launch.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import zlib from 'node:zlib';
import crypto from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { ROOT, freePort } from '../tests/e2e/harness.mjs';
import { launchEngine, ALL_ENGINES } from '../tests/e2e/engines.mjs';
import { cpuName } from './cpu.mjs';
import { writeSite, readHeaders, headersFor, IMMUTABLE } from './site.mjs';

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const ENGINES = opt('--engines', 'chromium').split(',').filter(Boolean);
for (const e of ENGINES) {
  if (!ALL_ENGINES.includes(e)) fail(`unknown engine "${e}" in --engines; choose from ${ALL_ENGINES.join(', ')}`);
}
const TARGETS = opt('--targets', 'page,widget,tjs,wllama').split(',').filter(Boolean);
for (const t of TARGETS) {
  if (!['page', 'widget', 'tjs', 'wllama'].includes(t)) fail(`unknown target "${t}"; choose page, widget, tjs, wllama`);
}
/** "loopback" or "MBPS:RTT_MS". */
const NETWORKS = opt('--networks', 'loopback,25:20,5:100').split(',').filter(Boolean).map((n) => {
  if (n === 'loopback') return { name: 'loopback', mbps: Infinity, rttMs: 0 };
  const m = /^(\d+(?:\.\d+)?):(\d+)$/.exec(n);
  if (!m) fail(`--networks: "${n}" is neither loopback nor MBPS:RTT_MS (e.g. 25:20)`);
  return { name: `${m[1]} Mbps / ${m[2]} ms`, mbps: Number(m[1]), rttMs: Number(m[2]) };
});
const ONNX = path.resolve(opt('--onnx', path.join(process.env.HOME, '.cache/gpt2-web/bench/gpt2-shakespeare-onnx')));
const COMPRESS_WEIGHTS = args.includes('--compress-weights');
const JSON_OUT = opt('--json', null);
// --repeat N: each configuration N times (a fresh profile each), keeping the run whose return
// visit's open → first token is the median (the others' are printed beside it).
const REPEAT = Number(opt('--repeat', '1'));
if (!(Number.isInteger(REPEAT) && REPEAT >= 1 && REPEAT <= 9)) fail('--repeat takes 1 to 9');
const PROMPT = 'ROMEO:';
const TREE = opt('--tree', 'site');
if (!['site', 'www'].includes(TREE)) fail(`--tree: "${TREE}" is neither site nor www`);
const SITE_DIR = path.join(process.env.HOME, '.cache/gpt2-web/bench/site');
const SITE = TREE === 'site' ? writeSite({ out: SITE_DIR }) : null;
const SITE_RULES = SITE ? readHeaders(fs.readFileSync(path.join(SITE_DIR, '_headers'), 'utf8')) : [];
const DEMO_GGUF = SITE ? `/${SITE.model}` : '/models/gpt2-shakespeare/gpt2-shakespeare-q8_0.gguf';
// --wllama-gguf FILE: the demo model's weights as wllama loads them. The page's GGUF carries the
// multi-token prediction heads (gpt2web.mtp.*, mtp.* tensors), which wllama 3.8.1 fails to load
// ("Invalid typed array length"); ./build.sh bench --cold gives it the same Q8_0 blocks without
// them (tools/make_gguf.py without --mtp: 18.9 MB where the page's file is 20.4 MB).
const WLLAMA_GGUF = opt('--wllama-gguf', null);
if (WLLAMA_GGUF !== null && !fs.existsSync(WLLAMA_GGUF)) fail(`--wllama-gguf: there is no ${WLLAMA_GGUF}`);

function fail(message) {
  console.error(`bench --cold: ${message}`);
  process.exit(2);
}
if (TARGETS.includes('tjs') && !fs.existsSync(path.join(ONNX, 'onnx/model_quantized.onnx'))) {
  fail(`the transformers.js peer needs ${ONNX}/onnx/model_quantized.onnx (./build.sh bench --cold makes it with tools/peer/export_onnx.py)`);
}
for (const t of ['tjs', 'wllama']) {
  if (TARGETS.includes(t) && !fs.existsSync(path.join(ROOT, 'tools/peer/node_modules'))) {
    fail('the peers need tools/peer/node_modules (bash tools/peer/setup.sh)');
  }
}

// --- the static host ----------------------------------------------------------------------------

const TYPES = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8', '.json': 'application/json', '.wasm': 'application/wasm', '.svg': 'image/svg+xml',
  '.md': 'text/markdown; charset=utf-8', '.txt': 'text/plain; charset=utf-8',
};
const TEXT = new Set(['.html', '.js', '.mjs', '.css', '.json', '.wasm', '.svg', '.md', '.txt']);
const WEIGHTS = new Set(['.gguf', '.onnx', '.safetensors', '.bin']);

/** URL prefix → folder, longest first. */
const MOUNTS = [
  ['/peer-models/demo/', ONNX],
  ...(WLLAMA_GGUF ? [['/peer-models/wllama/', path.dirname(path.resolve(WLLAMA_GGUF))]] : []),
  ['/peer/', path.join(ROOT, 'tools/peer')],
  ['/', SITE ? SITE_DIR : path.join(ROOT, 'www')],
];

/** What the host sends as Cache-Control for `urlPath`: the site's rules, the peers' releases. */
function cacheControl(urlPath) {
  if (!SITE) return 'no-cache';
  if (urlPath.startsWith('/peer/node_modules/') || urlPath.startsWith('/peer-models/')) return IMMUTABLE;
  if (urlPath.startsWith('/peer/') || PAGES[urlPath]) return 'no-cache';
  return headersFor(SITE_RULES, urlPath)['Cache-Control'] ?? 'no-cache';
}

/** The cold pages of the peers, generated here (they load the same model files from this server). */
const PAGES = {
  '/cold/tjs.html': `<!doctype html><meta charset="utf-8"><title>transformers.js, cold</title>
<script type="module">
import { peerLoad } from '/peer/peer.js';
window.cold = {};
peerLoad({ modelId: 'demo', localModelPath: '/peer-models/', dtype: 'q8', threads: 1, prompt: ${JSON.stringify(PROMPT)}, maxNewTokens: 8 })
  .then((p) => { window.cold.readyMs = performance.now(); window.cold.peer = p; }, (e) => { window.cold.error = String(e); });
window.coldGo = async () => (await window.cold.peer.once()).run.ttftMs;
</script>`,
  '/cold/wllama.html': `<!doctype html><meta charset="utf-8"><title>wllama, cold</title>
<script type="module">
import { wllamaLoad } from '/peer/wllama.js';
window.cold = {};
wllamaLoad({ url: ${JSON.stringify(WLLAMA_GGUF ? `/peer-models/wllama/${path.basename(WLLAMA_GGUF)}` : DEMO_GGUF)}, threads: 1, prompt: ${JSON.stringify(PROMPT)}, maxNewTokens: 8, vary: false })
  .then((p) => { window.cold.readyMs = performance.now(); window.cold.peer = p; }, (e) => { window.cold.error = String(e); });
window.coldGo = async () => (await window.cold.peer.once()).run.ttftMs;
</script>`,
};

const compressed = new Map(); // `${file} ${mtime} ${encoding}` → Buffer

function encodeBody(file, stat, encoding) {
  const key = `${file} ${stat.mtimeMs} ${encoding}`;
  let body = compressed.get(key);
  if (!body) {
    const raw = fs.readFileSync(file);
    body = encoding === 'br'
      ? zlib.brotliCompressSync(raw, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 9, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: raw.length } })
      : zlib.gzipSync(raw, { level: 9 });
    compressed.set(key, body);
  }
  return body;
}

function fileFor(urlPath) {
  for (const [prefix, dir] of MOUNTS) {
    if (!urlPath.startsWith(prefix)) continue;
    const rel = decodeURIComponent(urlPath.slice(prefix.length)) || 'index.html';
    const file = path.resolve(dir, rel);
    if (!file.startsWith(path.resolve(dir) + path.sep)) return null;
    return file;
  }
  return null;
}

/**
 * The server; `visit.log` collects { path, status, wire } of every response while a visit runs.
 * `link`: { mbps, rttMs } of the network being measured.
 */
async function startHost() {
  const host = { log: [], link: NETWORKS[0], linkFree: 0 };
  const pace = async (bytes) => {
    if (!Number.isFinite(host.link.mbps)) return;
    const now = performance.now();
    host.linkFree = Math.max(now, host.linkFree) + (bytes * 8) / (host.link.mbps * 1e3);
    const wait = host.linkFree - now;
    if (wait >= 1) await sleep(wait);
  };
  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url, 'http://x');
    const entry = { path: url.pathname, status: 0, wire: 0 };
    host.log.push(entry);
    if (host.link.rttMs) await sleep(host.link.rttMs); // the request's way there and the answer's first byte back
    const send = async (status, headers, body) => {
      entry.status = status;
      res.writeHead(status, { 'Cache-Control': cacheControl(url.pathname), 'X-Content-Type-Options': 'nosniff', ...headers });
      if (!body || req.method === 'HEAD') return res.end();
      for (let at = 0; at < body.length; at += 16384) {
        const chunk = body.subarray(at, at + 16384);
        await pace(chunk.length);
        entry.wire += chunk.length;
        if (!res.write(chunk)) await new Promise((r) => res.once('drain', r));
      }
      res.end();
    };
    if (PAGES[url.pathname]) return send(200, { 'Content-Type': TYPES['.html'] }, Buffer.from(PAGES[url.pathname]));
    const file = fileFor(url.pathname);
    let stat;
    try {
      stat = file && fs.statSync(file);
      if (stat?.isDirectory()) return send(404, {}, Buffer.from('not found'));
    } catch { stat = null; }
    if (!stat) return send(404, { 'Content-Type': 'text/plain' }, Buffer.from('not found'));
    const ext = path.extname(file);
    const compress = TEXT.has(ext) || (COMPRESS_WEIGHTS && WEIGHTS.has(ext));
    const accept = String(req.headers['accept-encoding'] || '');
    const encoding = !compress ? null : /\bbr\b/.test(accept) ? 'br' : /\bgzip\b/.test(accept) ? 'gzip' : null;
    const etag = `"${stat.size.toString(16)}-${Math.round(stat.mtimeMs).toString(16)}${encoding ? `-${encoding}` : ''}"`;
    const headers = { 'Content-Type': TYPES[ext] || 'application/octet-stream', ETag: etag, Vary: 'Accept-Encoding' };
    if (req.headers['if-none-match'] === etag) return send(304, headers, null);
    const body = encoding ? encodeBody(file, stat, encoding) : fs.readFileSync(file);
    if (encoding) headers['Content-Encoding'] = encoding;
    headers['Content-Length'] = body.length;
    return send(200, headers, body);
  });
  const port = await freePort();
  await new Promise((r) => server.listen(port, '127.0.0.1', r));
  host.origin = `http://127.0.0.1:${port}`;
  host.close = () => new Promise((r) => { server.closeAllConnections(); server.close(r); });
  return host;
}

// --- one visit ----------------------------------------------------------------------------------

const URLS = { page: '/', widget: '/embed-example.html', tjs: '/cold/tjs.html', wllama: '/cold/wllama.html' };

/** Opens the target in `page` and returns { readyMs, firstMs, secondMs?, timings? }. */
async function visit(page, origin, target) {
  await page.goto(`${origin}${URLS[target]}`);
  if (target === 'page') {
    const ready = await page.waitFor(() => (window.pageState === 'ready' && window.loadedAtMs)
      || (window.pageState === 'error' && { error: document.getElementById('error').textContent }), null, 300_000, 10);
    if (ready.error) throw new Error(`the page did not load: ${ready.error}`);
    const timings = await page.evaluate(() => ({ ...window.gpt2Model.loadTimings, page: window.pageStartMs }));
    const click = async () => {
      await page.click('#generate');
      return page.waitFor(() => window.lastResult && window.firstTokenMs, null, 120_000, 10);
    };
    return { readyMs: ready, firstMs: await click(), secondMs: await click(), timings };
  }
  if (target === 'widget') {
    const readyMs = await page.evaluate(async () => {
      const w = document.querySelector('gpt2-generator');
      await w.model;
      return performance.now();
    });
    const first = () => page.evaluate(async () => {
      const w = document.querySelector('gpt2-generator');
      const t0 = performance.now();
      let at = null;
      const on = () => { at ??= performance.now() - t0; };
      w.addEventListener('gpt2-token', on);
      await w.generate();
      w.removeEventListener('gpt2-token', on);
      return at;
    });
    return { readyMs, firstMs: await first(), secondMs: await first() };
  }
  const ready = await page.waitFor(() => window.cold && (window.cold.readyMs || (window.cold.error && { error: window.cold.error })),
    null, 600_000, 10);
  if (ready.error) throw new Error(`${target} did not load: ${ready.error}`);
  const firstMs = await page.evaluate(() => window.coldGo());
  return { readyMs: ready, firstMs, secondMs: await page.evaluate(() => window.coldGo()) };
}

/** A first and a return visit of `target` in a freshly launched `engineName` (a fresh profile). */
async function visits(host, engineName, target, network) {
  const engine = await launchEngine(engineName, { profile: true });
  try {
    const page = await engine.newPage();
    try {
      const out = {};
      for (const which of ['first', 'return']) {
        if (which === 'return') await page.goto('about:blank');
        host.link = network;
        host.linkFree = 0;
        host.log = [];
        const r = await visit(page, host.origin, target);
        await sleep(200); // late requests (a cache write's revalidation) land in this visit's log
        const files = host.log.filter((e) => e.path !== '/favicon.ico');
        out[which] = {
          ...r, wire: files.reduce((n, e) => n + e.wire, 0),
          files: files.map(({ path: p, status, wire }) => ({ path: p, status, wire })),
        };
        host.link = NETWORKS[0];
      }
      return { engine: engine.version, ...out };
    } finally {
      await page.close().catch(() => {});
    }
  } finally {
    await engine.close();
  }
}

// --- run, print ---------------------------------------------------------------------------------

const host = await startHost();
const rows = [];
const failed = [];
try {
  for (const engineName of ENGINES) {
    for (const target of TARGETS) {
      if (engineName !== 'chromium' && target === 'wllama') continue; // wllama 3.8 needs JSPI and memory64
      await visits(host, engineName, target, NETWORKS[0]).catch(() => {}); // unmeasured: compresses each file once
      for (const network of NETWORKS) {
        let r;
        try {
          const runs = [];
          for (let i = 0; i < REPEAT; i++) runs.push(await visits(host, engineName, target, network));
          const total = (x) => x.return.readyMs + x.return.firstMs;
          runs.sort((a, b) => total(a) - total(b));
          r = runs[(runs.length - 1) >> 1];
          if (REPEAT > 1) r.returnRuns = runs.map(total);
        } catch (e) {
          console.error(`${engineName} ${target} ${network.name}: FAILED: ${e.message.split('\n')[0]}`);
          failed.push(`${engineName} ${target} ${network.name}: ${e.message.split('\n')[0]}`);
          continue;
        }
        rows.push({ engineName, target, network: network.name, ...r });
        const f = r.first;
        console.error(`${engineName} ${target} ${network.name}: first visit ready ${f.readyMs.toFixed(0)} ms, ` +
          `first token ${f.firstMs.toFixed(0)} ms, ${(f.wire / 1e6).toFixed(2)} MB; return ready ${r.return.readyMs.toFixed(0)} ms`);
      }
    }
  }
} finally {
  await host.close();
}

const NAMES = { page: 'gpt2-web page', widget: 'gpt2-web widget (course page)', tjs: 'transformers.js', wllama: 'wllama' };
const mb = (n) => `${(n / 1e6).toFixed(2)} MB`;
const s = (ms) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(0)} ms`);
/** The files that make most of the bytes: "gpt2-shakespeare-q8_0.gguf 19.10, gpt2_web_bg.wasm 1.03". */
const topFiles = (files) => {
  const sum = new Map();
  for (const f of files) sum.set(path.basename(f.path) || f.path, (sum.get(path.basename(f.path) || f.path) ?? 0) + f.wire);
  const sorted = [...sum].sort((a, b) => b[1] - a[1]);
  const big = sorted.filter(([, n]) => n >= 100e3).map(([name, n]) => `${name} ${(n / 1e6).toFixed(2)}`);
  const rest = sorted.filter(([, n]) => n < 100e3).reduce((n, [, b]) => n + b, 0);
  return [...big, `${sorted.filter(([, n]) => n < 100e3).length} others ${(rest / 1e6).toFixed(2)}`].join(', ');
};

const lines = [];
const versions = [...new Set(rows.map((r) => r.engine))].join(', ');
const caching = SITE
  ? `./build.sh site's Cache-Control (immutable: v/${SITE.hash}/ and the model; no-cache: the entry pages; the peers' libraries and models immutable)`
  : 'www/ as it is, Cache-Control: no-cache';
lines.push(`cold start, prompt ${JSON.stringify(PROMPT)}; static host with brotli for text and wasm, weights ` +
  `${COMPRESS_WEIGHTS ? 'compressed too' : 'as they are'}, ETags; ${caching}; headless ${versions}; ${cpuName()}`);
lines.push('');
lines.push('| engine | network | visit | over the wire (MB, the largest files) | open → ready | click → first token | open → first token | later click → first token |');
lines.push('|---|---|---|---|---|---|---|---|');
for (const r of rows) {
  for (const which of ['first', 'return']) {
    const v = r[which];
    const requests = v.files.length;
    const revalidated = v.files.filter((f) => f.status === 304).length;
    lines.push(`| ${NAMES[r.target]}${ENGINES.length > 1 ? ` (${r.engineName})` : ''} | ${r.network} | ${which} | ${mb(v.wire)} ` +
      `(${topFiles(v.files)}; ${requests} requests${revalidated ? `, ${revalidated} × 304` : ''}) | ${s(v.readyMs)} | ${s(v.firstMs)} | ` +
      `${s(v.readyMs + v.firstMs)} | ${v.secondMs == null ? '–' : s(v.secondMs)} |`);
  }
}
const page = rows.filter((r) => r.target === 'page');
if (page.length) {
  lines.push('');
  lines.push('gpt2-web\'s start phase by phase: when app.js began to run, called Gpt2.load, and the load began in the worker (from the navigation), ' +
    'then when each phase of the load ended (Gpt2#loadTimings, from the load\'s start in the worker; they overlap where they can):');
  lines.push('');
  lines.push('| engine | network | visit | app.js runs | load called | load starts in the worker | engine compiled | config / header | tokenizer | weights | warm-up (ready) | open → ready |');
  lines.push('|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of page) {
    for (const which of ['first', 'return']) {
      const t = r[which].timings ?? {};
      const f = (k) => (t[k] == null ? '–' : s(t[k]));
      const p = (k) => (t.page?.[k] == null ? '–' : s(t.page[k]));
      lines.push(`| ${r.engineName} | ${r.network} | ${which} | ${p('app')} | ${p('load')} | ${f('startedMs')} | ${f('engineMs')} | ${f('configMs')} | ${f('tokenizerMs')} | ` +
        `${f('weightsMs')} | ${f('warmUpMs')} | ${s(r[which].readyMs)} |`);
    }
  }
  // The targets, per engine: the return visit and the first generation on loopback, the first
  // visit against the time its bytes need on the throttled link (in this run's layout).
  lines.push('');
  lines.push(`targets (gpt2-web page, ${SITE ? "./build.sh site's layout" : 'www/ as it is'}):`);
  const met = (ok) => (ok ? 'met' : 'NOT met');
  for (const engineName of ENGINES) {
    const mine = page.filter((r) => r.engineName === engineName);
    const loop = mine.find((r) => r.network === 'loopback');
    // WebKitGTK under WebDriver keeps no HTTP cache between visits: its return visit is measured, not held to the target.
    const held = engineName !== 'webkit';
    if (loop) {
      const ret = loop.return.readyMs + loop.return.firstMs;
      const runs = loop.returnRuns ? ` (median of ${loop.returnRuns.map(s).join(', ')})` : '';
      lines.push(`- ${engineName}: return visit open → first token ≤ 0.3 s (loopback): ${s(ret)}${runs}${held ? ` ${met(ret <= 300)}` : ' (measured; no target)'}`);
      for (const which of ['first', 'return']) {
        const v = loop[which];
        const ratio = v.firstMs / v.secondMs;
        lines.push(`- ${engineName}: ${which} visit's first generation ≤ 1.1× a later one (click → first token): ` +
          `${s(v.firstMs)} vs ${s(v.secondMs)} = ${ratio.toFixed(2)}× ${met(ratio <= 1.1)}`);
      }
    }
    for (const r of mine.filter((x) => Number.isFinite(NETWORKS.find((n) => n.name === x.network)?.mbps))) {
      const { mbps } = NETWORKS.find((n) => n.name === r.network);
      const bytesMs = (r.first.wire * 8) / (mbps * 1e3);
      const ratio = r.first.readyMs / bytesMs;
      lines.push(`- ${engineName}: first visit at ${r.network}, open → ready ≤ 1.2× its bytes' transfer time: ${s(r.first.readyMs)} ` +
        `for ${mb(r.first.wire)} (${s(bytesMs)} at ${mbps} Mbps) = ${ratio.toFixed(2)}× ${met(ratio <= 1.2)}`);
    }
  }
  for (const peer of ['tjs', 'wllama']) {
    const theirs = rows.filter((r) => r.target === peer);
    if (!theirs.length) continue;
    let ahead = 0;
    let all = 0;
    for (const r of theirs) {
      const ours = page.find((p) => p.network === r.network && p.engineName === r.engineName);
      if (!ours) continue;
      for (const which of ['first', 'return']) {
        all++;
        if (ours[which].readyMs + ours[which].firstMs < r[which].readyMs + r[which].firstMs) ahead++;
      }
    }
    lines.push(`- ahead of ${NAMES[peer]} on open → first token: ${ahead} of ${all} rows`);
  }
}
if (failed.length) lines.push('', 'failed:', ...failed.map((f) => `- ${f}`));
console.log(lines.join('\n'));
if (JSON_OUT) fs.writeFileSync(JSON_OUT, JSON.stringify(rows, null, 2));
if (failed.length) process.exitCode = 1;
