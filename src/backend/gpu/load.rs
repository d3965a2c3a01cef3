//! Loading GPT-2 onto the GPU: the plan (sizes checked against the device's limits before
//! anything is allocated, so a model that cannot fit fails early and `Auto` can fall back to the
//! CPU), then the weights uploaded as f32 and every buffer, uniform and bind group the forward
//! pass dispatches with.

use super::context::{Context, Format, GpuOptions};
use super::formats::{to_f16, to_q8};
use super::kernels::{self as k, Epilogue, Kernel, Kernels};
use super::plan::Plan;
use super::{Block, GpuBackend, KvInputs, Linear, Rounding, WteChunk};
use crate::backend::rows::MAX_TOP_K;
use crate::config::{Activation, Config, MAX_VERIFY};
use crate::error::{Error, Result};
use crate::weights::table::{self, Pair, Role};
use crate::weights::{Gpt2Weights, TensorRef};
use std::collections::HashMap;

impl GpuBackend {
    /// Opens a device, checks the model fits its limits, uploads the weights and builds every
    /// buffer, pipeline and bind group. Any failure is an `Error::Gpu` saying why.
    pub async fn new(config: &Config, w: &Gpt2Weights<'_>, opts: &GpuOptions) -> Result<Self> {
        let mut parts = GpuParts::new(config, opts).await?;
        for (name, t) in w.tensors() {
            parts.add(&name, t)?;
        }
        parts.finish().await
    }
}

/// The GPU backend built tensor by tensor: the device is opened and the model checked against
/// its limits first, then each tensor is uploaded the moment it arrives (in any order), and
/// `finish` makes the activations and bind groups once every tensor is on the device.
pub struct GpuParts {
    config: Config,
    ctx: Context,
    kernels: Kernels,
    plan: Plan,
    roles: HashMap<String, Role>,
    /// Uploaded tensors by unprefixed name; wte as its chunks (rows, buffer).
    uploaded: HashMap<String, wgpu::Buffer>,
    wte: Vec<(usize, wgpu::Buffer)>,
    /// Open from the first upload to `finish`: out-of-memory and validation errors of loading.
    scopes: Option<super::context::ErrorScopes>,
}

impl GpuParts {
    /// Opens a device and checks that a model of `config` fits its limits.
    pub async fn new(config: &Config, opts: &GpuOptions) -> Result<Self> {
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
        let mut ctx = Context::new(opts).await?;
        let plan = Plan::new(config, &ctx)?;
        let scopes = Some(ctx.scopes());
        // The packed parts (lm_head_packed.wgsl, gemv_packed.wgsl) take whole blocks of 32
        // inputs: C a multiple of 32 (and so 4·C, the MLP's projection's inputs).
        ctx.q8_packed &= config.n_embd.is_multiple_of(32);
        let kernels = Kernels::new(&ctx.device, ctx.format, ctx.q8_packed, ctx.subgroup);
        Ok(GpuParts {
            config: config.clone(),
            ctx,
            kernels,
            plan,
            uploaded: HashMap::new(),
            wte: Vec::new(),
            roles: table::roles(config),
            scopes,
        })
    }

    /// Uploads one tensor (checked by `weights`) as f32; wte in chunks the device can bind.
    pub fn add(&mut self, name: &str, t: TensorRef) -> Result<()> {
        self.ctx.check()?;
        let values = t.try_to_f32()?;
        // Weight matrices (wte and the blocks' Conv1D weights) in f16 or q8 when asked; the rest
        // f32.
        let role = self.roles.get(name).copied();
        let Some(role) = role else {
            let why = format!("the GPU backend was given tensor \"{name}\", not GPT-2's");
            return Err(Error::State(why));
        };
        let matrix = matches!(role, Role::Embedding | Role::Matrix);
        // A wte chunk's blocks run along its rows, a Conv1D weight's (K, N) down its columns.
        let upload = |label: &str, v: &[f32], cols: usize| match self.ctx.format {
            Format::F16 if matrix => self.ctx.upload(label, &to_f16(v)),
            Format::Q8 if matrix => {
                let down = role == Role::Matrix;
                self.ctx
                    .upload(label, &to_q8(v, v.len() / cols, cols, down))
            }
            _ => self.ctx.upload(label, v),
        };
        if role == Role::Embedding {
            let (c, v) = (self.config.n_embd, self.config.vocab_size);
            for start in (0..v).step_by(self.plan.wte_rows) {
                let rows = self.plan.wte_rows.min(v - start);
                let chunk = &values[start * c..(start + rows) * c];
                self.wte.push((rows, upload("wte chunk", chunk, c)));
            }
        } else {
            let buffer = upload(name, &values, t.shape[1]);
            self.uploaded.insert(name.to_string(), buffer);
        }
        Ok(())
    }

    /// The backend, once every tensor has been added.
    pub async fn finish(mut self) -> Result<GpuBackend> {
        let scopes = self.scopes.take();
        let sizes = self.uploaded.values().chain(self.wte.iter().map(|w| &w.1));
        let weight_bytes = sizes.map(wgpu::Buffer::size).sum();
        let mut backend = Builder {
            config: &self.config,
            ctx: self.ctx,
            kernels: self.kernels,
        }
        .build(Uploaded(self.uploaded), self.wte)?;
        backend.weight_bytes = weight_bytes;
        if let Some(scopes) = scopes {
            scopes.close("loading the model onto the GPU").await?;
        }
        backend.ctx.check()?;
        Ok(backend)
    }
}

/// The uploaded tensors, taken out by name as the layers are made.
struct Uploaded(HashMap<String, wgpu::Buffer>);

impl Uploaded {
    fn take(&mut self, name: &str) -> Result<wgpu::Buffer> {
        self.0
            .remove(name)
            .ok_or_else(|| Error::State(format!("the GPU backend has no tensor \"{name}\"")))
    }
}

/// Buffers shared by every layer: the activations, sized for the whole context.
struct Activations {
    step: wgpu::Buffer,    // uniform Step: T
    ids: wgpu::Buffer,     // (n_ctx,) u32
    rows: wgpu::Buffer,    // (n_ctx, 2) u32: each row's position and slot (`k::row_table`)
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

    /// With q8 weights, quantize.wgsl over each input of a prompt's tiled products: the
    /// LayerNorms' output, attention's, and the MLP's GELU.
    fn rounding(&self, a: &Activations) -> Option<Rounding> {
        if self.ctx.format != Format::Q8 {
            return None;
        }
        let dims = |k: usize| {
            let d = k::QuantizeDims {
                k: k as u32,
                _pad: [0; 3],
            };
            self.ctx.uniform("quantize dims", &d)
        };
        let (c, h) = (dims(self.config.n_embd), dims(self.config.n_inner));
        let bind = |x: &wgpu::Buffer, d: &wgpu::Buffer| {
            self.bind(Kernel::Quantize, "quantize", &[&a.step, d, x])
        };
        Some(Rounding {
            xn: bind(&a.xn, &c),
            att: bind(&a.att, &c),
            fc: bind(&a.fc, &h),
            _dims: [c, h],
        })
    }

    fn build(self, mut up: Uploaded, wte: Vec<(usize, wgpu::Buffer)>) -> Result<GpuBackend> {
        let a = self.activations();
        let s = self.shared();
        let rounding = self.rounding(&a);
        let wpe = up.take(table::WPE)?; // (n_ctx, C)
        let wte = self.wte_chunks(wte, &a, &wpe);
        let blocks = (0..self.config.n_layer)
            .map(|i| self.block(i, &mut up, &a, &s))
            .collect::<Result<Vec<_>>>()?;
        let ln_f = table::ln_f();
        let ln_f_weights = [up.take(&ln_f.weight)?, up.take(&ln_f.bias)?];
        let (ln_f, ln_f_bufs) = self.layer_norm("ln_f", ln_f_weights.clone(), &s.ln_last, &a);
        let (ln_f_all, ln_f_all_bufs) = self.layer_norm("ln_f", ln_f_weights, &s.ln_rows, &a);
        let Activations {
            step,
            ids,
            rows,
            x,
            xn,
            qkv,
            att,
            fc,
            logits,
            staging,
        } = a;
        let chosen = self.ctx.storage("chosen", f32s(MAX_VERIFY));
        let argmax_dims = k::ArgmaxDims {
            v: self.config.vocab_size as u32,
            _pad: [0; 3],
        };
        let argmax_dims = self.ctx.uniform("argmax dims", &argmax_dims);
        let argmax = self.bind(Kernel::Argmax, "argmax", &[&argmax_dims, &logits, &chosen]);
        let top = self.ctx.storage("top", f32s(MAX_VERIFY * MAX_TOP_K * 2));
        let top_dims = self.ctx.uniform("top_k dims", &k::TopKDims::default());
        let top_k = self.bind(Kernel::TopK, "top_k", &[&top_dims, &logits, &top]);
        let mut buffers = vec![wpe, x, fc, argmax_dims];
        buffers.extend([s.ln_rows, s.ln_last, s.c_attn]);
        buffers.extend([s.attn_c_proj, s.c_fc, s.mlp_c_proj]);
        buffers.extend(ln_f_bufs);
        buffers.extend(ln_f_all_bufs);
        Ok(GpuBackend {
            config: self.config.clone(),
            logits_host: vec![0.0; self.config.vocab_size],
            ahead: super::ahead::Ahead::new(&self.ctx), // before the context moves
            ctx: self.ctx,
            kernels: self.kernels,
            wte,
            blocks,
            ln_f,
            ln_f_all,
            ids,
            logits,
            staging,
            xn,
            read_rows: 1,
            argmax,
            chosen,
            chosen_host: Vec::new(),
            top_k,
            top,
            top_dims,
            top_host: Vec::new(),
            rounding,
            _buffers: buffers,
            weight_bytes: 0,
            last_pass: Default::default(),
            totals: Default::default(),
            kv_inputs: KvInputs {
                step,
                kv_dims: s.kv_dims,
                qkv,
                rows,
                att,
            },
            slots: 1,
            capacity: 1,
            ids_host: Vec::new(),
            gathered: Vec::new(),
        })
    }

    fn activations(&self) -> Activations {
        let (ctx, cfg) = (&self.ctx, self.config);
        let (c, n_ctx) = (cfg.n_embd, cfg.n_positions);
        Activations {
            step: ctx.uniform("step", &k::Step::default()),
            ids: ctx.storage("ids", f32s(n_ctx)),
            rows: ctx.storage("rows", f32s(2 * n_ctx)),
            x: ctx.storage("x", f32s(n_ctx * c)),
            xn: ctx.storage("xn", f32s(n_ctx * c)),
            qkv: ctx.storage("qkv", f32s(n_ctx * 3 * c)),
            att: ctx.storage("att", f32s(n_ctx * c)),
            fc: ctx.storage("fc", f32s(n_ctx * cfg.n_inner)),
            logits: ctx.storage("logits", f32s(MAX_VERIFY * cfg.vocab_size)),
            // The logits, then the final hidden rows (multi-token prediction's heads read them).
            staging: ctx.staging("logits staging", f32s(MAX_VERIFY * (cfg.vocab_size + c))),
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
                eps: cfg.layer_norm_epsilon,
            };
            ctx.uniform("matmul dims", &dims)
        };
        let kv_dims = k::KvDims {
            c: c as u32,
            hs: self.config.head_size() as u32,
            _pad: [0; 2],
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

    /// wte's chunks (uploaded by `GpuParts::add`), each with its embedding and head.
    fn wte_chunks(
        &self,
        uploaded: Vec<(usize, wgpu::Buffer)>,
        a: &Activations,
        wpe: &wgpu::Buffer,
    ) -> Vec<WteChunk> {
        let (c, v) = (self.config.n_embd, self.config.vocab_size);
        let mut chunks = Vec::new();
        let mut start = 0;
        for (rows, buf) in uploaded {
            let dims = k::ChunkDims {
                c: c as u32,
                chunk_start: start as u32,
                chunk_rows: rows as u32,
                v: v as u32,
            };
            start += rows;
            let dims = self.ctx.uniform("wte chunk dims", &dims);
            let embedding = [&a.step, &dims, &a.ids, &buf, wpe, &a.rows, &a.x];
            let lm_head = [&a.step, &dims, &a.xn, &buf, &a.logits];
            chunks.push(WteChunk {
                rows,
                embedding: self.bind(Kernel::Embedding, "embedding", &embedding),
                lm_head: self.bind(Kernel::LmHead, "lm_head", &lm_head),
                _buffers: [buf, dims],
            });
        }
        chunks
    }

    /// A linear layer of `n_out` outputs (`dims` its uniform) from `x_in` into `out`, with the
    /// LayerNorm `ln` before it fused into decode's product where given.
    fn linear(
        &self,
        names: &Pair,
        up: &mut Uploaded,
        (n_out, dims): (usize, &wgpu::Buffer),
        (x_in, out): (&wgpu::Buffer, &wgpu::Buffer),
        a: &Activations,
        ln: Option<&[wgpu::Buffer; 2]>,
    ) -> Result<Linear> {
        let weight = up.take(&names.weight)?;
        let bias = up.take(&names.bias)?;
        let name = names.weight.as_str();
        let bufs = [&a.step, dims, x_in, &weight, &bias, out];
        // With the LayerNorm before it: decode's fused kernel reads the residual stream.
        let fused = ln.map(|[ln_w, ln_b]| {
            let bufs = [&a.step, dims, &a.x, &weight, &bias, ln_w, ln_b, out];
            self.bind(Kernel::MatmulGemvLn, name, &bufs)
        });
        Ok(Linear {
            bind: self.bind(Kernel::MatmulTiled, name, &bufs),
            fused,
            n_out,
            _buffers: [weight, bias],
        })
    }

    /// A LayerNorm from the residual stream into `xn`, of `weights` (weight, bias).
    fn layer_norm(
        &self,
        name: &str,
        weights: [wgpu::Buffer; 2],
        dims: &wgpu::Buffer,
        a: &Activations,
    ) -> (wgpu::BindGroup, [wgpu::Buffer; 2]) {
        let [weight, bias] = weights;
        let bufs = [&a.step, dims, &a.x, &weight, &bias, &a.xn];
        (self.bind(Kernel::LayerNorm, name, &bufs), [weight, bias])
    }

    /// Block `i`: its weights, KV cache and attention uniforms, and a bind group per dispatch.
    fn block(&self, i: usize, up: &mut Uploaded, a: &Activations, s: &Shared) -> Result<Block> {
        let (ctx, cfg) = (&self.ctx, self.config);
        let (c, h) = (cfg.n_embd, cfg.n_inner);
        let k_cache = ctx.storage("k_cache", f32s(cfg.n_positions * c)); // (n_ctx, C)
        let v_cache = ctx.storage("v_cache", f32s(cfg.n_positions * c)); // (n_ctx, C)
        let att_dims = k::AttentionDims {
            c: c as u32,
            nh: cfg.n_head as u32,
            hs: cfg.head_size() as u32,
            scale: cfg.attention_scale(i),
        };
        let att_dims = ctx.uniform("attention dims", &att_dims);
        let n = table::block(i);
        let mut ln = |p: &Pair| -> Result<[wgpu::Buffer; 2]> {
            Ok([up.take(&p.weight)?, up.take(&p.bias)?])
        };
        let (ln_1, ln_1_bufs) = self.layer_norm("ln_1", ln(&n.ln_1)?, &s.ln_rows, a);
        let (ln_2, ln_2_bufs) = self.layer_norm("ln_2", ln(&n.ln_2)?, &s.ln_rows, a);
        let inputs = KvInputs {
            step: a.step.clone(),
            kv_dims: s.kv_dims.clone(),
            qkv: a.qkv.clone(),
            rows: a.rows.clone(),
            att: a.att.clone(),
        };
        let kv = [k_cache, v_cache];
        let [kv_write, attention] = inputs.bind(&self.kernels, &ctx.device, &att_dims, &kv);
        let (c_attn, attn_c_proj) = (&n.c_attn, &n.attn_c_proj);
        Ok(Block {
            ln_1,
            c_attn: self.linear(
                c_attn,
                up,
                (3 * c, &s.c_attn),
                (&a.xn, &a.qkv),
                a,
                Some(&ln_1_bufs),
            )?,
            kv_write,
            attention,
            attn_c_proj: self.linear(
                attn_c_proj,
                up,
                (c, &s.attn_c_proj),
                (&a.att, &a.x),
                a,
                None,
            )?,
            ln_2,
            c_fc: self.linear(
                &n.c_fc,
                up,
                (h, &s.c_fc),
                (&a.xn, &a.fc),
                a,
                Some(&ln_2_bufs),
            )?,
            mlp_c_proj: self.linear(
                &n.mlp_c_proj,
                up,
                (c, &s.mlp_c_proj),
                (&a.fc, &a.x),
                a,
                None,
            )?,
            kv,
            att_dims,
            _buffers: ln_1_bufs.into_iter().chain(ln_2_bufs).collect(),
        })
    }
}
