#!/usr/bin/env python3
"""Multi-token prediction heads (Medusa-1, Cai et al. 2024) for a frozen GPT-2, trained on the CPU
with numpy alone: the draft that src/mtp/ makes for speculative decoding.

    python3 tools/train_mtp_heads.py --model DIR --out DIR [--heads 3] [--draft-vocab 2048]
        [--steps N | --minutes M] [--text FILE] [--seed 1234]

Head i (0..K-1), on h, a position t's final hidden state after ln_f (what the tied lm_head
multiplies), guesses the token at t+2+i (the model itself guesses t+1):
    z = W_i·h + b_i,  h'_i = h + silu(z),  logits_i = E·h'_i,  draft token = draft_ids[argmax logits_i]
E is the draft embedding, the rows of the model's wte for a draft vocabulary of N ids (FR-Spec,
2025: the N most frequent ids of the training text, most frequent first). Over the draft vocabulary
only because on the demo model 80% of a step is the 50257-wide output product, so one head over the
whole vocabulary would cost about a step; with N = 2048 it costs about 4% of one. W_i and b_i start
at zero, so each head starts as a copy of the model's next-token guess; the model and E are frozen.

Objective (self-distillation): head i's target at t is the model's own greedy token at t+1+i
(argmax of its logits there, given the true text), over windows of n_positions tokens; a target
outside the draft vocabulary is left out of the loss. Cross-entropy over the draft vocabulary,
Adam (lr 1e-3, constant: a --minutes run is then reproduced exactly by --steps with the step count
it printed, which a schedule over wall-clock time could not give), minibatches of 512 positions. The model runs once per chunk of 8,192 text positions (h and targets kept), and each
chunk is gone over twice, so a training step costs only the heads.

Text: the demo model (www/models/gpt2-shakespeare) trains on tools/demo_data.py's training split and
is measured on its held-out split; --text FILE takes a UTF-8 file (its last 5% held out); with
neither the model writes its own text (4,096 tokens sampled at temperature 1 from end-of-text, the
last eighth held out). Tokenizing uses the release CLI (`gpt2 tokenize`). Reported: each head's
held-out agreement, the share of positions where its draft token is the model's greedy token at
t+1+i (every position with a target counts; a target outside the draft vocabulary is a miss),
measured with the weights as stored, and the share of those targets inside the draft vocabulary.

Writes OUT/mtp_heads.safetensors (--out may be --model):
    mtp.{i}.weight       F16 (d, d), (out, in)
    mtp.{i}.bias         F32 (d)
    mtp.draft_ids        I32 (N), most frequent first
    mtp.draft_embedding  F16 (N, d) = wte[draft_ids], so the engine needs nothing else
    __metadata__ (strings): format "gpt2-web-mtp", version "1", heads, n_embd, draft_vocab,
    agreement (JSON list, per head), draft_coverage, steps, tokens (training text positions the
    heads trained on), source. tools/make_gguf.py --mtp copies them into a GGUF file.

--minutes is the training loop's wall-clock budget (the text and the held-out pass come before it:
on the demo model a minute on an idle 2-core machine, 5 on a busy one); with neither budget,
1,000 steps. Deterministic given --seed (and the machine's BLAS). Needs numpy and safetensors;
no torch.
"""
import argparse
import json
import math
import os
import pathlib
import sys
import time

import numpy as np
from safetensors.numpy import load_file, save_file

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

BATCH = 512          # positions per step
CHUNK = 8192         # text positions per run of the frozen model
PASSES = 2           # times each chunk is gone over
LR, BETAS, EPS = 1e-3, (0.9, 0.999), 1e-8
GEN_TOKENS = 4096    # text the model writes itself when there is no other
VAL_FRAC = 0.05


# ---- the frozen model: transformers' modeling_gpt2, float32 (on tests/fixtures' prompts its logits
# are transformers' within 1.1e-6 of the largest, its greedy tokens the same, and the CLI's too)

def load_model(model):
    config = json.load(open(os.path.join(model, "config.json")))
    p = {k.removeprefix("transformer."): v.astype(np.float32)
         for k, v in load_file(os.path.join(model, "model.safetensors")).items()
         if not k.startswith("lm_head") and not k.endswith((".attn.bias", ".masked_bias"))}
    return config, p


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def gelu_new(x):  # tanh GELU
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def hidden(config, p, ids):
    """The final hidden states, after ln_f, of token ids (B, T): (B, T, C)."""
    B, T = ids.shape
    C, NH, eps = config["n_embd"], config["n_head"], config.get("layer_norm_epsilon", 1e-5)
    HS = C // NH
    x = p["wte.weight"][ids] + p["wpe.weight"][:T]                      # (B, T, C)
    mask = np.triu(np.full((T, T), -np.inf, np.float32), 1)
    for l in range(config["n_layer"]):
        w = lambda name: p[f"h.{l}.{name}"]
        a = layer_norm(x, w("ln_1.weight"), w("ln_1.bias"), eps)
        qkv = a @ w("attn.c_attn.weight") + w("attn.c_attn.bias")       # (B, T, 3C)
        q, k, v = (qkv[..., i * C:(i + 1) * C].reshape(B, T, NH, HS).transpose(0, 2, 1, 3) for i in range(3))
        att = q @ k.transpose(0, 1, 3, 2) / np.float32(math.sqrt(HS)) + mask  # (B, NH, T, T)
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
        x = x + y @ w("attn.c_proj.weight") + w("attn.c_proj.bias")
        m = layer_norm(x, w("ln_2.weight"), w("ln_2.bias"), eps)
        x = x + gelu_new(m @ w("mlp.c_fc.weight") + w("mlp.c_fc.bias")) @ w("mlp.c_proj.weight") + w("mlp.c_proj.bias")
    return layer_norm(x, p["ln_f.weight"], p["ln_f.bias"], eps)


def greedy(p, h):
    """The model's greedy tokens from hidden states h (n, C), in row blocks (the logits are n x V)."""
    return np.concatenate([(h[i:i + 1024] @ p["wte.weight"].T).argmax(-1) for i in range(0, len(h), 1024)])


def end_of_text(config):
    eos = config.get("eos_token_id")
    return eos if eos is not None else min(50256, config["vocab_size"] - 1)


def sample_text(config, p, n_seq, rng):
    """n_seq sequences of n_positions tokens, each end-of-text then sampled at temperature 1: (n_seq, T)."""
    ids = np.full((n_seq, 1), end_of_text(config))
    for _ in range(config["n_positions"] - 1):
        logits = hidden(config, p, ids)[:, -1] @ p["wte.weight"].T       # (n_seq, V), no KV cache
        probs = np.exp(logits - logits.max(-1, keepdims=True))
        cdf = np.cumsum(probs / probs.sum(-1, keepdims=True), -1)
        nxt = np.minimum((cdf < rng.random((n_seq, 1))).sum(-1), cdf.shape[1] - 1)
        ids = np.concatenate([ids, nxt[:, None]], 1)
    return ids


def text(a, config, p, rng):
    """(train ids, held-out ids, source) as flat int arrays."""
    cli = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/gpt2-web/target")),
                       "release/gpt2")
    if a.text:
        import demo_data
        ids = demo_data.CliTokenizer(cli, a.model).encode(open(a.text, encoding="utf-8").read())
        cut = int(len(ids) * (1 - VAL_FRAC))
        return np.array(ids[:cut]), np.array(ids[cut:]), f"{os.path.basename(a.text)}, its first 95% of tokens"
    if os.path.basename(os.path.normpath(a.model)) == "gpt2-shakespeare":
        import demo_data
        train, val, info = demo_data.split(demo_data.CliTokenizer(cli, a.model))
        return np.array(train), np.array(val), f"the demo model's training split ({info['source']}; tools/demo_data.py)"
    T = config["n_positions"]
    n_seq = max(2, GEN_TOKENS // T)
    n_val = max(1, n_seq // 8)
    ids = sample_text(config, p, n_seq, rng)
    return (ids[:-n_val].reshape(-1), ids[-n_val:].reshape(-1),
            f"{(n_seq - n_val) * T} tokens the model sampled itself (temperature 1, from end-of-text, seed {a.seed})")


def windows(ids, T):
    """Consecutive windows of T tokens, the last one shorter: a list of int arrays."""
    return [ids[i:i + T] for i in range(0, len(ids), T)]


def features(config, p, wins, K):
    """h (n, C) of every position of the windows and the model's greedy token at t+1+i for each head
    i, (K, n) with -1 where t+1+i is past the window's end."""
    hs, targets = [], []
    for j in range(0, len(wins), 16):
        group = wins[j:j + 16]
        for same in ([np.stack(group)] if len({len(w) for w in group}) == 1 else [w[None] for w in group]):
            h = hidden(config, p, same)                                   # (B, T, C)
            g = greedy(p, h.reshape(-1, h.shape[-1])).reshape(same.shape)  # (B, T)
            B, T = same.shape
            tgt = np.full((K, B, T), -1)
            for i in range(K):
                tgt[i, :, :T - 1 - i] = g[:, 1 + i:]
            hs.append(h.reshape(-1, h.shape[-1]))
            targets.append(tgt.reshape(K, -1))
    return np.concatenate(hs), np.concatenate(targets, 1)


# ---- the heads

def heads(W, b, E, h):
    """z (K, n, C), silu's sigmoid, logits (K, n, N) of every head on h (n, C)."""
    z = h @ W.transpose(0, 2, 1) + b[:, None]
    with np.errstate(over="ignore"):
        s = 1 / (1 + np.exp(-z))
    return z, s, (h + z * s) @ E.T


def loss_and_grads(W, b, E, h, tgt):
    """Mean cross-entropy of each head over its targets tgt (K, n), draft indices (-1: left out),
    and the gradients of their sum with respect to W and b."""
    z, s, logits = heads(W, b, E, h)
    logits -= logits.max(-1, keepdims=True)
    probs = np.exp(logits)
    probs /= probs.sum(-1, keepdims=True)
    keep = tgt >= 0
    count = np.maximum(keep.sum(-1, keepdims=True), 1)                   # (K, 1)
    k_i, n_i = np.nonzero(keep)
    loss = np.zeros(len(W))
    np.add.at(loss, k_i, -np.log(probs[k_i, n_i, tgt[k_i, n_i]] + 1e-30))
    dlogits = probs * (keep / count)[..., None]                          # (K, n, N)
    dlogits[k_i, n_i, tgt[k_i, n_i]] -= 1 / count[k_i, 0]
    dz = (dlogits @ E) * s * (1 + z * (1 - s))                           # d silu(z)/dz
    return loss / count[:, 0], dz.transpose(0, 2, 1) @ h, dz.sum(1)


def agreement(W, b, E, draft_ids, h, targets):
    """Per head: the share of positions with a target where draft_ids[argmax] is that target."""
    hits = np.zeros(len(W))
    for j in range(0, len(h), 4096):
        guess = draft_ids[heads(W, b, E, h[j:j + 4096])[2].argmax(-1)]   # (K, n)
        hits += (guess == targets[:, j:j + 4096]).sum(-1)
    return hits / (targets >= 0).sum(-1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--heads", type=int, default=3)
    ap.add_argument("--draft-vocab", type=int, default=2048)
    budget = ap.add_mutually_exclusive_group()
    budget.add_argument("--steps", type=int)
    budget.add_argument("--minutes", type=float)
    ap.add_argument("--text")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--eval-every", type=int, default=1000, help="held-out agreement every N steps (0: only before and after training)")
    a = ap.parse_args()
    steps = a.steps if a.steps is not None else (None if a.minutes else 1000)
    start = time.time()
    rng = np.random.default_rng(a.seed)
    config, p = load_model(a.model)
    K, C, V, T = a.heads, config["n_embd"], config["vocab_size"], config["n_positions"]

    train, val, source = text(a, config, p, rng)
    # FR-Spec's draft vocabulary: the most frequent ids of the training text (ties: lower id first).
    draft_ids = np.argsort(-np.bincount(train, minlength=V), kind="stable")[:a.draft_vocab].astype(np.int32)
    N = len(draft_ids)
    E = p["wte.weight"][draft_ids].astype(np.float16).astype(np.float32)  # (N, C), as stored
    to_draft = np.full(V, -1)
    to_draft[draft_ids] = np.arange(N)
    print(f"text: {len(train):,} training and {len(val):,} held-out tokens ({source}); "
          f"draft vocabulary {N} ids ({time.time() - start:.0f} s)", flush=True)

    val_h, val_tgt = features(config, p, windows(val, T), K)
    coverage = (to_draft[val_tgt[val_tgt >= 0]] >= 0).mean()
    print(f"held-out: {val_h.shape[0]:,} positions, {100 * coverage:.1f}% of the heads' targets in the "
          f"draft vocabulary ({time.time() - start:.0f} s)", flush=True)

    W, b = np.zeros((K, C, C), np.float32), np.zeros((K, C), np.float32)  # (K, out, in), (K, out)
    m = [np.zeros_like(W), np.zeros_like(b)]
    v = [np.zeros_like(W), np.zeros_like(b)]
    report = lambda step: print(f"step {step}: held-out agreement " + ", ".join(
        f"head {i} {100 * x:.1f}%" for i, x in enumerate(agreement(W, b, E, draft_ids, val_h, val_tgt)))
        + f" ({time.time() - start:.0f} s)", flush=True)
    report(0)

    train_wins = windows(train, T)
    if len(train_wins[-1]) < T:
        train_wins.pop()  # a short tail window would only shorten every chunk's batch
    per_chunk = max(1, CHUNK // T)
    order, at, step, tokens, t0 = [], 0, 0, 0, time.time()
    done = lambda: (step >= steps) if steps is not None else (time.time() - t0 >= 60 * a.minutes)
    while not done():
        if at >= len(order):
            order, at = rng.permutation(len(train_wins)), 0
        h, tgt = features(config, p, [train_wins[j] for j in order[at:at + per_chunk]], K)
        at += per_chunk
        tgt = np.where(tgt >= 0, to_draft[np.maximum(tgt, 0)], -1)       # ids → draft indices
        losses = []
        for _ in range(PASSES):
            perm = rng.permutation(len(h))
            for j in range(0, len(h), BATCH):
                if done():
                    break
                rows = perm[j:j + BATCH]
                loss, *grads = loss_and_grads(W, b, E, h[rows], tgt[:, rows])
                step += 1
                for x, g, mi, vi in zip([W, b], grads, m, v):           # Adam, bias-corrected
                    mi *= BETAS[0]
                    mi += (1 - BETAS[0]) * g
                    vi *= BETAS[1]
                    vi += (1 - BETAS[1]) * g * g
                    x -= LR * (mi / (1 - BETAS[0] ** step)) / (np.sqrt(vi / (1 - BETAS[1] ** step)) + EPS)
                losses.append(loss)
                if a.eval_every and step % a.eval_every == 0:
                    report(step)
        if losses:  # (a --minutes budget can end during a chunk's forward: that chunk is not counted)
            tokens += len(h)
            print(f"step {step}, {tokens:,} tokens, {(time.time() - t0) / 60:.1f} min: training loss "
                  + " ".join(f"{x:.3f}" for x in np.mean(losses, 0)), flush=True)
    minutes = (time.time() - t0) / 60

    W = W.astype(np.float16).astype(np.float32)  # measured as stored
    agree = agreement(W, b, E, draft_ids, val_h, val_tgt)
    for i, x in enumerate(agree):
        print(f"head {i} (token t+{i + 2}): held-out agreement {100 * x:.2f}%")
    print(f"draft vocabulary coverage of the held-out targets: {100 * coverage:.2f}%")
    print(f"{step} steps, {tokens:,} training tokens, {minutes:.1f} min of training")

    tensors = {f"mtp.{i}.weight": W[i].astype(np.float16) for i in range(K)}
    tensors.update({f"mtp.{i}.bias": b[i].astype(np.float32) for i in range(K)})
    tensors["mtp.draft_ids"] = draft_ids
    tensors["mtp.draft_embedding"] = E.astype(np.float16)
    meta = dict(format="gpt2-web-mtp", version="1", heads=str(K), n_embd=str(C), draft_vocab=str(N),
                agreement=json.dumps([round(float(x), 4) for x in agree]), draft_coverage=f"{coverage:.4f}",
                steps=str(step), tokens=str(tokens), source=source)
    os.makedirs(a.out, exist_ok=True)
    out = os.path.join(a.out, "mtp_heads.safetensors")
    save_file(tensors, out, metadata=meta)
    print(f"{out}: {os.path.getsize(out) / 1e6:.2f} MB ({K} heads, draft vocabulary {N})")


if __name__ == "__main__":
    main()
