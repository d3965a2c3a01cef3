//! Batching is exact: every sequence of a batch gets the tokens it gets alone — greedy and
//! seeded sampling, in q8 and f32 on the CPU and on WebGPU — with prompts of different lengths
//! joining at different steps and one aborted midway, and when the GPU is lost midway; and a batched pass gives each row the
//! logits of a pass alone, bit for bit, and greedy's pass their argmaxes. One body per behaviour, run on every backend (WebGPU on
//! lavapipe in CI; elsewhere without an adapter a loud note, and CI=true fails).

mod common;
mod gpu_common;
use common::*;
use gpt2_web::generate::{Batch, MAX_BATCH};
use gpt2_web::{BackendChoice, CpuDtype, GenerateParams, Generation, Model, Move, StopReason};
use pollster::block_on;

fn load_as(dir: &str, dtype: CpuDtype) -> Model {
    Model::load_dir(&root().join(dir), BackendChoice::Cpu, dtype).unwrap()
}

/// The model in `dir` on every backend there is: the CPU and WebGPU, each in q8 and in f32.
fn backends(dir: &str) -> Vec<Model> {
    let mut models = vec![load_as(dir, CpuDtype::Q8), load_as(dir, CpuDtype::F32)];
    if gpu_common::gpu().is_some() {
        for dtype in [CpuDtype::Q8, CpuDtype::F32] {
            let gpu = Model::load_dir(&root().join(dir), BackendChoice::WebGpu, dtype);
            models.push(gpu.unwrap_or_else(|e| panic!("{dir} on the GPU in {dtype:?}: {e}")));
        }
    }
    models
}

/// "cpu q8", "webgpu f32": which backend a check ran on.
fn on(model: &Model) -> String {
    let b = model.backend();
    format!("{} {}", b.name(), b.dtype_name())
}

const PROMPTS: &[&str] = &[
    "ROMEO.\n",
    "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n",
    "O",
    "The king is dead, and",
    "JULIET.\nWherefore art thou",
];

fn params(i: usize, sampled: bool) -> GenerateParams {
    GenerateParams {
        max_tokens: 12 + 3 * i,
        temperature: if sampled { 0.9 } else { 0.0 },
        top_k: 40,
        seed: 7 + i as u64,
        ..Default::default()
    }
}

/// The ids a generation of `prompt` gives alone.
fn alone(model: &mut Model, prompt: &str, p: GenerateParams) -> (Vec<u32>, StopReason) {
    let r = generate(model, prompt, p, &mut |_| {}, &|| false).unwrap();
    (r.tokens, r.stop_reason)
}

#[test]
fn a_batched_pass_gives_each_row_the_logits_of_a_pass_alone() {
    for mut model in backends(DEMO) {
        let on = on(&model);
        let seqs: Vec<Vec<u32>> = PROMPTS
            .iter()
            .map(|p| model.tokenizer.encode(p).unwrap())
            .collect();
        let v = model.config.vocab_size;
        // Each sequence alone, in slot 0: its prompt but the last id, then the last id.
        let mut want = Vec::new();
        for s in &seqs {
            let (head, last) = s.split_at(s.len() - 1);
            if !head.is_empty() {
                block_on(model.predict(head, 0)).unwrap();
            }
            want.push(
                block_on(model.predict(&[head, last].concat(), head.len()))
                    .unwrap()
                    .to_vec(),
            );
        }
        // All of them: their prompts but the last id (in q8 in one pass of rows of different
        // lengths; else each alone, as `Batch` runs prompts: more than `batch_rows` f32 rows
        // take candle's matmul), then every last id in one pass of single rows.
        block_on(model.kv_slots(seqs.len())).unwrap();
        let heads: Vec<(usize, &[u32], usize)> = (seqs.iter().enumerate())
            .filter(|(_, s)| s.len() > 1)
            .map(|(i, s)| (i, &s[..s.len() - 1], 0))
            .collect();
        let per_pass = if model.backend().rows_alike() {
            heads.len()
        } else {
            1
        };
        for pass in heads.chunks(per_pass) {
            block_on(model.predict_batch(pass)).unwrap();
        }
        assert!(seqs.len() <= model.backend().batch_rows());
        let lasts: Vec<(usize, &[u32], usize)> = seqs
            .iter()
            .enumerate()
            .map(|(i, s)| (i, &s[..], s.len() - 1))
            .collect();
        let out = block_on(model.predict_batch(&lasts)).unwrap().to_vec();
        assert_eq!(out.len(), seqs.len() * v);
        for (i, w) in want.iter().enumerate() {
            assert!(
                out[i * v..(i + 1) * v] == w[..],
                "{on}: row {i} differs from its pass alone"
            );
        }
        // Greedy's pass (on the GPU chosen there, no logits read back): each row's argmax.
        let chosen = block_on(model.predict_argmax(&lasts, false))
            .unwrap()
            .to_vec();
        let argmaxes: Vec<u32> = out.chunks(v).map(gpt2_web::sampling::argmax).collect();
        assert_eq!(chosen, argmaxes, "{on}: greedy's pass chose other ids");
        // Sampling's pass (on the GPU chosen there): each row's 40 largest with their ids.
        let top = block_on(model.predict_top(&lasts, 40)).unwrap().to_vec();
        let mut want = Vec::new();
        out.chunks(v)
            .for_each(|r| gpt2_web::sampling::top_k(r, 40, &mut want));
        let sorted = |c: &[(f32, u32)]| -> Vec<Vec<(u32, u32)>> {
            let row = |r: &[(f32, u32)]| {
                let mut r: Vec<(u32, u32)> = r.iter().map(|c| (c.0.to_bits(), c.1)).collect();
                r.sort_by_key(|c| c.1);
                r
            };
            c.chunks(40).map(row).collect()
        };
        assert_eq!(
            sorted(&top),
            sorted(&want),
            "{on}: sampling's pass gave other candidates"
        );
    }
}

#[test]
fn sampling_from_the_top_k_reads_back_only_them_and_draws_the_same_tokens() {
    // top_logprobs reads the whole row of logits; without it a top-k sampler reads its k
    // candidates alone (`Want::Top`), and draws the same tokens from them.
    for mut model in backends(DEMO) {
        let on = on(&model);
        for (i, prompt) in PROMPTS.iter().enumerate() {
            let p = params(i, true);
            let (top, _) = alone(&mut model, prompt, p.clone());
            let whole = GenerateParams {
                top_logprobs: 1,
                ..p.clone()
            };
            let r = generate(&mut model, prompt, whole, &mut |_| {}, &|| false).unwrap();
            assert_eq!(top, r.tokens, "{on}: prompt {i}");
            let r = generate(&mut model, prompt, p, &mut |_| {}, &|| false).unwrap();
            if let Some(gpu) = r.metrics.gpu {
                let per_pass = gpu.readback_bytes / gpu.passes;
                assert!(
                    per_pass <= 8 * 40,
                    "{on}: {per_pass} bytes read back per pass"
                );
            }
        }
    }
}

#[test]
fn a_greedy_step_on_the_gpu_submits_the_next_before_it_is_read_back_with_the_same_tokens() {
    // Greedy reads back each step's argmax alone, and the GPU submits the step after it first,
    // that argmax copied on the device as its id (`Want::ArgmaxAhead`). Its tokens are those of
    // the same generation reading whole rows (`top_logprobs`: no step ahead); every decode step
    // but the first was submitted ahead, and none of those went unused.
    for mut model in backends(DEMO) {
        let Some(before) = model.backend().gpu_totals() else {
            continue;
        };
        let on = on(&model);
        let p = GenerateParams {
            max_tokens: 20,
            temperature: 0.0,
            ignore_eos: true,
            ..Default::default()
        };
        let r = generate(&mut model, PROMPTS[0], p.clone(), &mut |_| {}, &|| false).unwrap();
        let whole = GenerateParams {
            top_logprobs: 1,
            ..p
        };
        let w = generate(&mut model, PROMPTS[0], whole, &mut |_| {}, &|| false).unwrap();
        assert_eq!(r.tokens, w.tokens, "{on}: the tokens differ");
        let (gpu, whole_gpu) = (r.metrics.gpu.unwrap(), w.metrics.gpu.unwrap());
        assert_eq!((gpu.passes, gpu.ahead), (20, 18), "{on}: {gpu:?}");
        assert_eq!(whole_gpu.ahead, 0, "{on}: {whole_gpu:?}");
        let unused = model.backend().gpu_totals().unwrap().unused - before.unused;
        assert_eq!(unused, 0, "{on}: passes submitted ahead and not used");
    }
}

#[test]
fn every_sequence_of_a_batch_gets_the_tokens_it_gets_alone() {
    for mut model in backends(DEMO) {
        for sampled in [false, true] {
            batch_as_alone(&mut model, sampled, None);
        }
    }
}

#[test]
fn a_batch_that_loses_the_gpu_ends_on_the_cpu_with_every_members_tokens() {
    // In f32, where the CPU's tokens are the GPU's: the device is lost at the batch's fourth
    // step, with four members in it; the model goes on on the CPU, each member's sequence
    // recomputed there, and every member ends with the tokens it gets alone on the GPU.
    if gpu_common::gpu().is_none() {
        return;
    }
    let load = || Model::load_dir(&root().join(DEMO), BackendChoice::WebGpu, CpuDtype::F32);
    for sampled in [false, true] {
        batch_as_alone(&mut load().unwrap(), sampled, Some(4));
    }
}

/// Five generations through one batch, joining at different steps, one aborted: each gets the
/// tokens it gets alone. With `lose_gpu`, the GPU is lost before that step.
fn batch_as_alone(model: &mut Model, sampled: bool, lose_gpu: Option<usize>) {
    let want: Vec<_> = (PROMPTS.iter().enumerate())
        .map(|(i, p)| alone(model, p, params(i, sampled)))
        .collect();
    let what = format!("{} sampled={sampled} lose_gpu={lose_gpu:?}", on(model));
    // Three start together, the fourth joins after 2 steps, the fifth after 5; the second is
    // aborted after 4 steps.
    let ahead_before = model.backend().gpu_totals().map(|c| c.ahead);
    let mut batch = Batch::new();
    let mut got: Vec<Vec<u32>> = vec![Vec::new(); PROMPTS.len()];
    let mut slot_of = vec![usize::MAX; PROMPTS.len()];
    let mut ended = vec![None; PROMPTS.len()];
    let join = |batch: &mut Batch, model: &mut Model, i: usize, slot_of: &mut Vec<usize>| {
        let g = Generation::new(model, PROMPTS[i], params(i, sampled)).unwrap();
        slot_of[i] = block_on(batch.add(model, g)).unwrap();
    };
    for i in 0..3 {
        join(&mut batch, model, i, &mut slot_of);
    }
    for step in 1.. {
        if step == 3 {
            join(&mut batch, model, 3, &mut slot_of);
        }
        if step == 6 {
            join(&mut batch, model, 4, &mut slot_of);
        }
        if step == 5 {
            batch.get_mut(slot_of[1]).unwrap().cancel();
        }
        if lose_gpu == Some(step) {
            match model.backend() {
                gpt2_web::Backend::WebGpu(gpu) => gpu.lose_device(),
                gpt2_web::Backend::Cpu(_) => panic!("{what}: not on the GPU at step {step}"),
            }
        }
        for (slot, progress) in block_on(batch.step(model)).unwrap() {
            let i = slot_of.iter().position(|&s| s == slot).unwrap();
            match progress {
                Move::Token(ev) => got[i].push(ev.id),
                Move::Done => {
                    let r = batch.remove(slot).unwrap().result();
                    assert_eq!(r.tokens, got[i], "{what}: {i}'s result");
                    ended[i] = Some(r.stop_reason);
                    slot_of[i] = usize::MAX - 1 - i; // free; never matched again
                }
                Move::Working => panic!("{what}: the plain loop settled no token"),
            }
        }
        if batch.is_empty() && step > 6 {
            break;
        }
        assert!(step < 200, "{what}: the batch never ended");
    }
    if !sampled && lose_gpu.is_none() {
        ran_ahead(model, ahead_before, &what);
    }
    if lose_gpu.is_some() {
        assert_eq!(model.backend().name(), "cpu", "{what}");
        let why = model.gpu_unavailable.as_deref().unwrap_or_default();
        assert!(why.contains("device was lost"), "{what}: {why}");
    }
    assert!(
        batch.widest() >= 3,
        "{what}: at most {} sequences shared a pass",
        batch.widest()
    );
    for (i, (ids, stop)) in want.iter().enumerate() {
        if i == 1 {
            assert_eq!(ended[i], Some(StopReason::Abort), "{what}");
            assert!(
                got[i].len() >= 3 && ids.starts_with(&got[i]),
                "{what}: the aborted one's tokens {:?} are not a start of {ids:?}",
                got[i]
            );
        } else {
            assert_eq!(
                &got[i], ids,
                "{what}: sequence {i} differs from its generation alone"
            );
            assert_eq!(ended[i], Some(*stop), "{what}: sequence {i}'s stop reason");
        }
    }
}

/// On the GPU, that a greedy batch's steps with the same members as the step before were
/// submitted ahead (`before`: the backend's count of them before the batch).
fn ran_ahead(model: &Model, before: Option<usize>, what: &str) {
    if let (Some(before), Some(now)) = (before, model.backend().gpu_totals()) {
        let ahead = now.ahead - before;
        assert!(ahead >= 10, "{what}: {ahead} steps submitted ahead");
    }
}

#[test]
fn only_the_plain_loop_joins_a_batch_and_a_batch_has_a_limit() {
    let mut model = load_as(TINY, CpuDtype::Q8);
    let beams = GenerateParams {
        num_beams: 2,
        ..Default::default()
    };
    let g = Generation::new(&model, "a", beams).unwrap();
    let e = block_on(Batch::new().add(&mut model, g)).err().unwrap();
    assert_eq!(e.code(), "param");
    // A profile, or the KV cache off, runs the plain loop too: alone (the scheduler's call).
    let off = GenerateParams {
        kv_cache: false,
        ..Default::default()
    };
    let g = Generation::new(&model, "a", off).unwrap();
    block_on(Batch::new().add(&mut model, g)).unwrap();
    assert!(e.to_string().contains("plain loop"), "{e}");
    let mut batch = Batch::new();
    for _ in 0..MAX_BATCH {
        let g = Generation::new(&model, "a", GenerateParams::default()).unwrap();
        block_on(batch.add(&mut model, g)).unwrap();
    }
    let g = Generation::new(&model, "a", GenerateParams::default()).unwrap();
    let e = block_on(batch.add(&mut model, g)).err().unwrap();
    assert!(
        e.to_string().contains(&format!("at most {MAX_BATCH}")),
        "{e}"
    );
    // A slot given back is taken again.
    batch.remove(5).unwrap();
    let g = Generation::new(&model, "a", GenerateParams::default()).unwrap();
    assert_eq!(block_on(batch.add(&mut model, g)).unwrap(), 5);
}
