//! The engine against Hugging Face transformers: last-position logits, greedy continuations
//! with the KV cache, and KV-cache decoding against full recomputation.

mod common;
use common::*;
use gpt2_web::GenerateParams;

fn check_model(name: &str) {
    let fx = fixture(name);
    let mut model = load(&fx.model_dir);
    assert_eq!(model.config.vocab_size, fx.vocab_size);
    for case in &fx.cases {
        let ids = if case.prompt.is_empty() || name == "tiny-random" {
            case.ids.clone()
        } else {
            let ids = model.tokenizer.encode(&case.prompt).unwrap();
            assert_eq!(ids, case.ids, "{name}: tokenization of {:?}", case.prompt);
            ids
        };
        let logits = pollster::block_on(model.backend.forward(&ids, 0))
            .unwrap()
            .to_vec();
        let want = case.logits();
        let scale = want.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        // 1e-3 relative to each logit, with a floor of 1e-4 of the largest.
        assert_close(
            &logits,
            &want,
            1e-4 * scale,
            1e-3,
            &format!("{name} logits for {:?}", case.prompt),
        );

        let params = GenerateParams {
            max_tokens: case.greedy_ids.len(),
            ignore_eos: true,
            ..Default::default()
        };
        let (r, events) = run_ids(&mut model, &ids, params);
        let text: String = events.iter().map(|e| e.text.as_str()).collect();
        assert_eq!(
            r.tokens, case.greedy_ids,
            "{name}: greedy continuation of {:?}",
            case.prompt
        );
        assert_eq!(
            text, case.greedy_text,
            "{name}: greedy text of {:?}",
            case.prompt
        );
        assert_eq!(r.text, case.greedy_text);
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
    let mut model = load(TINY);
    let case = fx.cases.iter().max_by_key(|c| c.ids.len()).unwrap();
    let mut seq = case.ids.clone();
    // Decode the greedy continuation one token at a time, comparing each step's logits with a
    // fresh forward over the whole sequence.
    pollster::block_on(model.backend.forward(&seq, 0)).unwrap();
    for &next in &case.greedy_ids[..8] {
        let pos = seq.len();
        seq.push(next);
        let cached = pollster::block_on(model.backend.forward(&[next], pos))
            .unwrap()
            .to_vec();
        let full = pollster::block_on(model.backend.forward(&seq, 0))
            .unwrap()
            .to_vec();
        assert_close(
            &cached,
            &full,
            1e-4,
            1e-4,
            &format!("step at position {pos}"),
        );
    }
}

#[test]
fn prefill_in_pieces_equals_prefill_at_once() {
    let fx = fixture("tiny-random");
    let mut model = load(TINY);
    let ids = &fx.cases.iter().max_by_key(|c| c.ids.len()).unwrap().ids;
    let whole = pollster::block_on(model.backend.forward(ids, 0))
        .unwrap()
        .to_vec();
    let split = ids.len() / 3;
    pollster::block_on(model.backend.forward(&ids[..split], 0)).unwrap();
    let pieces = pollster::block_on(model.backend.forward(&ids[split..], split))
        .unwrap()
        .to_vec();
    assert_close(&pieces, &whole, 1e-4, 1e-4, "prefill split in two");
}
