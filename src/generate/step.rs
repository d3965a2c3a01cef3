//! One model step of the loop. `plain_step` is the lesson's loop, one token per step; `model_step`
//! is speculative decoding's: the forward pass over the unfed ids with a draft after them (the
//! verification pass), and the sampler's verdict on each drafted token. Greedy, they give the same
//! tokens (tests/speculative.rs compares the two paths); seeded sampling draws as it always has
//! (tests/golden.rs).

use super::{Generation, Pending};
use crate::error::{Error, Result};
use crate::model::Model;
use crate::platform::now_ms;
use crate::speculate::{prompt_lookup, Draft};

impl Generation {
    /// The lesson's loop, one turn: predict (a forward pass over the ids the KV cache does not
    /// hold yet: the whole prompt first, then the last token), sample the next token from the
    /// last position's logits, and leave it for `append`.
    pub(super) async fn plain_step(&mut self, model: &mut Model) -> Result<()> {
        let before = now_ms();
        if !self.params.kv_cache {
            self.fed = 0; // the naive loop: the whole sequence again, nothing remembered
        }
        let ids = &self.t.ids;
        let logits = model.forward(ids, self.fed).await?; // predict
        self.fed = ids.len();
        self.logits.clear();
        self.logits.extend_from_slice(logits);
        let mut top = Vec::new();
        let n_top = self.params.top_logprobs;
        let id = (self.sampler).pick(&mut self.logits, ids, n_top, &mut top); // sample
        let drafted = false;
        self.pending.push_back(Pending { id, drafted, top }); // append: `next` hands it to the transcript
        if self.forwards == 0 {
            self.t.prefill_ms = now_ms() - before;
        }
        self.forwards += 1;
        Ok(())
    }

    /// One forward pass: the unfed ids alone, or with a draft after them (the verification
    /// pass); the sampler keeps the draft's tokens while it agrees and adds its own next one.
    pub(super) async fn model_step(
        &mut self,
        model: &mut Model,
        draft_model: Option<&mut Model>,
    ) -> Result<()> {
        let before = now_ms();
        if !self.params.kv_cache {
            self.fed = 0; // the naive loop: the whole sequence again, nothing remembered
        }
        let first = self.forwards == 0;
        let n_out = self.t.ids.len() - self.t.n_prompt;
        // A draft may not run past max_tokens or the context (the prompt's step drafts nothing).
        let room = (self.params.max_tokens - n_out)
            .saturating_sub(1)
            .min(model.config.n_positions - self.t.ids.len());
        let k = if first {
            0
        } else {
            self.draft_len.get().min(room)
        };
        match (self.params.draft, draft_model) {
            (Draft::PromptLookup, _) => prompt_lookup(&self.t.ids, k, &mut self.draft),
            (Draft::None, _) => self.draft.clear(),
            (Draft::Model, Some(dm)) => self.draft_with(dm, model.config.vocab_size, k).await?,
            (Draft::Model, None) => {
                return Err(Error::param(
                    "draft",
                    "a draft model was asked for but not given",
                ))
            }
        }
        let v = model.config.vocab_size;
        self.seq.clear();
        self.seq.extend_from_slice(&self.t.ids);
        self.seq.extend_from_slice(&self.draft);
        // The row whose logits follow the last of `ids`, and the rows the sampler may need.
        let (r0, need) = if self.draft.is_empty() {
            (0, 1)
        } else {
            let r0 = self.t.ids.len() - 1 - self.fed;
            (r0, r0 + 1 + self.draft.len())
        };
        // The head runs over a few rows at a time: after a rejected draft token, no more.
        let chunk = model.backend.head_chunk();
        let mut have = (r0 + chunk).min(need);
        let rows = if self.draft.is_empty() {
            model.forward(&self.seq, self.fed).await?
        } else {
            model.forward_all(&self.seq, self.fed, have).await?
        };
        self.logits.clear();
        self.logits.extend_from_slice(rows);
        self.seq.truncate(self.t.ids.len()); // now the history the sampler sees
        let mut kept = 0;
        for i in 0..=self.draft.len() {
            if r0 + i >= have {
                let more = (have + chunk).min(need);
                self.logits.extend_from_slice(model.head_rows(have, more)?);
                have = more;
            }
            let row = &mut self.logits[(r0 + i) * v..][..v];
            let draft = self.draft.get(i).copied();
            let mut top = Vec::new();
            let n_top = self.params.top_logprobs;
            let (id, ok) = match (draft, self.params.draft) {
                (Some(d), Draft::Model) => {
                    let q = &self.q[i];
                    self.sampler
                        .verify_with_q(row, &self.seq, d, q, n_top, &mut top)
                }
                _ => self.sampler.verify(row, &self.seq, draft, n_top, &mut top),
            };
            self.pending.push_back(Pending {
                id,
                drafted: ok,
                top,
            });
            self.seq.push(id);
            if !ok {
                break;
            }
            kept += 1;
        }
        self.fed = self.t.ids.len() + kept;
        self.draft_fed = self.draft_fed.min(self.fed);
        self.draft_len.update(self.draft.len(), kept);
        self.forwards += 1;
        self.drafted += self.draft.len();
        self.accepted += kept;
        if first {
            self.t.prefill_ms = now_ms() - before;
        }
        Ok(())
    }

    /// Up to `k` draft tokens from the draft model, each drawn from its distribution (kept in
    /// `q`) after the ids and the draft so far.
    async fn draft_with(&mut self, dm: &mut Model, vocab: usize, k: usize) -> Result<()> {
        self.draft.clear();
        if dm.config.vocab_size != vocab {
            return Err(Error::param(
                "draft",
                format!(
                    "the draft model's vocabulary has {} ids, the model's {vocab}; they must be the same",
                    dm.config.vocab_size
                ),
            ));
        }
        self.seq.clear();
        self.seq.extend_from_slice(&self.t.ids);
        let k = k.min(dm.config.n_positions.saturating_sub(self.t.ids.len()));
        for j in 0..k {
            let logits = dm.forward(&self.seq, self.draft_fed).await?;
            self.draft_fed = self.seq.len();
            self.logits.clear();
            self.logits.extend_from_slice(logits);
            if self.q.len() <= j {
                self.q.push(Vec::new());
            }
            let q = &mut self.q[j];
            self.draft_sampler
                .distribution(&mut self.logits, &self.seq, q);
            let d = self.draft_sampler.draw(q);
            self.draft.push(d);
            self.seq.push(d);
        }
        Ok(())
    }
}
