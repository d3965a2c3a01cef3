// The speculative-decoding benchmark in the browser: each prompt of tools/speculative_prompts.json
// through the public JS API (gpt2.js) in headless Chromium, one thread, greedy, plain and with
// `draft: 'prompt-lookup'` back to back; tokens per model forward and the wall-clock ratio.
//
//   node tools/bench_speculative.mjs [--model www/models/gpt2-shakespeare] [--dtype q8]
//                                    [--tokens 128] [--runs 3] [--json FILE]
//
// Times are taken in the page from the generate call to its result; medians over the runs after a
// warm-up. The two texts must be identical (greedy), or the run fails. Nothing leaves 127.0.0.1.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, launch, startServer } from '../tests/e2e/harness.mjs';

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
const { prompts } = JSON.parse(fs.readFileSync(path.join(ROOT, 'tools/speculative_prompts.json'), 'utf8'));

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'gpt2-spec-'));
for (const f of fs.readdirSync(path.join(ROOT, 'www'))) {
  if (f !== 'models') fs.symlinkSync(path.join(ROOT, 'www', f), path.join(root, f));
}
fs.mkdirSync(path.join(root, 'models'));
fs.symlinkSync(MODEL, path.join(root, 'models/bench'));
fs.writeFileSync(path.join(root, 'bench.html'), '<!doctype html><meta charset="utf-8"><title>bench</title>\n');

/** Runs in the page: every prompt plain and speculative, `runs` times each after a warm-up. */
async function inPage({ prompts, dtype, tokens, runs }) {
  const { Gpt2 } = await import('/gpt2.js');
  const model = await Gpt2.load({ model: 'models/bench/', backend: 'cpu', dtype, threads: 1 });
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const one = async (prompt, draft) => {
    const t0 = performance.now();
    const r = await model.generate(prompt, { maxTokens: tokens, temperature: 0, ignoreEos: true, prefixCache: false, draft });
    return { ms: performance.now() - t0, r };
  };
  const out = [];
  for (const p of prompts) {
    await one(p.prompt, 'prompt-lookup'); // warm-up
    const plain = [];
    const spec = [];
    let last;
    for (let i = 0; i < runs; i++) {
      const a = await one(p.prompt, 'none');
      const b = await one(p.prompt, 'prompt-lookup');
      plain.push(a.ms);
      spec.push(b.ms);
      last = { a: a.r, b: b.r };
    }
    out.push({
      name: p.name, kind: p.kind, tokens: last.b.tokens.length, forwards: last.b.metrics.targetForwards,
      plainMs: median(plain), specMs: median(spec),
      identical: JSON.stringify(last.a.tokens) === JSON.stringify(last.b.tokens),
    });
  }
  model.dispose();
  return out;
}

const server = await startServer({ root, args: ['--follow-links'] });
const browser = await launch();
let rows;
try {
  const context = await browser.newContext();
  await context.route('**/*', (route) => {
    const u = new URL(route.request().url());
    if (u.hostname === '127.0.0.1' || ['data:', 'blob:'].includes(u.protocol)) return route.continue();
    return route.abort();
  });
  const page = await context.newPage();
  await page.goto(`${server.origin}/bench.html`);
  rows = await page.evaluate(inPage, { prompts, dtype: DTYPE, tokens: TOKENS, runs: RUNS });
} finally {
  await browser.close();
  await server.close();
  fs.rmSync(root, { recursive: true, force: true });
}
const wrong = rows.filter((r) => !r.identical).map((r) => r.name);
if (wrong.length) throw new Error(`speculative greedy text differs from plain on: ${wrong.join(', ')}`);

const version = (await import('node:child_process')).execSync('chromium --version').toString().trim();
const cpu = os.cpus()[0].model;
console.log(`${path.basename(MODEL)}, ${DTYPE}, 1 thread, greedy, ${TOKENS} new tokens, plain vs prompt lookup, median of ${RUNS}; headless ${version}; ${os.cpus().length} × ${cpu}\n`);
console.log('| prompt | kind | tokens per forward | plain ms | speculative ms | ratio |');
console.log('|---|---|---|---|---|---|');
for (const r of rows) {
  console.log(`| ${r.name} | ${r.kind} | ${(r.tokens / r.forwards).toFixed(2)} | ${r.plainMs.toFixed(0)} | ${r.specMs.toFixed(0)} | ${(r.plainMs / r.specMs).toFixed(2)}× |`);
}
for (const kind of [...new Set(rows.map((r) => r.kind))]) {
  const of = rows.filter((r) => r.kind === kind).map((r) => Math.log(r.plainMs / r.specMs));
  console.log(`\n${kind}: geometric mean ratio ${Math.exp(of.reduce((a, b) => a + b, 0) / of.length).toFixed(2)}×`);
}
if (JSON_OUT) fs.writeFileSync(JSON_OUT, JSON.stringify(rows, null, 2));
