// `./build.sh bench --sizes`: every GPT-2 size in headless Chromium on the CPU, and natively: the
// weights file, the memory predicted from config.json alone (model.plan) against the memory
// measured after loading (the worker's wasm memory, which only grows, so it is the peak; natively
// the process's peak RSS), the load time and the time per token. Random weights of the real shapes
// (tools/make_random_checkpoint.py), so the texts mean nothing; the sizes and times are real.
//
//   node tools/bench_sizes.mjs [--dir ~/.cache/gpt2-web/bench] [--sizes gpt2,gpt2-medium,gpt2-large,gpt2-xl]
//                              [--dtypes q8,f32] [--tokens 16] [--threads 1] [--no-native] [--json FILE]
//
// --threads N (N > 1) runs the browser on a cross-origin isolated page with pkg-threads, whose
// shared memory has a lower limit than the single-threaded builds' 4 GiB.
//
// A configuration whose predicted peak does not fit the build is not run in the browser: the row
// says so with the sentence the page would show (that refusal is the feature).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync, spawnSync } from 'node:child_process';
import { ROOT, launch, startServer } from '../tests/e2e/harness.mjs';

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const DIR = path.resolve(opt('--dir', path.join(os.homedir(), '.cache/gpt2-web/bench')));
const SIZES = opt('--sizes', 'gpt2,gpt2-medium,gpt2-large,gpt2-xl').split(',');
const DTYPES = opt('--dtypes', 'q8,f32').split(',');
const TOKENS = Number(opt('--tokens', '16'));
const NATIVE = !args.includes('--no-native');
const THREADS = Number(opt('--threads', '1'));
const WHERE = `browser, ${THREADS} thread${THREADS > 1 ? 's' : ''}`;
const JSON_OUT = opt('--json', null);
const FOLDER = { gpt2: 'gpt2-124m' };
const PROMPT = 'It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of';

const mb = (n) => (n >= 1e9 ? `${(n / 1e9).toFixed(2)} GB` : `${(n / 1e6).toFixed(0)} MB`);
const ms = (n) => (n >= 1000 ? `${(n / 1000).toFixed(1)} s` : `${n.toFixed(1)} ms`);

function checkpoint(size) {
  const dir = path.join(DIR, FOLDER[size] ?? size);
  if (!fs.existsSync(path.join(dir, 'model.safetensors'))) {
    console.error(`making ${dir} (random weights, ${size} shape)`);
    execFileSync('python3', ['tools/make_random_checkpoint.py', '--shape', size, '--out', dir], { cwd: ROOT, stdio: 'inherit' });
  }
  return dir;
}

/** One size × dtype in a fresh page: { predicted, measured, loadMs, tpotMs } or { refused }. */
async function browserRun(browser, origin, size, dtype, threads) {
  const page = await (await browser.newContext()).newPage();
  page.on('pageerror', (e) => console.error(`page error: ${e.message}`));
  try {
    await page.goto(`${origin}/embed.html`);
    return await page.evaluate(async ({ model, dtype, prompt, tokens, threads }) => {
      const { Gpt2 } = await import('/gpt2.js');
      let plan = null;
      const t0 = performance.now();
      let m;
      try {
        m = await Gpt2.load({ model, backend: 'cpu', dtype, threads, onProgress: (p) => { plan ??= p.plan ?? null; } });
      } catch (e) {
        return { refused: e.message, plan };
      }
      const loadMs = performance.now() - t0;
      const mem = await m.memory();
      await m.generate(prompt, { maxTokens: 2, ignoreEos: true, prefixCache: false });
      const r = await m.generate(prompt, { maxTokens: tokens, ignoreEos: true, prefixCache: false });
      m.dispose();
      return { plan: m.plan, measured: mem.wasmBytes, weights: mem.weights, loadMs, tpotMs: r.metrics.tpotMs, ttftMs: r.metrics.ttftMs };
    }, { model: `/models/${size}/`, dtype, prompt: PROMPT, tokens: TOKENS, threads });
  } finally {
    await page.context().close();
  }
}

async function main() {
  const dirs = Object.fromEntries(SIZES.map((s) => [s, checkpoint(s)]));
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'gpt2-sizes-'));
  for (const f of fs.readdirSync(path.join(ROOT, 'www'))) {
    if (f !== 'models') fs.symlinkSync(path.join(ROOT, 'www', f), path.join(root, f));
  }
  fs.mkdirSync(path.join(root, 'models'));
  for (const [s, d] of Object.entries(dirs)) fs.symlinkSync(d, path.join(root, 'models', s));
  const server = await startServer({ root, args: ['--follow-links', ...(THREADS > 1 ? ['--isolated'] : [])] });
  const browser = await launch();
  const rows = [];
  try {
    for (const size of SIZES) {
      const file = fs.statSync(path.join(dirs[size], 'model.safetensors')).size;
      const config = JSON.parse(fs.readFileSync(path.join(dirs[size], 'config.json'), 'utf8'));
      for (const dtype of DTYPES) {
        console.error(`browser: ${size} ${dtype}…`);
        const b = await browserRun(browser, server.origin, size, dtype, THREADS);
        rows.push({ size, where: WHERE, dtype, file, config, ...b });
        if (NATIVE) {
          console.error(`native: ${size} ${dtype}…`);
          rows.push({ size, where: 'native, 1 thread', dtype, file, config, ...nativeRow(dirs[size], dtype, b.plan) });
        }
      }
    }
  } finally {
    await browser.close();
    await server.close();
    fs.rmSync(root, { recursive: true, force: true });
  }
  print(rows);
  if (JSON_OUT) fs.writeFileSync(JSON_OUT, JSON.stringify(rows, null, 2));
}

/**
 * The same natively, one thread (no thread pool in the native build): the process's peak RSS
 * (/usr/bin/time), which counts the memory-mapped weights file as it is read, and the load time
 * as the wall time less the generation's. The prediction is the browser's less its one streamed
 * tensor, plus the whole (mapped) file.
 */
function nativeRow(dir, dtype, plan) {
  const bin = path.join(process.env.CARGO_TARGET_DIR || path.join(ROOT, 'target'), 'release/gpt2');
  const prompt = PROMPT;
  let out;
  try {
    out = spawnSync('/usr/bin/time', ['-f', 'RSS %M WALL %e', bin, 'generate', '--model', dir, '--backend', 'cpu',
      '--dtype', dtype, '--prompt', prompt, '--max-tokens', String(TOKENS), '--json'], { cwd: ROOT, encoding: 'utf8', maxBuffer: 1 << 28 });
  } catch (e) {
    return { refused: e.message };
  }
  const time = out.stderr.match(/RSS (\d+) WALL ([\d.]+)/);
  if (out.status !== 0 || !time) return { refused: out.stderr.trim().split('\n')[0] || `exit ${out.status}` };
  const result = JSON.parse(out.stdout.trim().split('\n').pop());
  const file = fs.statSync(path.join(dir, 'model.safetensors')).size;
  return {
    plan: plan ? { peak: plan.peak - plan.file + file } : null,
    measured: Number(time[1]) * 1024,
    loadMs: Number(time[2]) * 1000 - result.metrics.totalMs,
    tpotMs: result.metrics.tpotMs,
  };
}

function print(rows) {
  console.log(`CPU: ${os.cpus()[0]?.model ?? 'unknown'} (${os.cpus().length} cores), ${mb(os.totalmem())} RAM; ` +
    `${TOKENS} tokens after a ${PROMPT.split(' ').length}-word prompt, greedy\n`);
  console.log('| size | parameters | file (f32) | where | dtype | predicted peak | measured peak | load | TPOT |');
  console.log('|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    const params = `${((r.config.n_layer * 12 * r.config.n_embd ** 2 + (r.config.vocab_size + r.config.n_positions) * r.config.n_embd) / 1e6).toFixed(0)} M`;
    const head = `| ${r.size} | ${params} | ${mb(r.file)} | ${r.where} | ${r.dtype} |`;
    if (r.refused) {
      console.log(`${head} ${r.plan ? mb(r.plan.peak) : '–'} | – | refused: ${r.refused.replace(/\|/g, '/')} | – |`);
    } else {
      console.log(`${head} ${r.plan ? mb(r.plan.peak) : '–'} | ${mb(r.measured)} | ${ms(r.loadMs)} | ${ms(r.tpotMs)} |`);
    }
  }
}

main().catch((e) => {
  console.error(`bench_sizes: ${e.message}`);
  process.exit(1);
});
