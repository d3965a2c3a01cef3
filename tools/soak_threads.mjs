// The threaded load, again and again: one browser, each load in a fresh cross-origin isolated page
// (the test sites' isolated server, tests/e2e/sites.mjs), `threads: 2` on the demo model; a load
// that has not ended in 40 s counts as hung. With `--tokens N`, each load then generates N greedy
// tokens after each of the test prompts, which must be the CLI's (`gpt2 generate`, one thread):
// a race between the threads would show as other tokens now and then. What found Firefox's
// blocked Worker constructor (docs/performance.md "Each engine's speed"): run it before and
// after a change to how the threads start or share work.
//
//   node tools/soak_threads.mjs [--engine firefox] [--loads 100] [--tokens 0]
//
// Prints one line per load (its result, its time) and the counts; exits 1 if any load hung or
// differed.

import { parseArgs } from 'node:util';
import { MODEL_URL, PROMPT, PROMPT2, nativeGenerate } from '../tests/e2e/harness.mjs';
import { launchEngine, withEnginePage } from '../tests/e2e/engines.mjs';
import { startSites } from '../tests/e2e/sites.mjs';

const { values: opts } = parseArgs({ options: {
  engine: { type: 'string', default: 'firefox' }, loads: { type: 'string', default: '100' }, tokens: { type: 'string', default: '0' },
} });
const [loads, tokens] = [Number(opts.loads), Number(opts.tokens)];
if (!Number.isInteger(loads) || loads < 1) throw new Error(`--loads must be a whole number above 0, not ${opts.loads}`);
if (!Number.isInteger(tokens) || tokens < 0) throw new Error(`--tokens must be a whole number, not ${opts.tokens}`);
const prompts = tokens > 0 ? [PROMPT, PROMPT2] : [];
const want = prompts.map((p) => nativeGenerate(p, tokens).tokens);

const sites = await startSites();
const engine = await launchEngine(opts.engine);
let [hung, differed] = [0, 0];
try {
  for (let i = 0; i < loads; i++) {
    const t0 = Date.now();
    const result = await withEnginePage(engine, async (page) => {
      await page.goto(`${sites.isolated.origin}${sites.isolated.page(`soak${i}`, '<title>soak</title>')}`);
      return page.evaluate(async ({ folder, prompts, tokens, want }) => {
        const { Gpt2 } = await import('/gpt2.js');
        const loaded = Gpt2.load({ model: folder, backend: 'cpu', threads: 2 }).then(async (m) => {
          const threads = m.threads;
          const wrong = [];
          for (const [i, prompt] of prompts.entries()) {
            const r = await m.generate(prompt, { maxTokens: tokens, temperature: 0 });
            if (r.tokens.join() !== want[i].join()) wrong.push(`prompt ${i + 1} from token ${r.tokens.findIndex((t, j) => t !== want[i][j])}`);
          }
          m.dispose();
          return `loaded on ${threads} threads${wrong.length ? `; tokens differ: ${wrong.join(', ')}` : ''}`;
        });
        return Promise.race([loaded, new Promise((resolve) => setTimeout(() => resolve('hung'), 40_000))]);
      }, { folder: `/${MODEL_URL}`, prompts, tokens, want });
    }).catch((e) => `failed: ${e.message.split('\n')[0]}`);
    if (result === 'hung') hung++;
    if (result.includes('tokens differ')) differed++;
    console.log(`${i + 1} ${result} ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  }
} finally {
  await engine.close();
  await sites.close();
}
console.log(`${engine.name}: ${hung} of ${loads} threaded loads hung${tokens ? `, ${differed} gave other tokens than the CLI` : ''}`);
process.exitCode = hung + differed > 0 ? 1 : 0;
