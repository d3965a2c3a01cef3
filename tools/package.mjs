// Writes the npm package: dist/gpt2-web-<version>.tgz (`npm pack` of a staged folder), named
// gpt2-web, with the JS API, the widget, the worker and the three wasm builds, and no model: the
// model folder URL is an option (Gpt2.load({ model }), <gpt2-generator model="…">).
//
//   node tools/package.mjs [--out dist]      (./build.sh package builds the wasm first, then runs this)
//
// The package works unchanged through a bundler (tests/e2e/embed.test.mjs builds an app with Vite)
// and from a CDN-style URL without one: www/assets.js names every file with a literal
// new URL('./…', import.meta.url), which bundlers copy and browsers resolve against the module.
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const WWW = path.join(ROOT, 'www');
const FILES = ['gpt2.js', 'gpt2.d.ts', 'assets.js', 'sources.js', 'connection.js', 'worker.js', 'widget.js', 'widget-style.js', 'widget.d.ts', 'loop-view.js', 'text.js', 'presets.js', 'completions.js', 'sampling.js', 'options.js',
  'embed.html', 'embed.js'];
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
    type: 'module',
    main: './gpt2.js',
    types: './gpt2.d.ts',
    exports: {
      '.': { types: './gpt2.d.ts', default: './gpt2.js' },
      './widget': { types: './widget.d.ts', default: './widget.js' },
      './package.json': './package.json',
    },
    sideEffects: ['./widget.js', './embed.js'],
    files: [...FILES, ...BUILDS.map((b) => `${b}/`), 'README.md'],
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
