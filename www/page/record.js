// What the demo page measured and where it stands: one object that app.js keeps up to date and
// nothing else writes. The page shows these numbers itself; the record holds them whole for
// whatever watches the page from outside (the browser tests and tools/bench_cold.mjs import this
// module into the running page: tests/e2e/observe.mjs). The page puts nothing on `window`.
export const record = {
  /** 'loading' | 'ready' | 'busy' | 'error' (after every load, generation and lab), or 'asking' (a ?model= of another origin waits for the Load button). */
  pageState: 'loading',
  /** The loaded Gpt2, or null. */
  gpt2Model: null,
  /** The result of the last Generate click (null while it runs). */
  lastResult: null,
  /** How many onToken calls that generation made. */
  tokenEvents: 0,
  /** Its time from click to the first visible text painted. */
  visibleMs: null,
  /** Its time from click to the first token event. */
  firstTokenMs: null,
  /** performance.now() when the last load finished (from the page's navigation: open → ready). */
  loadedAtMs: null,
  /** { app, load }: when app.js began to run and when it called Gpt2.load, the first time. */
  pageStartMs: null,
  /** [{ backend, reason, afterTokens }]: each move to another backend (GPU lost), with the tokens the running generation had shown by then. */
  backendChanges: [],
  /** The "watch the loop" view (widget/loop-view.js). */
  loopView: null,
  /** { points: [{ n, totalMs, ttftMs, tpotMs }], fit: { a, b, r2 } } after the length lab. */
  labResult: null,
  /** { rows, greedyIdentical, sampledDistinct } after the greedy/sampling/beam lab. */
  comparison: null,
  /** { identical, cached: { fit, totalMs, points }, naive: {…} } after the no-KV-cache lab. */
  naiveLab: null,
  /** { n, predictedMs, measuredMs, off } after "predict, then measure". */
  prediction: null,
  /** After the "more than one token per step" lab. */
  speculativeLab: null,
  /** [{ way, setting, outputTokens, totalMs, cost, text }] after "fewer tokens, measured". */
  costCompare: null,
  /** { n, guessMs, measuredMs, formulaMs, right, text } after "check yourself" question 1. */
  checkTime: null,
  /** { baseMs, rows: [{ key, label, ms, speedup, cuts, picked, why }], text, right } after question 2. */
  checkLevers: null,
  /** { settings, rows: [{ id, logit, before, after }], kept, entropy, otherAfter, picked, pickedProb, draws: { n, counts } | null } after the shape-the-distribution lab redraws. */
  shapeLab: null,
  /** { runs: [{ batch, shared, stepMs, perSequence, tokensPerSec }], knee } after the batching lab. */
  batchLab: null,
  /** { api: [{ maxTokens, n, ttftMs, tpotMs, totalMs, text }], apiFit, local, localFit, text } or { error, api } after "a real API" (numbers and texts only: never the key). */
  apiLab: null,
  /** { status, error?: { message, line }, prints, steps, records, fit } after "write the loop yourself". */
  codeLab: null,
  /** { plan, wasmBytes, weights, kvCache } after a load (model.plan, model.memory()). */
  memoryUse: null,
  /** Bytes of the weights read again after the GPU was lost. */
  fallBackBytes: null,
};
