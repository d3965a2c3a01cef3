// Requests for the browser tests only: a crash and a lost GPU device, on demand. This part is
// joined into www/worker.js, which `./build.sh serve` and the tests load; the worker that the site,
// the npm package and the offline bundle ship is joined without it (tools/join_worker.mjs,
// `joinWorker({ testing: false })`). The page's API never sends these: a test posts them to the
// worker itself (tests/e2e/observe.mjs, `workerProbe`).
import { models } from './base.js';
import { HANDLERS, respond } from './main.js';
import { REQUESTS } from './protocol.js';

/** page → worker, tests only: op → what the request holds, and what answers it. */
export const TEST_REQUESTS = {
  loseDevice: '{ id, op } → done (whether a model was on the GPU): destroys the GPU device of every model on it, ' +
    'between two steps, as a driver reset would; the models then continue on the CPU',
  crash: '{ op } → nothing: an uncaught error in the worker, as a crash or an out-of-memory trap would be',
};

Object.assign(REQUESTS, TEST_REQUESTS);
Object.assign(HANDLERS, {
  loseDevice: (msg) => respond(msg.id, loseDevices),
  crash: () => setTimeout(() => { throw new Error('the worker crashed (a test)'); }),
});

async function loseDevices() {
  let onGpu = false;
  for (const m of models.values()) {
    while (m.stepping) await m.stepping.catch(() => {}); // the engine is taken while a step runs
    if (m.disposed || m.crashed || m.engine?.backend !== 'webgpu') continue;
    m.engine.loseDevice();
    onGpu = true;
  }
  return onGpu;
}
