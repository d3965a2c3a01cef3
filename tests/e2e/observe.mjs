// What the tests (and tools/bench_cold.mjs) read of the demo page: its record (www/page/record.js),
// brought into the running page after each navigation. The page itself puts nothing on `window`;
// `observePage` (a function run IN the page) finds the page's app.js, imports its record.js (the
// same instance: one module per URL per page) and makes each of the record's
// fields readable as `window.<field>`, so a test writes `window.pageState === 'ready'`. It works
// for the served page and for the offline bundle, whose modules are data: URLs. Other pages
// (course pages, embed.html) have no record: it returns false there.

/**
 * Runs in the page: true when the page (or a same-origin frame of it, which gets the same, such
 * as the page in a 320 px frame) has a record and its `window` now reads it.
 */
export async function observePage() {
  let found = false;
  for (const frame of document.querySelectorAll('iframe')) {
    try {
      found = (await frame.contentWindow.eval(`(${observePage})()`)) || found;
    } catch {
      // another origin's frame: not ours to read
    }
  }
  for (const script of document.querySelectorAll('script[type="module"][src]')) {
    let from = null;
    if (new URL(script.src).pathname.endsWith('/page/app.js')) {
      from = './record.js'; // the served page: record.js beside app.js (no request of its own)
    } else if (script.src.startsWith('data:')) {
      // the offline bundle: app.js is a data: URL that imports record.js as another
      const source = await (await fetch(script.src)).text();
      from = source.match(/^import \{ record \} from '([^']+)';$/m)?.[1] ?? null;
    }
    if (!from) continue;
    const { record } = await import(new URL(from, script.src).href);
    for (const key of Object.keys(record)) {
      Object.defineProperty(window, key, {
        get: () => record[key], set: (v) => { record[key] = v; }, configurable: true,
      });
    }
    return true;
  }
  return found;
}

/**
 * Makes a Playwright page observe the demo page after every `goto` and `reload` (the wrappers in
 * engines.mjs call `observePage` themselves).
 */
export function observeNavigations(page) {
  for (const name of ['goto', 'reload']) {
    const navigate = page[name].bind(page);
    page[name] = async (...args) => {
      const response = await navigate(...args);
      await page.evaluate(observePage).catch(() => {}); // a page that is gone again: nothing to read
      return response;
    };
  }
  return page;
}

/**
 * Runs in the page before its scripts (an init script): every model worker the page starts (named
 * 'gpt2-web': www/api/assets.js WORKER_OPTIONS) is kept in `window.gpt2Workers`, so a test can post the requests only tests send (www/worker/testing.js:
 * `crash`, `loseDevice`) straight to the model's worker.
 */
export function keepWorkers() {
  const Native = globalThis.Worker;
  if (!Native || Native.kept) return;
  globalThis.gpt2Workers = [];
  globalThis.Worker = class extends Native {
    static kept = true;
    constructor(url, options) {
      super(url, options);
      if (options?.name === 'gpt2-web') globalThis.gpt2Workers.push(this);
    }
  };
}

/**
 * Runs in the page: posts `{ op }` (a request of www/worker/testing.js) to the last worker the page
 * started and resolves to its `done` value (rejects with its `error` message).
 */
export function testRequest({ op }) {
  const worker = globalThis.gpt2Workers?.at(-1);
  if (!worker) return Promise.reject(new Error('no worker kept: the page was not opened by harness.mjs openPage'));
  const id = `test-${op}-${Math.random()}`;
  return new Promise((resolve, reject) => {
    worker.addEventListener('message', function answer({ data }) {
      if (data?.id !== id) return;
      worker.removeEventListener('message', answer);
      if (data.type === 'done') resolve(data.value);
      else reject(new Error(data.message));
    });
    worker.postMessage({ id, op });
  });
}
