#!/usr/bin/env python3
"""pytorch_model.bin files for gpt2-web's tests, written by torch.save itself.

  python3 tools/make_pytorch_bin.py --model DIR --out FILE [--dtype f32|f16|bf16] [--transposed]
      A Hugging Face GPT-2 folder (config.json, model.safetensors) as the state dict that
      GPT2LMHeadModel.save_pretrained(safe_serialization=False) writes: `transformer.`-prefixed
      names, the causal-mask buffers `h.N.attn.bias` / `h.N.attn.masked_bias` of older
      transformers versions, and `lm_head.weight` sharing the storage of `transformer.wte.weight`
      (torch.save writes a shared storage once). --dtype casts every float tensor;
      --transposed stores each Conv1D weight column-major (a `.t().contiguous().t()` view, stride
      (1, in)), which readers must take as it is.

  python3 tools/make_pytorch_bin.py --legacy FILE
      A small state dict in the format before torch 1.6 (a bare pickle), which gpt2-web refuses
      with a sentence.

Regenerate the committed fixtures (tests/fixtures/torch/, and the load_model fuzzer's seed
tools/fuzz/seeds/load_model/tiny-bin: its tiny safetensors seed as torch.save writes it) with
  python3 tools/make_pytorch_bin.py --fixtures
Needs: torch, numpy, safetensors (torch only here: the tests read the committed files).
"""
import argparse
import collections
import json
import os

import numpy as np
import torch
from safetensors.numpy import load_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTYPES = {'f32': torch.float32, 'f16': torch.float16, 'bf16': torch.bfloat16}


def state_dict(model_dir, dtype, transposed):
    config = json.load(open(os.path.join(model_dir, 'config.json')))
    tensors = load_file(os.path.join(model_dir, 'model.safetensors'))
    n_pos = config['n_positions']
    sd = collections.OrderedDict()
    for name in sorted(tensors):
        plain = name[len('transformer.'):] if name.startswith('transformer.') else name
        t = torch.from_numpy(np.ascontiguousarray(tensors[name])).to(DTYPES[dtype])
        if transposed and t.dim() == 2 and plain.split('.')[-2] in ('c_attn', 'c_proj', 'c_fc'):
            t = t.t().contiguous().t()
        sd[f'transformer.{plain}'] = t
    for i in range(config['n_layer']):
        sd[f'transformer.h.{i}.attn.bias'] = torch.tril(torch.ones(n_pos, n_pos, dtype=torch.uint8)).view(
            1, 1, n_pos, n_pos)
        sd[f'transformer.h.{i}.attn.masked_bias'] = torch.tensor(-1e4)
    sd['lm_head.weight'] = sd['transformer.wte.weight']
    return sd


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--model')
    ap.add_argument('--out')
    ap.add_argument('--dtype', default='f32', choices=DTYPES)
    ap.add_argument('--transposed', action='store_true')
    ap.add_argument('--legacy')
    ap.add_argument('--fixtures', action='store_true')
    a = ap.parse_args()
    if a.legacy:
        torch.save({'transformer.wte.weight': torch.zeros(2, 2)}, a.legacy, _use_new_zipfile_serialization=False)
        return
    if a.fixtures:
        tiny = os.path.join(ROOT, 'tests/fixtures/tiny-random')
        out = os.path.join(ROOT, 'tests/fixtures/torch')
        os.makedirs(out, exist_ok=True)
        torch.save(state_dict(tiny, 'f32', False), os.path.join(out, 'tiny-random-f32.bin'))
        torch.save(state_dict(tiny, 'f16', True), os.path.join(out, 'tiny-random-f16-transposed.bin'))
        torch.save({'transformer.wte.weight': torch.zeros(2, 2)}, os.path.join(out, 'legacy.bin'),
                   _use_new_zipfile_serialization=False)
        # The fuzzer's seed: 2 bytes of config length, config.json, then the weights.
        seed = os.path.join(ROOT, 'tools/fuzz/seeds/load_model')
        raw = open(os.path.join(seed, 'tiny'), 'rb').read()
        n = int.from_bytes(raw[:2], 'little')
        from safetensors.numpy import load as load_bytes
        tensors = load_bytes(raw[2 + n:])
        sd = collections.OrderedDict((k, torch.from_numpy(v.copy())) for k, v in sorted(tensors.items()))
        sd['lm_head.weight'] = sd['wte.weight']
        import io
        buf = io.BytesIO()
        torch.save(sd, buf)
        open(os.path.join(seed, 'tiny-bin'), 'wb').write(raw[:2 + n] + buf.getvalue())
        print(f'{os.path.join(seed, "tiny-bin")}: {2 + n + len(buf.getvalue())} bytes')
        for f in sorted(os.listdir(out)):
            print(f'{os.path.join(out, f)}: {os.path.getsize(os.path.join(out, f))} bytes')
        return
    if not (a.model and a.out):
        ap.error('--model and --out (or --legacy FILE, or --fixtures)')
    torch.save(state_dict(a.model, a.dtype, a.transposed), a.out)


if __name__ == '__main__':
    main()
