// A load: the engine and the model's files in parallel, the weights streamed into the engine as
// they arrive (one file, a GGUF file whose header comes first, or shards in turn), a fall-back to
// the CPU when the GPU fails, the phases timed. (Part of the worker: see www/worker/main.js.)

import { FILES, checkAborted, loading, models, reply, setFiles } from './base.js';
import { adapterName, timeDecode, warmUp, wasm } from './engine.js';
import { fileWeights, homeOrigins, notCachedSentence, openCache, otherLayouts, readAhead, smallFetcher, smallReader, urlWeights, vocabAndMerges } from './files.js';
import { scheduler, startScheduler } from './pump.js';

/**
 * A load, abortable (`abortLoad`): its reading stops at the next chunk, its warm-up at the next
 * step, and a model it made is disposed.
 */
export async function load(msg) {
  const state = { aborted: false, own: new Set() };
  loading.set(msg.id, state);
  try {
    return await loadModel(msg, state);
  } finally {
    loading.delete(msg.id);
  }
}

/** Aborts the load `id` if one runs; false when there is none. */
export function abortLoad(id) {
  const state = loading.get(id);
  if (!state) return false;
  state.aborted = true;
  for (const own of state.own) scheduler?.abort(own);
  return true;
}

async function loadModel({ id, source, backend, dtype, tries, compiling, kernel, raceSoftwareGpu = false, timedKernels = null, headsVerdicts = null, platform, builds, files: names }, state) {
  setFiles(names);
  // The load's phases, in ms from its start (Gpt2#loadTimings; `./build.sh bench --cold` prints them).
  const t0 = performance.now();
  // startedAt: the load's start on the epoch's clock, which the page turns into its own (Gpt2#loadTimings startedMs).
  const timings = { startedAt: performance.timeOrigin + t0 };
  const mark = (name) => { timings[name] = Math.round((performance.now() - t0) * 10) / 10; };
  // Compile the wasm while config.json and tokenizer.json download; the model's memory is checked
  // against this build (mod.checkMemory) from config.json before a byte of weights is read.
  const ready = wasm(tries, builds, compiling).then((w) => { mark('engineMs'); return w; });
  const home = source.urls ? homeOrigins(builds) : null;
  const { cache, why: noCache } = source.urls ? await openCache() : { cache: null, why: null };
  let weights = source.urls ? urlWeights(source.urls.weights, home, cache) : fileWeights(source.files.weights);
  let config, tokenizer, plan, head, mod, running, build, first;
  if (!(source.urls ?? source.files).config) {
    // A GGUF file alone: its header, read first, holds the config and the tokenizer. The file is
    // requested and read ahead while the engine compiles; its header is parsed once the engine is there.
    const opening = weights.open().then((opened) => readAhead(opened));
    opening.catch(() => {}); // awaited below (after the engine, whose failure comes first)
    try {
      ({ mod, threads: running, build } = await ready);
      head = await ggufHead(id, mod, weights, await opening);
      ({ config, tokenizer } = head);
      plan = mod.checkMemory(config, dtype, platform?.bytes, platform?.what);
    } catch (e) {
      // The file stops downloading and reading ahead with the load, and no copy of it stays in the Cache API.
      opening.then((opened) => {
        opened.reader.cancel().catch(() => {});
        return weights.failed();
      }).catch(() => {});
      throw e;
    }
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
    const opening = source.urls
      ? otherLayouts(weights, small, home, cache).then(([w, opened]) => [w, opened && readAhead(opened)])
      : null;
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
  // The 8-bit kernel, when named (for benchmarks): the worker's one wasm instance, every model in it.
  if (kernel !== undefined) mod.setKernel(kernel);
  checkAborted(state);
  mark('configMs');
  const files = { config, tokenizer, mark, state }; // mark: streamModel times the tokenizer it builds
  const entry = { m: null }; // the model, for the progress of a later fall-back's reading
  let engine;
  let gpuUnavailable;
  if (backend !== 'cpu' && typeof WorkerGlobalScope === 'undefined' && !globalThis.navigator?.gpu) {
    // Outside a browser (Node: node/worker.js) there is no WebGPU, and wgpu must not look for it.
    const why = 'this JavaScript runtime has no WebGPU (navigator.gpu)';
    if (backend === 'webgpu') throw new Error(`${why}; use backend 'auto' or 'cpu'`);
    [backend, gpuUnavailable] = ['cpu', why];
  }
  try {
    try {
      engine = await streamModel(id, mod, files, weights, backend, dtype, entry, head?.opened ?? first, raceSoftwareGpu);
    } catch (e) {
      // A damaged copy in the Cache API: dropped, and the file downloaded again, once.
      if (!e.damagedCache || !weights.drop) throw e;
      console.warn(`gpt2-web: ${e.message}; downloading it again`);
      await weights.drop();
      if (head) head = await ggufHead(id, mod, weights); // a GGUF file's header is read first
      engine = await streamModel(id, mod, files, weights, backend, dtype, entry, head?.opened, raceSoftwareGpu);
    }
  } catch (e) {
    if (e.code !== 'gpu') throw e; // by its kind (Error::code), not its sentence
    // Only the JS API knows the option's name; every WebGPU failure at load has the same way out.
    if (backend === 'webgpu') throw new Error(`${e.message}; use backend 'auto' or 'cpu'`);
    if (backend !== 'auto') throw e;
    gpuUnavailable = e.message; // the GPU took the first tensors, then failed: the CPU, from the start
    engine = await streamModel(id, mod, files, weights, 'cpu', dtype, entry, undefined, false);
  }
  // Kept for offline use only now that they made a model (a captive portal's page never is).
  const kept = await Promise.all([...(weights.stores ?? []).map((store) => store()), weights.stored()]);
  // What could not be kept is said once, for a model from elsewhere (the page's own origin and
  // gpt2-web's are never cached): it will be downloaded again next time.
  const remote = source.urls && !home.has(new URL(source.urls.weights).origin);
  const notCached = remote ? notCachedSentence([noCache, ...kept]) : null;
  mark('weightsMs');
  if (state.aborted) engine.free();
  checkAborted(state);
  // From now on the model is the scheduler's: the warm-up and the kernels' timing go through it.
  const index = startScheduler(mod).add(engine);
  try {
    return await prepare(id, index, mod, { entry, timedKernels, headsVerdicts, build, timings, mark, state, running, plan, gpuUnavailable, notCached });
  } catch (e) {
    try {
      scheduler.dispose(index); // an aborted load leaves nothing behind
    } catch {
      // gone already (a trap in its warm-up)
    }
    throw e;
  }
}

/** The model `index`, built: warmed up, its 8-bit kernels timed, handed out; what the load answers. */
async function prepare(id, index, mod, { entry, timedKernels, headsVerdicts, build, timings, mark, state, running, plan, gpuUnavailable, notCached }) {
  const m = { index, disposed: false, crashed: null };
  entry.m = m;
  let info = scheduler.info(index);
  // Where the engine cannot pick its 8-bit kernel by asking, an earlier load's timing on this
  // device (gpt2.js remembers it per build, threads and model size: a decode step's choice
  // depends on how much of the weights the caches hold), taken before the warm-up so that it
  // compiles the kernels that will run; else the candidates are timed now, after the warm-up has
  // compiled the one in use (nothing when a kernel was named): over the model's own steps, which
  // runs each candidate's prompt and steps (where those could not be timed, the chosen kernels run
  // a last short pass instead).
  let kernelTimes = null;
  let timedNow = null; // [decode, prompt] when timed by this load, for gpt2.js to remember
  const q8 = info.backend === 'cpu' && info.dtype === 'q8';
  const kernelsAt = `${build} ${running} ${info.config.nParams}`;
  const past = q8 ? timedKernels?.[kernelsAt] : null;
  if (past && mod.useTimedKernels(past.decode, past.prompt)) {
    kernelTimes = `${past.times} (timed on an earlier load in this browser)`;
  }
  await warmUp(index, info.config, state);
  if (q8 && kernelTimes === null) {
    const calibrated = mod.calibrateKernels() ?? null;
    if (calibrated !== null) {
      kernelTimes = await timeDecode(index, info.config, calibrated, state);
      timedNow = mod.timedKernels() ?? null;
      if (timedNow !== null && kernelTimes === calibrated) await warmUp(index, info.config, state, { once: true });
    }
  }
  checkAborted(state);
  mark('warmUpMs');
  models.set(id, m);
  info = scheduler.info(index); // the warm-up may have moved it to the CPU
  // The heads' verdict an earlier visit measured with this build, threads, backend and dtype.
  const headsAt = `${build} ${running} ${info.backend} ${info.dtype}`;
  const heads = info.mtpHeads ? headsVerdicts?.[headsAt] : null;
  if (heads) {
    try {
      scheduler.rememberHeadsVerdict(index, JSON.stringify(heads));
    } catch {
      // not a verdict (storage edited by hand): the heads are measured again
    }
  }
  return {
    backend: info.backend, dtype: info.dtype, threads: running, build, kernel: mod.kernel(), kernelTimes, timedKernels: timedNow, config: info.config, adapter: await adapterName(info.adapter),
    gpuKernel: info.gpuKernel,
    gpuUnavailable: info.gpuUnavailable ?? gpuUnavailable, plan, timings, mtpHeads: info.mtpHeads ?? null,
    backendTimes: info.backendTimes ?? null, notCached, headsAt, kernelsAt,
  };
}

/**
 * Streams model.safetensors (or a GGUF file, or the shards an index names, one after another) into
 * a new engine: each chunk goes to the engine as it arrives, where each tensor is converted (or
 * uploaded) as soon as its bytes are in, so no file is ever whole in memory. Progress names the
 * file, the bytes and the tensor being read. A fall-back from the GPU to the CPU later reads the
 * files again through their `open` (reporting progress to the running job).
 */
async function streamModel(id, mod, files, weights, backend, dtype, entry, first, raceSoftwareGpu) {
  // Every load says, right before the engine reads it, so one load's setting never reaches another.
  mod.setRaceSoftwareGpu(raceSoftwareGpu);
  const loader = await mod.EngineLoader.start(files.config, files.tokenizer, backend, dtype, weights.file);
  files.mark('tokenizerMs'); // the tokenizer is built by start(), from its JSON or the GGUF's lists
  let parts;
  try {
    // The engine checks the index against the config and says in which order to read the shards.
    parts = weights.index ? weights.use(loader.sharded(weights.index)) : [weights];
    for (const [i, part] of parts.entries()) {
      if (i > 0) loader.nextFile();
      await streamFile(id, loader, part, i === 0 ? first : null, files.state);
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
async function streamFile(id, loader, weights, opened, state) {
  opened ??= readAhead(await weights.open());
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
      checkAborted(state);
      loader.push(step.value);
      const now = performance.now();
      if (now - last > 50) {
        last = now;
        progress();
      }
    }
  } catch (e) {
    reader.cancel().catch(() => {});
    // Bytes from the cache that the engine refused: the copy is damaged, not the file (a GPU
    // failure, memory, the budget, the engine's state or an abort say nothing of the bytes).
    if (cached && !['gpu', 'memory', 'budget', 'state', 'abort'].includes(e.code)) e.damagedCache = true;
    throw e;
  }
  progress();
}

/** The bytes a GGUF header is first parsed from, once that many are in (GPT-2's header is 1.77 MB with its vocabulary and merges). */
const HEAD_FIRST_TRY = 2 << 20;

/**
 * Reads a GGUF file's first chunks until its header is whole: its config.json and tokenizer.json
 * (made by the engine from the header), and the open reader with the chunks read, which the
 * loader is given first. The header is parsed from the file's first bytes only, again only once
 * the bytes it said it needs are in (and half as many again as the last try), not at every chunk.
 */
async function ggufHead(id, mod, weights, opened) {
  opened ??= await weights.open();
  const chunks = [];
  let have = 0;
  let need = 0;
  let tried = 0; // the bytes the last try parsed
  let ended = false;
  try {
    for (;;) {
      const want = Math.max(need, HEAD_FIRST_TRY);
      if (ended ? have > tried : have >= want) {
        const size = ended ? have : want;
        tried = size;
        // throws the sentence for a file that is not a GPT-2 GGUF
        const got = mod.ggufHead(firstBytes(chunks, size), weights.file);
        if (typeof got !== 'number') return { config: got[0], tokenizer: got[1], opened: { ...opened, chunks } };
        need = Math.max(got, Math.floor(size * 1.5));
        continue;
      }
      if (ended) break; // inside its header
      let step;
      try {
        step = await opened.reader.read();
      } catch (e) {
        throw new Error(`${weights.what}: the transfer failed after it began (${e.message})`);
      }
      if (step.done) {
        ended = true;
        continue;
      }
      // With the chunks read ahead while the engine compiled: one parse, not one per chunk.
      for (const chunk of [step.value, ...opened.reader.buffered?.() ?? []]) {
        chunks.push(chunk);
        have += chunk.length;
      }
      reply(id, 'progress', { file: weights.file, loaded: have, total: opened.size, tensor: null, cached: opened.cached });
    }
  } catch (e) {
    opened.reader.cancel().catch(() => {});
    await weights.failed();
    throw e;
  }
  await weights.failed();
  throw new Error(`${weights.file} ended after ${have} bytes, inside its GGUF header: not a whole GGUF file (truncated?)`);
}

/** The first `size` bytes of `chunks`, in one array. */
function firstBytes(chunks, size) {
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    if (at >= size) break;
    const part = c.length <= size - at ? c : c.subarray(0, size - at);
    bytes.set(part, at);
    at += part.length;
  }
  return bytes;
}

/** `reader`, reporting each chunk to the model's requests: a fall-back reading the weights again. */
function readingAgain(reader, file, entry) {
  let loaded = 0;
  return {
    read: async () => {
      const step = await reader.read();
      if (!step.done) loaded += step.value.length;
      const ids = entry.m ? scheduler.requestsOn(entry.m.index) : [];
      for (const id of ids) reply(id, 'progress', { file, loaded, total: null, tensor: null, cached: false, fallBack: true });
      return step;
    },
  };
}
