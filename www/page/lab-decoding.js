// Lab: "Greedy, sampling, beam". The same prompt through the three decoding strategies: greedy
// (the same text whatever the seed), sampling (a different text per seed) and beam search (the
// most likely whole sequences: a row per beam per step, the beams sharing one pass on the CPU).
// The greedy runs, then the samples, run at once: one batch each.
// Each row gets two repetition measures and its cost, so the lesson's claims can be checked: beam
// search is the most repetitive and the most expensive, which is why open-ended text rarely uses it.

import { fmtMs } from '../widget/text.js';

/** The n-grams of `ids` (as strings). */
function ngrams(ids, n) {
  const out = [];
  for (let i = 0; i + n <= ids.length; i++) out.push(ids.slice(i, i + n).join(','));
  return out;
}

/** The share of `ids`' n-grams that already occurred earlier in it (0: no repeats; 1 - distinct). */
export function repeatedShare(ids, n = 3) {
  const grams = ngrams(ids, n);
  if (grams.length === 0) return 0;
  return 1 - new Set(grams).size / grams.length;
}

/** distinct-n: different n-grams over all n-grams (1: nothing repeats). */
export function distinctN(ids, n = 2) {
  const grams = ngrams(ids, n);
  return grams.length === 0 ? 1 : new Set(grams).size / grams.length;
}

const pct = (x) => `${Math.round(100 * x)}%`;

/** The runs (or rows) of one mode. */
const of = (list, mode) => list.filter((r) => r.mode === mode);

/**
 * Runs the lab on `model`: greedy and sampling for each seed, beam search for each beam count.
 * `el(id)` finds the lab's elements. Resolves with { rows, greedyIdentical, sampledDistinct }, or
 * null when aborted.
 */
export async function runDecodingLab(model, { prompt, seeds, temperature, beams, maxTokens, signal }, el) {
  const runs = [
    ...seeds.map((seed) => ({ mode: 'greedy', label: 'greedy (t = 0)', setting: `seed ${seed}`, options: { seed, temperature: 0 } })),
    ...seeds.map((seed) => ({ mode: 'sampled', label: `sampled (t = ${temperature})`, setting: `seed ${seed}`, options: { seed, temperature } })),
    ...beams.map((n) => ({ mode: 'beam', label: 'beam search', setting: `${n} beams`, options: { numBeams: n, temperature: 0 } })),
  ];
  const body = el('cmp-table').tBodies[0];
  body.replaceChildren();
  el('cmp-summary').textContent = '';
  const rows = [];
  // The greedy runs at once, then the samples at once (concurrent generates on one model run as
  // one batch: one forward pass per step for all of them), then each beam count alone.
  const groups = [of(runs, 'greedy'), of(runs, 'sampled'), ...of(runs, 'beam').map((run) => [run])];
  for (const group of groups.filter((g) => g.length)) {
    if (signal.aborted) return null;
    const results = await Promise.all(group.map((run) => model.generate(prompt, { maxTokens, ...run.options, signal })));
    if (results.some((r) => r.stopReason === 'abort')) return null;
    results.forEach((r, i) => addRow(group[i], r));
  }
  function addRow(run, r) {
    const m = r.metrics;
    const row = {
      mode: run.mode, setting: run.setting, text: r.text, tokens: m.outputTokens, forwards: m.targetForwards,
      repeated3: repeatedShare(r.tokens, 3), distinct2: distinctN(r.tokens, 2), totalMs: m.totalMs,
      msPerToken: m.totalMs / Math.max(1, m.outputTokens), seed: run.options.seed, beams: run.options.numBeams,
      batch: m.batchSize,
    };
    rows.push(row);
    const tr = body.insertRow();
    const heads = [...el('cmp-table').tHead.rows[0].cells].map((th) => th.textContent);
    const cell = (text, cls) => {
      const td = Object.assign(tr.insertCell(), { textContent: text, className: cls ?? '' });
      td.dataset.label = heads[td.cellIndex]; // named in the narrow layout, where the header row is hidden
      return td;
    };
    cell(run.label, 'mode');
    cell(run.setting, 'num');
    // ↵ keeps newline-heavy samples one row high; a text of only spaces (beams like them) shows them.
    const shown = r.text.replace(/\r?\n/g, '↵');
    cell(shown.trim() ? shown : shown.replace(/ /g, '·') || '(nothing)', 'text');
    cell(String(row.tokens), 'num');
    cell(pct(row.repeated3), 'num');
    cell(row.distinct2.toFixed(2), 'num');
    cell(String(row.forwards), 'num');
    cell(fmtMs(row.totalMs), 'num');
    cell(fmtMs(row.msPerToken), 'num');
  }
  const mean = (rs, k) => rs.reduce((s, r) => s + r[k], 0) / Math.max(1, rs.length);
  const greedyIdentical = new Set(of(rows, 'greedy').map((r) => r.text)).size === 1;
  const sampledDistinct = new Set(of(rows, 'sampled').map((r) => r.text)).size;
  const describe = (mode, name) => {
    const rs = of(rows, mode);
    if (rs.length === 0) return '';
    return `${name}: ${pct(mean(rs, 'repeated3'))} of 3-grams repeated, distinct-2 ${mean(rs, 'distinct2').toFixed(2)}, ` +
      `${(mean(rs, 'forwards') / Math.max(1, mean(rs, 'tokens'))).toFixed(1)} forward passes and ` +
      `${fmtMs(mean(rs, 'msPerToken'))} per token. `;
  };
  el('cmp-summary').textContent =
    `Greedy: ${greedyIdentical ? 'the same text for every seed' : 'texts differ (unexpected)'}. ` +
    `Sampled: ${sampledDistinct} different texts from ${seeds.length} seeds, drawn at once (up to ` +
    `${Math.max(0, ...of(rows, 'sampled').map((r) => r.batch))} sequences per forward pass). ` +
    describe('greedy', 'Greedy') + describe('sampled', 'Sampling') + describe('beam', 'Beam search') +
    (beams.length ? 'Beam search keeps the most likely whole sequences: safe, often bland and repetitive, and ' +
      'it computes a row per beam for every token (on the CPU the beams share one forward pass, as a batch).' : '');
  return { rows, greedyIdentical, sampledDistinct };
}
