//! The outcome of a generation: its text, tokens, stop reason and timings.

use super::{Generation, GenerationResult, Metrics, StopReason, Strategy};

impl Generation {
    /// The result so far (complete once `is_done`). Text held back when cancelled is dropped, so
    /// the text is exactly what the events carried.
    pub fn result(&self) -> GenerationResult {
        let t = &self.t;
        let (drafted, accepted) = match &self.strategy {
            Strategy::Speculative(s) => (s.drafted, s.accepted),
            _ => (0, 0),
        };
        let cached = match &self.strategy {
            Strategy::Plain(p) => p.cached,
            _ => 0,
        };

        GenerationResult {
            text: t.text().to_string(),
            tokens: t.generated().to_vec(),
            stop_reason: t.done.unwrap_or(StopReason::Abort),
            metrics: Metrics {
                batch_size: self.batch_size,
                gpu: self.gpu,
                mtp: match &self.strategy {
                    Strategy::Speculative(s) => s.heads.clone(),
                    _ => self.heads_off.clone(),
                },
                ..t.metrics(self.forwards, (drafted, accepted), cached)
            },
            beams: match &self.strategy {
                Strategy::Beam(b) => b.best.clone(),
                _ => Vec::new(),
            },
        }
    }
}
