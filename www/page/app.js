// The demo page: load a model, stream a generation, show perceived vs total latency, predict a
// total and measure it, and run the labs (latency vs output length; greedy, sampling, beam;
// without a KV cache; more than one token per step). Plain DOM, no framework.
//
// URL parameters: ?model=<folder URL> loads that folder at start instead of the demo model;
// ?backend=auto|cpu|webgpu picks the backend of that first load, ?dtype=q8|f32 its CPU weights.
//
// What the page measured and where it stands is kept in record.js.

import { Gpt2, isHubId, hubUrl } from '../api/gpt2.js';
import { LoopView } from '../widget/loop-view.js';
import { TokenView } from '../widget/token-view.js';
import { LoopDiagram } from './loop-diagram.js';
import { DEMO_MODEL as DEMO } from '../api/assets.js';
import { wireEmbedPanel } from './embed-code.js';
import { numberField, listField, formOptions, chosenSource, embedSettings } from './page-form.js';
import { runSpeculativeLab } from './lab-speculative.js';
import { runDecodingLab } from './lab-decoding.js';
import { runBatchLab } from './lab-batch.js';
import { ShapeLab } from './lab-shape.js';
import { showCost, costPerAnswer, wirePrices, compareLengths } from './cost.js';
import { checkTime, checkLevers } from './check.js';
import { runNaiveLab } from './lab-naive.js';
import { runLengthRuns } from './lab-length.js';
import { runCodeLab, wireCodeLab } from './lab-code.js';
import { runApiLab, wireApiLab } from './lab-api.js';
import { predictionText, measurePrediction } from './predict.js';
import { PRESETS } from '../api/presets.js';
import { fmtMs, sentence, afterPaint, Announcer } from '../widget/text.js';
import { drawLatency as drawLatencyOn, drawLab as drawLabOn } from './charts.js';
import { record } from './record.js';
import { takeEarlyLoad } from './early.js';

/** When this module began to run (its imports fetched and evaluated), from the page's navigation. */
const startedAtMs = performance.now();
const $ = (id) => document.getElementById(id);
const drawLatency = () => drawLatencyOn($('latency-chart'), latency);
const drawLab = (points, fit) => drawLabOn($('lab-chart'), points, fit);

let model = null;
let controller = null; // aborts the running generation or lab
let latency = []; // elapsedMs of each token of the current generation
let chartQueued = false;
let lastMetrics = null; // the last Generate's metrics, for "predict, then measure"
let lastCost = null; // [metrics, maxTokens] of the last Generate, for "what it costs"
const spoken = new Announcer($('spoken')); // the stream for screen readers, a line or sentence at a time

// ---------------------------------------------------------------------------------------------
// Small helpers.

const fmtMB = (bytes) => `${(bytes / 1e6).toFixed(1)} MB`;

/** Why the model runs where it runs, when that is not what was asked for ('' hides it). */
function showBackendNote(text) {
  const el = $('backend-note');
  el.textContent = text ? sentence(text) : '';
  el.hidden = !text;
}

function showError(message) {
  const el = $('error');
  el.textContent = sentence(message);
  el.hidden = false;
}
function clearError() {
  $('error').hidden = true;
  $('error').textContent = '';
}

function setBusy(busy) {
  const ready = model !== null;
  for (const id of ['generate', 'cost-compare', 'check-time', 'check-levers', 'shape-load', 'shape-sample', 'lab-run', 'cmp-run', 'spec-run', 'batch-run', 'naive-run', 'code-run']) $(id).disabled = busy || !ready;
  $('api-run').disabled = busy; // the API's part needs no model
  $('predict-run').disabled = busy || !ready || !(lastMetrics?.outputTokens > 1);
  $('load').disabled = busy;
  $('stop').disabled = !busy;
  $('code-stop').disabled = !busy;
  record.pageState = busy ? 'busy' : ready ? 'ready' : 'error';
}

// ---------------------------------------------------------------------------------------------
// Loading a model.

async function loadModel(source, backend, dtype) {
  clearError();
  setBusy(true);
  $('stop').disabled = true;
  record.pageState = 'loading';
  const files = new Map();
  const bar = $('progress');
  const text = $('progress-text');
  bar.value = 0;
  text.textContent = 'Starting…';
  let t0 = performance.now();
  try {
    let loaded = null;
    const handlers = {
      onBackendChange: ({ backend: now, reason }) => {
        if (model !== loaded) return; // a model that is being replaced
        record.backendChanges.push({ backend: now, reason, afterTokens: record.tokenEvents });
        $('backend').textContent = now;
        showBackendNote(`switched to the ${now === 'cpu' ? 'CPU' : 'GPU'} during generation: ${reason ?? 'no reason given'}`);
      },
      onProgress: ({ file, loaded: got, total, tensor, cached, plan, fallBack }) => {
        if (fallBack) { // the GPU was lost mid-generation: the weights are read again for the CPU
          record.fallBackBytes = got;
          $('status').textContent = `The GPU was lost: reading the weights again for the CPU (${fmtMB(got)})…`;
          return;
        }
        if (plan) { // before the weights: what the model will need, and what this build allows
          $('memory-info').textContent = memoryText(plan);
          return;
        }
        files.set(file, { got, total: Math.max(total, got) });
        let sum = 0;
        let of = 0;
        for (const f of files.values()) { sum += f.got; of += f.total; }
        bar.value = of > 0 ? sum / of : 0;
        text.textContent = `${file}: ${fmtMB(got)}${total ? ` of ${fmtMB(total)}` : ''}${cached ? ' (from the browser cache)' : ''}` +
          (tensor ? `, converting ${tensor}` : '');
      },
    };
    // The page's first load may have begun before this module ran (early.js): take it over.
    const early = takeEarlyLoad(source, backend, dtype, handlers);
    if (early) t0 = early.startedAtMs;
    loaded = await (early?.promise ?? Gpt2.load({ model: source, backend, dtype, ...handlers }));
    model?.dispose(); // the previous model stays usable until the new one has loaded
    model = loaded;
    record.gpt2Model = model;
    record.loadedAtMs = performance.now();
    record.pageStartMs ??= { app: startedAtMs, load: t0 }; // the first load's start, for bench --cold
    let bytes = 0;
    for (const f of files.values()) bytes += f.got;
    bar.value = 1;
    text.textContent = `Loaded ${fmtMB(bytes)} in ${fmtMs(performance.now() - t0)}.`;
    const c = model.config;
    $('model-info').textContent = `${model.name}: ${c.nLayer} layers, ${c.nHead} heads, width ${c.nEmbd}, ` +
      `context ${c.nPositions} tokens, ${(c.nParams / 1e6).toFixed(1)} M parameters; running on ${model.backend}` +
      `${model.adapter ? ` (${model.adapter})` : ''}` +
      `${model.gpuKernel === 'dot4I8Packed' ? ', its 8-bit products four at a time (dot4I8Packed)' : ''}` +
      `${model.backend === 'cpu' ? ` with ${model.dtype} weights on ${model.threads} thread${model.threads > 1 ? 's' : ''}` : ''}.`;
    $('backend').textContent = model.backend;
    // What this browser lacks and what runs instead, each in a sentence: 'auto' (or a GPU lost
    // during load) on the CPU says why WebGPU is not used; the portable build says why it is slower.
    showBackendNote([
      model.backend === 'cpu' && model.gpuUnavailable ? sentence(`running on the CPU: ${model.gpuUnavailable}`) : '',
      model.backend === 'cpu' && model.build === 'pkg' ? 'This browser has no WebAssembly relaxed SIMD, so the CPU ' +
        'runs the portable SIMD build: its 8-bit products take more instructions, and generation is slower.' : '',
      model.notCached ?? '',
    ].filter(Boolean).join(' '));
    $('max-tokens').max = String(c.nPositions);
    const used = await model.memory();
    record.memoryUse = { plan: model.plan, ...used };
    $('memory-info').textContent = memoryText(model.plan, model.backend === 'cpu' ? used.wasmBytes : null) +
      (used.on === 'webgpu' ? ` On the GPU: weights ${fmtMB(used.weights)} (${model.dtype}), KV cache ${fmtMB(used.kvCache)}.` : '');
  } catch (e) {
    bar.value = 0;
    text.textContent = model ? 'The previous model is still loaded.' : 'Not loaded.';
    showError(e.message);
  } finally {
    setBusy(false);
  }
}

/** The memory a model needs (predicted from config.json) and, once loaded, the wasm memory measured. */
function memoryText(plan, measured = null) {
  const limit = plan.limit ? `; this build can address ${fmtMB(plan.limit)}` : '';
  return `Memory on the CPU: predicted peak ${fmtMB(plan.peak)} (weights ${fmtMB(plan.weights)}, KV cache ` +
    `${fmtMB(plan.kvCache)}, one tensor of the file at a time ${fmtMB(plan.file)})${limit}.` +
    (measured === null ? '' : ` Measured: ${fmtMB(measured)} of WebAssembly memory after loading.`);
}

// ---------------------------------------------------------------------------------------------
// Generate: stream into #output, fill the readout, draw the per-token latency chart.

function resetReadout() {
  for (const id of ['ttft', 'first-visible', 'total', 'tpot', 'tokens-per-sec', 'prompt-tokens', 'output-tokens', 'stop-reason']) {
    $(id).textContent = '–';
  }
}

function showMetrics(r) {
  const m = r.metrics;
  $('ttft').textContent = fmtMs(m.ttftMs);
  $('total').textContent = fmtMs(m.totalMs);
  $('tpot').textContent = m.outputTokens > 1 ? fmtMs(m.tpotMs) : '–';
  $('tokens-per-sec').textContent = m.outputTokens > 1 ? m.decodeTokensPerSec.toFixed(1) : '–';
  $('prompt-tokens').textContent = String(m.promptTokens);
  $('output-tokens').textContent = String(m.outputTokens);
  $('stop-reason').textContent = r.stopReason.replace('_', ' ');
  $('backend').textContent = model.backend;
  // On WebGPU, what a step asked of the device besides its kernels: one submission, the model's
  // dispatches, and the bytes read back (4 when the GPU chose a greedy token itself), and how many
  // steps the GPU began before the step before them was read back (greedy).
  const g = m.gpu;
  $('gpu-step-row').hidden = !g;
  $('gpu-step').textContent = g ? `${(g.submissions / g.passes).toFixed(0)} submission, ` +
    `${(g.dispatches / g.passes).toFixed(0)} dispatches, ${(g.readbackBytes / g.passes).toFixed(0)} bytes read back; ` +
    `${g.ahead} of ${g.passes} steps submitted ahead` : '–';
}

async function generate() {
  clearError();
  let options;
  try {
    options = formOptions();
  } catch (e) {
    showError(e.message);
    return;
  }
  const prompt = $('prompt').value;
  const out = $('output');
  out.replaceChildren(Object.assign(document.createElement('span'), { className: 'prompt', textContent: prompt }));
  out.setAttribute('aria-busy', 'true'); // screen readers wait for the whole text (spoken below hears it by lines)
  spoken.reset();
  tokenView.reset();
  loopView.reset(prompt);
  diagram.reset();
  const promptIds = model.tokenize(prompt); // answered before the generation starts
  promptIds.then((ids) => diagram.prompt(ids.length), () => {});
  resetReadout();
  latency = [];
  drawLatency();
  Object.assign(record, { lastResult: null, tokenEvents: 0, visibleMs: null, firstTokenMs: null });
  $('status').textContent = 'Generating…';
  controller = new AbortController();
  setBusy(true);
  const t0 = performance.now();
  const switches = record.backendChanges.length;
  let visible = false;
  try {
    const r = await model.generate(prompt, {
      ...options,
      signal: controller.signal,
      onToken: (ev) => {
        record.tokenEvents++;
        if (ev.top) loopView.step(ev);
        diagram.token(ev);
        latency.push(ev.elapsedMs);
        if (ev.index === 0) {
          record.firstTokenMs = performance.now() - t0;
          $('ttft').textContent = fmtMs(ev.elapsedMs);
        }
        $('output-tokens').textContent = String(ev.index + 1);
        tokenView.add(ev);
        if (ev.text) {
          spoken.add(ev.text);
          // "Visible" text: the first delta that is more than whitespace, timed once painted.
          if (!visible && ev.text.trim()) {
            visible = true;
            afterPaint(() => {
              record.visibleMs = performance.now() - t0;
              $('first-visible').textContent = fmtMs(record.visibleMs);
            });
          }
        }
        queueChart();
      },
    });
    record.lastResult = r;
    shapeLab.setGeneration(await promptIds, r.tokens, options);
    diagram.end(r);
    showMetrics(r);
    const m = r.metrics;
    lastCost = [m, options.maxTokens];
    showCost($, ...lastCost);
    if (r.stopReason !== 'abort') lastMetrics = m;
    updatePrediction();
    spoken.end();
    // A sampled text names its seed, so the student can run the same text again.
    const seed = options.temperature > 0 ? ` Seed ${options.seed}${$('seed').value.trim() === '' ? ' (random: type it into Seed to repeat this text)' : ''}.` : '';
    $('status').textContent = `Done: ${m.outputTokens} tokens in ${fmtMs(m.totalMs)} (${r.stopReason.replace('_', ' ')}).${seed}` +
      (record.backendChanges.length > switches ? ` ${$('backend-note').textContent}` : '');
  } catch (e) {
    $('status').textContent = '';
    showError(e.message);
  } finally {
    controller = null;
    out.setAttribute('aria-busy', 'false');
    setBusy(false);
    queueChart();
  }
}

function queueChart() {
  if (chartQueued) return;
  chartQueued = true;
  requestAnimationFrame(() => {
    chartQueued = false;
    drawLatency();
  });
}

// ---------------------------------------------------------------------------------------------
// The labs.

async function lab(name, body) {
  clearError();
  controller = new AbortController();
  setBusy(true);
  try {
    await body(controller.signal);
  } catch (e) {
    showError(`${name}: ${e.message}`);
  } finally {
    controller = null;
    setBusy(false);
  }
}

/** Output lengths that fit the context after the prompt. */
async function lengthsThatFit(prompt, lengths) {
  const promptTokens = Math.max(1, (await model.tokenize(prompt)).length); // '' starts from end-of-text
  const room = model.config.nPositions - promptTokens;
  const fit = lengths.filter((n) => n >= 1 && n <= room);
  if (fit.length === 0) throw new Error(`the prompt leaves room for ${room} tokens; choose shorter lengths or a shorter prompt`);
  return fit;
}

function runLengthLab() {
  return lab('Latency lab', async (signal) => {
    const lengths = listField('lab-lengths', 'Lengths');
    const repeats = Math.max(1, Math.min(10, Math.round(numberField('lab-repeats', 'Runs per length'))));
    const prompt = $('prompt').value;
    const fit = await lengthsThatFit(prompt, lengths);
    record.labResult = null;
    record.labResult = await runLengthRuns(model, { prompt, lengths: fit, repeats, signal }, $);
    if (record.labResult) $('lab-fit').textContent += costPerAnswer($, record.labResult.fit, (await model.tokenize(prompt)).length, Math.max(...fit));
  });
}

function runComparison() {
  return lab('Greedy, sampling, beam', async (signal) => {
    const seeds = listField('cmp-seeds', 'Seeds');
    const beams = listField('cmp-beams', 'Beams');
    if (beams.some((n) => n < 2 || n > 16)) throw new Error('Beams must be numbers of beams from 2 to 16, such as 2, 4, 8');
    const options = {
      prompt: $('prompt').value, seeds, beams, signal,
      temperature: numberField('cmp-temperature', 'Sampling temperature'),
      maxTokens: Math.round(numberField('cmp-tokens', 'Tokens')),
    };
    record.comparison = null;
    record.comparison = await runDecodingLab(model, options, $);
  });
}

// ---------------------------------------------------------------------------------------------
// Presets and "predict, then measure".

/** Puts a preset's settings into the form and says why they suit; '' leaves the form as it is. */
function applyPreset(name) {
  const p = PRESETS[name];
  $('preset-why').hidden = !p;
  $('preset-why').textContent = p ? `${p.label}: ${p.why}` : '';
  if (!p) return;
  const o = p.options;
  const fields = { 'max-tokens': o.maxTokens, temperature: o.temperature, 'top-k': o.topK, 'top-p': o.topP, 'min-p': o.minP, 'repetition-penalty': o.repetitionPenalty };
  for (const [id, v] of Object.entries(fields)) $(id).value = String(v);
  const escape = (t) => t.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/\t/g, '\\t');
  $('stop-seqs').value = o.stop.map(escape).join('\n');
}

function updatePrediction() {
  const n = $('predict-tokens').valueAsNumber;
  $('check-given').textContent = lastMetrics?.outputTokens > 1 ? `The last generation: ${fmtMs(lastMetrics.ttftMs)} to the first token, ` +
    `then ${fmtMs(lastMetrics.tpotMs)} per token. How long will ${$('check-n').value} tokens take?` : $('check-given').textContent;
  $('predict-out').textContent = Number.isInteger(n) && n >= 1 ? predictionText(lastMetrics, n) : 'Tokens must be a whole number from 1.';
  setBusy(controller !== null);
}

function runPrediction() {
  return lab('Predict, then measure', async (signal) => {
    const n = Math.round(numberField('predict-tokens', 'Tokens'));
    const prompt = $('prompt').value;
    await lengthsThatFit(prompt, [n]);
    record.prediction = null;
    const got = await measurePrediction(model, lastMetrics, { prompt, options: formOptions(), n, signal });
    if (!got) return;
    $('predict-out').textContent = got.text;
    record.prediction = got;
  });
}

// ---------------------------------------------------------------------------------------------
// Wiring.

wireEmbedPanel(embedSettings, showError);

$('model-form').addEventListener('submit', (e) => {
  e.preventDefault();
  let source;
  try {
    source = chosenSource();
  } catch (err) {
    showError(err.message);
    return;
  }
  loadModel(source, $('backend-choice').value, $('dtype-choice').value);
});
$('model-url').addEventListener('input', () => { $('source-url').checked = true; });
$('model-files').addEventListener('change', () => { $('source-files').checked = true; });

$('gen-form').addEventListener('submit', (e) => {
  e.preventDefault();
  if (model && !controller) generate();
});
$('stop').addEventListener('click', () => controller?.abort());
$('lab-run').addEventListener('click', runLengthLab);
$('cmp-run').addEventListener('click', runComparison);
$('naive-run').addEventListener('click', () => lab('Without a KV cache', async (signal) => {
  const prompt = $('prompt').value;
  const [maxTokens] = await lengthsThatFit(prompt, [Math.round(numberField('naive-tokens', 'Tokens'))]);
  record.naiveLab = null;
  record.naiveLab = await runNaiveLab(model, { prompt, maxTokens, signal }, $);
}));
$('preset').addEventListener('change', (e) => applyPreset(e.target.value));
// Editing a setting by hand leaves the preset: the form is custom from then on.
for (const id of ['max-tokens', 'temperature', 'top-k', 'top-p', 'min-p', 'repetition-penalty', 'stop-seqs']) {
  $(id).addEventListener('input', () => { $('preset').value = ''; $('preset-why').hidden = true; });
}
$('predict-tokens').addEventListener('input', updatePrediction);
$('predict-run').addEventListener('click', runPrediction);
$('spec-run').addEventListener('click', () => lab('More than one token per step', async (signal) => {
  const maxTokens = Math.round(numberField('spec-tokens', 'Tokens'));
  record.speculativeLab = null;
  record.speculativeLab = await runSpeculativeLab(model, { prompt: $('prompt').value, maxTokens, method: $('spec-method').value, signal }, $);
}));
$('batch-run').addEventListener('click', () => lab('Many at once', async (signal) => {
  const sizes = listField('batch-sizes', 'Sequences at once').map(Math.round);
  if (sizes.some((b) => b < 1 || b > 16)) throw new Error('sequences at once: from 1 to 16 each');
  const [maxTokens] = await lengthsThatFit($('prompt').value, [Math.round(numberField('batch-tokens', 'Tokens each'))]);
  record.batchLab = null;
  record.batchLab = await runBatchLab(model, { prompt: $('prompt').value, sizes: [...new Set(sizes)].sort((a, b) => a - b), maxTokens, signal }, $);
}));
const runCode = () => {
  if (model && !controller) {
    lab('Write the loop yourself', async (signal) => {
      record.codeLab = null;
      record.codeLab = await runCodeLab(model, $, signal);
    });
  }
};
$('code-run').addEventListener('click', runCode);
$('code-stop').addEventListener('click', () => controller?.abort());
wireCodeLab($, runCode);
wireApiLab($);
$('api-form').addEventListener('submit', (e) => {
  e.preventDefault();
  if (controller) return;
  lab('A real API', async (signal) => {
    record.apiLab = null;
    record.apiLab = await runApiLab(model, $, signal);
  });
});
wirePrices($, () => lastCost && showCost($, ...lastCost));
$('cost-compare').addEventListener('click', () => lab('Fewer tokens', async (signal) => {
  record.costCompare = null;
  record.costCompare = await compareLengths(model, { prompt: $('prompt').value, options: formOptions(), signal }, $);
}));
$('check-n').addEventListener('input', updatePrediction);
$('check-time').addEventListener('click', () => lab('Check yourself', async (signal) => {
  const [n] = await lengthsThatFit($('prompt').value, [Math.round(numberField('check-n', 'Tokens'))]);
  record.checkTime = null;
  const got = await checkTime(model, { prompt: $('prompt').value, options: formOptions(), n, guessS: $('check-guess').valueAsNumber, metrics: lastMetrics, signal });
  if (got) $('check-time-out').textContent = got.text;
  record.checkTime = got;
}));
$('check-levers').addEventListener('click', () => lab('Check yourself', async (signal) => {
  const [n] = await lengthsThatFit($('prompt').value, [Math.round(numberField('check-n', 'Tokens'))]);
  const chosen = [...document.querySelectorAll('input[name="lever"]:checked')].map((el) => el.value);
  record.checkLevers = null;
  record.checkLevers = await checkLevers(model, { prompt: $('prompt').value, options: formOptions(), n, chosen, signal }, $);
}));
const shapeLab = new ShapeLab($, record);
$('shape-load').addEventListener('click', () => lab('Shape the distribution', () => shapeLab.load(model, $('prompt').value, formOptions)));
$('shape-sample').addEventListener('click', () => {
  clearError();
  try {
    shapeLab.sampleMany();
  } catch (e) {
    showError(`Shape the distribution: ${e.message}`);
  }
});
const tokenView = new TokenView($('output'), $('token-details'));
$('boundaries').addEventListener('change', (e) => { tokenView.on = e.target.checked; });
tokenView.on = $('boundaries').checked; // a checkbox the browser restored
const loopView = new LoopView($('loop'));
const diagram = new LoopDiagram($('loop-diagram'));
record.loopView = loopView;
$('watch-loop').addEventListener('change', (e) => { $('loop').hidden = !e.target.checked; });
$('loop').hidden = !$('watch-loop').checked; // a checkbox the browser restored
// Ctrl/Cmd+Enter in the prompt generates; Escape anywhere stops.
$('prompt').addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) $('gen-form').requestSubmit();
});
document.addEventListener('keydown', (e) => {
  if (e.key === 'Escape' && controller) controller.abort();
});
window.addEventListener('resize', () => {
  drawLatency();
  if (record.labResult) drawLab(record.labResult.points, record.labResult.fit);
});

drawLatency();
drawLab([]);
const params = new URLSearchParams(location.search);
const backend = params.get('backend') ?? 'auto';
const dtype = params.get('dtype') ?? 'q8';
$('backend-choice').value = backend;
$('dtype-choice').value = dtype;
if (params.has('model')) {
  $('source-url').checked = true;
  $('model-url').value = params.get('model');
  let origin = null;
  try {
    origin = new URL(isHubId(params.get('model')) ? hubUrl(params.get('model')) : params.get('model'), location.href).origin;
  } catch {
    // not a URL: loading it says so
  }
  if (origin === location.origin) {
    loadModel(params.get('model'), backend, dtype);
  } else {
    // A link must not make a visitor download hundreds of megabytes from a host it names: ask.
    record.pageState = 'asking';
    $('progress-text').textContent = 'Not loaded.';
    $('model-info').textContent = `This link asks to load a model from ${origin ?? params.get('model')}. ` +
      'Press Load model to download it.';
  }
} else {
  loadModel(DEMO, backend, dtype);
}
