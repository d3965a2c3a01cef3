#!/usr/bin/env python3
"""GGUF files for gpt2-web's tests and benchmarks, written with the `gguf` package (llama.cpp's).

  python3 tools/make_gguf.py --model DIR --type Q8_0 [--out FILE] [--output-type Q6_K]
      A Hugging Face GPT-2 folder (config.json, model.safetensors, tokenizer.json) as one GGUF file
      laid out as llama.cpp's convert_hf_to_gguf.py writes GPT-2: architecture `gpt2`, names
      token_embd / position_embd / blk.N.{attn_norm, attn_qkv, attn_output, ffn_norm, ffn_up,
      ffn_down} / output_norm, the Conv1D weights transposed to (out, in), `output.weight` a copy
      of token_embd (GPT-2 ties them; --output-type stores that copy in another type, as
      llama-quantize's Q4_K_M does with Q6_K; --no-output leaves it out, as the format allows, for a
      smaller file), the tokenizer in tokenizer.ggml.*. As the converter
      does, vectors (biases, LayerNorms) and position_embd stay F32; the other matrices take
      --type: F32, F16, BF16, Q8_0, Q4_0, Q5_0 (the gguf package's quantizers, llama.cpp's
      reference ones), Q4_K, Q5_K, Q6_K (this script's: the gguf package has none; min/max
      scales, no search, so their error is at most llama.cpp's and usually a little more).
      --out defaults to DIR/model-<type>.gguf.
      --q7 (with --type Q8_0) keeps every block's values within -63..=63 (scale max|w|/63): still
      plain Q8_0 for any reader (llama.cpp, wllama), and exactly the 8-bit form of gpt2-web's CPU
      kernels, which then copy the blocks instead of rounding them again; position_embd is then
      Q8_0 too (llama.cpp's converter keeps it F32; any reader takes either). The demo model's
      www/models/gpt2-shakespeare/gpt2-shakespeare-q8_0.gguf is
          python3 tools/make_gguf.py --model www/models/gpt2-shakespeare --type Q8_0 --q7 \
              --no-output --mtp --out www/models/gpt2-shakespeare/gpt2-shakespeare-q8_0.gguf
      --mtp carries DIR/mtp_heads.safetensors (tools/train_mtp_heads.py: multi-token prediction
      heads) under the same names and types: mtp.{i}.weight F16 (d, d), mtp.{i}.bias F32,
      mtp.draft_ids F32 (ids are exact in it), mtp.draft_embedding F16 (N, d); and their count, draft
      vocabulary and held-out agreement (a JSON list) as gpt2web.mtp.heads, gpt2web.mtp.draft_vocab
      and gpt2web.mtp.agreement (a string).

  python3 tools/make_gguf.py --blocks DIR
      For the dequantizer tests (tests/gguf.rs): DIR/<type>.bin, 64 blocks of random bytes of
      each quantized type (any bytes are valid blocks; the f16 scales are kept finite), and
      DIR/<type>.f32, the gguf package's `dequantize` of them (little-endian float32).

Needs: pip install gguf numpy safetensors.
"""
import argparse
import json
import os
import sys

import numpy as np

try:
    import gguf
    from gguf import GGMLQuantizationType as T
except ImportError:
    sys.exit('tools/make_gguf.py needs the gguf package: pip install gguf')

QK_K = 256
TYPES = {name: getattr(T, name) for name in
         ['F32', 'F16', 'BF16', 'Q8_0', 'Q4_0', 'Q5_0', 'Q4_K', 'Q5_K', 'Q6_K']}
QUANTIZED = ['Q8_0', 'Q4_0', 'Q5_0', 'Q4_K', 'Q5_K', 'Q6_K']


def f16_bytes(x):
    return np.asarray(x, dtype=np.float16).reshape(-1, 1).view(np.uint8)


def k_scales(sc, m):
    """Packs eight 6-bit scales and mins into 12 bytes per block (get_scale_min_k4's inverse)."""
    sc, m = sc.astype(np.uint8), m.astype(np.uint8)
    out = np.zeros((sc.shape[0], 12), dtype=np.uint8)
    out[:, 0:4] = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
    out[:, 4:8] = (m[:, 0:4] & 63) | ((m[:, 4:8] >> 4) << 6)
    out[:, 8:12] = (sc[:, 4:8] & 15) | ((m[:, 4:8] & 15) << 4)
    return out


def quantize_k(x, bits):
    """Q4_K (bits 4) or Q5_K (bits 5) blocks of rows `x` (n, 256): per 32 values a 6-bit scale and
    min of the super-block's f16 `d` and `dmin`, values q in 0..2^bits-1, x ≈ d·sc·q − dmin·m."""
    n = x.shape[0]
    sub = x.reshape(n, 8, 32)
    lo = np.minimum(sub.min(axis=2), 0)
    hi = sub.max(axis=2)
    top = (1 << bits) - 1
    scale = (hi - lo) / top
    d = (scale.max(axis=1) / 63).astype(np.float16)
    dmin = ((-lo).max(axis=1) / 63).astype(np.float16)
    df, dminf = d.astype(np.float32), dmin.astype(np.float32)
    with np.errstate(divide='ignore', invalid='ignore'):
        sc = np.where(df[:, None] > 0, np.round(scale / df[:, None]), 0).clip(0, 63)
        m = np.where(dminf[:, None] > 0, np.round(-lo / dminf[:, None]), 0).clip(0, 63)
        step = (df[:, None] * sc)[:, :, None]
        off = (dminf[:, None] * m)[:, :, None]
        q = np.where(step > 0, np.round((sub + off) / step), 0).clip(0, top).astype(np.uint8)
    q = q.reshape(n, 4, 2, 32)  # pairs of sub-blocks share 32 bytes: low, then high nibbles
    qs = (q[:, :, 0, :] & 15) | ((q[:, :, 1, :] & 15) << 4)
    parts = [f16_bytes(d), f16_bytes(dmin), k_scales(sc, m)]
    if bits == 5:
        high = (q.reshape(n, 8, 32) >> 4) & 1
        parts.append((high << np.arange(8, dtype=np.uint8)[None, :, None]).sum(axis=1).astype(np.uint8))
    parts.append(qs.reshape(n, 128))
    return np.concatenate(parts, axis=1)


def quantize_q6_k(x):
    """Q6_K blocks of rows `x` (n, 256): per 16 values an int8 scale of the block's f16 `d`,
    values q in 0..63, x ≈ d·sc·(q − 32)."""
    n = x.shape[0]
    sub = x.reshape(n, 16, 16)
    amax = np.abs(sub).max(axis=2)
    scale = amax / 31
    d = (scale.max(axis=1) / 127).astype(np.float16)
    df = d.astype(np.float32)
    with np.errstate(divide='ignore', invalid='ignore'):
        sc = np.where(df[:, None] > 0, np.round(scale / df[:, None]), 0).clip(-128, 127).astype(np.int8)
        step = (df[:, None] * sc.astype(np.float32))[:, :, None]
        q = np.where(step != 0, np.round(sub / step), 0).clip(-32, 31).astype(np.int16) + 32
    q = q.astype(np.uint8).reshape(n, 2, 128)  # two halves of 128 values
    ql = np.zeros((n, 2, 64), dtype=np.uint8)
    qh = np.zeros((n, 2, 32), dtype=np.uint8)
    for half in range(2):
        v = q[:, half]
        ql[:, half] = (v[:, 0:64] & 15) | ((v[:, 64:128] & 15) << 4)
        for s in range(4):
            qh[:, half] |= ((v[:, 32 * s:32 * s + 32] >> 4) & 3) << (2 * s)
    return np.concatenate([ql.reshape(n, 128), qh.reshape(n, 64), sc.view(np.uint8), f16_bytes(d)], axis=1)


def quantize_q8_0_q7(values):
    """Q8_0 blocks of a (rows, cols) matrix with values in -63..=63: d = f16(max|w| / 63), q = w / d
    rounded to nearest, ties to even (as the CPU kernels round), and clamped."""
    rows, cols = values.shape
    x = values.astype(np.float32).reshape(-1, 32)
    d = (np.abs(x).max(axis=1) / 63).astype(np.float16)
    df = d.astype(np.float32)[:, None]
    with np.errstate(divide='ignore', invalid='ignore'):
        r = np.where(df > 0, x / df, 0)
    q = np.clip(np.rint(r), -63, 63).astype(np.int8)
    out = np.concatenate([d.reshape(-1, 1).view(np.uint8), q.view(np.uint8)], axis=1)
    return out.reshape(rows, -1)


def quantize(values, name, q7=False):
    """The bytes of a (rows, cols) float32 matrix in type `name` (ggml's layout), as uint8 (rows, bytes)."""
    t = TYPES[name]
    if q7:
        return quantize_q8_0_q7(values)
    if name in ('F32', 'F16', 'BF16'):
        return values.astype(np.float32) if name == 'F32' else gguf.quants.quantize(values, t)
    if name in ('Q8_0', 'Q4_0', 'Q5_0'):
        return gguf.quants.quantize(values.astype(np.float32), t)
    rows, cols = values.shape
    if cols % QK_K:
        sys.exit(f'{name} needs rows that are whole blocks of {QK_K} values; this model has rows of {cols}')
    blocks = values.astype(np.float32).reshape(-1, QK_K)
    q = quantize_q6_k(blocks) if name == 'Q6_K' else quantize_k(blocks, 4 if name == 'Q4_K' else 5)
    return q.reshape(rows, -1)


def add_mtp(w, model, n_embd):
    """The heads of DIR/mtp_heads.safetensors, copied as they are (see --mtp)."""
    from safetensors import safe_open
    path = os.path.join(model, 'mtp_heads.safetensors')
    if not os.path.exists(path):
        sys.exit(f'--mtp: there is no {path} (tools/train_mtp_heads.py makes it)')
    with safe_open(path, 'np') as f:
        meta = f.metadata() or {}
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    if meta.get('format') != 'gpt2-web-mtp' or int(meta.get('n_embd', -1)) != n_embd:
        sys.exit(f'--mtp: {path} is not gpt2-web-mtp heads for n_embd {n_embd}')
    k = int(meta['heads'])
    w.add_uint32('gpt2web.mtp.heads', k)
    w.add_uint32('gpt2web.mtp.draft_vocab', int(meta['draft_vocab']))
    w.add_string('gpt2web.mtp.agreement', meta['agreement'])
    for i in range(k):
        w.add_tensor(f'mtp.{i}.weight', tensors[f'mtp.{i}.weight'].astype(np.float16))  # (out, in)
        w.add_tensor(f'mtp.{i}.bias', tensors[f'mtp.{i}.bias'].astype(np.float32))
    # The ids as F32 (exact below 2^24): readers of GPT-2's GGUF types need no integer type for them.
    w.add_tensor('mtp.draft_ids', tensors['mtp.draft_ids'].astype(np.float32))
    w.add_tensor('mtp.draft_embedding', tensors['mtp.draft_embedding'].astype(np.float16))
    return k


def write_model(model, ty, out, output_type, output=True, q7=False, mtp=False):
    from safetensors.numpy import load_file
    config = json.load(open(os.path.join(model, 'config.json')))
    tok = json.load(open(os.path.join(model, 'tokenizer.json')))
    weights = {k.removeprefix('transformer.'): v.astype(np.float32)
               for k, v in load_file(os.path.join(model, 'model.safetensors')).items()}
    n_embd, n_layer = config['n_embd'], config['n_layer']
    w = gguf.GGUFWriter(out, 'gpt2')
    w.add_name(os.path.basename(os.path.normpath(model)))
    w.add_context_length(config.get('n_positions') or config['n_ctx'])
    w.add_embedding_length(n_embd)
    w.add_feed_forward_length(config.get('n_inner') or 4 * n_embd)
    w.add_block_count(n_layer)
    w.add_head_count(config['n_head'])
    w.add_layer_norm_eps(config.get('layer_norm_epsilon', 1e-5))

    vocab = tok['model']['vocab']
    added = {a['id']: a for a in tok['added_tokens']}
    size = max(max(vocab.values()), max(added, default=-1)) + 1
    tokens = [''] * size
    for t, i in vocab.items():
        tokens[i] = t
    types = [gguf.TokenType.NORMAL] * size
    for i, a in added.items():
        tokens[i] = a['content']
        types[i] = gguf.TokenType.CONTROL if a['special'] else gguf.TokenType.USER_DEFINED
    merges = [m if isinstance(m, str) else ' '.join(m) for m in tok['model']['merges']]
    w.add_tokenizer_model('gpt2')
    w.add_tokenizer_pre('gpt-2')
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    eos = config.get('eos_token_id')
    eos = 50256 if eos is None else eos
    bos = config.get('bos_token_id')
    w.add_bos_token_id(eos if bos is None else bos)
    w.add_eos_token_id(eos)

    def matrix(name, values, qtype):
        data = quantize(values, qtype, q7 and qtype == 'Q8_0')
        w.add_tensor(name, data, raw_dtype=TYPES[qtype])

    def vector(name, values):
        w.add_tensor(name, values.astype(np.float32).reshape(-1))

    matrix('token_embd.weight', weights['wte.weight'], ty)
    if output:
        matrix('output.weight', weights['wte.weight'], output_type or ty)
    if q7:  # the position embedding in 8 bits too (the converter keeps it F32): 0.19 MB less for GPT-2's shape
        matrix('position_embd.weight', weights['wpe.weight'], 'Q8_0')
    else:
        w.add_tensor('position_embd.weight', weights['wpe.weight'])
    vector('output_norm.weight', weights['ln_f.weight'])
    vector('output_norm.bias', weights['ln_f.bias'])
    parts = [('ln_1', 'attn_norm'), ('attn.c_attn', 'attn_qkv'), ('attn.c_proj', 'attn_output'),
             ('ln_2', 'ffn_norm'), ('mlp.c_fc', 'ffn_up'), ('mlp.c_proj', 'ffn_down')]
    for i in range(n_layer):
        for hf, ll in parts:
            weight, bias = weights[f'h.{i}.{hf}.weight'], weights[f'h.{i}.{hf}.bias']
            if hf.startswith('ln'):
                vector(f'blk.{i}.{ll}.weight', weight)
            else:  # Conv1D (in, out) → (out, in), as llama.cpp's converter
                matrix(f'blk.{i}.{ll}.weight', np.ascontiguousarray(weight.T), ty)
            vector(f'blk.{i}.{ll}.bias', bias)
    heads = add_mtp(w, model, n_embd) if mtp else 0
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f'{out}: {os.path.getsize(out) / 1e6:.1f} MB ({ty}' + (', values within ±63' if q7 else '')
          + (f', output {output_type}' if output_type and output_type != ty else '')
          + (f', {heads} multi-token prediction heads' if heads else '') + ')')


def write_blocks(out):
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(27)
    for name in QUANTIZED:
        t = TYPES[name]
        n, size = gguf.GGML_QUANT_SIZES[t]
        raw = rng.integers(0, 256, size=(64, size), dtype=np.uint8)
        # f16 fields: random finite values of every magnitude (exponents 0..30, both signs).
        f16_at = {'Q8_0': [0], 'Q4_0': [0], 'Q5_0': [0], 'Q4_K': [0, 2], 'Q5_K': [0, 2], 'Q6_K': [208]}[name]
        for at in f16_at:
            bits = raw[:, at].astype(np.uint16) | (raw[:, at + 1].astype(np.uint16) << 8)
            bits = np.where((bits >> 10 & 31) == 31, bits & ~np.uint16(1 << 14), bits).astype(np.uint16)
            raw[:, at:at + 2] = bits.reshape(-1, 1).view(np.uint8)
        ref = gguf.quants.dequantize(raw.reshape(-1), t).astype(np.float32)
        assert ref.size == 64 * n and np.isfinite(ref).all(), name
        raw.tofile(os.path.join(out, f'{name}.bin'))
        ref.astype('<f4').tofile(os.path.join(out, f'{name}.f32'))
        print(f'{out}/{name}.bin: 64 blocks, {ref.size} values')


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--model')
    p.add_argument('--type', choices=list(TYPES))
    p.add_argument('--output-type', choices=list(TYPES))
    p.add_argument('--no-output', action='store_true',
                   help='leave out output.weight (optional: the head is then token_embd itself); a smaller file')
    p.add_argument('--q7', action='store_true',
                   help='Q8_0 with every value within -63..=63: the CPU kernels\' own form, copied at load')
    p.add_argument('--mtp', action='store_true',
                   help='carry the multi-token prediction heads of DIR/mtp_heads.safetensors')
    p.add_argument('--out')
    p.add_argument('--blocks')
    a = p.parse_args()
    if a.q7 and a.type != 'Q8_0':
        p.error('--q7 is for --type Q8_0')
    if a.blocks:
        write_blocks(a.blocks)
    elif a.model and a.type:
        out = a.out or os.path.join(a.model, f'model-{a.type}.gguf')
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        write_model(a.model, a.type, out, a.output_type, not a.no_output, a.q7, a.mtp)
    else:
        p.error('give --model DIR --type TYPE, or --blocks DIR')


if __name__ == '__main__':
    main()
