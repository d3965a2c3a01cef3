//! GPT-2 forward pass on the CPU with candle-core, following transformers' `modeling_gpt2.py`.
//!
//! Matrix products and elementwise ops are candle's; causal attention runs over a KV cache that
//! is allocated once at load, (n_layer, n_ctx, C) for keys and for values, and written in place,
//! so a decode step never recomputes or copies the prefix.

use crate::config::{Activation, Config};
use crate::error::{Error, Result};
use crate::weights::{self, Gpt2Weights, TensorRef};
use candle_core::{Device, Tensor, D};

struct LayerNorm {
    weight: Tensor, // (C,)
    bias: Tensor,   // (C,)
}

struct Linear {
    weight: Tensor, // (out, in): Conv1D's (in, out) transposed, so each output is one contiguous row
    bias: Tensor,   // (out,)
}

struct Block {
    ln_1: LayerNorm,
    c_attn: Linear,      // (C, 3C)
    attn_c_proj: Linear, // (C, C)
    ln_2: LayerNorm,
    c_fc: Linear,       // (C, H)
    mlp_c_proj: Linear, // (H, C)
}

/// The CPU backend: f32 weights as candle tensors and a preallocated KV cache.
pub struct CpuBackend {
    config: Config,
    wte: Tensor, // (V, C)
    wpe: Tensor, // (n_ctx, C)
    h: Vec<Block>,
    ln_f: LayerNorm,
    k_cache: Vec<Vec<f32>>, // n_layer × (n_ctx, C)
    v_cache: Vec<Vec<f32>>, // n_layer × (n_ctx, C)
    logits: Vec<f32>,       // (V,)
    scores: Vec<f32>,       // (n_ctx,) attention scratch
}

fn tensor(t: &TensorRef, one_d: bool) -> Result<Tensor> {
    let shape: Vec<usize> = if one_d {
        vec![t.shape[1]]
    } else {
        t.shape.to_vec()
    };
    Ok(Tensor::from_vec(t.to_f32(), shape, &Device::Cpu)?)
}

fn layer_norm(w: &weights::LayerNorm) -> Result<LayerNorm> {
    Ok(LayerNorm {
        weight: tensor(&w.weight, true)?,
        bias: tensor(&w.bias, true)?,
    })
}

fn linear(w: &weights::Linear) -> Result<Linear> {
    Ok(Linear {
        weight: tensor(&w.weight, false)?.t()?.contiguous()?,
        bias: tensor(&w.bias, true)?,
    })
}

impl CpuBackend {
    /// Converts checked weights to f32 tensors and allocates the KV cache.
    pub fn new(config: &Config, w: &Gpt2Weights) -> Result<Self> {
        let h =
            w.h.iter()
                .map(|b| {
                    Ok(Block {
                        ln_1: layer_norm(&b.ln_1)?,
                        c_attn: linear(&b.c_attn)?,
                        attn_c_proj: linear(&b.attn_c_proj)?,
                        ln_2: layer_norm(&b.ln_2)?,
                        c_fc: linear(&b.c_fc)?,
                        mlp_c_proj: linear(&b.mlp_c_proj)?,
                    })
                })
                .collect::<Result<Vec<_>>>()?;
        let cache = config.n_positions * config.n_embd;
        Ok(CpuBackend {
            config: config.clone(),
            wte: tensor(&w.wte, false)?,
            wpe: tensor(&w.wpe, false)?,
            h,
            ln_f: layer_norm(&w.ln_f)?,
            k_cache: (0..config.n_layer).map(|_| vec![0.0; cache]).collect(),
            v_cache: (0..config.n_layer).map(|_| vec![0.0; cache]).collect(),
            logits: vec![0.0; config.vocab_size],
            scores: vec![0.0; config.n_positions],
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// f32 weights: 4 bytes each.
    pub fn decode_weight_bytes(&self) -> f64 {
        Gpt2Weights::decode_bytes(&self.config, 4.0)
    }

    /// Logits of the last of `ids` at positions `pos..` (checked by the caller).
    pub fn forward(&mut self, ids: &[u32], pos: usize) -> Result<&[f32]> {
        let t = ids.len();
        let dev = Device::Cpu;
        let idx = Tensor::from_slice(ids, t, &dev)?;
        let mut x = self
            .wte
            .index_select(&idx, 0)?
            .add(&self.wpe.narrow(0, pos, t)?)?; // (T, C)
        for layer in 0..self.h.len() {
            let b = &self.h[layer];
            let qkv = linear_forward(&layer_norm_forward(&x, &b.ln_1, &self.config)?, &b.c_attn)?; // (T, 3C)
            let a = self.attention(layer, &qkv, pos)?; // (T, C)
            let b = &self.h[layer];
            x = x.add(&linear_forward(&a, &b.attn_c_proj)?)?;
            let m = linear_forward(&layer_norm_forward(&x, &b.ln_2, &self.config)?, &b.c_fc)?; // (T, H)
            let m = match self.config.activation {
                Activation::GeluTanh => m.gelu()?,
                Activation::GeluErf => m.gelu_erf()?,
            };
            x = x.add(&linear_forward(&m, &b.mlp_c_proj)?)?;
        }
        let last = layer_norm_forward(&x.narrow(0, t - 1, 1)?, &self.ln_f, &self.config)?; // (1, C)
        let x = last.flatten_all()?.to_vec1::<f32>()?; // (C,)
        let logits = &mut self.logits;
        with_f32(&self.wte, |wte| gemv(&x, wte, None, logits))?;
        Ok(&self.logits)
    }

    /// Causal self-attention of the T new positions over the cache, writing their k and v first.
    fn attention(&mut self, layer: usize, qkv: &Tensor, pos: usize) -> Result<Tensor> {
        let c = self.config.n_embd;
        let (nh, hs) = (self.config.n_head, self.config.head_size());
        let qkv = qkv.flatten_all()?.to_vec1::<f32>()?; // (T, 3C)
        let t = qkv.len() / (3 * c);
        let (kc, vc) = (&mut self.k_cache[layer], &mut self.v_cache[layer]);
        for i in 0..t {
            let row = &qkv[i * 3 * c..(i + 1) * 3 * c];
            kc[(pos + i) * c..(pos + i + 1) * c].copy_from_slice(&row[c..2 * c]);
            vc[(pos + i) * c..(pos + i + 1) * c].copy_from_slice(&row[2 * c..]);
        }
        let mut scale = if self.config.scale_attn_weights {
            1.0 / (hs as f32).sqrt()
        } else {
            1.0
        };
        if self.config.scale_attn_by_inverse_layer_idx {
            scale /= (layer + 1) as f32;
        }
        let mut out = vec![0.0f32; t * c];
        let scores = &mut self.scores;
        for i in 0..t {
            let n = pos + i + 1; // positions this query sees
            for head in 0..nh {
                let q = &qkv[i * 3 * c + head * hs..][..hs];
                let mut max = f32::NEG_INFINITY;
                for (p, s) in scores[..n].iter_mut().enumerate() {
                    let k = &kc[p * c + head * hs..][..hs];
                    *s = dot(q, k) * scale;
                    max = max.max(*s);
                }
                let mut sum = 0.0f32;
                for s in &mut scores[..n] {
                    *s = (*s - max).exp();
                    sum += *s;
                }
                let o = &mut out[i * c + head * hs..][..hs];
                for (p, s) in scores[..n].iter().enumerate() {
                    let w = s / sum;
                    let v = &vc[p * c + head * hs..][..hs];
                    for (o, v) in o.iter_mut().zip(v) {
                        *o += w * v;
                    }
                }
            }
        }
        Ok(Tensor::from_vec(out, (t, c), &Device::Cpu)?)
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    // Eight partial sums let the compiler vectorise without -ffast-math.
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    acc.iter().sum::<f32>() + tail
}

fn layer_norm_forward(x: &Tensor, ln: &LayerNorm, config: &Config) -> Result<Tensor> {
    let mean = x.mean_keepdim(D::Minus1)?;
    let xc = x.broadcast_sub(&mean)?;
    let var = xc.sqr()?.mean_keepdim(D::Minus1)?;
    let xn = xc.broadcast_div(&(var + config.layer_norm_epsilon as f64)?.sqrt()?)?;
    Ok(xn.broadcast_mul(&ln.weight)?.broadcast_add(&ln.bias)?)
}

/// y = x @ Wᵀ + b with W stored (out, in). One row (a decode step) takes the GEMV below, which
/// streams each weight row once; more rows take candle's matmul.
fn linear_forward(x: &Tensor, l: &Linear) -> Result<Tensor> {
    let (t, _) = x.dims2()?;
    let (n_out, _) = l.weight.dims2()?;
    if t == 1 {
        let x = x.flatten_all()?.to_vec1::<f32>()?;
        let mut y = vec![0.0f32; n_out];
        with_f32(&l.bias, |b| {
            with_f32(&l.weight, |w| gemv(&x, w, Some(b), &mut y))
        })??;
        return Ok(Tensor::from_vec(y, (1, n_out), &Device::Cpu)?);
    }
    x.matmul(&l.weight.t()?)?
        .broadcast_add(&l.bias)
        .map_err(Error::from)
}

/// y[j] = dot(x, w[j]) (+ b[j]) for the rows of w (out, in).
fn gemv(x: &[f32], w: &[f32], b: Option<&[f32]>, y: &mut [f32]) {
    for (j, (row, y)) in w.chunks_exact(x.len()).zip(y.iter_mut()).enumerate() {
        *y = dot(x, row) + b.map_or(0.0, |b| b[j]);
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
