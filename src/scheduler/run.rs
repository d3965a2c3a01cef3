//! One request pumped to its end natively: what the CLI and the tests run.

use super::{Completion, Event, Job, Output, Prompt, RequestId, Scheduler};
use crate::error::Result;
use crate::generate::{GenerateParams, TokenEvent};
use crate::model::Model;

/// One request on `model` alone, natively, pumped to its end: `on_token(choice, event)` for each
/// token, `cancelled` asked before every step (true: the request is aborted). `draft` drafts for
/// `Draft::Model`. What the CLI and the tests run.
pub fn run(
    model: &mut Model,
    draft: Option<&mut Model>,
    prompt: Prompt,
    params: GenerateParams,
    on_token: &mut dyn FnMut(usize, &TokenEvent),
    cancelled: &dyn Fn() -> bool,
) -> Result<Completion> {
    let mut s: Scheduler<&mut Model> = Scheduler::new();
    let target = s.add_model(model);
    let draft = draft.map(|d| s.add_model(d));
    const ID: RequestId = 0;
    s.submit(
        ID,
        target,
        Job::Generate {
            prompt,
            params,
            draft,
        },
    )?;
    let mut aborted = false;
    loop {
        if !aborted && cancelled() {
            s.abort(ID);
            aborted = true;
        }
        for ev in pollster::block_on(s.step()) {
            match ev {
                Event::Token { choice, event, .. } => on_token(choice.unwrap_or(0), &event),
                Event::Done {
                    output: Output::Completion(c),
                    ..
                } => return Ok(*c),
                Event::Failed { error, .. } => return Err(error),
                Event::Done { .. } | Event::Backend { .. } => {}
            }
        }
    }
}
