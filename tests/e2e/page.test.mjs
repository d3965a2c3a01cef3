// The page (www/index.html) in Chromium: stop sequences, error sentences, local files, a model of
// another origin and the labs (its Generate, readout, load phases and Stop: engines.test.mjs, in
// every engine). Nothing may leave 127.0.0.1.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import {
  serveAndLaunch, withPage, nativeGenerate, screenshotPath, MODEL_URL, MODEL_DIR, MODEL_CONFIG,
  PROMPT, PROMPT2, DEFAULT_WEIGHTS,
} from './harness.mjs';

const T = { timeout: 120_000 };
const env = serveAndLaunch();

/** The page at `path` (the model given as ?model= unless it is the default demo). */
function pageUrl(query = '') {
  const q = MODEL_URL === 'models/gpt2-shakespeare/' ? query : `?model=${MODEL_URL}${query ? `&${query.slice(1)}` : ''}`;
  return `${env.server.origin}/${q}`;
}

async function waitLoaded(page) {
  await page.waitForFunction(() => ['ready', 'error'].includes(window.pageState), null, { timeout: 60_000 });
  const state = await page.evaluate(() => ({ state: window.pageState, error: document.getElementById('error').textContent }));
  assert.equal(state.state, 'ready', `the model did not load: ${state.error}`);
}

/** Fills the form, clicks Generate and waits for the result (or an error on the page). */
async function generate(page, { prompt = PROMPT, maxTokens = 20, temperature = 0, stop = '', ignoreEos = false, boundaries = false } = {}) {
  await page.fill('#prompt', prompt);
  await page.fill('#max-tokens', String(maxTokens));
  await page.fill('#temperature', String(temperature));
  await page.fill('#stop-seqs', stop);
  await page.setChecked('#ignore-eos', ignoreEos);
  await page.setChecked('#boundaries', boundaries);
  await page.click('#generate');
  return finished(page);
}

async function finished(page) {
  await page.waitForFunction(() => window.lastResult || !document.getElementById('error').hidden, null, { timeout: 60_000 });
  const got = await page.evaluate(() => ({
    result: window.lastResult, events: window.tokenEvents, error: document.getElementById('error').textContent,
  }));
  assert.ok(got.result, `generation failed: ${got.error}`);
  return got;
}

const text = (page, sel) => page.locator(sel).innerText();

test('a stop sequence ends generation before it; the text excludes it', T, async () => {
  await withPage(env.browser, pageUrl(), async (page) => {
    await waitLoaded(page);
    const first = (await generate(page, { maxTokens: 30 })).result;
    // A short piece from the middle of the greedy text whose first occurrence is not at the start
    // (or, for a text that repeats one thing, its first two characters).
    let stop = null;
    for (let k = Math.floor(first.text.length / 2); k < first.text.length - 3 && !stop; k++) {
      const s = first.text.slice(k, k + 3);
      if (first.text.indexOf(s) > 0 && !s.includes('\\')) stop = s;
    }
    stop ??= first.text.slice(0, 2);
    assert.ok(stop.length === 2 || stop.length === 3, `no usable stop sequence in ${JSON.stringify(first.text)}`);
    const escaped = stop.replace(/\n/g, '\\n').replace(/\t/g, '\\t');
    const { result, events } = await generate(page, { maxTokens: 30, stop: escaped });
    assert.equal(result.stopReason, 'stop');
    assert.equal(result.text, first.text.slice(0, first.text.indexOf(stop)));
    assert.ok(!result.text.includes(stop));
    assert.equal(events, result.tokens.length);
    assert.equal(await text(page, '#stop-reason'), 'stop');
  });
});

test('a missing model folder chosen on the page shows an error sentence naming the missing file', T, async () => {
  await withPage(env.browser, pageUrl(), async (page) => {
    await waitLoaded(page);
    await page.check('#source-url');
    await page.fill('#model-url', 'models/nope/');
    await page.click('#load');
    const error = page.locator('#error');
    await error.waitFor({ state: 'visible', timeout: 30_000 });
    assert.equal(await error.getAttribute('role'), 'alert');
    const msg = await error.innerText();
    assert.match(msg, /^[A-Z].*\.$/s, `not a sentence: ${msg}`);
    assert.match(msg, /\/models\/nope\/config\.json/);
    assert.match(msg, /404/);
    // The model that was loaded before stays usable.
    assert.ok(await page.locator('#generate').isEnabled());
  });
});

test('model files chosen from this computer load and generate the same greedy text', T, async () => {
  await withPage(env.browser, pageUrl(), async (page) => {
    await waitLoaded(page);
    const before = (await generate(page, { maxTokens: 12 })).result;
    await page.setInputFiles('#model-files', ['config.json', 'model.safetensors', 'tokenizer.json'].map((f) => path.join(MODEL_DIR, f)));
    assert.ok(await page.locator('#source-files').isChecked(), 'choosing files did not select the files option');
    await page.click('#load');
    await page.waitForFunction(() => window.pageState !== 'busy' && window.pageState !== 'loading', null, { timeout: 60_000 });
    await waitLoaded(page);
    assert.match(await text(page, '#model-info'), /^model\.safetensors: /);
    const after = (await generate(page, { maxTokens: 12 })).result;
    assert.equal(after.text, before.text);
  });
});

test('a missing model given in the URL shows the error and leaves Generate disabled', T, async () => {
  // With its '/': a folder of this site (models/nope alone would be a Hub id, asked about first).
  await withPage(env.browser, `${env.server.origin}/?model=models/nope/`, async (page) => {
    await page.waitForFunction(() => window.pageState === 'error', null, { timeout: 30_000 });
    const msg = await page.locator('#error').innerText();
    assert.match(msg, /\/models\/nope\/config\.json.*404/s, msg);
    assert.ok(await page.locator('#generate').isDisabled());
  });
});

test('a ?model= of another origin is not downloaded until the visitor presses Load model', T, async () => {
  const foreign = 'http://127.0.0.2:9/some/model/';
  await withPage(env.browser, `${env.server.origin}/?model=${encodeURIComponent(foreign)}`, async (page, { requests }) => {
    await page.waitForFunction(() => window.pageState === 'asking', null, { timeout: 30_000 });
    assert.match(await page.locator('#model-info').innerText(), /from http:\/\/127\.0\.0\.2:9\. Press Load model/);
    assert.equal(await page.inputValue('#model-url'), foreign);
    assert.ok(!(await page.locator('#load').isDisabled()));
    await page.waitForTimeout(500);
    assert.ok(!requests.some((u) => u.startsWith('http://127.0.0.2')), requests.join('\n'));
  });
  // A Hugging Face id is another origin too: the Hub's.
  await withPage(env.browser, `${env.server.origin}/?model=openai-community/gpt2`, async (page, { requests }) => {
    await page.waitForFunction(() => window.pageState === 'asking', null, { timeout: 30_000 });
    assert.match(await page.locator('#model-info').innerText(), /from https:\/\/huggingface\.co\. Press Load model/);
    await page.waitForTimeout(500);
    assert.ok(!requests.some((u) => u.includes('huggingface.co')), requests.join('\n'));
  });
});

test('the labs fit total = a + b·n, compare greedy, sampling and beam (samples as one batch), measure batching; a screenshot is written', T, async () => {
  await withPage(env.browser, pageUrl(), async (page) => {
    await waitLoaded(page);
    await page.fill('#prompt', PROMPT);
    await page.fill('#lab-lengths', '4, 8, 16, 32');
    await page.fill('#lab-repeats', '1');
    await page.click('#lab-run');
    await page.waitForFunction(() => window.labResult || !document.getElementById('error').hidden, null, { timeout: 60_000 });
    const lab = await page.evaluate(() => window.labResult);
    assert.ok(lab, await text(page, '#error'));
    assert.deepEqual(lab.points.map((p) => p.n), [4, 8, 16, 32]);
    assert.ok(lab.fit.b > 0, `slope ${lab.fit.b} ms/token is not positive`);
    assert.ok(lab.fit.r2 > 0.5, `R² ${lab.fit.r2}: total time is not linear in n`);
    assert.match(await text(page, '#lab-fit'), /R² = \d\.\d{4}/);

    await page.fill('#cmp-seeds', '1, 2');
    await page.fill('#cmp-tokens', '12');
    await page.fill('#cmp-beams', '2');
    await page.click('#cmp-run');
    await page.waitForFunction(() => window.comparison || !document.getElementById('error').hidden, null, { timeout: 60_000 });
    const cmp = await page.evaluate(() => window.comparison);
    assert.ok(cmp, await text(page, '#error'));
    assert.equal(cmp.rows.length, 5);
    assert.equal(cmp.greedyIdentical, true, 'greedy text changed with the seed');
    assert.equal(cmp.sampledDistinct, 2, 'sampling gave the same text for two seeds');
    assert.equal(await page.locator('#cmp-table tbody tr').count(), 5);
    assert.deepEqual(cmp.rows.filter((r) => r.mode !== 'beam').map((r) => r.batch), [2, 2, 2, 2], 'the seeds did not run as one batch');

    // Batching: B generations at once share each step; throughput and each one's time per token.
    await page.fill('#batch-sizes', '4, 1, 2');
    await page.fill('#batch-tokens', '12');
    await page.click('#batch-run');
    await page.waitForFunction(() => window.batchLab || !document.getElementById('error').hidden, null, { timeout: 90_000 });
    const batch = await page.evaluate(() => window.batchLab);
    assert.ok(batch, await text(page, '#error'));
    assert.deepEqual(batch.runs.map((r) => [r.batch, r.shared, r.perSequence.length]), [[1, 1, 1], [2, 2, 2], [4, 4, 4]]);
    for (const r of batch.runs) {
      const sum = r.perSequence.reduce((a, b) => a + b, 0);
      assert.ok(Math.abs(sum - r.tokensPerSec) < 1e-6 * sum && r.stepMs > 0, JSON.stringify(r));
    }
    assert.match(await text(page, '#batch-summary'), /One sequence: [\d.]+ tokens\/s .* Throughput rises; each user's token comes a little later\./);
    assert.equal(await page.locator('#batch-table tbody tr').count(), 3);
    await page.locator('#batch-h').scrollIntoViewIfNeeded();
    await page.locator('section[aria-labelledby="batch-h"]').screenshot({ path: screenshotPath('batch-lab.png') });

    const { result } = await generate(page, { maxTokens: 48, temperature: 0.8, boundaries: true });
    const tokens = await page.locator('#output .tok').count();
    assert.ok(tokens > 0 && tokens <= result.tokens.length);
    await page.screenshot({ path: screenshotPath('page.png'), fullPage: true });
  });
});

/** Sets the shape lab's controls (ranges cannot be filled) and lets the lab redraw. */
async function shapeControls(page, values) {
  await page.evaluate((values) => {
    for (const [id, v] of Object.entries(values)) {
      const el = document.getElementById(`shape-${id}`);
      el.value = String(v);
      el.dispatchEvent(new Event('input', { bubbles: true }));
      el.dispatchEvent(new Event('change', { bubbles: true }));
    }
  }, values);
  return page.evaluate(() => window.shapeLab);
}

test('the shape lab draws from a step\'s logits exactly as generate\'s sampler does, and 2000 seeded draws fit it', T, async () => {
  await withPage(env.browser, pageUrl(), async (page) => {
    await waitLoaded(page);
    await page.fill('#top-k', '40');
    await page.fill('#seed', '5');
    const { result } = await generate(page, { maxTokens: 8, temperature: 0.8 });
    // The engine's candidates of the same generation (seeded: the same tokens).
    const engine = (options, maxTokens) => page.evaluate(async ({ prompt, options, maxTokens }) => {
      const top = [];
      const r = await window.gpt2Model.generate(prompt, { ...options, maxTokens, topLogprobs: 100, onToken: (ev) => top.push(ev) });
      return { tokens: r.tokens, events: top.map((ev) => ({ id: ev.id, prob: ev.prob, top: ev.top.map((c) => [c.id, c.prob]) })) };
    }, { prompt: PROMPT, options, maxTokens });
    const same = (lab, ev, what) => {
      const shown = lab.rows.filter((r) => r.after > 0);
      assert.ok(shown.length > 0, what);
      for (const r of shown) {
        const c = ev.top.find(([id]) => id === r.id);
        assert.ok(c, `${what}: token ${r.id} can be drawn in the lab but not by the engine`);
        assert.ok(Math.abs(c[1] - r.after) < 2e-5, `${what}: token ${r.id}: lab ${r.after}, engine ${c[1]}`);
      }
      for (const r of lab.rows.filter((x) => x.after === 0)) assert.ok(!ev.top.some(([id]) => id === r.id), `${what}: token ${r.id} cut by the lab only`);
      if (ev.top.length < 100) assert.equal(lab.kept, ev.top.length, `${what}: tokens that can be drawn`);
    };
    const run = await engine({ temperature: 0.8, topK: 40, seed: 5 }, 8);
    assert.deepEqual(run.tokens, result.tokens);
    await page.fill('#shape-step', '3');
    await page.click('#shape-load');
    await page.waitForFunction(() => window.shapeLab?.picked != null || !document.getElementById('error').hidden, null, { timeout: 30_000 });
    let lab = await page.evaluate(() => window.shapeLab);
    assert.ok(lab, await text(page, '#error'));
    assert.deepEqual(lab.settings, { temperature: 0.8, topK: 40, topP: 1, minP: 0, repetitionPenalty: 1 }, 'the step\'s own settings');
    assert.equal(lab.picked, result.tokens[2]);
    assert.ok(Math.abs(lab.pickedProb - run.events[2].prob) < 2e-5, `picked: lab ${lab.pickedProb}, engine ${run.events[2].prob}`);
    same(lab, run.events[2], 'step 3, temperature 0.8, top-k 40');

    // The next token of the prompt under other settings: each the engine's first step's distribution.
    await page.fill('#shape-step', '0');
    await page.click('#shape-load');
    await page.waitForFunction(() => window.shapeLab?.picked === null, null, { timeout: 30_000 });
    for (const s of [
      { temperature: 1.3, topK: 0, topP: 0.9, minP: 0, repetitionPenalty: 1 },
      { temperature: 0.7, topK: 0, topP: 1, minP: 0.05, repetitionPenalty: 1.3 },
      { temperature: 1, topK: 200, topP: 0.95, minP: 0.01, repetitionPenalty: 1.1 },
    ]) {
      lab = await shapeControls(page, { temperature: s.temperature, 'top-k': s.topK, 'top-p': s.topP, 'min-p': s.minP, penalty: s.repetitionPenalty });
      assert.deepEqual(lab.settings, s);
      same(lab, (await engine({ ...s, seed: 1 }, 1)).events[0], JSON.stringify(s));
    }
    // Greedy: temperature 0 puts everything on the argmax; the engine's candidates are the softmax at 1.
    lab = await shapeControls(page, { temperature: 0, 'top-k': 0, 'top-p': 1, 'min-p': 0, penalty: 1 });
    const greedy = (await engine({ temperature: 0 }, 1)).events[0];
    assert.equal(lab.kept, 1);
    assert.deepEqual(lab.rows.filter((r) => r.after > 0).map((r) => [r.id, r.after]), [[greedy.id, 1]]);
    for (const r of lab.rows) assert.ok(Math.abs(greedy.top.find(([id]) => id === r.id)[1] - r.before) < 2e-5);
    assert.match(await text(page, '#shape-summary'), /Temperature 0 is greedy/);

    // 2000 seeded draws: each shown token's count within 4.5 standard deviations of 2000·p.
    lab = await shapeControls(page, { temperature: 1, 'top-k': 0, 'top-p': 1, 'min-p': 0, penalty: 1 });
    await page.fill('#shape-draws', '2000');
    await page.fill('#shape-seed', '11');
    await page.click('#shape-sample');
    lab = await page.evaluate(() => window.shapeLab);
    assert.equal(lab.draws.n, 2000);
    assert.equal(Object.values(lab.draws.counts).reduce((a, b) => a + b, 0), 2000);
    for (const r of lab.rows) {
      const got = lab.draws.counts[r.id] ?? 0;
      const sd = Math.sqrt(2000 * r.after * (1 - r.after));
      assert.ok(Math.abs(got - 2000 * r.after) <= 4.5 * sd + 1, `token ${r.id}: drawn ${got} times, expected ${(2000 * r.after).toFixed(1)} ± ${sd.toFixed(1)}`);
    }
    assert.equal(await page.locator('#shape-table tbody tr').count(), 21);
    assert.match(await text(page, '#shape-summary'), /entropy [\d.]+ bits .* 2000 draws \(seed 11\)/);
    // The contents list: a link to every section's heading, and nothing else.
    const contents = await page.evaluate(() => ({
      links: [...document.querySelectorAll('nav.contents a')].map((a) => document.querySelector(a.getAttribute('href'))?.id ?? a.href),
      headings: [...document.querySelectorAll('main section > h2')].map((h) => h.id),
    }));
    assert.deepEqual(contents.links, contents.headings);
    await page.locator('#shape-h').scrollIntoViewIfNeeded();
    await page.locator('section[aria-labelledby="shape-h"]').screenshot({ path: screenshotPath('shape-lab.png') });
  });
});

test('what it costs: each answer\'s tokens, cost and the cap\'s worst case at typed prices, kept only when asked; fewer tokens measured; check yourself by the clock', T, async () => {
  await withPage(env.browser, pageUrl(), async (page) => {
    await waitLoaded(page);
    await page.fill('#price-in', '0.5');
    await page.fill('#price-out', '1.5');
    await page.fill('#seed', '3');
    const { result } = await generate(page, { maxTokens: 20, temperature: 0.8 });
    const m = result.metrics;
    const usd = (x) => (x >= 1 ? `$${x.toFixed(2)}` : `$${x.toPrecision(3)}`);
    assert.equal(await text(page, '#cost-out-tokens'), String(m.outputTokens));
    assert.equal(await text(page, '#cost-in-tokens'), String(m.promptTokens));
    assert.equal(await text(page, '#cost-now'), usd((0.5 * m.promptTokens + 1.5 * m.outputTokens) / 1e6));
    assert.equal(await text(page, '#cost-worst'), usd((0.5 * m.promptTokens + 1.5 * 20) / 1e6));
    assert.match(await text(page, '#cost-line'), /The cap of 20 tokens bounds the worst case/);
    // Prices are kept only while "remember" is ticked.
    const stored = () => page.evaluate(() => localStorage.getItem('gpt2-web:prices'));
    assert.equal(await stored(), null);
    await page.check('#price-remember');
    assert.deepEqual(JSON.parse(await stored()), { input: '0.5', output: '1.5' });
    await page.reload();
    await waitLoaded(page);
    assert.equal(await page.inputValue('#price-out'), '1.5');
    await page.uncheck('#price-remember');
    assert.equal(await stored(), null);

    // Fewer tokens: the same seed, so the capped answer is the start of the full one.
    await page.fill('#prompt', 'ROMEO.\n');
    await page.fill('#max-tokens', '40');
    await page.fill('#temperature', '0.8');
    await page.fill('#seed', '3');
    await page.click('#cost-compare');
    await page.waitForFunction(() => window.costCompare || !document.getElementById('error').hidden, null, { timeout: 60_000 });
    const rows = await page.evaluate(() => window.costCompare);
    assert.ok(rows, await text(page, '#error'));
    assert.deepEqual(rows.map((r) => r.way), ['As set', 'A lower cap', 'A stop sequence']);
    assert.ok(rows[1].outputTokens <= 10 && rows[1].outputTokens < rows[0].outputTokens, JSON.stringify(rows));
    assert.ok(rows[0].text.startsWith(rows[1].text), 'the capped answer is not the start of the full one');
    assert.ok(rows[2].outputTokens <= rows[0].outputTokens);
    assert.equal(await page.locator('#cost-table tbody tr').count(), 3);
    assert.match(await text(page, '#cost-summary'), /A lower cap \(max tokens 10\): \d+ tokens instead of \d+/);

    // Check yourself: a guess judged against the run it asks for; the changes judged by the clock.
    await page.fill('#check-n', '120');
    await page.fill('#check-guess', '0.0001');
    await page.click('#check-time');
    await page.waitForFunction(() => window.checkTime || !document.getElementById('error').hidden, null, { timeout: 60_000 });
    const time = await page.evaluate(() => window.checkTime);
    assert.ok(time, await text(page, '#error'));
    assert.equal(time.n, 120);
    assert.equal(time.right, false, 'a guess of 0.1 ms was judged right');
    assert.match(await text(page, '#check-time-out'), /^You said .*; 120 tokens took .* Not quite/);
    await page.check('input[name="lever"][value="cap"]');
    await page.check('input[name="lever"][value="stream"]');
    await page.click('#check-levers');
    await page.waitForFunction(() => window.checkLevers || !document.getElementById('error').hidden, null, { timeout: 120_000 });
    const levers = await page.evaluate(() => window.checkLevers);
    assert.ok(levers, await text(page, '#error'));
    assert.deepEqual(levers.rows.map((r) => [r.key, r.picked]), [['stream', true], ['cap', true], ['speculative', false], ['prompt', false], ['batch', false]]);
    for (const r of levers.rows) assert.equal(r.cuts, r.speedup >= 1.15, JSON.stringify(r));
    const cap = levers.rows.find((r) => r.key === 'cap');
    assert.ok(cap.cuts && cap.speedup > 1.3, `half the tokens: ${cap.speedup.toFixed(2)}× sooner`);
    assert.equal(levers.right, levers.rows.every((r) => r.picked === r.cuts));
    assert.equal(await page.locator('#check-table tbody tr').count(), 5);
    await generate(page, { prompt: 'ROMEO.\n', maxTokens: 40, temperature: 0.8 });
    await page.locator('#cost-h').scrollIntoViewIfNeeded();
    await page.locator('section[aria-labelledby="cost-h"]').screenshot({ path: screenshotPath('cost.png') });
    await page.locator('section[aria-labelledby="check-h"]').screenshot({ path: screenshotPath('check-yourself.png') });
  });
});
