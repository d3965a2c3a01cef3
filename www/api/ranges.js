// A generate option's range (RANGES in options.js, generated from the engine's options table) as a
// check and as words, for every place outside the engine that takes a number for an option: the
// widget's attributes, the completions facade's parameters.

/** Whether `value` is in range `r` ({ min, max, minOpen, whole }). */
export function inRange(r, value) {
  if (typeof value !== 'number' || !Number.isFinite(value) || (r.whole && !Number.isInteger(value))) return false;
  return (r.minOpen ? value > r.min : value >= r.min) && value <= r.max;
}

/** Range `r` in words: "a whole number from 1 to 16", "a number in (0, 1]". */
export function rangeText(r) {
  const span = r.minOpen ? `in (${r.min}, ${r.max}]` : `from ${r.min} to ${r.max}`;
  return `${r.whole ? 'a whole number' : 'a number'} ${span}`;
}
