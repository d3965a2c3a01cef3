//! The uniform structs that mirror the WGSL ones (`Step`, each kernel's `Dims`), byte for byte,
//! and the row table the kernels that place rows in the KV cache read. Re-exported by
//! `kernels.rs`, whose grids and pipelines they go with.

use bytemuck::{Pod, Zeroable};

/// Per-pass values every kernel but the head reads: `Step` in the WGSL.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct Step {
    /// Rows in this pass (T).
    pub t: u32,
    /// Rows the head takes (lm_head.wgsl): 1 (the last row's ln_f, in row 0) or T.
    pub head: u32,
    pub _pad: [u32; 2],
}

impl Step {
    /// A pass over `t` rows whose head takes `head` of them.
    pub fn with_head(t: usize, head: usize) -> Step {
        Step {
            t: t as u32,
            head: head as u32,
            _pad: [0; 2],
        }
    }
}

/// The row table the embedding, kv_write and attention read (`rows` in their WGSL): for each row
/// of a pass, its position and the first cache row of its sequence's slot (slot · n_ctx); the
/// rows of `(slot, pos, len)` after one another. A sequence's row at position p attends to the
/// positions 0..=p of its own slot only, so rows of several sequences share a pass.
pub fn row_table(seqs: impl IntoIterator<Item = (usize, usize, usize)>, n_ctx: usize) -> Vec<u32> {
    let mut rows = Vec::new();
    for (slot, pos, len) in seqs {
        for p in pos..pos + len {
            rows.extend([p as u32, (slot * n_ctx) as u32]);
        }
    }
    rows
}

/// `Dims` of embedding.wgsl and lm_head.wgsl: one vocab chunk of wte.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct ChunkDims {
    pub c: u32,
    /// First vocab row in the chunk.
    pub chunk_start: u32,
    /// Vocab rows in the chunk.
    pub chunk_rows: u32,
    /// The whole vocabulary: the stride between the logits of two positions.
    pub v: u32,
}

/// `Dims` of argmax.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct ArgmaxDims {
    /// The vocabulary: each row's length.
    pub v: u32,
    pub _pad: [u32; 3],
}

/// `Dims` of top_k.wgsl, written before each pass that asks for candidates.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct TopKDims {
    /// The vocabulary: each row's length.
    pub v: u32,
    /// Candidates per row, 1 ..= `MAX_TOP_K`.
    pub k: u32,
    pub _pad: [u32; 2],
}

/// `Dims` of layernorm.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct LayerNormDims {
    pub c: u32,
    /// 1: normalise only row T-1, into row 0 (ln_f).
    pub last_only: u32,
    pub eps: f32,
    pub _pad: u32,
}

/// What a matmul does with x @ w + b.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Epilogue {
    /// out = y (attn.c_attn).
    Bias = 0,
    /// out = gelu_tanh(y) (mlp.c_fc).
    Gelu = 1,
    /// out += y: the residual stream (attn.c_proj, mlp.c_proj).
    Residual = 2,
}

/// `Dims` of matmul_tiled.wgsl, matmul_gemv.wgsl and matmul_gemv_ln.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct MatmulDims {
    /// Inner dimension (in features).
    pub k: u32,
    /// Output columns (out features).
    pub n: u32,
    /// An `Epilogue` as u32.
    pub epilogue: u32,
    /// The LayerNorm's epsilon, for matmul_gemv_ln.wgsl (the others pad with it).
    pub eps: f32,
}

/// `Dims` of kv_write.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct KvDims {
    pub c: u32,
    /// Head size: the q8 cache's rounding goes by heads.
    pub hs: u32,
    pub _pad: [u32; 2],
}

/// `Dims` of attention.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct AttentionDims {
    pub c: u32,
    pub nh: u32,
    pub hs: u32,
    /// Multiplies q·k: 1/√HS, divided by layer+1 when the config asks.
    pub scale: f32,
}

/// `Dims` of quantize.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct QuantizeDims {
    /// Values per row.
    pub k: u32,
    pub _pad: [u32; 3],
}
