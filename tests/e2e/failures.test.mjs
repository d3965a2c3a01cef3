// The README's "Failure modes" rows that need a browser: each bad input gives a sentence, nothing
// crashes for good, and what should be kept is kept. (The loaders' rows run natively in
// tests/checkpoints.rs; the server's in serve.test.mjs.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { serveAndLaunch, freePort, withPage, nativeGenerate, MODEL_URL, MODEL_DIR, PROMPT, PROMPT2 } from './harness.mjs';

const T = { timeout: 120_000 };
const env = serveAndLaunch();

/** A blank document on the server's origin. */
async function withBlank(fn) {
  const url = `${env.server.origin}/__failures.html`;
  await withPage(env.browser, 'about:blank', async (page, session) => {
    await page.route(url, (route) => route.fulfill({ contentType: 'text/html', body: '<!doctype html><title>failures</title>' }));
    await page.goto(url);
    await fn(page, session);
  });
}

/**
 * Another origin answered by the test: `files` maps a path under the folder to a body (a string
 * or bytes), with CORS; every request is logged in the returned list.
 */
async function otherOrigin(context, files) {
  const origin = `http://127.0.0.1:${await freePort()}`;
  const served = [];
  await context.route(`${origin}/**`, async (route) => {
    const { pathname } = new URL(route.request().url());
    served.push(pathname);
    const body = files[pathname];
    if (body === undefined) return route.fulfill({ status: 404, body: 'not found' });
    await route.fulfill({ body, headers: { 'Access-Control-Allow-Origin': '*', 'Content-Type': 'application/octet-stream' } });
  });
  return { origin, served };
}

const modelFile = (f) => fs.readFileSync(path.join(MODEL_DIR, f));

// A worker that dies mid-generation, in every engine: engines.test.mjs.

test('a widget whose worker died offers to load the model again, and then generates', T, async () => {
  await withBlank(async (page) => {
    await page.evaluate(async ({ folder, prompt }) => {
      await import('/widget.js');
      const el = document.createElement('gpt2-generator');
      el.id = 'w';
      Object.entries({ model: folder, prompt, 'max-tokens': '6' }).forEach(([k, v]) => el.setAttribute(k, v));
      document.body.append(el);
      await el.model;
      window.gpt2Workers.at(-1).postMessage({ op: 'crash' }); // www/worker/testing.js
    }, { folder: `/${MODEL_URL}`, prompt: PROMPT });
    const w = page.locator('#w');
    await page.waitForTimeout(300);
    assert.equal(await w.evaluate((el) => el.generate()), null);
    const alert = w.locator('[role="alert"]');
    assert.match(await alert.innerText(), /^The model's worker stopped.*load the model again\.$/s);
    await w.locator('[data-reload]').click();
    await page.waitForFunction(() => !document.getElementById('w').shadowRoot.querySelector('[data-generate]').disabled, null, { timeout: 60_000 });
    const r = await w.evaluate((el) => el.generate());
    assert.equal(r.tokens.length, 6);
    assert.ok(await alert.isHidden());
  });
});

test('a config.json whose model cannot fit this build is refused before the weights are downloaded', T, async () => {
  await withBlank(async (page, { context }) => {
    const config = JSON.parse(modelFile('config.json'));
    const huge = JSON.stringify({ ...config, n_positions: 1 << 20, n_layer: 64 });
    const { origin, served } = await otherOrigin(context, {
      '/m/config.json': huge, '/m/model.safetensors': modelFile('model.safetensors'), '/m/tokenizer.json': modelFile('tokenizer.json'),
    });
    const message = await page.evaluate(async (folder) => {
      const { Gpt2 } = await import('/gpt2.js');
      return Gpt2.load({ model: folder }).then(() => null, (e) => e.message);
    }, `${origin}/m/`);
    assert.match(message ?? 'it loaded', /needs about [\d.]+ GiB of memory.*more than the 4 GiB a wasm32 build can address/s);
    assert.deepEqual(served, ['/m/config.json'], 'more than config.json was requested');
  });
});

test('oversized or wrong files are refused by size with a sentence before they are read', T, async () => {
  await withBlank(async (page, { context }) => {
    const { origin } = await otherOrigin(context, {
      '/big/config.json': 'x'.repeat((1 << 20) + 1),
      '/portal/config.json': '<html><body>Please log in to the Wi-Fi</body></html>',
      '/portal/model.safetensors': '<html></html>', '/portal/tokenizer.json': '<html></html>',
    });
    const got = await page.evaluate(async (base) => {
      const { Gpt2 } = await import('/gpt2.js');
      const fail = (model) => Gpt2.load({ model }).then(() => null, (e) => e.message);
      const big = await fail(`${base}/big/`);
      const portal = await fail(`${base}/portal/`);
      const cache = await caches.open('gpt2-web-models-v1');
      return { big, portal, cached: (await cache.keys()).map((r) => r.url) };
    }, origin);
    assert.match(got.big ?? '', /config\.json is 1\.0 MB, more than the 1\.0 MB it may be/);
    assert.match(got.portal ?? '', /config\.json: not valid JSON/);
    assert.deepEqual(got.cached, [], 'a failed load left files in the Cache API');
  });
});

test('options are checked when generate is called, even when it would queue; stop lists are capped', T, async () => {
  await withBlank(async (page) => {
    const got = await page.evaluate(async ({ folder, prompt, prompt2 }) => {
      const { Gpt2 } = await import('/gpt2.js');
      const model = await Gpt2.load({ model: folder });
      const running = model.generate(prompt, { maxTokens: 64, ignoreEos: true });
      const t0 = performance.now();
      const bad = await model.generate(prompt2, { temperature: -1 }).then(() => null, (e) => e.message);
      const badMs = performance.now() - t0;
      const stops = await model.generate(prompt2, { stop: Array(17).fill('x') }).then(() => null, (e) => e.message);
      const first = await running;
      const tiny = await model.generate(prompt, { maxTokens: 8, temperature: 1e-39, seed: 1 });
      const greedy = await model.generate(prompt, { maxTokens: 8 });
      model.dispose();
      return { bad, badMs, stops, firstTokens: first.tokens.length, runMs: first.metrics.totalMs, tiny: tiny.tokens, greedy: greedy.tokens };
    }, { folder: `/${MODEL_URL}`, prompt: PROMPT, prompt2: PROMPT2 });
    assert.match(got.bad ?? '', /invalid temperature/);
    assert.ok(got.badMs < got.runMs, `the bad options waited for the running generation (${got.badMs} ms of ${got.runMs})`);
    assert.match(got.stops ?? '', /invalid stop: 17 stop texts; at most 16/);
    assert.equal(got.firstTokens, 64);
    assert.deepEqual(got.tiny, got.greedy, 'temperature 1e-39 is not greedy');
  });
});

test('tokenize waiting behind a step, then dispose: tokenize rejects with a sentence, the worker lives on', T, async () => {
  await withBlank(async (page) => {
    const got = await page.evaluate(async ({ folder, prompt }) => {
      const { Gpt2 } = await import('/gpt2.js');
      // A second model in the same worker, from bytes (so it is not shared with the first).
      const bytes = async (f) => (await fetch(folder + f)).arrayBuffer();
      const keep = await Gpt2.load({
        model: { config: await bytes('config.json'), weights: await bytes('model.safetensors'), tokenizer: await bytes('tokenizer.json') },
      });
      const model = await Gpt2.load({ model: folder });
      const running = model.generate(prompt, { maxTokens: 32, ignoreEos: true }).then(() => 'done', (e) => e.message);
      const tokens = model.tokenize(prompt).then((ids) => ids.length, (e) => e.message);
      model.dispose();
      const after = await keep.tokenize(prompt);
      const out = { running: await running, tokens: await tokens, after: after.length };
      keep.dispose();
      return out;
    }, { folder: `/${MODEL_URL}`, prompt: PROMPT });
    assert.match(String(got.tokens), /^\d+$|disposed/);
    assert.ok(got.after > 0, 'the other model stopped working');
    assert.match(got.running, /done|disposed/);
  });
});

test('a damaged copy in the Cache API is found by its size and checksum, dropped and downloaded again', T, async () => {
  const native = nativeGenerate(PROMPT, 8);
  await withBlank(async (page, { context }) => {
    const weights = modelFile('model.safetensors');
    const { origin, served } = await otherOrigin(context, {
      '/c/config.json': modelFile('config.json'), '/c/model.safetensors': weights, '/c/tokenizer.json': modelFile('tokenizer.json'),
    });
    const url = `${origin}/c/model.safetensors`;
    const run = (damage) => page.evaluate(async ({ folder, prompt, url, damage }) => {
      const { Gpt2 } = await import('/gpt2.js');
      const cache = await caches.open('gpt2-web-models-v1');
      if (damage) {
        const good = new Uint8Array(await (await cache.match(url)).arrayBuffer());
        // One flipped byte deep inside a tensor (the engine would take it), or a copy cut short.
        const bad = damage === 'flip' ? good.slice() : good.slice(0, good.length - 4096);
        if (damage === 'flip') bad[good.length >> 1] ^= 0x40;
        await cache.put(url, new Response(bad));
      }
      const model = await Gpt2.load({ model: folder, backend: 'cpu' });
      const r = await model.generate(prompt, { maxTokens: 8, temperature: 0 });
      model.dispose();
      const kept = new Uint8Array(await (await cache.match(url)).arrayBuffer());
      return { tokens: r.tokens, text: r.text, kept: kept.length, keys: (await cache.keys()).map((k) => k.url) };
    }, { folder: `${origin}/c/`, prompt: PROMPT, url, damage });
    const downloads = () => served.filter((p) => p === '/c/model.safetensors').length;

    const first = await run(null);
    assert.equal(first.text, native.text);
    assert.equal(downloads(), 1);
    assert.ok(first.keys.some((k) => k.includes('gpt2-web-check')), `no check was stored: ${first.keys.join(', ')}`);
    const again = await run(null);
    assert.equal(downloads(), 1, 'a good cached copy is used, not downloaded again');
    assert.equal(again.text, native.text);
    for (const damage of ['flip', 'cut']) {
      const got = await run(damage);
      assert.equal(got.text, native.text, `${damage}: the damaged copy was used`);
      assert.equal(got.kept, weights.length, `${damage}: the cache holds the good file again`);
    }
    assert.equal(downloads(), 3, 'each damaged copy was downloaded again, once');
  });
});
