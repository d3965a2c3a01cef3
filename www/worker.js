// The model's thread: a module Web Worker that owns the WebAssembly engine(s), so the page never
// freezes while GPT-2 runs. `gpt2.js` is its only client; this file is not a public API.
//
// Protocol. Every request from the page carries a fresh numeric `id`; every reply carries the id
// of the request it answers:
//   page → worker  { id, op: 'load', source: { urls } | { files }, backend, dtype, threads,
//                    (a GGUF file: urls or files with `weights` alone; its header holds the rest)
//                    platform: { bytes, what } | null  (a lower memory limit: gpt2.js's platformMemory),
//                    build: a build's name, or undefined for the worker's own choice,
//                    builds: { [name]: { js, wasm } },  (assets.js: absolute URLs of the wasm builds)
//                    files: { config, weights, tokenizer } }  (their names, for sentences)
//                  { id, op: 'generate', model, prompt, options, draftModel? }  (draftModel: a
//                    loaded model's id, for options.draft === 'model')
//                  { id, op: 'abort' }                (id = the generate request's id)
//                  { id, op: 'tokenize', model, text }
//                  { id, op: 'dispose', model }
//                  { id, op: 'loseDevice', model }    (tests only: destroys the GPU device)
//                  { id, op: 'memory', model }        (the worker's wasm memory in bytes; the model's
//                                                      weights and KV cache on the CPU)
//                  { op: 'crash' }                    (tests only: an uncaught error, as a crash)
//   worker → page  { type: 'ready' }                                       (once, when this script runs)
//                  { id, type: 'progress', file, loaded, total, tensor, cached }   (load; and generate
//                                                                           with fallBack: true while a
//                                                                           lost GPU's model is read again)
//                  { id, type: 'token', token }                            (generate, once per token)
//                  { id, type: 'backend', backend, reason }                (generate: the backend changed,
//                                                                           e.g. the GPU was lost; before that token)
//                  { id, type: 'done', value }                             (every request but abort)
//                  { id, type: 'error', message }                          (every request but abort)
// A loaded model is named by the id of its load request, so several models (and several page
// widgets) can share this one worker.
//
// This file has no static imports and never looks at its own URL: gpt2.js passes every URL it
// needs, resolved against gpt2.js's own URL. So it runs the same when started directly, from a
// same-origin blob that imports it by absolute URL (a page of another origin), as a classic
// worker (the offline bundle), or renamed by a bundler.
//
// Concurrency: the engine runs one generation at a time. Each model has a FIFO queue: a second
// `generate` while one runs waits for it; an aborted queued request is answered at once. Models
// in the same worker take turns token by token, since the loop yields after every step.

/** @type {Promise<{ mod: object, threads: number, build: string }> | null} */
let wasmReady = null;
/** The started wasm module (wasm-bindgen's exports), once wasmReady has resolved. */
let engineModule = null;
/** Its memory (WebAssembly.Memory): what every model of this worker holds; it never shrinks. */
let wasmMemory = null;

/** model id → { engine, queue: Job[], running: Job | null, stepping: Promise | null, disposed, crashed } */
const models = new Map();
/** generate request id → Job ({ id, model, prompt, options, aborted }) while queued or running */
const jobs = new Map();

const CACHE_NAME = 'gpt2-web-models-v1';
/** The model files' names by key: gpt2.js's MODEL_FILES, sent with each load (the worker has no imports). */
let FILES = null;

function reply(id, type, payload = {}) {
  self.postMessage({ id, type, ...payload });
}

// What a Content-Security-Policy blocked here (a blob worker runs under its page's policy): the
// failing fetch or compile only says that it failed.
const blocked = [];
self.addEventListener('securitypolicyviolation', (e) => blocked.push(`${e.effectiveDirective} ${e.blockedURI || "'inline'"}`));

self.onmessage = ({ data: msg }) => {
  switch (msg.op) {
    case 'load': return respond(msg.id, () => load(msg));
    case 'generate': return enqueue(msg);
    case 'abort': return abort(msg.id);
    case 'tokenize': return respond(msg.id, () => tokenize(msg));
    case 'dispose': return respond(msg.id, () => dispose(msg));
    case 'loseDevice': return respond(msg.id, () => loseDevice(msg));
    case 'memory': return respond(msg.id, () => ({
      wasmBytes: wasmMemory?.buffer.byteLength ?? 0, ...(models.get(msg.model)?.engine.memoryUse ?? {}),
    }));
    case 'crash': return setTimeout(() => { throw new Error('the worker crashed (a test)'); }); // tests only
    default: return reply(msg.id, 'error', { message: `unknown request "${msg.op}"` });
  }
};

async function respond(id, fn) {
  try {
    reply(id, 'done', { value: await fn() });
  } catch (e) {
    reply(id, 'error', { message: describe(e) });
  }
}

/** A sentence for a person: wasm traps and memory failures are translated, the rest passes through. */
function describe(e) {
  const msg = e instanceof Error ? e.message : String(e);
  if (e instanceof WebAssembly.RuntimeError) {
    return `the model crashed inside WebAssembly (${msg}); the browser console has details; load the model again`;
  }
  if (e instanceof RangeError && /memory|allocation/i.test(msg)) {
    return `out of memory (${msg}); try a smaller model or close other tabs`;
  }
  return msg;
}

// ---------------------------------------------------------------------------------------------
// Loading: the wasm module once per worker, then the three model files (fetched or given).

/**
 * The engine's thread count for a load that asked for `requested` (a number, or undefined for the
 * default): several threads need shared wasm memory, which browsers allow only on a cross-origin
 * isolated page (COOP/COEP headers); anywhere else it is 1.
 */
function threadsFor(requested) {
  if (!self.crossOriginIsolated) return 1;
  const n = requested ?? Math.min(navigator.hardwareConcurrency || 1, 4);
  return Math.max(1, Math.floor(n));
}

/**
 * Whether this browser has WebAssembly relaxed SIMD: a module with one i8x16.relaxed_swizzle
 * validates (the probe of wasm-feature-detect).
 */
function hasRelaxedSimd() {
  return WebAssembly.validate(new Uint8Array([
    0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 15, 1, 13, 0, 65, 1, 253, 15,
    65, 2, 253, 15, 253, 128, 2, 11,
  ]));
}

/**
 * The wasm module, started once per worker by the first load. Three builds (./build.sh), whose
 * URLs gpt2.js sends (`builds`): pkg-threads for more than one thread (wasm atomics, relaxed SIMD,
 * rayon's pool of `threads` Web Workers), pkg-relaxed where relaxed SIMD exists (its 8-bit dot
 * product is ~2× faster), else pkg (simd128). A build that is missing or cannot start falls back
 * to the next.
 */
function wasm(threads, builds, only) {
  wasmReady ??= (async () => {
    const relaxed = hasRelaxedSimd();
    const tries = [];
    if (only) {
      tries.push([only, only === 'pkg-threads' ? Math.max(2, threads) : 1]); // asked for by name (benchmarks)
    } else {
      if (threads > 1 && relaxed && builds['pkg-threads']) tries.push(['pkg-threads', threads]);
      if (relaxed && builds['pkg-relaxed']) tries.push(['pkg-relaxed', 1]);
      tries.push(['pkg', 1]);
    }
    for (const [name, n] of tries) {
      try {
        const mod = await startBuild(builds[name]);
        if (n > 1) await mod.initThreadPool(n);
        engineModule = mod;
        return { mod, threads: n, build: name };
      } catch (e) {
        if (name === tries.at(-1)[0]) {
          wasmReady = null; // let a later load try again
          throw e;
        }
        console.warn(`gpt2-web: ${name} did not start, trying the next build: ${e.message}`);
      }
    }
  })();
  return wasmReady;
}

/** One build's glue module and wasm; a failure says which file and what the host must do. */
async function startBuild({ js, wasm: wasmUrl }) {
  let mod;
  try {
    mod = await import(js);
  } catch (e) {
    throw new Error(`could not load the engine's script ${js} (${e.message}): ${hostHint(js)}`);
  }
  try {
    wasmMemory = (await mod.default({ module_or_path: wasmUrl })).memory;
  } catch (e) {
    const csp = /unsafe-eval|Content Security Policy/i.test(e.message)
      ? "the page's Content-Security-Policy must allow 'wasm-unsafe-eval' in script-src" : hostHint(wasmUrl);
    throw new Error(`could not start the WebAssembly engine ${wasmUrl} (${e.message}): ${csp}`);
  }
  return mod;
}

/** The likely way out when a file of the engine could not be fetched. */
function hostHint(url) {
  if (blocked.length > 0) return `the page's Content-Security-Policy blocked ${blocked.join(', ')}`;
  if (new URL(url).origin !== self.location.origin) {
    return 'from another origin, the host must send Access-Control-Allow-Origin, .js as text/javascript ' +
      "and .wasm as application/wasm (see the README's \"Embedding\" section)";
  }
  return 'is the file there? ./build.sh builds it';
}

async function load({ id, source, backend, dtype, threads, build: only, platform, builds, files: names }) {
  FILES = names;
  // The load's phases, in ms from its start (Gpt2#loadTimings; `./build.sh bench --cold` prints them).
  const t0 = performance.now();
  const timings = {};
  const mark = (name) => { timings[name] = Math.round((performance.now() - t0) * 10) / 10; };
  // Compile the wasm while config.json and tokenizer.json download; the model's memory is checked
  // against this build (mod.checkMemory) from config.json before a byte of weights is read.
  const ready = wasm(threadsFor(threads), builds, only).then((w) => { mark('engineMs'); return w; });
  const home = source.urls ? homeOrigins(builds) : null;
  const cache = source.urls ? await openCache() : null;
  let weights = source.urls ? urlWeights(source.urls.weights, home, cache) : fileWeights(source.files.weights);
  let config, tokenizer, plan, head, mod, running, build, first;
  if (!(source.urls ?? source.files).config) {
    // A GGUF file alone: its header, read first, holds the config and the tokenizer. The file is
    // requested while the engine compiles; its header is parsed once the engine is there.
    const opening = weights.open();
    opening.catch(() => {}); // awaited below (after the engine, whose failure comes first)
    ({ mod, threads: running, build } = await ready);
    head = await ggufHead(id, mod, weights, await opening);
    ({ config, tokenizer } = head);
    plan = mod.checkMemory(config, dtype, platform?.bytes, platform?.what);
    const read = head.opened.chunks.reduce((n, c) => n + c.length, 0);
    reply(id, 'progress', { file: FILES.weights, loaded: read, total: head.opened.size, tensor: null, cached: head.opened.cached, plan });
  } else {
    const small = source.urls ? smallFetcher(id, source.urls, home, cache) : smallReader(id, source.files);
    // config.json first: a wrong folder fails fast, naming it, and a model that cannot fit this
    // build is refused before anything else is downloaded.
    [{ mod, threads: running, build }, config] = await Promise.all([ready, small.get('config')]);
    // Throws the sentence when it cannot fit (in this build, or where the platform stops a tab sooner).
    plan = mod.checkMemory(config, dtype, platform?.bytes, platform?.what);
    reply(id, 'progress', { file: FILES.weights, loaded: 0, total: 0, tensor: null, cached: false, plan });
    // The weights are requested while tokenizer.json downloads: their first bytes come one round
    // trip sooner.
    const opening = source.urls ? otherLayouts(weights, small, home, cache) : null;
    try {
      tokenizer = await small.get('tokenizer').catch((e) => vocabAndMerges(e, mod, small, source));
    } catch (e) {
      // Nothing of a model that did not load stays in the Cache API.
      opening?.then(([w, opened]) => {
        opened?.reader.cancel().catch(() => {});
        return w.failed();
      }).catch(() => {});
      throw e;
    }
    if (opening) [weights, first] = await opening;
    weights.stores = small.stores;
  }
  mark('configMs');
  const files = { config, tokenizer, timings, mark };
  const entry = { m: null }; // the model, for the progress of a later fall-back's reading
  let engine;
  let gpuUnavailable;
  try {
    try {
      engine = await streamModel(id, mod, files, weights, backend, dtype, entry, head?.opened ?? first);
    } catch (e) {
      // A damaged copy in the Cache API: dropped, and the file downloaded again, once.
      if (!e.damagedCache || !weights.drop) throw e;
      console.warn(`gpt2-web: ${e.message}; downloading it again`);
      await weights.drop();
      if (head) head = await ggufHead(id, mod, weights); // a GGUF file's header is read first
      engine = await streamModel(id, mod, files, weights, backend, dtype, entry, head?.opened);
    }
  } catch (e) {
    if (!/^WebGPU: /.test(e.message)) throw e;
    // Only the JS API knows the option's name; every WebGPU failure at load has the same way out.
    if (backend === 'webgpu') throw new Error(`${e.message}; use backend 'auto' or 'cpu'`);
    if (backend !== 'auto') throw e;
    gpuUnavailable = e.message; // the GPU took the first tensors, then failed: the CPU, from the start
    engine = await streamModel(id, mod, files, weights, 'cpu', dtype, entry);
  }
  // Kept for offline use only now that they made a model (a captive portal's page never is).
  await Promise.all([...(weights.stores ?? []).map((store) => store()), weights.stored()]);
  mark('weightsMs');
  await warmUp(engine);
  mark('warmUpMs');
  const m = { engine, queue: [], running: null, stepping: null, disposed: false, crashed: null, backend: engine.backend };
  entry.m = m;
  models.set(id, m);
  return {
    backend: m.backend, dtype: engine.dtype, threads: running, build, config: engine.config, adapter: await adapterName(engine),
    gpuUnavailable: engine.gpuUnavailable ?? gpuUnavailable, plan, timings,
  };
}

/**
 * Streams model.safetensors (or a GGUF file, or the shards an index names, one after another) into
 * a new engine: each chunk goes to the engine as it arrives, where each tensor is converted (or
 * uploaded) as soon as its bytes are in, so no file is ever whole in memory. Progress names the
 * file, the bytes and the tensor being read. A fall-back from the GPU to the CPU later reads the
 * files again through their `open` (reporting progress to the running job).
 */
async function streamModel(id, mod, files, weights, backend, dtype, entry, first) {
  const loader = await mod.EngineLoader.start(files.config, files.tokenizer, backend, dtype);
  files.mark?.('tokenizerMs'); // the tokenizer is built by start(), from its JSON or the GGUF's lists
  let parts;
  try {
    // The engine checks the index against the config and says in which order to read the shards.
    parts = weights.index ? weights.use(loader.sharded(weights.index)) : [weights];
    for (const [i, part] of parts.entries()) {
      if (i > 0) loader.nextFile();
      await streamFile(id, loader, part, i === 0 ? first : null);
      first = null;
    }
  } catch (e) {
    first?.reader.cancel().catch(() => {});
    loader.free();
    await weights.failed();
    throw e;
  }
  const reopen = async (i) => (i < parts.length ? readingAgain((await parts[i].open()).reader, parts[i].file, entry) : null);
  try {
    return await loader.finish(reopen);
  } catch (e) {
    await weights.failed();
    throw e;
  }
}

/** One weights file into `loader`, from its reader `opened` when it was opened already. */
async function streamFile(id, loader, weights, opened) {
  opened ??= await weights.open();
  for (const chunk of opened.chunks ?? []) loader.push(chunk);
  const { reader, cached, size } = opened;
  let last = 0;
  const progress = () => reply(id, 'progress', {
    file: weights.file, loaded: loader.loaded, total: loader.total ?? size, tensor: loader.tensor ?? null, cached,
  });
  progress();
  try {
    for (;;) {
      let step;
      try {
        step = await reader.read();
      } catch (e) {
        if (e.damagedCache) throw e;
        throw new Error(`${weights.what}: the transfer failed after it began (${e.message})`);
      }
      if (step.done) break;
      loader.push(step.value);
      const now = performance.now();
      if (now - last > 50) {
        last = now;
        progress();
      }
    }
  } catch (e) {
    reader.cancel().catch(() => {});
    // Bytes from the cache that the engine refused: the copy is damaged, not the file.
    if (cached && !/^WebGPU: /.test(e.message)) e.damagedCache = true;
    throw e;
  }
  progress();
}

/**
 * A folder URL whose model.safetensors is not there (a 404) may hold its weights otherwise, tried
 * in this order: in shards, as big checkpoints on the Hub do (model.safetensors.index.json names
 * them), or as pytorch_model.bin (torch.save's archive, read without running anything). Returns
 * the weights and the reader of the file found, opened (null for shards: they open in turn).
 */
async function otherLayouts(weights, small, home, cache) {
  let error;
  try {
    return [weights, await weights.open()];
  } catch (e) {
    if (!/\b404\b/.test(e.message)) throw e;
    error = e;
  }
  const index = await small.get('index').catch((e) => (/\b404\b/.test(e.message) ? null : Promise.reject(e)));
  if (index) {
    const url = small.url('index');
    let parts = [];
    return [{
      file: SHARDS_INDEX,
      index,
      /** The shards' weights, in the order the engine gives. */
      use(names) {
        parts = names.map((name) => urlWeights(new URL(name, url).href, home, cache, name));
        return parts;
      },
      stored: () => Promise.all(parts.map((p) => p.stored())),
      failed: () => Promise.all(parts.map((p) => p.failed())),
      drop: () => Promise.all(parts.map((p) => p.drop())),
    }, null];
  }
  const bin = urlWeights(small.url('bin'), home, cache, TORCH_BIN);
  try {
    return [bin, await bin.open()];
  } catch (e) {
    if (!/\b404\b/.test(e.message)) throw e;
  }
  throw new Error(`${error.message} (nor ${SHARDS_INDEX} or ${TORCH_BIN} beside it)`);
}

/**
 * Where a folder URL has no tokenizer.json (a 404), its vocab.json and merges.txt, as many
 * fine-tuned GPT-2 repositories have, made into one; otherwise the first error stands, saying that
 * they were looked for too.
 */
async function vocabAndMerges(error, mod, small, source) {
  if (!source.urls || !/\b404\b/.test(error.message)) throw error;
  const [vocab, merges] = await Promise.all(['vocab', 'merges'].map((k) => small.get(k).catch(() => null)));
  if (!vocab || !merges) throw new Error(`${error.message} (nor vocab.json and merges.txt beside it)`);
  return mod.tokenizerFromVocab(vocab, merges);
}

/**
 * Reads a GGUF file's first chunks until its header is whole: its config.json and tokenizer.json
 * (made by the engine from the header), and the open reader with the chunks read, which the
 * loader is given first. The header is parsed again only once the bytes it said it needs are in
 * (and half as many again as the last try), not at every chunk.
 */
async function ggufHead(id, mod, weights, opened) {
  opened ??= await weights.open();
  const chunks = [];
  let have = 0;
  let need = 0;
  try {
    for (;;) {
      let step;
      try {
        step = await opened.reader.read();
      } catch (e) {
        throw new Error(`${weights.what}: the transfer failed after it began (${e.message})`);
      }
      if (step.done) break;
      chunks.push(step.value);
      have += step.value.length;
      reply(id, 'progress', { file: weights.file, loaded: have, total: opened.size, tensor: null, cached: opened.cached });
      if (have < need) continue;
      const bytes = new Uint8Array(have);
      let at = 0;
      for (const c of chunks) {
        bytes.set(c, at);
        at += c.length;
      }
      const got = mod.ggufHead(bytes); // throws the sentence for a file that is not a GPT-2 GGUF
      if (typeof got === 'number') {
        need = Math.max(got, Math.floor(have * 1.5));
        continue;
      }
      return { config: got[0], tokenizer: got[1], opened: { ...opened, chunks } };
    }
  } catch (e) {
    opened.reader.cancel().catch(() => {});
    await weights.failed();
    throw e;
  }
  await weights.failed();
  throw new Error(`${weights.file} ended after ${have} bytes, inside its GGUF header: not a whole GGUF file (truncated?)`);
}

/**
 * A short greedy generation, thrown away, before the model is handed out: the browser compiles wasm
 * in a fast baseline tier first and optimises the functions that run (V8's TurboFan, SpiderMonkey's
 * Ion, JSC's BBQ then OMG), and the buffers of a forward pass are allocated on first use. Without
 * it the student's first Generate pays for both: its first token took ~200 ms in Chromium and up to
 * ~1 s in WebKit where a later one takes a few ms. The prompt has more tokens than a tile of the
 * prompt kernels has rows, so the prompt's path runs as well as a decode step's. A failure here is
 * not the load's: the first generation reports it.
 */
const WARM_UP = 'The first token of a prompt is slow, and the rest are fast. '; // 14 GPT-2 tokens
async function warmUp(engine) {
  // A small model (the demo's 16 M parameters, GPT-2 small's 124 M): about 70 tokens where the
  // context allows, past a pass of the prompt attention (32 rows) and a typical prompt's working
  // buffers, twice, since the optimizing tiers compile in the background while the first pass
  // runs (measured on the demo model, README "Each engine's speed": the first generation's TTFT
  // 9.8–12× the later ones' in WebKit and 2.6–3.7× in Chromium without it, 0.8–1.6× with it). A
  // big model runs its kernels' loops longer anyway and pays seconds per pass: one short pass.
  const { nPositions, nParams } = engine.config;
  const small = nParams < 200e6;
  const copies = small ? Math.max(1, Math.min(5, Math.floor((nPositions - 8) / 16))) : 1;
  try {
    for (let pass = 0; pass < (small ? 2 : 1); pass++) {
      engine.start(WARM_UP.repeat(copies), { maxTokens: 4, temperature: 0, ignoreEos: true });
      while ((await engine.step()) !== undefined) { /* tokens thrown away */ }
    }
  } catch (e) {
    console.warn(`gpt2-web: the warm-up generation failed: ${describe(e)}`);
  }
}

/** `reader`, reporting each chunk to the model's running job: a fall-back reading the weights again. */
function readingAgain(reader, file, entry) {
  let loaded = 0;
  return {
    read: async () => {
      const step = await reader.read();
      if (!step.done) loaded += step.value.length;
      const job = entry.m?.running;
      if (job) reply(job.id, 'progress', { file, loaded, total: null, tensor: null, cached: false, fallBack: true });
      return step;
    },
  };
}

/**
 * The weights at `url`: `open()` gives a reader of the file from its start (from the Cache API
 * when it is there). The first download is also written to the cache, from the same stream, with
 * its size and checksum beside it once the model has loaded (`stored()`); a cached copy is checked
 * against them as it is read, and one that does not match (or has none) fails the read with
 * `damagedCache`, so that `load` drops it (`drop()`) and downloads the file again. `failed()` takes
 * a copy out again when the model did not load.
 */
function urlWeights(url, home, cache, file = FILES.weights) {
  const keep = cache && !home.has(new URL(url).origin) ? cache : null;
  const checkUrl = `${url}${url.includes('?') ? '&' : '?'}gpt2-web-check`;
  let storing = null;
  let sum = null;
  return {
    file,
    what: `could not download ${url}`,
    async open() {
      let res = keep ? (await keep.match(url).catch(() => undefined)) ?? null : null;
      const cached = res !== null;
      let expect = null;
      if (cached) expect = await keep.match(checkUrl).then((r) => r?.text(), () => null) ?? null;
      if (!res) res = await fetchOk(url);
      let body = res.body;
      let summing = null;
      if (keep && !cached && !storing) {
        const [mine, theirs] = body.tee();
        body = mine;
        const type = res.headers.get('Content-Type') || 'application/octet-stream';
        storing = keep.put(url, new Response(theirs, { headers: { 'Content-Type': type } }))
          .catch((e) => console.warn(`not cached: ${url}: ${e.message}`));
        summing = sum = checksum();
      } else if (cached) {
        summing = checksum();
      }
      const reader = body.getReader();
      const size = Number(res.headers.get('Content-Length')) || 0;
      if (!summing) return { reader, cached, size };
      return {
        cached, size,
        reader: {
          read: async () => {
            const step = await reader.read();
            if (!step.done) summing.add(step.value);
            else if (cached && summing.value() !== expect) {
              throw Object.assign(new Error(`the copy of ${file} in the browser's cache is damaged ` +
                `(${summing.value()} where ${expect ?? 'nothing'} was recorded)`), { damagedCache: true });
            }
            return step;
          },
          cancel: (why) => reader.cancel(why),
        },
      };
    },
    /** Resolves once the copy in the Cache API is written, with its check (the model loaded). */
    async stored() {
      if (!storing) return;
      await storing;
      if (sum) await keep.put(checkUrl, new Response(sum.value())).catch(() => {});
    },
    async failed() {
      if (!storing) return;
      await storing;
      storing = null;
      await keep.delete(url).catch(() => {});
    },
    /** Takes a damaged cached copy out, so that the next `open()` downloads the file. */
    async drop() {
      storing = null;
      await Promise.all([url, checkUrl].map((u) => keep?.delete(u).catch(() => {})));
    },
  };
}

/**
 * A running check of a stream of chunks: its size and a 32-bit hash of its little-endian words
 * (FNV-style, mixed per word; a tail of under 4 bytes is carried to the next chunk), cheap enough
 * to run on every cached read (~1 ms per 3 MB in V8).
 */
function checksum() {
  let h = 0x811c9dc5 | 0;
  let size = 0;
  const carry = new Uint8Array(4);
  let held = 0;
  const mix = (w) => {
    h = Math.imul(h ^ w, 0x01000193);
    h ^= h >>> 15;
  };
  return {
    add(bytes) {
      size += bytes.length;
      let i = 0;
      while (held > 0 && i < bytes.length) {
        carry[held++] = bytes[i++];
        if (held === 4) {
          mix(carry[0] | (carry[1] << 8) | (carry[2] << 16) | (carry[3] << 24));
          held = 0;
        }
      }
      const n = (bytes.length - i) >> 2;
      const view = new DataView(bytes.buffer, bytes.byteOffset + i, n * 4);
      for (let k = 0; k < n; k++) mix(view.getInt32(4 * k, true));
      for (i += 4 * n; i < bytes.length; i++) carry[held++] = bytes[i];
    },
    value() {
      let t = h;
      for (let k = 0; k < held; k++) t = Math.imul(t ^ carry[k], 0x01000193);
      return `${size}:${(t >>> 0).toString(16)}`;
    },
  };
}

/**
 * Weights given as a Blob/File, ArrayBuffer or typed array, read as a stream all the same. Bytes
 * are read in place, never through a Blob: on a page opened from file:// WebKit cannot read a Blob
 * inside a worker.
 */
function fileWeights(f) {
  if (f instanceof Blob) {
    return {
      file: FILES.weights,
      what: `could not read ${FILES.weights}`,
      open: async () => ({ reader: f.stream().getReader(), cached: false, size: f.size }),
      stored: async () => {},
      failed: async () => {},
    };
  }
  const bytes = ArrayBuffer.isView(f) ? new Uint8Array(f.buffer, f.byteOffset, f.byteLength) : new Uint8Array(f);
  const chunks = () => {
    let at = 0;
    return {
      read: async () => {
        if (at >= bytes.length) return { done: true, value: undefined };
        const value = bytes.subarray(at, Math.min(bytes.length, at + (1 << 20)));
        at += value.length;
        return { done: false, value };
      },
      cancel: async () => {},
    };
  };
  return {
    file: FILES.weights,
    what: `could not read ${FILES.weights}`,
    open: async () => ({ reader: chunks(), cached: false, size: bytes.length }),
    stored: async () => {},
    failed: async () => {},
  };
}

/** A response to `url` that is OK, or an Error that says why not. */
async function fetchOk(url, signal) {
  const crossOrigin = new URL(url).origin !== self.location.origin;
  let res;
  try {
    res = await fetch(url, { signal });
  } catch (e) {
    if (signal?.aborted) throw e;
    throw new Error(`could not download ${url}: network error (${e.message})` +
      (crossOrigin ? '; the server may be unreachable, or may not allow cross-origin requests ' +
        '(it must send Access-Control-Allow-Origin)' : ''));
  }
  if (!res.ok) throw new Error(`could not download ${url}: the server answered ${res.status} ${res.statusText}`.trim());
  return res;
}

/**
 * The GPU adapter in words, or undefined on the CPU. Browsers often leave the adapter's description
 * empty (the engine then says "unnamed adapter"); the vendor and architecture fill in for it.
 */
async function adapterName(engine) {
  const name = engine.adapter;
  if (!name || !name.startsWith('unnamed adapter')) return name;
  try {
    const info = (await navigator.gpu.requestAdapter({ powerPreference: 'high-performance' }))?.info;
    const words = [info?.vendor, info?.architecture, info?.description].filter(Boolean).join(' ');
    if (words) return `${words} (WebGPU${info.isFallbackAdapter ? ', a software fallback adapter' : ''})`;
  } catch {
    // keep the engine's words
  }
  return name;
}

/** The files a folder without tokenizer.json may have instead (vocabAndMerges). */
const TOKENIZER_PAIR = { vocab: 'vocab.json', merges: 'merges.txt' };

/** What a folder without model.safetensors may have instead, in this order (otherLayouts). */
const SHARDS_INDEX = 'model.safetensors.index.json';
const TORCH_BIN = 'pytorch_model.bin';

/** The most bytes config.json and tokenizer.json may have (GPT-2's: 1 kB and 1.4 MB). */
const CAPS = { config: 1 << 20, tokenizer: 64 << 20, index: 16 << 20 };

/** `size` bytes of `file`, refused above `cap` with a sentence. */
function capped(file, cap) {
  return (size) => {
    if (size > cap) throw new Error(`${file} is ${mb(size)}, more than the ${mb(cap)} it may be; is it the right file?`);
    return cap;
  };
}

const mb = (n) => (n >= 1e6 ? `${(n / 1e6).toFixed(1)} MB` : `${Math.ceil(n / 1e3)} kB`);

/**
 * config.json and tokenizer.json from their URLs: `get(key)` downloads one (capped in size),
 * and `stores` puts what was downloaded in the Cache API (called once the model has loaded).
 */
function smallFetcher(id, urls, home, cache) {
  const stores = [];
  const where = (key) => {
    const name = FILES[key] ?? TOKENIZER_PAIR[key] ?? { index: SHARDS_INDEX, bin: TORCH_BIN }[key];
    return [name, urls[key] ?? new URL(name, urls.tokenizer).href];
  };
  return {
    stores,
    url: (key) => where(key)[1],
    async get(key) {
      // vocab.json and merges.txt sit beside tokenizer.json (vocabAndMerges).
      const [name, url] = where(key);
      const f = await download(id, name, url, home.has(new URL(url).origin) ? null : cache, capped(name, CAPS[key] ?? CAPS.tokenizer));
      stores.push(f.store);
      return f.bytes;
    },
  };
}

async function openCache() {
  try {
    return typeof caches === 'undefined' ? null : await caches.open(CACHE_NAME);
  } catch {
    return null; // e.g. not a secure context, or storage disabled
  }
}

/**
 * The origins whose files are never put in the Cache API: the page's and gpt2-web's own (where the
 * engine came from, e.g. a course page's asset host), so a retrained demo model is never stale.
 */
function homeOrigins(builds) {
  return new Set([self.location.origin, ...Object.values(builds).map((b) => new URL(b.js).origin)]);
}

/**
 * One file: { bytes, store }, reporting progress. `limit(size)` sees the announced size (0 when
 * unknown) before anything is allocated, throws when it is too much, and returns the most bytes
 * the body may have. With a `cache`, the file (e.g. from Hugging Face) is read from the Cache API
 * when it is there, and `store()` keeps it there, so a page that was opened once works offline.
 */
async function download(id, file, url, cache, limit) {
  let res = null;
  if (cache) res = (await cache.match(url).catch(() => undefined)) ?? null;
  const cached = res !== null;
  if (!res) res = await fetchOk(url);
  const max = await limit(Number(res.headers.get('Content-Length')) || 0);
  let bytes;
  try {
    bytes = await readBody(res, max, (loaded, total) => reply(id, 'progress', { file, loaded, total, cached }));
  } catch (e) {
    throw new Error(`could not download ${url}: ${e.tooBig ? e.message : `the transfer failed after it began (${e.message})`}`);
  }
  const type = res.headers.get('Content-Type') || 'application/octet-stream';
  const store = cache && !cached
    ? () => cache.put(url, new Response(bytes, { headers: { 'Content-Type': type } }))
      .catch((e) => console.warn(`not cached: ${url}: ${e.message}`))
    : async () => {};
  return { bytes, store };
}

/**
 * Streams a body into one buffer of at most `max` bytes; progress at most every 50 ms, and once at
 * the end.
 */
async function readBody(res, max, progress) {
  const length = Number(res.headers.get('Content-Length'));
  const tooBig = (n) => Object.assign(new Error(`it is ${mb(n)} or more, more than this model may take (${mb(max)})`), { tooBig: true });
  if (length > max) throw tooBig(length);
  // Content-Length counts encoded bytes (gzip); the buffer grows if the body turns out longer.
  let buf = new Uint8Array(length > 0 ? length : Math.min(1 << 20, max));
  let loaded = 0;
  let last = 0;
  progress(0, length || 0);
  const reader = res.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (loaded + value.length > max) {
      reader.cancel().catch(() => {});
      throw tooBig(loaded + value.length);
    }
    if (loaded + value.length > buf.length) {
      const grown = new Uint8Array(Math.min(max, Math.max(buf.length * 2, loaded + value.length)));
      grown.set(buf.subarray(0, loaded));
      buf = grown;
    }
    buf.set(value, loaded);
    loaded += value.length;
    const now = performance.now();
    if (now - last > 50) {
      last = now;
      progress(loaded, Math.max(length || 0, loaded));
    }
  }
  progress(loaded, loaded);
  return buf.length === loaded ? buf : buf.slice(0, loaded);
}

/** config.json and tokenizer.json given as Blob/File, ArrayBuffer or typed array, as `smallFetcher`. */
function smallReader(id, files) {
  return {
    stores: [],
    async get(key) {
      const f = files[key];
      capped(FILES[key], CAPS[key])(f instanceof Blob ? f.size : f.byteLength);
      const b = f instanceof Blob ? new Uint8Array(await f.arrayBuffer())
        : ArrayBuffer.isView(f) ? new Uint8Array(f.buffer, f.byteOffset, f.byteLength)
          : new Uint8Array(f);
      reply(id, 'progress', { file: FILES[key], loaded: b.length, total: b.length, cached: false });
      return b;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Generation: per-model FIFO queue; each step is posted the moment it exists.

function model(id) {
  const m = models.get(id);
  if (!m || m.disposed) throw new Error('this model has been disposed');
  if (m.crashed) throw new Error(`the model stopped working after an earlier failure (${m.crashed}); load it again`);
  return m;
}

function enqueue(msg) {
  let m;
  try {
    m = model(msg.model);
  } catch (e) {
    return reply(msg.id, 'error', { message: describe(e) });
  }
  try {
    // Refused now, not when a queued request's turn comes.
    engineModule.checkOptions(msg.options);
  } catch (e) {
    return reply(msg.id, 'error', { message: describe(e) });
  }
  if (msg.draftModel !== undefined && !models.has(msg.draftModel)) {
    return reply(msg.id, 'error', { message: 'the draft model is not loaded (disposed?)' });
  }
  const job = { id: msg.id, model: msg.model, prompt: msg.prompt, options: msg.options, draftModel: msg.draftModel, aborted: false };
  jobs.set(job.id, job);
  m.queue.push(job);
  if (!m.running) pump(m);
}

async function pump(m) {
  while (m.queue.length > 0 && !m.disposed && !m.crashed) {
    const job = m.queue.shift();
    m.running = job;
    try {
      reply(job.id, 'done', { value: await run(m, job) });
    } catch (e) {
      reply(job.id, 'error', { message: describe(e) });
    } finally {
      jobs.delete(job.id);
      m.running = null;
    }
  }
  if (m.disposed) finishDispose(m);
  for (const job of m.crashed ? m.queue.splice(0) : []) {
    jobs.delete(job.id);
    reply(job.id, 'error', { message: `the model stopped working (${m.crashed}); load it again` });
  }
}

async function run(m, job) {
  const { engine } = m;
  engine.start(job.prompt, job.options);
  for (;;) {
    if (job.aborted || m.disposed) engine.cancel(); // ends before the next forward pass
    let token;
    try {
      const draft = job.draftModel === undefined ? null : models.get(job.draftModel);
      if (job.draftModel !== undefined && !draft) throw new Error('the draft model was disposed during generation');
      m.stepping = draft ? engine.stepWith(draft.engine) : engine.step();
      token = await m.stepping;
    } catch (e) {
      // A trap (a Rust panic) leaves the engine unusable; say so instead of "busy" from now on.
      if (e instanceof WebAssembly.RuntimeError) m.crashed = describe(e);
      throw e;
    } finally {
      m.stepping = null;
    }
    // The step may have moved the model to the CPU (the GPU was lost): say so before its token.
    const backend = engine.backend;
    if (backend !== m.backend) {
      m.backend = backend;
      reply(job.id, 'backend', { backend, reason: engine.gpuUnavailable });
    }
    if (token === undefined) break;
    if (token !== null) reply(job.id, 'token', { token }); // null: a beam step settled none
    await nextTask(); // lets an 'abort' message in
  }
  if (m.disposed) throw new Error('the model was disposed during generation');
  return { ...engine.result(), backend: engine.backend };
}

// Yield to the event loop without setTimeout's clamping: a message to ourselves is a new task,
// queued behind any message the page has already sent.
const channel = new MessageChannel();
const waiting = [];
channel.port1.onmessage = () => waiting.shift()();
function nextTask() {
  return new Promise((resolve) => {
    waiting.push(resolve);
    channel.port2.postMessage(null);
  });
}

function abort(id) {
  const job = jobs.get(id);
  if (!job) return; // already finished
  job.aborted = true;
  const m = models.get(job.model);
  const queued = m ? m.queue.indexOf(job) : -1;
  if (queued >= 0) {
    m.queue.splice(queued, 1);
    jobs.delete(id);
    reply(id, 'done', { value: null }); // gpt2.js makes the aborted result
  }
}


// ---------------------------------------------------------------------------------------------
// The rest: tokenize between steps, dispose when the running step is done.

async function tokenize({ model: id, text }) {
  let m = model(id);
  while (m.stepping) await m.stepping.catch(() => {}); // the engine is taken while a step runs
  m = model(id); // it may have been disposed (and freed) meanwhile
  return Array.from(m.engine.tokenize(text));
}

/** Tests only: destroys the model's GPU device between two steps, as a driver reset would. */
async function loseDevice({ model: id }) {
  let m = model(id);
  while (m.stepping) await m.stepping.catch(() => {}); // the engine is taken while a step runs
  m = model(id);
  const onGpu = m.engine.backend === 'webgpu';
  m.engine.loseDevice();
  return onGpu;
}

function dispose({ model: id }) {
  const m = models.get(id);
  if (!m || m.disposed) return;
  m.disposed = true;
  for (const job of m.queue.splice(0)) {
    jobs.delete(job.id);
    reply(job.id, 'error', { message: 'the model was disposed before this generation ran' });
  }
  if (!m.running) finishDispose(m); // else the loop notices and frees it after its step
}

function finishDispose(m) {
  for (const [id, other] of models) {
    if (other === m) models.delete(id);
  }
  try {
    m.engine.free();
  } catch (e) {
    console.warn(`freeing the model failed: ${describe(e)}`);
  }
}

self.postMessage({ type: 'ready' });
