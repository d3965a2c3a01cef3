//! The `gpt2` command line: each subcommand on the tiny model, and one-line errors for bad input.

mod common;
use common::*;
use serde_json::Value;
use std::process::{Command, Output};

fn gpt2(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpt2"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("run gpt2")
}

fn stdout_json_lines(o: &Output) -> Vec<Value> {
    assert!(
        o.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

#[test]
fn generate_json_prints_a_line_per_token_then_the_result() {
    let fx = fixture("tiny-random");
    let prompt = "the";
    let lines = stdout_json_lines(&gpt2(&[
        "generate",
        "--model",
        TINY,
        "--prompt",
        prompt,
        "--max-tokens",
        "6",
        "--backend",
        "cpu",
        "--json",
    ]));
    assert_eq!(lines.len(), 7);
    let last = &lines[6];
    assert_eq!(last["stopReason"], "max_tokens");
    assert_eq!(last["tokens"].as_array().unwrap().len(), 6);
    let streamed: String = lines[..6]
        .iter()
        .map(|l| l["text"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, last["text"].as_str().unwrap());
    for key in [
        "ttftMs",
        "tpotMs",
        "totalMs",
        "promptTokens",
        "outputTokens",
        "decodeTokensPerSec",
    ] {
        assert!(last["metrics"][key].is_number(), "metrics.{key}");
    }
    assert_eq!(fx.vocab_size, 1999);
}

#[test]
fn logits_and_tokenize_print_json() {
    let fx = fixture("tiny-random");
    let l = &stdout_json_lines(&gpt2(&[
        "logits",
        "--model",
        TINY,
        "--prompt",
        "the",
        "--backend",
        "cpu",
    ]))[0];
    assert_eq!(l["ids"], serde_json::json!([1169]));
    assert_eq!(l["logits"].as_array().unwrap().len(), fx.vocab_size);
    let t = &stdout_json_lines(&gpt2(&[
        "tokenize",
        "--model",
        TINY,
        "--text",
        "Hi <|endoftext|>",
    ]))[0];
    assert_eq!(t["ids"], serde_json::json!([17250, 220, 50256]));
}

#[test]
fn bench_prints_the_fit_and_the_bandwidth_bound() {
    let o = gpt2(&[
        "bench",
        "--model",
        TINY,
        "--backend",
        "cpu",
        "--lengths",
        "2,4,8",
        "--json",
    ]);
    let r = &stdout_json_lines(&o)[0];
    assert_eq!(r["runs"].as_array().unwrap().len(), 3);
    for key in [
        "fitTtftMs",
        "fitTpotMs",
        "fitR2",
        "boundMsPerToken",
        "readGbPerS",
        "prefillTokensPerSec",
    ] {
        assert!(
            r[key].as_f64().is_some_and(f64::is_finite),
            "{key}: {}",
            r[key]
        );
    }
    // The profiled run is the longest length: one prompt forward, then 7 steps.
    let p = &r["profile"];
    assert_eq!(p["prompt"]["calls"], 1, "{p}");
    assert_eq!(p["decode"]["calls"], 7, "{p}");
    assert!(p["decode"]["phases"]["matmul"]
        .as_f64()
        .is_some_and(|v| v > 0.0));
}

#[test]
fn bad_arguments_exit_2_with_one_line() {
    for args in [
        vec!["generate", "--model", TINY],
        vec![
            "generate",
            "--model",
            TINY,
            "--prompt",
            "x",
            "--max-tokens",
            "lots",
        ],
        vec![
            "generate",
            "--model",
            TINY,
            "--prompt",
            "x",
            "--temperature",
            "-1",
        ],
        vec![
            "generate",
            "--model",
            TINY,
            "--prompt",
            "x",
            "--backend",
            "tpu",
        ],
        vec!["frobnicate"],
        vec!["bench", "--model", TINY, "--lengths", "0"],
    ] {
        let o = gpt2(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("gpt2: "), "{err}");
    }
}

#[test]
fn runtime_errors_exit_1_with_a_sentence() {
    let o = gpt2(&["generate", "--model", "no/such/dir", "--prompt", "x"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no/such/dir/config.json"), "{err}");
    let long = "word ".repeat(200);
    let o = gpt2(&[
        "generate",
        "--model",
        TINY,
        "--prompt",
        &long,
        "--backend",
        "cpu",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("context holds 64 tokens"));
}

#[test]
fn eval_prints_the_mean_next_token_loss_of_its_windows() {
    // Windows of two tokens: each contributes -log p(second | first), which the test computes
    // itself from the backend's logits.
    let ids: Vec<u32> = vec![464, 329, 1110, 257, 318, 11, 290, 262, 1110];
    let file = std::env::temp_dir().join(format!("gpt2-eval-{}.json", std::process::id()));
    std::fs::write(&file, serde_json::to_vec(&ids).unwrap()).unwrap();
    let file_s = file.to_str().unwrap();
    let lines = stdout_json_lines(&gpt2(&[
        "eval",
        "--model",
        TINY,
        "--ids-file",
        file_s,
        "--window",
        "2",
        "--dtype",
        "f32",
    ]));
    let out = &lines[0];
    assert_eq!(out["windows"], 4);
    assert_eq!(out["predictions"], 4);
    let mut model = load(TINY);
    let mut want = 0f64;
    for pair in ids.chunks_exact(2) {
        let logits = forward_at(&mut model, &pair[..1], 0).unwrap();
        let lse = logits.iter().map(|&v| (v as f64).exp()).sum::<f64>().ln();
        want += lse - logits[pair[1] as usize] as f64;
    }
    want /= 4.0;
    let got = out["loss"].as_f64().unwrap();
    assert!((got - want).abs() < 1e-4, "loss {got}, computed {want}");
    let ppl = out["perplexity"].as_f64().unwrap();
    assert!(
        (ppl / want.exp() - 1.0).abs() < 2e-4,
        "perplexity {ppl}, computed {}",
        want.exp()
    );

    let bad = gpt2(&[
        "eval",
        "--model",
        TINY,
        "--ids-file",
        file_s,
        "--window",
        "1",
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--window must be from 2"));
    let _ = std::fs::remove_file(&file);
}

/// The generate options' one definition (src/generate/options.rs) is the CLI's flags: each
/// option every caller spells has its flag, with its default shown.
#[test]
fn generate_has_a_flag_for_every_generate_option() {
    let help = String::from_utf8_lossy(&gpt2(&["generate", "--help"]).stdout).to_string();
    let defaults = gpt2_web::GenerateParams::default();
    for o in gpt2_web::OPTIONS
        .iter()
        .filter(|o| o.scope == gpt2_web::Scope::All)
    {
        let flag = o.name.replace('_', "-");
        let on = defaults.get(o.name) == Some(Value::Bool(true));
        let want = if on {
            format!("--no-{flag}")
        } else {
            format!("--{flag}")
        };
        assert!(help.contains(&want), "gpt2 generate has no {want}: {help}");
    }
    assert!(help.contains("[default: 64]"), "{help}");
    let o = gpt2(&["generate", "--model", TINY, "--prompt", "x", "--top-p", "0"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("top_p: 0 is not in (0, 1]"), "{err}");
}

#[test]
fn every_subcommand_answers_help() {
    for (cmd, option) in [
        ("generate", "--max-tokens"),
        ("logits", "--prompt-file"),
        ("tokenize", "--text-file"),
        ("bench", "--lengths"),
        ("eval", "--window"),
    ] {
        let o = gpt2(&[cmd, "--help"]);
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{cmd} --help: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            out.contains(option) && out.contains("Usage: gpt2 "),
            "{cmd}: {out}"
        );
    }
    let top = String::from_utf8_lossy(&gpt2(&["--help"]).stdout).to_string();
    for cmd in ["generate", "logits", "tokenize", "bench", "eval"] {
        assert!(top.contains(cmd), "{top}");
    }
}

#[test]
fn cpu_runs_leave_stderr_empty() {
    // No GPU is probed unless one is asked for (or `auto`), so nothing else speaks on stderr.
    for args in [
        vec![
            "generate",
            "--model",
            TINY,
            "--prompt",
            "the",
            "--max-tokens",
            "2",
            "--backend",
            "cpu",
            "--json",
        ],
        vec![
            "logits",
            "--model",
            TINY,
            "--prompt",
            "the",
            "--backend",
            "cpu",
        ],
        vec!["tokenize", "--model", TINY, "--text", "the"],
    ] {
        let o = gpt2(&args);
        assert!(o.status.success(), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&o.stderr), "", "{args:?}");
    }
}

#[test]
fn eval_takes_a_text_shorter_than_one_window_as_one_window() {
    let ids: Vec<u32> = vec![464, 329, 1110, 257, 318];
    let file = std::env::temp_dir().join(format!("gpt2-eval-short-{}.json", std::process::id()));
    std::fs::write(&file, serde_json::to_vec(&ids).unwrap()).unwrap();
    let args = [
        "eval",
        "--model",
        TINY,
        "--ids-file",
        file.to_str().unwrap(),
        "--backend",
        "cpu",
        "--dtype",
        "f32",
    ];
    let out = &stdout_json_lines(&gpt2(&args))[0];
    assert_eq!(
        (out["windows"].as_u64(), out["predictions"].as_u64()),
        (Some(1), Some(4))
    );
    // The same loss as a window of exactly those five tokens.
    let five = &stdout_json_lines(&gpt2(&[&args[..], &["--window", "5"]].concat()))[0];
    assert_eq!(out["loss"], five["loss"]);
    std::fs::write(&file, b"[464]").unwrap();
    let one = gpt2(&args);
    assert_eq!(one.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&one.stderr).contains("it takes two"));
    let _ = std::fs::remove_file(&file);
}

#[test]
fn generate_with_a_draft_prints_the_plain_text_and_counts_model_steps() {
    let base = [
        "generate",
        "--model",
        DEMO,
        "--prompt",
        "ROMEO: I love thee, I love thee, I love thee,",
        "--max-tokens",
        "24",
        "--backend",
        "cpu",
        "--json",
    ];
    let plain = stdout_json_lines(&gpt2(&base)).pop().unwrap();
    for draft in ["prompt-lookup", "mtp", DEMO] {
        let args = [&base[..], &["--draft", draft]].concat();
        let lines = stdout_json_lines(&gpt2(&args));
        let last = lines.last().unwrap();
        assert_eq!(last["tokens"], plain["tokens"], "--draft {draft}");
        let m = &last["metrics"];
        let (forwards, kept) = (
            m["targetForwards"].as_u64().unwrap(),
            m["acceptedDraftTokens"].as_u64().unwrap(),
        );
        assert_eq!(forwards + kept, 24, "--draft {draft}: {m}");
        assert!(kept > 0, "--draft {draft}: nothing kept");
        let drafted = lines[..lines.len() - 1]
            .iter()
            .filter(|l| l["drafted"] == true)
            .count();
        assert_eq!(drafted as u64, kept);
    }
    let bad = gpt2(&[&base[..], &["--draft", "no/such/dir"]].concat());
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("neither prompt-lookup, mtp, a model folder")
    );
}

#[test]
fn bench_without_the_kv_cache_prints_steps_by_position_and_the_line() {
    let base = [
        "bench",
        "--model",
        TINY,
        "--backend",
        "cpu",
        "--no-kv-cache",
        "--tokens",
        "12",
    ];
    let o = gpt2(&[&base[..], &["--prompt-tokens", "4", "--json"]].concat());
    let r = &stdout_json_lines(&o)[0];
    assert_eq!(r["tokens"], 12);
    assert_eq!(r["identical"], true, "{r}");
    for key in ["cachedStepMs", "naiveStepMs"] {
        assert_eq!(
            r[key].as_array().map(Vec::len),
            Some(11),
            "{key}: a step per token after the first"
        );
    }
    for key in ["fitAMs", "fitBMs", "fitR2", "cachedTotalMs", "naiveTotalMs"] {
        assert!(
            r[key].as_f64().is_some_and(f64::is_finite),
            "{key}: {}",
            r[key]
        );
    }
    let text = gpt2(&base);
    let out = String::from_utf8_lossy(&text.stdout);
    assert!(
        out.contains("without the cache a step ≈") && out.contains("same tokens: yes"),
        "{out}"
    );
}

#[test]
fn generate_with_beams_prints_transformers_best_beam_and_every_beam() {
    let fx = fixture("gpt2-shakespeare");
    let beams = beam_fixture("gpt2-shakespeare");
    let run = (beams.runs.iter())
        .find(|r| r.case == 1 && r.num_beams == 2)
        .unwrap();
    assert_eq!(run.eos_token_id, Some(50256), "the model's own end-of-text");
    let (n, lp) = (run.num_beams.to_string(), run.length_penalty.to_string());
    let max = run.max_new_tokens.to_string();
    let args = [
        "generate",
        "--model",
        DEMO,
        "--backend",
        "cpu",
        "--dtype",
        "f32",
        "--prompt",
        &fx.cases[1].prompt,
        "--max-tokens",
        &max,
        "--num-beams",
        &n,
        "--length-penalty",
        &lp,
        "--early-stopping",
        "false",
    ];
    let lines = stdout_json_lines(&gpt2(&[&args[..], &["--json"]].concat()));
    let last = lines.last().unwrap();
    let ids = |v: &Value| -> Vec<u32> {
        (v.as_array().unwrap().iter())
            .map(|x| x.as_u64().unwrap() as u32)
            .collect()
    };
    assert_eq!(ids(&last["tokens"]), run.beams[0].ids);
    let got: Vec<Vec<u32>> = (last["beams"].as_array().unwrap().iter())
        .map(|b| ids(&b["tokens"]))
        .collect();
    let want: Vec<Vec<u32>> = run.beams.iter().map(|b| b.ids.clone()).collect();
    assert_eq!(got, want);
    assert_eq!(lines.len() - 1, run.beams[0].ids.len(), "a line per token");
    // Without --json: the text, then a line per beam with its score on stderr.
    let o = gpt2(&args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.matches("[beam ").count(), run.num_beams, "{err}");
    let mut bad = args.to_vec();
    *bad.last_mut().unwrap() = "sometimes"; // --early-stopping sometimes
    let bad = gpt2(&bad);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("expected true, false or never"));
}

#[test]
fn the_docs_synopsis_names_only_flags_the_cli_has() {
    // docs/api.md's synopsis of each command: every --flag it shows is one `gpt2 CMD --help` lists.
    let doc = std::fs::read_to_string(common::root().join("docs/api.md")).unwrap();
    let start = doc
        .find("```\ngpt2 generate")
        .expect("docs/api.md has the CLI's synopsis");
    let block = &doc[start + 4..];
    let block = &block[..block.find("```").unwrap()];
    let mut command = "";
    let mut checked = 0;
    for line in block.lines() {
        if let Some(rest) = line.strip_prefix("gpt2 ") {
            command = rest.split_whitespace().next().unwrap();
        }
        let help = gpt2(&[command, "--help"]);
        let help = String::from_utf8_lossy(&help.stdout).into_owned();
        for flag in line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')) {
            if flag.starts_with("--") && flag.len() > 2 {
                assert!(
                    help.contains(flag),
                    "gpt2 {command} has no {flag} (docs/api.md)"
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 25, "only {checked} flags in the synopsis");
}

/// `gpt2 args…` with `stdin` piped in and `env` set.
fn gpt2_with(args: &[&str], stdin: &str, env: &[(&str, &std::path::Path)]) -> Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_gpt2"))
        .args(args)
        .envs(env.iter().copied())
        .current_dir(root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run gpt2");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// llama.cpp's habits: the prompt from stdin (`-p -`, or piped in with no prompt flag), its short
/// flags (`-m`, `-p`, `-n`, `-s`, `-t`), and a model named as the local Hugging Face cache holds it
/// (never downloaded; a name it lacks is a sentence saying where it looked).
#[test]
fn the_prompt_from_stdin_short_flags_and_the_hugging_face_cache() {
    let tokens = |o: &Output| stdout_json_lines(o).last().unwrap()["tokens"].clone();
    let sampled = ["--temperature", "0.8", "--json"];
    let long = [
        &[
            "generate",
            "--model",
            TINY,
            "--prompt",
            "ab",
            "--max-tokens",
            "5",
        ][..],
        &["--seed", "3"],
        &sampled,
    ];
    let want = tokens(&gpt2(&long.concat()));
    assert_eq!(want.as_array().unwrap().len(), 5);
    let short = [
        &[
            "generate", "-m", TINY, "-p", "ab", "-n", "5", "-s", "3", "-t", "1",
        ][..],
        &sampled,
    ];
    assert_eq!(tokens(&gpt2(&short.concat())), want, "short flags");
    let dash = [
        &["generate", "-m", TINY, "-p", "-", "-n", "5", "-s", "3"][..],
        &sampled,
    ];
    assert_eq!(tokens(&gpt2_with(&dash.concat(), "ab", &[])), want, "-p -");
    let piped = [
        &["generate", "-m", TINY, "-n", "5", "-s", "3"][..],
        &sampled,
    ];
    assert_eq!(
        tokens(&gpt2_with(&piped.concat(), "ab", &[])),
        want,
        "piped"
    );
    let o = gpt2_with(&["generate", "-m", TINY, "-n", "5"], "", &[]);
    assert_eq!(o.status.code(), Some(2), "an empty stdin is no prompt");
    assert!(String::from_utf8_lossy(&o.stderr).contains("no prompt"));

    // The cache as huggingface-cli leaves it: refs/main names the snapshot's folder.
    let hub = std::env::temp_dir().join(format!("gpt2-web-hub-{}", std::process::id()));
    let snapshot = hub.join("models--course--tiny/snapshots/abc123");
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::create_dir_all(hub.join("models--course--tiny/refs")).unwrap();
    std::fs::write(hub.join("models--course--tiny/refs/main"), "abc123\n").unwrap();
    for f in std::fs::read_dir(root().join(TINY)).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, snapshot.join(f.file_name().unwrap())).unwrap();
    }
    let env = [("HF_HUB_CACHE", hub.as_path())];
    let cached = [
        &[
            "generate",
            "-m",
            "course/tiny",
            "-p",
            "ab",
            "-n",
            "5",
            "-s",
            "3",
        ][..],
        &sampled,
    ];
    let o = gpt2_with(&cached.concat(), "", &env);
    assert_eq!(tokens(&o), want, "the model from the cache");
    assert!(String::from_utf8_lossy(&o.stderr).contains("from the Hugging Face cache"));
    let o = gpt2_with(&["generate", "-m", "course/absent", "-p", "ab"], "", &env);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("no snapshot of \"course/absent\""), "{err}");
    assert!(err.contains("models--course--absent/refs/main"), "{err}");
    std::fs::remove_dir_all(&hub).unwrap();
}
