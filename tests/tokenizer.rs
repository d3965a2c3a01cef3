//! The committed tokenizer.json against OpenAI's own BPE (tiktoken's r50k_base ids).

mod common;
use common::*;
use gpt2_web::Tokenizer;
use serde::Deserialize;

#[derive(Deserialize)]
struct TokCase {
    text: String,
    ids: Vec<u32>,
}

fn tokenizer(dir: &str) -> Tokenizer {
    Tokenizer::from_bytes(&std::fs::read(root().join(dir).join("tokenizer.json")).unwrap()).unwrap()
}

#[test]
fn tokenizer_matches_tiktoken_r50k_base() {
    let cases: Vec<TokCase> =
        serde_json::from_slice(&std::fs::read(fixtures().join("tokenizer_cases.json")).unwrap())
            .unwrap();
    assert!(cases.len() >= 30, "the corpus has {} cases", cases.len());
    for dir in [DEMO, TINY] {
        let tok = tokenizer(dir);
        assert_eq!(tok.vocab_size(), 50257);
        for c in &cases {
            assert_eq!(
                tok.encode(&c.text).unwrap(),
                c.ids,
                "{dir}: ids of {:?}",
                c.text
            );
            assert_eq!(tok.decode(&c.ids), c.text, "{dir}: decode of {:?}", c.text);
        }
    }
}

#[test]
fn endoftext_is_one_special_token() {
    let tok = tokenizer(DEMO);
    assert_eq!(tok.encode("<|endoftext|>").unwrap(), [50256]);
    assert_eq!(tok.token_bytes(50256), b"<|endoftext|>");
}

#[test]
fn corrupt_tokenizer_json_is_an_error() {
    let e = Tokenizer::from_bytes(b"{\"model\": 3}")
        .err()
        .unwrap()
        .to_string();
    assert!(e.starts_with("tokenizer.json"), "{e}");
}

/// What the tokenizers crate panics on (a panic aborts the wasm instance) is refused first:
/// malformed JSON, and the SentencePiece Precompiled normalizer with a char map that does not parse.
#[test]
fn inputs_the_tokenizers_crate_panics_on_are_errors() {
    let seed = std::fs::read(root().join("tools/fuzz/seeds/load_tokenizer/tiny.json")).unwrap();
    let mut json: serde_json::Value = serde_json::from_slice(&seed).unwrap();
    json["normalizer"] = serde_json::json!({"type": "Sequence", "normalizers": [
        {"type": "Precompiled", "precompiled_charsmap": "bm90IGEgY2hhciBtYXA="}
    ]});
    let e = Tokenizer::from_bytes(&serde_json::to_vec(&json).unwrap())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("Precompiled"), "{e}");
    let mut broken = String::from_utf8(seed).unwrap();
    broken = broken.replace("\"decoder\": {", "\"decoder\": {3: 4, ");
    let e = Tokenizer::from_bytes(broken.as_bytes())
        .err()
        .unwrap()
        .to_string();
    assert!(e.starts_with("tokenizer.json: not valid JSON"), "{e}");
}
