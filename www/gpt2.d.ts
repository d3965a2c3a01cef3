// TypeScript types for gpt2.js (the API's public URL): they live beside the code, in api/gpt2.d.ts.
export * from './api/gpt2.js';
export { default } from './api/gpt2.js';
