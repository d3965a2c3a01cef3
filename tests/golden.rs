//! Seeded sampled sequences pinned as fixtures (`tests/fixtures/golden.json`): the order in which
//! the sampler draws its random numbers is a contract — every seeded output a user saved depends
//! on it — so reordering one draw, or changing a filter's rounding, must fail here, loudly, with
//! the run and the first token that moved. Both fixture models, f32 and q8, every sampling filter,
//! the repetition penalty, no KV cache, and speculative decoding (whose sampled path draws its own
//! way). Regenerate, after a change that is meant to move them, with
//!
//!     GPT2_BLESS=1 cargo test --test golden
//!
//! and say why in the commit.

mod common;
use common::*;
use gpt2_web::{BackendChoice, CpuDtype, Draft, GenerateParams, Model};
use serde::{Deserialize, Serialize};

const FILE: &str = "tests/fixtures/golden.json";
const MAX_TOKENS: usize = 24;

#[derive(Serialize, Deserialize, PartialEq, Debug)]
struct Golden {
    regenerate: String,
    runs: Vec<GoldenRun>,
}

#[derive(Serialize, Deserialize, PartialEq, Debug)]
struct GoldenRun {
    name: String,
    prompt_ids: Vec<u32>,
    ids: Vec<u32>,
}

/// The settings each model and dtype runs: a name, the sampler, the draft, the KV cache.
fn settings() -> Vec<(&'static str, GenerateParams, Draft, bool)> {
    let s = |temperature, top_k, top_p, min_p, repetition_penalty, seed| GenerateParams {
        temperature,
        top_k,
        top_p,
        min_p,
        repetition_penalty,
        seed,
        ..Default::default()
    };
    vec![
        ("t1.0 seed1", s(1.0, 0, 1.0, 0.0, 1.0, 1), Draft::None, true),
        (
            "t0.8 top_k40 seed2",
            s(0.8, 40, 1.0, 0.0, 1.0, 2),
            Draft::None,
            true,
        ),
        (
            "t1.2 top_p0.9 seed3",
            s(1.2, 0, 0.9, 0.0, 1.0, 3),
            Draft::None,
            true,
        ),
        (
            "t0.7 min_p0.05 seed4",
            s(0.7, 0, 1.0, 0.05, 1.0, 4),
            Draft::None,
            true,
        ),
        (
            "t1.0 top_k50 top_p0.95 rep1.3 seed5",
            s(1.0, 50, 0.95, 0.0, 1.3, 5),
            Draft::None,
            true,
        ),
        (
            "greedy rep1.2",
            s(0.0, 0, 1.0, 0.0, 1.2, 0),
            Draft::None,
            true,
        ),
        (
            "t0.9 seed6 no kv cache",
            s(0.9, 0, 1.0, 0.0, 1.0, 6),
            Draft::None,
            false,
        ),
        (
            "t0.9 top_k20 seed7 prompt-lookup",
            s(0.9, 20, 1.0, 0.0, 1.0, 7),
            Draft::PromptLookup,
            true,
        ),
        (
            "t1.5 seed8 prompt-lookup",
            s(1.5, 0, 1.0, 0.0, 1.0, 8),
            Draft::PromptLookup,
            true,
        ),
    ]
}

fn compute() -> Vec<GoldenRun> {
    let mut runs = Vec::new();
    for (name, dir) in [("tiny-random", TINY), ("gpt2-shakespeare", DEMO)] {
        let prompt_ids = fixture(name).cases[0].ids.clone();
        for (dtype, dname) in [(CpuDtype::F32, "f32"), (CpuDtype::Q8, "q8")] {
            let mut model = Model::load_dir(&root().join(dir), BackendChoice::Cpu, dtype)
                .unwrap_or_else(|e| panic!("{dir}: {e}"));
            for (what, sampling, draft, kv_cache) in settings() {
                let params = GenerateParams {
                    max_tokens: MAX_TOKENS,
                    ignore_eos: true,
                    draft,
                    kv_cache,
                    ..sampling
                };
                let (r, _) = run_ids(&mut model, &prompt_ids, params);
                assert_eq!(r.tokens.len(), MAX_TOKENS, "{name} {dname} {what}");
                runs.push(GoldenRun {
                    name: format!("{name} {dname} {what}"),
                    prompt_ids: prompt_ids.clone(),
                    ids: r.tokens,
                });
            }
        }
    }
    runs
}

#[test]
fn seeded_sequences_match_the_pinned_fixtures() {
    let runs = compute();
    let path = root().join(FILE);
    if std::env::var_os("GPT2_BLESS").is_some() {
        let golden = Golden {
            regenerate: "GPT2_BLESS=1 cargo test --test golden".into(),
            runs,
        };
        let text = serde_json::to_string_pretty(&golden).unwrap() + "\n";
        std::fs::write(&path, text).unwrap();
        eprintln!("wrote {}", path.display());
        return;
    }
    let bytes = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (make it with GPT2_BLESS=1 cargo test --test golden)",
            path.display()
        )
    });
    let golden: Golden = serde_json::from_slice(&bytes).unwrap();
    let names = |r: &[GoldenRun]| r.iter().map(|r| r.name.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(&runs),
        names(&golden.runs),
        "the runs are not the pinned ones: regenerate"
    );
    let mut moved = Vec::new();
    for (got, want) in runs.iter().zip(&golden.runs) {
        assert_eq!(
            got.prompt_ids, want.prompt_ids,
            "{}: the prompt moved",
            got.name
        );
        if let Some(i) = (0..got.ids.len()).find(|&i| got.ids.get(i) != want.ids.get(i)) {
            moved.push(format!(
                "{}: token {i} is {} where the fixture has {} (got {:?}, pinned {:?})",
                got.name, got.ids[i], want.ids[i], got.ids, want.ids
            ));
        }
    }
    assert!(
        moved.is_empty(),
        "seeded outputs changed (the sampler's order of draws or its arithmetic moved):\n{}",
        moved.join("\n")
    );
}

/// The fixture's sequences are not trivial: sampled runs differ from greedy and from each other,
/// so a sampler that ignored its seed or its filters could not have written them.
#[test]
fn the_pinned_runs_differ_from_each_other() {
    let bytes = std::fs::read(root().join(FILE)).expect("golden.json");
    let golden: Golden = serde_json::from_slice(&bytes).unwrap();
    for model in ["tiny-random f32", "gpt2-shakespeare q8"] {
        let runs: Vec<_> = golden
            .runs
            .iter()
            .filter(|r| r.name.starts_with(model) && !r.name.contains("greedy"))
            .collect();
        assert!(runs.len() >= 5, "{model}");
        for (i, a) in runs.iter().enumerate() {
            for b in &runs[i + 1..] {
                assert_ne!(a.ids, b.ids, "{} and {} are the same", a.name, b.name);
            }
        }
    }
}
