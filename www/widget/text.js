// Small helpers the page (app.js) and the widget (widget.js) share: how times, errors and
// escaped texts are shown, and waiting for a paint.

/** Milliseconds for a reader: 4.21 ms, 42.1 ms, 4.21 s; '–' for none. */
export function fmtMs(ms) {
  if (!Number.isFinite(ms)) return '–';
  return ms < 10 ? `${ms.toFixed(2)} ms` : ms < 1000 ? `${ms.toFixed(1)} ms` : `${(ms / 1000).toFixed(2)} s`;
}

/** An error message as a sentence: capital first letter, full stop at the end. */
export function sentence(text) {
  const s = String(text).trim();
  return s.charAt(0).toUpperCase() + s.slice(1) + (/[.!?]$/.test(s) ? '' : '.');
}

/** \n, \t and \\ escapes, so a one-line field or an attribute can hold a newline. */
export const unescape = (s) => s.replace(/\\(n|t|\\)/g, (_, c) => ({ n: '\n', t: '\t', '\\': '\\' })[c]);

/** Runs `fn` once the browser has painted what the DOM holds now. */
export function afterPaint(fn) {
  requestAnimationFrame(() => {
    // rAF runs just before the frame is painted; a message posted from it arrives just after.
    const ch = new MessageChannel();
    ch.port1.onmessage = () => fn();
    ch.port2.postMessage(null);
  });
}

/**
 * What a screen reader hears of a stream: `add(text)` collects the deltas and, at each line or
 * sentence end, puts the finished part in `el` (a polite live region) — never once per token;
 * `end()` says the unfinished rest. `say(text)` replaces the region's text outright.
 */
export class Announcer {
  #el;
  #pending = '';

  constructor(el) {
    this.#el = el;
  }

  reset() {
    this.#pending = '';
    this.#el.textContent = '';
  }

  add(text) {
    this.#pending += text;
    // The last line break or sentence end (followed by a space or a break) in what is pending.
    const re = /[.!?…]+["')\]]*(?=\s)|\n/g;
    let cut = -1;
    for (let m = re.exec(this.#pending); m; m = re.exec(this.#pending)) cut = m.index + m[0].length;
    if (cut < 0) return;
    const done = this.#pending.slice(0, cut);
    this.#pending = this.#pending.slice(cut);
    this.say(done);
  }

  end() {
    const rest = this.#pending;
    this.#pending = '';
    this.say(rest);
  }

  say(text) {
    const t = text.replace(/\s+/g, ' ').trim();
    if (t) this.#el.textContent = t;
  }
}
