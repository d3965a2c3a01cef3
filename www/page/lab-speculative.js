// Lab: "More than one token per step". The prompt greedily, plain and with speculative decoding
// (prompt lookup: guesses of the next tokens from the text so far, checked by one forward pass),
// side by side: the same text, the kept draft tokens highlighted, model steps against tokens,
// tokens per step over time, and the wall-clock ratio.

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

/** Runs the lab on `model`; `el(id)` finds the lab's elements. Resolves with what it showed. */
export async function runSpeculativeLab(model, { prompt, maxTokens, signal }, el) {
  const options = { maxTokens, temperature: 0, ignoreEos: true, signal };
  // A short warm-up of both paths first, so that neither timing pays for first use.
  await model.generate(prompt, { ...options, maxTokens: 4, draft: 'prompt-lookup' });
  const plain = await model.generate(prompt, options);
  if (plain.stopReason === 'abort') return null;
  const events = [];
  const spec = await model.generate(prompt, { ...options, draft: 'prompt-lookup', onToken: (t) => events.push(t) });
  if (spec.stopReason === 'abort') return null;

  el('spec-plain').textContent = plain.text;
  const out = el('spec-output');
  out.replaceChildren(...events.map((e) => {
    const span = document.createElement('span');
    span.textContent = e.text;
    if (e.drafted) {
      span.className = 'drafted';
      span.title = 'a draft token the model kept: it came in the same step as the token before it';
    }
    return span;
  }));
  const steps = tokensPerStep(events);
  drawBars(el('spec-chart'), steps, 'model step', 'tokens from the step', 'Tokens per model step appear here.');
  const m = spec.metrics;
  const identical = plain.text === spec.text && plain.tokens.join() === spec.tokens.join();
  const ratio = plain.metrics.totalMs / m.totalMs;
  el('spec-summary').textContent = `${identical ? 'The same text' : 'The texts differ (unexpected for greedy)'}. ` +
    `Plain: ${plain.metrics.outputTokens} tokens in ${plain.metrics.targetForwards} model steps, ${fmtMs(plain.metrics.totalMs)}. ` +
    `Speculative: ${m.outputTokens} tokens in ${m.targetForwards} steps ` +
    `(${(m.outputTokens / Math.max(1, m.targetForwards)).toFixed(2)} per step; ${m.acceptedDraftTokens} of ` +
    `${m.draftedTokens} drafted tokens kept), ${fmtMs(m.totalMs)}: ${ratio.toFixed(2)}× the speed.`;
  el('spec-chart').setAttribute('aria-label', `Tokens per model step: ${steps.join(', ')}`);
  return { identical, ratio, steps, plain: plain.metrics, speculative: m };
}
