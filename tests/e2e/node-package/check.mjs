// Run by node-package.test.mjs with a plain `node`, beside node_modules/gpt2-web (the packed
// package): the API in Node, each answer printed as one JSON line for the test to compare. The
// process must end by itself after dispose().
import { Gpt2, argmax } from 'gpt2-web';

const [folder, prompt] = process.argv.slice(2);
const out = (key, value) => console.log(JSON.stringify({ [key]: value }));

try {
  await Gpt2.load({ model: `${folder}/no-such-model` });
} catch (e) {
  out('missingError', e.message);
}
const model = await Gpt2.load({ model: folder });
out('loaded', { backend: model.backend, dtype: model.dtype, build: model.build, threads: model.threads });

const greedy = await model.generate(prompt, { maxTokens: 24 });
out('greedy', { text: greedy.text, tokens: greedy.tokens, stopReason: greedy.stopReason });

const events = [];
const streamed = model.stream(prompt, { maxTokens: 24 });
for await (const ev of streamed) events.push(ev.text);
out('stream', { texts: events, text: (await streamed.result).text });

const sampled = { maxTokens: 16, temperature: 0.9, seed: 11 };
const three = await model.generate(prompt, { ...sampled, n: 3 });
const alone = [];
for (let i = 0; i < 3; i++) alone.push((await model.generate(prompt, { ...sampled, seed: 11 + i })).text);
out('n', { choices: three.choices.map((c) => c.text), alone });

const controller = new AbortController();
let seen = 0;
const aborted = await model.generate(prompt, {
  maxTokens: 200, ignoreEos: true, signal: controller.signal,
  onToken: () => { if (++seen === 3) controller.abort(); },
});
out('abort', { stopReason: aborted.stopReason, tokens: aborted.tokens.length });

const prompts = [prompt, 'JULIET:', 'First Citizen:'];
const together = await Promise.all(prompts.map((p) => model.generate(p, { maxTokens: 12 })));
const oneByOne = [];
for (const p of prompts) oneByOne.push((await model.generate(p, { maxTokens: 12 })).text);
out('concurrent', { together: together.map((r) => r.text), oneByOne });

const ids = await model.tokenize(prompt);
const loop = [...ids];
for (let i = 0; i < 24; i++) {
  const next = argmax(await model.logits(loop));
  loop.push(next);
  if (next === model.eosTokenId) break;
}
out('logits', { tokens: loop.slice(ids.length) });

model.dispose();
out('disposed', true);
