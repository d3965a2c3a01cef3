//! Backends turn token ids into logits and nothing else: no sampling, no stopping, no text.
//!
//! `forward(ids, pos)` runs the model over `ids` placed at positions `pos..pos + ids.len()`,
//! writing their keys and values into the backend's preallocated KV cache and attending to
//! everything cached before them; it returns the logits of the last position. Prefill is one
//! call with the whole prompt at `pos = 0`; each decode step is one call with one id. Calling
//! again with a smaller `pos` overwrites the cache from there, so there is no separate reset.

pub mod cpu;
pub mod gpu;
pub mod q8;
mod vmath;

use crate::config::Config;
use crate::error::{Error, Result};

/// Which backend to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    /// WebGPU when an adapter and device can be had and the model fits, else the CPU.
    Auto,
    Cpu,
    Gpu,
}

impl std::str::FromStr for BackendChoice {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(BackendChoice::Auto),
            "cpu" => Ok(BackendChoice::Cpu),
            "gpu" | "webgpu" => Ok(BackendChoice::Gpu),
            other => Err(Error::param(
                "backend",
                format!("\"{other}\"; expected auto, cpu or gpu"),
            )),
        }
    }
}

/// A running backend.
// One per model, made once and never moved in the loop, so its size does not matter.
#[allow(clippy::large_enum_variant)]
pub enum Backend {
    Cpu(cpu::CpuBackend),
    Gpu(gpu::GpuBackend),
}

impl Backend {
    /// Logits (vocab_size) of the last of `ids`, placed at positions `pos..`.
    pub async fn forward(&mut self, ids: &[u32], pos: usize) -> Result<&[f32]> {
        check_forward(self.config(), ids, pos)?;
        match self {
            Backend::Cpu(b) => b.forward(ids, pos),
            Backend::Gpu(b) => b.forward(ids, pos).await,
        }
    }

    /// "cpu" or "webgpu": what actually runs.
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Cpu(_) => "cpu",
            Backend::Gpu(_) => "webgpu",
        }
    }

    /// The weight format in use: the CPU backend's ("q8" or "f32"); the GPU runs f32.
    pub fn dtype_name(&self) -> &'static str {
        match self {
            Backend::Cpu(b) => b.dtype().name(),
            Backend::Gpu(_) => "f32",
        }
    }

    /// The model's hyper-parameters.
    pub fn config(&self) -> &Config {
        match self {
            Backend::Cpu(b) => b.config(),
            Backend::Gpu(b) => b.config(),
        }
    }

    /// Weight bytes one decode step reads (for the bandwidth bound).
    pub fn decode_weight_bytes(&self) -> f64 {
        match self {
            Backend::Cpu(b) => b.decode_weight_bytes(),
            Backend::Gpu(b) => b.decode_weight_bytes(),
        }
    }

    /// Compute dispatches the last forward recorded on the GPU (`None` on the CPU); after a
    /// decode step, the dispatches per token.
    pub fn gpu_dispatches(&self) -> Option<usize> {
        match self {
            Backend::Cpu(_) => None,
            Backend::Gpu(b) => Some(b.dispatches()),
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
            Backend::Gpu(_) => None,
        }
    }

    /// The GPU adapter in words (`None` on the CPU).
    pub fn gpu_adapter(&self) -> Option<&str> {
        match self {
            Backend::Cpu(_) => None,
            Backend::Gpu(b) => Some(b.adapter()),
        }
    }
}

/// The checks every backend relies on: a non-empty batch inside the context, ids in the vocabulary.
pub(crate) fn check_forward(config: &Config, ids: &[u32], pos: usize) -> Result<()> {
    if ids.is_empty() {
        return Err(Error::Backend("forward called with no tokens".into()));
    }
    if pos + ids.len() > config.n_positions {
        return Err(Error::Backend(format!(
            "positions {pos}..{} exceed the context of {} tokens",
            pos + ids.len(),
            config.n_positions
        )));
    }
    if let Some(&bad) = ids.iter().find(|&&id| id as usize >= config.vocab_size) {
        return Err(Error::Backend(format!(
            "token id {bad} is outside the model's vocabulary of {} ids",
            config.vocab_size
        )));
    }
    Ok(())
}
