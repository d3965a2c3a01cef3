//! GPT-2 weights from a `model.safetensors` (or its shards: `shards`), a GGUF file (`gguf`:
//! llama.cpp's names, mapped to these) or a `pytorch_model.bin` (`torch`), resolved by Hugging Face name and checked against the config before any backend sees
//! them.
//!
//! Names follow transformers' `modeling_gpt2.py` (the list of them, with shapes and roles, is
//! `table`), with or without the `transformer.` prefix (openai-community/gpt2 has none,
//! `save_pretrained` adds it). Linear layers are transformers'
//! `Conv1D`, stored (in, out), so `y = x @ W + b` needs no transpose. `lm_head` is tied to `wte`;
//! the `attn.bias` / `attn.masked_bias` causal-mask buffers are ignored.

use crate::config::Config;
use crate::error::Result;

pub mod ggml;
pub mod gguf;
pub mod shards;
pub mod stream;
pub mod table;
pub mod torch;

/// Element type of a tensor on disk: safetensors' F32, F16 and BF16, and GGUF's types.
pub type DiskDtype = ggml::GgmlType;

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

/// All GPT-2 tensors of a checkpoint held in memory, in the table's order (`table::tensors`),
/// checked against the config.
#[derive(Debug)]
pub struct Gpt2Weights<'a> {
    tensors: Vec<(String, TensorRef<'a>)>,
}

impl<'a> Gpt2Weights<'a> {
    /// Parses a weights file's bytes (any format the stream reads) and checks every tensor GPT-2
    /// needs against `config`.
    pub fn load(bytes: &'a [u8], config: &Config) -> Result<Self> {
        // One chunk holds every tensor, so the stream hands out views of `bytes`: keep where.
        let base = bytes.as_ptr() as usize;
        let mut at = std::collections::HashMap::new();
        let mut stream = stream::Stream::new(config);
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
