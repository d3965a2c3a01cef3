// The <gpt2-generator> widget's look: its one style sheet (widget.js adopts it in each shadow root).
// Constructed rather than a <style> element, so a course page whose Content-Security-Policy
// forbids inline styles still styles it.

const CSS = `
:host {
  all: initial; /* nothing inherits in from the page */
  display: block;
  --fg: var(--gpt2-fg, #1d1f21); --muted: var(--gpt2-muted, #5f6368); --line: var(--gpt2-line, #d7d9dc);
  --bg: var(--gpt2-bg, #ffffff); --field: var(--gpt2-field, #fbfbfa); --accent: var(--gpt2-accent, #1a5fb4);
  --accent-fg: var(--gpt2-accent-fg, #ffffff); --perceived: var(--gpt2-perceived, #1a7f4b);
  --total: var(--gpt2-total, #b5491b); --error-bg: #fdecea; --error-fg: #8a1c12;
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color: var(--fg);
  margin: 1rem 0;
}
@media (prefers-color-scheme: dark) {
  :host {
    --fg: var(--gpt2-fg, #e6e6e3); --muted: var(--gpt2-muted, #a0a4a8); --line: var(--gpt2-line, #3a3d41);
    --bg: var(--gpt2-bg, #202225); --field: var(--gpt2-field, #17181a); --accent: var(--gpt2-accent, #78aeed);
    --accent-fg: var(--gpt2-accent-fg, #0d1117); --perceived: var(--gpt2-perceived, #5fd39a);
    --total: var(--gpt2-total, #f0996a); --error-bg: #4a1f1b; --error-fg: #ffd9d4;
  }
}
:host([hidden]) { display: none; }
* { box-sizing: border-box; }
.box { background: var(--bg); border: 1px solid var(--line); border-radius: 8px; padding: 0.75rem; }
label { display: block; font-size: 0.9em; color: var(--muted); margin-bottom: 0.2rem; }
textarea {
  display: block; width: 100%; resize: vertical; font: inherit; color: inherit; background: var(--field);
  border: 1px solid var(--line); border-radius: 4px; padding: 0.3rem 0.45rem;
}
.row { display: flex; flex-wrap: wrap; align-items: center; gap: 0.4rem 0.75rem; margin: 0.5rem 0; }
button {
  font: inherit; border: 1px solid var(--accent); border-radius: 4px; padding: 0.3rem 0.9rem;
  background: var(--bg); color: var(--accent); cursor: pointer;
}
button.primary { background: var(--accent); color: var(--accent-fg); }
button:disabled { opacity: 0.45; cursor: not-allowed; }
:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
.settings { font-size: 0.85em; color: var(--muted); }
.output {
  min-height: 3.5rem; max-height: 18rem; overflow: auto; margin: 0.5rem 0 0; padding: 0.5rem 0.6rem;
  border: 1px solid var(--line); border-radius: 6px; background: var(--field);
  white-space: pre-wrap; overflow-wrap: anywhere;
  font: 0.95em/1.45 ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace;
}
.output .prompt { color: var(--muted); }
.status { font-size: 0.85em; color: var(--muted); margin: 0.35rem 0 0; min-height: 1.3em; }
.sr { position: absolute; width: 1px; height: 1px; margin: -1px; padding: 0; border: 0; overflow: hidden;
  clip-path: inset(50%); white-space: nowrap; }
progress { display: block; width: 100%; height: 0.5rem; margin: 0.35rem 0 0; accent-color: var(--accent); }
.error { background: var(--error-bg); color: var(--error-fg); border-radius: 6px; padding: 0.4rem 0.6rem; margin: 0.5rem 0 0; }
dl.readout { display: grid; grid-template-columns: repeat(auto-fill, minmax(8.5rem, 1fr)); gap: 0.4rem; margin: 0.6rem 0 0; }
dl.readout > div { border: 1px solid var(--line); border-radius: 6px; padding: 0.25rem 0.5rem; }
dl.readout dt { font-size: 0.78em; color: var(--muted); }
dl.readout dd { margin: 0; font-size: 1.1em; font-variant-numeric: tabular-nums; }
dl.readout .perceived { border-color: var(--perceived); }
dl.readout .perceived dd { color: var(--perceived); }
dl.readout .total { border-color: var(--total); }
dl.readout .total dd { color: var(--total); }
.loop { margin: 0.6rem 0 0; }
.loop .gpt2-loop { --gpt2-accent: var(--accent); --gpt2-pick: var(--perceived); --gpt2-line: var(--line); --gpt2-muted: var(--muted); }
[hidden] { display: none !important; }
`;

/**
 * The widgets' one style sheet, constructed rather than a <style> element: a host page whose
 * Content-Security-Policy forbids inline styles (no style-src 'unsafe-inline') still styles it.
 */
let styles = null;
export function sheet() {
  if (!styles) {
    styles = new CSSStyleSheet();
    styles.replaceSync(CSS);
  }
  return styles;
}
