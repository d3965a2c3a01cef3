//! GGUF files (llama.cpp's format, https://github.com/ggml-org/ggml/blob/master/docs/gguf.md) of
//! architecture `gpt2`: the header (metadata, then the tensors' names, shapes, types and offsets)
//! read before any tensor, the hyper-parameters and the tokenizer taken from its metadata (a GGUF
//! file alone is a model), and its tensors mapped onto transformers' names and read as a stream
//! (`GgufReader`).
//!
//! The layout: `GGUF`, u32 version (2 or 3), u64 tensor count, u64 metadata count; each metadata
//! entry a string key, a u32 value type and the value (strings are a u64 length and UTF-8 bytes,
//! arrays a u32 element type, a u64 count and the elements); each tensor a name, u32 dimension
//! count, u64 dimensions (`ne`, the fastest first), u32 ggml type and u64 offset; padding to
//! `general.alignment` (32 unless said); the data, the offsets relative to its start.
//!
//! llama.cpp's GPT-2 (`convert_hf_to_gguf.py`) stores the Conv1D weights transposed, as torch's
//! `Linear` (out, in): `ne` is transformers' (in, out) and the rows of the data are its columns
//! (`TensorRef::transposed`). It also writes `output.weight`, a copy of `token_embd.weight` (GPT-2
//! ties its head to its embedding), which a quantizer may store in another type: the finer of the
//! two is read as the one matrix both uses share, the other skipped.
//!
//! The parts, each file using only those listed after it: `streaming` (the reader), `model` (what
//! the header says of GPT-2), `parse` (the header itself), `reader` (its fields, one at a time).

mod model;
mod parse;
mod reader;
mod streaming;

#[cfg(not(target_arch = "wasm32"))]
pub use parse::is_gguf_file;
pub use parse::{is_gguf, Gguf, Parsed, RawTensor};
pub use reader::{Value, MAX_HEADER};
pub use streaming::GgufReader;
