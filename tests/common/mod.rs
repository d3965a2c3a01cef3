//! Shared helpers for the integration tests: paths, fixtures, model loading.
#![allow(dead_code)]

use gpt2_web::scheduler::{self, Prompt};
use gpt2_web::{
    BackendChoice, CpuDtype, EarlyStopping, GenerateParams, GenerationResult, Model, TokenEvent,
};
use serde::Deserialize;
use std::path::{Path, PathBuf};

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn fixtures() -> PathBuf {
    root().join("tests/fixtures")
}

pub const TINY: &str = "tests/fixtures/tiny-random";
pub const DEMO: &str = "www/models/gpt2-shakespeare";

#[derive(Deserialize)]
pub struct Fixture {
    pub model_dir: String,
    pub vocab_size: usize,
    pub cases: Vec<Case>,
}

#[derive(Deserialize)]
pub struct Case {
    pub prompt: String,
    pub ids: Vec<u32>,
    pub logits_file: String,
    pub greedy_ids: Vec<u32>,
    pub greedy_text: String,
}

impl Case {
    pub fn logits(&self) -> Vec<f32> {
        read_f32(&fixtures().join(&self.logits_file))
    }
}

/// A fixture by model name (`tiny-random`, `gpt2-shakespeare`).
pub fn fixture(name: &str) -> Fixture {
    let path = fixtures().join(format!("{name}.json"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn read_f32(path: &Path) -> Vec<f32> {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

pub fn load(dir: &str) -> Model {
    Model::load_dir(&root().join(dir), BackendChoice::Cpu, CpuDtype::F32)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
}

/// Asserts |a - b| <= atol + rtol·|ref| elementwise, reporting the worst element.
pub fn assert_close(got: &[f32], want: &[f32], atol: f32, rtol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    let mut worst = (0usize, 0.0f32);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let excess = (g - w).abs() - (atol + rtol * w.abs());
        if excess > worst.1 || !g.is_finite() {
            worst = (i, excess.max(f32::MIN_POSITIVE));
        }
    }
    assert!(
        worst.1 <= 0.0,
        "{what}: element {} is {} but the reference is {}",
        worst.0,
        got[worst.0],
        want[worst.0]
    );
}

/// A whole generation through the scheduler, the one way a token is made (`scheduler::run`).
pub fn generate(
    model: &mut Model,
    prompt: &str,
    params: GenerateParams,
    on_token: &mut dyn FnMut(&TokenEvent),
    cancelled: &dyn Fn() -> bool,
) -> gpt2_web::Result<GenerationResult> {
    let prompt = Prompt::Text(prompt.into());
    let on_token = &mut |_, e: &TokenEvent| on_token(e);
    scheduler::run(model, None, prompt, params, on_token, cancelled).map(|c| c.result)
}

/// `generate` with the prompt as ids, and a draft model for `Draft::Model`.
pub fn generate_ids(
    model: &mut Model,
    draft: Option<&mut Model>,
    ids: &[u32],
    params: GenerateParams,
    on_token: &mut dyn FnMut(&TokenEvent),
) -> gpt2_web::Result<GenerationResult> {
    let prompt = Prompt::Ids(ids.to_vec());
    let on_token = &mut |_, e: &TokenEvent| on_token(e);
    scheduler::run(model, draft, prompt, params, on_token, &|| false).map(|c| c.result)
}

/// A generation of `ids` through the scheduler with `midway(model)` called after `k` steps (a
/// test that loses the GPU there): its result, and how many `Backend` events said the model
/// moved to the CPU.
pub fn generate_midway(
    model: &mut Model,
    ids: &[u32],
    params: GenerateParams,
    k: usize,
    midway: &dyn Fn(&Model),
) -> (GenerationResult, usize) {
    use scheduler::{Event, Job, Output, Scheduler};
    let mut s: Scheduler<&mut Model> = Scheduler::new();
    let m = s.add_model(model);
    let prompt = Prompt::Ids(ids.to_vec());
    let job = Job::Generate {
        prompt,
        params,
        draft: None,
    };
    s.submit(1, m, job).expect("submit");
    let mut moved = 0;
    for step in 1.. {
        for ev in pollster::block_on(s.step()) {
            match ev {
                Event::Done {
                    output: Output::Completion(c),
                    ..
                } => return (c.result, moved),
                Event::Failed { error, .. } => panic!("{error}"),
                Event::Backend { backend, .. } => moved += usize::from(backend == "cpu"),
                _ => {}
            }
        }
        if step == k {
            midway(s.model(m).expect("between steps"));
        }
    }
    unreachable!()
}

/// Runs a generation, collecting the events.
pub fn run(
    model: &mut Model,
    prompt: &str,
    params: GenerateParams,
) -> (GenerationResult, Vec<TokenEvent>) {
    let mut events = Vec::new();
    let r = generate(
        model,
        prompt,
        params,
        &mut |e| events.push(e.clone()),
        &|| false,
    )
    .expect("generate");
    (r, events)
}

/// Like `run`, with the prompt given as ids (the tiny model's random prompts need not round-trip
/// through the tokenizer).
pub fn run_ids(
    model: &mut Model,
    ids: &[u32],
    params: GenerateParams,
) -> (GenerationResult, Vec<TokenEvent>) {
    let mut events = Vec::new();
    let r = generate_ids(model, None, ids, params, &mut |e| events.push(e.clone())).expect("run");
    (r, events)
}

// Beam search fixtures (`<model>-beams.json`, tools/make_fixtures.py).

#[derive(Deserialize)]
pub struct BeamFixture {
    pub transformers: String,
    pub runs: Vec<Run>,
}

#[derive(Deserialize)]
pub struct Run {
    pub case: usize,
    pub num_beams: usize,
    pub length_penalty: f32,
    pub early_stopping: serde_json::Value,
    pub eos_token_id: Option<u32>,
    pub max_new_tokens: usize,
    pub beams: Vec<WantBeam>,
}

#[derive(Deserialize)]
pub struct WantBeam {
    pub ids: Vec<u32>,
    pub score: f32,
}

pub fn beam_fixture(name: &str) -> BeamFixture {
    let path = fixtures().join(format!("{name}-beams.json"));
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

pub fn beam_params(run: &Run) -> GenerateParams {
    let early = match &run.early_stopping {
        serde_json::Value::Bool(true) => EarlyStopping::Yes,
        serde_json::Value::Bool(false) => EarlyStopping::Heuristic,
        _ => EarlyStopping::Never,
    };
    GenerateParams {
        max_tokens: run.max_new_tokens,
        num_beams: run.num_beams,
        length_penalty: run.length_penalty,
        early_stopping: early,
        ..Default::default()
    }
}

pub fn beam_run(model: &mut Model, ids: &[u32], run: &Run, kv_cache: bool) -> GenerationResult {
    // transformers' end-of-text for this run (tiny-random has none: a token it cannot make).
    model.config.eos_token_id = run.eos_token_id.unwrap_or(u32::MAX);
    let p = GenerateParams {
        kv_cache,
        ..beam_params(run)
    };
    let (r, events) = run_ids(model, ids, p);
    let streamed: Vec<u32> = events.iter().map(|e| e.id).collect();
    assert_eq!(
        streamed, r.tokens,
        "the events carry the best beam's tokens"
    );
    r
}

/// A fresh, empty folder under the system's temporary one, named by `tag` and this process.
pub fn tempdir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gpt2-web-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The logits of the last of `ids` placed at positions `pos..`, after the `pos` positions the
/// model's KV cache holds already, through `Model::predict` (the ids before `pos` stand in only
/// for a fall-back to the CPU, which recomputes them: none here).
pub fn forward_at(model: &mut Model, ids: &[u32], pos: usize) -> gpt2_web::Result<Vec<f32>> {
    let seq = [vec![0; pos], ids.to_vec()].concat();
    pollster::block_on(model.predict(&seq, pos)).map(<[f32]>::to_vec)
}

/// The next-token logits of `ids` from an empty KV cache.
pub fn logits(model: &mut Model, ids: &[u32]) -> Vec<f32> {
    forward_at(model, ids, 0).unwrap().to_vec()
}

/// An `mtp_heads.safetensors` for the model in `dir` (a folder with model.safetensors in f32):
/// `k` heads whose weights are small seeded numbers (head 0 all zero: it guesses the model's own
/// next token again), the first `n` ids as the draft vocabulary, their embedding rows (scaled:
/// sure of every guess).
pub fn synthetic_heads(dir: &str, k: usize, n: usize, seed: u64) -> Vec<u8> {
    use safetensors::tensor::TensorView;
    use safetensors::Dtype;
    let bytes = std::fs::read(root().join(dir).join("model.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let wte = (st.tensors().into_iter())
        .find(|(name, _)| name.ends_with("wte.weight"))
        .unwrap()
        .1;
    assert_eq!(
        wte.dtype(),
        Dtype::F32,
        "{dir}: synthetic heads need f32 weights"
    );
    let d = wte.shape()[1];
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut small = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.2
    };
    let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let mut tensors: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::new();
    for i in 0..k {
        let w: Vec<f32> = (0..d * d)
            .map(|_| if i == 0 { 0.0 } else { small() })
            .collect();
        tensors.push((format!("mtp.{i}.weight"), vec![d, d], f32s(&w)));
        tensors.push((format!("mtp.{i}.bias"), vec![d], f32s(&vec![0.0; d])));
    }
    let ids: Vec<u8> = (0..n as i32).flat_map(|i| i.to_le_bytes()).collect();
    tensors.push(("mtp.draft_ids".into(), vec![n], ids));
    // The embedding rows times 50: the same guesses, made with the confidence a trained head has
    // where it is right (a draft stops at a guess the heads are unsure of: mtp::MIN_CONFIDENCE).
    let emb: Vec<f32> = (wte.data()[..n * d * 4].chunks_exact(4))
        .map(|b| 50.0 * f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    tensors.push(("mtp.draft_embedding".into(), vec![n, d], f32s(&emb)));
    let views: Vec<(String, TensorView)> = (tensors.iter())
        .map(|(name, shape, data)| {
            let dtype = if name == "mtp.draft_ids" {
                Dtype::I32
            } else {
                Dtype::F32
            };
            (
                name.clone(),
                TensorView::new(dtype, shape.clone(), data).unwrap(),
            )
        })
        .collect();
    safetensors::serialize(views, None).unwrap()
}

/// `model` with the heads of `bytes` (an mtp_heads.safetensors).
pub fn with_heads(mut model: Model, bytes: &[u8]) -> Model {
    let config = model.config.clone();
    model.mtp =
        gpt2_web::mtp::MtpParts::from_safetensors("mtp_heads.safetensors", bytes, &config).unwrap();
    model
}
