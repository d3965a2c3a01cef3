//! Sizes decided before anything is allocated: a model that cannot fit this device's limits
//! fails before a byte of weights is read, and `Auto` can fall back to the CPU.

use super::context::{Context, Format};
use super::kernels::{self as k, Kernel};
use crate::config::{Config, MAX_VERIFY};
use crate::error::{Error, Result};

/// What `new` decided for this model on this device.
pub(super) struct Plan {
    /// Vocab rows per wte chunk.
    pub(super) wte_rows: usize,
}

impl Plan {
    pub(super) fn new(config: &Config, ctx: &Context) -> Result<Plan> {
        let (c, hid, n_ctx, v) = (
            config.n_embd,
            config.n_inner,
            config.n_positions,
            config.vocab_size,
        );
        let limit = ctx.max_binding.min(ctx.max_buffer);
        let too_big = |what: &str, bytes: u64| {
            Error::Gpu(format!(
                "the model does not fit this GPU's limits: {what} needs {bytes} bytes in one \
                 buffer, the device allows {limit}"
            ))
        };
        // Sizes in u64, so nothing wraps on wasm32 before it is compared.
        let (cu, hu, nu) = (c as u64, hid as u64, n_ctx as u64);
        // Bytes of a (K, N) matrix in the format the GPU holds it (q8: its scales too, and K
        // padded to whole blocks of 32: `formats::to_q8`).
        let q8 = ctx.format == Format::Q8;
        let matrix = |k: u64, n: u64| {
            let k = if q8 { k.div_ceil(32) * 32 } else { k };
            ((k * n) as f64 * ctx.format.bytes_per_weight()).ceil() as u64 + 4
        };
        for (what, bytes) in [
            ("wpe", nu * cu * 4),
            ("the MLP activations (n_ctx × n_inner)", nu * hu * 4),
            ("qkv (n_ctx × 3·n_embd)", nu * 3 * cu * 4),
            ("mlp.c_fc", matrix(cu, hu)),
            ("mlp.c_proj", matrix(hu, cu)),
            ("attn.c_attn", matrix(cu, 3 * cu)),
            (
                "the logits of a verification pass",
                MAX_VERIFY as u64 * v as u64 * 4,
            ),
        ] {
            if bytes > limit {
                return Err(too_big(what, bytes));
            }
        }
        // With q8 weights a product's kernel keeps the block scales of its input rows in
        // workgroup memory, room for rows of so many values (act_q8.wgsl's ACT_BLOCKS · 32).
        if ctx.format == Format::Q8 {
            for (what, n, most) in [
                ("n_embd (the head's input)", c, k::HEAD_MAX_C),
                ("n_embd", c, k::GEMV_MAX_K),
                ("n_inner", hid, k::GEMV_MAX_K),
            ] {
                if n > most {
                    return Err(Error::Gpu(format!(
                        "the GPU's 8-bit kernels take rows of at most {most} values: {what} is {n}"
                    )));
                }
            }
        }
        // One row of wte (q8: its blocks' scales, and room for the padding to a word).
        let (row, pad) = match ctx.format {
            Format::Q8 => (cu + 4 * cu.div_ceil(32), 3),
            f => (cu * f.bytes_per_weight() as u64, 0),
        };
        let wte_rows = (limit.saturating_sub(pad) / row) as usize;
        if wte_rows == 0 {
            return Err(too_big("one row of wte", row));
        }
        let wte_rows = wte_rows.min(v);
        let most = ctx.max_workgroups as usize;
        let widest = [
            k::elementwise_grid(n_ctx, c)[0],
            k::lm_head_grid(wte_rows, 1)[0],
            k::matmul_grid(Kernel::MatmulTiled, n_ctx, hid.max(3 * c))[0],
            k::attention_grid(config.n_head, n_ctx)[1],
        ];
        if widest.iter().any(|&g| g as usize > most) {
            return Err(Error::Gpu(format!(
                "the model needs more than the {most} workgroups per dimension this GPU allows"
            )));
        }
        Ok(Plan { wte_rows })
    }
}
