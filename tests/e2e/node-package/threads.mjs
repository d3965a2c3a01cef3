// Run by node-package.test.mjs with a plain `node` (with relaxed SIMD, which Node 20's V8 keeps
// behind a flag): `threads: 2` in Node runs the threaded build, its rayon threads worker threads.
import { Gpt2 } from 'gpt2-web';

const [folder, prompt] = process.argv.slice(2);
const model = await Gpt2.load({ model: folder, threads: 2 });
const r = await model.generate(prompt, { maxTokens: 24 });
console.log(JSON.stringify({ threads: model.threads, build: model.build, text: r.text, tokens: r.tokens }));
model.dispose();
