//! Backends turn token ids into logits and nothing else: no sampling, no stopping, no text.
//!
//! `forward(ids, pos)` runs the model over `ids` placed at positions `pos..pos + ids.len()`,
//! writing their keys and values into the backend's preallocated KV cache and attending to
//! everything cached before them; it returns the logits of the last position. Prefill is one
//! call with the whole prompt at `pos = 0`; each decode step is one call with one id. Calling
//! again with a smaller `pos` overwrites the cache from there, so there is no separate reset.

pub mod cpu;
pub mod gpu;

use crate::config::Config;
use crate::error::{Error, Result};

pub use crate::config::MAX_VERIFY;
pub use cpu::BatchRow;

/// Which backend to use. The GPU backend is called "webgpu" everywhere (the JS API, the CLI,
/// JSON, the docs): it is wgpu's WebGPU API, on the browser's WebGPU or natively on
/// Vulkan/Metal/DX12. The CLI also takes `gpu` for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    /// The faster of WebGPU and the CPU, measured: when a hardware adapter and device can be had
    /// and the model fits, the model is timed on both and its GPU logits checked against the
    /// CPU's (`model::race`); else the CPU.
    Auto,
    Cpu,
    WebGpu,
}

/// `BackendChoice`'s names, as `FromStr` reads them.
pub const BACKEND_NAMES: [&str; 3] = ["auto", "cpu", "webgpu"];

/// The weight formats a model loads in: the CPU's (`CpuDtype`) and "f16", 16-bit weight
/// matrices on WebGPU (q8 on the CPU, which has no f16 arithmetic).
pub const DTYPE_NAMES: [&str; 3] = ["q8", "f32", "f16"];

impl std::str::FromStr for BackendChoice {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(BackendChoice::Auto),
            "cpu" => Ok(BackendChoice::Cpu),
            "webgpu" | "gpu" => Ok(BackendChoice::WebGpu),
            other => Err(Error::param(
                "backend",
                format!("\"{other}\"; expected auto, cpu or webgpu"),
            )),
        }
    }
}

/// A running backend.
// One per model, made once and never moved in the loop, so its size does not matter.
#[allow(clippy::large_enum_variant)]
pub enum Backend {
    Cpu(cpu::CpuBackend),
    WebGpu(gpu::GpuBackend),
}

impl Backend {
    /// Logits (vocab_size) of the last of `ids`, placed at positions `pos..`.
    pub async fn forward(&mut self, ids: &[u32], pos: usize) -> Result<&[f32]> {
        self.config().check_ids(ids, pos)?;
        match self {
            Backend::Cpu(b) => b.forward(ids, pos, None),
            Backend::WebGpu(b) => b.forward(ids, pos, false).await,
        }
    }

    /// The verification pass of speculative decoding: every one of `ids` placed at positions
    /// `pos..` through the model, and the logits of (at least) the first `rows_out` of them, row
    /// after row; `more_logits` gives the others'. At most `MAX_VERIFY` ids. Each row equals, bit
    /// for bit, what `forward` of that id alone after the ones before it gives, so a speculative
    /// greedy generation is token for token the plain one. (The CPU computes the head, most of
    /// a small model's work, only for the rows asked for: after a rejected draft token the rest
    /// are never needed. The GPU computes every row in the same submission.)
    pub async fn forward_rows(
        &mut self,
        ids: &[u32],
        pos: usize,
        rows_out: usize,
    ) -> Result<&[f32]> {
        self.config().check_ids(ids, pos)?;
        if ids.len() > MAX_VERIFY {
            return Err(Error::param(
                "ids",
                format!(
                    "a verification pass takes at most {MAX_VERIFY} ids, not {}",
                    ids.len()
                ),
            ));
        }
        match self {
            Backend::Cpu(b) => b.forward(ids, pos, Some(rows_out)),
            Backend::WebGpu(b) => b.forward(ids, pos, true).await,
        }
    }

    /// One forward pass over several sequences (a batch), each in its own KV cache slot: into
    /// `out`, the logits of the last id of each, (rows.len(), vocab_size) in the order given.
    /// Each row is, bit for bit, what `forward` of that sequence alone in its slot gives, as long
    /// as the batch holds at most `batch_rows` sequences. The CPU runs every matrix product once
    /// for all of them; the GPU backend runs them one after another for now.
    pub async fn forward_batch(&mut self, rows: &[BatchRow<'_>], out: &mut Vec<f32>) -> Result<()> {
        for r in rows {
            self.config().check_ids(r.ids, r.pos)?;
        }
        out.clear();
        match self {
            Backend::Cpu(b) => out.extend_from_slice(b.forward_batch(rows)?),
            Backend::WebGpu(b) => {
                // One sequence after another; switching slots copies the active cache out and
                // the next one in, whole: the one going out may be longer than the one coming in.
                let (v, n_ctx) = (b.config().vocab_size, b.config().n_positions);
                for r in rows {
                    b.kv_use(r.slot, n_ctx).await?;
                    out.extend_from_slice(&b.forward(r.ids, r.pos, false).await?[..v]);
                }
            }
        }
        Ok(())
    }

    /// Whether `forward_batch` runs its sequences in one pass (the CPU) rather than one after
    /// another, switching whole KV caches (the GPU backend for now).
    pub fn batches(&self) -> bool {
        matches!(self, Backend::Cpu(_))
    }

    /// The KV cache slot forwards use now (`kv_use`; `forward_batch` on the GPU leaves its last
    /// row's in use).
    pub fn active_slot(&self) -> usize {
        match self {
            Backend::Cpu(b) => b.active_slot(),
            Backend::WebGpu(b) => b.active_slot(),
        }
    }

    /// Whether each row's result is the same whatever else the pass carries (a prompt at once or
    /// in pieces, one token or many): the 8-bit CPU kernels compute every row alone, so keys and
    /// values computed before give the logits of the whole prompt run again, bit for bit (prefix
    /// caching). In f32, products of more than `GEMV_ROWS` rows take candle's matmul, whose
    /// last bits differ from the GEMV's (tests/prefix.rs); the GPU backend is not checked for it.
    pub fn rows_alike(&self) -> bool {
        matches!(self, Backend::Cpu(b) if b.dtype() == cpu::CpuDtype::Q8)
    }

    /// The most sequences a `forward_batch` takes with each row exactly as alone.
    pub fn batch_rows(&self) -> usize {
        match self {
            Backend::Cpu(b) => b.batch_rows(),
            Backend::WebGpu(_) => usize::MAX,
        }
    }

    /// Makes `n` KV caches (slots), one per sequence kept at once (beam search); slot 0, the
    /// one every backend starts with, is in use afterwards and keeps what it held. `n = 1` frees
    /// the others.
    pub async fn kv_slots(&mut self, n: usize) -> Result<()> {
        match self {
            Backend::Cpu(b) => b.kv_slots(n),
            Backend::WebGpu(b) => b.kv_slots(n).await,
        }
    }

    /// Makes `slot` the KV cache later forwards read and write; its first `len` positions (and
    /// the previous slot's) are the ones that matter.
    pub async fn kv_use(&mut self, slot: usize, len: usize) -> Result<()> {
        match self {
            Backend::Cpu(b) => b.kv_use(slot, len),
            Backend::WebGpu(b) => b.kv_use(slot, len).await,
        }
    }

    /// Copies positions `0..len` of slot `from`'s KV cache into slot `to`'s (a beam that
    /// continues another's sequence), without recomputing them.
    pub async fn kv_copy(&mut self, from: usize, to: usize, len: usize) -> Result<()> {
        match self {
            Backend::Cpu(b) => b.kv_copy(from, to, len),
            Backend::WebGpu(b) => b.kv_copy(from, to, len).await,
        }
    }

    /// Rows of a verification pass's logits worth computing at once (the GPU computes them all).
    pub fn logit_chunk(&self) -> usize {
        match self {
            Backend::Cpu(b) => b.logit_chunk(),
            Backend::WebGpu(_) => MAX_VERIFY,
        }
    }

    /// The logits of rows `from..to` of the last verification pass.
    pub fn more_logits(&mut self, from: usize, to: usize) -> Result<&[f32]> {
        match self {
            Backend::Cpu(b) => b.more_logits(from, to),
            Backend::WebGpu(b) => b.rows(from, to),
        }
    }

    /// Row `r` of the last forward's final hidden state, after ln_f (what the output matrix
    /// multiplies): of every row after `forward_rows`, else of the last row (row 0) — the
    /// state multi-token prediction's heads guess from.
    pub fn hidden(&self, r: usize) -> Result<&[f32]> {
        let row = match self {
            Backend::Cpu(b) => b.hidden(r),
            Backend::WebGpu(b) => b.hidden(r),
        };
        row.ok_or_else(|| Error::State(format!("row {r} of the last forward's hidden state")))
    }

    /// The logits the last forward returned, at the start of its buffer: the last position's
    /// (V) after `forward`, every row's after `forward_rows`.
    pub fn logits(&self) -> &[f32] {
        match self {
            Backend::Cpu(b) => b.logits(),
            Backend::WebGpu(b) => b.logits(),
        }
    }

    /// "cpu" or "webgpu": what actually runs.
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Cpu(_) => "cpu",
            Backend::WebGpu(_) => "webgpu",
        }
    }

    /// The weight format in use: the CPU backend's ("q8" or "f32"), the GPU's ("f32" or "f16").
    pub fn dtype_name(&self) -> &'static str {
        match self {
            Backend::Cpu(b) => b.dtype().name(),
            Backend::WebGpu(b) => b.dtype_name(),
        }
    }

    /// The model's hyper-parameters.
    pub fn config(&self) -> &Config {
        match self {
            Backend::Cpu(b) => b.config(),
            Backend::WebGpu(b) => b.config(),
        }
    }

    /// Weight bytes one decode step reads (for the bandwidth bound).
    pub fn decode_weight_bytes(&self) -> f64 {
        match self {
            Backend::Cpu(b) => b.decode_weight_bytes(),
            Backend::WebGpu(b) => b.decode_weight_bytes(),
        }
    }

    /// Compute dispatches the last forward recorded on the GPU (`None` on the CPU); after a
    /// decode step, the dispatches per token.
    pub fn gpu_dispatches(&self) -> Option<usize> {
        match self {
            Backend::Cpu(_) => None,
            Backend::WebGpu(b) => Some(b.dispatches()),
        }
    }

    /// Starts timing each phase of each CPU forward (clearing earlier sums), or stops; the GPU
    /// has no phase timers (its work is queued, not run, when the calls return).
    pub fn set_profiling(&mut self, on: bool) {
        if let Backend::Cpu(b) = self {
            b.set_profiling(on);
        }
    }

    /// The CPU phase sums since profiling started (`None` when off, and on the GPU).
    pub fn profile(&self) -> Option<cpu::Profile> {
        match self {
            Backend::Cpu(b) => b.profile(),
            Backend::WebGpu(_) => None,
        }
    }

    /// The GPU adapter in words (`None` on the CPU).
    pub fn gpu_adapter(&self) -> Option<&str> {
        match self {
            Backend::Cpu(_) => None,
            Backend::WebGpu(b) => Some(b.adapter()),
        }
    }
}
