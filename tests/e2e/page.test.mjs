// The page (www/index.html) in Chromium: loads the demo model, streams a generation, and its
// readout, Stop, stop sequences, error sentence and labs work. Nothing may leave 127.0.0.1.
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

test('the page loads the demo model and streams greedy text equal to the native CLI', T, async () => {
  const native = nativeGenerate(PROMPT, 20);
  await withPage(env.browser, pageUrl(), async (page, { requests }) => {
    await waitLoaded(page);
    assert.ok(requests.some((u) => u.endsWith(DEFAULT_WEIGHTS)), 'the weights were not fetched (or not recorded)');
    // The load's phases (what bench --cold prints), each after the one it waits for.
    const t = await page.evaluate(() => window.gpt2Model.loadTimings);
    for (const k of ['engineMs', 'configMs', 'tokenizerMs', 'weightsMs', 'warmUpMs']) assert.ok(t[k] > 0, `${k}: ${JSON.stringify(t)}`);
    assert.ok(t.configMs <= t.tokenizerMs && t.tokenizerMs <= t.weightsMs && t.weightsMs <= t.warmUpMs, JSON.stringify(t));
    assert.ok(t.engineMs <= t.tokenizerMs, `the tokenizer is built by the engine: ${JSON.stringify(t)}`);
    assert.equal(await text(page, '#backend'), 'cpu');
    const { result, events } = await generate(page, { maxTokens: 20 });
    const m = result.metrics;
    assert.equal(result.text, native.text, 'greedy text differs from the native CLI');
    assert.deepEqual(result.tokens, native.tokens);
    assert.equal(result.stopReason, native.stopReason);
    assert.equal(events, result.tokens.length, 'onToken count != tokens');
    assert.equal(m.outputTokens, result.tokens.length);
    assert.ok(m.ttftMs > 0 && m.ttftMs < m.totalMs, `TTFT ${m.ttftMs} ms is not below total ${m.totalMs} ms`);
    assert.equal(await page.locator('#output').textContent(), PROMPT + result.text);
    assert.equal(await text(page, '#output-tokens'), String(m.outputTokens));
    assert.equal(await text(page, '#prompt-tokens'), String(m.promptTokens));
    assert.match(await text(page, '#ttft'), /\d ms$/);
    assert.match(await text(page, '#total'), /\d (ms|s)$/);
    if (result.text.trim()) {
      await page.waitForFunction(() => window.visibleMs !== null);
      const visible = await page.evaluate(() => window.visibleMs);
      assert.ok(visible > 0, 'time to first visible text was not measured');
      assert.match(await text(page, '#first-visible'), /\d ms$/);
    }
  });
});

test('Stop aborts the generation: stopReason abort, fewer tokens than asked', T, async () => {
  const maxTokens = MODEL_CONFIG.n_positions - 16;
  await withPage(env.browser, pageUrl(), async (page) => {
    await waitLoaded(page);
    await page.fill('#prompt', PROMPT);
    await page.fill('#max-tokens', String(maxTokens));
    await page.fill('#temperature', '0');
    await page.setChecked('#ignore-eos', true);
    await page.click('#generate');
    // Stop is pressed in the page the moment the third token is shown: from the test process, the
    // wait and the click's round trips could let the small model finish its 240 tokens first on a
    // busy machine (seen once in a full run). Stop is disabled again once generation ends.
    const pressed = await page.evaluate(() => new Promise((resolve) => {
      const t0 = performance.now();
      const poll = setInterval(() => {
        const stop = document.querySelector('#stop');
        if (window.tokenEvents >= 3 || performance.now() - t0 > 30_000) {
          clearInterval(poll);
          const enabled = !stop.disabled;
          stop.click();
          resolve({ enabled, at: window.tokenEvents });
        }
      }, 1);
    }));
    assert.ok(pressed.enabled && pressed.at >= 3, `Stop was pressed after ${pressed.at} tokens, enabled: ${pressed.enabled}`);
    const { result, events } = await finished(page);
    assert.equal(result.stopReason, 'abort');
    assert.ok(result.tokens.length < maxTokens, `${result.tokens.length} tokens: Stop came too late`);
    assert.equal(events, result.tokens.length);
    assert.equal(await text(page, '#stop-reason'), 'abort');
    assert.ok(await page.locator('#generate').isEnabled(), 'Generate is not enabled again after Stop');
  });
});

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

test('the labs fit total = a + b·n and compare greedy, sampling and beam; a screenshot is written', T, async () => {
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

    const { result } = await generate(page, { maxTokens: 48, temperature: 0.8, boundaries: true });
    const tokens = await page.locator('#output .tok').count();
    assert.ok(tokens > 0 && tokens <= result.tokens.length);
    await page.screenshot({ path: screenshotPath('page.png'), fullPage: true });
  });
});
