//! The next-token logits of any sequence, for code that writes the loop itself (the JS API's
//! `model.logits(ids, { cache })`, tests/low_level.rs). With the cache, the backend's KV cache
//! keeps what this sequence shares with the last one from its start (the longest common prefix)
//! and runs only the rest — one position when a loop appends one token; without it, every call
//! recomputes the whole sequence, as the lesson's naive loop.

use crate::error::Result;
use crate::model::Model;

/// What the KV cache holds for the next `logits` call.
#[derive(Default)]
pub struct NextLogits {
    held: Vec<u32>,
}

impl NextLogits {
    /// Something else ran on the model's KV cache (a generation): the next call starts over.
    pub fn forget(&mut self) {
        self.held.clear();
    }

    /// The logits that follow the last of `ids` (`vocab_size` of them), and how many of `ids`
    /// came from the cache (0 without it).
    pub async fn logits<'m>(
        &mut self,
        model: &'m mut Model,
        ids: &[u32],
        cache: bool,
    ) -> Result<(&'m [f32], usize)> {
        model.config.check_ids(ids, 0)?;
        let common = self.held.iter().zip(ids).take_while(|(a, b)| a == b);
        // At least the last id runs: its row is the answer.
        let reused = if cache {
            common.count().min(ids.len() - 1)
        } else {
            0
        };
        self.held.clear(); // if the forward fails, what the cache holds is unknown
        let logits = model.predict(ids, reused).await?;
        self.held.extend_from_slice(ids); // after a fall-back too: it ran the whole sequence
        Ok((logits, reused))
    }
}
