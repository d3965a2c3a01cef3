// The WebAssembly engine: the build this browser can run (threads, relaxed SIMD, plain SIMD),
// started once per worker, the warm-up generation a model gets before it is handed out, and the
// GPU adapter's name. (Part of the worker: see www/worker/main.js.)

import { blocked, checkAborted, describe } from './base.js';
import { generateOwn } from './pump.js';

/** @type {Promise<{ mod: object, threads: number, build: string }> | null} */
let wasmReady = null;
/** The started wasm module (wasm-bindgen's exports), once wasmReady has resolved. */
export let engineModule = null;
/** Its memory (WebAssembly.Memory): what every model of this worker holds; it never shrinks. */
export let wasmMemory = null;

/** The first build's module as the page compiled it, or null (the `engine` message: `pageCompiled`). */
let pageCompiledNow;
const fromPage = new Promise((resolve) => { pageCompiledNow = resolve; });

/** The `engine` message: the module the page compiled for the first load (or null: compile it here). */
export function pageCompiled(module) {
  pageCompiledNow(module instanceof WebAssembly.Module ? module : null);
}

/**
 * The wasm module, started once per worker by the first load: the builds of `tries` ([[name,
 * threads], …], the page's order: www/api/builds.js) in turn until one starts, from `builds`'
 * URLs (gpt2.js sends them: assets.js) — the first from the module the page compiled when the
 * load says `compiling` it (the `engine` message, which may say null: then from its URL).
 */
export function wasm(tries, builds, compiling) {
  wasmReady ??= (async () => {
    for (const [i, [name, n]] of tries.entries()) {
      try {
        const mod = await startBuild(builds[name], i === 0 && compiling === name ? fromPage : null);
        // rayon's pool of n threads, which the page starts for it (www/api/connection.js
        // startThreads), answering with a sentence when they cannot start in time.
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

/**
 * One build's glue module and wasm (`module`: a promise of it compiled, which may give null; or
 * its URL); a failure says which file and what the host must do.
 */
async function startBuild({ js, wasm: wasmUrl }, module) {
  let mod;
  try {
    mod = await import(js);
  } catch (e) {
    throw new Error(`could not load the engine's script ${js} (${e.message}): ${hostHint(js)}`);
  }
  try {
    wasmMemory = (await mod.default({ module_or_path: (await module) ?? wasmUrl })).memory;
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
export async function warmUp(index, { nPositions, nParams }, state, { once = false } = {}) {
  // A small model (the demo's 16 M parameters, GPT-2 small's 124 M): about 70 tokens where the
  // context allows, past a pass of the prompt attention (32 rows) and a typical prompt's working
  // buffers, twice, since the optimizing tiers compile in the background while the first pass
  // runs (measured on the demo model, docs/performance.md "Each engine's speed": the first generation's TTFT
  // 9.8–12× the later ones' in WebKit and 2.6–3.7× in Chromium without it, 0.8–1.6× with it). A
  // big model runs its kernels' loops longer anyway and pays seconds per pass: one short pass.
  // `once`: the first pass only (after the 8-bit kernels were timed: the chosen ones, once more).
  const small = nParams < 200e6;
  const copies = small ? Math.max(1, Math.min(5, Math.floor((nPositions - 8) / 16))) : 1;
  // The first pass greedy, the second sampled as the page's defaults sample (temperature, top-k,
  // top-p, a repetition penalty, the alternatives its token view shows), so that the sampler's
  // code is compiled too before a student's first Generate.
  const passes = [
    { maxTokens: 4, temperature: 0, ignoreEos: true },
    { maxTokens: 4, temperature: 0.8, topK: 40, topP: 0.95, repetitionPenalty: 1.1, topLogprobs: 5, seed: 1, ignoreEos: true },
  ].slice(0, small && !once ? 2 : 1);
  for (const options of passes) {
    try {
      await generateOwn(index, WARM_UP.repeat(copies), options, undefined, state); // tokens thrown away
      checkAborted(state);
    } catch (e) {
      if (state?.aborted) throw e;
      console.warn(`gpt2-web: the warm-up generation failed: ${describe(e)}`);
      break;
    }
  }
}

/**
 * The 8-bit decode kernel, chosen over decode steps of this model: `calibrateKernels` times the
 * candidates over a matrix that stays in the L2 cache, right for a prompt's tiles, not for a
 * decode step, which reads every weight from memory once per token. There the choice can differ:
 * on a 2-core AMD EPYC Zen 4 in Chromium it timed dot-i16, whose decode took 15.9 ms per token
 * on the GPT-2-124M shape against widen's 10.2 (tools/bench_ab.mjs --kernels dot-i16,widen); on a
 * Zen 5, whose AVX-VNNI gives V8 a one-instruction dot-add, widen still decoded that shape in 0.84×
 * dot-add's time, while dot-add was the faster on the demo model, whose weights the caches hold.
 * Each candidate runs three decode steps in turn (three rounds for a model under 200 M
 * parameters, one above), the fastest step of each kept (the time between two tokens); the
 * prompt's choice stays calibrate's. Returns the report with the steps' times added, after
 * making the faster kernel the decode choice (the report as it came where nothing was timed).
 */
export async function timeDecode(index, { nParams }, report, state) {
  const kernels = engineModule.undecidedKernels();
  const [, prompt] = engineModule.timedKernels() ?? [];
  if (kernels.length < 2 || !prompt) return report;
  const best = new Map(kernels.map((k) => [k, Infinity]));
  const options = { maxTokens: 4, temperature: 0, ignoreEos: true, prefixCache: false };
  try {
    for (let round = 0; round < (nParams < 200e6 ? 3 : 1); round++) {
      for (const kernel of kernels) {
        engineModule.setKernel(kernel);
        let last = null; // the first token comes with the prompt: not a decode step
        await generateOwn(index, WARM_UP, options, () => {
          const now = performance.now();
          if (last !== null) best.set(kernel, Math.min(best.get(kernel), now - last));
          last = now;
        }, state);
        checkAborted(state);
      }
    }
  } catch (e) {
    if (state?.aborted) throw e;
    console.warn(`gpt2-web: timing the decode kernels failed: ${describe(e)}`);
    return report;
  } finally {
    engineModule.setKernel('auto');
  }
  const [decode] = [...best].sort((a, b) => a[1] - b[1])[0];
  engineModule.useTimedKernels(decode, prompt);
  return `${report}; a decode step of this model: ${[...best].map(([k, ms]) => `${k} ${ms.toFixed(2)} ms`).join(', ')}`;
}

/**
 * The GPU adapter in words, or undefined on the CPU, from the engine's `name` for it. Browsers often
 * leave the adapter's description empty (the engine then says "unnamed adapter"); the vendor and
 * architecture fill in for it.
 */
export async function adapterName(name) {
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
