// The widget's public URL: `<script type="module" src=".../widget.js">` defines <gpt2-generator>.
// The code lives in widget/ (widget.js and the modules it uses); this one line keeps the URL stable.
export * from './widget/widget.js';
