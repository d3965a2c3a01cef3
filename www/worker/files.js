// The model's files: fetched (with size caps, progress and the Cache API copy checked against its
// size and checksum) or given as Blobs/ArrayBuffers, and the layouts a folder may have besides
// model.safetensors (shards, pytorch_model.bin, a GGUF file; vocab.json + merges.txt).
// (Part of the worker: see www/worker/main.js.)

import { FILES, reply } from './base.js';

const CACHE_NAME = 'gpt2-web-models-v1';

/**
 * A folder URL whose model.safetensors is not there (a 404) may hold its weights otherwise, tried
 * in this order: in shards, as big checkpoints on the Hub do (model.safetensors.index.json names
 * them), or as pytorch_model.bin (torch.save's archive, read without running anything). Returns
 * the weights and the reader of the file found, opened (null for shards: they open in turn).
 */
export async function otherLayouts(weights, small, home, cache) {
  let error;
  try {
    return [weights, await weights.open()];
  } catch (e) {
    if (!/\b404\b/.test(e.message)) throw e;
    error = e;
  }
  const index = await small.get('index').catch((e) => (/\b404\b/.test(e.message) ? null : Promise.reject(e)));
  if (index) {
    const url = small.url('index');
    let parts = [];
    return [{
      file: SHARDS_INDEX,
      index,
      /** The shards' weights, in the order the engine gives. */
      use(names) {
        parts = names.map((name) => urlWeights(new URL(name, url).href, home, cache, name));
        return parts;
      },
      stored: () => Promise.all(parts.map((p) => p.stored())),
      failed: () => Promise.all(parts.map((p) => p.failed())),
      drop: () => Promise.all(parts.map((p) => p.drop())),
    }, null];
  }
  const bin = urlWeights(small.url('bin'), home, cache, TORCH_BIN);
  try {
    return [bin, await bin.open()];
  } catch (e) {
    if (!/\b404\b/.test(e.message)) throw e;
  }
  throw new Error(`${error.message} (nor ${SHARDS_INDEX} or ${TORCH_BIN} beside it)`);
}

/**
 * Where a folder URL has no tokenizer.json (a 404), its vocab.json and merges.txt, as many
 * fine-tuned GPT-2 repositories have, made into one; otherwise the first error stands, saying that
 * they were looked for too.
 */
export async function vocabAndMerges(error, mod, small, source) {
  if (!source.urls || !/\b404\b/.test(error.message)) throw error;
  const [vocab, merges] = await Promise.all(['vocab', 'merges'].map((k) => small.get(k).catch(() => null)));
  if (!vocab || !merges) throw new Error(`${error.message} (nor vocab.json and merges.txt beside it)`);
  return mod.tokenizerFromVocab(vocab, merges);
}

/**
 * The weights at `url`: `open()` gives a reader of the file from its start (from the Cache API
 * when it is there). The first download is also written to the cache, from the same stream, with
 * its size and checksum beside it once the model has loaded (`stored()`); a cached copy is checked
 * against them as it is read, and one that does not match (or has none) fails the read with
 * `damagedCache`, so that `load` drops it (`drop()`) and downloads the file again. `failed()` takes
 * a copy out again when the model did not load.
 */
export function urlWeights(url, home, cache, file = FILES.weights) {
  const keep = cache && !home.has(new URL(url).origin) ? cache : null;
  const checkUrl = checkOf(url);
  let storing = null;
  let sum = null;
  return {
    file,
    what: `could not download ${url}`,
    async open() {
      let res = keep ? (await keep.match(url).catch(() => undefined)) ?? null : null;
      const cached = res !== null;
      let expect = null;
      if (cached) expect = await keep.match(checkUrl).then((r) => r?.text(), () => null) ?? null;
      if (!res) res = await fetchOk(url);
      let body = res.body;
      let summing = null;
      if (keep && !cached && !storing) {
        const [mine, theirs] = body.tee();
        body = mine;
        const type = res.headers.get('Content-Type') || 'application/octet-stream';
        storing = keep.put(url, new Response(theirs, { headers: { 'Content-Type': type } }))
          .then(() => null, (e) => notKept(url, e));
        summing = sum = checksum();
      } else if (cached) {
        summing = checksum();
      }
      const reader = body.getReader();
      const size = Number(res.headers.get('Content-Length')) || 0;
      if (!summing) return { reader, cached, size };
      return {
        cached, size,
        reader: {
          read: async () => {
            const step = await reader.read();
            if (!step.done) summing.add(step.value);
            else if (cached && summing.value() !== expect) {
              throw Object.assign(new Error(`the copy of ${file} in the browser's cache is damaged ` +
                `(${summing.value()} where ${expect ?? 'nothing'} was recorded)`), { damagedCache: true });
            }
            return step;
          },
          cancel: (why) => reader.cancel(why),
        },
      };
    },
    /**
     * Resolves once the copy in the Cache API is written, with its check (the model loaded): null,
     * or why it could not be kept. A copy whose write failed (a full quota, a write cut midway) is
     * taken out with its check, so no later load trusts what is left of it.
     */
    async stored() {
      return storing ? sealCopy(keep, url, await storing, sum.value()) : null;
    },
    async failed() {
      if (!storing) return;
      await storing;
      storing = null;
      await keep.delete(url).catch(() => {});
    },
    /** Takes a damaged cached copy out, so that the next `open()` downloads the file. */
    async drop() {
      storing = null;
      if (keep) await dropCopy(keep, url);
    },
  };
}

/** How much of a weights file is read ahead of the engine: about what a disk cache gives while the engine compiles. */
export const READ_AHEAD_BYTES = 32 << 20;

/**
 * `opened` (a reader of a file, as `open()` gives it) with a reader that reads on by itself, up to
 * `cap` bytes that nobody has taken yet: the file comes off the disk cache or the network while the
 * engine compiles and while it converts what came before, instead of one chunk per ask. The steps
 * come in their order; a failure is given to the `read()` that asks for that step. `buffered()`
 * takes, without waiting, the chunks already in.
 */
export function readAhead(opened, cap = READ_AHEAD_BYTES) {
  const { reader } = opened;
  const ahead = []; // { step, value?, taken } in the order read
  let held = 0; // bytes in and not taken
  let reading = false; // the pump's read is in flight
  let over = false; // the file ended, failed or was cancelled
  const pull = () => {
    const entry = { step: reader.read(), value: null, taken: false };
    ahead.push(entry);
    return entry;
  };
  const pump = () => {
    if (over || reading || held >= cap) return;
    reading = true;
    const entry = pull();
    entry.step.then((s) => {
      reading = false;
      if (s.done) {
        over = true;
        return;
      }
      if (!entry.taken) {
        entry.value = s.value;
        held += s.value.length;
      }
      pump();
    }, () => {
      reading = false;
      over = true;
    });
  };
  const take = () => {
    const entry = ahead.shift() ?? pull();
    entry.taken = true;
    if (entry.value) held -= entry.value.length;
    pump();
    return entry;
  };
  pump();
  return {
    ...opened,
    reader: {
      read: () => take().step,
      buffered: () => {
        const chunks = [];
        while (ahead[0]?.value) chunks.push(take().value);
        return chunks;
      },
      cancel: (why) => {
        over = true;
        return reader.cancel(why);
      },
    },
  };
}

/**
 * A running check of a stream of chunks: its size and a 32-bit hash of its little-endian words
 * (FNV-style, mixed per word; a tail of under 4 bytes is carried to the next chunk), cheap enough
 * to run on every cached read (~1 ms per 3 MB in V8).
 */
function checksum() {
  let h = 0x811c9dc5 | 0;
  let size = 0;
  const carry = new Uint8Array(4);
  let held = 0;
  const mix = (w) => {
    h = Math.imul(h ^ w, 0x01000193);
    h ^= h >>> 15;
  };
  return {
    add(bytes) {
      size += bytes.length;
      let i = 0;
      while (held > 0 && i < bytes.length) {
        carry[held++] = bytes[i++];
        if (held === 4) {
          mix(carry[0] | (carry[1] << 8) | (carry[2] << 16) | (carry[3] << 24));
          held = 0;
        }
      }
      const n = (bytes.length - i) >> 2;
      const view = new DataView(bytes.buffer, bytes.byteOffset + i, n * 4);
      for (let k = 0; k < n; k++) mix(view.getInt32(4 * k, true));
      for (i += 4 * n; i < bytes.length; i++) carry[held++] = bytes[i];
    },
    value() {
      let t = h;
      for (let k = 0; k < held; k++) t = Math.imul(t ^ carry[k], 0x01000193);
      return `${size}:${(t >>> 0).toString(16)}`;
    },
  };
}

/**
 * Weights given as a Blob/File, ArrayBuffer or typed array, read as a stream all the same. Bytes
 * are read in place, never through a Blob: on a page opened from file:// WebKit cannot read a Blob
 * inside a worker.
 */
export function fileWeights(f) {
  if (f instanceof Blob) {
    return {
      file: FILES.weights,
      what: `could not read ${FILES.weights}`,
      open: async () => ({ reader: f.stream().getReader(), cached: false, size: f.size }),
      stored: async () => {},
      failed: async () => {},
    };
  }
  const bytes = ArrayBuffer.isView(f) ? new Uint8Array(f.buffer, f.byteOffset, f.byteLength) : new Uint8Array(f);
  const chunks = () => {
    let at = 0;
    return {
      read: async () => {
        if (at >= bytes.length) return { done: true, value: undefined };
        const value = bytes.subarray(at, Math.min(bytes.length, at + (1 << 20)));
        at += value.length;
        return { done: false, value };
      },
      cancel: async () => {},
    };
  };
  return {
    file: FILES.weights,
    what: `could not read ${FILES.weights}`,
    open: async () => ({ reader: chunks(), cached: false, size: bytes.length }),
    stored: async () => {},
    failed: async () => {},
  };
}

/** A response to `url` that is OK, or an Error that says why not. */
async function fetchOk(url, signal) {
  const crossOrigin = new URL(url).origin !== self.location.origin;
  let res;
  try {
    res = await fetch(url, { signal });
  } catch (e) {
    if (signal?.aborted) throw e;
    throw new Error(`could not download ${url}: network error (${e.message})` +
      (crossOrigin ? '; the server may be unreachable, or may not allow cross-origin requests ' +
        '(it must send Access-Control-Allow-Origin)' : ''));
  }
  if (!res.ok) throw new Error(`could not download ${url}: the server answered ${res.status} ${res.statusText}`.trim());
  return res;
}

/** The files a folder without tokenizer.json may have instead (vocabAndMerges). */
const TOKENIZER_PAIR = { vocab: 'vocab.json', merges: 'merges.txt' };

/** What a folder without model.safetensors may have instead, in this order (otherLayouts). */
const SHARDS_INDEX = 'model.safetensors.index.json';
const TORCH_BIN = 'pytorch_model.bin';

/** The most bytes config.json and tokenizer.json may have (GPT-2's: 1 kB and 1.4 MB). */
const CAPS = { config: 1 << 20, tokenizer: 64 << 20, index: 16 << 20 };

/** `size` bytes of `file`, refused above `cap` with a sentence. */
function capped(file, cap) {
  return (size) => {
    if (size > cap) throw new Error(`${file} is ${mb(size)}, more than the ${mb(cap)} it may be; is it the right file?`);
    return cap;
  };
}

const mb = (n) => (n >= 1e6 ? `${(n / 1e6).toFixed(1)} MB` : `${Math.ceil(n / 1e3)} kB`);

/**
 * config.json and tokenizer.json from their URLs: `get(key)` downloads one (capped in size),
 * and `stores` puts what was downloaded in the Cache API (called once the model has loaded).
 */
export function smallFetcher(id, urls, home, cache) {
  const stores = [];
  const where = (key) => {
    const name = FILES[key] ?? TOKENIZER_PAIR[key] ?? { index: SHARDS_INDEX, bin: TORCH_BIN }[key];
    return [name, urls[key] ?? new URL(name, urls.tokenizer).href];
  };
  return {
    stores,
    url: (key) => where(key)[1],
    async get(key) {
      // vocab.json and merges.txt sit beside tokenizer.json (vocabAndMerges).
      const [name, url] = where(key);
      const f = await download(id, name, url, home.has(new URL(url).origin) ? null : cache, capped(name, CAPS[key] ?? CAPS.tokenizer));
      stores.push(f.store);
      return f.bytes;
    },
  };
}

/**
 * The Cache API's store of models: `{ cache }`, or `{ cache: null, why }` where the browser has
 * none (not a secure context) or refuses it (storage disabled, some private modes).
 */
export async function openCache() {
  if (typeof caches === 'undefined') return { cache: null, why: 'this page has no Cache API (it is not a secure context)' };
  try {
    return { cache: await caches.open(CACHE_NAME), why: null };
  } catch (e) {
    return { cache: null, why: `the browser refused its storage: ${e.name}: ${e.message}` };
  }
}

/** Why a file was not kept in the Cache API (a full quota, storage refused, a write cut off). */
function notKept(url, e) {
  console.warn(`gpt2-web: not cached: ${url}: ${e.message}`);
  return `${e.name === 'QuotaExceededError' ? 'the storage quota is full' : e.name}: ${e.message}`;
}

/**
 * The sentence a model loaded from elsewhere gets when it could not be kept for the next visit,
 * or null: `whys` are the reasons its files gave (nulls where they were kept).
 */
export function notCachedSentence(whys) {
  const why = whys.flat().find(Boolean);
  return why ? `The model could not be kept in this browser's storage (${why}), so it will be downloaded again next time.` : null;
}

/**
 * The origins whose files are never put in the Cache API: the page's and gpt2-web's own (where the
 * engine came from, e.g. a course page's asset host), so a retrained demo model is never stale.
 */
export function homeOrigins(builds) {
  return new Set([self.location.origin, ...Object.values(builds).map((b) => new URL(b.js).origin)]);
}

/**
 * One file: { bytes, store }, reporting progress. `limit(size)` sees the announced size (0 when
 * unknown) before anything is allocated, throws when it is too much, and returns the most bytes
 * the body may have. With a `cache`, the file (e.g. from Hugging Face) is read from the Cache API
 * when a copy is there whose size and checksum match the ones recorded beside it (a copy that
 * does not is deleted and the file downloaded), and `store()` keeps it there with its check, so a
 * page that was opened once works offline: null, or why it could not be kept (a copy whose write
 * failed is deleted, so no later load reads what is left of it).
 */
async function download(id, file, url, cache, limit) {
  const checkUrl = checkOf(url);
  const report = (loaded, total, cached) => reply(id, 'progress', { file, loaded, total, cached });
  const fail = (e) => new Error(`could not download ${url}: ${e.tooBig ? e.message : `the transfer failed after it began (${e.message})`}`);
  const copy = cache ? (await cache.match(url).catch(() => undefined)) ?? null : null;
  if (copy) {
    const expect = await cache.match(checkUrl).then((r) => r?.text(), () => null) ?? null;
    // A copy too big, cut or unreadable is as damaged as one that fails its check.
    const bytes = await Promise.resolve(Number(copy.headers.get('Content-Length')) || 0).then(limit)
      .then((max) => readBody(copy, max, (l, t) => report(l, t, true))).catch(() => null);
    if (bytes && expect !== null && sumOf(bytes) === expect) return { bytes, store: async () => null };
    console.warn(`gpt2-web: the copy of ${file} in the browser's cache is damaged or unchecked; downloading it again`);
    await dropCopy(cache, url);
  }
  const res = await fetchOk(url);
  const max = await limit(Number(res.headers.get('Content-Length')) || 0);
  let bytes;
  try {
    bytes = await readBody(res, max, (l, t) => report(l, t, false));
  } catch (e) {
    throw fail(e);
  }
  const type = res.headers.get('Content-Type') || 'application/octet-stream';
  const store = async () => (cache
    ? sealCopy(cache, url, await cache.put(url, new Response(bytes, { headers: { 'Content-Type': type } }))
      .then(() => null, (e) => notKept(url, e)), sumOf(bytes))
    : null);
  return { bytes, store };
}

/**
 * Ends the keeping of `url` in `cache`, whose write gave `why` (null: written): its check `sum` is
 * written beside it; a copy whose write or check failed is deleted with its check, so no later load
 * reads what is left of it. Returns null, or why it could not be kept.
 */
async function sealCopy(cache, url, why, sum) {
  const check = checkOf(url);
  why ??= await cache.put(check, new Response(sum)).then(() => null, (e) => notKept(check, e));
  if (why) await dropCopy(cache, url);
  return why;
}

/** Takes a copy and its check out of `cache`. */
function dropCopy(cache, url) {
  return Promise.all([url, checkOf(url)].map((u) => cache.delete(u).catch(() => {})));
}

/** The URL under which a cached file's size and checksum are kept. */
function checkOf(url) {
  return `${url}${url.includes('?') ? '&' : '?'}gpt2-web-check`;
}

/** `checksum()` of one buffer. */
function sumOf(bytes) {
  const sum = checksum();
  sum.add(bytes);
  return sum.value();
}

/**
 * Streams a body into one buffer of at most `max` bytes; progress at most every 50 ms, and once at
 * the end.
 */
async function readBody(res, max, progress) {
  const length = Number(res.headers.get('Content-Length'));
  const tooBig = (n) => Object.assign(new Error(`it is ${mb(n)} or more, more than this model may take (${mb(max)})`), { tooBig: true });
  if (length > max) throw tooBig(length);
  // Content-Length counts encoded bytes (gzip); the buffer grows if the body turns out longer.
  let buf = new Uint8Array(length > 0 ? length : Math.min(1 << 20, max));
  let loaded = 0;
  let last = 0;
  progress(0, length || 0);
  const reader = res.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (loaded + value.length > max) {
      reader.cancel().catch(() => {});
      throw tooBig(loaded + value.length);
    }
    if (loaded + value.length > buf.length) {
      const grown = new Uint8Array(Math.min(max, Math.max(buf.length * 2, loaded + value.length)));
      grown.set(buf.subarray(0, loaded));
      buf = grown;
    }
    buf.set(value, loaded);
    loaded += value.length;
    const now = performance.now();
    if (now - last > 50) {
      last = now;
      progress(loaded, Math.max(length || 0, loaded));
    }
  }
  progress(loaded, loaded);
  return buf.length === loaded ? buf : buf.slice(0, loaded);
}

/** config.json and tokenizer.json given as Blob/File, ArrayBuffer or typed array, as `smallFetcher`. */
export function smallReader(id, files) {
  return {
    stores: [],
    async get(key) {
      const f = files[key];
      capped(FILES[key], CAPS[key])(f instanceof Blob ? f.size : f.byteLength);
      const b = f instanceof Blob ? new Uint8Array(await f.arrayBuffer())
        : ArrayBuffer.isView(f) ? new Uint8Array(f.buffer, f.byteOffset, f.byteLength)
          : new Uint8Array(f);
      reply(id, 'progress', { file: FILES[key], loaded: b.length, total: b.length, cached: false });
      return b;
    },
  };
}
