//! The generation loop: predict → sample → append, one token per step, shared by the CLI, the
//! tests and the browser.
//!
//! `Generation` is the loop as a state machine: each `step` runs one forward pass (the whole
//! prompt first, then one token), picks a token and returns its event. How it picks is its
//! `Strategy`, each with its own state: `plain` (predict → sample, one token per pass: the
//! lesson's loop), `speculative` (a draft checked by one pass) and `beam` (beam search); all of
//! them end in `transcript`'s `append` (the ids, their streamed text, the stop checks and the
//! timings). The plain loop's forward passes are `batch`'s (continuous batching: a sequence alone
//! is a batch of one); the scheduler (`crate::scheduler`) drives batches and the strategies that
//! run alone step by step, for every front end.
//! Stops: end-of-text, a user stop sequence (matched across token boundaries, never emitted),
//! `max_tokens`, the context limit, or cancellation. The text of the events always concatenates
//! to the result's text, and every delta is valid UTF-8.

use crate::backend::gpu::GpuCounters;
use crate::error::{Error, Result};
use crate::model::Model;
use crate::platform::now_ms;
use crate::sampling::{Candidate, Sampler};
use crate::speculate::Draft;
use serde::Serialize;
use std::collections::VecDeque;

mod batch;
mod beam;
pub mod generated;
mod next;
pub mod options;
mod plain;
mod result;
mod speculative;
mod transcript;

use transcript::Transcript;

pub use batch::{choice_params, Batch, MAX_BATCH, MAX_CHOICES, MAX_QUEUE};
pub use beam::{Beam, EarlyStopping, MAX_BEAMS};
pub use next::NextLogits;
pub use options::{GenerateParams, Kind, Limits, OptionSpec, OptionValue, Scope, OPTIONS};
pub use speculative::HeadsUse;

/// The most stop texts one generation takes, and the longest (each is matched against the
/// text's tail after every token).
pub const MAX_STOPS: usize = 16;
pub const MAX_STOP_BYTES: usize = 1000;

impl GenerateParams {
    /// Whether a generation with these parameters runs the plain loop (no beams, no draft): a
    /// member of a `generate::Batch`, alone or with others.
    pub fn plain(&self) -> bool {
        self.num_beams <= 1 && self.draft == Draft::None
    }

    /// Whether a generation with these parameters can share forward passes with others: the
    /// plain loop with the KV cache, and no profile (a profile times the passes of one
    /// generation alone).
    pub fn batchable(&self) -> bool {
        self.plain() && self.kv_cache && !self.profile
    }

    /// Checks every setting before anything runs: each option within its limits (`OPTIONS`),
    /// then the ones that do not go together. An error names the option.
    pub fn validate(&self) -> Result<()> {
        self.check_limits()?;
        if self.stop.len() > MAX_STOPS {
            return Err(Error::param(
                "stop",
                format!("{} stop texts; at most {MAX_STOPS}", self.stop.len()),
            ));
        }
        if let Some(long) = self.stop.iter().find(|s| s.len() > MAX_STOP_BYTES) {
            return Err(Error::param(
                "stop",
                format!(
                    "a stop text of {} bytes; at most {MAX_STOP_BYTES}",
                    long.len()
                ),
            ));
        }
        if !self.kv_cache && self.draft != Draft::None {
            return Err(Error::param(
                "draft",
                "speculative decoding needs the KV cache, which is turned off",
            ));
        }
        if self.num_beams > 1 && self.draft != Draft::None {
            return Err(Error::param(
                "draft",
                "speculative decoding and beam search do not go together",
            ));
        }
        if self.n > 1 && !self.batchable() {
            return Err(Error::param(
                "n",
                "several choices run the plain loop as one batch: not with beam search, a draft, \
                 the KV cache off or profile",
            ));
        }
        if self.num_beams > 1 && !self.sampling().is_greedy() {
            return Err(Error::param(
                "num_beams",
                "beam search here is deterministic: set temperature to 0",
            ));
        }
        Ok(())
    }
}

/// Why generation ended; in JSON (the CLI, the JS API) its `as_str` name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    Eos,
    Stop,
    MaxTokens,
    Context,
    /// The caller aborted (the JS API's AbortSignal, `Generation::cancel`, the CLI's Ctrl+C).
    Abort,
}

impl StopReason {
    pub const ALL: [StopReason; 5] = [
        StopReason::Eos,
        StopReason::Stop,
        StopReason::MaxTokens,
        StopReason::Context,
        StopReason::Abort,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Eos => "eos",
            StopReason::Stop => "stop",
            StopReason::MaxTokens => "max_tokens",
            StopReason::Context => "context",
            StopReason::Abort => "abort",
        }
    }
}

/// One generated token, as soon as it exists. JSON (the CLI's `--json` lines) is camelCase,
/// without `top` when it is empty.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenEvent {
    pub id: u32,
    /// Text this token completes (whole characters only; may be empty).
    pub text: String,
    /// 0 for the first generated token.
    pub index: usize,
    /// Milliseconds since generation started.
    pub elapsed_ms: f64,
    /// Whether the token is a draft token the model agreed with (speculative decoding), so it
    /// came in the same model step as the one before it.
    pub drafted: bool,
    /// The distribution the sampler drew from, most likely first (`top_logprobs` entries).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub top: Vec<Candidate>,
    /// With `top_logprobs` > 0: the probability this token had in that distribution (for
    /// greedy, the softmax at temperature 1), whether or not it is among `top`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prob: Option<f32>,
}

/// Timings of one generation. All times in milliseconds. JSON (the CLI, the JS API) is
/// camelCase: `ttftMs`, `tpotMs`, …
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Metrics {
    /// Start → first token (tokenize + prefill + sample).
    pub ttft_ms: f64,
    /// Mean time per output token after the first.
    pub tpot_ms: f64,
    pub tpot_p50_ms: f64,
    pub tpot_p95_ms: f64,
    pub total_ms: f64,
    pub prefill_ms: f64,
    pub prompt_tokens: usize,
    pub output_tokens: usize,
    pub prefill_tokens_per_sec: f64,
    pub decode_tokens_per_sec: f64,
    /// Forward passes of the model: one per token without a draft, fewer with one.
    pub target_forwards: usize,
    /// Tokens drafters proposed, and how many of them the model kept.
    pub drafted_tokens: usize,
    pub accepted_draft_tokens: usize,
    /// The most sequences this one shared a forward pass with, itself included (a batch:
    /// `generate::Batch`); 1 alone.
    pub batch_size: usize,
    /// Prompt tokens whose keys and values an earlier generation had computed (prefix caching):
    /// reused, not run. `prefill_tokens_per_sec` counts the others.
    pub cached_prompt_tokens: usize,
    /// On the GPU, what the forward passes of the plain loop that gave this generation its tokens
    /// asked of it, summed (a pass a batch shared counts whole for each of its sequences; after a
    /// fall-back to the CPU, those that ran on the GPU): per pass, the submissions, dispatches and
    /// bytes read back of a step. Absent on the CPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuCounters>,
    /// With `draft: 'mtp'`: whether the heads drafted, and this engine's measured verdict on them
    /// (`mtp::HeadsTrial`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mtp: Option<HeadsUse>,
}

/// The outcome of a generation: `{ text, tokens, stopReason, metrics }` in JSON.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerationResult {
    pub text: String,
    /// Generated ids, including a final end-of-text or the token that completed a stop text.
    pub tokens: Vec<u32>,
    pub stop_reason: StopReason,
    pub metrics: Metrics,
    /// With beam search: every finished beam, best (the one above) first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub beams: Vec<Beam>,
}

/// What one call of `Generation::next` did.
#[derive(Debug)]
pub enum Move {
    Token(TokenEvent),
    /// A model step that settled no token yet (beam search, while its beams disagree).
    Working,
    Done,
}

/// A token of a model step, not handed out yet.
pub(crate) struct Pending {
    id: u32,
    drafted: bool,
    top: Vec<Candidate>,
    prob: Option<f32>,
}

/// How tokens are chosen: each way has its own state, and all of them end in the
/// transcript's `append`.
enum Strategy {
    /// The lesson's loop: predict, sample, append — one token per forward pass.
    Plain(plain::Plain),
    /// A draft checked by one forward pass: several tokens per pass while the model agrees.
    Speculative(Box<speculative::Speculative>),
    /// The `n` most likely sequences, handed out as they agree.
    Beam(Box<beam::BeamSearch>),
}

/// The loop's state between steps.
pub struct Generation {
    params: GenerateParams,
    sampler: Sampler,
    /// The ids so far, their text, their times, and whether it ended.
    t: Transcript,
    strategy: Strategy,
    /// Tokens of the last model step not handed out yet (several after a kept draft).
    pending: VecDeque<Pending>,
    /// Forward passes of the model so far.
    forwards: usize,
    /// The most sequences a forward pass of this one carried.
    batch_size: usize,
    /// On the GPU, what the passes this generation's tokens came from asked of it.
    gpu: Option<GpuCounters>,
    /// `draft: 'mtp'` that runs the plain loop: this engine measured that the heads lose.
    heads_off: Option<HeadsUse>,
}

impl Generation {
    /// Tokenizes the prompt and checks it and the parameters. An empty prompt starts from
    /// end-of-text, as GPT-2 was trained to. Times count from this call.
    pub fn new(model: &Model, prompt: &str, params: GenerateParams) -> Result<Self> {
        let t0 = now_ms();
        let ids = model.tokenizer.encode(prompt)?;
        Self::start(model, ids, params, t0)
    }

    /// Like `new` with the prompt already tokenized.
    pub fn from_ids(model: &Model, ids: Vec<u32>, params: GenerateParams) -> Result<Self> {
        Self::start(model, ids, params, now_ms())
    }

    /// `t0`: when the request started (`platform::now_ms`).
    fn start(model: &Model, mut ids: Vec<u32>, params: GenerateParams, t0: f64) -> Result<Self> {
        params.validate()?;
        let sampler = Sampler::new(params.sampling());
        let config = &model.config;
        if ids.is_empty() {
            ids.push(config.eos_token_id.min(config.vocab_size as u32 - 1));
        }
        config.check_ids(&ids, 0)?;
        let mut params = params;
        params.stop.retain(|s| !s.is_empty());
        if params.draft == Draft::Mtp && model.mtp.is_none() {
            return Err(crate::error::Error::param(
                "draft",
                format!(
                    "\"mtp\" needs multi-token prediction heads, and this model has none ({} beside \
                     its weights, or mtp.* tensors in its GGUF file; tools/train_mtp_heads.py makes them)",
                    crate::mtp::HEADS_FILE
                ),
            ));
        }
        let trial = &model.heads_trial;
        let mut heads_off = None;
        // The heads' trial and verdict decide greedy generations only: their tokens are the plain
        // loop's either way, where a seed's sampled text depends on which steps drafted.
        let decides =
            params.draft == Draft::Mtp && !params.force_draft && params.sampling().picks_argmax();
        if decides {
            if let Some(v) = trial.verdict.as_ref().filter(|v| !v.on) {
                // Measured to lose on this engine: the plain loop, in a batch with others.
                params.draft = Draft::None;
                heads_off = Some(HeadsUse {
                    ran: "plain",
                    forced: false,
                    verdict: Some(v.clone()),
                });
            }
        }
        let p = &params;
        let strategy = if p.num_beams > 1 {
            let (n, penalty, early) = (p.num_beams, p.length_penalty, p.early_stopping);
            Strategy::Beam(Box::new(beam::BeamSearch::new(
                n, penalty, early, p.kv_cache,
            )))
        } else if p.draft != Draft::None {
            let heads = (p.draft == Draft::Mtp).then_some((p.force_draft, decides, trial));
            let s = speculative::Speculative::new(p.draft, p.draft_tokens, &p.sampling(), heads)?;
            Strategy::Speculative(Box::new(s))
        } else {
            Strategy::Plain(plain::Plain::new(p.kv_cache, p.prefix_cache))
        };
        let t = Transcript::new(ids, p.stop.clone(), p.max_tokens, p.ignore_eos, t0);
        Ok(Generation {
            sampler,
            t,
            strategy,
            pending: VecDeque::new(),
            forwards: 0,
            batch_size: 1,
            gpu: None,
            heads_off,
            params,
        })
    }

    /// Prompt token ids.
    pub fn prompt_ids(&self) -> &[u32] {
        &self.t.ids[..self.t.n_prompt]
    }

    /// Asks the loop to end before its next forward pass.
    pub fn cancel(&mut self) {
        if self.t.done.is_none() {
            self.t.finish(StopReason::Abort);
        }
    }

    /// Whether generation has ended.
    pub fn is_done(&self) -> bool {
        self.t.done.is_some()
    }

    /// The next token (of the last model step's, or of a new model step: forward, sample —
    /// several tokens after a kept draft), or one model step that settled none (beam search), or
    /// the end. `draft_model` drafts for `Draft::Model`. The plain loop's model step is its
    /// batch's (`Batch::step`), which calls this to hand its token out; the scheduler
    /// (`crate::scheduler`) calls it for the strategies that run alone.
    pub async fn next(
        &mut self,
        model: &mut Model,
        draft_model: Option<&mut Model>,
    ) -> Result<Move> {
        if self.t.done.is_some() {
            return Ok(Move::Done);
        }
        if self.pending.is_empty() {
            let before = now_ms();
            let (sampler, t, n_top) = (&mut self.sampler, &self.t, self.params.top_logprobs);
            let ran = match &mut self.strategy {
                // Its predict is the batch's (`batch_output` leaves the token pending).
                Strategy::Plain(_) => Err(Error::State(
                    "the plain loop steps in a batch (generate::Batch), not by itself".into(),
                )),
                Strategy::Speculative(s) => {
                    let pending = &mut self.pending;
                    let ran = s.step(model, draft_model, sampler, t, n_top, pending);
                    ran.await.map(|()| 1)
                }
                Strategy::Beam(b) => {
                    b.step(model, sampler, t, &self.params, &mut self.pending)
                        .await
                }
            };
            if self.forwards == 0 {
                self.t.prefill_ms = now_ms() - before;
            }
            self.forwards += ran?;
        }
        let Some(p) = self.pending.pop_front() else {
            return Ok(match self.beam_finished() {
                true => Move::Done,
                false => Move::Working,
            });
        };
        Ok(Move::Token(self.t.append(model, p)))
    }

    /// For a batch (`batch::Batch`): the sequence so far and how many of its ids the KV cache
    /// holds, when this generation's next move is a model step of the plain loop; `None` when it
    /// has tokens to hand out, has ended, or is not the plain loop.
    pub(crate) fn batch_input(&self) -> Option<(&[u32], usize)> {
        match &self.strategy {
            Strategy::Plain(p) if self.pending.is_empty() && self.t.done.is_none() => {
                Some((&self.t.ids, p.fed()))
            }
            _ => None,
        }
    }

    /// For a batch: the logits of the step `batch_input` asked for, sampled (or the token
    /// chosen from them already); `next` hands the token out. `started`: when the step began
    /// (`now_ms`), for the prefill time; `shared`: the sequences of that forward pass.
    /// `gpu`: what that pass asked of the GPU, when it ran there.
    pub(crate) fn batch_output(
        &mut self,
        row: plain::Row<'_>,
        started: f64,
        shared: usize,
        gpu: Option<GpuCounters>,
    ) {
        self.batch_size = self.batch_size.max(shared);
        if let Some(c) = gpu {
            *self.gpu.get_or_insert_with(Default::default) += c;
        }
        if let Strategy::Plain(p) = &mut self.strategy {
            let (sampler, n_top) = (&mut self.sampler, self.params.top_logprobs);
            let token = p.sample(row, sampler, &self.t.ids, n_top);
            self.pending.push_back(token);
            if self.forwards == 0 {
                self.t.prefill_ms = now_ms() - started;
            }
            self.forwards += 1;
        }
    }

    /// For a batch: whether this generation's next token is the argmax of its logits and
    /// nothing else is read from them (greedy, no repetition penalty, no `top_logprobs`), so
    /// the backend may choose it (`Want::Argmax`) and read back no logits.
    pub(crate) fn argmax_only(&self) -> bool {
        self.params.top_logprobs == 0 && self.params.sampling().picks_argmax()
    }

    /// For a batch: whether this generation asks for another step after the token its next
    /// step gives, unless that token ends it (end-of-text, a stop text) or it is cancelled; the
    /// GPU may then start that step early (`Want::ArgmaxAhead`).
    pub(crate) fn may_continue(&self) -> bool {
        self.t.ids.len() + 1 - self.t.n_prompt < self.t.max_tokens
    }

    /// For a batch: how many of its largest logits this generation's next token reads when it
    /// reads nothing else (greedy: 1; top-k sampling: k, at most `MAX_TOP_K`; no repetition
    /// penalty, no `top_logprobs`), so that the backend may choose them (`Want::Top`) and read
    /// back only those.
    pub(crate) fn top_only(&self) -> Option<usize> {
        let k = self.params.sampling().reads_top()?;
        (self.params.top_logprobs == 0 && k <= crate::backend::MAX_TOP_K).then_some(k)
    }

    /// For a batch, before this generation's first step: its prompt, when it may start from keys
    /// and values a KV cache slot holds already (the plain loop, `prefix_cache` on).
    pub(crate) fn prefix_wanted(&self) -> Option<&[u32]> {
        match &self.strategy {
            Strategy::Plain(p) if p.wants_prefix() => Some(self.prompt_ids()),
            _ => None,
        }
    }

    /// For a batch: this generation's slot holds its first `n` ids (`prefix_wanted`).
    pub(crate) fn reuse_prefix(&mut self, n: usize) {
        if let Strategy::Plain(p) = &mut self.strategy {
            p.reuse(n);
        }
    }

    /// For a batch: after a fall-back to the CPU the KV cache holds nothing of this sequence.
    pub(crate) fn forget_cache(&mut self) {
        if let Strategy::Plain(p) = &mut self.strategy {
            p.forget();
        }
    }

    /// Whether this generation runs the plain loop, in a batch (`GenerateParams::plain`).
    pub fn plain(&self) -> bool {
        self.params.plain()
    }

    /// Whether beam search has ended and handed out all of its best beam.
    fn beam_finished(&mut self) -> bool {
        let done = matches!(&self.strategy, Strategy::Beam(b) if b.done);
        if done && self.t.done.is_none() {
            // `append` ends the loop on the best beam's last token; this is for a best beam
            // whose end it would not see (a stop text split by lossy decoding).
            self.t.finish(StopReason::MaxTokens);
        }
        done
    }
}
