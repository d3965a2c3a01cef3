//! GPT-2's forward pass on the CPU, following transformers' `modeling_gpt2.py`: the embedding,
//! the blocks (LayerNorm, attention against the KV cache, MLP) and the tied head, over buffers
//! that belong to the backend and only grow, so a decode step allocates nothing.
//!
//! One pass may carry several sequences (a batch): their rows are stacked, so every matrix
//! product runs once over all of them (each weight read once for the whole batch), while
//! attention runs per sequence over its own KV cache slot. Every product, LayerNorm and
//! attention row is computed the same whatever rows sit beside it, so a sequence's logits in a
//! batch are bit for bit its logits alone (tests/batch.rs).

use super::attention::{attention, NewRows};
use super::matrix::Linear;
use super::profile::{Phase, Profiler};
use super::q8::Q8Act;
use super::{grow, no_slot, CpuBackend, KvSet};
use crate::backend::rows::{Seq, Want};
use crate::config::Activation;
use crate::error::{Error, Result};

/// Working buffers, grown to the longest batch seen and then reused.
#[derive(Default)]
pub(super) struct Scratch {
    x: Vec<f32>,            // (T, C) the residual stream
    pub(super) h: Vec<f32>, // (T, C) a LayerNorm's output, then a projection's; ln_f's rows after a pass
    qkv: Vec<f32>,          // (T, 3C)
    att: Vec<f32>,          // (T, C) attention output
    mlp: Vec<f32>,          // (T, H)
    heads: Vec<f32>,        // (n_head, T, head_size) 8-bit attention's outputs, head by head
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

/// A sequence during a pass: its ids and the KV cache taken out of its slot.
struct Seg<'a> {
    ids: &'a [u32],
    pos: usize,
    slot: usize,
    kv: KvSet,
}

impl CpuBackend {
    /// One forward pass (`Backend::pass`, which checks positions, ids and distinct slots): the
    /// logits of the last row of each sequence, or, with `Want::Every(n)`, the verification pass
    /// of speculative decoding: every row goes through ln_f, and the first n rows through the
    /// head, row after row (`more_logits` adds the others); each row is the same, bit for bit,
    /// as a pass of that one id after the ones before it.
    pub fn pass(&mut self, seqs: &[Seq], want: Want) -> Result<&[f32]> {
        let n = self.slots.len();
        if let Some(s) = seqs.iter().find(|s| s.slot >= n) {
            return Err(no_slot(s.slot, n));
        }
        let rows_out = match want {
            Want::Last | Want::Argmax | Want::ArgmaxAhead | Want::Top(_) => None,
            Want::Every(k) => Some(k),
        };
        self.chosen.clear();
        self.top.clear();
        self.compute(seqs, rows_out)?;
        let v = self.config.vocab_size;
        let (rows, verify) = match want {
            Want::Last => (seqs.len(), 0),
            Want::Every(k) => (k.min(seqs[0].ids.len()), seqs[0].ids.len()),
            Want::Argmax | Want::ArgmaxAhead => {
                let last = self.logits[..seqs.len() * v].chunks_exact(v);
                self.chosen.extend(last.map(crate::sampling::argmax));
                (0, 0)
            }
            Want::Top(k) => {
                for row in self.logits[..seqs.len() * v].chunks_exact(v) {
                    crate::sampling::top_k(row, k, &mut self.top);
                }
                (0, 0)
            }
        };
        self.verify_rows = verify;
        Ok(&self.logits[..rows * v])
    }

    /// Each sequence's argmax after a `Want::Argmax` pass.
    pub fn chosen(&self) -> &[u32] {
        &self.chosen
    }

    /// Each sequence's candidates after a `Want::Top` pass.
    pub fn top(&self) -> &[(f32, u32)] {
        &self.top
    }

    /// The pass itself: each sequence's slot taken out for it and put back after, whatever the
    /// outcome.
    fn compute(&mut self, rows: &[Seq], rows_out: Option<usize>) -> Result<()> {
        // With a thread pool, the whole forward runs on one of its threads: one hop into the
        // pool per call, and the matrix products and heads inside split with no further hops.
        let t: usize = rows.iter().map(|r| r.ids.len()).sum();
        #[cfg(feature = "threads")]
        if rayon::current_num_threads() > 1 && rayon::current_thread_index().is_none() {
            return on_pool(t, move || self.compute(rows, rows_out));
        }
        let mut segs: Vec<Seg> = rows
            .iter()
            .map(|r| Seg {
                ids: r.ids,
                pos: r.pos,
                slot: r.slot,
                kv: self.take_set(r.slot),
            })
            .collect();
        let mut s = std::mem::take(&mut self.scratch);
        let mut prof = Profiler::new(self.profile.is_some());
        let result = self.run(&mut segs, rows_out, &mut s, &mut prof);
        self.scratch = s;
        for seg in segs {
            self.put_set(seg.slot, seg.kv);
        }
        result?;
        if let (Some(profile), Some(phases)) = (&mut self.profile, prof.finish()) {
            profile.record(t, phases, true);
        }
        Ok(())
    }

    /// The head over rows `from..to` of the last verification pass (`Want::Every`),
    /// into those rows of the logits.
    pub fn more_logits(&mut self, from: usize, to: usize) -> Result<&[f32]> {
        #[cfg(feature = "threads")]
        if rayon::current_num_threads() > 1 && rayon::current_thread_index().is_none() {
            return on_pool(to.saturating_sub(from), move || self.more_logits(from, to));
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

    /// The blocks over the stacked rows of `segs`; then ln_f and the head over the last row of
    /// each (`rows_out: None`) or, for one sequence, over every row and the first `rows_out` rows.
    fn run(
        &mut self,
        segs: &mut [Seg],
        rows_out: Option<usize>,
        s: &mut Scratch,
        prof: &mut Profiler,
    ) -> Result<()> {
        let all = rows_out.is_some();
        debug_assert!(
            !all || segs.len() == 1,
            "a verification pass is one sequence"
        );
        let c = self.config.n_embd;
        let t: usize = segs.iter().map(|g| g.ids.len()).sum();
        let x = grow(&mut s.x, t * c);
        let ids = segs
            .iter()
            .flat_map(|g| g.ids.iter().enumerate().map(|(i, &id)| (id, g.pos + i)));
        for ((id, p), row) in ids.zip(x.chunks_exact_mut(c)) {
            self.wte.row(id as usize, row)?;
            let wpe_row = &self.wpe[p * c..][..c];
            row.iter_mut().zip(wpe_row).for_each(|(x, p)| *x += p);
        }
        for layer in 0..self.blocks.len() {
            // When only the last position's logits are wanted, after the last layer's keys and
            // values are cached only each sequence's last row goes on: a prompt skips most of
            // that layer.
            let last = layer + 1 == self.blocks.len() && !all;
            self.block(layer, segs, last, s, prof)?;
        }
        // ln_f over the rows left (the last of each sequence, or every row, kept in s.h for
        // `more_logits`); the tied head over those, or the first `rows_out` rows.
        let (rows, v) = (if all { t } else { segs.len() }, self.config.vocab_size);
        let eps = self.config.layer_norm_epsilon;
        let h = grow(&mut s.h, rows * c);
        self.ln_f.normalize(&s.x[..rows * c], eps, h);
        prof.lap(Phase::LayerNorm);
        if self.logits.len() < rows * v {
            self.logits.resize(rows * v, 0.0);
        }
        let rows = rows_out.map_or(rows, |n| n.min(t));
        let h = &s.h[..rows * c];
        self.wte.prepare(h, &mut s.act);
        self.wte
            .product(h, &s.act, None, &mut self.logits[..rows * v])?;
        prof.lap(Phase::LmHead);
        Ok(())
    }

    /// Block `layer` over the residual stream `s.x`, the rows of `segs` stacked: every row's key
    /// and value go into its sequence's cache; every row goes on through attention and the MLP,
    /// or with `last` only the last row of each sequence (the rows left are then stacked at the
    /// start of `s.x`).
    fn block(
        &self,
        layer: usize,
        segs: &mut [Seg],
        last: bool,
        s: &mut Scratch,
        prof: &mut Profiler,
    ) -> Result<()> {
        let (c, hid, eps) = (
            self.config.n_embd,
            self.config.n_inner,
            self.config.layer_norm_epsilon,
        );
        let t: usize = segs.iter().map(|g| g.ids.len()).sum();
        let q0 = |g: &Seg| if last { g.ids.len() - 1 } else { 0 };
        let tq: usize = segs.iter().map(|g| g.ids.len() - q0(g)).sum();
        let b = &self.blocks[layer];
        let h = grow(&mut s.h, t * c);
        b.ln_1.normalize(&s.x[..t * c], eps, h);
        prof.lap(Phase::LayerNorm);
        let qkv = grow(&mut s.qkv, t * 3 * c);
        linear(&b.c_attn, h, &mut s.act, qkv, prof)?;
        let att = grow(&mut s.att, tq * c);
        let scale = self.config.attention_scale(layer);
        let (mut row, mut out) = (0, 0);
        for g in segs.iter_mut() {
            let (n, q) = (g.ids.len(), q0(g));
            let (k, v) = (&mut g.kv.k[layer], &mut g.kv.v[layer]);
            let qkv = &s.qkv[row * 3 * c..(row + n) * 3 * c];
            let att = &mut att[out * c..(out + n - q) * c];
            let new = NewRows {
                qkv,
                pos: g.pos,
                q0: q,
                scale,
            };
            attention(&self.config, k, v, new, att, &mut s.heads);
            if q > 0 {
                // The rows that go on, stacked: always at or before where they are.
                s.x.copy_within((row + q) * c..(row + n) * c, out * c);
            } else if out != row {
                s.x.copy_within(row * c..(row + n) * c, out * c);
            }
            (row, out) = (row + n, out + n - q);
        }
        prof.lap(Phase::Attention);
        let x = &mut s.x[..tq * c];
        let h = grow(&mut s.h, tq * c);
        linear(&b.attn_c_proj, att, &mut s.act, h, prof)?;
        x.iter_mut().zip(h.iter()).for_each(|(x, h)| *x += h);
        b.ln_2.normalize(x, eps, h);
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

/// The most rows a pass keeps the pool awake for (`on_pool`): a decode step's, a batch's, a
/// draft's verification. A prompt's products are long enough that a wake costs little, and kept
/// awake through a 64-token prompt, Chromium's took 3× as long (`bench_ab.mjs --threads 2`).
#[cfg(feature = "threads")]
const HOT_ROWS: usize = 8;

/// Runs `f`, a pass over `rows` rows, on one of the pool's threads; for at most `HOT_ROWS`,
/// while its other threads stay awake: each runs a task that takes the pool's pending work
/// (`rayon::yield_now`) until `f` is done, instead of going to sleep between two of the pass's
/// parallel parts and being woken for the next. A wake is a round trip through the OS (in a VM,
/// an interrupt to an idle core), paid at every product of every layer: a decode step of the
/// 124M shape has about sixty parallel parts.
#[cfg(feature = "threads")]
fn on_pool<R: Send>(rows: usize, f: impl FnOnce() -> R + Send) -> R {
    use core::sync::atomic::{AtomicBool, Ordering};
    if rows > HOT_ROWS {
        return rayon::scope(move |_| f());
    }
    /// Sets the flag when dropped: a panic in `f` still lets the awake tasks end.
    struct Done<'a>(&'a AtomicBool);
    impl Drop for Done<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Release);
        }
    }
    let done = AtomicBool::new(false);
    rayon::scope(|s| {
        let _done = Done(&done);
        // `f`'s own thread, waiting inside `f` for a part another thread took, may pop one of
        // these tasks from its own queue: there it returns at once, as spinning under `f`
        // would wait for itself.
        let home = rayon::current_thread_index();
        let done = &done;
        for _ in 1..rayon::current_num_threads() {
            s.spawn(move |_| {
                while rayon::current_thread_index() != home && !done.load(Ordering::Acquire) {
                    if rayon::yield_now() != Some(rayon::Yield::Executed) {
                        core::hint::spin_loop();
                    }
                }
            });
        }
        f()
    })
}
