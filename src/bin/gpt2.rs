//! `gpt2`: the native command line — generate, logits, tokenize, bench, eval, serve.
//!
//! Bad arguments exit with status 2 and one line on stderr; runtime errors with status 1. Only
//! `--backend webgpu` or `auto` (the default) opens a GPU; CPU runs print nothing on stderr but
//! the summary line of `generate` without `--json`.

use clap::{Args, Parser, Subcommand};
use gpt2_web::{GenerateParams, Model};
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[path = "gpt2/bench.rs"]
mod bench;
#[path = "gpt2/hub.rs"]
mod hub;
#[path = "gpt2/inputs.rs"]
mod inputs;
#[path = "gpt2/options.rs"]
mod options;
#[path = "gpt2/serve/mod.rs"]
mod serve;
use bench::BenchCmd;
use inputs::{model_path, text_of, ModelArgs, PromptArg, TextArg};
use options::OptionFlags;

#[derive(Parser)]
#[command(
    name = "gpt2",
    version,
    about = "GPT-2 on the command line: the same engine as the browser's, on the CPU or WebGPU"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate a continuation, streaming each token as it is produced
    Generate(GenerateCmd),
    /// Print the logits of the prompt's last position as JSON
    Logits(LogitsCmd),
    /// Print the token ids of a text as JSON
    Tokenize(TokenizeCmd),
    /// The lesson's lab: total time against output length, TTFT + TPOT·n, the bandwidth bound
    Bench(BenchCmd),
    /// Held-out loss and perplexity of a text over consecutive windows
    Eval(EvalCmd),
    /// An OpenAI-compatible HTTP server (/v1/completions, streaming, /metrics) that batches
    /// every client's requests together
    Serve(serve::ServeCmd),
}

#[derive(Args)]
struct GenerateCmd {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    prompt: PromptArg,
    /// The generate options (src/generate/options.rs): --max-tokens, --temperature, …
    #[command(flatten)]
    options: OptionFlags,
    /// One JSON line per token, then the result
    #[arg(long)]
    json: bool,
}

/// `--draft`: a drafter's name, or a draft model's folder (loaded with `model`'s backend and dtype).
fn drafter(arg: Option<&str>, model: &ModelArgs) -> CliResult<(gpt2_web::Draft, Option<Model>)> {
    match arg {
        None | Some("none") => Ok((gpt2_web::Draft::None, None)),
        Some("prompt-lookup") => Ok((gpt2_web::Draft::PromptLookup, None)),
        Some("mtp") => Ok((gpt2_web::Draft::Mtp, None)),
        Some(dir) if Path::new(dir).join("config.json").is_file() || gpt2_web::weights::gguf::is_gguf_file(dir) => {
            let args = ModelArgs {
                model: PathBuf::from(dir),
                ..model.clone()
            };
            Ok((gpt2_web::Draft::Model, Some(args.load()?)))
        }
        Some(other) => Err(usage(format!(
            "--draft {other}: neither prompt-lookup, mtp, a model folder (with config.json) nor a GGUF file"
        ))),
    }
}

#[derive(Args)]
struct LogitsCmd {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    prompt: PromptArg,
}

#[derive(Args)]
struct TokenizeCmd {
    /// A folder with tokenizer.json, or a GGUF file (its tokenizer), or a model's name in the
    /// local Hugging Face cache
    #[arg(short = 'm', long, value_name = "PATH")]
    model: PathBuf,
    #[command(flatten)]
    text: TextArg,
}

#[derive(Args)]
#[command(group(clap::ArgGroup::new("input").required(true).multiple(false)))]
struct EvalCmd {
    #[command(flatten)]
    model: ModelArgs,
    /// The text
    #[arg(long, value_name = "TEXT", group = "input")]
    text: Option<String>,
    /// The text, from a UTF-8 file
    #[arg(long, value_name = "PATH", group = "input")]
    text_file: Option<PathBuf>,
    /// A JSON list of token ids instead of a text
    #[arg(long, value_name = "PATH", group = "input")]
    ids_file: Option<PathBuf>,
    /// Tokens per window (default: the context); a shorter last window counts too
    #[arg(long)]
    window: Option<usize>,
}

/// An error worth one line: usage errors exit 2, the rest 1.
struct Fail(u8, String);

type CliResult<T> = std::result::Result<T, Fail>;

fn usage(msg: impl Into<String>) -> Fail {
    Fail(2, msg.into())
}

impl From<gpt2_web::Error> for Fail {
    fn from(e: gpt2_web::Error) -> Self {
        Fail(1, e.to_string())
    }
}

/// Prints a line to stdout; a closed pipe (`gpt2 logits ... | head`) ends quietly.
fn emit(line: impl std::fmt::Display) -> CliResult<()> {
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{line}").and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => Err(Fail(1, format!("cannot write to stdout: {e}"))),
        Ok(()) => Ok(()),
    }
}

fn to_json<T: serde::Serialize>(v: &T) -> CliResult<String> {
    serde_json::to_string(v).map_err(|e| Fail(1, e.to_string()))
}

impl GenerateCmd {
    fn run(&self) -> CliResult<()> {
        let prompt = self.prompt.text()?;
        let (draft, mut draft_model) = drafter(self.options.draft.as_deref(), &self.model)?;
        let params = GenerateParams {
            draft,
            ..self.options.params.clone()
        };
        params.validate().map_err(|e| usage(e.to_string()))?;
        let mut model = self.model.load()?;
        let prompt = gpt2_web::scheduler::Prompt::Text(prompt);
        let mut out = std::io::stdout().lock();
        let (json, n) = (self.json, params.n);
        // With --n, only --json streams (each line with its "choice"); else each choice's text
        // comes at the end.
        let mut on_token = |choice: usize, ev: &gpt2_web::TokenEvent| {
            let _ = match (json, n > 1) {
                (true, false) => serde_json::to_string(ev).map(|l| writeln!(out, "{l}")),
                (true, true) => serde_json::to_value(ev).map(|v| {
                    let mut v = v;
                    v["choice"] = choice.into();
                    writeln!(out, "{v}")
                }),
                (false, false) => Ok(write!(out, "{}", ev.text)),
                (false, true) => Ok(Ok(())),
            };
            let _ = out.flush();
        };
        let c = gpt2_web::scheduler::run(
            &mut model,
            draft_model.as_mut(),
            prompt,
            params.clone(),
            &mut on_token,
            &|| false,
        )?;
        if n > 1 {
            return self.choices(&model, &params, &c);
        }
        if self.json {
            return emit(to_json(&c.result)?);
        }
        let r = &c.result;
        emit("")?;
        let m = &r.metrics;
        eprintln!(
            "[{} | {} prompt + {} output tokens | TTFT {:.1} ms | TPOT {:.1} ms | total {:.1} ms | stop: {}]",
            model.backend().name(),
            m.prompt_tokens,
            m.output_tokens,
            m.ttft_ms,
            m.tpot_ms,
            m.total_ms,
            r.stop_reason.as_str()
        );
        for (i, b) in r.beams.iter().enumerate() {
            eprintln!("[beam {i}: score {:.4}, {:?}]", b.score, b.text);
        }
        match (&model.gpu_unavailable, &model.backend_times) {
            (Some(why), _) => eprintln!("[on the CPU because: {why}]"),
            (None, Some(t)) => eprintln!("[on the GPU: {}]", t.why),
            _ => {}
        }
        Ok(())
    }
}

impl GenerateCmd {
    /// `--n N`: N choices as one batch, choice i with seed + i. With --json, one line per token
    /// (with its "choice", streamed) and then `{"choices": [results]}`; else each choice's text.
    fn choices(
        &self,
        model: &Model,
        params: &GenerateParams,
        c: &gpt2_web::scheduler::Completion,
    ) -> CliResult<()> {
        if self.json {
            return emit(json!({ "choices": c.choices }).to_string());
        }
        for ch in &c.choices {
            println!(
                "--- choice {} (seed {}) ---\n{}",
                ch.index,
                params.seed + ch.index as u64,
                ch.text
            );
        }
        let total = (c.choices.iter())
            .filter_map(|ch| ch.metrics.as_ref())
            .map(|m| m.total_ms)
            .fold(0.0, f64::max);
        eprintln!(
            "[{} | {} choices in one batch | {} output tokens | total {total:.1} ms]",
            model.backend().name(),
            c.choices.len(),
            (c.choices.iter())
                .filter_map(|ch| ch.metrics.as_ref())
                .map(|m| m.output_tokens)
                .sum::<usize>(),
        );
        Ok(())
    }
}

impl LogitsCmd {
    fn run(&self) -> CliResult<()> {
        let prompt = self.prompt.text()?;
        let mut model = self.model.load()?;
        let ids = model.tokenizer.encode(&prompt)?;
        if ids.is_empty() {
            return Err(usage(
                "the prompt is empty: there is no position to take logits from",
            ));
        }
        model.config.check_ids(&ids, 0)?;
        let logits = pollster::block_on(model.predict(&ids, 0))?;
        emit(json!({"ids": ids, "logits": logits}))
    }
}

impl TokenizeCmd {
    fn run(&self) -> CliResult<()> {
        let text = text_of(
            self.text.text.as_ref(),
            self.text.text_file.as_deref(),
            "--text-file",
        )?;
        let model = model_path(&self.model)?;
        let tok = if gpt2_web::weights::gguf::is_gguf_file(&model) {
            let file = std::fs::read(&model)
                .map_err(|e| Fail(1, format!("cannot read {}: {e}", model.display())))?;
            let name = model.file_name().unwrap_or_default().to_string_lossy();
            gpt2_web::weights::gguf::Gguf::parse_complete(&name, &file)?.tokenizer()?
        } else {
            let path = model.join("tokenizer.json");
            let bytes = std::fs::read(&path)
                .map_err(|e| Fail(1, format!("cannot read {}: {e}", path.display())))?;
            gpt2_web::Tokenizer::from_bytes(&bytes)?
        };
        emit(json!({"ids": tok.encode(&text)?}))
    }
}

impl EvalCmd {
    /// Held-out loss: the mean negative log-likelihood (nats) of every token given the ones
    /// before it in its window, over consecutive non-overlapping windows of `--window` tokens
    /// (default: the context; the last window may be shorter, down to two tokens), as
    /// transformers computes a model's loss on those windows. One forward per token, so it runs
    /// the same decode path as generation.
    fn run(&self) -> CliResult<()> {
        let mut model = self.model.load()?;
        let ids: Vec<u32> = match (&self.ids_file, &self.text, &self.text_file) {
            (Some(p), ..) => {
                let bytes = std::fs::read(p)
                    .map_err(|e| usage(format!("--ids-file {}: {e}", p.display())))?;
                serde_json::from_slice(&bytes).map_err(|e| {
                    usage(format!(
                        "--ids-file {}: not a JSON list of token ids ({e})",
                        p.display()
                    ))
                })?
            }
            (None, text, file) => {
                let text = text_of(text.as_ref(), file.as_deref(), "--text-file")?;
                model.tokenizer.encode(&text)?
            }
        };
        let n_ctx = model.config.n_positions;
        let window = self.window.unwrap_or(n_ctx);
        if window < 2 || window > n_ctx {
            return Err(usage(format!(
                "--window must be from 2 to the context, {n_ctx}"
            )));
        }
        let windows: Vec<&[u32]> = ids.chunks(window).filter(|w| w.len() >= 2).collect();
        if windows.is_empty() {
            return Err(usage(format!(
                "the text has {} token(s); it takes two to predict one",
                ids.len()
            )));
        }
        for w in &windows {
            model.config.check_ids(w, 0)?;
        }
        let (mut nll, mut n) = (0f64, 0usize);
        for w in &windows {
            for pos in 0..w.len() - 1 {
                let logits = pollster::block_on(model.predict(&w[..=pos], pos))?;
                let max = logits.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
                let sum: f64 = logits.iter().map(|&v| ((v - max) as f64).exp()).sum();
                nll += sum.ln() - (logits[w[pos + 1] as usize] - max) as f64;
                n += 1;
            }
        }
        let loss = nll / n as f64;
        emit(json!({
            "windows": windows.len(), "window": window, "predictions": n,
            "loss": loss, "perplexity": loss.exp()
        }))
    }
}

/// clap's message in one line: its first, without the "error: " prefix, and where to look.
fn one_line(e: &clap::Error) -> String {
    let rendered = e.render().to_string();
    let first = rendered.lines().next().unwrap_or("bad arguments");
    let first = first.strip_prefix("error: ").unwrap_or(first);
    format!("{first} (see gpt2 --help)")
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            let _ = e.print(); // --help, --version
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("gpt2: {}", one_line(&e));
            return ExitCode::from(2);
        }
    };
    let res = match &cli.command {
        Command::Generate(c) => c.run(),
        Command::Logits(c) => c.run(),
        Command::Tokenize(c) => c.run(),
        Command::Bench(c) => c.run(),
        Command::Eval(c) => c.run(),
        Command::Serve(c) => serve::serve(c),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(Fail(code, msg)) => {
            eprintln!("gpt2: {msg}");
            ExitCode::from(code)
        }
    }
}
