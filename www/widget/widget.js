// <gpt2-generator>: GPT-2 in a course page with one script tag and one element.
//
//   <script type="module" src="https://example.org/gpt2-web/widget.js"></script>
//   <gpt2-generator prompt="ROMEO:" max-tokens="40" temperature="0.8" seed="1" readout></gpt2-generator>
//
// Attributes (all optional):
//   model         model folder URL, relative to the page (default: the demo model beside this script;
//                 the npm package has none)
//   backend       auto | cpu | webgpu (default auto)
//   prompt        the starting text, editable by the reader (default "ROMEO." and a newline, the demo
//                 corpus's own form for a speaker)
//   max-tokens, temperature, top-k, top-p, min-p, seed   as in gpt2.js's generate() (max-tokens default 48;
//                 without seed, each sampled run draws a new one, so Generate again gives new text)
//   stop          a stop text (write \n for a newline), or a JSON list of texts: stop='["\n\n", "."]'
//   preset        autocomplete | creative | extraction: the lesson's settings for that use (presets.js);
//                 the attributes above override its values
//   draft         prompt-lookup or mtp: speculative decoding, several tokens per model step where the
//                 text repeats (prompt lookup) or the model's heads guess right (mtp; the demo model
//                 has them); the same text when greedy; the readout then counts model steps
//   readout       show time to first token, first visible text, total, time per token, tokens
//   watch         "watch the loop": each step's 10 most likely candidates and the one picked
//   top-logprobs  like watch, with that many candidates (1–100)
//   tokens        tokens as the model sees them: boundaries and ids in the output, and each token's
//                 probability and alternatives on focus, hover or tap (token-view.js)
//   autorun       generate once as soon as the model has loaded
//   load          when the model is downloaded: visible (default: when the widget comes near the
//                 viewport, so a widget far below the fold costs nothing until it is scrolled to),
//                 interaction (on the first focus, click or Generate in the widget), or eager (at once)
// Events (bubbling, composed; prefixed so that none is mistaken for the window's own `error`):
// gpt2-token (detail: the token event), gpt2-done (detail: the result), gpt2-error (detail:
// { message }, a sentence; also when the model or the engine cannot load). Methods: generate() →
// Promise<result | null>, stop(); property model (Promise<Gpt2>).
//
// Every widget of a page shares gpt2.js's one worker, and widgets naming the same model folder (and
// backend) share one download and one model. Styles live in a shadow root: the page's CSS does not
// reach in (except the --gpt2-* colour variables below), and the widget's does not leak out.

import { Gpt2 } from '../api/gpt2.js';
import { RANGES } from '../api/options.js';
import { PRESETS, preset } from '../api/presets.js';
import { inRange, rangeText } from '../api/ranges.js';
import { LoopView } from './loop-view.js';
import { TokenView } from './token-view.js';
import { fmtMs, sentence, unescape, afterPaint, Announcer } from './text.js';
import { sheet } from './widget-style.js';

const READOUT = [
  ['ttft', 'Time to first token', 'perceived'],
  ['visible', 'First visible text', 'perceived'],
  ['total', 'Total time', 'total'],
  ['tpot', 'Time per token', ''],
  ['tokens', 'Tokens', ''],
];

let widgets = 0; // for unique element ids inside each shadow root's labels

/** A quoted text with newlines shown, for the settings line. */
const shown = (s) => JSON.stringify(s);

/** Every attribute the element reads; `true` marks the ones that are on by being present. */
export const ATTRIBUTES = {
  model: false, backend: false, prompt: false, 'max-tokens': false, temperature: false, 'top-k': false,
  'top-p': false, 'min-p': false, seed: false, stop: false, readout: true, watch: true, 'top-logprobs': false,
  tokens: true, draft: false, preset: false, autorun: true, load: false,
};

/** How far outside the viewport a `load="visible"` widget starts its download. */
const NEAR = '400px';

export class Gpt2Generator extends HTMLElement {
  static observedAttributes = Object.keys(ATTRIBUTES).filter((a) => a !== 'autorun');

  #ui;
  #model = null; // Promise<Gpt2> of the current model attributes
  #modelKey = null;
  #ready = false; // the current model has loaded
  #controller = null;
  #loop = null;
  #tokens;
  #autoran = false;
  #wanted = false; // the model was asked for (by load's condition, Generate, or the model property)
  #waiting = null; // undoes the watch for load's condition

  constructor() {
    super();
    const n = ++widgets;
    const root = this.attachShadow({ mode: 'open' });
    root.adoptedStyleSheets = [sheet()];
    root.innerHTML = `
      <div class="box" part="box">
        <label for="prompt-${n}">Prompt</label>
        <textarea id="prompt-${n}" rows="2" spellcheck="false"></textarea>
        <div class="row">
          <button type="button" class="primary" data-generate disabled>Generate</button>
          <button type="button" data-stop disabled>Stop</button>
          <span class="settings" data-settings></span>
        </div>
        <div class="output" data-output role="region" aria-live="off" aria-label="Generated text" tabindex="0"></div>
        <p class="status" data-token-details aria-live="polite"></p>
        <progress data-progress max="1" value="0" aria-label="Loading the model" hidden></progress>
        <p class="status" data-status role="status"></p>
        <p class="sr" data-spoken aria-live="polite"></p>
        <p class="error" data-error role="alert" hidden></p>
        <button type="button" data-reload hidden>Load the model again</button>
        <dl class="readout" data-readout hidden>
          ${READOUT.map(([k, label, cls]) => `<div class="${cls}"><dt>${label}</dt><dd data-r="${k}">–</dd></div>`).join('')}
        </dl>
        <div class="loop" data-loop hidden></div>
      </div>`;
    const $ = (sel) => root.querySelector(sel);
    this.#ui = {
      prompt: $('textarea'), generate: $('[data-generate]'), stop: $('[data-stop]'), settings: $('[data-settings]'),
      output: $('[data-output]'), status: $('[data-status]'), error: $('[data-error]'), reload: $('[data-reload]'),
      progress: $('[data-progress]'), spoken: new Announcer($('[data-spoken]')),
      readout: $('[data-readout]'),
      loop: $('[data-loop]'), r: Object.fromEntries(READOUT.map(([k]) => [k, $(`[data-r="${k}"]`)])),
    };
    this.#tokens = new TokenView(this.#ui.output, $('[data-token-details]'));
    this.#ui.generate.addEventListener('click', () => this.generate());
    this.#ui.stop.addEventListener('click', () => this.stop());
    // After the model (or its worker) died: a fresh load, in a fresh worker if need be.
    this.#ui.reload.addEventListener('click', () => {
      this.#ui.reload.hidden = true;
      this.#ui.error.hidden = true;
      this.#release();
      this.#ensureModel();
    });
    this.#ui.prompt.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        this.generate();
      }
    });
    root.addEventListener('keydown', (e) => {
      if (e.key === 'Escape' && this.#controller) this.stop();
    });
  }

  connectedCallback() {
    if (!this.#ui.prompt.dataset.set) {
      this.#ui.prompt.value = this.getAttribute('prompt') ?? 'ROMEO.\n';
      this.#ui.prompt.dataset.set = '1';
    }
    this.#render();
    if (this.#wanted) this.#ensureModel();
    else this.#waitForLoad();
  }

  /**
   * Starts the model's download when the load attribute says: at once, when the widget comes
   * near the viewport, or on the first focus or click inside it. Until then Generate is usable:
   * pressing it loads the model and then generates.
   */
  #waitForLoad() {
    this.#waiting?.();
    this.#waiting = null;
    const mode = this.#loadMode();
    const go = () => {
      this.#waiting?.();
      this.#waiting = null;
      if (this.isConnected) this.#ensureModel();
    };
    if (mode === 'eager' || (mode === 'visible' && typeof IntersectionObserver !== 'function')) return go();
    const ui = this.#ui;
    ui.status.textContent = mode === 'visible' ? '' : 'The model loads when you use this.';
    ui.generate.disabled = false;
    if (mode === 'visible') {
      const seen = new IntersectionObserver((entries) => {
        if (entries.some((e) => e.isIntersecting)) go();
      }, { rootMargin: NEAR });
      seen.observe(this);
      this.#waiting = () => seen.disconnect();
    } else {
      const events = ['focusin', 'pointerdown'];
      for (const e of events) this.addEventListener(e, go, { once: true });
      this.#waiting = () => events.forEach((e) => this.removeEventListener(e, go));
    }
  }

  /** The load attribute: eager, visible (the default) or interaction. */
  #loadMode() {
    const raw = (this.getAttribute('load') ?? '').trim();
    if (raw === '') return 'visible';
    if (['eager', 'visible', 'interaction'].includes(raw)) return raw;
    this.#fail(`the load attribute must be eager, visible or interaction, not "${raw}"`);
    return 'visible';
  }

  disconnectedCallback() {
    this.#waiting?.();
    this.#waiting = null;
    this.stop();
    // Released a moment later, so moving the element in the DOM does not reload the model.
    queueMicrotask(() => {
      if (!this.isConnected) this.#release();
    });
  }

  attributeChangedCallback(name, old, value) {
    if (old === value || !this.isConnected) return;
    if (name === 'prompt') this.#ui.prompt.value = value ?? '';
    if ((name === 'model' || name === 'backend') && this.#wanted) this.#ensureModel();
    if (name === 'load' && !this.#wanted) this.#waitForLoad();
    this.#render();
  }

  /** The Gpt2 handle this widget uses (a promise; rejects if the model did not load). */
  get model() {
    return this.#ensureModel();
  }

  /** Generates from the prompt box; resolves with the result, or null when it failed (see the error event). */
  async generate() {
    if (this.#controller) return null;
    const ui = this.#ui;
    let options;
    try {
      options = this.#runOptions();
    } catch (e) {
      this.#fail(e.message);
      return null;
    }
    const controller = new AbortController();
    this.#controller = controller;
    this.#busy(true);
    ui.error.hidden = true;
    const prompt = ui.prompt.value;
    ui.output.replaceChildren(Object.assign(document.createElement('span'), { className: 'prompt', textContent: prompt }));
    ui.output.setAttribute('aria-busy', 'true');
    ui.spoken.reset();
    this.#tokens.reset();
    for (const dd of Object.values(ui.r)) dd.textContent = '–';
    this.#loop?.reset(prompt);
    let visible = false;
    let model;
    try {
      model = await this.#ensureModel();
    } catch {
      this.#controller = null;
      this.#busy(false);
      return null; // the load's error is on show already
    }
    const t0 = performance.now(); // from here, as the page measures it: the model is loaded
    try {
      ui.status.textContent = 'Generating…';
      const result = await model.generate(prompt, {
        ...options,
        signal: controller.signal,
        onToken: (ev) => {
          if (ev.index === 0) ui.r.ttft.textContent = fmtMs(ev.elapsedMs);
          ui.r.tokens.textContent = String(ev.index + 1);
          this.#tokens.add(ev);
          if (ev.text) {
            ui.spoken.add(ev.text);
            if (!visible && ev.text.trim()) {
              visible = true;
              afterPaint(() => { ui.r.visible.textContent = fmtMs(performance.now() - t0); });
            }
          }
          this.#loop?.step(ev);
          this.#emit('token', ev);
        },
      });
      const m = result.metrics;
      ui.r.total.textContent = fmtMs(m.totalMs);
      ui.r.tpot.textContent = m.outputTokens > 1 ? fmtMs(m.tpotMs) : '–';
      // With a draft, fewer model steps than tokens: the lesson's "more than one token per step".
      ui.r.tokens.textContent = m.targetForwards && m.targetForwards < m.outputTokens
        ? `${m.outputTokens} in ${m.targetForwards} steps` : String(m.outputTokens);
      const why = { eos: 'end of text', stop: 'stop text', max_tokens: 'max tokens', context: 'context full', abort: 'stopped' };
      ui.spoken.end();
      ui.status.textContent = `Done: ${m.outputTokens} tokens in ${fmtMs(m.totalMs)} (${why[result.stopReason] ?? result.stopReason}).`;
      this.#emit('done', result);
      return result;
    } catch (e) {
      this.#fail(e.message);
      return null;
    } finally {
      this.#controller = null;
      ui.output.setAttribute('aria-busy', 'false');
      this.#busy(false);
    }
  }

  /** Stops the running generation (it resolves with stopReason 'abort'). */
  stop() {
    this.#controller?.abort();
  }

  // -------------------------------------------------------------------------------------------

  /** Loads (or joins the page's load of) the model the attributes name; runs autorun once. */
  #ensureModel() {
    this.#wanted = true;
    this.#waiting?.();
    this.#waiting = null;
    const url = this.getAttribute('model') || undefined; // undefined: gpt2.js's demo model
    const backend = this.getAttribute('backend') || 'auto';
    const key = `${backend} ${url}`;
    if (this.#model && this.#modelKey === key) return this.#model;
    this.#release();
    this.#modelKey = key;
    const ui = this.#ui;
    ui.status.textContent = 'Loading the model…'; // said once; the bar shows the progress without announcing it
    ui.progress.value = 0;
    ui.progress.hidden = false;
    const files = new Map();
    const loading = Gpt2.load({
      model: url, backend,
      onProgress: ({ file, loaded, total, fallBack, plan }) => {
        if (fallBack) {
          ui.status.textContent = 'The GPU was lost: reading the model again for the CPU…';
          return;
        }
        if (plan) return; // the memory plan: nothing downloaded yet
        files.set(file, [loaded, Math.max(loaded, total)]);
        let got = 0;
        let of = 0;
        for (const [a, b] of files.values()) { got += a; of += b; }
        if (this.#model === loading) ui.progress.value = of ? got / of : 0;
      },
    });
    this.#model = loading;
    loading.then((model) => {
      if (this.#model !== loading) return model.dispose(); // the attributes changed meanwhile
      this.#ready = true;
      ui.progress.hidden = true;
      const c = model.config;
      // A model from elsewhere that could not be kept says so: it will be downloaded again.
      ui.status.textContent = `Ready: ${(c.nParams / 1e6).toFixed(1)} M parameters on ${model.backend}.` +
        `${model.notCached ? ` ${model.notCached}` : ''}`;
      this.#busy(Boolean(this.#controller)); // a Generate that started the load runs next
      if (this.hasAttribute('autorun') && !this.#autoran) {
        this.#autoran = true;
        this.generate();
      }
    }, (e) => {
      if (this.#model !== loading) return;
      this.#model = null; // a later Generate tries again
      this.#modelKey = null;
      ui.progress.hidden = true;
      this.#busy(false);
      this.#fail(e.message);
    });
    return loading;
  }

  #release() {
    const old = this.#model;
    this.#model = null;
    this.#modelKey = null;
    this.#ready = false;
    old?.then((m) => m.dispose(), () => {});
  }

  /** generate() options from the attributes; throws a sentence for a bad value. */
  #options() {
    // An attribute of a generate option: in the option's range (RANGES, the engine's table).
    const num = (name, option) => {
      const raw = this.getAttribute(name);
      if (raw === null || raw.trim() === '') return undefined;
      const v = Number(raw);
      if (!inRange(RANGES[option], v)) throw new Error(`the ${name} attribute must be ${rangeText(RANGES[option])}, not "${raw}"`);
      return v;
    };
    const p = this.#preset();
    const base = p ? { ...p.options, stop: [...p.options.stop] } : { maxTokens: 48 };
    const options = {
      maxTokens: num('max-tokens', 'maxTokens'),
      temperature: num('temperature', 'temperature'),
      topK: num('top-k', 'topK'),
      topP: num('top-p', 'topP'),
      minP: num('min-p', 'minP'),
      seed: num('seed', 'seed'),
      stop: this.#stops(),
      topLogprobs: this.#watchCount() || (this.hasAttribute('tokens') ? 5 : undefined),
      draft: this.#draft(),
    };
    for (const k of Object.keys(options)) if (options[k] === undefined) delete options[k];
    return { ...base, ...options }; // an attribute overrides the preset's value
  }

  /** The preset attribute's preset (presets.js), or null. */
  #preset() {
    const name = this.getAttribute('preset');
    if (name === null || name.trim() === '') return null;
    try {
      return preset(name);
    } catch {
      throw new Error(`the preset attribute must be ${Object.keys(PRESETS).join(', ')}, not "${name}"`);
    }
  }

  /** The draft attribute: 'prompt-lookup' or 'mtp' (the model's heads), or nothing. */
  #draft() {
    const raw = this.getAttribute('draft');
    if (raw === null || raw.trim() === '' || raw === 'none') return undefined;
    if (raw !== 'prompt-lookup' && raw !== 'mtp') throw new Error(`the draft attribute must be prompt-lookup, mtp or none, not "${raw}"`);
    return raw;
  }

  /** The options of one run: a fresh seed for sampling without a seed attribute. */
  #runOptions() {
    const options = this.#options();
    if (options.seed === undefined && options.temperature) options.seed = Math.floor(Math.random() * 2 ** 31);
    return options;
  }

  #stops() {
    const raw = this.getAttribute('stop');
    if (raw === null || raw === '') return undefined;
    if (raw.trim().startsWith('[')) {
      let list;
      try {
        list = JSON.parse(raw);
      } catch {
        throw new Error(`the stop attribute is not a JSON list of texts: ${raw}`);
      }
      if (!Array.isArray(list) || !list.every((s) => typeof s === 'string')) {
        throw new Error(`the stop attribute must list texts, as in ["\\n", "."]: ${raw}`);
      }
      return list;
    }
    return [unescape(raw)];
  }

  /** How many candidates "watch the loop" shows (0: off). */
  #watchCount() {
    const k = this.getAttribute('top-logprobs');
    if (k !== null && k !== '') return Math.max(1, Math.min(100, Math.round(Number(k)) || 10));
    return this.hasAttribute('watch') || k === '' ? 10 : 0;
  }

  #render() {
    const ui = this.#ui;
    ui.readout.hidden = !this.hasAttribute('readout');
    const watch = this.#watchCount() > 0;
    ui.loop.hidden = !watch;
    if (watch && !this.#loop) this.#loop = new LoopView(ui.loop);
    this.#tokens.on = this.hasAttribute('tokens');
    let settings;
    try {
      const o = this.#options();
      const p = this.#preset();
      const parts = [o.temperature ? `temperature ${o.temperature}` : 'greedy (temperature 0)'];
      if (p) parts.unshift(`${p.label} preset`);
      if (o.temperature && o.topK) parts.push(`top-k ${o.topK}`);
      if (o.temperature && o.topP !== undefined && o.topP < 1) parts.push(`top-p ${o.topP}`);
      if (o.temperature) parts.push(o.seed !== undefined ? `seed ${o.seed}` : 'new seed each run');
      parts.push(`up to ${o.maxTokens} tokens`);
      if (o.draft) parts.push(`speculative (${o.draft === 'mtp' ? 'the model\'s heads' : 'prompt lookup'})`);
      if (o.stop?.length) parts.push(`stops at ${o.stop.map(shown).join(' or ')}`);
      settings = parts.join(' · ');
    } catch (e) {
      settings = sentence(e.message);
    }
    ui.settings.textContent = settings;
  }

  #busy(busy) {
    const ui = this.#ui;
    ui.generate.disabled = busy || !this.#ready;
    ui.stop.disabled = !busy;
    ui.prompt.readOnly = busy;
  }

  #fail(message) {
    const ui = this.#ui;
    ui.error.textContent = sentence(message);
    ui.error.hidden = false;
    ui.reload.hidden = !/load (the model|it) again/.test(message);
    ui.status.textContent = '';
    this.#emit('error', { message });
  }

  #emit(type, detail) {
    this.dispatchEvent(new CustomEvent(`gpt2-${type}`, { detail, bubbles: true, composed: true }));
  }
}

if (!customElements.get('gpt2-generator')) customElements.define('gpt2-generator', Gpt2Generator);
