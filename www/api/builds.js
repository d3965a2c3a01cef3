// Which WebAssembly build a load runs, decided on the page, and that build's wasm compiled here on
// the page for the worker. Imported by gpt2.js; the worker tries the builds in this order
// (www/worker/engine.js).

import { BUILDS } from './assets.js';
import { host } from './host.js';

/**
 * Whether this engine has WebAssembly relaxed SIMD: a module with one i8x16.relaxed_swizzle
 * validates (the probe of wasm-feature-detect). A page and its workers answer the same.
 */
function hasRelaxedSimd() {
  return WebAssembly.validate(new Uint8Array([
    0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 15, 1, 13, 0, 65, 1, 253, 15,
    65, 2, 253, 15, 253, 128, 2, 11,
  ]));
}

/**
 * The builds a load with `threads` (a number, or undefined for the default) and `build` (a build's
 * name, or undefined) tries, in order, each with its thread count: [[name, threads], …].
 * pkg-threads for more than one thread (wasm atomics, relaxed SIMD, rayon's pool of threads
 * Web Workers), which needs shared wasm memory, so a cross-origin isolated page (COOP/COEP);
 * pkg-relaxed where relaxed SIMD exists (its 8-bit dot product is ~2× faster); else pkg
 * (simd128). The worker goes on to the next when one is missing or cannot start. A build asked
 * for by name (benchmarks) is the only one tried.
 */
export function buildOrder(threads, build) {
  const isolated = globalThis.crossOriginIsolated === true;
  const n = isolated ? Math.max(1, Math.floor(threads ?? Math.min(globalThis.navigator?.hardwareConcurrency || 1, 4))) : 1;
  if (build) return [[build, build === 'pkg-threads' ? Math.max(2, n) : 1]];
  const relaxed = hasRelaxedSimd();
  const tries = [];
  if (n > 1 && relaxed && BUILDS['pkg-threads']) tries.push(['pkg-threads', n]);
  if (relaxed && BUILDS['pkg-relaxed']) tries.push(['pkg-relaxed', 1]);
  tries.push(['pkg', 1]);
  return tries;
}

/**
 * The wasm at `url` compiled on the page, for the worker to start (the load's `compiling`, then
 * the `engine` message), or null where the page does not compile it. In Chromium a module the
 * page compiles from an http(s) response is kept in V8's code cache with the functions it has
 * optimized by then, so a return visit starts with them optimized and without compiling; a worker
 * that compiles it itself starts a return visit in the baseline tier again (docs/performance.md
 * "The return visit"); Firefox gains too (the compile overlaps the worker's start). Not in WebKit
 * (JavaScriptCore keeps no compiled wasm, and there the page's compile measured no faster, or
 * slower), not in Node (no code cache; the worker reads the file), nor from a data: or blob: URL
 * (the offline bundle). A failure is the worker's to meet and say: it compiles the file itself
 * when given null.
 */
export function compileOnPage(url) {
  const ua = globalThis.navigator?.userAgent ?? '';
  const webkit = /AppleWebKit/.test(ua) && !/Chrome\//.test(ua); // Safari, and every iOS browser
  if (webkit || host.startWorker || !/^https?:/.test(url ?? '') || typeof WebAssembly.compileStreaming !== 'function') return null;
  return WebAssembly.compileStreaming(fetch(url)).catch(() => null);
}
