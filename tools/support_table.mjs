// The README's browser-support table, from what the browser tests found in each engine
// (tests/e2e/engines.test.mjs writes tests/e2e/out/support/<engine>.json as it runs):
//
//   node tools/support_table.mjs [DIR]      (DIR: default tests/e2e/out/support)
//
// A cell is what was measured, never what a browser claims: a test that did not run leaves "not run".
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dir = path.resolve(process.argv[2] ?? path.join(ROOT, 'tests/e2e/out/support'));
const order = ['chromium', 'firefox', 'webkit'];
let rows;
try {
  rows = fs.readdirSync(dir).filter((f) => f.endsWith('.json')).map((f) => JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')));
} catch (e) {
  console.error(`support_table: cannot read ${dir} (${e.message}); run the browser tests first (./build.sh test)`);
  process.exit(2);
}
rows.sort((a, b) => order.indexOf(a.engine) - order.indexOf(b.engine));

const yes = (v, fallback) => (v === undefined ? 'not run' : v ? 'yes' : fallback);
const build = (r) => (r.build === undefined ? 'not run'
  : r.build === 'pkg-relaxed' ? '`pkg-relaxed` (relaxed SIMD)' : '`pkg` (SIMD; no relaxed SIMD)');
const threads = (r) => (r.isolatedThreads === undefined ? 'not run'
  : r.isolatedThreads > 1 ? `${r.isolatedThreads} (\`${r.isolatedBuild}\`, isolated page)`
    : `1 (${r.sharedMemory ? 'shared memory, but the threaded build needs relaxed SIMD' : 'no shared memory'})`);
const adapter = (r) => (r.webgpuAdapter === undefined ? 'not run'
  : r.webgpuAdapter === 'yes' ? 'yes' : r.webgpuAdapter === 'none' ? 'none (headless): CPU' : `${r.webgpuAdapter}: CPU`);

console.log('| engine (as tested) | build chosen | threads | WebGPU adapter | Cache API | `file://` bundle | cross-origin widget | iframe embed |');
console.log('|---|---|---|---|---|---|---|---|');
for (const r of rows) {
  console.log(`| ${r.version} | ${build(r)} | ${threads(r)} | ${adapter(r)} | ${yes(r.cacheApi, 'no')} | ` +
    `${yes(r.fileUrl, 'fails')} | ${yes(r.crossOriginWidget, 'fails')} | ${yes(r.iframe, 'fails')} |`);
}
