//! Speculative decoding: each model step is one forward pass over the unfed ids with a draft
//! after them (the verification pass), and the sampler's verdict on each drafted token — several
//! tokens for one pass while the model agrees with the draft. Greedy, it gives the plain loop's
//! tokens (tests/speculative.rs compares the two paths); seeded sampling draws as it always has
//! (tests/golden.rs).

use super::{Pending, Transcript};
use crate::error::{Error, Result};
use crate::model::Model;
use crate::mtp::MIN_CONFIDENCE;
use crate::mtp::{HeadsStep, HeadsTrial, HeadsVerdict};
use crate::platform::now_ms;
use crate::sampling::{Sampler, SamplingParams};
use crate::speculate::{prompt_lookup, Draft, DraftLength};
use std::collections::VecDeque;

/// With `draft: 'mtp'`: what the heads did for a generation (`Metrics::mtp`).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HeadsUse {
    /// "drafted": the heads drafted every step (on, or forced); "plain": this engine measured
    /// that they lose, so the plain loop ran; "measuring": no verdict yet when it started, so its
    /// steps alternated drafted and plain blocks to time them (`mtp::HeadsTrial`).
    pub ran: &'static str,
    /// `forceDraft` was set.
    pub forced: bool,
    /// This engine's verdict, once there is one: remembered, or measured before or during it.
    pub verdict: Option<HeadsVerdict>,
}

pub(super) struct Speculative {
    /// Where drafts come from (not `Draft::None`).
    kind: Draft,
    /// How many ids the backend's KV cache holds: of the transcript's, and of the pending tokens.
    fed: usize,
    len: DraftLength,
    /// Working copies: the logits of a step's rows, the draft, the ids with it.
    logits: Vec<f32>,
    draft: Vec<u32>,
    seq: Vec<u32>,
    /// With a draft model: its sampler (the same settings, its own generator), how many ids its
    /// KV cache holds, and the distribution each draft token was drawn from.
    draft_sampler: Sampler,
    draft_fed: usize,
    q: Vec<Vec<f32>>,
    /// With the model's heads: their guesses of the tokens after the last one, from the last
    /// step's hidden state.
    guesses: Vec<u32>,
    /// Tokens drafted, and how many of them the model kept.
    pub drafted: usize,
    pub accepted: usize,
    /// With the heads: what they did (`Metrics::mtp`), and the time of the last guesses, which
    /// the drafted pass after them counts.
    pub heads: Option<HeadsUse>,
    guess_ms: f64,
    /// Whether the heads trial decides the kind of each step (else every step drafts).
    decides: bool,
}

impl Speculative {
    /// `heads`: with `Draft::Mtp`, whether `forceDraft` is set, whether the engine's heads trial
    /// decides this generation's steps (greedy, not forced: the tokens are the plain loop's
    /// whichever kind of step runs; a sampled text would depend on them), and the trial.
    pub fn new(
        kind: Draft,
        draft_tokens: usize,
        sampling: &SamplingParams,
        heads: Option<(bool, bool, &HeadsTrial)>,
    ) -> Result<Self> {
        let draft_sampler = Sampler::new(SamplingParams {
            seed: sampling.seed ^ 0x5eed_d4af7,
            ..sampling.clone()
        });
        Ok(Speculative {
            kind,
            fed: 0,
            len: DraftLength::new(draft_tokens),
            logits: Vec::new(),
            draft: Vec::new(),
            seq: Vec::new(),
            draft_sampler,
            draft_fed: 0,
            q: Vec::new(),
            guesses: Vec::new(),
            drafted: 0,
            accepted: 0,
            decides: heads.is_some_and(|(_, decides, _)| decides),
            heads: heads.map(|(forced, decides, trial)| HeadsUse {
                ran: if trial.measuring() && decides {
                    "measuring"
                } else {
                    "drafted"
                },
                forced,
                verdict: trial.verdict.clone(),
            }),
            guess_ms: 0.0,
        })
    }

    /// One forward pass: the unfed ids alone (the prompt's step drafts nothing), or with a draft
    /// after them; the sampler keeps the draft's tokens while it agrees and adds its own next one.
    /// With the heads, unless forced, the model's heads trial says whether the pass drafts, and
    /// times it while it measures.
    pub async fn step(
        &mut self,
        model: &mut Model,
        draft_model: Option<&mut Model>,
        sampler: &mut Sampler,
        t: &Transcript,
        n_top: usize,
        pending: &mut VecDeque<Pending>,
    ) -> Result<()> {
        let forced = !self.decides;
        let step = match forced {
            true => HeadsStep::Drafted,
            false => model.heads_trial.next_step(),
        };
        let t0 = now_ms();
        let drafting = step == HeadsStep::Drafted;
        self.propose(model, draft_model, t, drafting).await?;
        let (r0, kept) = self.judge(model, sampler, &t.ids, n_top, pending).await?;
        let prompt = self.fed == 0;
        self.fed = t.ids.len() + kept;
        self.draft_fed = self.draft_fed.min(self.fed);
        if drafting {
            self.len.update(self.draft.len(), kept);
        }
        self.drafted += self.draft.len();
        self.accepted += kept;
        let Some(heads) = &mut self.heads else {
            return Ok(());
        };
        let ms = now_ms() - t0 + if drafting { self.guess_ms } else { 0.0 };
        if !forced && !prompt {
            model.heads_trial.record(step, ms, kept + 1);
        }
        if heads.verdict.is_none() {
            heads.verdict.clone_from(&model.heads_trial.verdict);
        }
        // The heads guess from the row whose logits gave the last token, for a drafted pass next.
        if forced || model.heads_trial.next_step() == HeadsStep::Drafted {
            let t0 = now_ms();
            let row = if self.draft.is_empty() { 0 } else { r0 + kept };
            model.guess_ahead(row, MIN_CONFIDENCE, &mut self.guesses)?;
            self.guess_ms = now_ms() - t0;
        } else {
            self.guesses.clear();
        }
        Ok(())
    }

    /// This step's draft into `self.draft`: none for the prompt's step or when not `drafting`,
    /// else up to the draft length, never past `max_tokens` or the context.
    async fn propose(
        &mut self,
        model: &Model,
        draft_model: Option<&mut Model>,
        t: &Transcript,
        drafting: bool,
    ) -> Result<()> {
        let ids = &t.ids;
        let n_out = ids.len() - t.n_prompt;
        let room = (t.max_tokens - n_out)
            .saturating_sub(1)
            .min(model.config.n_positions - ids.len());
        let k = if self.fed == 0 || !drafting {
            0
        } else {
            self.len.get().min(room)
        };
        match (self.kind, draft_model) {
            (Draft::PromptLookup, _) => prompt_lookup(ids, k, &mut self.draft),
            (Draft::None, _) => self.draft.clear(),
            (Draft::Mtp, _) => {
                self.draft.clear();
                self.draft.extend(self.guesses.iter().take(k));
            }
            (Draft::Model, Some(dm)) => {
                self.draft_with(dm, ids, model.config.vocab_size, k).await?
            }
            (Draft::Model, None) => {
                return Err(Error::param(
                    "draft",
                    "a draft model was asked for but not given",
                ))
            }
        }
        Ok(())
    }

    /// The verification pass over the unfed `ids` and the draft, and the sampler's verdict on
    /// each drafted token, into `pending`: the row of the first verdict and how many draft tokens
    /// were kept.
    async fn judge(
        &mut self,
        model: &mut Model,
        sampler: &mut Sampler,
        ids: &[u32],
        n_top: usize,
        pending: &mut VecDeque<Pending>,
    ) -> Result<(usize, usize)> {
        let v = model.config.vocab_size;
        self.seq.clear();
        self.seq.extend_from_slice(ids);
        self.seq.extend_from_slice(&self.draft);
        // The row whose logits follow the last of `ids`, and the rows the sampler may need.
        let (r0, need) = if self.draft.is_empty() {
            (0, 1)
        } else {
            let r0 = ids.len() - 1 - self.fed;
            (r0, r0 + 1 + self.draft.len())
        };
        // The head runs over a few rows at a time: after a rejected draft token, no more.
        let chunk = model.backend().logit_chunk();
        let mut have = (r0 + chunk).min(need);
        let rows = if self.draft.is_empty() {
            model.predict(&self.seq, self.fed).await?
        } else {
            model.verify(&self.seq, self.fed, have).await?
        };
        self.logits.clear();
        self.logits.extend_from_slice(rows);
        self.seq.truncate(ids.len()); // now the history the sampler sees
        let mut kept = 0;
        for i in 0..=self.draft.len() {
            if r0 + i >= have {
                let more = (have + chunk).min(need);
                self.logits
                    .extend_from_slice(model.more_logits(have, more)?);
                have = more;
            }
            let row = &mut self.logits[(r0 + i) * v..][..v];
            let draft = self.draft.get(i).copied();
            let mut top = Vec::new();
            let (id, ok) = match (draft, self.kind) {
                (Some(d), Draft::Model) => {
                    let q = &self.q[i];
                    sampler.verify_with_q(row, &self.seq, d, q, n_top, &mut top)
                }
                _ => sampler.verify(row, &self.seq, draft, n_top, &mut top),
            };
            pending.push_back(Pending {
                id,
                drafted: ok,
                top,
                prob: sampler.picked_prob(),
            });
            self.seq.push(id);
            if !ok {
                break;
            }
            kept += 1;
        }
        Ok((r0, kept))
    }

    /// Up to `k` draft tokens from the draft model, each drawn from its distribution (kept in
    /// `q`) after `ids` and the draft so far.
    async fn draft_with(
        &mut self,
        dm: &mut Model,
        ids: &[u32],
        vocab: usize,
        k: usize,
    ) -> Result<()> {
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
        self.seq.extend_from_slice(ids);
        let k = k.min(dm.config.n_positions.saturating_sub(ids.len()));
        for j in 0..k {
            let logits = dm.predict(&self.seq, self.draft_fed).await?;
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
