// Presets: the lesson's practical rules as settings. Each caps max_tokens (a cap is what bounds the
// total: total ≈ TTFT + TPOT × tokens), picks greedy or sampling by what the output is for, and sets
// stop texts where the answer has a natural end. Used by the page's Generate form, the widget's
// `preset` attribute, and gpt2.js (exported as PRESETS).

/** name → { label, why (one sentence), options (generate() options) }. */
export const PRESETS = Object.freeze({
  autocomplete: Object.freeze({
    label: 'Autocomplete',
    why: 'A suggestion should be the single most likely continuation, so greedy; a few tokens and a stop ' +
      'at the end of the line keep it short, and short is fast: the total is about the time to first ' +
      'token plus a handful of token times.',
    options: Object.freeze({ maxTokens: 8, temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1, stop: Object.freeze(['\n']) }),
  }),
  creative: Object.freeze({
    label: 'Creative writing',
    why: 'Variety is the point, so sampling at a moderate temperature, with top-p cutting off the long ' +
      'tail of unlikely tokens that make text fall apart; a larger cap leaves room for a passage, and ' +
      'every extra token costs one more time per token.',
    options: Object.freeze({ maxTokens: 160, temperature: 0.8, topK: 0, topP: 0.95, minP: 0, repetitionPenalty: 1, stop: Object.freeze([]) }),
  }),
  extraction: Object.freeze({
    label: 'Extraction',
    why: 'An answer pulled out of a text must be the most likely one and the same every time, so greedy; ' +
      'a tight cap bounds the cost of an answer that runs on, and stop texts end it where the answer ends.',
    options: Object.freeze({ maxTokens: 24, temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1, stop: Object.freeze(['\n\n', '.']) }),
  }),
});

/** The preset named `name`, or an Error naming the choices. */
export function preset(name) {
  const p = Object.hasOwn(PRESETS, name) ? PRESETS[name] : null;
  if (!p) throw new Error(`unknown preset "${name}"; the presets are ${Object.keys(PRESETS).join(', ')}`);
  return p;
}
