//! The WebGPU backend on wgpu: WGSL kernels (`shaders/`), the device and its limits
//! (`context`, with whether its subgroups serve the kernels' reductions), the
//! kernels' sources (`sources`), pipelines and grids (`kernels`), loading a model onto the device
//! (`load`) and GPT-2's forward pass as a fixed sequence of dispatches (`forward`).
//!
//! Everything is made at load: f32 weights uploaded once, activations sized for the whole
//! context, the KV cache, the uniform buffers, and one bind group per dispatch. A pass then
//! writes the ids, T and the row table (each row's position and KV cache slot), records every
//! dispatch into one compute pass, copies the logits it needs to a staging buffer (or, for
//! greedy, each sequence's argmax chosen on the device), submits once and reads them back. The rows of a pass may belong to several sequences (a batch's decode
//! step): the products run over all of them, attention over each row's own slot.

mod ahead;
pub mod context;
mod formats;
mod forward;
pub mod kernels;
mod load;
mod plan;
mod slots;
mod sources;
mod uniforms;

pub use context::{Context, Format, GpuOptions};
pub use load::GpuParts;

use crate::config::Config;
use kernels::Kernels;

/// What passes asked of the GPU: queue submissions, compute dispatches and bytes read back to
/// the host: what a step costs besides its kernels' own work. `{ passes, submissions, dispatches,
/// readbackBytes, ahead }` in JSON.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuCounters {
    /// Forward passes.
    pub passes: usize,
    pub submissions: usize,
    pub dispatches: usize,
    pub readback_bytes: usize,
    /// Passes of them submitted ahead: before the pass they follow had been read back, their
    /// ids that pass's argmaxes, copied on the device (`ahead.rs`).
    pub ahead: usize,
    /// Passes submitted ahead that no caller asked for after all (every sequence stopped, or
    /// the next pass was another): only in `totals`.
    #[serde(skip)]
    pub unused: usize,
}

impl std::ops::AddAssign for GpuCounters {
    fn add_assign(&mut self, o: Self) {
        self.passes += o.passes;
        self.submissions += o.submissions;
        self.dispatches += o.dispatches;
        self.readback_bytes += o.readback_bytes;
        self.ahead += o.ahead;
        self.unused += o.unused;
    }
}

impl std::ops::Sub for GpuCounters {
    type Output = Self;
    fn sub(self, o: Self) -> Self {
        GpuCounters {
            passes: self.passes - o.passes,
            submissions: self.submissions - o.submissions,
            dispatches: self.dispatches - o.dispatches,
            readback_bytes: self.readback_bytes - o.readback_bytes,
            ahead: self.ahead - o.ahead,
            unused: self.unused - o.unused,
        }
    }
}

/// One vocab chunk of wte: wte (V, C) is split into chunks, each its own buffer, when it exceeds
/// the device's storage-binding limit (GPT-2 small's is 147 MiB against WebGPU's default
/// 128 MiB); the embedding and the tied head run once per chunk.
struct WteChunk {
    rows: usize,
    embedding: wgpu::BindGroup,
    lm_head: wgpu::BindGroup,
    _buffers: [wgpu::Buffer; 2], // (rows, C) weights, the chunk's dims
}

/// A Conv1D layer on the GPU.
struct Linear {
    bind: wgpu::BindGroup,
    /// matmul_gemv_ln's bind group, for the layers with a LayerNorm before them (c_attn, c_fc).
    fused: Option<wgpu::BindGroup>,
    n_out: usize,
    _buffers: [wgpu::Buffer; 2], // weight (in, out), bias (out,)
}

/// quantize.wgsl over the inputs of a prompt's tiled products (q8 weights): the LayerNorms'
/// output (`xn`), attention's (`att`) and the MLP's GELU (`fc`). Decode's GEMV kernels round
/// their input row themselves (act_q8.wgsl).
struct Rounding {
    xn: wgpu::BindGroup,
    att: wgpu::BindGroup,
    fc: wgpu::BindGroup,
    _dims: [wgpu::Buffer; 2], // K = C, K = n_inner
}

/// One transformer block `h.{i}`: its weights live in the bind groups that use them.
struct Block {
    ln_1: wgpu::BindGroup,
    c_attn: Linear, // (C, 3C)
    kv_write: wgpu::BindGroup,
    attention: wgpu::BindGroup,
    attn_c_proj: Linear, // (C, C)
    ln_2: wgpu::BindGroup,
    c_fc: Linear,       // (C, H)
    mlp_c_proj: Linear, // (H, C)
    /// The KV caches of every slot: keys and values, (capacity · n_ctx, C) each, slot s's
    /// rows from s · n_ctx on.
    kv: [wgpu::Buffer; 2],
    /// Attention's uniform (its scale differs per layer), kept to bind a grown cache.
    att_dims: wgpu::Buffer,
    _buffers: Vec<wgpu::Buffer>,
}

/// What kv_write and attention bind besides a block's KV cache, kept so that their bind groups
/// can be made again when the caches grow to hold more slots (`slots.rs`).
struct KvInputs {
    step: wgpu::Buffer,
    kv_dims: wgpu::Buffer,
    qkv: wgpu::Buffer,
    rows: wgpu::Buffer, // (n_ctx, 2) u32: the row table (`kernels::row_table`)
    att: wgpu::Buffer,
}

/// The GPU backend: weights, activations and KV cache on one device.
pub struct GpuBackend {
    config: Config,
    ctx: Context,
    kernels: Kernels,
    wte: Vec<WteChunk>,
    blocks: Vec<Block>,
    ln_f: wgpu::BindGroup,     // the last row into xn's row 0
    ln_f_all: wgpu::BindGroup, // every row (the verification pass)
    ids: wgpu::Buffer,         // (n_ctx,) u32
    logits: wgpu::Buffer,      // (MAX_VERIFY, V)
    staging: wgpu::Buffer,     // (MAX_VERIFY, V + C) mappable copy of logits, then xn's rows
    logits_host: Vec<f32>,     // (rows, V) logits, then (rows, C) ln_f's rows, of the last forward
    read_rows: usize,          // the rows the last forward read back
    xn: wgpu::Buffer,          // (n_ctx, C) LayerNorm output: ln_f's rows after a forward
    argmax: wgpu::BindGroup,   // the logits' rows into `chosen`
    chosen: wgpu::Buffer,      // (MAX_VERIFY,) u32: each row's argmax
    chosen_host: Vec<u32>,     // the argmaxes of the last pass, when it asked for them
    top_k: wgpu::BindGroup,    // the logits' rows into `top`
    top: wgpu::Buffer,         // (MAX_VERIFY, MAX_TOP_K, 2) u32: each row's candidates
    top_dims: wgpu::Buffer,    // top_k.wgsl's V and k, written by a pass that asks for candidates
    top_host: Vec<(f32, u32)>, // the candidates of the last pass, k per row, when it asked
    /// With q8 weights: a prompt's product inputs rounded as the CPU's q8 rounds them.
    rounding: Option<Rounding>,
    _buffers: Vec<wgpu::Buffer>, // wpe, activations, uniforms: kept for the bind groups
    /// Bytes of the weights' buffers on the device.
    weight_bytes: u64,
    last_pass: GpuCounters,
    totals: GpuCounters,
    kv_inputs: KvInputs,
    /// KV cache slots made (`kv_slots`), and how many the blocks' caches have room for.
    slots: usize,
    capacity: usize,
    /// The ids of a pass, and the logits of a pass over sequences run one after another.
    ids_host: Vec<u32>,
    gathered: Vec<f32>,
    /// A greedy decode step submitted before the one it follows was read back (`ahead.rs`).
    ahead: ahead::Ahead,
}

impl GpuBackend {
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Weight bytes one decode step reads: the matrices (f32, f16 or q8), f32 biases and
    /// LayerNorm parameters.
    pub fn decode_weight_bytes(&self) -> f64 {
        (self.config).decode_weight_bytes(self.ctx.format.bytes_per_weight())
    }

    /// "f32", "f16" or "q8": the weight matrices' format.
    pub fn dtype_name(&self) -> &'static str {
        self.ctx.format.name()
    }

    /// How the q8 kernels take their products: "dot4I8Packed" (four weights at a time, see
    /// `Context::q8_packed`) or "bytes" (a weight at a time); `None` for f32 and f16 weights.
    pub fn q8_kernel(&self) -> Option<&'static str> {
        (self.ctx.format == Format::Q8).then_some(if self.ctx.q8_packed {
            "dot4I8Packed"
        } else {
            "bytes"
        })
    }

    /// The subgroup size the kernels' trees count on (`Context::subgroup`): 1 where they use no
    /// subgroups.
    pub fn subgroup(&self) -> u32 {
        self.ctx.subgroup
    }

    /// The adapter in words, e.g. `llvmpipe (LLVM 19.1.7, 256 bits) (Vulkan, Cpu)`.
    pub fn adapter(&self) -> &str {
        &self.ctx.adapter
    }

    /// How many buffers wte is split over (1 when it fits one storage binding).
    pub fn wte_chunks(&self) -> usize {
        self.wte.len()
    }

    /// Bytes on the device for the weights (their buffers, in the dtype they hold) and for the
    /// KV caches (every slot they have room for).
    pub fn memory(&self) -> (u64, u64) {
        let kv = 2 * self.blocks.len() as u64 * self.capacity as u64 * self.slot_bytes();
        (self.weight_bytes, kv)
    }

    /// What the last pass asked of the GPU, all its submissions together.
    pub fn last_pass(&self) -> GpuCounters {
        self.last_pass
    }

    /// What every pass since the model was loaded asked of the GPU, and the KV cache copies'
    /// submissions.
    pub fn totals(&self) -> GpuCounters {
        self.totals
    }

    /// Each sequence's argmax after a `Want::Argmax` pass.
    pub fn chosen(&self) -> &[u32] {
        &self.chosen_host
    }

    /// Each sequence's candidates after a `Want::Top` pass.
    pub fn top(&self) -> &[(f32, u32)] {
        &self.top_host
    }

    /// The logits of the last pass (see `Backend::logits`).
    pub fn logits(&self) -> &[f32] {
        &self.logits_host[..self.read_rows * self.config.vocab_size]
    }

    /// Rows `from..to` of the last verification pass's logits (all computed already).
    pub fn rows(&self, from: usize, to: usize) -> crate::error::Result<&[f32]> {
        let v = self.config.vocab_size;
        self.logits().get(from * v..to * v).ok_or_else(|| {
            crate::error::Error::State(format!("rows {from}..{to} were not computed"))
        })
    }

    /// Row `r` of the last pass's final hidden state (after ln_f): of every row after a
    /// verification pass, else of its last row (row 0); none after a pass over several
    /// sequences.
    pub fn hidden(&self, r: usize) -> Option<&[f32]> {
        let (c, v) = (self.config.n_embd, self.config.vocab_size);
        self.logits_host[self.read_rows * v..].get(r * c..(r + 1) * c)
    }

    /// Destroys the device, as a driver reset would; later forwards fail with `Error::Gpu`.
    pub fn lose_device(&self) {
        self.ctx.lose_device();
    }
}
