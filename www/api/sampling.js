// The loop's small parts in plain JavaScript, for writing the loop yourself with model.logits:
//
//   import { Gpt2, argmax, softmax, topP, sample, rng } from './gpt2.js';
//   const ids = await model.tokenize('ROMEO:');
//   for (let i = 0; i < 20; i++) {
//     const logits = await model.logits(ids);          // predict: a score for every token
//     const next = argmax(logits);                     // pick (or: sample(topP(softmax(logits, 0.8), 0.9), random))
//     ids.push(next);                                  // append: it feeds the next step
//     if (next === model.eosTokenId) break;
//   }
//
// Each function is self-contained (no imports, no closures over this module): the page's code lab
// copies their source into its sandbox worker. The engine's own sampler (generate's temperature,
// topP, seed) is in Rust; these draw from their own generator, so a seeded loop here repeats itself
// but does not give generate's seeded text. Greedy, both give the same tokens. `distribution` is
// the engine's whole rule in the engine's order (repetition penalty, temperature, top-k, top-p,
// min-p): the distribution generate draws from, checked against it by tests/e2e/teaching.test.mjs.

/** The index of the largest value (the first of equal ones): greedy decoding's pick. */
export function argmax(logits) {
  if (!logits || logits.length === 0) throw new Error('argmax needs a non-empty array of logits');
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
  return best;
}

/**
 * Probabilities from logits: exp(logit / temperature), normalised to sum to 1 (a Float32Array).
 * Temperature 0 puts all the probability on the argmax; below 1 sharpens, above 1 flattens.
 */
export function softmax(logits, temperature = 1) {
  if (!logits || logits.length === 0) throw new Error('softmax needs a non-empty array of logits');
  if (!(typeof temperature === 'number' && temperature >= 0 && Number.isFinite(temperature))) {
    throw new Error(`softmax: temperature ${temperature} is not a number ≥ 0`);
  }
  const out = new Float32Array(logits.length);
  if (temperature === 0) {
    out[argmax(logits)] = 1;
    return out;
  }
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i] > max) max = logits[i];
  let sum = 0;
  for (let i = 0; i < logits.length; i++) {
    const e = Math.exp((logits[i] - max) / temperature);
    out[i] = e;
    sum += e;
  }
  for (let i = 0; i < out.length; i++) out[i] /= sum;
  return out;
}

/**
 * The most likely tokens, most likely first, up to the first prefix that is `enough(count, mass)`:
 * a cut found by halving the range of probabilities (a few passes over the vocabulary), then only
 * the tokens above it sorted (a full sort of 50,257 would take longer than a model step).
 */
function mostLikely(probs, enough) {
  let lo = 0;
  let hi = 0;
  for (let i = 0; i < probs.length; i++) if (probs[i] > hi) hi = probs[i];
  let keep = Array.from(probs.keys());
  for (let pass = 0; pass < 60 && hi - lo > 1e-12; pass++) {
    const mid = (lo + hi) / 2;
    let count = 0;
    let mass = 0;
    for (const i of keep) {
      if (probs[i] >= mid) {
        count++;
        mass += probs[i];
      }
    }
    if (enough(count, mass)) {
      lo = mid;
      keep = keep.filter((i) => probs[i] >= mid);
    } else {
      hi = mid;
    }
  }
  keep.sort((a, b) => probs[b] - probs[a] || a - b);
  const out = [];
  let mass = 0;
  for (const i of keep) {
    out.push(i);
    mass += probs[i];
    if (enough(out.length, mass)) break;
  }
  return out;
}

/** Only the probabilities of `ids`, renormalised; the rest 0 (a new Float32Array). */
function keepOnly(probs, ids) {
  const out = new Float32Array(probs.length);
  let sum = 0;
  for (const i of ids) sum += probs[i];
  for (const i of ids) out[i] = probs[i] / sum;
  return out;
}

/** The k most likely tokens' probabilities, renormalised; the rest 0 (a new Float32Array). */
export function topK(probs, k) {
  if (!(Number.isInteger(k) && k >= 1)) throw new Error(`topK: k ${k} is not a whole number ≥ 1`);
  return keepOnly(probs, mostLikely(probs, (count) => count >= k));
}

/**
 * Nucleus (top-p) filtering: the smallest set of the most likely tokens whose probabilities add up
 * to at least `p`, renormalised; the rest 0 (a new Float32Array). p = 1 keeps everything.
 */
export function topP(probs, p) {
  if (!(typeof p === 'number' && p > 0 && p <= 1)) throw new Error(`topP: p ${p} is not in (0, 1]`);
  if (p === 1) return keepOnly(probs, Array.from(probs.keys()));
  return keepOnly(probs, mostLikely(probs, (count, mass) => mass >= p));
}

/**
 * Min-p filtering: only the tokens at least `p` × the most likely token's probability, renormalised;
 * the rest 0 (a new Float32Array). p = 0 keeps everything.
 */
export function minP(probs, p) {
  if (!(typeof p === 'number' && p >= 0 && p <= 1)) throw new Error(`minP: p ${p} is not in [0, 1]`);
  let max = 0;
  for (let i = 0; i < probs.length; i++) if (probs[i] > max) max = probs[i];
  const keep = [];
  for (let i = 0; i < probs.length; i++) if (probs[i] > 0 && probs[i] >= p * max) keep.push(i);
  return keepOnly(probs, keep);
}

/**
 * The repetition penalty (CTRL's rule, as transformers applies it): each distinct id of `history`
 * has its logit divided by `penalty` when positive, multiplied when not (a new Float32Array).
 */
export function penalize(logits, history, penalty) {
  if (!(typeof penalty === 'number' && penalty > 0 && Number.isFinite(penalty))) {
    throw new Error(`penalize: penalty ${penalty} is not a number > 0`);
  }
  const out = Float32Array.from(logits);
  if (penalty === 1) return out;
  for (const id of new Set(history)) {
    if (id >= 0 && id < out.length) out[id] = out[id] > 0 ? out[id] / penalty : out[id] * penalty;
  }
  return out;
}

/**
 * The distribution generate samples from, given the logits, its settings ({ temperature, topK,
 * topP, minP, repetitionPenalty }, generate's defaults where left out) and the ids so far: the
 * repetition penalty, then temperature (below 1e-4, all the probability on the argmax: greedy),
 * top-k, top-p and min-p, each renormalising. A new Float32Array.
 */
export function distribution(logits, settings = {}, history = []) {
  const { temperature = 1, topK: k = 0, topP: p = 1, minP: m = 0, repetitionPenalty: r = 1 } = settings;
  let probs = softmax(penalize(logits, history, r), temperature < 1e-4 ? 0 : temperature);
  if (temperature < 1e-4) return probs;
  if (k > 0 && k < probs.length) probs = topK(probs, k);
  if (p < 1) probs = topP(probs, p);
  if (m > 0) probs = minP(probs, m);
  return probs;
}

/** The entropy of a distribution in bits: how many yes/no questions a draw is worth (0: certain). */
export function entropy(probs) {
  let h = 0;
  for (let i = 0; i < probs.length; i++) if (probs[i] > 0) h -= probs[i] * Math.log2(probs[i]);
  return h;
}

/**
 * One token drawn from `probs` (which sum to 1): the first index whose running sum passes a
 * uniform number from `random` (a function returning [0, 1), e.g. `rng(seed)` or Math.random).
 */
export function sample(probs, random = Math.random) {
  if (typeof random !== 'function') throw new Error('sample: random must be a function returning a number in [0, 1)');
  const u = random();
  let sum = 0;
  let last = -1;
  for (let i = 0; i < probs.length; i++) {
    if (probs[i] <= 0) continue;
    sum += probs[i];
    last = i;
    if (u < sum) return i;
  }
  if (last < 0) throw new Error('sample: no token has a probability above 0');
  return last; // rounding left the sum a hair below u
}

/** A seeded generator of uniform numbers in [0, 1) (mulberry32): the same seed, the same draws. */
export function rng(seed = 1) {
  if (!Number.isFinite(seed)) throw new Error(`rng: seed ${seed} is not a number`);
  let a = Math.floor(seed) >>> 0;
  return function random() {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The helpers a code lab's sandbox gets, by name. */
export const HELPERS = { argmax, softmax, topK, topP, minP, penalize, distribution, entropy, sample, rng };
/** Every function of this module, the private ones too: the source a sandbox copies. */
export const SOURCE = [mostLikely, keepOnly, argmax, softmax, topK, topP, minP, penalize, distribution, entropy, sample, rng]
  .map(String).join('\n\n');
