// The three wasm builds and the CPU weight formats, through the JS API: which build the worker
// picks (relaxed SIMD in Chromium; the threaded one only on a cross-origin isolated page), that
// every build and both dtypes give the native CLI's greedy tokens, the CPU profile, and the option
// checks.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { launch, startServer, withPage, nativeGenerate, MODEL_URL, MODEL_DIR, PROMPT, ROOT } from './harness.mjs';

const T = { timeout: 180_000 };
const N = 24;
let plain;
let isolated;
let browser;
before(async () => {
  plain = await startServer();
  isolated = await startServer({ args: ['--isolated'] });
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await plain?.close();
  await isolated?.close();
});

// A model of another size (tests/fixtures/gguf), served at this path of either origin.
const TINY = { model: '/__builds-tiny.gguf', prompt: 'the and of to in' };
const LONG_PROMPT = 'It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of foolishness';
const TINY_FILE = path.join(ROOT, 'tests/fixtures/gguf/tiny-random-Q8_0.gguf');

/**
 * In a blank page of `origin`: load with `opts`, generate greedily, report what runs. `opts.forget`
 * clears what earlier loads in the page's browser context remembered; `opts.again` opens the page
 * once more in the same context (a return visit: another worker, the same localStorage), then
 * loads `TINY` there too, and returns the three reports. `opts.model` and `opts.prompt` replace
 * the demo model and the prompt.
 */
async function run(origin, { again = false, ...opts }, engine = browser) {
  const url = `${origin}/__builds-test.html`;
  let got;
  await withPage(engine, 'about:blank', async (page) => {
    // The blank page gets the headers its server would send (cross-origin isolation or not).
    const headers = origin === isolated.origin
      ? { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' }
      : {};
    await page.route(url, (route) => route.fulfill({ contentType: 'text/html', headers, body: '<!doctype html><title>builds</title>' }));
    await page.route(`${origin}${TINY.model}`, (route) => route.fulfill({ path: TINY_FILE, headers }));
    const first = await inPage(page, url, opts);
    got = again ? [first, await inPage(page, url, { ...opts, forget: false }), await inPage(page, url, { ...opts, ...TINY, forget: false })] : first;
  });
  return got;
}

/** `page` opened at `url`: one load with `opts`, its report. */
async function inPage(page, url, opts) {
  await page.goto(url);
  return page.evaluate(async ({ folder, n, opts: { forget, prompt, ...opts }, longPrompt }) => {
    if (forget) localStorage.clear(); // what earlier loads in this browser remembered
    const { Gpt2 } = await import('/gpt2.js');
    const model = await Gpt2.load({ model: folder, backend: 'cpu', ...opts });
    const r = await model.generate(prompt, { maxTokens: n, temperature: 0, profile: true });
    const unprofiled = await model.generate(prompt, { maxTokens: 2 });
    const info = {
      isolated: self.crossOriginIsolated, threads: model.threads, build: model.build, kernel: model.kernel,
      kernelTimes: model.kernelTimes, dtype: model.dtype, layers: model.config.nLayer, nParams: model.config.nParams,
      remembered: Object.keys(JSON.parse(localStorage.getItem('gpt2-web:kernels-3'))?.builds ?? {}),
    };
    const promptTokens = (await model.tokenize(prompt)).length;
    // A prompt of 23 rows: the products' tiles of five, four, two and one rows (src/backend/cpu/q8).
    const ids = Array.from(await model.tokenize(longPrompt)).slice(0, 23).map((id) => id % model.config.vocabSize);
    const long = Array.from(await model.logits(ids, { cache: false }));
    // The same positions in three calls on the KV cache: 7 rows (a few rows go two at a time),
    // 15 (tiles of five), then one.
    for (const n of [7, 22]) await model.logits(ids.slice(0, n), { cache: true });
    const stepped = Array.from(await model.logits(ids, { cache: true }));
    model.dispose();
    return { ...info, tokens: r.tokens, text: r.text, profile: r.profile, promptTokens, unprofiled: 'profile' in unprofiled, long, stepped };
  }, { folder: `/${MODEL_URL}`, n: N, opts: { prompt: PROMPT, ...opts }, longPrompt: LONG_PROMPT });
}

/** `profile: true` gave the prompt's forward and the steps' apart, with phases that add up. */
function checkProfile(got, dtype) {
  const { prompt, decode } = got.profile ?? assert.fail('profile: true gave no profile');
  assert.equal(got.unprofiled, false, 'a generation without profile: true has no profile');
  assert.deepEqual([prompt.calls, prompt.tokens], [1, got.promptTokens]);
  assert.deepEqual([decode.calls, decode.tokens], [N - 1, N - 1]);
  for (const p of [prompt, decode]) {
    const sum = Object.values(p.phases).reduce((a, b) => a + b, 0);
    assert.ok(Math.abs(sum - p.totalMs) <= 1e-6 * Math.max(1, p.totalMs), `phases ${sum} vs total ${p.totalMs}`);
    assert.ok(p.phases.matmul > 0, JSON.stringify(p));
    // f32 never quantizes; q8 quantizes the activations before every layer product. Its time is
    // too short for the worker's coarse clock (0.1 ms) to be sure of, so the laps say it: a
    // product's quantize lap beside its matmul lap (4 products per layer), none for f32.
    const layers = 4 * got.layers * p.calls;
    assert.equal(p.laps.matmul, layers, `${dtype}: ${p.laps.matmul} matmul laps for ${p.calls} forwards of ${got.layers} layers`);
    assert.equal(p.laps.quantize, dtype === 'q8' ? layers : 0, `${dtype}: ${p.laps.quantize} quantize laps`);
    assert.equal(p.laps.lm_head, p.calls, JSON.stringify(p.laps));
    if (dtype === 'f32') assert.equal(p.phases.quantize, 0, JSON.stringify(p));
  }
}

test('one thread: relaxed-SIMD build in Chromium, q8 and f32 both equal the CLI', T, async () => {
  for (const dtype of ['q8', 'f32']) {
    const native = nativeGenerate(PROMPT, N, dtype, MODEL_DIR);
    const got = await run(plain.origin, { dtype, threads: 2 });
    assert.equal(got.isolated, false);
    assert.equal(got.threads, 1, 'a page that is not cross-origin isolated cannot share memory between threads');
    assert.equal(got.build, 'pkg-relaxed');
    assert.equal(got.dtype, dtype);
    assert.deepEqual(got.tokens, native.tokens, `${dtype}: greedy tokens differ from the CLI`);
    assert.equal(got.text, native.text);
    checkProfile(got, dtype);
  }
});

test('cross-origin isolated page: two threads, the threaded build, the same tokens as the CLI', T, async () => {
  const native = nativeGenerate(PROMPT, N, 'q8', MODEL_DIR);
  const got = await run(isolated.origin, { threads: 2 });
  assert.equal(got.isolated, true);
  assert.equal(got.threads, 2);
  assert.equal(got.build, 'pkg-threads');
  assert.equal(got.dtype, 'q8', 'q8 is the default');
  assert.deepEqual(got.tokens, native.tokens);
  checkProfile(got, 'q8'); // timed on the pool's threads
  const single = await run(isolated.origin, { threads: 1 });
  assert.equal(single.threads, 1);
  assert.equal(single.build, 'pkg-relaxed');
  assert.deepEqual(single.tokens, native.tokens);
});

// The relaxed-SIMD build's 8-bit kernels (src/backend/cpu/q8/simd128.rs): V8 lowers the four-way
// dot to one vpdpbusd where the CPU has AVX-VNNI (or vpdpbssd with AVX-VNNI-INT8), else to five
// instructions; the 16-bit dot widened takes three, and bytes widened to 16 bits need no 8-bit dot.
// The engine asks V8 which lowering it has (dot-add with the one instruction, else dot-i16) and
// times that kernel against widen: which is faster depends on the CPU and on the product.
const cpuFlags = fs.existsSync('/proc/cpuinfo') ? (fs.readFileSync('/proc/cpuinfo', 'utf8').match(/^flags\s*:(.*)$/m)?.[1] ?? '').trim().split(/\s+/) : [];
const x86 = cpuFlags.includes('avx2');
const v8Vnni = cpuFlags.includes('avx_vnni') || cpuFlags.includes('avx_vnni_int8');
const K = '(dot-add|dot-i16|widen)';
// What timing may choose: one kernel for both, or one for a prompt's products and one for a step's.
const TIMED = new RegExp(`^${K}( \\(prompt\\), ${K} \\(decode\\))?$`);
// calibrate's timing over a matrix in the L2 cache (the prompt's choice; none with a
// one-instruction dot, which a prompt runs), then decode steps of the model under each kernel (the
// decode's choice: www/worker/engine.js timeDecode).
const CALIBRATED = new RegExp(`^decode: ${K} [\\d.]+ µs, widen [\\d.]+ µs; prompt: ${K} ([\\d.]+) µs, widen ([\\d.]+) µs`);
const ONE_INSTRUCTION = /^prompt: (dot-add) \(the engine's one-instruction 8-bit dot, not timed\)/;
const STEPS = new RegExp(`; a decode step of this model: ${K} ([\\d.]+) ms, ${K} ([\\d.]+) ms$`);
/**
 * `kernel` is what `times` says should run (the prompt's faster, the decode step's faster: either,
 * where they print alike), and the kernels timed were the engine's own `dot` and widen.
 */
function assertChosen(kernel, times, dot) {
  const c = dot === 'dot-add' ? ONE_INSTRUCTION.exec(times) : CALIBRATED.exec(times);
  const m = STEPS.exec(times);
  assert.ok(c && m, `kernel times "${times}" are not in the expected form`);
  assert.deepEqual([c[1], c[2] ?? dot, [m[1], m[3]].sort().join()], [dot, dot, [dot, 'widen'].sort().join()], `${dot} is timed against widen: ${times}`);
  const faster = (a, ta, b, tb) => (ta < tb ? [a] : ta > tb ? [b] : [a, b]);
  const prompts = dot === 'dot-add' ? [dot] : faster(dot, Number(c[3]), 'widen', Number(c[4]));
  const decodes = faster(m[1], Number(m[2]), m[3], Number(m[4]));
  const fits = prompts.flatMap((p) => decodes.map((d) => (p === d ? p : `${p} (prompt), ${d} (decode)`)));
  assert.ok(fits.includes(kernel), `the kernel "${kernel}" is not what was timed: ${times}`);
}

test('8-bit kernels: the engine picks by how V8 lowers the dot and by timing, and each kernel gives the CLI\'s tokens', T, async (t) => {
  if (!x86) return t.skip('the expected choice is known for x86-64 CPUs only'); // this project's machines all are
  const native = nativeGenerate(PROMPT, N, 'q8', MODEL_DIR);
  // The page opened twice in one browser context: the return visit's worker takes the timing
  // the first one made (localStorage), instead of timing again.
  // A model of another size is timed again: a decode step's choice depends on the model.
  const [auto, again, tiny] = await run(plain.origin, { dtype: 'q8', forget: true, again: true });
  const dot = v8Vnni ? 'dot-add' : 'dot-i16';
  assert.match(auto.kernel, TIMED);
  assertChosen(auto.kernel, auto.kernelTimes, dot);
  assert.deepEqual([again.kernel, again.kernelTimes], [auto.kernel, `${auto.kernelTimes} (timed on an earlier load in this browser)`]);
  // Kept per build, threads and model size; the tiny model (whose 1999 ids cannot spell the
  // worker's warm-up text, so its decode steps are not timed) times the kernels anew.
  assert.deepEqual(again.remembered, [`pkg-relaxed 1 ${auto.nParams}`]);
  assert.match(tiny.kernelTimes, dot === 'dot-add' ? new RegExp(`${ONE_INSTRUCTION.source}$`) : new RegExp(`${CALIBRATED.source}$`));
  assert.deepEqual(tiny.remembered, [`pkg-relaxed 1 ${auto.nParams}`, `pkg-relaxed 1 ${tiny.nParams}`]);
  assert.deepEqual(tiny.tokens, nativeGenerate(TINY.prompt, N, 'q8', TINY_FILE).tokens);
  assert.deepEqual(again.tokens, native.tokens);
  assert.deepEqual(auto.tokens, native.tokens);
  // Every kernel, build and thread count gives the same integers and applies the scales in the
  // same order, whatever its tiles: a long prompt's logits are the same bit for bit.
  const same = (a, b) => a.length === b.length && a.every((v, i) => Object.is(v, b[i]));
  const sameLogits = (got, what) => assert.ok(same(got.long, auto.long),
    `${what}: the 23-token prompt's logits differ from ${auto.kernel}'s`);
  for (const kernel of ['dot-add', 'dot-i16', 'widen']) {
    const got = await run(plain.origin, { dtype: 'q8', kernel });
    assert.deepEqual([got.kernel, got.kernelTimes], [kernel, null], 'a kernel named is not timed');
    assert.deepEqual(got.tokens, native.tokens, `${kernel}: greedy tokens differ from the CLI`);
    sameLogits(got, kernel);
  }
  // The threaded build: the pool's threads share the choice (and the same numbers).
  for (const kernel of ['dot-i16', 'widen']) {
    const threaded = await run(isolated.origin, { threads: 2, kernel });
    assert.deepEqual([threaded.build, threaded.kernel], ['pkg-threads', kernel]);
    assert.deepEqual(threaded.tokens, native.tokens);
    sameLogits(threaded, `two threads, ${kernel}`);
  }
  // The portable build has one kernel, and nothing to time.
  const portable = await run(plain.origin, { build: 'pkg' });
  assert.deepEqual([portable.kernel, portable.kernelTimes], ['widen', null]);
  assert.deepEqual(portable.tokens, native.tokens);
  // The portable build applies the scales without relaxed SIMD's fused multiply-add: its numbers
  // are its own, but the same in a prompt's tiles as in rows one by one.
  for (const got of [auto, portable]) {
    assert.ok(same(got.long, got.stepped), `${got.build}: the prompt's logits differ when its rows run in three calls`);
  }
  // V8 told to leave AVX-VNNI alone lowers as on the CPUs without it: the engine sees that and
  // times the other two.
  const noVnni = await launch(['--js-flags=--no-enable-avx-vnni']);
  try {
    const got = await run(plain.origin, { dtype: 'q8' }, noVnni);
    assert.match(got.kernel, TIMED);
    assertChosen(got.kernel, got.kernelTimes, 'dot-i16');
    assert.deepEqual(got.tokens, native.tokens);
  } finally {
    await noVnni.close();
  }
});

test('dtype and threads options are checked with sentences', T, async () => {
  const url = `${plain.origin}/__builds-test.html`;
  await withPage(browser, 'about:blank', async (page) => {
    await page.route(url, (route) => route.fulfill({ contentType: 'text/html', body: '<!doctype html><title>builds</title>' }));
    await page.goto(url);
    const got = await page.evaluate(async (folder) => {
      const { Gpt2 } = await import('/gpt2.js');
      const fail = (opts) => Gpt2.load({ model: folder, ...opts }).then(() => null, (e) => e.message);
      return {
        dtype: await fail({ dtype: 'q4' }), threads: await fail({ threads: 0 }), frac: await fail({ threads: 1.5 }),
        kernel: await fail({ kernel: 'vnni' }), lacking: await fail({ build: 'pkg', kernel: 'dot-add' }),
      };
    }, `/${MODEL_URL}`);
    assert.equal(got.kernel, 'unknown kernel "vnni"; choose auto, dot-add, dot-i16, widen');
    // The portable build has no 8-bit dot, and says which kernels it has.
    assert.match(got.lacking, /kernel.*"dot-add"; this build on this CPU has auto, widen$/);
    assert.equal(got.dtype, 'unknown dtype "q4"; choose q8, f32, f16');
    assert.equal(got.threads, 'invalid threads: 0 is not a whole number from 1 to 64');
    assert.equal(got.frac, 'invalid threads: 1.5 is not a whole number from 1 to 64');
  });
});
