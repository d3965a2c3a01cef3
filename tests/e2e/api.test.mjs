// The JS API (www/gpt2.js → www/api/gpt2.js) called directly in a blank page of the same origin: progress, errors as
// sentences, option checks, queueing, the Cache API and dispose (greedy text, the model as bytes
// and AbortSignal: engines.test.mjs, in every engine).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import {
  serveAndLaunch, freePort, ROOT, withPage, nativeGenerate, nativeTokenize, assertTokenEvents, MODEL_URL, MODEL_DIR, MODEL_CONFIG,
  PROMPT, PROMPT2,
} from './harness.mjs';

const T = { timeout: 120_000 };
const env = serveAndLaunch();

/** A blank document on the server's origin (so /gpt2.js and its worker load from there). */
async function withBlank(fn) {
  const url = `${env.server.origin}/__api-test.html`;
  await withPage(env.browser, 'about:blank', async (page, session) => {
    await page.route(url, (route) => route.fulfill({ contentType: 'text/html', body: '<!doctype html><title>API test</title>' }));
    await page.goto(url);
    await fn(page, session);
  });
}

test('a folder URL without its slash loads with progress; load failures reject with a sentence', T, async () => {
  const weightsSize = fs.statSync(path.join(MODEL_DIR, 'model.safetensors')).size;
  await withBlank(async (page) => {
    const got = await page.evaluate(async ({ folder }) => {
      const { Gpt2 } = await import('/gpt2.js');
      const progress = [];
      const model = await Gpt2.load({ model: folder.replace(/\/$/, ''), onProgress: (p) => progress.push(p) });
      const name = model.name;
      model.dispose();
      const failure = async (opts) => {
        try {
          await Gpt2.load(opts);
          return null;
        } catch (e) {
          return e instanceof Error ? e.message : `not an Error: ${e}`;
        }
      };
      const bytes = async (f) => (await fetch(folder + f)).arrayBuffer();
      const [config, tokenizer] = [await bytes('config.json'), await bytes('tokenizer.json')];
      return {
        name, progress,
        missing: await failure({ model: './models/nope' }), // relative, without its slash (models/nope would be a Hub id)
        corrupt: await failure({ model: { config, weights: new Uint8Array(16), tokenizer } }),
        badConfig: await failure({ model: { config: new TextEncoder().encode('{"n_layer": '), weights: new Uint8Array(16), tokenizer } }),
        notBytes: await failure({ model: { config, weights: 'model.safetensors', tokenizer } }),
        backend: await failure({ model: folder, backend: 'tpu' }),
      };
    }, { folder: `/${MODEL_URL}` });
    assert.equal(got.name, `${env.server.origin}/${MODEL_URL}`);
    const weights = got.progress.filter((p) => p.file === 'model.safetensors');
    assert.ok(weights.length >= 2, 'no progress for the weights');
    assert.deepEqual({ loaded: weights.at(-1).loaded, total: weights.at(-1).total }, { loaded: weightsSize, total: weightsSize });
    for (let i = 1; i < weights.length; i++) assert.ok(weights[i].loaded >= weights[i - 1].loaded);
    assert.match(got.missing, /\/models\/nope\/config\.json/);
    assert.match(got.missing, /404/);
    assert.match(got.corrupt, /model\.safetensors/);
    assert.match(got.badConfig, /config\.json/);
    assert.match(got.notBytes, /weights/);
    assert.match(got.backend, /backend/);
    for (const msg of [got.missing, got.corrupt, got.badConfig, got.notBytes, got.backend]) {
      assert.ok(!/unreachable|undefined|\[object/.test(msg), `not a sentence: ${msg}`);
    }
  });
});

test('load options: each checked by its table, an unknown one refused naming the known ones; a signal aborts the download, the build and the warm-up with an AbortError, and the worker stops the load', T, async () => {
  await withBlank(async (page) => {
    const got = await page.evaluate(async ({ folder }) => {
      // Every worker the page starts, and the worker's replies to the loads.
      const replies = [];
      const Native = window.Worker;
      window.Worker = class extends Native {
        constructor(url, options) {
          super(url, options);
          this.addEventListener('message', ({ data }) => { if (data?.type === 'error' || data?.type === 'done') replies.push(data); });
        }
      };
      const { Gpt2 } = await import('/gpt2.js');
      const message = (p) => p.then(() => 'loaded', (e) => `${e.name}: ${e.message}${e.code ? ` (${e.code})` : ''}`);
      const out = {
        unknown: await message(Gpt2.load({ model: folder, bakend: 'cpu' })),
        signalType: await message(Gpt2.load({ model: folder, signal: 'stop' })),
        threads: await message(Gpt2.load({ model: folder, threads: 65 })),
        build: await message(Gpt2.load({ model: folder, build: 'pkg-simd' })),
      };
      // Aborted before the call: nothing is sent.
      out.before = await message(Gpt2.load({ model: folder, signal: AbortSignal.abort() }));
      out.repliesBefore = replies.length;
      // Aborted at once, at the weights' first bytes, and when they are all in (the build and
      // warm-up): each call rejects with an AbortError and the worker ends its load.
      const abortAt = async (when) => {
        const controller = new AbortController();
        const p = Gpt2.load({
          model: folder, signal: controller.signal,
          onProgress: ({ file, loaded, total }) => {
            if (file !== 'model.safetensors') return;
            if (when === 'download' || (when === 'warm-up' && loaded === total && total > 0)) controller.abort();
          },
        });
        if (when === 'now') controller.abort();
        return message(p);
      };
      for (const when of ['now', 'download', 'warm-up']) out[when] = await abortAt(when);
      await new Promise((resolve) => setTimeout(resolve, 500)); // the worker's replies to the aborts
      out.replies = replies.map((r) => (r.type === 'error' ? r.code : 'done'));
      // The model loads afterwards and runs.
      const m = await Gpt2.load({ model: folder });
      out.after = (await m.generate('ROMEO:', { maxTokens: 3, temperature: 0 })).tokens.length;
      m.dispose();
      return out;
    }, { folder: `/${MODEL_URL}` });
    assert.match(got.unknown, /^Error: unknown load option "bakend"; the load options are model, revision, file, hubHost, backend, dtype, threads, memoryLimit, build, kernel, raceSoftwareGpu, onProgress, onBackendChange, signal \(param\)$/);
    assert.equal(got.signalType, 'Error: the signal option must be an AbortSignal (param)');
    assert.equal(got.threads, 'Error: invalid threads: 65 is not a whole number from 1 to 64 (param)');
    assert.equal(got.build, 'Error: unknown build "pkg-simd"; choose pkg, pkg-relaxed, pkg-threads (param)');
    assert.match(got.before, /^AbortError: /);
    assert.equal(got.repliesBefore, 0, 'an aborted signal sends nothing');
    for (const when of ['now', 'download', 'warm-up']) assert.match(got[when], /^AbortError: /, when);
    // Each aborted load ends in the worker: stopped ('abort'), or, when it had finished first, handed out and disposed.
    assert.ok(got.replies.length >= 3 && got.replies.every((r) => r === 'abort' || r === 'done'), got.replies.join());
    assert.equal(got.replies[0], 'abort', 'a load aborted at once is stopped in the worker');
    assert.equal(got.after, 3);
  });
});

test('invalid options and prompts reject with a sentence naming the problem; the model keeps working', T, async () => {
  await withBlank(async (page) => {
    const got = await page.evaluate(async ({ prompt, folder, long }) => {
      const { Gpt2 } = await import('/gpt2.js');
      const model = await Gpt2.load({ model: folder });
      const codes = {};
      let n = 0;
      const failure = async (p, opts) => {
        const k = n++;
        try {
          await model.generate(p, opts);
          return null;
        } catch (e) {
          codes[k] = e?.code ?? null;
          return e instanceof Error ? e.message : `not an Error: ${e}`;
        }
      };
      const out = {
        temperature: await failure(prompt, { temperature: -1 }),
        unknown: await failure(prompt, { foo: 1 }),
        fraction: await failure(prompt, { maxTokens: 1.5 }),
        zero: await failure(prompt, { maxTokens: 0 }),
        topP: await failure(prompt, { topP: 2 }),
        stop: await failure(prompt, { stop: 5 }),
        type: await failure(prompt, { temperature: '0.5' }),
        nan: await failure(prompt, { temperature: NaN }),
        func: await failure(prompt, { seed: () => 1 }),
        long: await failure(long, { maxTokens: 4 }),
        prompt: await failure(42, {}),
        callback: await failure(prompt, { maxTokens: 20, onToken: () => { throw new Error('boom in onToken'); } }),
      };
      out.after = await model.generate(prompt, { maxTokens: 3, ignoreEos: true });
      model.dispose();
      return { ...out, codes: Object.fromEntries(Object.keys(out).filter((k) => k !== 'after').map((k, i) => [k, codes[i] ?? null])) };
    }, { prompt: PROMPT, folder: `/${MODEL_URL}`, long: `${PROMPT} `.repeat(MODEL_CONFIG.n_positions + 8) });
    // Each carries its kind (gpt2.d.ts Gpt2Error): refused options 'param' (in gpt2.js or by the
    // engine), the prompt over the context 'prompt_too_long'; the callback's own error none.
    const { codes } = got;
    delete got.codes;
    assert.deepEqual(codes, {
      temperature: 'param', unknown: 'param', fraction: 'param', zero: 'param', topP: 'param', stop: 'param',
      type: 'param', nan: 'param', func: 'param', long: 'prompt_too_long', prompt: 'param', callback: null,
    });
    assert.match(got.temperature, /temperature/);
    assert.match(got.unknown, /"foo"/);
    assert.match(got.fraction, /maxTokens/);
    assert.match(got.zero, /max.?tokens/i);
    assert.match(got.topP, /top.?p/i);
    assert.match(got.stop, /stop/);
    assert.match(got.type, /temperature/);
    assert.match(got.nan, /temperature: NaN is not a number/);
    assert.match(got.func, /^invalid options: /);
    assert.match(got.long, /context/);
    assert.match(got.prompt, /prompt/);
    assert.equal(got.callback, 'boom in onToken');
    for (const [k, msg] of Object.entries(got)) {
      if (k !== 'after') assert.ok(msg.length > 12 && !/unreachable|\[object/.test(msg), `${k}: not a sentence: ${msg}`);
    }
    assert.equal(got.after.tokens.length, 3);
  });
});

test('a generate that cannot share steps (beams) runs alone and the next waits; plain ones share steps; an aborted queued one resolves at once', T, async () => {
  await withBlank(async (page) => {
    const got = await page.evaluate(async ({ folder, prompt, prompt2 }) => {
      const { Gpt2 } = await import('/gpt2.js');
      const model = await Gpt2.load({ model: folder });
      const order = [];
      const opts = (tag) => ({ maxTokens: 10, ignoreEos: true, onToken: (e) => order.push(`${tag}${e.index}`) });
      const p1 = model.generate(prompt, { ...opts('a'), numBeams: 2, temperature: 0 }); // beams run alone
      const p2 = model.generate(prompt2, opts('b')); // waits for them
      const [r1, r2] = await Promise.all([p1, p2]);
      const solo = await model.generate(prompt2, { maxTokens: 10, ignoreEos: true });
      // Two plain generations at once run as one batch: their tokens come step by step, in turn.
      const shared = [];
      await Promise.all(['a', 'b'].map((tag) => model.generate(prompt, {
        maxTokens: 10, ignoreEos: true, onToken: () => shared.push(tag),
      })));

      // A queued request aborted while the first runs resolves before the first ends.
      const settled = [];
      const ctrl = new AbortController();
      const p3 = model.generate(prompt, { maxTokens: 40, ignoreEos: true }).then((r) => { settled.push('running'); return r; });
      const p4 = model.generate(prompt, { maxTokens: 40, signal: ctrl.signal }).then((r) => { settled.push('queued'); return r; });
      ctrl.abort();
      const [r3, r4] = await Promise.all([p3, p4]);

      // Dispose ends a running generation (it rejects) and later calls reject.
      const disposedRunning = await model.generate(prompt, {
        maxTokens: 40, ignoreEos: true, onToken: (e) => { if (e.index === 2) model.dispose(); },
      }).then(() => 'resolved', (e) => e.message);
      const disposedLater = await model.generate(prompt).catch((e) => e.message);
      return { order, shared: shared.join(''), r1, r2, solo, settled, r3, r4, disposedRunning, disposedLater };
    }, { folder: `/${MODEL_URL}`, prompt: PROMPT, prompt2: PROMPT2 });
    const expected = [...Array(10).keys()].map((i) => `a${i}`).concat([...Array(10).keys()].map((i) => `b${i}`));
    assert.deepEqual(got.order, expected);
    assert.ok(got.shared.length === 20 && got.shared.lastIndexOf('a') > got.shared.indexOf('b'),
      `two plain generations did not share their steps: ${got.shared}`);
    assert.equal(got.r1.tokens.length, 10);
    assert.equal(got.r2.text, got.solo.text);
    assert.deepEqual(got.r2.tokens, got.solo.tokens);
    assert.deepEqual(got.settled, ['queued', 'running']);
    assert.equal(got.r3.tokens.length, 40);
    assert.equal(got.r4.stopReason, 'abort');
    assert.ok(got.r4.tokens.length <= 1, `${got.r4.tokens.length} tokens after an abort before it ran`);
    assert.match(got.disposedRunning, /disposed/);
    assert.match(got.disposedLater, /disposed/);
  });
});

test('more requests than may wait for a model are refused with code busy and a sentence; the others finish', T, async () => {
  await withBlank(async (page) => {
    const got = await page.evaluate(async ({ folder, prompt }) => {
      const { Gpt2 } = await import('/gpt2.js');
      const model = await Gpt2.load({ model: folder });
      // 24 requests of 16 choices each: 384 sequences posted at once, more than 256 may wait.
      const settled = await Promise.allSettled(Array.from({ length: 24 }, (_, i) =>
        model.generate(prompt, { maxTokens: 2, n: 16, seed: i, temperature: 0.8 })));
      const after = await model.generate(prompt, { maxTokens: 3, ignoreEos: true });
      model.dispose();
      return {
        ok: settled.filter((s) => s.status === 'fulfilled').map((s) => s.value.choices.length),
        refused: settled.filter((s) => s.status === 'rejected').map((s) => ({ code: s.reason.code, message: s.reason.message })),
        after: after.tokens.length,
      };
    }, { folder: `/${MODEL_URL}`, prompt: PROMPT });
    assert.ok(got.refused.length > 0, 'no request was refused');
    assert.ok(got.ok.length > 0 && got.ok.every((n) => n === 16), JSON.stringify(got.ok));
    assert.equal(got.ok.length + got.refused.length, 24);
    for (const r of got.refused) {
      assert.equal(r.code, 'busy');
      assert.match(r.message, /^\d+ requests are waiting for this model already and at most 256 may wait; try again when some have finished$/);
    }
    assert.equal(got.after, 3, 'the model did not work after refusing');
  });
});

test('files from another origin are kept in the Cache API, so a second load works with that server gone', T, async () => {
  // Another origin on 127.0.0.1: a port nobody listens on, answered by the test (with CORS) until it is "gone".
  const other = `http://127.0.0.1:${await freePort()}`;
  const folder = `${other}/${MODEL_URL}`;
  await withBlank(async (page, { context }) => {
    const served = [];
    await context.route(`${other}/**`, async (route) => {
      const { pathname } = new URL(route.request().url());
      const body = fs.readFileSync(path.join(ROOT, 'www', decodeURIComponent(pathname)));
      served.push(pathname);
      await route.fulfill({ body, headers: { 'Access-Control-Allow-Origin': '*', 'Content-Type': 'application/octet-stream' } });
    });
    const run = (f) => page.evaluate(async ({ folder, prompt }) => {
      const { Gpt2 } = await import('/gpt2.js');
      const progress = [];
      const model = await Gpt2.load({ model: folder, onProgress: (p) => progress.push(p) });
      const r = await model.generate(prompt, { maxTokens: 8 });
      model.dispose();
      return { text: r.text, cached: progress.filter((p) => !p.plan).map((p) => p.cached) }; // the plan downloads nothing
    }, { folder: f, prompt: PROMPT });
    const first = await run(folder);
    assert.equal(served.length, 3);
    assert.ok(first.cached.every((c) => c === false));
    await context.unroute(`${other}/**`);
    const second = await run(folder);
    assert.equal(served.length, 3, 'the second load went to the network');
    assert.ok(second.cached.length > 0 && second.cached.every((c) => c === true));
    assert.equal(second.text, first.text);
    const gone = await page.evaluate(async (f) => {
      const { Gpt2 } = await import('/gpt2.js');
      return Gpt2.load({ model: f }).then(() => null, (e) => e.message);
    }, `${other}/models/never-cached/`);
    assert.match(gone, /never-cached\/config\.json: network error/);
  });
});
