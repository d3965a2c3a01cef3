// The page's first load, started before the rest of the page has arrived. index.html runs this
// module ahead of app.js: its import graph is gpt2.js's few modules, where app.js's is the page's
// thirty (the labs, the charts), which a browser may read from its cache one after another. So on
// a return visit the worker compiles the engine and reads the weights while the page's other
// modules load. app.js takes this load over (`takeEarlyLoad`) when its first load is the same one:
// the progress so far is replayed to it, the later events go straight to it.
//
// Only the page's default start is begun early — the demo model with the URL's ?backend and ?dtype.
// A ?model=… link is not (app.js may ask first), nor anything in a bundle that has no index.html tag.

import { Gpt2 } from '../api/gpt2.js';
import { DEMO_MODEL } from '../api/assets.js';

const params = new URLSearchParams(location.search);

/** The load begun here, until app.js takes it: { backend, dtype, startedAtMs, promise, take(handlers) }, or null. */
let early = null;
if (!params.has('model')) {
  const backend = params.get('backend') ?? 'auto';
  const dtype = params.get('dtype') ?? 'q8';
  const events = []; // [option name, event] until app.js takes the load over
  let handlers = null; // app.js's onProgress and onBackendChange, once it has taken it
  const forward = (name) => (event) => (handlers ? handlers[name]?.(event) : events.push([name, event]));
  early = {
    backend, dtype, startedAtMs: performance.now(),
    promise: Gpt2.load({ model: DEMO_MODEL, backend, dtype, onProgress: forward('onProgress'), onBackendChange: forward('onBackendChange') }),
    take(h) {
      handlers = h;
      for (const [name, event] of events.splice(0)) h[name]?.(event);
    },
  };
  early.promise.catch(() => {}); // app.js reports a failure when it takes the load over
}

/**
 * The load begun here, if it is the one asked for (the demo model, this backend and dtype) and not
 * yet taken: `{ startedAtMs, promise }`, after the progress so far has gone to `handlers`
 * ({ onProgress, onBackendChange }); else null, and the caller loads as usual.
 */
export function takeEarlyLoad(model, backend, dtype, handlers) {
  if (!early || model !== DEMO_MODEL || backend !== early.backend || dtype !== early.dtype) return null;
  const taken = early;
  early = null;
  taken.take(handlers);
  return taken;
}
