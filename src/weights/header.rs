//! What every reader of a weights file shares, below all of them: a tensor as a reader hands it
//! out (`TensorRef`), a header's tensors as GPT-2 needs them (`Header`, `TensorInfo`), the
//! `transformer.` prefix, the check that no layer lies beyond the config, and the `Reader` each
//! format implements for the front (`stream::Stream`) to drive.

use super::ggml::GgmlType;
use crate::config::Config;
use crate::error::{Error, Result};

/// Element type of a tensor on disk: safetensors' F32, F16 and BF16, and GGUF's types.
pub type DiskDtype = GgmlType;

/// The prefix `save_pretrained` gives every name (openai-community/gpt2's files have none).
pub const PREFIX: &str = "transformer.";

/// One tensor of the checkpoint: a borrowed view of its bytes with a checked shape.
#[derive(Clone, Copy, Debug)]
pub struct TensorRef<'a> {
    pub dtype: DiskDtype,
    /// transformers' shape: (in, out) for a Conv1D weight, (1, n) for a vector.
    pub shape: [usize; 2],
    /// Whether `data` holds the matrix transposed, `shape[1]` rows of `shape[0]`: a GGUF file's
    /// Conv1D weights, stored (out, in) as torch's `Linear`.
    pub transposed: bool,
    pub data: &'a [u8],
}

impl TensorRef<'_> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape[0] * self.shape[1]
    }

    /// Whether the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` of `data` as stored (see `transposed`), as f32.
    #[inline]
    pub fn stored_value(&self, i: usize) -> f32 {
        self.dtype.value(self.data, i)
    }

    /// The values as f32 in transformers' layout (f16 and bf16 widened exactly, quantized types
    /// dequantized, a transposed matrix put back), or an error when the memory for them cannot
    /// be had.
    pub fn try_to_f32(&self) -> Result<Vec<f32>> {
        let what = format!("a {:?} tensor widened to f32", self.shape);
        let mut v = crate::platform::try_zeroed::<f32>(self.len(), &what)?;
        if self.transposed {
            // Stored row `c` (of `a` values, whole blocks) is column `c` of transformers' (a, b).
            let [a, b] = self.shape;
            let row_bytes = self
                .dtype
                .bytes_for(a as u64)
                .expect("checked by the header") as usize;
            let mut row = vec![0f32; a];
            for (c, bytes) in self.data.chunks_exact(row_bytes).enumerate() {
                self.dtype.dequantize(bytes, &mut row);
                for (r, &x) in row.iter().enumerate() {
                    v[r * b + c] = x;
                }
            }
        } else {
            self.dtype.dequantize(self.data, &mut v);
        }
        Ok(v)
    }
}

/// Where each tensor a reader completes goes, by its unprefixed name, in file order.
pub type Sink<'s> = dyn FnMut(&str, TensorRef) -> Result<()> + 's;

/// A tensor GPT-2 needs, as the header places it.
#[derive(Clone, Debug)]
pub struct TensorInfo {
    /// Without the checkpoint's `transformer.` prefix, e.g. `h.3.mlp.c_fc.weight`.
    pub name: String,
    /// As stored, e.g. `transformer.h.3.mlp.c_fc.weight`.
    pub stored: String,
    pub dtype: DiskDtype,
    /// transformers' shape.
    pub shape: [usize; 2],
    /// Stored transposed (`TensorRef::transposed`).
    pub transposed: bool,
    /// Byte range from the start of the file.
    pub start: u64,
    pub end: u64,
}

impl TensorInfo {
    /// The tensor, its bytes being `data`.
    pub fn view<'d>(&self, data: &'d [u8]) -> TensorRef<'d> {
        TensorRef {
            dtype: self.dtype,
            shape: self.shape,
            transposed: self.transposed,
            data,
        }
    }
}

/// A parsed and checked header: the tensors GPT-2 needs in file order, and the file's length.
#[derive(Clone, Debug)]
pub struct Header {
    pub tensors: Vec<TensorInfo>,
    /// Where the data ends: the file's length, as the header describes it.
    pub file_len: u64,
}

/// One weights file read chunk by chunk, whatever its format: what the front drives.
pub trait Reader {
    /// Takes the next bytes of the file, handing every tensor it completes to `sink`.
    fn push(&mut self, chunk: &[u8], sink: &mut Sink) -> Result<()>;
    /// Checks that every tensor came: a file that ended early is an error naming where.
    fn finish(&self) -> Result<()>;
    /// Bytes read so far.
    fn bytes(&self) -> u64;
    /// The file's length, once its header says (a zip archive does not).
    fn total(&self) -> Option<u64>;
    /// The tensor whose bytes come next, as far as the reader knows.
    fn current(&self) -> Option<&str>;
}

/// A tensor of a layer beyond `n_layer` means the config does not match the weights of `file`.
pub fn check_layers<'a>(
    file: &str,
    names: impl Iterator<Item = &'a str>,
    prefix: &str,
    config: &Config,
) -> Result<()> {
    for name in names {
        let rest = name.strip_prefix(prefix).unwrap_or(name);
        if let Some(i) = rest.strip_prefix("h.").and_then(|r| r.split('.').next()) {
            if i.parse::<usize>().is_ok_and(|i| i >= config.n_layer) {
                return Err(Error::weights(
                    file,
                    format!(
                        "tensor \"{name}\" belongs to a layer beyond n_layer = {} in config.json; \
                         the config does not match the weights",
                        config.n_layer
                    ),
                ));
            }
        }
    }
    Ok(())
}
