//! One error type for the whole crate. Every variant names what went wrong and where (the file,
//! the tensor, the parameter), so the page can show it to a person as a sentence.

/// Everything that can go wrong while loading a model or generating text.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read (native CLI only; the browser passes bytes).
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// `config.json` is not valid JSON, misses a field, or holds an impossible value.
    #[error("config.json: {0}")]
    Config(String),
    /// A weights file is truncated, corrupt, or a tensor is missing or has the wrong shape.
    /// `file` is the name it was loaded as (`model.safetensors`, `gpt2.Q8_0.gguf`,
    /// `pytorch_model.bin`, a shard such as `model-00002-of-00003.safetensors`, the shards'
    /// `model.safetensors.index.json`), or the folder that holds none.
    #[error("{file}: {msg}")]
    Weights { file: String, msg: String },
    /// The tokenizer could not be built, or encoding/decoding failed. `file` is
    /// `tokenizer.json`, or the GGUF file whose lists it was built from.
    #[error("{file}: {msg}")]
    Tokenizer { file: String, msg: String },
    /// A generation parameter is out of range.
    #[error("invalid {name}: {msg}")]
    Param { name: &'static str, msg: String },
    /// The prompt does not fit the model's context window.
    #[error("the prompt is {tokens} tokens long but the model's context holds {n_ctx} tokens; shorten the prompt")]
    PromptTooLong { tokens: usize, n_ctx: usize },
    /// Memory that could not be had: an allocation the platform refused (a tensor arriving, a
    /// matrix converted, a working buffer).
    #[error("out of memory: {0}")]
    Memory(String),
    /// The memory budget refuses a model before anything large is allocated: it would not fit
    /// what this build (or the platform) can address.
    #[error("{0}")]
    Budget(String),
    /// The engine used out of turn: a step while another runs, a step with no generation, a
    /// KV cache slot that was never made, the rows of a verification pass that did not run, a
    /// fall-back with nothing to rebuild from, a backend built from tensors that are not GPT-2's.
    #[error("{0}")]
    State(String),
    /// A model stopped working inside a step (a trap in WebAssembly); load it again.
    #[error("{0}")]
    Crash(String),
    /// Too many requests: the queue of a model is full (`scheduler::MAX_QUEUE`); try again later.
    #[error("{0}")]
    Busy(String),
    /// A backend failed for a reason of its own (not memory, the budget or the caller's turn).
    #[error("{0}")]
    Backend(String),
    /// The GPU device was lost or a GPU operation failed.
    #[error("WebGPU: {0}")]
    Gpu(String),
    /// An error inside candle (shape bugs would land here; they are reported, never panicked).
    #[error("CPU backend: {0}")]
    Candle(#[from] candle_core::Error),
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;

/// Every `Error::code`, for the JS API's list of them (gpt2.d.ts `Gpt2ErrorCode`, generated).
pub const CODES: [&str; 14] = [
    "io",
    "config",
    "weights",
    "tokenizer",
    "param",
    "prompt_too_long",
    "memory",
    "budget",
    "state",
    "busy",
    "crash",
    "backend",
    "gpu",
    "cpu",
];

impl Error {
    /// The kind of error as a short stable name (`gpu`, `param`, …): what the worker decides by
    /// (a GPU failure falls back to the CPU) and what the JS API's errors carry as `code`, so no
    /// caller has to match the sentence.
    pub fn code(&self) -> &'static str {
        // Each name here is in CODES too.
        match self {
            Error::Io { .. } => "io",
            Error::Config(_) => "config",
            Error::Weights { .. } => "weights",
            Error::Tokenizer { .. } => "tokenizer",
            Error::Param { .. } => "param",
            Error::PromptTooLong { .. } => "prompt_too_long",
            Error::Memory(_) => "memory",
            Error::Budget(_) => "budget",
            Error::State(_) => "state",
            Error::Busy(_) => "busy",
            Error::Crash(_) => "crash",
            Error::Backend(_) => "backend",
            Error::Gpu(_) => "gpu",
            Error::Candle(_) => "cpu",
        }
    }

    /// The same error again, for each of the requests one failure ends (a batch's forward
    /// pass): the same kind and sentence (an I/O error keeps its kind and message).
    pub fn again(&self) -> Self {
        match self {
            Error::Io { path, source } => Error::Io {
                path: path.clone(),
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
            Error::Config(m) => Error::Config(m.clone()),
            Error::Weights { file, msg } => Error::Weights {
                file: file.clone(),
                msg: msg.clone(),
            },
            Error::Tokenizer { file, msg } => Error::Tokenizer {
                file: file.clone(),
                msg: msg.clone(),
            },
            Error::Param { name, msg } => Error::Param {
                name,
                msg: msg.clone(),
            },
            Error::PromptTooLong { tokens, n_ctx } => Error::PromptTooLong {
                tokens: *tokens,
                n_ctx: *n_ctx,
            },
            Error::Memory(m) => Error::Memory(m.clone()),
            Error::Budget(m) => Error::Budget(m.clone()),
            Error::State(m) => Error::State(m.clone()),
            Error::Busy(m) => Error::Busy(m.clone()),
            Error::Crash(m) => Error::Crash(m.clone()),
            Error::Backend(m) => Error::Backend(m.clone()),
            Error::Gpu(m) => Error::Gpu(m.clone()),
            Error::Candle(e) => Error::Candle(candle_core::Error::Msg(e.to_string())),
        }
    }

    /// A weights file's error: `file` is the name it was loaded as.
    pub(crate) fn weights(file: &str, msg: impl std::fmt::Display) -> Self {
        Error::Weights {
            file: file.to_string(),
            msg: msg.to_string(),
        }
    }

    /// A `tokenizer.json` error.
    pub(crate) fn tokenizer(msg: impl std::fmt::Display) -> Self {
        Error::Tokenizer {
            file: "tokenizer.json".into(),
            msg: msg.to_string(),
        }
    }

    pub(crate) fn param(name: &'static str, msg: impl Into<String>) -> Self {
        Error::Param {
            name,
            msg: msg.into(),
        }
    }
}
