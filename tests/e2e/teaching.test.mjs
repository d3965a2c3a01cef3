// Teaching (issue 30): the low-level API (model.logits, decode, eosTokenId, the helpers) gives
// generate's greedy tokens; the completions facade gives OpenAI-shaped results and chunks that
// match generate; the code lab runs its loops in a sandbox, reports errors with their line, stops
// a runaway loop and cannot read the API key; the API lab measures a test server's known
// TTFT/TPOT and says what went wrong for each failure; the loop diagram follows a generation.
// Screenshots of the three new parts go to docs/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { serveAndLaunch, withPage, screenshotPath, PROMPT } from './harness.mjs';
import { startOpenAiServer } from './openai-server.mjs';

const T = { timeout: 240_000 };
const env = serveAndLaunch();
let api;
before(async () => { api = await startOpenAiServer(); });
after(async () => { await api?.close(); });

async function ready(page) {
  await page.waitForFunction(() => window.pageState === 'ready', null, { timeout: 90_000 });
}

/** Loads the demo model in a bare page and runs `fn(m, gpt2)` there. */
function inModel(page, fn, arg, { dtype = 'q8' } = {}) {
  return page.evaluate(async ({ src, arg, dtype }) => {
    const gpt2 = await import('/gpt2.js');
    const m = await gpt2.Gpt2.load({ backend: 'cpu', dtype });
    try {
      // eslint-disable-next-line no-new-func
      return await new Function('m', 'gpt2', 'arg', `return (${src})(m, gpt2, arg);`)(m, gpt2, arg);
    } finally {
      m.dispose();
    }
  }, { src: fn.toString(), arg, dtype });
}

test('a loop written with model.logits and argmax gives generate\'s greedy tokens, in q8 and f32', T, async () => {
  await withPage(env.browser, `${env.server.origin}/embed.html`, async (page) => {
    for (const dtype of ['q8', 'f32']) {
      const got = await inModel(page, async (m, { argmax }, prompt) => {
        const want = (await m.generate(prompt, { maxTokens: 30, temperature: 0 })).tokens;
        const ids = await m.tokenize(prompt);
        const start = ids.length;
        const calls = [];
        for (let i = 0; i < 30; i++) {
          const logits = await m.logits(ids);
          calls.push({ ...m.lastCall, length: logits.length });
          const next = argmax(logits);
          ids.push(next);
          if (next === m.eosTokenId) break;
        }
        const naive = await m.tokenize(prompt);
        for (let i = 0; i < 30; i++) {
          const next = argmax(await m.logits(naive, { cache: false }));
          naive.push(next);
          if (next === m.eosTokenId) break;
        }
        return {
          want, got: ids.slice(start), naive: naive.slice(start), calls, vocab: m.config.vocabSize, eos: m.eosTokenId,
          text: await m.decode(ids.slice(start)), wantText: (await m.generate(prompt, { maxTokens: 30, temperature: 0 })).text,
        };
      }, PROMPT, { dtype });
      assert.deepEqual(got.got, got.want, dtype);
      assert.deepEqual(got.naive, got.want, `${dtype} without the cache`);
      assert.equal(got.text, got.wantText);
      assert.equal(got.eos, 50256);
      assert.ok(got.calls.every((c) => c.length === got.vocab && c.ms > 0 && c.engineMs > 0), JSON.stringify(got.calls[0]));
      assert.ok(got.calls[0].positions > 1 && got.calls[0].reused === 0, 'the prompt runs whole');
      assert.ok(got.calls.slice(1).every((c, i) => c.positions === 1 && c.reused === got.calls[0].positions + i), 'one new position per step');
    }
  });
});

test('the helpers: softmax, topK, topP, sample and rng behave, and bad calls are sentences', T, async () => {
  await withPage(env.browser, `${env.server.origin}/embed.html`, async (page) => {
    const r = await page.evaluate(async () => {
      const { argmax, softmax, topK, topP, sample, rng, Gpt2 } = await import('/gpt2.js');
      const p = softmax([1, 2, 3, 0]);
      const sum = (a) => a.reduce((s, x) => s + x, 0);
      const draws = (seed) => { const r = rng(seed); return Array.from({ length: 5 }, () => r()); };
      const m = await Gpt2.load({ backend: 'cpu' });
      const fail = (f) => f().then(() => 'resolved', (e) => `${e.code}: ${e.message}`);
      const errors = [
        await fail(() => m.logits([])), await fail(() => m.logits([1, 1e9])), await fail(() => m.logits('abc')),
        await fail(() => m.logits(new Array(m.config.nPositions + 1).fill(1))), await fail(() => m.logits([1], { cache: 'yes' })),
        await fail(() => m.decode([-1])),
      ];
      const after = (await m.logits([464, 1110])).length; // still works
      m.dispose();
      return {
        argmax: argmax([0, 5, 5, 1]), sum: sum(p), order: Array.from(p).map((x) => +x.toFixed(4)),
        greedy: Array.from(softmax([1, 3, 2], 0)), k: Array.from(topK(p, 2)).map((x) => +x.toFixed(4)),
        nucleus: Array.from(topP(Float32Array.from([0.5, 0.3, 0.2]), 0.8)), same: draws(7).join() === draws(7).join(),
        differ: draws(7).join() !== draws(8).join(), picked: sample(Float32Array.from([0, 0, 1, 0]), rng(1)),
        inRange: draws(3).every((x) => x >= 0 && x < 1), errors, after, vocab: m.config.vocabSize,
        badTopP: (() => { try { topP(p, 0); return 'no error'; } catch (e) { return e.message; } })(),
      };
    });
    assert.equal(r.argmax, 1);
    assert.ok(Math.abs(r.sum - 1) < 1e-6);
    assert.deepEqual(r.greedy, [0, 1, 0]);
    assert.deepEqual(r.k, [0, 0.2689, 0.7311, 0]);
    assert.deepEqual(r.nucleus.map((x) => +x.toFixed(3)), [0.625, 0.375, 0]);
    assert.ok(r.same && r.differ && r.inRange);
    assert.equal(r.picked, 2);
    assert.match(r.badTopP, /topP: p 0 is not in/);
    assert.match(r.errors[0], /^param: logits needs at least one token id/);
    assert.match(r.errors[1], /^param: logits: 1000000000 is not a token id/);
    assert.match(r.errors[2], /^param: logits needs an array of token ids/);
    assert.match(r.errors[3], /^prompt_too_long: logits: \d+ ids do not fit the model's context/);
    assert.match(r.errors[4], /^param: the cache option must be true or false/);
    assert.match(r.errors[5], /^param: decode: -1 is not a token id/);
    assert.equal(r.after, r.vocab);
  });
});

test('completions.create gives OpenAI-shaped results and chunks that match generate', T, async () => {
  await withPage(env.browser, `${env.server.origin}/embed.html`, async (page) => {
    const r = await inModel(page, async (m, _g, prompt) => {
      const want = await m.generate(prompt, { maxTokens: 20, temperature: 0 });
      const one = await m.completions.create({ model: 'gpt-3.5-turbo-instruct', prompt, max_tokens: 20, temperature: 0 });
      const stream = await m.completions.create({ prompt, max_tokens: 20, temperature: 0, stream: true, stream_options: { include_usage: true } });
      const chunks = [];
      for await (const c of stream) chunks.push(c);
      const sampled = async () => (await m.completions.create({ prompt, max_tokens: 12, temperature: 0.9, top_p: 0.9, seed: 5 })).choices[0].text;
      const seeded = [await sampled(), await sampled()];
      const gen = await m.generate(prompt, { maxTokens: 12, temperature: 0.9, topP: 0.9, seed: 5 });
      const stopped = await m.completions.create({ prompt, max_tokens: 40, temperature: 0, stop: want.text.slice(5, 8) });
      const early = await m.completions.create({ prompt, max_tokens: 200, temperature: 0, stream: true });
      let n = 0;
      for await (const c of early) { if (++n === 3) break; }
      const after = await m.completions.create({ prompt, max_tokens: 2, temperature: 0 });
      const fail = (b) => m.completions.create(b).then(() => 'resolved', (e) => e.message);
      const errors = [await fail({ prompt, n: 2 }), await fail({ prompt, max_tokens: 0 }), await fail({ prompt: 5 }),
        await fail({ prompt, temperature: 3 }), await fail({ prompt, frequency_penalty: 0.5 }), await fail({ prompt, wat: 1 })];
      const controller = new AbortController();
      const aborted = m.completions.create({ prompt, max_tokens: 300, temperature: 0 }, { signal: controller.signal });
      setTimeout(() => controller.abort(), 30);
      const abortName = await aborted.then(() => 'resolved', (e) => e.name);
      return { want, one, chunks, seeded, gen: gen.text, stopped, after, errors, abortName, stopText: want.text.slice(5, 8) };
    }, PROMPT);
    assert.equal(r.one.object, 'text_completion');
    assert.equal(r.one.choices.length, 1);
    assert.equal(r.one.choices[0].text, r.want.text);
    assert.equal(r.one.choices[0].finish_reason, r.want.stopReason === 'eos' ? 'stop' : 'length');
    assert.deepEqual(r.one.usage, { prompt_tokens: r.want.metrics.promptTokens, completion_tokens: r.want.tokens.length, total_tokens: r.want.metrics.promptTokens + r.want.tokens.length });
    assert.ok(/^cmpl-/.test(r.one.id) && Number.isInteger(r.one.created));
    const tokens = r.chunks.filter((c) => c.choices.length && c.choices[0].finish_reason === null);
    assert.equal(tokens.length, r.want.tokens.length, 'one chunk per generated token');
    assert.equal(tokens.map((c) => c.choices[0].text).join(''), r.want.text);
    const last = r.chunks.at(-2);
    assert.equal(last.choices[0].finish_reason, r.one.choices[0].finish_reason);
    assert.deepEqual(r.chunks.at(-1).choices, []);
    assert.deepEqual(r.chunks.at(-1).usage, r.one.usage);
    assert.ok(r.chunks.every((c) => c.object === 'text_completion' && c.id === r.chunks[0].id));
    assert.equal(r.seeded[0], r.seeded[1], 'a seed repeats');
    assert.equal(r.seeded[0], r.gen, 'the same options as generate');
    assert.equal(r.stopped.choices[0].finish_reason, 'stop');
    assert.ok(!r.stopped.choices[0].text.includes(r.stopText));
    assert.equal(r.after.choices[0].text.length > 0, true, 'the model works after a break out of a stream');
    assert.match(r.errors[0], /n 2 is not supported/);
    assert.match(r.errors[1], /max_tokens 0 is not a whole number/);
    assert.match(r.errors[2], /prompt must be a string/);
    assert.match(r.errors[3], /temperature 3 is not a number from 0 to 2/);
    assert.match(r.errors[4], /frequency_penalty 0.5 is not supported/);
    assert.match(r.errors[5], /unknown parameter "wat"/);
    assert.equal(r.abortName, 'AbortError');
  });
});
