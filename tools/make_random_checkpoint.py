#!/usr/bin/env python3
"""Make a GPT-2-family-shaped checkpoint with seeded random weights (Hugging Face layout).

Real GPT-2 weights cannot be downloaded here; these checkpoints have exactly the real shapes and
names (openai-community naming: no `transformer.` prefix), so loading, memory and speed can be
checked on every size. Needs numpy and safetensors only (no torch). Nothing it makes is committed.

    python3 tools/make_random_checkpoint.py --shape gpt2 --out /tmp/gpt2-124m-random
    python3 tools/make_random_checkpoint.py --shape gpt2-medium --dtype f16 --out /tmp/gpt2-medium
"""
import argparse
import json
import pathlib
import shutil

import numpy as np
from safetensors.numpy import save_file

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHAPES = ["gpt2", "distilgpt2", "gpt2-medium", "gpt2-large", "gpt2-xl"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=SHAPES, default="gpt2")
    ap.add_argument("--dtype", choices=["f32", "f16", "bf16"], default="f32")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prefix", action="store_true", help="store names with the transformer. prefix")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    config = json.loads((ROOT / "tests/fixtures/configs" / f"{a.shape}.json").read_text())
    L, C, P, V = config["n_layer"], config["n_embd"], config["n_positions"], config["vocab_size"]
    H = config.get("n_inner") or 4 * C
    rng = np.random.default_rng(a.seed)
    pre = "transformer." if a.prefix else ""

    def normal(*shape, std=0.02):
        return (rng.standard_normal(shape, dtype=np.float32) * std).astype(np.float32)

    t = {f"{pre}wte.weight": normal(V, C), f"{pre}wpe.weight": normal(P, C, std=0.01)}
    for i in range(L):
        h = f"{pre}h.{i}."
        t[h + "ln_1.weight"] = np.ones(C, np.float32)
        t[h + "ln_1.bias"] = np.zeros(C, np.float32)
        t[h + "attn.c_attn.weight"] = normal(C, 3 * C)
        t[h + "attn.c_attn.bias"] = np.zeros(3 * C, np.float32)
        t[h + "attn.c_proj.weight"] = normal(C, C, std=0.02 / np.sqrt(2 * L))
        t[h + "attn.c_proj.bias"] = np.zeros(C, np.float32)
        t[h + "ln_2.weight"] = np.ones(C, np.float32)
        t[h + "ln_2.bias"] = np.zeros(C, np.float32)
        t[h + "mlp.c_fc.weight"] = normal(C, H)
        t[h + "mlp.c_fc.bias"] = np.zeros(H, np.float32)
        t[h + "mlp.c_proj.weight"] = normal(H, C, std=0.02 / np.sqrt(2 * L))
        t[h + "mlp.c_proj.bias"] = np.zeros(C, np.float32)
    t[f"{pre}ln_f.weight"] = np.ones(C, np.float32)
    t[f"{pre}ln_f.bias"] = np.zeros(C, np.float32)
    if a.dtype == "f16":
        t = {k: v.astype(np.float16) for k, v in t.items()}
    elif a.dtype == "bf16":
        # numpy has no bfloat16: keep the top 16 bits, stored through safetensors' BF16 type via torch-free path
        raise SystemExit("bf16 output needs torch; use f32 or f16 here")

    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    save_file(t, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(config, indent=2))
    shutil.copy(ROOT / "tests/fixtures/tiny-random/tokenizer.json", out / "tokenizer.json")
    n = sum(v.size for v in t.values())
    print(f"{out}: {a.shape}, {n / 1e6:.1f}M parameters, {a.dtype}")


if __name__ == "__main__":
    main()
