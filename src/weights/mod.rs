//! GPT-2 weights from a `model.safetensors` file, resolved by Hugging Face name and checked
//! against the config before any backend sees them.
//!
//! Names follow transformers' `modeling_gpt2.py`, with or without the `transformer.` prefix
//! (openai-community/gpt2 has none, `save_pretrained` adds it). Linear layers are transformers'
//! `Conv1D`, stored (in, out), so `y = x @ W + b` needs no transpose. `lm_head` is tied to `wte`;
//! the `attn.bias` / `attn.masked_bias` causal-mask buffers are ignored.

use crate::config::Config;
use crate::error::{Error, Result};
use safetensors::{Dtype, SafeTensors};

/// Element type of a tensor on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskDtype {
    F32,
    F16,
    BF16,
}

impl DiskDtype {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DiskDtype::F32 => 4,
            DiskDtype::F16 | DiskDtype::BF16 => 2,
        }
    }
}

/// One tensor of the checkpoint: a borrowed view of its bytes with a checked shape.
#[derive(Clone, Copy, Debug)]
pub struct TensorRef<'a> {
    pub dtype: DiskDtype,
    pub shape: [usize; 2],
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

    /// The values as f32 (f16 and bf16 are widened exactly), or an error when the memory for
    /// them cannot be had.
    pub fn try_to_f32(&self) -> Result<Vec<f32>> {
        let mut v = Vec::new();
        v.try_reserve_exact(self.len()).map_err(|_| {
            Error::Backend(format!(
                "out of memory: a {:?} tensor of {} values widened to f32",
                self.shape,
                self.len()
            ))
        })?;
        v.extend(self.f32_values());
        Ok(v)
    }

    /// The values as f32 (f16 and bf16 are widened exactly).
    pub fn to_f32(&self) -> Vec<f32> {
        self.f32_values().collect()
    }

    fn f32_values(&self) -> Box<dyn Iterator<Item = f32> + '_> {
        let b = self.data;
        match self.dtype {
            DiskDtype::F32 => Box::new(
                b.chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            ),
            DiskDtype::F16 => Box::new(
                b.chunks_exact(2)
                    .map(|c| half::f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32()),
            ),
            DiskDtype::BF16 => Box::new(
                b.chunks_exact(2)
                    .map(|c| half::bf16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32()),
            ),
        }
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

impl<'a> Gpt2Weights<'a> {
    /// Parses safetensors bytes and checks every tensor GPT-2 needs against `config`.
    pub fn load(bytes: &'a [u8], config: &Config) -> Result<Self> {
        let st = SafeTensors::deserialize(bytes).map_err(|e| {
            Error::Weights(format!(
                "not a valid safetensors file (truncated or corrupt?): {e}"
            ))
        })?;
        let names = st.names();
        let prefix = if names.contains(&"wte.weight") {
            ""
        } else if names.contains(&"transformer.wte.weight") {
            "transformer."
        } else {
            return Err(Error::Weights(
                "missing tensor \"wte.weight\" (also looked for \"transformer.wte.weight\")".into(),
            ));
        };
        for name in &names {
            let rest = name.strip_prefix(prefix).unwrap_or(name);
            if let Some(i) = rest.strip_prefix("h.").and_then(|r| r.split('.').next()) {
                if i.parse::<usize>().is_ok_and(|i| i >= config.n_layer) {
                    return Err(Error::Weights(format!(
                        "tensor \"{name}\" belongs to a layer beyond n_layer = {} in config.json; \
                         the config does not match the weights",
                        config.n_layer
                    )));
                }
            }
        }
        let get = |name: &str, shape: [usize; 2]| tensor(&st, prefix, name, shape);
        let (c, h, v) = (config.n_embd, config.n_inner, config.vocab_size);
        let ln = |name: &str| -> Result<LayerNorm<'a>> {
            Ok(LayerNorm {
                weight: get(&format!("{name}.weight"), [1, c])?,
                bias: get(&format!("{name}.bias"), [1, c])?,
            })
        };
        let linear = |name: &str, n_in: usize, n_out: usize| -> Result<Linear<'a>> {
            Ok(Linear {
                weight: get(&format!("{name}.weight"), [n_in, n_out])?,
                bias: get(&format!("{name}.bias"), [1, n_out])?,
            })
        };
        let blocks = (0..config.n_layer)
            .map(|i| {
                Ok(Block {
                    ln_1: ln(&format!("h.{i}.ln_1"))?,
                    c_attn: linear(&format!("h.{i}.attn.c_attn"), c, 3 * c)?,
                    attn_c_proj: linear(&format!("h.{i}.attn.c_proj"), c, c)?,
                    ln_2: ln(&format!("h.{i}.ln_2"))?,
                    c_fc: linear(&format!("h.{i}.mlp.c_fc"), c, h)?,
                    mlp_c_proj: linear(&format!("h.{i}.mlp.c_proj"), h, c)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Gpt2Weights {
            wte: get("wte.weight", [v, c])?,
            wpe: get("wpe.weight", [config.n_positions, c])?,
            h: blocks,
            ln_f: ln("ln_f")?,
        })
    }
}

/// Looks up `name` (with the checkpoint's prefix) and checks dtype and shape. A (1, n) expected
/// shape accepts the 1-D (n,) tensors that biases and LayerNorm parameters are stored as.
fn tensor<'a>(
    st: &SafeTensors<'a>,
    prefix: &str,
    name: &str,
    shape: [usize; 2],
) -> Result<TensorRef<'a>> {
    let full = format!("{prefix}{name}");
    let view = st
        .tensor(&full)
        .map_err(|_| Error::Weights(format!("missing tensor \"{full}\"")))?;
    let dtype = match view.dtype() {
        Dtype::F32 => DiskDtype::F32,
        Dtype::F16 => DiskDtype::F16,
        Dtype::BF16 => DiskDtype::BF16,
        other => {
            return Err(Error::Weights(format!(
                "tensor \"{full}\" has dtype {other:?}; supported are F32, F16 and BF16"
            )))
        }
    };
    let got = view.shape();
    let ok = if shape[0] == 1 {
        got == [shape[1]] || got == shape
    } else {
        got == shape
    };
    if !ok {
        return Err(Error::Weights(format!(
            "tensor \"{full}\" has shape {got:?}, expected {:?} from config.json",
            if shape[0] == 1 {
                vec![shape[1]]
            } else {
                shape.to_vec()
            }
        )));
    }
    let data = view.data();
    if data.len() != shape[0] * shape[1] * dtype.size() {
        return Err(Error::Weights(format!(
            "tensor \"{full}\" holds {} bytes, expected {}",
            data.len(),
            shape[0] * shape[1] * dtype.size()
        )));
    }
    Ok(TensorRef { dtype, shape, data })
}
