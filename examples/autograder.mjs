#!/usr/bin/env node
// An autograder for the lesson's exercise, "write the loop yourself", at a course's scale: a
// student's module exports
//
//   export async function complete(model, prompt, maxTokens) → the generated token ids (or text)
//
// written with `model.logits`, `model.tokenize`, `model.decode` and gpt2-web's helpers (argmax,
// softmax, …). Each case runs the student's loop and the engine's own greedy generation
// (`model.generate(prompt, { maxTokens, temperature: 0 })`) and compares them token by token; a
// case fails on the first token that differs (both named), on an exception, or on a wrong shape.
// Prints one line per case and a total; exits 0 when every case passed, 1 when one failed, 2 when
// it could not run — so CI can grade a submission:
//
//   node autograder.mjs MODEL STUDENT.mjs        (MODEL: a folder or .gguf file of GPT-2 weights)
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Gpt2 } from 'gpt2-web';

/** The cases: prompts × lengths, the last long enough to need the whole loop (the cache, the stop). */
export const CASES = ['ROMEO:', 'JULIET:', 'First Citizen:', 'To be, or not to be'].flatMap((prompt) =>
  [1, 8, 32].map((maxTokens) => ({ prompt, maxTokens })));

/** Where two id lists first differ, or -1. */
function firstDifference(a, b) {
  for (let i = 0; i < Math.max(a.length, b.length); i++) if (a[i] !== b[i]) return i;
  return -1;
}

/** One case: null when it passed, else why not. */
async function grade(model, complete, { prompt, maxTokens }) {
  const expected = await model.generate(prompt, { maxTokens, temperature: 0 });
  let got;
  try {
    got = await complete(model, prompt, maxTokens);
  } catch (e) {
    return `it threw: ${e?.message ?? e}`;
  }
  if (typeof got === 'string') {
    const want = await model.decode(expected.tokens);
    return got === want ? null : `the text differs: expected ${JSON.stringify(want)}, got ${JSON.stringify(got)}`;
  }
  if (!Array.isArray(got) || !got.every(Number.isInteger)) return `it returned ${typeof got}, not token ids or a text`;
  const at = firstDifference(got, expected.tokens);
  if (at < 0) return null;
  const name = async (id) => (id === undefined ? 'nothing' : `${id} (${JSON.stringify(await model.decode([id]))})`);
  return `token ${at} differs: expected ${await name(expected.tokens[at])}, got ${await name(got[at])}`;
}

export async function autograde(modelPath, studentPath, { log = console.log } = {}) {
  const student = await import(pathToFileURL(path.resolve(studentPath)).href);
  if (typeof student.complete !== 'function') throw new Error(`${studentPath} exports no function complete(model, prompt, maxTokens)`);
  const model = await Gpt2.load({ model: modelPath });
  try {
    log(`gpt2-web autograder: ${studentPath} against ${modelPath} (greedy, ${CASES.length} cases)`);
    let passed = 0;
    for (const [i, c] of CASES.entries()) {
      const why = await grade(model, student.complete, c);
      if (why === null) passed++;
      log(`${why === null ? 'PASS' : 'FAIL'} ${String(i + 1).padStart(2)} ${JSON.stringify(c.prompt)}, ${c.maxTokens} token${c.maxTokens === 1 ? '' : 's'}${why ? `: ${why}` : ''}`);
    }
    log(`${passed}/${CASES.length} passed`);
    return passed === CASES.length;
  } finally {
    model.dispose();
  }
}

if (process.argv[1] && pathToFileURL(path.resolve(process.argv[1])).href === import.meta.url) {
  const [modelPath, studentPath] = process.argv.slice(2);
  if (!modelPath || !studentPath) {
    console.error('usage: node autograder.mjs MODEL STUDENT.mjs');
    process.exit(2);
  }
  autograde(modelPath, studentPath).then((ok) => { process.exitCode = ok ? 0 : 1; }, (e) => {
    console.error(`autograder: ${e.message}`);
    process.exitCode = 2;
  });
}
