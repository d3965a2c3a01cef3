// Lab: "Shape the distribution". The sampler's turn of the loop, made visible: the real logits of
// one step (the next token of the prompt, or any step of the last generation) as the probabilities
// of the 20 most likely tokens plus everything else, reshaped as the student moves temperature,
// top-k, top-p, min-p and the repetition penalty — no model call, only sampling.js's
// `distribution`, generate's own rule in generate's order (a test checks it against the engine's
// sampler on the same logits). The cut is drawn, the entropy and the kept tokens counted, the
// picked token's probability given, and "sample" draws many times from the shaped distribution:
// the histogram against the probabilities it was drawn from.

import { distribution, penalize, softmax, entropy, sample, rng } from '../api/sampling.js';
import { drawShape } from './charts.js';

/** Tokens drawn as bars; the rest of the vocabulary is one bar, "everything else". */
const SHOWN = 20;
/** Below this temperature generate is greedy (sampling/mod.rs GREEDY_BELOW). */
const GREEDY_BELOW = 1e-4;

/** The indices of the `k` largest values, largest first (ties: the lower index first). */
function largest(values, k) {
  const top = [];
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (top.length === k && v <= values[top[k - 1]]) continue;
    let at = top.length;
    while (at > 0 && values[top[at - 1]] < v) at--;
    top.splice(at, 0, i);
    if (top.length > k) top.pop();
  }
  return top;
}

/**
 * One step's distribution under `settings` ({ temperature, topK, topP, minP, repetitionPenalty }),
 * given its `logits` and the ids before it (`history`): the SHOWN most likely tokens (after the
 * penalty) with their probability at this temperature before the cuts (`before`; temperature 1
 * when greedy) and after them (`after`: what is drawn from), everything else's share of both, the
 * entropy in bits and how many tokens can still be drawn.
 */
export function shape(logits, settings, history) {
  const greedy = settings.temperature < GREEDY_BELOW;
  const penalised = penalize(logits, history, settings.repetitionPenalty);
  const before = softmax(penalised, greedy ? 1 : settings.temperature);
  const after = distribution(logits, settings, history);
  const ids = largest(penalised, SHOWN);
  const rows = ids.map((id) => ({ id, logit: penalised[id], before: before[id], after: after[id] }));
  const rest = (p) => Math.max(0, 1 - rows.reduce((s, r) => s + p(r), 0));
  let kept = 0;
  for (let i = 0; i < after.length; i++) if (after[i] > 0) kept++;
  return {
    greedy, rows, probs: after, kept, entropy: entropy(after),
    otherBefore: rest((r) => r.before), otherAfter: rest((r) => r.after),
  };
}

/** `draws` tokens drawn from `probs` with a generator seeded by `seed`: the count of each id drawn. */
export function drawMany(probs, draws, seed) {
  const random = rng(seed);
  const counts = new Map();
  for (let i = 0; i < draws; i++) {
    const id = sample(probs, random);
    counts.set(id, (counts.get(id) ?? 0) + 1);
  }
  return counts;
}

/** A token's text as a label: spaces and line breaks made visible. */
export const visible = (text) => JSON.stringify(text).slice(1, -1).replace(/ /g, '␣') || '∅';

const pct = (p) => (p === 0 ? '0' : p < 0.001 ? '<0.1%' : `${(100 * p).toFixed(1)}%`);

/**
 * The lab's state and controls: `setGeneration` after each Generate, `load` to fetch a step's
 * logits, and the controls' input redraws at once. `el(id)` finds the page's elements; `record`
 * receives `shapeLab` ({ settings, view, draws }) for tests.
 */
export class ShapeLab {
  #el;
  #record;
  #last = null; // { ids: prompt + output, promptLength, picked: ids of the output }
  #step = null; // { logits, history, picked, label }
  #texts = new Map(); // id → text, for the bars' labels
  #counts = null; // the last draws: Map id → count, and their number
  #draws = 0;

  constructor(el, record) {
    this.#el = el;
    this.#record = record;
    for (const id of ['shape-temperature', 'shape-top-k', 'shape-top-p', 'shape-min-p', 'shape-penalty']) {
      el(id).addEventListener('input', () => this.#redraw(false));
      el(id).addEventListener('change', () => this.#redraw(true));
    }
    this.#redraw(false);
  }

  /** The last generation: its prompt's and output's ids and its settings, so any of its steps can be shaped. */
  setGeneration(promptIds, outputIds, options) {
    this.#last = { ids: [...promptIds, ...outputIds], promptLength: promptIds.length, options };
    const step = this.#el('shape-step');
    step.max = String(outputIds.length);
    this.#el('shape-step-hint').textContent = `0 = the next token of the prompt; 1 to ${outputIds.length} = a step of the last generation.`;
  }

  /** Puts `options` (the Generate form's sampling settings) into the controls. */
  useSettings(options) {
    const set = (id, v) => { this.#el(id).value = String(v); };
    set('shape-temperature', options.temperature ?? 1);
    set('shape-top-k', options.topK ?? 0);
    set('shape-top-p', options.topP ?? 1);
    set('shape-min-p', options.minP ?? 0);
    set('shape-penalty', options.repetitionPenalty ?? 1);
  }

  /**
   * Fetches the logits of the chosen step: `prompt` is the Generate form's, for step 0. A step of
   * the last generation puts that generation's settings in the controls (what it drew from); the
   * first load, the form's (`formOptions()`).
   */
  async load(model, prompt, formOptions) {
    const n = this.#el('shape-step').valueAsNumber || 0;
    let history;
    let picked = null;
    if (n >= 1) {
      if (!this.#last || n > this.#last.ids.length - this.#last.promptLength) {
        throw new Error(`step ${n} is not a step of the last generation; generate first, then choose 1 to its number of tokens`);
      }
      history = this.#last.ids.slice(0, this.#last.promptLength + n - 1);
      picked = this.#last.ids[this.#last.promptLength + n - 1];
    } else {
      history = await model.tokenize(prompt);
      if (history.length === 0) history = [model.eosTokenId]; // '' starts from end-of-text, as generate does
    }
    if (n >= 1) this.useSettings(this.#last.options);
    else if (!this.#step) this.useSettings(formOptions());
    const logits = await model.logits(history);
    const label = n >= 1 ? `step ${n} of the last generation` : 'the next token of the prompt';
    this.#step = { logits, history, picked, label };
    this.#counts = null;
    const ids = largest(penalize(logits, history, 1), 3 * SHOWN).concat(picked ?? []);
    await Promise.all(ids.filter((id) => !this.#texts.has(id)).map(async (id) => this.#texts.set(id, await model.decode([id]))));
    this.#redraw(true);
  }

  /** Draws from the shaped distribution `draws` times (seeded) and shows the histogram. */
  sampleMany() {
    if (!this.#step) throw new Error('get the logits first');
    const draws = Math.round(this.#el('shape-draws').valueAsNumber);
    if (!(draws >= 1 && draws <= 100000)) throw new Error('draws: a whole number from 1 to 100000');
    const seedText = this.#el('shape-seed').value.trim();
    const seed = seedText === '' ? Math.floor(Math.random() * 2 ** 31) : Number(seedText);
    if (!Number.isInteger(seed) || seed < 0) throw new Error('seed: a whole number ≥ 0, or empty for a random one');
    const view = this.#view();
    this.#counts = drawMany(view.probs, draws, seed);
    this.#draws = draws;
    this.#redraw(true, seed);
  }

  /** The controls' settings; a wrong one throws a sentence. */
  settings() {
    const num = (id, name, lo, hi) => {
      const v = this.#el(id).valueAsNumber;
      if (!(v >= lo && v <= hi)) throw new Error(`${name}: a number from ${lo} to ${hi}`);
      return v;
    };
    return {
      temperature: num('shape-temperature', 'temperature', 0, 5),
      topK: Math.round(num('shape-top-k', 'top-k', 0, 50257)),
      topP: num('shape-top-p', 'top-p', 0.01, 1),
      minP: num('shape-min-p', 'min-p', 0, 1),
      repetitionPenalty: num('shape-penalty', 'repetition penalty', 0.5, 5),
    };
  }

  #view() {
    return shape(this.#step.logits, this.settings(), this.#step.history);
  }

  /** Redraws the bars and the sentence; `announce` also puts the sentence in the live region. */
  #redraw(announce, seed = null) {
    const el = this.#el;
    const outputs = { 'shape-temperature': (v) => (v < GREEDY_BELOW ? '0 (greedy)' : v), 'shape-top-p': (v) => v, 'shape-min-p': (v) => v, 'shape-penalty': (v) => v };
    for (const [id, f] of Object.entries(outputs)) el(`${id}-out`).textContent = String(f(el(id).valueAsNumber));
    if (!this.#step) {
      drawShape(el('shape-chart'), null);
      return;
    }
    let settings;
    let view;
    try {
      settings = this.settings();
      view = this.#view();
    } catch (e) {
      el('shape-summary').textContent = `${e.message.charAt(0).toUpperCase()}${e.message.slice(1)}.`;
      return;
    }
    const text = (id) => visible(this.#texts.get(id) ?? `#${id}`);
    const { picked } = this.#step;
    const counts = this.#counts;
    drawShape(el('shape-chart'), { ...view, text, picked, counts, draws: this.#draws });
    const top = view.rows[0];
    const what = view.greedy
      ? `Temperature 0 is greedy: all the probability goes to the most likely token, “${text(top.id)}”, every time (entropy 0 bits).`
      : `At temperature ${settings.temperature}, ${view.kept.toLocaleString('en')} token${view.kept === 1 ? '' : 's'} can be drawn` +
        `${view.kept < view.probs.length ? ` (the cuts removed the other ${(view.probs.length - view.kept).toLocaleString('en')})` : ''}; ` +
        `the most likely, “${text(top.id)}”, has ${pct(top.after)}; entropy ${view.entropy.toFixed(2)} bits ` +
        `(as uncertain as a choice among ${(2 ** view.entropy).toFixed(1)} equally likely tokens).`;
    const pickedText = picked === null ? '' : ` This step picked “${text(picked)}”: ${pct(view.probs[picked])} under these settings` +
      `${view.probs[picked] === 0 ? ', so these settings could not have picked it' : ''}.`;
    let drawn = '';
    if (counts) {
      const inShown = view.rows.reduce((s, r) => s + (counts.get(r.id) ?? 0), 0);
      drawn = ` ${this.#draws} draws${seed === null ? '' : ` (seed ${seed})`}: ${(100 * inShown / this.#draws).toFixed(1)}% landed on the ${SHOWN} tokens shown; ` +
        'each bar\'s dot is its share of the draws, beside the probability it was drawn with.';
    }
    el('shape-summary').textContent = `${this.#step.label.charAt(0).toUpperCase()}${this.#step.label.slice(1)}. ${what}${pickedText}${drawn}`;
    if (announce) el('shape-spoken').textContent = el('shape-summary').textContent;
    this.#record.shapeLab = {
      settings, rows: view.rows, kept: view.kept, entropy: view.entropy, otherAfter: view.otherAfter, picked,
      pickedProb: picked === null ? null : view.probs[picked], draws: counts ? { n: this.#draws, counts: Object.fromEntries(counts) } : null,
    };
  }
}
