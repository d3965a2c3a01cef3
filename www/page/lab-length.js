// Lab: "Latency vs output length". Greedy generations forced to several lengths (end-of-text
// ignored), total = a + b·n fitted by least squares: the intercept is about the TTFT, the slope
// about the TPOT. The repeated prompt comes from the prefix cache after the warm-up run.

import { drawLab, fitLine } from './charts.js';
import { fmtMs } from '../widget/text.js';

/** Runs the lab on `model`; `$` finds its elements. Resolves with `{ points, fit }`, or null when stopped early. */
export async function runLengthRuns(model, { prompt, lengths, repeats, signal }, $) {
  const draw = (points, fit) => drawLab($('lab-chart'), points, fit);
  const points = [];
  draw(points);
  // A first short run warms up the engine (allocations, JIT) so it does not skew the first point.
  await model.generate(prompt, { maxTokens: 2, temperature: 0, signal });
  const runs = lengths.flatMap((n) => Array(repeats).fill(n));
  for (const [i, n] of runs.entries()) {
    if (signal.aborted) break;
    $('lab-fit').textContent = `Run ${i + 1} of ${runs.length}: ${n} tokens…`;
    const r = await model.generate(prompt, { maxTokens: n, temperature: 0, ignoreEos: true, signal });
    if (r.stopReason === 'abort') break;
    const m = r.metrics;
    points.push({ n: m.outputTokens, totalMs: m.totalMs, ttftMs: m.ttftMs, tpotMs: m.tpotMs, cached: m.cachedPromptTokens, prompt: m.promptTokens });
    draw(points);
  }
  if (new Set(points.map((p) => p.n)).size < 2) {
    $('lab-fit').textContent = 'Stopped before two lengths were measured; nothing to fit.';
    return null;
  }
  const line = fitLine(points.map((p) => p.n), points.map((p) => p.totalMs));
  draw(points, line);
  const mean = (k) => points.reduce((s, p) => s + p[k], 0) / points.length;
  $('lab-fit').textContent = `Fit: total ≈ ${fmtMs(line.a)} + ${fmtMs(line.b)} × n, R² = ${line.r2.toFixed(4)} ` +
    `(${points.length} runs). Measured means: time to first token ${fmtMs(mean('ttftMs'))}, time per output token ` +
    `${fmtMs(mean('tpotMs'))}. The intercept is near the TTFT and the slope near the TPOT: waiting longer for ` +
    'a longer answer is the slope, whatever streaming shows.' +
    (points[0].cached > 0
      ? ` Every run repeats the prompt: ${points[0].cached} of its ${points[0].prompt} tokens came from the prefix ` +
        'cache (their keys and values kept from the run before), so the intercept is about one step, not the prompt.'
      : '');
  return { points, fit: line };
}
