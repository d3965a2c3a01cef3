// The benchmarks' prompt: a 64-token passage (GPT-2's tokenizer; tools/bench_web.mjs checks the
// count), shared by bench_web.mjs, bench_ab.mjs and bench_node.mjs so that their figures compare.
export const PASSAGE =
  'It was the best of times, it was the worst of times, it was the age of wisdom, it was the age ' +
  'of foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season ' +
  'of Light, it was the season of Darkness, it was the winter of';
