// The worker's message protocol (www/worker/protocol.js) against the code on both sides, without a
// browser: the joined www/worker.js runs in a V8 context with a stand-in `self`, so its handler
// table can be compared with the protocol's; the page's requests (gpt2.js) and the worker's
// replies (www/worker/*.js) are read from their source; connection.js must handle every reply.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import vm from 'node:vm';
import { ROOT } from './harness.mjs';
import { joinWorker } from '../../tools/join_worker.mjs';

const WWW = path.join(ROOT, 'www');
const read = (f) => fs.readFileSync(path.join(WWW, f), 'utf8');

/** The joined worker (www/worker.js, or `source`), run with a stand-in `self` that records what it posts. */
function runWorker(source = null) {
  const file = path.join(WWW, 'worker.js');
  assert.ok(source || fs.existsSync(file), 'www/worker.js is missing: node tools/join_worker.mjs (./build.sh build) makes it');
  const posted = [];
  const self = { addEventListener() {}, postMessage: (m) => posted.push(m), onmessage: null };
  // A MessageChannel of its own: a real one's open port would keep this process alive.
  class Channel {
    constructor() {
      this.port1 = { onmessage: null };
      this.port2 = { postMessage: () => setTimeout(() => this.port1.onmessage?.({ data: null })) };
    }
  }
  const context = vm.createContext({ self, console, setTimeout, clearTimeout, MessageChannel: Channel, performance, URL, TextDecoder, TextEncoder });
  vm.runInContext(source ?? fs.readFileSync(file, 'utf8'), context, { filename: 'worker.js' });
  // Top-level const bindings of a script are visible to later scripts of the same context.
  const tables = vm.runInContext('({ handlers: Object.keys(HANDLERS), requests: REQUESTS, replies: REPLIES, ' +
    'testing: typeof TEST_REQUESTS === "undefined" ? {} : TEST_REQUESTS })', context);
  return { self, posted, ...tables };
}

test('the join refuses two parts that declare one name, a function twice included (a script would keep the later one)', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpt2-join-'));
  try {
    const write = (main, other) => {
      fs.writeFileSync(path.join(dir, 'main.js'), `import { helper } from './other.js';\n${main}\nhelper();\n`);
      fs.writeFileSync(path.join(dir, 'other.js'), other);
    };
    write('function forget() {}', 'export function helper() {}\n');
    assert.equal(joinWorker({ testing: false, dir }).parts.join(' '), 'other.js main.js');
    for (const [main, other] of [
      ['function forget() {}', 'export function helper() {}\nfunction forget() {}\n'],
      ['async function forget() {}', 'export function helper() {}\nconst forget = 1;\n'],
      ['class forget {}', 'export function helper() {}\nfunction forget() {}\n'],
    ]) {
      write(main, other);
      assert.throws(() => joinWorker({ testing: false, dir }), /www\/worker\/other\.js and www\/worker\/main\.js both declare forget/, `${main} / ${other}`);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('every request of the protocol has a handler and every handler a request; the worker says ready once', () => {
  const { handlers, requests, replies, posted } = runWorker();
  assert.deepEqual([...handlers].sort(), Object.keys(requests).sort(), 'main.js HANDLERS and protocol.js REQUESTS differ');
  assert.deepEqual(JSON.parse(JSON.stringify(posted)), [{ type: 'ready' }]);
  assert.ok('ready' in replies);
});

test('the page sends only requests of the protocol, and sends each of them but the tests\' own', () => {
  const { requests, testing } = runWorker();
  assert.deepEqual(Object.keys(testing).sort(), ['crash', 'loseDevice', 'storage', 'trap'], 'www/worker.js lacks testing.js: node tools/join_worker.mjs');
  const sent = new Set([...`${read('api/gpt2.js')}\n${read('api/connection.js')}`.matchAll(/\bop: '(\w+)'/g)].map((m) => m[1]));
  const mine = Object.keys(requests).filter((op) => !(op in testing));
  assert.deepEqual([...sent].sort(), mine.sort(), 'the ops gpt2.js sends and protocol.js REQUESTS differ');
});

test('the worker that ships (site, npm package, offline bundle) has no test requests', () => {
  const { handlers, requests } = runWorker(joinWorker({ testing: false }).source);
  for (const op of ['crash', 'loseDevice', 'storage', 'trap']) {
    assert.ok(!handlers.includes(op) && !(op in requests), `the shipped worker answers "${op}"`);
  }
});

test('the worker replies only with types of the protocol, and the page handles every one', () => {
  const { replies } = runWorker();
  // The worker's parts, and the threaded build's script as tools/patch_rayon.mjs changes it (it runs in the worker too).
  const parts = [...fs.readdirSync(path.join(WWW, 'worker')).map((f) => read(`worker/${f}`)),
    fs.readFileSync(path.join(ROOT, 'tools/patch_rayon.mjs'), 'utf8')].join('\n');
  const used = new Set([...parts.matchAll(/\breply\([^,]+, '(\w+)'/g)].map((m) => m[1]));
  for (const m of parts.matchAll(/postMessage\(\{ type: '(\w+)'/g)) used.add(m[1]);
  // The scheduler's events are posted as the engine makes them (pump.js): their types are Rust's.
  const events = fs.readFileSync(path.join(WWW, '../src/wasm/scheduler.rs'), 'utf8');
  for (const m of events.matchAll(/r#type: "(\w+)"|set\("type", &"(\w+)"/g)) used.add(m[1] ?? m[2]);
  assert.ok(used.size >= 5, `found only ${[...used]}`);
  assert.deepEqual([...used].sort(), Object.keys(replies).sort(), 'the types the worker posts and protocol.js REPLIES differ');
  const connection = read('api/connection.js');
  for (const type of Object.keys(replies)) {
    assert.match(connection, new RegExp(`type === '${type}'`), `connection.js does not handle the "${type}" reply`);
  }
});

test('a request the protocol does not name gets an error reply naming it, never a crash (nor a prototype\'s method)', () => {
  const { self, posted } = runWorker();
  posted.length = 0;
  for (const [id, op] of [[1, 'nonsense'], [2, '__proto__'], [3, 'toString'], [4, 'constructor'], [5, undefined]]) self.onmessage({ data: { id, op } });
  self.onmessage({ data: null });
  assert.deepEqual(posted.map((m) => [m.id, m.type, m.message]), [
    [1, 'error', 'unknown request "nonsense"'],
    [2, 'error', 'unknown request "__proto__"'],
    [3, 'error', 'unknown request "toString"'],
    [4, 'error', 'unknown request "constructor"'],
    [5, 'error', 'unknown request "undefined"'],
    [undefined, 'error', 'unknown request "undefined"'],
  ]);
});
