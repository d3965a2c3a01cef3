//! GPT-2 weights from a `model.safetensors` (or its shards), a GGUF file (llama.cpp's names,
//! mapped to these) or a `pytorch_model.bin`, resolved by Hugging Face name and checked against
//! the config before any backend sees them.
//!
//! Names follow transformers' `modeling_gpt2.py` (the list of them, with shapes and roles, is
//! `table`), with or without the `transformer.` prefix (openai-community/gpt2 has none,
//! `save_pretrained` adds it). Linear layers are transformers'
//! `Conv1D`, stored (in, out), so `y = x @ W + b` needs no transpose. `lm_head` is tied to `wte`;
//! the `attn.bias` / `attn.masked_bias` causal-mask buffers are ignored.
//!
//! The files, each using only those below it (`tests/layering.rs` checks there is no circle):
//! `files` (one file, or the shards an index names, one after another) → `stream` (the front:
//! the format told once from a file's first bytes) → one reader per format, none using another:
//! `safetensors`, `gguf`, `torch`, and `shards` (the index) → `body` (the tensors after a
//! header, by byte range) → `header` (what the readers share: `TensorRef`, `Header`, the
//! `Reader` trait, `check_layers`) → `ggml` (the element types), `table` (GPT-2's tensors).
//! Every error names the file it is about, as the caller named it.

use crate::config::Config;
use crate::error::Result;

mod body;
pub mod files;
pub mod ggml;
pub mod gguf;
pub mod header;
pub mod safetensors;
pub mod shards;
pub mod stream;
pub mod table;
pub mod torch;

pub use header::{DiskDtype, TensorRef};

/// All GPT-2 tensors of a checkpoint held in memory, in the table's order (`table::tensors`),
/// checked against the config.
#[derive(Debug)]
pub struct Gpt2Weights<'a> {
    tensors: Vec<(String, TensorRef<'a>)>,
}

impl<'a> Gpt2Weights<'a> {
    /// Parses the bytes of weights file `file` (any format the stream reads; its errors name
    /// `file`) and checks every tensor GPT-2 needs against `config`.
    pub fn load(file: &str, bytes: &'a [u8], config: &Config) -> Result<Self> {
        // One chunk holds every tensor, so the stream hands out views of `bytes`: keep where.
        let base = bytes.as_ptr() as usize;
        let mut at = std::collections::HashMap::new();
        let mut stream = stream::Stream::new(file, config);
        stream.push(bytes, &mut |name, t| {
            let start = t.data.as_ptr() as usize - base;
            at.insert(
                name.to_string(),
                (t.dtype, t.shape, t.transposed, start, t.data.len()),
            );
            Ok(())
        })?;
        stream.finish()?;
        let tensors = (table::tensors(config).into_iter())
            .map(|spec| {
                let (dtype, shape, transposed, start, len) =
                    at.remove(&spec.name).expect("the stream checked it");
                let t = TensorRef {
                    dtype,
                    shape,
                    transposed,
                    data: &bytes[start..start + len],
                };
                (spec.name, t)
            })
            .collect();
        Ok(Gpt2Weights { tensors })
    }

    /// Every tensor with its unprefixed name, as `stream::Stream` hands them out.
    pub fn tensors(&self) -> Vec<(String, TensorRef<'a>)> {
        self.tensors.clone()
    }
}
