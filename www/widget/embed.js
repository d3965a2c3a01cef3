// embed.html: one <gpt2-generator> whose attributes come from the page's query string, for hosts
// whose editors strip <script> (most LMS) but keep <iframe>. Unknown parameters are named in a
// sentence rather than ignored. The page tells the page that frames it, by postMessage:
//   { type: 'gpt2-web:height', height }             whenever its content's height changes (CSS px)
//   { type: 'gpt2-web:done', result }                after each generation
//   { type: 'gpt2-web:error', message }              when loading or generating failed
// A host that may run a script sizes the iframe from the first (README, "Embedding").
import { ATTRIBUTES } from './widget.js';

const main = document.getElementById('embed');
const post = (msg) => {
  if (window.parent !== window) window.parent.postMessage(msg, '*'); // sizes and results only: nothing private
};

const params = new URLSearchParams(location.search);
const unknown = [...params.keys()].filter((k) => !(k in ATTRIBUTES));
if (unknown.length > 0) {
  const p = document.createElement('p');
  p.className = 'error';
  p.setAttribute('role', 'alert');
  p.textContent = `Unknown embed parameter${unknown.length > 1 ? 's' : ''} ${unknown.map((k) => `"${k}"`).join(', ')}; ` +
    `the parameters are the widget's attributes: ${Object.keys(ATTRIBUTES).join(', ')}.`;
  main.append(p);
  post({ type: 'gpt2-web:error', message: p.textContent });
} else {
  const el = document.createElement('gpt2-generator');
  for (const [name, value] of params) {
    // Boolean attributes are on when present; "0" and "false" turn them off.
    if (ATTRIBUTES[name] && /^(0|false|no|off)$/i.test(value)) continue;
    el.setAttribute(name, ATTRIBUTES[name] ? '' : value);
  }
  el.addEventListener('gpt2-done', (e) => post({ type: 'gpt2-web:done', result: e.detail }));
  el.addEventListener('gpt2-error', (e) => post({ type: 'gpt2-web:error', message: e.detail.message }));
  main.append(el);
}

let last = 0;
new ResizeObserver(() => {
  const height = Math.ceil(main.getBoundingClientRect().height);
  if (height !== last) {
    last = height;
    post({ type: 'gpt2-web:height', height });
  }
}).observe(main);
