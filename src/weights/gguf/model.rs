//! What a GGUF header says of a GPT-2 model: its `config.json` (from the `gpt2.*` metadata),
//! its tokenizer (from `tokenizer.ggml.*`), and its tensors under transformers' names, checked
//! against the config (`Gguf::header`, the tied head read from the finer of `token_embd` and
//! `output`: see `gguf`'s note).

use super::parse::{Gguf, RawTensor};
use super::reader::{invalid, Value};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::weights::header::{DiskDtype, Header, TensorInfo};
use crate::weights::table::{self, Role};

impl Gguf {
    /// transformers' `config.json` for the model, from the `gpt2.*` metadata and the embedding's
    /// shape (checked by `Config::from_json` as any config is).
    pub fn config_json(&self) -> Result<Vec<u8>> {
        let arch = self.string("general.architecture")?;
        if arch != "gpt2" {
            return Err(self.error(format!(
                "the GGUF file's architecture is \"{arch}\"; only GPT-2 (\"gpt2\") is supported"
            )));
        }
        let vocab = self
            .tensor(table::WTE_GGUF)
            .ok_or_else(|| self.error(format!("missing tensor \"{}\"", table::WTE_GGUF)))?;
        let Some(&vocab_size) = vocab.ne.get(1) else {
            return Err(self.error(format!(
                "tensor \"{}\" has shape {:?}, expected [n_embd, vocab]",
                table::WTE_GGUF,
                vocab.ne
            )));
        };
        let eps = match self.get("gpt2.attention.layer_norm_epsilon")? {
            Value::Float(f) => *f,
            other => {
                return Err(self.error(format!(
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
            return Err(self.tokenizer_error(format!(
                "the GGUF file's tokenizer is \"{model}\"; only GPT-2's byte-level BPE (\"gpt2\") is supported"
            )));
        }
        let strings = |key: &str| -> Result<Vec<&str>> {
            match self.get(key)? {
                Value::Strs(s) => Ok(s.iter().collect()),
                Value::Array(items) => items
                    .iter()
                    .map(|v| match v {
                        Value::Str(s) => Ok(s.as_str()),
                        _ => Err(self
                            .tokenizer_error(format!("{key} holds a value that is not a string"))),
                    })
                    .collect(),
                _ => Err(self.tokenizer_error(format!("{key} is not an array"))),
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

    /// An error of the tokenizer the file holds.
    fn tokenizer_error(&self, msg: String) -> Error {
        Error::Tokenizer {
            file: self.file.clone(),
            msg,
        }
    }

    /// The tokenizer, built from the lists directly (no JSON).
    pub fn tokenizer(&self) -> Result<crate::tokenizer::Tokenizer> {
        let (tokens, merges, added) = self.tokenizer_lists()?;
        crate::tokenizer::Tokenizer::from_lists(&self.file, &tokens, &merges, &added)
    }

    /// The tokenizer as a `tokenizer.json` (what `tokenizer` builds, written out).
    pub fn tokenizer_json(&self) -> Result<Vec<u8>> {
        let (tokens, merges, added) = self.tokenizer_lists()?;
        Ok(crate::tokenizer::byte_level_json(&tokens, &merges, &added))
    }

    /// The tensors GPT-2 needs, under transformers' names, checked against `config`.
    pub fn header(&self, config: &Config) -> Result<Header> {
        let head = self.tied_head();
        let mut tensors = (table::tensors(config).into_iter())
            .map(|spec| self.gpt2_tensor(spec, head))
            .collect::<Result<Vec<_>>>()?;
        self.check_layers(config)?;
        // Multi-token prediction heads (crate::mtp) ride along under their own names.
        for t in self.tensors.iter().filter(|t| table::is_mtp(&t.name)) {
            tensors.push(self.mtp_tensor(t)?);
        }
        tensors.sort_by_key(|t| t.start);
        if let Some(w) = tensors.windows(2).find(|w| w[1].start < w[0].end) {
            return Err(invalid(
                &self.file,
                format!(
                    "tensors \"{}\" and \"{}\" overlap",
                    w[0].stored, w[1].stored
                ),
            ));
        }
        Ok(Header {
            tensors,
            file_len: self.file_len,
        })
    }

    /// The stored tensor of one of GPT-2's (`spec`; the embedding is `head`, the tied head),
    /// its type known and its shape the metadata's.
    fn gpt2_tensor(&self, spec: table::Spec, head: &str) -> Result<TensorInfo> {
        let (name, shape) = (spec.name, spec.shape);
        let stored = match spec.role {
            Role::Embedding => head.to_string(),
            _ => spec.gguf,
        };
        let t = self
            .tensor(&stored)
            .ok_or_else(|| self.error(format!("missing tensor \"{stored}\"")))?;
        let dtype: DiskDtype = t
            .dtype
            .clone()
            .map_err(|e| self.error(format!("tensor \"{stored}\" has type {e}")))?;
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
            return Err(self.error(format!(
                "tensor \"{stored}\" has shape {:?} (ggml's ne), expected {want:?} from the \
                 metadata",
                t.ne
            )));
        }
        Ok(TensorInfo {
            name,
            stored,
            dtype,
            shape,
            transposed: conv1d,
            start: t.start,
            end: t.end,
        })
    }

    /// No tensor of a layer beyond the metadata's `block_count`.
    fn check_layers(&self, config: &Config) -> Result<()> {
        for t in &self.tensors {
            if let Some(i) = t
                .name
                .strip_prefix("blk.")
                .and_then(|r| r.split('.').next())
            {
                if i.parse::<usize>().is_ok_and(|i| i >= config.n_layer) {
                    return Err(self.error(format!(
                        "tensor \"{}\" belongs to a layer beyond gpt2.block_count = {}",
                        t.name, config.n_layer
                    )));
                }
            }
        }
        Ok(())
    }

    /// A multi-token prediction head's tensor `t`, as stored.
    fn mtp_tensor(&self, t: &RawTensor) -> Result<TensorInfo> {
        let dtype: DiskDtype = (t.dtype.clone())
            .map_err(|e| self.error(format!("tensor \"{}\" has type {e}", t.name)))?;
        let shape = match t.ne[..] {
            [n] | [n, 1] => [1, n as usize],
            [cols, rows] => [rows as usize, cols as usize],
            _ => return Err(self.error(format!("tensor \"{}\" has shape {:?}", t.name, t.ne))),
        };
        Ok(TensorInfo {
            name: t.name.clone(),
            stored: t.name.clone(),
            dtype,
            shape,
            transposed: false,
            start: t.start,
            end: t.end,
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
