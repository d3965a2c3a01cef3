// "What it costs": a hosted model bills input (prompt) and output tokens per million, output
// usually dearer, and output tokens are also what takes the time (one TPOT each). The panel puts
// every generation's tokens beside its latency and, at the prices the student types (no vendor's
// price is built in; kept on this device only when asked), its cost, the most a max_tokens cap
// allows, and a measured comparison of two ways to generate fewer tokens: a lower cap and a stop
// sequence (the end of the first line: a one-line answer), on the same prompt and seed.

import { fmtMs } from '../widget/text.js';

const STORE = 'gpt2-web:prices';

/** Dollars for a reader: $0.0123, $1.23, $0 without prices. */
export function fmtUsd(usd) {
  if (!Number.isFinite(usd)) return '–';
  if (usd === 0) return '$0';
  return usd >= 1 ? `$${usd.toFixed(2)}` : `$${usd.toPrecision(3)}`;
}

/** Prices per million tokens from the fields: { input, output } (null where empty); a wrong one throws a sentence. */
export function prices($) {
  const one = (id, name) => {
    const raw = $(id).value.trim();
    if (raw === '') return null;
    const v = Number(raw);
    if (!(v >= 0 && Number.isFinite(v))) throw new Error(`${name}: a price in dollars per million tokens, ≥ 0`);
    return v;
  };
  return { input: one('price-in', 'input price'), output: one('price-out', 'output price') };
}

/** The cost of `inTokens` + `outTokens` at `p` (null: no price typed). */
export function costOf(p, inTokens, outTokens) {
  if (p.input === null && p.output === null) return null;
  return ((p.input ?? 0) * inTokens + (p.output ?? 0) * outTokens) / 1e6;
}

/** Fills the panel from a finished generation's metrics and the max_tokens it ran with. */
export function showCost($, metrics, maxTokens) {
  let p;
  try {
    p = prices($);
  } catch (e) {
    $('cost-line').textContent = `${e.message}.`;
    return;
  }
  const m = metrics;
  $('cost-in-tokens').textContent = String(m.promptTokens);
  $('cost-out-tokens').textContent = String(m.outputTokens);
  $('cost-time').textContent = fmtMs(m.totalMs);
  const now = costOf(p, m.promptTokens, m.outputTokens);
  const worst = costOf(p, m.promptTokens, maxTokens);
  $('cost-now').textContent = now === null ? 'type a price' : fmtUsd(now);
  $('cost-worst').textContent = worst === null ? 'type a price' : fmtUsd(worst);
  $('cost-thousand').textContent = now === null ? '–' : fmtUsd(1000 * now);
  const worstMs = m.ttftMs + m.tpotMs * Math.max(0, maxTokens - 1);
  $('cost-line').textContent = `${m.promptTokens} input and ${m.outputTokens} output tokens in ${fmtMs(m.totalMs)}. ` +
    `The cap of ${maxTokens} tokens bounds the worst case: ${maxTokens} output tokens, about ${fmtMs(worstMs)}` +
    `${worst === null ? '' : ` and ${fmtUsd(worst)}`} per answer. ` +
    (m.outputTokens > 1 ? `Each output token costs about ${fmtMs(m.tpotMs)}${p.output === null ? '' : ` and ${fmtUsd(p.output / 1e6)}`}: ` +
      'the answer\'s length is the lever on both.' : '');
}

/** A sentence for the length lab: its fitted line as time and cost per answer of `n` output tokens. */
export function costPerAnswer($, fit, promptTokens, n) {
  let p;
  try {
    p = prices($);
  } catch {
    return '';
  }
  const cost = costOf(p, promptTokens, n);
  return ` An answer of ${n} tokens: about ${fmtMs(fit.a + fit.b * n)}` +
    (cost === null ? ' (type prices under "What it costs" for its cost).' : ` and ${fmtUsd(cost)}; each token more adds ${fmtMs(fit.b)} and ${fmtUsd((p.output ?? 0) / 1e6)}.`);
}

/** Wires the price fields: kept in localStorage only while "remember" is ticked. */
export function wirePrices($, onChange) {
  const kept = (() => {
    try {
      return JSON.parse(localStorage.getItem(STORE) ?? 'null');
    } catch {
      return null; // storage refused (private mode) or not JSON: nothing kept
    }
  })();
  if (kept) {
    $('price-in').value = kept.input ?? '';
    $('price-out').value = kept.output ?? '';
    $('price-remember').checked = true;
  }
  const save = () => {
    try {
      if ($('price-remember').checked) localStorage.setItem(STORE, JSON.stringify({ input: $('price-in').value, output: $('price-out').value }));
      else localStorage.removeItem(STORE);
    } catch {
      $('cost-line').textContent = 'This browser refused to store the prices: they last until the page closes.';
    }
  };
  for (const id of ['price-in', 'price-out']) {
    $(id).addEventListener('input', () => {
      save();
      onChange();
    });
  }
  $('price-remember').addEventListener('change', save);
}

/**
 * "Fewer tokens, measured": the prompt as set, with a quarter of its max tokens, and stopping at
 * the end of the first line — same settings and seed, so the shorter answers are the start of the
 * longer one. Resolves with the rows, or null when stopped.
 */
export async function compareLengths(model, { prompt, options, signal }, $) {
  const p = prices($);
  const cap = Math.max(1, Math.round(options.maxTokens / 4));
  const ways = [
    ['As set', `max tokens ${options.maxTokens}`, {}],
    ['A lower cap', `max tokens ${cap}`, { maxTokens: cap }],
    ['A stop sequence', 'stop at the end of the first line', { stop: [...(options.stop ?? []), '\n'] }],
  ];
  const rows = [];
  await model.generate(prompt, { ...options, maxTokens: 2, signal }); // warm-up: no first-use cost in the first row
  for (const [way, setting, change] of ways) {
    const r = await model.generate(prompt, { ...options, ...change, signal });
    if (r.stopReason === 'abort') return null;
    const m = r.metrics;
    rows.push({ way, setting, outputTokens: m.outputTokens, totalMs: m.totalMs, cost: costOf(p, m.promptTokens, m.outputTokens), text: r.text });
  }
  const tbody = $('cost-table').tBodies[0];
  tbody.replaceChildren(...rows.map((r) => {
    const tr = document.createElement('tr');
    const cells = [r.way, r.setting, r.outputTokens, fmtMs(r.totalMs), r.cost === null ? '–' : fmtUsd(r.cost), r.text];
    const head = ['Way', 'Setting', 'Output tokens', 'Total', 'Cost', 'Text'];
    cells.forEach((c, i) => {
      const cell = document.createElement(i === 0 ? 'th' : 'td');
      if (i === 0) cell.scope = 'row';
      else cell.dataset.label = head[i];
      if (i >= 2 && i <= 4) cell.className = 'num';
      if (i === 5) cell.className = 'answer'; // its spaces and line breaks kept
      cell.textContent = String(c);
      tr.append(cell);
    });
    return tr;
  }));
  const [base, ...fewer] = rows;
  $('cost-summary').textContent = fewer.map((r) => `${r.way} (${r.setting}): ${r.outputTokens} tokens instead of ${base.outputTokens}, ` +
    `${fmtMs(r.totalMs)} instead of ${fmtMs(base.totalMs)}${r.totalMs > 0 ? ` (${(base.totalMs / r.totalMs).toFixed(1)}× faster)` : ''}` +
    `${r.cost === null ? '' : `, ${fmtUsd(r.cost)} instead of ${fmtUsd(base.cost)}`}.`).join(' ') +
    ' Fewer output tokens is the one change that cuts time and cost together; the prompt\'s tokens cost little time (one prefill).';
  return rows;
}
