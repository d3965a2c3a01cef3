// A stand-in for an OpenAI-compatible API, for the real-API lab's tests: POST /v1/completions and
// /v1/chat/completions with stream: true answer in OpenAI's server-sent events, with the delays
// and the failures the request names in its `model`:
//   "ttft=300 tpot=40"   the first token after 300 ms, each next one 40 ms later (max_tokens of them)
//   "fail=401" / "fail=403" / "fail=429"   that status, with OpenAI's error JSON (429: Retry-After 7)
//   "fail=malformed"     an event after two tokens that is not JSON
//   "fail=cut"           the connection destroyed after three tokens
//   "fail=nodone"        every token and the finish chunk, then the end without [DONE]
//   "fail=timeout"       headers never sent
//   "fail=json"          a JSON answer, not a stream
// Other paths are a 404. A request without `Authorization: Bearer <key>` (the key given to start) is a 401. Paths under
// /nocors/ answer without CORS headers (the browser refuses them). `requests` logs each request's
// method, path and Authorization header.
import http from 'node:http';

export function startOpenAiServer({ key = 'sk-test-123' } = {}) {
  const requests = [];
  const open = new Set();
  const server = http.createServer((req, res) => {
    const cors = !req.url.startsWith('/nocors/');
    requests.push({ method: req.method, path: req.url, authorization: req.headers.authorization ?? null });
    if (cors) {
      res.setHeader('Access-Control-Allow-Origin', '*');
      res.setHeader('Access-Control-Allow-Headers', 'Authorization, Content-Type');
      res.setHeader('Access-Control-Allow-Methods', 'POST, OPTIONS');
      res.setHeader('Access-Control-Expose-Headers', 'Retry-After');
    }
    if (req.method === 'OPTIONS') return res.writeHead(204).end();
    let raw = '';
    req.on('data', (c) => { raw += c; });
    req.on('end', () => answer(req, res, raw));
  });
  server.on('connection', (s) => {
    s.setNoDelay(true);
    open.add(s);
    s.on('close', () => open.delete(s));
  });

  function error(res, status, message, extra = {}) {
    res.writeHead(status, { 'Content-Type': 'application/json', ...extra });
    res.end(JSON.stringify({ error: { message, type: 'test_error', code: String(status) } }));
  }

  function answer(req, res, raw) {
    const chat = req.url.endsWith('/chat/completions');
    if (!/^(\/nocors)?\/v1\/(chat\/)?completions$/.test(req.url)) return error(res, 404, `no route ${req.url}`);
    let body;
    try {
      body = JSON.parse(raw);
    } catch {
      return error(res, 400, 'the body is not JSON');
    }
    if (req.headers.authorization !== `Bearer ${key}`) return error(res, 401, 'Incorrect API key provided.');
    const model = String(body.model ?? '');
    const fail = /fail=(\w+)/.exec(model)?.[1];
    const ttft = Number(/ttft=(\d+)/.exec(model)?.[1] ?? 50);
    const tpot = Number(/tpot=(\d+)/.exec(model)?.[1] ?? 10);
    if (fail === '401' || fail === '403') return error(res, Number(fail), fail === '401' ? 'Invalid key.' : 'You may not use this model.');
    if (fail === '429') return error(res, 429, 'Rate limit reached for requests.', { 'Retry-After': '7' });
    if (fail === 'timeout') return; // never answers (the client gives up)
    if (fail === 'json') {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      return res.end(JSON.stringify({ choices: [{ text: 'hello' }] }));
    }
    if (body.stream !== true) return error(res, 400, 'these tests stream');
    const n = Math.max(1, Math.min(500, Number(body.max_tokens) || 16));
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', Connection: 'keep-alive' });
    res.flushHeaders();
    const head = { id: 'cmpl-test', object: chat ? 'chat.completion.chunk' : 'text_completion', created: 1, model };
    const send = (obj) => res.write(`data: ${JSON.stringify(obj)}\n\n`);
    const piece = (i) => (chat
      ? { ...head, choices: [{ index: 0, delta: { content: ` t${i}` }, finish_reason: null }] }
      : { ...head, choices: [{ index: 0, text: ` t${i}`, logprobs: null, finish_reason: null }] });
    if (chat) send({ ...head, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] });
    let i = 0;
    const next = () => {
      if (res.destroyed) return;
      if (fail === 'malformed' && i === 2) {
        res.write('data: {"choices": [ this is not json\n\n');
        return res.end();
      }
      if (fail === 'cut' && i === 3) return res.socket.destroy();
      if (i < n) {
        send(piece(i++));
        return setTimeout(next, tpot);
      }
      send(chat ? { ...head, choices: [{ index: 0, delta: {}, finish_reason: 'length' }] }
        : { ...head, choices: [{ index: 0, text: '', logprobs: null, finish_reason: 'length' }] });
      if (body.stream_options?.include_usage) send({ ...head, choices: [], usage: { prompt_tokens: 3, completion_tokens: n, total_tokens: n + 3 } });
      if (fail !== 'nodone') res.write('data: [DONE]\n\n');
      res.end();
    };
    setTimeout(next, ttft);
  }

  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const origin = `http://127.0.0.1:${server.address().port}`;
      resolve({
        origin, key, requests,
        close: () => new Promise((done) => {
          for (const s of open) s.destroy();
          server.close(() => done());
        }),
      });
    });
  });
}
