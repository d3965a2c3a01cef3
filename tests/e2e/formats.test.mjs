// The model formats besides a safetensors folder, in the browser. GGUF files (llama.cpp's format:
// the header holds the config and the tokenizer): by URL and as a File, through the API and the
// page's URL box, the native CLI's greedy tokens on the same file; a truncated file, a file that is
// not GGUF and a GGUF of another architecture are sentences (fixtures: tests/fixtures/gguf/*.gguf,
// tools/make_gguf.py). A folder with vocab.json + merges.txt and no tokenizer.json.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { serveAndLaunch, ROOT, withPage, nativeGenerate, assertTokenEvents, MODEL_DIR, PROMPT as DEMO_PROMPT } from './harness.mjs';

const T = { timeout: 120_000 };
const env = serveAndLaunch();
const FIXTURES = path.join(ROOT, 'tests/fixtures/gguf');
const Q8 = 'tiny-random-Q8_0.gguf';
// The tiny model knows 1999 ids: a prompt of words among them.
const PROMPT = 'the and of to in';

/**
 * `file` (a GGUF file) with a `general.description` of at least `size` bytes among its metadata:
 * a header longer than the worker's first parse of it. The tensors' offsets count from the data,
 * which moves by a multiple of any alignment.
 */
function withLongHeader(file, size) {
  const key = Buffer.from('general.description');
  const fixed = 8 + key.length + 4 + 8;
  const len = Math.ceil((size + fixed) / 4096) * 4096 - fixed;
  const kv = Buffer.alloc(fixed + len, 'a');
  kv.writeBigUInt64LE(BigInt(key.length), 0);
  key.copy(kv, 8);
  kv.writeUInt32LE(8, 8 + key.length); // a string
  kv.writeBigUInt64LE(BigInt(len), 12 + key.length);
  const out = Buffer.concat([file.subarray(0, 24), kv, file.subarray(24)]);
  out.writeBigUInt64LE(out.readBigUInt64LE(16) + 1n, 16); // one more key
  return out;
}
const LONG = withLongHeader(fs.readFileSync(path.join(FIXTURES, Q8)), 5 << 20);

/** A blank page on the server's origin that also serves /__gguf/<name> (the fixtures, or `extra`). */
async function withBlank(fn, extra = {}) {
  const url = `${env.server.origin}/__gguf-test.html`;
  await withPage(env.browser, 'about:blank', async (page, session) => {
    await page.route(url, (route) => route.fulfill({ contentType: 'text/html', body: '<!doctype html><title>GGUF test</title>' }));
    await page.route(`${env.server.origin}/__gguf/**`, (route) => {
      const name = decodeURIComponent(new URL(route.request().url()).pathname.split('/').pop());
      const body = extra[name] ?? fs.readFileSync(path.join(FIXTURES, name));
      return route.fulfill({ body, contentType: 'application/octet-stream' });
    });
    await page.goto(url);
    await fn(page, session);
  });
}

test('a .gguf URL, a GGUF File and one with a 5 MB header load alone and give the CLI\'s greedy tokens', T, async () => {
  const native = nativeGenerate(PROMPT, 16, 'q8', path.join(FIXTURES, Q8));
  await withBlank(async (page) => {
    const got = await page.evaluate(async ({ prompt, url }) => {
      const { Gpt2 } = await import('/gpt2.js');
      const run = async (model) => {
        const progress = [];
        const m = await Gpt2.load({ model, backend: 'cpu', dtype: 'q8', onProgress: (p) => progress.push(p) });
        const events = [];
        const result = await m.generate(prompt, { maxTokens: 16, temperature: 0, ignoreEos: true, onToken: (e) => events.push(e) });
        const out = {
          result, events, config: m.config, files: [...new Set(progress.map((p) => p.file))], last: progress.at(-1),
          planned: progress.some((p) => p.plan?.peak > 0),
        };
        m.dispose();
        return out;
      };
      const byUrl = await run(url);
      const file = new File([await (await fetch(url)).arrayBuffer()], 'tiny.gguf');
      const byFile = await run({ weights: file });
      const byLongHeader = await run('/__gguf/long-header.gguf');
      const exact = (await run('/__gguf/tiny-random-F32.gguf')).result.tokens;
      return { byUrl, byFile, exact };
    }, { prompt: PROMPT, url: `/__gguf/${Q8}` });
    assert.ok(LONG.length > 5 << 20);
    // An exact type: the same tokens as the same model's safetensors (the CLI on the folder).
    const { exact } = got;
    delete got.exact;
    assert.deepEqual(exact, nativeGenerate(PROMPT, 16, 'q8', path.join(ROOT, 'tests/fixtures/tiny-random')).tokens,
      'the F32 GGUF and the safetensors of one model differ');
    for (const [how, r] of Object.entries(got)) {
      assert.deepEqual(r.result.tokens, native.tokens, `${how}: greedy tokens differ from the CLI's`);
      assert.equal(r.result.text, native.text);
      assertTokenEvents(r.events, r.result);
      assert.equal(r.config.vocabSize, 1999);
      assert.equal(r.config.nLayer, 2);
      assert.ok(r.planned, `${how}: no progress event carried the memory plan`);
    }
    assert.deepEqual(got.byUrl.files, [Q8], 'one file is downloaded, named in the progress');
    assert.equal(got.byUrl.last.loaded, fs.statSync(path.join(FIXTURES, Q8)).size);
    assert.deepEqual(got.byFile.files, ['tiny.gguf']);
  }, { 'long-header.gguf': LONG });
});

test('the page loads a .gguf URL from its URL box', T, async () => {
  const native = nativeGenerate(PROMPT, 12, 'q8', path.join(FIXTURES, Q8));
  await withPage(env.browser, 'about:blank', async (page) => {
    await page.route(`${env.server.origin}/__gguf/**`, (route) =>
      route.fulfill({ body: fs.readFileSync(path.join(FIXTURES, Q8)), contentType: 'application/octet-stream' }));
    await page.goto(`${env.server.origin}/`);
    await page.waitForFunction(() => ['ready', 'error'].includes(window.pageState), null, { timeout: 60_000 });
    await page.check('#source-url');
    await page.fill('#model-url', `/__gguf/${Q8}`);
    await page.selectOption('#backend-choice', 'cpu');
    await page.selectOption('#dtype-choice', 'q8');
    await page.click('#load');
    await page.waitForFunction(() => (window.pageState === 'ready' && window.gpt2Model?.config.vocabSize === 1999)
      || !document.getElementById('error').hidden, null, { timeout: 60_000 });
    assert.equal(await page.evaluate(() => document.getElementById('error').textContent), '');
    await page.fill('#prompt', PROMPT);
    await page.fill('#max-tokens', '12');
    await page.fill('#temperature', '0');
    await page.fill('#stop-seqs', '');
    await page.click('#generate');
    await page.waitForFunction(() => window.lastResult || !document.getElementById('error').hidden, null, { timeout: 60_000 });
    const result = await page.evaluate(() => window.lastResult);
    assert.ok(result, await page.evaluate(() => document.getElementById('error').textContent));
    assert.deepEqual(result.tokens.slice(0, native.tokens.length), native.tokens);
  });
});

test('a truncated GGUF, a file that is not GGUF and another architecture reject with a sentence', T, async () => {
  const file = fs.readFileSync(path.join(FIXTURES, Q8));
  const arch = Buffer.from(file);
  const at = arch.indexOf('gpt2');
  arch.write('gptj', at);
  const extra = {
    'cut-header.gguf': file.subarray(0, 5000),
    'cut-long-header.gguf': LONG.subarray(0, 3_000_000), // after the first parse of its header
    'cut-data.gguf': file.subarray(0, file.length - 1000),
    'not.gguf': Buffer.from('<!doctype html><p>not a model</p>'),
    'gptj.gguf': arch,
  };
  await withBlank(async (page) => {
    const errors = await page.evaluate(async (names) => {
      const { Gpt2 } = await import('/gpt2.js');
      const out = {};
      for (const name of names) {
        try {
          (await Gpt2.load({ model: `/__gguf/${name}`, backend: 'cpu' })).dispose();
          out[name] = 'loaded';
        } catch (e) {
          out[name] = e.message;
        }
      }
      // The worker survives: a good file loads after them.
      const m = await Gpt2.load({ model: '/__gguf/tiny-random-Q8_0.gguf', backend: 'cpu' });
      out.after = (await m.generate('the', { maxTokens: 2 })).tokens.length;
      m.dispose();
      return out;
    }, Object.keys(extra));
    assert.match(errors['cut-header.gguf'], /ended after 5000 bytes, inside its GGUF header/);
    assert.match(errors['cut-long-header.gguf'], /ended after 3000000 bytes, inside its GGUF header/);
    assert.match(errors['cut-data.gguf'], /ended after .* in tensor .*truncated/);
    assert.match(errors['not.gguf'], /not a valid GGUF file.*does not start with "GGUF"/);
    assert.match(errors['gptj.gguf'], /architecture is "gptj"; only GPT-2/);
    assert.equal(errors.after, 2);
  }, extra);
});

test('a folder with vocab.json and merges.txt instead of tokenizer.json loads and gives the CLI\'s text', T, async () => {
  const native = nativeGenerate(DEMO_PROMPT, 16);
  const json = JSON.parse(fs.readFileSync(path.join(MODEL_DIR, 'tokenizer.json'), 'utf8'));
  const merges = json.model.merges.map((m) => (typeof m === 'string' ? m : m.join(' ')));
  const files = {
    'config.json': fs.readFileSync(path.join(MODEL_DIR, 'config.json')),
    'model.safetensors': fs.readFileSync(path.join(MODEL_DIR, 'model.safetensors')),
    'vocab.json': Buffer.from(JSON.stringify(json.model.vocab)),
    'merges.txt': Buffer.from(`#version: 0.2\n${merges.join('\n')}\n`),
  };
  await withBlank(async (page) => {
    const requested = [];
    await page.route(`${env.server.origin}/__old/**`, (route) => {
      const [folder, name] = new URL(route.request().url()).pathname.split('/').slice(-2);
      requested.push(`${folder}/${name}`);
      // notok/ has the config and the weights but no tokenizer of either kind.
      const has = files[name] && (folder === 'folder' || !['vocab.json', 'merges.txt'].includes(name));
      return has ? route.fulfill({ body: files[name], contentType: 'application/octet-stream' })
        : route.fulfill({ status: 404, body: 'not found' });
    });
    const got = await page.evaluate(async ({ prompt }) => {
      const { Gpt2 } = await import('/gpt2.js');
      const m = await Gpt2.load({ model: '/__old/folder/', backend: 'cpu' });
      const r = await m.generate(prompt, { maxTokens: 16, temperature: 0 });
      m.dispose();
      let missing;
      try {
        await Gpt2.load({ model: '/__old/notok/', backend: 'cpu' });
      } catch (e) {
        missing = e.message;
      }
      return { text: r.text, tokens: r.tokens, missing };
    }, { prompt: DEMO_PROMPT });
    assert.deepEqual(got.tokens, native.tokens);
    assert.equal(got.text, native.text);
    assert.ok(requested.includes('folder/vocab.json') && requested.includes('folder/merges.txt'), requested.join(', '));
    assert.match(got.missing, /tokenizer\.json.*404.*\(nor vocab\.json and merges\.txt beside it\)/);
  });
});

/** A safetensors file cut into `n` shards by tensor, with the index save_pretrained would write. */
function shards(bytes, n) {
  const len = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + len).toString('utf8'));
  const data = bytes.subarray(8 + len);
  const names = Object.keys(header).filter((k) => k !== '__metadata__').sort();
  const per = Math.ceil(names.length / n);
  const files = {};
  const map = {};
  for (let i = 0; i < n; i++) {
    const file = `model-${String(i + 1).padStart(5, '0')}-of-${String(n).padStart(5, '0')}.safetensors`;
    const head = {};
    const body = [];
    let at = 0;
    for (const name of names.slice(i * per, (i + 1) * per)) {
      const [a, b] = header[name].data_offsets;
      const stored = name.startsWith('transformer.') ? name : `transformer.${name}`;
      head[stored] = { dtype: header[name].dtype, shape: header[name].shape, data_offsets: [at, at + b - a] };
      body.push(data.subarray(a, b));
      at += b - a;
      map[stored] = file;
    }
    const json = Buffer.from(JSON.stringify(head));
    const size = Buffer.alloc(8);
    size.writeBigUInt64LE(BigInt(json.length));
    files[file] = Buffer.concat([size, json, ...body]);
  }
  files['model.safetensors.index.json'] = Buffer.from(JSON.stringify({ metadata: { total_size: data.length }, weight_map: map }));
  return files;
}

test('a folder in shards (model.safetensors.index.json) streams them in turn and gives the CLI\'s text', T, async () => {
  const native = nativeGenerate(DEMO_PROMPT, 16);
  const files = {
    ...shards(fs.readFileSync(path.join(MODEL_DIR, 'model.safetensors')), 3),
    'config.json': fs.readFileSync(path.join(MODEL_DIR, 'config.json')),
    'tokenizer.json': fs.readFileSync(path.join(MODEL_DIR, 'tokenizer.json')),
  };
  await withBlank(async (page) => {
    await page.route(`${env.server.origin}/__shards/**`, (route) => {
      const [folder, name] = new URL(route.request().url()).pathname.split('/').slice(-2);
      // cut/ lacks its last shard; none/ has no weights at all.
      const has = files[name] && !(folder === 'cut' && name.startsWith('model-00003'))
        && !(folder === 'none' && name.startsWith('model'));
      return has ? route.fulfill({ body: files[name], contentType: 'application/octet-stream' })
        : route.fulfill({ status: 404, body: 'not found' });
    });
    const got = await page.evaluate(async ({ prompt }) => {
      const { Gpt2 } = await import('/gpt2.js');
      const progress = [];
      const m = await Gpt2.load({ model: '/__shards/whole/', backend: 'cpu', onProgress: (p) => progress.push(p.file) });
      const r = await m.generate(prompt, { maxTokens: 16, temperature: 0 });
      m.dispose();
      let cut;
      try {
        await Gpt2.load({ model: '/__shards/cut/', backend: 'cpu' });
      } catch (e) {
        cut = e.message;
      }
      let none;
      try {
        await Gpt2.load({ model: '/__shards/none/', backend: 'cpu' });
      } catch (e) {
        none = e.message;
      }
      return { text: r.text, tokens: r.tokens, files: [...new Set(progress)], cut, none };
    }, { prompt: DEMO_PROMPT });
    assert.deepEqual(got.tokens, native.tokens);
    assert.equal(got.text, native.text);
    const names = Object.keys(files).filter((f) => f.startsWith('model-')).sort();
    assert.deepEqual(got.files.filter((f) => f.startsWith('model-')), names, 'every shard streamed, in order');
    assert.match(got.cut, /model-00003-of-00003\.safetensors.*404/);
    assert.match(got.none, /model\.safetensors.*404.*\(nor model\.safetensors\.index\.json or pytorch_model\.bin beside it\)/);
  });
});

test('a folder with pytorch_model.bin (written by torch.save) loads and gives the CLI\'s tokens; a cut one is a sentence', T, async () => {
  const tiny = path.join(ROOT, 'tests/fixtures/tiny-random');
  const native = nativeGenerate(PROMPT, 16, 'q8', tiny);
  const bin = fs.readFileSync(path.join(ROOT, 'tests/fixtures/torch/tiny-random-f32.bin'));
  const files = {
    'config.json': fs.readFileSync(path.join(tiny, 'config.json')),
    'tokenizer.json': fs.readFileSync(path.join(tiny, 'tokenizer.json')),
  };
  await withBlank(async (page) => {
    const requested = [];
    await page.route(`${env.server.origin}/__bin/**`, (route) => {
      const [folder, name] = new URL(route.request().url()).pathname.split('/').slice(-2);
      requested.push(`${folder}/${name}`);
      const body = name === 'pytorch_model.bin' ? (folder === 'cut' ? bin.subarray(0, bin.length >> 1) : bin) : files[name];
      return body ? route.fulfill({ body, contentType: 'application/octet-stream' }) : route.fulfill({ status: 404, body: 'not found' });
    });
    const got = await page.evaluate(async ({ prompt }) => {
      const { Gpt2 } = await import('/gpt2.js');
      const m = await Gpt2.load({ model: '/__bin/whole/', backend: 'cpu', dtype: 'q8' });
      const r = await m.generate(prompt, { maxTokens: 16, temperature: 0, ignoreEos: true });
      m.dispose();
      let cut;
      try {
        await Gpt2.load({ model: '/__bin/cut/', backend: 'cpu' });
      } catch (e) {
        cut = e.message;
      }
      return { tokens: r.tokens, text: r.text, cut };
    }, { prompt: PROMPT });
    assert.deepEqual(got.tokens, native.tokens);
    assert.equal(got.text, native.text);
    const order = requested.filter((r) => r.startsWith('whole/') && !r.endsWith('.json'));
    assert.deepEqual(order, ['whole/model.safetensors', 'whole/pytorch_model.bin'], 'tried in order');
    assert.ok(requested.includes('whole/model.safetensors.index.json'));
    assert.match(got.cut, /pytorch_model\.bin: it ended after .* bytes, before the bytes of .* tensors/);
  });
});

test('a Hub id resolves to <hubHost>/<id>/resolve/<revision>/, its GGUF by file; wrong options are sentences', T, async () => {
  const native = nativeGenerate(DEMO_PROMPT, 12);
  // A mirror laid out like the Hub, on another origin (127.0.0.2), answered by the test.
  const hub = `http://127.0.0.2:${new URL(env.server.origin).port}`;
  await withBlank(async (page, { context }) => {
    const served = [];
    await context.route(`${hub}/**`, (route) => {
      const { pathname } = new URL(route.request().url());
      served.push(decodeURIComponent(pathname));
      const m = /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(pathname);
      const headers = { 'Access-Control-Allow-Origin': '*', 'Content-Type': 'application/octet-stream' };
      const dirs = { 'course/shakespeare': MODEL_DIR, 'course/tiny-gguf': FIXTURES };
      const file = m && dirs[m[1]] && path.join(dirs[m[1]], decodeURIComponent(m[3]));
      if (!file || !fs.existsSync(file)) return route.fulfill({ status: 404, headers, body: 'not found' });
      return route.fulfill({ headers, body: fs.readFileSync(file) });
    });
    const got = await page.evaluate(async ({ hub, prompt, q8 }) => {
      const { Gpt2, isHubId } = await import('/gpt2.js');
      const run = async (options, p) => {
        const m = await Gpt2.load({ backend: 'cpu', hubHost: hub, ...options });
        const r = await m.generate(p, { maxTokens: 12, temperature: 0, ignoreEos: true });
        m.dispose();
        return r.tokens;
      };
      const errors = {};
      for (const [name, options] of Object.entries({
        revisionOnAUrl: { model: '/models/gpt2-shakespeare/', revision: 'v1' },
        notGguf: { model: 'course/tiny-gguf', file: 'model.safetensors', hubHost: hub },
        badHost: { model: 'course/shakespeare', hubHost: 'ftp://mirror' },
        missing: { model: 'course/nope', hubHost: hub },
      })) {
        try {
          await Gpt2.load({ backend: 'cpu', ...options });
          errors[name] = 'loaded';
        } catch (e) {
          errors[name] = e.message;
        }
      }
      return {
        folder: await run({ model: 'course/shakespeare', revision: 'main' }, prompt),
        gguf: await run({ model: 'course/tiny-gguf', file: q8 }, 'the and of to in'),
        ids: ['openai-community/gpt2', 'models/x/', './a/b', '/a/b', 'https://x/y', 'a/b.gguf'].map(isHubId),
        errors,
      };
    }, { hub, prompt: DEMO_PROMPT, q8: Q8 });
    assert.deepEqual(got.folder, native.tokens);
    assert.deepEqual(got.gguf, nativeGenerate(PROMPT, 12, 'q8', path.join(FIXTURES, Q8)).tokens);
    assert.deepEqual(got.ids, [true, false, false, false, false, false]);
    assert.ok(served.includes('/course/shakespeare/resolve/main/config.json'), served.join(', '));
    assert.ok(served.includes(`/course/tiny-gguf/resolve/main/${Q8}`), served.join(', '));
    assert.match(got.errors.revisionOnAUrl, /revision applies to a Hugging Face model id/);
    assert.match(got.errors.notGguf, /file must name a \.gguf file/);
    assert.match(got.errors.badHost, /hubHost "ftp:\/\/mirror" is not an http\(s\) URL/);
    assert.match(got.errors.missing, /course\/nope\/resolve\/main\/config\.json.*404/);
    assert.match(got.errors.missing, /"course\/nope" was taken as a Hugging Face model id; a folder beside the page is written "course\/nope\/"/);
  });
});
