//! GPT-2's forward pass on the GPU, following transformers' `modeling_gpt2.py` like the CPU
//! backend does, as a fixed sequence of WGSL dispatches.
//!
//! Everything is made at load: f32 weights uploaded once, activations sized for the whole
//! context, the KV cache, the uniform buffers, and one bind group per dispatch. A forward then
//! writes the ids and (T, pos), records every dispatch into one compute pass, copies the logits
//! of the last position to a staging buffer, submits once and reads V floats back.
//!
//! wte (V, C) is split into vocab chunks, each its own buffer, when it exceeds the device's
//! storage-binding limit (GPT-2 small's is 147 MiB against WebGPU's default 128 MiB); the
//! embedding and the tied head run once per chunk.

use super::context::{Context, GpuOptions};
use super::kernels::{self as k, Epilogue, Kernel, Kernels};
use crate::config::{Activation, Config};
use crate::error::{Error, Result};
use crate::weights::{self, Gpt2Weights, TensorRef};

/// One vocab chunk of wte.
struct WteChunk {
    rows: usize,
    _wte: wgpu::Buffer, // (rows, C)
}

/// A Conv1D layer on the GPU.
struct Linear {
    _weight: wgpu::Buffer, // (in, out)
    _bias: wgpu::Buffer,   // (out,)
    bind: wgpu::BindGroup,
    n_out: usize,
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
    _buffers: Vec<wgpu::Buffer>,
}

/// The GPU backend: weights, activations and KV cache on one device.
pub struct GpuBackend {
    config: Config,
    ctx: Context,
    kernels: Kernels,
    wte: Vec<WteChunk>,
    h: Vec<Block>,
    embedding: Vec<wgpu::BindGroup>, // one per wte chunk
    ln_f: wgpu::BindGroup,
    lm_head: Vec<wgpu::BindGroup>, // one per wte chunk
    step: wgpu::Buffer,            // uniform Step: T, pos
    ids: wgpu::Buffer,             // (n_ctx,) u32
    logits: wgpu::Buffer,          // (V,)
    staging: wgpu::Buffer,         // (V,) mappable copy of logits
    logits_host: Vec<f32>,         // (V,)
    _buffers: Vec<wgpu::Buffer>,   // wpe, activations, KV cache, uniforms: kept for the bind groups
    dispatches: usize,
}

impl GpuBackend {
    /// Opens a device, checks the model fits its limits, uploads the weights and builds every
    /// buffer, pipeline and bind group. Any failure is an `Error::Gpu` saying why.
    pub async fn new(config: &Config, w: &Gpt2Weights<'_>, opts: &GpuOptions) -> Result<Self> {
        if config.activation != Activation::GeluTanh {
            return Err(Error::Gpu(
                "only GPT-2's tanh GELU is implemented on the GPU; this model uses the erf form"
                    .into(),
            ));
        }
        if config.head_size() > k::MAX_HEAD_SIZE {
            return Err(Error::Gpu(format!(
                "head size {} is above the {} the attention kernel supports",
                config.head_size(),
                k::MAX_HEAD_SIZE
            )));
        }
        let ctx = Context::new(opts).await?;
        let plan = Plan::new(config, &ctx)?;
        let scopes = ctx.scopes();
        let kernels = Kernels::new(&ctx.device);
        let backend = GpuBackend::build(config, w, ctx, kernels, &plan);
        scopes.close("loading the model onto the GPU").await?;
        backend.ctx.check()?;
        Ok(backend)
    }

    fn build(
        config: &Config,
        w: &Gpt2Weights<'_>,
        ctx: Context,
        kernels: Kernels,
        plan: &Plan,
    ) -> Self {
        let (c, hid, n_ctx, v) = (
            config.n_embd,
            config.n_inner,
            config.n_positions,
            config.vocab_size,
        );
        // Widened before multiplying: on wasm32 a usize product could wrap. (Plan::new checked
        // every size against the device's limits in u64 already.)
        let f = |n: usize| n as u64 * 4;
        let bind = |kernel, label: &str, bufs: &[&wgpu::Buffer]| {
            kernels.bind_group(&ctx.device, kernel, label, bufs)
        };

        let step = ctx.uniform("step", &k::Step::default());
        let ids = ctx.storage("ids", f(n_ctx)); // (n_ctx,) u32
        let x = ctx.storage("x", f(n_ctx * c)); // (n_ctx, C) residual stream
        let xn = ctx.storage("xn", f(n_ctx * c)); // (n_ctx, C) LayerNorm output
        let qkv = ctx.storage("qkv", f(n_ctx * 3 * c)); // (n_ctx, 3C)
        let att = ctx.storage("att", f(n_ctx * c)); // (n_ctx, C) attention output
        let fc = ctx.storage("fc", f(n_ctx * hid)); // (n_ctx, H) GELU(c_fc)
        let logits = ctx.storage("logits", f(v)); // (V,)
        let staging = ctx.staging("logits staging", f(v)); // (V,)
        let wpe = upload(&ctx, "wpe", &w.wpe); // (n_ctx, C)

        let wte_f32 = w.wte.to_f32(); // (V, C)
        let mut wte = Vec::new();
        let mut embedding = Vec::new();
        let mut lm_head = Vec::new();
        let mut uniforms = Vec::new();
        for start in (0..v).step_by(plan.wte_rows) {
            let rows = plan.wte_rows.min(v - start);
            let buf = ctx.upload("wte chunk", &wte_f32[start * c..(start + rows) * c]); // (rows, C)
            let dims = ctx.uniform(
                "wte chunk dims",
                &k::ChunkDims {
                    c: c as u32,
                    chunk_start: start as u32,
                    chunk_rows: rows as u32,
                    _pad: 0,
                },
            );
            embedding.push(bind(
                Kernel::Embedding,
                "embedding",
                &[&step, &dims, &ids, &buf, &wpe, &x],
            ));
            lm_head.push(bind(
                Kernel::LmHead,
                "lm_head",
                &[&dims, &xn, &buf, &logits],
            ));
            wte.push(WteChunk { rows, _wte: buf });
            uniforms.push(dims);
        }
        drop(wte_f32);

        let ln_dims = |last_only| k::LayerNormDims {
            c: c as u32,
            last_only,
            eps: config.layer_norm_epsilon,
            _pad: 0,
        };
        let ln_rows = ctx.uniform("ln dims", &ln_dims(0));
        let ln_last = ctx.uniform("ln_f dims", &ln_dims(1));
        let kv_dims = ctx.uniform(
            "kv dims",
            &k::KvDims {
                c: c as u32,
                _pad: [0; 3],
            },
        );
        let mm_dims = |n_in: usize, n_out: usize, e: Epilogue| {
            ctx.uniform(
                "matmul dims",
                &k::MatmulDims {
                    k: n_in as u32,
                    n: n_out as u32,
                    epilogue: e as u32,
                    _pad: 0,
                },
            )
        };
        let c_attn_dims = mm_dims(c, 3 * c, Epilogue::Bias);
        let attn_proj_dims = mm_dims(c, c, Epilogue::Residual);
        let c_fc_dims = mm_dims(c, hid, Epilogue::Gelu);
        let mlp_proj_dims = mm_dims(hid, c, Epilogue::Residual);

        let linear = |name: &str,
                      l: &weights::Linear,
                      dims: &wgpu::Buffer,
                      x_in: &wgpu::Buffer,
                      out: &wgpu::Buffer| {
            let weight = upload(&ctx, name, &l.weight);
            let bias = upload(&ctx, name, &l.bias);
            let bind = bind(
                Kernel::MatmulTiled,
                name,
                &[&step, dims, x_in, &weight, &bias, out],
            );
            Linear {
                _weight: weight,
                _bias: bias,
                bind,
                n_out: l.weight.shape[1],
            }
        };
        let layer_norm = |name: &str,
                          ln: &weights::LayerNorm,
                          dims: &wgpu::Buffer,
                          x_in: &wgpu::Buffer,
                          out: &wgpu::Buffer| {
            let (weight, bias) = (upload(&ctx, name, &ln.weight), upload(&ctx, name, &ln.bias));
            let g = bind(
                Kernel::LayerNorm,
                name,
                &[&step, dims, x_in, &weight, &bias, out],
            );
            (g, [weight, bias])
        };

        let mut h = Vec::with_capacity(config.n_layer);
        for (i, b) in w.h.iter().enumerate() {
            let k_cache = ctx.storage("k_cache", f(n_ctx * c)); // (n_ctx, C)
            let v_cache = ctx.storage("v_cache", f(n_ctx * c)); // (n_ctx, C)
            let mut scale = if config.scale_attn_weights {
                1.0 / (config.head_size() as f32).sqrt()
            } else {
                1.0
            };
            if config.scale_attn_by_inverse_layer_idx {
                scale /= (i + 1) as f32;
            }
            let att_dims = ctx.uniform(
                "attention dims",
                &k::AttentionDims {
                    c: c as u32,
                    nh: config.n_head as u32,
                    hs: config.head_size() as u32,
                    scale,
                },
            );
            let (ln_1, ln_1_bufs) = layer_norm("ln_1", &b.ln_1, &ln_rows, &x, &xn);
            let (ln_2, ln_2_bufs) = layer_norm("ln_2", &b.ln_2, &ln_rows, &x, &xn);
            h.push(Block {
                ln_1,
                c_attn: linear("attn.c_attn", &b.c_attn, &c_attn_dims, &xn, &qkv),
                kv_write: bind(
                    Kernel::KvWrite,
                    "kv_write",
                    &[&step, &kv_dims, &qkv, &k_cache, &v_cache],
                ),
                attention: bind(
                    Kernel::Attention,
                    "attention",
                    &[&step, &att_dims, &qkv, &k_cache, &v_cache, &att],
                ),
                attn_c_proj: linear("attn.c_proj", &b.attn_c_proj, &attn_proj_dims, &att, &x),
                ln_2,
                c_fc: linear("mlp.c_fc", &b.c_fc, &c_fc_dims, &xn, &fc),
                mlp_c_proj: linear("mlp.c_proj", &b.mlp_c_proj, &mlp_proj_dims, &fc, &x),
                _buffers: [k_cache, v_cache, att_dims]
                    .into_iter()
                    .chain(ln_1_bufs)
                    .chain(ln_2_bufs)
                    .collect(),
            });
        }
        let (ln_f, ln_f_bufs) = layer_norm("ln_f", &w.ln_f, &ln_last, &x, &xn);

        let mut buffers = vec![
            wpe,
            x,
            xn,
            qkv,
            att,
            fc,
            ln_rows,
            ln_last,
            kv_dims,
            c_attn_dims,
            attn_proj_dims,
            c_fc_dims,
            mlp_proj_dims,
        ];
        buffers.extend(ln_f_bufs);
        buffers.extend(uniforms);
        GpuBackend {
            config: config.clone(),
            ctx,
            kernels,
            wte,
            h,
            embedding,
            ln_f,
            lm_head,
            step,
            ids,
            logits,
            staging,
            logits_host: vec![0.0; v],
            _buffers: buffers,
            dispatches: 0,
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// f32 weights: 4 bytes each.
    pub fn decode_weight_bytes(&self) -> f64 {
        Gpt2Weights::decode_bytes(&self.config, 4.0)
    }

    /// The adapter in words, e.g. `llvmpipe (LLVM 19.1.7, 256 bits) (Vulkan, Cpu)`.
    pub fn adapter(&self) -> &str {
        &self.ctx.adapter
    }

    /// How many buffers wte is split over (1 when it fits one storage binding).
    pub fn wte_chunks(&self) -> usize {
        self.wte.len()
    }

    /// Compute dispatches the last forward recorded.
    pub fn dispatches(&self) -> usize {
        self.dispatches
    }

    /// Destroys the device, as a driver reset would; later forwards fail with `Error::Gpu`.
    pub fn lose_device(&self) {
        self.ctx.lose_device();
    }

    /// Logits of the last of `ids` at positions `pos..` (checked by the caller).
    pub async fn forward(&mut self, ids: &[u32], pos: usize) -> Result<&[f32]> {
        self.ctx.check()?;
        let (t, c, v) = (ids.len(), self.config.n_embd, self.config.vocab_size);
        let step = k::Step {
            t: t as u32,
            pos: pos as u32,
            _pad: [0; 2],
        };
        let q = &self.ctx.queue;
        q.write_buffer(&self.step, 0, bytemuck::bytes_of(&step));
        q.write_buffer(&self.ids, 0, bytemuck::cast_slice(ids));

        let scopes = self.ctx.scopes();
        let mut enc = self
            .ctx
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("forward"),
            });
        let mut n = 0;
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("forward"),
                timestamp_writes: None,
            });
            let kernels = &self.kernels;
            let mut run = |kernel, bind: &wgpu::BindGroup, grid| {
                kernels.dispatch(&mut pass, kernel, bind, grid);
                n += 1;
            };
            let mm = k::matmul_for(t);
            let grid = |l: &Linear| k::matmul_grid(mm, t, l.n_out);
            for bind in &self.embedding {
                run(Kernel::Embedding, bind, k::elementwise_grid(t, c));
            }
            for b in &self.h {
                run(Kernel::LayerNorm, &b.ln_1, k::layernorm_grid(t, false));
                run(mm, &b.c_attn.bind, grid(&b.c_attn));
                run(Kernel::KvWrite, &b.kv_write, k::elementwise_grid(t, c));
                let heads = k::attention_grid(self.config.n_head, t);
                run(Kernel::Attention, &b.attention, heads);
                run(mm, &b.attn_c_proj.bind, grid(&b.attn_c_proj));
                run(Kernel::LayerNorm, &b.ln_2, k::layernorm_grid(t, false));
                run(mm, &b.c_fc.bind, grid(&b.c_fc));
                run(mm, &b.mlp_c_proj.bind, grid(&b.mlp_c_proj));
            }
            run(Kernel::LayerNorm, &self.ln_f, k::layernorm_grid(t, true));
            for (bind, chunk) in self.lm_head.iter().zip(&self.wte) {
                run(Kernel::LmHead, bind, k::lm_head_grid(chunk.rows));
            }
        }
        enc.copy_buffer_to_buffer(&self.logits, 0, &self.staging, 0, (v * 4) as u64);
        q.submit([enc.finish()]);
        let verdict = scopes.close("running the model on the GPU");
        let read = self
            .ctx
            .read_f32(&self.staging, &mut self.logits_host)
            .await;
        verdict.await?;
        read?;
        self.dispatches = n;
        Ok(&self.logits_host)
    }
}

/// Sizes decided before anything is allocated, so a model that cannot fit fails early and
/// `Auto` can fall back to the CPU.
struct Plan {
    /// Vocab rows per wte chunk.
    wte_rows: usize,
}

impl Plan {
    fn new(config: &Config, ctx: &Context) -> Result<Plan> {
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
        for (what, n) in [
            ("wpe", nu * cu),
            ("the MLP activations (n_ctx × n_inner)", nu * hu),
            ("qkv (n_ctx × 3·n_embd)", nu * 3 * cu),
            ("mlp.c_fc", cu * hu),
            ("attn.c_attn", cu * 3 * cu),
            ("the logits", v as u64),
        ] {
            if n * 4 > limit {
                return Err(too_big(what, n * 4));
            }
        }
        let wte_rows = (limit / (cu * 4)) as usize;
        if wte_rows == 0 {
            return Err(too_big("one row of wte", cu * 4));
        }
        let wte_rows = wte_rows.min(v);
        let most = ctx.max_workgroups as usize;
        let widest = [
            k::elementwise_grid(n_ctx, c)[0],
            k::lm_head_grid(wte_rows)[0],
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

/// Uploads a checkpoint tensor as f32.
fn upload(ctx: &Context, label: &str, t: &TensorRef) -> wgpu::Buffer {
    ctx.upload(label, &t.to_f32())
}
