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
// Imports nothing: gpt2.js passes the model in.

/** Parameters OpenAI's API takes that would change the answer and that this facade cannot honour. */
const UNSUPPORTED = {
  best_of: (v) => v === 1, echo: (v) => v === false, logprobs: (v) => v === null || v === 0,
  suffix: (v) => v === null || v === '', logit_bias: (v) => v === null || Object.keys(v).length === 0,
  presence_penalty: (v) => v === 0, frequency_penalty: (v) => v === 0,
};
/** Parameters taken and not needed (the model is the loaded one; `user` is for the provider's logs). */
const IGNORED = ['model', 'user'];
const KNOWN = ['prompt', 'max_tokens', 'temperature', 'top_p', 'stop', 'seed', 'n', 'stream', 'stream_options'];

const fail = (message) => Object.assign(new Error(message), { code: 'param' });

/** finish_reason from the engine's stopReason. */
function finishReason(stopReason) {
  return stopReason === 'max_tokens' || stopReason === 'context' ? 'length' : 'stop';
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
  const { prompt, max_tokens: maxTokens = 16, temperature = 1, top_p: topP = 1, stop, seed, n = 1, stream = false } = body;
  const text = Array.isArray(prompt) && prompt.length === 1 ? prompt[0] : prompt;
  if (typeof text !== 'string') throw fail('prompt must be a string (one prompt per call)');
  if (!(Number.isInteger(maxTokens) && maxTokens >= 1)) throw fail(`max_tokens ${JSON.stringify(maxTokens)} is not a whole number ≥ 1`);
  if (!(typeof temperature === 'number' && temperature >= 0 && temperature <= 2)) {
    throw fail(`temperature ${JSON.stringify(temperature)} is not a number from 0 to 2`);
  }
  if (!(typeof topP === 'number' && topP > 0 && topP <= 1)) throw fail(`top_p ${JSON.stringify(topP)} is not a number in (0, 1]`);
  const stops = stop === undefined || stop === null ? [] : typeof stop === 'string' ? [stop] : stop;
  if (!Array.isArray(stops) || !stops.every((s) => typeof s === 'string')) throw fail('stop must be a string or a list of strings');
  if (seed !== undefined && seed !== null && !Number.isInteger(seed)) throw fail(`seed ${JSON.stringify(seed)} is not a whole number`);
  if (typeof stream !== 'boolean') throw fail('stream must be true or false');
  const usage = body.stream_options?.include_usage === true;
  const opts = { maxTokens, temperature, topP, stop: stops };
  if (seed !== undefined && seed !== null) opts.seed = seed;
  if (n !== 1) opts.n = n; // the engine checks it (1 to 16; choice i samples with seed + i)
  return { prompt: text, opts, stream, usage };
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
    const { prompt, opts, stream, usage } = options(body);
    if (signal !== undefined && !(signal instanceof AbortSignal)) throw fail('signal must be an AbortSignal');
    if (signal?.aborted) throw aborted();
    const h = head();
    if (!stream) {
      const r = await model.generate(prompt, { ...opts, signal });
      if (r.stopReason === 'abort') throw aborted();
      const each = r.choices ?? [{ ...r, index: 0 }];
      const completion = each.reduce((sum, c) => sum + c.tokens.length, 0);
      return {
        ...h,
        choices: each.map((c) => ({ text: c.text, index: c.index, logprobs: null, finish_reason: finishReason(c.stopReason) })),
        usage: { ...usageOf(r.metrics), completion_tokens: completion, total_tokens: r.metrics.promptTokens + completion },
      };
    }
    const controller = new AbortController();
    const forward = () => controller.abort();
    signal?.addEventListener('abort', forward, { once: true });
    const tokens = model.stream(prompt, { ...opts, signal: controller.signal });
    async function* chunks() {
      try {
        for await (const ev of tokens) {
          yield { ...h, choices: [{ text: ev.text, index: ev.choice ?? 0, logprobs: null, finish_reason: null }] };
        }
        const r = await tokens.result;
        if (r.stopReason === 'abort') throw aborted();
        const each = r.choices ?? [{ ...r, index: 0 }];
        for (const c of each) yield { ...h, choices: [{ text: '', index: c.index, logprobs: null, finish_reason: finishReason(c.stopReason) }] };
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
