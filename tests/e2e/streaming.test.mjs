// Streamed loading (issue 17): model.safetensors is read as a stream and each tensor converted as
// it arrives, so the file is never whole in wasm memory. A deep, narrow random checkpoint (f32,
// 200 MB, written here by checkpoint.mjs) loads with a peak wasm memory below the file's size plus
// the runtime weights; progress names the tensors; the prediction is checked against the
// measurement; a file that ends early is a sentence and leaves no half-loaded model.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { launch, startServer, withPage, OUT, ROOT } from './harness.mjs';
import { writeRandomCheckpoint } from './checkpoint.mjs';

const T = { timeout: 180_000 };
const DIR = path.join(OUT, 'checkpoints', 'deep-narrow');
let page$ = null;
let models$ = null;
let browser = null;
let size = 0;

before(async () => {
  size = writeRandomCheckpoint(DIR, {
    nLayer: 48, nEmbd: 256, nHead: 4, nPositions: 256,
    tokenizer: path.join(ROOT, 'www/models/gpt2-shakespeare/tokenizer.json'),
  });
  page$ = await startServer();
  models$ = await startServer({ root: path.relative(ROOT, path.join(OUT, 'checkpoints')) }); // another origin, as a CDN
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await page$?.close();
  await models$?.close();
});

test('a 200 MB checkpoint streams in: peak wasm memory below file + weights, progress names tensors', T, async () => {
  await withPage(browser, `${page$.origin}/embed.html`, async (page) => {
    const got = await page.evaluate(async ({ model }) => {
      const { Gpt2 } = await import('/gpt2.js');
      const events = [];
      const m = await Gpt2.load({ model, backend: 'cpu', dtype: 'q8', onProgress: (p) => events.push(p) });
      const mem = await m.memory();
      const r = await m.generate('ROMEO:', { maxTokens: 4, ignoreEos: true });
      const weights = events.filter((e) => e.file === 'model.safetensors' && !e.plan);
      const out = {
        mem, plan: m.plan, tokens: r.tokens.length,
        tensors: new Set(weights.map((e) => e.tensor).filter(Boolean)).size,
        planFirst: events.findIndex((e) => e.plan) < events.findIndex((e) => e.file === 'model.safetensors' && e.loaded > 0),
        last: weights.at(-1),
      };
      m.dispose();
      return out;
    }, { model: `${models$.origin}/deep-narrow/` });
    const mb = (n) => `${(n / 1e6).toFixed(1)} MB`;
    console.log(`file ${mb(size)}, runtime weights ${mb(got.mem.weights)}, predicted peak ${mb(got.plan.peak)}, ` +
      `wasm memory after loading ${mb(got.mem.wasmBytes)}`);
    assert.equal(got.tokens, 4);
    assert.ok(got.mem.wasmBytes < size + got.mem.weights,
      `wasm memory ${mb(got.mem.wasmBytes)} is not below the file ${mb(size)} + the weights ${mb(got.mem.weights)}`);
    assert.equal(got.mem.weights, got.plan.weights, 'the predicted weights are the allocated ones');
    assert.ok(got.planFirst, 'the memory plan came before the weights');
    assert.ok(got.tensors >= 3, `progress named ${got.tensors} tensors`); // throttled to one event per 50 ms
    assert.equal(got.last.loaded, size);
    assert.equal(got.last.total, size);
  });
});

test('a weights file that ends early is a sentence naming the tensor, and no model', T, async () => {
  await withPage(browser, `${page$.origin}/embed.html`, async (page) => {
    const got = await page.evaluate(async ({ base }) => {
      const { Gpt2 } = await import('/gpt2.js');
      const get = async (f) => new Uint8Array(await (await fetch(base + f)).arrayBuffer());
      const [config, weights, tokenizer] = await Promise.all(['config.json', 'model.safetensors', 'tokenizer.json'].map(get));
      const cut = { config, tokenizer, weights: new Blob([weights.subarray(0, weights.length >> 1)]) };
      const error = await Gpt2.load({ model: cut, backend: 'cpu' }).then(() => 'loaded', (e) => e.message);
      const m = await Gpt2.load({ model: { config, tokenizer, weights: new Blob([weights]) }, backend: 'cpu' });
      const r = await m.generate('ROMEO:', { maxTokens: 3, ignoreEos: true });
      m.dispose();
      return { error, tokens: r.tokens.length };
    }, { base: `${models$.origin}/deep-narrow/` });
    assert.match(got.error, /^could not load the model: model\.safetensors: the weights file ended after \d+ of its \d+ bytes, in tensor "h\.\d+\.[\w.]+" \(truncated, or the transfer broke off\)$/);
    assert.equal(got.tokens, 3, 'a load after the failed one works');
  });
});
