//! The outcome of a generation: its text, tokens, stop reason and timings.

use super::{Generation, GenerationResult, Metrics, StopReason};
use crate::platform::now_ms;

impl Generation {
    /// The result so far (complete once `is_done`). Text held back when cancelled is dropped, so
    /// the text is exactly what the events carried.
    pub fn result(&self) -> GenerationResult {
        let tokens = self.ids[self.n_prompt..].to_vec();
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
        let metrics = Metrics {
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
            output_tokens: tokens.len(),
            prefill_tokens_per_sec: per_sec(self.n_prompt, self.prefill_ms),
            decode_tokens_per_sec: per_sec(gaps.len(), decode_ms),
            target_forwards: self.forwards,
            drafted_tokens: self.drafted,
            accepted_draft_tokens: self.accepted,
        };
        GenerationResult {
            text: self.text[..self.emitted].to_string(),
            tokens,
            stop_reason: self.done.unwrap_or(StopReason::Abort),
            metrics,
            beams: self.beams.clone(),
        }
    }
}
