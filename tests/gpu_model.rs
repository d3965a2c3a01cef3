//! The GPU backend end to end, where it differs from the CPU (the behaviours every backend shares,
//! against transformers' fixtures, are tests/parity.rs's, run there on the GPU too): the whole
//! context, the split embedding under WebGPU's default limits, backend selection, device loss
//! becoming an error or a fall-back, drafts, the naive loop, GGUF weights and batches on the GPU.

mod common;
mod gpu_common;

use common::{assert_close, fixture, forward_at, root, DEMO, TINY};
use gpt2_web::backend::gpu::{GpuBackend, GpuOptions};
use gpt2_web::backend::{Seq, Want};
use gpt2_web::weights::Gpt2Weights;
use gpt2_web::{Backend, BackendChoice, Config, CpuDtype, Error, GenerateParams, Model};
use pollster::block_on;

/// The model in `dir` on the GPU, or `None` (after the loud note) when there is no adapter.
fn gpu_model(dir: &str) -> Option<Model> {
    gpu_common::gpu()?;
    Some(
        Model::load_dir(&root().join(dir), BackendChoice::WebGpu, CpuDtype::F32)
            .unwrap_or_else(|e| panic!("{dir} on the GPU: {e}")),
    )
}

fn gpu(model: &Model) -> &GpuBackend {
    match &model.backend() {
        Backend::WebGpu(b) => b,
        Backend::Cpu(_) => panic!("expected the GPU backend"),
    }
}

#[test]
fn gpu_fills_the_whole_context() {
    let Some(mut model) = gpu_model(TINY) else {
        return;
    };
    let mut cpu = common::load(TINY);
    let n_ctx = model.config.n_positions;
    let ids: Vec<u32> = (0..n_ctx as u32).map(|i| (i * 31 + 7) % 1999).collect();
    let on_gpu = forward_at(&mut model, &ids, 0).unwrap().to_vec();
    let on_cpu = forward_at(&mut cpu, &ids, 0).unwrap().to_vec();
    assert_close(&on_gpu, &on_cpu, 1e-4, 1e-3, "all n_ctx positions at once");
    let err = forward_at(&mut model, &[1], n_ctx).unwrap_err();
    assert!(err.to_string().contains("context"), "{err}");
}

/// The tiny model's config and weights, for building backends with options.
/// The logits of `ids` at `pos..` in slot 0 of a backend of its own.
fn pass(backend: &mut Backend, ids: &[u32], pos: usize) -> Vec<f32> {
    let seq = [Seq { slot: 0, ids, pos }];
    block_on(backend.pass(&seq, Want::Last)).unwrap().to_vec()
}

fn tiny_parts() -> (Config, Vec<u8>) {
    let dir = root().join(TINY);
    let config = Config::from_json(&std::fs::read(dir.join("config.json")).unwrap()).unwrap();
    (
        config,
        std::fs::read(dir.join("model.safetensors")).unwrap(),
    )
}

#[test]
fn split_embedding_under_default_limits_gives_the_same_logits() {
    let Some(mut whole) = gpu_model(TINY) else {
        return;
    };
    assert_eq!(gpu(&whole).wte_chunks(), 1);
    let (config, bytes) = tiny_parts();
    let w = Gpt2Weights::load("model.safetensors", &bytes, &config).unwrap();
    // wte is 1999 × 96 × 4 = 767,616 bytes; 200 KiB bindings split it into 4 chunks.
    let opts = GpuOptions {
        default_limits: true,
        max_binding_bytes: Some(200 << 10),
        ..Default::default()
    };
    let split = block_on(GpuBackend::new(&config, &w, &opts)).unwrap();
    assert_eq!(split.wte_chunks(), 4);
    let mut split = Backend::WebGpu(split);
    let fx = fixture("tiny-random");
    for case in &fx.cases {
        let a = forward_at(&mut whole, &case.ids, 0).unwrap().to_vec();
        let b = pass(&mut split, &case.ids, 0);
        assert_close(&b, &a, 1e-6, 1e-6, "split wte vs whole, prefill");
        // A decode step whose token lives in the last chunk.
        let (next, pos) = (1998, case.ids.len());
        let a = forward_at(&mut whole, &[next], pos).unwrap().to_vec();
        let b = pass(&mut split, &[next], pos);
        assert_close(&b, &a, 1e-6, 1e-6, "split wte vs whole, decode");
    }
    // Chunks show in the dispatch count: embedding and head once per chunk. A decode step has
    // six per layer (ln_1 and ln_2 fused into the GEMVs after them), a prompt eight.
    let n_layer = config.n_layer;
    assert_eq!(split.gpu_dispatches(), Some(4 + 6 * n_layer + 1 + 4));
    assert_eq!(
        whole.backend().gpu_dispatches(),
        Some(1 + 6 * n_layer + 1 + 1)
    );
    pass(&mut split, &[5, 6, 7], 0); // a prompt of three
    assert_eq!(split.gpu_dispatches(), Some(4 + 8 * n_layer + 1 + 4));
}

#[test]
fn a_model_over_the_limits_is_a_clear_error() {
    if gpu_common::gpu().is_none() {
        return;
    }
    let (config, bytes) = tiny_parts();
    let w = Gpt2Weights::load("model.safetensors", &bytes, &config).unwrap();
    let opts = GpuOptions {
        max_binding_bytes: Some(64 << 10),
        ..Default::default()
    };
    let err = block_on(GpuBackend::new(&config, &w, &opts))
        .err()
        .expect("a 64 KiB binding cannot hold mlp.c_fc");
    assert!(matches!(err, Error::Gpu(_)), "{err}");
    assert!(err.to_string().contains("does not fit"), "{err}");
}

#[test]
fn a_batchs_decode_step_is_one_pass_with_one_sequences_dispatches() {
    let Some(mut model) = gpu_model(TINY) else {
        return;
    };
    block_on(model.kv_slots(3)).unwrap();
    let seqs: [&[u32]; 3] = [&[5, 6, 7], &[9], &[1, 2]];
    // Each prompt but its last id, alone (a prompt of one id has nothing before its last).
    for (slot, s) in seqs.iter().enumerate().filter(|(_, s)| s.len() > 1) {
        block_on(model.predict_batch(&[(slot, &s[..s.len() - 1], 0)])).unwrap();
    }
    // One sequence's decode step, then the three sequences' last ids in one step.
    block_on(model.predict(&[5, 6, 7], 2)).unwrap();
    let one = model.backend().gpu_dispatches().unwrap();
    let rows: Vec<(usize, &[u32], usize)> = (seqs.iter().enumerate())
        .map(|(slot, s)| (slot, *s, s.len() - 1))
        .collect();
    let (v, c) = (model.config.vocab_size, model.config.n_embd);
    let before = model.backend().gpu_totals().unwrap();
    let logits = block_on(model.predict_batch(&rows)).unwrap();
    assert_eq!(logits.len(), 3 * v);
    let step = model.backend().gpu_totals().unwrap() - before;
    let read = 3 * (v + c) * 4; // the logits and the final hidden rows
    assert_eq!((step.submissions, step.dispatches), (1, one));
    assert_eq!(step.readback_bytes, read);
    assert_eq!(model.backend().gpu_last_pass(), Some(step));
    // Greedy's step: the same submission with the argmax after the head, 4 bytes per sequence.
    let before = model.backend().gpu_totals().unwrap();
    let chosen = block_on(model.predict_argmax(&rows, false)).unwrap().len();
    let step = model.backend().gpu_totals().unwrap() - before;
    assert_eq!(chosen, 3);
    assert_eq!((step.submissions, step.dispatches), (1, one + 1));
    assert_eq!(step.readback_bytes, 3 * 4);
    // Prompts of several ids run one after another: their dispatches add up.
    let prompts: Vec<(usize, &[u32], usize)> = vec![(0, &[5, 6, 7], 0), (2, &[1, 2], 0)];
    block_on(model.predict_batch(&prompts)).unwrap();
    let each = model.backend().gpu_dispatches().unwrap();
    assert!(
        each > 2 * one,
        "{each} dispatches for two prompts, {one} for a step"
    );
    let argmax = block_on(model.predict_argmax(&prompts, false))
        .unwrap()
        .len();
    let counted = model.backend().gpu_last_pass().unwrap();
    assert_eq!((argmax, counted.submissions), (2, 2));
    assert_eq!(counted.readback_bytes, 2 * 4);
}

#[test]
fn more_sequences_than_one_buffer_holds_is_a_budget_error() {
    if gpu_common::gpu().is_none() {
        return;
    }
    let (config, bytes) = tiny_parts();
    let w = Gpt2Weights::load("model.safetensors", &bytes, &config).unwrap();
    let limit = 200 << 10;
    let opts = GpuOptions {
        default_limits: true,
        max_binding_bytes: Some(limit as u64),
        ..Default::default()
    };
    let mut gpu = Backend::WebGpu(block_on(GpuBackend::new(&config, &w, &opts)).unwrap());
    // Every slot's keys (and values) of a block share one buffer of n_ctx × C floats a slot.
    let most = limit / (config.n_positions * config.n_embd * 4);
    assert!(most >= 2, "the test wants room for two slots, not {most}");
    pass(&mut gpu, &[5, 6], 0);
    let before = pass(&mut gpu, &[7], 2);
    block_on(gpu.kv_slots(most)).unwrap();
    let e = block_on(gpu.kv_slots(most + 1)).unwrap_err();
    assert_eq!(e.code(), "budget", "{e}");
    assert!(
        e.to_string().contains(&format!("({most} sequences)")),
        "{e}"
    );
    // What slot 0 held survives the growth and the refusal: the same step again, the same bits.
    let after = pass(&mut gpu, &[7], 2);
    assert!(
        before == after,
        "slot 0's cache changed when the caches grew"
    );
}

#[test]
fn backend_choice_gpu_and_auto() {
    let Some(model) = gpu_model(TINY) else {
        return;
    };
    assert_eq!(model.backend().name(), "webgpu");
    assert!(model.gpu_unavailable.is_none());
    let adapter = model.backend().gpu_adapter().unwrap().to_string();
    eprintln!("GPU adapter: {adapter}");

    let auto = Model::load_dir(&root().join(TINY), BackendChoice::Auto, CpuDtype::F32).unwrap();
    // A software adapter (lavapipe) is passed over; a hardware one is raced against the CPU and
    // the faster runs (on an H200 the CPU won for this tiny model: 1.5 against 2.7 ms).
    let times = auto.backend_times.as_ref();
    match auto.backend().name() {
        "cpu" if adapter.contains("Cpu") => {
            let why = auto.gpu_unavailable.as_deref().unwrap();
            assert!(why.contains("software"), "{why}");
        }
        "cpu" => {
            let t = times.expect("a hardware adapter is raced");
            assert!(t.cpu_ms.unwrap() <= t.webgpu_ms, "{}", t.why);
        }
        _ => {
            assert!(!adapter.contains("Cpu"), "{adapter}");
            let t = times.expect("a hardware adapter is raced");
            assert!(t.webgpu_ms < t.cpu_ms.unwrap(), "{}", t.why);
        }
    }
    let cpu = Model::load_dir(&root().join(TINY), BackendChoice::Cpu, CpuDtype::F32).unwrap();
    assert_eq!(cpu.backend().gpu_dispatches(), None);
}

#[test]
fn losing_the_device_is_an_error_not_a_panic() {
    let Some(mut model) = gpu_model(TINY) else {
        return;
    };
    forward_at(&mut model, &[1, 2, 3], 0).unwrap();
    gpu(&model).lose_device();
    // The backend's pass fails with a WebGPU error (not a panic), and the model continues on
    // the CPU from the ids so far, read from the weights file again, and says why.
    let resumed = block_on(model.predict(&[1, 2, 3, 4], 3)).unwrap().to_vec();
    assert_eq!(model.backend().name(), "cpu");
    let why = model.gpu_unavailable.as_deref().unwrap();
    assert!(
        why.contains("the GPU failed (the GPU device was lost"),
        "{why}"
    );
    let mut cpu = common::load(TINY);
    let want = forward_at(&mut cpu, &[1, 2, 3, 4], 0).unwrap().to_vec();
    assert_eq!(resumed, want);
}

#[test]
fn a_generation_survives_losing_the_device() {
    // The device is lost after ten tokens: the model continues on the CPU, recomputes the
    // sequence so far, and the greedy tokens are those of transformers all the same.
    let fx = fixture("tiny-random");
    let case = &fx.cases[1];
    let Some(mut model) = gpu_model(TINY) else {
        return;
    };
    let params = gpt2_web::GenerateParams {
        max_tokens: 24,
        ignore_eos: true,
        ..Default::default()
    };
    let lose = |m: &Model| gpu(m).lose_device();
    let (r, moved) = common::generate_midway(&mut model, &case.ids, params, 10, &lose);
    assert_eq!(model.backend().name(), "cpu");
    assert_eq!(moved, 1, "one Backend event");
    assert_eq!(r.tokens, case.greedy_ids);
}

#[test]
fn speculative_greedy_on_the_gpu_is_plain_greedy() {
    // The verification pass takes the GEMV for every row, so each row equals a decode step bit
    // for bit, and a prompt-lookup or heads-drafted generation is token for token the plain one
    // (the heads read the hidden rows the GPU reads back with the logits).
    for dir in [TINY, common::DEMO] {
        let Some(model) = gpu_model(dir) else {
            return;
        };
        let mut model = match dir {
            TINY => common::with_heads(model, &common::synthetic_heads(TINY, 3, 1999, 1)),
            _ => model, // the demo model's own heads, beside its weights
        };
        assert!(model.mtp.is_some(), "{dir}: no heads");
        let ids: Vec<u32> = [5, 17, 99, 5, 17, 99, 5, 17, 99, 5].to_vec();
        block_on(model.predict(&ids[..4], 0)).unwrap();
        let all = block_on(model.verify(&ids, 4, 6)).unwrap().to_vec();
        let v = model.config.vocab_size;
        assert_eq!(all.len(), 6 * v);
        for i in 0..6 {
            let one = block_on(model.predict(&ids[..5 + i], 4 + i))
                .unwrap()
                .to_vec();
            assert!(one == all[i * v..(i + 1) * v], "{dir}: row {i}");
        }
        let params = |draft| GenerateParams {
            max_tokens: 32,
            ignore_eos: true,
            draft,
            ..Default::default()
        };
        let (plain, _) = common::run_ids(&mut model, &ids, params(gpt2_web::Draft::None));
        let (spec, _) = common::run_ids(&mut model, &ids, params(gpt2_web::Draft::PromptLookup));
        assert_eq!(spec.tokens, plain.tokens, "{dir}");
        let (mtp, _) = common::run_ids(&mut model, &ids, params(gpt2_web::Draft::Mtp));
        assert_eq!(mtp.tokens, plain.tokens, "{dir}: with the heads' drafts");
        assert!(mtp.metrics.drafted_tokens > 0);
        assert_eq!(model.backend().name(), "webgpu");
        eprintln!(
            "{dir} on the GPU: {} tokens in {} forwards",
            spec.tokens.len(),
            spec.metrics.target_forwards
        );
    }
}

#[test]
fn without_the_kv_cache_the_gpu_gives_the_same_tokens() {
    for dir in [TINY, common::DEMO] {
        let Some(mut model) = gpu_model(dir) else {
            return;
        };
        let ids: Vec<u32> = vec![5, 17, 99, 7];
        let params = |kv_cache| GenerateParams {
            max_tokens: 16,
            ignore_eos: true,
            kv_cache,
            ..Default::default()
        };
        let (cached, _) = common::run_ids(&mut model, &ids, params(true));
        let (naive, _) = common::run_ids(&mut model, &ids, params(false));
        assert_eq!(naive.tokens, cached.tokens, "{dir}");
    }
}

/// A GGUF file on the GPU: its Conv1D weights stored (out, in) and quantized (Q8_0, the head in
/// F16) are dequantized and put back in transformers' layout for upload, so the GPU's logits match
/// the CPU's exact (f32) reading of the same file, and its greedy tokens are the CPU's.
#[test]
fn a_gguf_file_on_the_gpu_matches_the_cpu() {
    let file = "tests/fixtures/gguf/tiny-random-Q8_0.gguf";
    let Some(mut model) = gpu_model(file) else {
        return;
    };
    let mut cpu = Model::load_dir(&root().join(file), BackendChoice::Cpu, CpuDtype::F32).unwrap();
    for case in &fixture("tiny-random").cases {
        let logits = forward_at(&mut model, &case.ids, 0).unwrap().to_vec();
        let want = forward_at(&mut cpu, &case.ids, 0).unwrap().to_vec();
        let scale = want.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        assert_close(&logits, &want, 1e-4 * scale, 1e-3, "GGUF Q8_0 on the GPU");
        let params = GenerateParams {
            max_tokens: 12,
            ignore_eos: true,
            ..Default::default()
        };
        let (g, _) = common::run_ids(&mut model, &case.ids, params.clone());
        let (c, _) = common::run_ids(&mut cpu, &case.ids, params);
        assert_eq!(g.tokens, c.tokens, "greedy on the GPU and the CPU");
    }
}

#[test]
fn a_batch_on_the_gpu_gives_each_sequence_the_tokens_it_gets_alone() {
    use gpt2_web::scheduler::{Event, Job, Prompt, Scheduler};
    let Some(mut model) = gpu_model(TINY) else {
        return;
    };
    let fx = fixture("tiny-random");
    let prompts: Vec<Vec<u32>> = fx.cases.iter().take(3).map(|c| c.ids.clone()).collect();
    let params = |i: usize| GenerateParams {
        max_tokens: 6 + i,
        temperature: if i == 1 { 0.9 } else { 0.0 },
        seed: 3 + i as u64,
        ignore_eos: true,
        ..Default::default()
    };
    let alone: Vec<Vec<u32>> = (prompts.iter().enumerate())
        .map(|(i, p)| {
            let r = common::generate_ids(&mut model, None, p, params(i), &mut |_| {});
            r.unwrap().tokens
        })
        .collect();
    let mut s: Scheduler<&mut Model> = Scheduler::new();
    let m = s.add_model(&mut model);
    for (i, p) in prompts.iter().enumerate() {
        let (prompt, params) = (Prompt::Ids(p.clone()), params(i));
        let job = Job::Generate {
            prompt,
            params,
            draft: None,
        };
        s.submit(i as u64, m, job).unwrap();
    }
    let mut got = vec![Vec::new(); prompts.len()];
    while s.has_work() {
        for ev in block_on(s.step()) {
            match ev {
                Event::Token { id, event, .. } => got[id as usize].push(event.id),
                Event::Failed { error, .. } => panic!("{error}"),
                _ => {}
            }
        }
    }
    assert_eq!(model.backend().name(), "webgpu");
    assert_eq!(
        got, alone,
        "a batch on the GPU differs from each sequence alone"
    );
}

/// What a generation and the model say of the GPU: `metrics.gpu` counts one submission per pass,
/// 4 bytes read back per greedy pass and the logits and final hidden row per sampled one; the
/// model's memory is its weights' f32 bytes and each KV cache slot it has room for.
#[test]
fn a_generation_reports_its_gpu_work_and_the_model_its_memory() {
    let Some(mut model) = gpu_model(TINY) else {
        return;
    };
    let c = model.config.clone();
    let (weights, kv) = model.backend().memory();
    assert_eq!(
        weights,
        4 * c.n_params() as u64,
        "every tensor once, in f32"
    );
    let slot = (2 * c.n_layer * c.n_positions * c.n_embd * 4) as u64; // keys and values
    assert_eq!(kv, slot);
    block_on(model.kv_slots(3)).unwrap();
    assert_eq!(
        model.backend().memory().1,
        4 * slot,
        "room for 3 slots is room for 4"
    );
    let greedy = GenerateParams {
        max_tokens: 6,
        ignore_eos: true,
        ..Default::default()
    };
    let r = common::generate(&mut model, "ab", greedy.clone(), &mut |_| {}, &|| false).unwrap();
    let gpu = r.metrics.gpu.expect("metrics.gpu on the GPU");
    assert_eq!((gpu.passes, gpu.submissions), (6, 6));
    assert_eq!(gpu.readback_bytes, 4 * 6);
    let sampled = GenerateParams {
        temperature: 0.8,
        seed: 1,
        ..greedy.clone()
    };
    let r = common::generate(&mut model, "ab", sampled, &mut |_| {}, &|| false).unwrap();
    let gpu = r.metrics.gpu.unwrap();
    assert_eq!(gpu.passes, 6);
    assert_eq!(gpu.readback_bytes, (c.vocab_size + c.n_embd) * 4 * 6);
    let mut cpu = common::load(TINY);
    let r = common::generate(&mut cpu, "ab", greedy, &mut |_| {}, &|| false).unwrap();
    assert!(r.metrics.gpu.is_none(), "no GPU, no counters");
}

/// What the demo model computes in f32 on the GPU, with subgroups or without.
struct Computed {
    /// The subgroup size the kernels' trees counted on (1: none).
    lanes: u32,
    /// The logits after each fixture prompt and those of one decode step after it.
    logits: Vec<Vec<f32>>,
    /// 24 greedy tokens after each fixture prompt.
    tokens: Vec<Vec<u32>>,
}

/// The demo model's `Computed` in f32 on the GPU with subgroups `on` or off.
fn with_subgroups(on: bool) -> Option<Computed> {
    gpt2_web::model::set_gpu_subgroups(on);
    let model = gpu_model(DEMO);
    gpt2_web::model::set_gpu_subgroups(true);
    let mut model = model?;
    let (mut logits, mut tokens) = (Vec::new(), Vec::new());
    for case in &fixture("gpt2-shakespeare").cases {
        let prompt = forward_at(&mut model, &case.ids, 0).unwrap();
        let next = gpt2_web::sampling::argmax(&prompt);
        logits.push(forward_at(&mut model, &[next], case.ids.len()).unwrap());
        logits.push(prompt);
        let params = GenerateParams {
            max_tokens: 24,
            ignore_eos: true,
            ..Default::default()
        };
        tokens.push(common::run_ids(&mut model, &case.ids, params).0.tokens);
    }
    let lanes = gpu(&model).subgroup();
    Some(Computed {
        lanes,
        logits,
        tokens,
    })
}

/// The kernels' trees (layernorm, the LayerNorm-fused GEMV, attention, the head, argmax) take
/// their strides below the subgroup size by shuffles where the device has subgroups (lavapipe:
/// 8 lanes), adding the same pairs in the same order as through workgroup memory: the logits
/// are bit for bit the same, after a prompt and after a decode step, and so the tokens.
#[test]
fn subgroup_trees_give_the_bits_of_workgroup_memory_trees() {
    let Some(on) = with_subgroups(true) else {
        return;
    };
    if on.lanes == 1 {
        return gpu_common::no_gpu("the adapter has no subgroups the kernels can use");
    }
    let off = with_subgroups(false).unwrap();
    assert_eq!(off.lanes, 1, "set_gpu_subgroups(false) left subgroups on");
    for (i, (a, b)) in on.logits.iter().zip(&off.logits).enumerate() {
        let same = a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
        assert!(
            same,
            "logits {i}: subgroups of {} differ from workgroup memory",
            on.lanes
        );
    }
    assert_eq!(on.tokens, off.tokens);
}
