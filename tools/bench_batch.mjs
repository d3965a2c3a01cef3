// Batching in the browser, the half of `./build.sh bench`'s batch table that `gpt2 bench --batch`
// prints natively: B greedy generations started at once through the public JS API (concurrent
// generates on one model run as one batch in the worker), q8, one thread, in headless Chromium;
// aggregate decode tokens/s and each sequence's time per token against B, beside the ceiling a
// B-row step can reach (a prompt of 8 tokens: the same products once per weight read), and the
// targets as ratios (B = 8 at ≥ 0.8× the prompt and ≥ 3× B = 1, TPOT at B = 4 ≤ 1.5×). Then the
// demo model: 4 generations at once against the same 4 one after another (wall-clock time). And
// prefix caching: a 64-token prompt's time to first token run whole, and again from the keys and
// values kept.
//
//   node tools/bench_batch.mjs --model DIR [--sizes 1,2,4,8] [--tokens 32] [--runs 3] [--json FILE]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, startServer } from '../tests/e2e/harness.mjs';
import { launchEngine } from '../tests/e2e/engines.mjs';
import { cpuName } from './cpu.mjs';

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const MODEL = path.resolve(opt('--model', ''));
const SIZES = opt('--sizes', '1,2,4,8').split(',').map(Number);
const TOKENS = Number(opt('--tokens', '32'));
const RUNS = Number(opt('--runs', '3'));
const JSON_OUT = opt('--json', null);
if (!fs.existsSync(path.join(MODEL, 'model.safetensors'))) {
  console.error(`bench_batch: no model.safetensors in "${MODEL}" (give --model DIR)`);
  process.exit(2);
}
if (!SIZES.every((b) => Number.isInteger(b) && b >= 1 && b <= 16) || !(TOKENS >= 4 && TOKENS <= 256) || !(RUNS >= 1 && RUNS <= 20)) {
  console.error('bench_batch: --sizes from 1 to 16 each, --tokens from 4 to 256, --runs from 1 to 20');
  process.exit(2);
}

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'gpt2-batch-'));
for (const f of fs.readdirSync(path.join(ROOT, 'www'))) fs.symlinkSync(path.join(ROOT, 'www', f), path.join(root, f === 'models' ? 'demo-models' : f));
fs.mkdirSync(path.join(root, 'models'));
fs.symlinkSync(MODEL, path.join(root, 'models/bench'));
fs.writeFileSync(path.join(root, 'bench.html'), '<!doctype html><meta charset="utf-8"><title>bench</title>\n');

/** Runs in the page: B at once, `runs` times (median of each's mean TPOT), and the 8-token prompt. */
async function measure({ url, sizes, tokens, runs }) {
  const { Gpt2 } = await import('/gpt2.js');
  const model = await Gpt2.load({ model: url, backend: 'cpu', dtype: 'q8', threads: 1 });
  const ids = await model.tokenize('First Citizen:\nBefore we proceed any further, hear me speak.');
  const prompt = await model.decode(ids.slice(0, 8));
  const opts = { maxTokens: tokens, temperature: 0, ignoreEos: true, prefixCache: false };
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  await Promise.all(Array.from({ length: Math.max(...sizes) }, () => model.generate(prompt, opts))); // warm-up
  const rows = [];
  for (const b of sizes) {
    const steps = [];
    let shared = 0;
    for (let i = 0; i < runs; i++) {
      const rs = await Promise.all(Array.from({ length: b }, () => model.generate(prompt, opts)));
      steps.push(rs.reduce((s, r) => s + r.metrics.tpotMs, 0) / b);
      shared = Math.max(shared, ...rs.map((r) => r.metrics.batchSize));
    }
    const stepMs = median(steps);
    rows.push({ batch: b, shared, stepMs, tokensPerSec: (b * 1000) / stepMs });
  }
  const prefill = [];
  for (let i = 0; i < runs; i++) prefill.push((await model.generate(prompt, { ...opts, maxTokens: 1 })).metrics.prefillMs);
  // Prefix caching: a 64-token prompt's TTFT run whole, and again from the keys and values kept.
  const long = await model.decode(Array.from({ length: 64 }, (_, i) => ids[i % ids.length]));
  const ttft = { whole: [], cached: [] };
  let cachedTokens = 0;
  for (let i = 0; i < runs; i++) {
    ttft.whole.push((await model.generate(long, { ...opts, maxTokens: 1 })).metrics.ttftMs);
    const r = await model.generate(long, { ...opts, maxTokens: 1, prefixCache: true });
    ttft.cached.push(r.metrics.ttftMs);
    cachedTokens = r.metrics.cachedPromptTokens;
  }
  const longTokens = (await model.tokenize(long)).length;
  model.dispose();
  return {
    rows, promptTokens: ids.slice(0, 8).length, promptTokensPerSec: (8 * 1000) / median(prefill),
    prefix: { promptTokens: longTokens, wholeMs: median(ttft.whole), cachedMs: median(ttft.cached), cachedTokens },
  };
}

/** Runs in the page: the demo model, 4 generations at once against the 4 one after another. */
async function demo({ runs }) {
  const { Gpt2 } = await import('/gpt2.js');
  const model = await Gpt2.load({ model: 'demo-models/gpt2-shakespeare/', backend: 'cpu', threads: 1 });
  const opts = (seed) => ({ maxTokens: 64, temperature: 0.8, topK: 40, seed, ignoreEos: true, prefixCache: false });
  const prompt = 'ROMEO.\n';
  await model.generate(prompt, opts(0));
  const times = { together: [], apart: [] };
  for (let i = 0; i < runs; i++) {
    let t0 = performance.now();
    await Promise.all([0, 1, 2, 3].map((s) => model.generate(prompt, opts(s))));
    times.together.push(performance.now() - t0);
    t0 = performance.now();
    for (const s of [0, 1, 2, 3]) await model.generate(prompt, opts(s));
    times.apart.push(performance.now() - t0);
  }
  model.dispose();
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  return { togetherMs: median(times.together), apartMs: median(times.apart) };
}

const server = await startServer({ root, args: ['--follow-links'] });
let result;
try {
  const engine = await launchEngine('chromium');
  try {
    const page = await engine.newPage();
    await page.goto(`${server.origin}/bench.html`);
    const big = await page.evaluate(measure, { url: 'models/bench/', sizes: SIZES, tokens: TOKENS, runs: RUNS });
    const small = await page.evaluate(demo, { runs: RUNS });
    result = { cpu: cpuName(), browser: engine.version, ...big, demo: small };
  } finally {
    await engine.close();
  }
} finally {
  await server.close();
  fs.rmSync(root, { recursive: true, force: true });
}

const { rows, promptTokensPerSec } = result;
const at = (b) => rows.find((r) => r.batch === b);
console.log(`\nBatching in ${result.browser}, q8, 1 thread, GPT-2-124M shape; ${result.cpu}`);
console.log(`${TOKENS} greedy tokens each after an 8-token prompt, B at once through the JS API, median of ${RUNS}\n`);
console.log('| B | shared a step | decode tok/s | step ms (TPOT) | × B = 1 |');
console.log('|---|---|---|---|---|');
for (const r of rows) {
  console.log(`| ${r.batch} | ${r.shared} | ${r.tokensPerSec.toFixed(1)} | ${r.stepMs.toFixed(2)} | ${(r.tokensPerSec / rows[0].tokensPerSec).toFixed(2)} |`);
}
console.log(`\nthe ceiling, an 8-token prompt: ${promptTokensPerSec.toFixed(1)} tok/s`);
const target = (what, got, want, ok) => console.log(`target: ${what}: ${got.toFixed(2)}× (want ${want}) ${ok ? 'met' : 'NOT met'}`);
if (at(8) && at(1)) {
  target('B = 8 decode ÷ the 8-token prompt', at(8).tokensPerSec / promptTokensPerSec, '≥ 0.8×', at(8).tokensPerSec / promptTokensPerSec >= 0.8);
  target('B = 8 decode ÷ B = 1', at(8).tokensPerSec / at(1).tokensPerSec, '≥ 3×', at(8).tokensPerSec / at(1).tokensPerSec >= 3);
}
if (at(4) && at(1)) target('TPOT at B = 4 ÷ B = 1', at(4).stepMs / at(1).stepMs, '≤ 1.5×', at(4).stepMs / at(1).stepMs <= 1.5);
const p = result.prefix;
console.log(`\nprefix caching, the same ${p.promptTokens}-token prompt again: TTFT ${p.wholeMs.toFixed(1)} ms whole, ` +
  `${p.cachedMs.toFixed(1)} ms with ${p.cachedTokens} tokens reused (${(p.wholeMs / p.cachedMs).toFixed(1)}× sooner)`);
const d = result.demo;
console.log(`\ndemo model, 4 × 64 sampled tokens: at once ${d.togetherMs.toFixed(0)} ms, one after another ${d.apartMs.toFixed(0)} ms`);
target('4 at once ÷ one after another (demo model)', d.togetherMs / d.apartMs, '≤ 0.5×', d.togetherMs / d.apartMs <= 0.5);
if (JSON_OUT) fs.writeFileSync(JSON_OUT, JSON.stringify(result, null, 2));
