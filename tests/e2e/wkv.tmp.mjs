import { launchEngine } from './engines.mjs';
const b = await launchEngine(process.env.ENG || 'webkit');
const page = await b.newPage();
for (const f of process.argv.slice(2)) {
  const t0 = Date.now();
  await page.goto('file:///tmp/wkv/' + f);
  await page.waitFor(() => window.N > 0, null, 300000);
  const n = await page.evaluate(() => window.N);
  console.log(f, Date.now() - t0, 'ms', n);
}
await b.close();
