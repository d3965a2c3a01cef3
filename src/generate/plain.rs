//! The lesson's loop, one turn per token: predict (a forward pass over the ids the KV cache does
//! not hold yet: the whole prompt first, then the last token), sample the next token from the
//! last position's logits; the transcript's `append` is the third part.

use super::Pending;
use crate::error::Result;
use crate::model::Model;
use crate::sampling::Sampler;

/// One sequence, one token per forward pass.
pub(super) struct Plain {
    /// How many of the ids the backend's KV cache holds.
    fed: usize,
    /// Keep the cache between steps; without it every step recomputes the whole sequence.
    kv_cache: bool,
    logits: Vec<f32>,
}

impl Plain {
    pub fn new(kv_cache: bool) -> Self {
        let (fed, logits) = (0, Vec::new());
        Plain {
            fed,
            kv_cache,
            logits,
        }
    }

    /// Predict and sample: the next token after `ids`, with the sampler's `n_top` candidates.
    pub async fn step(
        &mut self,
        model: &mut Model,
        sampler: &mut Sampler,
        ids: &[u32],
        n_top: usize,
    ) -> Result<Pending> {
        if !self.kv_cache {
            self.fed = 0; // the naive loop: the whole sequence again, nothing remembered
        }
        let logits = model.predict(ids, self.fed).await?; // predict
        self.fed = ids.len();
        self.logits.clear();
        self.logits.extend_from_slice(logits);
        let mut top = Vec::new();
        let id = sampler.pick(&mut self.logits, ids, n_top, &mut top); // sample
        Ok(Pending {
            id,
            drafted: false,
            top,
        }) // append: the transcript's, in `next`
    }
}
