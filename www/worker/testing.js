// Requests for the browser tests only: a crash, a trap, a lost GPU device and failing storage, on
// demand. This part is
// joined into www/worker.js, which `./build.sh serve` and the tests load; the worker that the site,
// the npm package and the offline bundle ship is joined without it (tools/join_worker.mjs,
// `joinWorker({ testing: false })`). The page's API never sends these: a test posts them to the
// worker itself (tests/e2e/observe.mjs, `workerProbe`).
import { models } from './base.js';
import { HANDLERS, respond } from './main.js';
import { REQUESTS } from './protocol.js';
import { scheduler, stepping } from './pump.js';

/** page → worker, tests only: op → what the request holds, and what answers it. */
export const TEST_REQUESTS = {
  loseDevice: '{ id, op } → done (whether a model was on the GPU): destroys the GPU device of every model on it, ' +
    'between two steps, as a driver reset would; the models then continue on the CPU',
  crash: '{ op } → nothing: an uncaught error in the worker, as a crash or an out-of-memory trap would be',
  trap: '{ op, after? } → nothing: the step after `after` more steps (default 0: the next) of each model with a request ' +
    'queued or running throws a WebAssembly.RuntimeError, as a trap (a Rust panic) in its engine does; the worker and ' +
    'the other models go on',
  storage: "{ op, fail } → nothing: from now on this worker's Cache API fails as `fail` says: 'quota' (every " +
    "write refused with QuotaExceededError), 'refuse' (caches.open throws SecurityError, as storage disabled " +
    "or some private modes do) or 'cut' (a file of 1 MB or more written half, then the write fails); null: as the browser made it",
};

Object.assign(REQUESTS, TEST_REQUESTS);
Object.assign(HANDLERS, {
  loseDevice: (msg) => respond(msg.id, loseDevices),
  crash: () => setTimeout(() => { throw new Error('the worker crashed (a test)'); }),
  storage: (msg) => failStorage(msg.fail),
  trap: ({ after = 0 }) => {
    for (const m of models.values()) {
      if (!m.crashed && scheduler.requestsOn(m.index).length > 0) scheduler.trapNextStep(m.index, after);
    }
  },
});

/** The Cache API as the browser made it, before `failStorage` replaced parts of it. */
let cacheApi = null;

/**
 * Makes this worker's Cache API fail as the engines can't be made to on demand (see `storage`);
 * `null` puts it back.
 */
function failStorage(fail) {
  cacheApi ??= { put: Cache.prototype.put, open: caches.open };
  const { put } = cacheApi;
  Cache.prototype.put = put;
  delete caches.open; // the prototype's again
  if (fail === null) return;
  if (fail === 'quota') {
    Cache.prototype.put = async function (request, response) {
      await response.body?.cancel();
      throw new DOMException('The quota has been exceeded (a test).', 'QuotaExceededError');
    };
  } else if (fail === 'refuse') {
    caches.open = async () => { throw new DOMException('The operation is insecure (a test).', 'SecurityError'); };
  } else if (fail === 'cut') {
    Cache.prototype.put = async function (request, response) {
      const bytes = new Uint8Array(await response.arrayBuffer());
      const half = bytes.length >= 1e6 ? bytes.subarray(0, bytes.length >> 1) : bytes;
      await put.call(this, request, new Response(half, { headers: response.headers }));
      if (half !== bytes) throw new DOMException('The write was cut off (a test).', 'AbortError');
    };
  } else {
    throw new Error(`storage: no such failure "${fail}"`);
  }
}

async function loseDevices() {
  let onGpu = false;
  for (const m of models.values()) {
    while (stepping) await stepping.catch(() => {}); // the model may be in the step under way
    if (m.disposed || m.crashed) continue;
    onGpu = scheduler.loseDevice(m.index) || onGpu;
  }
  return onGpu;
}
