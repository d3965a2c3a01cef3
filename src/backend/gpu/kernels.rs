//! The WGSL kernels (`shaders/*.wgsl`, one per file): their bind-group layouts and pipelines,
//! built once per device, and the dispatch grids (the uniform structs that mirror the WGSL ones:
//! `uniforms.rs`, re-exported here; each kernel's source as a device compiles it: `sources.rs`).
//!
//! Every kernel binds one group whose entries are, in order, uniforms, read-only storage and
//! read-write storage, as the header of its `.wgsl` lists them. Grids are computed here, next to
//! the workgroup sizes they must agree with, so the model and the tests dispatch alike.

pub use super::uniforms::*;

/// One compute kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// x = wte[ids] + wpe[pos..], one vocab chunk of wte per dispatch.
    Embedding,
    /// Row-wise LayerNorm (ln_1, ln_2, ln_f).
    LayerNorm,
    /// x @ w + b with a fused epilogue, 16×16 tiles: prefill.
    MatmulTiled,
    /// x @ w + b with a fused epilogue, one row at a time: decode.
    MatmulGemv,
    /// Writes the new positions' k and v into the cache.
    KvWrite,
    /// Causal attention of the new queries over the cache.
    Attention,
    /// logits = ln_f(x_last) @ wteᵀ over one vocab chunk.
    LmHead,
    /// `MatmulGemv` of LayerNorm(x): decode's ln_1 → c_attn and ln_2 → c_fc, one dispatch each.
    MatmulGemvLn,
    /// The index of each logits row's largest value: greedy's choice, read back in 4 bytes.
    Argmax,
    /// The k largest values of each logits row and their indices: sampling's candidates.
    TopK,
    /// A prompt's product inputs rounded in place as the CPU's q8 rounds them (q8 weights).
    Quantize,
}

/// How a kernel sees one binding.
#[derive(Clone, Copy)]
enum Binding {
    Uniform,
    Read,
    ReadWrite,
}

use Binding::{Read, ReadWrite, Uniform};

impl Kernel {
    /// Every kernel, in the enum's order (`kernel as usize` indexes the pipelines).
    pub const ALL: [Kernel; 11] = [
        Kernel::Embedding,
        Kernel::LayerNorm,
        Kernel::MatmulTiled,
        Kernel::MatmulGemv,
        Kernel::KvWrite,
        Kernel::Attention,
        Kernel::LmHead,
        Kernel::MatmulGemvLn,
        Kernel::Argmax,
        Kernel::TopK,
        Kernel::Quantize,
    ];

    /// The file stem under `src/backend/gpu/shaders/`.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Embedding => "embedding",
            Kernel::LayerNorm => "layernorm",
            Kernel::MatmulTiled => "matmul_tiled",
            Kernel::MatmulGemv => "matmul_gemv",
            Kernel::KvWrite => "kv_write",
            Kernel::Attention => "attention",
            Kernel::LmHead => "lm_head",
            Kernel::MatmulGemvLn => "matmul_gemv_ln",
            Kernel::Argmax => "argmax",
            Kernel::TopK => "top_k",
            Kernel::Quantize => "quantize",
        }
    }

    /// The pipeline constants for weights in `format`, `rows` rows per workgroup (the kernels
    /// with `BATCH_ROWS`) and trees counting on subgroups of `subgroup` lanes (1: none).
    fn constants(
        self,
        format: super::Format,
        rows: usize,
        subgroup: u32,
    ) -> Vec<(&'static str, f64)> {
        let mut constants = Vec::new();
        // With q8 weights, the CPU's q8 rounding of activations and KV cache.
        if let Some(switch) = self.q8_switch().filter(|_| format == super::Format::Q8) {
            constants.push((switch, 1.0));
        }
        if self.rows_per_group() > 1 {
            constants.push(("BATCH_ROWS", rows as f64));
        }
        if self.reduces() {
            constants.push(("SUBGROUP", subgroup as f64));
        }
        constants
    }

    /// Whether the kernel's reductions are trees (lanes.wgsl after its source: `SUBGROUP`).
    pub fn reduces(self) -> bool {
        self.parts().contains(&"lanes")
    }

    /// The pipeline constant that turns on, with q8 weights, the CPU's q8 rounding of what the
    /// kernel reads: `Q8_ACT` for a product's input row (act_q8.wgsl), `Q8_KV` for the KV cache
    /// and attention's query and weights.
    pub fn q8_switch(self) -> Option<&'static str> {
        match self {
            Kernel::MatmulGemv | Kernel::MatmulGemvLn | Kernel::LmHead => Some("Q8_ACT"),
            Kernel::KvWrite | Kernel::Attention => Some("Q8_KV"),
            _ => None,
        }
    }

    fn bindings(self) -> &'static [Binding] {
        match self {
            Kernel::Embedding => &[Uniform, Uniform, Read, Read, Read, Read, ReadWrite],
            Kernel::LayerNorm => &[Uniform, Uniform, Read, Read, Read, ReadWrite],
            Kernel::MatmulTiled | Kernel::MatmulGemv => {
                &[Uniform, Uniform, Read, Read, Read, ReadWrite]
            }
            Kernel::KvWrite => &[Uniform, Uniform, Read, Read, ReadWrite, ReadWrite],
            Kernel::Attention => &[Uniform, Uniform, Read, Read, Read, Read, ReadWrite],
            Kernel::LmHead => &[Uniform, Uniform, Read, Read, ReadWrite],
            Kernel::MatmulGemvLn => &[Uniform, Uniform, Read, Read, Read, Read, Read, ReadWrite],
            Kernel::Argmax | Kernel::TopK => &[Uniform, Read, ReadWrite],
            Kernel::Quantize => &[Uniform, Uniform, ReadWrite],
        }
    }

    /// The two matmuls share one layout, so a layer's bind groups serve prefill and decode.
    /// The most rows of its input one workgroup of this kernel takes (its WGSL's ROWS_PER or
    /// POS), each weight read once for all of them; 1 for the kernels without `BATCH_ROWS`.
    pub fn rows_per_group(self) -> usize {
        match self {
            Kernel::MatmulGemv | Kernel::MatmulGemvLn => GEMV_GROUP_ROWS,
            Kernel::LmHead => HEAD_POSITIONS,
            _ => 1,
        }
    }

    fn layout_index(self) -> usize {
        match self {
            Kernel::MatmulGemv => Kernel::MatmulTiled as usize,
            k => k as usize,
        }
    }
}

/// Largest head size attention.wgsl supports (its per-thread accumulators).
pub const MAX_HEAD_SIZE: usize = 256;

fn groups(n: usize, per: usize) -> u32 {
    n.div_ceil(per) as u32
}

/// Grid of embedding.wgsl and kv_write.wgsl: one thread per element of (T, C).
pub fn elementwise_grid(t: usize, c: usize) -> [u32; 3] {
    [groups(t * c, 256), 1, 1]
}

/// Grid of layernorm.wgsl: a workgroup per row, or one for ln_f's last row.
pub fn layernorm_grid(t: usize, last_only: bool) -> [u32; 3] {
    [if last_only { 1 } else { t as u32 }, 1, 1]
}

/// Rows a matmul_gemv.wgsl or matmul_gemv_ln.wgsl workgroup takes (their ROWS_PER), each weight
/// read once for all of them.
pub const GEMV_GROUP_ROWS: usize = 4;

/// The longest input row (K) the GEMV kernels round for q8 weights (their ACT_BLOCKS · 32).
pub const GEMV_MAX_K: usize = 256 * 32;

/// Grid of a matmul over T rows and N columns.
/// (One row: one workgroup row, as `Kernels::dispatch` runs one row per workgroup then.)
pub fn matmul_grid(kernel: Kernel, t: usize, n: usize) -> [u32; 3] {
    match kernel {
        Kernel::MatmulGemv | Kernel::MatmulGemvLn => [groups(n, 8), groups(t, GEMV_GROUP_ROWS), 1],
        _ => [groups(n, 16), groups(t, 16), 1],
    }
}

/// The matmul for T new positions: GEMV-shaped for decode, tiled for prefill.
pub fn matmul_for(t: usize) -> Kernel {
    if t == 1 {
        Kernel::MatmulGemv
    } else {
        Kernel::MatmulTiled
    }
}

/// Grid of attention.wgsl: a workgroup per (head, query).
pub fn attention_grid(nh: usize, t: usize) -> [u32; 3] {
    [nh as u32, t as u32, 1]
}

/// Rows of xn an lm_head.wgsl workgroup takes (its POS), each weight read once for all of them.
pub const HEAD_POSITIONS: usize = 8;

/// The longest row of xn (C) lm_head.wgsl rounds for q8 weights (its ACT_BLOCKS · 32).
pub const HEAD_MAX_C: usize = 64 * 32;

/// Grid of lm_head.wgsl: 8 vocab rows per workgroup, for `positions` rows of xn
/// (`HEAD_POSITIONS` per workgroup).
pub fn lm_head_grid(rows: usize, positions: usize) -> [u32; 3] {
    [groups(rows, 8), groups(positions, HEAD_POSITIONS), 1]
}

/// Grid of quantize.wgsl: a thread per block of 32 of the `t` rows of `k` values.
pub fn quantize_grid(t: usize, k: usize) -> [u32; 3] {
    [groups(t * k.div_ceil(32), 64), 1, 1]
}

/// Grid of argmax.wgsl and top_k.wgsl: a workgroup per logits row.
pub fn argmax_grid(rows: usize) -> [u32; 3] {
    [rows as u32, 1, 1]
}

/// Every kernel's layout and pipeline on one device.
pub struct Kernels {
    layouts: Vec<wgpu::BindGroupLayout>,
    /// Each kernel's pipeline, one row of its input per workgroup.
    pipelines: Vec<wgpu::ComputePipeline>,
    /// For the kernels with `BATCH_ROWS`: `rows_per_group` rows per workgroup.
    batched: Vec<Option<wgpu::ComputePipeline>>,
}

impl Kernels {
    /// Compiles every kernel for weight matrices held in `format` (with q8 and `packed`, those
    /// with a packed part take it: `Kernel::source_for`), the trees' strides below `subgroup`
    /// lanes by shuffles (1: none; `Context::subgroup`). Errors surface through the caller's
    /// error scopes.
    pub fn new(
        device: &wgpu::Device,
        format: super::Format,
        packed: bool,
        subgroup: u32,
    ) -> Kernels {
        let layouts: Vec<_> = Kernel::ALL
            .iter()
            .map(|k| {
                let entries: Vec<_> = k
                    .bindings()
                    .iter()
                    .enumerate()
                    .map(|(i, b)| wgpu::BindGroupLayoutEntry {
                        binding: i as u32,
                        visibility: wgpu::ShaderStages::COMPUTE,
                        ty: wgpu::BindingType::Buffer {
                            ty: match b {
                                Uniform => wgpu::BufferBindingType::Uniform,
                                Read => wgpu::BufferBindingType::Storage { read_only: true },
                                ReadWrite => wgpu::BufferBindingType::Storage { read_only: false },
                            },
                            has_dynamic_offset: false,
                            min_binding_size: None,
                        },
                        count: None,
                    })
                    .collect();
                device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                    label: Some(k.name()),
                    entries: &entries,
                })
            })
            .collect();
        // A kernel with `BATCH_ROWS` twice: one row per workgroup, and `rows_per_group`.
        let pipeline = |k: Kernel, rows: usize| {
            let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(k.name()),
                source: wgpu::ShaderSource::Wgsl(k.source_for(format, packed, subgroup > 1)),
            });
            let constants = k.constants(format, rows, subgroup);
            let layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some(k.name()),
                bind_group_layouts: &[Some(&layouts[k.layout_index()])],
                immediate_size: 0,
            });
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(k.name()),
                layout: Some(&layout),
                module: &module,
                entry_point: Some("main"),
                compilation_options: wgpu::PipelineCompilationOptions {
                    constants: &constants,
                    // Their workgroup memory, sized for their most rows, is written before it
                    // is read: zeroing it first (the default) cost a sequence's step on
                    // lavapipe 8% in q8. Browsers zero it whatever this says.
                    zero_initialize_workgroup_memory: k.rows_per_group() == 1,
                },
                cache: None,
            })
        };
        let pipelines = Kernel::ALL.iter().map(|&k| pipeline(k, 1)).collect();
        let batched = Kernel::ALL
            .iter()
            .map(|&k| (k.rows_per_group() > 1).then(|| pipeline(k, k.rows_per_group())))
            .collect();
        Kernels {
            layouts,
            pipelines,
            batched,
        }
    }

    /// A bind group for `kernel` with `buffers` bound whole, in the order its header lists them.
    pub fn bind_group(
        &self,
        device: &wgpu::Device,
        kernel: Kernel,
        label: &str,
        buffers: &[&wgpu::Buffer],
    ) -> wgpu::BindGroup {
        let entries: Vec<_> = buffers
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: b.as_entire_binding(),
            })
            .collect();
        device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(label),
            layout: &self.layouts[kernel.layout_index()],
            entries: &entries,
        })
    }

    /// Records one dispatch of `kernel` over `grid` workgroups, for `rows` rows of its input:
    /// more than one takes the kernel's batched pipeline where it has one (the grid functions
    /// size the grid for that).
    pub fn dispatch(
        &self,
        pass: &mut wgpu::ComputePass<'_>,
        kernel: Kernel,
        bind_group: &wgpu::BindGroup,
        grid: [u32; 3],
        rows: usize,
    ) {
        let batched = self.batched[kernel as usize].as_ref().filter(|_| rows > 1);
        pass.set_pipeline(batched.unwrap_or(&self.pipelines[kernel as usize]));
        pass.set_bind_group(0, bind_group, &[]);
        pass.dispatch_workgroups(grid[0], grid[1], grid[2]);
    }
}
