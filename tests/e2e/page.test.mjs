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
