// Lab: "More than one token per step". The prompt greedily, plain and with each way of drafting
// the next few tokens, each draft checked by one forward pass: prompt lookup (what followed the
// last words the previous time), the model's own multi-token prediction heads (small layers on its
// last hidden state, when it has them) and a smaller model of the same vocabulary (the demo model
// drafting for a larger one). The same text every time; model steps against tokens, how often
// each draft position was kept, time per token and the speed-up, and for the chosen method the
// kept draft tokens highlighted and tokens per step over time.

import { Gpt2 } from '../api/gpt2.js';
import { DEMO_MODEL } from '../api/assets.js';
import { fmtMs } from '../widget/text.js';
import { drawBars } from './charts.js';

/** The tokens each model step gave: a step's kept draft tokens, then the model's own one. */
export function tokensPerStep(events) {
  const steps = [];
  let n = 0;
  for (const e of events) {
    n += 1;
    if (!e.drafted) {
      steps.push(n);
      n = 0;
    }
  }
  if (n) steps.push(n);
  return steps;
}

/** The share of model steps that kept a draft token at position 1, 2, … (from tokens per step). */
export function keptByPosition(steps, positions) {
  return Array.from({ length: positions }, (_, i) => steps.filter((n) => n - 1 > i).length / Math.max(1, steps.length));
}

const METHODS = {
  'prompt-lookup': 'Prompt lookup',
  mtp: 'Multi-token prediction heads',
  model: 'A draft model (the demo model)',
};

/** Why a method cannot run on `model`, or null. */
function unavailable(method, model) {
  if (method === 'mtp' && !model.mtpHeads) {
    return 'this model has no multi-token prediction heads (the demo model ships them: tools/train_mtp_heads.py)';
  }
  if (method === 'model' && model.name === DEMO_MODEL) {
    return 'the demo model is the smallest here; load GPT-2 (124M) and the demo model drafts for it';
  }
  return null;
}

/** Runs the lab on `model`; `el(id)` finds the lab's elements. Resolves with what it showed. */
export async function runSpeculativeLab(model, { prompt, maxTokens, method, signal }, el) {
  const options = { maxTokens, temperature: 0, ignoreEos: true, signal };
  let drafter = null; // the demo model, loaded for the draft-model row
  try {
    if (!unavailable('model', model)) drafter = await Gpt2.load({ model: DEMO_MODEL, backend: 'cpu' });
    const draftOf = (m) => (m === 'model' ? drafter : m);
    // A short warm-up of every path first, so that no timing pays for first use.
    for (const m of Object.keys(METHODS)) {
      if (!unavailable(m, model)) await model.generate(prompt, { ...options, maxTokens: 4, draft: draftOf(m) });
    }
    const plain = await model.generate(prompt, options);
    if (plain.stopReason === 'abort') return null;
    const rows = [];
    let shown = null;
    for (const [m, label] of Object.entries(METHODS)) {
      const why = unavailable(m, model);
      if (why) {
        rows.push({ method: m, label, why });
        continue;
      }
      const events = [];
      // The heads draft here even where this browser measured that they lose (forceDraft): the
      // lab shows what they do; the summary gives the verdict that draft: 'mtp' follows elsewhere.
      const force = m === 'mtp' ? { forceDraft: true } : {};
      const r = await model.generate(prompt, { ...options, ...force, draft: draftOf(m), onToken: (t) => events.push(t) });
      if (r.stopReason === 'abort') return null;
      const steps = tokensPerStep(events);
      const k = r.metrics;
      rows.push({
        method: m, label, identical: r.text === plain.text && r.tokens.join() === plain.tokens.join(),
        tokensPerStep: k.outputTokens / Math.max(1, k.targetForwards), kept: k.acceptedDraftTokens, drafted: k.draftedTokens,
        byPosition: keptByPosition(steps, 3), msPerToken: k.totalMs / k.outputTokens, speedup: plain.metrics.totalMs / k.totalMs,
        verdict: k.mtp?.verdict ?? null,
      });
      if (m === method) shown = { events, steps, metrics: k, text: r.text };
    }
    el('spec-plain').textContent = plain.text;
    showChosen(shown, el);
    fillTable(el('spec-methods'), plain.metrics, rows);
    const ran = rows.filter((r) => !r.why);
    const best = ran.reduce((a, r) => (r.speedup > (a?.speedup ?? 0) ? r : a), null);
    el('spec-summary').textContent = `${ran.every((r) => r.identical) ? 'The same text every way' : 'A text differs (unexpected for greedy)'}. ` +
      `Plain: ${plain.metrics.outputTokens} tokens in ${plain.metrics.targetForwards} model steps, ${fmtMs(plain.metrics.totalMs)}. ` +
      ran.map((r) => `${r.label}: ${r.tokensPerStep.toFixed(2)} tokens per step, ${r.speedup.toFixed(2)}× the speed`).join('; ') + '. ' +
      (best && best.speedup > 1.05 ? `${best.label} paid most here. ` : 'None paid here: the text did not repeat or the guesses missed, and a checked guess still costs part of a step. ') +
      'Prompt lookup pays where the text repeats; heads guess anywhere but cost a little every step; a draft model costs its own steps. ' +
      headsVerdict(rows.find((r) => r.method === 'mtp'));
    return { plain: plain.metrics, rows, steps: shown?.steps ?? [], identical: ran.every((r) => r.identical) };
  } finally {
    drafter?.dispose();
  }
}

/** What this browser measured of the heads, in a sentence ('' for a model without them). */
export function headsVerdict(row) {
  if (!row || row.why) return '';
  const v = row.verdict;
  if (!v) return "The heads' verdict in this browser is not measured yet: the first generations with draft 'mtp' time blocks of drafted steps against plain ones, then keep the faster.";
  const when = v.remembered ? 'measured on an earlier visit' : 'measured';
  return `In this browser the heads were ${when} at ${v.speedup.toFixed(2)}× plain decoding over ${v.forwards} steps, so draft 'mtp' ` +
    (v.on ? 'drafts.' : 'runs the plain loop here (the same text), unless forceDraft is set as this lab does.');
}

/** The chosen method's text (kept draft tokens highlighted) and its tokens per step. */
function showChosen(shown, el) {
  const out = el('spec-output');
  out.replaceChildren(...(shown?.events ?? []).map((e) => {
    const span = document.createElement('span');
    span.textContent = e.text;
    if (e.drafted) {
      span.className = 'drafted';
      span.title = 'a draft token the model kept: it came in the same step as the token before it';
    }
    return span;
  }));
  if (!shown) out.textContent = 'The method chosen could not run on this model (see the table).';
  const steps = shown?.steps ?? [];
  drawBars(el('spec-chart'), steps, 'model step', 'tokens from the step', 'Tokens per model step appear here.');
  el('spec-chart').setAttribute('aria-label', `Tokens per model step: ${steps.join(', ') || 'none'}`);
}

function fillTable(table, plain, rows) {
  const pct = (x) => `${(100 * x).toFixed(0)}%`;
  const lines = [['Plain', '1.00', '–', '–', fmtMs(plain.totalMs / plain.outputTokens), '1.00×', 'yes'],
    ...rows.map((r) => (r.why ? [r.label, '–', '–', '–', '–', '–', r.why]
      : [r.label, r.tokensPerStep.toFixed(2), `${r.kept} of ${r.drafted}`, r.byPosition.map(pct).join(' · '),
        fmtMs(r.msPerToken), `${r.speedup.toFixed(2)}×`, r.identical ? 'yes' : 'NO']))];
  const head = ['Drafts from', 'Tokens per step', 'Kept', 'Steps keeping 1st · 2nd · 3rd', 'Per token', 'Speed', 'Same text'];
  table.tBodies[0].replaceChildren(...lines.map((cells) => {
    const tr = document.createElement('tr');
    cells.forEach((c, i) => {
      const cell = document.createElement(i === 0 ? 'th' : 'td');
      if (i === 0) cell.scope = 'row';
      else cell.dataset.label = head[i];
      cell.textContent = c;
      tr.append(cell);
    });
    return tr;
  }));
}
