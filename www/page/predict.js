// "Predict, then measure": the lesson's formula total ≈ TTFT + TPOT × (n − 1), fed with the last
// generation's measured TTFT and TPOT, against a run of exactly n tokens.

import { fmtMs } from '../widget/text.js';

/** The predicted total of `n` tokens from a generation's metrics. */
export function predictTotal(metrics, n) {
  return metrics.ttftMs + metrics.tpotMs * Math.max(0, n - 1);
}

/** The prediction as a sentence, or why there is none. */
export function predictionText(metrics, n) {
  if (!metrics || metrics.outputTokens < 2) return 'Generate at least two tokens first: the prediction needs a measured TTFT and TPOT.';
  return `${fmtMs(metrics.ttftMs)} + ${fmtMs(metrics.tpotMs)} × (${n} − 1) = ${fmtMs(predictTotal(metrics, n))} predicted.`;
}

/** Runs `n` tokens with `options` and says how close the prediction came; resolves with the numbers or null. */
export async function measurePrediction(model, metrics, { prompt, options, n, signal }) {
  const predictedMs = predictTotal(metrics, n);
  const r = await model.generate(prompt, { ...options, maxTokens: n, ignoreEos: true, signal });
  if (r.stopReason === 'abort') return null;
  const measuredMs = r.metrics.totalMs;
  const off = (measuredMs - predictedMs) / measuredMs;
  return {
    n: r.metrics.outputTokens, predictedMs, measuredMs, off,
    text: `Predicted ${fmtMs(predictedMs)}, measured ${fmtMs(measuredMs)} for ${r.metrics.outputTokens} tokens: ` +
      `the prediction was ${Math.abs(100 * off).toFixed(0)}% ${off >= 0 ? 'under' : 'over'}. ` +
      'The formula holds because every token costs about one TPOT, however the text streams.',
  };
}
