//! The GPU's weight formats besides f32, both lossy and so measured. f16 (`dtype: 'f16'`, adapters
//! with shader-f16; lavapipe has it): the weight matrices in 16 bits, the arithmetic in f32,
//! against transformers: the logits within a documented tolerance, and the greedy tokens (README,
//! "What runs where"). q8 (`dtype: 'q8'` with `backend: 'webgpu'`): the CPU's q8 weights,
//! dequantized in the kernels, and its rounding of activations and KV cache, against the CPU's
//! q8: the same greedy tokens.

mod common;
mod gpu_common;

use common::{fixture, root};
use gpt2_web::{BackendChoice, CpuDtype, GenerateParams, Model};
use pollster::block_on;

fn f16_model(dir: &str) -> Option<Model> {
    gpu_common::gpu()?;
    let m = Model::load_dir_with(&root().join(dir), BackendChoice::WebGpu, CpuDtype::Q8, true)
        .unwrap_or_else(|e| panic!("{dir} in f16 on the GPU: {e}"));
    Some(m)
}

/// The largest |logit − transformers'| over every case, relative to the logits' spread, and how
/// many greedy tokens (of 24 per case) equal transformers'.
fn measure(name: &str) -> Option<(f32, usize, usize)> {
    let fx = fixture(name);
    let mut model = f16_model(&fx.model_dir)?;
    assert_eq!(model.backend().dtype_name(), "f16");
    let (mut worst, mut same, mut all) = (0f32, 0, 0);
    for case in &fx.cases {
        let want = case.logits();
        let got = block_on(model.predict(&case.ids, 0)).unwrap().to_vec();
        let spread = want.iter().fold(0f32, |m, &x| m.max(x.abs()));
        let err = got
            .iter()
            .zip(&want)
            .fold(0f32, |m, (g, w)| m.max((g - w).abs()));
        worst = worst.max(err / spread);
        let params = GenerateParams {
            max_tokens: 24,
            ignore_eos: true,
            ..Default::default()
        };
        let (r, _) = common::run_ids(&mut model, &case.ids, params);
        // Greedy agreement up to the first difference (after it the texts are different texts).
        same += r
            .tokens
            .iter()
            .zip(&case.greedy_ids)
            .take_while(|(a, b)| a == b)
            .count();
        all += case.greedy_ids.len();
    }
    eprintln!("{name} in f16: logits within {worst:.2e} of their largest magnitude; greedy {same}/{all} tokens before the first difference");
    Some((worst, same, all))
}

#[test]
fn f16_weights_stay_within_the_documented_tolerance() {
    // tiny-random is f32 on disk, so f16 rounds it: measured 6.9e-4 of the largest logit, and
    // more than f32's ~1e-6 (so the weights really are f16). The demo model is stored in f16, so
    // f16 on the GPU holds it exactly.
    let Some((worst, same, all)) = measure("tiny-random") else {
        return;
    };
    assert!((1e-5..2e-3).contains(&worst), "tiny-random: {worst:.2e}");
    assert_eq!(same, all, "tiny-random: greedy {same}/{all}");
    let Some((worst, same, all)) = measure("gpt2-shakespeare") else {
        return;
    };
    assert!(worst < 1e-5, "gpt2-shakespeare: {worst:.2e}");
    assert_eq!(same, all, "gpt2-shakespeare: greedy {same}/{all}");
}

/// The demo model's first `n` greedy tokens after each fixture prompt, on `choice` in `dtype`.
fn greedy(choice: BackendChoice, dtype: CpuDtype, n: usize) -> Option<(Model, Vec<Vec<u32>>)> {
    let fx = fixture("gpt2-shakespeare");
    if choice == BackendChoice::WebGpu {
        gpu_common::gpu()?;
    }
    let mut model = Model::load_dir(&root().join(&fx.model_dir), choice, dtype)
        .unwrap_or_else(|e| panic!("the demo model in {dtype:?} on {choice:?}: {e}"));
    assert_eq!(model.backend().dtype_name(), dtype.name());
    let params = GenerateParams {
        max_tokens: n,
        ignore_eos: true,
        ..Default::default()
    };
    let ids = (fx.cases.iter())
        .map(|case| {
            common::run_ids(&mut model, &case.ids, params.clone())
                .0
                .tokens
        })
        .collect();
    Some((model, ids))
}

/// Tokens before the first difference, over every case.
fn agreeing(a: &[Vec<u32>], b: &[Vec<u32>]) -> Vec<usize> {
    let same = |(a, b): (&Vec<u32>, &Vec<u32>)| a.iter().zip(b).take_while(|(x, y)| x == y).count();
    a.iter().zip(b).map(same).collect()
}

/// The GPU's q8 rounds as the CPU's q8 does: the weights, each product's input by blocks of 32,
/// the KV cache (keys by blocks of 32 of a head, values by head) and attention's query and
/// weights. Greedy on the demo model gives the CPU's q8 tokens, 64 after each fixture prompt
/// (where the CPU's q8 and f32 part after 17, 64 and 59 tokens), and the logits after each prompt
/// lie within 0.06–0.2% of their range of the CPU's q8 (2026-12-06, lavapipe): the order of the
/// sums differs, and now and then a value at a rounding boundary tips. Both ways the kernels
/// take the products: the head four weights at a time with dot4I8Packed (naga has it) and the
/// fallback, a weight at a time.
#[test]
fn q8_on_the_gpu_gives_the_cpus_q8_greedy_tokens() {
    let (mut cpu, q8) = greedy(BackendChoice::Cpu, CpuDtype::Q8, 64).unwrap();
    let (_, f32) = greedy(BackendChoice::Cpu, CpuDtype::F32, 64).unwrap();
    let qf = agreeing(&q8, &f32);
    assert!(
        qf.iter().any(|&n| n < 64),
        "q8 and f32 agree: the test cannot tell q8 apart"
    );
    for kernel in ["dot4I8Packed", "bytes"] {
        gpt2_web::model::set_gpu_q8_bytes(kernel == "bytes");
        let gpu = greedy(BackendChoice::WebGpu, CpuDtype::Q8, 64);
        gpt2_web::model::set_gpu_q8_bytes(false);
        let Some((mut gpu, on_gpu)) = gpu else {
            return;
        };
        assert_eq!(gpu.backend().q8_kernel().as_deref(), Some(kernel));
        let gq = agreeing(&on_gpu, &q8);
        eprintln!("{kernel}: greedy, 64 tokens, tokens before the first difference per prompt: GPU q8 = CPU q8 {gq:?}; CPU q8 = CPU f32 {qf:?}");
        for (i, (g, c)) in on_gpu.iter().zip(&q8).enumerate() {
            assert_eq!(
                g, c,
                "{kernel}, case {i}: the GPU's q8 parts from the CPU's after {} tokens",
                gq[i]
            );
        }
        for (i, case) in fixture("gpt2-shakespeare").cases.iter().enumerate() {
            let (g, c) = (
                common::logits(&mut gpu, &case.ids),
                common::logits(&mut cpu, &case.ids),
            );
            let range = c.iter().fold(f32::MIN, |m, &x| m.max(x))
                - c.iter().fold(f32::MAX, |m, &x| m.min(x));
            let diff = (g.iter().zip(&c)).fold(0f32, |m, (a, b)| m.max((a - b).abs())) / range;
            eprintln!("{kernel}, case {i}: the GPU's q8 logits within {diff:.2e} of the CPU's q8, as a share of their range");
            assert!(diff < 5e-3, "{kernel}, case {i}: {diff:.2e}");
        }
        // A quarter of f32's bytes and their scales: 1.125 bytes per weight of a matrix.
        let (weights, _) = gpu.backend().memory();
        let f32_bytes = gpu.backend().config().n_params() as f64 * 4.0;
        assert!(
            (0.25..0.4).contains(&(weights as f64 / f32_bytes)),
            "{weights} bytes"
        );
    }
}
