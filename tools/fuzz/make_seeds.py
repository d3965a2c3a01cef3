#!/usr/bin/env python3
"""Writes the fuzzers' seed inputs (tools/fuzz/seeds/): a tiny GPT-2 checkpoint (1 layer, width 8,
10 tokens) as one load_model input, and a small byte-level BPE tokenizer.json for load_tokenizer.
Standard library only; the safetensors file is written by hand (8-byte header length, JSON
header, little-endian data). Run: python3 tools/fuzz/make_seeds.py
"""
import json
import random
import struct
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEEDS = HERE / "seeds"


def safetensors(tensors):
    header, data, offset = {}, b"", 0
    for name, (shape, values) in sorted(tensors.items()):
        raw = struct.pack(f"<{len(values)}f", *values)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        data += raw
        offset += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def tiny_model():
    c, h, v, t = 8, 16, 10, 8
    config = {"model_type": "gpt2", "n_layer": 1, "n_head": 2, "n_embd": c, "n_inner": h,
              "n_positions": t, "vocab_size": v}
    rnd = random.Random(0)

    def tensor(*shape):
        n = 1
        for s in shape:
            n *= s
        return (list(shape), [round(rnd.gauss(0, 0.2), 4) for _ in range(n)])

    tensors = {"wte.weight": tensor(v, c), "wpe.weight": tensor(t, c),
               "ln_f.weight": tensor(c), "ln_f.bias": tensor(c)}
    for name, shape in [("ln_1.weight", (c,)), ("ln_1.bias", (c,)), ("ln_2.weight", (c,)), ("ln_2.bias", (c,)),
                        ("attn.c_attn.weight", (c, 3 * c)), ("attn.c_attn.bias", (3 * c,)),
                        ("attn.c_proj.weight", (c, c)), ("attn.c_proj.bias", (c,)),
                        ("mlp.c_fc.weight", (c, h)), ("mlp.c_fc.bias", (h,)),
                        ("mlp.c_proj.weight", (h, c)), ("mlp.c_proj.bias", (c,))]:
        tensors[f"h.0.{name}"] = tensor(*shape)
    cfg = json.dumps(config, separators=(",", ":")).encode()
    return struct.pack("<H", len(cfg)) + cfg + safetensors(tensors)


def tiny_tokenizer():
    vocab = {ch: i for i, ch in enumerate(["Ġ", "t", "h", "e", "a", "th", "the", "Ġthe", "!"])}
    vocab["<|endoftext|>"] = len(vocab)
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return json.dumps({
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": vocab["<|endoftext|>"], "content": "<|endoftext|>", "single_word": False,
                          "lstrip": False, "rstrip": False, "normalized": True, "special": True}],
        "normalizer": None, "pre_tokenizer": byte_level, "post_processor": byte_level, "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": ["t h", "th e", "Ġ the"]},
    }, indent=1).encode()


def main():
    (SEEDS / "load_model").mkdir(parents=True, exist_ok=True)
    (SEEDS / "load_tokenizer").mkdir(parents=True, exist_ok=True)
    (SEEDS / "load_model" / "tiny").write_bytes(tiny_model())
    (SEEDS / "load_tokenizer" / "tiny.json").write_bytes(tiny_tokenizer())
    print("wrote", *(str(p.relative_to(HERE)) for p in sorted(SEEDS.rglob("*")) if p.is_file()))


if __name__ == "__main__":
    main()
