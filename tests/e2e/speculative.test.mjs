// Speculative decoding and the naive loop (kvCache: false) in the browser: the API's draft option gives the plain greedy text with fewer
// model steps, one onToken per token with `drafted` marking kept draft tokens; bad draft options are
// sentences; the page's lab shows the two side by side.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { serveAndLaunch, withPage, screenshotPath, MODEL_URL } from './harness.mjs';

const T = { timeout: 120_000 };
const env = serveAndLaunch();
const REFRAIN = 'DESDEMONA:\nSing willow, willow, willow: sing all a green willow.\n'.repeat(3) + 'Sing willow,';

test('draft: prompt-lookup gives the plain greedy text in fewer model steps, one event per token', T, async () => {
  await withPage(env.browser, `${env.server.origin}/embed.html`, async (page) => {
    const got = await page.evaluate(async ({ model, prompt }) => {
      const { Gpt2 } = await import('/gpt2.js');
      const m = await Gpt2.load({ model, backend: 'cpu' });
      const opts = { maxTokens: 48, temperature: 0, ignoreEos: true };
      const plain = await m.generate(prompt, opts);
      const events = [];
      const spec = await m.generate(prompt, { ...opts, draft: 'prompt-lookup', draftTokens: 6, onToken: (e) => events.push(e) });
      const errors = [];
      for (const bad of [{ draft: 'tea-leaves' }, { draftTokens: 0 }, { draftTokens: 99 }, { draft: 3 }]) {
        errors.push(await m.generate(prompt, bad).then(() => 'resolved', (e) => e.message));
      }
      m.dispose();
      return { plain, spec, events, errors };
    }, { model: `/${MODEL_URL}`, prompt: REFRAIN });
    assert.deepEqual(got.spec.tokens, got.plain.tokens, 'speculative greedy differs from plain greedy');
    assert.equal(got.spec.text, got.plain.text);
    assert.equal(got.events.length, got.spec.tokens.length, 'one onToken per token');
    assert.equal(got.events.map((e) => e.text).join(''), got.spec.text);
    const m = got.spec.metrics;
    assert.equal(got.events.filter((e) => e.drafted).length, m.acceptedDraftTokens);
    assert.ok(m.targetForwards < m.outputTokens, `${m.targetForwards} forwards for ${m.outputTokens} tokens`);
    assert.equal(got.plain.metrics.targetForwards, got.plain.metrics.outputTokens);
    assert.match(got.errors[0], /invalid draft: "tea-leaves"; expected prompt-lookup, mtp or none/);
    assert.match(got.errors[1], /invalid draftTokens: 0 is not in 1\.\.=15/);
    assert.match(got.errors[2], /invalid draftTokens: 99 is not in 1\.\.=15/);
    assert.match(got.errors[3], /invalid draft: 3 is not a string/);
  });
});

test('the lab "more than one token per step" drafts three ways: the same text, kept drafts per position, the speed', T, async () => {
  await withPage(env.browser, `${env.server.origin}/`, async (page) => {
    await page.waitForFunction(() => window.pageState === 'ready', null, { timeout: 60_000 });
    await page.fill('#prompt', REFRAIN);
    await page.fill('#spec-tokens', '48');
    await page.selectOption('#spec-method', 'prompt-lookup');
    await page.click('#spec-run');
    await page.waitForFunction(() => window.speculativeLab || !document.getElementById('error').hidden, null, { timeout: 90_000 });
    const lab = await page.evaluate(() => window.speculativeLab);
    assert.ok(lab, await page.locator('#error').innerText());
    assert.ok(lab.identical, 'the lab says the texts differ');
    const [lookup, mtp, draftModel] = lab.rows;
    assert.deepEqual(lab.rows.map((r) => r.method), ['prompt-lookup', 'mtp', 'model']);
    // The demo model ships heads (its GGUF carries them); it is the smallest, so no draft model.
    assert.ok(!mtp.why && mtp.drafted > 0 && mtp.identical, JSON.stringify(mtp));
    assert.match(draftModel.why, /the demo model is the smallest here/);
    for (const r of [lookup, mtp]) {
      assert.ok(r.byPosition.length === 3 && r.byPosition[0] >= r.byPosition[1] && r.byPosition[1] >= r.byPosition[2], JSON.stringify(r));
    }
    assert.ok(lab.steps.some((n) => n > 1), `no step gave more than one token: ${lab.steps}`);
    assert.equal(lab.steps.reduce((a, b) => a + b, 0), lab.plain.outputTokens);
    assert.ok(await page.locator('#spec-output .drafted').count() > 0, 'no kept draft token is highlighted');
    assert.equal(await page.locator('#spec-plain').innerText(), await page.locator('#spec-output').innerText());
    assert.equal(await page.locator('#spec-methods tbody tr').count(), 4);
    const summary = await page.locator('#spec-summary').innerText();
    assert.match(summary, /The same text every way\. Plain: 48 tokens in 48 model steps/);
    // The lab forces the heads, so this browser's verdict on them (none yet on a fresh profile) is a sentence.
    assert.match(summary, /The heads' verdict in this browser is not measured yet: the first generations with draft 'mtp' time/);
    await page.locator('#spec-h').scrollIntoViewIfNeeded();
    await page.locator('section[aria-labelledby="spec-h"]').screenshot({ path: screenshotPath('speculative-lab.png') });
  });
});

test('a loaded model as the draft gives the plain greedy text; itself or a disposed one is a sentence', T, async () => {
  await withPage(env.browser, `${env.server.origin}/embed.html`, async (page) => {
    const got = await page.evaluate(async ({ model, prompt }) => {
      const { Gpt2 } = await import('/gpt2.js');
      const target = await Gpt2.load({ model, backend: 'cpu', dtype: 'f32' });
      const draft = await Gpt2.load({ model, backend: 'cpu', dtype: 'q8' });
      const opts = { maxTokens: 32, temperature: 0, ignoreEos: true };
      const plain = await target.generate(prompt, opts);
      const events = [];
      const spec = await target.generate(prompt, { ...opts, draft, onToken: (e) => events.push(e) });
      const fail = (o) => target.generate(prompt, o).then(() => 'resolved', (e) => e.message);
      const errors = [await fail({ draft: target }), await fail({ draft: 'model' })];
      draft.dispose();
      errors.push(await fail({ draft }));
      target.dispose();
      return { plain, spec, events, errors };
    }, { model: `/${MODEL_URL}`, prompt: REFRAIN });
    assert.deepEqual(got.spec.tokens, got.plain.tokens, 'greedy with a draft model differs from plain');
    assert.equal(got.events.length, got.spec.tokens.length);
    const m = got.spec.metrics;
    assert.ok(m.acceptedDraftTokens > 0 && m.targetForwards < m.outputTokens, JSON.stringify(m));
    assert.match(got.errors[0], /the draft model is this model/);
    assert.match(got.errors[1], /pass the loaded draft model itself/);
    assert.match(got.errors[2], /the draft model has been disposed/);
  });
});

test('kvCache: false recomputes the whole sequence every step and gives the same tokens', T, async () => {
  await withPage(env.browser, `${env.server.origin}/embed.html`, async (page) => {
    const got = await page.evaluate(async ({ model }) => {
      const { Gpt2 } = await import('/gpt2.js');
      const m = await Gpt2.load({ model, backend: 'cpu' });
      const opts = { maxTokens: 24, temperature: 0, ignoreEos: true };
      const cached = await m.generate('ROMEO:', opts);
      const naive = await m.generate('ROMEO:', { ...opts, kvCache: false });
      const error = await m.generate('ROMEO:', { kvCache: false, draft: 'prompt-lookup' }).then(() => 'resolved', (e) => e.message);
      m.dispose();
      return { cached, naive, error };
    }, { model: `/${MODEL_URL}` });
    assert.deepEqual(got.naive.tokens, got.cached.tokens);
    assert.equal(got.naive.text, got.cached.text);
    assert.match(got.error, /invalid draft: speculative decoding needs the KV cache/);
  });
});
