// The threaded load, again and again: one browser, each load in a fresh cross-origin isolated page
// (the test sites' isolated server, tests/e2e/sites.mjs), `threads: 2` on the demo model; a load
// that has not ended in 40 s counts as hung. What found Firefox's blocked Worker constructor
// (docs/performance.md "Each engine's speed"): run it before and after a change to how the
// threads start.
//
//   node tools/soak_threads.mjs [--engine firefox] [--loads 100]
//
// Prints one line per load (its result, its time) and the count of hangs; exits 1 if any hung.

import { parseArgs } from 'node:util';
import { MODEL_URL } from '../tests/e2e/harness.mjs';
import { launchEngine, withEnginePage } from '../tests/e2e/engines.mjs';
import { startSites } from '../tests/e2e/sites.mjs';

const { values: opts } = parseArgs({ options: { engine: { type: 'string', default: 'firefox' }, loads: { type: 'string', default: '100' } } });
const loads = Number(opts.loads);
if (!Number.isInteger(loads) || loads < 1) throw new Error(`--loads must be a whole number above 0, not ${opts.loads}`);

const sites = await startSites();
const engine = await launchEngine(opts.engine);
let hung = 0;
try {
  for (let i = 0; i < loads; i++) {
    const t0 = Date.now();
    const result = await withEnginePage(engine, async (page) => {
      await page.goto(`${sites.isolated.origin}${sites.isolated.page(`soak${i}`, '<title>soak</title>')}`);
      return page.evaluate(async ({ folder }) => {
        const { Gpt2 } = await import('/gpt2.js');
        const loaded = Gpt2.load({ model: folder, backend: 'cpu', threads: 2 }).then((m) => {
          const threads = m.threads;
          m.dispose();
          return `loaded on ${threads} threads`;
        });
        return Promise.race([loaded, new Promise((resolve) => setTimeout(() => resolve('hung'), 40_000))]);
      }, { folder: `/${MODEL_URL}` });
    }).catch((e) => `failed: ${e.message.split('\n')[0]}`);
    if (result === 'hung') hung++;
    console.log(`${i + 1} ${result} ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  }
} finally {
  await engine.close();
  await sites.close();
}
console.log(`${engine.name}: ${hung} of ${loads} threaded loads hung`);
process.exitCode = hung > 0 ? 1 : 0;
