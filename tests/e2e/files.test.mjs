// The worker's reading of a weights file ahead of the engine (www/worker/files.js readAhead), in
// Node: no browser, a stream that counts what it is asked for.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setImmediate as tick } from 'node:timers/promises';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
globalThis.self ??= new EventTarget(); // base.js listens on the worker's scope
const { readAhead } = await import(path.join(ROOT, 'www/worker/files.js'));

const CHUNK = 1000;

/** A stream of `n` chunks of CHUNK bytes (chunk i filled with i % 256) that fails at chunk `failAt`; `pulled` counts the chunks asked for. */
function source(n, { failAt = -1 } = {}) {
  const s = { pulled: 0, cancelled: null };
  s.stream = new ReadableStream({
    async pull(controller) {
      await tick();
      const i = s.pulled++;
      if (i === failAt) controller.error(new Error(`chunk ${i} failed`));
      else if (i >= n) controller.close();
      else controller.enqueue(new Uint8Array(CHUNK).fill(i % 256));
    },
    cancel(why) {
      s.cancelled = why ?? 'cancelled';
    },
  }, new CountQueuingStrategy({ highWaterMark: 0 }));
  return s;
}

/** Lets the pump run until the source stops being asked. */
async function settle(s) {
  for (let last = -1; last !== s.pulled;) {
    last = s.pulled;
    for (let i = 0; i < 5; i++) await tick();
  }
}

async function readAll(reader) {
  const got = [];
  for (let step = await reader.read(); !step.done; step = await reader.read()) got.push(step.value[0]);
  return got;
}

test('it reads ahead up to its cap before anyone asks, then gives every chunk in order', async () => {
  const s = source(50);
  const opened = readAhead({ reader: s.stream.getReader(), size: 50 * CHUNK, cached: false }, 10 * CHUNK);
  assert.equal(opened.size, 50 * CHUNK, 'the rest of what open() gave is kept');
  await settle(s);
  assert.equal(s.pulled, 10, 'read ahead exactly up to the cap');
  assert.deepEqual(await readAll(opened.reader), Array.from({ length: 50 }, (_, i) => i));
  assert.ok(s.pulled >= 51, 'read to the end');
});

test('it reads on as chunks are taken, holding no more than its cap', async () => {
  const s = source(50);
  const { reader } = readAhead({ reader: s.stream.getReader() }, 10 * CHUNK);
  await settle(s);
  for (let i = 0; i < 4; i++) assert.equal((await reader.read()).value[0], i);
  await settle(s);
  assert.equal(s.pulled, 14, 'four taken, four more read');
});

test('buffered() takes the chunks already in without waiting; read() goes on after them', async () => {
  const s = source(20);
  const { reader } = readAhead({ reader: s.stream.getReader() }, 5 * CHUNK);
  assert.deepEqual(reader.buffered(), [], 'nothing is in yet');
  await settle(s);
  assert.deepEqual(reader.buffered().map((c) => c[0]), [0, 1, 2, 3, 4]);
  assert.equal((await reader.read()).value[0], 5);
  assert.deepEqual(await readAll(reader), Array.from({ length: 14 }, (_, i) => i + 6));
});

test('a failure reaches the read that asks for its chunk, after the chunks before it', async () => {
  const s = source(20, { failAt: 3 });
  const { reader } = readAhead({ reader: s.stream.getReader() }, 10 * CHUNK);
  await settle(s);
  assert.equal(s.pulled, 4, 'no reading past the failure');
  for (let i = 0; i < 3; i++) assert.equal((await reader.read()).value[0], i);
  await assert.rejects(reader.read(), /chunk 3 failed/);
});

test('cancel() stops the reading and cancels the file', async () => {
  const s = source(100);
  const { reader } = readAhead({ reader: s.stream.getReader() }, 10 * CHUNK);
  await reader.read();
  await reader.cancel('aborted');
  const pulled = s.pulled;
  await settle(s);
  assert.equal(s.cancelled, 'aborted');
  assert.ok(s.pulled <= pulled + 1, `read on after cancel: ${pulled} → ${s.pulled}`);
});
