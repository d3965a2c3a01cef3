//! The generation loop on the tiny random model: stops, streaming, sampling, metrics.

mod common;
use common::*;
use gpt2_web::{Error, GenerateParams, StopReason};

fn greedy(max_tokens: usize) -> GenerateParams {
    GenerateParams {
        max_tokens,
        ..Default::default()
    }
}

#[test]
fn max_tokens_stops_and_callback_fires_once_per_token() {
    let mut m = load(TINY);
    let (r, events) = run_ids(&mut m, &[464], greedy(9));
    assert_eq!(r.stop_reason, StopReason::MaxTokens);
    assert_eq!(r.tokens.len(), 9);
    assert_eq!(events.len(), 9);
    assert_eq!(
        events.iter().map(|e| e.index).collect::<Vec<_>>(),
        (0..9).collect::<Vec<_>>()
    );
    assert_eq!(events.iter().map(|e| e.id).collect::<Vec<_>>(), r.tokens);
    assert!(events
        .windows(2)
        .all(|w| w[0].elapsed_ms <= w[1].elapsed_ms));
    let m = &r.metrics;
    assert_eq!((m.prompt_tokens, m.output_tokens), (1, 9));
    assert!(m.ttft_ms > 0.0 && m.ttft_ms <= m.total_ms, "{m:?}");
    assert!(m.tpot_p50_ms <= m.tpot_p95_ms && m.tpot_ms > 0.0, "{m:?}");
    assert!(m.prefill_tokens_per_sec > 0.0 && m.decode_tokens_per_sec > 0.0);
}

#[test]
fn streaming_deltas_concatenate_to_the_text_with_multibyte_characters() {
    let mut m = load(TINY);
    // Hot sampling over the tiny vocabulary hits the single-byte tokens 128..255, which are
    // pieces of UTF-8 characters.
    let params = GenerateParams {
        max_tokens: 200,
        temperature: 3.0,
        seed: 11,
        ..Default::default()
    };
    let (r, events) = run_ids(&mut m, &[464], params);
    let streamed: String = events.iter().map(|e| e.text.as_str()).collect();
    assert_eq!(streamed, r.text);
    assert_eq!(r.text, m.tokenizer.decode(&r.tokens));
    let partial = r
        .tokens
        .iter()
        .filter(|&&id| std::str::from_utf8(m.tokenizer.token_bytes(id)).is_err())
        .count();
    assert!(
        partial > 0,
        "the test needs tokens that are parts of characters"
    );
    assert!(
        events.iter().any(|e| e.text.is_empty()),
        "some token completed no character"
    );
}

#[test]
fn a_stop_sequence_split_across_two_tokens_stops_and_is_trimmed() {
    let fx = fixture("tiny-random");
    let case = &fx.cases[1];
    let mut m = load(TINY);
    // Pick a boundary between two greedy tokens where a two-character stop text first occurs.
    let texts: Vec<String> = case
        .greedy_ids
        .iter()
        .map(|&id| m.tokenizer.decode(&[id]))
        .collect();
    let (k, stop) = (1..texts.len() - 1)
        .find_map(|k| {
            let (a, b) = (texts[k].chars().last()?, texts[k + 1].chars().next()?);
            let stop = format!("{a}{b}");
            let boundary = texts[..=k].concat().len();
            let first = texts.concat().find(&stop)?;
            (a.is_alphanumeric() && b.is_alphanumeric() && first == boundary - a.len_utf8())
                .then_some((k, stop))
        })
        .expect("a boundary to split a stop text over");
    let before: String = texts[..k].concat();
    let params = GenerateParams {
        max_tokens: 24,
        stop: vec![stop.clone()],
        ..Default::default()
    };
    let (r, events) = run_ids(&mut m, &case.ids, params);
    assert_eq!(r.stop_reason, StopReason::Stop);
    assert_eq!(r.tokens, case.greedy_ids[..k + 2]);
    let want = format!("{before}{}", &texts[k][..texts[k].len() - 1]);
    assert_eq!(r.text, want);
    assert_eq!(
        events.iter().map(|e| e.text.as_str()).collect::<String>(),
        want
    );
    assert!(!r.text.contains(&stop));
}

#[test]
fn end_of_text_stops_generation() {
    let fx = fixture("tiny-random");
    let case = &fx.cases[1];
    let mut m = load(TINY);
    // The tiny vocabulary has no 50256; declare the 6th greedy token to be end-of-text.
    m.config.eos_token_id = case.greedy_ids[5];
    let first = case
        .greedy_ids
        .iter()
        .position(|&id| id == case.greedy_ids[5])
        .unwrap();
    let (r, events) = run_ids(&mut m, &case.ids, greedy(24));
    assert_eq!(r.stop_reason, StopReason::Eos);
    assert_eq!(r.tokens, case.greedy_ids[..first + 1]);
    assert_eq!(events.len(), first + 1);
    assert_eq!(r.text, m.tokenizer.decode(&case.greedy_ids[..first]));
}

#[test]
fn the_context_limit_ends_generation() {
    let mut m = load(TINY);
    let n_ctx = m.config.n_positions;
    let ids: Vec<u32> = (0..n_ctx as u32 - 4).map(|i| 300 + i).collect();
    let (r, _) = run_ids(&mut m, &ids, greedy(100));
    assert_eq!(r.stop_reason, StopReason::Context);
    assert_eq!(r.tokens.len(), 5);
}

#[test]
fn a_prompt_longer_than_the_context_is_a_clear_error() {
    let mut m = load(TINY);
    let long = "word ".repeat(100);
    let e = generate(&mut m, &long, greedy(5), &mut |_| {}, &|| false).unwrap_err();
    assert!(matches!(e, Error::PromptTooLong { n_ctx: 64, .. }), "{e}");
    assert!(e.to_string().contains("context holds 64 tokens"), "{e}");
    // The model is still usable afterwards.
    assert_eq!(run_ids(&mut m, &[464], greedy(3)).0.tokens.len(), 3);
}

#[test]
fn cancel_stops_within_one_token() {
    let mut m = load(TINY);
    let count = std::cell::Cell::new(0);
    let r = generate(
        &mut m,
        "The",
        greedy(50),
        &mut |_| count.set(count.get() + 1),
        &|| count.get() >= 3,
    )
    .unwrap();
    assert_eq!(r.stop_reason, StopReason::Abort);
    assert_eq!(r.tokens.len(), 3);
}

#[test]
fn temperature_zero_is_greedy_and_seeds_reproduce() {
    let fx = fixture("tiny-random");
    let case = &fx.cases[2];
    let mut m = load(TINY);
    let (r, _) = run_ids(
        &mut m,
        &case.ids,
        GenerateParams {
            ignore_eos: true,
            ..greedy(24)
        },
    );
    assert_eq!(r.tokens, case.greedy_ids);
    let sample = |m: &mut gpt2_web::Model, seed| {
        let p = GenerateParams {
            max_tokens: 30,
            temperature: 1.0,
            top_k: 40,
            top_p: 0.95,
            seed,
            ..Default::default()
        };
        run_ids(m, &case.ids, p).0.tokens
    };
    assert_eq!(sample(&mut m, 5), sample(&mut m, 5));
    assert_ne!(sample(&mut m, 5), sample(&mut m, 6));
}

#[test]
fn bad_parameters_are_errors_not_panics() {
    let mut m = load(TINY);
    let bad = [
        GenerateParams {
            max_tokens: 0,
            ..Default::default()
        },
        GenerateParams {
            top_p: 1.5,
            ..Default::default()
        },
        GenerateParams {
            temperature: f32::INFINITY,
            ..Default::default()
        },
    ];
    for p in bad {
        let e = generate(&mut m, "x", p, &mut |_| {}, &|| false).unwrap_err();
        assert!(matches!(e, Error::Param { .. }), "{e}");
    }
    // Stop lists are capped, in count and in length, with a sentence that says so.
    for (stop, want) in [
        (vec!["x".to_string(); 17], "17 stop texts; at most 16"),
        (
            vec!["y".repeat(1001)],
            "a stop text of 1001 bytes; at most 1000",
        ),
    ] {
        let p = GenerateParams { stop, ..greedy(4) };
        let e = generate(&mut m, "x", p, &mut |_| {}, &|| false).unwrap_err();
        assert_eq!(e.to_string(), format!("invalid stop: {want}"));
    }
}

/// A temperature too small to divide by (1e-39 overflows the logits to infinity) behaves as
/// greedy: the same tokens as temperature 0, never NaN probabilities.
#[test]
fn a_tiny_temperature_is_greedy() {
    let mut m = load(TINY);
    let run = |m: &mut gpt2_web::Model, temperature: f32| {
        let p = GenerateParams {
            temperature,
            seed: 3,
            top_logprobs: 5,
            ..greedy(12)
        };
        let mut probs = Vec::new();
        let r = generate(
            m,
            "The",
            p,
            &mut |ev| probs.extend(ev.top.iter().map(|c| c.prob)),
            &|| false,
        )
        .unwrap();
        (r.tokens, probs)
    };
    let (want, _) = run(&mut m, 0.0);
    for t in [1e-39, 1e-30, 1e-6] {
        let (got, probs) = run(&mut m, t);
        assert_eq!(got, want, "temperature {t}");
        assert!(
            probs.iter().all(|p| p.is_finite()),
            "temperature {t}: {probs:?}"
        );
    }
}

#[test]
fn without_the_kv_cache_the_tokens_are_the_same() {
    // The naive loop recomputes the whole sequence at every step: one more row each time, the
    // same next token. q8's rows do not depend on the rows beside them, so it is exact by
    // construction; f32 prompts past 16 rows take candle's matmul, so the test holds its tokens.
    for dtype in [gpt2_web::CpuDtype::Q8, gpt2_web::CpuDtype::F32] {
        for (name, dir) in [("tiny-random", TINY), ("gpt2-shakespeare", DEMO)] {
            let fx = fixture(name);
            let mut m =
                gpt2_web::Model::load_dir(&root().join(dir), gpt2_web::BackendChoice::Cpu, dtype)
                    .unwrap();
            for case in &fx.cases {
                let params = |kv_cache| GenerateParams {
                    kv_cache,
                    ignore_eos: true,
                    ..greedy(20)
                };
                let (cached, _) = run_ids(&mut m, &case.ids, params(true));
                let (naive, events) = run_ids(&mut m, &case.ids, params(false));
                assert_eq!(
                    naive.tokens, cached.tokens,
                    "{name} {dtype:?} {:?}",
                    case.prompt
                );
                assert_eq!(events.len(), naive.tokens.len());
                assert_eq!(naive.metrics.target_forwards, naive.tokens.len());
            }
        }
    }
    let e = gpt2_web::Generation::from_ids(
        &load(TINY),
        vec![1, 2],
        GenerateParams {
            kv_cache: false,
            draft: gpt2_web::Draft::PromptLookup,
            ..greedy(4)
        },
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains("needs the KV cache"), "{e}");
}
