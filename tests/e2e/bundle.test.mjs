// The single-file demo (dist/gpt2-demo.html, made by tools/bundle.mjs) opened from disk: it loads
// the inlined model and generates the native CLI's greedy text with no server and no network, and
// its "watch the loop" view shows each step. Every request must be file:, data: or blob:.
//
// The bundle is (re)made by ensureBundle (bundle.mjs) when it is missing or older than its inputs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { pathToFileURL } from 'node:url';
import { launch, openPage, nativeGenerate, MODEL_FILE, PROMPT } from './harness.mjs';
import { ensureBundle } from './bundle.mjs';

const T = { timeout: 180_000 };
let browser;
let BUNDLE;

before(async () => {
  BUNDLE = ensureBundle();
  browser = await launch();
});
after(async () => {
  await browser?.close();
});

test('the single-file bundle generates from file:// with no server and no network', T, async () => {
  const native = nativeGenerate(PROMPT, 20);
  const { context, page, requests, logs } = await openPage(browser, null);
  try {
    await context.setOffline(true);
    await page.goto(pathToFileURL(BUNDLE).href);
    await page.waitForFunction(() => ['ready', 'error'].includes(window.pageState), null, { timeout: 90_000 });
    const loaded = await page.evaluate(() => ({ state: window.pageState, error: document.getElementById('error').textContent }));
    assert.equal(loaded.state, 'ready', `the bundled model did not load: ${loaded.error}`);

    await page.fill('#prompt', PROMPT);
    await page.fill('#max-tokens', '20');
    await page.fill('#temperature', '0');
    await page.fill('#stop-seqs', '');
    await page.setChecked('#watch-loop', true);
    await page.click('#generate');
    await page.waitForFunction(() => window.lastResult || !document.getElementById('error').hidden, null, { timeout: 60_000 });
    const got = await page.evaluate(() => ({
      result: window.lastResult, events: window.tokenEvents, error: document.getElementById('error').textContent,
      output: document.getElementById('output').textContent,
      cards: [...document.querySelectorAll('#loop li.step')].map((li) => ({
        cands: li.querySelectorAll('.cand').length, picked: li.querySelectorAll('.cand.picked').length,
      })),
      loopHidden: document.getElementById('loop').hidden,
    }));
    assert.ok(got.result, `generation failed: ${got.error}`);
    assert.equal(got.result.text, native.text, 'greedy text differs from the native CLI');
    assert.deepEqual(got.result.tokens, native.tokens);
    assert.equal(got.events, got.result.tokens.length);
    assert.equal(got.output, PROMPT + got.result.text);
    // "Watch the loop" on the page: one card per step, the greedy pick highlighted among 10.
    assert.equal(got.loopHidden, false);
    assert.equal(got.cards.length, got.result.tokens.length);
    assert.ok(got.cards.every((c) => c.cands === 10 && c.picked === 1), JSON.stringify(got.cards));

    const outside = requests.filter((u) => !['file:', 'data:', 'blob:'].includes(new URL(u).protocol));
    assert.deepEqual(outside, [], `the bundle made network requests: ${outside.join(', ')}`);
    assert.ok(requests.some((u) => u.startsWith('file:')), 'no request was recorded: the request log is not working');
  } catch (e) {
    if (logs.length) e.message += `\n--- browser console ---\n${logs.join('\n')}`;
    throw e;
  } finally {
    await context.close();
  }
});

test('no inlined element holds more than 1 MiB of text (WebKit parses one big element superlinearly)', () => {
  // 43 MB of base64 in one <script> took WebKitGTK 105 s to parse; in 1 MiB pieces, 1.2 s.
  const html = fs.readFileSync(BUNDLE, 'utf8');
  const sizes = {};
  for (const m of html.matchAll(/<script\b([^>]*)>([^<]*)<\/script>/g)) {
    const id = /data-gpt2="([\w-]+)"/.exec(m[1])?.[1] ?? '(other)';
    (sizes[id] ??= []).push(m[2].length);
  }
  // A GGUF file alone (the demo's) holds its config and tokenizer; a folder's model brings both.
  const model = MODEL_FILE.endsWith('.gguf') ? [] : ['gpt2-config', 'gpt2-tokenizer'];
  assert.deepEqual(Object.keys(sizes).filter((k) => k !== '(other)').sort(),
    [...model, 'gpt2-pkg', 'gpt2-wasm', 'gpt2-weights', 'gpt2-worker'].sort());
  const largest = Math.max(...Object.values(sizes).flat());
  assert.ok(largest <= 1 << 20, `an inlined element holds ${largest} characters`);
  assert.ok(sizes['gpt2-weights'].length > 1, 'the weights are not split into pieces');
  assert.ok(sizes['gpt2-weights'].slice(0, -1).every((n) => n % 4 === 0), 'a piece is not whole base64 quanta');
});
