//! `auto` by measurement. A model that `BackendChoice::Auto` put on a GPU is run there and on the
//! CPU (built again from the weights it was loaded from) over the same short, timed run: a prompt
//! of `PROMPT` tokens, then `STEPS` greedy decode steps, after one untimed pass on each (first use
//! compiles pipelines and touches caches). It stays on the faster one. The run is a check too: no
//! hardware GPU has run this WGSL in our tests, so the GPU's logits after the prompt must agree
//! with the CPU's, or the model runs on the CPU and says why — a wrong answer is worse than a slow
//! one. When the CPU copy does not fit the memory budget beside the GPU's, the GPU stays (the
//! rule for big models) and the times say so. `Model::backend_times` keeps what was measured.

use super::Model;
use crate::backend::{Backend, Seq, Want};
use crate::error::{Error, Result};

/// Tokens of the timed prompt, and decode steps after it.
pub const PROMPT: usize = 16;
pub const STEPS: usize = 8;

/// The most the two backends' logits after the prompt may differ, as a share of the CPU's logit
/// range (largest − smallest): when both hold the weights in f32, what the kernel tests allow
/// (the same arithmetic in another order); when either rounds them (the CPU's q8, the GPU's f16),
/// five times what q8 was measured to move the demo model's (0.95%, tests/race.rs). A shader that
/// computes the wrong thing moves them by tens of percent.
pub fn agreement(cpu_dtype: &str, gpu_dtype: &str) -> f64 {
    if cpu_dtype == "f32" && gpu_dtype == "f32" {
        1e-3
    } else {
        0.05
    }
}

/// What the race measured, and what it chose.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BackendTimes {
    /// Milliseconds of the timed run on the GPU.
    pub webgpu_ms: f64,
    /// On the CPU; `None` when the CPU copy did not fit beside the GPU's.
    pub cpu_ms: Option<f64>,
    /// The largest difference between the two backends' logits after the prompt, as a share of
    /// the CPU's logit range.
    pub logit_diff: Option<f64>,
    /// "webgpu" or "cpu".
    pub chosen: &'static str,
    /// Why, in a sentence.
    pub why: String,
}

/// The timed run on `backend`: its milliseconds, and the logits after the prompt.
async fn timed_run(backend: &mut Backend, vocab: usize) -> Result<(f64, Vec<f32>)> {
    let ids: Vec<u32> = (0..PROMPT as u32)
        .map(|i| (i * 4099 + 13) % vocab as u32)
        .collect();
    fn at(ids: &[u32], pos: usize) -> [Seq<'_>; 1] {
        [Seq { slot: 0, ids, pos }]
    }
    backend.pass(&at(&ids[..2], 0), Want::Last).await?; // first use, untimed
    let t = crate::platform::now_ms();
    let logits = backend.pass(&at(&ids, 0), Want::Last).await?.to_vec();
    let mut next = crate::sampling::argmax(&logits);
    for i in 0..STEPS {
        let id = [next];
        next = crate::sampling::argmax(backend.pass(&at(&id, PROMPT + i), Want::Last).await?);
    }
    Ok((crate::platform::now_ms() - t, logits))
}

/// max |a − b| over the CPU's logit range.
fn logit_diff(gpu: &[f32], cpu: &[f32]) -> f64 {
    let (lo, hi) = (cpu.iter()).fold((f32::MAX, f32::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    let worst = (gpu.iter().zip(cpu))
        .map(|(g, c)| {
            if g.is_finite() {
                (g - c).abs()
            } else {
                f32::INFINITY
            }
        })
        .fold(0.0, f32::max);
    worst as f64 / (hi - lo).max(f32::MIN_POSITIVE) as f64
}

impl Model {
    /// Races the GPU the model is on against the CPU and keeps the faster backend that agrees
    /// (see the module). Nothing to do on the CPU or without the weights to build the CPU from.
    pub(super) async fn race(&mut self) -> Result<()> {
        if !matches!(self.backend, Backend::WebGpu(_)) || self.reload.is_none() {
            return Ok(());
        }
        let vocab = self.config.vocab_size;
        let gpu_dtype = self.backend.dtype_name();
        let (webgpu_ms, gpu_logits) = match timed_run(&mut self.backend, vocab).await {
            Ok(r) => r,
            Err(Error::Gpu(why)) => {
                let why = format!("the GPU failed its first run ({why}); running on the CPU");
                return self.fall_back_to_cpu(why).await;
            }
            Err(e) => return Err(e),
        };
        let mut cpu = match self.cpu_again().await {
            Ok(cpu) => Backend::Cpu(cpu),
            Err(Error::Memory(m) | Error::Budget(m)) => {
                self.backend_times = Some(BackendTimes {
                    webgpu_ms,
                    cpu_ms: None,
                    logit_diff: None,
                    chosen: "webgpu",
                    why: format!(
                        "on the GPU without a race: a copy on the CPU does not fit beside it ({m})"
                    ),
                });
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let (cpu_ms, cpu_logits) = timed_run(&mut cpu, vocab).await?;
        let diff = logit_diff(&gpu_logits, &cpu_logits);
        let agree = agreement(cpu.dtype_name(), gpu_dtype);
        let run = format!("a {PROMPT}-token prompt and {STEPS} steps");
        let (chosen, why) = if diff > agree {
            ("cpu", format!(
                "the GPU's logits differ from the CPU's by {:.2}% of their range (more than {}%), so its answers cannot be trusted; running on the CPU",
                100.0 * diff,
                100.0 * agree
            ))
        } else if cpu_ms <= webgpu_ms {
            (
                "cpu",
                format!(
                "measured: {run} took {cpu_ms:.1} ms on the CPU and {webgpu_ms:.1} ms on the GPU"
            ),
            )
        } else {
            (
                "webgpu",
                format!(
                "measured: {run} took {webgpu_ms:.1} ms on the GPU and {cpu_ms:.1} ms on the CPU"
            ),
            )
        };
        if chosen == "cpu" {
            self.backend = cpu;
            self.reload = None;
            self.kv.clear();
            self.kv.resize(1);
            self.gpu_unavailable = Some(why.clone());
        }
        self.backend_times = Some(BackendTimes {
            webgpu_ms,
            cpu_ms: Some(cpu_ms),
            logit_diff: Some(diff),
            chosen,
            why,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logits_that_disagree_fail_the_check() {
        let cpu: Vec<f32> = (0..1000)
            .map(|i| ((i * 37) % 101) as f32 / 10.0 - 5.0)
            .collect();
        let close: Vec<f32> = cpu.iter().map(|x| x + 0.01).collect();
        let agree = agreement("q8", "f32");
        assert!(logit_diff(&close, &cpu) < agree);
        // A shader that mixes up rows: the same values, in the wrong places.
        let shuffled: Vec<f32> = (cpu.iter().rev()).copied().collect();
        assert!(logit_diff(&shuffled, &cpu) > agree);
        let mut nan = close.clone();
        nan[7] = f32::NAN;
        assert!(logit_diff(&nan, &cpu).is_infinite());
        assert!(logit_diff(&vec![0.0; 1000], &cpu) > agree);
        // Both in f32: a hundredth of a unit on logits ten wide is too much.
        assert!(logit_diff(&close, &cpu) > agreement("f32", "f32"));
    }
}
