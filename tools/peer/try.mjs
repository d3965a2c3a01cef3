// Runs the transformers.js peer benchmark (tools/peer/peer.js) in headless Chromium, offline.
//
//   node tools/peer/try.mjs [--model-dir /root/ckpt/gpt2-124m-onnx] [--model-id NAME] [--dtypes fp32,q8]
//                           [--threads 1,2] [--new 128] [--runs 3] [--json out.json]
//                           [--isolated] (1 thread on the COOP/COEP origin too) [--ort-variant asyncify|'']
//
// Serves a temporary root with tools/serve.mjs (plain for 1 thread, --isolated for more, since wasm
// threads need crossOriginIsolated): peer/ → tools/peer (with node_modules, from setup.sh),
// peer-models/<id>/ → the folder tools/peer/export_onnx.py wrote, and an empty index.html. Each
// configuration gets a fresh browser context; every request that is not for 127.0.0.1 is aborted and
// reported, and makes the script exit non-zero. The prompt is 64 GPT-2 tokens (checked).
// Environment: CHROMIUM (default: chromium on PATH), PLAYWRIGHT_CORE (default: tests/e2e/node_modules).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '../..');
const pwPath = process.env.PLAYWRIGHT_CORE || path.join(ROOT, 'tests/e2e/node_modules/playwright-core/index.mjs');
const { chromium } = await import(pathToFileURL(pwPath).href);

const argv = process.argv.slice(2);
const opt = (name, dflt) => { const i = argv.indexOf(name); return i >= 0 ? argv[i + 1] : dflt; };
const modelDir = path.resolve(opt('--model-dir', '/root/ckpt/gpt2-124m-onnx'));
const modelId = opt('--model-id', path.basename(modelDir));
const dtypes = opt('--dtypes', 'fp32,q8').split(',');
const threadsList = opt('--threads', '1,2').split(',').map(Number);
const maxNewTokens = Number(opt('--new', '128'));
const runs = Number(opt('--runs', '3'));
const jsonOut = opt('--json', null);
const isolatedAll = argv.includes('--isolated'); // 1 thread on the isolated origin too
const ortVariant = opt('--ort-variant', 'asyncify'); // '' = plain ort-wasm-simd-threaded.wasm

/** 64 GPT-2 tokens (peerBench reports promptTokens; checked below). */
const PROMPT = 'It was the best of times, it was the worst of times, it was the age of wisdom, it was the age '
  + 'of foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season of '
  + 'Light, it was the season of Darkness, it was the spring of';
const PROMPT_TOKENS = 64;

/** DESIGN.md's flags (tests/e2e/harness.mjs CHROMIUM_ARGS). */
const CHROMIUM_ARGS = [
  '--headless=new', '--no-sandbox', '--disable-background-networking', '--disable-component-update',
  '--disable-sync', '--no-first-run', '--disable-quic',
];

function chromiumPath() {
  if (process.env.CHROMIUM) return process.env.CHROMIUM;
  for (const dir of (process.env.PATH || '').split(':')) {
    for (const name of ['chromium', 'chromium-browser']) {
      const p = path.join(dir, name);
      if (fs.existsSync(p)) return p;
    }
  }
  throw new Error('Chromium not found: install the Debian package chromium, or set CHROMIUM');
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => { const { port } = srv.address(); srv.close(() => resolve(port)); });
  });
}

const children = [];
async function serve(root, isolated) {
  const port = await freePort();
  const args = [path.join(ROOT, 'tools/serve.mjs'), '--port', String(port), '--root', root, '--quiet'];
  if (isolated) args.push('--isolated');
  const proc = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(proc);
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('tools/serve.mjs did not start')), 10_000);
    proc.stdout.on('data', (d) => { if (String(d).includes('serving')) { clearTimeout(timer); resolve(); } });
    proc.on('exit', (c) => reject(new Error(`tools/serve.mjs exited ${c}`)));
  });
  return `http://127.0.0.1:${port}`;
}
function cleanup() { for (const c of children) if (c.exitCode === null) c.kill(); }
process.on('exit', cleanup);
process.on('SIGINT', () => process.exit(130));

for (const f of ['config.json', 'tokenizer.json', 'tokenizer_config.json']) {
  if (!fs.existsSync(path.join(modelDir, f))) throw new Error(`${modelDir}/${f} missing (run tools/peer/export_onnx.py)`);
}
if (!fs.existsSync(path.join(HERE, 'node_modules/@huggingface/transformers'))) {
  throw new Error('tools/peer/node_modules missing: run tools/peer/setup.sh');
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gpt2-peer-'));
fs.symlinkSync(HERE, path.join(tmp, 'peer'));
fs.mkdirSync(path.join(tmp, 'peer-models'));
fs.symlinkSync(modelDir, path.join(tmp, 'peer-models', modelId));
fs.writeFileSync(path.join(tmp, 'index.html'), '<!doctype html><meta charset="utf-8"><title>peer</title>\n');

const origins = { plain: await serve(tmp, false), isolated: await serve(tmp, true) };
const browser = await chromium.launch({ executablePath: chromiumPath(), args: CHROMIUM_ARGS });
const offsite = [];
const results = [];
let failed = false;
try {
  for (const dtype of dtypes) {
    for (const threads of threadsList) {
      const origin = threads > 1 || isolatedAll ? origins.isolated : origins.plain;
      const context = await browser.newContext();
      await context.route('**/*', (route) => {
        const u = new URL(route.request().url());
        if (u.hostname === '127.0.0.1' || u.protocol === 'blob:' || u.protocol === 'data:') return route.continue();
        offsite.push(route.request().url());
        return route.abort('blockedbyclient');
      });
      const page = await context.newPage();
      page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') console.log(`  [page ${m.type()}] ${m.text()}`); });
      page.on('pageerror', (e) => console.log(`  [page error] ${e.message}`));
      page.setDefaultTimeout(30 * 60_000);
      await page.goto(`${origin}/index.html`);
      const label = `${dtype} ${threads}t`;
      process.stdout.write(`${label}: `);
      try {
        const r = await page.evaluate(async (o) => (await import('/peer/peer.js')).peerBench(o),
          { modelId, dtype, threads, prompt: PROMPT, maxNewTokens, runs, ortVariant });
        results.push(r);
        console.log(`load ${r.loadMs.toFixed(0)} ms, runs ${r.runs.map((x) => `${x.ttftMs.toFixed(0)}/${x.tpotMs.toFixed(1)}`).join(' ')} (ttft ms/ms per token)`);
        if (r.promptTokens !== PROMPT_TOKENS) { failed = true; console.log(`  ERROR: prompt is ${r.promptTokens} tokens, not ${PROMPT_TOKENS}`); }
        if (r.runs.some((x) => x.newTokens !== maxNewTokens)) { failed = true; console.log('  ERROR: generation length not forced'); }
      } catch (e) {
        failed = true;
        console.log(`FAILED: ${e.message.split('\n')[0]}`);
      }
      await context.close();
    }
  }
} finally {
  await browser.close();
  cleanup();
  fs.rmSync(tmp, { recursive: true, force: true });
}

const f = (x, d = 0) => (Number.isFinite(x) ? x.toFixed(d) : '-');
console.log(`\ntransformers.js ${results[0]?.versions.transformers ?? '?'}, onnxruntime-web ${results[0]?.versions.onnxruntimeWeb ?? '?'}, `
  + `model ${modelId}, prompt ${results[0]?.promptTokens ?? '?'} tokens, ${maxNewTokens} new tokens, greedy, median of ${runs} runs after 1 warm-up`);
console.log('| dtype | threads | isolated | load ms | TTFT ms | ms/token | tok/s (decode) | first new ids |');
console.log('|---|---|---|---|---|---|---|---|');
for (const r of results) {
  console.log(`| ${r.dtype} | ${r.threads} | ${r.crossOriginIsolated} | ${f(r.loadMs)} | ${f(r.median.ttftMs)} | ${f(r.median.tpotMs, 1)} | ${f(1000 / r.median.tpotMs, 1)} | ${r.tokenIds.slice(0, 6).join(' ')} |`);
}
for (const dtype of dtypes) {
  const rs = results.filter((r) => r.dtype === dtype);
  if (rs.length > 1) {
    const same = rs.every((r) => r.tokenIds.join() === rs[0].tokenIds.join());
    console.log(`${dtype}: greedy ids ${same ? 'identical' : 'DIFFER'} across thread counts`);
  }
}
if (offsite.length) {
  failed = true;
  console.log(`ERROR: ${offsite.length} request(s) tried to leave 127.0.0.1 (aborted):\n  ${[...new Set(offsite)].join('\n  ')}`);
} else {
  console.log('offline: no request left 127.0.0.1');
}
if (jsonOut) fs.writeFileSync(jsonOut, JSON.stringify({ prompt: PROMPT, maxNewTokens, runs, results, offsite }, null, 2));
process.exit(failed ? 1 : 0);
