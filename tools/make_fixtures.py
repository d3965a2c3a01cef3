#!/usr/bin/env python3
"""Reference fixtures for the Rust end-to-end tests, computed by Hugging Face transformers.

transformers' GPT2LMHeadModel is the reference implementation. Every model is loaded from the files
the Rust code loads, in float32 (also the float16-on-disk demo model), eval mode, eager attention.

Writes, under tests/fixtures/:
  tiny-random/{config.json, model.safetensors, tokenizer.json}
      A seeded random GPT-2 with awkward shapes that catch hard-coded assumptions: 2 layers, 3 heads
      of 32 (n_embd 96), n_positions 64, vocab 1999 (odd, not 50257), f32, random non-zero biases and
      LayerNorm parameters, and tensor names WITHOUT the `transformer.` prefix and without
      `lm_head.weight` (tied), like openai-community/gpt2. tokenizer.json is the real GPT-2 one.
  <model>.json for model in {tiny-random, gpt2-shakespeare}:
      {"model_dir": <path from the repo root>, "vocab_size": V,
       "cases": [{"prompt": text, "ids": prompt ids, "logits_file": "<model>-<i>.f32",
                  "greedy_ids": 24 new ids (greedy, KV cache, EOS ignored),
                  "greedy_text": decoded text of greedy_ids only}]}
  <model>-<i>.f32
      the last-position logits of prompt i, V raw little-endian float32 values.

For tiny-random the prompt ids are drawn directly (seeded, all < 1999; lengths 1, 7 and 40, the last
filling n_positions with its 24 new tokens) and "prompt" is their decoded text: tests must use "ids",
because re-encoding that text need not give the same ids.

  python3 tools/make_fixtures.py                        # both models
  python3 tools/make_fixtures.py --only tiny-random     # before the demo model is trained

Needs: pip install torch transformers tokenizers safetensors numpy; tools/make_tokenizer.py run first
(and tools/train_demo_model.py for gpt2-shakespeare).
"""

import argparse
import json
import os
import shutil

import torch
import transformers
from packaging import version
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer
from transformers import GPT2Config, GPT2LMHeadModel

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
GPT2_TOKENIZER = os.path.join(ROOT, "www", "models", "gpt2-shakespeare", "tokenizer.json")
N_NEW = 24
# transformers renamed from_pretrained's `torch_dtype` to `dtype` in 4.56.
DTYPE_KW = "dtype" if version.parse(transformers.__version__) >= version.parse("4.56") else "torch_dtype"

TINY_SEED = 2024
TINY_DIR = "tests/fixtures/tiny-random"
TINY_LENGTHS = [1, 7, 40]
SHAKESPEARE_DIR = "www/models/gpt2-shakespeare"
SHAKESPEARE_PROMPTS = [
    "ROMEO:",
    "JULIET:\nO gentle night, thou mother of sweet dreams, come hither and lend thy cloak to me,\n"
    "for I would hide",
    "Café — “quoted” ☃",
]


def load_reference(model_dir):
    model = GPT2LMHeadModel.from_pretrained(os.path.join(ROOT, model_dir), attn_implementation="eager",
                                            **{DTYPE_KW: torch.float32})
    assert next(model.parameters()).dtype == torch.float32
    return model.eval()


@torch.no_grad()
def greedy(model, ids):
    """24 greedy new tokens with the KV cache; EOS ignored. Also returns the smallest top-1/top-2 gap."""
    x = torch.tensor([ids])
    cfg = dict(do_sample=False, max_new_tokens=N_NEW, min_new_tokens=N_NEW, num_beams=1,
               pad_token_id=0, eos_token_id=None, bos_token_id=None, temperature=None, top_k=None,
               top_p=None, repetition_penalty=None)
    out = model.generate(x, attention_mask=torch.ones_like(x), use_cache=True, output_logits=True,
                         return_dict_in_generate=True, **cfg)
    new = out.sequences[0, len(ids):].tolist()
    assert len(new) == N_NEW, len(new)
    # The KV-cache path must equal plain argmax over a full recompute at every step (this also
    # proves that no logits processor, e.g. EOS suppression by min_new_tokens, changed a choice).
    seq = list(ids)
    for _ in range(N_NEW):
        seq.append(int(model(torch.tensor([seq])).logits[0, -1].argmax()))
    assert seq[len(ids):] == new, "generate (KV cache) differs from argmax over full recomputes"
    gap = min((s[0].topk(2).values[0] - s[0].topk(2).values[1]).item() for s in out.logits)
    return new, gap


@torch.no_grad()
def write_fixture(name, model_dir, prompts):
    """prompts: [(text, ids)]. Writes <name>.json and <name>-<i>.f32 beside it."""
    model = load_reference(model_dir)
    tok = Tokenizer.from_file(os.path.join(ROOT, model_dir, "tokenizer.json"))
    vocab = model.config.vocab_size
    cases = []
    for i, (text, ids) in enumerate(prompts):
        assert 0 < len(ids) and len(ids) + N_NEW <= model.config.n_positions and max(ids) < vocab
        logits = model(torch.tensor([ids])).logits[0, -1]  # (V,)
        assert logits.shape == (vocab,) and torch.isfinite(logits).all()
        logits_file = f"{name}-{i}.f32"
        logits.numpy().astype("<f4").tofile(os.path.join(FIXTURES, logits_file))
        new, gap = greedy(model, ids)
        cases.append(dict(prompt=text, ids=ids, logits_file=logits_file, greedy_ids=new,
                          greedy_text=tok.decode(new, skip_special_tokens=False)))
        print(f"{name} case {i}: {len(ids)} prompt ids, logits std {logits.std():.3f}, "
              f"smallest greedy top-1/top-2 gap {gap:.4f}, text {cases[-1]['greedy_text']!r}")
        if gap < 1e-3:
            print(f"  warning: a greedy step is nearly a tie ({gap:.2e}); exact-match tests may be fragile")
    # One case per line: small diffs, still plain JSON.
    with open(os.path.join(FIXTURES, f"{name}.json"), "w", encoding="utf-8") as f:
        f.write(f'{{"model_dir": {json.dumps(model_dir)}, "vocab_size": {vocab}, "cases": [\n')
        f.write(",\n".join(json.dumps(c, ensure_ascii=False) for c in cases))
        f.write("\n]}\n")
    print(f"wrote tests/fixtures/{name}.json")


# ------------------------------------------------------------------------------------- tiny-random

def make_tiny_model():
    torch.manual_seed(TINY_SEED)
    config = GPT2Config(vocab_size=1999, n_positions=64, n_embd=96, n_layer=2, n_head=3, n_inner=None,
                        activation_function="gelu_new", layer_norm_epsilon=1e-5, initializer_range=0.2,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=None,
                        eos_token_id=None, tie_word_embeddings=True)
    model = GPT2LMHeadModel(config).eval()
    # The default init zeroes biases and sets LayerNorm to identity; make every parameter matter so
    # a bias or LayerNorm loaded wrongly changes the logits.
    g = torch.Generator().manual_seed(TINY_SEED)
    with torch.no_grad():
        for name, p in model.transformer.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            if name.endswith("weight") and p.dim() >= 2:
                p.copy_(0.2 * noise)
            elif ".ln_" in name or name.startswith("ln_f"):
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.1 * noise)
            else:  # linear biases
                p.copy_(0.1 * noise)
    return model


def save_tiny(model):
    out = os.path.join(ROOT, TINY_DIR)
    os.makedirs(out, exist_ok=True)
    # openai-community/gpt2 naming: no `transformer.` prefix, no lm_head (tied), no attention buffers.
    tensors = {k: v.detach().contiguous().clone() for k, v in model.transformer.state_dict().items()
               if not k.endswith((".attn.bias", ".attn.masked_bias"))}
    assert "wte.weight" in tensors and "h.0.attn.c_attn.weight" in tensors and "lm_head.weight" not in tensors
    assert tensors["h.0.attn.c_attn.weight"].shape == (96, 3 * 96)  # Conv1D: (in, out)
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    model.config.architectures = ["GPT2LMHeadModel"]
    model.config.save_pretrained(out)
    shutil.copy(GPT2_TOKENIZER, os.path.join(out, "tokenizer.json"))
    # transformers must load the prefix-less file into exactly this model.
    reloaded = load_reference(TINY_DIR)
    assert set(load_file(os.path.join(out, "model.safetensors"))) == set(tensors)
    sd, rsd = model.state_dict(), reloaded.state_dict()
    assert sd.keys() == rsd.keys() and all(torch.equal(sd[k], rsd[k]) for k in sd)
    print(f"wrote {TINY_DIR}: {len(tensors)} tensors, {sum(t.numel() for t in tensors.values())} parameters")


def tiny_prompts():
    tok = Tokenizer.from_file(GPT2_TOKENIZER)
    # Ids whose token is valid UTF-8 on its own, so the stored prompt text is exact (not lossy).
    ok = [i for i in range(1999) if "\ufffd" not in tok.decode([i])]
    g = torch.Generator().manual_seed(TINY_SEED + 1)
    prompts = []
    for n in TINY_LENGTHS:
        ids = [ok[j] for j in torch.randint(0, len(ok), (n,), generator=g).tolist()]
        prompts.append((tok.decode(ids), ids))
    return prompts


def shakespeare_prompts():
    tok = Tokenizer.from_file(os.path.join(ROOT, SHAKESPEARE_DIR, "tokenizer.json"))
    return [(text, tok.encode(text).ids) for text in SHAKESPEARE_PROMPTS]


# Beam search settings the engine must reproduce. eos "greedy-3": the case's fourth greedy token
# is declared end-of-text, so beams end early and the finishing rules (length penalty, early
# stopping) decide; None: the model's own (tiny-random has none).
BEAM_SETTINGS = [
    dict(num_beams=2, length_penalty=1.0, early_stopping=False, eos=None),
    dict(num_beams=4, length_penalty=1.0, early_stopping=False, eos="greedy-3"),
    dict(num_beams=3, length_penalty=0.5, early_stopping=True, eos="greedy-3"),
    dict(num_beams=5, length_penalty=2.0, early_stopping="never", eos="greedy-3"),
    dict(num_beams=8, length_penalty=1.0, early_stopping=False, eos=None),
]
BEAM_NEW = 16


@torch.no_grad()
def write_beam_fixture(name):
    """<name>-beams.json: transformers' generate(num_beams=...) on every case of <name>.json."""
    with open(os.path.join(FIXTURES, f"{name}.json"), encoding="utf-8") as f:
        fixture = json.load(f)
    model = load_reference(fixture["model_dir"])
    runs = []
    for i, case in enumerate(fixture["cases"]):
        ids = case["ids"]
        x = torch.tensor([ids])
        for setting in BEAM_SETTINGS:
            eos = case["greedy_ids"][3] if setting["eos"] == "greedy-3" else model.config.eos_token_id
            n = setting["num_beams"]
            out = model.generate(
                x, attention_mask=torch.ones_like(x), use_cache=True, do_sample=False, num_beams=n,
                num_return_sequences=n, length_penalty=setting["length_penalty"],
                early_stopping=setting["early_stopping"], max_new_tokens=BEAM_NEW, eos_token_id=eos,
                pad_token_id=0, bos_token_id=None, temperature=None, top_k=None, top_p=None,
                repetition_penalty=None, return_dict_in_generate=True, output_scores=True,
                output_logits=True)
            beams = []
            for j in range(n):
                length = int((out.beam_indices[j] >= 0).sum())
                if out.sequences_scores[j] < -1e8:
                    continue  # a slot no hypothesis filled
                beams.append(dict(ids=out.sequences[j, len(ids):len(ids) + length].tolist(),
                                  score=round(float(out.sequences_scores[j]), 6)))
            scores = [b["score"] for b in beams]
            gap = min((a - b for a, b in zip(scores, scores[1:])), default=float("inf"))
            runs.append(dict(case=i, num_beams=n, length_penalty=setting["length_penalty"],
                             early_stopping=setting["early_stopping"], eos_token_id=eos,
                             max_new_tokens=BEAM_NEW, beams=beams))
            print(f"{name} case {i} beams {n}: {len(beams)} finished, best {len(beams[0]['ids'])} tokens "
                  f"score {scores[0]:.4f}, smallest score gap {gap:.2e}")
    with open(os.path.join(FIXTURES, f"{name}-beams.json"), "w", encoding="utf-8") as f:
        f.write(f'{{"transformers": "{transformers.__version__}", "runs": [\n')
        f.write(",\n".join(json.dumps(r) for r in runs))
        f.write("\n]}\n")
    print(f"wrote tests/fixtures/{name}-beams.json")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", choices=["tiny-random", "gpt2-shakespeare"], help="make one model's fixtures")
    p.add_argument("--beams-only", action="store_true",
                   help="only <model>-beams.json, from the models and cases already there")
    args = p.parse_args()
    torch.set_num_threads(2)
    os.makedirs(FIXTURES, exist_ok=True)
    if args.beams_only:
        for name in ["tiny-random", "gpt2-shakespeare"]:
            if args.only in (None, name):
                write_beam_fixture(name)
        return
    if args.only in (None, "tiny-random"):
        save_tiny(make_tiny_model())
        write_fixture("tiny-random", TINY_DIR, tiny_prompts())
        write_beam_fixture("tiny-random")
    if args.only in (None, "gpt2-shakespeare"):
        if not os.path.exists(os.path.join(ROOT, SHAKESPEARE_DIR, "model.safetensors")):
            raise SystemExit(f"{SHAKESPEARE_DIR}/model.safetensors missing: run tools/train_demo_model.py first")
        write_fixture("gpt2-shakespeare", SHAKESPEARE_DIR, shakespeare_prompts())
        write_beam_fixture("gpt2-shakespeare")


if __name__ == "__main__":
    main()
