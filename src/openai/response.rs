//! The answers: a whole completion (`Answer`), or a stream's chunks (`Chunks`) — one per token,
//! then one per choice with its finish_reason, then (with `stream_options.include_usage`) one
//! with the usage and no choices, as OpenAI sends them — and OpenAI's legacy logprobs object.

use crate::generate::{StopReason, TokenEvent};
use crate::scheduler::Completion;
use crate::tokenizer::Tokenizer;
use serde_json::{json, Value};

/// finish_reason from the engine's stop reason: "length" at the token limit or the context's
/// end, "abort" when the request was ended before its end (the server shutting down), else
/// "stop".
pub fn finish_reason(r: StopReason) -> &'static str {
    match r {
        StopReason::MaxTokens | StopReason::Context => "length",
        StopReason::Abort => "abort",
        StopReason::Eos | StopReason::Stop => "stop",
    }
}

/// What every answer of one request carries.
#[derive(Clone, Debug)]
pub struct Head {
    pub id: String,
    /// Seconds since 1970.
    pub created: u64,
    pub model: String,
}

impl Head {
    fn with(&self, choices: Value) -> Value {
        json!({
            "id": self.id, "object": "text_completion", "created": self.created,
            "model": self.model, "choices": choices,
        })
    }
}

/// OpenAI's legacy logprobs object of one choice (natural logs), built token by token:
/// `top_logprobs` holds the k most likely candidates of the distribution the sampler drew from
/// and always the picked token (so up to k + 1 entries); candidates whose strings are alike
/// (halves of a character, U+FFFD) share one key, the most likely first. `text_offset` counts
/// characters (Unicode scalar values, as Python's `len`) before each token's string.
#[derive(Clone, Debug, Default)]
pub struct Logprobs {
    k: usize,
    offset: usize,
    tokens: Vec<String>,
    token_logprobs: Vec<f64>,
    top_logprobs: Vec<serde_json::Map<String, Value>>,
    text_offset: Vec<usize>,
}

impl Logprobs {
    pub fn new(k: usize) -> Self {
        Logprobs {
            k,
            ..Logprobs::default()
        }
    }

    /// A token event (asked with `top_logprobs` ≥ 1, so it carries its probability).
    pub fn push(&mut self, ev: &TokenEvent, tok: &Tokenizer) {
        let text = tok.decode(&[ev.id]);
        let prob = ev.prob.unwrap_or(f32::NAN) as f64;
        let mut top = serde_json::Map::new();
        let picked = (text.clone(), prob);
        let candidates = ev
            .top
            .iter()
            .take(self.k)
            .map(|c| (tok.decode(&[c.id]), c.prob as f64));
        for (s, p) in candidates.chain([picked]) {
            top.entry(s).or_insert(json!(p.ln()));
        }
        self.text_offset.push(self.offset);
        self.offset += text.chars().count();
        self.token_logprobs.push(prob.ln());
        self.tokens.push(text);
        self.top_logprobs.push(top);
    }

    pub fn to_json(&self) -> Value {
        json!({
            "tokens": self.tokens, "token_logprobs": self.token_logprobs,
            "top_logprobs": self.top_logprobs, "text_offset": self.text_offset,
        })
    }

    /// The tokens since the last `take`, as their own object; offsets go on counting.
    pub fn take(&mut self) -> Value {
        let v = self.to_json();
        let (k, offset) = (self.k, self.offset);
        *self = Logprobs {
            k,
            offset,
            ..Logprobs::default()
        };
        v
    }
}

fn usage(prompt: usize, completion: usize) -> Value {
    json!({ "prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion })
}

/// Every generated token counts, a final end-of-text or the token that completed a stop text
/// too (so a stream's chunks may run past a choice's text).
fn completion_tokens(c: &Completion) -> usize {
    match c.choices.is_empty() {
        true => c.result.tokens.len(),
        false => c.choices.iter().map(|ch| ch.tokens.len()).sum(),
    }
}

/// Each choice of a completion: its index, text and stop reason.
fn each(c: &Completion) -> Vec<(usize, &str, StopReason)> {
    match c.choices.is_empty() {
        true => vec![(0, c.result.text.as_str(), c.result.stop_reason)],
        false => (c.choices.iter())
            .map(|ch| (ch.index, ch.text.as_str(), ch.stop_reason))
            .collect(),
    }
}

/// A whole (not streamed) completion's answer.
pub struct Answer<'a> {
    pub head: &'a Head,
    /// The prompt's text, to put before each choice's (`echo`).
    pub echo: Option<&'a str>,
    /// Each choice's logprobs, by index, when asked for.
    pub logprobs: Option<&'a [Logprobs]>,
}

impl Answer<'_> {
    pub fn to_json(&self, c: &Completion) -> Value {
        let choices: Vec<Value> = (each(c).into_iter())
            .map(|(index, text, stop)| {
                let lp = self
                    .logprobs
                    .and_then(|l| l.get(index))
                    .map(Logprobs::to_json);
                json!({
                    "text": format!("{}{text}", self.echo.unwrap_or("")), "index": index,
                    "logprobs": lp, "finish_reason": finish_reason(stop),
                })
            })
            .collect();
        let mut v = self.head.with(Value::from(choices));
        v["usage"] = usage(c.result.metrics.prompt_tokens, completion_tokens(c));
        v
    }
}

/// A stream's chunks, each a JSON object for one `data:` line.
pub struct Chunks {
    pub head: Head,
    /// Logprobs per choice when asked for (`k`).
    logprobs: Option<(usize, Vec<Logprobs>)>,
    include_usage: bool,
}

impl Chunks {
    pub fn new(head: Head, logprobs: Option<usize>, include_usage: bool) -> Self {
        Chunks {
            head,
            logprobs: logprobs.map(|k| (k, Vec::new())),
            include_usage,
        }
    }

    fn chunk(&self, index: usize, text: &str, lp: Option<Value>, finish: Option<&str>) -> Value {
        let choice =
            json!({ "text": text, "index": index, "logprobs": lp, "finish_reason": finish });
        self.head.with(json!([choice]))
    }

    /// The prompt's text, first in choice `index`'s stream (`echo`).
    pub fn echo(&self, index: usize, prompt: &str) -> Value {
        self.chunk(index, prompt, None, None)
    }

    /// One generated token of choice `index`.
    pub fn token(&mut self, index: usize, ev: &TokenEvent, tok: &Tokenizer) -> Value {
        let lp = self.logprobs.as_mut().map(|(k, all)| {
            if all.len() <= index {
                all.resize(index + 1, Logprobs::new(*k));
            }
            all[index].push(ev, tok);
            all[index].take()
        });
        self.chunk(index, &ev.text, lp, None)
    }

    /// The end: each choice's finish_reason (with an empty logprobs object when asked for),
    /// then the usage when asked for.
    pub fn finish(&self, c: &Completion) -> Vec<Value> {
        let empty = self
            .logprobs
            .as_ref()
            .map(|(k, _)| Logprobs::new(*k).to_json());
        let mut out: Vec<Value> = (each(c).into_iter())
            .map(|(index, _, stop)| self.chunk(index, "", empty.clone(), Some(finish_reason(stop))))
            .collect();
        if self.include_usage {
            let mut v = self.head.with(json!([]));
            v["usage"] = usage(c.result.metrics.prompt_tokens, completion_tokens(c));
            out.push(v);
        }
        out
    }
}
