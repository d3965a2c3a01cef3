// Embedding from another origin (README, "Embedding"): the course page lives on one loopback
// origin (http://127.0.0.2:PORT, a server of this test) and gpt2-web's files on another
// (tools/serve.mjs at http://127.0.0.1:PORT, which sends Access-Control-Allow-Origin).
// Covers the script embed, the API import, stream() with break, a strict Content-Security-Policy
// that allows what the README lists and ones that do not, a 404 model, the iframe embed, and the
// npm package built into an app by Vite.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import http from 'node:http';
import { before, after } from 'node:test';
import {
  serveAndLaunch, startServer, withPage, nativeGenerate, ROOT, OUT, MODEL_DIR, MODEL_NAME, MODEL_URL, PROMPT, DEFAULT_WEIGHTS,
} from './harness.mjs';

const T = { timeout: 180_000 };
const env = serveAndLaunch();

/**
 * The assets' origin (tools/serve.mjs) and the course page's origin: a second server on another
 * loopback address. (A page answered by page.route has no address, so Chromium's Local Network
 * Access would treat it as a public page reaching into loopback; a real server keeps both local.)
 */
const assets = () => env.server.origin;
const course = () => courseServer.origin;
/** The widget's model attribute: none (the demo beside widget.js) unless another model is under test. */
const modelAttr = () => (MODEL_NAME === 'gpt2-shakespeare' ? '' : ` model="${assets()}/${MODEL_URL}"`);

/** path → { body, headers } that the course server answers. */
const coursePages = new Map();
let courseServer;
before(async () => {
  const server = http.createServer((req, res) => {
    const page = coursePages.get(new URL(req.url, 'http://x').pathname);
    if (!page) return res.writeHead(404).end();
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-store', ...page.headers }).end(page.body);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.2', resolve));
  const { port } = server.address();
  courseServer = { origin: `http://127.0.0.2:${port}`, close: () => new Promise((resolve) => server.close(resolve)) };
});
after(() => courseServer?.close());

let pages = 0;
/** Opens `body` as a page of the course's origin, with these response headers (e.g. a CSP). */
async function coursePage(page, body, headers = {}) {
  const path = `/course-${++pages}.html`;
  coursePages.set(path, { body: `<!doctype html><meta charset="utf-8">${body}`, headers });
  // Listeners before the page's scripts run: an autorun widget may finish (or fail) at once.
  await page.addInitScript(() => {
    window.outcomes = [];
    window.tokens = 0;
    document.addEventListener('gpt2-token', () => window.tokens++);
    for (const type of ['done', 'error']) {
      document.addEventListener(`gpt2-${type}`, (e) => window.outcomes.push({ type, detail: e.detail, ms: performance.now() }));
    }
  });
  await page.goto(`${course()}${path}`);
}

/** A widget page: the script from the assets' origin, one element; `events` collects gpt2-* events. */
function widgetHtml(attrs) {
  return `<script type="module" src="${assets()}/widget.js"></script>
    <gpt2-generator id="g"${attrs}></gpt2-generator>`;
}

/** Waits for the widget's first gpt2-done or gpt2-error; returns { type, detail, ms, shown }. */
async function firstOutcome(page) {
  await page.waitForFunction(() => window.outcomes.length > 0, null, { timeout: 90_000 });
  return page.evaluate(() => {
    const alert = document.getElementById('g').shadowRoot.querySelector('[role="alert"]');
    return { ...window.outcomes[0], shown: alert.hidden ? null : alert.textContent };
  });
}

test('script embed from another origin: the widget generates the CLI\'s greedy text, gpt2-* events fire', T, async () => {
  const n = 16;
  const native = nativeGenerate(PROMPT, n);
  await withPage(env.browser, 'about:blank', async (page, { requests }) => {
    await coursePage(page, widgetHtml(`${modelAttr()} prompt="${PROMPT}" max-tokens="${n}" temperature="0" autorun readout`));
    const outcome = await firstOutcome(page);
    assert.equal(outcome.type, 'done', `the widget failed: ${JSON.stringify(outcome.detail)}`);
    assert.equal(outcome.detail.text, native.text);
    assert.equal(await page.evaluate(() => window.tokens), outcome.detail.tokens.length);
    assert.equal(await page.evaluate(() => location.origin), course());
    // The engine and the model came from the assets' origin.
    assert.ok(requests.some((u) => u.startsWith(`${assets()}/pkg`) && u.endsWith('.wasm')), requests.join('\n'));
    assert.ok(requests.some((u) => u.startsWith(assets()) && u.endsWith(DEFAULT_WEIGHTS)), requests.join('\n'));
  });
});

test('API import from another origin: the default model resolves beside gpt2.js; stream() yields every token; break aborts', T, async () => {
  const n = 12;
  const native = nativeGenerate(PROMPT, n);
  await withPage(env.browser, 'about:blank', async (page) => {
    await coursePage(page, '<title>API from another origin</title>');
    const got = await page.evaluate(async ({ base, prompt, n, model }) => {
      const { Gpt2 } = await import(`${base}/gpt2.js`);
      const m = await Gpt2.load(model ? { model } : {});
      const s = m.stream(prompt, { maxTokens: n });
      const events = [];
      for await (const t of s) events.push(t);
      const full = await s.result;
      const s2 = m.stream(prompt, { maxTokens: 60 });
      let seen = 0;
      for await (const t of s2) if (++seen === 3 && t) break;
      const broken = await s2.result;
      let error = null;
      try {
        for await (const t of m.stream(prompt, { temperature: -1 })) events.push(t);
      } catch (e) {
        error = e.message;
      }
      const out = { name: m.name, events, full, broken, seen, error };
      m.dispose();
      return out;
    }, { base: assets(), prompt: PROMPT, n, model: MODEL_NAME === 'gpt2-shakespeare' ? null : `${assets()}/${MODEL_URL}` });
    assert.ok(got.name.startsWith(`${assets()}/models/`), `the model resolved to ${got.name}`);
    assert.equal(got.full.text, native.text);
    assert.deepEqual(got.events.map((e) => e.id), got.full.tokens);
    assert.equal(got.events.map((e) => e.text).join(''), got.full.text);
    assert.equal(got.broken.stopReason, 'abort');
    assert.ok(got.broken.tokens.length >= 3 && got.broken.tokens.length < 60, `${got.broken.tokens.length} tokens after a break at 3`);
    assert.match(got.error ?? '', /temperature/i);
  });
});

test('a cross-origin isolated course page runs the threaded build from another origin (its thread workers too)', T, async () => {
  const n = 10;
  const native = nativeGenerate(PROMPT, n);
  await withPage(env.browser, 'about:blank', async (page) => {
    await coursePage(page, '<title>isolated course page</title>', {
      'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp',
    });
    const got = await page.evaluate(async ({ base, prompt, n, model }) => {
      const { Gpt2 } = await import(`${base}/gpt2.js`);
      const m = await Gpt2.load({ threads: 2, ...(model ? { model } : {}) });
      const r = await m.generate(prompt, { maxTokens: n });
      const out = { isolated: self.crossOriginIsolated, threads: m.threads, build: m.build, text: r.text };
      m.dispose();
      return out;
    }, { base: assets(), prompt: PROMPT, n, model: MODEL_NAME === 'gpt2-shakespeare' ? null : `${assets()}/${MODEL_URL}` });
    assert.equal(got.isolated, true);
    assert.equal(got.build, 'pkg-threads');
    assert.equal(got.threads, 2);
    assert.equal(got.text, native.text);
  });
});

/** The policy the README lists, under default-src 'none'. */
const strict = () => `default-src 'none'; script-src ${assets()} 'wasm-unsafe-eval'; worker-src blob: ${assets()}; ` +
  `connect-src ${assets()}`;

test('a strict Content-Security-Policy with what the README lists: the widget works', T, async () => {
  const native = nativeGenerate(PROMPT, 8);
  await withPage(env.browser, 'about:blank', async (page, { logs }) => {
    await coursePage(page, widgetHtml(`${modelAttr()} prompt="${PROMPT}" max-tokens="8" temperature="0" autorun`), { 'Content-Security-Policy': strict() });
    const outcome = await firstOutcome(page);
    assert.equal(outcome.type, 'done', `the widget failed: ${JSON.stringify(outcome.detail)}`);
    assert.equal(outcome.detail.text, native.text);
    // The widget's styles apply although inline styles are forbidden (constructed style sheets).
    const radius = await page.evaluate(() => getComputedStyle(document.getElementById('g').shadowRoot.querySelector('.box')).borderRadius);
    assert.equal(radius, '8px');
    assert.ok(!logs.some((l) => /Content Security Policy/i.test(l)), logs.join('\n'));
  });
});

test('a Content-Security-Policy that forbids the blob worker or wasm: a sentence that says which, and gpt2-error', T, async () => {
  const cases = [
    [strict().replace('worker-src blob:', 'worker-src'), /Content-Security-Policy blocked worker-src blob/],
    [strict().replace(`worker-src blob: ${assets()}`, 'worker-src blob:'), /Content-Security-Policy.*worker-src needs blob: and the asset host/],
    [strict().replace(" 'wasm-unsafe-eval'", ''), /wasm-unsafe-eval/],
  ];
  for (const [csp, want] of cases) {
    await withPage(env.browser, 'about:blank', async (page) => {
      await coursePage(page, widgetHtml(`${modelAttr()} prompt="${PROMPT}" max-tokens="4" autorun`), { 'Content-Security-Policy': csp });
      const outcome = await firstOutcome(page);
      assert.equal(outcome.type, 'error', `${csp}: no error event`);
      assert.match(outcome.detail.message, want);
      assert.match(outcome.shown ?? '', /^[A-Z].*\.$/s, `not a sentence: ${outcome.shown}`);
      assert.ok(outcome.ms < 15_000, `the error took ${outcome.ms} ms`);
    });
  }
});

test('a model folder that is not there (404, another origin): gpt2-error within seconds, shown as a sentence', T, async () => {
  await withPage(env.browser, 'about:blank', async (page) => {
    await coursePage(page, widgetHtml(` model="${assets()}/models/nope/"`));
    const outcome = await firstOutcome(page);
    assert.equal(outcome.type, 'error');
    assert.match(outcome.detail.message, /models\/nope\/config\.json.*404/);
    assert.match(outcome.shown ?? '', /^[A-Z].*404.*\.$/s);
    assert.ok(outcome.ms < 10_000, `the error took ${outcome.ms} ms`);
  });
});

test('a model on a host that sends no CORS headers: load rejects with a sentence that names CORS', T, async () => {
  const bare = await startServer({ args: ['--no-cors'] });
  try {
    await withPage(env.browser, 'about:blank', async (page) => {
      await coursePage(page, '<title>a model without CORS</title>');
      const message = await page.evaluate(async ({ base, model }) => {
        const { Gpt2 } = await import(`${base}/gpt2.js`);
        try {
          await Gpt2.load({ model });
          return null;
        } catch (e) {
          return e.message;
        }
      }, { base: assets(), model: `${bare.origin}/${MODEL_URL}` });
      assert.match(message ?? 'it loaded', new RegExp(`could not download ${bare.origin}/.*config\\.json.*Access-Control-Allow-Origin`));
    });
  } finally {
    await bare.close();
  }
});

test('iframe embed: embed.html generates from its query and posts its height; unknown parameters are named', T, async () => {
  const n = 8;
  const native = nativeGenerate(PROMPT, n);
  const model = MODEL_NAME === 'gpt2-shakespeare' ? '' : `&model=${encodeURIComponent(`${assets()}/${MODEL_URL}`)}`;
  await withPage(env.browser, 'about:blank', async (page) => {
    await coursePage(page, `<script>window.messages = []; addEventListener('message', (e) => messages.push(e.data));</script>
      <iframe id="ok" src="${assets()}/embed.html?prompt=${encodeURIComponent(PROMPT)}&max-tokens=${n}&temperature=0&readout&autorun${model}"
        style="width: 640px; height: 120px; border: 0"></iframe>
      <iframe id="bad" src="${assets()}/embed.html?promt=x" style="width: 640px; height: 120px; border: 0"></iframe>`);
    // The bad frame's error, and the good frame's result (or an error of its own).
    await page.waitForFunction(() => messages.filter((m) => m.type === 'gpt2-web:done' || m.type === 'gpt2-web:error').length >= 2,
      null, { timeout: 120_000 });
    const messages = await page.evaluate(() => messages);
    const done = messages.find((m) => m.type === 'gpt2-web:done');
    assert.ok(done, JSON.stringify(messages.filter((m) => m.type === 'gpt2-web:error')));
    assert.equal(done.result.text, native.text);
    const bad = messages.find((m) => m.type === 'gpt2-web:error');
    assert.match(bad?.message ?? '', /Unknown embed parameter "promt"/);
    // The last height posted is the content's height, taller than the iframe's 120 px.
    const frame = page.frames().find((f) => f.url().includes('temperature=0'));
    const height = await frame.evaluate(() => Math.ceil(document.getElementById('embed').getBoundingClientRect().height));
    const posted = await page.evaluate(() => messages.filter((m) => m.type === 'gpt2-web:height').map((m) => m.height));
    assert.ok(posted.length >= 1 && height > 120, `heights ${posted}, content ${height}`);
    await page.waitForFunction((h) => messages.filter((m) => m.type === 'gpt2-web:height').some((m) => m.height === h), height);
  });
});

test('npm package: the tarball, installed into a Vite app and built with `vite build`, generates', { timeout: 300_000 }, async () => {
  const out = path.join(OUT, 'npm');
  const app = path.join(OUT, 'vite-app');
  fs.rmSync(out, { recursive: true, force: true });
  fs.rmSync(app, { recursive: true, force: true });
  const packed = execFileSync(process.execPath, ['tools/package.mjs', '--out', out], { cwd: ROOT, encoding: 'utf8' });
  const tarball = fs.readdirSync(out).find((f) => /^gpt2-web-.*\.tgz$/.test(f));
  assert.ok(tarball, packed);
  const listing = execFileSync('tar', ['-tzf', path.join(out, tarball)], { encoding: 'utf8' });
  for (const f of ['package/gpt2.js', 'package/gpt2.d.ts', 'package/widget.js', 'package/worker.js', 'package/pkg/gpt2_web_bg.wasm',
    'package/pkg-relaxed/gpt2_web_bg.wasm', 'package/pkg-threads/gpt2_web_bg.wasm']) {
    assert.ok(listing.includes(f), `${f} is not in the tarball`);
  }
  assert.ok(!listing.includes('safetensors'), 'the npm package must not carry a model');

  fs.mkdirSync(app, { recursive: true });
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'vite-app', private: true, type: 'module' }));
  fs.writeFileSync(path.join(app, 'index.html'), '<!doctype html><meta charset="utf-8"><link rel="icon" href="data:,">' +
    '<script type="module" src="/main.js"></script><gpt2-generator id="g" model="/models/demo/"></gpt2-generator>');
  fs.writeFileSync(path.join(app, 'main.js'), `import { Gpt2 } from 'gpt2-web';
import 'gpt2-web/widget';
window.run = async (prompt, maxTokens) => {
  const model = await Gpt2.load({ model: '/models/demo/' });
  const r = await model.generate(prompt, { maxTokens });
  return { text: r.text, build: model.build };
};
`);
  execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--loglevel=error', path.join(out, tarball)], { cwd: app });
  const vite = path.join(ROOT, 'tests/e2e/node_modules/vite/bin/vite.js');
  execFileSync(process.execPath, [vite, 'build', '--logLevel', 'warn'], { cwd: app, stdio: ['ignore', 'pipe', 'inherit'] });
  const dist = path.join(app, 'dist');
  fs.cpSync(MODEL_DIR, path.join(dist, 'models/demo'), { recursive: true });

  const server = await startServer({ root: path.relative(ROOT, dist) });
  const native = nativeGenerate(PROMPT, 10);
  try {
    await withPage(env.browser, `${server.origin}/`, async (page) => {
      await page.waitForFunction(() => window.run && customElements.get('gpt2-generator'));
      const got = await page.evaluate(({ prompt }) => window.run(prompt, 10), { prompt: PROMPT });
      assert.equal(got.text, native.text);
      assert.match(got.build, /^pkg(-relaxed)?$/);
    });
  } finally {
    await server.close();
  }
});

test('the main page\'s "Copy embed code" writes snippets that work on another origin', T, async () => {
  const n = 6;
  const native = nativeGenerate(PROMPT, n);
  let snippets;
  await withPage(env.browser, `${assets()}/`, async (page) => {
    await page.fill('#prompt', PROMPT);
    await page.fill('#max-tokens', String(n));
    await page.fill('#temperature', '0');
    await page.fill('#stop-seqs', '\\n\\n');
    await page.click('#embed-show');
    snippets = await page.evaluate(() => ({ script: document.getElementById('embed-script').value, iframe: document.getElementById('embed-iframe').value }));
  });
  assert.ok(snippets.script.includes(`src="${assets()}/widget.js"`), snippets.script);
  assert.match(snippets.script, /stop="\\n\\n"/);
  assert.match(snippets.iframe, new RegExp(`src="${assets()}/embed\\.html\\?[^"]*max-tokens=${n}`));
  if (MODEL_NAME !== 'gpt2-shakespeare') return; // the snippets name the demo model
  await withPage(env.browser, 'about:blank', async (page) => {
    await coursePage(page, snippets.script.replace('<gpt2-generator', '<gpt2-generator id="g" autorun'));
    const outcome = await firstOutcome(page);
    assert.equal(outcome.type, 'done', JSON.stringify(outcome.detail));
    assert.equal(outcome.detail.text, native.text.split('\n\n')[0]);
  });
});
