//! GPT-2's forward pass on the CPU, following transformers' `modeling_gpt2.py`: the embedding,
//! the blocks (LayerNorm, attention against the KV cache, MLP) and the tied head, over buffers
//! that belong to the backend and only grow, so a decode step allocates nothing.

use super::attention::attention;
use super::matrix::Linear;
use super::profile::{Phase, Profiler};
use super::q8::Q8Act;
use super::{grow, CpuBackend};
use crate::config::Activation;
use crate::error::{Error, Result};

/// Working buffers, grown to the longest batch seen and then reused.
#[derive(Default)]
pub(super) struct Scratch {
    x: Vec<f32>,     // (T, C) the residual stream
    h: Vec<f32>,     // (T, C) a LayerNorm's output, then a projection's
    qkv: Vec<f32>,   // (T, 3C)
    att: Vec<f32>,   // (T, C) attention output
    mlp: Vec<f32>,   // (T, H)
    heads: Vec<f32>, // (n_head, T, head_size) 8-bit attention's outputs, head by head
    act: Q8Act,
}

/// y = x · Wᵀ + b, with the 8-bit conversion of `x` and the product timed apart.
fn linear(
    l: &Linear,
    x: &[f32],
    act: &mut Q8Act,
    y: &mut [f32],
    prof: &mut Profiler,
) -> Result<()> {
    if l.weight.prepare(x, act) {
        prof.lap(Phase::Quantize);
    }
    l.weight.product(x, act, Some(&l.bias), y)?;
    prof.lap(Phase::Matmul);
    Ok(())
}

impl CpuBackend {
    /// Logits of the last of `ids` at positions `pos..` (checked by the caller). With `head:
    /// Some(n)`, the verification pass of speculative decoding: every row goes through ln_f,
    /// and the first n rows through the head, row after row (`head_rows` adds the others); each
    /// row is the same, bit for bit, as a forward of that one id after the ones before it.
    pub fn forward(&mut self, ids: &[u32], pos: usize, head: Option<usize>) -> Result<&[f32]> {
        // With a thread pool, the whole forward runs on one of its threads: one hop into the
        // pool per call, and the matrix products and heads inside split with no further hops.
        #[cfg(feature = "threads")]
        if rayon::current_num_threads() > 1 && rayon::current_thread_index().is_none() {
            return rayon::scope(move |_| self.forward(ids, pos, head));
        }
        let t = ids.len();
        let mut s = std::mem::take(&mut self.scratch);
        let mut prof = Profiler::new(self.profile.is_some());
        let result = self.run(ids, pos, head, &mut s, &mut prof);
        self.scratch = s;
        result?;
        if let (Some(profile), Some(phases)) = (&mut self.profile, prof.finish()) {
            profile.record(t, phases, true);
        }
        let rows = head.map_or(1, |n| n.min(t));
        self.verify_rows = if head.is_some() { t } else { 0 };
        Ok(&self.logits[..rows * self.config.vocab_size])
    }

    /// The head over rows `from..to` of the last verification pass (`forward` with a `head`),
    /// into those rows of the logits.
    pub fn head_rows(&mut self, from: usize, to: usize) -> Result<&[f32]> {
        #[cfg(feature = "threads")]
        if rayon::current_num_threads() > 1 && rayon::current_thread_index().is_none() {
            return rayon::scope(move |_| self.head_rows(from, to));
        }
        let (c, v) = (self.config.n_embd, self.config.vocab_size);
        if from > to || to > self.verify_rows {
            return Err(Error::State(format!(
                "rows {from}..{to} of a verification pass of {} rows",
                self.verify_rows
            )));
        }
        let mut s = std::mem::take(&mut self.scratch);
        let mut prof = Profiler::new(self.profile.is_some());
        let h = &s.h[from * c..to * c];
        self.wte.prepare(h, &mut s.act);
        let out = &mut self.logits[from * v..to * v];
        let result = self.wte.product(h, &s.act, None, out);
        prof.lap(Phase::LmHead);
        self.scratch = s;
        result?;
        if let (Some(profile), Some(phases)) = (&mut self.profile, prof.finish()) {
            profile.record(self.verify_rows, phases, false);
        }
        Ok(&self.logits[from * v..to * v])
    }

    fn run(
        &mut self,
        ids: &[u32],
        pos: usize,
        head: Option<usize>,
        s: &mut Scratch,
        prof: &mut Profiler,
    ) -> Result<()> {
        let all = head.is_some();
        let (t, c) = (ids.len(), self.config.n_embd);
        let x = grow(&mut s.x, t * c);
        for (i, (&id, row)) in ids.iter().zip(x.chunks_exact_mut(c)).enumerate() {
            self.wte.row(id as usize, row)?;
            let wpe_row = &self.wpe[(pos + i) * c..][..c];
            row.iter_mut().zip(wpe_row).for_each(|(x, p)| *x += p);
        }
        for layer in 0..self.blocks.len() {
            // When only the last position's logits are wanted, after the last layer's keys and
            // values are cached only the last row goes on: a prompt skips most of that layer.
            let q0 = if layer + 1 == self.blocks.len() && !all {
                t - 1
            } else {
                0
            };
            self.block(layer, t, pos, q0, s, prof)?;
        }
        // ln_f over the last row, or every row (kept in s.h for `head_rows`); the tied head
        // over the last row, or the first `head` rows.
        let (first, v) = (if all { 0 } else { t - 1 }, self.config.vocab_size);
        let eps = self.config.layer_norm_epsilon;
        let h = grow(&mut s.h, (t - first) * c);
        self.ln_f.forward(&s.x[first * c..t * c], eps, h);
        prof.lap(Phase::LayerNorm);
        if self.logits.len() < (t - first) * v {
            self.logits.resize((t - first) * v, 0.0);
        }
        let rows = head.map_or(1, |n| n.min(t));
        let h = &s.h[..rows * c];
        self.wte.prepare(h, &mut s.act);
        self.wte
            .product(h, &s.act, None, &mut self.logits[..rows * v])?;
        prof.lap(Phase::LmHead);
        Ok(())
    }

    /// Block `layer` over the residual stream `s.x` (t, C): every row's key and value go into
    /// the cache, rows `q0..` go on through attention and the MLP.
    fn block(
        &mut self,
        layer: usize,
        t: usize,
        pos: usize,
        q0: usize,
        s: &mut Scratch,
        prof: &mut Profiler,
    ) -> Result<()> {
        let (c, hid, eps) = (
            self.config.n_embd,
            self.config.n_inner,
            self.config.layer_norm_epsilon,
        );
        let tq = t - q0;
        let b = &self.blocks[layer];
        let x = &mut s.x[..t * c];
        let h = grow(&mut s.h, t * c);
        b.ln_1.forward(x, eps, h);
        prof.lap(Phase::LayerNorm);
        let qkv = grow(&mut s.qkv, t * 3 * c);
        linear(&b.c_attn, h, &mut s.act, qkv, prof)?;
        let att = grow(&mut s.att, tq * c);
        let (k, v) = (&mut self.k_cache[layer], &mut self.v_cache[layer]);
        let scale = self.config.attention_scale(layer);
        attention(&self.config, k, v, scale, qkv, pos, q0, att, &mut s.heads);
        prof.lap(Phase::Attention);
        let x = &mut x[q0 * c..];
        let h = grow(&mut s.h, tq * c);
        linear(&b.attn_c_proj, att, &mut s.act, h, prof)?;
        x.iter_mut().zip(h.iter()).for_each(|(x, h)| *x += h);
        b.ln_2.forward(x, eps, h);
        prof.lap(Phase::LayerNorm);
        let m = grow(&mut s.mlp, tq * hid);
        linear(&b.c_fc, h, &mut s.act, m, prof)?;
        gelu(m, self.config.activation);
        prof.lap(Phase::Gelu);
        linear(&b.mlp_c_proj, m, &mut s.act, h, prof)?;
        x.iter_mut().zip(h.iter()).for_each(|(x, h)| *x += h);
        Ok(())
    }
}

fn gelu(x: &mut [f32], activation: Activation) {
    // A prompt's rows are split between the threads (elementwise, so the values are the same).
    #[cfg(feature = "threads")]
    if rayon::current_num_threads() > 1 && x.len() >= 2 * PAR_MIN {
        use rayon::prelude::*;
        x.par_chunks_mut(PAR_MIN)
            .for_each(|x| gelu_here(x, activation));
        return;
    }
    gelu_here(x, activation)
}

/// Values per parallel chunk of an elementwise phase: below two of them one thread does it all.
#[cfg(feature = "threads")]
const PAR_MIN: usize = 16 * 1024;

fn gelu_here(x: &mut [f32], activation: Activation) {
    match activation {
        Activation::GeluTanh => super::vmath::gelu_tanh(x),
        Activation::GeluErf => x.iter_mut().for_each(|v| {
            *v = 0.5 * *v * (1.0 + candle_core::cpu::erf::erf_f32(*v / std::f32::consts::SQRT_2))
        }),
    }
}
