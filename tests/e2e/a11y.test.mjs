// Usable by everyone (WCAG 2.2 AA), in every engine (engines.mjs):
//   - axe-core's WCAG 2.2 A/AA rules find nothing on the page after load, after a generation and
//     after each lab, on the iframe embed, and on the widget in a light and a dark host page;
//   - every control is reached by Tab with a visible focus, and Generate, Stop and each lab work
//     from the keyboard alone;
//   - a screen reader hears the stream at line and sentence ends, never per token, and once at the
//     end ("Done: 48 tokens in 0.7 s"), with aria-busy on the output while it grows;
//   - each chart has a table with its numbers; nothing moves when reduced motion is asked for;
//   - at 320 CSS px (WCAG's reflow: 1280 px at 400%, 640 px at 200%) nothing scrolls sideways,
//     the labs' tables and charts included; a phone (390×844, touch) generates by tapping.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { ENGINES, launchEngine, withEnginePage } from './engines.mjs';
import { startSites } from './sites.mjs';
import { MODEL_URL, MODEL_NAME, PROMPT, OUT } from './harness.mjs';
import { startOpenAiServer } from './openai-server.mjs';

const T = { timeout: 300_000 };
const AXE = fs.readFileSync(path.join(path.dirname(createRequire(import.meta.url).resolve('axe-core')), 'axe.min.js'), 'utf8');
const TAGS = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa'];
let sites;
let api; // the real-API lab's stand-in server
before(async () => {
  sites = await startSites();
  api = await startOpenAiServer();
});
after(async () => {
  await sites?.close();
  await api?.close();
});

/** A short loop for the code lab: two recorded lengths. */
const SHORT_LOOP = 'const ids = await model.tokenize("ROMEO:");\nfor (const n of [2, 4]) {\n  const t0 = performance.now();\n' +
  '  for (let i = 0; i < n; i++) ids.push(argmax(await model.logits(ids)));\n  record(n, performance.now() - t0);\n}\n' +
  'print(await model.decode(ids));';

const query = MODEL_NAME === 'gpt2-shakespeare' ? '' : `?model=${MODEL_URL}`;

/** axe-core's violations in the page (and its same-origin frames), as "rule: target" lines. */
async function axe(page, where) {
  const found = await page.evaluate(async ({ src, tags }) => {
    if (!window.axe) (0, eval)(src);
    const r = await window.axe.run(document, { runOnly: { type: 'tag', values: tags }, resultTypes: ['violations'] });
    return r.violations.map((v) => `${v.id} (${v.impact}): ${v.nodes.slice(0, 4).map((n) => n.target.join(' ')).join(', ')} — ${v.nodes[0]?.failureSummary?.split('\n')[1] ?? ''}`);
  }, { src: AXE, tags: TAGS });
  assert.deepEqual(found, [], `axe-core found violations ${where}:\n${found.join('\n')}`);
}

async function loadPage(page, url = `${sites.assets.origin}/${query}`) {
  await page.goto(url);
  await page.waitFor(() => ['ready', 'error'].includes(window.pageState), null, 90_000);
  const s = await page.evaluate(() => ({ state: window.pageState, error: document.getElementById('error').textContent }));
  assert.equal(s.state, 'ready', `the model did not load: ${s.error}`);
}

/** Waits until the page is idle again after a generation or lab; fails on a shown error. */
async function idle(page, what) {
  await page.waitFor(() => window.pageState !== 'busy', null, 120_000, 50);
  const error = await page.evaluate(() => (document.getElementById('error').hidden ? null : document.getElementById('error').textContent));
  assert.equal(error, null, `${what} failed`);
}

/** The settings that keep every lab short. */
async function smallLabs(page) {
  await page.fill('#prompt', PROMPT);
  await page.fill('#max-tokens', 12);
  await page.fill('#temperature', 0);
  await page.fill('#lab-lengths', '2, 4');
  await page.fill('#lab-repeats', 1);
  await page.fill('#cmp-seeds', '1');
  await page.fill('#cmp-beams', '2');
  await page.fill('#cmp-tokens', 6);
  await page.fill('#naive-tokens', 6);
  await page.fill('#spec-tokens', 8);
  await page.fill('#batch-sizes', '1, 2');
  await page.fill('#batch-tokens', 4);
  await page.fill('#predict-tokens', 4);
  await page.fill('#check-n', 4);
  await page.fill('#check-guess', 1);
  await page.fill('#code-box', SHORT_LOOP);
  await page.fill('#api-base', `${api.origin}/v1`);
  await page.fill('#api-key', api.key);
  await page.fill('#api-model', 'ttft=20 tpot=2');
  await page.fill('#api-lengths', '2,4');
}

const LABS = [['cost-compare', 'fewer tokens, measured'], ['shape-load', 'shape the distribution'], ['lab-run', 'the length lab'], ['cmp-run', 'greedy, sampling, beam'], ['naive-run', 'the no-KV-cache lab'],
  ['spec-run', 'the speculative lab'], ['batch-run', 'the batching lab'], ['predict-run', 'predict, then measure'], ['code-run', 'write the loop yourself'],
  ['api-run', 'a real API'], ['check-time', 'check yourself: how long'], ['check-levers', 'check yourself: what cuts it']];

/**
 * Focuses the control before the element with `id` (in document order), then presses Tab until
 * `id` has the focus (the walk above checked the whole order from the top); returns the presses.
 */
async function tabTo(page, id, max = 12) {
  await page.evaluate((id) => {
    const all = [...document.querySelectorAll('a[href], button, input, select, textarea, [tabindex], summary')]
      .filter((el) => !el.disabled && el.tabIndex >= 0 && el.getClientRects().length > 0);
    const at = all.findIndex((el) => el.id === id);
    if (at < 1) throw new Error(`#${id} is not a focusable control after another one`);
    all[at - 1].focus();
  }, id);
  for (let i = 1; i <= max; i++) {
    await page.press('Tab');
    if (await page.evaluate((id) => document.activeElement?.id === id, id)) return i;
  }
  throw new Error(`Tab never reached #${id} in ${max} presses`);
}

for (const name of ENGINES) {
  describe(name, () => {
    let engine;
    before(async () => {
      engine = await launchEngine(name);
    });
    after(() => engine?.close());

    test('axe-core: no WCAG 2.2 A/AA violation on the page after load, a generation and each lab', T, async () => {
      await withEnginePage(engine, async (page) => {
        await loadPage(page);
        await axe(page, 'after load');
        await smallLabs(page);
        await page.check('#boundaries', true);
        await page.check('#watch-loop', true);
        await page.click('#generate');
        await idle(page, 'Generate');
        await axe(page, 'after a generation (token boundaries and "watch the loop" on)');
        for (const [id, what] of LABS) {
          await page.click(`#${id}`);
          await idle(page, what);
          await axe(page, `after ${what}`);
        }
        await page.fill('#model-url', 'models/nope/');
        await page.click('#load');
        await page.waitFor(() => !document.getElementById('error').hidden, null, 30_000);
        await axe(page, 'with a load error shown');
      });
    });

    test('axe-core: no violation on the iframe embed and on the widget in light and dark host pages', T, async () => {
      await withEnginePage(engine, async (page) => {
        const q = `prompt=${encodeURIComponent(PROMPT)}&max-tokens=8&temperature=0&readout&watch&autorun${query ? `&model=${encodeURIComponent(`${sites.assets.origin}/${MODEL_URL}`)}` : ''}`;
        await page.goto(sites.course.page(`<main><h1>Lesson</h1>
          <iframe title="GPT-2 generator" src="${sites.assets.origin}/embed.html?${q}" style="width: 100%; height: 400px; border: 0"></iframe></main>
          <script>window.posted = []; addEventListener('message', (e) => window.posted.push(e.data));</script>`));
        await page.waitFor(() => window.posted.some((m) => m?.type === 'gpt2-web:done' || m?.type === 'gpt2-web:error'), null, 90_000);
        await axe(page, 'on a course page with the iframe embed');
        await page.goto(`${sites.assets.origin}/embed.html?${q}`);
        await page.waitFor(() => document.querySelector('gpt2-generator')?.shadowRoot?.querySelector('[data-r="total"]')?.textContent.match(/\d/), null, 90_000);
        await axe(page, 'in embed.html itself after a generation');
        for (const [scheme, css] of [['light', 'background: #ffffff; color: #111111'], ['dark', 'background: #121212; color: #eeeeee']]) {
          await page.goto(sites.course.page(`<style>:root { color-scheme: ${scheme}; } body { ${css} }</style>
            <main><h1>Lesson (${scheme} page)</h1><p>Press Generate.</p>
            <script type="module" src="${sites.assets.origin}/widget.js"></script>
            <gpt2-generator${query ? ` model="${sites.assets.origin}/${MODEL_URL}"` : ''} prompt="${PROMPT}" max-tokens="8" temperature="0" readout watch tokens autorun></gpt2-generator></main>`));
          await page.waitFor(() => document.querySelector('gpt2-generator')?.shadowRoot?.querySelector('[data-r="total"]')?.textContent.match(/\d/), null, 90_000);
          // The widget's token view: its first token focused says its probability.
          const details = await page.evaluate(() => {
            const root = document.querySelector('gpt2-generator').shadowRoot;
            root.querySelector('[data-output] .tok').focus();
            return root.querySelector('[data-token-details]').textContent;
          });
          assert.match(details, /(^Token 1: .*picked with probability [\d.]+%|tokens make the text)/s, 'the widget\'s token view');
          await axe(page, `on a ${scheme} host page with the widget after a generation`);
        }
      });
    });

    test('keyboard: every control is reached by Tab with a visible focus; Generate, Stop and every lab run from keys', T, async () => {
      await withEnginePage(engine, async (page) => {
        await loadPage(page);
        await smallLabs(page);
        // A click on the heading (not focusable) puts the focus navigation starting point at the
        // top: the first Tab goes to the first control, in every engine.
        await page.evaluate(() => {
          document.activeElement?.blur();
          window.scrollTo(0, 0);
        });
        await page.click('h1');
        // One walk through the whole page: what takes the focus, and whether it shows.
        const controls = await page.evaluate(() => {
          const visible = (el) => el.offsetParent !== null || el.getClientRects().length > 0;
          return [...document.querySelectorAll('a[href], button, input, select, textarea, summary, [tabindex]')]
            .filter((el) => !el.disabled && el.tabIndex >= 0 && visible(el))
            .map((el) => (el.type === 'radio' ? `radio:${el.name}` : el.id ? `#${el.id}` : `${el.tagName.toLowerCase()}:${el.textContent.trim().slice(0, 24)}`));
        });
        const reached = new Map();
        for (let i = 0; i < 200; i++) {
          await page.press('Tab');
          const f = await page.evaluate(() => {
            const el = document.activeElement;
            if (!el || el === document.body) return null;
            const s = getComputedStyle(el);
            const ring = (s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2) || (s.boxShadow && s.boxShadow !== 'none');
            const key = el.type === 'radio' ? `radio:${el.name}` : el.id ? `#${el.id}` : `${el.tagName.toLowerCase()}:${el.textContent.trim().slice(0, 24)}`;
            return { key, ring };
          });
          if (!f) continue;
          reached.set(f.key, reached.get(f.key) || f.ring);
          // Stop at the last control: a Tab past it leaves the page for the browser's toolbar,
          // from where (in Firefox) the page does not get its keys' default actions back.
          if (controls.every((k) => reached.has(k))) break;
        }
        const missed = [...new Set(controls)].filter((k) => !reached.has(k));
        assert.deepEqual(missed, [], `Tab never reached: ${missed.join(', ')}`);
        const unseen = [...reached].filter(([, ring]) => !ring).map(([k]) => k);
        assert.deepEqual(unseen, [], `no visible focus indicator on: ${unseen.join(', ')}`);

        // Generate from the prompt with Ctrl+Enter, and by Enter on the focused button; Escape stops.
        await page.evaluate(() => document.getElementById('prompt').focus());
        await page.press('Control+Enter');
        await idle(page, 'Ctrl+Enter in the prompt');
        assert.ok(await page.evaluate(() => window.lastResult?.tokens.length > 0), 'Ctrl+Enter did not generate');
        await page.fill('#max-tokens', 5);
        await page.evaluate(() => { window.lastResult = null; });
        await tabTo(page, 'generate');
        await page.press('Enter');
        await page.waitFor(() => window.lastResult || !document.getElementById('error').hidden, null, 30_000);
        await idle(page, 'Enter on Generate');
        assert.equal(await page.evaluate(() => window.lastResult?.tokens.length), 5, 'Enter on Generate did not generate');
        // Escape stops what runs: the lab without a KV cache over 200 tokens takes seconds.
        await page.fill('#naive-tokens', 200);
        await page.evaluate(() => { window.naiveLab = 'not yet'; });
        await tabTo(page, 'naive-run');
        await page.press('Enter');
        await page.waitFor(() => window.pageState === 'busy', null, 5_000, 5);
        await page.press('Escape');
        await idle(page, 'the no-KV-cache lab, then Escape');
        assert.equal(await page.evaluate(() => window.naiveLab), null, 'Escape did not stop the lab');
        await page.fill('#naive-tokens', 6);
        // Each lab by Space on its focused button.
        for (const [id, what] of LABS) {
          const before = await page.evaluate(() => [window.costCompare, window.shapeLab, window.labResult, window.comparison, window.naiveLab, window.speculativeLab, window.batchLab, window.prediction, window.codeLab, window.apiLab, window.checkTime, window.checkLevers].filter(Boolean).length);
          await tabTo(page, id);
          await page.press('Space');
          await page.waitFor(() => window.pageState === 'busy' || window.pageState === 'ready', null, 5_000);
          await idle(page, what);
          const after = await page.evaluate(() => [window.costCompare, window.shapeLab, window.labResult, window.comparison, window.naiveLab, window.speculativeLab, window.batchLab, window.prediction, window.codeLab, window.apiLab, window.checkTime, window.checkLevers].filter(Boolean).length);
          assert.equal(after, before + 1, `Space on #${id} did not run ${what}`);
        }
        // Tokens as the model sees them: Tab from the output reaches its first token, arrows move,
        // and the details say what each is, with its probability.
        await page.fill('#max-tokens', 6);
        await page.check('#boundaries', true);
        await page.evaluate(() => { window.lastResult = null; });
        await page.click('#generate');
        await page.waitFor(() => window.lastResult || !document.getElementById('error').hidden, null, 30_000);
        await idle(page, 'Generate with Show tokens');
        await page.evaluate(() => document.getElementById('output').focus());
        await page.press('Tab');
        assert.ok(await page.evaluate(() => document.activeElement?.classList.contains('tok')), 'Tab from the output did not reach a token');
        await page.press('ArrowRight');
        const said = await page.evaluate(() => ({
          index: [...document.querySelectorAll('#output .tok')].indexOf(document.activeElement),
          details: document.getElementById('token-details').textContent,
        }));
        assert.equal(said.index, 1, 'ArrowRight did not move to the second token');
        assert.match(said.details, /^(Token 2: “[^”]*”, id \d+, picked with probability [\d.]+%\.( Also likely: .+\.)?|\d tokens make the text .+)$/s);
      });
    });

    test('screen readers: aria-busy while generating, the stream announced at line or sentence ends, once "Done" at the end', T, async () => {
      await withEnginePage(engine, async (page) => {
        await loadPage(page);
        await page.fill('#prompt', PROMPT);
        await page.fill('#max-tokens', 48);
        await page.fill('#temperature', 0);
        await page.check('#ignore-eos', true);
        await page.evaluate(() => {
          // Every change of a live region's text, and the output's aria-busy, as they happen.
          window.spoken = [];
          window.busy = [];
          const live = [...document.querySelectorAll('[aria-live]:not([aria-live="off"]), [role="status"], [role="alert"], [role="log"]')];
          const last = new Map(live.map((el) => [el, el.textContent]));
          new MutationObserver(() => {
            for (const el of live) {
              if (el.textContent !== last.get(el)) {
                last.set(el, el.textContent);
                if (el.textContent.trim()) window.spoken.push({ id: el.id, text: el.textContent, tokens: window.tokenEvents });
              }
            }
          }).observe(document.body, { subtree: true, childList: true, characterData: true });
          const out = document.getElementById('output');
          new MutationObserver(() => window.busy.push(out.getAttribute('aria-busy'))).observe(out, { attributes: true, attributeFilter: ['aria-busy'] });
        });
        await page.click('#generate');
        await idle(page, 'Generate');
        const got = await page.evaluate(() => ({ spoken: window.spoken, busy: window.busy, result: window.lastResult, busyNow: document.getElementById('output').getAttribute('aria-busy') }));
        const { spoken, result } = got;
        assert.equal(result.tokens.length, 48);
        assert.deepEqual(got.busy, ['true', 'false'], 'aria-busy was not set while generating and cleared after');
        const stream = spoken.filter((s) => s.id === 'spoken');
        const ends = (result.text.match(/[.!?…]+["')\]]*(?=\s)|\n/g) || []).length;
        assert.ok(stream.length >= 1, 'nothing of the text was announced');
        assert.ok(stream.length <= ends + 1, `${stream.length} announcements for ${ends} line or sentence ends`);
        assert.equal(stream.map((s) => s.text).join(' ').replace(/\s+/g, ' ').trim(),
          result.text.replace(/\s+/g, ' ').trim(), 'the announcements did not carry the whole text');
        const done = spoken.filter((s) => /^Done: /.test(s.text));
        assert.equal(done.length, 1, JSON.stringify(spoken));
        assert.match(done[0].text, /^Done: 48 tokens in [\d.]+ m?s\b/);
        assert.ok(spoken.length <= stream.length + 3, `live regions changed ${spoken.length} times: ${JSON.stringify(spoken.map((s) => s.text.slice(0, 40)))}`);
      });
    });

    test('charts have tables of their numbers; nothing animates; 320 px wide (reflow) never scrolls sideways', T, async () => {
      await withEnginePage(engine, async (page) => {
        // The page in a 320 px-wide frame: its layout is what a 320 px viewport (or 200% zoom of
        // 640 px) gets, in every engine (a WebKitGTK window cannot be that narrow).
        await page.goto(`${sites.assets.origin}${sites.assets.page('reflow', `<title>reflow</title><style>body { margin: 0 }</style>
          <iframe id="f" title="the page at 320 px" src="/${query}" style="width: 320px; height: 700px; border: 0"></iframe>`)}`);
        await page.waitFor(() => ['ready', 'error'].includes(document.getElementById('f').contentWindow.pageState), null, 90_000);
        const run = (id) => page.evaluate(async (id) => {
          const w = document.getElementById('f').contentWindow;
          w.document.getElementById(id).click();
          while (w.pageState !== 'busy' && w.pageState !== 'ready') await new Promise((r) => setTimeout(r, 20));
          await new Promise((r) => setTimeout(r, 20));
          while (w.pageState === 'busy') await new Promise((r) => setTimeout(r, 50));
          return w.document.getElementById('error').hidden ? null : w.document.getElementById('error').textContent;
        }, id);
        await page.evaluate(({ loop, server }) => {
          const d = document.getElementById('f').contentDocument;
          const set = (id, v) => { d.getElementById(id).value = String(v); };
          set('prompt', 'ROMEO:'); set('max-tokens', 12); set('temperature', 0); set('lab-lengths', '2, 4'); set('lab-repeats', 1);
          set('cmp-seeds', '1'); set('cmp-beams', '2'); set('cmp-tokens', 6); set('naive-tokens', 6); set('spec-tokens', 8);
          set('batch-sizes', '1, 2'); set('batch-tokens', 4); set('code-box', loop); set('api-base', `${server.origin}/v1`); set('api-key', server.key); set('api-model', 'ttft=20 tpot=2');
          set('api-lengths', '2,4'); set('shape-draws', 500); set('check-n', 4); set('check-guess', 1); set('price-in', 0.5); set('price-out', 2);
          d.getElementById('boundaries').click();
        }, { loop: SHORT_LOOP, server: { origin: api.origin, key: api.key } });
        for (const id of ['generate', 'cost-compare', 'shape-load', 'shape-sample', 'check-time', 'check-levers', 'lab-run', 'cmp-run', 'naive-run', 'spec-run', 'batch-run', 'code-run', 'api-run']) {
          assert.equal(await run(id), null, `#${id} failed`);
        }
        const got = await page.evaluate(() => {
          const w = document.getElementById('f').contentWindow;
          const d = w.document;
          const wide = [...d.querySelectorAll('body *')].filter((el) => {
            const r = el.getBoundingClientRect();
            return r.width > 0 && (r.right > w.innerWidth + 0.5 || r.left < -0.5);
          }).map((el) => `${el.tagName.toLowerCase()}${el.id ? `#${el.id}` : ''}.${[...el.classList].join('.')} (${Math.round(el.getBoundingClientRect().right)} px)`);
          // Each chart and the table that gives its numbers.
          const charts = [...d.querySelectorAll('canvas')].map((c) => {
            const table = d.getElementById(c.getAttribute('aria-details') ?? '');
            return { id: c.id, table: table?.tagName ?? null, rows: table?.tBodies[0]?.rows.length ?? 0 };
          });
          // Under prefers-reduced-motion (emulated where the driver can; nothing here animates at
          // all), no running animation or transition anywhere.
          const moving = [...d.querySelectorAll('*')].filter((el) => {
            const s = w.getComputedStyle(el);
            return s.animationName !== 'none' || s.transitionDuration.split(',').some((t) => parseFloat(t) > 0);
          }).map((el) => el.tagName.toLowerCase() + (el.id ? `#${el.id}` : ''));
          return {
            innerWidth: w.innerWidth, scrollWidth: d.documentElement.scrollWidth, wide, charts, moving,
            animations: d.getAnimations ? d.getAnimations().length : 0,
            spec: d.getElementById('spec-chart').getAttribute('aria-label'),
          };
        });
        assert.equal(got.innerWidth, 320);
        assert.ok(got.scrollWidth <= 320, `the page scrolls sideways at 320 px: ${got.scrollWidth} px wide; ${got.wide.slice(0, 8).join(', ')}`);
        assert.deepEqual(got.wide, [], 'elements reach past the 320 px viewport');
        for (const c of got.charts) {
          assert.equal(c.table, 'TABLE', `chart #${c.id} has no table of its numbers (aria-details)`);
          assert.ok(c.rows > 0, `chart #${c.id}'s table is empty after its lab ran`);
        }
        assert.deepEqual(got.moving, [], 'elements animate or transition');
        assert.equal(got.animations, 0);
      });
    });
  });
}

// Phones and tablets: touch emulation is Chromium's (Playwright); the other engines' narrow layout
// is the 320 px test above.
describe('phones and tablets (Chromium, 390×844, touch)', () => {
  const IPHONE = 'Mozilla/5.0 (iPhone; CPU iPhone OS 18_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.0 Mobile/15E148 Safari/604.1';
  let engine;
  before(async () => {
    engine = await launchEngine('chromium');
  });
  after(() => engine?.close());
  const phone = { viewport: { width: 390, height: 844 }, touch: true, userAgent: IPHONE };

  test('the page and the widget generate by tapping, and nothing scrolls sideways', T, async () => {
    await withEnginePage(engine, async (page) => {
      await loadPage(page);
      await page.fill('#max-tokens', 12);
      await page.fill('#temperature', 0);
      await page.page.tap('#generate');
      await idle(page, 'Generate (tapped)');
      const got = await page.evaluate(() => ({ tokens: window.lastResult?.tokens.length, width: document.documentElement.scrollWidth, vw: innerWidth }));
      assert.equal(got.tokens, 12);
      assert.equal(got.vw, 390);
      await page.page.tap('label:has(#boundaries)');
      await page.page.tap('#output .tok >> nth=2');
      assert.match(await page.evaluate(() => document.getElementById('token-details').textContent), /^(Token 3: |\d tokens make the text)/, 'a tapped token says what it is');
      assert.ok(got.width <= 390, `the page is ${got.width} px wide on a 390 px phone`);
    }, phone);
    await withEnginePage(engine, async (page) => {
      await page.goto(sites.course.page(`<meta name="viewport" content="width=device-width, initial-scale=1">
        <script type="module" src="${sites.assets.origin}/widget.js"></script>
        <gpt2-generator${query ? ` model="${sites.assets.origin}/${MODEL_URL}"` : ''} prompt="${PROMPT}" max-tokens="8" temperature="0" readout></gpt2-generator>`));
      await page.waitFor(() => document.querySelector('gpt2-generator')?.shadowRoot?.querySelector('[data-generate]:not([disabled])'), null, 90_000);
      await page.page.tap('gpt2-generator [data-generate]');
      await page.waitFor(() => document.querySelector('gpt2-generator').shadowRoot.querySelector('[data-r="total"]').textContent.match(/\d/), null, 60_000);
      const width = await page.evaluate(() => document.documentElement.scrollWidth);
      assert.ok(width <= 390, `the widget's page is ${width} px wide on a 390 px phone`);
    }, phone);
  });

  test('on iOS a model that needs more than ~1.5 GB is refused with that reason before its weights download', T, async () => {
    // GPT-2 XL's config.json (1.5 B parameters: about 2.1 GB in q8) and no weights at all.
    const dir = path.join(OUT, `site-${process.pid}`, '__test', 'xl');
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify({
      model_type: 'gpt2', n_layer: 48, n_head: 25, n_embd: 1600, n_positions: 1024, n_ctx: 1024, vocab_size: 50257, layer_norm_epsilon: 1e-5,
    }));
    const before = sites.assets.requests.length;
    await withEnginePage(engine, async (page) => {
      await page.goto(`${sites.assets.origin}/?model=__test/xl/`);
      await page.waitFor(() => window.pageState === 'error', null, 30_000);
      const msg = await page.text('#error');
      assert.match(msg, /1\.5 GB at which iOS and iPadOS close a browser tab/, msg);
      assert.match(msg, /^[A-Z].*\.$/s);
    }, phone);
    const asked = sites.assets.requests.slice(before).filter((p) => p.startsWith('/__test/xl/'));
    assert.deepEqual(asked, ['/__test/xl/config.json'], 'more than config.json was requested');
  });
});
