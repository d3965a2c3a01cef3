// gpt2-web in Node (20 or later): the same API as in the browser (gpt2.js; types in gpt2.d.ts),
// chosen by the package's "node" export condition, so `import { Gpt2 } from 'gpt2-web'` works in a
// plain `node` process:
//
//   const model = await Gpt2.load({ model: './models/gpt2' });   // a folder, a .gguf file, a URL
//   console.log((await model.generate('ROMEO:', { maxTokens: 20 })).text);
//   model.dispose();                                              // then the process may exit
//
// The model's worker is a worker_threads thread that looks like a browser's worker
// (node/worker.js); it runs one thread (`threads` is taken and `model.threads` says 1). A model is a path on disk (a
// folder with config.json, model.safetensors and tokenizer.json, or a GGUF file; relative to the
// current directory), an http(s) URL (fetched), or a Hugging Face model id such as
// 'openai-community/gpt2' when no such path exists. Nothing is cached: Node has no Cache API, and
// the files are read from disk anyway. The engine is the browser's WebAssembly build on the CPU
// (Node has no WebGPU).

import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { host } from './api/host.js';
import { isHubId } from './api/sources.js';
import { WebWorker } from './node/platform.js';

host.startWorker = (url, options) => new WebWorker(url, options);
host.baseUrl = pathToFileURL(`${process.cwd()}${path.sep}`).href;
host.modelUrl = (model) => {
  if (typeof model !== 'string' || /^(https?|file|blob|data):/i.test(model)) return undefined;
  const full = path.resolve(model);
  let stat = null;
  try {
    stat = fs.statSync(full);
  } catch {
    if (isHubId(model)) return undefined; // 'owner/name': the Hub's
    throw new Error(`no model folder or file at ${full} (from "${model}"): give a folder with config.json, ` +
      'model.safetensors and tokenizer.json, a .gguf file, an http(s) URL, or a Hugging Face model id');
  }
  const url = pathToFileURL(full).href;
  return stat.isDirectory() ? `${url}/` : url;
};

export * from './gpt2.js';
export { default } from './gpt2.js';
