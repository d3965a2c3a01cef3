// Changes wasm-bindgen-rayon's workerHelpers.js, the script wasm-bindgen copies into a threaded
// build (www/pkg-threads/snippets/wasm-bindgen-rayon-*/src/), for gpt2-web; run by ./build.sh after
// wasm-bindgen. Each change names the text it replaces and fails the build when that text is not
// there exactly once (a new wasm-bindgen-rayon), rather than shipping a half-changed file.
//
// 1. Its threads import their package as '../../..' (a bundler's package folder); a static server
//    needs the file itself.
// 2. The engine's worker does not start the threads' workers itself: it asks the page
//    (`{ type: 'threads' }`, answered by `{ op: 'threads', error? }`: www/worker/protocol.js), which
//    starts them (www/api/connection.js). Firefox's Worker constructor, called in a worker,
//    sometimes never returns, the calling worker blocked for good with its timers (measured in
//    docs/performance.md, "Firefox's threaded load hung now and then"); and from the page a worker
//    of another origin starts as gpt2.js's own does.
//
// Usage: node tools/patch_rayon.mjs www/pkg-threads/snippets/wasm-bindgen-rayon-*/src/workerHelpers.js

import fs from 'node:fs';

const MARK = '// Changed by gpt2-web (tools/patch_rayon.mjs)';

const CHANGES = [
  ["const pkg = await import('../../..');", "const pkg = await import('../../../gpt2_web.js');"],
  [/ {2}_workers = await Promise\.all\([\s\S]*?\r?\n {2}\);\r?\n/, "  _workers = await startOnPage(builder.numThreads(), workerInit);\n"],
];

const ADDED = `
${MARK}: the page starts the threads' workers (see that file).
function startOnPage(n, init) {
  return new Promise((resolve, reject) => {
    self.addEventListener('message', function answer({ data }) {
      if (data?.op !== 'threads') return;
      self.removeEventListener('message', answer);
      if (data.error) reject(new Error(data.error));
      else resolve([]); // the page holds the workers
    });
    postMessage({ type: 'threads', n, init, url: new URL('./workerHelpers.js', import.meta.url).href });
  });
}
`;

for (const file of process.argv.slice(2)) {
  let text = fs.readFileSync(file, 'utf8');
  if (text.includes(MARK)) continue; // changed already (wasm-bindgen left the file as it was)
  for (const [from, to] of CHANGES) {
    const found = typeof from === 'string' ? text.split(from).length - 1 : (text.match(new RegExp(from, 'g')) ?? []).length;
    if (found !== 1) {
      console.error(`tools/patch_rayon.mjs: ${file} has ${found} of ${from}, not one: wasm-bindgen-rayon changed; see the file's comment`);
      process.exit(1);
    }
    text = text.replace(from, to);
  }
  fs.writeFileSync(file, text + ADDED);
}
