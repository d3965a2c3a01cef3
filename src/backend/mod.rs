//! Backends turn token ids into logits and nothing else: no sampling, no stopping, no text.
//!
//! Their one surface is `Backend::pass`: rows in (`Seq`: each sequence's new ids, the positions
//! they take and the KV cache slot they belong to), logits out (`Want`: the last row of each
//! sequence, or every row of a verification pass), plus the slots themselves (`kv_slots`,
//! `kv_copy`). Each slot is a preallocated KV cache; a pass writes its rows' keys and values into
//! their slots and attends to everything a slot held before them. Prefill is a pass with the
//! whole prompt at `pos = 0`, a decode step one with one id per sequence; a pass at a smaller
//! `pos` overwrites the slot from there, so there is no separate reset. The kernels stay behind
//! it (`cpu`, `gpu`); the rest of the enum's methods only read (names, limits, the last pass's
//! hidden state and profile).

pub mod cpu;
pub mod gpu;
pub(crate) mod rows;

use crate::config::Config;
use crate::error::{Error, Result};

pub use crate::config::MAX_VERIFY;
pub use rows::{Seq, Want, MAX_TOP_K};

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
    /// One forward pass: `seqs`' rows through the model, each sequence in its own KV cache slot
    /// (each slot at most once), and the logits `want` asks for. A row's logits are, bit for
    /// bit, what the same rows give in a pass of their own, as long as the pass carries at most
    /// `batch_rows` sequences. The CPU runs every matrix product once over all the rows; the GPU
    /// does too for a batch's decode step (one id per sequence), and runs several prompts one
    /// after another.
    pub async fn pass(&mut self, seqs: &[Seq<'_>], want: Want) -> Result<&[f32]> {
        self.check(seqs, want)?;
        match self {
            Backend::Cpu(b) => b.pass(seqs, want),
            Backend::WebGpu(b) => b.pass(seqs, want).await,
        }
    }

    /// What every backend refuses: positions outside the context, ids outside the vocabulary,
    /// a slot twice, and a verification pass over more than one sequence or `MAX_VERIFY` ids.
    fn check(&self, seqs: &[Seq<'_>], want: Want) -> Result<()> {
        if seqs.is_empty() {
            return Err(Error::param("ids", "nothing to run: no sequences"));
        }
        for (i, s) in seqs.iter().enumerate() {
            self.config().check_ids(s.ids, s.pos)?;
            if seqs[..i].iter().any(|o| o.slot == s.slot) {
                return Err(Error::State(format!(
                    "KV cache slot {} twice in one pass",
                    s.slot
                )));
            }
        }
        match (want, seqs) {
            (Want::Last | Want::Argmax | Want::ArgmaxAhead, _) => Ok(()),
            (Want::Top(k), _) if (1..=MAX_TOP_K).contains(&k) => Ok(()),
            (Want::Top(k), _) => Err(Error::param(
                "top_k",
                format!("a pass gives 1 to {MAX_TOP_K} candidates, not {k}"),
            )),
            (Want::Every(_), [s]) if s.ids.len() <= MAX_VERIFY => Ok(()),
            (Want::Every(_), [s]) => Err(Error::param(
                "ids",
                format!(
                    "a verification pass takes at most {MAX_VERIFY} ids, not {}",
                    s.ids.len()
                ),
            )),
            (Want::Every(_), _) => Err(Error::State(format!(
                "a verification pass over {} sequences (it takes one)",
                seqs.len()
            ))),
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

    /// The most sequences a `pass` takes with each row exactly as in a pass of its own.
    pub fn batch_rows(&self) -> usize {
        match self {
            Backend::Cpu(b) => b.batch_rows(),
            Backend::WebGpu(_) => MAX_VERIFY, // the rows its logits buffer holds
        }
    }

    /// Makes `n` KV caches (slots), one per sequence kept at once (a batch, beam search); slot
    /// 0, the one every backend starts with, keeps what it held, and so does every slot below
    /// `n`. Slots past `n` are freed.
    pub async fn kv_slots(&mut self, n: usize) -> Result<()> {
        match self {
            Backend::Cpu(b) => b.kv_slots(n),
            Backend::WebGpu(b) => b.kv_slots(n).await,
        }
    }

    /// Copies positions `0..len` of slot `from`'s KV cache into slot `to`'s (a beam that
    /// continues another's sequence, a prompt that starts as another's), without recomputing
    /// them.
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

    /// Row `r` of the last pass's final hidden state, after ln_f (what the output matrix
    /// multiplies): of every row after a verification pass, else of the last row (row 0) of a
    /// pass over one sequence — the
    /// state multi-token prediction's heads guess from.
    pub fn hidden(&self, r: usize) -> Result<&[f32]> {
        let row = match self {
            Backend::Cpu(b) => b.hidden(r),
            Backend::WebGpu(b) => b.hidden(r),
        };
        row.ok_or_else(|| Error::State(format!("row {r} of the last pass's hidden state")))
    }

    /// Each sequence's argmax after a `Want::Argmax` pass, in the order given.
    pub fn chosen(&self) -> &[u32] {
        match self {
            Backend::Cpu(b) => b.chosen(),
            Backend::WebGpu(b) => b.chosen(),
        }
    }

    /// Each sequence's k candidates (logit, id) after a `Want::Top(k)` pass, k after k in the
    /// order given, each sequence's unsorted.
    pub fn top(&self) -> &[(f32, u32)] {
        match self {
            Backend::Cpu(b) => b.top(),
            Backend::WebGpu(b) => b.top(),
        }
    }

    /// The logits the last pass returned, at the start of its buffer.
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

    /// The weight format in use: the CPU backend's ("q8" or "f32"), the GPU's ("q8", "f32" or "f16").
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

    /// Compute dispatches the last pass recorded on the GPU, all its submissions together
    /// (`None` on the CPU); after a decode step, the dispatches per token.
    pub fn gpu_dispatches(&self) -> Option<usize> {
        self.gpu_last_pass().map(|c| c.dispatches)
    }

    /// What the last pass asked of the GPU, all its submissions together (`None` on the CPU).
    pub fn gpu_last_pass(&self) -> Option<gpu::GpuCounters> {
        match self {
            Backend::Cpu(_) => None,
            Backend::WebGpu(b) => Some(b.last_pass()),
        }
    }

    /// Bytes this model holds for its weights and for its KV caches: allocated in (wasm) memory on
    /// the CPU, in buffers on the GPU's device; in the dtype it runs.
    pub fn memory(&self) -> (u64, u64) {
        match self {
            Backend::Cpu(b) => {
                let (w, kv) = b.allocated_bytes();
                (w as u64, kv as u64)
            }
            Backend::WebGpu(b) => b.memory(),
        }
    }

    /// What every GPU pass since load asked of the device: submissions, dispatches and bytes read
    /// back (`None` on the CPU). The difference over a run, per step, is what a step costs.
    pub fn gpu_totals(&self) -> Option<gpu::GpuCounters> {
        match self {
            Backend::Cpu(_) => None,
            Backend::WebGpu(b) => Some(b.totals()),
        }
    }

    /// Starts timing each phase of each CPU pass (clearing earlier sums), or stops; the GPU
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

    /// The 8-bit kernel, with q8 weights: the CPU's (`q8::kernel`, "avx512-vnni") or how the
    /// GPU's take their products (`gpu_q8_kernel`).
    pub fn q8_kernel(&self) -> Option<String> {
        match self {
            Backend::Cpu(_) => (self.dtype_name() == "q8").then(cpu::q8::kernel),
            Backend::WebGpu(_) => self.gpu_q8_kernel().map(str::to_string),
        }
    }

    /// The subgroup size the GPU kernels' trees count on (`GpuBackend::subgroup`, 1: none);
    /// `None` on the CPU.
    pub fn gpu_subgroup(&self) -> Option<u32> {
        match self {
            Backend::Cpu(_) => None,
            Backend::WebGpu(b) => Some(b.subgroup()),
        }
    }

    /// How the GPU's q8 kernels take their products, "dot4I8Packed" or "bytes"
    /// (`GpuBackend::q8_kernel`); `None` on the CPU and for f32 and f16 weights.
    pub fn gpu_q8_kernel(&self) -> Option<&'static str> {
        match self {
            Backend::Cpu(_) => None,
            Backend::WebGpu(b) => b.q8_kernel(),
        }
    }
}
