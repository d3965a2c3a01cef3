#!/usr/bin/env node
// `gpt2 serve` from the outside, as its clients see it: start it (startServe), ask it
// (complete: a whole answer; stream: server-sent events read as they come), and a load run
// (loadRun): the same requests first one at a time, then from many streaming clients at once;
// every answer must equal its one-at-a-time twin (batching changes no token), none may be lost.
// tests/e2e/gpt2-serve.test.mjs uses these; run directly it is the benchmark
// (`./build.sh bench --serve`), all traffic to 127.0.0.1:
//
//   node tools/serve_load.mjs --bin target/release/gpt2 [--model DIR] [--clients 64]
//        [--requests 500] [--max-tokens 32] [--json]
//
// It prints, for each run, the tokens per second, time to first token p50/p99, and the ratio of
// the concurrent run's tokens per second to the one-at-a-time run's.
import { spawn } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * `gpt2 serve` on a free loopback port; resolves once it listens: { url, proc, stderr(), stop() }.
 * stop() sends SIGTERM and resolves with { code, signal, ms } when it has exited.
 */
export function startServe(bin, args = [], { timeoutMs = 60_000 } = {}) {
  const proc = spawn(bin, ['serve', '--host', '127.0.0.1', '--port', '0', ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  proc.stderr.on('data', (d) => { err += d; });
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { proc.kill('SIGKILL'); reject(new Error(`gpt2 serve did not listen within ${timeoutMs} ms: ${err}`)); }, timeoutMs);
    exited.then(({ code }) => { clearTimeout(timer); reject(new Error(`gpt2 serve exited (${code}) before listening: ${err}`)); });
    readline.createInterface({ input: proc.stdout }).on('line', (line) => {
      const m = /http:\/\/(127\.0\.0\.1:\d+)\/v1/.exec(line);
      if (!m) return;
      clearTimeout(timer);
      const stop = async () => {
        const t0 = performance.now();
        if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
        const r = await exited;
        return { ...r, ms: performance.now() - t0 };
      };
      resolve({ url: `http://${m[1]}`, proc, stderr: () => err, stop, exited });
    });
  });
}

/** A POST (or a GET without a body): { status, headers, json } (json null when the body is not JSON). */
export async function complete(url, body, { path: route = '/v1/completions', signal, headers = {} } = {}) {
  const init = body === undefined ? { signal, headers } : {
    method: 'POST', signal, headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  };
  const res = await fetch(url + route, init);
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, headers: res.headers, json, text };
}

/**
 * A streamed completion read event by event: { status, chunks, texts (by choice), finish (by
 * choice), usage, done (saw [DONE]), error, ttftMs, totalMs }. `onChunk(chunk)` returning true
 * stops reading (the client hangs up).
 */
export async function stream(url, body, { onChunk, signal } = {}) {
  const t0 = performance.now();
  const controller = new AbortController();
  signal?.addEventListener('abort', () => controller.abort(), { once: true });
  const res = await fetch(`${url}/v1/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, signal: controller.signal,
    body: JSON.stringify({ ...body, stream: true }),
  });
  const out = { status: res.status, chunks: [], texts: [], finish: [], usage: null, done: false, error: null, ttftMs: null, totalMs: null };
  if (!res.ok || !res.headers.get('content-type')?.startsWith('text/event-stream')) {
    out.error = await res.json().catch(() => null);
    return out;
  }
  const decoder = new TextDecoder();
  let buffer = '';
  try {
    for await (const bytes of res.body) {
      buffer += decoder.decode(bytes, { stream: true });
      let cut;
      while ((cut = buffer.indexOf('\n\n')) >= 0) {
        const event = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const data = event.startsWith('data: ') ? event.slice(6) : null;
        if (data === null) throw new Error(`not a server-sent event: ${JSON.stringify(event)}`);
        if (data === '[DONE]') { out.done = true; continue; }
        const chunk = JSON.parse(data);
        if (chunk.error) { out.error = chunk; continue; }
        out.chunks.push(chunk);
        if (chunk.usage) out.usage = chunk.usage;
        for (const c of chunk.choices) {
          out.texts[c.index] = (out.texts[c.index] ?? '') + c.text;
          if (c.finish_reason) out.finish[c.index] = c.finish_reason;
          else if (out.ttftMs === null) out.ttftMs = performance.now() - t0;
        }
        if (onChunk?.(chunk)) { controller.abort(); return out; }
      }
    }
  } catch (e) {
    if (e.name !== 'AbortError') throw e;
  }
  out.totalMs = performance.now() - t0;
  return out;
}

/** The p-th percentile (0..100) of numbers. */
export function percentile(xs, p) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] : NaN;
}

/**
 * `requests` streamed requests (request(i) makes the i-th body), at most `clients` at once:
 * { wallMs, tokens, tokensPerSec, ttft: [ms], results: [stream()'s answer by i] }.
 */
export async function runAll(url, { clients, requests, request }) {
  const results = new Array(requests);
  let next = 0;
  const t0 = performance.now();
  const client = async () => {
    for (let i = next++; i < requests; i = next++) results[i] = await stream(url, request(i));
  };
  await Promise.all(Array.from({ length: Math.min(clients, requests) }, client));
  const wallMs = performance.now() - t0;
  const tokens = results.reduce((n, r) => n + (r.usage?.completion_tokens ?? 0), 0);
  return { wallMs, tokens, tokensPerSec: tokens / (wallMs / 1000), ttft: results.map((r) => r.ttftMs), results };
}

/** Shakespeare's openings, so requests share prefixes (the prompt cache) and differ in seed. */
const PROMPTS = ['ROMEO:', 'JULIET:', 'First Citizen:\nBefore we proceed any further, hear me speak.', 'KING RICHARD III:\nNow is the winter'];

/** The load run's i-th request: sampled (temperature 0.8, seed i), every token asked for. */
export function loadRequest(i, maxTokens) {
  return { prompt: PROMPTS[i % PROMPTS.length], max_tokens: maxTokens, temperature: 0.8, seed: i, ignore_eos: true, stream_options: { include_usage: true } };
}

/**
 * The load run: the same requests one at a time, then from `clients` clients at once. Lost: an
 * answer that did not end in [DONE] with its usage, or whose text differs from its twin's.
 */
export async function loadRun(url, { clients, requests, maxTokens }) {
  const request = (i) => loadRequest(i, maxTokens);
  const alone = await runAll(url, { clients: 1, requests, request });
  const together = await runAll(url, { clients, requests, request });
  const lost = together.results.filter((r, i) => !r.done || !r.usage || r.error || r.texts[0] !== alone.results[i].texts[0]).length
    + alone.results.filter((r) => !r.done || !r.usage || r.error).length;
  return { alone, together, lost, ratio: together.tokensPerSec / alone.tokensPerSec };
}

function argOf(argv, name, fallback) {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : fallback;
}

async function main(argv) {
  const bin = argOf(argv, 'bin', path.join(process.env.CARGO_TARGET_DIR || path.join(ROOT, 'target'), 'release/gpt2'));
  const model = argOf(argv, 'model', 'www/models/gpt2-shakespeare');
  const clients = Number(argOf(argv, 'clients', 64));
  const requests = Number(argOf(argv, 'requests', 500));
  const maxTokens = Number(argOf(argv, 'max-tokens', 32));
  const server = await startServe(bin, ['--model', model, '--backend', argOf(argv, 'backend', 'cpu')]);
  try {
    const r = await loadRun(server.url, { clients, requests, maxTokens });
    const metrics = (await complete(server.url, undefined, { path: '/metrics' })).text;
    const steps = Number(/^gpt2_web_model_steps_total (\d+)/m.exec(metrics)?.[1]);
    const row = (name, run) => ({
      run: name, clients: name === 'one at a time' ? 1 : clients, requests, tokens: run.tokens, seconds: +(run.wallMs / 1000).toFixed(2),
      tokensPerSec: Math.round(run.tokensPerSec), ttftP50Ms: +percentile(run.ttft, 50).toFixed(1), ttftP99Ms: +percentile(run.ttft, 99).toFixed(1),
    });
    const rows = [row('one at a time', r.alone), row(`${clients} at once`, r.together)];
    const summary = { cpu: os.cpus()[0]?.model, model, maxTokens, ratio: +r.ratio.toFixed(2), lost: r.lost, modelSteps: steps, rows };
    if (argv.includes('--json')) console.log(JSON.stringify(summary));
    else {
      console.log(`gpt2 serve under load: ${model}, ${requests} streamed requests of ${maxTokens} tokens, on ${summary.cpu}`);
      console.table(rows);
      console.log(`${clients} clients at once: ${summary.ratio}× the tokens/s of one at a time; lost: ${r.lost}; model steps in all: ${steps}`);
    }
    if (r.lost) process.exitCode = 1;
  } finally {
    const s = await server.stop();
    if (s.code !== 0) console.error(`gpt2 serve exited with ${s.code ?? s.signal} after SIGTERM`);
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  main(process.argv.slice(2)).catch((e) => { console.error(e); process.exit(1); });
}
