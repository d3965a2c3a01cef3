// Decoding strategies in the browser (issue 16): beam search through the API equals transformers'
// beams (the committed fixture), streams only settled tokens and aborts within a step; presets in
// the page and the widget; the labs "greedy, sampling, beam" and "without a KV cache"; predict,
// then measure. Screenshots of the new labs go to docs/.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { serveAndLaunch, withPage, screenshotPath, ROOT, MODEL_URL, MODEL_NAME } from './harness.mjs';

const T = { timeout: 180_000 };
const env = serveAndLaunch();
const DEMO = MODEL_NAME === 'gpt2-shakespeare';
const fixture = (name) => JSON.parse(fs.readFileSync(path.join(ROOT, 'tests/fixtures', name), 'utf8'));

async function ready(page) {
  await page.waitForFunction(() => window.pageState === 'ready', null, { timeout: 60_000 });
}

async function labDone(page, hook) {
  await page.waitForFunction((h) => window[h] || !document.getElementById('error').hidden, hook, { timeout: 150_000 });
  const got = await page.evaluate((h) => window[h], hook);
  assert.ok(got, await page.locator('#error').innerText());
  return got;
}

test('numBeams gives transformers\' beams, streams settled tokens only, and aborts within a step', T, async (t) => {
  if (!DEMO) return t.skip('the fixture is of the demo model');
  const { cases } = fixture('gpt2-shakespeare.json');
  const runs = fixture('gpt2-shakespeare-beams.json').runs.filter((r) => r.case === 1 && r.eos_token_id === 50256);
  assert.ok(runs.length >= 2);
  await withPage(env.browser, `${env.server.origin}/embed.html`, async (page) => {
    const got = await page.evaluate(async ({ model, prompt, runs }) => {
      const { Gpt2 } = await import('/gpt2.js');
      const m = await Gpt2.load({ model, backend: 'cpu', dtype: 'f32' });
      const out = [];
      for (const run of runs) {
        const events = [];
        const r = await m.generate(prompt, {
          numBeams: run.num_beams, lengthPenalty: run.length_penalty, earlyStopping: run.early_stopping,
          maxTokens: run.max_new_tokens, onToken: (e) => events.push(e),
        });
        out.push({ r, events: events.map((e) => e.id), texts: events.map((e) => e.text).join('') });
      }
      const controller = new AbortController();
      const aborted = m.generate(prompt, { numBeams: 8, maxTokens: 200, ignoreEos: true, signal: controller.signal });
      setTimeout(() => controller.abort(), 30);
      const abort = await aborted;
      const fail = (o) => m.generate(prompt, o).then(() => 'resolved', (e) => e.message);
      const errors = [await fail({ numBeams: 0 }), await fail({ numBeams: 17 }), await fail({ numBeams: 2, temperature: 0.7 }),
        await fail({ numBeams: 2, earlyStopping: 'sometimes' }), await fail({ numBeams: 2, draft: 'prompt-lookup' })];
      const after = await m.generate(prompt, { maxTokens: 8, temperature: 0 });
      m.dispose();
      return { out, abort, errors, after };
    }, { model: `/${MODEL_URL}`, prompt: cases[1].prompt, runs });
    for (const [i, run] of runs.entries()) {
      const { r, events, texts } = got.out[i];
      assert.deepEqual(r.tokens, run.beams[0].ids, `${run.num_beams} beams: the best beam`);
      assert.deepEqual(r.beams.map((b) => b.tokens), run.beams.map((b) => b.ids), `${run.num_beams} beams: every beam`);
      r.beams.forEach((b, j) => assert.ok(Math.abs(b.score - run.beams[j].score) < 1e-4, `score ${b.score} vs ${run.beams[j].score}`));
      assert.deepEqual(events, r.tokens, 'one onToken per token of the best beam');
      assert.equal(texts, r.text);
      assert.equal(r.beams[0].text, r.text);
      assert.ok(r.metrics.targetForwards > r.metrics.outputTokens, 'beams cost more forwards than tokens');
    }
    assert.equal(got.abort.stopReason, 'abort');
    assert.match(got.errors[0], /invalid numBeams: 0 is not in 1\.\.=16/);
    assert.match(got.errors[1], /invalid numBeams: 17 is not in 1\.\.=16/);
    assert.match(got.errors[2], /invalid numBeams: beam search here is deterministic: set temperature to 0/);
    assert.match(got.errors[3], /invalid earlyStopping/);
    assert.match(got.errors[4], /speculative decoding and beam search do not go together/);
    assert.equal(got.after.metrics.outputTokens, got.after.tokens.length, 'the model works after an aborted beam search');
  });
});

test('presets set the form and say why; the widget takes a preset attribute', T, async () => {
  await withPage(env.browser, `${env.server.origin}/`, async (page) => {
    await ready(page);
    await page.selectOption('#preset', 'autocomplete');
    assert.equal(await page.inputValue('#max-tokens'), '8');
    assert.equal(await page.inputValue('#temperature'), '0');
    assert.equal(await page.inputValue('#stop-seqs'), '\\n');
    assert.match(await page.locator('#preset-why').innerText(), /^Autocomplete: .*greedy/);
    await page.click('#generate');
    await page.waitForFunction(() => window.pageState === 'ready' && window.lastResult, null, { timeout: 60_000 });
    const r = await page.evaluate(() => window.lastResult);
    assert.ok(r.metrics.outputTokens <= 8 && !r.text.includes('\n'), JSON.stringify(r.text));
    await page.selectOption('#preset', 'creative');
    assert.equal(await page.inputValue('#temperature'), '0.8');
    assert.equal(await page.inputValue('#top-p'), '0.95');
    await page.fill('#max-tokens', '20'); // editing a field makes the form custom again
    assert.equal(await page.inputValue('#preset'), '');
  });
  await withPage(env.browser, `${env.server.origin}/embed.html`, async (page) => {
    const got = await page.evaluate(async () => {
      await import('/widget.js');
      const host = document.createElement('div');
      host.innerHTML = '<gpt2-generator preset="extraction" prompt="ROMEO:"></gpt2-generator>' +
        '<gpt2-generator preset="extraction" max-tokens="3"></gpt2-generator><gpt2-generator preset="poetry"></gpt2-generator>';
      document.body.append(host);
      const [a, b, c] = host.querySelectorAll('gpt2-generator');
      const settings = (el) => el.shadowRoot.querySelector('.settings').textContent;
      const ra = await a.generate();
      const rb = await b.generate();
      return { sa: settings(a), sb: settings(b), sc: settings(c), ra: ra?.metrics.outputTokens, rb: rb?.metrics.outputTokens };
    });
    assert.match(got.sa, /Extraction preset · greedy \(temperature 0\) · up to 24 tokens · stops at "\\n\\n" or "\."/);
    assert.match(got.sb, /up to 3 tokens/);
    assert.match(got.sc, /The preset attribute must be autocomplete, creative, extraction, not "poetry"/);
    assert.ok(got.ra >= 1 && got.ra <= 24 && got.rb <= 3, JSON.stringify(got));
  });
});

test('the labs "greedy, sampling, beam" and "without a KV cache", and predict then measure', T, async () => {
  await withPage(env.browser, `${env.server.origin}/?backend=cpu`, async (page) => {
    await ready(page);
    await page.fill('#prompt', 'ROMEO:');
    await page.fill('#cmp-seeds', '1, 2');
    await page.fill('#cmp-beams', '2, 4');
    await page.fill('#cmp-tokens', '24');
    await page.click('#cmp-run');
    const cmp = await labDone(page, 'comparison');
    const beams = cmp.rows.filter((r) => r.mode === 'beam');
    assert.deepEqual(beams.map((r) => r.beams), [2, 4]);
    for (const r of beams) assert.ok(r.forwards > r.tokens, `${r.beams} beams: ${r.forwards} forwards for ${r.tokens} tokens`);
    for (const r of cmp.rows) assert.ok(r.repeated3 >= 0 && r.repeated3 <= 1 && r.distinct2 > 0 && r.distinct2 <= 1);
    assert.match(await page.locator('#cmp-summary').innerText(), /Beam search: \d+% of 3-grams repeated/);
    await page.locator('section[aria-labelledby="cmp-h"]').screenshot({ path: screenshotPath('decoding-lab.png') });

    await page.fill('#naive-tokens', '160');
    await page.click('#naive-run');
    const naive = await labDone(page, 'naiveLab');
    assert.ok(naive.identical, 'the texts with and without the cache differ');
    assert.equal(naive.naive.points.length, 159);
    assert.ok(naive.naive.fit.b > 0, `without the cache the step time does not grow: ${JSON.stringify(naive.naive.fit)}`);
    assert.ok(naive.naive.totalMs > naive.cached.totalMs);
    assert.match(await page.locator('#naive-fit').innerText(), /The same text\. Without the cache a step takes/);
    await page.locator('section[aria-labelledby="naive-h"]').screenshot({ path: screenshotPath('naive-lab.png') });

    await page.fill('#predict-tokens', '40');
    assert.ok(await page.locator('#predict-run').isDisabled(), 'no prediction before a generation');
    await page.fill('#temperature', '0');
    await page.fill('#max-tokens', '16');
    await page.click('#generate');
    await page.waitForFunction(() => window.pageState === 'ready' && window.lastResult, null, { timeout: 60_000 });
    assert.match(await page.locator('#predict-out').innerText(), /× \(40 − 1\) = .* predicted/);
    await page.click('#predict-run');
    const p = await labDone(page, 'prediction');
    assert.equal(p.n, 40);
    // How close the prediction comes is a measurement, not a test (a loaded CI machine skews it).
    assert.ok(p.measuredMs > 0 && p.predictedMs > 0 && Number.isFinite(p.off));
    assert.match(await page.locator('#predict-out').innerText(), /^Predicted .* measured .* for 40 tokens/);
  });
});
