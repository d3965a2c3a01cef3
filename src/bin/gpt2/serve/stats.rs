//! `GET /metrics`: what the server has done, in Prometheus' text format — requests by status,
//! prompt tokens (and those the prompt cache saved) and generated tokens, the queue's depth and the running batch's size now, and time to
//! first token (from the request's arrival) and per output token (each generation's own, as the
//! engine measured it) as histograms.

use gpt2_web::scheduler::Completion;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

/// Bucket bounds in seconds, from a fast CPU's per-token time to a long prompt on a slow one.
const BOUNDS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

#[derive(Default)]
struct Histogram {
    /// Observations at or below each bound (not cumulative; summed when written).
    counts: [u64; BOUNDS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        if let Some(i) = BOUNDS.iter().position(|&b| seconds <= b) {
            self.counts[i] += 1;
        }
        self.count += 1;
        self.sum += seconds;
    }

    fn write(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut below = 0;
        for (b, c) in BOUNDS.iter().zip(self.counts) {
            below += c;
            let _ = writeln!(out, "{name}_bucket{{le=\"{b}\"}} {below}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum {}\n{name}_count {}", self.sum, self.count);
    }
}

#[derive(Default)]
struct Inner {
    requests: BTreeMap<u16, u64>,
    prompt_tokens: u64,
    generation_tokens: u64,
    cached_prompt_tokens: u64,
    steps: u64,
    queued: usize,
    running: usize,
    ttft: Histogram,
    tpot: Histogram,
}

/// The counters, shared by the engine thread and the HTTP side.
#[derive(Default)]
pub struct Stats(Mutex<Inner>);

impl Stats {
    fn with(&self, f: impl FnOnce(&mut Inner)) {
        let mut inner = self.0.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut inner)
    }

    /// A response sent with `status`.
    pub fn answered(&self, status: u16) {
        self.with(|s| *s.requests.entry(status).or_default() += 1);
    }

    /// A step ended (`ran`: a model step ran in it) with members waiting and running.
    pub fn stepped(&self, ran: bool, queued: usize, running: usize) {
        self.with(|s| {
            s.steps += u64::from(ran);
            (s.queued, s.running) = (queued, running);
        });
    }

    /// A request's first token came `seconds` after it arrived (measured by the HTTP side, so
    /// the time it waited for a place in the batch counts).
    pub fn first_token(&self, seconds: f64) {
        self.with(|s| s.ttft.observe(seconds));
    }

    /// A generation ended: its tokens and time per token (each choice's).
    pub fn done(&self, c: &Completion) {
        let metrics: Vec<_> = match c.choices.is_empty() {
            true => vec![(&c.result.metrics, c.result.tokens.len())],
            false => (c.choices.iter())
                .filter_map(|ch| ch.metrics.as_ref().map(|m| (m, ch.tokens.len())))
                .collect(),
        };
        self.with(|s| {
            s.prompt_tokens += c.result.metrics.prompt_tokens as u64;
            for (m, tokens) in metrics {
                s.generation_tokens += tokens as u64;
                s.cached_prompt_tokens += m.cached_prompt_tokens as u64;
                if m.output_tokens > 1 {
                    s.tpot.observe(m.tpot_ms / 1e3);
                }
            }
        });
    }

    /// Everything, as Prometheus reads it.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.with(|s| {
            let counter = |out: &mut String, name: &str, help: &str, kind: &str, v: u64| {
                let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}");
            };
            let name = "gpt2_web_requests_total";
            let _ = writeln!(out, "# HELP {name} HTTP requests answered, by status.\n# TYPE {name} counter");
            for (status, n) in &s.requests {
                let _ = writeln!(out, "{name}{{status=\"{status}\"}} {n}");
            }
            let help = "Prompt tokens of the generations that ended.";
            counter(&mut out, "gpt2_web_prompt_tokens_total", help, "counter", s.prompt_tokens);
            let help = "Prompt tokens whose keys and values an earlier request had computed (the \
                        prompt cache, shared by every client): reused, not run.";
            let cached = s.cached_prompt_tokens;
            counter(&mut out, "gpt2_web_cached_prompt_tokens_total", help, "counter", cached);
            let help = "Tokens generated, every choice's.";
            counter(&mut out, "gpt2_web_generation_tokens_total", help, "counter", s.generation_tokens);
            let help = "Model steps: each advances every sequence of the running batch by a token \
                        (or more, with a draft), so generated tokens / steps is the batch's gain.";
            counter(&mut out, "gpt2_web_model_steps_total", help, "counter", s.steps);
            let help = "Sequences waiting for a place in the batch.";
            counter(&mut out, "gpt2_web_queue_depth", help, "gauge", s.queued as u64);
            let help = "Sequences in the running batch (one model step advances them all).";
            counter(&mut out, "gpt2_web_batch_size", help, "gauge", s.running as u64);
            let help = "Request arrival to its first token (waiting for the batch, prefill, sampling), in seconds.";
            s.ttft.write(&mut out, "gpt2_web_time_to_first_token_seconds", help);
            let help = "Mean time per output token after the first, per generation, in seconds.";
            s.tpot.write(&mut out, "gpt2_web_time_per_output_token_seconds", help);
        });
        out
    }
}
