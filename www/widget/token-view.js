// "Tokens as the model sees them": the generated text as its tokens. With the view on, each token's
// text has its own background (the boundaries) and its id beside it, and focusing, hovering or
// tapping it says the probability it was picked with and its most likely alternatives (the token
// event's `prob` and `top`, from generate's `topLogprobs`), and whether it was a draft token the
// model kept. Arrow keys, Home and End move between tokens; one token at a time is in the Tab order.
//
//   const view = new TokenView(outputElement, detailsElement);   // details: a polite live region
//   view.on = true;
//   await model.generate(prompt, { topLogprobs: 5, onToken: (ev) => view.add(ev) });
//
// Used by the page (www/page/app.js, "Show tokens") and by <gpt2-generator tokens>. A token event
// with no text (a character split across tokens, text held back for a stop sequence) is shown with
// the next one that has text. The styles are prefixed with .gpt2-tokens and added once per
// document or shadow root.

import { percent } from './loop-view.js';

const TOKEN_VIEW_CSS = `
.gpt2-tokens.on .tok { border-radius: 2px; cursor: help; }
.gpt2-tokens.on .tok.a { background: var(--tok-a, color-mix(in srgb, #1a5fb4 14%, transparent)); }
.gpt2-tokens.on .tok.b { background: var(--tok-b, color-mix(in srgb, #1a7f4b 16%, transparent)); }
.gpt2-tokens.on .tok::after { content: attr(data-id); font-size: 0.62em; vertical-align: sub; opacity: 0.75; margin-left: 1px; }
.gpt2-tokens.on .tok.drafted { text-decoration: underline dotted; text-underline-offset: 3px; }
.gpt2-tokens .tok:focus-visible, .gpt2-tokens .tok.shown { outline: 2px solid var(--gpt2-accent, #1a5fb4); outline-offset: 1px; }
`;

let tokenSheet = null;
function addStyles(el) {
  const root = el.getRootNode();
  const host = root instanceof ShadowRoot ? root : document;
  if (!tokenSheet) {
    tokenSheet = new CSSStyleSheet();
    tokenSheet.replaceSync(TOKEN_VIEW_CSS);
  }
  if (!host.adoptedStyleSheets.includes(tokenSheet)) host.adoptedStyleSheets = [...host.adoptedStyleSheets, tokenSheet];
}

/** A token's text in quotes, its line breaks and tabs written out. */
const quoted = (text) => `“${text.replace(/\n/g, '\\n').replace(/\t/g, '\\t')}”`;

/** What one token event says of itself: its text, id, probability and alternatives. */
export function describeToken(ev, text) {
  const head = `Token ${ev.index + 1}${ev.choice ? ` of choice ${ev.choice}` : ''}: ${quoted(text)}, id ${ev.id}`;
  const kept = ev.drafted ? ', a draft token the model kept (it came in the same step as the token before it)' : '';
  if (ev.prob === undefined) return `${head}${kept}. Its probability was not asked for (topLogprobs).`;
  const others = (ev.top ?? []).filter((c) => c.id !== ev.id).slice(0, 4);
  return `${head}${kept}, picked with probability ${percent(ev.prob)}.` +
    (others.length ? ` Also likely: ${others.map((c) => `${quoted(c.text)} ${percent(c.prob)}`).join(', ')}.` : '');
}

export class TokenView {
  #out;
  #details;
  #pending = []; // events with no text yet: shown with the next token that has text
  #count = 0;

  /** Tokens go into `output` (after whatever the caller put there); `details` says the focused one. */
  constructor(output, details) {
    this.#out = output;
    this.#details = details;
    output.classList.add('gpt2-tokens');
    addStyles(output);
    const show = (e) => {
      const tok = e.target.closest?.('.tok');
      if (tok && this.on) this.#show(tok);
    };
    output.addEventListener('focusin', show);
    output.addEventListener('mouseover', show);
    output.addEventListener('keydown', (e) => {
      const tok = e.target.closest?.('.tok');
      if (!tok || !this.on) return;
      const all = [...output.querySelectorAll('.tok')];
      const i = all.indexOf(tok);
      const to = { ArrowRight: i + 1, ArrowDown: i + 1, ArrowLeft: i - 1, ArrowUp: i - 1, Home: 0, End: all.length - 1 }[e.key];
      if (to === undefined) return;
      e.preventDefault();
      all[Math.max(0, Math.min(all.length - 1, to))].focus();
    });
  }

  /** Whether the tokens show their boundaries and ids and can be focused. */
  get on() {
    return this.#out.classList.contains('on');
  }

  set on(on) {
    this.#out.classList.toggle('on', on);
    const all = this.#out.querySelectorAll('.tok');
    all.forEach((t, i) => {
      if (on) t.tabIndex = i === 0 ? 0 : -1;
      else t.removeAttribute('tabindex');
    });
    if (!on) this.#details.textContent = '';
  }

  /** Forgets the tokens (the caller empties the output). */
  reset() {
    this.#pending = [];
    this.#count = 0;
    this.#details.textContent = '';
  }

  /** Adds a token event ({ id, index, text, drafted, prob?, top? }); returns its element, or null while it has no text. */
  add(ev) {
    this.#pending.push(ev);
    if (!ev.text) return null;
    const span = document.createElement('span');
    span.className = `tok ${this.#count++ % 2 ? 'b' : 'a'}${ev.drafted ? ' drafted' : ''}`;
    span.dataset.id = this.#pending.map((e) => e.id).join('+');
    span.title = this.#pending.map((e) => `token ${e.index + 1}, id ${e.id}`).join('; ');
    span.textContent = ev.text;
    span.tokens = this.#pending;
    this.#pending = [];
    if (this.on) span.tabIndex = this.#out.querySelector('.tok') ? -1 : 0;
    const atEnd = this.#out.scrollTop + this.#out.clientHeight >= this.#out.scrollHeight - 4;
    this.#out.append(span);
    if (atEnd) this.#out.scrollTop = this.#out.scrollHeight;
    return span;
  }

  /** Says what `tok` is in the details region; it becomes the token Tab returns to. */
  #show(tok) {
    for (const t of this.#out.querySelectorAll('.tok.shown')) t.classList.remove('shown');
    tok.classList.add('shown');
    if (document.activeElement === tok || tok.getRootNode().activeElement === tok) {
      for (const t of this.#out.querySelectorAll('.tok[tabindex="0"]')) t.tabIndex = -1;
      tok.tabIndex = 0;
    }
    const evs = tok.tokens ?? [];
    const own = (e) => e.top?.find((c) => c.id === e.id)?.text ?? 'part of it';
    this.#details.textContent = evs.length === 1
      ? describeToken(evs[0], tok.textContent)
      : `${evs.length} tokens make the text ${quoted(tok.textContent)}. ${evs.map((e) => describeToken(e, own(e))).join(' ')}`;
  }
}
