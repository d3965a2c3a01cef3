// Lab: "Many at once: batching". For each batch size B, B generations of the prompt start at once
// (as B users' requests would: concurrent generates on one model run as one batch, one forward
// pass per step for all of them), each sampling with its own seed. Measured: every sequence's
// time per token (the step of the batch), and the tokens per second of all of them together. The
// step of one sequence is bound by reading the weights; B rows reuse each read, so the step
// grows slowly until the arithmetic of B rows costs more than the read: the knee, marked from the
// measurements.

import { fmtMs } from '../widget/text.js';
import { drawBatch } from './charts.js';

/**
 * The batch size from which the step is bound by arithmetic, from `runs` (ascending batch): the
 * first B whose tokens per second rose less than a quarter of the way to proportional from the
 * run before (twice the sequences for about twice the step); null when throughput kept rising.
 */
export function kneeOf(runs) {
  for (let i = 1; i < runs.length; i++) {
    const [a, b] = [runs[i - 1], runs[i]];
    const ideal = b.batch / a.batch;
    const got = b.tokensPerSec / a.tokensPerSec;
    if (got - 1 < 0.25 * (ideal - 1)) return a.batch;
  }
  return null;
}

/** Runs the lab on `model`; `el(id)` finds its elements. Resolves with `{ runs, knee }`, or null when stopped. */
export async function runBatchLab(model, { prompt, sizes, maxTokens, signal }, el) {
  const options = { maxTokens, temperature: 0.8, topK: 40, ignoreEos: true, signal };
  const runs = [];
  drawBatch(el('batch-chart'), runs, null);
  // A short warm-up, so that the first size does not pay for first use.
  await model.generate(prompt, { ...options, maxTokens: 2 });
  for (const batch of sizes) {
    if (signal.aborted) return null;
    el('batch-summary').textContent = `${batch} sequence${batch > 1 ? 's' : ''} at once…`;
    const results = await Promise.all(Array.from({ length: batch },
      (_, seed) => model.generate(prompt, { ...options, seed })));
    if (results.some((r) => r.stopReason === 'abort')) return null;
    const tpot = results.map((r) => r.metrics.tpotMs);
    runs.push({
      batch,
      shared: Math.max(...results.map((r) => r.metrics.batchSize)),
      stepMs: tpot.reduce((s, t) => s + t, 0) / batch,
      perSequence: tpot.map((t) => 1000 / t),
      tokensPerSec: tpot.reduce((s, t) => s + 1000 / t, 0),
    });
    drawBatch(el('batch-chart'), runs, null);
  }
  const knee = kneeOf(runs);
  drawBatch(el('batch-chart'), runs, knee);
  const [one, last] = [runs[0], runs.at(-1)];
  const best = runs.reduce((a, r) => (r.tokensPerSec > a.tokensPerSec ? r : a));
  el('batch-summary').textContent =
    `One sequence: ${one.tokensPerSec.toFixed(1)} tokens/s (${fmtMs(one.stepMs)} per token). ` +
    `${best.batch} at once: ${best.tokensPerSec.toFixed(1)} tokens/s together, ` +
    `${(best.tokensPerSec / one.tokensPerSec).toFixed(2)}× — while each sequence's token came every ` +
    `${fmtMs(best.stepMs)}, ${(best.stepMs / one.stepMs).toFixed(2)}× later. ` +
    (knee
      ? `Up to ${knee} sequences one step reads the weights once for all of them and costs little more; from ` +
        `there each extra sequence adds its own arithmetic, so throughput stops rising (${last.batch} at once: ` +
        `${last.tokensPerSec.toFixed(1)} tokens/s). `
      : 'Throughput rose at every size measured: the step was still bound by reading the weights. ') +
    'Throughput rises; each user\'s token comes a little later. This is why servers batch requests, ' +
    'and why a page with several widgets runs them together.' +
    (runs.some((r) => r.shared < r.batch) ? ` (At most ${Math.max(...runs.map((r) => r.shared))} shared a step: the others waited for a place.)` : '');
  el('batch-chart').setAttribute('aria-label', `Tokens per second against sequences at once: ${runs.map((r) =>
    `${r.batch}: ${r.tokensPerSec.toFixed(1)} together, ${(r.tokensPerSec / r.batch).toFixed(1)} each`).join('; ')}`);
  return { runs, knee };
}
