// "The loop, live": the lesson's diagram of the decode loop, driven by the running generation.
// Predict → sample → append, with the serial dependency drawn as the arrow back: the prefill is
// one wide step over every position of the prompt, then each step runs one new position and its
// token goes back in; a speculative step appends several. The KV cache below grows by what each
// step appended. Each step lights predict, sample and append in turn (not with
// prefers-reduced-motion: then the step is shown at once); the sentence under it is the text
// equivalent (each step's, then a summary; not a live region: the page's status announces the end).
//
//   const d = new LoopDiagram(container);
//   d.reset(); model.tokenize(prompt).then((ids) => d.prompt(ids.length));
//   await model.generate(prompt, { onToken: (ev) => d.token(ev) });
//   d.end(result);

const NS = 'http://www.w3.org/2000/svg';
/** Cells of the cache strip shown (the latest ones, when there are more). */
const CELLS = 48;

function el(name, attrs = {}, text) {
  const node = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

export class LoopDiagram {
  #svg;
  #stages = {};
  #notes = {};
  #cells;
  #cacheLabel;
  #text;
  #timers = [];
  #state;

  constructor(container) {
    const svg = el('svg', { viewBox: '0 0 720 200', class: 'loop-diagram', role: 'img', 'aria-labelledby': 'loop-diagram-text' });
    const marker = el('marker', {
      id: 'loop-arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse',
    });
    marker.append(el('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrow-head' }));
    const defs = el('defs');
    defs.append(marker);
    svg.append(defs);
    const boxes = [['predict', 20, 'Predict', 'the model scores every token'], ['sample', 270, 'Sample', 'pick one token'],
      ['append', 520, 'Append', 'the text grows by it']];
    for (const [key, x, title, note] of boxes) {
      const g = el('g', { class: 'stage' });
      g.append(el('rect', { x, y: 10, width: 180, height: 62, rx: 8 }));
      g.append(el('text', { x: x + 90, y: 34, class: 'title' }, title));
      const n = el('text', { x: x + 90, y: 56, class: 'note' }, note);
      g.append(n);
      svg.append(g);
      this.#stages[key] = g;
      this.#notes[key] = n;
    }
    svg.append(el('path', { d: 'M200,41 L268,41', class: 'arrow', 'marker-end': 'url(#loop-arrow)' }));
    svg.append(el('path', { d: 'M450,41 L518,41', class: 'arrow', 'marker-end': 'url(#loop-arrow)' }));
    svg.append(el('path', { d: 'M610,72 C610,104 110,104 110,74', class: 'arrow back', 'marker-end': 'url(#loop-arrow)' }));
    svg.append(el('text', { x: 360, y: 118, class: 'note' }, 'the new token goes back in: the next step needs it'));
    this.#cacheLabel = el('text', { x: 20, y: 146, class: 'note start' }, 'Sequence: empty');
    svg.append(this.#cacheLabel);
    this.#cells = el('g', { class: 'cells' });
    svg.append(this.#cells);
    this.#svg = svg;
    this.#text = Object.assign(document.createElement('p'), { id: 'loop-diagram-text', className: 'hint' });
    container.append(svg, this.#text);
    this.reset();
  }

  /** A new generation: nothing in the cache. */
  reset() {
    this.#state = { promptTokens: null, cells: [], steps: 0, drafted: 0, group: 0, tokens: 0 };
    this.#cells.replaceChildren();
    this.#cacheLabel.textContent = 'Sequence: empty';
    this.#light(null);
    this.#text.textContent = 'Generate to watch the loop: one step per token after the prompt.';
  }

  /** The prompt's length in tokens (the prefill's width), when it is known. */
  prompt(n) {
    this.#state.promptTokens = n;
  }

  /** One token event of the running generation. */
  token(ev) {
    const s = this.#state;
    s.tokens++;
    if (ev.drafted) {
      s.group++; // a kept draft token: its step ends with the model's own token, next
      return;
    }
    const first = s.steps === 0;
    s.steps++;
    const appended = s.group + 1;
    s.drafted += s.group;
    s.group = 0;
    const ran = first ? (s.promptTokens ?? 1) : appended;
    if (first) for (let i = 0; i < ran; i++) s.cells.push('prompt');
    for (let i = 0; i < appended; i++) s.cells.push(i < appended - 1 ? 'drafted' : 'generated');
    // The last token appended is not in the cache until the next step runs it; the strip shows
    // what the next step will see.
    const text = JSON.stringify(ev.text);
    const what = first
      ? `Step 1, the prefill: the model ran all ${s.promptTokens ?? 'the'} prompt positions in one pass`
      : appended > 1
        ? `Step ${s.steps}: one pass checked a draft and kept ${appended - 1} of its tokens plus its own`
        : `Step ${s.steps}: the model ran 1 new position, reading the KV cache for the ${s.cells.length - 2} before it`;
    this.#notes.predict.textContent = first ? `${ran} positions at once` : `${ran} new position${ran > 1 ? 's' : ''}`;
    this.#notes.sample.textContent = appended > 1 ? `${appended} tokens kept` : `picked ${text.length > 14 ? `${text.slice(0, 13)}…"` : text}`;
    this.#notes.append.textContent = `${s.cells.length} positions now`;
    this.#text.textContent = `${what}; sampled ${text}; appended: the sequence is ${s.cells.length} tokens long.`;
    this.#drawCells();
    this.#animate();
  }

  /** The generation ended: say what the loop did. */
  end(result) {
    const s = this.#state;
    if (!result || s.steps === 0) return;
    const m = result.metrics;
    this.#text.textContent = `The loop ran ${s.steps} steps for ${m.outputTokens} tokens: a prefill of ` +
      `${m.promptTokens} positions, then ${s.steps - 1} steps${s.drafted ? `, ${s.drafted} tokens from kept drafts` : ' of one token each'}. ` +
      `The last: ${this.#text.textContent}`;
  }

  #drawCells() {
    const cells = this.#state.cells;
    const shown = cells.slice(-CELLS);
    const skipped = cells.length - shown.length;
    this.#cacheLabel.textContent = `Sequence: ${cells.length} positions (prompt, generated${this.#state.drafted ? ', from a draft' : ''})` +
      (skipped ? `; the last ${CELLS} shown` : '');
    const w = 680 / CELLS;
    this.#cells.replaceChildren(...shown.map((kind, i) => el('rect', {
      x: 20 + i * w, y: 158, width: w - 2, height: 26, rx: 3, class: `cell ${kind}${i === shown.length - 1 ? ' newest' : ''}`,
    })));
  }

  #light(stage) {
    for (const [k, g] of Object.entries(this.#stages)) g.classList.toggle('active', k === stage);
  }

  #animate() {
    for (const t of this.#timers) clearTimeout(t);
    this.#timers = [];
    if (globalThis.matchMedia?.('(prefers-reduced-motion: reduce)').matches) {
      this.#light('append');
      return;
    }
    ['predict', 'sample', 'append'].forEach((k, i) => this.#timers.push(setTimeout(() => this.#light(k), i * 70)));
  }
}
