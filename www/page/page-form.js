// What the page's forms say: the generation settings, the model chosen (the demo, a URL or id,
// files from this computer), and the embed snippet's attributes for the current settings. Reads
// the DOM, changes nothing; a field that does not parse throws the sentence. Imported by app.js.

import { MODEL_FILES, isHubId } from '../api/gpt2.js';
import { DEMO_MODEL as DEMO } from '../api/assets.js';
import { stopAttribute } from './embed-code.js';
import { unescape } from '../widget/text.js';

const $ = (id) => document.getElementById(id);

export function numberField(id, label) {
  const v = $(id).valueAsNumber;
  if (!Number.isFinite(v)) throw new Error(`${label} must be a number`);
  return v;
}

export function listField(id, label) {
  const items = $(id).value.split(/[\s,]+/).filter(Boolean).map(Number);
  if (items.length === 0 || !items.every((n) => Number.isInteger(n) && n >= 0)) {
    throw new Error(`${label} must be a list of whole numbers, such as 8, 16, 32`);
  }
  return items;
}

/** One stop sequence per line; \n, \t and \\ are escapes. Lines are not trimmed: spaces count. */
function stopSequences() {
  return $('stop-seqs').value.split('\n').filter((s) => s !== '')
    .map(unescape);
}

/** The Seed field, or a random seed when it is empty (sampled text then varies between runs). */
export function seedField() {
  if ($('seed').value.trim() === '') return Math.floor(Math.random() * 2 ** 31);
  return numberField('seed', 'Seed');
}

export function formOptions() {
  return {
    maxTokens: numberField('max-tokens', 'Max tokens'),
    temperature: numberField('temperature', 'Temperature'),
    topK: numberField('top-k', 'Top-k'),
    topP: numberField('top-p', 'Top-p'),
    minP: numberField('min-p', 'Min-p'),
    repetitionPenalty: numberField('repetition-penalty', 'Repetition penalty'),
    seed: seedField(),
    stop: stopSequences(),
    ignoreEos: $('ignore-eos').checked,
    topLogprobs: $('watch-loop').checked ? 10 : $('boundaries').checked ? 5 : 0, // the loop's cards; the token view's alternatives
    draft: $('draft-lookup').checked ? 'prompt-lookup' : undefined,
  };
}

export function chosenSource() {
  const source = document.querySelector('input[name="source"]:checked').value;
  if (source === 'demo') return DEMO;
  if (source === 'url') {
    const url = $('model-url').value.trim();
    if (!url) throw new Error('enter a Hugging Face model id, or the URL of a model folder or of a .gguf file');
    return url;
  }
  const files = [...$('model-files').files];
  const pick = (test) => files.find((f) => test(f.name));
  const gguf = pick((n) => /\.gguf$/i.test(n));
  if (gguf) return { weights: gguf }; // its header holds the config and the tokenizer
  const chosen = {
    config: pick((n) => n === MODEL_FILES.config),
    weights: pick((n) => n.endsWith('.safetensors')),
    tokenizer: pick((n) => n === MODEL_FILES.tokenizer),
  };
  const missing = Object.keys(chosen).filter((k) => !chosen[k]).map((k) => MODEL_FILES[k]);
  if (missing.length) throw new Error(`choose the model's three files together; missing: ${missing.join(', ')}`);
  return chosen;
}

/** Embed code: the current prompt and settings as widget attributes (embed-code.js shows them). */
export function embedSettings() {
  const source = document.querySelector('input[name="source"]:checked').value;
  const url = $('model-url').value.trim();
  const o = formOptions();
  const sampled = o.temperature > 0;
  const attributes = [
    ['model', source === 'url' && url ? (isHubId(url) ? url : new URL(url, location.href).href) : undefined],
    ['backend', $('backend-choice').value === 'auto' ? undefined : $('backend-choice').value],
    ['prompt', $('prompt').value],
    ['max-tokens', o.maxTokens],
    ['temperature', o.temperature],
    ['top-k', sampled && o.topK > 0 ? o.topK : undefined],
    ['top-p', sampled && o.topP < 1 ? o.topP : undefined],
    ['min-p', sampled && o.minP > 0 ? o.minP : undefined],
    ['seed', sampled && $('seed').value.trim() !== '' ? o.seed : undefined],
    ['stop', o.stop.length ? stopAttribute(o.stop) : undefined],
    ['readout', true],
    ['watch', $('watch-loop').checked],
    ['tokens', $('boundaries').checked],
  ];
  const left = [source === 'files' && 'local model files (the widget uses the demo model; put the folder online and load it by URL)',
    o.repetitionPenalty !== 1 && 'the repetition penalty', o.ignoreEos && 'ignore end-of-text'].filter(Boolean);
  return { attributes, left };
}
