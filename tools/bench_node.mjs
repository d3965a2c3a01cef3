// A/B of two (or more) wasm builds in one Node process, phase by phase: each build's scheduler runs
// the same prompt with `profile: true`, the builds taking turns round after round, and the
// minimum of each phase is printed (prompt forward ms), with TTFT and TPOT. On a noisy machine
// this is much steadier than the browser (no worker, no page, one process); Node's V8 is older
// than Chromium's, so compare builds within one run, not against the browser's figures.
//
//   node tools/bench_node.mjs [--model DIR] [--rounds 8] [--prompt-copies 1] [--dtype q8]
//                             PKG_A PKG_B [PKG_C …]
//
// PKG is a wasm-bindgen output folder (www/pkg-relaxed, or an old commit's, built in a worktree).
// --prompt-copies N: the 64-token passage N times over (8 for a 512-token prompt).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { PASSAGE } from './bench_prompt.mjs';

// Node 20 ships relaxed SIMD behind a flag: run again with it.
if (!process.execArgv.includes('--experimental-wasm-relaxed-simd') && !process.env.GPT2_BENCH_NODE_CHILD) {
  const r = spawnSync(process.execPath, ['--experimental-wasm-relaxed-simd', ...process.argv.slice(1)], {
    stdio: 'inherit', env: { ...process.env, GPT2_BENCH_NODE_CHILD: '1' },
  });
  process.exit(r.status ?? 1);
}

const args = process.argv.slice(2);
const flags = new Map();
const pkgs = [];
for (let i = 0; i < args.length; i++) {
  if (args[i].startsWith('--')) flags.set(args[i], args[++i]);
  else pkgs.push(path.resolve(args[i]));
}
const MODEL = path.resolve(flags.get('--model') ?? path.join(os.homedir(), '.cache/gpt2-web/bench/gpt2-124m'));
const ROUNDS = Number(flags.get('--rounds') ?? 8);
const COPIES = Number(flags.get('--prompt-copies') ?? 1);
const DTYPE = flags.get('--dtype') ?? 'q8';
if (pkgs.length < 1 || pkgs.some((p) => !fs.existsSync(path.join(p, 'gpt2_web_bg.wasm')))) {
  console.error('bench_node: give one or more wasm-bindgen folders (each with gpt2_web.js and gpt2_web_bg.wasm)');
  process.exit(2);
}
if (!fs.existsSync(path.join(MODEL, 'model.safetensors'))) {
  console.error(`bench_node: no model.safetensors in "${MODEL}" (./build.sh bench makes it; or give --model DIR)`);
  process.exit(2);
}
if (!(Number.isInteger(COPIES) && COPIES >= 1 && COPIES <= 15) || !(Number.isInteger(ROUNDS) && ROUNDS >= 1)) {
  console.error('bench_node: --prompt-copies takes 1 to 15 and --rounds a positive integer');
  process.exit(2);
}

const PROMPT = Array(COPIES).fill(PASSAGE).join(' ');
const file = (f) => fs.readFileSync(path.join(MODEL, f));

const engines = [];
for (const pkg of pkgs) {
  const mod = await import(pathToFileURL(path.join(pkg, 'gpt2_web.js')).href);
  mod.initSync({ module: fs.readFileSync(path.join(pkg, 'gpt2_web_bg.wasm')) });
  const scheduler = new mod.Scheduler();
  const loaded = await mod.Engine.load(file('config.json'), file('model.safetensors'), file('tokenizer.json'), 'cpu', DTYPE);
  engines.push({ scheduler, model: scheduler.add(loaded), tokenize: (text) => scheduler.tokenize(0, text) });
}

/** One generation through the build's scheduler, pumped as the worker pumps it. */
async function generate({ scheduler, model }, maxTokens) {
  const start = performance.now();
  let first = null;
  let value = null;
  scheduler.submit(1, model, PROMPT, { maxTokens, temperature: 0, ignoreEos: true, profile: true, prefixCache: false });
  while (scheduler.hasWork) {
    for (const ev of await scheduler.step()) {
      if (ev.type === 'token') first ??= performance.now() - start;
      else if (ev.type === 'done') value = ev.value;
      else if (ev.type === 'error') throw new Error(ev.message);
    }
  }
  return { ms: performance.now() - start, first, profile: value.profile };
}

const best = pkgs.map(() => ({ phases: {}, ttft: Infinity, tpot: Infinity }));
for (let round = 0; round < ROUNDS; round++) {
  for (const [i, engine] of engines.entries()) {
    const one = await generate(engine, 1);
    for (const [k, v] of Object.entries(one.profile.prompt.phases)) {
      best[i].phases[k] = Math.min(best[i].phases[k] ?? Infinity, v);
    }
    best[i].ttft = Math.min(best[i].ttft, one.first);
    const run = await generate(engine, 32);
    best[i].tpot = Math.min(best[i].tpot, (run.ms - run.first) / 31);
  }
}
const tokens = engines[0].tokenize(PROMPT).length;
console.log(`${DTYPE}, ${tokens}-token prompt, ${ROUNDS} rounds, Node ${process.version}: the minimum of each (ms)`);
const names = Object.keys(best[0].phases);
console.log(`| build | TTFT | TPOT | ${names.join(' | ')} |`);
console.log(`|---|---|---|${names.map(() => '---|').join('')}`);
for (const [i, b] of best.entries()) {
  const cells = names.map((k) => (b.phases[k] ?? NaN).toFixed(1));
  console.log(`| ${pkgs[i]} | ${b.ttft.toFixed(1)} | ${b.tpot.toFixed(2)} | ${cells.join(' | ')} |`);
}
