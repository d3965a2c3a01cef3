// Writes the npm package: dist/gpt2-web-<version>.tgz (`npm pack` of a staged folder), named
// gpt2-web, with the JS API, the widget, the worker and the three wasm builds, and no model: the
// model folder URL is an option (Gpt2.load({ model }), <gpt2-generator model="…">).
//
//   node tools/package.mjs [--out dist]      (./build.sh package builds the wasm first, then runs this)
//
// The package works unchanged through a bundler (tests/e2e/embed.test.mjs builds an app with Vite)
// and from a CDN-style URL without one: www/api/assets.js names every file with a literal
// new URL('../…', import.meta.url), which bundlers copy and browsers resolve against the module.
// The layout is www/'s: the public entry points at the top (gpt2.js, widget.js, embed.html, one
// line each but the page), the code in api/ and widget/, the worker joined without the tests'
// requests (tools/join_worker.mjs).
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { joinWorker } from './join_worker.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const WWW = path.join(ROOT, 'www');
/** The public entry points, at the top as in www/ (node.js: the same API in Node, the "node" condition). */
const FILES = ['gpt2.js', 'gpt2.d.ts', 'node.js', 'widget.js', 'widget.d.ts', 'embed.html'];
/** The code behind them: every file of these www/ folders. */
const FOLDERS = ['api', 'node', 'widget'];
/** The examples (examples/ of the repository): the autograder and a student's answer. */
const EXAMPLES = ['autograder.mjs', 'student.mjs'];
/** What npm shows beside the name. */
const KEYWORDS = ['gpt2', 'gpt-2', 'llm', 'text-generation', 'transformer', 'webgpu', 'webassembly', 'wasm', 'inference', 'education', 'openai'];
const BUILDS = ['pkg', 'pkg-relaxed', 'pkg-threads'];

function main() {
  const argv = process.argv.slice(2);
  const outIndex = argv.indexOf('--out');
  const out = path.resolve(outIndex >= 0 ? argv[outIndex + 1] : path.join(ROOT, 'dist'));
  const cargo = fs.readFileSync(path.join(ROOT, 'Cargo.toml'), 'utf8');
  const field = (name) => cargo.match(new RegExp(`^${name} = "([^"]*)"`, 'm'))?.[1];
  const stage = path.join(out, 'npm');
  fs.rmSync(stage, { recursive: true, force: true });
  fs.mkdirSync(stage, { recursive: true });
  for (const f of FILES) fs.copyFileSync(path.join(WWW, f), path.join(stage, f));
  for (const d of FOLDERS) fs.cpSync(path.join(WWW, d), path.join(stage, d), { recursive: true });
  fs.writeFileSync(path.join(stage, 'worker.js'), joinWorker({ testing: false }).source);
  fs.mkdirSync(path.join(stage, 'examples'));
  for (const f of EXAMPLES) fs.copyFileSync(path.join(ROOT, 'examples', f), path.join(stage, 'examples', f));
  for (const b of BUILDS) {
    const dir = path.join(WWW, b);
    if (!fs.existsSync(path.join(dir, 'gpt2_web_bg.wasm'))) throw new Error(`www/${b} is missing: run ./build.sh build first`);
    fs.cpSync(dir, path.join(stage, b), { recursive: true, filter: (src) => !src.endsWith('.gitignore') });
  }
  const pkg = {
    name: 'gpt2-web',
    version: field('version'),
    description: field('description'),
    license: field('license'),
    repository: { type: 'git', url: `git+${field('repository')}.git` },
    keywords: KEYWORDS,
    engines: { node: '>=20' },
    type: 'module',
    main: './gpt2.js',
    types: './gpt2.d.ts',
    exports: {
      '.': { types: './gpt2.d.ts', node: './node.js', default: './gpt2.js' },
      './widget': { types: './widget.d.ts', default: './widget.js' },
      './package.json': './package.json',
    },
    sideEffects: ['./widget.js', './widget/widget.js', './widget/embed.js'],
    files: [...FILES, 'worker.js', ...FOLDERS.map((d) => `${d}/`), ...BUILDS.map((b) => `${b}/`), 'examples/', 'README.md'],
  };
  fs.writeFileSync(path.join(stage, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`);
  fs.writeFileSync(path.join(stage, 'README.md'), README);
  const name = execFileSync('npm', ['pack', '--pack-destination', out, '--loglevel=error'], { cwd: stage, encoding: 'utf8' }).trim().split('\n').pop();
  const size = fs.statSync(path.join(out, name)).size;
  console.log(`${path.relative(ROOT, path.join(out, name))}: ${(size / 1e6).toFixed(1)} MB (npm install it; no model inside)`);
}

const README = `# gpt2-web

GPT-2 in the browser: WebGPU with a WebAssembly CPU fallback, one callback per generated token.
This package has no model: point it at a Hugging Face-style folder (config.json, model.safetensors,
tokenizer.json) that your site serves.

\`\`\`js
import { Gpt2 } from 'gpt2-web';
const model = await Gpt2.load({ model: '/models/my-gpt2/' });
for await (const t of model.stream('ROMEO:', { maxTokens: 40 })) output.append(t.text);
\`\`\`

\`\`\`js
import 'gpt2-web/widget'; // defines <gpt2-generator model="/models/my-gpt2/" readout>
\`\`\`

In Node (20 or later) the same import gives the same API: the model is a folder or a .gguf file
on disk (or a URL), the engine runs on the CPU in a worker thread, and \`model.dispose()\` lets the
process exit.

\`\`\`js
import { Gpt2 } from 'gpt2-web';
const model = await Gpt2.load({ model: './models/gpt2' });
console.log((await model.generate('ROMEO:', { maxTokens: 40, temperature: 0 })).text);
model.dispose();
\`\`\`

\`examples/autograder.mjs\` grades a student's own generation loop (\`examples/student.mjs\`)
against the engine's greedy output, case by case, with an exit code for CI:
\`node node_modules/gpt2-web/examples/autograder.mjs MODEL student.mjs\`.

Bundlers copy the worker and the wasm builds into their output by themselves (Vite: \`vite build\`
as it is). Types: gpt2.d.ts and widget.d.ts. The project's README has the whole API and the
headers an asset host needs when a page of another origin uses these files.
`;

try {
  main();
} catch (e) {
  console.error(`tools/package.mjs: ${e.message}`);
  process.exit(1);
}
