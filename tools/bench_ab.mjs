// A/B of two (or more) builds of the page, or of the CPU's 8-bit kernels, in one headless
// browser (Chromium; --engine firefox or webkit for the others): the prompt forward (a 64-token TTFT) and the time per token, with the contestants
// taking turns round after round, so that a noisy machine slows them alike. Prints the minimum and
// the median of each, then one profiled run's layer products: the prompt GEMM's rate (GMAC/s) and
// a decode step's products. For a kernel change: build the old commit's www/ in a worktree, then
// compare; for the kernels of one build: --kernels.
//
//   node tools/bench_ab.mjs [--model DIR] [--threads 1] [--dtype q8] [--rounds 5] [--no-vnni]
//                           [--prompt-copies 1] [--kernels dot-add,dot-i16] [--build pkg[,pkg-relaxed]]
//                           [--engine chromium|firefox|webkit] WWW_A [WWW_B …]
//
// Each round runs, in each contestant: three 1-token generations (their times are TTFTs) and one
// of 48 tokens (its time per token). --model defaults to the GPT-2-124M-shaped bench checkpoint
// that ./build.sh bench makes. --kernels: each www/ once per kernel named (Gpt2.load's `kernel`);
// --build: that wasm build instead of the page's choice (`pkg`: the portable one WebKit runs); a
// list (`--build pkg-relaxed,pkg`): each www/ once per build, and per kernel named.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer } from '../tests/e2e/harness.mjs';
import { ALL_ENGINES, launchEngine } from '../tests/e2e/engines.mjs';
import { PASSAGE } from './bench_prompt.mjs';

const args = process.argv.slice(2);
const flags = new Map();
const roots = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--no-vnni') flags.set('--no-vnni', true);
  else if (args[i].startsWith('--')) flags.set(args[i], args[++i]);
  else roots.push(path.resolve(args[i]));
}
const MODEL = path.resolve(flags.get('--model') ?? path.join(os.homedir(), '.cache/gpt2-web/bench/gpt2-124m'));
const THREADS = Number(flags.get('--threads') ?? 1);
const DTYPE = flags.get('--dtype') ?? 'q8';
const ROUNDS = Number(flags.get('--rounds') ?? 5);
// --prompt-copies N: the passage N times over (N × 64 tokens, give or take the joins), e.g. 8 for
// a 512-token prompt, where attention's share of the prompt grows.
const COPIES = Number(flags.get('--prompt-copies') ?? 1);
if (!(Number.isInteger(COPIES) && COPIES >= 1 && COPIES <= 15)) {
  console.error('bench_ab: --prompt-copies takes 1 to 15 (the context is 1024 tokens)');
  process.exit(2);
}
const ENGINE = flags.get('--engine') ?? 'chromium';
if (!ALL_ENGINES.includes(ENGINE)) {
  console.error(`bench_ab: --engine takes ${ALL_ENGINES.join(', ')}`);
  process.exit(2);
}
if (flags.has('--no-vnni') && ENGINE !== 'chromium') {
  console.error('bench_ab: --no-vnni is a V8 flag: Chromium only');
  process.exit(2);
}
const KERNELS = flags.has('--kernels') ? flags.get('--kernels').split(',') : [undefined];
const BUILDS = flags.has('--build') ? flags.get('--build').split(',') : [undefined];
if (roots.length * KERNELS.length * BUILDS.length < 2 || roots.some((r) => !fs.existsSync(path.join(r, 'gpt2.js')))) {
  console.error('bench_ab: give two or more www/ folders (each with gpt2.js and built pkg*/), or one and --kernels A,B or --build A,B');
  process.exit(2);
}
if (!fs.existsSync(path.join(MODEL, 'model.safetensors'))) {
  console.error(`bench_ab: no model.safetensors in "${MODEL}" (./build.sh bench makes it; or give --model DIR)`);
  process.exit(2);
}
const PROMPT = Array(COPIES).fill(PASSAGE).join(' ');

const servers = [];
const temps = [];
for (const r of roots) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'gpt2-ab-'));
  temps.push(root);
  for (const f of fs.readdirSync(r)) if (f !== 'models') fs.symlinkSync(path.join(r, f), path.join(root, f));
  fs.mkdirSync(path.join(root, 'models'));
  fs.symlinkSync(MODEL, path.join(root, 'models/bench'));
  fs.writeFileSync(path.join(root, 'ab.html'), '<!doctype html><meta charset="utf-8"><title>ab</title>\n');
  servers.push(await startServer({ root, args: ['--follow-links', ...(THREADS > 1 ? ['--isolated'] : [])] }));
}
const browser = await launchEngine(ENGINE, { chromiumArgs: flags.has('--no-vnni') ? ['--js-flags=--no-enable-avx-vnni'] : [] });
try {
  const pages = [];
  const names = [];
  for (const [i, s] of servers.entries()) {
    for (const [build, kernel] of BUILDS.flatMap((b) => KERNELS.map((k) => [b, k]))) {
      const page = await browser.newPage();
      await page.goto(`${s.origin}/ab.html`);
      const running = await page.evaluate(async ({ threads, dtype, kernel, build }) => {
        const { Gpt2 } = await import('/gpt2.js');
        window.model = await Gpt2.load({ model: 'models/bench/', backend: 'cpu', dtype, threads, kernel, build });
        return `${window.model.build}, kernel ${window.model.kernel}${window.model.kernelTimes ? `, timed ${window.model.kernelTimes}` : ''}`;
      }, { threads: THREADS, dtype: DTYPE, kernel, build });
      pages.push(page);
      names.push(`${roots[i]} (${running})`);
    }
  }
  const promptTokens = (await pages[0].evaluate((p) => window.model.tokenize(p), PROMPT)).length;
  const results = pages.map(() => ({ ttft: [], tpot: [] }));
  for (let round = 0; round < ROUNDS; round++) {
    for (const [i, page] of pages.entries()) {
      const r = await page.evaluate(async (prompt) => {
        const ttft = [];
        for (let k = 0; k < 3; k++) {
          const s = performance.now();
          await window.model.generate(prompt, { maxTokens: 1, temperature: 0, ignoreEos: true, prefixCache: false });
          ttft.push(performance.now() - s);
        }
        const { metrics } = await window.model.generate(prompt, { maxTokens: 48, temperature: 0, ignoreEos: true, prefixCache: false });
        return { ttft, tpot: metrics.tpotMs };
      }, PROMPT);
      results[i].ttft.push(...r.ttft);
      results[i].tpot.push(r.tpot);
    }
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  console.log(`${browser.version}, ${os.cpus().length} × ${os.cpus()[0].model}; ${DTYPE}, ${THREADS} thread(s), ${ROUNDS} rounds${flags.has('--no-vnni') ? ', V8 with AVX-VNNI off' : ''}: ` +
    `prompt = a ${promptTokens}-token TTFT (ms), TPOT over 48 tokens (ms); min / median`);
  for (const [i, r] of results.entries()) {
    console.log(`${names[i]}: prompt ${Math.min(...r.ttft).toFixed(1)} / ${median(r.ttft).toFixed(1)} | ` +
      `TPOT ${Math.min(...r.tpot).toFixed(2)} / ${median(r.tpot).toFixed(2)}`);
  }
  // One profiled run each: the layers' GEMM rate for the prompt, a decode step's products.
  const cfg = JSON.parse(fs.readFileSync(path.join(MODEL, 'config.json'), 'utf8'));
  const macs = cfg.n_layer * (cfg.n_embd * 4 * cfg.n_embd + 2 * cfg.n_embd * (cfg.n_inner ?? 4 * cfg.n_embd));
  console.log('one profiled run each: prompt layers\' matmul ms (GMAC/s), lm_head ms | decode ms per token: matmul, lm_head');
  for (const [i, page] of pages.entries()) {
    const { prompt: p, decode: d } = await page.evaluate(async (prompt) => (await window.model.generate(prompt,
      { maxTokens: 48, temperature: 0, ignoreEos: true, profile: true, prefixCache: false })).profile, PROMPT);
    console.log(`${names[i]}: prompt ${p.phases.matmul.toFixed(1)} ms (${(promptTokens * macs / p.phases.matmul / 1e6).toFixed(1)} GMAC/s), ` +
      `lm_head ${p.phases.lm_head.toFixed(1)} | decode ${(d.phases.matmul / d.tokens).toFixed(2)} + ${(d.phases.lm_head / d.tokens).toFixed(2)} ms`);
  }
} finally {
  await browser.close();
  for (const s of servers) await s.close();
  for (const t of temps) fs.rmSync(t, { recursive: true, force: true });
}
