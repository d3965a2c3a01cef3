// The three wasm builds and the CPU weight formats, through the JS API: which build the worker
// picks (relaxed SIMD in Chromium; the threaded one only on a cross-origin isolated page), that
// every build and both dtypes give the native CLI's greedy tokens, the CPU profile, and the option
// checks.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, startServer, withPage, nativeGenerate, MODEL_URL, MODEL_DIR, PROMPT } from './harness.mjs';

const T = { timeout: 180_000 };
const N = 24;
let plain;
let isolated;
let browser;
before(async () => {
  plain = await startServer();
  isolated = await startServer({ args: ['--isolated'] });
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await plain?.close();
  await isolated?.close();
});

/** In a blank page of `origin`: load with `opts`, generate greedily, report what runs. */
async function run(origin, opts) {
  const url = `${origin}/__builds-test.html`;
  let got;
  await withPage(browser, 'about:blank', async (page) => {
    // The blank page gets the headers its server would send (cross-origin isolation or not).
    const headers = origin === isolated.origin
      ? { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' }
      : {};
    await page.route(url, (route) => route.fulfill({ contentType: 'text/html', headers, body: '<!doctype html><title>builds</title>' }));
    await page.goto(url);
    got = await page.evaluate(async ({ folder, prompt, n, opts }) => {
      const { Gpt2 } = await import('/gpt2.js');
      const model = await Gpt2.load({ model: folder, backend: 'cpu', ...opts });
      const r = await model.generate(prompt, { maxTokens: n, temperature: 0, profile: true });
      const unprofiled = await model.generate(prompt, { maxTokens: 2 });
      const info = { isolated: self.crossOriginIsolated, threads: model.threads, build: model.build, dtype: model.dtype, layers: model.config.nLayer };
      const promptTokens = (await model.tokenize(prompt)).length;
      model.dispose();
      return { ...info, tokens: r.tokens, text: r.text, profile: r.profile, promptTokens, unprofiled: 'profile' in unprofiled };

    }, { folder: `/${MODEL_URL}`, prompt: PROMPT, n: N, opts });
  });
  return got;
}

/** `profile: true` gave the prompt's forward and the steps' apart, with phases that add up. */
function checkProfile(got, dtype) {
  const { prompt, decode } = got.profile ?? assert.fail('profile: true gave no profile');
  assert.equal(got.unprofiled, false, 'a generation without profile: true has no profile');
  assert.deepEqual([prompt.calls, prompt.tokens], [1, got.promptTokens]);
  assert.deepEqual([decode.calls, decode.tokens], [N - 1, N - 1]);
  for (const p of [prompt, decode]) {
    const sum = Object.values(p.phases).reduce((a, b) => a + b, 0);
    assert.ok(Math.abs(sum - p.totalMs) <= 1e-6 * Math.max(1, p.totalMs), `phases ${sum} vs total ${p.totalMs}`);
    assert.ok(p.phases.matmul > 0, JSON.stringify(p));
    // f32 never quantizes; q8 quantizes the activations before every layer product. Its time is
    // too short for the worker's coarse clock (0.1 ms) to be sure of, so the laps say it: a
    // product's quantize lap beside its matmul lap (4 products per layer), none for f32.
    const layers = 4 * got.layers * p.calls;
    assert.equal(p.laps.matmul, layers, `${dtype}: ${p.laps.matmul} matmul laps for ${p.calls} forwards of ${got.layers} layers`);
    assert.equal(p.laps.quantize, dtype === 'q8' ? layers : 0, `${dtype}: ${p.laps.quantize} quantize laps`);
    assert.equal(p.laps.lm_head, p.calls, JSON.stringify(p.laps));
    if (dtype === 'f32') assert.equal(p.phases.quantize, 0, JSON.stringify(p));
  }
}

test('one thread: relaxed-SIMD build in Chromium, q8 and f32 both equal the CLI', T, async () => {
  for (const dtype of ['q8', 'f32']) {
    const native = nativeGenerate(PROMPT, N, dtype, MODEL_DIR);
    const got = await run(plain.origin, { dtype, threads: 2 });
    assert.equal(got.isolated, false);
    assert.equal(got.threads, 1, 'a page that is not cross-origin isolated cannot share memory between threads');
    assert.equal(got.build, 'pkg-relaxed');
    assert.equal(got.dtype, dtype);
    assert.deepEqual(got.tokens, native.tokens, `${dtype}: greedy tokens differ from the CLI`);
    assert.equal(got.text, native.text);
    checkProfile(got, dtype);
  }
});

test('cross-origin isolated page: two threads, the threaded build, the same tokens as the CLI', T, async () => {
  const native = nativeGenerate(PROMPT, N, 'q8', MODEL_DIR);
  const got = await run(isolated.origin, { threads: 2 });
  assert.equal(got.isolated, true);
  assert.equal(got.threads, 2);
  assert.equal(got.build, 'pkg-threads');
  assert.equal(got.dtype, 'q8', 'q8 is the default');
  assert.deepEqual(got.tokens, native.tokens);
  checkProfile(got, 'q8'); // timed on the pool's threads
  const single = await run(isolated.origin, { threads: 1 });
  assert.equal(single.threads, 1);
  assert.equal(single.build, 'pkg-relaxed');
  assert.deepEqual(single.tokens, native.tokens);
});

test('dtype and threads options are checked with sentences', T, async () => {
  const url = `${plain.origin}/__builds-test.html`;
  await withPage(browser, 'about:blank', async (page) => {
    await page.route(url, (route) => route.fulfill({ contentType: 'text/html', body: '<!doctype html><title>builds</title>' }));
    await page.goto(url);
    const got = await page.evaluate(async (folder) => {
      const { Gpt2 } = await import('/gpt2.js');
      const fail = (opts) => Gpt2.load({ model: folder, ...opts }).then(() => null, (e) => e.message);
      return { dtype: await fail({ dtype: 'q4' }), threads: await fail({ threads: 0 }), frac: await fail({ threads: 1.5 }) };
    }, `/${MODEL_URL}`);
    assert.equal(got.dtype, 'unknown dtype "q4"; choose q8, f32, f16');
    assert.equal(got.threads, 'invalid threads: 0 is not a whole number from 1 to 64');
    assert.equal(got.frac, 'invalid threads: 1.5 is not a whole number from 1 to 64');
  });
});
