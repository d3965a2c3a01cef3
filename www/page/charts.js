// The page's charts on canvas (CSS pixels, crisp on high-DPI screens), in the page's colours: per-token
// latency, and total time against output length with its fitted line TTFT + TPOT·n. Each chart's
// numbers also go into the table its canvas names by aria-details (a text alternative that a
// screen reader can walk, and anyone can read).

import { fmtMs } from '../widget/text.js';


function colors() {
  const s = getComputedStyle(document.documentElement);
  const v = (name) => s.getPropertyValue(name).trim();
  return { fg: v('--fg'), muted: v('--muted'), line: v('--line'), accent: v('--accent'), perceived: v('--perceived'), total: v('--total') };
}

/** Resizes the canvas backing store to its displayed size; returns a context in CSS pixels. */
function canvas2d(canvas) {
  canvas.dataset.aspect ??= String(canvas.height / canvas.width);
  const w = canvas.clientWidth || canvas.width;
  const h = Math.round(w * Number(canvas.dataset.aspect));
  const dpr = window.devicePixelRatio || 1;
  if (canvas.width !== Math.round(w * dpr)) {
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
  }
  const ctx = canvas.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, w, h);
  ctx.font = '12px system-ui, sans-serif';
  return { ctx, w, h };
}

/**
 * Fills the table that `canvas` names by aria-details with `head` (column names) and `rows` (cell
 * texts); no rows empties it.
 */
function numbers(canvas, head, rows) {
  const id = canvas.getAttribute('aria-details');
  const table = id ? canvas.getRootNode().getElementById?.(id) : null;
  if (!table) return;
  const tr = (cells, tag) => {
    const row = document.createElement('tr');
    for (const [i, text] of cells.entries()) {
      const cell = document.createElement(i === 0 && tag === 'td' ? 'th' : tag);
      if (cell.tagName === 'TH') cell.scope = tag === 'th' ? 'col' : 'row';
      if (i > 0) cell.className = 'num';
      if (tag === 'td') cell.dataset.label = head[i];
      cell.textContent = String(text);
      row.append(cell);
    }
    return row;
  };
  table.tHead ?? table.createTHead();
  table.tHead.replaceChildren(tr(head, 'th'));
  if (!table.tBodies[0]) table.createTBody();
  table.tBodies[0].replaceChildren(...rows.map((r) => tr(r, 'td')));
}

/** A round tick step giving about `count` ticks up to `max`. */
function tickStep(max, count = 5) {
  const raw = max / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((k) => k * mag).find((s) => s >= raw) ?? raw;
}

/** Axes with y ticks; returns the plot area and the scale functions. */
function axes(ctx, w, h, xMax, yMax, xLabel, yLabel, c) {
  const area = { left: 52, right: w - 12, top: 12, bottom: h - 34 };
  const x = (v) => area.left + (v / xMax) * (area.right - area.left);
  const y = (v) => area.bottom - (v / yMax) * (area.bottom - area.top);
  ctx.strokeStyle = c.line;
  ctx.fillStyle = c.muted;
  ctx.lineWidth = 1;
  ctx.textAlign = 'right';
  ctx.textBaseline = 'middle';
  const ys = tickStep(yMax);
  for (let t = 0; t <= yMax + 1e-9; t += ys) {
    ctx.beginPath();
    ctx.moveTo(area.left, Math.round(y(t)) + 0.5);
    ctx.lineTo(area.right, Math.round(y(t)) + 0.5);
    ctx.stroke();
    ctx.fillText(String(+t.toPrecision(3)), area.left - 6, y(t));
  }
  ctx.textAlign = 'center';
  ctx.textBaseline = 'top';
  const xs = tickStep(xMax, 8);
  for (let t = 0; t <= xMax + 1e-9; t += xs) ctx.fillText(String(+t.toPrecision(3)), x(t), area.bottom + 4);
  ctx.fillText(xLabel, (area.left + area.right) / 2, h - 15);
  ctx.save();
  ctx.translate(12, (area.top + area.bottom) / 2);
  ctx.rotate(-Math.PI / 2);
  ctx.textBaseline = 'middle';
  ctx.fillText(yLabel, 0, 0);
  ctx.restore();
  return { area, x, y };
}

/**
 * Per-token latency bars on `canvas`: `latency` holds each token's elapsedMs; the first bar (TTFT) in
 * the perceived colour, the mean of the rest as the TPOT line.
 */
export function drawLatency(canvas, latency) {
  const { ctx, w, h } = canvas2d(canvas);
  const c = colors();
  const gaps = latency.map((t, i) => (i === 0 ? t : t - latency[i - 1]));
  numbers(canvas, ['Token', 'Time since the previous token'], gaps.map((g, i) => [i === 0 ? '1 (time to first token)' : i + 1, fmtMs(g)]));
  if (gaps.length === 0) {
    ctx.fillStyle = c.muted;
    ctx.textAlign = 'center';
    ctx.fillText('Per-token latency appears here as tokens arrive.', w / 2, h / 2);
    return;
  }
  const decode = gaps.slice(1);
  const decodeMax = decode.length ? Math.max(...decode) : gaps[0];
  // A long prefill would flatten every other bar: cap the scale and label the clipped bar instead.
  const clipped = gaps[0] > 4 * decodeMax;
  const yMax = Math.max(clipped ? decodeMax * 1.5 : Math.max(...gaps), 1e-3) * 1.05;
  const { area, x, y } = axes(ctx, w, h, gaps.length, yMax, 'token', 'ms since previous token', c);
  const bw = Math.max(1, (area.right - area.left) / gaps.length - 1);
  gaps.forEach((g, i) => {
    ctx.fillStyle = i === 0 ? c.perceived : c.accent;
    const top = y(Math.min(g, yMax));
    ctx.fillRect(x(i) + 0.5, top, bw, area.bottom - top);
  });
  if (clipped) {
    ctx.fillStyle = c.perceived;
    ctx.textAlign = 'left';
    ctx.textBaseline = 'top';
    ctx.fillText(`first token ${fmtMs(gaps[0])}`, x(0) + bw + 4, area.top);
  }
  const mean = decode.length ? decode.reduce((s, g) => s + g, 0) / decode.length : NaN;
  canvas.setAttribute('aria-label', `Per-token latency of ${gaps.length} tokens: first token ${fmtMs(gaps[0])}` +
    (decode.length ? `, then ${fmtMs(mean)} per token on average, at most ${fmtMs(decodeMax)}` : ''));
  if (decode.length) {
    ctx.strokeStyle = c.total;
    ctx.setLineDash([5, 4]);
    ctx.beginPath();
    ctx.moveTo(area.left, y(mean));
    ctx.lineTo(area.right, y(mean));
    ctx.stroke();
    ctx.setLineDash([]);
    ctx.fillStyle = c.total;
    ctx.textAlign = 'right';
    ctx.textBaseline = 'bottom';
    ctx.fillText(`TPOT ${fmtMs(mean)}`, area.right, y(mean) - 2);
  }
}

/** Least squares y = a + b·x, with R². */
export function fitLine(xs, ys) {
  const n = xs.length;
  const mx = xs.reduce((s, v) => s + v, 0) / n;
  const my = ys.reduce((s, v) => s + v, 0) / n;
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  for (let i = 0; i < n; i++) {
    sxy += (xs[i] - mx) * (ys[i] - my);
    sxx += (xs[i] - mx) ** 2;
    syy += (ys[i] - my) ** 2;
  }
  const b = sxx > 0 ? sxy / sxx : 0;
  const a = my - b * mx;
  let ssRes = 0;
  for (let i = 0; i < n; i++) ssRes += (ys[i] - a - b * xs[i]) ** 2;
  return { a, b, r2: syy > 0 ? 1 - ssRes / syy : 1 };
}

/** Total time against output length on `canvas`: the points `{ n, totalMs }` and the fitted line. */
export function drawLab(canvas, points, fit) {
  const { ctx, w, h } = canvas2d(canvas);
  const c = colors();
  numbers(canvas, ['Output tokens', 'Total time', ...(fit ? ['Fitted line'] : [])],
    points.map((p) => [p.n, fmtMs(p.totalMs), ...(fit ? [fmtMs(fit.a + fit.b * p.n)] : [])]));
  if (points.length === 0) {
    ctx.fillStyle = c.muted;
    ctx.textAlign = 'center';
    ctx.fillText('Total time against output length appears here.', w / 2, h / 2);
    return;
  }
  const xMax = Math.max(...points.map((p) => p.n)) * 1.05;
  const yMax = Math.max(...points.map((p) => p.totalMs)) * 1.1;
  const { x, y } = axes(ctx, w, h, xMax, yMax, 'output tokens n', 'total ms', c);
  if (fit) {
    ctx.strokeStyle = c.total;
    ctx.lineWidth = 2;
    ctx.beginPath();
    ctx.moveTo(x(0), y(fit.a));
    ctx.lineTo(x(xMax), y(fit.a + fit.b * xMax));
    ctx.stroke();
    ctx.lineWidth = 1;
  }
  ctx.fillStyle = c.accent;
  for (const p of points) {
    ctx.beginPath();
    ctx.arc(x(p.n), y(p.totalMs), 4, 0, 2 * Math.PI);
    ctx.fill();
  }
}

/** Bars of `values` (one per step) on `canvas`, labelled axes; `empty` when there are none. */
export function drawBars(canvas, values, xLabel, yLabel, empty) {
  const { ctx, w, h } = canvas2d(canvas);
  const c = colors();
  numbers(canvas, [xLabel, yLabel], values.map((v, i) => [i + 1, v]));
  if (values.length === 0) {
    ctx.fillStyle = c.muted;
    ctx.textAlign = 'center';
    ctx.fillText(empty, w / 2, h / 2);
    return;
  }
  const yMax = Math.max(...values, 1) * 1.1;
  const { area, x, y } = axes(ctx, w, h, values.length, yMax, xLabel, yLabel, c);
  const bw = Math.max(1, (area.right - area.left) / values.length - 1);
  values.forEach((v, i) => {
    ctx.fillStyle = v > 1 ? c.perceived : c.accent;
    const top = y(v);
    ctx.fillRect(x(i) + 0.5, top, bw, area.bottom - top);
  });
}

/**
 * Points of several series on `canvas`, each `{ label, points: [[x, y]], fit: { a, b } | null, colour }`
 * (colour: a key of the page's colours), with each series' fitted line and a legend.
 */
export function drawSeries(canvas, series, xLabel, yLabel, empty) {
  const { ctx, w, h } = canvas2d(canvas);
  const c = colors();
  const all = series.flatMap((s) => s.points);
  numbers(canvas, [xLabel, ...series.map((s) => `${yLabel}, ${s.label}`)], seriesRows(series));
  if (all.length === 0) {
    ctx.fillStyle = c.muted;
    ctx.textAlign = 'center';
    ctx.fillText(empty, w / 2, h / 2);
    return;
  }
  const xMax = Math.max(...all.map((p) => p[0])) * 1.05;
  // The slowest outliers (a GC pause) would flatten the rest: scale to the 98th percentile.
  const ys = all.map((p) => p[1]).sort((a, b) => a - b);
  const top = ys.length >= 50 ? ys[Math.floor(0.98 * (ys.length - 1))] * 1.25 : ys.at(-1) * 1.1; // few points: all of them
  const yMax = Math.max(top, 1e-3);
  const { area, x, y } = axes(ctx, w, h, xMax, yMax, xLabel, yLabel, c);
  series.forEach((s, k) => {
    const colour = c[s.colour] ?? c.accent;
    ctx.fillStyle = colour;
    for (const [px, py] of s.points) {
      if (py > yMax) continue;
      ctx.fillRect(x(px) - 1.5, y(py) - 1.5, 3, 3);
    }
    if (s.fit) {
      ctx.strokeStyle = colour;
      ctx.lineWidth = 2;
      ctx.beginPath();
      ctx.moveTo(x(0), y(s.fit.a));
      ctx.lineTo(x(xMax), y(Math.min(yMax, s.fit.a + s.fit.b * xMax)));
      ctx.stroke();
      ctx.lineWidth = 1;
    }
    ctx.textAlign = 'left';
    ctx.textBaseline = 'top';
    ctx.fillText(s.label, area.left + 8, area.top + 4 + 16 * k);
  });
}

/** One row per x of any series: [x, each series' y there (or –)]. */
function seriesRows(series) {
  const xs = [...new Set(series.flatMap((s) => s.points.map((p) => p[0])))].sort((a, b) => a - b);
  const at = series.map((s) => new Map(s.points.map(([x, y]) => [x, y])));
  return xs.map((x) => [x, ...at.map((m) => (m.has(x) ? fmtMs(m.get(x)) : '–'))]);
}

/**
 * The batching lab on `canvas`: for each run `{ batch, tokensPerSec, perSequence: [tok/s …] }`, the
 * tokens per second of all sequences together (a line) and of each sequence (dots), against the
 * number of sequences; `knee` (a batch size, or null) marked where the step stops being bound by
 * reading the weights.
 */
export function drawBatch(canvas, runs, knee) {
  const { ctx, w, h } = canvas2d(canvas);
  const c = colors();
  const tps = (v) => v.toFixed(1);
  numbers(canvas, ['Sequences', 'Tokens/s, all together', 'Step (each one\'s time per token)', 'Tokens/s each'],
    runs.map((r) => [r.batch, tps(r.tokensPerSec), fmtMs(r.stepMs), r.perSequence.map(tps).join(', ')]));
  if (runs.length === 0) {
    ctx.fillStyle = c.muted;
    ctx.textAlign = 'center';
    ctx.fillText('Tokens per second against the number of sequences appear here.', w / 2, h / 2);
    return;
  }
  const xMax = Math.max(...runs.map((r) => r.batch)) * 1.08;
  const yMax = Math.max(...runs.map((r) => r.tokensPerSec)) * 1.12;
  const { area, x, y } = axes(ctx, w, h, xMax, yMax, 'Sequences at once', 'Tokens per second', c);
  if (knee) {
    ctx.strokeStyle = c.muted;
    ctx.setLineDash([4, 4]);
    ctx.beginPath();
    ctx.moveTo(x(knee) + 0.5, area.top);
    ctx.lineTo(x(knee) + 0.5, area.bottom);
    ctx.stroke();
    ctx.setLineDash([]);
    ctx.fillStyle = c.muted;
    ctx.textAlign = x(knee) > (area.left + area.right) / 2 ? 'right' : 'left';
    ctx.textBaseline = 'top';
    ctx.fillText('bound by arithmetic from here', x(knee) + (ctx.textAlign === 'left' ? 6 : -6), area.top + 36);
  }
  ctx.strokeStyle = c.total;
  ctx.fillStyle = c.total;
  ctx.lineWidth = 2;
  ctx.beginPath();
  runs.forEach((r, i) => (i ? ctx.lineTo : ctx.moveTo).call(ctx, x(r.batch), y(r.tokensPerSec)));
  ctx.stroke();
  ctx.lineWidth = 1;
  for (const r of runs) {
    ctx.beginPath();
    ctx.arc(x(r.batch), y(r.tokensPerSec), 4, 0, 2 * Math.PI);
    ctx.fill();
  }
  ctx.fillStyle = c.perceived;
  for (const r of runs) for (const v of r.perSequence) ctx.fillRect(x(r.batch) - 2, y(v) - 2, 4, 4);
  ctx.textAlign = 'left';
  ctx.textBaseline = 'top';
  ctx.fillStyle = c.total;
  ctx.fillText('all sequences together', area.left + 8, area.top + 4);
  ctx.fillStyle = c.perceived;
  ctx.fillText('each sequence (its user)', area.left + 8, area.top + 20);
}

/**
 * The shape-the-distribution lab on `canvas`, one row per token (`view` from lab-shape.js's
 * `shape`, with `text(id)`, the `picked` id or null, and the `counts` of `draws` draws or null):
 * an outline bar for the probability at this temperature before the cuts, a filled bar for the
 * probability drawn from after them, a dot for the share of the draws; the cut as a dashed line
 * and everything else as the last row. `view` null: the empty chart.
 */
export function drawShape(canvas, view) {
  const { ctx, w, h } = canvas2d(canvas);
  const c = colors();
  const share = (id) => (view.counts ? (view.counts.get(id) ?? 0) / view.draws : null);
  const pct = (p) => (p === null ? '–' : `${(100 * p).toFixed(2)}%`);
  const rows = view ? [...view.rows.map((r) => ({ ...r, label: `“${view.text(r.id)}”`, share: share(r.id) })),
    { id: null, label: 'everything else', before: view.otherBefore, after: view.otherAfter,
      share: view.counts ? 1 - view.rows.reduce((s, r) => s + share(r.id), 0) : null }] : [];
  numbers(canvas, ['Token', 'Id', 'Before the cuts', 'Drawn from', ...(view?.counts ? ['Share of the draws'] : [])],
    rows.map((r) => [r.label + (r.id !== null && r.id === view.picked ? ' (picked)' : ''), r.id ?? '–', pct(r.before), pct(r.after),
      ...(view.counts ? [pct(r.share)] : [])]));
  if (!view) {
    ctx.fillStyle = c.muted;
    ctx.textAlign = 'center';
    ctx.fillText('Press “Get the logits”: the step’s most likely tokens appear here.', w / 2, h / 2);
    return;
  }
  const left = Math.min(130, w * 0.32);
  const right = w - 44;
  const rowH = (h - 24) / rows.length;
  const max = Math.max(...rows.map((r) => Math.max(r.before, r.after, r.share ?? 0)), 1e-9);
  const x = (p) => left + (p / max) * (right - left);
  ctx.textBaseline = 'middle';
  rows.forEach((r, i) => {
    const top = 4 + i * rowH;
    const mid = top + rowH / 2;
    const isPicked = r.id !== null && r.id === view.picked;
    ctx.fillStyle = isPicked ? c.total : r.after > 0 || r.id === null ? c.fg : c.muted;
    ctx.textAlign = 'right';
    ctx.fillText(`${isPicked ? '▶ ' : ''}${r.label}`.slice(0, 22), left - 6, mid);
    ctx.strokeStyle = c.line;
    ctx.strokeRect(left + 0.5, top + 2.5, x(r.before) - left, rowH - 5);
    ctx.fillStyle = c.accent;
    if (r.after > 0) ctx.fillRect(left, top + 4, x(r.after) - left, rowH - 8);
    if (r.share !== null) {
      ctx.fillStyle = c.perceived;
      ctx.beginPath();
      ctx.arc(x(r.share), mid, Math.min(4, rowH / 3), 0, 2 * Math.PI);
      ctx.fill();
    }
    ctx.fillStyle = c.muted;
    ctx.textAlign = 'left';
    ctx.fillText(`${(100 * r.after).toFixed(r.after >= 0.1 ? 0 : 1)}%`, Math.max(x(r.before), x(r.after), x(r.share ?? 0)) + 7, mid);
    const next = rows[i + 1];
    if (r.after > 0 && next && next.id !== null && next.after === 0) { // the cut
      ctx.strokeStyle = c.total;
      ctx.setLineDash([5, 4]);
      ctx.beginPath();
      ctx.moveTo(8, top + rowH);
      ctx.lineTo(w - 8, top + rowH);
      ctx.stroke();
      ctx.setLineDash([]);
      ctx.fillStyle = c.total;
      ctx.textAlign = 'right';
      ctx.fillText('cut: below this line, never drawn', w - 8, top + rowH + 6);
    }
  });
  ctx.fillStyle = c.muted;
  ctx.textAlign = 'left';
  ctx.fillText(view.counts ? 'outline: before the cuts · bar: drawn from · dot: share of the draws' : 'outline: before the cuts · bar: drawn from',
    8, h - 10);
  canvas.setAttribute('aria-label', `Probabilities of the ${view.rows.length} most likely tokens: ` +
    view.rows.slice(0, 5).map((r) => `“${view.text(r.id)}” ${pct(r.after)}`).join(', ') + `, …; everything else ${pct(view.otherAfter)}`);
}
