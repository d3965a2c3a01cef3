// The npm package in a plain `node` process: packed as ./build.sh package packs it (tools/package.mjs),
// unpacked into node_modules of an empty folder, imported by name. The demo model from its folder
// gives the CLI's greedy text; streaming, n, abort, concurrent calls and model.logits hold; a missing
// path is named; the process exits by itself after dispose(); and the autograder example grades a
// right answer 0 and a wrong one 1.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, MODEL_DIR, PROMPT, nativeGenerate } from './harness.mjs';

const T = { timeout: 180_000 };
let app;

before(() => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpt2-node-'));
  const out = execFileSync('node', [path.join(ROOT, 'tools/package.mjs'), '--out', path.join(dir, 'dist')], { encoding: 'utf8' });
  const tgz = path.join(ROOT, out.trim().split(':')[0]);
  app = path.join(dir, 'app');
  fs.mkdirSync(path.join(app, 'node_modules'), { recursive: true });
  execFileSync('tar', ['-xzf', tgz, '-C', path.join(app, 'node_modules')]);
  fs.renameSync(path.join(app, 'node_modules/package'), path.join(app, 'node_modules/gpt2-web'));
  fs.writeFileSync(path.join(app, 'package.json'), '{ "type": "module", "private": true }\n');
  for (const f of ['check.mjs', 'threads.mjs']) fs.copyFileSync(path.join(ROOT, 'tests/e2e/node-package', f), path.join(app, f));
});

after(() => fs.rmSync(path.dirname(app), { recursive: true, force: true }));

/** `node ARGS` in the app folder, which must end by itself within the limit. */
function node(args, timeout = 120_000) {
  const r = spawnSync('node', args, { cwd: app, encoding: 'utf8', timeout });
  assert.equal(r.error?.code, undefined, `node ${args.join(' ')} did not end by itself within ${timeout} ms: ${r.stderr}`);
  return r;
}

test('package.json: the node condition, engines, repository, keywords, license', () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(app, 'node_modules/gpt2-web/package.json'), 'utf8'));
  assert.equal(pkg.exports['.'].node, './node.js');
  assert.match(pkg.engines.node, /^>=\s*20/);
  assert.match(pkg.repository.url, /^git\+https:\/\//);
  assert.ok(pkg.keywords.includes('gpt2') && pkg.license);
});

test('plain node: greedy as the CLI, streaming, n, abort, concurrent calls, logits; exits after dispose()', T, async () => {
  const r = node(['check.mjs', MODEL_DIR, PROMPT]);
  assert.equal(r.status, 0, r.stderr);
  const got = Object.assign({}, ...r.stdout.trim().split('\n').map((l) => JSON.parse(l)));
  assert.ok(got.missingError.includes(path.join(MODEL_DIR, 'no-such-model')), got.missingError);
  assert.equal(got.loaded.backend, 'cpu');
  const cli = nativeGenerate(PROMPT, 24, 'q8', MODEL_DIR);
  assert.equal(got.greedy.text, cli.text);
  assert.deepEqual(got.greedy.tokens, cli.tokens);
  assert.equal(got.stream.texts.join(''), cli.text);
  assert.equal(got.stream.text, cli.text);
  assert.deepEqual(got.n.choices, got.n.alone, 'choice i is the generation with seed + i');
  assert.equal(got.abort.stopReason, 'abort');
  assert.ok(got.abort.tokens >= 3 && got.abort.tokens < 200, `aborted after ${got.abort.tokens} tokens`);
  assert.deepEqual(got.concurrent.together, got.concurrent.oneByOne);
  assert.deepEqual(got.logits.tokens, cli.tokens, 'the hand-written loop gives generate\'s tokens');
  assert.equal(got.disposed, true);
});

test('threads: 2 in node runs one thread (the threaded build is not used there), the CLI\'s tokens', T, async () => {
  const r = node(['threads.mjs', MODEL_DIR, PROMPT]);
  assert.equal(r.status, 0, r.stderr);
  const got = JSON.parse(r.stdout.trim().split('\n').pop());
  assert.equal(got.threads, 1);
  assert.notEqual(got.build, 'pkg-threads');
  assert.deepEqual(got.tokens, nativeGenerate(PROMPT, 24, 'q8', MODEL_DIR).tokens);
});

test('the autograder example: a right answer passes every case (exit 0), a wrong one fails (exit 1)', T, async () => {
  const grader = 'node_modules/gpt2-web/examples/autograder.mjs';
  const right = node([grader, MODEL_DIR, 'node_modules/gpt2-web/examples/student.mjs']);
  console.log(right.stdout.trim());
  assert.equal(right.status, 0, right.stdout + right.stderr);
  assert.match(right.stdout, /^12\/12 passed$/m);
  // Off by one: stops a token early when the budget is more than one.
  const wrong = fs.readFileSync(path.join(app, 'node_modules/gpt2-web/examples/student.mjs'), 'utf8')
    .replace('step < maxTokens', 'step < Math.max(1, maxTokens - 1)');
  fs.writeFileSync(path.join(app, 'wrong.mjs'), wrong);
  const r = node([grader, MODEL_DIR, 'wrong.mjs']);
  assert.equal(r.status, 1, r.stdout + r.stderr);
  assert.match(r.stdout, /^FAIL .*token 7 differs: expected \d+ \(.*\), got nothing$/m);
  const passed = Number(/^(\d+)\/12 passed$/m.exec(r.stdout)?.[1]);
  assert.ok(passed >= 4 && passed < 12, `the one-token cases pass, the longer ones fail (${passed}/12)`);
  const none = node([grader, MODEL_DIR, 'missing.mjs']);
  assert.equal(none.status, 2);
});
