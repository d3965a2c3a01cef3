//! `gpt2 bench --batch`: decode throughput against the number of sequences stepped together
//! (`generate::Batch`), beside the ceiling a batch of B rows can reach, a prompt of B tokens.

use super::runs::{median, prompt_ids, run_once};
use crate::backend::gpu::GpuCounters;
use crate::error::Result;
use crate::generate::GenerateParams;
use crate::model::Model;
use serde::Serialize;

/// One batch size of `gpt2 bench --batch`: medians of the repetitions.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchRun {
    /// Sequences stepped together.
    pub batch: usize,
    /// Decode tokens per second of all of them together (after every prompt ran).
    pub tokens_per_sec: f64,
    /// One decode step of the whole batch: each sequence's time per output token.
    pub step_ms: f64,
    /// tokens_per_sec ÷ that of a batch of one.
    pub speedup: f64,
    /// Whether every sequence of the batch gave the tokens of the batch of one (they must).
    pub identical: bool,
    /// On the GPU, what one decode step of the whole batch asked of it.
    #[serde(flatten)]
    pub gpu: Option<StepCounters>,
}

/// What a decode step asks of the GPU besides its kernels' work, averaged over a run's steps:
/// queue submissions, compute dispatches, and bytes read back to the host (a greedy step reads
/// back its sequences' chosen ids, 4 bytes each; sampling reads their logits), and the share of
/// steps submitted ahead, before the step before them was read back (greedy: `gpu/ahead.rs`).
#[derive(Clone, Copy, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepCounters {
    pub submissions_per_step: f64,
    pub dispatches_per_step: f64,
    pub readback_bytes_per_step: f64,
    pub ahead_per_step: f64,
}

impl StepCounters {
    /// `counted` over `steps` steps.
    pub fn per_step(counted: GpuCounters, steps: usize) -> StepCounters {
        let per = |n: usize| n as f64 / steps.max(1) as f64;
        StepCounters {
            submissions_per_step: per(counted.submissions),
            dispatches_per_step: per(counted.dispatches),
            readback_bytes_per_step: per(counted.readback_bytes),
            ahead_per_step: per(counted.ahead),
        }
    }

    /// The table's columns: submissions, dispatches, bytes read back, steps ahead.
    fn cells(c: Option<&StepCounters>) -> String {
        c.map_or_else(String::new, |c| {
            format!(
                " {:>7.1} {:>10.1} {:>10.0} {:>6.2}",
                c.submissions_per_step,
                c.dispatches_per_step,
                c.readback_bytes_per_step,
                c.ahead_per_step
            )
        })
    }
}

/// `gpt2 bench --batch`: decode throughput against the number of sequences per step, beside
/// the ceiling a batch of B rows can reach, a prompt of B tokens (the same products, once per
/// weight read).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchReport {
    pub backend: String,
    pub dtype: String,
    pub kernel: Option<String>,
    /// On the GPU, the subgroup size its reductions count on (1: none).
    pub subgroup: Option<u32>,
    pub prompt_tokens: usize,
    pub tokens: usize,
    pub runs: Vec<BatchRun>,
    /// Prompt tokens per second of a prompt as long as the largest batch (its whole forward).
    pub prompt_tokens_per_sec: f64,
    pub prompt_rows: usize,
    /// The most the largest batch's decode can reach of the prompt's rate when every product runs
    /// as efficiently: the prompt's multiply-adds ÷ the batch step's (`products_ratio`).
    pub arithmetic_bound: f64,
}

/// A prompt of `rows` tokens's multiply-adds ÷ a decode step of `rows` sequences': the step runs
/// every row through every block and the tied head (V × C each), the prompt runs the head and its
/// last block's projection and MLP for its last row only.
pub fn products_ratio(c: &crate::config::Config, rows: usize) -> f64 {
    let (d, h, v) = (c.n_embd as f64, c.n_inner as f64, c.vocab_size as f64);
    let block = 4.0 * d * d + 2.0 * d * h; // qkv 3d², projection d², MLP 2dh
    let (r, layers) = (rows as f64, c.n_layer as f64);
    let prompt = r * layers * block - (r - 1.0) * (d * d + 2.0 * d * h) + v * d;
    prompt / (r * (layers * block + v * d))
}

/// Greedy generations of `tokens` tokens from the same `prompt_tokens`-token prompt, `batch` of
/// them stepped together, for each batch size (median of `reps` after a warm-up).
pub fn batch(
    model: &mut Model,
    sizes: &[usize],
    prompt_tokens: usize,
    tokens: usize,
    reps: usize,
    progress: super::Progress,
) -> Result<BatchReport> {
    let n_ctx = model.config.n_positions;
    let prompt_tokens = prompt_tokens.clamp(1, n_ctx.saturating_sub(2).max(1));
    let tokens = tokens.clamp(2, n_ctx - prompt_tokens);
    let prompt = prompt_ids(model, prompt_tokens)?;
    let params = GenerateParams {
        max_tokens: tokens,
        ignore_eos: true,
        ..Default::default()
    };
    let once = |model: &mut Model, b: usize| batch_once(model, &prompt, &params, b);
    let max_b = sizes.iter().copied().max().unwrap_or(1);
    let parts = sizes.len() + 2;
    progress("warm-up", 0, parts);
    once(model, max_b)?; // warm-up: every slot made, caches touched
    let mut runs: Vec<BatchRun> = Vec::new();
    let mut alone: Option<Vec<u32>> = None;
    for (i, &b) in sizes.iter().enumerate() {
        progress(&format!("batch {b} × {reps}"), i + 1, parts);
        let mut times = Vec::new();
        let mut identical = true;
        let mut counted = None;
        for _ in 0..reps.max(1) {
            let (ms, got, gpu) = once(model, b)?;
            let first = alone.get_or_insert_with(|| got[0].clone());
            identical &= got.iter().all(|g| g == first);
            times.push(ms);
            counted = gpu;
        }
        let ms = median(times);
        let steps = (tokens - 1) as f64; // the first token came with the prompt
        let tokens_per_sec = b as f64 * steps * 1e3 / ms;
        let base = runs.first().map_or(tokens_per_sec, |r| r.tokens_per_sec);
        runs.push(BatchRun {
            batch: b,
            tokens_per_sec,
            step_ms: ms / steps,
            speedup: tokens_per_sec / base,
            identical,
            gpu: counted.map(|c| StepCounters::per_step(c, tokens - 1)),
        });
    }
    // The ceiling: a prompt of max_b tokens, the same products over max_b rows.
    let rows = max_b.min(n_ctx - 1);
    let long = prompt_ids(model, rows)?;
    progress("prefill", parts - 1, parts);
    let prefill = (0..reps.max(1))
        .map(|_| run_once(model, &long, 1).map(|r| r.metrics.prefill_ms))
        .collect::<Result<Vec<_>>>()?;
    let prompt_tokens_per_sec = rows as f64 * 1e3 / median(prefill);
    Ok(BatchReport {
        backend: model.backend().name().to_string(),
        dtype: model.backend().dtype_name().to_string(),
        kernel: model.backend().q8_kernel(),
        subgroup: model.backend().gpu_subgroup(),
        prompt_tokens,
        tokens,
        runs,
        prompt_tokens_per_sec,
        prompt_rows: rows,
        arithmetic_bound: products_ratio(&model.config, rows),
    })
}

impl BatchReport {
    /// The batch table, with the ceiling.
    pub fn table(&self) -> String {
        let mut s = format!(
            "backend {} ({} weights{}) | greedy, {} new tokens after a {}-token prompt, \
             median of 3\n\n{:>6} {:>13} {:>15} {:>10} {:>10}\n",
            self.backend,
            self.dtype,
            super::kernels(&self.kernel, self.subgroup),
            self.tokens,
            self.prompt_tokens,
            "batch",
            "decode tok/s",
            "step ms (TPOT)",
            "× batch 1",
            "identical"
        );
        if self.runs.iter().any(|r| r.gpu.is_some()) {
            // The GPU's per-step counters as four more columns.
            s.insert_str(
                s.len() - 1,
                &format!(
                    " {:>7} {:>10} {:>10} {:>6}",
                    "subm.", "dispatches", "readback B", "ahead"
                ),
            );
        }
        for r in &self.runs {
            s += &format!(
                "{:>6} {:>13.1} {:>15.2} {:>10.2} {:>10}{}\n",
                r.batch,
                r.tokens_per_sec,
                r.step_ms,
                r.speedup,
                if r.identical { "yes" } else { "NO" },
                StepCounters::cells(r.gpu.as_ref())
            );
        }
        let last = self.runs.last().map_or(0.0, |r| r.tokens_per_sec);
        s += &format!(
            "\nthe ceiling, a {}-token prompt: {:.1} tok/s; the largest batch decodes at {:.2}× it \
             (its products' arithmetic allows {:.2}×: every decode row runs the tied head, a \
             prompt's last row only)\n",
            self.prompt_rows,
            self.prompt_tokens_per_sec,
            last / self.prompt_tokens_per_sec,
            self.arithmetic_bound
        );
        // The targets natively (Chromium's are tools/bench_batch.mjs's): B = 8 decode near the
        // 8-token prompt and ≥ 2.5× one sequence; each sequence's TPOT at B = 4 ≤ 1.5× alone.
        let at = |b: usize| self.runs.iter().find(|r| r.batch == b);
        let mut target = |what: &str, got: f64, want: &str, ok: bool| {
            let verdict = if ok { "met" } else { "NOT met" };
            s += &format!("target: {what}: {got:.2}× (want {want}) {verdict}\n");
        };
        if let (Some(one), Some(eight)) = (at(1), at(8)) {
            if self.prompt_rows == 8 {
                let r = eight.tokens_per_sec / self.prompt_tokens_per_sec;
                target("B = 8 decode ÷ the 8-token prompt", r, "≥ 0.8×", r >= 0.8);
            }
            let r = eight.tokens_per_sec / one.tokens_per_sec;
            target("B = 8 decode ÷ B = 1", r, "≥ 2.5×", r >= 2.5);
        }
        if let (Some(one), Some(four)) = (at(1), at(4)) {
            let r = four.step_ms / one.step_ms;
            target("TPOT at B = 4 ÷ B = 1", r, "≤ 1.5×", r <= 1.5);
        }
        s
    }
}

/// `b` generations of `prompt` through the scheduler, which batches them: the milliseconds of
/// their decode after the first step, every sequence's tokens, and on the GPU what the decode
/// steps asked of it.
fn batch_once(
    model: &mut Model,
    prompt: &[u32],
    params: &GenerateParams,
    b: usize,
) -> Result<(f64, Vec<Vec<u32>>, Option<GpuCounters>)> {
    use crate::platform::now_ms;
    use crate::scheduler::{Event, Job, Prompt, Scheduler};
    let mut s: Scheduler<&mut Model> = Scheduler::new();
    let m = s.add_model(model);
    for id in 0..b {
        let job = Job::Generate {
            prompt: Prompt::Ids(prompt.to_vec()),
            params: params.clone(),
            draft: None,
        };
        s.submit(id as u64, m, job)?;
    }
    let mut got = vec![Vec::new(); b];
    let mut started = None;
    let totals = |s: &Scheduler<&mut Model>| s.model(m).ok()?.backend().gpu_totals();
    let mut before = None;
    while s.has_work() {
        for ev in pollster::block_on(s.step()) {
            match ev {
                Event::Token { id, event, .. } => got[id as usize].push(event.id),
                Event::Failed { error, .. } => return Err(error),
                Event::Done { .. } | Event::Backend { .. } => {}
            }
        }
        if started.is_none() {
            // After the prompts and the first tokens: the decode steps start.
            started = Some(now_ms());
            before = totals(&s);
        }
    }
    let ms = now_ms() - started.unwrap_or_else(now_ms);
    let counted = totals(&s).zip(before).map(|(after, before)| after - before);
    Ok((ms, got, counted))
}
