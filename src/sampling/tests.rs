use super::*;

/// Greedy decoding: every filter off.
fn greedy() -> SamplingParams {
    SamplingParams {
        temperature: 0.0,
        top_k: 0,
        top_p: 1.0,
        min_p: 0.0,
        repetition_penalty: 1.0,
        seed: 0,
    }
}

fn params(f: impl FnOnce(&mut SamplingParams)) -> SamplingParams {
    let mut p = SamplingParams {
        temperature: 1.0,
        seed: 7,
        ..greedy()
    };
    f(&mut p);
    p
}

/// The set of ids a sampler can pick from `logits`, found by sampling many times.
fn support(p: SamplingParams, logits: &[f32]) -> Vec<u32> {
    let mut s = Sampler::new(p);
    let mut ids: Vec<u32> = (0..2000)
        .map(|_| s.pick(&mut logits.to_vec(), &[], 0, &mut Vec::new()))
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

// probabilities of ln([0.5, 0.25, 0.15, 0.1]) are exactly those numbers
fn four() -> Vec<f32> {
    [0.5f32, 0.25, 0.15, 0.1].iter().map(|p| p.ln()).collect()
}

#[test]
fn top_k_keeps_the_k_largest() {
    assert_eq!(support(params(|p| p.top_k = 2), &four()), [0, 1]);
    assert_eq!(support(params(|p| p.top_k = 10), &four()), [0, 1, 2, 3]);
}

#[test]
fn top_p_keeps_the_smallest_set_reaching_p() {
    // cumulative: 0.5, 0.75, 0.9, 1.0
    assert_eq!(support(params(|p| p.top_p = 0.5), &four()), [0]);
    assert_eq!(support(params(|p| p.top_p = 0.6), &four()), [0, 1]);
    assert_eq!(support(params(|p| p.top_p = 0.8), &four()), [0, 1, 2]);
}

#[test]
fn min_p_drops_tokens_below_a_fraction_of_the_top() {
    // threshold 0.4 × 0.5 = 0.2 keeps 0.5 and 0.25
    assert_eq!(support(params(|p| p.min_p = 0.4), &four()), [0, 1]);
    // threshold 0.25 × 0.5 = 0.125 keeps 0.15 too
    assert_eq!(support(params(|p| p.min_p = 0.25), &four()), [0, 1, 2]);
}

#[test]
fn repetition_penalty_divides_positive_and_multiplies_negative_logits() {
    let mut s = Sampler::new(params(|p| p.repetition_penalty = 2.0));
    let mut logits = vec![4.0, -1.0, 3.0, 1.0];
    s.apply_repetition_penalty(&mut logits, &[0, 1, 0]);
    assert_eq!(logits, [2.0, -2.0, 3.0, 1.0]);
    // Greedy with the penalty now picks token 2.
    let mut g = Sampler::new(SamplingParams {
        repetition_penalty: 2.0,
        ..greedy()
    });
    assert_eq!(
        g.pick(&mut [4.0, -1.0, 3.0, 1.0], &[0], 0, &mut Vec::new()),
        2
    );
}

#[test]
fn sampling_frequencies_follow_the_distribution() {
    let mut s = Sampler::new(params(|_| {}));
    let mut counts = [0usize; 4];
    let n = 20000;
    for _ in 0..n {
        counts[s.pick(&mut four(), &[], 0, &mut Vec::new()) as usize] += 1;
    }
    for (c, p) in counts.iter().zip([0.5, 0.25, 0.15, 0.1]) {
        let f = *c as f64 / n as f64;
        assert!((f - p).abs() < 0.015, "frequency {f} vs probability {p}");
    }
}

#[test]
fn seeded_sampling_is_reproducible_and_seed_dependent() {
    let logits: Vec<f32> = (0..1000)
        .map(|i| ((i * 7919) % 1000) as f32 / 300.0)
        .collect();
    let run = |seed| {
        let mut s = Sampler::new(params(|p| {
            p.seed = seed;
            p.top_p = 0.95;
        }));
        (0..50)
            .map(|_| s.pick(&mut logits.clone(), &[], 0, &mut Vec::new()))
            .collect::<Vec<_>>()
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
}

#[test]
fn rng_matches_reference_xoshiro256starstar() {
    // First outputs for state [1, 2, 3, 4] from the reference C implementation.
    let mut r = Rng { s: [1, 2, 3, 4] };
    let got: Vec<u64> = (0..3).map(|_| r.next_u64()).collect();
    assert_eq!(got, [11520, 0, 1509978240]);
}

#[test]
fn temperature_zero_is_argmax_and_top_list_holds_the_pick() {
    let mut s = Sampler::new(greedy());
    let mut top = Vec::new();
    let id = s.pick(&mut four(), &[], 3, &mut top);
    assert_eq!(id, 0);
    assert_eq!(top.iter().map(|c| c.id).collect::<Vec<_>>(), [0, 1, 2]);
    assert!((top[0].prob - 0.5).abs() < 1e-6);
    let sum: f32 = top.iter().map(|c| c.prob).sum();
    assert!(sum <= 1.0 + 1e-6);
}

#[test]
fn top_list_is_the_distribution_after_filtering() {
    let mut s = Sampler::new(params(|p| p.top_k = 2));
    let mut top = Vec::new();
    s.pick(&mut four(), &[], 10, &mut top);
    assert_eq!(top.len(), 2);
    assert!((top[0].prob - 2.0 / 3.0).abs() < 1e-6, "{top:?}");
}

#[test]
fn the_picked_tokens_probability_is_its_share_of_the_distribution_drawn_from() {
    let logits: Vec<f32> = (0..50).map(|i| ((i * 37) % 11) as f32 * 0.4).collect();
    for p in [
        params(|_| {}),
        params(|p| p.top_k = 5),
        params(|p| (p.top_p, p.temperature) = (0.7, 0.6)),
        params(|p| (p.min_p, p.repetition_penalty) = (0.2, 1.3)),
    ] {
        let mut s = Sampler::new(p.clone());
        let mut dist = Vec::new();
        Sampler::new(p).distribution(&mut logits.clone(), &[3, 4], &mut dist);
        for _ in 0..20 {
            let mut top = Vec::new();
            let id = s.pick(&mut logits.clone(), &[3, 4], 3, &mut top);
            let got = s.picked_prob().unwrap();
            assert!(
                (got - dist[id as usize]).abs() < 1e-6,
                "{got} vs {}",
                dist[id as usize]
            );
            if let Some(c) = top.iter().find(|c| c.id == id) {
                assert_eq!(c.prob, got);
            }
        }
        s.pick(&mut logits.clone(), &[], 0, &mut Vec::new());
        assert_eq!(
            s.picked_prob(),
            None,
            "no candidates asked for, no probability"
        );
    }
    // Greedy: the argmax's softmax at temperature 1, the first candidate.
    let mut s = Sampler::new(greedy());
    let mut top = Vec::new();
    let id = s.pick(&mut four(), &[], 2, &mut top);
    assert_eq!((id, top[0].id), (0, 0));
    assert!((s.picked_prob().unwrap() - 0.5).abs() < 1e-6);
}

/// What a backend gives a sampler that reads only the top k (`Want::Top`): `pick_top` over the
/// k largest draws the token `pick` draws from the whole row, step after step with one
/// generator, for top-k alone and with temperature, top-p and min-p after it, k at and above
/// `top_k`, greedy, and rows with ties at the k-th logit.
#[test]
fn pick_top_over_the_k_largest_is_pick_over_the_row() {
    let mut rng = Rng::new(3);
    let mut row = |tenths: bool| -> Vec<f32> {
        (0..5000)
            .map(|_| {
                let x = (rng.next_f64() * 16.0 - 8.0) as f32;
                if tenths {
                    (x * 10.0).round() / 10.0
                } else {
                    x
                }
            })
            .collect()
    };
    let rows: Vec<Vec<f32>> = (0..40).map(|i| row(i % 2 == 1)).collect();
    let settings = [
        params(|p| p.top_k = 40),
        params(|p| (p.top_k, p.temperature) = (5, 0.3)),
        params(|p| (p.top_k, p.top_p, p.temperature) = (50, 0.9, 1.3)),
        params(|p| (p.top_k, p.min_p) = (100, 0.05)),
        params(|p| (p.top_k, p.temperature) = (1, 0.8)),
        greedy(),
    ];
    for p in settings {
        let k = p.reads_top().unwrap();
        for extra in [0, 7] {
            let (mut whole, mut top) = (Sampler::new(p.clone()), Sampler::new(p.clone()));
            for (i, r) in rows.iter().enumerate() {
                let want = whole.pick(&mut r.clone(), &[], 0, &mut Vec::new());
                let mut cand = Vec::new();
                top_k(r, k + extra, &mut cand);
                cand.reverse(); // any order
                assert_eq!(top.pick_top(&cand), want, "{p:?}, k + {extra}, row {i}");
            }
        }
    }
    assert_eq!(params(|p| p.repetition_penalty = 1.1).reads_top(), None);
    assert_eq!(params(|p| p.top_k = 0).reads_top(), None);
}

/// `top_k` is the first k of a sort by value (total order, larger first; NaN last), then index.
#[test]
fn top_k_is_the_first_k_of_the_sort() {
    let row: Vec<f32> = [3.0, -0.0, 1.0, f32::NAN, 3.0, 0.0, 1.0, f32::NEG_INFINITY].to_vec();
    for k in 0..=9 {
        let mut got = Vec::new();
        top_k(&row, k, &mut got);
        let nan_last = |a: &(f32, u32), b: &(f32, u32)| a.0.is_nan().cmp(&b.0.is_nan());
        got.sort_by(|a, b| nan_last(a, b).then(b.0.total_cmp(&a.0)).then(a.1.cmp(&b.1)));
        let ids: Vec<u32> = got.iter().map(|c| c.1).collect();
        assert_eq!(ids, [0, 4, 2, 6, 5, 1, 7, 3][..k.min(8)], "k = {k}");
    }
}

#[test]
fn argmax_is_the_first_largest_as_in_order_whatever_the_values() {
    // Ties, NaNs, −∞ and both zeros, at every length around the lanes' and at the vocabulary's.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as u32
    };
    let pick = [
        f32::NAN,
        f32::NEG_INFINITY,
        -0.0,
        0.0,
        1.5,
        -2.0,
        7.25,
        f32::INFINITY,
    ];
    let mut checked = 0;
    for len in (0..70).chain([50_257]) {
        for trial in 0..200 {
            let xs: Vec<f32> = (0..len)
                .map(|_| match next() % 16 {
                    k @ 0..=7 if trial % 3 == 0 => pick[k as usize],
                    0 => f32::NAN,
                    1 => f32::NEG_INFINITY,
                    k => (next() % 9) as f32 - 4.0 + (k % 2) as f32 * 0.5, // few values: ties
                })
                .collect();
            assert_eq!(argmax(&xs), argmax_in_order(&xs), "{xs:?}");
            checked += 1;
        }
    }
    assert_eq!(checked, 71 * 200);
    // Known answers: the first of two maxima; a NaN first keeps 0; a later NaN is never chosen.
    let mut xs = vec![0.0f32; 40];
    (xs[17], xs[33]) = (3.0, 3.0);
    assert_eq!(argmax(&xs), 17);
    xs[0] = f32::NAN;
    assert_eq!(argmax(&xs), 0);
    (xs[0], xs[5]) = (1.0, f32::NAN);
    assert_eq!(argmax(&xs), 17);
}
