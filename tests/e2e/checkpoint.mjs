// A random GPT-2 checkpoint written by Node alone (no Python): seeded values of the real layout
// (openai-community names, Conv1D (in, out) weights, f32), for the browser tests of streamed
// loading. `tools/make_random_checkpoint.py` makes the GPT-2 family's shapes for the benchmarks.
import fs from 'node:fs';
import path from 'node:path';

/** Writes `dir/{config.json, model.safetensors, tokenizer.json}`; returns the weights' size. */
export function writeRandomCheckpoint(dir, { nLayer, nEmbd, nHead, nPositions, vocab = 50257, tokenizer }) {
  fs.mkdirSync(dir, { recursive: true });
  const c = nEmbd;
  const tensors = [['wte.weight', [vocab, c]], ['wpe.weight', [nPositions, c]]];
  for (let i = 0; i < nLayer; i++) {
    for (const [n, s] of [['ln_1.weight', [c]], ['ln_1.bias', [c]], ['attn.c_attn.weight', [c, 3 * c]], ['attn.c_attn.bias', [3 * c]],
      ['attn.c_proj.weight', [c, c]], ['attn.c_proj.bias', [c]], ['ln_2.weight', [c]], ['ln_2.bias', [c]],
      ['mlp.c_fc.weight', [c, 4 * c]], ['mlp.c_fc.bias', [4 * c]], ['mlp.c_proj.weight', [4 * c, c]], ['mlp.c_proj.bias', [c]]]) {
      tensors.push([`h.${i}.${n}`, s]);
    }
  }
  tensors.push(['ln_f.weight', [c]], ['ln_f.bias', [c]]);
  const header = {};
  let at = 0;
  for (const [name, shape] of tensors) {
    const bytes = shape.reduce((a, b) => a * b, 1) * 4;
    header[name] = { dtype: 'F32', shape, data_offsets: [at, at + bytes] };
    at += bytes;
  }
  let json = Buffer.from(JSON.stringify(header));
  json = Buffer.concat([json, Buffer.alloc((8 - (json.length % 8)) % 8, 0x20)]);
  const out = fs.openSync(path.join(dir, 'model.safetensors'), 'w');
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  fs.writeSync(out, len);
  fs.writeSync(out, json);
  let state = 12345;
  for (const [name, shape] of tensors) {
    const n = shape.reduce((a, b) => a * b, 1);
    const v = new Float32Array(n);
    const ln = name.includes('ln_') && name.endsWith('weight');
    for (let i = 0; i < n; i++) {
      state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
      v[i] = (ln ? 1 : 0) + ((state / 2 ** 32) - 0.5) * 0.04;
    }
    fs.writeSync(out, new Uint8Array(v.buffer));
  }
  fs.closeSync(out);
  const config = { model_type: 'gpt2', n_layer: nLayer, n_embd: c, n_head: nHead, n_positions: nPositions, vocab_size: vocab };
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config));
  fs.copyFileSync(tokenizer, path.join(dir, 'tokenizer.json'));
  return 8 + json.length + at;
}
