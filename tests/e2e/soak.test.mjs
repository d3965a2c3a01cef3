// A soak in the browser: GPT2_SOAK generations in a row (default 200) on one model through the
// API, with mixed options (greedy and sampled, stop texts, some aborted), recording the worker's
// wasm memory and the page's JS heap (after a forced GC) after each. After a warm-up both must
// stay flat (within 5%), and no generation may lose or duplicate a token event.
// `./build.sh soak N` runs it with N generations.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, launch, withPage, MODEL_URL, PROMPT, PROMPT2 } from './harness.mjs';

const N = Number(process.env.GPT2_SOAK || 200);
const WARMUP = Math.min(20, Math.floor(N / 5));
const env = {};

before(async () => {
  env.server = await startServer();
  env.browser = await launch(['--js-flags=--expose-gc']); // window.gc(), so the heap figure is live objects only
});
after(async () => {
  await env.browser?.close();
  await env.server?.close();
});

test(`soak: ${N} generations, memory flat after ${WARMUP}, every token event once`, { timeout: 60_000 + N * 2_000 }, async () => {
  const url = `${env.server.origin}/__soak.html`;
  await withPage(env.browser, 'about:blank', async (page) => {
    await page.route(url, (route) => route.fulfill({ contentType: 'text/html', body: '<!doctype html><title>soak</title>' }));
    await page.goto(url);
    const got = await page.evaluate(async ({ folder, prompts, n }) => {
      const { Gpt2 } = await import('/gpt2.js');
      const model = await Gpt2.load({ model: folder });
      const rows = [];
      const problems = [];
      for (let i = 0; i < n; i++) {
        const ctrl = new AbortController();
        const abortAt = i % 7 === 3 ? 2 + (i % 5) : -1;
        const options = {
          maxTokens: 8 + (i % 24), seed: i, signal: ctrl.signal,
          ...(i % 2 ? { temperature: 0.9, topK: 40 } : {}),
          ...(i % 5 === 1 ? { stop: ['\n\n', '.'] } : {}),
        };
        const events = [];
        const r = await model.generate(prompts[i % prompts.length], {
          ...options,
          onToken: (e) => {
            events.push(e);
            if (e.index === abortAt) ctrl.abort();
          },
        });
        const indexes = events.map((e) => e.index).join();
        if (indexes !== r.tokens.map((_, k) => k).join()) problems.push(`run ${i}: events ${indexes} for ${r.tokens.length} tokens`);
        if (events.map((e) => e.id).join() !== r.tokens.join()) problems.push(`run ${i}: event ids differ from result.tokens`);
        if (events.map((e) => e.text).join('') !== r.text) problems.push(`run ${i}: event texts differ from result.text`);
        // The abort lands within one step: at most one token after the one that asked for it.
        if (abortAt >= 0 && r.stopReason !== 'abort' && r.tokens.length > abortAt + 2) problems.push(`run ${i}: not aborted`);
        window.gc();
        rows.push({ wasm: (await model.memory()).wasmBytes, heap: performance.memory.usedJSHeapSize, tokens: r.tokens.length, stop: r.stopReason });
      }
      model.dispose();
      return { rows, problems };
    }, { folder: `/${MODEL_URL}`, prompts: [PROMPT, PROMPT2, '', 'The'], n: N });
    assert.deepEqual(got.problems, []);
    const after = got.rows.slice(WARMUP);
    const span = (k) => {
      const v = after.map((r) => r[k]);
      return { min: Math.min(...v), max: Math.max(...v) };
    };
    const wasm = span('wasm');
    const heap = span('heap');
    const reasons = {};
    for (const r of got.rows) (reasons[r.stop] ??= []).push(r);
    console.log(`soak: ${N} generations, ${got.rows.reduce((s, r) => s + r.tokens, 0)} tokens, stop reasons ` +
      `${Object.entries(reasons).map(([k, v]) => `${k} ${v.length}`).join(', ')}; after ${WARMUP}: ` +
      `wasm memory ${(wasm.min / 1e6).toFixed(2)}–${(wasm.max / 1e6).toFixed(2)} MB, ` +
      `JS heap ${(heap.min / 1e6).toFixed(2)}–${(heap.max / 1e6).toFixed(2)} MB`);
    assert.ok(wasm.min > 0, 'the wasm memory was not measured');
    assert.ok(wasm.max <= wasm.min * 1.05, `the wasm memory grew: ${wasm.min} → ${wasm.max} bytes`);
    assert.ok(heap.max <= heap.min * 1.05, `the JS heap grew: ${heap.min} → ${heap.max} bytes`);
    assert.ok(reasons.abort?.length > 0 && reasons.stop?.length > 0, `not every kind of run happened: ${Object.keys(reasons)}`);
  });
});
