//! The scheduler: the one way a token is made, for every front end (the CLI, the tests, the
//! browser's worker). Requests are submitted to a model; `step` advances one model by one model
//! step and returns what happened as events; the front end only pumps (`step` until its request
//! is done) and routes the events. The shape is vLLM's `LLMEngine.step()` and llama-server's
//! slot loop:
//!
//! - `submit(id, model, job)` checks the options (`GenerateParams::validate`) and the queue limit
//!   (`MAX_QUEUE`, or less: `set_max_queue`; more is refused with `Error::Busy`), fans a request of `n` choices out into
//!   `n` members (choice i with seed + i: `choice_params`) and queues them in the model's lane;
//! - `step()` gives the next model with work its turn (models take turns, round robin): its lane
//!   admits members and runs one model step (`lane.rs`: plain-loop members share a
//!   `generate::Batch`, others run alone), and the scheduler folds what each member did into its
//!   request: `Event::Token` per token (with its choice), `Event::Done` when every choice has
//!   ended (the choices assembled), `Event::Failed` when one fails (the first failure of a choice
//!   ends its siblings; other requests go on), `Event::Backend` when the model moved to the CPU;
//! - `abort(id)` ends a request queued (answered at once, nothing ran) or running (before its
//!   next forward pass); `dispose(model)` ends every request of a model and gives the model back.
//!
//! A member with a draft model (`Draft::Model`) borrows that model's lane for its steps: it starts
//! when that lane is idle (which admits nothing new while the member waits) and the lane rests
//! while the member runs.
//!
//! Between two steps every lane is at home; `begin` / `finish` split a step around its one
//! asynchronous part (`Turn::run`), so that the browser's binding can leave the scheduler
//! usable while a GPU step awaits its readback, and a trap inside one model's step loses that
//! model only (`fail_model`).

mod answer;
mod events;
mod job;
mod lane;
#[cfg(not(target_arch = "wasm32"))]
mod run;

pub use events::{Choice, Completion, Event, Logits, Output};
pub use job::{Job, ModelId, Prompt, RequestId};
#[cfg(not(target_arch = "wasm32"))]
pub use run::run;

use crate::error::{Error, Result};
use crate::generate::{choice_params, GenerateParams, GenerationResult};
use crate::model::Model;
use crate::speculate::Draft;
use lane::{Lane, Member, Outcome};
use std::borrow::BorrowMut;
use std::collections::HashMap;

pub use crate::generate::MAX_QUEUE;

/// A request in flight: its model and its choices' results as they end.
struct Request {
    model: ModelId,
    logits: bool,
    results: Vec<Option<GenerationResult>>,
    /// Choices not ended yet.
    left: usize,
    profile: Option<crate::backend::cpu::Profile>,
}

enum Place<M> {
    Home(Box<Lane<M>>),
    /// Taken out for a step (`begin`); a trap inside it leaves it so (`fail_model`). What is
    /// asked of it meanwhile waits here for `finish`.
    Out(Later),
    Gone,
}

/// The calls made while a lane is out for a step, carried out when it is back (`finish`).
#[derive(Default)]
struct Later {
    /// Members queued when it left.
    queued: usize,
    members: Vec<Member>,
    aborts: Vec<RequestId>,
    dispose: bool,
}

/// A model's step between `begin` and `finish`: its lane and the draft model's, taken out.
pub struct Turn<M> {
    model: ModelId,
    lane: Box<Lane<M>>,
    draft: Option<(ModelId, Box<Lane<M>>)>,
    hold: bool,
    epoch: usize,
    out: Vec<Outcome>,
}

impl<M: BorrowMut<Model>> Turn<M> {
    /// The model this turn steps.
    pub fn model(&self) -> ModelId {
        self.model
    }

    /// The step's one asynchronous part: the lane's model step.
    pub async fn run(mut self) -> Self {
        let draft = self.draft.as_mut().map(|(_, d)| d.lend());
        self.lane.step(draft, self.hold, &mut self.out).await;
        self
    }
}

/// Requests over models, stepped one model step at a time (see the module's header).
pub struct Scheduler<M> {
    lanes: Vec<Place<M>>,
    requests: HashMap<RequestId, Request>,
    /// The lane whose turn is next (round robin).
    turn: usize,
    /// Events of calls between steps (an abort answered at once), handed out by the next `step`.
    events: Vec<Event>,
    /// The most members that may wait for one model (`MAX_QUEUE` unless set lower).
    max_queue: usize,
}

impl<M: BorrowMut<Model>> Default for Scheduler<M> {
    fn default() -> Self {
        Scheduler {
            lanes: Vec::new(),
            requests: HashMap::new(),
            turn: 0,
            events: Vec::new(),
            max_queue: MAX_QUEUE,
        }
    }
}

impl<M: BorrowMut<Model>> Scheduler<M> {
    pub fn new() -> Self {
        Self::default()
    }

    /// The most members (each choice of a request counts) that may wait for one model, 1 to
    /// `MAX_QUEUE` (a server's `--queue`); more are refused with `Error::Busy`.
    pub fn set_max_queue(&mut self, n: usize) {
        self.max_queue = n.clamp(1, MAX_QUEUE);
    }

    /// Adds a model; its id names it in `submit` and the other calls.
    pub fn add_model(&mut self, model: M) -> ModelId {
        self.lanes.push(Place::Home(Box::new(Lane::new(model))));
        self.lanes.len() - 1
    }

    /// The model `id`, between steps.
    pub fn model(&self, id: ModelId) -> Result<&Model> {
        self.lane(id).map(|l| l.model.borrow())
    }

    /// The model `id`, between steps, to read or change what no request is using.
    pub fn model_mut(&mut self, id: ModelId) -> Result<&mut Model> {
        self.lane_mut(id).map(|l| l.model.borrow_mut())
    }

    fn lane(&self, id: ModelId) -> Result<&Lane<M>> {
        match self.lanes.get(id) {
            Some(Place::Home(l)) => Ok(l),
            Some(Place::Out(_)) => Err(busy_model()),
            _ => Err(gone()),
        }
    }

    fn lane_mut(&mut self, id: ModelId) -> Result<&mut Lane<M>> {
        match self.lanes.get_mut(id) {
            Some(Place::Home(l)) => Ok(l),
            Some(Place::Out(_)) => Err(busy_model()),
            _ => Err(gone()),
        }
    }

    /// Queues request `id` on `model`, or refuses it: options out of range or not going together
    /// (`Error::Param`), an unknown or disposed model or draft model, an id in flight already
    /// (`Error::State`), a full queue (`Error::Busy`). Its events come from `step`.
    pub fn submit(&mut self, id: RequestId, model: ModelId, job: Job) -> Result<()> {
        if self.requests.contains_key(&id) {
            return Err(Error::State(format!("request {id} is in flight already")));
        }
        let (n, logits) = match &job {
            Job::Generate { params, draft, .. } => {
                params.validate()?;
                self.check_draft(model, params, *draft)?;
                (params.n.max(1), false)
            }
            Job::Logits { .. } => (1, true),
        };
        let queued = match self.lanes.get(model) {
            Some(Place::Home(l)) => l.queued(),
            Some(Place::Out(later)) => later.queued + later.members.len(),
            _ => return Err(gone()),
        };
        let max = self.max_queue;
        if queued + n > max {
            return Err(Error::Busy(format!(
                "{queued} requests are waiting for this model already and at most {max} \
                 may wait; try again when some have finished"
            )));
        }
        for choice in 0..n {
            let job = match &job {
                Job::Generate {
                    prompt,
                    params,
                    draft,
                } if n > 1 => Job::Generate {
                    prompt: prompt.clone(),
                    params: choice_params(params, choice),
                    draft: *draft,
                },
                _ => job.clone(),
            };
            let member = Member { id, choice, job };
            match &mut self.lanes[model] {
                Place::Home(lane) => lane.push(member),
                Place::Out(later) => later.members.push(member),
                Place::Gone => {} // matched above
            }
        }
        self.requests.insert(
            id,
            Request {
                model,
                logits,
                results: vec![None; n],
                left: n,
                profile: None,
            },
        );
        Ok(())
    }

    /// A draft model given exactly when `params` drafts with one, loaded, and not `model`.
    fn check_draft(
        &self,
        model: ModelId,
        params: &GenerateParams,
        draft: Option<ModelId>,
    ) -> Result<()> {
        let refuse = |msg: &str| Err(Error::param("draft", msg.to_string()));
        match (params.draft == Draft::Model, draft) {
            (true, None) => refuse("a draft model was asked for but not given"),
            (false, Some(_)) => {
                refuse("a draft model was given for a generation that does not draft with one")
            }
            (_, Some(d)) if d == model => {
                refuse("the draft model is the model itself; load a smaller one")
            }
            (_, Some(d)) if !matches!(self.lanes.get(d), Some(Place::Home(_) | Place::Out(_))) => {
                refuse("the draft model is not loaded (disposed?)")
            }
            _ => Ok(()),
        }
    }

    /// Ends request `id`: its queued choices leave at once (a request none of whose choices ran
    /// is answered now, by the next `step`), its running ones end before their next forward pass
    /// with `stopReason: abort`. An unknown id (ended already) is no error.
    pub fn abort(&mut self, id: RequestId) {
        let Some(model) = self.requests.get(&id).map(|r| r.model) else {
            return;
        };
        let lane = match self.lanes.get_mut(model) {
            Some(Place::Home(lane)) => lane,
            Some(Place::Out(later)) => return later.aborts.push(id),
            _ => return,
        };
        let gone = lane.abort(id);
        let still = lane.holds(id);
        if let Some(r) = self.requests.get_mut(&id) {
            r.left -= gone.len().min(r.left);
        }
        if !still {
            self.answer(id);
        }
    }

    /// Whether a `step` would do anything: events to hand out, or a model with work.
    pub fn has_work(&self) -> bool {
        !self.events.is_empty()
            || self
                .lanes
                .iter()
                .any(|p| matches!(p, Place::Home(l) if l.has_work()))
    }

    /// The requests in flight on model `id` (queued or running), in id order: whom a fall-back's
    /// progress concerns.
    pub fn requests_on(&self, id: ModelId) -> Vec<RequestId> {
        let mut ids: Vec<RequestId> = (self.requests.iter())
            .filter(|(_, r)| r.model == id)
            .map(|(&rid, _)| rid)
            .collect();
        ids.sort_unstable();
        ids
    }

    /// How many members of model `id`'s requests run now.
    pub fn running(&self, id: ModelId) -> Result<usize> {
        self.lane(id).map(|l| l.running())
    }

    /// The events of the calls since the last step (`begin`/`finish` leave theirs here too).
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// How many members wait, and how many run, over every model (for a server's metrics).
    pub fn load(&self) -> (usize, usize) {
        self.lanes.iter().fold((0, 0), |(q, r), p| match p {
            Place::Home(l) => (q + l.queued(), r + l.running()),
            _ => (q, r),
        })
    }

    /// Removes model `id`, ending its requests (queued ones "disposed before this generation
    /// ran", running ones "disposed during generation"; their events come from the next
    /// `step`), and gives it back; `None` while it is out for a step: then this happens when the
    /// step ends, and the model is dropped.
    pub fn dispose(&mut self, id: ModelId) -> Result<Option<M>> {
        match self.lanes.get_mut(id) {
            Some(Place::Home(_)) => {}
            Some(Place::Out(later)) => {
                later.dispose = true;
                return Ok(None);
            }
            _ => return Err(gone()),
        }
        let Place::Home(mut lane) = std::mem::replace(&mut self.lanes[id], Place::Gone) else {
            return Err(gone()); // matched above
        };
        for (rid, ran) in lane.drain() {
            let msg = if ran {
                "the model was disposed during generation"
            } else {
                "the model was disposed before this generation ran"
            };
            self.fail(rid, Error::State(msg.into()));
        }
        self.fail_drafting_with(id, "the draft model was disposed during generation");
        Ok(Some(lane.model))
    }

    /// Model `id` stopped working inside a step (a wasm trap left its lane out): every request
    /// on it fails with `error`'s sentence (the events of it not handed out yet dropped), and
    /// the model is gone.
    pub fn fail_model(&mut self, id: ModelId, error: &Error) {
        if let Some(p) = self.lanes.get_mut(id) {
            *p = Place::Gone;
        }
        let ids = self.requests_on(id);
        self.events.retain(|e| match e {
            Event::Token { id, .. } | Event::Backend { id, .. } => !ids.contains(id),
            _ => true,
        });
        for rid in ids {
            self.fail(rid, error.again());
        }
        self.fail_drafting_with(id, "the draft model stopped working during generation");
    }

    /// Fails every request that drafts with model `id` (which is gone).
    fn fail_drafting_with(&mut self, id: ModelId, msg: &str) {
        let mut hit = Vec::new();
        for place in &mut self.lanes {
            if let Place::Home(l) = place {
                hit.extend(l.drop_drafting_with(id));
            }
        }
        for rid in hit {
            self.fail(rid, Error::State(msg.into()));
        }
    }

    /// One model step of the next model with work (models take turns), and the events of it and
    /// of the calls since the last step.
    pub async fn step(&mut self) -> Vec<Event> {
        if let Some(turn) = self.begin() {
            let turn = turn.run().await;
            self.finish(turn);
        }
        self.take_events()
    }

    /// The first half of `step`: the next model with work, its lane (and the draft model's)
    /// taken out; `None` when no model has work. Run the turn, then give it to `finish`.
    pub fn begin(&mut self) -> Option<Turn<M>> {
        let n = self.lanes.len();
        for k in 0..n {
            let at = (self.turn + k) % n;
            let Place::Home(lane) = &self.lanes[at] else {
                continue;
            };
            if !lane.has_work() || self.lent(at) {
                continue;
            }
            let hold = self.held(at);
            let want = lane.draft_wanted();
            if let Some(d) = want {
                // Its member goes on with the draft model lent to it, or starts with it free.
                let going = lane.running() > 0;
                match self.lanes.get(d) {
                    Some(Place::Home(dl)) if going || (dl.is_idle() && !self.lent(d)) => {}
                    Some(Place::Home(_) | Place::Out(_)) => continue, // held: it empties first
                    _ => {
                        self.fail_drafting_with(d, "the draft model is not loaded (disposed?)");
                        continue;
                    }
                }
            }
            self.turn = at + 1;
            let lane = self.take_out(at)?;
            let draft = want.and_then(|d| Some((d, self.take_out(d)?)));
            let epoch = lane.model.borrow().epoch;
            return Some(Turn {
                model: at,
                lane,
                draft,
                hold,
                epoch,
                out: Vec::new(),
            });
        }
        None
    }

    /// Lane `at`, home, taken out for a step.
    fn take_out(&mut self, at: ModelId) -> Option<Box<Lane<M>>> {
        let queued = match &self.lanes[at] {
            Place::Home(l) => l.queued(),
            _ => return None,
        };
        let later = Later {
            queued,
            ..Later::default()
        };
        match std::mem::replace(&mut self.lanes[at], Place::Out(later)) {
            Place::Home(l) => Some(l),
            other => {
                self.lanes[at] = other;
                None
            }
        }
    }

    /// The second half of `step`: the lanes back home, what each member did folded into its
    /// request's events.
    pub fn finish(&mut self, turn: Turn<M>) {
        let Turn {
            model,
            lane,
            draft,
            epoch,
            out,
            ..
        } = turn;
        let moved = (lane.model.borrow().epoch != epoch).then(|| {
            let m: &Model = lane.model.borrow();
            (m.backend().name(), m.gpu_unavailable.clone())
        });
        // A model failed meanwhile (`fail_model`) stays gone, its lane dropped; what was asked of
        // the others while they were out is done now.
        let mut later = Vec::new();
        for (at, l) in draft.into_iter().chain([(model, lane)]) {
            if let Place::Out(_) = &self.lanes[at] {
                if let Place::Out(l8) = std::mem::replace(&mut self.lanes[at], Place::Home(l)) {
                    later.push((at, l8));
                }
            }
        }
        if let Some((backend, reason)) = moved {
            for id in self.requests_on(model) {
                let reason = reason.clone();
                self.events.push(Event::Backend {
                    id,
                    backend,
                    reason,
                });
            }
        }
        for o in out {
            self.fold(o);
        }
        for (at, l8) in later {
            if let Some(Place::Home(lane)) = self.lanes.get_mut(at) {
                l8.members.into_iter().for_each(|m| lane.push(m));
            }
            l8.aborts.into_iter().for_each(|id| self.abort(id));
            if l8.dispose {
                let _ = self.dispose(at);
            }
        }
    }

    /// Whether lane `at`'s model drafts for a member running in another lane now.
    fn lent(&self, at: ModelId) -> bool {
        self.lanes.iter().any(|p| match p {
            Place::Home(l) => l.running() > 0 && l.draft_wanted() == Some(at),
            _ => false,
        })
    }

    /// Whether a member at the head of another (idle) lane waits for lane `at`'s model as its
    /// draft: then `at` admits nothing new, so that it empties.
    fn held(&self, at: ModelId) -> bool {
        self.lanes.iter().any(|p| match p {
            Place::Home(l) => l.is_idle() && l.draft_wanted() == Some(at),
            _ => false,
        })
    }
}

fn gone() -> Error {
    Error::State("this model has been disposed".into())
}

fn busy_model() -> Error {
    Error::State("the model is busy with a step; wait for it to finish".into())
}
