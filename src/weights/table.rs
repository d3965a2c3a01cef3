//! The one list of GPT-2's tensors, derived from `Config`: transformers' name and shape of each,
//! what it is (the embedding that is also the tied output head, the position embedding, a Conv1D
//! matrix, a vector), and llama.cpp's name for it. The loaders (safetensors and its shards,
//! GGUF, pytorch_model.bin) check a file against it and both backends take their tensors by it;
//! no other module spells a tensor's name.

use crate::config::Config;

/// What a tensor is: it decides how a backend stores it and how a GGUF file lays it out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// `wte`, (V, C): the token embedding and, tied, the output head (GPT-2 has no `lm_head` of
    /// its own; a file's `lm_head.weight` or GGUF `output.weight` is a copy of it).
    Embedding,
    /// `wpe`, (n_positions, C).
    Positions,
    /// A Conv1D weight, (in, out) in transformers' files; GGUF stores it (out, in).
    Matrix,
    /// A bias or a LayerNorm parameter, (1, n).
    Vector,
}

/// One tensor GPT-2 needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    /// transformers' name without the `transformer.` prefix, e.g. `h.3.mlp.c_fc.weight`.
    pub name: String,
    /// llama.cpp's name in a GGUF file, e.g. `blk.3.ffn_up.weight`.
    pub gguf: String,
    /// transformers' shape, (1, n) for a vector.
    pub shape: [usize; 2],
    pub role: Role,
}

/// A layer's weight and bias (a LayerNorm's or a Conv1D's).
#[derive(Clone, Debug)]
pub struct Pair {
    pub weight: String,
    pub bias: String,
}

fn pair(prefix: &str) -> Pair {
    Pair {
        weight: format!("{prefix}.weight"),
        bias: format!("{prefix}.bias"),
    }
}

/// The names of block `i`'s tensors.
#[derive(Clone, Debug)]
pub struct BlockNames {
    pub ln_1: Pair,
    /// (C, 3C): q, k, v side by side.
    pub c_attn: Pair,
    /// (C, C)
    pub attn_c_proj: Pair,
    pub ln_2: Pair,
    /// (C, H)
    pub c_fc: Pair,
    /// (H, C)
    pub mlp_c_proj: Pair,
}

pub const WTE: &str = "wte.weight";
pub const WPE: &str = "wpe.weight";
/// `wte` in a GGUF file, and the copy of it as the output head that a GGUF file may also hold
/// (in a finer type: llama-quantize's Q4_K_M keeps it in Q6_K).
pub const WTE_GGUF: &str = "token_embd.weight";
pub const HEAD_GGUF: &str = "output.weight";

/// Whether a tensor is one of a model's multi-token prediction heads' (`crate::mtp`), which a
/// file may carry beside GPT-2's own: `mtp.0.weight`, `mtp.draft_ids`, …
pub fn is_mtp(name: &str) -> bool {
    name.starts_with("mtp.")
}

/// The final LayerNorm.
pub fn ln_f() -> Pair {
    pair("ln_f")
}

/// A Conv1D's (in, out) from (C, H).
type Shape = fn(usize, usize) -> [usize; 2];

/// A block's parts: transformers' name, llama.cpp's, and (for a Conv1D) its shape.
const BLOCK: [(&str, &str, Option<Shape>); 6] = [
    ("ln_1", "attn_norm", None),
    ("attn.c_attn", "attn_qkv", Some(|c, _| [c, 3 * c])),
    ("attn.c_proj", "attn_output", Some(|c, _| [c, c])),
    ("ln_2", "ffn_norm", None),
    ("mlp.c_fc", "ffn_up", Some(|c, h| [c, h])),
    ("mlp.c_proj", "ffn_down", Some(|c, h| [h, c])),
];

/// The names of block `i`'s tensors.
pub fn block(i: usize) -> BlockNames {
    let [ln_1, c_attn, attn_c_proj, ln_2, c_fc, mlp_c_proj] =
        BLOCK.map(|(part, _, _)| pair(&format!("h.{i}.{part}")));
    BlockNames {
        ln_1,
        c_attn,
        attn_c_proj,
        ln_2,
        c_fc,
        mlp_c_proj,
    }
}

/// Every tensor GPT-2 needs, in the order of the model: the embeddings, the final LayerNorm,
/// then each block's.
pub fn tensors(config: &Config) -> Vec<Spec> {
    let (c, h, v) = (config.n_embd, config.n_inner, config.vocab_size);
    let spec = |name: &str, gguf: &str, shape, role| Spec {
        name: name.to_string(),
        gguf: gguf.to_string(),
        shape,
        role,
    };
    let mut out = vec![
        spec(WTE, WTE_GGUF, [v, c], Role::Embedding),
        spec(
            WPE,
            "position_embd.weight",
            [config.n_positions, c],
            Role::Positions,
        ),
        spec("ln_f.weight", "output_norm.weight", [1, c], Role::Vector),
        spec("ln_f.bias", "output_norm.bias", [1, c], Role::Vector),
    ];
    for i in 0..config.n_layer {
        for (part, llama, matrix) in BLOCK {
            let (name, gguf) = (format!("h.{i}.{part}"), format!("blk.{i}.{llama}"));
            let (weight, bias) = match matrix {
                Some(shape) => {
                    let [n_in, n_out] = shape(c, h);
                    (([n_in, n_out], Role::Matrix), [1, n_out])
                }
                None => (([1, c], Role::Vector), [1, c]),
            };
            let ((w_shape, w_role), b_shape) = (weight, bias);
            out.push(spec(
                &format!("{name}.weight"),
                &format!("{gguf}.weight"),
                w_shape,
                w_role,
            ));
            out.push(spec(
                &format!("{name}.bias"),
                &format!("{gguf}.bias"),
                b_shape,
                Role::Vector,
            ));
        }
    }
    out
}

/// The role of each tensor by name, for a backend that is handed tensors by name.
pub fn roles(config: &Config) -> std::collections::HashMap<String, Role> {
    tensors(config)
        .into_iter()
        .map(|s| (s.name, s.role))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_names_are_the_tables() {
        let config = Config::from_json(
            br#"{"n_layer": 2, "n_head": 2, "n_embd": 8, "n_positions": 4, "vocab_size": 5}"#,
        )
        .unwrap();
        let t = tensors(&config);
        assert_eq!(t.len(), 4 + 2 * 12);
        let b = block(1);
        for name in [
            &b.ln_1.weight,
            &b.c_attn.bias,
            &b.attn_c_proj.weight,
            &b.ln_2.bias,
        ] {
            assert!(t.iter().any(|s| &s.name == name), "{name}");
        }
        let fc = t.iter().find(|s| s.name == b.c_fc.weight).unwrap();
        assert_eq!(
            (fc.shape, fc.role, fc.gguf.as_str()),
            ([8, 32], Role::Matrix, "blk.1.ffn_up.weight")
        );
    }
}
