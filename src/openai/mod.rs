//! OpenAI's legacy completions API (`POST /v1/completions`) over the engine: a request's JSON
//! read into the scheduler's job (`request.rs`), the answers and stream chunks written from its
//! events (`response.rs`), and every failure as OpenAI's error JSON with its HTTP status
//! (`ApiError`). `gpt2 serve` is built on it; it adds no option of its own: each field is the
//! engine's option of that meaning (src/generate/options.rs), checked by the engine's table, with
//! OpenAI's narrower range where it has one (temperature up to 2). The browser's facade
//! (www/api/completions.js) takes the same fields and extensions (`top_k`, `min_p`,
//! `repetition_penalty`, `ignore_eos`, llama.cpp's server's and vLLM's), so code moves between
//! them unchanged.
//!
//! GPT-2 continues text and has no chat template, so there is no chat completions here:
//! `ApiError::no_chat` says so.

mod request;
mod response;

pub use request::{CompletionRequest, FIELDS};
pub use response::{finish_reason, Answer, Chunks, Head, Logprobs};

use crate::error::Error;
use serde_json::{json, Value};

/// An answer that is not a success: its HTTP status and OpenAI's error object,
/// `{"error": {"message", "type", "param", "code"}}`.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    pub status: u16,
    pub message: String,
    /// OpenAI's `type`: `invalid_request_error`, `not_found_error`, `server_error`, …
    pub kind: &'static str,
    /// The request field it is about, as the request spells it.
    pub param: Option<String>,
    pub code: Option<&'static str>,
}

impl ApiError {
    /// 400: a field missing, of the wrong type or out of range (`param` names it).
    pub fn invalid(param: Option<&str>, message: impl Into<String>) -> Self {
        ApiError {
            status: 400,
            message: message.into(),
            kind: "invalid_request_error",
            param: param.map(String::from),
            code: None,
        }
    }

    /// Any status with a type and code of its own.
    pub fn new(
        status: u16,
        kind: &'static str,
        code: &'static str,
        msg: impl Into<String>,
    ) -> Self {
        ApiError {
            status,
            message: msg.into(),
            kind,
            param: None,
            code: Some(code),
        }
    }

    /// 400 for `/v1/chat/completions`: there is no chat template to turn messages into a prompt.
    pub fn no_chat() -> Self {
        let msg = "GPT-2 has no chat template: it continues a text. Send the text to continue \
                   as `prompt` to /v1/completions";
        ApiError::new(400, "invalid_request_error", "chat_not_supported", msg)
    }

    /// OpenAI's error JSON.
    pub fn body(&self) -> Value {
        json!({ "error": {
            "message": self.message,
            "type": self.kind,
            "param": self.param,
            "code": self.code,
        }})
    }
}

/// The engine's error as OpenAI's: a parameter (400, named as the request spells it), a prompt
/// longer than the context (400, `context_length_exceeded`, both lengths in the sentence), a full
/// queue (429, `rate_limit_exceeded`), a bad token id or text (400), the rest the server's (500).
impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        let message = e.to_string();
        match e {
            Error::Param { name, .. } => {
                let param = request::field_of(name);
                ApiError {
                    message: message.replacen(name, param, 1),
                    ..ApiError::invalid(Some(param), "")
                }
            }
            Error::PromptTooLong { .. } => ApiError {
                param: Some("prompt".into()),
                ..ApiError::new(
                    400,
                    "invalid_request_error",
                    "context_length_exceeded",
                    message,
                )
            },
            Error::Busy(_) => {
                ApiError::new(429, "rate_limit_error", "rate_limit_exceeded", message)
            }
            Error::Tokenizer { .. } => ApiError {
                param: Some("prompt".into()),
                ..ApiError::invalid(None, message)
            },
            _ => ApiError::new(500, "server_error", e.code(), message),
        }
    }
}
