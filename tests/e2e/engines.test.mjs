// The core of gpt2-web in every engine (Chromium, Firefox, WebKit; engines.mjs): one test body per
// engine for the API (greedy equals the CLI, callbacks exact, abort, a signal aborted before the
// call, the model given as bytes, a batch, a trap in one model and a worker that dies, the Cache
// API failing in each way), the page's Generate, its readout, the load's phases and Stop, the widget from another origin, the iframe embed, a failing load's sentence, the offline
// bundle from file://, and the threaded build on a cross-origin isolated page where the engine
// offers it. What each engine had (build, threads, WebGPU adapter, Cache API, …) is written to
// tests/e2e/out/support/<engine>.json; `node tools/support_table.mjs` prints the README's table.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ENGINES, launchEngine, withEnginePage } from './engines.mjs';
import { startSites } from './sites.mjs';
import { ensureBundle } from './bundle.mjs';
import { nativeGenerate, nativeTokenize, assertTokenEvents, OUT, MODEL_URL, MODEL_DIR, MODEL_NAME, MODEL_CONFIG, PROMPT, DEFAULT_WEIGHTS } from './harness.mjs';

const T = { timeout: 240_000 };
const N = 16;
let sites;
before(async () => {
  sites = await startSites();
});
after(() => sites?.close());

/** The CLI's greedy text, computed once per dtype and length. */
const natives = new Map();
function native(n = N, dtype = 'q8') {
  const key = `${n}/${dtype}`;
  if (!natives.has(key)) natives.set(key, nativeGenerate(PROMPT, n, dtype));
  return natives.get(key);
}

/** The widget's model attribute (none: the demo beside widget.js) unless another model is under test. */
const modelAttr = (origin) => (MODEL_NAME === 'gpt2-shakespeare' ? '' : ` model="${origin}/${MODEL_URL}"`);

/** What the engine had, merged into out/support/<engine>.json as the tests find it out. */
function record(engine, facts) {
  const dir = path.join(OUT, 'support');
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${engine.name}.json`);
  const old = fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')) : {};
  fs.writeFileSync(file, `${JSON.stringify({ ...old, engine: engine.name, version: engine.version, ...facts }, null, 2)}\n`);
}

/** Greedy N tokens of PROMPT through the page's form and a real click on Generate; waits for the end. */
async function clickGenerate(page) {
  await page.fill('#prompt', PROMPT);
  await page.fill('#max-tokens', N);
  await page.fill('#temperature', 0);
  await page.fill('#stop-seqs', '');
  await page.click('#generate');
  await page.waitFor(() => window.lastResult || !document.getElementById('error').hidden, null, 60_000);
}

for (const name of ENGINES) {
  describe(name, () => {
    let engine;
    before(async () => {
      engine = await launchEngine(name);
      const dir = path.join(OUT, 'support');
      fs.rmSync(path.join(dir, `${name}.json`), { force: true });
    });
    after(() => engine?.close());

    test('API: greedy text and ids equal the CLI, one onToken per token in order, abort within a few tokens', T, async () => {
      const want = native();
      const got = await withEnginePage(engine, async (page) => {
        await page.goto(`${sites.assets.origin}${sites.assets.page('api', '<title>API test</title>')}`);
        return page.evaluate(async ({ folder, prompt, n, maxTokens }) => {
          const { Gpt2 } = await import('/gpt2.js');
          const model = await Gpt2.load({ model: folder });
          const events = [];
          const result = await model.generate(prompt, { maxTokens: n, temperature: 0, onToken: (e) => events.push(e) });
          const ctrl = new AbortController();
          let late = 0;
          let done = false;
          const seen = [];
          const aborted = await model.generate(prompt, {
            maxTokens, ignoreEos: true, signal: ctrl.signal,
            onToken: (e) => { if (done) late++; seen.push(e.index); if (e.index === 2) ctrl.abort(); },
          });
          done = true;
          await new Promise((r) => setTimeout(r, 50));
          // A signal aborted before the call: the aborted result at once, no token.
          const pre = new AbortController();
          pre.abort();
          let preEvents = 0;
          const preAborted = await model.generate(prompt, { signal: pre.signal, onToken: () => preEvents++ });
          // The model given as the three files' bytes: the same greedy tokens, progress per file.
          const get = async (f) => (await fetch(folder + f)).arrayBuffer();
          const [config, weights, tokenizer] = await Promise.all(['config.json', 'model.safetensors', 'tokenizer.json'].map(get));
          const progress = new Set();
          const fromBytes = await Gpt2.load({ model: { config, weights, tokenizer }, backend: 'cpu', onProgress: (p) => progress.add(p.file) });
          const bytes = {
            tokens: (await fromBytes.generate(prompt, { maxTokens: n, temperature: 0 })).tokens,
            config: fromBytes.config, ids: await fromBytes.tokenize(prompt), files: [...progress].sort(),
          };
          fromBytes.dispose();
          // What the engine offers, for the support table.
          let adapter = null;
          try {
            adapter = navigator.gpu ? ((await navigator.gpu.requestAdapter()) ? 'yes' : 'none') : 'no navigator.gpu';
          } catch (e) {
            adapter = `error: ${e.message}`;
          }
          let cacheApi = false;
          try {
            cacheApi = typeof caches !== 'undefined' && !!(await caches.open('gpt2-web-probe'));
            await caches.delete('gpt2-web-probe');
          } catch {
            cacheApi = false;
          }
          const out = {
            backend: model.backend, build: model.build, threads: model.threads, gpuUnavailable: model.gpuUnavailable ?? null,
            result, events, aborted: { stopReason: aborted.stopReason, tokens: aborted.tokens.length, seen: seen.length, late },
            preAborted: { stopReason: preAborted.stopReason, tokens: preAborted.tokens.length, events: preEvents }, bytes,
            adapter, cacheApi, ua: navigator.userAgent,
            relaxed: WebAssembly.validate(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0,
              10, 15, 1, 13, 0, 65, 1, 253, 15, 65, 2, 253, 15, 253, 128, 2, 11])),
          };
          model.dispose();
          return out;
        }, { folder: `/${MODEL_URL}`, prompt: PROMPT, n: N, maxTokens: MODEL_CONFIG.n_positions - 16 });
      });
      const { result, events } = got;
      assert.equal(got.backend, 'cpu', 'no engine has a WebGPU adapter here, so auto must pick the CPU');
      assert.equal(got.build, got.relaxed ? 'pkg-relaxed' : 'pkg', 'the worker picked the wrong build for this engine');
      assert.equal(got.threads, 1);
      assert.deepEqual(result.tokens, want.tokens, 'greedy tokens differ from the native CLI');
      assert.equal(result.text, want.text);
      assertTokenEvents(events, result);
      assert.equal(got.aborted.stopReason, 'abort');
      assert.ok(got.aborted.tokens >= 3 && got.aborted.tokens <= 3 + 8, `${got.aborted.tokens} tokens after an abort at the third`);
      assert.equal(got.aborted.seen, got.aborted.tokens);
      assert.equal(got.aborted.late, 0, 'onToken fired after generate resolved');
      assert.deepEqual(got.preAborted, { stopReason: 'abort', tokens: 0, events: 0 });
      assert.deepEqual(got.bytes.tokens, want.tokens, 'the model given as bytes: greedy tokens differ from the CLI');
      assert.deepEqual(got.bytes.ids, nativeTokenize(PROMPT));
      assert.deepEqual([got.bytes.config.nLayer, got.bytes.config.nPositions, got.bytes.config.vocabSize],
        [MODEL_CONFIG.n_layer, MODEL_CONFIG.n_positions, MODEL_CONFIG.vocab_size]);
      assert.deepEqual(got.bytes.files, ['config.json', 'model.safetensors', 'tokenizer.json']);
      assert.ok(sites.assets.requests.includes(`/${got.build}/gpt2_web_bg.wasm`), 'the chosen build\'s wasm was not fetched');
      record(engine, {
        build: got.build, relaxedSimd: got.relaxed, webgpuAdapter: got.adapter, cacheApi: got.cacheApi, userAgent: got.ua,
        gpuUnavailable: got.gpuUnavailable,
      });
    });

    test('API: draft mtp (the demo model\'s heads, in its GGUF file) gives the plain greedy tokens in fewer model steps; the heads measure whether they pay, and the next visit remembers it', T, async () => {
      const got = await withEnginePage(engine, async (page) => {
        await page.goto(`${sites.assets.origin}${sites.assets.page('mtp', '<title>MTP test</title>')}`);
        return page.evaluate(async ({ prompt }) => {
          const { Gpt2 } = await import('/gpt2.js');
          const out = {};
          for (const dtype of ['q8', 'f32']) {
            const model = await Gpt2.load({ backend: 'cpu', dtype }); // the demo model
            const opts = { maxTokens: 40, temperature: 0, ignoreEos: true };
            const plain = await model.generate(prompt, opts);
            const events = [];
            const mtp = await model.generate(prompt, { ...opts, draft: 'mtp', forceDraft: true, onToken: (e) => events.push(e) });
            out[dtype] = { heads: model.mtpHeads, plain: plain.tokens, mtp: mtp.tokens, metrics: mtp.metrics, drafted: events.filter((e) => e.drafted).length };
            // Without forceDraft the first generations time drafted blocks against plain ones.
            const measured = [];
            for (let i = 0; i < 6 && !measured.at(-1)?.verdict; i++) {
              const r = await model.generate(prompt, { ...opts, draft: 'mtp' });
              measured.push({ ...r.metrics.mtp, same: r.tokens.join() === plain.tokens.join() });
            }
            out[dtype].measured = measured;
            model.dispose();
          }
          // A later load of the model in this browser takes the verdict instead of measuring again.
          const again = await Gpt2.load({ backend: 'cpu', dtype: 'q8' });
          const plain = await again.generate(prompt, { maxTokens: 40, temperature: 0, ignoreEos: true });
          const r = await again.generate(prompt, { maxTokens: 40, temperature: 0, ignoreEos: true, draft: 'mtp' });
          out.again = { mtp: r.metrics.mtp, forwards: r.metrics.targetForwards, same: r.tokens.join() === plain.tokens.join() };
          again.dispose();
          return out;
        }, { prompt: 'ROMEO.\nI will not'});
      });
      const { again, ...dtypes } = got;
      for (const [dtype, r] of Object.entries(dtypes)) {
        assert.ok(r.heads?.heads >= 1 && r.heads.draftVocab > 0, `${dtype}: no heads: ${JSON.stringify(r.heads)}`);
        assert.deepEqual(r.mtp, r.plain, `${dtype}: greedy with the heads' drafts differs from plain greedy`);
        assert.ok(r.metrics.acceptedDraftTokens > 0 && r.metrics.targetForwards < r.plain.length, `${dtype}: ${JSON.stringify(r.metrics)}`);
        assert.equal(r.drafted, r.metrics.acceptedDraftTokens);
        assert.deepEqual(r.metrics.mtp && [r.metrics.mtp.ran, r.metrics.mtp.forced], ['drafted', true]);
        const v = r.measured.at(-1).verdict;
        assert.ok(r.measured.every((m) => m.same), `${dtype}: a measuring generation's tokens differ from plain greedy`);
        assert.equal(r.measured[0].ran, 'measuring', JSON.stringify(r.measured[0]));
        assert.ok(v && v.forwards === 64 && v.speedup > 0 && !v.remembered && v.on === v.speedup >= 1.1, `${dtype}: ${JSON.stringify(r.measured)}`);
      }
      const v = again.mtp?.verdict;
      assert.ok(v?.remembered && v.forwards === 64, `not remembered: ${JSON.stringify(again)}`);
      assert.equal(again.mtp.ran, v.on ? 'drafted' : 'plain');
      assert.ok(again.same, 'the remembered verdict changed the tokens');
      assert.ok(v.on ? again.forwards < 40 : again.forwards === 40, JSON.stringify(again));
    });

    test('API: concurrent generates on one model run as one batch, each with the tokens it gets alone; an aborted one leaves alone', T, async () => {
      const got = await withEnginePage(engine, async (page) => {
        await page.goto(`${sites.assets.origin}${sites.assets.page('batch', '<title>batch test</title>')}`);
        return page.evaluate(async ({ folder, prompt, n }) => {
          const { Gpt2 } = await import('/gpt2.js');
          const model = await Gpt2.load({ model: folder });
          const calls = [
            [prompt, { maxTokens: n, temperature: 0 }],
            ['O', { maxTokens: n + 4, temperature: 0.9, seed: 3 }],
            [`${prompt} and`, { maxTokens: n - 4, temperature: 0.9, topK: 40, seed: 5 }],
          ];
          const alone = [];
          for (const [p, o] of calls) alone.push((await model.generate(p, o)).tokens);
          const ctrl = new AbortController();
          const aborted = model.generate(prompt, {
            maxTokens: 60, ignoreEos: true, signal: ctrl.signal, onToken: (e) => { if (e.index === 1) ctrl.abort(); },
          });
          const together = await Promise.all([...calls.map(([p, o]) => model.generate(p, o)), aborted]);
          const single = await model.generate(prompt, { maxTokens: 4, numBeams: 2 }); // beams run alone, after
          // n: choice i is the generation with seed + i; token events carry their choice.
          const seen = new Set();
          const many = await model.generate('O', { maxTokens: n, temperature: 0.9, seed: 2, n: 3, onToken: (e) => seen.add(e.choice) });
          const singles = [];
          for (let i = 0; i < 3; i++) singles.push((await model.generate('O', { maxTokens: n, temperature: 0.9, seed: 2 + i })).tokens);
          model.dispose();
          return {
            many: { choices: many.choices.map((c) => [...c.tokens]), tokens: [...many.tokens], seen: [...seen].sort() }, // copies: a value returned twice does not survive every driver
            singles,
            alone,
            together: together.map((r) => ({ tokens: r.tokens, stopReason: r.stopReason, batchSize: r.metrics.batchSize })),
            beams: single.metrics.batchSize,
          };
        }, { folder: `/${MODEL_URL}`, prompt: PROMPT, n: N });
      });
      for (let i = 0; i < got.alone.length; i++) {
        assert.deepEqual(got.together[i].tokens, got.alone[i], `generation ${i} in the batch differs from alone`);
      }
      const last = got.together.at(-1);
      assert.equal(last.stopReason, 'abort');
      assert.ok(last.tokens.length >= 2 && last.tokens.length <= 2 + 4, `${last.tokens.length} tokens after an abort at the second`);
      const sizes = got.together.map((r) => r.batchSize);
      assert.ok(Math.min(...sizes) >= 2 && Math.max(...sizes) === 4, `batch sizes ${sizes}: the four did not share their steps`);
      assert.equal(got.beams, 1);
      assert.deepEqual(got.many.choices, got.singles, 'choice i is not the generation with seed + i');
      assert.deepEqual(got.many.tokens, got.singles[0], 'the result\'s own tokens are not choice 0\'s');
      assert.deepEqual(got.many.seen, [0, 1, 2]);
    });

    test('a trap in one model marks it crashed while the page\'s other model goes on; a worker that dies rejects everything pending with a sentence; each time the next load works', T, async () => {
      const want = native(8);
      const got = await withEnginePage(engine, async (page) => {
        await page.goto(`${sites.assets.origin}${sites.assets.page('crash', '<title>crash test</title>')}`);
        return page.evaluate(async ({ folder, prompt }) => {
          // The page's model worker, kept to send it the tests' requests (www/worker/testing.js).
          const workers = [];
          const Native = window.Worker;
          window.Worker = class extends Native {
            constructor(url, options) {
              super(url, options);
              if (options?.name === 'gpt2-web') workers.push(this);
            }
          };
          const { Gpt2 } = await import('/gpt2.js');
          const greedy = { maxTokens: 8, temperature: 0 };
          const message = (p) => p.then(() => null, (e) => e.message);
          /**
           * A long generation of `model`, with `msg` sent to the worker right behind its request:
           * the worker takes the generation first, so `msg` finds it running, however late the
           * page runs (a message sent at its third token could come after its last).
           */
          const broken = (model, msg) => {
            const done = message(model.generate(prompt, { maxTokens: 500, ignoreEos: true }));
            workers.at(-1).postMessage(msg);
            return done;
          };
          // Two models in one worker: one from the folder, one from its files' bytes (not shared).
          const bytes = async (f) => (await fetch(folder + f)).arrayBuffer();
          const other = await Gpt2.load({ model: { config: await bytes('config.json'), weights: await bytes('model.safetensors'), tokenizer: await bytes('tokenizer.json') } });
          const model = await Gpt2.load({ model: folder });
          const r = {};
          // A trap in the model's engine, three of its steps after the request is in.
          const trapped = broken(model, { op: 'trap', after: 3 });
          const queued = message(model.generate(prompt, { maxTokens: 4 }));
          [r.trapped, r.queued] = await Promise.all([trapped, queued]);
          r.later = await message(model.generate(prompt, greedy));
          r.other = (await other.generate(prompt, greedy)).text;
          const again = await Gpt2.load({ model: folder }); // the crashed one not disposed: not shared either
          model.dispose();
          r.again = (await again.generate(prompt, greedy)).text;
          // The whole worker dies: every model of the page with it.
          const died = broken(again, { op: 'crash' });
          const otherDied = message(other.generate(prompt, { ...greedy, maxTokens: 400, ignoreEos: true }));
          [r.died, r.otherDied] = await Promise.all([died, otherDied]);
          r.afterDeath = await message(other.generate(prompt, greedy));
          const fresh = await Gpt2.load({ model: folder });
          r.fresh = (await fresh.generate(prompt, greedy)).text;
          r.workers = workers.length;
          fresh.dispose();
          return r;
        }, { folder: `/${MODEL_URL}`, prompt: PROMPT });
      });
      for (const m of [got.trapped, got.queued]) assert.match(m ?? 'it resolved', /crashed inside WebAssembly.*unreachable.*load the model again|stopped working.*load it again/, m);
      assert.match(got.later ?? 'it resolved', /stopped working.*load it again/);
      assert.equal(got.other, want.text, 'the other model, after a trap in the first');
      assert.equal(got.again, want.text, 'the model loaded again after its trap');
      for (const m of [got.died, got.otherDied, got.afterDeath]) assert.match(m ?? 'it resolved', /worker stopped.*load the model again/, m);
      assert.equal(got.fresh, want.text, 'a model loaded after the worker died');
      assert.equal(got.workers, 2, 'a new worker after the first died, none before');
    });

    test('storage: a model from another origin is kept and checked; a full quota, refused storage or a write cut off still loads, says it will be downloaded again and leaves nothing trusted; a damaged or evicted copy is downloaded again; two loads at once leave one good copy', T, async () => {
      const want = native(8);
      const dir = `/storage-${name}/`; // each engine's own URLs
      for (const f of ['config.json', 'model.safetensors', 'tokenizer.json']) {
        sites.course.file(`${dir}${f}`, fs.readFileSync(path.join(MODEL_DIR, f)));
      }
      const got = await withEnginePage(engine, async (page) => {
        await page.goto(`${sites.assets.origin}${sites.assets.page('storage', '<title>storage test</title>')}`);
        return page.evaluate(async ({ folder, prompt }) => {
          // The next worker's Cache API fails as `fail` says (www/worker/testing.js), from its
          // first message on: the engines cannot be made to fill a quota or refuse storage on demand.
          let fail = null;
          const workers = [];
          const Native = window.Worker;
          window.Worker = class extends Native {
            constructor(url, options) {
              super(url, options);
              if (options?.name !== 'gpt2-web') return;
              workers.push(this);
              this.postMessage({ op: 'storage', fail });
            }
          };
          const { Gpt2 } = await import('/gpt2.js');
          const NAME = 'gpt2-web-models-v1';
          const keys = async () => (await (await caches.open(NAME)).keys())
            .map((r) => r.url).filter((u) => u.startsWith(folder)).map((u) => u.slice(folder.length)).sort();
          const load = async (how, dtype = 'q8') => {
            fail = how;
            workers.at(-1)?.postMessage({ op: 'storage', fail }); // a worker still running (or stopped: nothing)
            let weightsCached = null; // the last word: a damaged copy read first would end false
            const model = await Gpt2.load({ model: folder, dtype, onProgress: (p) => { if (p.file === 'model.safetensors') weightsCached = p.cached; } });
            const { text } = await model.generate(prompt, { maxTokens: 8, temperature: 0 });
            const out = { notCached: model.notCached, text, weightsCached, keys: await keys() };
            model.dispose();
            return out;
          };
          await caches.delete(NAME);
          const r = {};
          for (const how of ['quota', 'refuse', 'cut']) r[how] = await load(how);
          r.first = await load(null);
          r.again = await load(null);
          // A copy of tokenizer.json damaged in the cache: found by its check, downloaded again.
          await (await caches.open(NAME)).put(`${folder}tokenizer.json`, new Response('{"model": {"vocab": '));
          r.damaged = await load(null);
          await caches.delete(NAME); // evicted between two visits
          r.evicted = await load(null);
          await caches.delete(NAME);
          // Two models of one folder at once (two dtypes, so not shared): each downloads and writes
          // the same entries, as two tabs do (the drivers here give each page its own storage).
          r.together = await Promise.all([load(null, 'q8'), load(null, 'f32')]);
          r.after = await load(null);
          // A widget of a model that cannot be kept says so beside "Ready".
          fail = 'quota';
          workers.at(-1)?.postMessage({ op: 'storage', fail });
          await caches.delete(NAME);
          await import('/widget.js');
          const el = document.createElement('gpt2-generator');
          el.setAttribute('model', folder);
          document.body.append(el);
          await el.model;
          await new Promise((resolve) => setTimeout(resolve, 0));
          r.widget = el.shadowRoot.querySelector('[data-status]').textContent;
          el.remove();
          return r;
        }, { folder: `${sites.course.origin}${dir}`, prompt: PROMPT });
      });
      const kept = ['config.json', 'model.safetensors', 'tokenizer.json'].flatMap((f) => [f, `${f}?gpt2-web-check`]);
      for (const [how, why] of [['quota', /the storage quota is full/], ['refuse', /refused its storage: SecurityError/], ['cut', /AbortError: The write was cut off/]]) {
        const r = got[how];
        assert.equal(r.text, want.text, `${how}: the model did not run`);
        assert.match(r.notCached ?? 'no sentence', new RegExp(`^The model could not be kept in this browser's storage \\(.*${why.source}.*\\), so it will be downloaded again next time\\.$`), how);
        assert.ok(!r.keys.includes('model.safetensors'), `${how}: a weights entry was left: ${r.keys}`);
      }
      assert.deepEqual([got.first.notCached, got.first.weightsCached, got.first.keys], [null, false, kept], 'the first load from another origin');
      assert.deepEqual([got.again.text, got.again.weightsCached, got.again.notCached], [want.text, true, null], 'read back from the cache');
      assert.deepEqual([got.damaged.text, got.damaged.weightsCached, got.damaged.keys], [want.text, true, kept], 'a damaged tokenizer.json in the cache');
      assert.deepEqual([got.evicted.text, got.evicted.weightsCached], [want.text, false], 'after the cache was evicted');
      const [q8, f32] = got.together;
      assert.deepEqual([q8.text, q8.notCached, q8.weightsCached], [want.text, null, false], 'two loads at once: q8');
      assert.deepEqual([f32.text, f32.notCached, f32.weightsCached], [native(8, 'f32').text, null, false], 'two loads at once: f32');
      assert.deepEqual([got.after.text, got.after.weightsCached, got.after.keys], [want.text, true, kept], 'after two loads at once');
      assert.match(got.widget, /^Ready: [\d.]+ M parameters on cpu\. The model could not be kept in this browser's storage \(the storage quota is full: .*\), so it will be downloaded again next time\.$/);
    });

    test('page: Generate streams the CLI\'s greedy text, fills the readout and announces the end', T, async () => {
      const want = native();
      await withEnginePage(engine, async (page) => {
        await page.goto(`${sites.assets.origin}/${MODEL_NAME === 'gpt2-shakespeare' ? '' : `?model=${MODEL_URL}`}`);
        await page.waitFor(() => ['ready', 'error'].includes(window.pageState), null, 90_000);
        const loaded = await page.evaluate(() => ({ state: window.pageState, error: document.getElementById('error').textContent }));
        assert.equal(loaded.state, 'ready', `the model did not load: ${loaded.error}`);
        // The load's phases (what bench --cold prints), each after the one it waits for.
        const t = await page.evaluate(() => window.gpt2Model.loadTimings);
        for (const k of ['startedMs', 'engineMs', 'configMs', 'tokenizerMs', 'weightsMs', 'warmUpMs']) assert.ok(t[k] > 0, `${k}: ${JSON.stringify(t)}`);
        // startedMs is on the page's clock (from its navigation): after the page began, before now.
        assert.ok(t.startedMs < await page.evaluate(() => performance.now()), JSON.stringify(t));
        assert.ok(t.configMs <= t.tokenizerMs && t.tokenizerMs <= t.weightsMs && t.weightsMs <= t.warmUpMs, JSON.stringify(t));
        assert.ok(t.engineMs <= t.tokenizerMs, `the tokenizer is built by the engine: ${JSON.stringify(t)}`);
        if (page.requests) assert.ok(page.requests.some((u) => u.endsWith(DEFAULT_WEIGHTS)), 'the weights were not fetched');
        await clickGenerate(page);
        // The first visible text is timed once painted (a frame after its token), so on a busy
        // machine the small model can finish before that frame: wait for it rather than race it.
        await page.waitFor(() => !window.lastResult?.text.trim() || window.visibleMs > 0, null, 10_000).catch(() => {});
        const got = await page.evaluate(() => {
          const t = (id) => document.getElementById(id).textContent;
          return {
            result: window.lastResult, events: window.tokenEvents, error: t('error'), output: t('output'),
            readout: Object.fromEntries(['ttft', 'total', 'tpot', 'prompt-tokens', 'output-tokens', 'stop-reason', 'backend'].map((id) => [id, t(id)])),
            status: t('status'), note: t('backend-note'), info: t('model-info'), visibleMs: window.visibleMs, firstVisible: t('first-visible'),
          };
        });
        assert.ok(got.result, `generation failed: ${got.error}`);
        assert.equal(got.result.text, want.text);
        assert.equal(got.events, got.result.tokens.length);
        assert.equal(got.output, PROMPT + got.result.text);
        const m = got.result.metrics;
        assert.equal(got.readout['output-tokens'], String(m.outputTokens));
        assert.equal(got.readout['prompt-tokens'], String(m.promptTokens));
        assert.equal(got.readout.backend, 'cpu');
        assert.match(got.readout.ttft, /\d ms$/);
        assert.match(got.readout.total, /\d (ms|s)$/);
        assert.match(got.status, new RegExp(`^Done: ${m.outputTokens} tokens in [\\d.]+ m?s`));
        assert.ok(m.ttftMs > 0 && m.ttftMs < m.totalMs, `TTFT ${m.ttftMs} ms is not below total ${m.totalMs} ms`);
        if (got.result.text.trim()) {
          assert.ok(got.visibleMs > 0, 'time to first visible text was not measured');
          assert.match(got.firstVisible, /\d ms$/);
        }
        // Where the engine lacks WebGPU, the page says what it falls back to, in a sentence.
        assert.match(got.note, /^Running on the CPU: .*\.$/);
        record(engine, { pageNote: got.note, pageInfo: got.info });
        // Stop, pressed in the page the moment the third token is shown (from the test process,
        // the wait and the click's round trips could let the small model finish first on a busy
        // machine): stopReason abort, fewer tokens than asked, Generate enabled again.
        const maxTokens = MODEL_CONFIG.n_positions - 16;
        await page.fill('#max-tokens', maxTokens);
        await page.check('#ignore-eos', true);
        await page.evaluate(() => { window.lastResult = null; });
        await page.click('#generate');
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
        await page.waitFor(() => window.lastResult || !document.getElementById('error').hidden, null, 60_000);
        const stopped = await page.evaluate(() => ({
          result: window.lastResult, events: window.tokenEvents, reason: document.getElementById('stop-reason').textContent,
          generate: !document.getElementById('generate').disabled,
        }));
        assert.equal(stopped.result?.stopReason, 'abort');
        assert.ok(stopped.result.tokens.length < maxTokens, `${stopped.result.tokens.length} tokens: Stop came too late`);
        assert.equal(stopped.events, stopped.result.tokens.length);
        assert.equal(stopped.reason, 'abort');
        assert.ok(stopped.generate, 'Generate is not enabled again after Stop');
      });
    });

    test('the page compiles the engine\'s wasm for its worker (the build the load runs; not in WebKit); where it cannot, the worker compiles it, with the same tokens', T, async () => {
      const want = native();
      const run = (tag, refuse) => withEnginePage(engine, async (page) => {
        await page.goto(`${sites.assets.origin}${sites.assets.page(tag, '<title>compile</title>')}`);
        return page.evaluate(async ({ folder, prompt, n, refuse }) => {
          const compiled = [];
          const compileStreaming = WebAssembly.compileStreaming;
          WebAssembly.compileStreaming = async (response) => {
            const res = await response;
            compiled.push(new URL(res.url).pathname);
            if (refuse) throw new TypeError('refused by the test');
            return compileStreaming.call(WebAssembly, res);
          };
          const { Gpt2 } = await import('/gpt2.js');
          const model = await Gpt2.load({ model: folder, backend: 'cpu' });
          const r = await model.generate(prompt, { maxTokens: n, temperature: 0 });
          const out = { build: model.build, compiled, tokens: r.tokens };
          model.dispose();
          return out;
        }, { folder: `/${MODEL_URL}`, prompt: PROMPT, n: N, refuse });
      });
      for (const refuse of [false, true]) {
        const got = await run(refuse ? 'compile-refused' : 'compile', refuse);
        assert.deepEqual(got.compiled, name === 'webkit' ? [] : [`/${got.build}/gpt2_web_bg.wasm`], `refused: ${refuse}`);
        assert.deepEqual(got.tokens, want.tokens, `greedy tokens differ from the native CLI (refused: ${refuse})`);
      }
    });

    test('a failing load shows a sentence naming the missing file and leaves Generate disabled', T, async () => {
      await withEnginePage(engine, async (page) => {
        await page.goto(`${sites.assets.origin}/?model=models/nope/`);
        await page.waitFor(() => window.pageState === 'error', null, 30_000);
        const got = await page.evaluate(() => ({
          msg: document.getElementById('error').textContent, role: document.getElementById('error').getAttribute('role'),
          disabled: document.getElementById('generate').disabled,
        }));
        assert.equal(got.role, 'alert');
        assert.match(got.msg, /^[A-Z].*\.$/s, `not a sentence: ${got.msg}`);
        assert.match(got.msg, /\/models\/nope\/config\.json.*404/s);
        assert.equal(got.disabled, true);
      });
    });

    test('widget from another origin: the CLI\'s greedy text, gpt2-token per token, engine and model from the assets\' origin', T, async () => {
      const want = native();
      const before = sites.assets.requests.length;
      await withEnginePage(engine, async (page) => {
        const url = sites.course.page(`<script>
            window.outcomes = []; window.tokens = 0;
            document.addEventListener('gpt2-token', () => window.tokens++);
            for (const t of ['done', 'error']) document.addEventListener('gpt2-' + t, (e) => window.outcomes.push({ type: t, detail: e.detail }));
          </script>
          <script type="module" src="${sites.assets.origin}/widget.js"></script>
          <gpt2-generator id="g"${modelAttr(sites.assets.origin)} prompt="${PROMPT}" max-tokens="${N}" temperature="0" autorun readout></gpt2-generator>`);
        await page.goto(url);
        await page.waitFor(() => window.outcomes.length > 0, null, 90_000);
        const got = await page.evaluate(() => ({ outcome: window.outcomes[0], tokens: window.tokens, origin: location.origin }));
        assert.equal(got.outcome.type, 'done', `the widget failed: ${JSON.stringify(got.outcome.detail)}`);
        assert.equal(got.outcome.detail.text, want.text);
        assert.equal(got.tokens, got.outcome.detail.tokens.length);
        assert.equal(got.origin, sites.course.origin);
      });
      const fetched = sites.assets.requests.slice(before);
      assert.ok(fetched.some((p) => /^\/pkg[-a-z]*\/gpt2_web_bg\.wasm$/.test(p)), fetched.join('\n'));
      assert.ok(fetched.some((p) => p.endsWith(DEFAULT_WEIGHTS)), fetched.join('\n'));
      record(engine, { crossOriginWidget: true });
    });

    test('iframe embed: embed.html on the assets\' origin generates from its query and posts the result', T, async () => {
      const want = native();
      await withEnginePage(engine, async (page) => {
        const model = MODEL_NAME === 'gpt2-shakespeare' ? '' : `&model=${encodeURIComponent(`${sites.assets.origin}/${MODEL_URL}`)}`;
        const url = sites.course.page(`<script>
            window.posted = [];
            addEventListener('message', (e) => window.posted.push({ origin: e.origin, data: e.data }));
          </script>
          <iframe title="GPT-2" src="${sites.assets.origin}/embed.html?prompt=${encodeURIComponent(PROMPT)}&max-tokens=${N}&temperature=0&readout&autorun${model}"
            style="width: 640px; height: 160px; border: 0"></iframe>`);
        await page.goto(url);
        await page.waitFor(() => window.posted.some((m) => ['gpt2-web:done', 'gpt2-web:error'].includes(m.data?.type)), null, 90_000);
        const posted = await page.evaluate(() => window.posted);
        const end = posted.find((m) => m.data.type !== 'gpt2-web:height');
        assert.equal(end.data.type, 'gpt2-web:done', JSON.stringify(end.data));
        assert.equal(end.origin, sites.assets.origin);
        assert.equal(end.data.result.text, want.text);
        const heights = posted.filter((m) => m.data.type === 'gpt2-web:height').map((m) => m.data.height);
        assert.ok(heights.length > 0 && heights.at(-1) > 100, `heights posted: ${heights}`);
      });
      record(engine, { iframe: true });
    });

    test('the offline bundle opened from file:// generates the CLI\'s greedy text', T, async () => {
      const want = native();
      const bundle = ensureBundle();
      await withEnginePage(engine, async (page) => {
        await page.goto(pathToFileURL(bundle).href);
        await page.waitFor(() => ['ready', 'error'].includes(window.pageState), null, 120_000);
        const loaded = await page.evaluate(() => ({ state: window.pageState, error: document.getElementById('error').textContent }));
        assert.equal(loaded.state, 'ready', `the bundled model did not load: ${loaded.error}`);
        await clickGenerate(page);
        const got = await page.evaluate(() => ({ result: window.lastResult, error: document.getElementById('error').textContent }));
        assert.ok(got.result, `generation failed: ${got.error}`);
        assert.equal(got.result.text, want.text);
        if (page.requests) {
          const outside = page.requests.filter((u) => !['file:', 'data:', 'blob:'].includes(new URL(u).protocol));
          assert.deepEqual(outside, [], `the bundle made network requests: ${outside.join(', ')}`);
        }
      });
      record(engine, { fileUrl: true });
    });

    /**
     * A load with `threads: 2` and a greedy generation on a cross-origin isolated page → what ran
     * and the workers the page started (their names). `noThreads`: the page's workers for the
     * threads get a script that does not exist, as when the host cannot serve it.
     */
    const threadedRun = (tag, { noThreads = false } = {}) => withEnginePage(engine, async (page) => {
      await page.goto(`${sites.isolated.origin}${sites.isolated.page(tag, '<title>threads</title>')}`);
      return page.evaluate(async ({ folder, prompt, n, noThreads }) => {
        const started = [];
        const PageWorker = Worker;
        globalThis.Worker = class extends PageWorker {
          constructor(url, options) {
            started.push(options?.name);
            super(noThreads && options?.name === 'gpt2-web thread' ? '/no-such-thread.js' : url, options);
          }
        };
        const { Gpt2 } = await import('/gpt2.js');
        // A stage that never ends fails naming itself, not as the driver's own timeout.
        const within = (what, promise) => Promise.race([promise, new Promise((_, reject) => {
          setTimeout(() => reject(new Error(`${what} did not end within 60 s`)), 60_000);
        })]);
        const model = await within('the threaded load', Gpt2.load({ model: folder, backend: 'cpu', threads: 2 }));
        const r = await within('the generation', model.generate(prompt, { maxTokens: n, temperature: 0 }));
        // Passes of a few rows (a draft's verification, a batch's step) on the pool, kept awake.
        const drafted = await within('the drafted generation', model.generate(prompt, { maxTokens: n, temperature: 0, draft: 'prompt-lookup' }));
        const other = { maxTokens: n, temperature: 0, ignoreEos: true };
        const batch = await within('the batch', Promise.all([
          model.generate(prompt, { maxTokens: n, temperature: 0 }), model.generate(prompt.slice(0, 20), other),
        ]));
        const alone = await within('the second prompt alone', model.generate(prompt.slice(0, 20), other));
        const out = {
          isolated: self.crossOriginIsolated, sab: typeof SharedArrayBuffer === 'function', threads: model.threads,
          build: model.build, tokens: r.tokens, text: r.text, started,
          drafted: drafted.tokens, batch: batch.map((b) => b.tokens), alone: alone.tokens,
        };
        model.dispose();
        return out;
      }, { folder: `/${MODEL_URL}`, prompt: PROMPT, n: N, noThreads });
    });
    /** Whether this engine runs the threaded build (shared memory and relaxed SIMD), and its one-thread build. */
    const threading = (got) => {
      const support = JSON.parse(fs.readFileSync(path.join(OUT, 'support', `${name}.json`), 'utf8'));
      assert.equal(got.isolated, true, 'COOP/COEP did not make the page cross-origin isolated');
      return { offered: got.sab && support.relaxedSimd, oneThread: support.build };
    };

    test('a cross-origin isolated page: the threaded build on two threads the page started, where the engine offers it; the CLI\'s tokens', T, async () => {
      const want = native();
      const got = await threadedRun('threads');
      const { offered, oneThread } = threading(got);
      assert.deepEqual(got.tokens, want.tokens, 'greedy tokens differ from the native CLI');
      assert.equal(got.text, want.text);
      assert.deepEqual(got.drafted, want.tokens, 'a prompt-lookup draft changed the greedy tokens');
      assert.deepEqual(got.batch[0], want.tokens, 'a sequence in a batch of two changed its greedy tokens');
      assert.deepEqual(got.batch[1], got.alone, 'the batch\'s second sequence differs from its generation alone');
      assert.equal(got.threads, offered ? 2 : 1);
      assert.equal(got.build, offered ? 'pkg-threads' : oneThread);
      // The threads' workers are the page's, not workers started by the engine's worker (in
      // Firefox that sometimes blocked the engine's worker for good: tools/patch_rayon.mjs).
      assert.deepEqual(got.started, ['gpt2-web', ...(offered ? ['gpt2-web thread', 'gpt2-web thread'] : [])]);
      record(engine, { isolatedThreads: got.threads, isolatedBuild: got.build, sharedMemory: got.sab });
    });

    test('threads that cannot start: the load goes on with one thread, at once, with the CLI\'s tokens', T, async () => {
      const want = native();
      const got = await threadedRun('no-threads', { noThreads: true });
      const { offered, oneThread } = threading(got);
      assert.equal(got.threads, 1);
      assert.equal(got.build, oneThread);
      assert.deepEqual(got.tokens, want.tokens, 'greedy tokens differ from the native CLI');
      if (offered) assert.ok(got.started.includes('gpt2-web thread'), `the page started no thread: ${got.started}`);
    });
  });
}
