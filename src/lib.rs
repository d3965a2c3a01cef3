//! gpt2-web: GPT-2 in the browser, one token at a time.
//!
//! The generation loop (`generate::Generation`) tokenizes the prompt, runs the whole prompt through a
//! backend once (prefill), then repeats predict → sample → append with one token per forward
//! pass against a KV cache, streaming each token as it exists. Backends (`backend`) only turn
//! ids into logits: our own q8 and f32 kernels on the CPU (wasm SIMD, AVX2; f32 matrices are
//! held in candle-core tensors), wgpu on the GPU. Weights load from a Hugging Face GPT-2 folder
//! (`config.json`, `model.safetensors`, `tokenizer.json`) or the same bytes in memory.

pub mod backend;
#[cfg(not(target_arch = "wasm32"))]
pub mod bench;
pub mod budget;
pub mod config;
pub mod error;
#[doc(hidden)]
#[cfg(not(target_arch = "wasm32"))]
pub mod fuzzing;
pub mod generate;
pub mod model;
pub mod mtp;
pub mod openai;
pub mod platform;
pub mod sampling;
pub mod scheduler;
pub mod speculate;
pub mod tokenizer;
pub mod weights;

#[cfg(target_arch = "wasm32")]
mod wasm;

pub use backend::cpu::CpuDtype;
pub use backend::{Backend, BackendChoice};
pub use config::Config;
pub use error::{Error, Result};
pub use generate::{
    Beam, EarlyStopping, GenerateParams, Generation, GenerationResult, Kind, Metrics, Move,
    NextLogits, OptionSpec, Scope, StopReason, TokenEvent, OPTIONS,
};
pub use model::Model;
pub use sampling::{Candidate, SamplingParams};
pub use speculate::Draft;
pub use tokenizer::{Detokenizer, Tokenizer};
