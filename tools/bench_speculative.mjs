// The speculative-decoding benchmark in the browser: each prompt of tools/speculative_prompts.json
// through the public JS API (gpt2.js) in each engine (headless Chromium, Firefox, WebKitGTK), one
// thread, greedy, plain and with each drafter (`draft: 'prompt-lookup'`, `'mtp'`: the model's heads)
// back to back; tokens per model forward and the wall-clock ratio.
//
//   node tools/bench_speculative.mjs [--model www/models/gpt2-shakespeare] [--dtype q8]
//        [--drafts prompt-lookup,mtp] [--engines chromium,firefox,webkit] [--tokens 128] [--runs 3] [--json FILE]
//        [--profile]
//
// The model folder's GGUF file is loaded when it has one (it carries the heads; the demo model's
// does), else its safetensors. Times are taken in the page from the generate call to its result;
// medians over the runs after a warm-up. The texts must be identical (greedy), or the run fails.
// --profile: then one more plain and one more drafted generation (drafting forced, as the lab
// does) with `profile: true`, and a second table of what a step costs: its forward pass (a drafted
// step's is the verification pass over its rows) and the time around it (sampling, the heads'
// guesses, the token events), per step.
// Nothing leaves 127.0.0.1.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, startServer } from '../tests/e2e/harness.mjs';
import { ALL_ENGINES, launchEngine } from '../tests/e2e/engines.mjs';

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const MODEL = path.resolve(opt('--model', path.join(ROOT, 'www/models/gpt2-shakespeare')));
const DTYPE = opt('--dtype', 'q8');
const TOKENS = Number(opt('--tokens', '128'));
const RUNS = Number(opt('--runs', '3'));
const JSON_OUT = opt('--json', null);
const DRAFTS = opt('--drafts', 'prompt-lookup,mtp').split(',');
const PROFILE = args.includes('--profile');
const ENGINE_NAMES = opt('--engines', 'chromium').split(',');
for (const e of ENGINE_NAMES) {
  if (!ALL_ENGINES.includes(e)) throw new Error(`--engines: unknown engine "${e}"; choose from ${ALL_ENGINES.join(', ')}`);
}
const GGUF = fs.readdirSync(MODEL).find((f) => f.endsWith('.gguf'));
const { prompts } = JSON.parse(fs.readFileSync(path.join(ROOT, 'tools/speculative_prompts.json'), 'utf8'));

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'gpt2-spec-'));
for (const f of fs.readdirSync(path.join(ROOT, 'www'))) {
  if (f !== 'models') fs.symlinkSync(path.join(ROOT, 'www', f), path.join(root, f));
}
fs.mkdirSync(path.join(root, 'models'));
fs.symlinkSync(MODEL, path.join(root, 'models/bench'));
fs.writeFileSync(path.join(root, 'bench.html'), '<!doctype html><meta charset="utf-8"><title>bench</title>\n');

/** Runs in the page: loads the model once (kept on the page for `onePrompt`). */
async function loadInPage({ dtype, file }) {
  const { Gpt2 } = await import('/gpt2.js');
  globalThis.benchModel = await Gpt2.load({ model: `models/bench/${file}`, backend: 'cpu', dtype, threads: 1 });
  return true;
}

/** Runs in the page: one prompt plain and with `draft`, `runs` times each after a warm-up. */
async function onePrompt({ prompt, draft, tokens, runs, profile }) {
  const model = globalThis.benchModel;
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const base = { maxTokens: tokens, temperature: 0, ignoreEos: true, prefixCache: false };
  const one = async (d) => {
    const t0 = performance.now();
    const r = await model.generate(prompt, { ...base, draft: d });
    return { ms: performance.now() - t0, r };
  };
  await one(draft); // warm-up
  const plain = [];
  const spec = [];
  // After the first token: what a draft can change (the prompt's pass drafts nothing).
  const plainDecode = [];
  const specDecode = [];
  let last;
  for (let i = 0; i < runs; i++) {
    const a = await one('none');
    const b = await one(draft);
    plain.push(a.ms);
    spec.push(b.ms);
    plainDecode.push(a.ms - a.r.metrics.ttftMs);
    specDecode.push(b.ms - b.r.metrics.ttftMs);
    last = { a: a.r, b: b.r };
  }
  // Per decode step: the forward pass's ms, its rows, and the ms around it.
  const stepCost = async (options) => {
    const t0 = performance.now();
    const r = await model.generate(prompt, { ...base, profile: true, ...options });
    const d = r.profile.decode;
    const wall = performance.now() - t0 - r.metrics.ttftMs;
    return { rows: d.tokens / d.calls, forwardMs: d.totalMs / d.calls, lmHeadMs: d.phases.lm_head / d.calls, aroundMs: (wall - d.totalMs) / d.calls };
  };
  const steps = profile ? { plain: await stepCost({ draft: 'none' }), drafted: await stepCost({ draft, forceDraft: true }) } : null;
  return {
    steps,
    tokens: last.b.tokens.length, forwards: last.b.metrics.targetForwards,
    plainMs: median(plain), specMs: median(spec),
    plainDecodeMs: median(plainDecode), specDecodeMs: median(specDecode),
    identical: JSON.stringify(last.a.tokens) === JSON.stringify(last.b.tokens),
    // With the heads: 'off' when this browser measured that they lose (the plain loop ran).
    heads: { drafted: 'on', plain: 'off' }[last.b.metrics.mtp?.ran] ?? last.b.metrics.mtp?.ran ?? null,
    verdict: last.b.metrics.mtp?.verdict?.why ?? null,
  };
}

const server = await startServer({ root, args: ['--follow-links'] });
const rows = [];
const versions = [];
try {
  for (const name of ENGINE_NAMES) {
    const engine = await launchEngine(name);
    versions.push(engine.version);
    try {
      const page = await engine.newPage();
      await page.goto(`${server.origin}/bench.html`);
      await page.evaluate(loadInPage, { dtype: DTYPE, file: GGUF ?? '' });
      for (const draft of DRAFTS) {
        for (const p of prompts) {
          const r = await page.evaluate(onePrompt, { prompt: p.prompt, draft, tokens: TOKENS, runs: RUNS, profile: PROFILE });
          rows.push({ engine: name, draft, name: p.name, kind: p.kind, ...r });
        }
      }
      await page.close();
    } finally {
      await engine.close();
    }
  }
} finally {
  await server.close();
  fs.rmSync(root, { recursive: true, force: true });
}
const wrong = rows.filter((r) => !r.identical).map((r) => `${r.engine} ${r.draft} ${r.name}`);
if (wrong.length) throw new Error(`speculative greedy text differs from plain on: ${wrong.join(', ')}`);

const cpu = os.cpus()[0].model;
console.log(`${path.basename(MODEL)}${GGUF ? ` (${GGUF})` : ''}, ${DTYPE}, 1 thread, greedy, ${TOKENS} new tokens, plain vs ${DRAFTS.join(', ')}, median of ${RUNS}; headless ${versions.join(', ')}; ${os.cpus().length} × ${cpu}\n`);
console.log('| engine | drafter | prompt | kind | tokens per forward | plain ms | speculative ms | ratio | after the first token: plain ms, speculative ms, ratio |');
console.log('|---|---|---|---|---|---|---|---|---|');
for (const r of rows) {
  const after = `${r.plainDecodeMs.toFixed(0)}, ${r.specDecodeMs.toFixed(0)}, ${(r.plainDecodeMs / r.specDecodeMs).toFixed(2)}×`;
  console.log(`| ${r.engine} | ${r.draft} | ${r.name} | ${r.kind} | ${(r.tokens / r.forwards).toFixed(2)} | ${r.plainMs.toFixed(0)} | ${r.specMs.toFixed(0)} | ${(r.plainMs / r.specMs).toFixed(2)}×${r.heads === 'off' ? ' off' : ''} | ${after} |`);
}
if (PROFILE) {
  console.log('\nWhat a decode step costs (one profiled generation each, drafting forced): ms per step');
  console.log('| engine | drafter | prompt | rows per drafted pass | plain: forward (lm_head), around it | drafted: forward (lm_head), around it | drafted ÷ plain forward |');
  console.log('|---|---|---|---|---|---|---|');
  const cell = (c) => `${c.forwardMs.toFixed(2)} (${c.lmHeadMs.toFixed(2)}), ${c.aroundMs.toFixed(2)}`;
  for (const r of rows) {
    const { plain, drafted } = r.steps;
    console.log(`| ${r.engine} | ${r.draft} | ${r.name} | ${drafted.rows.toFixed(2)} | ${cell(plain)} | ${cell(drafted)} | ${(drafted.forwardMs / plain.forwardMs).toFixed(2)}× |`);
  }
}
for (const engine of ENGINE_NAMES) {
  const v = rows.filter((r) => r.engine === engine && r.verdict).at(-1)?.verdict;
  if (v) console.log(`\n${engine}: the heads ${v}`);
}
console.log('');
for (const engine of ENGINE_NAMES) {
  for (const draft of DRAFTS) {
    for (const kind of [...new Set(rows.map((r) => r.kind))]) {
      const of = rows.filter((r) => r.engine === engine && r.kind === kind && r.draft === draft);
      const geo = (f) => Math.exp(of.map(f).reduce((a, b) => a + Math.log(b), 0) / of.length);
      console.log(`${engine}, ${draft}, ${kind}: ${geo((r) => r.tokens / r.forwards).toFixed(2)} tokens per forward, geometric mean ratio ${geo((r) => r.plainMs / r.specMs).toFixed(2)}× (after the first token ${geo((r) => r.plainDecodeMs / r.specDecodeMs).toFixed(2)}×)`);
    }
  }
}
if (JSON_OUT) fs.writeFileSync(JSON_OUT, JSON.stringify(rows, null, 2));
