// Lab: "A real API". The same measurement as the latency lab, against any OpenAI-compatible
// endpoint (a hosted API, or llama.cpp's server, Ollama or vLLM on this machine): POST
// /completions or /chat/completions with stream: true, read the server-sent events, time the
// first token (TTFT), the rest (TPOT) and the whole, for several max_tokens; fit total = a + b·n
// and put it beside the local model's line.
//
// The key: kept in the page's memory (the input) and sent only to the base URL given, in the
// Authorization header; stored (localStorage, which the code lab's sandbox worker has no access
// to) only when the student ticks the box, removed when they untick it. Nothing of it goes on
// `window` (the result hook `window.apiLab` carries numbers and texts only).
//
// Every failure is a sentence: 401/403, 404, 429, other statuses, a CORS refusal or nothing
// listening, an answer that is not a stream, a malformed event, an error event, a stream cut
// off, one that ends without [DONE], and a timeout (nothing for `timeoutMs`).

import { drawSeries, fitLine } from './charts.js';
import { fmtMs } from '../widget/text.js';

const STORE = 'gpt2-web.api-lab';

/** The URL of the endpoint: the base URL (ending in /v1, say) and the kind. */
export function endpointUrl(base, kind) {
  let url;
  try {
    url = new URL(base.trim());
  } catch {
    throw new Error(`"${base}" is not a URL: give the API's base URL, e.g. http://localhost:8080/v1`);
  }
  if (!/^https?:$/.test(url.protocol)) {
    throw new Error(`the base URL "${base}" does not start with http:// or https:// (e.g. http://localhost:8080/v1)`);
  }
  return `${url.href.replace(/\/+$/, '')}/${kind === 'chat' ? 'chat/completions' : 'completions'}`;
}

/** The sentence for an answer that is not 2xx. */
async function statusError(res, url) {
  let detail = '';
  try {
    const body = await res.text();
    try {
      detail = JSON.parse(body)?.error?.message ?? JSON.parse(body)?.message ?? '';
    } catch {
      detail = body.slice(0, 200);
    }
  } catch {
    // no body
  }
  const said = detail ? `: “${String(detail).trim()}”` : '';
  const s = res.status;
  if (s === 401) return `The API refused the key (401 Unauthorized${said}): check the API key.`;
  if (s === 403) return `The API refused the request (403 Forbidden${said}): the key may not use this model or endpoint.`;
  if (s === 404) return `Nothing at ${url} (404${said}): is the base URL right (it usually ends in /v1), and the model one the server has?`;
  if (s === 429) {
    const wait = res.headers.get('retry-after');
    return `Rate limited (429 Too Many Requests${said})${wait ? `: the API asks to wait ${wait} s` : ''}. Wait and run again, or measure fewer lengths.`;
  }
  if (s >= 500) return `The API failed (${s} ${res.statusText}${said}); try again later.`;
  return `The API answered ${s} ${res.statusText}${said}.`;
}

/**
 * One streamed request: resolves `{ n, events, ttftMs, tpotMs, totalMs, text, finish }` or
 * rejects with a sentence. `n` is the usage's completion_tokens when the server sends it, else the
 * events that carried text; TPOT is the time from the first text event to the last over n − 1.
 */
export async function measureOnce({ base, key, model, kind, prompt, maxTokens, timeoutMs = 30_000, signal }) {
  const url = endpointUrl(base, kind);
  const body = kind === 'chat'
    ? { model, messages: [{ role: 'user', content: prompt }], max_tokens: maxTokens, temperature: 0, stream: true, stream_options: { include_usage: true } }
    : { model, prompt, max_tokens: maxTokens, temperature: 0, stream: true, stream_options: { include_usage: true } };
  const controller = new AbortController();
  const stopped = () => controller.abort();
  signal?.addEventListener('abort', stopped, { once: true });
  let timedOut = false;
  let timer = null;
  const arm = () => {
    clearTimeout(timer);
    timer = setTimeout(() => { timedOut = true; controller.abort(); }, timeoutMs);
  };
  const t0 = performance.now();
  let events = 0;
  let text = '';
  let first = null;
  let last = null;
  let usage = null;
  let finish = null;
  const says = (what) => (timedOut ? `No answer from ${url} for ${timeoutMs / 1000} s ${what} (timeout).` : null);
  try {
    arm();
    let res;
    try {
      res = await fetch(url, {
        method: 'POST', signal: controller.signal, cache: 'no-store', credentials: 'omit', referrerPolicy: 'no-referrer',
        headers: { 'Content-Type': 'application/json', ...(key ? { Authorization: `Bearer ${key}` } : {}) },
        body: JSON.stringify(body),
      });
    } catch (e) {
      if (signal?.aborted) throw new Error('stopped');
      throw new Error(says('before it answered') ?? `The browser could not get an answer from ${url} (${e.message}): either nothing ` +
        `is listening there, or the server does not allow requests from this page (${location.origin}), which needs CORS: ` +
        'Access-Control-Allow-Origin, and the Authorization and Content-Type headers allowed. llama.cpp\'s server allows any ' +
        'origin; Ollama needs OLLAMA_ORIGINS; most hosted APIs do not answer browsers.');
    }
    if (!res.ok) throw new Error(await statusError(res, url));
    const type = res.headers.get('content-type') ?? '';
    if (!/text\/event-stream/i.test(type)) {
      throw new Error(`The API answered with ${type || 'no content type'}, not a stream of server-sent events (text/event-stream): does it support stream: true?`);
    }
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    let done = false;
    for (;;) {
      let chunk;
      try {
        chunk = await reader.read();
      } catch (e) {
        if (signal?.aborted) throw new Error('stopped');
        throw new Error(says(`after ${events} tokens`) ?? `The stream was cut off after ${events} tokens (${e.message}).`);
      }
      if (chunk.done) break;
      arm();
      buffer += chunk.value;
      const parts = buffer.split(/\r?\n\r?\n/);
      buffer = parts.pop();
      for (const part of parts) {
        const data = part.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).replace(/^ /, '')).join('\n');
        if (!data) continue; // a comment or keep-alive
        if (data === '[DONE]') {
          done = true;
          continue;
        }
        let json;
        try {
          json = JSON.parse(data);
        } catch {
          throw new Error(`Event ${events + 1} of the stream is not JSON: «${data.slice(0, 80)}»`);
        }
        if (json.error) throw new Error(`The API sent an error in the stream: ${json.error.message ?? JSON.stringify(json.error)}`);
        if (json.usage) usage = json.usage;
        const choice = json.choices?.[0];
        if (!choice) continue;
        const piece = choice.text ?? choice.delta?.content ?? '';
        if (choice.finish_reason) finish = choice.finish_reason;
        if (typeof piece !== 'string') throw new Error(`Event ${events + 1} of the stream has text that is not a string`);
        if (piece === '') continue;
        const now = performance.now();
        first ??= now;
        last = now;
        events++;
        text += piece;
      }
    }
    if (!done) {
      throw new Error(`The stream ended without [DONE] after ${events} tokens${finish ? ` (finish_reason ${finish})` : ''}: it was cut off, or the server does not follow OpenAI's format.`);
    }
    if (events === 0) throw new Error('The stream ended with [DONE] but no text: nothing to time (is max_tokens above 0, the model right?).');
    const totalMs = performance.now() - t0;
    const n = Number.isInteger(usage?.completion_tokens) && usage.completion_tokens > 0 ? usage.completion_tokens : events;
    return { n, events, ttftMs: first - t0, tpotMs: n > 1 ? (last - first) / (n - 1) : 0, totalMs, text, finish };
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', stopped);
  }
}

/** Fills the fields from storage where the student asked to keep them; wires the box. */
export function wireApiLab($) {
  try {
    const kept = JSON.parse(localStorage.getItem(STORE) ?? 'null');
    if (kept) {
      $('api-base').value = kept.base ?? '';
      $('api-model').value = kept.model ?? '';
      $('api-key').value = kept.key ?? '';
      $('api-remember').checked = true;
    }
  } catch {
    // storage unavailable or unreadable: start empty
  }
  $('api-remember').addEventListener('change', (e) => {
    if (!e.target.checked) {
      try {
        localStorage.removeItem(STORE);
      } catch {
        // nothing kept
      }
    }
  });
  drawSeries($('api-chart'), [], 'output tokens n', 'total ms', 'The API\'s line and the local model\'s appear here.');
}

/** Runs the lab: the API at each length, then the local model at the same lengths; resolves with what it showed. */
export async function runApiLab(localModel, $, signal) {
  const base = $('api-base').value;
  const key = $('api-key').value;
  const model = $('api-model').value.trim();
  const kind = $('api-kind').value;
  const prompt = $('prompt').value;
  const lengths = $('api-lengths').value.split(',').map((s) => Number(s.trim())).filter((n) => Number.isInteger(n) && n >= 1);
  if (lengths.length === 0) throw new Error('give the lengths as whole numbers separated by commas, e.g. 8,16,32');
  const timeoutMs = 1000 * Number($('api-timeout').value);
  if (!(timeoutMs >= 1000)) throw new Error('the timeout must be at least 1 second');
  endpointUrl(base, kind); // a wrong URL fails before anything is sent
  if ($('api-remember').checked) {
    try {
      localStorage.setItem(STORE, JSON.stringify({ base, model, key }));
    } catch {
      // storage refused: the key stays in memory only
    }
  }
  const status = $('api-status');
  const rows = $('api-table').querySelector('tbody');
  rows.replaceChildren();
  const api = [];
  for (const [i, maxTokens] of lengths.entries()) {
    status.textContent = `API: run ${i + 1} of ${lengths.length}, max_tokens ${maxTokens}…`;
    let r;
    try {
      r = await measureOnce({ base, key, model, kind, prompt, maxTokens, timeoutMs, signal });
    } catch (e) {
      if (e.message === 'stopped') return null;
      status.textContent = e.message;
      return { error: e.message, api };
    }
    api.push({ maxTokens, ...r });
    const tr = document.createElement('tr');
    const cells = [maxTokens, r.n, fmtMs(r.ttftMs), fmtMs(r.tpotMs), fmtMs(r.totalMs), r.text];
    for (const [k, v] of cells.entries()) {
      const td = document.createElement('td');
      td.textContent = String(v);
      td.dataset.label = ['max_tokens', 'Tokens', 'TTFT', 'TPOT', 'Total', 'Text'][k];
      tr.append(td);
    }
    rows.append(tr);
  }
  const fitOf = (pts) => (new Set(pts.map((p) => p.n)).size >= 2 ? fitLine(pts.map((p) => p.n), pts.map((p) => p.totalMs)) : null);
  const apiFit = fitOf(api);
  status.textContent = 'The local model at the same lengths…';
  const local = [];
  if (localModel) {
    await localModel.generate(prompt, { maxTokens: 2, temperature: 0, signal }); // warm-up
    for (const n of lengths) {
      const r = await localModel.generate(prompt, { maxTokens: n, temperature: 0, ignoreEos: true, signal });
      if (r.stopReason === 'abort') return null;
      local.push({ n: r.metrics.outputTokens, totalMs: r.metrics.totalMs, ttftMs: r.metrics.ttftMs, tpotMs: r.metrics.tpotMs });
    }
  }
  const localFit = fitOf(local);
  drawSeries($('api-chart'), [
    { label: 'the API', points: api.map((p) => [p.n, p.totalMs]), fit: apiFit, colour: 'total' },
    { label: 'this page\'s model', points: local.map((p) => [p.n, p.totalMs]), fit: localFit, colour: 'perceived' },
  ], 'output tokens n', 'total ms', '');
  const mean = (pts, k) => pts.reduce((s, p) => s + p[k], 0) / pts.length;
  const line = (f) => `total ≈ ${fmtMs(f.a)} + ${fmtMs(f.b)} × n (R² ${f.r2.toFixed(3)})`;
  let text = `The API: measured TTFT ${fmtMs(mean(api, 'ttftMs'))}, TPOT ${fmtMs(mean(api, 'tpotMs'))}`;
  text += apiFit ? `; ${line(apiFit)}. ` : '. Measure two lengths or more for a line. ';
  if (localFit) text += `This page's model: ${line(localFit)}. `;
  text += 'Streaming gives both their first token early; the slope, the time per token, is what a longer answer costs.';
  status.textContent = text;
  return { api, apiFit, local, localFit, text };
}
