// TypeScript types for widget.js (the widget's public URL): they live beside the code, in widget/widget.d.ts.
export * from './widget/widget.js';
