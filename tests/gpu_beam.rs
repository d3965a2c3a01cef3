//! Beam search on the GPU (lavapipe in CI) where it differs from the CPU: a device lost half-way
//! continues on the CPU with every beam recomputed. (The same beams as transformers on the GPU:
//! tests/beam.rs, one body for every backend.)

mod common;
mod gpu_common;

use common::{beam_fixture, fixture, root, DEMO};
use gpt2_web::{Backend, BackendChoice, CpuDtype, Model};

fn gpu_model(dir: &str) -> Option<Model> {
    gpu_common::gpu()?;
    Some(Model::load_dir(&root().join(dir), BackendChoice::WebGpu, CpuDtype::F32).unwrap())
}

#[test]
fn a_beam_search_survives_losing_the_device() {
    let (fx, beams) = (
        fixture("gpt2-shakespeare"),
        beam_fixture("gpt2-shakespeare"),
    );
    let run = (beams.runs.iter())
        .find(|r| r.num_beams == 8)
        .expect("an 8-beam run");
    let Some(mut model) = gpu_model(DEMO) else {
        return;
    };
    model.config.eos_token_id = run.eos_token_id.unwrap_or(u32::MAX);
    let ids = fx.cases[run.case].ids.clone();
    let lose = |m: &Model| match &m.backend() {
        Backend::WebGpu(b) => b.lose_device(),
        Backend::Cpu(_) => panic!("expected the GPU backend"),
    };
    let (r, moved) = common::generate_midway(&mut model, &ids, common::beam_params(run), 5, &lose);
    assert_eq!(model.backend().name(), "cpu");
    assert_eq!(moved, 1, "one Backend event");
    let got: Vec<&Vec<u32>> = r.beams.iter().map(|b| &b.tokens).collect();
    let want: Vec<&Vec<u32>> = run.beams.iter().map(|b| &b.ids).collect();
    assert_eq!(got, want);
}
