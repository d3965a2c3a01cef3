//! Beam search is transformers' `generate(num_beams=N, do_sample=False)`: the same best sequence
//! and the same finished beams with their scores, on both fixture models, on the CPU in f32 and
//! q8; with one KV cache per beam, the same as recomputing every beam; streaming hands out only
//! tokens every beam agrees on.

mod common;
mod gpu_common;
use common::*;
use gpt2_web::{BackendChoice, CpuDtype, GenerateParams, Model, StopReason};

/// Every run of a model's fixture: the best beam's tokens exactly, and every finished beam's
/// tokens and score (to `tol`).
fn check_model(name: &str, dir: &str, dtype: CpuDtype, tol: f32) {
    let model = Model::load_dir(&root().join(dir), BackendChoice::Cpu, dtype).unwrap();
    check_runs(name, model, tol, &|_| true);
}

/// The fixture's runs that `pick` takes, on `model` (any backend): the best beam's tokens
/// exactly, and every finished beam's tokens and score (to `tol`).
fn check_runs(name: &str, mut model: Model, tol: f32, pick: &dyn Fn(&Run) -> bool) {
    let fx = fixture(name);
    let beams = beam_fixture(name);
    assert!(!beams.transformers.is_empty());
    let (on, dtype) = (model.backend().name(), model.backend().dtype_name());
    for run in beams.runs.iter().filter(|r| pick(r)) {
        let ids = &fx.cases[run.case].ids;
        let what = format!(
            "{name} {on} {dtype} case {} with {} beams (lp {}, early {})",
            run.case, run.num_beams, run.length_penalty, run.early_stopping
        );
        let r = beam_run(&mut model, ids, run, true);
        assert_eq!(r.tokens, run.beams[0].ids, "{what}: the best beam");
        let best = (r.beams[0].score - run.beams[0].score).abs();
        assert!(best <= tol, "{what}: best score off by {best}");
        let got: Vec<&Vec<u32>> = r.beams.iter().map(|b| &b.tokens).collect();
        let want: Vec<&Vec<u32>> = run.beams.iter().map(|b| &b.ids).collect();
        assert_eq!(got, want, "{what}: the finished beams");
        for (g, w) in r.beams.iter().zip(&run.beams) {
            assert!(
                (g.score - w.score).abs() <= tol,
                "{what}: score {} vs {}",
                g.score,
                w.score
            );
        }
        let ends_on_eos = run.eos_token_id == r.tokens.last().copied();
        let reason = if ends_on_eos {
            StopReason::Eos
        } else {
            StopReason::MaxTokens
        };
        assert_eq!(r.stop_reason, reason, "{what}");
        // Forwards: the prompt once, then one per running beam per step, at most.
        let steps = run.max_new_tokens;
        assert!(
            r.metrics.target_forwards <= 1 + (steps - 1) * run.num_beams,
            "{what}"
        );
    }
    assert_eq!(model.backend().name(), on, "{name}: the backend changed");
}

#[test]
fn beam_search_equals_transformers_in_f32() {
    check_model("tiny-random", TINY, CpuDtype::F32, 1e-4);
    check_model("gpt2-shakespeare", DEMO, CpuDtype::F32, 1e-4);
    // On the GPU (lavapipe in CI): one KV cache slot per beam, copied on the device; case 1's
    // runs but the 8-beam one (lavapipe is slow), every early-stopping rule.
    if gpu_common::gpu().is_some() {
        let dir = root().join(DEMO);
        let gpu = Model::load_dir(&dir, BackendChoice::WebGpu, CpuDtype::F32).unwrap();
        check_runs("gpt2-shakespeare", gpu, 1e-4, &|r| {
            r.case == 1 && r.num_beams <= 5
        });
    }
}

#[test]
fn beam_search_in_q8_mostly_finds_the_best_beam_transformers_finds() {
    // q8 rounds the weights, which moves log-probabilities by ~1e-2: where two beams are that
    // close, q8 may keep the other one. Measured: the best beam is transformers' in 13 of 15 runs
    // on the demo model (a trained model); on tiny-random, whose random weights make nearly flat
    // distributions, in 6 of 15, which is asserted too so a change shows (README, "Decoding
    // strategies").
    for (name, dir, want) in [("gpt2-shakespeare", DEMO, 13), ("tiny-random", TINY, 6)] {
        let fx = fixture(name);
        let beams = beam_fixture(name);
        let mut model =
            Model::load_dir(&root().join(dir), BackendChoice::Cpu, CpuDtype::Q8).unwrap();
        let mut same = 0;
        for run in &beams.runs {
            let r = beam_run(&mut model, &fx.cases[run.case].ids, run, true);
            same += usize::from(r.tokens == run.beams[0].ids);
        }
        eprintln!(
            "{name} q8: the best beam is transformers' in {same} of {} runs",
            beams.runs.len()
        );
        assert!(
            same >= want,
            "{name} q8: {same} of {} runs",
            beams.runs.len()
        );
    }
}

#[test]
fn a_kv_cache_per_beam_is_the_same_as_recomputing_every_beam() {
    let fx = fixture("gpt2-shakespeare");
    let beams = beam_fixture("gpt2-shakespeare");
    let mut model = load(DEMO);
    for run in beams.runs.iter().filter(|r| r.case == 1) {
        let ids = &fx.cases[run.case].ids;
        let cached = beam_run(&mut model, ids, run, true);
        let naive = beam_run(&mut model, ids, run, false);
        assert_eq!(cached.tokens, naive.tokens);
        // The prompt's products over many rows sum in another order than one row's: ~1e-7.
        assert_eq!(cached.beams.len(), naive.beams.len());
        for (c, n) in cached.beams.iter().zip(&naive.beams) {
            assert_eq!(c.tokens, n.tokens, "{} beams", run.num_beams);
            assert!((c.score - n.score).abs() < 1e-5, "{} beams", run.num_beams);
        }
    }
}

#[test]
fn beams_stream_only_tokens_they_all_agree_on_and_honour_stop_texts() {
    let mut model = load(DEMO);
    let mut p = GenerateParams {
        max_tokens: 24,
        num_beams: 4,
        ..Default::default()
    };
    let (plain, _) = run(&mut model, "ROMEO:", p.clone());
    // A stop text from inside the best beam: the search ends there for every beam that reaches
    // it, and the text stops before it.
    let cut = plain
        .text
        .char_indices()
        .nth(plain.text.chars().count() / 2)
        .unwrap()
        .0;
    let stop: String = plain.text[cut..].chars().take(3).collect();
    p.stop = vec![stop.clone()];
    let mut g = gpt2_web::Generation::new(&model, "ROMEO:", p).unwrap();
    let (mut working, mut tokens) = (0, 0);
    loop {
        match pollster::block_on(g.next(&mut model, None)).unwrap() {
            gpt2_web::Move::Token(_) => tokens += 1,
            gpt2_web::Move::Working => working += 1,
            gpt2_web::Move::Done => break,
        }
    }
    let r = g.result();
    assert!(
        working > 0,
        "steps while the beams disagree hand out nothing"
    );
    assert_eq!(tokens, r.tokens.len());
    assert_eq!(r.stop_reason, StopReason::Stop);
    assert!(!r.text.contains(&stop) && plain.text.starts_with(&r.text));
    for b in &r.beams {
        assert!(!b.text.contains(&stop), "{:?}", b.text);
    }
}

#[test]
fn beam_settings_are_checked() {
    let mut model = load(DEMO);
    let bad = [
        GenerateParams {
            num_beams: 0,
            ..Default::default()
        },
        GenerateParams {
            num_beams: 17,
            ..Default::default()
        },
        GenerateParams {
            num_beams: 2,
            length_penalty: f32::NAN,
            ..Default::default()
        },
        GenerateParams {
            num_beams: 2,
            temperature: 0.8,
            ..Default::default()
        },
        GenerateParams {
            num_beams: 2,
            draft: gpt2_web::Draft::PromptLookup,
            ..Default::default()
        },
    ];
    for p in bad {
        let e = gpt2_web::Generation::new(&model, "a", p)
            .err()
            .expect("refused");
        assert!(
            e.to_string().contains("num_beams")
                || e.to_string().contains("length_penalty")
                || e.to_string().contains("draft"),
            "{e}"
        );
    }
    // A beam search aborted half-way leaves the model usable for plain generation.
    let p = GenerateParams {
        max_tokens: 16,
        num_beams: 3,
        ..Default::default()
    };
    let mut g = gpt2_web::Generation::new(&model, "ROMEO:", p).unwrap();
    for _ in 0..3 {
        pollster::block_on(g.next(&mut model, None)).unwrap();
    }
    g.cancel();
    assert_eq!(g.result().stop_reason, StopReason::Abort);
    let fx = fixture("gpt2-shakespeare");
    let p = GenerateParams {
        max_tokens: 24,
        ignore_eos: true,
        ..Default::default()
    };
    let (r, _) = run_ids(&mut model, &fx.cases[0].ids, p);
    assert_eq!(r.tokens, fx.cases[0].greedy_ids);
}
