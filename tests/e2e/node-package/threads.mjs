// Run by node-package.test.mjs with a plain `node`: `threads: 2` in Node runs one thread (the
// threaded build is not used there), with the CLI's tokens.
import { Gpt2 } from 'gpt2-web';

const [folder, prompt] = process.argv.slice(2);
const model = await Gpt2.load({ model: folder, threads: 2 });
const r = await model.generate(prompt, { maxTokens: 24 });
console.log(JSON.stringify({ threads: model.threads, build: model.build, text: r.text, tokens: r.tokens }));
model.dispose();
