// `gpt2 serve` with real HTTP clients (Node's fetch) on 127.0.0.1: the endpoints, greedy text equal
// to the CLI's, sixteen clients at once each given its one-at-a-time answer in far fewer model
// steps, every bad request with its status and OpenAI's error JSON, a full queue's 429, a client
// hanging up mid-stream, SIGTERM during a stream, and the page's real-API lab measuring it from
// another origin.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  cliPath, MODEL_FILE, MODEL_CONFIG, PROMPT, PROMPT2, nativeGenerate, nativeTokenize, serveAndLaunch, withPage,
} from './harness.mjs';
import { startServe, complete, stream, runAll, loadRequest } from '../../tools/serve_load.mjs';

const T = { timeout: 120_000 };
let server;
const env = serveAndLaunch(); // the page, on another origin than the server

before(async () => {
  server = await startServe(cliPath(), ['--model', MODEL_FILE, '--backend', 'cpu', '--alias', 'demo']);
});

after(async () => {
  const s = await server.stop();
  assert.equal(s.code, 0, `exit after SIGTERM: ${s.code ?? s.signal}; stderr: ${server.stderr()}`);
});

/** A number of /metrics by its name (and labels). */
async function metric(name) {
  const text = (await complete(server.url, undefined, { path: '/metrics' })).text;
  const m = new RegExp(`^${name.replace(/[{}"]/g, '\\$&')} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

/** OpenAI's error JSON with this status, param and code; the message a sentence. */
function assertError(r, status, { param, code, includes } = {}) {
  assert.equal(r.status, status, r.text);
  const e = r.json?.error;
  assert.ok(e && typeof e.message === 'string' && e.message.length > 10, `error JSON: ${r.text}`);
  assert.ok(typeof e.type === 'string');
  if (param !== undefined) assert.equal(e.param, param, r.text);
  if (code !== undefined) assert.equal(e.code, code, r.text);
  for (const s of includes ?? []) assert.ok(e.message.includes(s), `"${e.message}" names ${s}`);
}

test('the endpoints: health, models, tokenize and detokenize as the CLI, metrics, chat refused', T, async () => {
  assert.deepEqual((await complete(server.url, undefined, { path: '/health' })).json, { status: 'ok' });
  const models = (await complete(server.url, undefined, { path: '/v1/models' })).json;
  assert.equal(models.object, 'list');
  assert.deepEqual(models.data.map((m) => [m.id, m.object, m.max_model_len]), [['demo', 'model', MODEL_CONFIG.n_positions]]);
  const text = `${PROMPT} Hello, wörld`;
  const ids = nativeTokenize(text);
  assert.deepEqual((await complete(server.url, { content: text }, { path: '/tokenize' })).json, { tokens: ids });
  const pieces = (await complete(server.url, { content: text, with_pieces: true }, { path: '/tokenize' })).json.tokens;
  assert.deepEqual(pieces.map((p) => p.id), ids);
  assert.deepEqual((await complete(server.url, { tokens: ids }, { path: '/detokenize' })).json, { content: text });
  assertError(await complete(server.url, { tokens: [MODEL_CONFIG.vocab_size] }, { path: '/detokenize' }), 400, { param: 'tokens' });
  assertError(await complete(server.url, { messages: [{ role: 'user', content: 'hi' }] }, { path: '/v1/chat/completions' }), 400, { code: 'chat_not_supported' });
  const metrics = (await complete(server.url, undefined, { path: '/metrics' }));
  assert.match(metrics.headers.get('content-type'), /^text\/plain/);
  for (const name of ['gpt2_web_requests_total{status="200"}', 'gpt2_web_prompt_tokens_total', 'gpt2_web_generation_tokens_total',
    'gpt2_web_queue_depth', 'gpt2_web_batch_size', 'gpt2_web_model_steps_total', 'gpt2_web_time_to_first_token_seconds_count',
    'gpt2_web_time_per_output_token_seconds_count']) {
    assert.ok(metrics.text.includes(`\n${name} `) || metrics.text.startsWith(`${name} `) || metrics.text.includes(`${name} `), `${name} in /metrics`);
  }
  // CORS: a page on another origin may call it.
  const pre = await fetch(`${server.url}/v1/completions`, { method: 'OPTIONS', headers: { origin: 'https://course.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type,authorization' } });
  assert.equal(pre.headers.get('access-control-allow-origin'), '*');
  assert.match(pre.headers.get('access-control-allow-methods'), /POST/);
});

test('greedy text equals the CLI\'s, whole and streamed, with usage; token ids, echo and n as alone', T, async () => {
  const cli = nativeGenerate(PROMPT, 24);
  const body = { prompt: PROMPT, max_tokens: 24, temperature: 0 };
  const whole = (await complete(server.url, body)).json;
  assert.equal(whole.object, 'text_completion');
  assert.equal(whole.choices[0].text, cli.text);
  assert.equal(whole.choices[0].finish_reason, cli.stopReason === 'max_tokens' ? 'length' : 'stop');
  assert.deepEqual(whole.usage, { prompt_tokens: cli.metrics.promptTokens, completion_tokens: cli.tokens.length, total_tokens: cli.metrics.promptTokens + cli.tokens.length });
  const streamed = await stream(server.url, { ...body, stream_options: { include_usage: true } });
  assert.ok(streamed.done, 'ends with data: [DONE]');
  assert.equal(streamed.texts[0], cli.text);
  assert.deepEqual(streamed.usage, whole.usage);
  const ids = nativeTokenize(PROMPT);
  assert.equal((await complete(server.url, { ...body, prompt: ids })).json.choices[0].text, cli.text);
  assert.equal((await complete(server.url, { ...body, echo: true })).json.choices[0].text, PROMPT + cli.text);
  // logprobs: one entry per generated token, the picked one among the top.
  const lp = (await complete(server.url, { ...body, max_tokens: 6, logprobs: 2 })).json.choices[0].logprobs;
  assert.equal(lp.tokens.length, 6);
  lp.tokens.forEach((t, i) => assert.equal(lp.top_logprobs[i][t], lp.token_logprobs[i]));
  // n: choice i is the request alone with seed + i.
  const sampled = { prompt: PROMPT2, max_tokens: 16, temperature: 0.9, seed: 7 };
  const three = (await complete(server.url, { ...sampled, n: 3 })).json.choices;
  for (const c of three) {
    const alone = (await complete(server.url, { ...sampled, seed: 7 + c.index })).json.choices[0];
    assert.equal(c.text, alone.text, `choice ${c.index}`);
  }
});

test('sixteen clients at once: each gets its answer alone, in far fewer model steps', T, async () => {
  const request = (i) => loadRequest(i, 24);
  const steps0 = await metric('gpt2_web_model_steps_total');
  const alone = await runAll(server.url, { clients: 1, requests: 16, request });
  const steps1 = await metric('gpt2_web_model_steps_total');
  const together = await runAll(server.url, { clients: 16, requests: 16, request });
  const steps2 = await metric('gpt2_web_model_steps_total');
  together.results.forEach((r, i) => {
    assert.ok(r.done && r.usage?.completion_tokens === 24, `request ${i} complete`);
    assert.equal(r.texts[0], alone.results[i].texts[0], `request ${i}: the same text at once as alone`);
  });
  const [sequential, batched] = [steps1 - steps0, steps2 - steps1];
  console.log(`16 requests of 24 tokens: ${sequential} model steps (${alone.wallMs.toFixed(0)} ms) one at a time, ${batched} (${together.wallMs.toFixed(0)} ms) at once`);
  assert.ok(sequential >= 16 * 24, `one at a time: a step per token (${sequential})`);
  assert.ok(batched * 4 <= sequential, `at once: the requests share steps (${batched} against ${sequential})`);
});

test('bad requests: each its status and error JSON, naming what is wrong', T, async () => {
  const bad = (body) => complete(server.url, body);
  assertError(await bad('{"prompt": "x",'), 400, { includes: ['JSON'] });
  assertError(await bad([1, 2]), 400);
  assertError(await bad({ prompt: 'x', temperature: 'hot' }), 400, { param: 'temperature' });
  assertError(await bad({ prompt: 'x', temperature: 2.5 }), 400, { param: 'temperature', includes: ['2.5'] });
  assertError(await bad({ prompt: 'x', top_p: 0 }), 400, { param: 'top_p' });
  assertError(await bad({ prompt: 'x', max_tokens: -1 }), 400, { param: 'max_tokens' });
  assertError(await bad({ prompt: 'x', n: 1000 }), 400, { param: 'n' });
  assertError(await bad({ prompt: 'x', logprobs: 2, echo: true }), 400, { param: 'echo' });
  assertError(await bad({ prompt: 'x', stop: [1] }), 400, { param: 'stop' });
  assertError(await bad({ prompt: 'x', presence_penalty: 0.5 }), 400, { param: 'presence_penalty' });
  assertError(await bad({ prompt: 'x', frobnicate: 1 }), 400, { param: 'frobnicate' });
  assertError(await bad({ prompt: ['a', 'b'] }), 400, { param: 'prompt' });
  assertError(await bad({ prompt: [MODEL_CONFIG.vocab_size] }), 400, { param: 'prompt' });
  const n = MODEL_CONFIG.n_positions;
  const long = Array.from({ length: n + 44 }, () => 13);
  assertError(await bad({ prompt: long }), 400, { code: 'context_length_exceeded', includes: [String(n + 44), String(n)] });
  const longStream = await stream(server.url, { prompt: long });
  assert.equal(longStream.status, 400, 'a stream refused before it starts');
  assertError(await complete(server.url, undefined, { path: '/v2/nothing' }), 404);
  assertError(await complete(server.url, {}, { path: '/health' }), 405);
  assertError(await bad(JSON.stringify({ prompt: 'x'.repeat(1.5 * 2 ** 20) })), 413);
  // The server answers on after all that.
  assert.equal((await bad({ prompt: PROMPT, max_tokens: 2 })).status, 200);
});

test('a client that hangs up mid-stream frees its sequence at the next step', T, async () => {
  const made0 = await metric('gpt2_web_generation_tokens_total');
  const body = { prompt: PROMPT, max_tokens: 200, ignore_eos: true, temperature: 0 };
  const cut = await stream(server.url, body, { onChunk: (c) => c.choices[0]?.text !== undefined && true });
  assert.equal(cut.chunks.length, 1);
  let made = 0;
  for (let i = 0; i < 100 && made === 0; i++) {
    await new Promise((r) => setTimeout(r, 50));
    made = (await metric('gpt2_web_generation_tokens_total')) - made0;
  }
  assert.ok(made > 0 && made < 200, `the hung-up request ended early (${made} of 200 tokens made)`);
  assert.equal(await metric('gpt2_web_batch_size'), 0);
});

test('a full queue is a 429 with Retry-After; SIGTERM ends a running stream cleanly and exits', T, async () => {
  const small = await startServe(cliPath(), ['--model', MODEL_FILE, '--backend', 'cpu', '--queue', '1']);
  try {
    const answers = await Promise.all(Array.from({ length: 64 }, (_, i) => complete(small.url, { prompt: PROMPT, max_tokens: 48, ignore_eos: true, seed: i })));
    const refused = answers.filter((r) => r.status === 429);
    assert.ok(refused.length > 0, 'some refused');
    for (const r of refused) {
      assertError(r, 429, { code: 'rate_limit_exceeded' });
      assert.ok(Number(r.headers.get('retry-after')) > 0);
    }
    assert.ok(answers.every((r) => r.status === 429 || (r.status === 200 && r.json.usage.completion_tokens === 48)));
    let stopped;
    const running = await stream(small.url, { prompt: PROMPT, max_tokens: 240, ignore_eos: true }, {
      onChunk: () => { stopped ??= small.stop(); return false; },
    });
    const s = await stopped;
    assert.ok(running.done && running.finish[0], `the stream ended with a finish_reason and [DONE] (${running.finish[0]})`);
    assert.equal(s.code, 0, small.stderr());
    assert.ok(s.ms < 10_000, `exited ${s.ms.toFixed(0)} ms after SIGTERM`);
    await assert.rejects(fetch(`${small.url}/health`), 'no longer listening');
  } finally {
    await small.stop();
  }
});

test('--api-key: without the key a 401 naming the header, with it the answer; /health and /metrics open', T, async () => {
  const keyed = await startServe(cliPath(), ['--model', MODEL_FILE, '--backend', 'cpu', '--api-key', 'sk-class-42']);
  try {
    const body = { prompt: PROMPT, max_tokens: 2 };
    assertError(await complete(keyed.url, body), 401, { code: 'invalid_api_key', includes: ['Authorization: Bearer'] });
    assertError(await complete(keyed.url, body, { headers: { authorization: 'Bearer sk-class-41' } }), 401);
    assertError(await complete(keyed.url, { content: 'x' }, { path: '/tokenize' }), 401);
    const ok = await complete(keyed.url, body, { headers: { authorization: 'Bearer sk-class-42' } });
    assert.equal(ok.status, 200, ok.text);
    assert.equal((await complete(keyed.url, undefined, { path: '/health' })).status, 200);
    assert.match((await complete(keyed.url, undefined, { path: '/metrics' })).text, /gpt2_web_requests_total\{status="401"\} 3/);
  } finally {
    await keyed.stop();
  }
});

test('the prompt cache is shared across requests: a prompt seen before runs only its new tokens', T, async () => {
  const prompt = `${PROMPT2} ${'and so the story goes on '.repeat(8)}`;
  const cached0 = await metric('gpt2_web_cached_prompt_tokens_total');
  const first = (await complete(server.url, { prompt, max_tokens: 4, temperature: 0 })).json;
  const cached1 = await metric('gpt2_web_cached_prompt_tokens_total');
  const again = (await complete(server.url, { prompt, max_tokens: 4, temperature: 0 })).json;
  const cached2 = await metric('gpt2_web_cached_prompt_tokens_total');
  assert.equal(again.choices[0].text, first.choices[0].text);
  assert.ok(cached2 - cached1 >= first.usage.prompt_tokens - 1, `the second request reused its prompt (${cached2 - cached1} of ${first.usage.prompt_tokens} tokens)`);
  assert.ok(cached1 - cached0 < first.usage.prompt_tokens - 1, 'the first ran its prompt');
});

test('the page\'s real-API lab measures gpt2 serve from another origin (CORS), streamed', T, async () => {
  await withPage(env.browser, `${env.server.origin}/`, async (page) => {
    await page.waitForFunction(() => window.pageState === 'ready', null, { timeout: 90_000 });
    await page.fill('#api-base', `${server.url}/v1`);
    await page.fill('#api-key', 'sk-local');
    await page.fill('#api-model', 'demo');
    await page.selectOption('#api-kind', 'completions');
    await page.fill('#api-lengths', '4,8');
    await page.click('#api-run');
    await page.waitForFunction(() => window.apiLab || !document.getElementById('error').hidden, null, { timeout: 60_000 });
    const lab = await page.evaluate(() => window.apiLab) ?? {};
    assert.ok(lab.api && lab.error === undefined, lab.error ?? await page.locator('#error').innerText());
    assert.deepEqual(lab.api.map((r) => r.n), [4, 8]);
    assert.ok(lab.api.every((r) => r.ttftMs > 0 && r.tpotMs > 0));
  });
});

test('the page\'s completions facade and gpt2 serve accept and refuse the same requests', T, async () => {
  // Bodies both take as they are (the server also takes token-id prompts; the facade's model is
  // the loaded one). Each: accepted by both, or refused by both naming the same field; an
  // accepted one with echo gives the prompt before the text in both.
  const bodies = [
    { prompt: PROMPT, max_tokens: 3, temperature: 0 },
    { prompt: PROMPT, max_tokens: 3, top_k: -1, min_p: 0.05, repetition_penalty: 1.2, ignore_eos: true, seed: 3 },
    { prompt: PROMPT, max_tokens: 3, stop: ['\n'], n: 2, logprobs: 2, best_of: 1, presence_penalty: 0 },
    { prompt: PROMPT, max_tokens: 3, draft: 'prompt-lookup', temperature: 0 },
    { prompt: PROMPT, max_tokens: 3, echo: true, n: 2 },
    { prompt: PROMPT, echo: true, logprobs: 1 },
    { prompt: PROMPT, echo: 'yes' },
    { prompt: PROMPT, temperature: 2.5 },
    { prompt: PROMPT, top_p: 0 },
    { prompt: PROMPT, max_tokens: 0 },
    { prompt: PROMPT, n: 1000 },
    { prompt: PROMPT, logprobs: 101 },
    { prompt: PROMPT, top_k: -2 },
    { prompt: PROMPT, min_p: 1.5 },
    { prompt: PROMPT, repetition_penalty: 0 },
    { prompt: PROMPT, ignore_eos: 'yes' },
    { prompt: PROMPT, stop: [1] },
    { prompt: PROMPT, seed: -1 },
    { prompt: PROMPT, draft: 'sometimes' },
    { prompt: PROMPT, frequency_penalty: 1 },
    { prompt: PROMPT, frobnicate: true },
  ];
  let facade;
  const blank = `${env.server.origin}/__serve-test.html`;
  await withPage(env.browser, 'about:blank', async (page) => {
    await page.route(blank, (route) => route.fulfill({ contentType: 'text/html', body: '<!doctype html><title>facade</title>' }));
    await page.goto(blank);
    facade = await page.evaluate(async (bodies) => {
      const { Gpt2 } = await import('/gpt2.js');
      const model = await Gpt2.load({ backend: 'cpu' });
      const out = [];
      for (const body of bodies) {
        try {
          const r = await model.completions.create(body);
          out.push({ ok: true, texts: r.choices.map((c) => c.text) });
        } catch (e) {
          out.push({ ok: false, message: e.message });
        }
      }
      model.dispose();
      return out;
    }, bodies);
  });
  for (const [i, body] of bodies.entries()) {
    const r = await complete(server.url, body);
    const served = r.status === 200;
    const said = JSON.stringify(body);
    assert.equal(served, facade[i].ok, `${said}: server ${r.status} ${r.json?.error?.message ?? ''}, facade ${facade[i].message ?? 'ok'}`);
    if (served && body.echo) {
      for (const texts of [facade[i].texts, r.json.choices.map((c) => c.text)]) assert.ok(texts.every((t) => t.startsWith(PROMPT)), said);
    }
    if (!served) {
      assert.equal(r.status, 400, said);
      assert.ok(facade[i].message.includes(r.json.error.param), `${said}: the facade names ${r.json.error.param}: ${facade[i].message}`);
    }
  }
});
