// A student's answer to the lesson's exercise (see autograder.mjs): the loop of predict → pick →
// append, greedy, stopping at end-of-text.
import { argmax } from 'gpt2-web';

export async function complete(model, prompt, maxTokens) {
  const ids = await model.tokenize(prompt);
  const start = ids.length;
  for (let step = 0; step < maxTokens; step++) {
    const logits = await model.logits(ids); // predict: a score for every token
    const next = argmax(logits); // pick: the most likely
    ids.push(next); // append: it feeds the next step
    if (next === model.eosTokenId) break; // end-of-text
  }
  return ids.slice(start);
}
