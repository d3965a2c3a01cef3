// Peer benchmark: wllama (llama.cpp compiled to wasm, npm @wllama/wllama) running the same GPT-2
// weights as gpt2-web, written as GGUF by tools/make_gguf.py, completely offline: the wasm comes
// from node_modules (see tools/peer/setup.sh), the model from the page's origin.
//
//   import { wllamaLoad } from '/peer/wllama.js';
//   const peer = await wllamaLoad({ url: '/peer-models/gguf/model-Q8_0.gguf', threads: 1, prompt, maxNewTokens: 128 });
//   const { run } = await peer.once();
//
// wllama 3.8.1's one build needs JSPI and memory64 (Chromium has both); threads > 1 need a
// cross-origin isolated page. llama.cpp keeps the last prompt's KV cache and reuses its longest
// common prefix, so each run starts with another first word (one GPT-2 token, like the passage's
// "It"): every run evaluates the whole 64-token prompt, which `once` checks from llama.cpp's own
// timings (prompt_n, cache_n).
import { Wllama } from './node_modules/@wllama/wllama/esm/index.js';

const WASM = new URL('./node_modules/@wllama/wllama/esm/wasm/wllama.wasm', import.meta.url).href;
const FIRST_WORDS = ['This', 'That', 'Then', 'There', 'Now', 'So', 'But', 'And', 'Here', 'Yes', 'No', 'Oh'];

/** Whether this engine has 64-bit wasm memories. */
function memory64() {
  try {
    new WebAssembly.Memory({ address: 'i64', initial: 1n });
    return true;
  } catch {
    return false;
  }
}

/**
 * Loads the GGUF at `url` and returns `{ once, loadMs, promptTokens, threads, versions }`; `once()`
 * is one greedy generation of `maxNewTokens` (end of text ignored) with its timings. `vary: false`
 * keeps the prompt as it is (one generation per load, as `./build.sh bench --cold` runs it).
 */
export async function wllamaLoad({ url, threads = 1, prompt, maxNewTokens = 128, vary = true }) {
  if (vary && !/^It\b/.test(prompt)) throw new Error('wllamaLoad: the prompt must start with "It" (its first word is varied per run)');
  // Without JSPI or memory64 (WebKit) wllama switches to its compatibility build, which it fetches
  // from a CDN: say so, rather than fail on whatever comes first offline.
  const lacks = [!WebAssembly.Suspending && 'JSPI', !memory64() && 'memory64'].filter(Boolean);
  if (lacks.length) throw new Error(`this engine has no ${lacks.join(' and ')}, which wllama's own build needs; its compatibility build comes from a CDN (not offline)`);
  const logs = [];
  const logger = { debug: () => {}, log: (...a) => logs.push(a.join(' ')), warn: (...a) => logs.push(a.join(' ')), error: (...a) => logs.push(a.join(' ')) };
  const wllama = new Wllama({ default: WASM }, { suppressNativeLog: true, allowOffline: true, logger });
  const t0 = performance.now();
  const res = await fetch(url);
  if (!res.ok) throw new Error(`${url}: ${res.status}`);
  const blob = await res.blob();
  await wllama.loadModel([blob], { n_threads: threads, n_ctx: 512, n_batch: 512, n_gpu_layers: 0 });
  const loadMs = performance.now() - t0;
  let turn = 0;

  async function once() {
    const text = vary ? prompt.replace(/^It/, FIRST_WORDS[turn++ % FIRST_WORDS.length]) : prompt;
    let first = 0;
    let chunks = 0;
    let timings = null;
    const start = performance.now();
    await wllama.createCompletion({
      prompt: text, max_tokens: maxNewTokens, temp: 0, temperature: 0, ignore_eos: true, stream: true,
      onData: (c) => {
        if (chunks++ === 0) first = performance.now();
        if (c.timings) timings = c.timings;
      },
    });
    const totalMs = performance.now() - start;
    if (!timings) throw new Error('wllama gave no timings');
    // Varied prompts never share a prefix; an unvaried one's later runs reuse the cache, as a page's would.
    if (vary && timings.cache_n !== 0) throw new Error(`wllama reused ${timings.cache_n} cached prompt tokens`);
    const n = timings.predicted_n;
    const ttftMs = first - start;
    return {
      run: { ttftMs, tpotMs: (totalMs - ttftMs) / (n - 1), totalMs, newTokens: n, promptTokens: timings.prompt_n },
      llama: { promptMs: timings.prompt_ms, perTokenMs: timings.predicted_per_token_ms },
    };
  }

  return {
    once, loadMs,
    threads: wllama.getNumThreads(),
    multithread: wllama.isMultithread(),
    logs,
  };
}
