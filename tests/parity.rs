//! The engine against Hugging Face transformers: last-position logits, greedy continuations
//! with the KV cache, and KV-cache decoding against full recomputation. One body per behaviour,
//! run on every backend: the CPU, and WebGPU (lavapipe in CI; elsewhere without an adapter a loud
//! note, and CI=true fails).

mod common;
mod gpu_common;
use common::*;
use gpt2_web::{BackendChoice, CpuDtype, GenerateParams, Model};

/// The model in `dir` on each backend there is, in f32.
fn backends(dir: &str) -> Vec<Model> {
    let mut models = vec![load(dir)];
    if gpu_common::gpu().is_some() {
        let gpu = Model::load_dir(&root().join(dir), BackendChoice::WebGpu, CpuDtype::F32);
        models.push(gpu.unwrap_or_else(|e| panic!("{dir} on the GPU: {e}")));
    }
    models
}

fn check_model(name: &str) {
    let fx = fixture(name);
    for mut model in backends(&fx.model_dir) {
        let on = model.backend().name();
        assert_eq!(model.config.vocab_size, fx.vocab_size);
        for case in &fx.cases {
            let ids = if case.prompt.is_empty() || name == "tiny-random" {
                case.ids.clone()
            } else {
                let ids = model.tokenizer.encode(&case.prompt).unwrap();
                assert_eq!(ids, case.ids, "{name}: tokenization of {:?}", case.prompt);
                ids
            };
            let logits = forward_at(&mut model, &ids, 0).unwrap().to_vec();
            let want = case.logits();
            let scale = want.iter().fold(0.0f32, |m, x| m.max(x.abs()));
            // 1e-3 relative to each logit, with a floor of 1e-4 of the largest.
            let what = format!("{name} on {on}: logits for {:?}", case.prompt);
            assert_close(&logits, &want, 1e-4 * scale, 1e-3, &what);

            let params = GenerateParams {
                max_tokens: case.greedy_ids.len(),
                ignore_eos: true,
                ..Default::default()
            };
            let (r, events) = run_ids(&mut model, &ids, params);
            let text: String = events.iter().map(|e| e.text.as_str()).collect();
            let what = format!("{name} on {on}: greedy continuation of {:?}", case.prompt);
            assert_eq!(r.tokens, case.greedy_ids, "{what}");
            assert_eq!(text, case.greedy_text, "{what}");
            assert_eq!(r.text, case.greedy_text, "{what}");
        }
        assert_eq!(model.backend().name(), on, "{name}: the backend changed");
    }
}

#[test]
fn tiny_random_matches_transformers() {
    check_model("tiny-random");
}

#[test]
fn demo_model_matches_transformers() {
    check_model("gpt2-shakespeare");
}

#[test]
fn kv_cache_decode_equals_full_recompute() {
    let fx = fixture("tiny-random");
    let case = fx.cases.iter().max_by_key(|c| c.ids.len()).unwrap();
    for mut model in backends(TINY) {
        let on = model.backend().name();
        let mut seq = case.ids.clone();
        // Decode the greedy continuation one token at a time, comparing each step's logits with
        // a fresh forward over the whole sequence.
        forward_at(&mut model, &seq, 0).unwrap();
        for &next in &case.greedy_ids[..8] {
            let pos = seq.len();
            seq.push(next);
            let cached = forward_at(&mut model, &[next], pos).unwrap().to_vec();
            let full = forward_at(&mut model, &seq, 0).unwrap().to_vec();
            let what = format!("{on}: step at position {pos}");
            assert_close(&cached, &full, 1e-4, 1e-4, &what);
        }
    }
}

#[test]
fn prefill_in_pieces_equals_prefill_at_once() {
    let fx = fixture("tiny-random");
    let ids = &fx.cases.iter().max_by_key(|c| c.ids.len()).unwrap().ids;
    for mut model in backends(TINY) {
        let on = model.backend().name();
        let whole = forward_at(&mut model, ids, 0).unwrap().to_vec();
        let split = ids.len() / 3;
        forward_at(&mut model, &ids[..split], 0).unwrap();
        let pieces = forward_at(&mut model, &ids[split..], split)
            .unwrap()
            .to_vec();
        let what = format!("{on}: prefill split in two");
        assert_close(&pieces, &whole, 1e-4, 1e-4, &what);
    }
}
