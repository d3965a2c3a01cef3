//! Prefix caching is exact: a generation that starts from keys and values an earlier one
//! computed (the same prompt again, a chat's history, a shared preamble, the n choices of a
//! prompt, alone or in a batch) gives the tokens it gives with the whole prompt run, and says how
//! many prompt tokens it reused.

mod common;
use common::*;
use gpt2_web::generate::Batch;
use gpt2_web::scheduler::{self, Prompt};
use gpt2_web::{BackendChoice, CpuDtype, GenerateParams, Generation, Model, Move};
use pollster::block_on;

fn load_as(dtype: CpuDtype) -> Model {
    Model::load_dir(&root().join(DEMO), BackendChoice::Cpu, dtype).unwrap()
}

const PREAMBLE: &str = "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\n";

fn params(seed: u64, prefix_cache: bool) -> GenerateParams {
    GenerateParams {
        max_tokens: 16,
        temperature: if seed == 0 { 0.0 } else { 0.9 },
        top_k: 40,
        seed,
        prefix_cache,
        ..Default::default()
    }
}

/// (tokens, cached prompt tokens) of a generation on `model`.
fn gen(model: &mut Model, prompt: &str, p: GenerateParams) -> (Vec<u32>, usize) {
    let (r, _) = run(model, prompt, p);
    (r.tokens, r.metrics.cached_prompt_tokens)
}

#[test]
fn a_prompt_run_in_pieces_gives_the_logits_of_the_whole_in_q8() {
    let mut model = load_as(CpuDtype::Q8);
    let s = model.tokenizer.encode(&PREAMBLE.repeat(2)).unwrap();
    let whole = block_on(model.predict(&s, 0)).unwrap().to_vec();
    for cut in [1, 5, 17, s.len() - 1] {
        block_on(model.predict(&s[..cut], 0)).unwrap();
        let split = block_on(model.predict(&s, cut)).unwrap();
        let same = whole
            .iter()
            .zip(split)
            .all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "the prompt cut after {cut} of {} ids", s.len());
    }
    // f32 products of more than 16 rows take candle's matmul, whose last bits differ from the
    // GEMV's: there nothing is reused.
    let mut f32_model = load_as(CpuDtype::F32);
    block_on(f32_model.predict(&s, 0)).unwrap();
    let held = |m: &Model| m.reusable_in(&s, std::iter::once(0)).map_or(0, |b| b.1);
    assert_eq!(held(&f32_model), 0);
    assert_eq!(held(&model), s.len() - 1);
}

#[test]
fn a_generation_reuses_what_an_earlier_one_computed_and_gives_the_same_tokens() {
    let mut model = load_as(CpuDtype::Q8);
    let mut fresh = load_as(CpuDtype::Q8);
    let n_pre = model.tokenizer.encode(PREAMBLE).unwrap().len();
    for seed in [0, 3] {
        // The same prompt again: all of it but the last token.
        let (first, c0) = gen(&mut model, PREAMBLE, params(seed, true));
        let (again, c1) = gen(&mut model, PREAMBLE, params(seed, true));
        assert_eq!((c0 > 0, c1), (c0 > 0, n_pre - 1), "seed {seed}");
        assert_eq!(first, again, "seed {seed}");
        // A chat's history: the prompt and its answer, then more.
        let history = format!("{PREAMBLE}{}\n", model.tokenizer.decode(&again));
        let (next, c2) = gen(&mut model, &history, params(seed, true));
        assert!(c2 >= n_pre, "seed {seed}: {c2} of the history reused");
        let (want, none) = gen(&mut fresh, &history, params(seed, false));
        assert_eq!((next, none), (want, 0), "seed {seed}");
        // A different prompt reuses only what it shares (here nothing) and is unchanged.
        let other = "JULIET.\nWherefore art thou";
        let (got, c3) = gen(&mut model, other, params(seed, true));
        assert_eq!(
            (got, c3),
            (gen(&mut fresh, other, params(seed, false)).0, 0)
        );
    }
}

#[test]
fn a_batch_shares_a_prompt_between_its_sequences_and_keeps_finished_ones() {
    let mut model = load_as(CpuDtype::Q8);
    let mut fresh = load_as(CpuDtype::Q8);
    let n_pre = model.tokenizer.encode(PREAMBLE).unwrap().len();
    // n choices of one prompt: the first runs it, the others copy its keys and values.
    let p = GenerateParams {
        n: 4,
        ..params(5, true)
    };
    let prompt = Prompt::Text(PREAMBLE.into());
    let c = scheduler::run(&mut model, None, prompt, p, &mut |_, _| {}, &|| false).unwrap();
    let rs = &c.choices;
    let cached: Vec<usize> = (rs.iter())
        .map(|r| r.metrics.as_ref().unwrap().cached_prompt_tokens)
        .collect();
    assert_eq!(cached, [0, n_pre - 1, n_pre - 1, n_pre - 1]);
    for (i, r) in rs.iter().enumerate() {
        let want = gen(&mut fresh, PREAMBLE, params(5 + i as u64, false)).0;
        assert_eq!(r.tokens, want, "choice {i}");
    }
    // Widgets with one preamble and their own questions, joining a batch at different steps:
    // each reuses the preamble from a slot that holds it (a finished one's included).
    let questions = ["Speak, speak.\n", "We know't, we know't.\n", "Resolved."];
    let mut batch = Batch::new();
    let mut got = vec![Vec::new(); questions.len()];
    let mut results = vec![None; questions.len()];
    let mut live: Vec<(usize, usize)> = Vec::new(); // (slot, question)
    for round in 0.. {
        if round % 3 == 0 && round / 3 < questions.len() {
            let i = round / 3;
            let prompt = format!("{PREAMBLE}{}", questions[i]);
            let g = Generation::new(&model, &prompt, params(0, true)).unwrap();
            live.push((block_on(batch.add(&mut model, g)).unwrap(), i));
        } else if batch.is_empty() && round / 3 >= questions.len() {
            break;
        }
        for (slot, p) in block_on(batch.step(&mut model)).unwrap() {
            let at = live.iter().position(|&(s, _)| s == slot).unwrap();
            let i = live[at].1;
            match p {
                Move::Token(ev) => got[i].push(ev.id),
                Move::Done => {
                    results[i] = batch.remove(slot).map(|g| g.result());
                    live.remove(at);
                }
                Move::Working => {}
            }
        }
    }
    for (i, q) in questions.iter().enumerate() {
        let prompt = format!("{PREAMBLE}{q}");
        let want = gen(&mut fresh, &prompt, params(0, false)).0;
        let r = results[i].as_ref().unwrap();
        assert_eq!((&got[i], &r.tokens), (&want, &want), "question {i}");
        assert!(r.metrics.cached_prompt_tokens >= n_pre - 1, "question {i}");
    }
}
