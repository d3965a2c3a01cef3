//! Many generations, one forward pass per step: continuous batching. Decode does one token's
//! worth of work per weight read, so a machine serving one sequence is mostly idle; here every
//! sequence that needs its next token gets it from the same pass (each weight read once for all
//! of them), while each keeps its own KV cache slot, sampler, seed, stops and end. Sequences join
//! and leave between any two steps: a finished one leaves its slot to the next.
//!
//! Exactness: a sequence's tokens in a batch are the tokens it gets alone (tests/batch.rs). Its
//! prompt runs in a pass of its own, as alone; decode rows share passes of at most
//! `Backend::batch_rows` sequences, within which every row is computed as alone.

use super::plain::Row;
use super::{GenerateParams, Generation, Move};
use crate::error::{Error, Result};
use crate::model::Model;
use crate::platform::now_ms;

/// The most generations one batch holds (each holds a KV cache slot of the whole context): the
/// scheduler's limit for every front end (the JS API gets it as `MAX_BATCH`, generated).
pub const MAX_BATCH: usize = 16;

/// The most members (each choice of an `n` request counts) that may wait for one model in the
/// scheduler's queue; more are refused with `Error::Busy`.
pub const MAX_QUEUE: usize = 256;

/// The most choices (`n`) of one generate call.
pub const MAX_CHOICES: usize = 16;

/// Generations stepped together; each is named by its KV cache slot.
#[derive(Default)]
pub struct Batch {
    members: Vec<Option<Generation>>,
    logits: Vec<f32>,
    chosen: Vec<u32>,
    top: Vec<(f32, u32)>,
    /// The model's `epoch` when the slots were made: a fall-back empties every KV cache.
    epoch: usize,
    /// The most sequences that shared one forward pass so far.
    widest: usize,
}

impl Batch {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `gen` (the plain loop: beams and drafts step by themselves) in a free KV cache
    /// slot, made when none is free; returns the slot, its name in `step`'s answers. Whether it
    /// may share passes with others (`GenerateParams::batchable`) is the caller's to decide.
    pub async fn add(&mut self, model: &mut Model, gen: Generation) -> Result<usize> {
        if !gen.plain() {
            return Err(Error::param(
                "batch",
                "only the plain loop joins a batch (no beams, no draft)",
            ));
        }
        if self.members.is_empty() {
            self.epoch = model.epoch;
        }
        // Of the free slots, the one holding the most of the prompt (prefix caching), else the
        // one used least recently.
        let free = (self.members.iter().enumerate()).filter_map(|(s, g)| g.is_none().then_some(s));
        let slot = match model.reusable_in(gen.prompt_ids(), free) {
            Some((free, _)) => free,
            None if self.members.len() >= MAX_BATCH => {
                return Err(Error::param(
                    "batch",
                    format!("a batch holds at most {MAX_BATCH} sequences"),
                ))
            }
            None => {
                model.kv_slots(self.members.len() + 1).await?;
                self.members.push(None);
                self.members.len() - 1
            }
        };
        self.members[slot] = Some(gen);
        Ok(slot)
    }

    /// The generation in `slot`, to cancel it or read it.
    pub fn get_mut(&mut self, slot: usize) -> Option<&mut Generation> {
        self.members.get_mut(slot)?.as_mut()
    }

    /// Takes the generation in `slot` out (its result is `result()`); the slot is free again.
    pub fn remove(&mut self, slot: usize) -> Option<Generation> {
        self.members.get_mut(slot)?.take()
    }

    /// How many generations the batch holds, finished or not.
    pub fn len(&self) -> usize {
        self.members.iter().flatten().count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Frees the KV cache slots past the last member (all but slot 0 when none is left), as
    /// `Model::kv_slots` does: a batch that emptied holds no memory beyond one sequence's.
    pub async fn shrink(&mut self, model: &mut Model) -> Result<()> {
        while self.members.last().is_some_and(Option::is_none) {
            self.members.pop();
        }
        model.kv_slots(self.members.len().max(1)).await
    }

    /// The most sequences that shared one forward pass so far.
    pub fn widest(&self) -> usize {
        self.widest
    }

    /// One step of every member: the model steps they need (new prompts each in a pass of its
    /// own, every decode row in shared passes), then each member's next move — a token, or
    /// `Done` (it stays until `remove`d).
    pub async fn step(&mut self, model: &mut Model) -> Result<Vec<(usize, Move)>> {
        let started = now_ms();
        if model.epoch != self.epoch {
            // A fall-back to the CPU: slots made again, every sequence runs whole.
            model.kv_slots(self.members.len()).await?;
            self.members
                .iter_mut()
                .flatten()
                .for_each(Generation::forget_cache);
            self.epoch = model.epoch;
        }
        // (slot, ids the KV cache does not hold yet) of each member that needs a model step.
        let wants: Vec<(usize, usize)> = (self.members.iter().enumerate())
            .filter_map(|(slot, g)| {
                g.as_ref()?
                    .batch_input()
                    .map(|(s, fed)| (slot, s.len() - fed))
            })
            .collect();
        let (prompts, mut rows): (Vec<_>, Vec<_>) = wants.into_iter().partition(|w| w.1 > 1);
        for (slot, _) in prompts {
            // What a slot holds of the prompt already (its own, or another's: then copied) is
            // not run again; a prompt left with one id to run joins the decode rows.
            match self.reuse_prefix(model, slot).await? {
                1 => rows.push((slot, 1)),
                left => self.pass(model, &[(slot, left)], started, false).await?,
            }
        }
        // A step whose decode rows share one pass may have the next step's pass started
        // before its own is read back (greedy on the GPU: `Want::ArgmaxAhead`).
        let one_pass = rows.len() <= model.backend().batch_rows();
        for pass in rows.chunks(model.backend().batch_rows().max(1)) {
            self.pass(model, pass, started, one_pass).await?;
        }
        let mut out = Vec::with_capacity(self.members.len());
        for (slot, g) in self.members.iter_mut().enumerate() {
            if let Some(g) = g {
                out.push((slot, g.next(model, None).await?));
            }
        }
        Ok(out)
    }

    /// Before the first step of the member in `slot`: the longest start of its prompt that a
    /// slot holds (its own, or another's, copied into its own), taken as computed. The ids left
    /// to run.
    async fn reuse_prefix(&mut self, model: &mut Model, slot: usize) -> Result<usize> {
        let slots = self.members.len();
        let Some(g) = self.members[slot].as_mut() else {
            return Ok(0);
        };
        let Some(prompt) = g.prefix_wanted() else {
            return Ok(g.batch_input().map_or(0, |(s, fed)| s.len() - fed));
        };
        let own = model
            .reusable_in(prompt, std::iter::once(slot))
            .map_or(0, |b| b.1);
        let others = (0..slots).filter(|&s| s != slot);
        let n = match model.reusable_in(prompt, others) {
            Some((from, n)) if n > own => {
                model.kv_copy(from, slot, n).await?;
                n
            }
            _ => own,
        };
        let left = prompt.len() - n;
        g.reuse_prefix(n);
        Ok(left)
    }

    /// One forward pass for the members `pass` names (slot, ids to run), each sampling its
    /// next token from its row. `started`: when the step began; `ahead`: whether the next
    /// step's decode pass may be these members again (this pass is the step's only one).
    async fn pass(
        &mut self,
        model: &mut Model,
        pass: &[(usize, usize)],
        started: f64,
        ahead: bool,
    ) -> Result<()> {
        let v = model.config.vocab_size;
        let seqs: Vec<(usize, &[u32], usize)> = pass
            .iter()
            .filter_map(|&(slot, _)| {
                let (seq, fed) = self.members[slot].as_ref()?.batch_input()?;
                Some((slot, seq, fed))
            })
            .collect();
        // When every sequence of the pass only takes the argmax, only the argmaxes come back;
        // when each reads only its k likeliest tokens, only the largest k of them all.
        let member = |p: &(usize, usize)| self.members[p.0].as_ref();
        let argmax = (pass.iter()).all(|p| member(p).is_some_and(|g| g.argmax_only()));
        let ahead = ahead && (pass.iter()).any(|p| member(p).is_some_and(|g| g.may_continue()));
        let top = (pass.iter().map(|p| member(p).and_then(|g| g.top_only())))
            .try_fold(0, |k, g| g.map(|g| k.max(g)))
            .filter(|_| !argmax);
        self.logits.clear();
        self.chosen.clear();
        self.top.clear();
        match (argmax, top) {
            (true, _) => self
                .chosen
                .extend_from_slice(model.predict_argmax(&seqs, ahead).await?),
            (false, Some(k)) => self
                .top
                .extend_from_slice(model.predict_top(&seqs, k).await?),
            (false, None) => self
                .logits
                .extend_from_slice(model.predict_batch(&seqs).await?),
        }
        drop(seqs);
        if model.epoch != self.epoch {
            // A fall-back to the CPU during this pass: its sequences ran whole there; every
            // other member's KV cache is gone, and every member needs its slot again.
            model.kv_slots(self.members.len()).await?;
            for (slot, g) in self.members.iter_mut().enumerate() {
                if let Some(g) = g.as_mut().filter(|_| !pass.iter().any(|p| p.0 == slot)) {
                    g.forget_cache();
                }
            }
            self.epoch = model.epoch;
        }
        self.widest = self.widest.max(pass.len());
        let gpu = model.backend().gpu_last_pass();
        for (i, &(slot, _)) in pass.iter().enumerate() {
            if let Some(g) = self.members[slot].as_mut() {
                let row = match (argmax, top) {
                    (true, _) => Row::Chosen(self.chosen[i]),
                    (false, Some(k)) => Row::Top(&self.top[i * k..(i + 1) * k]),
                    (false, None) => Row::Logits(&self.logits[i * v..(i + 1) * v]),
                };
                g.batch_output(row, started, pass.len(), gpu);
            }
        }
        Ok(())
    }
}

/// The parameters of choice `i` of a generate call with `n` choices: seed + i, one sequence.
pub fn choice_params(params: &GenerateParams, i: usize) -> GenerateParams {
    GenerateParams {
        seed: params.seed.wrapping_add(i as u64),
        n: 1,
        ..params.clone()
    }
}
