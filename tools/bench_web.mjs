// The side-by-side browser benchmark behind `./build.sh bench`: our engine through its public JS
// API (gpt2.js) in headless Chromium, Firefox and WebKit, for each weight format and thread count,
// and with --peer transformers.js (onnxruntime-web) on the same weights exported to ONNX and
// wllama (llama.cpp) on the same weights as GGUF (--gguf DIR: model-Q8_0.gguf against our q8,
// model-F32.gguf against our f32), in the same browser, with the same prompt — one table with ratios.
//
//   node tools/bench_web.mjs --model DIR [--onnx DIR] [--gguf DIR] [--peer] [--runs 5] [--tokens 128]
//                            [--threads 1,2] [--engines chromium,firefox,webkit] [--json FILE]
//                            [--no-vnni] [--bound-ms MS] [--weights-mb MB] [--webgpu] [--label TEXT]
//
// Each configuration runs on a page of its own (its own worker and wasm instance): load, then the
// first generation after load timed on its own (what a student's first Generate meets), then
// `--runs` timed ones, greedy with a forced length; the configurations of an engine and thread
// count are loaded side by side and take their timed runs in turns, so that a shared machine's
// slow moments fall on every engine alike. Times are taken in the page, the same way for both
// engines: TTFT from the generate call to the first token, ms/token = (total - TTFT) / (new
// tokens - 1), medians over the runs. Two threads run on a cross-origin isolated origin
// (COOP/COEP), the only place a page may share wasm memory between threads; an engine that cannot
// is reported on one. In an engine whose own choice is another build, gpt2-web's portable build
// (`pkg`, SIMD without relaxed SIMD: the one WebKit runs) is measured too, so the engines can be
// compared on the same code. In Chromium nothing may leave 127.0.0.1: any other request is aborted
// and fails the run (the other drivers cannot intercept; this machine has no other network).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, startServer } from '../tests/e2e/harness.mjs';
import { launchEngine, ALL_ENGINES } from '../tests/e2e/engines.mjs';
import { PASSAGE } from './bench_prompt.mjs';
import { cpuName } from './cpu.mjs';

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const MODEL = path.resolve(opt('--model', ''));
const ONNX = opt('--onnx', null);
const GGUF = opt('--gguf', null);
const PEER = args.includes('--peer');
const RUNS = Number(opt('--runs', '5'));
const TOKENS = Number(opt('--tokens', '128'));
const THREADS = opt('--threads', '1,2').split(',').map(Number);
const ENGINE_NAMES = opt('--engines', 'chromium').split(',').filter(Boolean);
for (const e of ENGINE_NAMES) {
  if (!ALL_ENGINES.includes(e)) {
    console.error(`bench: unknown engine "${e}" in --engines; choose from ${ALL_ENGINES.join(', ')}`);
    process.exit(2);
  }
}
const JSON_OUT = opt('--json', null);
// --no-vnni: V8 without AVX-VNNI (--js-flags=--no-enable-avx-vnni), so relaxed SIMD's 8-bit dot
// becomes vpmaddubsw + vpmaddwd + vpaddd, as on CPUs without it (AMD Zen 4, Intel before Alder
// Lake): the other machine class, measured on this one.
const NO_VNNI = args.includes('--no-vnni');
// --webgpu: a row of gpt2-web on WebGPU in Chromium (f32 weights on the GPU), beside its CPU rows:
// Chromium's hardware adapter (Vulkan), or SwiftShader with GPT2_WEBGPU_ADAPTER=swiftshader (CI).
const WEBGPU = args.includes('--webgpu');
/** What the model is, for the table's heading. */
const LABEL = opt('--label', 'GPT-2-124M shape (seeded random weights)');
const GPU_FLAGS = process.env.GPT2_WEBGPU_ADAPTER === 'swiftshader'
  ? ['--enable-unsafe-webgpu', '--use-webgpu-adapter=swiftshader']
  : ['--enable-unsafe-webgpu', '--enable-features=Vulkan', '--ignore-gpu-blocklist'];
const CHROMIUM_FLAGS = [...(NO_VNNI ? ['--js-flags=--no-enable-avx-vnni'] : []), ...(WEBGPU ? GPU_FLAGS : [])];
// --bound-ms: the q8 bandwidth bound per token that the native lab printed (./build.sh bench
// passes it), to print browser decode against it.
const BOUND_MS = opt('--bound-ms', null) === null ? null : Number(opt('--bound-ms', null));
// --weights-mb: the q8 weight bytes a decode step reads (the native lab prints them), to print
// browser decode against what one wasm thread can read in this browser (a read-only loop).
const WEIGHTS_MB = opt('--weights-mb', null) === null ? null : Number(opt('--weights-mb', null));
if (WEIGHTS_MB !== null && !(WEIGHTS_MB > 0 && WEIGHTS_MB <= 3000)) {
  console.error(`bench: --weights-mb takes a size in MB (0 to 3000), not "${opt('--weights-mb', null)}"`);
  process.exit(2);
}
if (!fs.existsSync(path.join(MODEL, 'model.safetensors'))) {
  console.error(`bench: no model.safetensors in "${MODEL}" (give --model DIR)`);
  process.exit(2);
}
if (PEER && !GGUF && !(ONNX && fs.existsSync(path.join(ONNX, 'onnx/model.onnx')))) {
  console.error(`bench: --peer needs --onnx DIR with onnx/model.onnx (tools/peer/export_onnx.py makes it), or --gguf DIR`);
  process.exit(2);
}

if (PEER && GGUF && !fs.existsSync(path.join(GGUF, 'model-Q8_0.gguf'))) {
  console.error(`bench: --gguf DIR needs DIR/model-Q8_0.gguf (and model-F32.gguf; tools/make_gguf.py makes them)`);
  process.exit(2);
}
const WLLAMA = PEER && GGUF ? JSON.parse(fs.readFileSync(path.join(ROOT, 'tools/peer/node_modules/@wllama/wllama/package.json'), 'utf8')).version : null;

// A 64-token passage (checked against the tokenizer below).
const PROMPT = PASSAGE;

// The page root: www/ (the engine), the model, and for --peer tools/peer (transformers.js and
// onnxruntime-web from node_modules) and the ONNX export, all as symlinks.
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'gpt2-bench-'));
for (const f of fs.readdirSync(path.join(ROOT, 'www'))) {
  if (f !== 'models') fs.symlinkSync(path.join(ROOT, 'www', f), path.join(root, f));
}
fs.mkdirSync(path.join(root, 'models'));
fs.symlinkSync(MODEL, path.join(root, 'models/bench'));
if (PEER) {
  fs.symlinkSync(path.join(ROOT, 'tools/peer'), path.join(root, 'peer'));
  fs.mkdirSync(path.join(root, 'peer-models'));
  if (ONNX) fs.symlinkSync(path.resolve(ONNX), path.join(root, 'peer-models/bench'));
  if (GGUF) fs.symlinkSync(path.resolve(GGUF), path.join(root, 'peer-models/gguf'));
}
fs.writeFileSync(path.join(root, 'bench.html'), '<!doctype html><meta charset="utf-8"><title>bench</title>\n');

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Runs in the page: loads our engine through gpt2.js and warms it up; `oursRun` then times it. */
async function oursLoad({ dtype, threads, prompt, build, tokens, backend = 'cpu' }) {
  const { Gpt2 } = await import('/gpt2.js');
  const t0 = performance.now();
  const model = await Gpt2.load({ model: 'models/bench/', backend, dtype, threads, build });
  const loadMs = performance.now() - t0;
  if (model.backend !== backend) throw new Error(`it runs on ${model.backend}: ${model.gpuUnavailable ?? 'no reason given'}`);
  const promptTokens = (await model.tokenize(prompt)).length;
  const one = async (n) => {
    let first = 0;
    let count = 0;
    const start = performance.now();
    const r = await model.generate(prompt, {
      maxTokens: n, temperature: 0, ignoreEos: true, prefixCache: false,
      onToken: () => { if (count++ === 0) first = performance.now(); },
    });
    const total = performance.now() - start;
    const ttft = first - start;
    return { ttftMs: ttft, tpotMs: (total - ttft) / (count - 1), totalMs: total, newTokens: count, ids: r.tokens, gpu: r.metrics.gpu };
  };
  const first = await one(tokens); // the first generation after load, as a student's first Generate
  window.bench = { model, one, prompt };
  return { loadMs, promptTokens, threads: model.threads ?? 1, build: model.build, kernel: model.kernel, adapter: model.adapter, first: { ttftMs: first.ttftMs, tpotMs: first.tpotMs } };
}

/** Runs in the page: one timed generation of the engine that `oursLoad` or `peerLoad` loaded. */
async function timedRun({ tokens }) {
  const r = await window.bench.one(tokens);
  return r.run ? { ...r.run, ids: r.ids } : r;
}

/** Runs in the page: one more run of our engine with the phase timers on, then disposes of it. */
async function oursFinish({ tokens }) {
  const { model, prompt } = window.bench;
  const { profile } = await model.generate(prompt, { maxTokens: tokens, temperature: 0, ignoreEos: true, profile: true, prefixCache: false });
  model.dispose();
  return profile;
}

/** Runs in the page: loads transformers.js through tools/peer/peer.js and warms it up. */
async function peerLoad({ dtype, threads, prompt, tokens }) {
  const peer = await (await import('/peer/peer.js')).peerLoad({ modelId: 'bench', dtype, threads, prompt, maxNewTokens: tokens });
  const first = (await peer.once()).run; // the first generation after load
  window.bench = { one: () => peer.once() };
  return {
    loadMs: peer.loadMs, promptTokens: peer.promptTokens, threads: peer.threads, versions: peer.versions,
    first: { ttftMs: first.ttftMs, tpotMs: first.tpotMs },
  };
}

/** Runs in the page: loads wllama through tools/peer/wllama.js on the GGUF of `dtype`, and warms it up. */
async function wllamaLoad({ dtype, threads, prompt, tokens }) {
  const url = `/peer-models/gguf/model-${dtype === 'q8_0' ? 'Q8_0' : 'F32'}.gguf`;
  const peer = await (await import('/peer/wllama.js')).wllamaLoad({ url, threads, prompt, maxNewTokens: tokens });
  const first = (await peer.once()).run; // the first generation after load
  window.bench = { one: () => peer.once() };
  return { loadMs: peer.loadMs, promptTokens: first.promptTokens, threads: peer.threads, first: { ttftMs: first.ttftMs, tpotMs: first.tpotMs } };
}

/**
 * Runs in the page: how fast one wasm thread reads `mb` MB that it wrote before (the weights' size,
 * so that it comes from where the weights do), as GB/s, the best of `passes`. The module is
 * `readProbeModule`'s: four 16-byte loads per 64-byte line, summed, nothing else.
 */
async function readProbe({ bytes, mb, passes }) {
  const pages = Math.ceil((mb * 1e6) / 65536);
  const { instance } = await WebAssembly.instantiate(new Uint8Array(bytes), {});
  const { m: memory, read } = instance.exports;
  const n = pages * 65536;
  new Uint8Array(memory.buffer).fill(1); // every page written once, as the weights are
  const want = (4 * 0x01010101 * (n / 64)) | 0; // lane 0 of the four sums, wrapping as i32 does
  let best = Infinity;
  for (let i = 0; i < passes; i++) {
    const t0 = performance.now();
    const got = read(n);
    best = Math.min(best, performance.now() - t0);
    if (got !== want) throw new Error(`the read probe summed ${got}, not ${want}`);
  }
  return n / 1e6 / best; // MB/ms = GB/s
}

/** The read probe's wasm: a memory of `pages` pages and `read(n)`, the sum of bytes 0..n as i32x4s. */
function readProbeModule(pages) {
  const leb = (v) => {
    const out = [];
    do {
      let b = v & 0x7f;
      v >>>= 7;
      if (v) b |= 0x80;
      out.push(b);
    } while (v);
    return out;
  };
  const section = (id, body) => [id, ...leb(body.length), ...body];
  const name = (s) => [s.length, ...Buffer.from(s)];
  const body = [
    0x02, 0x01, 0x7f, 0x04, 0x7b, // locals: i (1), four v128 sums (2-5)
    0x03, 0x40, // loop
    // sum_k = i32x4.add(sum_k, v128.load offset=16k (i))
    ...[0, 1, 2, 3].flatMap((k) => [0x20, 2 + k, 0x20, 0x01, 0xfd, 0x00, 0x04, 16 * k, 0xfd, 0xae, 0x01, 0x21, 2 + k]),
    0x20, 0x01, 0x41, 0xc0, 0x00, 0x6a, 0x22, 0x01, // i = i + 64
    0x20, 0x00, 0x49, 0x0d, 0x00, // br_if (i < n)
    0x0b, // end loop
    0x20, 0x02, 0x20, 0x03, 0xfd, 0xae, 0x01, 0x20, 0x04, 0xfd, 0xae, 0x01, 0x20, 0x05, 0xfd, 0xae, 0x01,
    0xfd, 0x1b, 0x00, // i32x4.extract_lane 0
    0x0b,
  ];
  return [
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    ...section(1, [0x01, 0x60, 0x01, 0x7f, 0x01, 0x7f]), // (i32) -> i32
    ...section(3, [0x01, 0x00]),
    ...section(5, [0x01, 0x00, ...leb(pages)]),
    ...section(7, [0x02, ...name('m'), 0x02, 0x00, ...name('read'), 0x00, 0x00]),
    ...section(10, [0x01, ...leb(body.length), ...body]),
  ];
}

// The root is made of links to www/ and the model: the server follows them.
const plain = await startServer({ root, args: ['--follow-links'] });
const isolated = await startServer({ root, args: ['--isolated', '--follow-links'] });
const rows = [];
const versions = [];
const notes = []; // what could not be measured, and why
try {
  for (const engineName of ENGINE_NAMES) {
    const engine = await launchEngine(engineName, { chromiumArgs: CHROMIUM_FLAGS });
    versions.push(engine.version);
    try {
      await benchEngine(engine);
    } finally {
      await engine.close();
    }
  }
} finally {
  await plain.close();
  await isolated.close();
  fs.rmSync(root, { recursive: true, force: true });
}

/** Every configuration in one engine, a thread count at a time; rows go into `rows`. */
async function benchEngine(engine) {
  // The engine's own build, and (where that is another) the portable one for a same-code row.
  const own = await ownBuild(engine);
  const configs = [];
  for (const threads of THREADS) {
    for (const dtype of ['q8', 'f32']) configs.push({ engine: 'gpt2-web', dtype, threads });
    if (threads === 1 && own !== 'pkg') configs.push({ engine: 'gpt2-web', dtype: 'q8', threads, build: 'pkg' });
    if (PEER && ONNX) for (const dtype of ['q8', 'fp32']) configs.push({ engine: 'transformers.js', dtype, threads });
    if (PEER && GGUF) for (const dtype of ['q8_0', 'f32']) configs.push({ engine: 'wllama', dtype, threads });
    if (WEBGPU && threads === 1 && engine.name === 'chromium') configs.push({ engine: 'gpt2-web WebGPU', dtype: 'f32', threads, backend: 'webgpu' });
  }
  const shared = await sharedMemory(engine);
  for (const threads of THREADS) {
    if (threads > 1 && !shared) {
      notes.push(`${engine.name}: ${threads} threads not measured: no SharedArrayBuffer on a cross-origin isolated page, so gpt2-web runs one thread there`);
      continue;
    }
    const open = [];
    const inPage = async (o, fn, arg) => {
      try {
        return await o.page.evaluate(fn, arg);
      } catch (e) {
        throw new Error(`${engine.name}: ${o.c.engine} ${o.c.dtype} ${o.c.threads}t failed: ${e.message}\n${o.page.logs.join('\n')}`);
      }
    };
    try {
      for (const c of configs.filter((c) => c.threads === threads)) {
        const o = { c, outside: [], runs: [] };
        o.page = await engine.newPage();
        open.push(o);
        if (o.page.context?.route) {
          await o.page.context.route('**/*', (route) => {
            const u = new URL(route.request().url());
            if (u.hostname === '127.0.0.1' || ['data:', 'blob:'].includes(u.protocol)) return route.continue();
            o.outside.push(u.href);
            return route.abort();
          });
        }
        await o.page.goto(`${threads > 1 ? isolated.origin : plain.origin}/bench.html`);
        const load = { 'gpt2-web': oursLoad, 'gpt2-web WebGPU': oursLoad, 'transformers.js': peerLoad, wllama: wllamaLoad }[c.engine];
        try {
          o.load = await inPage(o, load, { dtype: c.dtype, threads, prompt: PROMPT, tokens: TOKENS, build: c.build, backend: c.backend });
        } catch (e) {
          // Ours must run; so must WebGPU where SwiftShader was asked for (CI: it cannot rot).
          if (c.engine === 'gpt2-web' || (c.backend === 'webgpu' && process.env.GPT2_WEBGPU_ADAPTER === 'swiftshader')) throw e;
          // A peer that does not run in this engine is a row that says so, not a failed benchmark.
          o.failed = e.message.split('\n')[0];
          process.stderr.write(`bench: ${engine.name}: ${c.engine} ${c.dtype} ${threads} thread(s) does not run: ${o.failed}\n`);
          continue;
        }
        process.stderr.write(`bench: ${engine.name}: ${c.engine} ${c.dtype}${c.build ? ` ${c.build}` : ''} ${threads} thread(s) ` +
          `loaded in ${(o.load.loadMs / 1000).toFixed(1)} s${o.load.adapter ? ` on ${o.load.adapter}` : ''}\n`);
      }
      const running = open.filter((o) => !o.failed);
      for (let i = 0; i < RUNS; i++) {
        for (const o of running) o.runs.push(await inPage(o, timedRun, { tokens: TOKENS }));
      }
      for (const o of running.filter((o) => o.c.engine === 'gpt2-web' && !o.c.build)) {
        o.profile = await inPage(o, oursFinish, { tokens: TOKENS });
        if (WEIGHTS_MB && o.c.dtype === 'q8') {
          // After the runs, in the same page: what one wasm thread reads there.
          const pages = Math.ceil((WEIGHTS_MB * 1e6) / 65536);
          o.readGBs = await inPage(o, readProbe, { bytes: readProbeModule(pages), mb: WEIGHTS_MB, passes: 7 });
        }
      }
    } finally {
      for (const o of open) await o.page.close();
    }
    for (const o of open) {
      const { c, load, runs } = o;
      if (o.failed) {
        rows.push({ ...c, browser: engine.name, failed: o.failed });
        continue;
      }
      if (o.outside.length) throw new Error(`${c.engine} asked for ${o.outside.join(', ')}: the benchmark must be offline`);
      if (load.promptTokens !== 64) throw new Error(`${c.engine}: the prompt is ${load.promptTokens} tokens, not 64`);
      if (runs.some((x) => x.newTokens !== TOKENS)) throw new Error(`${c.engine}: a run did not give ${TOKENS} tokens`);
      if (c.backend === 'webgpu' && !runs.at(-1).gpu) throw new Error(`${c.engine}: the result has no metrics.gpu`);
      const row = {
        ...c,
        browser: engine.name,
        forced: Boolean(c.build), // the build was named, not the engine's own choice
        build: load.build ?? c.build,
        kernel: c.backend === 'webgpu' ? undefined : load.kernel,
        threadsUsed: load.threads ?? c.threads,
        loadMs: load.loadMs,
        first: load.first,
        ttftMs: median(runs.map((x) => x.ttftMs)),
        tpotMs: median(runs.map((x) => x.tpotMs)),
        totalMs: median(runs.map((x) => x.totalMs)),
        ids: runs.at(-1).ids,
        gpu: runs.at(-1).gpu, // what its passes asked of the GPU (WebGPU)
        profile: o.profile,
        readGBs: o.readGBs,
      };
      rows.push(row);
      process.stderr.write(`bench: ${engine.name}: ${c.engine} ${c.dtype} ${threads} thread(s): first TTFT ${row.first.ttftMs.toFixed(0)} ms, ` +
        `TTFT ${row.ttftMs.toFixed(0)} ms, ${row.tpotMs.toFixed(1)} ms/token\n`);
    }
  }
}

/** Whether a cross-origin isolated page of this engine has SharedArrayBuffer (what threads need). */
async function sharedMemory(engine) {
  const page = await engine.newPage();
  try {
    await page.goto(`${isolated.origin}/bench.html`);
    return await page.evaluate(() => self.crossOriginIsolated && typeof SharedArrayBuffer === 'function');
  } finally {
    await page.close();
  }
}

/** The build the worker picks in this engine on a plain page (it probes relaxed SIMD the same way). */
async function ownBuild(engine) {
  const page = await engine.newPage();
  try {
    await page.goto(`${plain.origin}/bench.html`);
    return await page.evaluate(() => (WebAssembly.validate(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2,
      1, 0, 10, 15, 1, 13, 0, 65, 1, 253, 15, 65, 2, 253, 15, 253, 128, 2, 11])) ? 'pkg-relaxed' : 'pkg'));
  } finally {
    await page.close();
  }
}

/** metrics.gpu per pass, in words: what one step asked of the GPU besides its kernels' work. */
const perPass = ({ passes, submissions, dispatches, readbackBytes, ahead }) =>
  `${(submissions / passes).toFixed(1)} submission(s), ${(dispatches / passes).toFixed(1)} dispatches and ` +
  `${(readbackBytes / passes).toFixed(0)} bytes read back (averaged over its ${passes} passes, the prompt's among them); ` +
  `${ahead} of them submitted ahead`;

// The table: every row against each peer's best figure in the same browser and thread count.
const best = (r, key, peer = 'transformers.js') => {
  const peers = rows.filter((p) => p.engine === peer && !p.failed && p.browser === r.browser && p.threads === r.threads);
  return peers.length ? Math.min(...peers.map((p) => p[key])) : null;
};
const fmt = (v, d = 1) => (v === null || v === undefined ? '—' : v.toFixed(d));
const ratio = (v, b) => (b === null ? '—' : `${(v / b).toFixed(2)}×`);
const lines = [
  `${LABEL}, ${64}-token prompt, ${TOKENS} new tokens, greedy; ` +
  `median of ${RUNS} runs after the first; headless ${versions.join(', ')}; ${cpuName()}` +
  (NO_VNNI ? '; V8 with AVX-VNNI off (--no-enable-avx-vnni)' : ''),
  '',
  '| browser | engine | weights | build (8-bit kernel) | threads | load s | first TTFT ms | TTFT ms | ms/token | TTFT ÷ t.js best | ms/token ÷ t.js best | TTFT ÷ wllama best | ms/token ÷ wllama best |',
  '|---|---|---|---|---|---|---|---|---|---|---|---|---|',
];
for (const r of rows) {
  if (r.failed) {
    lines.push(`| ${r.browser} | ${r.engine} | ${r.dtype} | — | ${r.threads} | does not run: ${r.failed.replace(/\|/g, '/').slice(0, 120)} |||||||| `);
    continue;
  }
  const build = r.build ? `\`${r.build}\`${r.kernel && r.dtype === 'q8' ? ` ${r.kernel}` : ''}` : '—';
  lines.push(`| ${r.browser} | ${r.engine} | ${r.dtype} | ${build} | ${r.threadsUsed} | ${fmt(r.loadMs / 1000, 2)} | ` +
    `${fmt(r.first?.ttftMs, 0)} | ${fmt(r.ttftMs, 0)} | ${fmt(r.tpotMs, 1)} | ${ratio(r.ttftMs, best(r, 'ttftMs'))} | ${ratio(r.tpotMs, best(r, 'tpotMs'))} | ` +
    `${ratio(r.ttftMs, best(r, 'ttftMs', 'wllama'))} | ${ratio(r.tpotMs, best(r, 'tpotMs', 'wllama'))} |`);
}
if (WLLAMA) {
  lines.push('', `wllama ${WLLAMA}: llama.cpp's CPU backend in its one wasm build (SIMD128, wasm threads, JSPI and ` +
    'memory64), n_ctx 512, n_batch 512, no GPU layers; the model is the same random weights written by ' +
    'tools/make_gguf.py (Q8_0 matrices with F32 vectors, or all F32). llama.cpp reuses a repeated prompt\'s KV ' +
    'cache, so each run starts with another one-token first word (every run evaluated all 64 prompt tokens: ' +
    'llama.cpp\'s own cache_n was 0). Its threads: ' +
    [...new Set(rows.filter((r) => r.engine === 'wllama' && !r.failed).map((r) => `${r.browser} ${r.threads} → ${r.threadsUsed}`))].join(', ') + '.');
}
for (const n of notes) lines.push('', n);
// The first generation after load against the later ones: the warm-up at load is meant to make
// them the same (JIT tiers, first-use allocations).
const ours = rows.filter((r) => r.engine === 'gpt2-web' && !r.failed);
for (const g of rows.filter((r) => r.engine === 'gpt2-web WebGPU')) {
  const cpu = ours.find((r) => r.browser === g.browser && r.dtype === 'q8' && r.threadsUsed === 1 && !r.forced);
  lines.push('', g.failed ? `WebGPU in ${g.browser}: does not run: ${g.failed}`
    : `WebGPU in ${g.browser} ÷ its CPU (q8, 1 thread): TTFT ${fmt(g.ttftMs / cpu.ttftMs, 2)}×, ms/token ${fmt(g.tpotMs / cpu.tpotMs, 2)}× ` +
      `(${fmt(g.tpotMs, 1)} vs ${fmt(cpu.tpotMs, 1)} ms/token; the target is ≤ 0.5×, twice as fast); ` +
      `a step asked of the GPU ${perPass(g.gpu)}`);
}
lines.push('', 'First generation after load ÷ the later ones (TTFT / ms per token), gpt2-web:');
for (const r of ours) {
  lines.push(`- ${r.browser} ${r.dtype} \`${r.build}\` ${r.threadsUsed} thread(s): ` +
    `${(r.first.ttftMs / r.ttftMs).toFixed(2)}× / ${(r.first.tpotMs / r.tpotMs).toFixed(2)}× ` +
    `(first ${fmt(r.first.ttftMs, 0)} ms, then ${fmt(r.ttftMs, 0)} ms)`);
}
// The same code (the portable build) in each engine: what the engine itself costs.
const portable = ours.filter((r) => r.dtype === 'q8' && r.build === 'pkg' && r.threadsUsed === 1);
if (portable.length > 1) {
  const base = portable.find((r) => r.browser === 'chromium') ?? portable[0];
  lines.push('', `The portable build (\`pkg\`, q8, 1 thread) in each engine, against ${base.browser}: ` +
    portable.map((r) => `${r.browser} TTFT ${(r.ttftMs / base.ttftMs).toFixed(2)}×, ms/token ${(r.tpotMs / base.tpotMs).toFixed(2)}×`).join('; '));
}
if (PEER) {
  lines.push('', 'Targets (ours ÷ the best peer, transformers.js or wllama, in the same browser and thread count):');
  const target = (what, v, max, who) => `${what} ${v.toFixed(2)}× ${who} (target ≤ ${max.toFixed(2)}) ${v <= max ? 'met' : 'NOT met'}`;
  const bestPeer = (r, key) => {
    const both = [['transformers.js', best(r, key)], ['wllama', best(r, key, 'wllama')]].filter(([, v]) => v !== null);
    return both.length ? both.reduce((a, b) => (b[1] < a[1] ? b : a)) : null;
  };
  for (const browser of ENGINE_NAMES) {
    for (const threads of THREADS) {
      const mine = ours.filter((r) => r.browser === browser && r.threads === threads && !r.forced);
      const tt = mine.length ? bestPeer(mine[0], 'ttftMs') : null;
      const tp = mine.length ? bestPeer(mine[0], 'tpotMs') : null;
      if (!tt || !tp) {
        if (mine.length) lines.push(`- ${browser}, ${threads} thread(s): no peer ran`);
        continue;
      }
      lines.push(`- ${browser}, ${threads} thread(s): ${target('TTFT', Math.min(...mine.map((r) => r.ttftMs)) / tt[1], 0.5, `of ${tt[0]}'s`)}; ` +
        `${target('ms/token', Math.min(...mine.map((r) => r.tpotMs)) / tp[1], 0.35, `of ${tp[0]}'s`)}`);
    }
  }
  // Same weights, same greedy decoding: the f32 engines should agree on the tokens.
  for (const browser of ENGINE_NAMES) {
    const a = rows.find((r) => r.browser === browser && r.engine === 'gpt2-web' && r.dtype === 'f32' && !r.failed);
    const b = rows.find((r) => r.browser === browser && r.engine === 'transformers.js' && r.dtype === 'fp32' && !r.failed);
    if (a?.ids && b?.ids) {
      let same = 0;
      while (same < Math.min(a.ids.length, b.ids.length) && a.ids[same] === b.ids[same]) same++;
      lines.push(`- ${browser}: f32 greedy tokens identical to transformers.js fp32 for the first ${same} of ${TOKENS}`);
    }
  }
}
if (BOUND_MS) {
  const q8 = ours.filter((r) => r.dtype === 'q8');
  lines.push('', `Browser q8 decode against the native lab's bandwidth bound (${BOUND_MS.toFixed(2)} ms/token):`);
  for (const r of q8) lines.push(`- ${r.browser} \`${r.build}\`, ${r.threadsUsed} thread(s): ${(r.tpotMs / BOUND_MS).toFixed(2)}× the bound (target ≤ 1.50) ${r.tpotMs / BOUND_MS <= 1.5 ? 'met' : 'NOT met'}`);
}
const probed = rows.filter((r) => r.readGBs);
if (probed.length) {
  // The same bytes at what one wasm thread reads here: the bound the browser itself sets.
  lines.push('', `Browser q8 decode against what one wasm thread reads in the same page after its runs ` +
    `(a read-only loop over the weights' ${WEIGHTS_MB} MB, the best of 7):`);
  for (const r of probed) {
    const bound = WEIGHTS_MB / r.readGBs;
    lines.push(`- ${r.browser}, ${r.threadsUsed} thread(s): ${r.readGBs.toFixed(1)} GB/s → ${bound.toFixed(2)} ms/token; ` +
      `decode is ${(r.tpotMs / bound).toFixed(2)}× it (target ≤ 1.50) ${r.tpotMs / bound <= 1.5 ? 'met' : 'NOT met'}`);
  }
}
// Where our engine's time goes in the page: the prompt's forward and a decode step, by phase.
const profiled = rows.filter((r) => r.profile);
if (profiled.length) {
  const names = ['matmul', 'quantize', 'attention', 'gelu', 'layer_norm', 'lm_head'];
  lines.push('', 'Where gpt2-web spends it (one more run with `profile: true`; prompt forward ms, with the ' +
    'layers\' GEMM rate in brackets / decode ms per token):', '',
    `| browser | weights | threads | ${names.join(' | ')} | total |`, `|---|---|---|${names.map(() => '---|').join('')}---|`);
  // The layers' multiply-adds per prompt token, for the prompt GEMM's rate (GMAC/s).
  const cfg = JSON.parse(fs.readFileSync(path.join(MODEL, 'config.json'), 'utf8'));
  const [n, inner] = [cfg.n_embd, cfg.n_inner ?? 4 * cfg.n_embd];
  const macs = cfg.n_layer * (n * 3 * n + n * n + 2 * n * inner);
  for (const r of profiled) {
    const { prompt: p, decode: d } = r.profile;
    const rate = (k) => (k === 'matmul' ? ` (${((64 * macs) / p.phases[k] / 1e6).toFixed(1)} GMAC/s)` : '');
    const cell = (k) => `${fmt(p.phases[k], 1)}${rate(k)} / ${fmt(d.phases[k] / d.tokens, 2)}`;
    lines.push(`| ${r.browser} | ${r.dtype} | ${r.threadsUsed} | ${names.map(cell).join(' | ')} | ${fmt(p.totalMs, 1)} / ${fmt(d.totalMs / d.tokens, 2)} |`);
  }
}
console.log(lines.join('\n'));
if (JSON_OUT) fs.writeFileSync(JSON_OUT, JSON.stringify(rows.map(({ ids, ...r }) => r), null, 2));
