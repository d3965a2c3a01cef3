// Peer benchmark: transformers.js (onnxruntime-web, wasm execution provider) running GPT-2 in the
// page, completely offline. Import it from a page served next to tools/peer/ (with node_modules, see
// tools/peer/setup.sh) and to the folders tools/peer/export_onnx.py writes:
//
//   import { peerBench } from '/peer/peer.js';
//   const r = await peerBench({ modelId: 'gpt2-124m', dtype: 'q8', threads: 1, prompt, maxNewTokens: 128, runs: 3 });
//
// One page per configuration: onnxruntime-web fixes its thread count when its wasm first starts.
// threads > 1 needs a cross-origin-isolated page (COOP/COEP, for SharedArrayBuffer).
import {
  env,
  AutoTokenizer,
  AutoModelForCausalLM,
} from './node_modules/@huggingface/transformers/dist/transformers.js';

/** The onnxruntime-web files transformers.js' bundle uses (its own default is the same pair on a CDN). */
const ORT_DIST = new URL('./node_modules/onnxruntime-web/dist/', import.meta.url).href;

/**
 * @param {object} o
 * @param {string} o.modelId  folder name under localModelPath (config.json, tokenizer*.json, onnx/)
 * @param {'fp32'|'q8'} o.dtype  fp32 → onnx/model.onnx, q8 → onnx/model_quantized.onnx
 * @param {number} [o.threads=1]  onnxruntime-web wasm threads
 * @param {string} o.prompt
 * @param {number} [o.maxNewTokens=128]  forced length (min = max new tokens, greedy)
 * @param {number} [o.runs=3]  timed runs, after one untimed warm-up generation
 * @param {string} [o.localModelPath='/peer-models/']  path on this origin
 * @param {string} [o.ortVariant='asyncify']  onnxruntime-web wasm build: 'asyncify' (what transformers.js
 *   uses by default, from a CDN) or '' (plain ort-wasm-simd-threaded.wasm; measured the same speed)
 */
export async function peerBench({ runs = 3, ...options }) {
  const peer = await peerLoad(options);
  const warm = await peer.once();
  const results = [];
  let last = warm;
  for (let i = 0; i < runs; i++) {
    last = await peer.once();
    results.push(last.run);
  }
  const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
  return {
    engine: 'transformers.js',
    modelId: options.modelId, dtype: peer.dtype, threads: peer.threads, device: 'wasm',
    versions: peer.versions,
    crossOriginIsolated: self.crossOriginIsolated,
    loadMs: peer.loadMs,
    promptTokens: peer.promptTokens,
    warmup: warm.run,
    runs: results,
    median: {
      ttftMs: median(results.map((r) => r.ttftMs)),
      tpotMs: median(results.map((r) => r.tpotMs)),
      totalMs: median(results.map((r) => r.totalMs)),
    },
    promptIds: peer.promptIds,
    tokenIds: last.ids,
    stepsMs: last.stepsMs, // last run: time between consecutive new tokens
    text: peer.decode(last.ids),
  };
}

/**
 * Loads the model and returns `{ once, loadMs, promptTokens, promptIds, versions, decode }`, where
 * `once()` is one greedy generation of `maxNewTokens` with its timings, so that a benchmark can
 * take its runs in turns with other engines'. Options as `peerBench`'s, without `runs`.
 */
export async function peerLoad({
  modelId, dtype = 'q8', threads = 1, prompt, maxNewTokens = 128,
  localModelPath = '/peer-models/', ortVariant = 'asyncify',
}) {
  env.allowRemoteModels = false;
  env.allowLocalModels = true;
  env.localModelPath = localModelPath;
  env.useBrowserCache = false;
  const wasm = env.backends.onnx.wasm;
  wasm.wasmPaths = {
    mjs: `${ORT_DIST}ort-wasm-simd-threaded${ortVariant ? `.${ortVariant}` : ''}.mjs`,
    wasm: `${ORT_DIST}ort-wasm-simd-threaded${ortVariant ? `.${ortVariant}` : ''}.wasm`,
  };
  wasm.numThreads = threads;
  wasm.proxy = false;
  if (threads > 1 && !self.crossOriginIsolated) {
    throw new Error('threads > 1 needs a cross-origin-isolated page (COOP/COEP headers)');
  }

  const t0 = performance.now();
  const tokenizer = await AutoTokenizer.from_pretrained(modelId);
  const model = await AutoModelForCausalLM.from_pretrained(modelId, { dtype, device: 'wasm' });
  const loadMs = performance.now() - t0;

  const inputs = tokenizer(prompt);
  const promptTokens = inputs.input_ids.dims.at(-1);

  async function once() {
    const stamps = [];
    let newIds = [];
    let promptSeen = false;
    const streamer = {
      put(value) {
        if (!promptSeen) { promptSeen = true; return; } // generate() first puts the prompt
        stamps.push(performance.now());
        newIds.push(Number(value[0][0]));
      },
      end() {},
    };
    const start = performance.now();
    await model.generate({
      ...inputs,
      do_sample: false,
      max_new_tokens: maxNewTokens,
      min_new_tokens: maxNewTokens,
      streamer,
    });
    const totalMs = performance.now() - start;
    const n = stamps.length;
    const ttftMs = stamps[0] - start;
    const tpotMs = n > 1 ? (totalMs - ttftMs) / (n - 1) : NaN; // decode steps only
    const stepsMs = stamps.slice(1).map((t, i) => t - stamps[i]);
    return { run: { ttftMs, tpotMs, totalMs, newTokens: n }, ids: newIds, stepsMs };
  }

  return {
    once, loadMs, promptTokens, dtype, threads,
    promptIds: Array.from(inputs.input_ids.data, Number),
    versions: { onnxruntimeWeb: env.backends.onnx.versions?.web ?? null, transformers: env.version ?? null },
    decode: (ids) => tokenizer.decode(ids),
  };
}
