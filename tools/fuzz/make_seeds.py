#!/usr/bin/env python3
"""Writes the fuzzers' seed inputs (tools/fuzz/seeds/): a tiny GPT-2 checkpoint (1 layer, width 8,
10 tokens) as one load_model input, a small byte-level BPE tokenizer.json for load_tokenizer, and
a tiny GPT-2 GGUF (1 layer, width 32, that tokenizer in its metadata, F32 vectors, F16 and Q8_0
matrices) for load_gguf; for shard_index that checkpoint's config and an index spreading its
tensors over two shards, for vocab_merges the tokenizer's vocab.json and merges.txt
(weights_stream and gguf_header start from load_model's and load_gguf's seeds). Standard library only; the files are written by hand (safetensors: 8-byte
header length, JSON header, little-endian data; GGUF v3 as ggml's docs/gguf.md lays it out).
Run: python3 tools/fuzz/make_seeds.py
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


def tiny_index():
    """The tiny checkpoint's config, then a model.safetensors.index.json over two shards."""
    seed = tiny_model()
    n = struct.unpack("<H", seed[:2])[0]
    config = seed[2:2 + n]
    hlen = struct.unpack("<Q", seed[2 + n:10 + n])[0]
    names = sorted(json.loads(seed[10 + n:10 + n + hlen]))
    weight_map = {name: f"model-0000{1 + i % 2}-of-00002.safetensors" for i, name in enumerate(names)}
    index = json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}, indent=1).encode()
    return struct.pack("<H", len(config)) + config + index


def tiny_vocab_merges():
    """The tiny tokenizer as GPT-2's older pair of files: vocab.json, then merges.txt."""
    model = json.loads(tiny_tokenizer())["model"]
    vocab = json.dumps(model["vocab"], ensure_ascii=False).encode()
    merges = ("#version: 0.2\n" + "\n".join(model["merges"]) + "\n").encode()
    return struct.pack("<H", len(vocab)) + vocab + merges


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def tiny_gguf():
    c, h, v, t = 32, 64, 10, 8
    rnd = random.Random(1)
    tok = json.loads(tiny_tokenizer())
    vocab = sorted(tok["model"]["vocab"].items(), key=lambda kv: kv[1])
    kv = [("general.architecture", 8, "gpt2"), ("gpt2.context_length", 4, t), ("gpt2.embedding_length", 4, c),
          ("gpt2.feed_forward_length", 4, h), ("gpt2.block_count", 4, 1), ("gpt2.attention.head_count", 4, 2),
          ("gpt2.attention.layer_norm_epsilon", 6, 1e-5), ("tokenizer.ggml.model", 8, "gpt2"),
          ("tokenizer.ggml.tokens", (9, 8), [tk for tk, _ in vocab]),
          ("tokenizer.ggml.token_type", (9, 5), [3 if tk == "<|endoftext|>" else 1 for tk, _ in vocab]),
          ("tokenizer.ggml.merges", (9, 8), tok["model"]["merges"]), ("tokenizer.ggml.eos_token_id", 4, v - 1)]

    def value(ty, x):
        if ty == 8:
            return gguf_string(x)
        return struct.pack({4: "<I", 5: "<i", 6: "<f"}[ty], x)

    meta = b""
    for key, ty, x in kv:
        meta += gguf_string(key)
        if isinstance(ty, tuple):
            meta += struct.pack("<IIQ", 9, ty[1], len(x)) + b"".join(value(ty[1], e) for e in x)
        else:
            meta += struct.pack("<I", ty) + value(ty, x)

    def f32(n):
        return 0, struct.pack(f"<{n}f", *[round(rnd.gauss(0, 0.2), 4) for _ in range(n)])

    def f16(n):
        return 1, struct.pack(f"<{n}e", *[round(rnd.gauss(0, 0.2), 4) for _ in range(n)])

    def q8_0(n):  # blocks of 32: an f16 scale, 32 int8
        out = b""
        for _ in range(n // 32):
            out += struct.pack("<e", 0.01) + bytes(rnd.randrange(256) for _ in range(32))
        return 8, out

    tensors = [("token_embd.weight", [c, v], q8_0), ("position_embd.weight", [c, t], f32),
               ("output_norm.weight", [c], f32), ("output_norm.bias", [c], f32)]
    for name, ne, kind in [("attn_norm.weight", [c], f32), ("attn_norm.bias", [c], f32),
                           ("attn_qkv.weight", [c, 3 * c], q8_0), ("attn_qkv.bias", [3 * c], f32),
                           ("attn_output.weight", [c, c], f16), ("attn_output.bias", [c], f32),
                           ("ffn_norm.weight", [c], f32), ("ffn_norm.bias", [c], f32),
                           ("ffn_up.weight", [c, h], q8_0), ("ffn_up.bias", [h], f32),
                           ("ffn_down.weight", [h, c], q8_0), ("ffn_down.bias", [c], f32)]:
        tensors.append((f"blk.0.{name}", ne, kind))
    infos, data = b"", b""
    for name, ne, kind in tensors:
        n = 1
        for d in ne:
            n *= d
        ty, raw = kind(n)
        data += b"\0" * (-len(data) % 32)
        infos += gguf_string(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
        infos += struct.pack("<IQ", ty, len(data))
        data += raw
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv)) + meta + infos
    return head + b"\0" * (-len(head) % 32) + data


def main():
    (SEEDS / "load_model").mkdir(parents=True, exist_ok=True)
    (SEEDS / "load_tokenizer").mkdir(parents=True, exist_ok=True)
    (SEEDS / "load_gguf").mkdir(parents=True, exist_ok=True)
    (SEEDS / "load_gguf" / "tiny.gguf").write_bytes(tiny_gguf())
    (SEEDS / "load_model" / "tiny").write_bytes(tiny_model())
    (SEEDS / "load_tokenizer" / "tiny.json").write_bytes(tiny_tokenizer())
    for target, seed in [("shard_index", tiny_index()), ("vocab_merges", tiny_vocab_merges())]:
        (SEEDS / target).mkdir(parents=True, exist_ok=True)
        (SEEDS / target / "tiny").write_bytes(seed)
    print("wrote", *(str(p.relative_to(HERE)) for p in sorted(SEEDS.rglob("*")) if p.is_file()))


if __name__ == "__main__":
    main()
