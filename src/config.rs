//! GPT-2 hyper-parameters, read from a Hugging Face `config.json`
//! (transformers' `GPT2Config`). Unknown fields are ignored; missing optional ones take
//! transformers' defaults; impossible values are errors that name the field.

use crate::error::{Error, Result};
use serde::Deserialize;

/// The most ids one verification pass of speculative decoding (`Backend::pass`, `Want::Every`)
/// takes: a draft of up to 15 tokens after the last kept one. The backends size their logits for
/// it (and the GPU the most sequences of one decode pass).
pub const MAX_VERIFY: usize = 16;

/// Largest dimension accepted from a config file (and token id from a tokenizer); guards against
/// absurd allocations.
pub const MAX_DIM: usize = 1 << 20;

/// The activation used in the MLP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// `gelu_new`, `gelu_pytorch_tanh`, `gelu_fast`: 0.5x(1 + tanh(√(2/π)(x + 0.044715x³))) — GPT-2's.
    GeluTanh,
    /// `gelu`: the exact erf form.
    GeluErf,
}

/// GPT-2 hyper-parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Number of transformer blocks.
    pub n_layer: usize,
    /// Number of attention heads (NH).
    pub n_head: usize,
    /// Embedding width (C).
    pub n_embd: usize,
    /// Context length: the most positions one sequence can hold.
    pub n_positions: usize,
    /// Vocabulary size (V).
    pub vocab_size: usize,
    /// Hidden width of the MLP (4·C unless `n_inner` says otherwise).
    pub n_inner: usize,
    /// LayerNorm epsilon.
    pub layer_norm_epsilon: f32,
    /// MLP activation.
    pub activation: Activation,
    /// Divide attention scores by √HS (transformers' `scale_attn_weights`).
    pub scale_attn_weights: bool,
    /// Also divide by layer index + 1 (transformers' `scale_attn_by_inverse_layer_idx`).
    pub scale_attn_by_inverse_layer_idx: bool,
    /// End-of-text token id, used as the stop token and to start an empty prompt.
    pub eos_token_id: u32,
}

#[derive(Deserialize)]
struct RawConfig {
    n_layer: Option<usize>,
    n_head: Option<usize>,
    n_embd: Option<usize>,
    n_positions: Option<usize>,
    n_ctx: Option<usize>,
    vocab_size: Option<usize>,
    n_inner: Option<usize>,
    layer_norm_epsilon: Option<f64>,
    activation_function: Option<String>,
    scale_attn_weights: Option<bool>,
    scale_attn_by_inverse_layer_idx: Option<bool>,
    eos_token_id: Option<u32>,
    model_type: Option<String>,
}

impl Config {
    /// Parses and validates `config.json` bytes.
    pub fn from_json(bytes: &[u8]) -> Result<Self> {
        let raw: RawConfig = serde_json::from_slice(bytes)
            .map_err(|e| Error::Config(format!("not valid JSON: {e}")))?;
        if let Some(t) = raw.model_type.as_deref() {
            if t != "gpt2" {
                return Err(Error::Config(format!(
                    "model_type is \"{t}\"; only GPT-2 (\"gpt2\") checkpoints are supported"
                )));
            }
        }
        let need = |v: Option<usize>, name: &str| {
            v.ok_or_else(|| Error::Config(format!("missing field \"{name}\"")))
        };
        let n_layer = need(raw.n_layer, "n_layer")?;
        let n_head = need(raw.n_head, "n_head")?;
        let n_embd = need(raw.n_embd, "n_embd")?;
        let n_positions = need(raw.n_positions.or(raw.n_ctx), "n_positions")?;
        let vocab_size = need(raw.vocab_size, "vocab_size")?;
        let n_inner = raw.n_inner.unwrap_or(4 * n_embd);
        for (name, v) in [
            ("n_layer", n_layer),
            ("n_head", n_head),
            ("n_embd", n_embd),
            ("n_positions", n_positions),
            ("vocab_size", vocab_size),
            ("n_inner", n_inner),
        ] {
            if v == 0 || v > MAX_DIM {
                return Err(Error::Config(format!(
                    "\"{name}\" is {v}; expected 1..={MAX_DIM}"
                )));
            }
        }
        if n_embd % n_head != 0 {
            return Err(Error::Config(format!(
                "n_embd ({n_embd}) is not divisible by n_head ({n_head})"
            )));
        }
        let eps = raw.layer_norm_epsilon.unwrap_or(1e-5);
        if !(eps.is_finite() && eps > 0.0 && eps < 1.0) {
            return Err(Error::Config(format!(
                "layer_norm_epsilon is {eps}; expected 0 < eps < 1"
            )));
        }
        let activation = match raw.activation_function.as_deref().unwrap_or("gelu_new") {
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Activation::GeluTanh,
            "gelu" => Activation::GeluErf,
            other => {
                return Err(Error::Config(format!(
                    "activation_function \"{other}\" is not supported (expected gelu_new)"
                )))
            }
        };
        let eos_token_id = raw.eos_token_id.unwrap_or(50256);
        Ok(Config {
            n_layer,
            n_head,
            n_embd,
            n_positions,
            vocab_size,
            n_inner,
            layer_norm_epsilon: eps as f32,
            activation,
            scale_attn_weights: raw.scale_attn_weights.unwrap_or(true),
            scale_attn_by_inverse_layer_idx: raw.scale_attn_by_inverse_layer_idx.unwrap_or(false),
            eos_token_id,
        })
    }

    /// Head size (HS = C / NH).
    pub fn head_size(&self) -> usize {
        self.n_embd / self.n_head
    }

    /// Number of parameters, counting the tied head once.
    pub fn n_params(&self) -> usize {
        let (c, h) = (self.n_embd, self.n_inner);
        let block = 2 * 2 * c + (c * 3 * c + 3 * c) + (c * c + c) + (c * h + h) + (h * c + c);
        self.vocab_size * c + self.n_positions * c + self.n_layer * block + 2 * c
    }

    /// What attention multiplies the scores q·k of layer `layer` (from 0) by, as transformers
    /// does: 1/√HS when `scale_attn_weights`, and 1/(layer + 1) more when
    /// `scale_attn_by_inverse_layer_idx`.
    pub fn attention_scale(&self, layer: usize) -> f32 {
        let mut scale = if self.scale_attn_weights {
            1.0 / (self.head_size() as f32).sqrt()
        } else {
            1.0
        };
        if self.scale_attn_by_inverse_layer_idx {
            scale /= (layer + 1) as f32;
        }
        scale
    }

    /// The checks every forward relies on: `ids` placed at positions `pos..` are not empty, fit
    /// the context and are in the vocabulary. A prompt is the case `pos = 0`.
    pub fn check_ids(&self, ids: &[u32], pos: usize) -> Result<()> {
        if ids.is_empty() {
            return Err(Error::param("ids", "nothing to run: no token ids"));
        }
        let end = pos.saturating_add(ids.len());
        if end > self.n_positions && pos == 0 {
            return Err(Error::PromptTooLong {
                tokens: ids.len(),
                n_ctx: self.n_positions,
            });
        }
        if end > self.n_positions {
            return Err(Error::param(
                "ids",
                format!(
                    "positions {pos}..{end} exceed the context of {} tokens",
                    self.n_positions
                ),
            ));
        }
        if let Some(&bad) = ids.iter().find(|&&id| id as usize >= self.vocab_size) {
            return Err(Error::tokenizer(format!(
                "token id {bad} is outside the model's vocabulary of {} ids",
                self.vocab_size
            )));
        }
        Ok(())
    }

    /// Bytes of the weights one decode step reads when every matrix weight takes
    /// `bytes_per_weight` and biases and LayerNorm parameters are f32: every block once and the
    /// tied head (the one row of wte and wpe it embeds is left out). Each backend reports the
    /// same count from what it really holds.
    pub fn decode_weight_bytes(&self, bytes_per_weight: f64) -> f64 {
        let (c, h) = (self.n_embd as f64, self.n_inner as f64);
        let matrices = c * 3.0 * c + c * c + 2.0 * c * h;
        let small = 2.0 * 2.0 * c + 3.0 * c + c + h + c; // LayerNorms, biases
        let per_block = matrices * bytes_per_weight + small * 4.0;
        self.vocab_size as f64 * c * bytes_per_weight
            + self.n_layer as f64 * per_block
            + 2.0 * c * 4.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpt2_small_parses_and_counts_124m_params() {
        let json = br#"{"n_layer":12,"n_head":12,"n_embd":768,"n_positions":1024,
                        "vocab_size":50257,"layer_norm_epsilon":1e-5,"model_type":"gpt2",
                        "activation_function":"gelu_new","n_inner":null}"#;
        let c = Config::from_json(json).unwrap();
        assert_eq!(c.n_inner, 3072);
        assert_eq!(c.head_size(), 64);
        assert_eq!(c.n_params(), 124_439_808);
        assert_eq!(c.activation, Activation::GeluTanh);
    }

    #[test]
    fn bad_configs_name_the_field() {
        let cases: [(&[u8], &str); 5] = [
            (b"{", "not valid JSON"),
            (br#"{"n_head":2,"n_embd":8,"n_positions":4,"vocab_size":10}"#, "n_layer"),
            (br#"{"n_layer":1,"n_head":3,"n_embd":8,"n_positions":4,"vocab_size":10}"#, "divisible"),
            (br#"{"n_layer":0,"n_head":2,"n_embd":8,"n_positions":4,"vocab_size":10}"#, "\"n_layer\" is 0"),
            (br#"{"n_layer":1,"n_head":2,"n_embd":8,"n_positions":4,"vocab_size":10,"activation_function":"relu"}"#, "relu"),
        ];
        for (json, want) in cases {
            let err = Config::from_json(json).unwrap_err().to_string();
            assert!(err.contains(want), "{err:?} should mention {want:?}");
            assert!(err.starts_with("config.json"), "{err}");
        }
    }
}
