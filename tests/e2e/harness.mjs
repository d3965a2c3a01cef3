// Shared setup of the browser tests: the static server (tools/serve.mjs on a free port), Debian's
// Chromium through playwright-core, a request log per page (every test asserts nothing left
// 127.0.0.1), and the native CLI as the reference for greedy text.
//
// Environment: CHROMIUM (default: `chromium` on PATH), CARGO_TARGET_DIR (as in build.sh; the CLI
// is $CARGO_TARGET_DIR/debug/gpt2, built by `cargo test`), GPT2_E2E_MODEL (the model folder under
// www/models/, default gpt2-shakespeare), GPT2_E2E_PROMPTS (two prompts separated by '|', for a model
// whose vocabulary lacks the default prompts' tokens, e.g. "The|He said" for tests/fixtures/tiny-random).
import { chromium } from 'playwright-core';
import assert from 'node:assert/strict';
import { before, after } from 'node:test';
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { keepWorkers, observeNavigations } from './observe.mjs';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const OUT = path.join(ROOT, 'tests/e2e/out');
export const MODEL_NAME = process.env.GPT2_E2E_MODEL || 'gpt2-shakespeare';
/** The model folder as the page names it (relative to www/). */
export const MODEL_URL = `models/${MODEL_NAME}/`;
export const MODEL_DIR = path.join(ROOT, 'www', MODEL_URL);
/** Two different prompts (the second for queueing tests). */
export const [PROMPT, PROMPT2] = (process.env.GPT2_E2E_PROMPTS || 'ROMEO:|JULIET:').split('|');
if (!fs.existsSync(path.join(MODEL_DIR, 'model.safetensors'))) {
  throw new Error(`the model ${MODEL_DIR} is missing (the demo model is made by tools/train_demo_model.py)`);
}
/**
 * What the page loads when it names no model: for the demo, its 8-bit GGUF file (www/api/assets.js);
 * for another model (GPT2_E2E_MODEL), its folder. The CLI's reference runs read the same file.
 */
export const MODEL_FILE = MODEL_NAME === 'gpt2-shakespeare'
  ? path.join(MODEL_DIR, 'gpt2-shakespeare-q8_0.gguf') : MODEL_DIR;
/** The end of the weights URL the page fetches when it names no model ('/model.safetensors' for a folder). */
export const DEFAULT_WEIGHTS = MODEL_FILE === MODEL_DIR ? '/model.safetensors' : `/${path.basename(MODEL_FILE)}`;
/** The model's config.json. */
export const MODEL_CONFIG = JSON.parse(fs.readFileSync(path.join(MODEL_DIR, 'config.json'), 'utf8'));

/** DESIGN.md's flags: no network side channels, no GPU flags (so 'auto' finds no WebGPU adapter). */
export const CHROMIUM_ARGS = [
  '--headless=new', '--no-sandbox', '--disable-background-networking', '--disable-component-update',
  '--disable-sync', '--no-first-run', '--disable-quic',
];

/** Extra flags that give Chromium a WebGPU adapter on the CPU (SwiftShader: no shader-f16, 1 GiB bindings). */
export const WEBGPU_ARGS = ['--enable-unsafe-webgpu', '--use-webgpu-adapter=swiftshader'];

export function chromiumPath() {
  if (process.env.CHROMIUM) return process.env.CHROMIUM;
  for (const dir of (process.env.PATH || '').split(':')) {
    for (const name of ['chromium', 'chromium-browser']) {
      const p = path.join(dir, name);
      if (fs.existsSync(p)) return p;
    }
  }
  throw new Error('Chromium not found: install the Debian package chromium, or set CHROMIUM');
}

/** Chromium with CHROMIUM_ARGS plus `extraArgs` (e.g. WEBGPU_ARGS). */
export function launch(extraArgs = []) {
  return chromium.launch({ executablePath: chromiumPath(), args: [...CHROMIUM_ARGS, ...extraArgs] });
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/**
 * tools/serve.mjs on a free port; `close()` stops it. With '--log-requests' in `args`, `requests`
 * lists the path of every request it answered ("/pkg/gpt2_web_bg.wasm"), whichever engine asked.
 */
export async function startServer({ root = 'www', args = [] } = {}) {
  // Port 0: the server takes one the system picks and names it (a port chosen here first could be
  // taken by another process, a `gpt2 serve` or a browser's connection, before it listens).
  const proc = spawn(process.execPath, ['tools/serve.mjs', '--port', '0', '--root', root, '--quiet', ...args], {
    cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'],
  });
  const requests = [];
  let partial = '';
  proc.stdout.on('data', (d) => {
    const lines = (partial + d).split('\n');
    partial = lines.pop();
    for (const l of lines) {
      const m = /^[A-Z]+ (\S+) \d+$/.exec(l);
      if (m) requests.push(decodeURIComponent(new URL(m[1], 'http://x').pathname));
    }
  });
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('tools/serve.mjs did not start within 10 s')), 10_000);
    proc.stdout.on('data', (d) => {
      const m = /^serving .* on http:\/\/[^/]*:(\d+)\//m.exec(String(d));
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`tools/serve.mjs exited with status ${code}`));
    });
  });
  const origin = `http://127.0.0.1:${port}`;
  return {
    origin,
    requests,
    close: () => new Promise((resolve) => {
      if (proc.exitCode !== null) return resolve();
      proc.once('exit', resolve);
      proc.kill();
    }),
  };
}

/**
 * A fresh browser context and page at `url`; its goto and reload read the demo page's record, and
 * it keeps the workers it starts (observe.mjs). Every request of the context (page and workers) is
 * recorded in `requests`; console messages and page errors in `logs` (printed when a test fails).
 */
export async function openPage(browser, url) {
  const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
  const requests = [];
  const logs = [];
  context.on('request', (r) => requests.push(r.url()));
  await context.addInitScript(keepWorkers);
  const page = observeNavigations(await context.newPage());
  page.on('console', (m) => logs.push(`console.${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => logs.push(`pageerror: ${e.message}`));
  page.on('worker', (w) => w.on('console', (m) => logs.push(`worker console.${m.type()}: ${m.text()}`)));
  if (url) await page.goto(url);
  return { context, page, requests, logs };
}

/**
 * Fails unless every http(s)/ws request stayed on loopback, 127.0.0.0/8 (the tests' second origin
 * is 127.0.0.2; data: and blob: URLs stay in the page).
 */
export function assertLocalOnly(requests) {
  const outside = requests.filter((u) => {
    const { protocol, hostname } = new URL(u);
    if (['data:', 'blob:', 'about:'].includes(protocol)) return false;
    return !/^127\.\d+\.\d+\.\d+$/.test(hostname);
  });
  if (outside.length > 0) throw new Error(`requests left loopback: ${outside.join(', ')}`);
  if (requests.length === 0) throw new Error('no request was recorded: the request log is not working');
}

/**
 * Runs `fn(page, session)` on a fresh page and closes it; asserts that nothing was fetched from
 * outside 127.0.0.1, and adds the page's console to the error when something fails.
 */
export async function withPage(browser, url, fn) {
  const session = await openPage(browser, null);
  try {
    await session.page.goto(url);
    await fn(session.page, session);
    assertLocalOnly(session.requests);
  } catch (e) {
    if (session.logs.length) e.message += `\n--- browser console ---\n${session.logs.join('\n')}`;
    throw e;
  } finally {
    await session.context.close();
  }
}

/** The native CLI's path; `cargo test` (run by ./build.sh test before these tests) builds it. */
export function cliPath() {
  const target = process.env.CARGO_TARGET_DIR || path.join(os.homedir(), '.cache/gpt2-web/target');
  const bin = path.join(target, 'debug', 'gpt2');
  if (!fs.existsSync(bin)) {
    throw new Error(`the native CLI ${bin} is missing: run \`cargo build --bin gpt2\` (or ./build.sh test) first`);
  }
  return bin;
}

/** The CLI's greedy generation on the CPU: { text, tokens, stopReason, metrics }. */
export function nativeGenerate(prompt, maxTokens, dtype = 'q8', model = MODEL_FILE) {
  const out = execFileSync(cliPath(), [
    'generate', '--model', model, '--prompt', prompt, '--max-tokens', String(maxTokens), '--json', '--backend', 'cpu',
    '--dtype', dtype,
  ], { cwd: ROOT, encoding: 'utf8' });
  const lines = out.trim().split('\n');
  return JSON.parse(lines[lines.length - 1]);
}

/** The CLI's token ids of `text`. */
export function nativeTokenize(text) {
  const out = execFileSync(cliPath(), ['tokenize', '--model', MODEL_FILE, '--text', text], { cwd: ROOT, encoding: 'utf8' });
  return JSON.parse(out.trim().split('\n').pop()).ids;
}

export function screenshotPath(name) {
  fs.mkdirSync(OUT, { recursive: true });
  return path.join(OUT, name);
}

/**
 * Registers the usual hooks of a test file: start the server and Chromium before its tests, close
 * both after. Returns `{ server, browser }`, filled in once the hooks have run.
 */
export function serveAndLaunch() {
  const env = { server: null, browser: null };
  before(async () => {
    env.server = await startServer();
    env.browser = await launch();
  });
  after(async () => {
    await env.browser?.close();
    await env.server?.close();
  });
  return env;
}

/**
 * The token events of a generation against its result: one per token, in order, the same ids and
 * texts, times that never go back, the first at TTFT.
 */
export function assertTokenEvents(events, result) {
  assert.equal(events.length, result.tokens.length);
  assert.deepEqual(events.map((e) => e.index), events.map((_, i) => i));
  assert.deepEqual(events.map((e) => e.id), result.tokens);
  assert.equal(events.map((e) => e.text).join(''), result.text);
  for (let i = 1; i < events.length; i++) assert.ok(events[i].elapsedMs >= events[i - 1].elapsedMs);
  assert.ok(Math.abs(events[0].elapsedMs - result.metrics.ttftMs) < 1e-6, 'first token time != TTFT');
}
