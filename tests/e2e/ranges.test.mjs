// Every range and default a person sees outside the engine agrees with the engine's options table
// (src/generate/options.rs → RANGES and LOAD_OPTIONS in www/api/options.js): the page's inputs (each
// carries the option it feeds as data-option, and every input named like an option carries one),
// the widget's attributes, the presets, the completions facade, the docs' synopses, and the wasm
// builds gpt2.js knows. No browser: the files as they ship.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const read = (f) => fs.readFileSync(path.join(ROOT, f), 'utf8');
const { RANGES, LOAD_OPTIONS, WASM_BUILDS } = await import(path.join(ROOT, 'www/api/options.js'));
const { PRESETS } = await import(path.join(ROOT, 'www/api/presets.js'));
const { inRange } = await import(path.join(ROOT, 'www/api/ranges.js'));
const kebab = (name) => name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);

/** The attributes of each `<input …>` of an HTML file, as objects. */
function inputs(file) {
  return [...read(file).matchAll(/<input\b([^>]*)>/g)].map((m) =>
    Object.fromEntries([...m[1].matchAll(/([\w-]+)(?:="([^"]*)")?/g)].map((a) => [a[1], a[2] ?? ''])));
}

test('the page\'s inputs: each that feeds an option says which, and its min, max, step and value lie in its range', () => {
  const all = inputs('www/index.html');
  const tagged = all.filter((i) => 'data-option' in i);
  assert.ok(tagged.length >= 15, `only ${tagged.length} inputs carry data-option`);
  const named = new RegExp(`(^|-)(${Object.keys(RANGES).map(kebab).join('|')}|penalty)$`);
  for (const i of all) {
    if (named.test(i.id ?? '') && i.type !== 'checkbox') assert.ok('data-option' in i, `#${i.id} feeds an option but has no data-option`);
  }
  for (const i of tagged) {
    const what = `#${i.id} (${i['data-option']})`;
    const r = RANGES[i['data-option']];
    assert.ok(r, `${what}: no such numeric option`);
    assert.ok('min' in i, `${what} has no min`);
    const min = Number(i.min);
    assert.ok(r.minOpen ? min > r.min : min >= r.min, `${what}: min ${i.min} is outside ${JSON.stringify(r)}`);
    if ('max' in i) assert.ok(Number(i.max) <= r.max, `${what}: max ${i.max} is above ${r.max}`);
    else assert.ok(r.max >= 1e9, `${what} has no max, and the option's is ${r.max}`);
    if (r.whole) assert.ok(Number.isInteger(Number(i.step ?? 1)), `${what}: step ${i.step} for a whole number`);
    if (i.value !== undefined && i.value !== '') {
      const v = Number(i.value);
      assert.ok(inRange(r, v) && v >= min && v <= Number(i.max ?? Infinity), `${what}: value ${i.value} is outside its range`);
    }
  }
});

test('the widget\'s attributes are options of the table, each checked against its range', () => {
  const widget = read('www/widget/widget.js');
  const reads = [...widget.matchAll(/num\('([\w-]+)', '(\w+)'\)/g)].map((m) => [m[1], m[2]]);
  assert.ok(reads.length >= 6, 'the widget reads no numeric attribute through num()');
  for (const [attribute, option] of reads) {
    assert.ok(RANGES[option], `the ${attribute} attribute is read as ${option}, which has no range`);
    assert.equal(attribute, kebab(option), `the ${attribute} attribute is read as ${option}`);
  }
  const base = /\{ maxTokens: (\d+) \}/.exec(widget);
  assert.ok(base && inRange(RANGES.maxTokens, Number(base[1])), 'the widget\'s own maxTokens default');
});

test('every preset\'s options are options of the table, in their ranges', () => {
  for (const [name, p] of Object.entries(PRESETS)) {
    for (const [key, value] of Object.entries(p.options)) {
      assert.ok(key in RANGES || key === 'stop', `${name}: ${key} is not a numeric option of the table (or stop)`);
      if (key in RANGES) assert.ok(inRange(RANGES[key], value), `${name}: ${key} ${value} is outside its range`);
    }
  }
});

test('the completions facade and the docs\' examples take the table\'s ranges', () => {
  const facade = read('www/api/completions.js');
  assert.match(facade, /import \{ RANGES \} from '\.\/options\.js'/);
  assert.ok(!/ >= 0 && \w+ <= |> 0 && \w+ <= 1/.test(facade), 'the facade checks a range by hand');
  // Each generate example of the API's docs uses options of the table, in range.
  for (const file of ['docs/api.md', 'README.md']) {
    for (const block of read(file).matchAll(/generate\([^)]*?\{([^}]*)\}/gs)) {
      for (const [, key, value] of block[1].matchAll(/\b(\w+): (-?[\d.]+)\b/g)) {
        if (key in RANGES) assert.ok(inRange(RANGES[key], Number(value)), `${file}: ${key}: ${value} is outside its range`);
      }
    }
  }
});

test('load options: gpt2.js reads each through the table, and the builds it knows are the table\'s', () => {
  const gpt2 = read('www/api/gpt2.js');
  assert.match(gpt2, /checkLoadOptions\(options\)/);
  const load = /static async load\(options = \{\}\) \{[\s\S]*?\} = options;/.exec(gpt2)?.[0] ?? '';
  const names = [...load.matchAll(/\b(\w+)(?: = [^,]+)?,/g)].map((m) => m[1]).filter((n) => n !== 'options');
  for (const n of names) assert.ok(n in LOAD_OPTIONS, `Gpt2.load reads ${n}, which LOAD_OPTIONS lacks`);
  const assets = read('www/api/assets.js');
  const builds = [...(/export const BUILDS = \{([\s\S]*?)\n\};/.exec(assets)?.[1] ?? '').matchAll(/^ {2}'?([\w-]+)'?: \{/gm)].map((m) => m[1]);
  assert.deepEqual([...builds].sort(), [...WASM_BUILDS].sort());
});
