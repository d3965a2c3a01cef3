//! The lesson's loop, one turn per token: predict (a forward pass over the ids the KV cache does
//! not hold yet: the whole prompt first, then the last token), sample the next token from the
//! last position's logits; the transcript's `append` is the third part. The predict is
//! `generate::Batch`'s (a sequence alone is a batch of one), which also decides whether the
//! first one starts after the prompt's first ids (prefix caching, `reuse`).

use super::Pending;
use crate::sampling::Sampler;

/// What a model step gave a sequence of the plain loop: the logits of its last row, or the token
/// the backend chose from them already (`Want::Argmax`, when `Generation::argmax_only`).
pub(crate) enum Row<'a> {
    Logits(&'a [f32]),
    Chosen(u32),
    /// The largest logits and their ids (`Want::Top`), for a sampler that reads nothing else.
    Top(&'a [(f32, u32)]),
}

/// One sequence, one token per forward pass.
pub(super) struct Plain {
    /// How many of the ids the backend's KV cache holds.
    fed: usize,
    /// Keep the cache between steps; without it every step recomputes the whole sequence.
    kv_cache: bool,
    /// Start from the keys and values of the prompt's start that the KV cache holds already
    /// (prefix caching, `generate::Batch`).
    prefix_cache: bool,
    /// Whether the first step ran.
    started: bool,
    /// Prompt positions the first step found in the KV cache and did not compute.
    pub cached: usize,
    logits: Vec<f32>,
}

impl Plain {
    pub fn new(kv_cache: bool, prefix_cache: bool) -> Self {
        Plain {
            fed: 0,
            kv_cache,
            prefix_cache,
            started: false,
            cached: 0,
            logits: Vec::new(),
        }
    }

    /// Whether the first step may start from a prefix the KV cache holds.
    pub fn wants_prefix(&self) -> bool {
        self.kv_cache && self.prefix_cache && !self.started
    }

    /// Before the first step: the KV cache this sequence runs in holds its first `n` ids.
    pub fn reuse(&mut self, n: usize) {
        if self.wants_prefix() {
            (self.fed, self.cached) = (n, n);
        }
    }

    /// How many of the ids the KV cache holds for the next step (none without the cache: the
    /// naive loop runs the whole sequence again, nothing remembered).
    pub fn fed(&self) -> usize {
        if self.kv_cache {
            self.fed
        } else {
            0
        }
    }

    /// After a fall-back to the CPU: the KV cache holds nothing of this sequence.
    pub fn forget(&mut self) {
        self.fed = 0;
    }

    /// Sample: the next token from the logits of the last of `ids` (this step's predict, in the
    /// batch), with the sampler's `n_top` candidates; or the token the backend chose already.
    pub fn sample(
        &mut self,
        row: Row<'_>,
        sampler: &mut Sampler,
        ids: &[u32],
        n_top: usize,
    ) -> Pending {
        self.started = true;
        self.fed = ids.len();
        let chosen = |id| Pending {
            id,
            drafted: false,
            top: Vec::new(),
            prob: None,
        };
        let logits = match row {
            Row::Logits(logits) => logits,
            Row::Chosen(id) => return chosen(id),
            Row::Top(top) => return chosen(sampler.pick_top(top)),
        };
        self.logits.clear();
        self.logits.extend_from_slice(logits);
        let mut top = Vec::new();
        let id = sampler.pick(&mut self.logits, ids, n_top, &mut top); // sample
        Pending {
            id,
            drafted: false,
            top,
            prob: sampler.picked_prob(),
        } // append: the transcript's, in `next`
    }
}
