//! `gpt2`: the native command line — generate, logits, tokenize, bench.
//!
//! Bad arguments exit with status 2 and one line on stderr; runtime errors with status 1.

use gpt2_web::{
    generate, BackendChoice, CpuDtype, GenerateParams, GenerationResult, Model, SamplingParams,
    TokenEvent,
};
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: gpt2 <generate|logits|tokenize|bench|eval> --model DIR [options]
  generate --model DIR (--prompt TEXT | --prompt-file PATH) [--max-tokens N] [--temperature T]
           [--top-k K] [--top-p P] [--min-p P] [--repetition-penalty R] [--seed S] [--stop TEXT]...
           [--backend auto|cpu|gpu] [--dtype q8|f32] [--json]
  logits   --model DIR (--prompt TEXT | --prompt-file PATH) [--backend auto|cpu|gpu] [--dtype q8|f32]
  tokenize --model DIR (--text TEXT | --text-file PATH)
  bench    --model DIR [--backend auto|cpu|gpu] [--dtype q8|f32] [--lengths 10,40,80,160] [--prompt-tokens N] [--json]
  eval     --model DIR (--text TEXT | --text-file PATH | --ids-file JSON) [--window N] [--backend ..] [--dtype ..]";

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

/// Parsed `--flag value` pairs and bare `--switch`es.
struct Args {
    pairs: Vec<(String, String)>,
    switches: Vec<String>,
}

impl Args {
    fn parse(argv: &[String], flags: &[&str], switches: &[&str]) -> CliResult<Args> {
        let mut a = Args {
            pairs: Vec::new(),
            switches: Vec::new(),
        };
        let mut it = argv.iter();
        while let Some(arg) = it.next() {
            let name = arg.as_str();
            if switches.contains(&name) {
                a.switches.push(name.to_string());
            } else if flags.contains(&name) {
                let v = it
                    .next()
                    .ok_or_else(|| usage(format!("{name} needs a value")))?;
                a.pairs.push((name.to_string(), v.clone()));
            } else {
                return Err(usage(format!(
                    "unknown argument \"{arg}\" (try gpt2 --help)"
                )));
            }
        }
        Ok(a)
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn all(&self, name: &str) -> Vec<String> {
        self.pairs
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .collect()
    }

    fn has(&self, name: &str) -> bool {
        self.switches.iter().any(|s| s == name)
    }

    fn num<T: std::str::FromStr>(&self, name: &str, default: T) -> CliResult<T> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| usage(format!("{name}: \"{v}\" is not a valid number"))),
        }
    }

    fn model(&self) -> CliResult<PathBuf> {
        self.get("--model")
            .map(PathBuf::from)
            .ok_or_else(|| usage("--model DIR is required"))
    }

    fn dtype(&self) -> CliResult<CpuDtype> {
        match self.get("--dtype") {
            None => Ok(CpuDtype::default()),
            Some(v) => v.parse().map_err(|e: gpt2_web::Error| usage(e.to_string())),
        }
    }

    fn backend(&self) -> CliResult<BackendChoice> {
        self.get("--backend")
            .unwrap_or("auto")
            .parse()
            .map_err(|e: gpt2_web::Error| usage(e.to_string()))
    }

    /// The text of `--NAME TEXT` or `--NAME-file PATH`, exactly one of them.
    fn text(&self, name: &str) -> CliResult<String> {
        let file = format!("{name}-file");
        match (self.get(name), self.get(&file)) {
            (Some(t), None) => Ok(t.to_string()),
            (None, Some(p)) => {
                std::fs::read_to_string(p).map_err(|e| usage(format!("{file} {p}: {e}")))
            }
            _ => Err(usage(format!(
                "give exactly one of {name} TEXT or {file} PATH"
            ))),
        }
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

fn load(args: &Args) -> CliResult<Model> {
    Ok(Model::load_dir(
        &args.model()?,
        args.backend()?,
        args.dtype()?,
    )?)
}

fn cmd_generate(argv: &[String]) -> CliResult<()> {
    let args = Args::parse(
        argv,
        &[
            "--model",
            "--prompt",
            "--prompt-file",
            "--max-tokens",
            "--temperature",
            "--top-k",
            "--top-p",
            "--min-p",
            "--repetition-penalty",
            "--seed",
            "--stop",
            "--backend",
            "--dtype",
        ],
        &["--json"],
    )?;
    let prompt = args.text("--prompt")?;
    let params = GenerateParams {
        max_tokens: args.num("--max-tokens", 64)?,
        sampling: SamplingParams {
            temperature: args.num("--temperature", 0.0)?,
            top_k: args.num("--top-k", 0)?,
            top_p: args.num("--top-p", 1.0)?,
            min_p: args.num("--min-p", 0.0)?,
            repetition_penalty: args.num("--repetition-penalty", 1.0)?,
            seed: args.num("--seed", 0)?,
        },
        stop: args.all("--stop"),
        ..Default::default()
    };
    params
        .sampling
        .validate()
        .map_err(|e| usage(e.to_string()))?;
    let mut model = load(&args)?;
    let as_json = args.has("--json");
    let mut out = std::io::stdout().lock();
    let mut on_token = |ev: &TokenEvent| {
        let _ = if as_json {
            writeln!(
                out,
                "{}",
                json!({"id": ev.id, "text": ev.text, "index": ev.index, "elapsed_ms": ev.elapsed_ms})
            )
        } else {
            write!(out, "{}", ev.text)
        };
        let _ = out.flush();
    };
    let r = generate(&mut model, &prompt, params, &mut on_token, &|| false)?;
    if as_json {
        emit(result_json(&r))?;
    } else {
        emit("")?;
        let m = &r.metrics;
        eprintln!(
            "[{} | {} prompt + {} output tokens | TTFT {:.1} ms | TPOT {:.1} ms | total {:.1} ms | stop: {}]",
            model.backend.name(),
            m.prompt_tokens,
            m.output_tokens,
            m.ttft_ms,
            m.tpot_ms,
            m.total_ms,
            r.stop_reason.as_str()
        );
        if let Some(why) = &model.gpu_unavailable {
            eprintln!("[on the CPU because: {why}]");
        }
    }
    Ok(())
}

fn result_json(r: &GenerationResult) -> Value {
    let m = &r.metrics;
    json!({
        "text": r.text,
        "tokens": r.tokens,
        "stop_reason": r.stop_reason.as_str(),
        "metrics": {
            "ttft_ms": m.ttft_ms, "tpot_ms": m.tpot_ms, "tpot_p50_ms": m.tpot_p50_ms,
            "tpot_p95_ms": m.tpot_p95_ms, "total_ms": m.total_ms, "prefill_ms": m.prefill_ms,
            "prompt_tokens": m.prompt_tokens, "output_tokens": m.output_tokens,
            "prefill_tokens_per_sec": m.prefill_tokens_per_sec,
            "decode_tokens_per_sec": m.decode_tokens_per_sec,
        }
    })
}

fn cmd_logits(argv: &[String]) -> CliResult<()> {
    let args = Args::parse(
        argv,
        &[
            "--model",
            "--prompt",
            "--prompt-file",
            "--backend",
            "--dtype",
        ],
        &[],
    )?;
    let prompt = args.text("--prompt")?;
    let mut model = load(&args)?;
    let ids = model.tokenizer.encode(&prompt)?;
    if ids.is_empty() {
        return Err(usage(
            "the prompt is empty: there is no position to take logits from",
        ));
    }
    model.check_prompt(&ids)?;
    let logits = pollster::block_on(model.backend.forward(&ids, 0))?;
    emit(json!({"ids": ids, "logits": logits}))?;
    Ok(())
}

/// Held-out loss: the mean negative log-likelihood (nats) of every token given the ones before it
/// in its window, over consecutive non-overlapping windows of `--window` tokens (default: the
/// context), as transformers computes a model's loss on those windows. One forward per token, so
/// it runs the same decode path as generation.
fn cmd_eval(argv: &[String]) -> CliResult<()> {
    let args = Args::parse(
        argv,
        &[
            "--model",
            "--text",
            "--text-file",
            "--ids-file",
            "--window",
            "--backend",
            "--dtype",
        ],
        &[],
    )?;
    let mut model = load(&args)?;
    let ids: Vec<u32> = match args.get("--ids-file") {
        Some(p) => {
            let bytes = std::fs::read(p).map_err(|e| usage(format!("--ids-file {p}: {e}")))?;
            serde_json::from_slice(&bytes).map_err(|e| {
                usage(format!(
                    "--ids-file {p}: not a JSON list of token ids ({e})"
                ))
            })?
        }
        None => model.tokenizer.encode(&args.text("--text")?)?,
    };
    let window = args.num("--window", model.config.n_positions)?;
    if window < 2 || window > model.config.n_positions {
        return Err(usage(format!(
            "--window must be from 2 to the context, {}",
            model.config.n_positions
        )));
    }
    let windows = ids.len() / window;
    if windows == 0 {
        return Err(usage(format!(
            "the text has {} tokens, less than one window of {window}",
            ids.len()
        )));
    }
    for w in ids.chunks_exact(window) {
        model.check_prompt(w)?;
    }
    let (mut nll, mut n) = (0f64, 0usize);
    for w in ids.chunks_exact(window) {
        for (pos, pair) in w.windows(2).enumerate() {
            let logits = pollster::block_on(model.backend.forward(&pair[..1], pos))?;
            let max = logits.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
            let sum: f64 = logits.iter().map(|&v| ((v - max) as f64).exp()).sum();
            nll += sum.ln() - (logits[pair[1] as usize] - max) as f64;
            n += 1;
        }
    }
    let loss = nll / n as f64;
    emit(
        json!({"windows": windows, "window": window, "predictions": n, "loss": loss, "perplexity": loss.exp()}),
    )
}

fn cmd_tokenize(argv: &[String]) -> CliResult<()> {
    let args = Args::parse(argv, &["--model", "--text", "--text-file"], &[])?;
    let text = args.text("--text")?;
    let path = args.model()?.join("tokenizer.json");
    let bytes = std::fs::read(&path)
        .map_err(|e| Fail(1, format!("cannot read {}: {e}", path.display())))?;
    let tok = gpt2_web::Tokenizer::from_bytes(&bytes)?;
    emit(json!({"ids": tok.encode(&text)?}))?;
    Ok(())
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let res = match argv.first().map(String::as_str) {
        Some("generate") => cmd_generate(&argv[1..]),
        Some("logits") => cmd_logits(&argv[1..]),
        Some("tokenize") => cmd_tokenize(&argv[1..]),
        Some("bench") => cmd_bench(&argv[1..]),
        Some("eval") => cmd_eval(&argv[1..]),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => Err(usage(format!(
            "unknown command \"{other}\"; expected generate, logits, tokenize or bench"
        ))),
        None => Err(usage(USAGE)),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(Fail(code, msg)) => {
            eprintln!("gpt2: {msg}");
            ExitCode::from(code)
        }
    }
}

fn cmd_bench(argv: &[String]) -> CliResult<()> {
    let args = Args::parse(
        argv,
        &[
            "--model",
            "--backend",
            "--dtype",
            "--lengths",
            "--prompt-tokens",
        ],
        &["--json"],
    )?;
    let lengths: Vec<usize> = args
        .get("--lengths")
        .unwrap_or("10,40,80,160")
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .map_err(|_| usage(format!("--lengths: \"{s}\" is not a whole number")))
        })
        .collect::<CliResult<_>>()?;
    if lengths.is_empty() || lengths.contains(&0) {
        return Err(usage(
            "--lengths needs positive whole numbers, e.g. 10,40,80,160",
        ));
    }
    let mut model = load(&args)?;
    let prompt_tokens = args.num(
        "--prompt-tokens",
        16usize.min(model.config.n_positions / 4).max(1),
    )?;
    let report = gpt2_web::bench::run(&mut model, &lengths, prompt_tokens, 3)?;
    if args.has("--json") {
        emit(serde_json::to_string(&report).map_err(|e| Fail(1, e.to_string()))?)?;
    } else {
        emit(report.table().trim_end())?;
    }
    Ok(())
}
