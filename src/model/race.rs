//! `auto` by measurement. A model that `BackendChoice::Auto` put on a GPU is run there and on the
//! CPU (built again from the weights it was loaded from) over the same short, timed run: a prompt
//! of `PROMPT` tokens, then `STEPS` greedy decode steps, after one untimed pass on each (first use
//! compiles pipelines and touches caches). It stays on the faster one. The run is a check too: no
//! hardware GPU has run this WGSL in our tests, so the GPU's logits after the prompt must agree
//! with the CPU's, or the model runs on the CPU and says why — a wrong answer is worse than a slow
//! one. When the CPU copy does not fit the memory budget beside the GPU's, the GPU stays (the
//! rule for big models) and the times say so. `Model::backend_times` keeps what was measured.
//!
//! A front end that runs many sequences at once (`gpt2 serve`) says how many it expects
//! (`set_expected_batch`): then each backend also runs `STEPS` decode steps of that many
//! sequences together, and the faster per token at that batch wins — a GPU, mostly idle with one
//! sequence, may win at 8 where it loses at 1.

use super::Model;
use crate::backend::{Backend, Seq, Want};
use crate::error::{Error, Result};

/// Tokens of the timed prompt, and decode steps after it.
pub const PROMPT: usize = 16;
pub const STEPS: usize = 8;

/// The largest batch the race times (a front end expecting more is timed at this many).
pub const MOST_BATCH: usize = 16;

/// Sequences a front end expects to run together (`set_expected_batch`); 1 by default.
static EXPECTED_BATCH: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);

/// Tells `auto` how many sequences the loads after this call will usually run together (a
/// server: its concurrency), so that its race times a batch of that many (at most `MOST_BATCH`)
/// and chooses by it. 1 (the default): one sequence, as a page runs.
pub fn set_expected_batch(n: usize) {
    EXPECTED_BATCH.store(n.clamp(1, MOST_BATCH), std::sync::atomic::Ordering::Relaxed);
}

fn expected_batch() -> usize {
    EXPECTED_BATCH.load(std::sync::atomic::Ordering::Relaxed)
}

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
    /// The batch the race chose by: 1, or what the front end expected (`set_expected_batch`).
    pub batch: usize,
    /// With a batch above 1: milliseconds of its `STEPS` decode steps of `batch` sequences on
    /// each backend (`None` where it did not run: no copy on the CPU, or no room for the slots).
    pub webgpu_batch_ms: Option<f64>,
    pub cpu_batch_ms: Option<f64>,
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

/// With `batch` > 1: `STEPS` decode steps of `batch` sequences together on `backend` (one id
/// each, in slots 0..batch, after an untimed first step), their milliseconds; `None` when the
/// backend has no room for the slots. It is left with one slot.
async fn timed_batch(backend: &mut Backend, batch: usize, vocab: usize) -> Result<Option<f64>> {
    if batch <= 1 {
        return Ok(None);
    }
    match backend.kv_slots(batch).await {
        Ok(()) => {}
        Err(Error::Budget(_) | Error::Memory(_)) => return Ok(None),
        Err(e) => return Err(e),
    }
    let ids: Vec<[u32; 1]> = (0..batch as u32)
        .map(|i| [(i * 7919 + 5) % vocab as u32])
        .collect();
    fn rows(ids: &[[u32; 1]], pos: usize) -> Vec<Seq<'_>> {
        (ids.iter().enumerate())
            .map(|(slot, ids)| Seq { slot, ids, pos })
            .collect()
    }
    backend.pass(&rows(&ids, 0), Want::Argmax).await?; // first use, untimed
    let t = crate::platform::now_ms();
    for step in 1..=STEPS {
        backend.pass(&rows(&ids, step), Want::Argmax).await?;
    }
    let ms = crate::platform::now_ms() - t;
    backend.kv_slots(1).await?;
    Ok(Some(ms))
}

/// The backend the race keeps, and why: the CPU when the GPU's logits differ by more than
/// `agree`, else the faster per token — at the batch when both ran it, else alone. Times are
/// (CPU, GPU) milliseconds.
fn choose(
    diff: f64,
    agree: f64,
    alone: (f64, f64),
    at_batch: (Option<f64>, Option<f64>),
    batch: usize,
) -> (&'static str, String) {
    if diff > agree {
        return ("cpu", format!(
            "the GPU's logits differ from the CPU's by {:.2}% of their range (more than {}%), so its answers cannot be trusted; running on the CPU",
            100.0 * diff,
            100.0 * agree
        ));
    }
    // The faster of the two, and the sentence: "{what} took … ms on the CPU and … ms on the GPU".
    let faster = |(cpu, gpu): (f64, f64), what: String| {
        let (name, ms, other_name, other) = match cpu <= gpu {
            true => ("cpu", cpu, "the GPU", gpu),
            false => ("webgpu", gpu, "the CPU", cpu),
        };
        let on = if name == "cpu" { "the CPU" } else { "the GPU" };
        (
            name,
            format!("{what} took {ms:.1} ms on {on} and {other:.1} ms on {other_name}"),
        )
    };
    let (chosen, said) = faster(alone, format!("a {PROMPT}-token prompt and {STEPS} steps"));
    match at_batch {
        (Some(cpu), Some(gpu)) => {
            let steps = format!("{STEPS} steps of {batch} sequences together");
            let (chosen, at_batch) = faster((cpu, gpu), steps);
            let why =
                format!("measured at the batch the front end expects: {at_batch} (alone, {said})");
            (chosen, why)
        }
        _ => (chosen, format!("measured: {said}")),
    }
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
        let (vocab, batch) = (self.config.vocab_size, expected_batch());
        let gpu_dtype = self.backend.dtype_name();
        let timed = async {
            let run = timed_run(&mut self.backend, vocab).await?;
            Ok((run, timed_batch(&mut self.backend, batch, vocab).await?))
        };
        let ((webgpu_ms, gpu_logits), webgpu_batch_ms) = match timed.await {
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
                    batch,
                    webgpu_batch_ms,
                    cpu_batch_ms: None,
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
        let cpu_batch_ms = timed_batch(&mut cpu, batch, vocab).await?;
        let diff = logit_diff(&gpu_logits, &cpu_logits);
        let agree = agreement(cpu.dtype_name(), gpu_dtype);
        let alone = (cpu_ms, webgpu_ms);
        let (chosen, why) = choose(diff, agree, alone, (cpu_batch_ms, webgpu_batch_ms), batch);
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
            batch,
            webgpu_batch_ms,
            cpu_batch_ms,
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
