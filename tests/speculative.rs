//! Speculative decoding is exact: with a draft, greedy output is token for token the plain
//! output, and sampled output has the target's distribution (a chi-square test that a wrong
//! acceptance rule fails). The verification pass's rows equal single steps bit for bit.

mod common;
use common::*;
use gpt2_web::sampling::Sampler;
use gpt2_web::{BackendChoice, CpuDtype, Draft, GenerateParams, Model, StopReason};
use pollster::block_on;

fn load_as(dir: &str, dtype: CpuDtype) -> Model {
    Model::load_dir(&root().join(dir), BackendChoice::Cpu, dtype).unwrap()
}

fn params(max_tokens: usize, draft: Draft) -> GenerateParams {
    GenerateParams {
        max_tokens,
        ignore_eos: true,
        draft,
        ..Default::default()
    }
}

/// Prompts of the demo model: ones whose continuation repeats, and ordinary ones.
const PROMPTS: &[&str] = &[
    "ROMEO: I love thee, I love thee, I love thee, I love thee, I love",
    "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\nFirst Citizen:\n",
    "The king is dead",
    "O",
];

#[test]
fn the_verification_pass_gives_each_row_a_single_step_would() {
    for dtype in [CpuDtype::Q8, CpuDtype::F32] {
        let mut model = load_as(DEMO, dtype);
        let ids = model.tokenizer.encode(PROMPTS[0]).unwrap();
        let (head, tail) = ids.split_at(ids.len() - 6);
        block_on(model.predict(head, 0)).unwrap();
        let v = model.config.vocab_size;
        // The head over the first two rows, then the rest: the same as all at once.
        let mut all = block_on(model.verify(&ids, head.len(), 2))
            .unwrap()
            .to_vec();
        assert_eq!(all.len(), 2 * v);
        all.extend_from_slice(model.more_logits(2, tail.len()).unwrap());
        assert!(
            model.more_logits(2, tail.len() + 1).is_err(),
            "rows past the pass"
        );
        block_on(model.predict(head, 0)).unwrap();
        for i in 0..tail.len() {
            let one = block_on(model.predict(&ids[..head.len() + i + 1], head.len() + i))
                .unwrap()
                .to_vec();
            assert!(
                one == all[i * v..(i + 1) * v],
                "{dtype:?}: row {i} differs from the single step"
            );
        }
    }
}

#[test]
fn greedy_with_prompt_lookup_or_mtp_heads_is_plain_greedy_token_for_token() {
    let drafts = [Draft::PromptLookup, Draft::Mtp];
    let mut kept_any = [false; 2];
    for (dir, dtype) in [
        (DEMO, CpuDtype::Q8),
        (DEMO, CpuDtype::F32),
        (TINY, CpuDtype::Q8),
        (TINY, CpuDtype::F32),
    ] {
        let mut model = load_as(dir, dtype);
        let prompts: Vec<Vec<u32>> = if dir == TINY {
            // The tiny model's vocabulary lacks most words: prompts as ids, one repeating. Its
            // heads are synthetic (tests/common); the demo model ships trained ones.
            model = with_heads(model, &synthetic_heads(TINY, 3, 1999, 1));
            let fx = fixture("tiny-random");
            let mut p: Vec<Vec<u32>> = fx.cases.iter().map(|c| c.ids.clone()).collect();
            p.push([5, 17, 99, 5, 17, 99, 5, 17].to_vec());
            p
        } else {
            assert!(model.mtp.is_some(), "the demo model ships no heads");
            PROMPTS
                .iter()
                .map(|p| model.tokenizer.encode(p).unwrap())
                .collect()
        };
        for ids in &prompts {
            let (plain, _) = run_ids(&mut model, ids, params(40, Draft::None));
            assert_eq!(plain.metrics.target_forwards, plain.tokens.len());
            for (d, draft) in drafts.into_iter().enumerate() {
                let (spec, events) = run_ids(&mut model, ids, params(40, draft));
                assert_eq!(
                    spec.tokens, plain.tokens,
                    "{draft:?} {dir} {dtype:?} {ids:?}"
                );
                assert_eq!(spec.text, plain.text);
                assert_eq!(events.len(), spec.tokens.len(), "one event per token");
                let m = &spec.metrics;
                let drafted_events = events.iter().filter(|e| e.drafted).count();
                assert_eq!(drafted_events, m.accepted_draft_tokens);
                assert_eq!(
                    m.target_forwards + m.accepted_draft_tokens,
                    spec.tokens.len()
                );
                kept_any[d] |= m.accepted_draft_tokens > 0;
            }
        }
    }
    assert_eq!(
        kept_any, [true; 2],
        "no draft token was ever kept ({drafts:?}): speculation did nothing"
    );
}

#[test]
fn a_repeating_prompt_takes_fewer_model_steps() {
    let mut model = load_as(DEMO, CpuDtype::Q8);
    let ids = model.tokenizer.encode(PROMPTS[0]).unwrap();
    let (r, _) = run_ids(&mut model, &ids, params(64, Draft::PromptLookup));
    let m = &r.metrics;
    assert!(
        m.target_forwards * 3 < r.tokens.len() * 2,
        "{} forwards for {} tokens",
        m.target_forwards,
        r.tokens.len()
    );
}

#[test]
fn stops_are_exact_under_speculation() {
    let mut model = load_as(DEMO, CpuDtype::Q8);
    let ids = model.tokenizer.encode(PROMPTS[0]).unwrap();
    for max in [1, 2, 3, 7, 13] {
        let (r, ev) = run_ids(&mut model, &ids, params(max, Draft::PromptLookup));
        assert_eq!(r.tokens.len(), max);
        assert_eq!(ev.len(), max);
        assert_eq!(r.stop_reason, StopReason::MaxTokens);
    }
    // A stop text inside a kept draft: nothing after it is emitted, as without a draft.
    let (plain, _) = run_ids(&mut model, &ids, params(40, Draft::None));
    let stop = plain.text.get(10..16).unwrap_or(" thee").to_string();
    let with_stop = |draft| GenerateParams {
        stop: vec![stop.clone()],
        ..params(40, draft)
    };
    let (a, ea) = run_ids(&mut model, &ids, with_stop(Draft::None));
    let (b, eb) = run_ids(&mut model, &ids, with_stop(Draft::PromptLookup));
    assert_eq!(
        (a.stop_reason, b.stop_reason),
        (StopReason::Stop, StopReason::Stop)
    );
    assert_eq!((&a.text, &a.tokens), (&b.text, &b.tokens));
    let texts = |e: &[gpt2_web::TokenEvent]| e.iter().map(|e| e.text.clone()).collect::<Vec<_>>();
    assert_eq!(texts(&ea), texts(&eb));
    // The context limit: the demo model holds 256 positions.
    let long: Vec<u32> = ids.iter().cycle().take(250).copied().collect();
    let (r, _) = run_ids(&mut model, &long, params(40, Draft::PromptLookup));
    assert_eq!(r.stop_reason, StopReason::Context);
    assert_eq!(r.tokens.len(), 256 - 250 + 1);
}

/// Pearson's chi-square of `counts` against probabilities `p` (cells with expected count < 5
/// pooled), and its degrees of freedom.
fn chi_square(counts: &[usize], p: &[f64]) -> (f64, usize) {
    let n: usize = counts.iter().sum();
    let (mut chi, mut cells, mut pool_o, mut pool_e) = (0.0, 0usize, 0.0, 0.0);
    for (&o, &p) in counts.iter().zip(p) {
        let e = p * n as f64;
        if e < 5.0 {
            pool_o += o as f64;
            pool_e += e;
        } else {
            chi += (o as f64 - e).powi(2) / e;
            cells += 1;
        }
    }
    if pool_e > 0.0 {
        chi += (pool_o - pool_e).powi(2) / pool_e.max(1e-9);
        cells += 1;
    }
    (chi, cells.saturating_sub(1))
}

/// The 0.999 quantile of chi-square with `df` degrees of freedom (Wilson–Hilferty).
fn chi_square_limit(df: usize) -> f64 {
    let k = df as f64;
    let z = 3.09;
    k * (1.0 - 2.0 / (9.0 * k) + z * (2.0 / (9.0 * k)).sqrt()).powi(3)
}

/// Sampling at temperature 1 with top-k 3 and `seed`.
fn top3(seed: u64) -> GenerateParams {
    GenerateParams {
        temperature: 1.0,
        top_k: 3,
        seed,
        ..Default::default()
    }
}

/// The sampler's distribution (top-3) after `ids`, from the model's logits.
fn dist(model: &mut Model, ids: &[u32]) -> Vec<(u32, f64)> {
    let mut l = block_on(model.predict(ids, 0)).unwrap().to_vec();
    let mut top = Vec::new();
    Sampler::new(top3(0).sampling()).verify(&mut l, ids, None, 3, &mut top);
    top.iter().map(|c| (c.id, c.prob as f64)).collect()
}

/// Every three-token continuation of `prompt` under `top3` sampling, with its exact probability
/// p(a) p(b | a) p(c | a, b).
fn exact_three(model: &mut Model, prompt: &[u32]) -> Vec<(Vec<u32>, f64)> {
    let mut exact = Vec::new();
    for (a, pa) in dist(model, prompt) {
        let pa_ids = [prompt, &[a]].concat();
        for (b, pb) in dist(model, &pa_ids) {
            let pb_ids = [&pa_ids[..], &[b]].concat();
            for (c, pc) in dist(model, &pb_ids) {
                exact.push((vec![a, b, c], pa * pb * pc));
            }
        }
    }
    exact
}

/// The counts drawn with the rule follow `p`; those drawn with the wrong rule do not.
fn assert_rule_and_catch_the_wrong_one(right: &[usize], wrong: &[usize], p: &[f64]) {
    let (chi, df) = chi_square(right, p);
    assert!(
        chi < chi_square_limit(df),
        "rule: chi² {chi} with {df} df: {right:?} vs {p:?}"
    );
    let (chi, df) = chi_square(wrong, p);
    assert!(
        chi > chi_square_limit(df),
        "the wrong rule passed: chi² {chi}"
    );
}

#[test]
fn the_acceptance_rule_keeps_the_distribution_and_a_wrong_one_is_caught() {
    // One position, logits over 6 tokens, sampling at temperature 1 with top-k 5; the draft
    // proposes token 2. Draws with the rule must follow p; "keep the draft whenever p(draft) >
    // 0.1", a plausible mistake, must fail the same test.
    let logits = [1.0f32, 0.2, 0.9, -0.5, 0.0, -3.0];
    let sp = GenerateParams {
        temperature: 1.0,
        top_k: 5,
        seed: 7,
        ..Default::default()
    };
    let mut s = Sampler::new(sp.sampling());
    let mut top = Vec::new();
    let p: Vec<f64> = {
        let mut l = logits;
        s.verify(&mut l, &[], None, 6, &mut top);
        let mut p = vec![0.0; 6];
        top.iter().for_each(|c| p[c.id as usize] = c.prob as f64);
        p
    };
    let n = 20_000;
    let (mut right, mut wrong) = (vec![0; 6], vec![0; 6]);
    for _ in 0..n {
        let mut l = logits;
        let (id, _) = s.verify(&mut l, &[], Some(2), 0, &mut top);
        right[id as usize] += 1;
        let mut l = logits;
        let id = if p[2] > 0.1 {
            2
        } else {
            s.verify(&mut l, &[], None, 0, &mut top).0
        };
        wrong[id as usize] += 1;
    }
    assert_rule_and_catch_the_wrong_one(&right, &wrong, &p);
}

#[test]
fn sampled_sequences_under_speculation_follow_the_model() {
    // The first three tokens, sampled at temperature 1 with top-k 3 over many seeds: their joint
    // distribution must be the model's, computed exactly from its logits. The prompt holds the
    // likely next tokens, so that lookup drafts from the second token on.
    let model = load_as(TINY, CpuDtype::F32);
    let mut model = with_heads(model, &synthetic_heads(TINY, 2, 1999, 2));
    let mut prompt: Vec<u32> = vec![5, 17, 99];
    for _ in 0..12 {
        let next: Vec<u32> = dist(&mut model, &prompt).iter().map(|d| d.0).collect();
        let missing: Vec<u32> = next.into_iter().filter(|t| !prompt.contains(t)).collect();
        if missing.is_empty() {
            break;
        }
        prompt.extend(missing);
    }
    let exact = exact_three(&mut model, &prompt);
    let p: Vec<f64> = exact.iter().map(|e| e.1).collect();
    for draft in [Draft::PromptLookup, Draft::Mtp] {
        let mut counts = vec![0usize; exact.len()];
        let (mut drafted, mut kept, n) = (0, 0, 4000);
        for seed in 0..n {
            // Four tokens, so that the third may come from a draft too; the first three count.
            let params = GenerateParams {
                max_tokens: 4,
                ignore_eos: true,
                draft,
                ..top3(seed)
            };
            let (r, _) = run_ids(&mut model, &prompt, params.clone());
            if seed < 20 {
                let (again, _) = run_ids(&mut model, &prompt, params);
                assert_eq!(
                    again.tokens, r.tokens,
                    "{draft:?}: seed {seed} did not repeat itself"
                );
            }
            (drafted, kept) = (
                drafted + r.metrics.drafted_tokens,
                kept + r.metrics.accepted_draft_tokens,
            );
            let at = exact.iter().position(|(s, _)| *s == r.tokens[..3]);
            counts[at.unwrap_or_else(|| panic!("{:?} is outside the top-3 sets", r.tokens))] += 1;
        }
        assert!(
            drafted > n as usize / 4 && kept > 0,
            "{draft:?}: the drafter proposed too little to test ({drafted} drafted, {kept} kept)"
        );
        eprintln!(
            "{draft:?}: {drafted} draft tokens ({kept} kept) over {n} generations of {prompt:?}"
        );
        let (chi, df) = chi_square(&counts, &p);
        assert!(
            chi < chi_square_limit(df),
            "{draft:?}: chi² {chi} with {df} df"
        );
    }
}

#[test]
fn draft_settings_are_checked() {
    let mut model = load(TINY);
    for k in [0, 16] {
        let p = GenerateParams {
            draft_tokens: k,
            ..params(4, Draft::PromptLookup)
        };
        let e = gpt2_web::Generation::from_ids(&model, vec![1, 2], p)
            .err()
            .unwrap();
        assert!(e.to_string().contains("draft_tokens"), "{e}");
    }
    assert!("prompt-lookup".parse::<Draft>().is_ok());
    assert!("tea-leaves".parse::<Draft>().is_err());
    let _ = &mut model;
}

#[test]
fn greedy_with_a_draft_model_is_plain_greedy_token_for_token() {
    // The target in f32, the draft the same model in q8: close, not equal, distributions.
    let mut target = load_as(DEMO, CpuDtype::F32);
    let mut draft = load_as(DEMO, CpuDtype::Q8);
    for prompt in PROMPTS {
        let ids = target.tokenizer.encode(prompt).unwrap();
        let (plain, _) = run_ids(&mut target, &ids, params(40, Draft::None));
        let mut events = Vec::new();
        let on_token = &mut |e: &gpt2_web::TokenEvent| events.push(e.clone());
        let p = params(40, Draft::Model);
        let spec = generate_ids(&mut target, Some(&mut draft), &ids, p, on_token).unwrap();
        assert_eq!(spec.tokens, plain.tokens, "{prompt:?}");
        assert_eq!(events.len(), spec.tokens.len());
        let m = &spec.metrics;
        assert!(
            m.accepted_draft_tokens * 2 > m.drafted_tokens,
            "{m:?}: q8 should mostly agree with f32"
        );
        assert_eq!(
            m.target_forwards + m.accepted_draft_tokens,
            spec.tokens.len()
        );
    }
    // Without the draft model, or with one of another vocabulary: a sentence.
    let e = generate_ids(
        &mut target,
        None,
        &[1, 2],
        params(4, Draft::Model),
        &mut |_| {},
    );
    let e = e.unwrap_err();
    assert!(e.to_string().contains("draft model"), "{e}");
    let mut tiny = load(TINY);
    let p = params(4, Draft::Model);
    let e = generate_ids(&mut target, Some(&mut tiny), &[1, 2], p, &mut |_| {}).unwrap_err();
    assert!(e.to_string().contains("vocabulary"), "{e}");
}

#[test]
fn sampled_sequences_with_a_draft_model_follow_the_target() {
    // Target: the tiny model in f32 at temperature 1, top-k 3. Draft: the same model in q8, so q
    // differs from p a little and both the acceptance and the residual draw are exercised.
    let mut target = load_as(TINY, CpuDtype::F32);
    let mut draft = load_as(TINY, CpuDtype::Q8);
    let prompt: Vec<u32> = vec![5, 17, 99];
    let exact = exact_three(&mut target, &prompt);
    let mut counts = vec![0usize; exact.len()];
    let (mut drafted, mut rejected, n) = (0, 0, 3000);
    for seed in 0..n {
        let params = GenerateParams {
            max_tokens: 4,
            ignore_eos: true,
            draft: Draft::Model,
            draft_tokens: 3,
            ..top3(seed)
        };
        let r = generate_ids(&mut target, Some(&mut draft), &prompt, params, &mut |_| {}).unwrap();
        drafted += r.metrics.drafted_tokens;
        rejected += r.metrics.drafted_tokens - r.metrics.accepted_draft_tokens;
        let at = exact.iter().position(|(s, _)| *s == r.tokens[..3]);
        counts[at.unwrap_or_else(|| panic!("{:?} is outside the top-3 sets", r.tokens))] += 1;
    }
    assert!(
        drafted > n as usize && rejected > 0,
        "drafted {drafted}, rejected {rejected}"
    );
    let p: Vec<f64> = exact.iter().map(|e| e.1).collect();
    let (chi, df) = chi_square(&counts, &p);
    assert!(chi < chi_square_limit(df), "chi² {chi} with {df} df");
}

#[test]
fn the_draft_model_rule_keeps_the_distribution_and_a_wrong_one_is_caught() {
    // p from the target's logits, q from the draft's (different); d ~ q, then the rule must give
    // p. "Keep d whenever p(d) > 0" (ignoring q) gives q instead and must fail.
    let target = [1.0f32, 0.2, 0.9, -0.5, 0.0, -3.0];
    let draft = [0.1f32, 1.5, 0.3, 0.8, -1.0, 0.0];
    let sp = |seed| {
        let p = GenerateParams {
            temperature: 1.0,
            seed,
            ..Default::default()
        };
        Sampler::new(p.sampling())
    };
    let (mut s, mut ds) = (sp(3), sp(4));
    let (mut q, mut p) = (Vec::new(), Vec::new());
    ds.distribution(&mut draft.clone(), &[], &mut q);
    s.distribution(&mut target.clone(), &[], &mut p);
    let p: Vec<f64> = p.iter().map(|&x| x as f64).collect();
    let mut top = Vec::new();
    let (mut right, mut wrong) = (vec![0; 6], vec![0; 6]);
    for _ in 0..20_000 {
        let d = ds.draw(&q);
        let (id, _) = s.verify_with_q(&mut target.clone(), &[], d, &q, 0, &mut top);
        right[id as usize] += 1;
        wrong[d as usize] += 1;
    }
    assert_rule_and_catch_the_wrong_one(&right, &wrong, &p);
}

#[test]
fn a_profile_times_a_generation_that_runs_alone_and_only_when_asked() {
    use gpt2_web::scheduler::{self, Prompt};
    let mut model = load_as(DEMO, CpuDtype::Q8);
    let ids = model.tokenizer.encode(PROMPTS[0]).unwrap();
    let run = |model: &mut Model, p: GenerateParams| {
        let prompt = Prompt::Ids(ids.clone());
        scheduler::run(model, None, prompt, p, &mut |_, _| {}, &|| false).unwrap()
    };
    let beams = GenerateParams {
        num_beams: 3,
        ..params(12, Draft::None)
    };
    for (name, p) in [
        ("prompt lookup", params(24, Draft::PromptLookup)),
        ("beams", beams),
    ] {
        let asked = GenerateParams {
            profile: true,
            ..p.clone()
        };
        let c = run(&mut model, asked);
        let prof = c.profile.unwrap_or_else(|| panic!("{name}: no profile"));
        // The prompt's pass, then the steps' passes, each of several rows (a draft's, the beams').
        assert_eq!(
            (prof.prompt.calls, prof.prompt.tokens),
            (1, ids.len()),
            "{name}"
        );
        assert!(
            prof.decode.calls > 0 && prof.decode.total_ms > 0.0,
            "{name}"
        );
        assert!(prof.decode.tokens > prof.decode.calls, "{name}: {prof:?}");
        if name == "prompt lookup" {
            assert_eq!(prof.decode.calls + 1, c.result.metrics.target_forwards);
        }
        let c = run(&mut model, p);
        assert!(c.profile.is_none(), "{name}: a profile nobody asked for");
        assert!(
            model.backend().profile().is_none(),
            "{name}: profiling left on"
        );
    }
}
