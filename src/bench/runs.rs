//! The runs every benchmark is made of: a prompt of `n` ids, one generation through the
//! scheduler, the median of several.

use crate::error::Result;
use crate::generate::{GenerateParams, GenerationResult};
use crate::model::Model;

/// The middle of `v` (the upper one of an even count).
pub(super) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `n` prompt ids made from a repeated passage, folded into the model's vocabulary.
pub(super) fn prompt_ids(model: &Model, n: usize) -> Result<Vec<u32>> {
    let passage = "To be, or not to be, that is the question: whether 'tis nobler in the mind to \
                   suffer the slings and arrows of outrageous fortune, or to take arms against a \
                   sea of troubles, and by opposing end them. ";
    let ids = model.tokenizer.encode(passage)?;
    let v = model.config.vocab_size as u32;
    Ok(ids.iter().cycle().take(n).map(|id| id % v).collect())
}

/// One greedy generation of `max_tokens` tokens after `prompt`, the whole prompt run.
pub(super) fn run_once(
    model: &mut Model,
    prompt: &[u32],
    max_tokens: usize,
) -> Result<GenerationResult> {
    let params = GenerateParams {
        max_tokens,
        ignore_eos: true,
        prefix_cache: false, // every run times the whole prompt
        ..Default::default()
    };
    alone(model, None, prompt.to_vec(), params, &mut |_| {})
}

/// One generation of `ids` through the scheduler, natively: its result.
pub(super) fn alone(
    model: &mut Model,
    draft: Option<&mut Model>,
    ids: Vec<u32>,
    params: GenerateParams,
    on_token: &mut dyn FnMut(&crate::generate::TokenEvent),
) -> Result<GenerationResult> {
    let prompt = crate::scheduler::Prompt::Ids(ids);
    let c = crate::scheduler::run(
        model,
        draft,
        prompt,
        params,
        &mut |_, e| on_token(e),
        &|| false,
    )?;
    Ok(c.result)
}
