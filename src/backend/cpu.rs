//! GPT-2 forward pass on the CPU, following transformers' `modeling_gpt2.py`.
//!
//! Weights are f32 (candle tensors; candle's matmul for a prompt, a GEMV for a decode step) or
//! 8-bit (`q8`: q8_0 blocks quantized at load time, with SIMD kernels). Everything else is
//! plain Rust over buffers that belong to the backend and only grow, so after the prompt a
//! decode step allocates nothing, copies no weights and writes its key and value into a KV
//! cache allocated once at load, (n_layer, n_head, n_ctx, head_size) for keys and for values.

use super::q8::{Q8Act, Q8Matrix};
use crate::config::{Activation, Config};
use crate::error::{Error, Result};
use crate::weights::{self, Gpt2Weights, TensorRef};
use candle_core::{Device, Tensor};
use serde::Serialize;

/// How the CPU backend stores the weight matrices.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CpuDtype {
    /// 32-bit floats: exact, 4 bytes per weight.
    F32,
    /// q8_0: 8-bit values in blocks of 32 with an f32 scale each, ~1.1 bytes per weight.
    #[default]
    Q8,
}

impl CpuDtype {
    pub fn name(self) -> &'static str {
        match self {
            CpuDtype::F32 => "f32",
            CpuDtype::Q8 => "q8",
        }
    }
}

impl std::str::FromStr for CpuDtype {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "f32" => Ok(CpuDtype::F32),
            "q8" | "q8_0" | "int8" => Ok(CpuDtype::Q8),
            other => Err(Error::param(
                "dtype",
                format!("\"{other}\"; expected f32 or q8"),
            )),
        }
    }
}

/// A weight matrix (out, in) in one of the formats.
enum Matrix {
    /// (out, in): Conv1D's (in, out) transposed, so each output is one contiguous row.
    F32(Tensor),
    Q8(Q8Matrix),
}

impl Matrix {
    /// From transformers' (in, out) layout (`conv1d`) or an (out, in) one (the embedding).
    fn new(t: &TensorRef, dtype: CpuDtype, conv1d: bool) -> Result<Matrix> {
        let v = t.try_to_f32()?;
        let [a, b] = t.shape;
        Ok(match (dtype, conv1d) {
            (CpuDtype::F32, false) => Matrix::F32(Tensor::from_vec(v, (a, b), &Device::Cpu)?),
            (CpuDtype::F32, true) => Matrix::F32(
                Tensor::from_vec(v, (a, b), &Device::Cpu)?
                    .t()?
                    .contiguous()?,
            ),
            (CpuDtype::Q8, false) => Matrix::Q8(Q8Matrix::quantize(&v, a, b, b, 1)),
            (CpuDtype::Q8, true) => Matrix::Q8(Q8Matrix::quantize(&v, b, a, 1, b)),
        })
    }

    /// Bytes one pass over the matrix reads.
    fn bytes(&self) -> usize {
        match self {
            Matrix::F32(t) => t.elem_count() * 4,
            Matrix::Q8(m) => m.bytes(),
        }
    }

    /// y (t, out) = x (t, in) · Wᵀ (+ b). One row of f32 takes the GEMV, which streams each
    /// weight row once; more rows take candle's matmul (the prompt only, which may allocate).
    /// Returns the stopwatch's laps: (quantizing the activations, the product).
    fn forward(
        &self,
        x: &[f32],
        b: Option<&[f32]>,
        act: &mut Q8Act,
        y: &mut [f32],
        watch: &mut Stopwatch,
    ) -> Result<(f64, f64)> {
        match self {
            Matrix::Q8(m) => {
                act.quantize(x, m.cols());
                let quantize = watch.lap();
                m.matmul(act, b, y);
                Ok((quantize, watch.lap()))
            }
            Matrix::F32(w) => {
                let (n_out, n_in) = w.dims2()?;
                let t = x.len() / n_in;
                if t == 1 {
                    with_f32(w, |w| gemv(x, w, b, y))?;
                } else {
                    let xt = Tensor::from_slice(x, (t, n_in), &Device::Cpu)?;
                    let out = xt.matmul(&w.t()?)?;
                    with_f32(&out, |o| y[..t * n_out].copy_from_slice(o))?;
                    if let Some(b) = b {
                        for row in y[..t * n_out].chunks_exact_mut(n_out) {
                            row.iter_mut().zip(b).for_each(|(y, b)| *y += b);
                        }
                    }
                }
                Ok((0.0, watch.lap()))
            }
        }
    }

    /// Row `r` as f32 (the embedding lookup).
    fn row(&self, r: usize, out: &mut [f32]) -> Result<()> {
        match self {
            Matrix::Q8(m) => m.dequantize_row(r, out),
            Matrix::F32(w) => {
                let n = out.len();
                with_f32(w, |w| out.copy_from_slice(&w[r * n..(r + 1) * n]))?;
            }
        }
        Ok(())
    }
}

struct LayerNorm {
    weight: Vec<f32>,
    bias: Vec<f32>,
}

struct Linear {
    weight: Matrix,
    bias: Vec<f32>,
}

struct Block {
    ln_1: LayerNorm,
    c_attn: Linear,      // (C, 3C)
    attn_c_proj: Linear, // (C, C)
    ln_2: LayerNorm,
    c_fc: Linear,       // (C, H)
    mlp_c_proj: Linear, // (H, C)
}

/// Working buffers, grown to the longest batch seen and then reused.
#[derive(Default)]
struct Scratch {
    x: Vec<f32>,   // (T, C) the residual stream
    h: Vec<f32>,   // (T, C) a LayerNorm's output
    qkv: Vec<f32>, // (T, 3C)
    a: Vec<f32>,   // (T, C) attention output, then a projection's
    m: Vec<f32>,   // (T, H)
    act: Q8Act,
}

fn grow(v: &mut Vec<f32>, n: usize) -> &mut [f32] {
    if v.len() < n {
        v.resize(n, 0.0);
    }
    &mut v[..n]
}

/// Where CPU forwards spent their time, summed over calls: the prompt's (more than one token)
/// and the decode steps' (one token each) apart. The phases are laps of one stopwatch, so they
/// add up to `total_ms`.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Profile {
    pub prefill: Phases,
    pub decode: Phases,
}

#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Phases {
    pub calls: usize,
    pub tokens: usize,
    pub total_ms: f64,
    /// The 8-bit matrix products of the layers (the f32 ones for `f32` weights).
    pub matmul_ms: f64,
    /// Activations to 8 bits before each product (`q8` only).
    pub quantize_ms: f64,
    pub attention_ms: f64,
    pub gelu_ms: f64,
    /// The LayerNorms, with the residual adds and the embedding lookup before them.
    pub layer_norm_ms: f64,
    /// The tied output projection over the vocabulary, quantization included.
    pub lm_head_ms: f64,
}

impl Phases {
    /// A layer's matrix product: its (quantize, matmul) laps.
    fn product(&mut self, (quantize, matmul): (f64, f64)) {
        self.quantize_ms += quantize;
        self.matmul_ms += matmul;
    }

    fn add(&mut self, o: &Phases) {
        self.calls += o.calls;
        self.tokens += o.tokens;
        self.total_ms += o.total_ms;
        self.matmul_ms += o.matmul_ms;
        self.quantize_ms += o.quantize_ms;
        self.attention_ms += o.attention_ms;
        self.gelu_ms += o.gelu_ms;
        self.layer_norm_ms += o.layer_norm_ms;
        self.lm_head_ms += o.lm_head_ms;
    }

    /// The phases by name, with their milliseconds.
    pub fn named(&self) -> [(&'static str, f64); 6] {
        [
            ("matmul", self.matmul_ms),
            ("quantize", self.quantize_ms),
            ("attention", self.attention_ms),
            ("gelu", self.gelu_ms),
            ("layer_norm", self.layer_norm_ms),
            ("lm_head", self.lm_head_ms),
        ]
    }
}

/// Laps between phases; when off, it reads no clock.
struct Stopwatch {
    on: bool,
    start: f64,
    last: f64,
}

impl Stopwatch {
    fn new(on: bool) -> Stopwatch {
        let now = if on { crate::platform::now_ms() } else { 0.0 };
        Stopwatch {
            on,
            start: now,
            last: now,
        }
    }

    /// Milliseconds since the last lap (0 when off).
    fn lap(&mut self) -> f64 {
        if !self.on {
            return 0.0;
        }
        let now = crate::platform::now_ms();
        let d = now - self.last;
        self.last = now;
        d
    }

    fn total(&self) -> f64 {
        self.last - self.start
    }
}

/// The CPU backend: the weights in the chosen format and a preallocated KV cache.
pub struct CpuBackend {
    config: Config,
    dtype: CpuDtype,
    wte: Matrix,   // (V, C), also the tied lm_head
    wpe: Vec<f32>, // (n_ctx, C)
    h: Vec<Block>,
    ln_f: LayerNorm,
    k_cache: Vec<Vec<f32>>, // n_layer × (n_head, n_ctx, head_size)
    v_cache: Vec<Vec<f32>>, // n_layer × (n_head, n_ctx, head_size)
    logits: Vec<f32>,       // (V,)
    profile: Option<Profile>,
    s: Scratch,
}

fn layer_norm(w: &weights::LayerNorm) -> LayerNorm {
    LayerNorm {
        weight: w.weight.to_f32(),
        bias: w.bias.to_f32(),
    }
}

fn linear(w: &weights::Linear, dtype: CpuDtype) -> Result<Linear> {
    Ok(Linear {
        weight: Matrix::new(&w.weight, dtype, true)?,
        bias: w.bias.to_f32(),
    })
}

impl CpuBackend {
    /// Converts checked weights to `dtype` and allocates the KV cache.
    pub fn new(config: &Config, w: &Gpt2Weights, dtype: CpuDtype) -> Result<Self> {
        let h =
            w.h.iter()
                .map(|b| {
                    Ok(Block {
                        ln_1: layer_norm(&b.ln_1),
                        c_attn: linear(&b.c_attn, dtype)?,
                        attn_c_proj: linear(&b.attn_c_proj, dtype)?,
                        ln_2: layer_norm(&b.ln_2),
                        c_fc: linear(&b.c_fc, dtype)?,
                        mlp_c_proj: linear(&b.mlp_c_proj, dtype)?,
                    })
                })
                .collect::<Result<Vec<_>>>()?;
        let cache = config.n_positions * config.n_embd;
        Ok(CpuBackend {
            config: config.clone(),
            dtype,
            wte: Matrix::new(&w.wte, dtype, false)?,
            wpe: w.wpe.to_f32(),
            h,
            ln_f: layer_norm(&w.ln_f),
            k_cache: (0..config.n_layer)
                .map(|_| crate::mem::try_zeroed(cache, "the KV cache"))
                .collect::<Result<_>>()?,
            v_cache: (0..config.n_layer)
                .map(|_| crate::mem::try_zeroed(cache, "the KV cache"))
                .collect::<Result<_>>()?,
            logits: vec![0.0; config.vocab_size],
            profile: None,
            s: Scratch::default(),
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn dtype(&self) -> CpuDtype {
        self.dtype
    }

    /// Weight bytes one decode step reads: every matrix once (the lm_head is `wte`), plus the
    /// f32 biases and LayerNorm parameters.
    pub fn decode_weight_bytes(&self) -> f64 {
        let small = |l: &LayerNorm| 4 * (l.weight.len() + l.bias.len());
        let lin = |l: &Linear| l.weight.bytes() + 4 * l.bias.len();
        let blocks: usize = self
            .h
            .iter()
            .map(|b| {
                small(&b.ln_1)
                    + small(&b.ln_2)
                    + lin(&b.c_attn)
                    + lin(&b.attn_c_proj)
                    + lin(&b.c_fc)
                    + lin(&b.mlp_c_proj)
            })
            .sum();
        (blocks + self.wte.bytes() + small(&self.ln_f)) as f64
    }

    /// Logits of the last of `ids` at positions `pos..` (checked by the caller).
    pub fn forward(&mut self, ids: &[u32], pos: usize) -> Result<&[f32]> {
        // With a thread pool, the whole forward runs on one of its threads: one hop into the
        // pool per call, and the matrix products and heads inside split with no further hops.
        #[cfg(feature = "threads")]
        if rayon::current_num_threads() > 1 && rayon::current_thread_index().is_none() {
            return rayon::scope(move |_| self.forward_in_place(ids, pos));
        }
        self.forward_in_place(ids, pos)
    }

    fn forward_in_place(&mut self, ids: &[u32], pos: usize) -> Result<&[f32]> {
        let (t, c) = (ids.len(), self.config.n_embd);
        let hid = self.config.n_inner;
        let eps = self.config.layer_norm_epsilon;
        let mut s = std::mem::take(&mut self.s);
        let mut w = Stopwatch::new(self.profile.is_some());
        let mut p = Phases::default();
        let x = grow(&mut s.x, t * c);
        for (i, (&id, row)) in ids.iter().zip(x.chunks_exact_mut(c)).enumerate() {
            self.wte.row(id as usize, row)?;
            let p = &self.wpe[(pos + i) * c..][..c];
            row.iter_mut().zip(p).for_each(|(x, p)| *x += p);
        }
        for layer in 0..self.h.len() {
            // The forward returns the last position's logits, so after the last layer's keys and
            // values are cached, only the last row goes on: a prompt skips most of that layer.
            let q0 = if layer + 1 == self.h.len() { t - 1 } else { 0 };
            let tq = t - q0;
            let b = &self.h[layer];
            let h = grow(&mut s.h, t * c);
            layer_norm_forward(x, &b.ln_1, eps, h);
            p.layer_norm_ms += w.lap();
            let qkv = grow(&mut s.qkv, t * 3 * c);
            let laps = b
                .c_attn
                .weight
                .forward(h, Some(&b.c_attn.bias), &mut s.act, qkv, &mut w)?;
            p.product(laps);
            let a = grow(&mut s.a, tq * c);
            self.attention(layer, qkv, pos, q0, a);
            p.attention_ms += w.lap();
            let x = &mut x[q0 * c..];
            let b = &self.h[layer];
            let h = grow(&mut s.h, tq * c);
            let laps = b.attn_c_proj.weight.forward(
                a,
                Some(&b.attn_c_proj.bias),
                &mut s.act,
                h,
                &mut w,
            )?;
            p.product(laps);
            x.iter_mut().zip(h.iter()).for_each(|(x, h)| *x += h);
            layer_norm_forward(x, &b.ln_2, eps, h);
            p.layer_norm_ms += w.lap();
            let m = grow(&mut s.m, tq * hid);
            let laps = b
                .c_fc
                .weight
                .forward(h, Some(&b.c_fc.bias), &mut s.act, m, &mut w)?;
            p.product(laps);
            gelu(m, self.config.activation);
            p.gelu_ms += w.lap();
            let laps =
                b.mlp_c_proj
                    .weight
                    .forward(m, Some(&b.mlp_c_proj.bias), &mut s.act, h, &mut w)?;
            p.product(laps);
            x.iter_mut().zip(h.iter()).for_each(|(x, h)| *x += h);
        }
        let h = grow(&mut s.h, c);
        layer_norm_forward(&x[(t - 1) * c..t * c], &self.ln_f, eps, h);
        p.layer_norm_ms += w.lap();
        let result = self
            .wte
            .forward(h, None, &mut s.act, &mut self.logits, &mut w);
        self.s = s;
        let (quantize, product) = result?;
        p.lm_head_ms += quantize + product;
        if let Some(profile) = &mut self.profile {
            p.calls = 1;
            p.tokens = t;
            p.total_ms = w.total();
            let into = if t > 1 {
                &mut profile.prefill
            } else {
                &mut profile.decode
            };
            into.add(&p);
        }
        Ok(&self.logits)
    }

    /// Starts (or stops) timing each phase of each forward; starting clears the sums.
    pub fn set_profiling(&mut self, on: bool) {
        self.profile = on.then(Profile::default);
    }

    /// The sums since profiling started, if it is on.
    pub fn profile(&self) -> Option<Profile> {
        self.profile
    }

    /// Causal self-attention of the T new positions over the cache, writing their k and v first;
    /// `out` gets the rows of queries `q0..T`. The cache is (n_head, n_ctx, head_size) per
    /// layer, so each head reads one contiguous run.
    fn attention(&mut self, layer: usize, qkv: &[f32], pos: usize, q0: usize, out: &mut [f32]) {
        let c = self.config.n_embd;
        let (nh, hs, n_ctx) = (
            self.config.n_head,
            self.config.head_size(),
            self.config.n_positions,
        );
        let t = qkv.len() / (3 * c);
        let (kc, vc) = (&mut self.k_cache[layer], &mut self.v_cache[layer]);
        for i in 0..t {
            let row = &qkv[i * 3 * c..(i + 1) * 3 * c];
            for head in 0..nh {
                let at = (head * n_ctx + pos + i) * hs;
                kc[at..at + hs].copy_from_slice(&row[c + head * hs..][..hs]);
                vc[at..at + hs].copy_from_slice(&row[2 * c + head * hs..][..hs]);
            }
        }
        let mut scale = if self.config.scale_attn_weights {
            1.0 / (hs as f32).sqrt()
        } else {
            1.0
        };
        if self.config.scale_attn_by_inverse_layer_idx {
            scale /= (layer + 1) as f32;
        }
        let (kc, vc) = (&self.k_cache[layer][..], &self.v_cache[layer][..]);
        // One (query row, head) pair: out[j] with j = row · n_head + head.
        let attend = |j: usize, o: &mut [f32]| {
            let (i, head) = (q0 + j / nh, j % nh);
            let n = pos + i + 1; // positions this query sees
            let q = &qkv[i * 3 * c + head * hs..][..hs];
            let k = &kc[head * n_ctx * hs..][..n * hs];
            let v = &vc[head * n_ctx * hs..][..n * hs];
            SCORES.with_borrow_mut(|scores| {
                if scores.len() < n_ctx {
                    scores.resize(n_ctx, 0.0); // once per thread
                }
                let scores = &mut scores[..n];
                let mut max = f32::NEG_INFINITY;
                for (s, k) in scores.iter_mut().zip(k.chunks_exact(hs)) {
                    *s = dot(q, k) * scale;
                    max = max.max(*s);
                }
                for s in scores.iter_mut() {
                    *s = super::vmath::exp(*s - max);
                }
                let inv = 1.0 / sum(scores);
                weighted_sum(scores, v, inv, o);
            })
        };
        #[cfg(feature = "threads")]
        if rayon::current_num_threads() > 1 {
            use rayon::prelude::*;
            out.par_chunks_mut(hs)
                .enumerate()
                .for_each(|(j, o)| attend(j, o));
            return;
        }
        for (j, o) in out.chunks_exact_mut(hs).enumerate() {
            attend(j, o);
        }
    }
}

thread_local! {
    /// Attention scores of one query row over the positions it sees (n_ctx), per thread.
    static SCORES: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// out = inv · Σ_p w[p] · v[p] over the rows of v (n, out.len()). Sixteen outputs at a time
/// stay in registers while the rows stream past.
fn weighted_sum(w: &[f32], v: &[f32], inv: f32, out: &mut [f32]) {
    let hs = out.len();
    let mut c0 = 0;
    while c0 + 16 <= hs {
        let mut acc = [0f32; 16];
        for (&w, row) in w.iter().zip(v.chunks_exact(hs)) {
            let r = &row[c0..c0 + 16];
            for k in 0..16 {
                acc[k] += w * r[k];
            }
        }
        for (o, a) in out[c0..c0 + 16].iter_mut().zip(acc) {
            *o = a * inv;
        }
        c0 += 16;
    }
    for (j, o) in out.iter_mut().enumerate().skip(c0) {
        *o = inv
            * w.iter()
                .zip(v.chunks_exact(hs))
                .map(|(w, r)| w * r[j])
                .sum::<f32>();
    }
}

/// Σ v, in eight partial sums (so it vectorises).
fn sum(v: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let c = v.chunks_exact(8);
    let tail: f32 = c.remainder().iter().sum();
    for c in c {
        for k in 0..8 {
            acc[k] += c[k];
        }
    }
    acc.iter().sum::<f32>() + tail
}

#[inline]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    // Eight partial sums let the compiler vectorise without -ffast-math.
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// Each row of `x` normalised (biased variance, as torch) into `y`.
fn layer_norm_forward(x: &[f32], ln: &LayerNorm, eps: f32, y: &mut [f32]) {
    let c = ln.weight.len();
    for (xr, yr) in x.chunks_exact(c).zip(y.chunks_exact_mut(c)) {
        let mean = xr.iter().sum::<f32>() / c as f32;
        let var = xr.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / c as f32;
        let inv = 1.0 / (var + eps).sqrt();
        for (((y, x), w), b) in yr.iter_mut().zip(xr).zip(&ln.weight).zip(&ln.bias) {
            *y = (x - mean) * inv * w + b;
        }
    }
}

fn gelu(x: &mut [f32], activation: Activation) {
    match activation {
        Activation::GeluTanh => super::vmath::gelu_tanh(x),
        Activation::GeluErf => x.iter_mut().for_each(|v| {
            *v = 0.5 * *v * (1.0 + candle_core::cpu::erf::erf_f32(*v / std::f32::consts::SQRT_2))
        }),
    }
}

/// y[j] = dot(x, w[j]) (+ b[j]) for the rows of w (out, in).
fn gemv(x: &[f32], w: &[f32], b: Option<&[f32]>, y: &mut [f32]) {
    for (j, (row, y)) in w.chunks_exact(x.len()).zip(y.iter_mut()).enumerate() {
        *y = dot(x, row) + b.map_or(0.0, |b| b[j]);
    }
}

/// Runs `f` on the f32 values of a contiguous CPU tensor without copying them.
fn with_f32<R>(t: &Tensor, f: impl FnOnce(&[f32]) -> R) -> Result<R> {
    let (storage, layout) = t.storage_and_layout();
    let candle_core::Storage::Cpu(cpu) = &*storage else {
        return Err(Error::Backend("a CPU tensor is not in CPU memory".into()));
    };
    let data = cpu.as_slice::<f32>()?;
    let (start, end) = layout
        .contiguous_offsets()
        .ok_or_else(|| Error::Backend("a weight tensor is not contiguous".into()))?;
    Ok(f(&data[start..end]))
}
