// Lab: "Without a KV cache". The same greedy generation with the cache and without it (every step
// runs the whole sequence again, the lesson's naive loop): the time of each step against the
// position it predicts, the line a + b·position fitted through each, and the total without the
// cache as the sum of that line: quadratic in the length.

import { fmtMs } from '../widget/text.js';
import { drawSeries, fitLine } from './charts.js';

/** [position, ms] for each token after the first: the time of the step that made it. */
function stepTimes(events, promptTokens) {
  return events.slice(1).map((e, i) => [promptTokens + i + 1, e.elapsedMs - events[i].elapsedMs]);
}

/** The predicted total of n tokens from the first token's time and the fitted step time a + b·pos. */
export function quadraticTotal(ttftMs, fit, promptTokens, n) {
  let total = ttftMs;
  for (let i = 1; i < n; i++) total += fit.a + fit.b * (promptTokens + i);
  return total;
}

/** Runs the lab on `model`; `el(id)` finds its elements. Resolves with what it showed, or null. */
export async function runNaiveLab(model, { prompt, maxTokens, signal }, el) {
  const options = { maxTokens, temperature: 0, ignoreEos: true, signal };
  await model.generate(prompt, { ...options, maxTokens: 4, kvCache: false }); // warm-up
  const runs = {};
  for (const [name, kvCache] of [['cached', true], ['naive', false]]) {
    el('naive-fit').textContent = `Generating ${maxTokens} tokens ${kvCache ? 'with' : 'without'} the KV cache…`;
    const events = [];
    const r = await model.generate(prompt, { ...options, kvCache, onToken: (e) => events.push(e) });
    if (r.stopReason === 'abort') return null;
    const points = stepTimes(events, r.metrics.promptTokens);
    const fit = points.length >= 2 ? fitLine(points.map((p) => p[0]), points.map((p) => p[1])) : null;
    runs[name] = { points, fit, result: r };
  }
  const { cached, naive } = runs;
  const series = [
    { label: 'with the KV cache', points: cached.points, fit: cached.fit, colour: 'perceived' },
    { label: 'without: the whole sequence every step', points: naive.points, fit: naive.fit, colour: 'total' },
  ];
  drawSeries(el('naive-chart'), series, 'position of the token', 'ms for its step', '');
  const identical = cached.result.tokens.join() === naive.result.tokens.join();
  const m = naive.result.metrics;
  const slope = (b) => (Math.abs(b) >= 0.01 ? `${Math.abs(b).toFixed(3)} ms` : `${Math.abs(1000 * b).toFixed(1)} µs`);
  const fmtFit = (f) => `${fmtMs(f.a)} ${f.b < 0 ? '−' : '+'} ${slope(f.b)} × position`;
  let text = `${identical ? 'The same text' : 'The texts differ (unexpected)'}. `;
  if (naive.fit && cached.fit) {
    const predicted = quadraticTotal(m.ttftMs, naive.fit, m.promptTokens, m.outputTokens);
    text += `Without the cache a step takes ≈ ${fmtFit(naive.fit)} (R² ${naive.fit.r2.toFixed(3)}), ` +
      `so n tokens take ≈ n·a + b·n²/2: the sum of that line predicts ${fmtMs(predicted)}, measured ` +
      `${fmtMs(m.totalMs)}. With the cache a step takes ≈ ${fmtFit(cached.fit)}: ` +
      `${fmtMs(cached.result.metrics.totalMs)} in all, ${(m.totalMs / cached.result.metrics.totalMs).toFixed(1)}× ` +
      'faster, and the gap grows with the length.';
  }
  el('naive-fit').textContent = text;
  el('naive-chart').setAttribute('aria-label', `Time per token against position: ${text}`);
  return {
    identical,
    cached: { fit: cached.fit, totalMs: cached.result.metrics.totalMs, points: cached.points },
    naive: { fit: naive.fit, totalMs: m.totalMs, points: naive.points },
  };
}
