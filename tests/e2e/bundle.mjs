// The single-file demo the bundle tests open: made by `node tools/bundle.mjs` when it is missing or
// older than any of its inputs (www/pkg must exist: ./build.sh test builds it before these tests run).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT, MODEL_DIR, MODEL_FILE, MODEL_NAME } from './harness.mjs';

/** The bundle's path: a bundle of another model (GPT2_E2E_MODEL) goes beside the test output, not over the demo's. */
export const BUNDLE = MODEL_NAME === 'gpt2-shakespeare' ? path.join(ROOT, 'dist/gpt2-demo.html')
  : path.join(ROOT, `tests/e2e/out/gpt2-demo-${MODEL_NAME}.html`);

function inputs() {
  const www = path.join(ROOT, 'www');
  return [
    path.join(ROOT, 'tools/bundle.mjs'),
    // Every page file (more than the bundle uses: cheap, and never stale when app.js gains an import).
    ...fs.readdirSync(www).filter((f) => /\.(js|html|css)$/.test(f)).map((f) => path.join(www, f)),
    ...['pkg/gpt2_web.js', 'pkg/gpt2_web_bg.wasm'].map((f) => path.join(www, f)),
    ...(MODEL_FILE.endsWith('.gguf') ? [MODEL_FILE]
      : ['config.json', 'model.safetensors', 'tokenizer.json'].map((f) => path.join(MODEL_DIR, f))),
  ];
}

/** Makes the bundle unless it is newer than every input; returns its path. */
export function ensureBundle() {
  const built = fs.existsSync(BUNDLE) ? fs.statSync(BUNDLE).mtimeMs : 0;
  if (inputs().some((f) => fs.statSync(f).mtimeMs > built)) {
    execFileSync(process.execPath, ['tools/bundle.mjs', '--model', MODEL_FILE, '--out', BUNDLE], { cwd: ROOT, stdio: 'inherit' });
  }
  return BUNDLE;
}
