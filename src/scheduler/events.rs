//! What the scheduler answers: a step's events, request by request, and a request's output (its
//! completion with every choice, or a `logits` call's answer).

use super::RequestId;
use crate::error::Error;
use crate::generate::{GenerationResult, Metrics, StopReason, TokenEvent};
use serde::Serialize;

/// One choice of a request of `n` choices. `metrics` is `None` for a choice that never ran
/// (aborted while queued).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Choice {
    pub index: usize,
    pub text: String,
    pub tokens: Vec<u32>,
    pub stop_reason: StopReason,
    pub metrics: Option<Metrics>,
}

/// A generation's answer: the first choice's result, every choice (when `n` > 1) and, with
/// `profile` on the CPU, where the forward passes spent their time.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Completion {
    #[serde(flatten)]
    pub result: GenerationResult,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<Choice>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<crate::backend::cpu::Profile>,
}

/// A `logits` request's answer: the logits after its ids, how many of them came from the KV
/// cache, and the milliseconds the pass took. `None` when it was aborted while queued.
#[derive(Clone, Debug)]
pub struct Logits {
    pub logits: Vec<f32>,
    pub reused: usize,
    pub ms: f64,
}

#[derive(Debug)]
pub enum Output {
    Completion(Box<Completion>),
    Logits(Option<Logits>),
}

/// What a step did, request by request.
#[derive(Debug)]
pub enum Event {
    /// A token of choice `choice` (`None` for a request without choices, `n` = 1).
    Token {
        id: RequestId,
        choice: Option<usize>,
        event: TokenEvent,
    },
    /// The request ended; its answer.
    Done { id: RequestId, output: Output },
    /// The request failed (its other choices end with it); nothing more comes for it.
    Failed { id: RequestId, error: Error },
    /// The model the request runs on moved to the CPU during this step (the GPU was lost):
    /// `backend` is what runs now, `reason` why.
    Backend {
        id: RequestId,
        backend: &'static str,
        reason: Option<String>,
    },
}
