// WebGPU in the browser and the fallback to the CPU (issue 5). Chromium has a WebGPU adapter on
// the CPU (SwiftShader) only with WEBGPU_ARGS; without them it has none. SwiftShader is slow
// (seconds per token for the demo model), so these tests generate few tokens. 'auto' never picks
// a software adapter (unless told to race one), so every test that wants WebGPU asks for 'webgpu'.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  launch, startServer, withPage, nativeGenerate, MODEL_URL, PROMPT, WEBGPU_ARGS,
} from './harness.mjs';
import { testRequest } from './observe.mjs';

// SwiftShader's speed is the CPU's: the first test took 332 s alone on a 2-core AMD EPYC Zen 3
// (AVX2 only), past the 240 s it had (inside it in earlier CI runs on Intel Xeons and a Zen 5).
const T = { timeout: 600_000 };
const N = 16; // tokens per generation
let server;
let gpuBrowser; // with a SwiftShader adapter
let plainBrowser; // without any adapter

before(async () => {
  server = await startServer();
  [gpuBrowser, plainBrowser] = await Promise.all([launch(WEBGPU_ARGS), launch()]);
});
after(async () => {
  await gpuBrowser?.close();
  await plainBrowser?.close();
  await server?.close();
});

/** A blank document on the server's origin, so /gpt2.js and its worker load from there. */
async function withBlank(browser, fn) {
  const url = `${server.origin}/__webgpu-test.html`;
  await withPage(browser, 'about:blank', async (page, session) => {
    await page.route(url, (route) => route.fulfill({ contentType: 'text/html', body: '<!doctype html><title>WebGPU test</title>' }));
    await page.goto(url);
    await fn(page, session);
  });
}

/** The demo page with ?backend= (and ?model= unless it is the default demo). */
function pageUrl(backend) {
  const model = MODEL_URL === 'models/gpt2-shakespeare/' ? '' : `&model=${MODEL_URL}`;
  return `${server.origin}/?backend=${backend}&dtype=f32${model}`;
}

async function pageLoaded(page) {
  await page.waitForFunction(() => ['ready', 'error'].includes(window.pageState), null, { timeout: 120_000 });
  return page.evaluate(() => ({
    state: window.pageState,
    error: document.getElementById('error').textContent,
    backend: document.getElementById('backend').textContent,
    info: document.getElementById('model-info').textContent,
    note: document.getElementById('backend-note').hidden ? null : document.getElementById('backend-note').textContent,
  }));
}

/**
 * In the page: load `folder` with `backend`, generate greedily, then sampled from the top 40 twice
 * (the second reading whole rows for its logprobs); what the model says about itself.
 */
async function loadAndGenerate(page, backend, maxTokens) {
  return page.evaluate(async ({ folder, backend, prompt, maxTokens }) => {
    const { Gpt2 } = await import('/gpt2.js');
    const model = await Gpt2.load({ model: folder, backend, dtype: 'f32' });
    const loaded = { backend: model.backend, adapter: model.adapter, gpuUnavailable: model.gpuUnavailable };
    const result = maxTokens > 0 ? await model.generate(prompt, { maxTokens, temperature: 0 }) : null;
    const sampling = { maxTokens, temperature: 0.8, topK: 40, seed: 5 };
    const sampled = maxTokens > 0 ? await model.generate(prompt, sampling) : null;
    const whole = maxTokens > 0 ? await model.generate(prompt, { ...sampling, topLogprobs: 1 }) : null;
    const memory = await model.memory();
    model.dispose();
    return { ...loaded, result, sampled, whole, memory };
  }, { folder: `/${MODEL_URL}`, backend, prompt: PROMPT, maxTokens });
}

test('backend webgpu on SwiftShader: model.backend is webgpu and greedy text equals the CPU', T, async () => {
  const native = nativeGenerate(PROMPT, N, 'f32');
  await withBlank(gpuBrowser, async (page) => {
    const got = await loadAndGenerate(page, 'webgpu', N);
    assert.equal(got.backend, 'webgpu');
    assert.match(got.adapter, /swiftshader/i, 'the adapter is not named');
    assert.equal(got.gpuUnavailable, undefined);
    assert.deepEqual(got.result.tokens, native.tokens, 'greedy tokens on WebGPU differ from the CPU');
    assert.equal(got.result.text, native.text);
    assert.equal(got.result.stopReason, native.stopReason);
    // What the GPU was asked: one submission per pass, and greedy's chosen ids alone read back.
    const gpu = got.result.metrics.gpu;
    assert.equal(gpu.passes, got.result.metrics.targetForwards, JSON.stringify(gpu));
    assert.equal(gpu.submissions, gpu.passes);
    assert.equal(gpu.readbackBytes, 4 * gpu.passes);
    // Every decode step after the first was submitted before the one before it was read back.
    assert.equal(gpu.ahead, Math.max(0, gpu.passes - 2), JSON.stringify(gpu));
    // Sampling from the top 40 reads back each pass's 40 candidates (top_k.wgsl), and draws the
    // tokens it draws from the whole rows.
    assert.deepEqual(got.sampled.tokens, got.whole.tokens, 'top-k sampling on WebGPU differs from the whole rows');
    const sampledGpu = got.sampled.metrics.gpu;
    assert.equal(sampledGpu.readbackBytes, 8 * 40 * sampledGpu.passes, JSON.stringify(sampledGpu));
    assert.equal(got.memory.on, 'webgpu');
    assert.ok(got.memory.weights > 4e6 && got.memory.kvCache > 0, JSON.stringify(got.memory));

    // 'auto' takes no software adapter: the CPU backend is faster than SwiftShader.
    const auto = await loadAndGenerate(page, 'auto', 0);
    assert.equal(auto.backend, 'cpu');
    assert.match(auto.gpuUnavailable, /software/);

    // Taken as hardware, SwiftShader is raced: timed against the CPU (built again from the weights
    // read again), its logits checked against the CPU's; the CPU wins, and its text is the CPU's.
    const raced = await page.evaluate(async ({ folder, prompt }) => {
      const { Gpt2 } = await import('/gpt2.js');
      const m = await Gpt2.load({ model: folder, backend: 'auto', raceSoftwareGpu: true });
      const r = { backend: m.backend, times: m.backendTimes, gpuUnavailable: m.gpuUnavailable, result: await m.generate(prompt, { maxTokens: 8, temperature: 0 }) };
      m.dispose();
      // The CPU won: the next load goes straight to it, with the earlier race's numbers.
      const again = await Gpt2.load({ model: folder, backend: 'auto', raceSoftwareGpu: true });
      r.again = { backend: again.backend, adapter: again.adapter, times: again.backendTimes, gpuUnavailable: again.gpuUnavailable };
      again.dispose();
      return r;
    }, { folder: `/${MODEL_URL}`, prompt: PROMPT });
    assert.equal(raced.backend, 'cpu');
    assert.equal(raced.times.chosen, 'cpu', JSON.stringify(raced.times));
    assert.ok(raced.times.cpuMs > 0 && raced.times.cpuMs < raced.times.webgpuMs, JSON.stringify(raced.times));
    assert.ok(raced.times.logitDiff < 0.025, `SwiftShader's logits differ from the CPU's by ${raced.times.logitDiff} of their range`);
    assert.match(raced.gpuUnavailable, /^measured: a 16-token prompt and 8 steps took [\d.]+ ms on the CPU/);
    assert.deepEqual(raced.result.tokens, nativeGenerate(PROMPT, 8).tokens);
    assert.equal(raced.times.remembered, undefined);
    assert.deepEqual([raced.again.backend, raced.again.adapter], ['cpu', undefined]);
    assert.deepEqual(raced.again.times, { ...raced.times, remembered: true });
    assert.equal(raced.again.gpuUnavailable, `${raced.times.why} (on an earlier load, remembered in this browser)`);
  });
});

test('q8 on SwiftShader: the products by dot4I8Packed, the CPU\'s q8 greedy tokens', T, async () => {
  const native = nativeGenerate(PROMPT, N, 'q8');
  await withBlank(gpuBrowser, async (page) => {
    // Its products four weights at a time where the browser's WGSL has the packed 8-bit dot
    // product (Chromium's has), else a weight at a time.
    const q8 = await page.evaluate(async ({ folder, prompt, maxTokens }) => {
      const { Gpt2 } = await import('/gpt2.js');
      const m = await Gpt2.load({ model: folder, backend: 'webgpu', dtype: 'q8' });
      const packed = navigator.gpu.wgslLanguageFeatures.has('packed_4x8_integer_dot_product');
      const r = { backend: m.backend, dtype: m.dtype, gpuKernel: m.gpuKernel, packed, result: await m.generate(prompt, { maxTokens, temperature: 0 }) };
      m.dispose();
      return r;
    }, { folder: `/${MODEL_URL}`, prompt: PROMPT, maxTokens: N });
    assert.deepEqual([q8.backend, q8.dtype], ['webgpu', 'q8']);
    assert.ok(q8.packed, "Chromium's WGSL lacks packed_4x8_integer_dot_product: the packed kernels go untested");
    assert.equal(q8.gpuKernel, 'dot4I8Packed');
    assert.deepEqual(q8.result.tokens, native.tokens, "greedy tokens of q8 on WebGPU differ from the CPU's q8");
  });
});

test('without an adapter: auto falls back to the CPU, backend webgpu rejects with a sentence', T, async () => {
  const native = nativeGenerate(PROMPT, 8, 'f32');
  await withBlank(plainBrowser, async (page) => {
    const auto = await loadAndGenerate(page, 'auto', 8);
    assert.equal(auto.backend, 'cpu');
    assert.equal(auto.adapter, undefined);
    assert.equal(auto.gpuUnavailable, 'WebGPU: not available in this browser (no adapter)');
    assert.deepEqual(auto.result.tokens, native.tokens);

    const err = await page.evaluate(async (folder) => {
      const { Gpt2 } = await import('/gpt2.js');
      try {
        await Gpt2.load({ model: folder, backend: 'webgpu' });
        return null;
      } catch (e) {
        return e.message;
      }
    }, `/${MODEL_URL}`);
    assert.equal(err, "could not load the model: WebGPU: not available in this browser (no adapter); use backend 'auto' or 'cpu'");
  });
  // The page says why it runs on the CPU, and shows the webgpu failure as its error sentence.
  await withPage(plainBrowser, pageUrl('auto'), async (page) => {
    const got = await pageLoaded(page);
    assert.equal(got.state, 'ready', got.error);
    assert.equal(got.backend, 'cpu');
    assert.equal(got.note, 'Running on the CPU: WebGPU: not available in this browser (no adapter).');
  });
  await withPage(plainBrowser, pageUrl('webgpu'), async (page) => {
    const got = await pageLoaded(page);
    assert.equal(got.state, 'error');
    assert.equal(got.error, "Could not load the model: WebGPU: not available in this browser (no adapter); use backend 'auto' or 'cpu'.");
  });
});

test('the GPU device lost mid-generation: the page continues on the CPU, same greedy tokens, and says so', T, async () => {
  const native = nativeGenerate(PROMPT, N, 'f32');
  await withPage(gpuBrowser, pageUrl('webgpu'), async (page) => {
    const loaded = await pageLoaded(page);
    assert.equal(loaded.state, 'ready', loaded.error);
    assert.equal(loaded.backend, 'webgpu');
    assert.match(loaded.info, /running on webgpu \(.*swiftshader.*\)\.$/i);
    assert.equal(loaded.note, null);

    await page.fill('#prompt', PROMPT);
    await page.fill('#max-tokens', String(N));
    await page.fill('#temperature', '0');
    await page.click('#generate');
    await page.waitForFunction(() => window.tokenEvents >= 2, null, { polling: 20, timeout: 120_000 });
    const wasOnGpu = await page.evaluate(testRequest, { op: 'loseDevice' }); // www/worker/testing.js
    assert.equal(wasOnGpu, true, 'the model was not on the GPU when its device was destroyed');

    await page.waitForFunction(() => window.lastResult || !document.getElementById('error').hidden, null, { timeout: 120_000 });
    const got = await page.evaluate(() => ({
      result: window.lastResult,
      error: document.getElementById('error').textContent,
      changes: window.backendChanges,
      backend: document.getElementById('backend').textContent,
      note: document.getElementById('backend-note').textContent,
      status: document.getElementById('status').textContent,
      model: { backend: window.gpt2Model.backend, adapter: window.gpt2Model.adapter, gpuUnavailable: window.gpt2Model.gpuUnavailable },
      reread: window.fallBackBytes,
    }));
    assert.ok(got.result, `generation failed: ${got.error}`);
    assert.deepEqual(got.result.tokens, native.tokens, 'tokens differ from an uninterrupted CPU run');
    assert.equal(got.result.text, native.text);
    assert.equal(got.changes.length, 1, JSON.stringify(got.changes));
    const [change] = got.changes;
    assert.equal(change.backend, 'cpu');
    assert.ok(change.afterTokens >= 2 && change.afterTokens < got.result.tokens.length,
      `the fallback came after ${change.afterTokens} of ${got.result.tokens.length} tokens, not mid-generation`);
    assert.match(change.reason, /^the GPU failed \(.+\); continuing on the CPU$/);
    // The CPU model was built from the weights read again (progress said so), not from a copy.
    assert.ok(got.reread > 1e6, `the weights were not read again: ${got.reread} bytes`);
    assert.equal(got.model.backend, 'cpu');
    assert.equal(got.model.adapter, undefined);
    assert.equal(got.model.gpuUnavailable, change.reason);
    assert.equal(got.backend, 'cpu');
    assert.match(got.note, /^Switched to the CPU during generation: the GPU failed/);
    assert.ok(got.status.endsWith(got.note), `the status line does not say it: ${got.status}`);

    // The next generation runs on the CPU from the start and is still the same text.
    await page.click('#generate');
    await page.waitForFunction(() => window.lastResult, null, { timeout: 60_000 });
    const again = await page.evaluate(() => ({ tokens: window.lastResult.tokens, changes: window.backendChanges.length }));
    assert.deepEqual(again.tokens, native.tokens);
    assert.equal(again.changes, 1);
  });
});
