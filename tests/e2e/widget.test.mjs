// <gpt2-generator> (www/widget.js → www/widget/widget.js) in Chromium: widgets share one model download, fire their events
// with the right counts, show "watch the loop" candidates, keep their styles to themselves, and the
// lesson page (www/embed-example.html) works and is photographed to tests/e2e/out/embed-example.png.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  serveAndLaunch, withPage, nativeGenerate, screenshotPath, MODEL_URL, PROMPT, PROMPT2, DEFAULT_WEIGHTS,
} from './harness.mjs';

const T = { timeout: 180_000 };
const env = serveAndLaunch();

const attr = (s) => s.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');

/**
 * A test page served at /widget-test.html (answered by the test, beside widget.js): the page's own
 * CSS tries to restyle buttons and text areas, and a light-DOM `.output` checks nothing leaks out.
 */
async function widgetPage(page, widgets) {
  const html = `<!doctype html><html><head><meta charset="utf-8"><link rel="icon" href="data:,">
    <style>button { background: rgb(255, 0, 0) !important; } textarea { font-size: 40px; } body { color: rgb(0, 128, 0); }</style>
    <script type="module" src="widget.js"></script></head><body>
    <div class="output" id="light">outside</div>
    ${widgets.map((w) => `<gpt2-generator ${Object.entries(w).map(([k, v]) => (v === true ? k : `${k}="${attr(String(v))}"`)).join(' ')}></gpt2-generator>`).join('\n')}
    </body></html>`;
  await page.route(`${env.server.origin}/widget-test.html`, (route) => route.fulfill({ contentType: 'text/html', body: html }));
  await page.goto(`${env.server.origin}/widget-test.html`);
  await page.waitForFunction(() => customElements.get('gpt2-generator'));
}

/** Runs generate() on the widget `sel` and collects its events (token, done, error). */
function runWidget(page, sel) {
  return page.evaluate(async (sel) => {
    const el = document.querySelector(sel);
    const events = { token: [], done: [], error: [] };
    const on = (type) => (e) => {
      // gpt2-token, gpt2-done, gpt2-error: never mistaken for the window's own error event.
      // The events bubble out of the shadow root to the document.
      if (e.target === el) events[type].push(e.detail);
    };
    const handlers = Object.fromEntries(Object.keys(events).map((t) => [t, on(t)]));
    for (const [t, h] of Object.entries(handlers)) document.addEventListener(`gpt2-${t}`, h);
    const result = await el.generate();
    for (const [t, h] of Object.entries(handlers)) document.removeEventListener(`gpt2-${t}`, h);
    const output = el.shadowRoot.querySelector('[data-output]').textContent;
    return { result, events, output };
  }, sel);
}

test('two widgets on one page load the model once, both generate, and fire token/done events', T, async () => {
  const n = 16;
  await withPage(env.browser, 'about:blank', async (page, { requests }) => {
    await widgetPage(page, [
      { id: 'a', model: MODEL_URL, prompt: PROMPT, 'max-tokens': n, temperature: 0, readout: true },
      { id: 'b', model: MODEL_URL, prompt: PROMPT2, 'max-tokens': n, temperature: 0.8, 'top-k': 40, seed: 5 },
    ]);
    const a = await runWidget(page, '#a');
    const b = await runWidget(page, '#b');
    const weights = requests.filter((u) => u.endsWith('/model.safetensors'));
    assert.equal(weights.length, 1, `model.safetensors was requested ${weights.length} times: ${weights.join(', ')}`);
    assert.equal(requests.filter((u) => u.endsWith('/worker.js')).length, 1, 'the widgets did not share one worker');

    const native = nativeGenerate(PROMPT, n);
    for (const [name, r] of [['a', a], ['b', b]]) {
      assert.equal(r.events.error.length, 0, `widget ${name}: ${JSON.stringify(r.events.error)}`);
      assert.ok(r.result, `widget ${name} returned no result`);
      assert.equal(r.events.done.length, 1, `widget ${name}: done fired ${r.events.done.length} times`);
      assert.equal(r.events.token.length, r.result.tokens.length, `widget ${name}: token events != result.tokens`);
      assert.deepEqual(r.events.token.map((e) => e.id), r.result.tokens);
      assert.equal(r.events.token.map((e) => e.text).join(''), r.result.text);
      assert.deepEqual(r.events.done[0].tokens, r.result.tokens);
    }
    assert.equal(a.result.text, native.text, 'the greedy widget differs from the native CLI');
    assert.equal(a.output, PROMPT + a.result.text);
    assert.equal(b.output, PROMPT2 + b.result.text);

    // The readout of widget a is shown and filled; b has none.
    const readout = await page.evaluate(() => ['a', 'b'].map((id) => {
      const dl = document.getElementById(id).shadowRoot.querySelector('[data-readout]');
      return { hidden: dl.hidden, ttft: dl.querySelector('[data-r="ttft"]').textContent, total: dl.querySelector('[data-r="total"]').textContent };
    }));
    assert.equal(readout[0].hidden, false);
    assert.match(readout[0].ttft, /\d ms$/);
    assert.match(readout[0].total, /\d (ms|s)$/);
    assert.equal(readout[1].hidden, true);
  });
});

test('Gpt2.load shares one model per folder URL and backend; dispose counts handles', T, async () => {
  await withPage(env.browser, 'about:blank', async (page, { requests }) => {
    await widgetPage(page, []);
    const got = await page.evaluate(async ({ url, prompt }) => {
      const { Gpt2 } = await import('./gpt2.js');
      // The same folder with and without its trailing slash is one model.
      const [a, b] = await Promise.all([Gpt2.load({ model: url }), Gpt2.load({ model: url.replace(/\/$/, '') })]);
      const distinct = a !== b;
      a.dispose();
      const afterA = (await b.generate(prompt, { maxTokens: 3 })).tokens.length; // b still works
      let disposed = null;
      try {
        await a.generate(prompt);
      } catch (e) {
        disposed = e.message;
      }
      b.dispose(); // the last handle: the model is freed, so the next load downloads again
      const c = await Gpt2.load({ model: url });
      const again = (await c.generate(prompt, { maxTokens: 2 })).tokens.length;
      c.dispose();
      return { distinct, afterA, disposed, again };
    }, { url: `./${MODEL_URL}`, prompt: PROMPT }); // './': without its '/', 'models/x' would be a Hub id
    assert.ok(got.distinct, 'two loads returned the same handle');
    assert.equal(got.afterA, 3);
    assert.match(got.disposed ?? '', /disposed/);
    assert.equal(got.again, 2);
    assert.equal(requests.filter((u) => u.endsWith('/model.safetensors')).length, 2);
  });
});

test('watch: each step carries its top-10, summing to at most 1, with the greedy pick first', T, async () => {
  const n = 12;
  await withPage(env.browser, 'about:blank', async (page) => {
    await widgetPage(page, [{ id: 'w', model: MODEL_URL, prompt: PROMPT, 'max-tokens': n, temperature: 0, watch: true }]);
    const { result, events } = await runWidget(page, '#w');
    assert.ok(result, `no result: ${JSON.stringify(events.error)}`);
    assert.equal(events.token.length, result.tokens.length);
    for (const ev of events.token) {
      assert.ok(Array.isArray(ev.top) && ev.top.length === 10, `step ${ev.index}: top has ${ev.top?.length} entries`);
      const sum = ev.top.reduce((s, c) => s + c.prob, 0);
      assert.ok(sum <= 1 + 1e-5 && sum > 0, `step ${ev.index}: probabilities sum to ${sum}`);
      for (let i = 1; i < ev.top.length; i++) assert.ok(ev.top[i - 1].prob >= ev.top[i].prob, `step ${ev.index}: not sorted`);
      assert.ok(ev.top.some((c) => c.id === ev.id), `step ${ev.index}: the picked token ${ev.id} is not in the top list`);
      assert.equal(ev.top[0].id, ev.id, `step ${ev.index}: greedy did not pick the most likely token`);
    }
    // One card per step, each with 10 candidates and exactly one highlighted: the picked token.
    const cards = await page.evaluate(() => [...document.getElementById('w').shadowRoot.querySelectorAll('li.step')]
      .map((li) => ({ cands: li.querySelectorAll('.cand').length, picked: li.querySelectorAll('.cand.picked').length })));
    assert.equal(cards.length, result.tokens.length);
    assert.ok(cards.every((c) => c.cands === 10 && c.picked === 1), JSON.stringify(cards));
  });
});

test('the widget keeps its styles in its shadow root and works from the keyboard', T, async () => {
  await withPage(env.browser, 'about:blank', async (page) => {
    await widgetPage(page, [{ id: 'k', model: MODEL_URL, prompt: PROMPT, 'max-tokens': 6 }]);
    const styles = await page.evaluate(() => {
      const root = document.getElementById('k').shadowRoot;
      const cs = (el) => getComputedStyle(el);
      return {
        button: cs(root.querySelector('[data-generate]')).backgroundColor,
        textarea: cs(root.querySelector('textarea')).fontSize,
        text: cs(root.querySelector('[data-status]')).color,
        light: cs(document.getElementById('light')).fontFamily,
        label: root.querySelector('textarea').labels[0]?.textContent,
      };
    });
    assert.notEqual(styles.button, 'rgb(255, 0, 0)', 'the page restyled the widget\'s button');
    assert.notEqual(styles.textarea, '40px', 'the page restyled the widget\'s text area');
    assert.notEqual(styles.text, 'rgb(0, 128, 0)', 'the page\'s colour was inherited');
    assert.doesNotMatch(styles.light, /monospace/, 'the widget\'s .output style leaked into the page');
    assert.equal(styles.label, 'Prompt');

    // Tab reaches the prompt; Ctrl+Enter generates; the result arrives as a done event.
    await page.waitForFunction(() => !document.getElementById('k').shadowRoot.querySelector('[data-generate]').disabled, null, { timeout: 60_000 });
    const done = page.evaluate(() => new Promise((resolve) => document.addEventListener('gpt2-done', (e) => resolve(e.detail), { once: true })));
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => document.getElementById('k').shadowRoot.activeElement?.tagName), 'TEXTAREA');
    await page.keyboard.press('Control+Enter');
    const result = await done;
    assert.ok(result.tokens.length >= 1);
  });
});

test('autorun generates once the model is loaded; a missing model fires an error event', T, async () => {
  await withPage(env.browser, 'about:blank', async (page) => {
    // Listeners first: the widgets are added by the page script after these are in place.
    await page.addInitScript(() => {
      window.seen = [];
      for (const type of ['token', 'done', 'error']) {
        document.addEventListener(`gpt2-${type}`, (e) => window.seen.push({ type, id: e.target.id, detail: type === 'token' ? null : e.detail }));
      }
    });
    await widgetPage(page, [
      { id: 'auto', model: MODEL_URL, prompt: PROMPT, 'max-tokens': 5, autorun: true },
      { id: 'missing', model: 'models/nope/' },
    ]);
    await page.waitForFunction(() => window.seen.some((e) => e.type === 'done') && window.seen.some((e) => e.type === 'error'),
      null, { timeout: 60_000 });
    const seen = await page.evaluate(() => window.seen);
    const done = seen.filter((e) => e.type === 'done');
    assert.equal(done.length, 1);
    assert.equal(done[0].id, 'auto');
    assert.equal(seen.filter((e) => e.type === 'token' && e.id === 'auto').length, done[0].detail.tokens.length);
    const error = seen.find((e) => e.type === 'error');
    assert.equal(error.id, 'missing');
    assert.match(error.detail.message, /nope\/config\.json.*404/);
    const shown = await page.evaluate(() => document.getElementById('missing').shadowRoot.querySelector('[role="alert"]').textContent);
    assert.match(shown, /^[A-Z].*404.*\.$/s, `not a sentence: ${shown}`);
  });
});

test('the lesson page: four widgets, one download, each generates; screenshot', T, async () => {
  await withPage(env.browser, `${env.server.origin}/embed-example.html`, async (page, { requests }) => {
    await page.waitForFunction(() => customElements.get('gpt2-generator'));
    const ids = await page.evaluate(() => [...document.querySelectorAll('gpt2-generator')].map((el) => el.id));
    assert.equal(ids.length, 4);
    for (const id of ids) {
      const r = await runWidget(page, `#${id}`);
      assert.ok(r.result, `widget ${id} failed: ${JSON.stringify(r.events.error)}`);
      assert.equal(r.events.token.length, r.result.tokens.length, `widget ${id}: token events != tokens`);
      if (id === 'stopped') assert.ok(!r.result.text.includes('\n\n'), 'the stop text was not cut');
    }
    assert.equal(requests.filter((u) => u.endsWith(DEFAULT_WEIGHTS)).length, 1, requests.join('\n'));
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({ path: screenshotPath('embed-example.png'), fullPage: true });
  });
});

test('load="visible" (the default) downloads nothing for widgets below the fold until one is scrolled to; "interaction" waits for a focus or Generate; all share one download', T, async () => {
  await withPage(env.browser, 'about:blank', async (page, { requests }) => {
    const html = `<!doctype html><html><head><meta charset="utf-8"><link rel="icon" href="data:,">
      <script type="module" src="widget.js"></script></head><body>
      <gpt2-generator id="top" model="${MODEL_URL}" load="interaction" prompt="${PROMPT}" max-tokens="4" temperature="0"></gpt2-generator>
      <div style="height: 6000px">text above the fold</div>
      ${[1, 2, 3, 4, 5].map((i) => `<gpt2-generator id="w${i}" model="${MODEL_URL}" prompt="${PROMPT}" max-tokens="4" temperature="0"></gpt2-generator>`).join('\n')}
      </body></html>`;
    await page.route(`${env.server.origin}/load-test.html`, (route) => route.fulfill({ contentType: 'text/html', body: html }));
    await page.goto(`${env.server.origin}/load-test.html`);
    await page.waitForFunction(() => customElements.get('gpt2-generator'));
    await page.waitForTimeout(1500); // time for anything that would load to start
    const modelFiles = () => requests.filter((u) => /\/(config\.json|model\.safetensors|tokenizer\.json|[^/]+\.gguf)$/.test(u));
    assert.deepEqual(modelFiles(), [], 'nothing of the model is fetched before a widget is used or seen');
    const generate = await page.evaluate(() => {
      const b = document.getElementById('top').shadowRoot.querySelector('[data-generate]');
      return { disabled: b.disabled, status: document.getElementById('top').shadowRoot.querySelector('[data-status]').textContent };
    });
    assert.equal(generate.disabled, false, 'Generate is usable before the model loads (it loads it)');
    assert.match(generate.status, /loads when you use this/);

    // Scrolling to the widgets below the fold loads the model once, for all of them.
    await page.evaluate(() => document.getElementById('w3').scrollIntoView());
    await page.waitForFunction(() => document.getElementById('w3').shadowRoot.querySelector('[data-status]').textContent.startsWith('Ready'), null, { timeout: 60_000 });
    await page.waitForFunction(() => [1, 2, 3, 4, 5].every((i) => document.getElementById(`w${i}`).shadowRoot.querySelector('[data-status]').textContent.startsWith('Ready')), null, { timeout: 60_000 });
    assert.equal(requests.filter((u) => u.endsWith('/model.safetensors')).length, 1, 'one download for the five widgets');
    const top = await page.evaluate(() => document.getElementById('top').shadowRoot.querySelector('[data-status]').textContent);
    assert.match(top, /loads when you use this/, 'the interaction widget did not load on its own');

    // Generate on the interaction widget loads (joining the page's model) and generates.
    const r = await runWidget(page, '#top');
    assert.ok(r.result, JSON.stringify(r.events.error));
    assert.equal(r.result.tokens.length, 4);
    assert.equal(requests.filter((u) => u.endsWith('/model.safetensors')).length, 1);
  });
});

test('load="interaction" starts on the first focus; a bad load value is a sentence', T, async () => {
  await withPage(env.browser, 'about:blank', async (page, { requests }) => {
    await widgetPage(page, [{ id: 'a', model: MODEL_URL, load: 'interaction' }, { id: 'b', model: MODEL_URL, load: 'later' }]);
    await page.waitForTimeout(1000);
    assert.equal(requests.filter((u) => u.endsWith('/model.safetensors')).length, 1, 'b loads (the default) while a waits');
    const bad = await page.evaluate(() => document.getElementById('b').shadowRoot.querySelector('[data-error]').textContent);
    assert.match(bad, /load attribute must be eager, visible or interaction, not "later"/);
    await page.focus('#a textarea'); // Playwright's CSS pierces the shadow root
    await page.waitForFunction(() => document.getElementById('a').shadowRoot.querySelector('[data-status]').textContent.startsWith('Ready'), null, { timeout: 60_000 });
  });
});
