//! The CPU backend's 8-bit weights (`CpuDtype::Q8`) against transformers' f32 logits, and the
//! KV-cache invariants on that path. The error bound is relative to the spread of the logits:
//! 8-bit rounding moves every logit a little, so a fixed absolute bound would say nothing.

mod common;
use common::*;
use gpt2_web::backend::cpu::Phase;
use gpt2_web::{BackendChoice, CpuDtype, Model};

fn load_q8(dir: &str) -> Model {
    Model::load_dir(&root().join(dir), BackendChoice::Cpu, CpuDtype::Q8)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
}

fn argmax(v: &[f32]) -> usize {
    (0..v.len()).fold(0, |b, i| if v[i] > v[b] { i } else { b })
}

fn std_dev(v: &[f32]) -> f32 {
    let m = v.iter().sum::<f32>() / v.len() as f32;
    (v.iter().map(|x| (x - m) * (x - m)).sum::<f32>() / v.len() as f32).sqrt()
}

#[test]
fn q8_logits_stay_close_to_transformers_and_keep_the_top_token() {
    let fx = fixture("gpt2-shakespeare");
    let mut model = load_q8(&fx.model_dir);
    assert_eq!(model.backend().name(), "cpu");
    for case in &fx.cases {
        let want = case.logits();
        let got = forward_at(&mut model, &case.ids, 0).unwrap().to_vec();
        let worst = got
            .iter()
            .zip(&want)
            .map(|(g, w)| (g - w).abs())
            .fold(0f32, f32::max);
        let spread = std_dev(&want);
        assert!(
            worst < 0.1 * spread,
            "{:?}: worst logit error {worst} vs spread {spread}",
            case.prompt
        );
        assert_eq!(argmax(&got), argmax(&want), "{:?}: top token", case.prompt);
    }
}

#[test]
fn q8_weights_are_a_quarter_of_f32_and_decode_reads_them_once() {
    let f32m = load(DEMO);
    let q8m = load_q8(DEMO);
    let (a, b) = (
        f32m.backend().decode_weight_bytes(),
        q8m.backend().decode_weight_bytes(),
    );
    // 1 byte per weight plus a 4-byte scale per 32: 1.125 / 4 of f32, a little more for
    // the f32 biases and LayerNorm parameters.
    assert!(b / a > 0.28 && b / a < 0.29, "q8 {b} bytes vs f32 {a}");
}

#[test]
fn q8_decode_with_the_cache_equals_recompute() {
    let fx = fixture("gpt2-shakespeare");
    let mut model = load_q8(&fx.model_dir);
    let ids = &fx.cases[0].ids;
    let full = forward_at(&mut model, ids, 0).unwrap().to_vec();
    let (head, tail) = ids.split_at(ids.len() / 2);
    forward_at(&mut model, head, 0).unwrap();
    let mut last = Vec::new();
    for (i, id) in tail.iter().enumerate() {
        last = forward_at(&mut model, &[*id], head.len() + i)
            .unwrap()
            .to_vec();
    }
    assert_close(&last, &full, 1e-4, 1e-4, "q8 decode vs prefill");
}

#[test]
fn q8_greedy_text_starts_like_transformers() {
    // Rounding may change a near-tie late in a long continuation; the first tokens of the
    // fixtures' greedy continuations must survive it.
    let fx = fixture("gpt2-shakespeare");
    let mut model = load_q8(&fx.model_dir);
    for case in &fx.cases {
        let params = gpt2_web::GenerateParams {
            max_tokens: 8,
            ignore_eos: true,
            ..Default::default()
        };
        let (r, _) = run_ids(&mut model, &case.ids, params);
        assert_eq!(r.tokens[..], case.greedy_ids[..8], "{:?}", case.prompt);
    }
}

#[test]
fn the_cpu_profile_splits_prompt_and_steps_and_its_phases_add_up() {
    let fx = fixture("gpt2-shakespeare");
    for dtype in [CpuDtype::Q8, CpuDtype::F32] {
        let mut model = Model::load_dir(&root().join(&fx.model_dir), BackendChoice::Cpu, dtype)
            .unwrap_or_else(|e| panic!("{}: {e}", fx.model_dir));
        let ids = &fx.cases[0].ids;
        assert!(ids.len() > 1, "the fixture's first case is a prompt");
        forward_at(&mut model, ids, 0).unwrap(); // before profiling: not counted
        assert!(model.backend().profile().is_none());
        model.set_profiling(true);
        forward_at(&mut model, ids, 0).unwrap();
        for pos in ids.len()..ids.len() + 3 {
            forward_at(&mut model, &[ids[0]], pos).unwrap();
        }
        let p = model.backend().profile().expect("profiling is on");
        assert_eq!((p.prompt.calls, p.prompt.tokens), (1, ids.len()));
        assert_eq!((p.decode.calls, p.decode.tokens), (3, 3));
        for phases in [p.prompt, p.decode] {
            let named = phases.named();
            let sum: f64 = named.iter().map(|(_, ms)| ms).sum();
            assert!(named.iter().all(|(_, ms)| *ms >= 0.0), "{named:?}");
            assert!((sum - phases.total_ms).abs() <= 1e-6 * phases.total_ms.max(1.0));
            assert!(
                phases.ms(Phase::Matmul) > 0.0 && phases.total_ms > 0.0,
                "{named:?}"
            );
            assert_eq!(
                phases.ms(Phase::Quantize) > 0.0,
                dtype == CpuDtype::Q8,
                "{dtype:?}"
            );
        }
        model.set_profiling(false);
        assert!(model.backend().profile().is_none());
    }
}

#[test]
fn the_budget_predicts_what_the_cpu_backend_really_allocates() {
    // Capacity, not length: what the process holds. The budget (from config.json alone) must
    // equal it, or the memory figures on the page and the refusals before loading are wrong.
    for dir in [DEMO, TINY] {
        for dtype in [CpuDtype::Q8, CpuDtype::F32] {
            let model = Model::load_dir(&root().join(dir), BackendChoice::Cpu, dtype).unwrap();
            let gpt2_web::Backend::Cpu(cpu) = &model.backend() else {
                panic!("expected the CPU backend")
            };
            let (weights, kv) = cpu.allocated_bytes();
            let want = gpt2_web::budget::Footprint::cpu(&model.config, dtype, 0).unwrap();
            assert_eq!(weights as u64, want.weights, "{dir} {dtype:?}: weights");
            assert_eq!(kv as u64, want.kv_cache, "{dir} {dtype:?}: KV cache");
        }
    }
}

#[test]
fn both_backends_count_the_bytes_per_token_alike() {
    // f32 on the CPU holds exactly what the GPU holds, so their bandwidth bounds compare.
    let model = load(DEMO);
    assert_eq!(
        model.backend().decode_weight_bytes(),
        model.config.decode_weight_bytes(4.0)
    );
}
