// "Watch the loop": one card per generation step with the candidates the sampler chose from.
//
// A language model writes one token per step: it scores every token of its vocabulary, the sampler
// turns the scores into probabilities (after temperature / top-k / top-p / min-p) and picks one,
// and the picked token is appended to the text for the next step. Each card shows that step: its
// number, the end of the text so far, the k most likely candidates with probability bars, and the
// candidate that was picked. Feed it token events from generate(prompt, { topLogprobs: 10, onToken }).
//
//   import { LoopView } from './loop-view.js';
//   const view = new LoopView(document.getElementById('loop'));   // any element or shadow root
//   view.reset(prompt);
//   await model.generate(prompt, { topLogprobs: 10, onToken: (ev) => view.step(ev) });
//
// Used by the page (www/page/app.js) and by <gpt2-generator watch> (www/widget/widget.js). The styles are
// prefixed with .gpt2-loop and added once per document or shadow root.

/** How much of the text before a step its card shows. */
const CONTEXT_CHARS = 48;

export const LOOP_VIEW_CSS = `
.gpt2-loop { --loop-bar: var(--gpt2-accent, #1a5fb4); --loop-pick: var(--gpt2-pick, #1a7f4b);
  --loop-line: var(--gpt2-line, #d7d9dc); --loop-muted: var(--gpt2-muted, #5f6368); }
.gpt2-loop ol.steps { list-style: none; margin: 0; padding: 0; max-height: 26rem; overflow: auto; }
.gpt2-loop .empty { color: var(--loop-muted); font-size: 0.9em; margin: 0.25rem 0; }
.gpt2-loop li.step { border: 1px solid var(--loop-line); border-radius: 6px; padding: 0.4rem 0.6rem; margin: 0 0 0.5rem; }
.gpt2-loop .head { font-size: 0.9em; margin: 0 0 0.3rem; }
.gpt2-loop .head b { font-variant-numeric: tabular-nums; }
.gpt2-loop .so-far { font-family: ui-monospace, Menlo, Consolas, monospace; white-space: pre-wrap;
  overflow-wrap: anywhere; color: var(--loop-muted); }
.gpt2-loop .so-far mark { background: none; color: var(--loop-pick); font-weight: 700;
  border-bottom: 2px solid var(--loop-pick); }
.gpt2-loop .so-far mark .ws { color: inherit; }
.gpt2-loop .cands { display: grid; grid-template-columns: minmax(4rem, 9rem) 1fr 3.6rem; gap: 2px 0.5rem;
  align-items: center; font-size: 0.9em; }
.gpt2-loop .cand { display: contents; }
.gpt2-loop .tok { font-family: ui-monospace, Menlo, Consolas, monospace; white-space: pre; padding: 0 0.25rem;
  border-radius: 3px; overflow: hidden; text-overflow: ellipsis; max-width: 12rem; }
.gpt2-loop .tok .ws { color: var(--loop-muted); }
.gpt2-loop .bar { height: 0.8rem; border-radius: 2px; background: color-mix(in srgb, var(--loop-bar) 14%, transparent); }
.gpt2-loop .bar > span { display: block; height: 100%; border-radius: 2px; background: var(--loop-bar); min-width: 1px; }
.gpt2-loop .pct { text-align: right; font-variant-numeric: tabular-nums; }
.gpt2-loop .cand.picked .tok { background: var(--loop-pick); color: #fff; }
.gpt2-loop .cand.picked .tok .ws { color: inherit; }
.gpt2-loop .cand.picked .bar > span { background: var(--loop-pick); }
.gpt2-loop .cand.picked .pct { color: var(--loop-pick); font-weight: 700; }
.gpt2-loop .outside { font-size: 0.85em; color: var(--loop-muted); margin: 0.25rem 0 0; }
`;

/** A token's text with its spaces and newlines made visible (·, ↵, →): they are tokens too. */
function visibleToken(text) {
  const frag = document.createDocumentFragment();
  if (text === '') {
    frag.append(Object.assign(document.createElement('span'), { className: 'ws', textContent: '(no text)' }));
    return frag;
  }
  for (const part of text.split(/([ \n\t]+)/)) {
    if (part === '') continue;
    if (/^[ \n\t]+$/.test(part)) {
      const ws = document.createElement('span');
      ws.className = 'ws';
      ws.textContent = part.replace(/ /g, '·').replace(/\n/g, '↵').replace(/\t/g, '→');
      frag.append(ws);
    } else {
      frag.append(part);
    }
  }
  return frag;
}

/** A probability as a short percentage: 42%, 3.1%, 0.04%. */
export function percent(p) {
  const v = p * 100;
  return v >= 10 ? `${v.toFixed(0)}%` : v >= 1 ? `${v.toFixed(1)}%` : `${v.toPrecision(1)}%`;
}

/**
 * The view's styles, once per document or shadow root, as a constructed style sheet: a host page
 * whose Content-Security-Policy forbids inline styles (no style-src 'unsafe-inline') still gets them.
 */
let loopSheet = null;
function addStyles(parent) {
  const root = parent.getRootNode();
  const host = root instanceof ShadowRoot ? root : document;
  if (!loopSheet) {
    loopSheet = new CSSStyleSheet();
    loopSheet.replaceSync(LOOP_VIEW_CSS);
  }
  if (!host.adoptedStyleSheets.includes(loopSheet)) host.adoptedStyleSheets = [...host.adoptedStyleSheets, loopSheet];
}

export class LoopView {
  /** Renders into `parent` (an element, possibly inside a shadow root). */
  constructor(parent) {
    this.root = document.createElement('div');
    this.root.className = 'gpt2-loop';
    this.list = document.createElement('ol');
    this.list.className = 'steps';
    this.list.setAttribute('aria-label', 'Generation steps, each with the candidates the sampler chose from');
    this.list.tabIndex = 0; // scrollable: reachable by keyboard
    this.empty = Object.assign(document.createElement('p'), {
      className: 'empty', textContent: 'Each step of the loop appears here: the candidates for the next token and the one picked.',
    });
    this.root.append(this.empty, this.list);
    parent.append(this.root);
    addStyles(this.root);
    this.reset('');
  }

  /** Clears the steps; `prompt` is the text the first step continues. */
  reset(prompt) {
    this.text = prompt;
    this.list.replaceChildren();
    this.empty.hidden = false;
  }

  /** Adds one step from a token event ({ id, text, index, top: [{ id, text, prob }] }). */
  step(ev) {
    const before = this.text;
    this.text += ev.text;
    this.empty.hidden = true;
    const li = document.createElement('li');
    li.className = 'step';

    const head = document.createElement('p');
    head.className = 'head';
    const soFar = document.createElement('span');
    soFar.className = 'so-far';
    // One line: newlines are shown as ↵, and the picked token's spaces as ·.
    const context = before.length > CONTEXT_CHARS ? `…${before.slice(-CONTEXT_CHARS)}` : before;
    const mark = document.createElement('mark');
    mark.append(visibleToken(ev.text));
    soFar.append(context.replace(/\n/g, '↵'), mark);
    head.append(Object.assign(document.createElement('b'), { textContent: `Step ${ev.index + 1}` }), ': ', soFar);
    li.append(head);

    const top = ev.top ?? [];
    const grid = document.createElement('div');
    grid.className = 'cands';
    grid.setAttribute('role', 'list');
    grid.setAttribute('aria-label', `Step ${ev.index + 1} candidates, most likely first`);
    for (const c of top) {
      const row = document.createElement('div');
      const picked = c.id === ev.id;
      row.className = picked ? 'cand picked' : 'cand';
      row.setAttribute('role', 'listitem');
      const tok = document.createElement('span');
      tok.className = 'tok';
      tok.title = `token id ${c.id}`;
      tok.append(visibleToken(c.text));
      const bar = document.createElement('span');
      bar.className = 'bar';
      bar.setAttribute('aria-hidden', 'true');
      const fill = document.createElement('span');
      fill.style.width = `${100 * c.prob}%`; // the whole row is probability 1
      bar.append(fill);
      const pct = document.createElement('span');
      pct.className = 'pct';
      pct.textContent = percent(c.prob);
      row.append(tok, bar, pct);
      if (picked) row.setAttribute('aria-label', `${JSON.stringify(c.text)} ${percent(c.prob)}, picked`);
      grid.append(row);
    }
    li.append(grid);
    if (!top.some((c) => c.id === ev.id)) {
      const note = document.createElement('p');
      note.className = 'outside';
      note.append(top.length ? `Picked outside the top ${top.length}: ` : 'Picked: ', visibleToken(ev.text));
      li.append(note);
    }

    const atEnd = this.list.scrollTop + this.list.clientHeight >= this.list.scrollHeight - 4;
    this.list.append(li);
    if (atEnd) this.list.scrollTop = this.list.scrollHeight;
  }
}
