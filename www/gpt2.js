// The API's public URL: what course pages and apps import (the npm package's entry too). The code
// lives in api/ (gpt2.js and the modules it uses); this one line keeps the URL stable.
export * from './api/gpt2.js';
export { default } from './api/gpt2.js';
