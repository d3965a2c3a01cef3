//! GPT-2 weights from a `model.safetensors` (or its shards: `shards`), a GGUF file (`gguf`:
//! llama.cpp's names, mapped to these) or a `pytorch_model.bin` (`torch`), resolved by Hugging Face name and checked against the config before any backend sees
//! them.
//!
//! Names follow transformers' `modeling_gpt2.py`, with or without the `transformer.` prefix
//! (openai-community/gpt2 has none, `save_pretrained` adds it). Linear layers are transformers'
//! `Conv1D`, stored (in, out), so `y = x @ W + b` needs no transpose. `lm_head` is tied to `wte`;
//! the `attn.bias` / `attn.masked_bias` causal-mask buffers are ignored.

use crate::config::Config;
use crate::error::Result;

pub mod ggml;
pub mod gguf;
pub mod shards;
pub mod stream;
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

/// LayerNorm parameters: weight and bias, each (C,).
#[derive(Clone, Copy, Debug)]
pub struct LayerNorm<'a> {
    pub weight: TensorRef<'a>,
    pub bias: TensorRef<'a>,
}

/// A Conv1D layer: weight (in, out), bias (out,).
#[derive(Clone, Copy, Debug)]
pub struct Linear<'a> {
    pub weight: TensorRef<'a>,
    pub bias: TensorRef<'a>,
}

/// One transformer block `h.{i}`.
#[derive(Clone, Copy, Debug)]
pub struct Block<'a> {
    pub ln_1: LayerNorm<'a>,
    /// (C, 3C): q, k, v side by side.
    pub c_attn: Linear<'a>,
    /// (C, C)
    pub attn_c_proj: Linear<'a>,
    pub ln_2: LayerNorm<'a>,
    /// (C, H)
    pub c_fc: Linear<'a>,
    /// (H, C)
    pub mlp_c_proj: Linear<'a>,
}

/// All GPT-2 tensors, named as in the checkpoint.
#[derive(Debug)]
pub struct Gpt2Weights<'a> {
    /// (V, C) token embedding, also the output head.
    pub wte: TensorRef<'a>,
    /// (n_positions, C) position embedding.
    pub wpe: TensorRef<'a>,
    pub h: Vec<Block<'a>>,
    pub ln_f: LayerNorm<'a>,
}

/// Every tensor GPT-2 needs, unprefixed, with the shape config.json implies ((1, n) for the 1-D
/// biases and LayerNorm parameters).
pub fn expected_tensors(config: &Config) -> Vec<(String, [usize; 2])> {
    let (c, h, v) = (config.n_embd, config.n_inner, config.vocab_size);
    let mut out = vec![
        ("wte.weight".to_string(), [v, c]),
        ("wpe.weight".to_string(), [config.n_positions, c]),
        ("ln_f.weight".to_string(), [1, c]),
        ("ln_f.bias".to_string(), [1, c]),
    ];
    for i in 0..config.n_layer {
        for (part, n_in, n_out) in [
            ("attn.c_attn", c, 3 * c),
            ("attn.c_proj", c, c),
            ("mlp.c_fc", c, h),
            ("mlp.c_proj", h, c),
        ] {
            out.push((format!("h.{i}.{part}.weight"), [n_in, n_out]));
            out.push((format!("h.{i}.{part}.bias"), [1, n_out]));
        }
        for ln in ["ln_1", "ln_2"] {
            out.push((format!("h.{i}.{ln}.weight"), [1, c]));
            out.push((format!("h.{i}.{ln}.bias"), [1, c]));
        }
    }
    out
}

impl<'a> Gpt2Weights<'a> {
    /// Parses safetensors bytes and checks every tensor GPT-2 needs against `config`.
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
        let mut get = |name: &str| -> TensorRef<'a> {
            let (dtype, shape, transposed, start, len) =
                at.remove(name).expect("the stream checked it");
            TensorRef {
                dtype,
                shape,
                transposed,
                data: &bytes[start..start + len],
            }
        };
        let ln = |get: &mut dyn FnMut(&str) -> TensorRef<'a>, name: &str| LayerNorm {
            weight: get(&format!("{name}.weight")),
            bias: get(&format!("{name}.bias")),
        };
        let linear = |get: &mut dyn FnMut(&str) -> TensorRef<'a>, name: &str| Linear {
            weight: get(&format!("{name}.weight")),
            bias: get(&format!("{name}.bias")),
        };
        let h = (0..config.n_layer)
            .map(|i| Block {
                ln_1: ln(&mut get, &format!("h.{i}.ln_1")),
                c_attn: linear(&mut get, &format!("h.{i}.attn.c_attn")),
                attn_c_proj: linear(&mut get, &format!("h.{i}.attn.c_proj")),
                ln_2: ln(&mut get, &format!("h.{i}.ln_2")),
                c_fc: linear(&mut get, &format!("h.{i}.mlp.c_fc")),
                mlp_c_proj: linear(&mut get, &format!("h.{i}.mlp.c_proj")),
            })
            .collect();
        Ok(Gpt2Weights {
            wte: get("wte.weight"),
            wpe: get("wpe.weight"),
            h,
            ln_f: ln(&mut get, "ln_f"),
        })
    }

    /// Every tensor with its unprefixed name, as `stream::Stream` hands them out.
    pub fn tensors(&self) -> Vec<(String, TensorRef<'a>)> {
        let mut out = vec![
            ("wte.weight".to_string(), self.wte),
            ("wpe.weight".to_string(), self.wpe),
            ("ln_f.weight".to_string(), self.ln_f.weight),
            ("ln_f.bias".to_string(), self.ln_f.bias),
        ];
        for (i, b) in self.h.iter().enumerate() {
            let parts = [
                ("ln_1.weight", b.ln_1.weight),
                ("ln_1.bias", b.ln_1.bias),
                ("attn.c_attn.weight", b.c_attn.weight),
                ("attn.c_attn.bias", b.c_attn.bias),
                ("attn.c_proj.weight", b.attn_c_proj.weight),
                ("attn.c_proj.bias", b.attn_c_proj.bias),
                ("ln_2.weight", b.ln_2.weight),
                ("ln_2.bias", b.ln_2.bias),
                ("mlp.c_fc.weight", b.c_fc.weight),
                ("mlp.c_fc.bias", b.c_fc.bias),
                ("mlp.c_proj.weight", b.mlp_c_proj.weight),
                ("mlp.c_proj.bias", b.mlp_c_proj.bias),
            ];
            out.extend(parts.map(|(n, t)| (format!("h.{i}.{n}"), t)));
        }
        out
    }
}
