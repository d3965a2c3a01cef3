//! Each member's outcome folded into its request: tokens passed on with their choice, choices
//! kept as they end, and the request answered (its choices assembled) or failed as a whole.

use super::lane::Outcome;
use super::{Choice, Completion, Event, Logits, Output, Place, RequestId, Scheduler};
use crate::error::Error;
use crate::generate::{GenerationResult, Metrics, StopReason};
use crate::model::Model;
use std::borrow::BorrowMut;

impl<M: BorrowMut<Model>> Scheduler<M> {
    /// One member's outcome into its request's events.
    pub(super) fn fold(&mut self, o: Outcome) {
        match o {
            Outcome::Token { id, choice, event } => {
                if let Some(r) = self.requests.get(&id) {
                    let choice = (r.results.len() > 1).then_some(choice);
                    self.events.push(Event::Token { id, choice, event });
                }
            }
            Outcome::Ended {
                id,
                choice,
                result,
                profile,
            } => {
                let Some(r) = self.requests.get_mut(&id) else {
                    return;
                };
                if let Some(slot) = r.results.get_mut(choice) {
                    *slot = Some(*result);
                }
                r.profile = r.profile.take().or(profile);
                r.left = r.left.saturating_sub(1);
                if r.left == 0 {
                    self.answer(id);
                }
            }
            Outcome::Logits {
                id,
                logits,
                reused,
                ms,
            } => {
                if self.requests.remove(&id).is_some() {
                    let output = Output::Logits(Some(Logits { logits, reused, ms }));
                    self.events.push(Event::Done { id, output });
                }
            }
            Outcome::Failed { id, error } => self.fail(id, error),
        }
    }

    /// Request `id` fails: its other choices leave (queued) or end (running; their events are
    /// dropped), and one `Failed` event says why.
    pub(super) fn fail(&mut self, id: RequestId, error: Error) {
        let Some(r) = self.requests.remove(&id) else {
            return;
        };
        if let Some(Place::Home(lane)) = self.lanes.get_mut(r.model) {
            lane.abort(id);
        }
        self.events.push(Event::Failed { id, error });
    }

    /// Request `id` has no choice left running: its answer, the choices assembled.
    pub(super) fn answer(&mut self, id: RequestId) {
        let Some(r) = self.requests.remove(&id) else {
            return;
        };
        if r.logits {
            let output = Output::Logits(None);
            self.events.push(Event::Done { id, output });
            return;
        }
        let n = r.results.len();
        let first = r.results.iter().flatten().next().cloned();
        let result = first.unwrap_or_else(never_ran);
        let choices = if n > 1 {
            (r.results.into_iter().enumerate())
                .map(|(index, res)| match res {
                    Some(g) => Choice {
                        index,
                        text: g.text,
                        tokens: g.tokens,
                        stop_reason: g.stop_reason,
                        metrics: Some(g.metrics),
                    },
                    None => Choice {
                        index,
                        text: String::new(),
                        tokens: Vec::new(),
                        stop_reason: StopReason::Abort,
                        metrics: None,
                    },
                })
                .collect()
        } else {
            Vec::new()
        };
        let output = Output::Completion(Box::new(Completion {
            result,
            choices,
            profile: r.profile,
        }));
        self.events.push(Event::Done { id, output });
    }
}

/// The result of a generation aborted before it ran.
fn never_ran() -> GenerationResult {
    GenerationResult {
        text: String::new(),
        tokens: Vec::new(),
        stop_reason: StopReason::Abort,
        metrics: Metrics {
            batch_size: 0,
            ..Metrics::default()
        },
        beams: Vec::new(),
    }
}
