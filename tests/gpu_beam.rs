//! Beam search on the GPU (lavapipe in CI): one KV cache slot per beam, copied on the device, and
//! the same beams as transformers; a device lost half-way continues on the CPU with every beam
//! recomputed.

mod common;
mod gpu_common;

use common::{beam_fixture, beam_run, fixture, root, DEMO};
use gpt2_web::{Backend, BackendChoice, CpuDtype, Model};

fn gpu_model(dir: &str) -> Option<Model> {
    gpu_common::gpu()?;
    Some(Model::load_dir(&root().join(dir), BackendChoice::WebGpu, CpuDtype::F32).unwrap())
}

#[test]
fn beam_search_on_the_gpu_equals_transformers() {
    let (fx, beams) = (
        fixture("gpt2-shakespeare"),
        beam_fixture("gpt2-shakespeare"),
    );
    let Some(mut model) = gpu_model(DEMO) else {
        return;
    };
    // Case 1's runs but the 8-beam one (lavapipe is slow): every early-stopping rule.
    for run in beams
        .runs
        .iter()
        .filter(|r| r.case == 1 && r.num_beams <= 5)
    {
        let r = beam_run(&mut model, &fx.cases[run.case].ids, run, true);
        let what = format!("case {} with {} beams", run.case, run.num_beams);
        let got: Vec<&Vec<u32>> = r.beams.iter().map(|b| &b.tokens).collect();
        let want: Vec<&Vec<u32>> = run.beams.iter().map(|b| &b.ids).collect();
        assert_eq!(got, want, "{what}");
        for (g, w) in r.beams.iter().zip(&run.beams) {
            assert!(
                (g.score - w.score).abs() < 1e-4,
                "{what}: {} vs {}",
                g.score,
                w.score
            );
        }
    }
    assert_eq!(model.backend.name(), "webgpu");
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
    let lose = |m: &Model| match &m.backend {
        Backend::WebGpu(b) => b.lose_device(),
        Backend::Cpu(_) => panic!("expected the GPU backend"),
    };
    let (r, moved) = common::generate_midway(&mut model, &ids, common::beam_params(run), 5, &lose);
    assert_eq!(model.backend.name(), "cpu");
    assert_eq!(moved, 1, "one Backend event");
    let got: Vec<&Vec<u32>> = r.beams.iter().map(|b| &b.tokens).collect();
    let want: Vec<&Vec<u32>> = run.beams.iter().map(|b| &b.ids).collect();
    assert_eq!(got, want);
}
