//! The loop written by hand with `NextLogits` (the JS API's `model.logits`): the lesson's
//! dozen lines give exactly `generate`'s greedy tokens, with the cache and without it, in f32
//! and q8.

mod common;
use common::*;
use gpt2_web::{BackendChoice, CpuDtype, GenerateParams, Model, NextLogits};

fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &x) in logits.iter().enumerate() {
        if x > logits[best] {
            best = i;
        }
    }
    best as u32
}

/// The lesson's loop: logits of the sequence, pick the most likely, append, stop at end-of-text.
fn hand_loop(m: &mut Model, prompt: &str, n: usize, cache: bool) -> (Vec<u32>, Vec<usize>) {
    let mut ids = m.tokenizer.encode(prompt).unwrap();
    let (start, eos) = (ids.len(), m.config.eos_token_id);
    let mut next = NextLogits::default();
    let mut reused = Vec::new();
    while ids.len() - start < n {
        let (logits, r) = pollster::block_on(next.logits(m, &ids, cache)).unwrap();
        let id = argmax(logits);
        reused.push(r);
        ids.push(id);
        if id == eos {
            break;
        }
    }
    (ids[start..].to_vec(), reused)
}

fn greedy(m: &mut Model, prompt: &str, n: usize) -> Vec<u32> {
    let params = GenerateParams {
        max_tokens: n,
        ..Default::default()
    };
    generate(m, prompt, params, &mut |_| {}, &|| false)
        .unwrap()
        .tokens
}

#[test]
fn the_hand_written_loop_gives_generates_greedy_tokens_in_both_dtypes() {
    for dtype in [CpuDtype::F32, CpuDtype::Q8] {
        let dir = root().join(DEMO);
        let mut m = Model::load_dir(&dir, BackendChoice::Cpu, dtype).unwrap();
        let want = greedy(&mut m, "ROMEO:", 40);
        let (cached, reused) = hand_loop(&mut m, "ROMEO:", 40, true);
        assert_eq!(cached, want, "{dtype:?} with the cache");
        // The prompt runs whole, then each step reuses all but the new token.
        let n_prompt = m.tokenizer.encode("ROMEO:").unwrap().len();
        let expected: Vec<usize> = (0..reused.len())
            .map(|i| if i == 0 { 0 } else { n_prompt + i - 1 })
            .collect();
        assert_eq!(reused, expected, "{dtype:?}");
        let (naive, reused) = hand_loop(&mut m, "ROMEO:", 40, false);
        assert_eq!(naive, want, "{dtype:?} without the cache");
        assert!(reused.iter().all(|&r| r == 0));
    }
}

#[test]
fn the_cache_keeps_only_the_common_prefix_and_a_generation_in_between_is_forgotten() {
    let mut m = load(TINY);
    let mut next = NextLogits::default();
    let mut fresh = NextLogits::default();
    let a = [464u32, 1290, 318, 257];
    let b = [464u32, 1290, 11, 257, 1110];
    let (_, r) = pollster::block_on(next.logits(&mut m, &a, true)).unwrap();
    assert_eq!(r, 0);
    let (got, r) = pollster::block_on(next.logits(&mut m, &b, true)).unwrap();
    let got = got.to_vec();
    assert_eq!(r, 2, "the two share 464, 1290");
    let (want, _) = pollster::block_on(fresh.logits(&mut m, &b, false)).unwrap();
    assert_close(&got, want, 1e-4, 1e-4, "b after a, from the cache");
    // The same ids again: the last one runs again, the rest come from the cache.
    let (_, r) = pollster::block_on(next.logits(&mut m, &b, true)).unwrap();
    assert_eq!(r, 4);
    // A generation overwrites the cache; after `forget` the next call starts over and agrees.
    greedy(&mut m, "x", 5);
    next.forget();
    let (again, r) = pollster::block_on(next.logits(&mut m, &b, true)).unwrap();
    assert_eq!(r, 0);
    assert_close(again, &got, 1e-4, 1e-4, "b after a generation");
}

#[test]
fn bad_ids_are_refused_with_a_sentence_and_the_next_call_works() {
    let mut m = load(TINY);
    let mut next = NextLogits::default();
    let v = m.config.vocab_size as u32;
    let n_ctx = m.config.n_positions;
    for (ids, says) in [
        (vec![], "no token ids"),
        (vec![1, v], "outside the model's vocabulary"),
        (vec![1; n_ctx + 1], "context"),
    ] {
        let e = pollster::block_on(next.logits(&mut m, &ids, true)).unwrap_err();
        assert!(e.to_string().contains(says), "{ids:?}: {e}");
    }
    let (logits, _) = pollster::block_on(next.logits(&mut m, &[1, 2], true)).unwrap();
    assert_eq!(logits.len(), v as usize);
}
