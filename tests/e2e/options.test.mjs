// The generate options are written in three places that must agree: the engine's table
// (src/wasm/options.rs `struct Options` and its Default, snake_case as serde reads them), the JS API's
// checks (www/gpt2.js OPTION_TYPES) and the types users read (www/gpt2.d.ts GenerateOptions, each
// with "Default X." in its doc). The Rust table is the reference: a name, a type or a default that
// drifts in one place fails here, naming the option and the place. No browser.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from './harness.mjs';

const read = (f) => fs.readFileSync(path.join(ROOT, f), 'utf8');
const camel = (s) => s.replace(/_([a-z])/g, (_, c) => c.toUpperCase());
const between = (text, start, end) => {
  const i = text.indexOf(start);
  assert.ok(i >= 0, `"${start}" not found`);
  return text.slice(i + start.length, text.indexOf(end, i + start.length));
};

/** The engine's options: camelCase name → { rust type, default as JS would write it }. */
function rustOptions() {
  const src = read('src/wasm/options.rs');
  const fields = [...between(src, 'struct Options {', '\n}').matchAll(/^\s+(\w+): ([^,]+),$/gm)].map((m) => [m[1], m[2]]);
  const defaults = Object.fromEntries([...between(src, 'impl Default for Options {', '\n}\n').matchAll(/^\s+(\w+): (.+),$/gm)]
    .map((m) => [m[1], m[2]]));
  const js = (v) => {
    if (/^-?\d+(\.\d+)?$/.test(v)) return String(Number(v));
    if (v === 'Vec::new()') return '[]';
    const str = /^"([^"]*)"\.into\(\)$/.exec(v);
    if (str) return `'${str[1]}'`;
    const b = /^serde_json::Value::Bool\((true|false)\)$/.exec(v);
    if (b) return b[1];
    return v; // true, false
  };
  return Object.fromEntries(fields.map(([name, type]) => {
    assert.ok(name in defaults, `src/wasm/options.rs: Options::default() has no ${name}`);
    return [camel(name), { type, dflt: js(defaults[name]) }];
  }));
}

/** gpt2.js OPTION_TYPES: name → JS type. */
function jsOptions() {
  const body = between(read('www/gpt2.js'), 'const OPTION_TYPES = {', '};');
  return Object.fromEntries([...body.matchAll(/(\w+): '([^']+)'/g)].map((m) => [m[1], m[2]]));
}

/** gpt2.d.ts GenerateOptions: name → { type, dflt } (the doc's "Default X."). */
function dtsOptions() {
  const body = between(read('www/gpt2.d.ts'), 'export interface GenerateOptions {', '\n}\n');
  const out = {};
  for (const m of body.matchAll(/\/\*\*([\s\S]*?)\*\/\s*(\w+)\?: ([^;]+);/g)) {
    const dflt = /Default ([^\s.]+(?:\.\d+)?)\.?\s*$/.exec(m[1].replace(/\s*\*\s*/g, ' ').trim())?.[1] ?? null;
    out[m[2]] = { type: m[3].trim(), dflt };
  }
  return out;
}

const RUST_TO_JS = { f64: 'number', f32: 'number', bool: 'boolean', String: 'string', 'Vec<String>': 'string[]', 'serde_json::Value': null };

test('the engine, the JS checks and the .d.ts name the same generate options', () => {
  const rust = Object.keys(rustOptions()).sort();
  assert.ok(rust.length >= 15, `found ${rust.length} engine options`);
  assert.deepEqual(Object.keys(jsOptions()).sort(), rust, 'www/gpt2.js OPTION_TYPES and src/wasm/options.rs Options differ');
  const dts = Object.keys(dtsOptions()).filter((k) => k !== 'signal' && k !== 'onToken').sort();
  assert.deepEqual(dts, rust, 'www/gpt2.d.ts GenerateOptions and src/wasm/options.rs Options differ');
});

test('each option has one type: the engine\'s, the JS check\'s and the .d.ts\'s agree', () => {
  const rust = rustOptions();
  const js = jsOptions();
  const dts = dtsOptions();
  for (const [name, { type }] of Object.entries(rust)) {
    const want = RUST_TO_JS[type];
    assert.ok(want !== undefined, `${name}: the engine's type ${type} has no JS type in this test`);
    if (want === null) continue; // a JSON value: checked by the engine (earlyStopping: boolean or 'never')
    assert.equal(js[name], want, `${name}: gpt2.js checks ${js[name]}, the engine reads ${type}`);
    // The .d.ts may take more (a single stop string; 'prompt-lookup' | 'none' | Gpt2 for draft).
    assert.ok(dts[name].type.split('|').map((t) => t.trim()).some((t) => t === want || (want === 'string' && /^'/.test(t))),
      `${name}: gpt2.d.ts says ${dts[name].type}, the engine reads ${type}`);
  }
});

test('each option\'s default, as the .d.ts documents it, is the engine\'s', () => {
  const rust = rustOptions();
  const dts = dtsOptions();
  for (const [name, { dflt }] of Object.entries(rust)) {
    if (name === 'stop') continue; // no default written: none
    assert.ok(dts[name].dflt !== null, `gpt2.d.ts: ${name} documents no "Default …."`);
    assert.equal(dts[name].dflt, dflt, `${name}: gpt2.d.ts says Default ${dts[name].dflt}, the engine's default is ${dflt}`);
  }
});
