//! The WGSL kernels: every `.wgsl` validated by naga (no GPU needed), then each kernel run on a
//! real adapter (lavapipe in CI) against a CPU reference in f64 on seeded inputs, with sizes
//! that are not multiples of the workgroup sizes.

mod gpu_common;
use gpt2_web::backend::gpu::kernels::{self as k, Epilogue, Kernel, Kernels};
use gpt2_web::backend::gpu::{Context, Format};
use gpu_common::*;
use std::path::PathBuf;

fn shaders_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/backend/gpu/shaders")
}

#[test]
fn naga_validates_every_shader() {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(shaders_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "wgsl") {
            continue;
        }
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let src = std::fs::read_to_string(&path).unwrap();
        // The header STYLE.md asks for: what it computes, bindings, workgroup size and grid
        // (the parts below are no kernels: they open with their name and what they are for).
        assert!(
            src.starts_with(&format!("// {name}")),
            "{name}.wgsl must open with a comment naming it"
        );
        // Parts: what a kernel's source appends (`Kernel::parts`), the packed parts
        // (`Kernel::packed_part`) and what they call (q8_packed.wgsl), and lanes_subgroup.wgsl.
        let part = |k: &Kernel| {
            k.packed_part().is_some_and(|(_, p)| p == src) || k.parts().contains(&name.as_str())
        };
        if ["q8_packed", "lanes_subgroup"].contains(&name.as_str()) || Kernel::ALL.iter().any(part)
        {
            continue;
        }
        // subgroup_probe.wgsl is no kernel either: context.rs runs it once per device.
        if name == "subgroup_probe" {
            continue;
        }
        for word in ["Bindings", "Workgroup:", "Grid:"] {
            assert!(
                src.contains(word),
                "{name}.wgsl's header must list its {word}"
            );
        }
        names.push(name);
    }
    names.sort();
    let mut known: Vec<_> = Kernel::ALL.iter().map(|k| k.name().to_string()).collect();
    known.sort();
    assert_eq!(
        names, known,
        "every shader file is a Kernel and every Kernel has a file"
    );
    for kernel in Kernel::ALL {
        // The embedded source is the file, then its parts.
        let read = |stem: &str| std::fs::read_to_string(shaders_dir().join(format!("{stem}.wgsl")));
        let mut want = read(kernel.name()).unwrap();
        for part in kernel.parts() {
            want += &read(part).unwrap();
        }
        assert_eq!(want, kernel.source());
        // It and each weight format's rewrite of it are valid WGSL (f16 needs the capability),
        // q8 with and without the packed dot product, each with and without subgroups.
        let packed = [(Format::Q8, true)].into_iter();
        for (format, packed) in [Format::F32, Format::F16, Format::Q8]
            .map(|f| (f, false))
            .into_iter()
            .chain(packed)
        {
            for subgroups in [false, true] {
                let src = kernel.source_for(format, packed, subgroups);
                assert_eq!(
                    src.contains("subgroupShuffleXor"),
                    subgroups && kernel.reduces()
                );
                let what = format!("{} in {format:?}, packed {packed}", kernel.name());
                validate(&src, &format!("{what}, subgroups {subgroups}"));
            }
        }
    }
    let probe = std::fs::read_to_string(shaders_dir().join("subgroup_probe.wgsl")).unwrap();
    validate(&probe, "subgroup_probe");
}

/// Fails the test unless `src` is valid WGSL to naga, with f16 and subgroups allowed.
fn validate(src: &str, what: &str) {
    use naga::valid::{Capabilities, ShaderStages, SubgroupOperationSet};
    let module = naga::front::wgsl::parse_str(src)
        .unwrap_or_else(|e| panic!("{what}: {}", e.emit_to_string(src)));
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        Capabilities::SHADER_FLOAT16 | Capabilities::SUBGROUP,
    )
    .subgroup_stages(ShaderStages::COMPUTE)
    .subgroup_operations(SubgroupOperationSet::all())
    .validate(&module)
    .unwrap_or_else(|e| panic!("{what}: {}", e.emit_to_string(src)));
}

/// The rows a kernel's workgroup takes and the longest row it rounds are written in its WGSL and
/// in kernels.rs (grids, plan.rs's limits): the two agree, and every kernel's workgroup memory
/// fits the 16 KiB WebGPU guarantees (`maxComputeWorkgroupStorageSize`).
#[test]
fn kernels_agree_with_their_grids_and_fit_workgroup_memory() {
    let consts = [
        (Kernel::MatmulGemv, "ROWS_PER", k::GEMV_GROUP_ROWS),
        (Kernel::MatmulGemv, "ACT_BLOCKS", k::GEMV_MAX_K / 32),
        (Kernel::MatmulGemvLn, "ROWS_PER", k::GEMV_GROUP_ROWS),
        (Kernel::MatmulGemvLn, "ACT_BLOCKS", k::GEMV_MAX_K / 32),
        (Kernel::LmHead, "POS", k::HEAD_POSITIONS),
        (Kernel::LmHead, "ACT_BLOCKS", k::HEAD_MAX_C / 32),
    ];
    for (kernel, name, value) in consts {
        let line = format!("const {name}: u32 = {value}u;");
        assert!(
            kernel.source().contains(&line),
            "{}.wgsl must say `{line}`, as kernels.rs does",
            kernel.name()
        );
    }
    for kernel in Kernel::ALL {
        for (format, packed) in [
            (Format::F32, false),
            (Format::Q8, false),
            (Format::Q8, true),
        ] {
            // Workgroup arrays sized by the pipeline constant: at its largest value.
            let src = kernel.source_for(format, packed, false);
            let rows = kernel.rows_per_group();
            let batched = "override BATCH_ROWS: u32 = 1u;";
            assert_eq!(src.contains(batched), rows > 1, "{}", kernel.name());
            // Each pipeline's value is valid WGSL (a constant index past an array the constant
            // sizes is an error to Chromium's compiler even in a branch that never runs).
            for one in [1, rows] {
                let src = src.replace(batched, &format!("const BATCH_ROWS: u32 = {one}u;"));
                let module = naga::front::wgsl::parse_str(&src).unwrap();
                naga::valid::Validator::new(
                    naga::valid::ValidationFlags::all(),
                    naga::valid::Capabilities::empty(),
                )
                .validate(&module)
                .unwrap_or_else(|e| {
                    panic!(
                        "{} with BATCH_ROWS = {one}: {}",
                        kernel.name(),
                        e.emit_to_string(&src)
                    )
                });
            }
            let src = src.replace(batched, &format!("const BATCH_ROWS: u32 = {rows}u;"));
            let module = naga::front::wgsl::parse_str(&src).unwrap();
            let mut layouter = naga::proc::Layouter::default();
            layouter.update(module.to_ctx()).unwrap();
            let bytes: u32 = module
                .global_variables
                .iter()
                .filter(|(_, v)| v.space == naga::AddressSpace::WorkGroup)
                .map(|(_, v)| layouter[v.ty].size)
                .sum();
            assert!(
                bytes <= 16384,
                "{} in {format:?} uses {bytes} bytes of workgroup memory",
                kernel.name()
            );
        }
    }
}

/// A device with the kernels compiled.
struct Gpu {
    ctx: Context,
    kernels: Kernels,
}

fn setup() -> Option<Gpu> {
    let ctx = gpu()?;
    let kernels = Kernels::new(&ctx.device, Format::F32, false, ctx.subgroup);
    Some(Gpu { ctx, kernels })
}

impl Gpu {
    /// Runs one dispatch over one row of the kernel's input and fails the test on any wgpu error.
    fn run(&self, kernel: Kernel, buffers: &[&wgpu::Buffer], grid: [u32; 3]) {
        self.run_rows(kernel, buffers, grid, 1)
    }

    /// Runs one dispatch over `rows` rows of the kernel's input (more than one: its batched
    /// pipeline, where it has one) and fails the test on any wgpu error.
    fn run_rows(&self, kernel: Kernel, buffers: &[&wgpu::Buffer], grid: [u32; 3], rows: usize) {
        let scopes = self.ctx.scopes();
        let bind = self
            .kernels
            .bind_group(&self.ctx.device, kernel, kernel.name(), buffers);
        let mut enc = self.ctx.device.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            self.kernels.dispatch(&mut pass, kernel, &bind, grid, rows);
        }
        self.ctx.queue.submit([enc.finish()]);
        pollster::block_on(scopes.close(kernel.name())).unwrap();
    }

    fn read(&self, buf: &wgpu::Buffer) -> Vec<f32> {
        pollster::block_on(self.ctx.download(buf)).unwrap()
    }

    /// A pass of `t` rows whose head (lm_head.wgsl) takes all of them.
    fn step(&self, t: usize) -> wgpu::Buffer {
        self.ctx.uniform("step", &k::Step::with_head(t, t))
    }

    /// The row table of `(slot, pos, len)` sequences, uploaded; and each row's (first cache
    /// row of its slot, position).
    fn rows(
        &self,
        seqs: &[(usize, usize, usize)],
        n_ctx: usize,
    ) -> (wgpu::Buffer, Vec<(usize, usize)>) {
        let table = k::row_table(seqs.iter().copied(), n_ctx);
        let rows = table
            .chunks(2)
            .map(|r| (r[1] as usize, r[0] as usize))
            .collect();
        (self.ctx.upload("rows", &table), rows)
    }
}

#[test]
fn embedding_adds_token_and_position_rows_across_chunks() {
    let Some(g) = setup() else { return };
    let (v, c, n_ctx, t) = (50, 37, 12, 7);
    let mut rng = Rng::new(1);
    let wte = rng.vec(v * c, 1.0); // (V, C)
    let wpe = rng.vec(n_ctx * c, 1.0); // (n_ctx, C)
    let ids: Vec<u32> = vec![0, 19, 20, 49, 5, 33, 20];
    let ids_buf = g.ctx.upload("ids", &ids);
    let wpe_buf = g.ctx.upload("wpe", &wpe);
    let x = g.ctx.upload("x", &vec![f32::NAN; n_ctx * c]);
    let step = g.step(t);
    // Two sequences' rows: four from position 3 in slot 0, three from 0 in slot 1.
    let (rows_buf, rows) = g.rows(&[(0, 3, 4), (1, 0, 3)], n_ctx);
    // Two chunks, rows 0..20 and 20..50, each dispatched over every position.
    for (start, rows) in [(0, 20), (20, 30)] {
        let chunk = g.ctx.upload("wte", &wte[start * c..(start + rows) * c]);
        let dims = k::ChunkDims {
            c: c as u32,
            chunk_start: start as u32,
            chunk_rows: rows as u32,
            v: 0, // the embedding does not use it
        };
        let dims = g.ctx.uniform("dims", &dims);
        let bufs = [&step, &dims, &ids_buf, &chunk, &wpe_buf, &rows_buf, &x];
        g.run(Kernel::Embedding, &bufs, k::elementwise_grid(t, c));
    }
    let got = g.read(&x);
    let want: Vec<f64> = (0..t * c)
        .map(|i| {
            let (r, col) = (i / c, i % c);
            wte[ids[r] as usize * c + col] as f64 + wpe[rows[r].1 * c + col] as f64
        })
        .collect();
    assert_close(&got[..t * c], &want, 1e-6, 0.0, "embedding");
    assert!(
        got[t * c..].iter().all(|x| x.is_nan()),
        "rows past T untouched"
    );
}

fn layer_norm_ref(x: &[f32], w: &[f32], b: &[f32], eps: f64) -> Vec<f64> {
    let c = w.len() as f64;
    let mean = x.iter().map(|&v| v as f64).sum::<f64>() / c;
    let var = x.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / c;
    let rstd = 1.0 / (var + eps).sqrt();
    x.iter()
        .zip(w.iter().zip(b))
        .map(|(&v, (&w, &b))| (v as f64 - mean) * rstd * w as f64 + b as f64)
        .collect()
}

#[test]
fn layernorm_matches_reference() {
    let Some(g) = setup() else { return };
    let (c, n_ctx, t, eps) = (300, 6, 5, 1e-5f32); // C > 256 threads and not a multiple
    let mut rng = Rng::new(2);
    // An offset of 5 makes a one-pass variance lose digits; the kernel's two passes must not.
    let x: Vec<f32> = rng.vec(n_ctx * c, 2.0).iter().map(|v| v + 5.0).collect();
    let (w, b) = (rng.vec(c, 1.5), rng.vec(c, 0.5));
    let (x_buf, w_buf, b_buf) = (
        g.ctx.upload("x", &x),
        g.ctx.upload("w", &w),
        g.ctx.upload("b", &b),
    );
    let step = g.step(t);
    for last_only in [false, true] {
        let dims = k::LayerNormDims {
            c: c as u32,
            last_only: last_only as u32,
            eps,
            _pad: 0,
        };
        let dims = g.ctx.uniform("dims", &dims);
        let out = g.ctx.storage("out", (n_ctx * c * 4) as u64);
        let bufs = [&step, &dims, &x_buf, &w_buf, &b_buf, &out];
        g.run(Kernel::LayerNorm, &bufs, k::layernorm_grid(t, last_only));
        let got = g.read(&out);
        let rows: Vec<usize> = if last_only {
            vec![t - 1]
        } else {
            (0..t).collect()
        };
        for (r_out, &r) in rows.iter().enumerate() {
            let want = layer_norm_ref(&x[r * c..(r + 1) * c], &w, &b, eps as f64);
            let what = format!("layernorm row {r} (last_only {last_only})");
            assert_close(&got[r_out * c..(r_out + 1) * c], &want, 1e-5, 1e-4, &what);
        }
    }
}

fn gelu_tanh(x: f64) -> f64 {
    0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x.powi(3))).tanh())
}

#[test]
fn matmuls_match_reference_for_every_epilogue() {
    let Some(g) = setup() else { return };
    let mut rng = Rng::new(3);
    // (T, K, N): decode, small prefill, and sizes off every tile and workgroup multiple.
    for (t, kk, n) in [(1, 37, 70), (5, 100, 33), (17, 65, 129), (1, 300, 257)] {
        let x = rng.vec(t * kk, 1.0); // (T, K)
        let w = rng.vec(kk * n, 0.3); // (K, N)
        let b = rng.vec(n, 0.5); // (N,)
        let prior = rng.vec(t * n, 1.0); // what out holds before (the residual stream)
        let (lw, lb) = (rng.vec(kk, 1.0), rng.vec(kk, 0.5)); // a LayerNorm's weight and bias
        let (lw_buf, lb_buf) = (g.ctx.upload("ln w", &lw), g.ctx.upload("ln b", &lb));
        let (x_buf, w_buf, b_buf) = (
            g.ctx.upload("x", &x),
            g.ctx.upload("w", &w),
            g.ctx.upload("b", &b),
        );
        let step = g.step(t);
        for epilogue in [Epilogue::Bias, Epilogue::Gelu, Epilogue::Residual] {
            let dims = k::MatmulDims {
                k: kk as u32,
                n: n as u32,
                epilogue: epilogue as u32,
                eps: 1e-5,
            };
            let want: Vec<f64> = (0..t * n)
                .map(|i| {
                    let (r, col) = (i / n, i % n);
                    let y = b[col] as f64
                        + (0..kk)
                            .map(|j| x[r * kk + j] as f64 * w[j * n + col] as f64)
                            .sum::<f64>();
                    match epilogue {
                        Epilogue::Bias => y,
                        Epilogue::Gelu => gelu_tanh(y),
                        Epilogue::Residual => prior[i] as f64 + y,
                    }
                })
                .collect();
            let dims = g.ctx.uniform("dims", &dims);
            for kernel in [Kernel::MatmulTiled, Kernel::MatmulGemv] {
                let out = g.ctx.upload("out", &prior);
                let bufs = [&step, &dims, &x_buf, &w_buf, &b_buf, &out];
                g.run_rows(kernel, &bufs, k::matmul_grid(kernel, t, n), t);
                let what = format!("{} T={t} K={kk} N={n} {epilogue:?}", kernel.name());
                assert_close(&g.read(&out), &want, 1e-5, 1e-4, &what);
            }
            // The same product of LayerNorm(x), in one dispatch.
            let xn: Vec<f64> = (0..t)
                .flat_map(|r| layer_norm_ref(&x[r * kk..][..kk], &lw, &lb, 1e-5))
                .collect();
            let want: Vec<f64> = (0..t * n)
                .map(|i| {
                    let (r, col) = (i / n, i % n);
                    let y = b[col] as f64
                        + (0..kk)
                            .map(|j| xn[r * kk + j] * w[j * n + col] as f64)
                            .sum::<f64>();
                    match epilogue {
                        Epilogue::Bias => y,
                        Epilogue::Gelu => gelu_tanh(y),
                        Epilogue::Residual => prior[i] as f64 + y,
                    }
                })
                .collect();
            let out = g.ctx.upload("out", &prior);
            let bufs = [&step, &dims, &x_buf, &w_buf, &b_buf, &lw_buf, &lb_buf, &out];
            let kernel = Kernel::MatmulGemvLn;
            g.run_rows(kernel, &bufs, k::matmul_grid(kernel, t, n), t);
            let what = format!("{} T={t} K={kk} N={n} {epilogue:?}", kernel.name());
            assert_close(&g.read(&out), &want, 1e-5, 1e-4, &what);
        }
    }
}

#[test]
fn gelu_stays_finite_for_huge_inputs() {
    let Some(g) = setup() else { return };
    // x = 1 row of K = 1 with w = 1: out = gelu(b) for b in the test values.
    let vals = [-1e30f32, -100.0, -10.0, -1.0, 0.0, 1.0, 10.0, 100.0, 1e30];
    let n = vals.len();
    let step = g.step(1);
    let dims = k::MatmulDims {
        k: 1,
        n: n as u32,
        epilogue: Epilogue::Gelu as u32,
        eps: 0.0,
    };
    let dims = g.ctx.uniform("dims", &dims);
    let (x, w, b) = (
        g.ctx.upload("x", &[0.0f32]),
        g.ctx.upload("w", &vec![0.0f32; n]),
        g.ctx.upload("b", &vals),
    );
    let out = g.ctx.storage("out", (n * 4) as u64);
    g.run(
        Kernel::MatmulGemv,
        &[&step, &dims, &x, &w, &b, &out],
        k::matmul_grid(Kernel::MatmulGemv, 1, n),
    );
    let want: Vec<f64> = vals.iter().map(|&v| gelu_tanh(v as f64)).collect();
    assert_close(&g.read(&out), &want, 1e-6, 1e-5, "gelu");
}

#[test]
fn kv_write_copies_new_keys_and_values_into_each_rows_slot() {
    let Some(g) = setup() else { return };
    let (c, n_ctx, slots) = (40, 9, 3);
    // Two rows from position 5 in slot 2, one at position 0 in slot 0: slot 1 untouched.
    let (rows_buf, rows) = g.rows(&[(2, 5, 2), (0, 0, 1)], n_ctx);
    let t = rows.len();
    let mut rng = Rng::new(4);
    let qkv = rng.vec(n_ctx * 3 * c, 1.0); // (n_ctx, 3C)
    let old_k = rng.vec(slots * n_ctx * c, 1.0);
    let old_v = rng.vec(slots * n_ctx * c, 1.0);
    let (qkv_buf, k_cache, v_cache) = (
        g.ctx.upload("qkv", &qkv),
        g.ctx.upload("k", &old_k),
        g.ctx.upload("v", &old_v),
    );
    let step = g.step(t);
    let dims = g.ctx.uniform(
        "dims",
        &k::KvDims {
            c: c as u32,
            hs: 32,
            _pad: [0; 2],
        },
    );
    let bufs = [&step, &dims, &qkv_buf, &rows_buf, &k_cache, &v_cache];
    g.run(Kernel::KvWrite, &bufs, k::elementwise_grid(t, c));
    for (cache, old, part) in [(&k_cache, &old_k, 1), (&v_cache, &old_v, 2)] {
        let mut want: Vec<f64> = old.iter().map(|&x| x as f64).collect();
        for (r, &(base, pos)) in rows.iter().enumerate() {
            for col in 0..c {
                want[(base + pos) * c + col] = qkv[r * 3 * c + part * c + col] as f64;
            }
        }
        assert_close(&g.read(cache), &want, 0.0, 0.0, "kv_write");
    }
}

/// Causal attention of each query row over its own slot's positions 0..=pos (`rows`: the
/// slot's first cache row, the position), in f64.
fn attention_ref(
    qkv: &[f32],
    kc: &[f32],
    vc: &[f32],
    rows: &[(usize, usize)],
    (nh, hs): (usize, usize),
    scale: f64,
) -> Vec<f64> {
    let c = nh * hs;
    let mut out = vec![0.0; rows.len() * c];
    for (i, &(base, pos)) in rows.iter().enumerate() {
        let n = pos + 1;
        let (kc, vc) = (&kc[base * c..], &vc[base * c..]);
        for h in 0..nh {
            let q = &qkv[i * 3 * c + h * hs..][..hs];
            let scores: Vec<f64> = (0..n)
                .map(|p| {
                    let k = &kc[p * c + h * hs..][..hs];
                    scale
                        * q.iter()
                            .zip(k)
                            .map(|(&a, &b)| a as f64 * b as f64)
                            .sum::<f64>()
                })
                .collect();
            let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
            let sum: f64 = e.iter().sum();
            for d in 0..hs {
                out[i * c + h * hs + d] = (0..n)
                    .map(|p| e[p] / sum * vc[p * c + h * hs + d] as f64)
                    .sum::<f64>();
            }
        }
    }
    out
}

#[test]
fn attention_matches_reference() {
    let Some(g) = setup() else { return };
    let mut rng = Rng::new(5);
    // (NH, HS, n_ctx, sequences (slot, pos, len), input scale): decode past one 64-key tile, a
    // prefill from 0, a head size above the 64 threads, large scores that only a
    // max-subtracted softmax survives, and a batch's decode rows, each in its own slot at its
    // own position.
    type Seqs = &'static [(usize, usize, usize)];
    let cases: [(usize, usize, usize, Seqs, f32); 5] = [
        (3, 20, 80, &[(0, 70, 1)], 1.0),
        (2, 32, 70, &[(0, 0, 70)], 1.0),
        (2, 72, 40, &[(0, 30, 5)], 1.0),
        (1, 16, 140, &[(0, 130, 3)], 6.0),
        (2, 24, 90, &[(2, 80, 1), (0, 3, 1), (1, 64, 1)], 1.0),
    ];
    for (nh, hs, n_ctx, seqs, amp) in cases {
        let c = nh * hs;
        let (rows_buf, rows) = g.rows(seqs, n_ctx);
        let (t, slots) = (rows.len(), 1 + seqs.iter().map(|s| s.0).max().unwrap());
        let qkv = rng.vec(n_ctx * 3 * c, amp); // (n_ctx, 3C)
        let kc = rng.vec(slots * n_ctx * c, amp); // (slots · n_ctx, C)
        let vc = rng.vec(slots * n_ctx * c, 1.0);
        let scale = 1.0 / (hs as f32).sqrt();
        let step = g.step(t);
        let dims = k::AttentionDims {
            c: c as u32,
            nh: nh as u32,
            hs: hs as u32,
            scale,
        };
        let dims = g.ctx.uniform("dims", &dims);
        let (qkv_buf, k_buf, v_buf) = (
            g.ctx.upload("qkv", &qkv),
            g.ctx.upload("k", &kc),
            g.ctx.upload("v", &vc),
        );
        let out = g.ctx.storage("out", (n_ctx * c * 4) as u64);
        let bufs = [&step, &dims, &qkv_buf, &k_buf, &v_buf, &rows_buf, &out];
        g.run(Kernel::Attention, &bufs, k::attention_grid(nh, t));
        let want = attention_ref(&qkv, &kc, &vc, &rows, (nh, hs), scale as f64);
        let what = format!("attention NH={nh} HS={hs} rows={seqs:?} amp={amp}");
        assert_close(&g.read(&out)[..t * c], &want, 1e-5, 1e-4, &what);
    }
}

#[test]
fn lm_head_dots_each_vocab_row_of_its_chunk() {
    let Some(g) = setup() else { return };
    let (c, v, start, rows) = (100, 60, 10, 37); // neither C nor rows a workgroup multiple
    let mut rng = Rng::new(6);
    // (n_ctx, C): row 0 for a decode step, 3 to verify, 11 for a batch's decode step.
    let xn = rng.vec(11 * c, 1.0);
    let wte = rng.vec(rows * c, 1.0); // (rows, C)
    let dims = k::ChunkDims {
        c: c as u32,
        chunk_start: start as u32,
        chunk_rows: rows as u32,
        v: v as u32,
    };
    let dims = g.ctx.uniform("dims", &dims);
    let (xn_buf, wte_buf) = (g.ctx.upload("xn", &xn), g.ctx.upload("wte", &wte));
    // One workgroup's rows of xn, some of them, and more than one workgroup's.
    for positions in [1, 3, 8, 11] {
        let logits = g.ctx.upload("logits", &vec![f32::NAN; 11 * v]);
        let step = g.step(positions);
        let bufs = [&step, &dims, &xn_buf, &wte_buf, &logits];
        g.run_rows(
            Kernel::LmHead,
            &bufs,
            k::lm_head_grid(rows, positions),
            positions,
        );
        let got = g.read(&logits);
        for i in 0..positions {
            let want: Vec<f64> = (0..rows)
                .map(|r| {
                    (0..c)
                        .map(|j| xn[i * c + j] as f64 * wte[r * c + j] as f64)
                        .sum()
                })
                .collect();
            let row = &got[i * v + start..i * v + start + rows];
            assert_close(row, &want, 1e-5, 1e-4, &format!("lm_head row {i}"));
        }
        // Nothing outside the chunk's columns of the used rows is written.
        assert!(got[positions * v..].iter().all(|x| x.is_nan()));
        assert!(got[..start].iter().all(|x| x.is_nan()));
        assert!(got[start + rows..v].iter().all(|x| x.is_nan()));
    }
}

/// A batch's decode step gives each sequence the bits of its step alone: every GEMV-shaped
/// kernel (the products, the fused LayerNorm and product, the head) over 11 rows in one
/// dispatch against each row run by itself.
#[test]
fn gemv_rows_give_the_same_bits_together_as_alone() {
    let Some(g) = setup() else { return };
    let mut rng = Rng::new(7);
    let (t, kk, n) = (11, 300, 70);
    let x = rng.vec(t * kk, 1.0);
    let (w, b) = (g.ctx.upload("w", &rng.vec(kk * n, 0.3)), rng.vec(n, 0.5));
    let (lw, lb) = (rng.vec(kk, 1.0), rng.vec(kk, 0.5));
    let (b, lw, lb) = (
        g.ctx.upload("b", &b),
        g.ctx.upload("lw", &lw),
        g.ctx.upload("lb", &lb),
    );
    let dims = k::MatmulDims {
        k: kk as u32,
        n: n as u32,
        epilogue: Epilogue::Gelu as u32,
        eps: 1e-5,
    };
    let dims = g.ctx.uniform("dims", &dims);
    let head = k::ChunkDims {
        c: kk as u32,
        chunk_start: 0,
        chunk_rows: n as u32,
        v: n as u32,
    };
    let head = g.ctx.uniform("head dims", &head);
    // Each kernel over `rows` rows of `x`, its output read back.
    let run = |kernel: Kernel, x: &[f32], rows: usize| -> Vec<f32> {
        let (x, step) = (g.ctx.upload("x", x), g.step(rows));
        let out = g.ctx.upload("out", &vec![0.0f32; rows * n]);
        match kernel {
            Kernel::MatmulGemv => g.run_rows(
                kernel,
                &[&step, &dims, &x, &w, &b, &out],
                k::matmul_grid(kernel, rows, n),
                rows,
            ),
            Kernel::MatmulGemvLn => g.run_rows(
                kernel,
                &[&step, &dims, &x, &w, &b, &lw, &lb, &out],
                k::matmul_grid(kernel, rows, n),
                rows,
            ),
            _ => g.run_rows(
                kernel,
                &[&step, &head, &x, &w, &out],
                k::lm_head_grid(n, rows),
                rows,
            ),
        }
        g.read(&out)
    };
    for kernel in [Kernel::MatmulGemv, Kernel::MatmulGemvLn, Kernel::LmHead] {
        let together = run(kernel, &x, t);
        for r in 0..t {
            let alone = run(kernel, &x[r * kk..(r + 1) * kk], 1);
            let row = &together[r * n..(r + 1) * n];
            assert!(
                row.iter()
                    .zip(&alone)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{}: row {r} of {t} differs from the row alone",
                kernel.name()
            );
        }
    }
}

/// Greedy's choice on the device is `sampling::argmax`'s: the first of the largest in each row,
/// with ties across the threads' strides, every value -inf, a row of equal values and a maximum
/// at the last index; rows not a multiple of the workgroup's 256 threads long.
#[test]
fn argmax_takes_the_first_of_the_largest_in_each_row() {
    let Some(g) = setup() else { return };
    let v = 1000;
    let mut rng = Rng::new(8);
    let mut rows: Vec<Vec<f32>> = vec![rng.vec(v, 5.0)];
    let mut tied = rng.vec(v, 1.0);
    for i in [700, 3, 999, 259] {
        tied[i] = 2.0;
    }
    rows.push(tied);
    rows.push(vec![f32::NEG_INFINITY; v]);
    rows.push(vec![0.5; v]);
    // Values in tenths: many ties below the maximum, which sits at the last index.
    let mut coarse: Vec<f32> = rng
        .vec(v, 1.0)
        .iter()
        .map(|x| (x * 10.0).round() / 10.0)
        .collect();
    coarse[v - 1] = 1.5;
    rows.push(coarse);
    let argmax = |rows: &[Vec<f32>]| -> Vec<u32> {
        let dims = k::ArgmaxDims {
            v: rows[0].len() as u32,
            _pad: [0; 3],
        };
        let dims = g.ctx.uniform("dims", &dims);
        let logits = g.ctx.upload("logits", &rows.concat());
        let chosen = g.ctx.upload("chosen", &vec![u32::MAX; rows.len() + 1]);
        let grid = k::argmax_grid(rows.len());
        g.run(Kernel::Argmax, &[&dims, &logits, &chosen], grid);
        let got: Vec<u32> = g.read(&chosen).iter().map(|x| x.to_bits()).collect();
        assert_eq!(
            got[rows.len()],
            u32::MAX,
            "only the grid's rows are written"
        );
        got[..rows.len()].to_vec()
    };
    let want: Vec<u32> = rows.iter().map(|r| gpt2_web::sampling::argmax(r)).collect();
    assert_eq!(want[1..], [3, 0, 0, 999], "the rows test what they should");
    assert_eq!(argmax(&rows), want);
    // Rows shorter than the workgroup: threads past the end hold no index and lose to every value.
    let short: Vec<Vec<f32>> = rows.iter().map(|r| r[..100].to_vec()).collect();
    let want: Vec<u32> = short
        .iter()
        .map(|r| gpt2_web::sampling::argmax(r))
        .collect();
    assert_eq!(want[1..4], [3, 0, 0]);
    assert_eq!(argmax(&short), want);
}

/// Sampling's candidates on the device are `sampling::top_k`'s: the k largest of each row, of
/// equal ones at the k-th the smaller indices, NaN never taken before a number, for k = 1, a
/// sampler's usual 40 and the most (`MAX_TOP_K`), over GPT-2's vocabulary and a row shorter than
/// the workgroup; -0 below +0, as `total_cmp` has them.
#[test]
fn top_k_takes_the_k_largest_of_each_row_and_the_first_of_ties() {
    use gpt2_web::backend::MAX_TOP_K;
    let Some(g) = setup() else { return };
    let mut rng = Rng::new(9);
    let v = 50257;
    let mut rows: Vec<Vec<f32>> = vec![rng.vec(v, 8.0)];
    // Values in tenths: hundreds of ties at every value, the k-th among them.
    rows.push(
        rng.vec(v, 1.0)
            .iter()
            .map(|x| (x * 10.0).round() / 10.0)
            .collect(),
    );
    let mut odd = vec![0.0f32; v];
    odd[17] = f32::NAN;
    odd[3] = -0.0;
    odd[40_000] = f32::NEG_INFINITY;
    odd[50_000] = 1.0;
    rows.push(odd);
    let top = |rows: &[Vec<f32>], k: usize| -> Vec<Vec<(u32, u32)>> {
        let n = rows[0].len();
        let dims = k::TopKDims {
            v: n as u32,
            k: k as u32,
            _pad: [0; 2],
        };
        let dims = g.ctx.uniform("dims", &dims);
        let logits = g.ctx.upload("logits", &rows.concat());
        let out = g
            .ctx
            .upload("top", &vec![u32::MAX; (rows.len() + 1) * MAX_TOP_K * 2]);
        g.run(
            Kernel::TopK,
            &[&dims, &logits, &out],
            k::argmax_grid(rows.len()),
        );
        let got: Vec<u32> = g.read(&out).iter().map(|x| x.to_bits()).collect();
        assert!(
            got[rows.len() * MAX_TOP_K * 2..]
                .iter()
                .all(|&w| w == u32::MAX),
            "only the grid's rows"
        );
        (got.chunks(MAX_TOP_K * 2).take(rows.len()))
            .map(|r| {
                let mut pairs: Vec<(u32, u32)> =
                    r[..k * 2].chunks(2).map(|p| (p[0], p[1])).collect();
                pairs.sort_by_key(|p| p.1);
                pairs
            })
            .collect()
    };
    let want = |rows: &[Vec<f32>], k: usize| -> Vec<Vec<(u32, u32)>> {
        (rows.iter())
            .map(|r| {
                let mut out = Vec::new();
                gpt2_web::sampling::top_k(r, k, &mut out);
                let mut pairs: Vec<(u32, u32)> = out.iter().map(|c| (c.0.to_bits(), c.1)).collect();
                pairs.sort_by_key(|p| p.1);
                pairs
            })
            .collect()
    };
    for k in [1, 40, MAX_TOP_K] {
        let w = want(&rows, k);
        assert_eq!(top(&rows, k), w, "k = {k}");
        let ids: Vec<u32> = w[2].iter().map(|p| p.1).collect();
        assert!(
            !ids.contains(&17)
                && ids[..k.min(3)].contains(&match k {
                    1 => 50_000,
                    _ => 0,
                }),
            "k = {k}: {:?}",
            &ids[..k.min(4)]
        );
    }
    // -0 ranks below +0: with k = 2, row 2 keeps 1.0 and the first +0 (index 0), not index 3.
    assert_eq!(want(&rows, 2)[2], vec![(0, 0), (1f32.to_bits(), 50_000)]);
    let short: Vec<Vec<f32>> = rows.iter().map(|r| r[..100].to_vec()).collect();
    assert_eq!(top(&short, 40), want(&short, 40));
}
