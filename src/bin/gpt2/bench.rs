//! `gpt2 bench`: the lesson's lab (total time against output length, TTFT + TPOT·n, the
//! bandwidth bound), the speculative benchmark and the run without a KV cache.

use super::{drafter, emit, to_json, usage, CliResult, ModelArgs};
use clap::Args;
use std::path::PathBuf;

#[derive(Args)]
pub struct BenchCmd {
    #[command(flatten)]
    model: ModelArgs,
    /// Output lengths to time, comma-separated
    #[arg(long, value_delimiter = ',', default_value = "10,40,80,160")]
    lengths: Vec<usize>,
    /// Prompt length (default: 16, or a quarter of a smaller context)
    #[arg(long)]
    prompt_tokens: Option<usize>,
    /// Instead of the length lab: each prompt of --prompts plain and with each of these drafters
    /// (comma-separated: prompt-lookup, mtp — the model's heads —, or a draft model's folder;
    /// greedy), tokens per forward and the ratio, a table each
    #[arg(long, value_name = "prompt-lookup,mtp,DIR", value_delimiter = ',')]
    draft: Vec<String>,
    /// With --draft mtp: the heads draft in every run, even where this engine measured that they
    /// lose (without it the engine decides, and a row whose heads were off says `off`)
    #[arg(long)]
    force_draft: bool,
    /// The speculative benchmark's prompts: {"prompts": [{"name", "kind", "prompt"}]}
    #[arg(
        long,
        value_name = "JSON",
        default_value = "tools/speculative_prompts.json"
    )]
    prompts: PathBuf,
    /// New tokens per run of the speculative benchmark and of --no-kv-cache
    #[arg(long, default_value_t = 128)]
    tokens: usize,
    /// Instead of the length lab: one generation with the KV cache and one without, the time of
    /// each step by position, and the line through the steps without it
    #[arg(long)]
    no_kv_cache: bool,
    /// Instead of the length lab: decode throughput with this many sequences stepped together
    /// (comma-separated, e.g. 1,2,4,8), --tokens each, against a prompt of as many tokens
    #[arg(long, value_delimiter = ',', value_name = "SIZES")]
    batch: Vec<usize>,
    /// The report as one JSON object
    #[arg(long)]
    json: bool,
}

impl BenchCmd {
    pub fn run(&self) -> CliResult<()> {
        if self.lengths.is_empty() || self.lengths.contains(&0) {
            return Err(usage(
                "--lengths needs positive whole numbers, e.g. 10,40,80,160",
            ));
        }
        if !self.draft.is_empty() {
            return self.speculative();
        }
        if !self.batch.is_empty() {
            let max = gpt2_web::generate::MAX_BATCH;
            if self.batch.iter().any(|&b| b == 0 || b > max) {
                return Err(usage(format!(
                    "--batch takes sizes from 1 to {max}, e.g. 1,2,4,8"
                )));
            }
            // `auto` chooses by the largest batch timed here.
            gpt2_web::model::set_expected_batch(self.batch.iter().copied().max().unwrap_or(1));
            let mut model = self.model.load()?;
            let prompt_tokens = self.prompt_tokens.unwrap_or(16);
            let bar = bar();
            let report = gpt2_web::bench::batch(
                &mut model,
                &self.batch,
                prompt_tokens,
                self.tokens,
                3,
                &|what, done, parts| step(&bar, what, done, parts),
            );
            bar.finish_and_clear();
            let report = report?;
            return if self.json {
                emit(to_json(&report)?)
            } else {
                emit(report.table().trim_end())
            };
        }
        if self.no_kv_cache {
            let mut model = self.model.load()?;
            let prompt_tokens = self.prompt_tokens.unwrap_or(16);
            let report = gpt2_web::bench::naive(&mut model, prompt_tokens, self.tokens)?;
            return if self.json {
                emit(to_json(&report)?)
            } else {
                emit(report.table().trim_end())
            };
        }
        let mut model = self.model.load()?;
        let prompt_tokens = self
            .prompt_tokens
            .unwrap_or(16usize.min(model.config.n_positions / 4).max(1));
        let bar = bar();
        let report =
            gpt2_web::bench::run(&mut model, &self.lengths, prompt_tokens, 3, &|w, d, p| {
                step(&bar, w, d, p)
            });
        bar.finish_and_clear();
        let report = report?;
        if self.json {
            emit(to_json(&report)?)
        } else {
            emit(report.table().trim_end())
        }
    }
}

impl BenchCmd {
    fn speculative(&self) -> CliResult<()> {
        #[derive(serde::Deserialize)]
        struct Prompts {
            prompts: Vec<gpt2_web::bench::SpecPrompt>,
        }
        let p = &self.prompts;
        let bytes =
            std::fs::read(p).map_err(|e| usage(format!("--prompts {}: {e}", p.display())))?;
        let prompts: Prompts = serde_json::from_slice(&bytes)
            .map_err(|e| usage(format!("--prompts {}: {e}", p.display())))?;
        let mut model = self.model.load()?;
        let (mut tables, mut all) = (Vec::new(), serde_json::Map::new());
        for draft in &self.draft {
            let (kind, mut draft_model) = drafter(Some(draft), &self.model)?;
            if kind == gpt2_web::Draft::None {
                return Err(usage("--draft none has nothing to compare"));
            }
            let runs = gpt2_web::bench::speculative(
                &mut model,
                draft_model.as_mut(),
                &prompts.prompts,
                kind,
                self.tokens,
                self.force_draft,
            )?;
            all.insert(
                draft.clone(),
                serde_json::to_value(&runs).map_err(|e| usage(e.to_string()))?,
            );
            let mut table = format!(
                "backend {} ({} weights) | greedy, {} new tokens, plain vs {draft}, median of 3\n\n{}",
                model.backend().name(),
                model.backend().dtype_name(),
                self.tokens,
                gpt2_web::bench::speculative_table(&runs).trim_end()
            );
            if kind == gpt2_web::Draft::Mtp {
                let plain_step = runs
                    .iter()
                    .map(|r| r.plain_ms / r.tokens as f64)
                    .sum::<f64>()
                    / runs.len().max(1) as f64;
                if let (Some(ms), Some(h)) = (gpt2_web::bench::mtp_guess_ms(&mut model), &model.mtp)
                {
                    table += &format!(
                        "\nthe heads' guesses: {ms:.3} ms a step (all {} heads, {} draft tokens); \
                         a plain step: {plain_step:.3} ms (total ÷ tokens)",
                        h.len(),
                        h.draft_vocab()
                    );
                }
                if let Some(v) = &model.heads_trial.verdict {
                    let state = if v.on { "on" } else { "off" };
                    table += &format!("\nthe heads on this engine: {state}, {}", v.why);
                }
            }
            tables.push(table);
        }
        if self.json {
            // One drafter: its runs as before; several: the runs by drafter.
            return match (self.draft.len(), all.values().next()) {
                (1, Some(runs)) => emit(runs.to_string()),
                _ => emit(serde_json::Value::Object(all).to_string()),
            };
        }
        emit(tables.join("\n\n"))
    }
}

/// A bar on stderr while a benchmark runs (the part running, the parts done), drawn only when
/// stderr is a terminal and cleared at the end, so the table and the JSON are all that remain.
fn bar() -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let style = indicatif::ProgressStyle::with_template("bench {bar:30} {pos}/{len} {wide_msg}")
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
    indicatif::ProgressBar::new(0).with_style(style)
}

fn step(bar: &indicatif::ProgressBar, what: &str, done: usize, parts: usize) {
    bar.set_length(parts as u64);
    bar.set_position(done as u64);
    bar.set_message(what.to_string());
}
