//! The engine thread of `gpt2 serve`: it loads the model, owns the scheduler and pumps it — the
//! same `Scheduler` as the CLI's and the browser's, so a request joins the running batch between
//! two steps (continuous batching) and the prompt cache is shared by every request. The HTTP side
//! talks to it over channels: a request goes in (`Engine::submit`, answered at once: queued, or
//! refused by the scheduler), its events come back on a channel of its own; a channel whose
//! receiver is gone (the client hung up) ends its request before the next step.

use super::stats::Stats;
use crate::inputs::ModelArgs;
use crate::{CliResult, Fail};
use gpt2_web::generate::TokenEvent;
use gpt2_web::openai::ApiError;
use gpt2_web::scheduler::{Completion, Event, Job, Output, RequestId, Scheduler};
use gpt2_web::{Model, Tokenizer};
use std::collections::HashMap;
use std::sync::{mpsc, Arc};
use std::time::Instant;
use tokio::sync::{mpsc as tmpsc, oneshot};

/// What comes back for a request.
pub enum Reply {
    Token { choice: usize, event: TokenEvent },
    Done(Box<Completion>),
    Failed(gpt2_web::Error),
}

enum Cmd {
    Submit {
        job: Job,
        replies: tmpsc::UnboundedSender<Reply>,
        accepted: oneshot::Sender<Result<(), ApiError>>,
    },
    /// Stop: refuse new requests, end those still running at `deadline`, then leave.
    Drain { deadline: Instant },
}

/// The model as the HTTP side sees it.
pub struct Info {
    pub tokenizer: Arc<Tokenizer>,
    pub n_ctx: usize,
    /// What runs it: "cpu (q8)", "webgpu (f32)".
    pub backend: String,
}

/// The handle on the engine thread.
pub struct Engine {
    tx: mpsc::Sender<Cmd>,
    pub info: Info,
    thread: std::thread::JoinHandle<()>,
}

impl Engine {
    /// Loads the model on a thread of its own and starts pumping; a load that fails is this
    /// call's error. `queue`: the most requests (each choice counts) that may wait.
    pub fn start(model: ModelArgs, queue: usize, stats: Arc<Stats>) -> CliResult<Engine> {
        let (tx, rx) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("gpt2-engine".into())
            .spawn(move || {
                // `auto` chooses its backend by the batch a server runs, not one sequence.
                gpt2_web::model::set_expected_batch(gpt2_web::generate::MAX_BATCH);
                let model = match model.load() {
                    Ok(m) => m,
                    Err(e) => return drop(ready_tx.send(Err(e))),
                };
                let info = Info {
                    tokenizer: model.tokenizer.clone(),
                    n_ctx: model.config.n_positions,
                    backend: describe(&model),
                };
                let mut s = Scheduler::new();
                s.set_max_queue(queue);
                s.add_model(model);
                if ready_tx.send(Ok(info)).is_ok() {
                    pump(s, rx, &stats);
                }
            })
            .map_err(|e| Fail(1, format!("cannot start the engine thread: {e}")))?;
        match ready_rx.recv() {
            Ok(Ok(info)) => Ok(Engine { tx, info, thread }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(Fail(
                1,
                "the engine thread ended while loading the model".into(),
            )),
        }
    }

    /// Queues a job; its replies come on the receiver. Refused: the scheduler's error (a bad
    /// option, a full queue), or 503 once stopping.
    pub async fn submit(&self, job: Job) -> Result<tmpsc::UnboundedReceiver<Reply>, ApiError> {
        let (replies, rx) = tmpsc::unbounded_channel();
        let (accepted, answer) = oneshot::channel();
        let cmd = Cmd::Submit {
            job,
            replies,
            accepted,
        };
        self.tx.send(cmd).map_err(|_| stopping())?;
        answer.await.map_err(|_| stopping())??;
        Ok(rx)
    }

    /// Refuse new requests; end those still running at `deadline`.
    pub fn drain(&self, deadline: Instant) {
        let _ = self.tx.send(Cmd::Drain { deadline });
    }

    /// Waits for the thread to end (after `drain`, once its requests have).
    pub fn join(self) {
        drop(self.tx);
        let _ = self.thread.join();
    }
}

pub fn stopping() -> ApiError {
    ApiError::new(
        503,
        "server_error",
        "shutting_down",
        "the server is shutting down",
    )
}

fn describe(model: &Model) -> String {
    let b = model.backend();
    format!("{} ({})", b.name(), b.dtype_name())
}

/// A request's way back, and whether it was ended already (its client gone, or stopping).
struct Route {
    replies: tmpsc::UnboundedSender<Reply>,
    aborted: bool,
}

/// The loop: take what the HTTP side sent (waiting when there is nothing to do), end the
/// requests whose clients left, one step, route its events.
fn pump(mut s: Scheduler<Model>, rx: mpsc::Receiver<Cmd>, stats: &Stats) {
    let mut routes: HashMap<RequestId, Route> = HashMap::new();
    let mut next: RequestId = 0;
    let mut deadline: Option<Instant> = None;
    loop {
        if !s.has_work() {
            if deadline.is_some() {
                break;
            }
            // Nothing runs: wait for a command (none ever again: the server has ended).
            match rx.recv() {
                Ok(cmd) => take(cmd, &mut s, &mut routes, &mut next, &mut deadline),
                Err(_) => break,
            }
        }
        while let Ok(cmd) = rx.try_recv() {
            take(cmd, &mut s, &mut routes, &mut next, &mut deadline);
        }
        let late = deadline.is_some_and(|d| Instant::now() >= d);
        for (id, r) in routes.iter_mut() {
            if !r.aborted && (late || r.replies.is_closed()) {
                s.abort(*id);
                r.aborted = true;
            }
        }
        let worked = s.has_work();
        for ev in pollster::block_on(s.step()) {
            route(ev, &mut routes, stats);
        }
        let (queued, after) = s.load();
        stats.stepped(worked, queued, after);
    }
}

fn take(
    cmd: Cmd,
    s: &mut Scheduler<Model>,
    routes: &mut HashMap<RequestId, Route>,
    next: &mut RequestId,
    deadline: &mut Option<Instant>,
) {
    match cmd {
        Cmd::Submit {
            job,
            replies,
            accepted,
        } => {
            if deadline.is_some() {
                let _ = accepted.send(Err(stopping()));
                return;
            }
            let id = *next;
            *next += 1;
            match s.submit(id, 0, job) {
                Ok(()) => {
                    let aborted = false;
                    routes.insert(id, Route { replies, aborted });
                    if accepted.send(Ok(())).is_err() {
                        // The handler is gone already.
                        s.abort(id);
                    }
                }
                Err(e) => drop(accepted.send(Err(ApiError::from(e)))),
            }
        }
        Cmd::Drain { deadline: d } => *deadline = Some(d),
    }
}

fn route(ev: Event, routes: &mut HashMap<RequestId, Route>, stats: &Stats) {
    let (id, reply) = match ev {
        Event::Token { id, choice, event } => {
            let choice = choice.unwrap_or(0);
            (id, Reply::Token { choice, event })
        }
        Event::Done {
            id,
            output: Output::Completion(c),
        } => {
            stats.done(&c);
            (id, Reply::Done(c))
        }
        Event::Failed { id, error } => (id, Reply::Failed(error)),
        Event::Done { .. } | Event::Backend { .. } => return,
    };
    let end = !matches!(reply, Reply::Token { .. });
    if let Some(r) = routes.get(&id) {
        let _ = r.replies.send(reply);
    }
    if end {
        routes.remove(&id);
    }
}
