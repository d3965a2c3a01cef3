// OpenAI's completions API over a loaded model, so code written for a hosted API runs unchanged on
// GPT-2 in the page (`model.completions.create`, gpt2.d.ts):
//
//   const r = await model.completions.create({ prompt: 'ROMEO:', max_tokens: 20, temperature: 0 });
//   r.choices[0].text; r.choices[0].finish_reason; r.usage.completion_tokens;
//   const stream = await model.completions.create({ prompt: 'ROMEO:', max_tokens: 20, stream: true });
//   for await (const chunk of stream) out.append(chunk.choices[0]?.text ?? '');
//
// It is the legacy /v1/completions shape: GPT-2 completes text and has no chat template, so there
// is no chat.completions here. One chunk per generated token (its text may be '' while a
// character's bytes are split across tokens), then one with finish_reason, then (with
// stream_options.include_usage) one with the usage and no choices, as OpenAI sends them.
// `logprobs: k` gives each choice OpenAI's legacy logprobs object (logprobsOf, below). `draft`
// ('prompt-lookup' or 'mtp') is gpt2-web's own: speculative decoding, the same text in fewer steps.
// `echo` puts the prompt before each choice's text (a stream's first chunk of each choice).
// `top_k`, `min_p`, `repetition_penalty` and `ignore_eos` are the extensions llama.cpp's server and
// vLLM accept beyond OpenAI's fields (EXTENSIONS), each the engine's option of that name.
// The numbers' ranges are the engine's (RANGES, generated from its options table), narrowed where
// OpenAI's are narrower; gpt2.js passes the model in.

import { RANGES } from './options.js';
import { inRange, rangeText } from './ranges.js';

/** Parameters OpenAI's API takes that would change the answer and that this facade cannot honour. */
const UNSUPPORTED = {
  best_of: (v) => v === 1,
  suffix: (v) => v === null || v === '', logit_bias: (v) => v === null || Object.keys(v).length === 0,
  presence_penalty: (v) => v === 0, frequency_penalty: (v) => v === 0,
};
/** Parameters taken and not needed (the model is the loaded one; `user` is for the provider's logs). */
const IGNORED = ['model', 'user'];
/**
 * The fields llama.cpp's server and vLLM take beyond OpenAI's, as the engine's options they are:
 * numbers in the engine's range (RANGES) or, for `ignore_eos`, true or false.
 */
const EXTENSIONS = { top_k: 'topK', min_p: 'minP', repetition_penalty: 'repetitionPenalty', ignore_eos: 'ignoreEos' };
const KNOWN = ['prompt', 'max_tokens', 'temperature', 'top_p', 'stop', 'seed', 'n', 'stream', 'stream_options', 'logprobs', 'echo', 'draft', ...Object.keys(EXTENSIONS)];
/** gpt2-web's own parameter: speculative decoding's drafter, by name (the same text, fewer model steps). */
const DRAFTS = ['none', 'prompt-lookup', 'mtp'];

const fail = (message) => Object.assign(new Error(message), { code: 'param' });

/**
 * OpenAI's parameter → the engine's option whose range it takes (RANGES), and where OpenAI's own
 * range is narrower (temperature: 0 to 2), that one, so that code written here runs there too.
 */
const RANGE_OF = {
  max_tokens: RANGES.maxTokens, temperature: { ...RANGES.temperature, max: 2 }, top_p: RANGES.topP,
  seed: RANGES.seed, n: RANGES.n, logprobs: RANGES.topLogprobs,
  top_k: RANGES.topK, min_p: RANGES.minP, repetition_penalty: RANGES.repetitionPenalty,
};

/** Refuses `value` of parameter `name` outside its range (RANGE_OF), with a sentence saying the range. */
function checkRange(name, value) {
  if (!inRange(RANGE_OF[name], value)) throw fail(`${name} ${JSON.stringify(value)} is not ${rangeText(RANGE_OF[name])}`);
}

/** finish_reason from the engine's stopReason. */
function finishReason(stopReason) {
  return stopReason === 'max_tokens' || stopReason === 'context' ? 'length' : 'stop';
}

/**
 * A token's own string (the bytes of a character split across tokens show as U+FFFD): its
 * candidate's text when it is among the candidates (no call to the worker), else one decode call.
 */
async function tokenText(model, ev) {
  return ev.top.find((c) => c.id === ev.id)?.text ?? model.decode([ev.id]);
}

/**
 * OpenAI's legacy logprobs object (natural logs) of token events with their strings (`[ev, text]`),
 * the first at `offset`. text_offset counts the strings before (JS string units): where they
 * concatenate to the choice's text, each token's place in it. top_logprobs holds the k most likely
 * candidates of the distribution the sampler drew from, and, as OpenAI's, always the picked token
 * (so up to k + 1 entries; with logprobs 0 just it). Candidates that decode alike (e.g. halves of
 * characters, U+FFFD) share one key: the first, most likely, keeps it.
 */
function logprobsOf(items, k, offset = 0) {
  const out = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  for (const [ev, text] of items) {
    const seen = new Set();
    const top = [...ev.top.slice(0, k), { text, prob: ev.prob }].filter((c) => !seen.has(c.text) && seen.add(c.text));
    out.tokens.push(text);
    out.token_logprobs.push(Math.log(ev.prob));
    out.top_logprobs.push(Object.fromEntries(top.map((c) => [c.text, Math.log(c.prob)]))); // fromEntries: '__proto__' is a key too
    out.text_offset.push(offset);
    offset += text.length;
  }
  return out;
}

/** The engine's generate options from OpenAI's parameters; a wrong one fails with a sentence. */
function options(body) {
  if (body === null || typeof body !== 'object') throw fail('completions.create needs an object of parameters');
  for (const [key, value] of Object.entries(body)) {
    if (value === undefined || KNOWN.includes(key) || IGNORED.includes(key)) continue;
    if (Object.hasOwn(UNSUPPORTED, key)) {
      if (UNSUPPORTED[key](value)) continue;
      throw fail(`${key} ${JSON.stringify(value)} is not supported by gpt2-web's completions (leave it out)`);
    }
    throw fail(`unknown parameter "${key}"; completions.create takes ${KNOWN.join(', ')}`);
  }
  const { prompt, max_tokens: maxTokens = 16, temperature = 1, top_p: topP = 1, stop, seed, n = 1, stream = false, logprobs = null, echo = false, draft = 'none' } = body;
  const text = Array.isArray(prompt) && prompt.length === 1 ? prompt[0] : prompt;
  if (typeof text !== 'string') throw fail('prompt must be a string (one prompt per call)');
  checkRange('max_tokens', maxTokens);
  checkRange('temperature', temperature);
  checkRange('top_p', topP);
  const stops = stop === undefined || stop === null ? [] : typeof stop === 'string' ? [stop] : stop;
  if (!Array.isArray(stops) || !stops.every((s) => typeof s === 'string')) throw fail('stop must be a string or a list of strings');
  if (seed !== undefined && seed !== null) checkRange('seed', seed);
  checkRange('n', n);
  if (typeof stream !== 'boolean') throw fail('stream must be true or false');
  if (logprobs !== null) checkRange('logprobs', logprobs);
  if (echo !== null && typeof echo !== 'boolean') throw fail('echo must be true or false');
  if (echo && logprobs !== null) {
    throw fail("echo with logprobs would need the prompt's own logprobs, which are not computed here; leave one of them out");
  }
  if (!DRAFTS.includes(draft)) throw fail(`draft ${JSON.stringify(draft)} is not one of ${DRAFTS.join(', ')} (gpt2-web's own parameter)`);
  const usage = body.stream_options?.include_usage === true;
  const opts = { maxTokens, temperature, topP, stop: stops };
  if (seed !== undefined && seed !== null) opts.seed = seed;
  if (n !== 1) opts.n = n; // choice i samples with seed + i
  if (logprobs !== null) opts.topLogprobs = Math.max(logprobs, 1); // the events carry `prob` only with candidates
  if (draft !== 'none') opts.draft = draft; // the engine refuses it with n > 1, and 'mtp' without heads
  for (const [key, option] of Object.entries(EXTENSIONS)) {
    const value = body[key];
    if (value === undefined || value === null) continue;
    if (key === 'ignore_eos') {
      if (typeof value !== 'boolean') throw fail('ignore_eos must be true or false');
    } else if (!(key === 'top_k' && value === -1)) { // vLLM's top_k: -1, off: the engine's 0
      checkRange(key, value);
    }
    opts[option] = key === 'top_k' && value === -1 ? 0 : value;
  }
  return { prompt: text, opts, stream, usage, logprobs, echo: echo === true };
}

/** `model.completions`: `{ create(body, { signal }) }`. */
export function completionsOf(model) {
  let made = 0;
  const head = () => ({
    id: `cmpl-gpt2web-${Date.now().toString(36)}-${(made++).toString(36)}`,
    object: 'text_completion', created: Math.floor(Date.now() / 1000), model: model.name,
  });
  const usageOf = (m) => ({ prompt_tokens: m.promptTokens, completion_tokens: m.outputTokens, total_tokens: m.promptTokens + m.outputTokens });
  const aborted = () => Object.assign(new Error('the request was aborted'), { name: 'AbortError' });

  async function create(body, { signal } = {}) {
    const { prompt, opts, stream, usage, logprobs: k, echo } = options(body);
    const lead = echo ? prompt : ''; // echo: the prompt before each choice's text
    if (signal !== undefined && !(signal instanceof AbortSignal)) throw fail('signal must be an AbortSignal');
    if (signal?.aborted) throw aborted();
    const h = head();
    if (!stream) {
      const events = [];
      const r = await model.generate(prompt, { ...opts, signal, onToken: k === null ? undefined : (ev) => events.push(ev) });
      if (r.stopReason === 'abort') throw aborted();
      const each = r.choices ?? [{ ...r, index: 0 }];
      const completion = each.reduce((sum, c) => sum + c.tokens.length, 0);
      // Every generated token, as usage counts them: a final end-of-text token ('<|endoftext|>') and
      // those of a matched stop text too, so there the strings run past `text` (as a stream's chunks).
      const logprobsFor = async (c) => {
        if (k === null) return null;
        const mine = events.filter((ev) => (ev.choice ?? 0) === c.index);
        const texts = await Promise.all(mine.map((ev) => tokenText(model, ev)));
        return logprobsOf(mine.map((ev, i) => [ev, texts[i]]), k);
      };
      const lps = await Promise.all(each.map(logprobsFor));
      return {
        ...h,
        choices: each.map((c, i) => ({ text: lead + c.text, index: c.index, logprobs: lps[i], finish_reason: finishReason(c.stopReason) })),
        usage: { ...usageOf(r.metrics), completion_tokens: completion, total_tokens: r.metrics.promptTokens + completion },
      };
    }
    const controller = new AbortController();
    const forward = () => controller.abort();
    signal?.addEventListener('abort', forward, { once: true });
    const tokens = model.stream(prompt, { ...opts, signal: controller.signal });
    async function* chunks() {
      const offsets = []; // by choice: where its next token's string starts
      try {
        if (echo) for (let i = 0; i < (opts.n ?? 1); i++) yield { ...h, choices: [{ text: prompt, index: i, logprobs: null, finish_reason: null }] };
        for await (const ev of tokens) {
          const i = ev.choice ?? 0;
          let lp = null;
          if (k !== null) {
            lp = logprobsOf([[ev, await tokenText(model, ev)]], k, offsets[i] ?? 0);
            offsets[i] = lp.text_offset[0] + lp.tokens[0].length;
          }
          yield { ...h, choices: [{ text: ev.text, index: i, logprobs: lp, finish_reason: null }] };
        }
        const r = await tokens.result;
        if (r.stopReason === 'abort') throw aborted();
        const each = r.choices ?? [{ ...r, index: 0 }];
        for (const c of each) {
          const lp = k === null ? null : logprobsOf([], k); // empty: the finishing chunk has no token
          yield { ...h, choices: [{ text: '', index: c.index, logprobs: lp, finish_reason: finishReason(c.stopReason) }] };
        }
        const completion = each.reduce((sum, c) => sum + c.tokens.length, 0);
        if (usage) yield { ...h, choices: [], usage: { ...usageOf(r.metrics), completion_tokens: completion, total_tokens: r.metrics.promptTokens + completion } };
      } finally {
        signal?.removeEventListener('abort', forward);
      }
    }
    const it = chunks();
    it.controller = controller; // as the OpenAI SDK's Stream: stream.controller.abort() stops it
    return it;
  }
  return Object.freeze({ create });
}
