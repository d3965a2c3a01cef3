//! What a generation has produced, whatever produced it: the ids (the prompt, then each token),
//! their text as it streams (whole UTF-8 characters; a tail that may begin a stop text held back
//! until it is clear), when each token came, and whether and why the generation ended. Every way
//! of choosing tokens (one per step, a checked draft, beam search) ends in `append`: the lesson's
//! "append" and the decision to stop, in one place.

use super::{Metrics, Pending, StopReason, TokenEvent};
use crate::model::Model;
use crate::platform::now_ms;
use crate::tokenizer::Detokenizer;

pub(super) struct Transcript {
    /// Prompt then generated ids.
    pub ids: Vec<u32>,
    pub n_prompt: usize,
    detok: Detokenizer,
    /// Generated text, possibly with a held-back tail that may start a stop text.
    text: String,
    /// How much of `text` the events have carried.
    emitted: usize,
    /// When the request started, how long the prompt's forward took, when each token came.
    t0: f64,
    pub prefill_ms: f64,
    token_times: Vec<f64>,
    end_ms: f64,
    pub done: Option<StopReason>,
    /// The stop texts (none empty), the most tokens, and whether end-of-text ends it.
    stop: Vec<String>,
    pub max_tokens: usize,
    ignore_eos: bool,
}

impl Transcript {
    pub fn new(
        ids: Vec<u32>,
        stop: Vec<String>,
        max_tokens: usize,
        ignore_eos: bool,
        t0: f64,
    ) -> Self {
        Transcript {
            n_prompt: ids.len(),
            ids,
            detok: Detokenizer::default(),
            text: String::new(),
            emitted: 0,
            t0,
            prefill_ms: 0.0,
            token_times: Vec::new(),
            end_ms: t0,
            done: None,
            stop,
            max_tokens,
            ignore_eos,
        }
    }

    /// Ends the generation for `reason`, now.
    pub fn finish(&mut self, reason: StopReason) {
        self.done = Some(reason);
        self.end_ms = now_ms();
    }

    /// Appends one token: its text, the stop checks, its event.
    pub fn append(&mut self, model: &Model, token: Pending) -> TokenEvent {
        let Pending {
            id,
            drafted,
            top,
            prob,
        } = token;
        self.ids.push(id);
        let now = now_ms();
        self.token_times.push(now);

        let n_out = self.ids.len() - self.n_prompt;
        let eos = id == model.config.eos_token_id && !self.ignore_eos;
        let full = self.ids.len() > model.config.n_positions; // the new token has no position left
        let finishing = eos || n_out >= self.max_tokens || full;
        if !eos {
            self.text += &self.detok.push(model.tokenizer.token_bytes(id));
        }
        if finishing {
            self.text += &self.detok.flush();
        }
        let mut reason = None;
        if let Some(at) = self.find_stop() {
            self.text.truncate(at);
            reason = Some(StopReason::Stop);
        } else if finishing {
            reason = Some(if eos {
                StopReason::Eos
            } else if n_out >= self.max_tokens {
                StopReason::MaxTokens
            } else {
                StopReason::Context
            });
        }
        let upto = if reason.is_some() {
            self.text.len()
        } else {
            self.text.len() - self.held_back()
        };
        let delta = self.text[self.emitted..upto].to_string();
        self.emitted = upto;
        if let Some(r) = reason {
            self.finish(r);
            self.text.truncate(self.emitted);
        }
        TokenEvent {
            id,
            text: delta,
            index: n_out - 1,
            elapsed_ms: now - self.t0,
            drafted,
            top,
            prob,
        }
    }

    /// Byte offset of the earliest stop text in the not-yet-emitted text.
    fn find_stop(&self) -> Option<usize> {
        let tail = &self.text[self.emitted..];
        (self.stop.iter())
            .filter_map(|s| tail.find(s.as_str()))
            .min()
            .map(|i| self.emitted + i)
    }

    /// Length of the longest suffix of the text that could be the start of a stop text.
    fn held_back(&self) -> usize {
        let t = &self.text[self.emitted..];
        let longest = self.stop.iter().map(|s| s.len()).max().unwrap_or(0);
        (1..=longest.min(t.len()))
            .rev()
            .find(|&k| {
                t.is_char_boundary(t.len() - k)
                    && self.stop.iter().any(|s| s.starts_with(&t[t.len() - k..]))
            })
            .unwrap_or(0)
    }

    /// The text the events carried (a tail held back when cancelled is dropped).
    pub fn text(&self) -> &str {
        &self.text[..self.emitted]
    }

    /// The generated ids.
    pub fn generated(&self) -> &[u32] {
        &self.ids[self.n_prompt..]
    }

    /// The timings so far (complete once done); the model steps' counts and the prompt positions
    /// found in the KV cache (`cached`) are the strategy's.
    pub fn metrics(
        &self,
        forwards: usize,
        (drafted, accepted): (usize, usize),
        cached: usize,
    ) -> Metrics {
        let end = if self.done.is_some() {
            self.end_ms
        } else {
            now_ms()
        };
        let times = &self.token_times;
        let mut gaps: Vec<f64> = times.windows(2).map(|w| w[1] - w[0]).collect();
        gaps.sort_by(f64::total_cmp);
        let pct = |p: f64| {
            if gaps.is_empty() {
                0.0
            } else {
                gaps[((p * gaps.len() as f64).ceil() as usize).clamp(1, gaps.len()) - 1]
            }
        };
        let decode_ms = match (times.first(), times.last()) {
            (Some(a), Some(b)) => b - a,
            _ => 0.0,
        };
        let per_sec = |n: usize, ms: f64| if ms > 0.0 { n as f64 * 1e3 / ms } else { 0.0 };
        Metrics {
            ttft_ms: times.first().map_or(0.0, |t| t - self.t0),
            tpot_ms: if gaps.is_empty() {
                0.0
            } else {
                decode_ms / gaps.len() as f64
            },
            tpot_p50_ms: pct(0.5),
            tpot_p95_ms: pct(0.95),
            total_ms: end - self.t0,
            prefill_ms: self.prefill_ms,
            prompt_tokens: self.n_prompt,
            output_tokens: self.ids.len() - self.n_prompt,
            prefill_tokens_per_sec: per_sec(self.n_prompt - cached, self.prefill_ms),
            decode_tokens_per_sec: per_sec(gaps.len(), decode_ms),
            target_forwards: forwards,
            drafted_tokens: drafted,
            accepted_draft_tokens: accepted,
            batch_size: 1,
            cached_prompt_tokens: cached,
            gpu: None,
            mtp: None,
        }
    }
}
