// The embed code for a widget with given attributes, in the two forms a course page can take:
// a script tag plus <gpt2-generator> (pages that allow scripts), or an <iframe> of embed.html
// (editors that strip scripts: most LMS). Used by the demo page's "Copy embed code" panel
// (index.html: #embed-show, #embed-code, #embed-script, #embed-iframe, #embed-note, [data-copy]).

const escapeAttr = (s) => String(s).replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;')
  .replace(/>/g, '&gt;').replace(/\n/g, '&#10;');

/**
 * The widget's `stop` attribute for a list of stop texts: one text with \n, \t and \\ escaped (the
 * widget reads those back), or a JSON list.
 */
export function stopAttribute(stops) {
  if (stops.length === 1 && !stops[0].trim().startsWith('[')) {
    return stops[0].replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/\t/g, '\\t');
  }
  return JSON.stringify(stops);
}

/**
 * `base`: the URL of the folder that holds widget.js and embed.html. `attributes`: [name, value]
 * pairs in the widget's attribute names; `true` writes a boolean attribute, undefined leaves it out.
 * Returns { script, iframe } as HTML to paste, and the iframe's `src`.
 */
export function embedSnippets(base, attributes) {
  const set = attributes.filter(([, v]) => v !== undefined && v !== false);
  const tag = set.map(([k, v]) => (v === true ? ` ${k}` : ` ${k}="${escapeAttr(v)}"`)).join('');
  const script = `<script type="module" src="${escapeAttr(new URL('widget.js', base))}"></script>\n` +
    `<gpt2-generator${tag}></gpt2-generator>`;
  const query = new URLSearchParams(set.map(([k, v]) => [k, v === true ? '' : String(v)]));
  const src = `${new URL('embed.html', base)}?${query.toString().replace(/=(&|$)/g, '$1')}`;
  const iframe = `<iframe src="${escapeAttr(src)}" title="GPT-2, running in your browser" ` +
    'style="width: 100%; height: 420px; border: 0" loading="lazy"></iframe>';
  return { script, iframe, src };
}

/**
 * Wires the page's embed panel: #embed-show fills it from `settings()` ({ attributes, left }:
 * the widget's attributes and what the widget cannot carry), each [data-copy] button copies its
 * field. `onError(message)` shows a bad setting.
 */
export function wireEmbedPanel(settings, onError) {
  const $ = (id) => document.getElementById(id);
  $('embed-show').addEventListener('click', () => {
    let got;
    try {
      got = settings();
    } catch (err) {
      onError(err.message);
      return;
    }
    const { script, iframe } = embedSnippets(new URL('./', location.href), got.attributes);
    $('embed-script').value = script;
    $('embed-iframe').value = iframe;
    $('embed-note').textContent = got.left.length ? `Not in the widget: ${got.left.join('; ')}.` : '';
    $('embed-code').hidden = false;
  });
  for (const button of document.querySelectorAll('[data-copy]')) {
    button.addEventListener('click', async () => {
      const field = $(button.dataset.copy);
      field.select();
      try {
        await navigator.clipboard.writeText(field.value);
        $('embed-note').textContent = 'Copied.';
      } catch {
        $('embed-note').textContent = 'Selected: press Ctrl+C (⌘C) to copy.'; // no clipboard permission
      }
    });
  }
}
