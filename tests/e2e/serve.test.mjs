// tools/serve.mjs (./build.sh serve) under bad requests: each gets a 4xx answer, nothing escapes the
// served folder (not through escapes, not through a symbolic link), and the server keeps answering.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startServer } from './harness.mjs';

let server;
let dir;

before(async () => {
  // A root with a file, a sibling folder whose name starts with the root's, and a link out of it.
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpt2-serve-'));
  fs.mkdirSync(path.join(dir, 'www'));
  fs.mkdirSync(path.join(dir, 'www-x'));
  fs.writeFileSync(path.join(dir, 'www/index.html'), '<!doctype html><title>ok</title>');
  fs.writeFileSync(path.join(dir, 'www-x/secret.txt'), 'secret');
  fs.symlinkSync(path.join(dir, 'www-x'), path.join(dir, 'www/link'));
  server = await startServer({ root: path.join(dir, 'www') });
});

after(async () => {
  await server?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Sends `raw` as it is and returns the status line's code (0 when the connection closed without one). */
function rawRequest(raw) {
  const { port } = new URL(server.origin);
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(raw)); // no end(): a half-closed socket is dropped before a late answer
    let data = '';
    socket.setTimeout(5000, () => reject(new Error(`no answer to ${JSON.stringify(raw)}`)));
    socket.on('data', (d) => { data += d; });
    socket.on('end', () => resolve(Number(data.match(/^HTTP\/1\.1 (\d{3})/)?.[1] ?? 0)));
    socket.on('error', () => resolve(0)); // reset by the server
  });
}

const get = (target, host = new URL(server.origin).host) => rawRequest(`GET ${target} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);

test('a corpus of bad requests: each answered 4xx (or the connection closed), never a file outside the root', async () => {
  const cases = [
    ['/%', 400], ['/%00', 400], ['/index.html%00.png', 400], ['/%E0%A4%A', 400],
    ['/../www-x/secret.txt', 404 /* the URL parser drops the dots: /www-x/ inside the root */], ['/..%2fwww-x/secret.txt', 403], ['/..%2f..%2f..%2fetc%2fpasswd', 403],
    ['/link/secret.txt', 403], ['/nope.txt', 404],
  ];
  for (const [target, want] of cases) assert.equal(await get(target), want, target);
  assert.equal(await get('/index.html', 'evil.example:80'), 421, 'a foreign Host header was answered');
  assert.equal(await rawRequest(`DELETE /index.html HTTP/1.1\r\nHost: ${new URL(server.origin).host}\r\nConnection: close\r\n\r\n`), 405);
  for (const junk of ['\u0000\u0001\u0002\r\n\r\n', 'GET\r\n\r\n', `GET /${'a'.repeat(70_000)} HTTP/1.1\r\n\r\n`]) {
    const status = await rawRequest(junk);
    assert.ok(status === 0 || (status >= 400 && status < 500), `${JSON.stringify(junk.slice(0, 20))}: ${status}`);
  }
  // Still serving, with the headers every answer carries.
  const res = await fetch(`${server.origin}/index.html`);
  assert.equal(res.status, 200);
  assert.equal(await res.text(), '<!doctype html><title>ok</title>');
  assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
  assert.equal(res.headers.get('access-control-allow-origin'), '*');
  assert.equal(res.headers.get('content-type'), 'text/html; charset=utf-8');
});
