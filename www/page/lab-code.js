// Lab: "Write the loop yourself". The student's JavaScript runs in a sandbox: a Web Worker of its
// own, made from a blob when Run is pressed, with `model` (logits, decode, tokenize, eosTokenId,
// config, lastCall: each call a message to this page, which asks the real model), the helpers of
// sampling.js, `print(…)` and `record(n, ms)`. A worker has no DOM and no localStorage, so the code
// cannot read the page (the real-API lab's key among it), and terminating it stops any loop, a
// synchronous `while (true) {}` too. Model calls beyond a cap are refused, so a loop that never
// stops ends by itself. Errors come back with their line in the box: a syntax error from the
// worker's error event, a thrown one from its stack (or from the line that made the model call).
//
// What the page's Content-Security-Policy must allow for it: `worker-src blob:` (the sandbox).
// Nothing runs by itself: only Run runs the code in the box (which a link may fill, never run).

import { drawLab, drawSeries, fitLine } from './charts.js';
import { SOURCE } from '../api/sampling.js';
import { fmtMs } from '../widget/text.js';

/** The loop of the lesson, and its extension tasks, ready to run. */
export const VARIANTS = {
  greedy: {
    label: 'Greedy, timed for 10, 40, 80 tokens',
    code: `// The lesson's loop: predict → pick → append, one token per step.
// Given: model (logits, decode, tokenize, eosTokenId, lastCall), argmax, softmax,
// topK, topP, sample, rng, print(...) and record(n, ms).
async function complete(prompt, maxTokens) {
  const ids = await model.tokenize(prompt);
  const start = ids.length;
  const t0 = performance.now();
  for (let step = 0; step < maxTokens; step++) {
    const logits = await model.logits(ids);   // predict: a score for every token
    const next = argmax(logits);              // pick: the most likely (greedy)
    ids.push(next);                           // append: it feeds the next step
    if (next === model.eosTokenId) break;     // stop at end-of-text
  }
  const ms = performance.now() - t0;
  return { text: await model.decode(ids.slice(start)), tokens: ids.length - start, ms };
}

print((await complete('ROMEO:', 24)).text);

// Time it: total ≈ TTFT + TPOT × n, so the points lie on a line.
for (const n of [10, 40, 80]) {
  const r = await complete('ROMEO:', n);
  record(r.tokens, r.ms);
  print(\`\${r.tokens} tokens: \${r.ms.toFixed(0)} ms, \${(r.ms / r.tokens).toFixed(1)} ms per token\`);
}
`,
  },
  topP: {
    label: 'Sampling: temperature and top-p',
    code: `// Sampling instead of greedy: softmax at a temperature, keep the nucleus (top-p), draw.
// A seeded generator gives the same text every run; change the seed for another.
const random = rng(42);
const ids = await model.tokenize('ROMEO:');
const start = ids.length;
for (let step = 0; step < 40; step++) {
  const logits = await model.logits(ids);
  const probs = topP(softmax(logits, 0.8), 0.9);   // temperature 0.8, top-p 0.9
  const next = sample(probs, random);
  ids.push(next);
  if (next === model.eosTokenId) break;
}
print(await model.decode(ids.slice(start)));
`,
  },
  stop: {
    label: 'Stop at a blank line ("\\n\\n")',
    code: `// A stop text: end when the text so far ends with a blank line, and leave the stop out.
const ids = await model.tokenize('ROMEO:');
const start = ids.length;
let text = '';
for (let step = 0; step < 120; step++) {
  const next = argmax(await model.logits(ids));
  ids.push(next);
  if (next === model.eosTokenId) break;
  text = await model.decode(ids.slice(start));
  if (text.includes('\\n\\n')) {
    text = text.slice(0, text.indexOf('\\n\\n'));
    break;
  }
}
print(text);
print(\`(\${ids.length - start} tokens)\`);
`,
  },
  naive: {
    label: 'Without the KV cache',
    code: `// The naive loop: cache: false runs every position again at each step, so a step
// costs more the longer the text is. Compare the per-step times below with the greedy loop's.
const ids = await model.tokenize('ROMEO:');
const start = ids.length;
for (let step = 0; step < 60; step++) {
  const next = argmax(await model.logits(ids, { cache: false }));
  ids.push(next);
  print(\`step \${step + 1}: \${model.lastCall.positions} positions, \${model.lastCall.ms.toFixed(1)} ms\`);
}
print(await model.decode(ids.slice(start)));
`,
  },
};

/** The most print and record calls one run may make. */
const MAX_OUTPUT = 5000;

/** The sandbox's own code before the student's: the helpers, the model proxy, print and record. */
function prelude(info) {
  return `"use strict";
${SOURCE}
const __pending = new Map();
let __id = 0;
let __lastCall = null;
self.onmessage = ({ data }) => {
  const w = __pending.get(data.id);
  if (!w) return;
  __pending.delete(data.id);
  if (data.lastCall) __lastCall = Object.freeze(data.lastCall);
  if ('error' in data) w.reject(Object.assign(new Error(data.error), { callSite: w.site }));
  else w.resolve(data.value);
};
function __call(op, args) {
  const site = new Error().stack; // where the student's code called, for an error's line
  return new Promise((resolve, reject) => {
    __pending.set(++__id, { resolve, reject, site });
    self.postMessage({ type: 'call', id: __id, op, args });
  });
}
const model = Object.freeze({
  name: ${JSON.stringify(info.name)},
  config: Object.freeze(${JSON.stringify(info.config)}),
  eosTokenId: ${JSON.stringify(info.eosTokenId)},
  get lastCall() { return __lastCall; },
  logits(ids, options = {}) { return __call('logits', [Array.from(ids ?? []), options]); },
  decode(ids) { return __call('decode', [Array.from(ids ?? [])]); },
  tokenize(text) { return __call('tokenize', [text]); },
});
function __show(v) {
  if (typeof v === 'string') return v;
  try { return JSON.stringify(v) ?? String(v); } catch { return String(v); }
}
function print(...values) { self.postMessage({ type: 'print', text: values.map(__show).join(' ') }); }
function record(n, ms) {
  if (!(Number.isFinite(n) && Number.isFinite(ms))) throw new Error('record(n, ms) needs two numbers');
  self.postMessage({ type: 'record', n, ms });
}
self.__run = async function () {
`;
}
const EPILOGUE = `
};
self.__run().then(() => self.postMessage({ type: 'done' }), (e) => self.postMessage({
  type: 'error', message: e instanceof Error ? \`\${e.name}: \${e.message}\` : \`thrown: \${String(e)}\`,
  stack: String(e?.stack ?? ''), callSite: String(e?.callSite ?? ''),
}));
`;

/**
 * The syntax error of `code` as `{ message, line }`, from compiling it (not running it) as an
 * async function body in a worker of its own: Firefox and WebKit put the line on the SyntaxError
 * (`lineNumber`, `line`), counting the two lines of the function's header. Null when it compiles,
 * when the engine gives no line, or after a second.
 */
function syntaxError(code) {
  const src = `const AF = Object.getPrototypeOf(async function () {}).constructor;
self.onmessage = ({ data }) => {
  try { new AF(data); postMessage(null); } catch (e) { postMessage({ message: String(e), line: e.lineNumber ?? e.line ?? null }); }
};`;
  const url = URL.createObjectURL(new Blob([src], { type: 'text/javascript' }));
  return new Promise((resolve) => {
    let w;
    const done = (v) => {
      clearTimeout(timer);
      w?.terminate();
      URL.revokeObjectURL(url);
      resolve(v);
    };
    const timer = setTimeout(() => done(null), 1000);
    try {
      w = new Worker(url);
    } catch {
      return done(null);
    }
    w.onerror = () => done(null);
    w.onmessage = ({ data }) => done(data && Number.isInteger(data.line) && data.line > 2 ? { message: data.message, line: data.line - 2 } : null);
    w.postMessage(code);
  });
}

/** The line of the student's code (1-based) a stack names, or null. */
function lineIn(stack, url, first, count) {
  const esc = url.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  for (const m of String(stack).matchAll(new RegExp(`${esc}:(\\d+)(?::\\d+)?`, 'g'))) {
    const line = Number(m[1]) - first + 1;
    if (line >= 1 && line <= count) return line;
  }
  return null;
}

/**
 * Runs `code` against `model` in a fresh sandbox worker. `on` receives print(text), record(n, ms)
 * and step({ ms, engineMs, positions, reused }) for every logits call. Resolves when the code ends,
 * fails, is stopped (`signal`) or hits `cap` model calls: `{ status: 'done' | 'error' | 'stopped',
 * error?: { message, line } }`.
 */
export function runCode(model, code, { cap = 2000, signal, on = {} } = {}) {
  const head = prelude({ name: model.name, config: model.config, eosTokenId: model.eosTokenId });
  const first = head.split('\n').length; // the line the student's code starts on
  const count = code.split('\n').length;
  const url = URL.createObjectURL(new Blob([head, code, EPILOGUE], { type: 'text/javascript' }));
  return new Promise((resolve) => {
    let worker;
    let calls = 0;
    let shown = 0;
    let ended = false;
    const end = (outcome) => {
      if (ended) return;
      ended = true;
      worker?.terminate();
      URL.revokeObjectURL(url);
      signal?.removeEventListener('abort', stop);
      resolve(outcome);
    };
    const stop = () => end({ status: 'stopped' });
    if (signal?.aborted) return stop();
    signal?.addEventListener('abort', stop, { once: true });
    try {
      worker = new Worker(url);
    } catch (e) {
      return end({ status: 'error', error: { message: `the sandbox could not start (${e.message}): the page's Content-Security-Policy must allow worker-src blob:`, line: null } });
    }
    worker.onerror = async (e) => {
      e.preventDefault();
      if (ended) return;
      const at = e.lineno ? e.lineno - first + 1 : null;
      if (at >= 1 && at <= count) return end({ status: 'error', error: { message: e.message, line: at } });
      // Firefox tells a worker's parent nothing of a syntax error: ask a compiler for it.
      const found = await syntaxError(code);
      end({ status: 'error', error: found ?? { message: e.message || 'the code could not run (a syntax error?)', line: null } });
    };
    worker.onmessage = async ({ data }) => {
      if (ended) return;
      if (data.type === 'print' || data.type === 'record') {
        // A loop that prints forever would fill the page until it froze: a limit ends it.
        if (++shown > MAX_OUTPUT) {
          return end({ status: 'error', error: { message: `the code printed or recorded more than ${MAX_OUTPUT} times; stopped`, line: null } });
        }
        if (data.type === 'print') on.print?.(String(data.text).slice(0, 10_000));
        else on.record?.(data.n, data.ms);
      }
      else if (data.type === 'done') end({ status: 'done' });
      else if (data.type === 'error') {
        const line = lineIn(data.stack, url, first, count) ?? lineIn(data.callSite, url, first, count);
        end({ status: 'error', error: { message: data.message, line } });
      } else if (data.type === 'call') {
        const answer = await call(data).catch((e) => ({ id: data.id, error: e.message }));
        if (!ended) worker.postMessage(answer, answer.value instanceof Float32Array ? [answer.value.buffer] : []);
      }
    };
    async function call({ id, op, args }) {
      if (op === 'logits') {
        if (++calls > cap) {
          throw new Error(`the step cap of ${cap} model calls was reached (a loop that does not stop?); raise it beside Run`);
        }
        const [ids, options] = args;
        const value = await model.logits(ids, options ?? {});
        const lastCall = { ...model.lastCall };
        on.step?.(lastCall);
        return { id, value, lastCall };
      }
      if (op === 'decode') return { id, value: await model.decode(args[0]) };
      if (op === 'tokenize') return { id, value: await model.tokenize(args[0]) };
      throw new Error(`unknown model call ${op}`);
    }
  });
}

// ---------------------------------------------------------------------------------------------
// The lab's part of the page: the variants, the box, the output, the two charts.

/** Fills the variant list and the box (with the greedy loop); `run()` is Ctrl+Enter's. */
export function wireCodeLab($, run) {
  for (const [key, v] of Object.entries(VARIANTS)) $('code-variant').append(new Option(v.label, key));
  const fill = () => { $('code-box').value = VARIANTS[$('code-variant').value].code; };
  $('code-load').addEventListener('click', fill);
  $('code-box').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      run();
    }
  });
  fill();
  drawSeries($('code-steps-chart'), [], 'model call', 'ms', 'Each model call\'s time appears here.');
  drawLab($('code-fit-chart'), []);
}

/** Runs the box's code on `model`, showing what it prints, its model calls and its recorded points. */
export async function runCodeLab(model, $, signal) {
  const out = $('code-output');
  out.textContent = '';
  const steps = [];
  const records = [];
  const prints = [];
  let queued = false;
  const draw = () => {
    queued = false;
    const points = steps.map((s, i) => [i + 1, s.ms]);
    drawSeries($('code-steps-chart'), [{ label: 'ms per model call', points, fit: null, colour: 'accent' }], 'model call', 'ms', '');
  };
  const cap = Math.round(Number($('code-cap').value));
  if (!(cap >= 1)) throw new Error('the step cap must be a whole number of at least 1');
  $('code-status').textContent = 'Running…';
  const t0 = performance.now();
  const outcome = await runCode(model, $('code-box').value, {
    cap, signal,
    on: {
      print: (text) => {
        prints.push(text);
        out.append(`${text}\n`);
      },
      record: (n, ms) => {
        records.push({ n, totalMs: ms });
        drawLab($('code-fit-chart'), records);
      },
      step: (call) => {
        steps.push(call);
        if (!queued) {
          queued = true;
          requestAnimationFrame(draw);
        }
      },
    },
  });
  draw();
  let fit = null;
  if (new Set(records.map((r) => r.n)).size >= 2) {
    fit = fitLine(records.map((r) => r.n), records.map((r) => r.totalMs));
    drawLab($('code-fit-chart'), records, fit);
    $('code-fit').textContent = `Fit of the recorded points: total ≈ ${fmtMs(fit.a)} + ${fmtMs(fit.b)} × n ` +
      `(R² ${fit.r2.toFixed(3)}): the intercept is about the time to the first token, the slope the time per token.`;
  } else {
    $('code-fit').textContent = records.length ? 'Record at least two different lengths for a line.' : 'The code recorded no points.';
  }
  const decode = steps.filter((s) => s.positions === 1);
  const perStep = decode.length ? ` A one-position step took ${fmtMs(decode.reduce((a, s) => a + s.ms, 0) / decode.length)} on average.` : '';
  const took = `${steps.length} model call${steps.length === 1 ? '' : 's'} in ${fmtMs(performance.now() - t0)}.${perStep}`;
  if (outcome.status === 'error') {
    const where = outcome.error.line ? `Line ${outcome.error.line}: ` : '';
    const p = document.createElement('span');
    p.className = 'failed';
    p.textContent = `${where}${outcome.error.message}\n`;
    out.append(p);
    $('code-status').textContent = `The code failed. ${where}${outcome.error.message} (${took})`;
  } else {
    $('code-status').textContent = outcome.status === 'stopped' ? `Stopped. ${took}` : `Done. ${took}`;
  }
  return { ...outcome, prints, steps, records, fit };
}
