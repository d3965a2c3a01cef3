//! GGUF files (llama.cpp's format, https://github.com/ggml-org/ggml/blob/master/docs/gguf.md) of
//! architecture `gpt2`: the header (metadata, then the tensors' names, shapes, types and offsets)
//! read before any tensor, the hyper-parameters and the tokenizer taken from its metadata (a GGUF
//! file alone is a model), and its tensors mapped onto transformers' names for `stream::Stream`.
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

use super::ggml::GgmlType;
use super::stream::{Header, TensorInfo};
use super::table::{self, Role};
use super::DiskDtype;
use crate::config::Config;
use crate::error::{Error, Result};
use std::collections::BTreeMap;

mod reader;
pub use reader::Value;
use reader::{Fail, Reader, R};

/// The most header bytes accepted (safetensors' limit too): GPT-2's vocabulary and merges take ~2 MB.
pub const MAX_HEADER: usize = 100_000_000;
/// The most tensors or metadata entries accepted.
const MAX_ENTRIES: u64 = 1 << 20;
/// The most array elements in all the metadata together (GPT-2 has ~150,000: its tokens, their
/// types and its merges; the largest vocabularies have ~256,000 tokens): each takes more memory
/// parsed than its one byte in the file, so a crafted header must not multiply it unchecked.
pub(super) const MAX_ELEMENTS: u64 = 1 << 22;

pub(super) fn invalid(why: impl std::fmt::Display) -> Error {
    Error::Weights(format!(
        "not a valid GGUF file (truncated or corrupt?): {why}"
    ))
}

/// A tensor as the header describes it.
#[derive(Clone, Debug)]
pub struct RawTensor {
    pub name: String,
    /// ggml's `ne`: the fastest dimension first.
    pub ne: Vec<u64>,
    pub dtype: std::result::Result<GgmlType, String>,
    /// Byte range from the start of the file.
    pub start: u64,
    pub end: u64,
}

/// A parsed header.
#[derive(Clone, Debug)]
pub struct Gguf {
    pub version: u32,
    pub metadata: BTreeMap<String, Value>,
    pub tensors: Vec<RawTensor>,
    /// Where the tensor data starts.
    pub data_start: u64,
    /// The file's length as the header describes it (the end of its last tensor).
    pub file_len: u64,
}

/// What `Gguf::parse` found: the header, or how many bytes it needs at least to go on.
pub enum Parsed {
    Header(Box<Gguf>),
    Need(usize),
}

/// Whether `bytes` start like a GGUF file.
pub fn is_gguf(bytes: &[u8]) -> bool {
    bytes.starts_with(b"GGUF")
}

/// Whether the file at `path` starts like a GGUF file (false when it cannot be read).
#[cfg(not(target_arch = "wasm32"))]
pub fn is_gguf_file(path: impl AsRef<std::path::Path>) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|_| is_gguf(&magic))
}

impl Gguf {
    /// The header of a file that starts with `bytes`, or how many bytes it needs to be complete.
    pub fn parse(bytes: &[u8]) -> Result<Parsed> {
        let mut r = Reader {
            bytes,
            at: 0,
            elements: 0,
        };
        match Self::read(&mut r) {
            Ok(g) => Ok(Parsed::Header(Box::new(g))),
            Err(Fail::Short(n)) => Ok(Parsed::Need(n)),
            Err(Fail::Bad(e)) => Err(e),
        }
    }

    /// `parse` of a whole file: running out of bytes is an error.
    pub fn parse_complete(bytes: &[u8]) -> Result<Gguf> {
        match Self::parse(bytes)? {
            Parsed::Header(g) => Ok(*g),
            Parsed::Need(n) => Err(invalid(format!(
                "it ended after {} bytes, inside its header (which needs {n} at least)",
                bytes.len()
            ))),
        }
    }

    fn read(r: &mut Reader) -> R<Gguf> {
        if r.take(4)? != b"GGUF" {
            return Err(Fail::Bad(invalid("it does not start with \"GGUF\"")));
        }
        let version = r.u32()?;
        if !(2..=3).contains(&version) {
            return Err(Fail::Bad(Error::Weights(format!(
                "GGUF version {version} is not supported (versions 2 and 3 are)"
            ))));
        }
        let (n_tensors, n_kv) = (r.u64()?, r.u64()?);
        for (what, n) in [("tensors", n_tensors), ("metadata entries", n_kv)] {
            if n > MAX_ENTRIES {
                return Err(Fail::Bad(invalid(format!(
                    "{n} {what} (at most {MAX_ENTRIES})"
                ))));
            }
        }
        let mut metadata = BTreeMap::new();
        for _ in 0..n_kv {
            let key = r.string()?;
            let ty = r.u32()?;
            let v = r.value(ty, 0)?;
            metadata.insert(key, v);
        }
        let mut tensors = Vec::new();
        for _ in 0..n_tensors {
            let name = r.string()?;
            let n_dims = r.u32()?;
            if !(1..=4).contains(&n_dims) {
                return Err(Fail::Bad(invalid(format!(
                    "tensor \"{name}\" has {n_dims} dimensions (1 to 4 are possible)"
                ))));
            }
            let ne = (0..n_dims).map(|_| r.u64()).collect::<R<Vec<u64>>>()?;
            let dtype = GgmlType::from_id(r.u32()?);
            let offset = r.u64()?;
            tensors.push((name, ne, dtype, offset));
        }
        let alignment = match metadata.get("general.alignment") {
            None => 32,
            Some(Value::Int(a)) if *a > 0 && *a <= 1 << 20 && (*a as u64).is_power_of_two() => {
                *a as u64
            }
            Some(other) => {
                return Err(Fail::Bad(invalid(format!(
                    "general.alignment is {other:?} (a power of two is needed)"
                ))))
            }
        };
        let data_start = (r.at as u64).div_ceil(alignment) * alignment;
        let mut out = Vec::new();
        let mut file_len = data_start;
        for (name, ne, dtype, offset) in tensors {
            let n = ne
                .iter()
                .try_fold(1u64, |a, &d| a.checked_mul(d))
                .ok_or_else(|| {
                    Fail::Bad(invalid(format!(
                        "tensor \"{name}\": shape {ne:?} overflows"
                    )))
                })?;
            let size = match &dtype {
                Ok(t) => {
                    if ne[0] % t.block_len() as u64 != 0 {
                        return Err(Fail::Bad(invalid(format!(
                            "tensor \"{name}\" of type {} has rows of {} values, not whole blocks of {}",
                            t.name(),
                            ne[0],
                            t.block_len()
                        ))));
                    }
                    t.bytes_for(n).ok_or_else(|| {
                        Fail::Bad(invalid(format!(
                            "tensor \"{name}\": shape {ne:?} overflows"
                        )))
                    })?
                }
                Err(_) => 0, // only an error if GPT-2 needs it
            };
            let start = data_start
                .checked_add(offset)
                .ok_or_else(|| Fail::Bad(invalid(format!("tensor \"{name}\": offset {offset}"))))?;
            let end = start
                .checked_add(size)
                .ok_or_else(|| Fail::Bad(invalid(format!("tensor \"{name}\": size {size}"))))?;
            file_len = file_len.max(end);
            out.push(RawTensor {
                name,
                ne,
                dtype,
                start,
                end,
            });
        }
        Ok(Gguf {
            version,
            metadata,
            tensors: out,
            data_start,
            file_len,
        })
    }

    fn get(&self, key: &str) -> Result<&Value> {
        self.metadata.get(key).ok_or_else(|| {
            Error::Weights(format!("the GGUF file has no \"{key}\" in its metadata"))
        })
    }

    fn int(&self, key: &str) -> Result<i128> {
        match self.get(key)? {
            Value::Int(v) => Ok(*v),
            other => Err(Error::Weights(format!(
                "the GGUF metadata \"{key}\" is {other:?}, not a whole number"
            ))),
        }
    }

    fn string(&self, key: &str) -> Result<&str> {
        match self.get(key)? {
            Value::Str(s) => Ok(s),
            other => Err(Error::Weights(format!(
                "the GGUF metadata \"{key}\" is {other:?}, not a string"
            ))),
        }
    }

    fn tensor(&self, name: &str) -> Option<&RawTensor> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// transformers' `config.json` for the model, from the `gpt2.*` metadata and the embedding's
    /// shape (checked by `Config::from_json` as any config is).
    pub fn config_json(&self) -> Result<Vec<u8>> {
        let arch = self.string("general.architecture")?;
        if arch != "gpt2" {
            return Err(Error::Weights(format!(
                "the GGUF file's architecture is \"{arch}\"; only GPT-2 (\"gpt2\") is supported"
            )));
        }
        let vocab = self
            .tensor(table::WTE_GGUF)
            .ok_or_else(|| Error::Weights(format!("missing tensor \"{}\"", table::WTE_GGUF)))?;
        let Some(&vocab_size) = vocab.ne.get(1) else {
            return Err(Error::Weights(format!(
                "tensor \"{}\" has shape {:?}, expected [n_embd, vocab]",
                table::WTE_GGUF,
                vocab.ne
            )));
        };
        let eps = match self.get("gpt2.attention.layer_norm_epsilon")? {
            Value::Float(f) => *f,
            other => {
                return Err(Error::Weights(format!(
                    "gpt2.attention.layer_norm_epsilon is {other:?}, not a number"
                )))
            }
        };
        let eos = match self.metadata.get("tokenizer.ggml.eos_token_id") {
            Some(Value::Int(v)) => Some(*v),
            _ => None,
        };
        let mut json = serde_json::json!({
            "model_type": "gpt2",
            "n_layer": self.int("gpt2.block_count")?,
            "n_head": self.int("gpt2.attention.head_count")?,
            "n_embd": self.int("gpt2.embedding_length")?,
            "n_positions": self.int("gpt2.context_length")?,
            "n_inner": self.int("gpt2.feed_forward_length")?,
            "vocab_size": vocab_size,
            "layer_norm_epsilon": eps,
        });
        if let Some(eos) = eos {
            json["eos_token_id"] = serde_json::json!(eos);
        }
        Ok(serde_json::to_vec(&json).expect("JSON"))
    }

    /// The tokenizer's lists from `tokenizer.ggml.*` (GPT-2's byte-level BPE): token strings by
    /// id, merges, added tokens (id, text, special).
    #[allow(clippy::type_complexity)]
    pub(crate) fn tokenizer_lists(&self) -> Result<(Vec<&str>, Vec<&str>, Vec<(u32, &str, bool)>)> {
        let model = self.string("tokenizer.ggml.model")?;
        if model != "gpt2" {
            return Err(Error::Tokenizer(format!(
                "the GGUF file's tokenizer is \"{model}\"; only GPT-2's byte-level BPE (\"gpt2\") is supported"
            )));
        }
        let strings = |key: &str| -> Result<Vec<&str>> {
            match self.get(key)? {
                Value::Array(items) => items
                    .iter()
                    .map(|v| match v {
                        Value::Str(s) => Ok(s.as_str()),
                        _ => Err(Error::Tokenizer(format!(
                            "{key} holds a value that is not a string"
                        ))),
                    })
                    .collect(),
                _ => Err(Error::Tokenizer(format!("{key} is not an array"))),
            }
        };
        let tokens = strings("tokenizer.ggml.tokens")?;
        let merges = strings("tokenizer.ggml.merges")?;
        let types: Vec<i128> = match self.metadata.get("tokenizer.ggml.token_type") {
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| if let Value::Int(t) = v { *t } else { 1 })
                .collect(),
            _ => Vec::new(),
        };
        // llama.cpp's token types: 3 control (special), 4 user-defined; both are added tokens.
        let added = (tokens.iter().enumerate())
            .filter_map(|(id, t)| match types.get(id) {
                Some(3) => Some((id as u32, *t, true)),
                Some(4) => Some((id as u32, *t, false)),
                _ => None,
            })
            .collect::<Vec<_>>();
        Ok((tokens, merges, added))
    }

    /// The tokenizer, built from the lists directly (no JSON).
    pub fn tokenizer(&self) -> Result<crate::tokenizer::Tokenizer> {
        let (tokens, merges, added) = self.tokenizer_lists()?;
        crate::tokenizer::Tokenizer::from_lists(&tokens, &merges, &added)
    }

    /// The tokenizer as a `tokenizer.json` (what `tokenizer` builds, written out).
    pub fn tokenizer_json(&self) -> Result<Vec<u8>> {
        let (tokens, merges, added) = self.tokenizer_lists()?;
        Ok(crate::tokenizer::byte_level_json(&tokens, &merges, &added))
    }

    /// The tensors GPT-2 needs, under transformers' names, checked against `config`.
    pub fn header(&self, config: &Config) -> Result<Header> {
        let head = self.tied_head();
        let mut tensors = Vec::new();
        for spec in table::tensors(config) {
            let (name, shape) = (spec.name, spec.shape);
            let stored = match spec.role {
                Role::Embedding => head.to_string(),
                _ => spec.gguf,
            };
            let t = self
                .tensor(&stored)
                .ok_or_else(|| Error::Weights(format!("missing tensor \"{stored}\"")))?;
            let dtype: DiskDtype = t
                .dtype
                .clone()
                .map_err(|e| Error::Weights(format!("tensor \"{stored}\" has type {e}")))?;
            let conv1d = spec.role == Role::Matrix;
            let want: Vec<u64> = if conv1d {
                vec![shape[0] as u64, shape[1] as u64]
            } else if shape[0] == 1 {
                vec![shape[1] as u64]
            } else {
                vec![shape[1] as u64, shape[0] as u64]
            };
            let ne =
                t.ne.iter()
                    .rev()
                    .skip_while(|&&d| d == 1)
                    .collect::<Vec<_>>();
            let ne = ne.into_iter().rev().copied().collect::<Vec<u64>>();
            if ne != want {
                return Err(Error::Weights(format!(
                    "tensor \"{stored}\" has shape {:?} (ggml's ne), expected {want:?} from the \
                     metadata",
                    t.ne
                )));
            }
            tensors.push(TensorInfo {
                name,
                stored,
                dtype,
                shape,
                transposed: conv1d,
                start: t.start,
                end: t.end,
            });
        }
        for t in &self.tensors {
            if let Some(i) = t
                .name
                .strip_prefix("blk.")
                .and_then(|r| r.split('.').next())
            {
                if i.parse::<usize>().is_ok_and(|i| i >= config.n_layer) {
                    return Err(Error::Weights(format!(
                        "tensor \"{}\" belongs to a layer beyond gpt2.block_count = {}",
                        t.name, config.n_layer
                    )));
                }
            }
        }
        tensors.sort_by_key(|t| t.start);
        if let Some(w) = tensors.windows(2).find(|w| w[1].start < w[0].end) {
            return Err(invalid(format!(
                "tensors \"{}\" and \"{}\" overlap",
                w[0].stored, w[1].stored
            )));
        }
        Ok(Header {
            tensors,
            file_len: self.file_len,
        })
    }

    /// The tensor read as `wte` (see the module's note): `output.weight` where it is there with
    /// a finer type than `token_embd.weight`.
    fn tied_head(&self) -> &'static str {
        let bits = |name: &str| {
            let t = self.tensor(name)?;
            let ty = t.dtype.as_ref().ok()?;
            Some(ty.bits_per_value())
        };
        match (bits(table::WTE_GGUF), bits(table::HEAD_GGUF)) {
            (Some(e), Some(o)) if o > e => table::HEAD_GGUF,
            (None, Some(_)) => table::HEAD_GGUF, // the embedding's type is unreadable
            _ => table::WTE_GGUF,
        }
    }
}
