//! Replays the fuzzers' inputs on stable Rust: the seeds (tools/fuzz/seeds/) and every minimised
//! crash input found by `./build.sh fuzz` (tests/fixtures/fuzz/<target>/). Each must return
//! without a panic. The seeds must also be valid, so the fuzzers start from inputs that load.

mod common;
use common::*;
use gpt2_web::{fuzzing, BackendChoice, CpuDtype, Model, Tokenizer};
use std::path::Path;

fn inputs(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<_> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_file() && e.file_name() != "README.md")
        .map(|e| {
            (
                e.path().display().to_string(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn the_seeds_are_valid_inputs() {
    let seeds = root().join("tools/fuzz/seeds");
    let model = inputs(&seeds.join("load_model"));
    assert!(!model.is_empty());
    for (name, data) in model {
        let (config, weights) = fuzzing::two_files(&data).unwrap();
        let built = Model::from_bytes(
            config,
            "model.safetensors",
            weights.to_vec(),
            fuzzing::TOKENIZER_JSON,
            BackendChoice::Cpu,
            CpuDtype::Q8,
        );
        assert!(pollster::block_on(built).is_ok(), "{name} does not load");
    }
    let ggufs = inputs(&seeds.join("load_gguf"));
    assert!(!ggufs.is_empty());
    for (name, data) in ggufs {
        let dir = std::env::temp_dir().join(format!("gpt2-web-seed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("seed.gguf");
        std::fs::write(&path, &data).unwrap();
        let mut model = Model::load_dir(&path, BackendChoice::Cpu, CpuDtype::Q8)
            .unwrap_or_else(|e| panic!("{name} does not load: {e}"));
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(model.config.n_embd, 32);
        assert_eq!(model.tokenizer.encode("the the!").unwrap(), [6, 7, 8]);
        assert!(
            pollster::block_on(model.predict(&[6, 7], 0)).is_ok(),
            "{name}"
        );
    }
    for (name, data) in inputs(&seeds.join("load_tokenizer")) {
        let tok = Tokenizer::from_bytes(&data).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!tok.encode("the the!").unwrap().is_empty(), "{name}");
    }
}

#[test]
fn the_new_format_seeds_are_valid_inputs() {
    let seeds = root().join("tools/fuzz/seeds");
    let index = inputs(&seeds.join("shard_index"));
    assert!(!index.is_empty());
    for (name, data) in index {
        let (config, index) = fuzzing::two_files(&data).unwrap();
        let config = gpt2_web::Config::from_json(config).unwrap();
        let parsed = gpt2_web::weights::shards::Index::parse(index, &config);
        assert!(parsed.is_ok(), "{name}: {}", parsed.err().unwrap());
    }
    let pairs = inputs(&seeds.join("vocab_merges"));
    assert!(!pairs.is_empty());
    for (name, data) in pairs {
        let (vocab, merges) = fuzzing::two_files(&data).unwrap();
        let json = gpt2_web::tokenizer::json_from_vocab_merges(vocab, merges)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let tok = Tokenizer::from_bytes(&json).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!tok.encode("the the!").unwrap().is_empty(), "{name}");
    }
}

/// A fuzz target: its name, the folder of its seeds (some share another target's), its body.
type Target = (&'static str, &'static str, fn(&[u8]));

const TARGETS: [Target; 7] = [
    ("load_model", "load_model", fuzzing::load_model),
    ("load_gguf", "load_gguf", fuzzing::load_gguf),
    ("load_tokenizer", "load_tokenizer", fuzzing::load_tokenizer),
    ("weights_stream", "load_model", fuzzing::weights_stream),
    ("gguf_header", "load_gguf", fuzzing::gguf_header),
    ("shard_index", "shard_index", fuzzing::shard_index),
    ("vocab_merges", "vocab_merges", fuzzing::vocab_merges),
];

#[test]
fn every_fuzz_input_returns() {
    let mut n = 0;
    for (target, seeds, body) in TARGETS {
        let dirs = [
            root().join("tools/fuzz/seeds").join(seeds),
            fixtures().join("fuzz").join(target),
        ];
        for (name, data) in dirs.iter().flat_map(|d| inputs(d)) {
            eprintln!("{target} {name}");
            body(&data);
            n += 1;
        }
    }
    assert!(n >= TARGETS.len(), "no fuzz inputs found");
}
