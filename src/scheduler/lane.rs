//! One model's lane: its FIFO queue, its batch (`generate::Batch`) and the member that runs
//! alone, and one step of them. The plain loop's members at the head of the queue join the batch
//! while there is room (`MAX_BATCH`, and memory for one more KV cache) and leave it the step they
//! end; a member that cannot share a pass (beam search, a draft, the KV cache off, a profile, a
//! `logits` call) waits at the head until the batch has emptied, then runs alone, and nothing
//! joins until it has ended: the queue's order is the order requests start in.

use super::job::{Job, ModelId, Prompt, RequestId};
use crate::error::Error;
use crate::generate::{Batch, GenerationResult, NextLogits, TokenEvent, MAX_BATCH};
use crate::generate::{Generation, Move};
use crate::model::Model;
use crate::platform::now_ms;
use std::borrow::BorrowMut;
use std::collections::VecDeque;

/// One sequence of a request: choice `choice` of request `id`.
pub(super) struct Member {
    pub id: RequestId,
    pub choice: usize,
    pub job: Job,
}

impl Member {
    /// The model this member drafts with (`Draft::Model`), if any.
    pub fn draft(&self) -> Option<ModelId> {
        match &self.job {
            Job::Generate { draft, .. } => *draft,
            Job::Logits { .. } => None,
        }
    }

    /// Whether this member may share forward passes with others.
    fn batchable(&self) -> bool {
        matches!(&self.job, Job::Generate { params, draft: None, .. } if params.batchable())
    }
}

/// What a lane's step did for one member, folded into its request by the scheduler.
pub(super) enum Outcome {
    Token {
        id: RequestId,
        choice: usize,
        event: TokenEvent,
    },
    Ended {
        id: RequestId,
        choice: usize,
        result: Box<GenerationResult>,
        profile: Option<crate::backend::cpu::Profile>,
    },
    Logits {
        id: RequestId,
        logits: Vec<f32>,
        reused: usize,
        ms: f64,
    },
    Failed {
        id: RequestId,
        error: Error,
    },
}

/// A generation that steps by itself (`Generation::next`): beam search or a draft.
struct Alone {
    id: RequestId,
    choice: usize,
    gen: Generation,
    draft: Option<ModelId>,
}

pub(super) struct Lane<M> {
    pub model: M,
    queue: VecDeque<Member>,
    batch: Batch,
    /// The batch's members: (slot, request, choice).
    members: Vec<(usize, RequestId, usize)>,
    /// The batch holds one member that must run alone (the KV cache off, a profile).
    exclusive: bool,
    alone: Option<Alone>,
    /// What the KV cache holds for the `logits` calls.
    next: NextLogits,
    /// How many members memory allows, once a join found no memory for one more KV cache.
    room: usize,
}

impl<M: BorrowMut<Model>> Lane<M> {
    pub fn new(model: M) -> Self {
        Lane {
            model,
            queue: VecDeque::new(),
            batch: Batch::new(),
            members: Vec::new(),
            exclusive: false,
            alone: None,
            next: NextLogits::default(),
            room: MAX_BATCH,
        }
    }

    /// Members waiting for their turn.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Members running now (in the batch or alone).
    pub fn running(&self) -> usize {
        self.members.len() + usize::from(self.alone.is_some())
    }

    pub fn is_idle(&self) -> bool {
        self.running() == 0
    }

    pub fn has_work(&self) -> bool {
        !self.queue.is_empty() || !self.is_idle()
    }

    pub fn push(&mut self, member: Member) {
        self.queue.push_back(member);
    }

    /// The model another member's draft needs this step: the running alone member's, or, when
    /// nothing runs, the queue head's (it starts this step if that model is free).
    pub fn draft_wanted(&self) -> Option<ModelId> {
        match (&self.alone, self.is_idle()) {
            (Some(a), _) => a.draft,
            (None, true) => self.queue.front().and_then(Member::draft),
            (None, false) => None,
        }
    }

    /// Whether a member of request `id` runs or waits here.
    pub fn holds(&self, id: RequestId) -> bool {
        self.queue.iter().any(|m| m.id == id)
            || self.members.iter().any(|m| m.1 == id)
            || self.alone.as_ref().is_some_and(|a| a.id == id)
    }

    /// Takes request `id`'s queued members out (their choices never ran), and asks its running
    /// ones to end before their next forward pass. Returns the choices taken out of the queue.
    pub fn abort(&mut self, id: RequestId) -> Vec<usize> {
        let mut gone = Vec::new();
        self.queue.retain(|m| {
            let hit = m.id == id;
            if hit {
                gone.push(m.choice);
            }
            !hit
        });
        for &(slot, rid, _) in &self.members {
            if rid == id {
                if let Some(g) = self.batch.get_mut(slot) {
                    g.cancel();
                }
            }
        }
        if let Some(a) = self.alone.as_mut().filter(|a| a.id == id) {
            a.gen.cancel();
        }
        gone
    }

    /// The members that draft with model `d` (gone), out of the lane: their requests.
    pub fn drop_drafting_with(&mut self, d: ModelId) -> Vec<RequestId> {
        let mut out = Vec::new();
        self.queue.retain(|m| {
            let hit = m.draft() == Some(d);
            if hit {
                out.push(m.id);
            }
            !hit
        });
        if self.alone.as_ref().is_some_and(|a| a.draft == Some(d)) {
            out.extend(self.alone.take().map(|a| a.id));
        }
        out
    }

    /// This lane's model, lent for another lane's member to draft with: its `logits` calls'
    /// KV cache is written over.
    pub fn lend(&mut self) -> &mut Model {
        self.next.forget();
        self.model.borrow_mut()
    }

    /// Every member, queued or running, out of the lane: (request, choice), queued ones first
    /// flagged `false`. The batch's KV cache slots are freed.
    pub fn drain(&mut self) -> Vec<(RequestId, bool)> {
        let mut out: Vec<(RequestId, bool)> = self.queue.drain(..).map(|m| (m.id, false)).collect();
        for (slot, id, _) in self.members.drain(..) {
            self.batch.remove(slot);
            out.push((id, true));
        }
        if let Some(a) = self.alone.take() {
            out.push((a.id, true));
        }
        self.exclusive = false;
        out
    }

    /// One step: admits what may start (unless `hold`: another lane waits for this model as
    /// its draft), then one model step of the member running alone or of the batch.
    pub async fn step(&mut self, draft: Option<&mut Model>, hold: bool, out: &mut Vec<Outcome>) {
        if !hold {
            self.admit(out).await;
        }
        if let Some(mut a) = self.alone.take() {
            match a.gen.next(self.model.borrow_mut(), draft).await {
                Ok(Move::Token(event)) => out.push(Outcome::Token {
                    id: a.id,
                    choice: a.choice,
                    event,
                }),
                Ok(Move::Working) => {}
                Ok(Move::Done) => {
                    let model: &mut Model = self.model.borrow_mut();
                    out.push(Outcome::Ended {
                        id: a.id,
                        choice: a.choice,
                        result: Box::new(a.gen.result()),
                        profile: model.backend().profile(), // its own passes: it ran alone
                    });
                    return;
                }
                Err(error) => {
                    out.push(Outcome::Failed { id: a.id, error });
                    return;
                }
            }
            self.alone = Some(a);
        } else if !self.members.is_empty() {
            self.step_batch(out).await;
        }
    }

    /// Moves members from the head of the queue: plain-loop members into the batch while there
    /// is room, or the head alone when nothing runs.
    async fn admit(&mut self, out: &mut Vec<Outcome>) {
        while self.alone.is_none() && !self.exclusive {
            let Some(head) = self.queue.front() else {
                return;
            };
            let batchable = head.batchable();
            if !batchable && !self.is_idle() {
                return; // it waits for the batch to empty
            }
            if self.members.len() >= MAX_BATCH.min(self.room) {
                return;
            }
            let Some(m) = self.queue.pop_front() else {
                return;
            };
            match self.start(m, batchable, out).await {
                Ok(()) => {}
                Err(m) => {
                    // No memory for one more KV cache now: it waits for a member to leave.
                    self.room = self.members.len();
                    self.queue.push_front(m);
                    return;
                }
            }
            if !batchable {
                return;
            }
        }
    }

    /// Starts member `m`: a `logits` call answers at once; a generation joins the batch or
    /// runs alone. A failure to start ends its request (`Outcome::Failed`), but for a join that
    /// found no memory while others run: then the member is handed back, to wait.
    async fn start(
        &mut self,
        m: Member,
        batchable: bool,
        out: &mut Vec<Outcome>,
    ) -> std::result::Result<(), Member> {
        let model: &mut Model = self.model.borrow_mut();
        let (prompt, params, draft) = match &m.job {
            Job::Logits { ids, cache } => {
                let t0 = now_ms();
                let ran = self.next.logits(model, ids, *cache).await;
                out.push(match ran {
                    Ok((logits, reused)) => Outcome::Logits {
                        id: m.id,
                        logits: logits.to_vec(),
                        reused,
                        ms: now_ms() - t0,
                    },
                    Err(error) => Outcome::Failed { id: m.id, error },
                });
                return Ok(());
            }
            Job::Generate {
                prompt,
                params,
                draft,
            } => (prompt, params, *draft),
        };
        self.next.forget(); // a generation writes the KV cache
        let gen = match prompt {
            Prompt::Text(text) => Generation::new(model, text, params.clone()),
            Prompt::Ids(ids) => Generation::from_ids(model, ids.clone(), params.clone()),
        };
        let gen = match gen {
            Ok(g) => g,
            Err(error) => {
                out.push(Outcome::Failed { id: m.id, error });
                return Ok(());
            }
        };
        // Whatever it is, a generation's own setting: a profile times its passes alone.
        model.set_profiling(params.profile);
        if !gen.plain() {
            self.alone = Some(Alone {
                id: m.id,
                choice: m.choice,
                gen,
                draft,
            });
            return Ok(());
        }
        match self.batch.add(model, gen).await {
            Ok(slot) => {
                self.members.push((slot, m.id, m.choice));
                self.exclusive = !batchable;
                Ok(())
            }
            Err(Error::Memory(_)) if !self.members.is_empty() => Err(m),
            Err(error) => {
                out.push(Outcome::Failed { id: m.id, error });
                Ok(())
            }
        }
    }

    /// One step of the batch: each member's token, and the ones that ended leave. A failed
    /// forward pass ends every member with its error.
    async fn step_batch(&mut self, out: &mut Vec<Outcome>) {
        let model: &mut Model = self.model.borrow_mut();
        let moves = match self.batch.step(model).await {
            Ok(moves) => moves,
            Err(error) => {
                for (slot, id, _) in std::mem::take(&mut self.members) {
                    self.batch.remove(slot);
                    out.push(Outcome::Failed {
                        id,
                        error: error.again(),
                    });
                }
                Self::leave(&mut self.batch, &mut self.exclusive, model).await;
                return;
            }
        };
        for (slot, progress) in moves {
            let Some(k) = self.members.iter().position(|m| m.0 == slot) else {
                continue;
            };
            let (_, id, choice) = self.members[k];
            match progress {
                Move::Token(event) => out.push(Outcome::Token { id, choice, event }),
                Move::Working => {}
                Move::Done => {
                    self.members.swap_remove(k);
                    if let Some(g) = self.batch.remove(slot) {
                        let profile = if self.exclusive {
                            model.backend().profile()
                        } else {
                            None
                        };
                        out.push(Outcome::Ended {
                            id,
                            choice,
                            result: Box::new(g.result()),
                            profile,
                        });
                    }
                    self.room = MAX_BATCH; // its KV cache is free again: a waiting one may fit
                }
            }
        }
        if self.members.is_empty() {
            Self::leave(&mut self.batch, &mut self.exclusive, model).await;
        }
    }

    /// The batch has emptied: its KV cache slots past the first are freed, profiling ends.
    async fn leave(batch: &mut Batch, exclusive: &mut bool, model: &mut Model) {
        *exclusive = false;
        model.set_profiling(false);
        // Freeing memory cannot fail but on a lost GPU, which the next forward reports.
        let _ = batch.shrink(model).await;
    }
}
