//! The lesson's lab as a benchmark: total time against output length, the least-squares line
//! total ≈ TTFT + TPOT·n through it, prefill speed on a long prompt, and the memory-bandwidth
//! bound (weight bytes read per decode step ÷ measured single-thread read bandwidth) beside the measured TPOT.

use crate::backend::cpu::Profile;
use crate::error::{Error, Result};
use crate::generate::{GenerateParams, GenerationResult};
use crate::model::Model;
use serde::Serialize;

mod batch;
mod runs;
mod speculative;
pub use batch::{batch, BatchReport, BatchRun, StepCounters};
use runs::{alone, median, prompt_ids, run_once};
pub use speculative::{mtp_guess_ms, speculative, speculative_table, SpecPrompt, SpecRun};

/// One output length, median of the repetitions.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LengthRun {
    pub n: usize,
    pub total_ms: f64,
    pub ttft_ms: f64,
    pub tpot_ms: f64,
}

/// Everything `gpt2 bench` prints (camelCase in JSON, as everything the CLI and the JS API print).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BenchReport {
    pub backend: String,
    /// The weight format the backend holds: "q8" or "f32"; on the GPU also "f16".
    pub dtype: String,
    /// The 8-bit kernel with q8 weights (`Backend::q8_kernel`): the CPU's, or the GPU's way.
    pub kernel: Option<String>,
    /// On the GPU, the subgroup size its reductions count on (`Backend::gpu_subgroup`; 1: none).
    pub subgroup: Option<u32>,
    /// The GPU adapter, when on the GPU.
    pub adapter: Option<String>,
    /// What one decode step asked of the GPU, when on it.
    #[serde(flatten)]
    pub gpu: Option<StepCounters>,
    pub n_params: usize,
    /// Bytes the model holds for its weights and for its KV caches, in the dtype it runs (in
    /// memory on the CPU, in the device's buffers on the GPU).
    pub weights_bytes: u64,
    pub kv_cache_bytes: u64,
    pub weight_bytes_per_token: f64,
    pub read_gb_per_s: f64,
    pub bound_ms_per_token: f64,
    pub prompt_tokens: usize,
    pub runs: Vec<LengthRun>,
    pub fit_ttft_ms: f64,
    pub fit_tpot_ms: f64,
    pub fit_r2: f64,
    pub long_prompt_tokens: usize,
    pub prefill_ms: f64,
    pub prefill_tokens_per_sec: f64,
    /// Measured TPOT of the longest run ÷ the bandwidth bound.
    pub tpot_over_bound: f64,
    /// Where one more run of the longest length spent its time, on the CPU.
    pub profile: Option<Profile>,
}

/// Least-squares line y ≈ a + b·x and its R².
pub fn fit_line(xs: &[f64], ys: &[f64]) -> (f64, f64, f64) {
    let n = xs.len() as f64;
    let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
    let sxy: f64 = xs.iter().zip(ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = xs.iter().map(|x| (x - mx) * (x - mx)).sum();
    let b = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    let a = my - b * mx;
    let ss_tot: f64 = ys.iter().map(|y| (y - my) * (y - my)).sum();
    let ss_res: f64 = xs
        .iter()
        .zip(ys)
        .map(|(x, y)| (y - a - b * x).powi(2))
        .sum();
    let r2 = if ss_tot > 0.0 {
        1.0 - ss_res / ss_tot
    } else {
        1.0
    };
    (a, b, r2)
}

/// Single-thread read bandwidth in bytes per second (bytes summed ÷ time, best of 5) over a
/// buffer far larger than any cache: the rate at which one decode step can stream its weights.
pub fn read_bandwidth() -> Result<f64> {
    let n = 256 << 20;
    let mut buf = crate::platform::try_zeroed_huge::<u64>(n / 8, "the bandwidth probe")?;
    buf.fill(1);
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t = crate::platform::now_ms();
        let mut acc = [0u64; 8];
        let buf = std::hint::black_box(&buf);
        for (i, c) in buf.chunks_exact(8).enumerate() {
            let ahead = buf
                .as_ptr()
                .wrapping_add(i * 8 + crate::backend::cpu::q8::PREFETCH / 8);
            crate::platform::prefetch(ahead);
            for k in 0..8 {
                acc[k] = acc[k].wrapping_add(c[k]);
            }
        }
        std::hint::black_box(acc);
        best = best.min((crate::platform::now_ms() - t) / 1e3);
    }
    Ok(n as f64 / best)
}

/// `reps` generations of `n` tokens after `prompt`: their median times.
fn length_run(model: &mut Model, prompt: &[u32], n: usize, reps: usize) -> Result<LengthRun> {
    let rs = (0..reps.max(1))
        .map(|_| run_once(model, prompt, n))
        .collect::<Result<Vec<_>>>()?;
    Ok(LengthRun {
        n,
        total_ms: median(rs.iter().map(|r| r.metrics.total_ms).collect()),
        ttft_ms: median(rs.iter().map(|r| r.metrics.ttft_ms).collect()),
        tpot_ms: median(rs.iter().map(|r| r.metrics.tpot_ms).collect()),
    })
}

/// One more run of `n` tokens with the CPU's phase timers on (outside the timings): where its
/// forward passes spent their time (`None` on the GPU).
fn profiled(model: &mut Model, prompt: &[u32], n: usize) -> Result<Option<Profile>> {
    let params = GenerateParams {
        max_tokens: n,
        ignore_eos: true,
        prefix_cache: false,
        profile: true,
        ..Default::default()
    };
    let whole = crate::scheduler::Prompt::Ids(prompt.to_vec());
    let c = crate::scheduler::run(model, None, whole, params, &mut |_, _| {}, &|| false)?;
    Ok(c.profile)
}

/// Where a benchmark is, for a progress bar: what it runs now, the parts done, and how many there
/// are.
pub type Progress<'a> = &'a dyn Fn(&str, usize, usize);

/// Runs the lab: each of `lengths` `reps` times (greedy, forced length) after a warm-up.
pub fn run(
    model: &mut Model,
    lengths: &[usize],
    prompt_tokens: usize,
    reps: usize,
    progress: Progress,
) -> Result<BenchReport> {
    let n_ctx = model.config.n_positions;
    if n_ctx < 2 {
        return Err(Error::param(
            "model",
            format!(
                "a benchmark needs a context of at least 2 positions (a prompt and one step); \
                 this model's n_positions is {n_ctx}"
            ),
        ));
    }
    let prompt_tokens = prompt_tokens.clamp(1, n_ctx - 1);
    let prompt = prompt_ids(model, prompt_tokens)?;
    let room = n_ctx - prompt_tokens + 1;
    let lengths: Vec<usize> = lengths.iter().map(|&n| n.min(room)).collect();
    let parts = lengths.len() + 3;
    progress("warm-up", 0, parts);
    run_once(model, &prompt, 4)?; // warm-up: first-touch of weights and caches
    let runs = (lengths.iter().enumerate())
        .map(|(i, &n)| {
            progress(&format!("{n} tokens × {reps}"), i + 1, parts);
            length_run(model, &prompt, n, reps)
        })
        .collect::<Result<Vec<_>>>()?;
    // The last pass was a decode step.
    let gpu = (model.backend().gpu_last_pass()).map(|c| StepCounters::per_step(c, 1));
    let longest = lengths.iter().copied().max().unwrap_or(1);
    progress("the profile", parts - 2, parts);
    let profile = profiled(model, &prompt, longest)?;
    let xs: Vec<f64> = runs.iter().map(|r| r.n as f64).collect();
    let ys: Vec<f64> = runs.iter().map(|r| r.total_ms).collect();
    let (a, b, r2) = fit_line(&xs, &ys);

    let long = (n_ctx / 2).max(prompt_tokens).min(n_ctx - 1);
    let long_prompt = prompt_ids(model, long)?;
    progress("prefill", parts - 1, parts);
    let prefill = (0..reps.max(1))
        .map(|_| run_once(model, &long_prompt, 1).map(|r| r.metrics.prefill_ms))
        .collect::<Result<Vec<_>>>()?;
    let prefill_ms = median(prefill);

    let bytes = model.backend().decode_weight_bytes();
    let bw = read_bandwidth()?;
    let bound_ms = bytes / bw * 1e3;
    let tpot = runs.iter().max_by_key(|r| r.n).map_or(0.0, |r| r.tpot_ms);
    Ok(BenchReport {
        backend: model.backend().name().to_string(),
        dtype: model.backend().dtype_name().to_string(),
        kernel: model.backend().q8_kernel(),
        subgroup: model.backend().gpu_subgroup(),
        adapter: model.backend().gpu_adapter().map(str::to_string),
        gpu,
        n_params: model.config.n_params(),
        weights_bytes: model.backend().memory().0,
        kv_cache_bytes: model.backend().memory().1,
        weight_bytes_per_token: bytes,
        read_gb_per_s: bw / 1e9,
        bound_ms_per_token: bound_ms,
        prompt_tokens,
        runs,
        fit_ttft_ms: a,
        fit_tpot_ms: b,
        fit_r2: r2,
        long_prompt_tokens: long,
        prefill_ms,
        prefill_tokens_per_sec: long as f64 * 1e3 / prefill_ms,
        tpot_over_bound: tpot / bound_ms,
        profile,
    })
}

/// What the table's header says of the kernels: the 8-bit one with q8 weights, and on the GPU
/// whether its reductions use subgroups.
pub fn kernels(kernel: &Option<String>, subgroup: Option<u32>) -> String {
    let kernel = kernel.as_ref().map(|k| format!(", kernel {k}"));
    let subgroup = subgroup.map(|n| match n {
        1 => ", no subgroups".to_string(),
        n => format!(", subgroups of {n}"),
    });
    kernel.unwrap_or_default() + &subgroup.unwrap_or_default()
}

impl BenchReport {
    /// The report as a plain-text table.
    pub fn table(&self) -> String {
        let mut s = format!(
            "backend {} ({} weights{}) | {:.1}M parameters | {:.1} MB of weights read per token\n\
             memory: weights {:.1} MB, KV cache {:.1} MB\n\
             prompt: {} tokens; greedy, forced length; median of runs\n\n\
             {:>6} {:>12} {:>10} {:>10}\n",
            self.backend,
            self.dtype,
            kernels(&self.kernel, self.subgroup),
            self.n_params as f64 / 1e6,
            self.weight_bytes_per_token / 1e6,
            self.weights_bytes as f64 / 1e6,
            self.kv_cache_bytes as f64 / 1e6,
            self.prompt_tokens,
            "tokens",
            "total ms",
            "TTFT ms",
            "TPOT ms"
        );
        if let (Some(a), Some(c)) = (&self.adapter, &self.gpu) {
            let per = format!(
                "per decode token: {} submission, {} compute dispatches, {} bytes read back",
                c.submissions_per_step, c.dispatches_per_step, c.readback_bytes_per_step
            );
            s = format!("adapter: {a} | {per}\n") + &s;
        }
        for r in &self.runs {
            s += &format!(
                "{:>6} {:>12.1} {:>10.1} {:>10.2}\n",
                r.n, r.total_ms, r.ttft_ms, r.tpot_ms
            );
        }
        s += &format!(
            "\nfit: total ≈ {:.1} ms + {:.2} ms × n   (R² = {:.4})\n\
             prefill: {} tokens in {:.1} ms = {:.0} tokens/s\n\
             read bandwidth {:.1} GB/s → bandwidth bound {:.2} ms/token; measured TPOT {:.2} ms = {:.2}× the bound\n",
            self.fit_ttft_ms,
            self.fit_tpot_ms,
            self.fit_r2,
            self.long_prompt_tokens,
            self.prefill_ms,
            self.prefill_tokens_per_sec,
            self.read_gb_per_s,
            self.bound_ms_per_token,
            self.bound_ms_per_token * self.tpot_over_bound,
            self.tpot_over_bound
        );
        if self.adapter.is_some() {
            s += "  (the CPU's read rate and bound: this GPU's own bandwidth is not measured)\n";
        }
        if let Some(p) = &self.profile {
            let (pre, dec) = (&p.prompt, &p.decode);
            let per_token = dec.tokens.max(1) as f64;
            s += &format!(
                "\nprofile of one run ({} prompt tokens, {} decode steps):\n{:>12} {:>16} {:>18}\n",
                pre.tokens, dec.calls, "phase", "prompt ms", "decode ms/token"
            );
            let rows = pre.named().into_iter().zip(dec.named());
            for ((name, a), (_, b)) in rows {
                s += &format!(
                    "{name:>12} {a:>9.1} ({:>3.0}%) {:>11.3} ({:>3.0}%)\n",
                    100.0 * a / pre.total_ms.max(1e-9),
                    b / per_token,
                    100.0 * b / dec.total_ms.max(1e-9)
                );
            }
            s += &format!(
                "{:>12} {:>9.1}        {:>11.3}\n",
                "total",
                pre.total_ms,
                dec.total_ms / per_token
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::fit_line;

    #[test]
    fn fit_recovers_a_line_and_r2_drops_with_noise() {
        let xs = [10.0, 40.0, 80.0, 160.0];
        let ys: Vec<f64> = xs.iter().map(|x| 50.0 + 2.5 * x).collect();
        let (a, b, r2) = fit_line(&xs, &ys);
        assert!((a - 50.0).abs() < 1e-9 && (b - 2.5).abs() < 1e-12 && (r2 - 1.0).abs() < 1e-12);
        let noisy = [75.0, 150.0, 270.0, 450.0];
        let (_, _, r2) = fit_line(&xs, &noisy);
        assert!(r2 < 1.0 && r2 > 0.9, "{r2}");
    }
}

/// The naive loop against the cached one: the time of each step by position, one generation of
/// each, and the line step ≈ a + b·position through the naive steps (the cached ones are flat).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NaiveReport {
    pub prompt_tokens: usize,
    pub tokens: usize,
    /// Milliseconds of each step after the first, by output position: with the cache, without.
    pub cached_step_ms: Vec<f64>,
    pub naive_step_ms: Vec<f64>,
    pub cached_total_ms: f64,
    pub naive_total_ms: f64,
    /// naive step ≈ fit_a_ms + fit_b_ms × position (position = prompt + tokens so far).
    pub fit_a_ms: f64,
    pub fit_b_ms: f64,
    pub fit_r2: f64,
    /// Whether the two generations gave the same tokens (they must).
    pub identical: bool,
}

/// One generation of `tokens` tokens after `prompt_tokens`, with the KV cache and without.
pub fn naive(model: &mut Model, prompt_tokens: usize, tokens: usize) -> Result<NaiveReport> {
    let n_ctx = model.config.n_positions;
    let prompt_tokens = prompt_tokens.clamp(1, n_ctx.saturating_sub(2).max(1));
    let tokens = tokens.clamp(2, n_ctx - prompt_tokens + 1);
    let prompt = prompt_ids(model, prompt_tokens)?;
    let mut one = |kv_cache| -> Result<(GenerationResult, Vec<f64>)> {
        let params = GenerateParams {
            max_tokens: tokens,
            ignore_eos: true,
            kv_cache,
            prefix_cache: false,
            ..Default::default()
        };
        let mut times = Vec::new();
        let on_token = &mut |e: &crate::generate::TokenEvent| times.push(e.elapsed_ms);
        let r = alone(model, None, prompt.clone(), params, on_token)?;
        let steps = times.windows(2).map(|w| w[1] - w[0]).collect();
        Ok((r, steps))
    };
    one(true)?; // warm-up
    let (cached, cached_step_ms) = one(true)?;
    let (naive, naive_step_ms) = one(false)?;
    let xs: Vec<f64> = (0..naive_step_ms.len())
        .map(|i| (prompt_tokens + i + 1) as f64)
        .collect();
    let (a, b, r2) = fit_line(&xs, &naive_step_ms);
    Ok(NaiveReport {
        prompt_tokens,
        tokens,
        cached_step_ms,
        naive_step_ms,
        cached_total_ms: cached.metrics.total_ms,
        naive_total_ms: naive.metrics.total_ms,
        fit_a_ms: a,
        fit_b_ms: b,
        fit_r2: r2,
        identical: cached.tokens == naive.tokens,
    })
}

impl NaiveReport {
    /// Step times at eight positions, the line and the totals, as text.
    pub fn table(&self) -> String {
        let n = self.naive_step_ms.len();
        let mut s = format!(
            "{} prompt tokens, {} new tokens, greedy; one generation each\n\n{:>9} {:>14} {:>17}\n",
            self.prompt_tokens, self.tokens, "position", "cached ms/step", "no cache ms/step"
        );
        for k in 0..8.min(n) {
            let i = k * (n - 1) / 7; // eight positions from the first step to the last
            s += &format!(
                "{:>9} {:>14.2} {:>17.2}\n",
                self.prompt_tokens + i + 1,
                self.cached_step_ms[i],
                self.naive_step_ms[i]
            );
        }
        s += &format!(
            "\nwithout the cache a step ≈ {:.2} ms + {:.4} ms × position (R² = {:.3}), so the total \
             grows with the square of the length: {:.1} ms against {:.1} ms with the cache ({:.2}×); \
             same tokens: {}\n",
            self.fit_a_ms,
            self.fit_b_ms,
            self.fit_r2,
            self.naive_total_ms,
            self.cached_total_ms,
            self.naive_total_ms / self.cached_total_ms,
            if self.identical { "yes" } else { "NO" }
        );
        s
    }
}
