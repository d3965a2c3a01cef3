//! Beam search: keep the `n` most likely sequences by their total log-probability, not one.
//!
//! The rule is Hugging Face transformers' (`generate(num_beams=n, do_sample=False)`, its
//! vectorised `_beam_search`), step for step, so the best sequence is theirs:
//! - each running beam's log-softmax (plus the repetition penalty, on log-probabilities as
//!   theirs) is added to its score; the best `2n` continuations over all beams are candidates;
//! - a candidate that ends (end-of-text, a stop text, `max_tokens`, the context) is a finished
//!   hypothesis if it ranks among the first `n`, scored `sum / generated_len ^ length_penalty`;
//!   the best `n` hypotheses are kept;
//! - the best `n` candidates that did not end run on;
//! - the search ends when every candidate ended, when `early_stopping` has `n` hypotheses, or
//!   when the best running beam cannot beat the worst kept hypothesis (the heuristic of
//!   `early_stopping=False`, or the exact bound of `"never"`).
//!
//! Every running beam has its own KV cache slot in the backend. When the beams are chosen, a
//! beam continues in its parent's slot if no sibling took it first; otherwise the parent's
//! cache is copied into a free slot. Nothing is recomputed (but after a GPU→CPU fall-back).

use super::{GenerateParams, Pending, Transcript};
use crate::error::Result;
use crate::model::Model;
use crate::sampling::Sampler;
use serde::Serialize;
use std::collections::VecDeque;

/// The most beams one search keeps.
pub const MAX_BEAMS: usize = 16;

/// When beam search may stop before every candidate has ended (transformers' `early_stopping`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EarlyStopping {
    /// When the best running beam, scored at its current length, cannot beat the worst of `n`
    /// kept hypotheses (transformers' default, `False`).
    #[default]
    Heuristic,
    /// As soon as there are `n` hypotheses (`True`).
    Yes,
    /// Only when no running beam could beat them at any length it may still reach (`"never"`).
    Never,
}

impl std::str::FromStr for EarlyStopping {
    type Err = crate::error::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "false" | "heuristic" => Ok(EarlyStopping::Heuristic),
            "true" => Ok(EarlyStopping::Yes),
            "never" => Ok(EarlyStopping::Never),
            other => Err(crate::error::Error::param(
                "early_stopping",
                format!("\"{other}\"; expected true, false or never"),
            )),
        }
    }
}

/// A finished beam: its tokens (end-of-text included when it ended so), its text, its total
/// log-probability and its length-normalised score (the ranking).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Beam {
    pub tokens: Vec<u32>,
    pub text: String,
    pub logprob: f32,
    pub score: f32,
}

/// How a sequence may end, as the loop's `append` decides it.
pub(super) struct Ends<'a> {
    pub eos: Option<u32>,
    pub max_new: usize,
    pub stop: &'a [String],
}

struct Running {
    ids: Vec<u32>, // generated so far
    score: f32,
    slot: usize,
    /// How many of prompt + ids the slot's cache holds.
    fed: usize,
}

struct Hypothesis {
    ids: Vec<u32>,
    sum: f32,
    score: f32,
}

pub(super) struct BeamSearch {
    n: usize,
    length_penalty: f32,
    early: EarlyStopping,
    kv_cache: bool,
    running: Vec<Running>,
    finished: Vec<Hypothesis>,
    improvable: bool,
    /// `Model::epoch` when the slots were made: a change means every cache is gone.
    epoch: usize,
    started: bool,
    pub done: bool,
    /// Tokens handed to the loop: every beam that could still win starts with them.
    certain: usize,
    /// Once done: every finished beam, best first, with its text.
    pub best: Vec<Beam>,
    logprobs: Vec<f32>,
    /// The logits of a batched step, one row per running beam.
    batch_logits: Vec<f32>,
}

/// A continuation: its score, the running beam it extends, the token.
type Candidate = (f32, usize, u32);

impl BeamSearch {
    pub fn new(n: usize, length_penalty: f32, early: EarlyStopping, kv_cache: bool) -> Self {
        BeamSearch {
            n,
            length_penalty,
            early,
            kv_cache,
            running: Vec::new(),
            finished: Vec::new(),
            improvable: true,
            epoch: 0,
            started: false,
            done: false,
            certain: 0,
            best: Vec::new(),
            logprobs: Vec::new(),
            batch_logits: Vec::new(),
        }
    }

    /// One step of the search: the running beams' forward (one pass for all of them where the
    /// backend batches, else one per beam), then the beams chosen. Returns the forwards a step
    /// without batching runs.
    async fn search(
        &mut self,
        model: &mut Model,
        sampler: &mut Sampler,
        prompt: &[u32],
        ends: &Ends<'_>,
    ) -> Result<usize> {
        if !self.started {
            self.started = true;
            self.running.push(Running {
                ids: Vec::new(),
                score: 0.0,
                slot: 0,
                fed: 0,
            });
            self.make_slots(model).await?;
        }
        if self.epoch != model.epoch {
            self.make_slots(model).await?; // after a fall-back: every sequence from the start
        }
        let mut candidates: Vec<Candidate> = Vec::new();
        if self.kv_cache {
            // Every running beam in one forward pass, each in its own KV cache slot.
            let seqs: Vec<Vec<u32>> = (self.running.iter())
                .map(|r| [prompt, &r.ids[..]].concat())
                .collect();
            let rows: Vec<(usize, &[u32], usize)> = (self.running.iter().zip(&seqs))
                .map(|(r, s)| (r.slot, &s[..], r.fed.min(s.len() - 1)))
                .collect();
            let (epoch, v) = (model.epoch, model.config.vocab_size);
            let logits = model.predict_batch(&rows).await?;
            self.batch_logits.clear();
            self.batch_logits.extend_from_slice(logits);
            for (b, s) in seqs.iter().enumerate() {
                log_softmax(&self.batch_logits[b * v..(b + 1) * v], &mut self.logprobs);
                let r = &mut self.running[b];
                r.fed = if model.epoch == epoch { s.len() } else { 0 };
                sampler.apply_repetition_penalty(&mut self.logprobs, s);
                top_continuations(&self.logprobs, r.score, b, 2 * self.n, &mut candidates);
            }
            return self.settle(model, candidates, ends).await;
        }
        // Without the KV cache: every beam's whole sequence, one pass each.
        let mut seq = Vec::new();
        for (b, r) in self.running.iter().enumerate() {
            seq.clear();
            seq.extend_from_slice(prompt);
            seq.extend_from_slice(&r.ids);
            let logits = model.predict(&seq, 0).await?;
            log_softmax(logits, &mut self.logprobs);
            sampler.apply_repetition_penalty(&mut self.logprobs, &seq);
            top_continuations(&self.logprobs, r.score, b, 2 * self.n, &mut candidates);
        }
        self.settle(model, candidates, ends).await
    }

    /// After a step's forward passes: the next beams from the best candidates. Returns the
    /// forward passes a step without batching runs (one per beam), the measure of its work.
    async fn settle(
        &mut self,
        model: &mut Model,
        mut candidates: Vec<Candidate>,
        ends: &Ends<'_>,
    ) -> Result<usize> {
        let forwards = self.running.len();
        if self.epoch != model.epoch {
            self.make_slots(model).await?; // the fall-back happened in this step
        }
        candidates.sort_by(|a, b| b.0.total_cmp(&a.0));
        candidates.truncate(2 * self.n);
        self.choose(model, &candidates, ends).await?;
        Ok(forwards)
    }

    /// (Re)makes a slot per beam; after a fall-back nothing is cached any more.
    async fn make_slots(&mut self, model: &mut Model) -> Result<()> {
        if self.kv_cache {
            model.kv_slots(self.n).await?;
        }
        self.epoch = model.epoch;
        for r in &mut self.running {
            r.fed = 0;
        }
        Ok(())
    }

    /// The finished hypotheses and the running beams of the next step, from the candidates
    /// (best first); their caches; whether the search goes on.
    async fn choose(
        &mut self,
        model: &mut Model,
        cands: &[Candidate],
        ends: &Ends<'_>,
    ) -> Result<()> {
        let gen_len = self.running[0].ids.len() + 1; // every beam has the same length
        let (next, all_ended) = self.sort_out(model, cands, ends, gen_len);
        self.running = self.continue_beams(model, &next).await?;
        if self.epoch != model.epoch {
            self.running.iter_mut().for_each(|r| r.fed = 0); // a copy fell back: nothing is cached
            self.make_slots(model).await?;
        }
        // Whether the best running beam could still beat the worst kept hypothesis.
        if self.improvable && self.finished.len() == self.n && !self.running.is_empty() {
            let len = match self.early == EarlyStopping::Never && self.length_penalty > 0.0 {
                true => ends.max_new,
                false => gen_len,
            };
            let best = self.running[0].score / (len as f32).powf(self.length_penalty);
            self.improvable = best > self.finished[self.n - 1].score;
        }
        let complete = self.finished.len() == self.n && self.early == EarlyStopping::Yes;
        self.done = all_ended || !self.improvable || complete || self.running.is_empty();
        if self.done && self.kv_cache {
            model.kv_slots(1).await?;
        }
        Ok(())
    }

    /// The candidates that end become finished hypotheses (the best `n` kept); of the others,
    /// the best `n` run on: (parent, candidate) each, and whether every candidate ended.
    fn sort_out(
        &mut self,
        model: &Model,
        cands: &[Candidate],
        ends: &Ends<'_>,
        gen_len: usize,
    ) -> (Vec<(usize, Candidate)>, bool) {
        let full = self.finished.len() == self.n && self.early == EarlyStopping::Yes;
        let mut next: Vec<(usize, Candidate)> = Vec::new(); // (parent, candidate)
        let mut all_ended = true;
        for (rank, c) in cands.iter().enumerate() {
            let parent = &self.running[c.1];
            let ended = ends.hit(model, &parent.ids, c.2);
            all_ended &= ended;
            if !ended {
                if next.len() < self.n {
                    next.push((c.1, *c));
                }
            } else if rank < self.n && self.improvable && !full {
                let mut ids = parent.ids.clone();
                ids.push(c.2);
                let score = c.0 / (gen_len as f32).powf(self.length_penalty);
                self.finished.push(Hypothesis {
                    ids,
                    sum: c.0,
                    score,
                });
            }
        }
        self.finished.sort_by(|a, b| b.score.total_cmp(&a.score));
        self.finished.truncate(self.n);
        (next, all_ended)
    }

    /// The next running beams, each in a KV cache slot: a parent's slot goes to its first
    /// child, the others get copies of it.
    async fn continue_beams(
        &mut self,
        model: &mut Model,
        next: &[(usize, Candidate)],
    ) -> Result<Vec<Running>> {
        let mut taken = vec![false; self.n];
        let mut slot_of = vec![None; next.len()];
        for (j, &(p, _)) in next.iter().enumerate() {
            let s = self.running[p].slot;
            if !taken[s] {
                taken[s] = true;
                slot_of[j] = Some(s);
            }
        }
        let mut free = (0..self.n)
            .filter(|&s| !taken[s])
            .collect::<Vec<_>>()
            .into_iter();
        let mut running = Vec::with_capacity(next.len());
        for (j, &(p, c)) in next.iter().enumerate() {
            let parent = &self.running[p];
            let (slot, fed) = match slot_of[j] {
                Some(s) => (s, parent.fed),
                None => {
                    let s = free.next().expect("n slots for at most n beams");
                    if self.kv_cache && parent.fed > 0 && self.epoch == model.epoch {
                        model.kv_copy(parent.slot, s, parent.fed).await?;
                    }
                    (s, parent.fed)
                }
            };
            let mut ids = parent.ids.clone();
            ids.push(c.2);
            running.push(Running {
                ids,
                score: c.0,
                slot,
                fed,
            });
        }
        Ok(running)
    }

    /// The tokens every beam that could still win starts with (all of the best once done).
    fn agreed(&self) -> &[u32] {
        let Some(best) = self.finished.first().map(|h| &h.ids) else {
            let Some(first) = self.running.first() else {
                return &[];
            };
            let n = (self.running.iter().map(|r| &r.ids))
                .fold(first.ids.len(), |n, ids| n.min(common(&first.ids, ids)));
            return &first.ids[..n];
        };
        if self.done {
            return best;
        }
        let others = self.finished.iter().map(|h| &h.ids);
        let n = (others.chain(self.running.iter().map(|r| &r.ids)))
            .fold(best.len(), |n, ids| n.min(common(best, ids)));
        &best[..n]
    }

    /// The finished beams, best first, with their texts.
    fn beams(&self, model: &Model, ends: &Ends<'_>) -> Vec<Beam> {
        (self.finished.iter())
            .map(|h| Beam {
                tokens: h.ids.clone(),
                text: ends.text(model, &h.ids),
                logprob: h.sum,
                score: h.score,
            })
            .collect()
    }
}

impl Ends<'_> {
    /// Whether `ids` + `next` ends: end-of-text, the length cap, or a stop text in its bytes.
    fn hit(&self, model: &Model, ids: &[u32], next: u32) -> bool {
        if Some(next) == self.eos || ids.len() + 1 >= self.max_new {
            return true;
        }
        if self.stop.is_empty() {
            return false;
        }
        let tok = &model.tokenizer;
        let mut bytes: Vec<u8> = ids
            .iter()
            .flat_map(|&i| tok.token_bytes(i))
            .copied()
            .collect();
        bytes.extend_from_slice(tok.token_bytes(next));
        let found = |s: &String| bytes.windows(s.len()).any(|w| w == s.as_bytes());
        self.stop.iter().any(found)
    }

    /// A beam's text: end-of-text dropped, cut before the first stop text.
    fn text(&self, model: &Model, ids: &[u32]) -> String {
        let ids: Vec<u32> = ids
            .iter()
            .copied()
            .filter(|&i| Some(i) != self.eos)
            .collect();
        let mut text = model.tokenizer.decode(&ids);
        if let Some(at) = self.stop.iter().filter_map(|s| text.find(s.as_str())).min() {
            text.truncate(at);
        }
        text
    }
}

fn common(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// `out` = log_softmax(`logits`), in f32 as transformers computes it.
fn log_softmax(logits: &[f32], out: &mut Vec<f32>) {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = logits.iter().map(|&l| ((l - max) as f64).exp()).sum();
    let log_sum = sum.ln() as f32;
    out.clear();
    out.extend(logits.iter().map(|&l| l - max - log_sum));
}

/// Adds the `k` best continuations of one beam (score + log-probability) to `out`.
fn top_continuations(
    logprobs: &[f32],
    score: f32,
    beam: usize,
    k: usize,
    out: &mut Vec<Candidate>,
) {
    let mut best: Vec<(f32, u32)> = Vec::with_capacity(k + 1);
    for (i, &lp) in logprobs.iter().enumerate() {
        if best.len() == k && lp <= best[k - 1].0 {
            continue;
        }
        let at = best.partition_point(|b| b.0 >= lp);
        best.insert(at, (lp, i as u32));
        best.truncate(k);
    }
    out.extend(best.into_iter().map(|(lp, id)| (score + lp, beam, id)));
}

impl BeamSearch {
    /// One step of beam search as a strategy of the loop: the tokens all beams now agree on
    /// become pending (to be handed out and checked by `append` like any other), and all of the
    /// best beam's once it ends. Returns the forwards run.
    pub(super) async fn step(
        &mut self,
        model: &mut Model,
        sampler: &mut Sampler,
        t: &Transcript,
        params: &GenerateParams,
        pending: &mut VecDeque<Pending>,
    ) -> Result<usize> {
        let ends = Ends {
            eos: (!params.ignore_eos).then_some(model.config.eos_token_id),
            max_new: (params.max_tokens).min(model.config.n_positions + 1 - t.n_prompt),
            stop: &params.stop,
        };
        let prompt = &t.ids[..t.n_prompt];
        let ran = self.search(model, sampler, prompt, &ends).await;
        let agreed = self.agreed();
        for &id in agreed.get(self.certain..).unwrap_or_default() {
            pending.push_back(Pending {
                id,
                drafted: false,
                top: Vec::new(),
                prob: None,
            });
        }
        self.certain = self.certain.max(agreed.len());
        if self.done {
            self.best = self.beams(model, &ends);
        }
        ran
    }
}
