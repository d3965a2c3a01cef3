//! Loading GPT-2 onto the GPU: the plan (sizes checked against the device's limits before
//! anything is allocated, so a model that cannot fit fails early and `Auto` can fall back to the
//! CPU), then the weights uploaded as f32 and every buffer, uniform and bind group the forward
//! pass dispatches with.

use super::context::{Context, GpuOptions};
use super::kernels::{self as k, Epilogue, Kernel, Kernels};
use super::{Block, GpuBackend, Linear, WteChunk};
use crate::config::{Activation, Config, MAX_VERIFY};
use crate::error::{Error, Result};
use crate::weights::{self, Gpt2Weights, TensorRef};

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
        let backend = Builder {
            config,
            ctx,
            kernels,
        }
        .build(w, &plan);
        scopes.close("loading the model onto the GPU").await?;
        backend.ctx.check()?;
        Ok(backend)
    }
}

/// Buffers shared by every layer: the activations, sized for the whole context.
struct Activations {
    step: wgpu::Buffer,    // uniform Step: T, pos
    ids: wgpu::Buffer,     // (n_ctx,) u32
    x: wgpu::Buffer,       // (n_ctx, C) residual stream
    xn: wgpu::Buffer,      // (n_ctx, C) LayerNorm output
    qkv: wgpu::Buffer,     // (n_ctx, 3C)
    att: wgpu::Buffer,     // (n_ctx, C) attention output
    fc: wgpu::Buffer,      // (n_ctx, H) GELU(c_fc)
    logits: wgpu::Buffer,  // (MAX_VERIFY, V)
    staging: wgpu::Buffer, // (MAX_VERIFY, V) mappable copy of the logits
}

/// The uniforms every block shares.
struct Shared {
    ln_rows: wgpu::Buffer,
    ln_last: wgpu::Buffer,
    kv_dims: wgpu::Buffer,
    c_attn: wgpu::Buffer,
    attn_c_proj: wgpu::Buffer,
    c_fc: wgpu::Buffer,
    mlp_c_proj: wgpu::Buffer,
}

/// Widened before multiplying: on wasm32 a usize product could wrap. (`Plan::new` checked every
/// size against the device's limits in u64 already.)
fn f32s(n: usize) -> u64 {
    n as u64 * 4
}

/// The device and its pipelines while the model's buffers and bind groups are made.
struct Builder<'a> {
    config: &'a Config,
    ctx: Context,
    kernels: Kernels,
}

impl Builder<'_> {
    fn bind(&self, kernel: Kernel, label: &str, bufs: &[&wgpu::Buffer]) -> wgpu::BindGroup {
        self.kernels
            .bind_group(&self.ctx.device, kernel, label, bufs)
    }

    fn build(self, w: &Gpt2Weights<'_>, plan: &Plan) -> GpuBackend {
        let a = self.activations();
        let s = self.shared();
        let wpe = upload(&self.ctx, "wpe", &w.wpe); // (n_ctx, C)
        let wte = self.wte_chunks(&w.wte, plan, &a, &wpe);
        let blocks = (w.h.iter().enumerate())
            .map(|(i, b)| self.block(i, b, &a, &s))
            .collect();
        let (ln_f, ln_f_bufs) = self.layer_norm("ln_f", &w.ln_f, &s.ln_last, &a);
        let (ln_f_all, ln_f_all_bufs) = self.layer_norm("ln_f", &w.ln_f, &s.ln_rows, &a);
        let Activations {
            step,
            ids,
            x,
            xn,
            qkv,
            att,
            fc,
            logits,
            staging,
        } = a;
        let mut buffers = vec![wpe, x, xn, qkv, att, fc];
        buffers.extend([s.ln_rows, s.ln_last, s.kv_dims, s.c_attn]);
        buffers.extend([s.attn_c_proj, s.c_fc, s.mlp_c_proj]);
        buffers.extend(ln_f_bufs);
        buffers.extend(ln_f_all_bufs);
        GpuBackend {
            config: self.config.clone(),
            logits_host: vec![0.0; self.config.vocab_size],
            ctx: self.ctx,
            kernels: self.kernels,
            wte,
            blocks,
            ln_f,
            ln_f_all,
            step,
            ids,
            logits,
            staging,
            _buffers: buffers,
            dispatches: 0,
            slots: Vec::new(),
            active: 0,
        }
    }

    fn activations(&self) -> Activations {
        let (ctx, cfg) = (&self.ctx, self.config);
        let (c, n_ctx) = (cfg.n_embd, cfg.n_positions);
        Activations {
            step: ctx.uniform("step", &k::Step::default()),
            ids: ctx.storage("ids", f32s(n_ctx)),
            x: ctx.storage("x", f32s(n_ctx * c)),
            xn: ctx.storage("xn", f32s(n_ctx * c)),
            qkv: ctx.storage("qkv", f32s(n_ctx * 3 * c)),
            att: ctx.storage("att", f32s(n_ctx * c)),
            fc: ctx.storage("fc", f32s(n_ctx * cfg.n_inner)),
            logits: ctx.storage("logits", f32s(MAX_VERIFY * cfg.vocab_size)),
            staging: ctx.staging("logits staging", f32s(MAX_VERIFY * cfg.vocab_size)),
        }
    }

    fn shared(&self) -> Shared {
        let (ctx, cfg) = (&self.ctx, self.config);
        let (c, hid) = (cfg.n_embd, cfg.n_inner);
        let ln_dims = |last_only| k::LayerNormDims {
            c: c as u32,
            last_only,
            eps: cfg.layer_norm_epsilon,
            _pad: 0,
        };
        let mm = |n_in: usize, n_out: usize, e: Epilogue| {
            let dims = k::MatmulDims {
                k: n_in as u32,
                n: n_out as u32,
                epilogue: e as u32,
                _pad: 0,
            };
            ctx.uniform("matmul dims", &dims)
        };
        let kv_dims = k::KvDims {
            c: c as u32,
            _pad: [0; 3],
        };
        Shared {
            ln_rows: ctx.uniform("ln dims", &ln_dims(0)),
            ln_last: ctx.uniform("ln_f dims", &ln_dims(1)),
            kv_dims: ctx.uniform("kv dims", &kv_dims),
            c_attn: mm(c, 3 * c, Epilogue::Bias),
            attn_c_proj: mm(c, c, Epilogue::Residual),
            c_fc: mm(c, hid, Epilogue::Gelu),
            mlp_c_proj: mm(hid, c, Epilogue::Residual),
        }
    }

    /// wte in chunks of at most `plan.wte_rows` rows, each with its embedding and head.
    fn wte_chunks(
        &self,
        wte: &TensorRef,
        plan: &Plan,
        a: &Activations,
        wpe: &wgpu::Buffer,
    ) -> Vec<WteChunk> {
        let (c, v) = (self.config.n_embd, self.config.vocab_size);
        let wte_f32 = wte.to_f32(); // (V, C)
        let mut chunks = Vec::new();
        for start in (0..v).step_by(plan.wte_rows) {
            let rows = plan.wte_rows.min(v - start);
            let buf = self
                .ctx
                .upload("wte chunk", &wte_f32[start * c..(start + rows) * c]);
            let dims = k::ChunkDims {
                c: c as u32,
                chunk_start: start as u32,
                chunk_rows: rows as u32,
                v: v as u32,
            };
            let dims = self.ctx.uniform("wte chunk dims", &dims);
            let embedding = [&a.step, &dims, &a.ids, &buf, wpe, &a.x];
            let lm_head = [&dims, &a.xn, &buf, &a.logits];
            chunks.push(WteChunk {
                rows,
                embedding: self.bind(Kernel::Embedding, "embedding", &embedding),
                lm_head: self.bind(Kernel::LmHead, "lm_head", &lm_head),
                _buffers: [buf, dims],
            });
        }
        chunks
    }

    fn linear(
        &self,
        name: &str,
        l: &weights::Linear,
        dims: &wgpu::Buffer,
        x_in: &wgpu::Buffer,
        out: &wgpu::Buffer,
        a: &Activations,
    ) -> Linear {
        let weight = upload(&self.ctx, name, &l.weight);
        let bias = upload(&self.ctx, name, &l.bias);
        let bufs = [&a.step, dims, x_in, &weight, &bias, out];
        Linear {
            bind: self.bind(Kernel::MatmulTiled, name, &bufs),
            n_out: l.weight.shape[1],
            _buffers: [weight, bias],
        }
    }

    /// A LayerNorm from the residual stream into `xn`.
    fn layer_norm(
        &self,
        name: &str,
        ln: &weights::LayerNorm,
        dims: &wgpu::Buffer,
        a: &Activations,
    ) -> (wgpu::BindGroup, [wgpu::Buffer; 2]) {
        let weight = upload(&self.ctx, name, &ln.weight);
        let bias = upload(&self.ctx, name, &ln.bias);
        let bufs = [&a.step, dims, &a.x, &weight, &bias, &a.xn];
        (self.bind(Kernel::LayerNorm, name, &bufs), [weight, bias])
    }

    /// Block `i`: its weights, KV cache and attention uniforms, and a bind group per dispatch.
    fn block(&self, i: usize, b: &weights::Block, a: &Activations, s: &Shared) -> Block {
        let (ctx, cfg) = (&self.ctx, self.config);
        let c = cfg.n_embd;
        let k_cache = ctx.storage("k_cache", f32s(cfg.n_positions * c)); // (n_ctx, C)
        let v_cache = ctx.storage("v_cache", f32s(cfg.n_positions * c)); // (n_ctx, C)
        let att_dims = k::AttentionDims {
            c: c as u32,
            nh: cfg.n_head as u32,
            hs: cfg.head_size() as u32,
            scale: cfg.attention_scale(i),
        };
        let att_dims = ctx.uniform("attention dims", &att_dims);
        let (ln_1, ln_1_bufs) = self.layer_norm("ln_1", &b.ln_1, &s.ln_rows, a);
        let (ln_2, ln_2_bufs) = self.layer_norm("ln_2", &b.ln_2, &s.ln_rows, a);
        let kv_write = [&a.step, &s.kv_dims, &a.qkv, &k_cache, &v_cache];
        let attention = [&a.step, &att_dims, &a.qkv, &k_cache, &v_cache, &a.att];
        Block {
            ln_1,
            c_attn: self.linear("attn.c_attn", &b.c_attn, &s.c_attn, &a.xn, &a.qkv, a),
            kv_write: self.bind(Kernel::KvWrite, "kv_write", &kv_write),
            attention: self.bind(Kernel::Attention, "attention", &attention),
            attn_c_proj: self.linear(
                "attn.c_proj",
                &b.attn_c_proj,
                &s.attn_c_proj,
                &a.att,
                &a.x,
                a,
            ),
            ln_2,
            c_fc: self.linear("mlp.c_fc", &b.c_fc, &s.c_fc, &a.xn, &a.fc, a),
            mlp_c_proj: self.linear("mlp.c_proj", &b.mlp_c_proj, &s.mlp_c_proj, &a.fc, &a.x, a),
            kv: [k_cache.clone(), v_cache.clone()],
            _buffers: [k_cache, v_cache, att_dims]
                .into_iter()
                .chain(ln_1_bufs)
                .chain(ln_2_bufs)
                .collect(),
        }
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
            (
                "the logits of a verification pass",
                MAX_VERIFY as u64 * v as u64,
            ),
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

/// Uploads a checkpoint tensor as f32.
fn upload(ctx: &Context, label: &str, t: &TensorRef) -> wgpu::Buffer {
    ctx.upload(label, &t.to_f32())
}
