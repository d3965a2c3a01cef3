#!/usr/bin/env python3
"""Checks what `gpt2 bench --backend webgpu --batch ... --json` says a decode step asked of the GPU.

Reads the JSON on stdin (the model's config.json named by --model) and fails, naming the batch and
the number, unless every batch size's decode step was one submission, read back at most 8 bytes
per sequence (greedy: the chosen ids), and recorded at most 6 dispatches per layer + 4 (the
embedding, ln_f, the head and the argmax), every decode step after the first was submitted ahead
(before the step before it was read back, its ids copied on the device), and unless every batch
gave the tokens of the batch of one. Prints the table it checked.

    gpt2 bench --model DIR --backend webgpu --batch 1,8 --tokens 8 --json | \\
        python3 tools/check_gpu_step.py --model DIR
"""
import argparse
import json
import os
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="the model folder (its config.json)")
    args = ap.parse_args()
    report = json.load(sys.stdin)
    with open(os.path.join(args.model, "config.json")) as f:
        layers = json.load(f)["n_layer"]
    most = 6 * layers + 4
    steps = report["tokens"] - 1  # the first token comes with the prompt
    least_ahead = (steps - 1) / steps
    failed = []
    kernel = f", kernel {report['kernel']}" if report.get("kernel") else ""
    lanes = report.get("subgroup")
    kernel += f", subgroups of {lanes}" if lanes and lanes > 1 else ", no subgroups"
    print(f"{report['dtype']} weights{kernel}")
    print(f"{'batch':>6} {'tok/s':>10} {'submissions':>12} {'dispatches':>11} {'readback B':>11} {'ahead':>6}"
          f"  (≤ {most} dispatches, ≥ {least_ahead:.2f} ahead)")
    for run in report["runs"]:
        b = run["batch"]
        keys = ("submissionsPerStep", "dispatchesPerStep", "readbackBytesPerStep", "aheadPerStep")
        sub, disp, read, ahead = (run.get(k) for k in keys)
        print(f"{b:>6} {run['tokensPerSec']:>10.1f} {sub!s:>12} {disp!s:>11} {read!s:>11} {ahead!s:>6}")
        if sub is None:
            failed.append(f"batch {b}: no GPU counters (not on the GPU?)")
            continue
        if sub != 1:
            failed.append(f"batch {b}: {sub} submissions per step, not 1")
        if read > 8 * b:
            failed.append(f"batch {b}: {read} bytes read back per step, more than 8 per sequence")
        if disp > most:
            failed.append(f"batch {b}: {disp} dispatches per step, more than 6 per layer + 4 = {most}")
        if ahead is None or ahead < least_ahead - 1e-9:
            failed.append(f"batch {b}: {ahead} of the steps submitted ahead, not every one after the first")
        if not run["identical"]:
            failed.append(f"batch {b}: a sequence's tokens differ from the batch of one")
    for f in failed:
        print(f"check_gpu_step: {f}", file=sys.stderr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
