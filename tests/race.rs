//! `auto` by measurement (src/model/race.rs): with a software adapter taken as if it were
//! hardware (`set_software_gpu_races`, lavapipe here), `Auto` races the GPU against the CPU, checks
//! the GPU's logits against the CPU's, and picks the CPU, which is faster here; the text is the
//! CPU's. The agreement bound holds with room for the CPU's 8-bit and f32 weights alike.

mod common;
mod gpu_common;

use common::{root, run_ids, DEMO};
use gpt2_web::model::race::agreement;
use gpt2_web::{Backend, BackendChoice, CpuDtype, GenerateParams, Model};

/// The race's settings are the process's: the tests that change them take turns.
static SETTINGS: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn auto_races_a_gpu_against_the_cpu_and_keeps_the_faster_that_agrees() {
    if gpu_common::gpu().is_none() {
        return;
    }
    // This test binary's own process: no other binary sees the setting.
    let _turn = SETTINGS.lock().unwrap_or_else(|e| e.into_inner());
    gpt2_web::model::set_software_gpu_races(true);
    for dtype in [CpuDtype::Q8, CpuDtype::F32] {
        let mut auto = Model::load_dir(&root().join(DEMO), BackendChoice::Auto, dtype).unwrap();
        let t = (auto.backend_times.clone()).expect("Auto on a GPU measures both backends");
        eprintln!("{dtype:?}: {t:?}");
        let (cpu_ms, diff) = (t.cpu_ms.unwrap(), t.logit_diff.unwrap());
        assert!(t.webgpu_ms > 0.0 && cpu_ms > 0.0, "{t:?}");
        let agree = agreement(if dtype == CpuDtype::F32 { "f32" } else { "q8" }, "f32");
        assert!(
            diff < agree / 2.0,
            "{dtype:?}: the backends differ by {diff} of the logits' range"
        );
        // lavapipe emulates a GPU on these same cores: the CPU backend wins.
        assert_eq!(t.chosen, "cpu", "{t:?}");
        assert!(cpu_ms < t.webgpu_ms, "{t:?}");
        assert!(matches!(auto.backend(), Backend::Cpu(_)));
        let why = auto.gpu_unavailable.clone().unwrap();
        assert!(
            why.starts_with("measured: ") && why.contains("on the CPU"),
            "{why}"
        );
        // The race leaves nothing behind: the text is a fresh CPU model's.
        let mut cpu = Model::load_dir(&root().join(DEMO), BackendChoice::Cpu, dtype).unwrap();
        let ids = cpu.tokenizer.encode("ROMEO.\n").unwrap();
        let params = GenerateParams {
            max_tokens: 24,
            ..Default::default()
        };
        let (want, _) = run_ids(&mut cpu, &ids, params.clone());
        let (got, _) = run_ids(&mut auto, &ids, params);
        assert_eq!(got.tokens, want.tokens, "{dtype:?}");
    }
}

/// A front end that expects batches (`set_expected_batch`, as `gpt2 serve` does) has `auto` time
/// both backends on a batch of that many sequences too, and choose the faster per token there.
#[test]
fn auto_told_to_expect_a_batch_races_the_batch_and_chooses_by_it() {
    if gpu_common::gpu().is_none() {
        return;
    }
    let _turn = SETTINGS.lock().unwrap_or_else(|e| e.into_inner());
    gpt2_web::model::set_software_gpu_races(true);
    gpt2_web::model::set_expected_batch(8);
    let mut auto = Model::load_dir(&root().join(DEMO), BackendChoice::Auto, CpuDtype::Q8).unwrap();
    gpt2_web::model::set_expected_batch(1);
    let t = (auto.backend_times.clone()).expect("Auto on a GPU measures both backends");
    eprintln!("{t:?}");
    let (g, c) = (t.webgpu_batch_ms.unwrap(), t.cpu_batch_ms.unwrap());
    assert_eq!(t.batch, 8);
    assert!(g > 0.0 && c > 0.0, "{t:?}");
    assert_eq!(t.chosen, if c <= g { "cpu" } else { "webgpu" }, "{t:?}");
    assert!(
        t.why
            .starts_with("measured at the batch the front end expects: 8 steps of 8 sequences"),
        "{}",
        t.why
    );
    // The race leaves one slot behind, and the batch runs as it would have.
    let ids = auto.tokenizer.encode("ROMEO.\n").unwrap();
    let params = GenerateParams {
        max_tokens: 8,
        ..Default::default()
    };
    let (a, _) = run_ids(&mut auto, &ids, params.clone());
    let mut cpu = Model::load_dir(&root().join(DEMO), BackendChoice::Cpu, CpuDtype::Q8).unwrap();
    assert_eq!(a.tokens, run_ids(&mut cpu, &ids, params).0.tokens);
}
