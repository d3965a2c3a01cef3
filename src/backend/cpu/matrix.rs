//! The CPU backend's weights: a matrix in either format, and the layers built from them.

use super::q8::{Q8Act, Q8Matrix};
use super::vmath::gemv;
use super::CpuDtype;
use crate::error::{Error, Result};
use crate::weights::{DiskDtype, TensorRef};
use candle_core::{Device, Tensor};

/// The most rows an f32 product takes through the GEMV (see `Matrix::product`).
pub const GEMV_ROWS: usize = 16;

/// A weight matrix (out, in) in one of the formats.
pub(super) enum Matrix {
    /// (out, in): Conv1D's (in, out) transposed, so each output is one contiguous row.
    F32(Tensor),
    Q8(Q8Matrix),
}

impl Matrix {
    /// From transformers' (in, out) layout (`conv1d`) or an (out, in) one (the embedding).
    pub fn new(t: &TensorRef, dtype: CpuDtype, conv1d: bool) -> Result<Matrix> {
        let [a, b] = t.shape;
        if dtype == CpuDtype::Q8 {
            // (rows, cols, row stride, column stride) of the (out, in) matrix in the tensor:
            // transformers' Conv1D (in, out), a GGUF file's Conv1D stored (out, in), an embedding.
            let (rows, cols, rs, cs) = match (conv1d, t.transposed) {
                (true, false) => (b, a, 1, b),
                (true, true) => (b, a, a, 1),
                (false, _) => (a, b, b, 1),
            };
            let d = t.data;
            let q = match t.dtype {
                DiskDtype::F32 => Q8Matrix::quantize_with(
                    |i| f32::from_le_bytes([d[4 * i], d[4 * i + 1], d[4 * i + 2], d[4 * i + 3]]),
                    rows,
                    cols,
                    rs,
                    cs,
                ),
                DiskDtype::F16 => Q8Matrix::quantize_with(
                    |i| half::f16::from_bits(u16::from_le_bytes([d[2 * i], d[2 * i + 1]])).to_f32(),
                    rows,
                    cols,
                    rs,
                    cs,
                ),
                DiskDtype::BF16 => Q8Matrix::quantize_with(
                    |i| {
                        half::bf16::from_bits(u16::from_le_bytes([d[2 * i], d[2 * i + 1]])).to_f32()
                    },
                    rows,
                    cols,
                    rs,
                    cs,
                ),
                // GGUF's most common type without the general decoder's dispatch per value
                // (the same product, so the same bits as `GgmlType::value`).
                // Q8_0 rows stored (out, in), as GGUF writes them: its blocks are ours (copied
                // where they are in the kernels' range already).
                DiskDtype::Q8_0 if rs == cols && cs == 1 && cols.is_multiple_of(32) => {
                    Q8Matrix::from_q8_0(d, rows, cols)
                }
                DiskDtype::Q8_0 => Q8Matrix::quantize_with(
                    |i| {
                        let b = &d[i / 32 * 34..];
                        let scale = half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32();
                        b[2 + i % 32] as i8 as f32 * scale
                    },
                    rows,
                    cols,
                    rs,
                    cs,
                ),
                // The other block types, dequantized value by value (never the whole tensor).
                _ => Q8Matrix::quantize_with(|i| t.stored_value(i), rows, cols, rs, cs),
            };
            return Ok(Matrix::Q8(q?));
        }
        let v = Tensor::from_vec(t.try_to_f32()?, (a, b), &Device::Cpu)?;
        Ok(Matrix::F32(if conv1d { v.t()?.contiguous()? } else { v }))
    }

    /// Bytes one pass over the matrix reads.
    pub fn bytes(&self) -> usize {
        match self {
            Matrix::F32(t) => t.elem_count() * 4,
            Matrix::Q8(m) => m.bytes(),
        }
    }

    /// Bytes allocated for the matrix: a q8 matrix's capacity; an f32 tensor holds exactly its
    /// elements.
    pub fn allocated_bytes(&self) -> usize {
        match self {
            Matrix::F32(t) => t.elem_count() * 4,
            Matrix::Q8(m) => m.allocated_bytes(),
        }
    }

    /// The first half of a product: the rows of `x` to 8 bits in `act` (`q8`; nothing for f32).
    /// Whether there was anything to do.
    pub fn prepare(&self, x: &[f32], act: &mut Q8Act) -> bool {
        if let Matrix::Q8(m) = self {
            act.quantize(x, m.cols());
        }
        matches!(self, Matrix::Q8(_))
    }

    /// The second half: y (t, out) = x (t, in) · Wᵀ (+ b), with `act` from `prepare(x)`. Up to
    /// `GEMV_ROWS` rows of f32 take the GEMV, which streams each weight row once and gives each
    /// row the same result as alone (a decode step, a verification pass); more rows take
    /// candle's matmul (a prompt, which may allocate).
    pub fn product(&self, x: &[f32], act: &Q8Act, b: Option<&[f32]>, y: &mut [f32]) -> Result<()> {
        match self {
            Matrix::Q8(m) => m.matmul(act, b, y),
            Matrix::F32(w) => {
                let (n_out, n_in) = w.dims2()?;
                let t = x.len() / n_in;
                if t <= GEMV_ROWS {
                    with_f32(w, |w| gemv(x, n_in, w, b, y))?;
                } else {
                    let xt = Tensor::from_slice(x, (t, n_in), &Device::Cpu)?;
                    let out = xt.matmul(&w.t()?)?;
                    with_f32(&out, |o| y[..t * n_out].copy_from_slice(o))?;
                    if let Some(b) = b {
                        for row in y[..t * n_out].chunks_exact_mut(n_out) {
                            row.iter_mut().zip(b).for_each(|(y, b)| *y += b);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Row `r` as f32 (the embedding lookup).
    pub fn row(&self, r: usize, out: &mut [f32]) -> Result<()> {
        match self {
            Matrix::Q8(m) => m.dequantize_row(r, out),
            Matrix::F32(w) => {
                let n = out.len();
                with_f32(w, |w| out.copy_from_slice(&w[r * n..(r + 1) * n]))?;
            }
        }
        Ok(())
    }
}

pub(super) struct LayerNorm {
    pub weight: Vec<f32>,
    pub bias: Vec<f32>,
}

impl LayerNorm {
    /// Each row of `x` normalised (biased variance, as torch) into `y`.
    pub fn normalize(&self, x: &[f32], eps: f32, y: &mut [f32]) {
        let c = self.weight.len();
        for (xr, yr) in x.chunks_exact(c).zip(y.chunks_exact_mut(c)) {
            // Eight partial sums (vmath), so both passes vectorise.
            let mean = super::vmath::sum(xr) / c as f32;
            let var = super::vmath::sum_sq_dev(xr, mean) / c as f32;
            let inv = 1.0 / (var + eps).sqrt();
            for (((y, x), w), b) in yr.iter_mut().zip(xr).zip(&self.weight).zip(&self.bias) {
                *y = (x - mean) * inv * w + b;
            }
        }
    }

    pub fn bytes(&self) -> usize {
        4 * (self.weight.len() + self.bias.len())
    }

    pub fn allocated_bytes(&self) -> usize {
        4 * (self.weight.capacity() + self.bias.capacity())
    }
}

pub(super) struct Linear {
    pub weight: Matrix,
    pub bias: Vec<f32>,
}

impl Linear {
    pub fn bytes(&self) -> usize {
        self.weight.bytes() + 4 * self.bias.len()
    }

    pub fn allocated_bytes(&self) -> usize {
        self.weight.allocated_bytes() + 4 * self.bias.capacity()
    }
}

/// One transformer block `h.{i}`.
pub(super) struct Block {
    pub ln_1: LayerNorm,
    pub c_attn: Linear,      // (C, 3C)
    pub attn_c_proj: Linear, // (C, C)
    pub ln_2: LayerNorm,
    pub c_fc: Linear,       // (C, H)
    pub mlp_c_proj: Linear, // (H, C)
}

impl Block {
    pub fn allocated_bytes(&self) -> usize {
        self.ln_1.allocated_bytes()
            + self.ln_2.allocated_bytes()
            + self.c_attn.allocated_bytes()
            + self.attn_c_proj.allocated_bytes()
            + self.c_fc.allocated_bytes()
            + self.mlp_c_proj.allocated_bytes()
    }

    /// Bytes one decode step reads: the matrices, the biases and the LayerNorm parameters.
    pub fn bytes(&self) -> usize {
        self.ln_1.bytes()
            + self.ln_2.bytes()
            + self.c_attn.bytes()
            + self.attn_c_proj.bytes()
            + self.c_fc.bytes()
            + self.mlp_c_proj.bytes()
    }
}

/// Runs `f` on the f32 values of a contiguous CPU tensor without copying them.
fn with_f32<R>(t: &Tensor, f: impl FnOnce(&[f32]) -> R) -> Result<R> {
    let (storage, layout) = t.storage_and_layout();
    let candle_core::Storage::Cpu(cpu) = &*storage else {
        return Err(Error::Backend("a CPU tensor is not in CPU memory".into()));
    };
    let data = cpu.as_slice::<f32>()?;
    let (start, end) = layout
        .contiguous_offsets()
        .ok_or_else(|| Error::Backend("a weight tensor is not contiguous".into()))?;
    Ok(f(&data[start..end]))
}
