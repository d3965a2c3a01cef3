// "Check yourself": the lesson's questions, answered with this machine's own numbers and checked by
// a measurement rather than against a written answer. 1: given the TTFT and TPOT just measured, how
// long does an answer of n tokens take — the student's number against a run of exactly n tokens.
// 2: which changes make that answer finish sooner — each one the student picks (and each one left
// out) run beside the same answer without it, the verdict taken from the clock.

import { fmtMs } from '../widget/text.js';

/** A change counts as a cut when the answer finished at least this much sooner. */
const CUT = 1.15;

/**
 * The changes of question 2: what each runs (options to merge, or a run of its own), and why the
 * clock says what it says.
 */
export const LEVERS = {
  stream: { label: 'Stream the tokens as they come', why: 'every token still costs one step: streaming changes when text is seen, not when the answer ends' },
  cap: { label: 'Cap the answer at half the tokens', why: 'half the output tokens, about half the steps' },
  speculative: { label: 'Speculative decoding (prompt lookup)', why: 'where the text repeats, one step checks several drafted tokens; elsewhere it costs a little' },
  prompt: { label: 'A shorter prompt', why: 'the prompt is read once, in one pass (the prefill): a few tokens less barely move the total' },
  batch: { label: 'Run it beside three other requests (one batch)', why: 'the machine serves four answers at once, more tokens per second in all, but each step now carries the others\' work: this answer ends later' },
};

/** Question 1: the student's guess in seconds against a run of `n` tokens. */
export async function checkTime(model, { prompt, options, n, guessS, metrics, signal }) {
  if (!(guessS > 0)) throw new Error('type your answer in seconds first (a number above 0)');
  const r = await model.generate(prompt, { ...options, maxTokens: n, ignoreEos: true, signal });
  if (r.stopReason === 'abort') return null;
  const measuredMs = r.metrics.totalMs;
  const formulaMs = metrics ? metrics.ttftMs + metrics.tpotMs * (n - 1) : null;
  const off = (1000 * guessS - measuredMs) / measuredMs;
  const right = Math.abs(off) <= 0.2;
  return {
    n, guessMs: 1000 * guessS, measuredMs, formulaMs, right,
    text: `You said ${fmtMs(1000 * guessS)}; ${n} tokens took ${fmtMs(measuredMs)} (${fmtMs(r.metrics.ttftMs)} to the first token, ` +
      `then ${fmtMs(r.metrics.tpotMs)} each). ${right ? 'Right' : 'Not quite'}: ${Math.abs(100 * off).toFixed(0)}% ${off >= 0 ? 'over' : 'under'}` +
      (formulaMs === null ? '.' : `; TTFT + TPOT × (n − 1) with the last generation's numbers gives ${fmtMs(formulaMs)}.`),
  };
}

/**
 * Question 2: each change run against the same answer without it; `chosen` are the student's
 * picks. Fills the page's table and sentence (`el(id)`); resolves with the numbers, or null when stopped.
 */
export async function checkLevers(model, { prompt, options, n, chosen, signal }, el) {
  const base = { ...options, temperature: 0, maxTokens: n, ignoreEos: true, signal }; // greedy: the same answer each run
  const run = async (change = {}) => {
    const r = await model.generate(change.prompt ?? prompt, { ...base, ...change.options });
    return r.stopReason === 'abort' ? null : r.metrics.totalMs;
  };
  await run({ options: { maxTokens: 2 } }); // warm-up
  const baseMs = await run();
  if (baseMs === null) return null;
  const lastLine = prompt.trimEnd().split('\n').at(-1) || prompt;
  const runs = {
    stream: () => run({ options: { onToken: () => {} } }),
    cap: () => run({ options: { maxTokens: Math.max(1, Math.round(n / 2)) } }),
    speculative: () => run({ options: { draft: 'prompt-lookup' } }),
    prompt: () => run({ prompt: `${lastLine}\n` }),
    batch: async () => {
      const others = [1, 2, 3].map((seed) => model.generate(prompt, { ...base, temperature: 0.8, seed }));
      const mine = await run();
      await Promise.all(others);
      return mine;
    },
  };
  const rows = [];
  for (const [key, lever] of Object.entries(LEVERS)) {
    const ms = await runs[key]();
    if (ms === null) return null;
    const speedup = baseMs / ms;
    const cuts = speedup >= CUT;
    rows.push({ key, label: lever.label, ms, speedup, cuts, picked: chosen.includes(key), why: lever.why });
  }
  const wrong = rows.filter((r) => r.picked !== r.cuts);
  const cutting = rows.filter((r) => r.cuts).map((r) => r.label.toLowerCase());
  const text = `Without a change, ${n} tokens took ${fmtMs(baseMs)}. Measured, ${cutting.length ? cutting.join(' and ') : 'none of them'} ` +
    `cut it by ${Math.round(100 * (CUT - 1))}% or more. ` +
    (wrong.length === 0 ? 'Your picks match the clock.' : `The clock disagrees with your pick on: ${wrong.map((r) => r.label.toLowerCase()).join('; ')}.`);
  const head = ['Change', 'Total', 'Speed-up', 'Cuts it?', 'You said', 'Why'];
  el('check-table').tBodies[0].replaceChildren(...rows.map((r) => {
    const tr = document.createElement('tr');
    [r.label, fmtMs(r.ms), `${r.speedup.toFixed(2)}×`, r.cuts ? 'yes' : 'no', r.picked ? 'cuts it' : 'does not', r.why].forEach((c, i) => {
      const cell = document.createElement(i === 0 ? 'th' : 'td');
      if (i === 0) cell.scope = 'row';
      else cell.dataset.label = head[i];
      if (i === 1 || i === 2) cell.className = 'num';
      cell.textContent = c;
      tr.append(cell);
    });
    return tr;
  }));
  el('check-levers-out').textContent = text;
  return { baseMs, rows, text, right: wrong.length === 0 };
}
