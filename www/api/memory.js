// What earlier loads measured in this browser, kept in localStorage so that a return visit need
// not measure it again: the CPU winning `auto`'s race, the 8-bit kernels' timing, the verdict on a
// model's multi-token heads. Storage that is refused (a private window, a full quota) or holds
// something else is no memory: the next load measures again.

import { BUILDS } from './assets.js';

/** The JSON stored at `key`, or null. */
function stored(key) {
  try {
    return JSON.parse(globalThis.localStorage?.getItem(key) ?? 'null');
  } catch {
    return null;
  }
}

function store(key, value) {
  try {
    globalThis.localStorage?.setItem(key, JSON.stringify(value));
  } catch {
    // storage refused: the next load measures again
  }
}

/** The browser's user agent and core count: a new browser version (another JIT) or another
 * machine with a copied profile measures again. */
function deviceNow() {
  return `${globalThis.navigator?.userAgent ?? ''} / ${globalThis.navigator?.hardwareConcurrency ?? 0} cores`;
}

/** The object `field` of what is stored at `key` for this device, or null. */
function onThisDevice(key, field) {
  const t = stored(key);
  const v = t?.device === deviceNow() ? t[field] : null;
  return typeof v === 'object' && v !== null ? v : null;
}

/**
 * What `backend: 'auto'` measured on an earlier load of this model and dtype in this browser,
 * when the CPU won (a GPU that won is raced again at every load, its check being worth the
 * time): `backendTimes` with `remembered: true`, or null.
 */
export function rememberedRace(key) {
  const t = stored(key);
  if (t?.chosen !== 'cpu' || typeof t.why !== 'string' || !Number.isFinite(t.webgpuMs)) return null;
  const num = (x) => (Number.isFinite(x) ? x : null);
  return Object.freeze({ webgpuMs: t.webgpuMs, cpuMs: num(t.cpuMs), batch: Number.isInteger(t.batch) ? t.batch : 1, webgpuBatchMs: num(t.webgpuBatchMs), cpuBatchMs: num(t.cpuBatchMs), logitDiff: num(t.logitDiff), chosen: 'cpu', why: t.why, remembered: true });
}

export function rememberRace(key, times) {
  store(key, times);
}

/**
 * The 8-bit kernels earlier loads timed in this browser, per wasm build, threads and model size
 * (the worker's `kernelsAt`: "pkg-relaxed 1 16087296"; a decode step's choice depends on the
 * model): `{ [kernelsAt]: { decode, prompt, times } }`, or null; kept for this device, for the
 * 16 used last.
 */
const KERNELS_AT = 'gpt2-web:kernels-3'; // -3: per build, threads and model size
export function rememberedKernels() {
  const builds = onThisDevice(KERNELS_AT, 'builds');
  if (builds === null) return null;
  const ok = (k) => typeof k?.decode === 'string' && typeof k.prompt === 'string' && typeof k.times === 'string';
  return Object.fromEntries(Object.entries(builds).filter(([at, k]) => Object.hasOwn(BUILDS, at.split(' ')[0]) && ok(k)));
}

export function rememberKernels(kernelsAt, [decode, prompt], times) {
  const rest = Object.entries(rememberedKernels() ?? {}).filter(([at]) => at !== kernelsAt).slice(-15);
  const builds = Object.fromEntries([...rest, [kernelsAt, { decode, prompt, times }]]);
  store(KERNELS_AT, { device: deviceNow(), builds });
}

/**
 * What earlier visits measured of a model's multi-token heads in this browser (`metrics.mtp.verdict`
 * of a generation that measured them), for the model `name`: `{ [headsAt]: verdict }`, headsAt the
 * worker's build, threads, backend and dtype (its load's `headsAt`), or null. Kept for this
 * device, for the 16 models used last.
 */
const HEADS_AT = 'gpt2-web:mtp-heads-1';
export function rememberedHeads(name) {
  const m = onThisDevice(HEADS_AT, 'models')?.[name];
  return typeof m === 'object' && m !== null ? m : null;
}

export function rememberHeads(name, headsAt, verdict) {
  const all = onThisDevice(HEADS_AT, 'models') ?? {};
  const mine = { ...(all[name] ?? {}), [headsAt]: verdict };
  const rest = Object.entries(all).filter(([n]) => n !== name).slice(-15);
  store(HEADS_AT, { device: deviceNow(), models: Object.fromEntries([...rest, [name, mine]]) });
}
