// Where gpt2.js finds the files it needs besides itself: the worker, the three wasm builds and the
// demo model. Every URL is resolved against THIS module's URL, never the page's, so the API works
// when a page on another origin imports it (a course page in an LMS, assets on a CDN). Each file is
// a literal `new URL('../…', import.meta.url)`: the pattern bundlers (Vite, webpack 5, Parcel)
// recognise, so a bundled app gets each file copied into its output under these same names' hashes.
// tools/bundle.mjs replaces this module as a whole for the single-file offline demo.

/** The model's worker (www/worker.js). */
export const WORKER = new URL('../worker.js', import.meta.url);

/** How the worker is started: a module worker (it has no imports of its own, see worker.js). */
export const WORKER_OPTIONS = { type: 'module', name: 'gpt2-web' };

/**
 * The wasm-bindgen builds (./build.sh): each one's glue module and its wasm, in the worker's order
 * of preference. The worker picks one at load.
 */
export const BUILDS = {
  'pkg-threads': {
    js: new URL('../pkg-threads/gpt2_web.js', import.meta.url).href,
    wasm: new URL('../pkg-threads/gpt2_web_bg.wasm', import.meta.url).href,
  },
  'pkg-relaxed': {
    js: new URL('../pkg-relaxed/gpt2_web.js', import.meta.url).href,
    wasm: new URL('../pkg-relaxed/gpt2_web_bg.wasm', import.meta.url).href,
  },
  pkg: {
    js: new URL('../pkg/gpt2_web.js', import.meta.url).href,
    wasm: new URL('../pkg/gpt2_web_bg.wasm', import.meta.url).href,
  },
};

// Not a literal on purpose: bundlers leave it alone (the npm package ships no demo model).
// One GGUF file in 8 bits (Q8_0 within ±63, the CPU kernels' own form: copied at load, never
// rounded again), its tokenizer and MTP heads in it: 20.4 MB in one request where the f16 folder is
// 32.2 MB of weights plus config.json and tokenizer.json (README "The demo model").
const DEMO_PATH = '../models/gpt2-shakespeare/gpt2-shakespeare-q8_0.gguf';

/**
 * The demo model beside this module: a URL string, or (in the offline bundle) its file.
 * The npm package has none: there, pass `model` to Gpt2.load.
 */
export const DEMO_MODEL = new URL(DEMO_PATH, import.meta.url).href;
