//! The CPU backend: GPT-2 on our own kernels, 8-bit (`q8`: q8_0 blocks quantized at load time,
//! with SIMD kernels) or f32 (candle tensors; candle's matmul for a prompt, a GEMV for a decode
//! step).
//!
//! - `matrix`: the weights in their runtime format, and the layers built from them;
//! - `forward`: the forward pass over buffers that only grow, so after the prompt a decode step
//!   allocates nothing, copies no weights and writes its key and value into a KV cache allocated
//!   once at load, (n_layer, n_head, n_ctx, head_size) for keys and for values;
//! - `attention`: attention over that cache, f32 with f32 weights and 8-bit with q8 weights;
//! - `q8`: the 8-bit format and its dot-product kernels, one file per instruction set;
//! - `vmath`: branch-free f32 math that vectorises;
//! - `profile`: where the time of each forward went, when asked.

mod attention;
mod forward;
mod matrix;
mod parts;
mod profile;
pub mod q8;
mod vmath;

pub use parts::CpuParts;
pub use profile::{Phase, Phases, Profile};
pub use vmath::{exp_sum, gemv, silu_residual};

use crate::config::Config;
use crate::error::{Error, Result};
use crate::weights::Gpt2Weights;
use attention::KvRows;
use matrix::{Block, LayerNorm, Matrix};

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

/// The CPU backend: the weights in the chosen format and a preallocated KV cache.
pub struct CpuBackend {
    config: Config,
    dtype: CpuDtype,
    wte: Matrix,   // (V, C), also the tied lm_head
    wpe: Vec<f32>, // (n_ctx, C)
    blocks: Vec<Block>,
    ln_f: LayerNorm,
    /// A KV cache per sequence kept at once (a batch, beam search), each n_layer × (n_head,
    /// n_ctx, head_size) for keys and for values; slot 0 made at load. A pass takes a slot's
    /// out while it runs (`take_set`) and puts it back.
    slots: Vec<KvSet>,
    logits: Vec<f32>, // (V,)
    /// Each sequence's argmax after a `Want::Argmax` pass.
    chosen: Vec<u32>,
    /// Each sequence's k candidates after a `Want::Top(k)` pass.
    top: Vec<(f32, u32)>,
    profile: Option<Profile>,
    scratch: forward::Scratch,
    /// Rows of the last verification pass whose ln_f output the scratch still holds.
    verify_rows: usize,
}

impl CpuBackend {
    /// Converts checked weights to `dtype` and allocates the KV cache.
    pub fn new(config: &Config, w: &Gpt2Weights, dtype: CpuDtype) -> Result<Self> {
        let mut parts = CpuParts::new(config, dtype);
        for (name, t) in w.tensors() {
            parts.add(&name, t)?;
        }
        parts.finish()
    }

    /// The backend from converted weights; allocates the KV cache.
    fn assemble(
        config: &Config,
        dtype: CpuDtype,
        wte: Matrix,
        wpe: Vec<f32>,
        blocks: Vec<Block>,
        ln_f: LayerNorm,
    ) -> Result<Self> {
        let cache = |keys| -> Result<Vec<KvRows>> {
            (0..config.n_layer)
                .map(|_| KvRows::new(config, dtype == CpuDtype::Q8, keys, "the KV cache"))
                .collect()
        };
        Ok(CpuBackend {
            config: config.clone(),
            dtype,
            wte,
            wpe,
            blocks,
            ln_f,
            slots: vec![KvSet {
                k: cache(true)?,
                v: cache(false)?,
            }],
            logits: vec![0.0; config.vocab_size],
            profile: None,
            scratch: Default::default(),
            verify_rows: 0,
            chosen: Vec::new(),
            top: Vec::new(),
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn dtype(&self) -> CpuDtype {
        self.dtype
    }

    /// Weight bytes one decode step reads: every matrix once (the lm_head is `wte`), plus the
    /// f32 biases and LayerNorm parameters. The same count as `Config::decode_weight_bytes`, from
    /// what is really held (q8 scales and padding included).
    pub fn decode_weight_bytes(&self) -> f64 {
        let blocks: usize = self.blocks.iter().map(Block::bytes).sum();
        (blocks + self.wte.bytes() + self.ln_f.bytes()) as f64
    }

    /// Bytes allocated (capacity, not length) for the weights and for the KV cache: what
    /// `budget::Footprint::cpu` predicts from config.json alone.
    pub fn allocated_bytes(&self) -> (usize, usize) {
        let blocks: usize = self.blocks.iter().map(Block::allocated_bytes).sum();
        let weights = blocks
            + self.wte.allocated_bytes()
            + 4 * self.wpe.capacity()
            + self.ln_f.allocated_bytes();
        let caches = self.slots.iter().flat_map(|s| s.k.iter().chain(&s.v));
        let kv: usize = caches.map(KvRows::allocated_bytes).sum();
        (weights, kv)
    }

    /// Makes `n` KV cache slots (at least 1), each a whole cache; the first `n` keep what they
    /// held, slots past `n` are freed.
    pub fn kv_slots(&mut self, n: usize) -> Result<()> {
        let n = n.max(1);
        self.slots.truncate(n);
        while self.slots.len() < n {
            let eight_bit = self.dtype == CpuDtype::Q8;
            let cache = |keys| -> Result<Vec<KvRows>> {
                (0..self.config.n_layer)
                    .map(|_| {
                        KvRows::new(
                            &self.config,
                            eight_bit,
                            keys,
                            "the KV cache of another sequence (beam search, a batch)",
                        )
                    })
                    .collect()
            };
            let set = KvSet {
                k: cache(true)?,
                v: cache(false)?,
            };
            self.slots.push(set);
        }
        Ok(())
    }

    /// Copies positions `0..len` of slot `from`'s KV cache into slot `to`'s.
    pub fn kv_copy(&mut self, from: usize, to: usize, len: usize) -> Result<()> {
        let n = self.slots.len();
        if from >= n || to >= n {
            return Err(no_slot(from.max(to), n));
        }
        if from == to {
            return Ok(());
        }
        let (hs, n_ctx) = (self.config.head_size(), self.config.n_positions);
        let len = len.min(n_ctx);
        let mut dst = self.take_set(to);
        let src = self.take_set(from);
        for (d, s) in (dst.k.iter_mut().chain(&mut dst.v)).zip(src.k.iter().chain(&src.v)) {
            d.copy_from(s, n_ctx, hs, len);
        }
        self.put_set(from, src);
        self.put_set(to, dst);
        Ok(())
    }

    /// Takes slot `slot`'s caches out for a pass; `put_set` puts them back.
    fn take_set(&mut self, slot: usize) -> KvSet {
        std::mem::take(&mut self.slots[slot])
    }

    fn put_set(&mut self, slot: usize, set: KvSet) {
        self.slots[slot] = set;
    }

    /// The most sequences one pass may carry with each giving the
    /// logits it gets alone: f32 products of up to `GEMV_ROWS` rows take the GEMV, which gives
    /// each row the same result whatever rows are beside it (more take candle's matmul, which
    /// does not promise that); the 8-bit products are row by row at any count.
    pub fn batch_rows(&self) -> usize {
        match self.dtype {
            CpuDtype::Q8 => 64,
            CpuDtype::F32 => matrix::GEMV_ROWS,
        }
    }

    /// Row `r` of the last pass's final hidden state (after ln_f): of every row after a
    /// verification pass, else of each sequence's last row (row 0 for one sequence).
    pub fn hidden(&self, r: usize) -> Option<&[f32]> {
        let c = self.config.n_embd;
        self.scratch.h.get(r * c..(r + 1) * c)
    }

    /// How many rows of a verification pass's head to compute at once: the rows the q8 kernel
    /// computes for about the price of one, and at least two (a kept draft token is the common
    /// case), so that a rejected draft wastes little.
    pub fn logit_chunk(&self) -> usize {
        match self.dtype {
            CpuDtype::Q8 => q8::ROWS_SHARING_LOADS.max(2),
            CpuDtype::F32 => 2,
        }
    }

    /// The logits of the last pass, at the start of the buffer (see `Backend::logits`).
    pub fn logits(&self) -> &[f32] {
        &self.logits
    }

    /// Starts (or stops) timing each phase of each forward; starting clears the sums.
    pub fn set_profiling(&mut self, on: bool) {
        self.profile = on.then(Profile::default);
    }

    /// The sums since profiling started, if it is on.
    pub fn profile(&self) -> Option<Profile> {
        self.profile
    }
}

/// One sequence's KV cache: n_layer × (n_head, n_ctx, head_size) keys and values.
#[derive(Default)]
struct KvSet {
    k: Vec<KvRows>,
    v: Vec<KvRows>,
}

/// The first `n` values of a working buffer that only grows.
fn grow(v: &mut Vec<f32>, n: usize) -> &mut [f32] {
    if v.len() < n {
        v.resize(n, 0.0);
    }
    &mut v[..n]
}

fn no_slot(slot: usize, n: usize) -> Error {
    Error::State(format!("KV cache slot {slot} does not exist ({n} made)"))
}
