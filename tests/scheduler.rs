//! The scheduler's rules (src/scheduler), natively: requests join and leave between steps and
//! each gets the tokens it gets alone; `n` choices are the generations with seed + i, assembled
//! into one answer; the queue limit answers `busy`; an abort ends a queued request at once and a
//! running one before its next forward pass; one request's failure ends no other; what cannot
//! share a pass waits for the batch to empty, in queue order; models take turns; a disposed
//! model ends its requests with a sentence; a `logits` call and a draft model go through it too.

mod common;
use common::*;
use gpt2_web::generate::MAX_BATCH;
use gpt2_web::scheduler::{Event, Job, Output, Prompt, RequestId, Scheduler, MAX_QUEUE};
use gpt2_web::{BackendChoice, CpuDtype, Draft, GenerateParams, GenerationResult, Model};
use pollster::block_on;
use std::collections::BTreeMap;

fn load_as(dir: &str, dtype: CpuDtype) -> Model {
    Model::load_dir(&root().join(dir), BackendChoice::Cpu, dtype).unwrap()
}

const PROMPTS: &[&str] = &[
    "ROMEO.\n",
    "First Citizen:\nBefore we proceed any further, hear me speak.\n",
    "O",
    "The king is dead, and",
    "JULIET.\nWherefore art thou",
];

fn params(i: usize, sampled: bool) -> GenerateParams {
    GenerateParams {
        max_tokens: 8 + 3 * i,
        temperature: if sampled { 0.9 } else { 0.0 },
        top_k: 40,
        seed: 7 + i as u64,
        ..Default::default()
    }
}

fn job(prompt: &str, params: GenerateParams) -> Job {
    Job::Generate {
        prompt: Prompt::Text(prompt.into()),
        params,
        draft: None,
    }
}

/// What the events of a run said, request by request.
#[derive(Default)]
struct Seen {
    /// Token ids by (request, choice), in order.
    tokens: BTreeMap<(RequestId, usize), Vec<u32>>,
    done: BTreeMap<RequestId, Output>,
    failed: BTreeMap<RequestId, gpt2_web::Error>,
    /// The requests each step gave a token to, step by step.
    steps: Vec<Vec<RequestId>>,
    /// Requests in the order they ended.
    ended: Vec<RequestId>,
}

impl Seen {
    fn take(&mut self, events: Vec<Event>) {
        let mut step = Vec::new();
        for ev in events {
            match ev {
                Event::Token { id, choice, event } => {
                    assert!(!self.ended.contains(&id), "a token of {id} after its end");
                    self.tokens
                        .entry((id, choice.unwrap_or(0)))
                        .or_default()
                        .push(event.id);
                    step.push(id);
                }
                Event::Done { id, output } => {
                    assert!(!self.ended.contains(&id), "{id} ended twice");
                    self.ended.push(id);
                    self.done.insert(id, output);
                }
                Event::Failed { id, error } => {
                    assert!(!self.ended.contains(&id), "{id} ended twice");
                    self.ended.push(id);
                    self.failed.insert(id, error);
                }
                Event::Backend { .. } => {}
            }
        }
        self.steps.push(step);
    }

    fn result(&self, id: RequestId) -> &GenerationResult {
        match &self.done[&id] {
            Output::Completion(c) => &c.result,
            other => panic!("{id}: {other:?}"),
        }
    }
}

fn pump<M: std::borrow::BorrowMut<Model>>(s: &mut Scheduler<M>, seen: &mut Seen) {
    while s.has_work() {
        seen.take(block_on(s.step()));
    }
}

#[test]
fn requests_that_join_and_leave_between_steps_get_the_tokens_they_get_alone() {
    let mut model = load_as(DEMO, CpuDtype::Q8);
    for sampled in [false, true] {
        let want: Vec<GenerationResult> = (PROMPTS.iter().enumerate())
            .map(|(i, p)| generate(&mut model, p, params(i, sampled), &mut |_| {}, &|| false))
            .collect::<Result<_, _>>()
            .unwrap();
        let mut s: Scheduler<&mut Model> = Scheduler::new();
        let m = s.add_model(&mut model);
        let mut seen = Seen::default();
        // Three start together, the fourth joins after two steps, the fifth after five; the
        // second is aborted after four steps.
        for (i, p) in PROMPTS.iter().enumerate().take(3) {
            s.submit(i as u64, m, job(p, params(i, sampled))).unwrap();
        }
        for step in 1.. {
            match step {
                3 => s.submit(3, m, job(PROMPTS[3], params(3, sampled))).unwrap(),
                5 => s.abort(1),
                6 => s.submit(4, m, job(PROMPTS[4], params(4, sampled))).unwrap(),
                _ => {}
            }
            if !s.has_work() {
                break;
            }
            seen.take(block_on(s.step()));
        }
        assert_eq!(seen.ended.len(), PROMPTS.len(), "sampled={sampled}");
        for (i, w) in want.iter().enumerate() {
            let got = seen.result(i as u64);
            let streamed = &seen.tokens[&(i as u64, 0)];
            assert_eq!(
                &got.tokens, streamed,
                "request {i}: the events are the result"
            );
            if i == 1 {
                assert_eq!(got.stop_reason, gpt2_web::StopReason::Abort);
                assert!(w.tokens.starts_with(&got.tokens) && got.tokens.len() < w.tokens.len());
            } else {
                assert_eq!(got.tokens, w.tokens, "request {i}, sampled={sampled}");
                assert_eq!(got.stop_reason, w.stop_reason, "request {i}");
            }
        }
        // They shared passes: the widest step carried four of them.
        let widest = seen.steps.iter().map(Vec::len).max().unwrap();
        assert!(widest >= 3, "at most {widest} tokens in one step");
        assert!(seen.result(0).metrics.batch_size >= 3);
    }
}

#[test]
fn choice_i_of_n_is_the_generation_with_seed_plus_i() {
    let mut model = load_as(DEMO, CpuDtype::Q8);
    let p = GenerateParams {
        n: 3,
        seed: 4,
        temperature: 0.9,
        max_tokens: 10,
        ..Default::default()
    };
    let mut seen = Vec::new();
    let prompt = Prompt::Text(PROMPTS[0].into());
    let on_token = &mut |i, _: &gpt2_web::TokenEvent| seen.push(i);
    let c = gpt2_web::scheduler::run(&mut model, None, prompt, p.clone(), on_token, &|| false);
    let c = c.unwrap();
    assert_eq!(c.choices.len(), 3);
    assert_eq!(
        c.result.tokens, c.choices[0].tokens,
        "the answer is choice 0's"
    );
    for (i, ch) in c.choices.iter().enumerate() {
        assert_eq!(ch.index, i);
        let one = GenerateParams {
            n: 1,
            seed: 4 + i as u64,
            ..p.clone()
        };
        let alone = generate(&mut model, PROMPTS[0], one, &mut |_| {}, &|| false).unwrap();
        assert_eq!(alone.tokens, ch.tokens, "choice {i}");
        assert_eq!(seen.iter().filter(|&&c| c == i).count(), ch.tokens.len());
        assert!(ch.metrics.as_ref().unwrap().batch_size >= 2);
    }
    // The plain loop only, and at most MAX_CHOICES: refused when submitted.
    let mut s: Scheduler<&mut Model> = Scheduler::new();
    let m = s.add_model(&mut model);
    for (bad, what) in [
        (
            GenerateParams {
                n: 2,
                num_beams: 2,
                ..Default::default()
            },
            "plain loop",
        ),
        (
            GenerateParams {
                n: 17,
                ..Default::default()
            },
            "17 is not in 1..=16",
        ),
    ] {
        let e = s.submit(1, m, job("a", bad)).unwrap_err();
        assert!(e.to_string().contains(what), "{e}");
        assert_eq!(e.code(), "param");
    }
    assert!(!s.has_work(), "nothing refused was queued");
}

#[test]
fn a_full_queue_answers_busy_and_an_abort_of_a_queued_request_answers_at_once() {
    let mut model = load_as(TINY, CpuDtype::Q8);
    let mut s: Scheduler<&mut Model> = Scheduler::new();
    let m = s.add_model(&mut model);
    let short = GenerateParams {
        max_tokens: 2,
        ..Default::default()
    };
    // MAX_QUEUE members wait (a request of n choices counts n).
    let four = GenerateParams {
        n: 4,
        ..short.clone()
    };
    for id in 0..(MAX_QUEUE / 4) as u64 {
        s.submit(id, m, job("a", four.clone())).unwrap();
    }
    let e = s.submit(999, m, job("a", short.clone())).unwrap_err();
    assert_eq!(e.code(), "busy");
    assert!(
        e.to_string().contains(&format!("at most {MAX_QUEUE}")),
        "{e}"
    );
    // An id in flight is refused too.
    assert_eq!(
        s.submit(3, m, job("a", short.clone())).unwrap_err().code(),
        "state"
    );
    // Aborted while queued: answered by the next step, before anything runs, as never run.
    s.abort(7);
    let first = block_on(s.step());
    let done: Vec<&Event> = first
        .iter()
        .filter(|e| matches!(e, Event::Done { .. }))
        .collect();
    assert!(matches!(done[0], Event::Done { id: 7, .. }), "{first:?}");
    if let Event::Done {
        output: Output::Completion(c),
        ..
    } = done[0]
    {
        assert_eq!(c.result.stop_reason, gpt2_web::StopReason::Abort);
        assert!(c.result.tokens.is_empty());
        assert_eq!(c.choices.len(), 4);
        assert!(c.choices.iter().all(|ch| ch.metrics.is_none()));
    }
    // Room for one more request of four now.
    s.submit(999, m, job("a", four)).unwrap();
    let mut seen = Seen::default();
    seen.take(first);
    pump(&mut s, &mut seen);
    assert_eq!(seen.ended.len(), MAX_QUEUE / 4 + 1);
    assert!(seen.failed.is_empty(), "{:?}", seen.failed);
    // At most MAX_BATCH shared a step.
    let widest = seen.steps.iter().map(Vec::len).max().unwrap();
    assert_eq!(widest, MAX_BATCH);
}

#[test]
fn one_request_failing_ends_no_other() {
    let mut model = load_as(TINY, CpuDtype::Q8);
    let n_ctx = model.config.n_positions;
    let ok = GenerateParams {
        max_tokens: 6,
        ..Default::default()
    };
    let want = run_ids(&mut model, &[1, 2, 3], ok.clone()).0.tokens;
    let mut s: Scheduler<&mut Model> = Scheduler::new();
    let m = s.add_model(&mut model);
    let ids = |v: Vec<u32>, p: &GenerateParams| Job::Generate {
        prompt: Prompt::Ids(v),
        params: p.clone(),
        draft: None,
    };
    s.submit(1, m, ids(vec![1, 2, 3], &ok)).unwrap();
    // A prompt longer than the context, an id outside the vocabulary: their own errors.
    s.submit(2, m, ids(vec![5; n_ctx + 1], &ok)).unwrap();
    s.submit(3, m, ids(vec![1, 99_999], &ok)).unwrap();
    let three = GenerateParams { n: 3, ..ok.clone() };
    s.submit(4, m, ids(vec![99_999], &three)).unwrap();
    s.submit(5, m, ids(vec![1, 2, 3], &ok)).unwrap();
    let mut seen = Seen::default();
    pump(&mut s, &mut seen);
    assert_eq!(seen.failed[&2].code(), "prompt_too_long");
    assert!(seen.failed[&2].to_string().contains(&n_ctx.to_string()));
    assert_eq!(seen.failed[&3].code(), "tokenizer");
    assert!(seen.failed[&3].to_string().contains("99999"));
    assert_eq!(
        seen.failed[&4].code(),
        "tokenizer",
        "one failure for the three choices"
    );
    assert_eq!(seen.ended.iter().filter(|&&id| id == 4).count(), 1);
    assert_eq!(seen.result(1).tokens, want);
    assert_eq!(seen.result(5).tokens, want);
}

#[test]
fn what_cannot_share_a_pass_runs_alone_in_queue_order() {
    let mut model = load_as(DEMO, CpuDtype::Q8);
    let plain = |i| params(i, false);
    let beams = GenerateParams {
        num_beams: 3,
        max_tokens: 8,
        ..Default::default()
    };
    let naive = GenerateParams {
        kv_cache: false,
        ..plain(1)
    };
    let want_beams = generate(&mut model, PROMPTS[1], beams.clone(), &mut |_| {}, &|| {
        false
    });
    let want_naive = generate(&mut model, PROMPTS[2], naive.clone(), &mut |_| {}, &|| {
        false
    });
    let want_plain = generate(&mut model, PROMPTS[0], plain(0), &mut |_| {}, &|| false);
    let mut s: Scheduler<&mut Model> = Scheduler::new();
    let m = s.add_model(&mut model);
    s.submit(0, m, job(PROMPTS[0], plain(0))).unwrap();
    s.submit(1, m, job(PROMPTS[1], beams)).unwrap();
    s.submit(2, m, job(PROMPTS[0], plain(0))).unwrap();
    s.submit(3, m, job(PROMPTS[2], naive)).unwrap();
    s.submit(4, m, job(PROMPTS[0], plain(0))).unwrap();
    let mut seen = Seen::default();
    pump(&mut s, &mut seen);
    assert_eq!(
        seen.ended,
        [0, 1, 2, 3, 4],
        "each waits for the one before it"
    );
    // No step carried a token of the beam search or the naive loop and another request's.
    for step in &seen.steps {
        if step.iter().any(|&id| id == 1 || id == 3) {
            assert!(step.iter().all(|&id| id == step[0]), "{step:?}");
        }
    }
    assert_eq!(seen.result(1).tokens, want_beams.unwrap().tokens);
    assert_eq!(seen.result(3).tokens, want_naive.unwrap().tokens);
    for id in [0, 2, 4] {
        assert_eq!(seen.result(id).tokens, want_plain.as_ref().unwrap().tokens);
    }
}

#[test]
fn models_take_turns_and_a_disposed_one_ends_its_requests() {
    let mut a = load_as(TINY, CpuDtype::Q8);
    let mut b = load_as(TINY, CpuDtype::F32);
    let long = GenerateParams {
        max_tokens: 10,
        ignore_eos: true,
        ..Default::default()
    };
    let mut s: Scheduler<&mut Model> = Scheduler::new();
    let (ma, mb) = (s.add_model(&mut a), s.add_model(&mut b));
    s.submit(1, ma, job("a", long.clone())).unwrap();
    s.submit(2, mb, job("a", long.clone())).unwrap();
    let mut seen = Seen::default();
    pump(&mut s, &mut seen);
    // Step by step, one model then the other.
    let order: Vec<RequestId> = seen.steps.iter().flatten().copied().collect();
    assert_eq!(order.len(), 20);
    assert!(order.windows(2).all(|w| w[0] != w[1]), "{order:?}");
    // Dispose: the running request and the queued one end with a sentence each; the model comes
    // back; the id is refused afterwards.
    s.submit(3, ma, job("a", long.clone())).unwrap();
    s.submit(
        4,
        ma,
        job(
            "a",
            GenerateParams {
                num_beams: 2,
                ..long.clone()
            },
        ),
    )
    .unwrap();
    let mut seen = Seen::default();
    seen.take(block_on(s.step()));
    let model = s.dispose(ma).unwrap().expect("home between steps");
    assert_eq!(model.config.n_positions, 64);
    pump(&mut s, &mut seen);
    assert!(seen.failed[&3]
        .to_string()
        .contains("disposed during generation"));
    assert!(seen.failed[&4]
        .to_string()
        .contains("disposed before this generation ran"));
    let e = s.submit(5, ma, job("a", long)).unwrap_err();
    assert!(e.to_string().contains("disposed"), "{e}");
}

#[test]
fn logits_calls_and_draft_models_go_through_it() {
    let mut target = load_as(DEMO, CpuDtype::F32);
    let mut draft = load_as(DEMO, CpuDtype::Q8);
    let ids = target.tokenizer.encode(PROMPTS[1]).unwrap();
    let want_logits = block_on(target.predict(&ids, 0)).unwrap().to_vec();
    let greedy = GenerateParams {
        max_tokens: 12,
        ..Default::default()
    };
    let want = run_ids(&mut target, &ids, greedy.clone()).0.tokens;
    let mut s: Scheduler<&mut Model> = Scheduler::new();
    let (mt, md) = (s.add_model(&mut target), s.add_model(&mut draft));
    // The draft model is busy with a request of its own first: the drafted one waits for it.
    s.submit(1, md, job(PROMPTS[0], greedy.clone())).unwrap();
    let mut seen = Seen::default();
    seen.take(block_on(s.step()));
    let drafted = Job::Generate {
        prompt: Prompt::Ids(ids.clone()),
        params: GenerateParams {
            draft: Draft::Model,
            ..greedy.clone()
        },
        draft: Some(md),
    };
    s.submit(2, mt, drafted.clone()).unwrap();
    s.submit(3, md, job(PROMPTS[0], greedy.clone())).unwrap();
    let logits = |cache| Job::Logits {
        ids: ids.clone(),
        cache,
    };
    s.submit(4, mt, logits(true)).unwrap();
    s.submit(5, mt, logits(false)).unwrap();
    s.abort(5);
    pump(&mut s, &mut seen);
    assert_eq!(
        seen.result(2).tokens,
        want,
        "drafted greedy is plain greedy"
    );
    assert!(seen.result(2).metrics.drafted_tokens > 0);
    let pos = |id| seen.ended.iter().position(|&e| e == id).unwrap();
    assert!(
        pos(1) < pos(2),
        "the drafted request waited for the draft model's"
    );
    assert!(
        pos(2) < pos(3),
        "the draft model admitted nothing new meanwhile"
    );
    match &seen.done[&4] {
        Output::Logits(Some(l)) => assert!(l.logits == want_logits && l.reused == 0),
        other => panic!("{other:?}"),
    }
    assert!(matches!(seen.done[&5], Output::Logits(None)));
    // A draft model that is the model itself, or not given, or unknown: refused.
    let mut bad = drafted.clone();
    if let Job::Generate { draft, .. } = &mut bad {
        *draft = Some(mt);
    }
    assert!(s.submit(6, mt, bad).is_err());
    let e = s
        .submit(
            7,
            mt,
            job(
                "a",
                GenerateParams {
                    draft: Draft::Model,
                    ..greedy
                },
            ),
        )
        .unwrap_err();
    assert!(e.to_string().contains("draft model"), "{e}");
}
