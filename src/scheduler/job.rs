//! What a request asks of the scheduler, and the names of requests and models.

use crate::generate::GenerateParams;

/// The caller's name for a request (unique among the requests in flight).
pub type RequestId = u64;

/// A model's index in the scheduler (`add_model`).
pub type ModelId = usize;

/// A prompt as text (tokenized when its turn comes) or as token ids.
#[derive(Clone, Debug)]
pub enum Prompt {
    Text(String),
    Ids(Vec<u32>),
}

/// What a request asks of its model.
#[derive(Clone, Debug)]
pub enum Job {
    /// A generation (`n` choices, beams, a draft: its params say); `draft` the model that
    /// drafts for `Draft::Model`.
    Generate {
        prompt: Prompt,
        params: GenerateParams,
        draft: Option<ModelId>,
    },
    /// The next-token logits after `ids` (a loop written by hand: the JS API's `model.logits`),
    /// the KV cache reused from the last such call with `cache`.
    Logits { ids: Vec<u32>, cache: bool },
}
