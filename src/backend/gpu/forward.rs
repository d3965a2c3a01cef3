//! GPT-2's forward pass on the GPU, following transformers' `modeling_gpt2.py` like the CPU
//! backend does: every dispatch of the model recorded into one compute pass, one submit, the
//! last position's logits read back (or, for greedy, only the id it chooses).

use super::kernels::{self as k, Kernel};
use super::{GpuBackend, GpuCounters, Linear};
use crate::backend::rows::{Seq, Want, MAX_TOP_K};
use crate::config::MAX_VERIFY;
use crate::error::Result;

impl GpuBackend {
    /// One forward pass (`Backend::pass`, which checks positions, ids and distinct slots). One
    /// sequence, or several with one id each (a batch's decode step), run as the rows of one
    /// submission, each attending over its own slot; the logits of the last row of each, or of
    /// every row (`Want::Every`), or only each last row's argmax (`Want::Argmax`, chosen on the
    /// device; a decode step's by `decode_argmax`, which may have submitted it ahead). Several
    /// sequences with several ids each (prompts) run one after another, their last rows' logits
    /// (or argmaxes) gathered.
    pub async fn pass(&mut self, seqs: &[Seq<'_>], want: Want) -> Result<&[f32]> {
        for s in seqs {
            self.check_slot(s.slot)?;
        }
        let decode = seqs.len() <= MAX_VERIFY && seqs.iter().all(|s| s.ids.len() == 1);
        if decode && matches!(want, Want::Argmax | Want::ArgmaxAhead) {
            self.decode_argmax(seqs, want == Want::ArgmaxAhead).await?;
            return Ok(&[]);
        }
        self.drop_ahead();
        let pick = match want {
            Want::Argmax | Want::ArgmaxAhead => Pick::Argmax,
            Want::Top(k) => Pick::Top(k.min(self.config.vocab_size)),
            Want::Last | Want::Every(_) => Pick::Logits,
        };
        if seqs.len() == 1 || decode {
            // With several sequences every row is one's last: the head runs over every row.
            let all = matches!(want, Want::Every(_)) || seqs.len() > 1;
            return self.forward(seqs, all, pick).await;
        }
        let v = self.config.vocab_size;
        let mut rows = std::mem::take(&mut self.gathered);
        rows.clear();
        let (mut ids, mut top) = (Vec::with_capacity(seqs.len()), Vec::new());
        let mut counted = GpuCounters::default();
        for s in seqs {
            self.forward(std::slice::from_ref(s), false, pick).await?;
            match pick {
                Pick::Argmax => ids.push(self.chosen_host[0]),
                Pick::Top(_) => top.extend_from_slice(&self.top_host),
                Pick::Logits => rows.extend_from_slice(&self.logits_host[..v]),
            }
            counted += self.last_pass; // the pass's, all its submissions together
        }
        counted.passes = 1; // one pass, in several submissions
        self.totals.passes -= seqs.len() - 1;
        self.last_pass = counted;
        if pick != Pick::Logits {
            (self.chosen_host, self.top_host) = (ids, top);
            self.gathered = rows;
            return Ok(&[]);
        }
        // The gathered rows become the last pass's logits (with no hidden state after them).
        std::mem::swap(&mut self.logits_host, &mut rows);
        self.gathered = rows;
        self.read_rows = seqs.len();
        Ok(&self.logits_host[..seqs.len() * v])
    }

    /// The rows of `seqs` in one submission: the logits of the last row, or with `all` of every
    /// row (at most `MAX_VERIFY`), row after row: then every product takes the GEMV kernel,
    /// whose rows do not depend on each other, so each row is the same as a decode step of that
    /// id alone. With `Pick::Argmax` or `Pick::Top` only those rows' argmaxes (`chosen_host`)
    /// or candidates (`top_host`) are read back, no logits.
    async fn forward(&mut self, seqs: &[Seq<'_>], all: bool, pick: Pick) -> Result<&[f32]> {
        self.ctx.check()?;
        let (c, v) = (self.config.n_embd, self.config.vocab_size);
        self.ids_host.clear();
        seqs.iter()
            .for_each(|s| self.ids_host.extend_from_slice(s.ids));
        let table = self.table(seqs.iter().map(|s| (s.slot, s.pos, s.ids.len())));
        let rows = if all { table.len() / 2 } else { 1 };
        let scopes = self.ctx.scopes();
        let sent = self.submit(&table, Ids::Host, all, pick, &self.staging);
        let verdict = scopes.close("running the model on the GPU");
        let (floats, hidden) = match pick {
            Pick::Logits => (rows * v, rows * c), // ln_f's rows after the logits, one readback
            _ => (0, 0),
        };
        self.logits_host.resize(floats + hidden, 0.0);
        self.chosen_host
            .resize(if pick == Pick::Argmax { rows } else { 0 }, 0);
        let staging = &self.staging;
        let read = match pick {
            Pick::Argmax => self.ctx.read(staging, &mut self.chosen_host).await,
            Pick::Top(k) => {
                let mut words = vec![0u32; rows * k * 2];
                let read = self.ctx.read(staging, &mut words).await;
                let pairs = words.chunks_exact(2).map(|p| (f32::from_bits(p[0]), p[1]));
                self.top_host.clear();
                self.top_host.extend(pairs);
                read
            }
            Pick::Logits => self.ctx.read(staging, &mut self.logits_host).await,
        };
        verdict.await?;
        read?;
        self.read_rows = if pick == Pick::Logits { rows } else { 0 };
        self.last_pass = sent.counters;
        self.totals += sent.counters;
        Ok(&self.logits_host[..floats])
    }

    /// The row table of a pass over `(slot, pos, ids)` of each sequence.
    pub(super) fn table(&self, seqs: impl IntoIterator<Item = (usize, usize, usize)>) -> Vec<u32> {
        k::row_table(seqs, self.config.n_positions)
    }

    /// Writes a pass's inputs (its row table, `table`; its ids from `ids_host` or, with
    /// `Ids::Chosen`, the last pass's argmaxes, copied on the device), records every dispatch,
    /// copies what `pick` reads back into `staging` and submits it all at once.
    pub(super) fn submit(
        &self,
        table: &[u32],
        ids: Ids<'_>,
        all: bool,
        pick: Pick,
        staging: &wgpu::Buffer,
    ) -> Submitted {
        let (c, v, t) = (self.config.n_embd, self.config.vocab_size, table.len() / 2);
        let q = &self.ctx.queue;
        let rows = if all { t } else { 1 };
        let step = k::Step::with_head(t, rows);
        q.write_buffer(&self.kv_inputs.step, 0, bytemuck::bytes_of(&step));
        q.write_buffer(&self.kv_inputs.rows, 0, bytemuck::cast_slice(table));
        if let Pick::Top(k) = pick {
            let dims = k::TopKDims {
                v: v as u32,
                k: k as u32,
                _pad: [0; 2],
            };
            q.write_buffer(&self.top_dims, 0, bytemuck::bytes_of(&dims));
        }
        let label = Some("forward");
        let mut enc =
            (self.ctx.device).create_command_encoder(&wgpu::CommandEncoderDescriptor { label });
        match ids {
            Ids::Host => q.write_buffer(&self.ids, 0, bytemuck::cast_slice(&self.ids_host)),
            Ids::Chosen(from) if from.iter().enumerate().all(|(i, &f)| i == f) => {
                enc.copy_buffer_to_buffer(&self.chosen, 0, &self.ids, 0, 4 * t as u64);
            }
            Ids::Chosen(from) => {
                for (i, &f) in from.iter().enumerate() {
                    enc.copy_buffer_to_buffer(
                        &self.chosen,
                        4 * f as u64,
                        &self.ids,
                        4 * i as u64,
                        4,
                    );
                }
            }
        }
        let dispatches = self.record(&mut enc, t, all, pick);
        let (floats, hidden) = match pick {
            Pick::Logits => (rows * v, rows * c),
            _ => (0, 0),
        };
        let bytes = self.stage(&mut enc, staging, pick, rows, floats, hidden);
        let index = q.submit([enc.finish()]);
        let counters = GpuCounters {
            passes: 1,
            submissions: 1,
            dispatches,
            readback_bytes: bytes,
            ..GpuCounters::default()
        };
        Submitted { index, counters }
    }

    /// Copies what `pick` reads back of the pass's `rows` into the staging buffer: the argmaxes,
    /// the candidates (each row's first k of its `MAX_TOP_K`), or the logits and then ln_f's rows
    /// (`floats` and `hidden` values). Returns the bytes.
    fn stage(
        &self,
        enc: &mut wgpu::CommandEncoder,
        staging: &wgpu::Buffer,
        pick: Pick,
        rows: usize,
        floats: usize,
        hidden: usize,
    ) -> usize {
        let mut copy = |from: &wgpu::Buffer, at: usize, to: usize, bytes: usize| {
            enc.copy_buffer_to_buffer(from, at as u64, staging, to as u64, bytes as u64);
            bytes
        };
        match pick {
            Pick::Argmax => copy(&self.chosen, 0, 0, rows * 4),
            Pick::Top(k) => (0..rows)
                .map(|r| copy(&self.top, r * MAX_TOP_K * 8, r * k * 8, k * 8))
                .sum(),
            Pick::Logits => {
                copy(&self.logits, 0, 0, floats * 4) + copy(&self.xn, 0, floats * 4, hidden * 4)
            }
        }
    }

    /// Every dispatch of the model over `t` rows into one compute pass of `enc` (`all`: every
    /// row's logits, by the GEMV; `pick`: then each of those rows' argmax or candidates); how
    /// many dispatches.
    fn record(&self, enc: &mut wgpu::CommandEncoder, t: usize, all: bool, pick: Pick) -> usize {
        let c = self.config.n_embd;
        let mut n = 0;
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("forward"),
            timestamp_writes: None,
        });
        let kernels = &self.kernels;
        // Rows of the pass (the head's: the last one's ln_f alone, or every row).
        let head = if all { t } else { 1 };
        let mut run = |kernel, bind: &wgpu::BindGroup, grid| {
            let rows = if kernel == Kernel::LmHead { head } else { t };
            kernels.dispatch(&mut pass, kernel, bind, grid, rows);
            n += 1;
        };
        let mm = if all {
            Kernel::MatmulGemv
        } else {
            k::matmul_for(t)
        };
        let grid = |l: &Linear| k::matmul_grid(mm, t, l.n_out);
        for chunk in &self.wte {
            run(
                Kernel::Embedding,
                &chunk.embedding,
                k::elementwise_grid(t, c),
            );
        }
        // With q8 weights a tiled product's input is rounded first, as the CPU's q8 rounds it
        // (the GEMV kernels round their rows themselves).
        let rounding = self.rounding.as_ref().filter(|_| mm == Kernel::MatmulTiled);
        let (h, quantize) = (self.config.n_inner, Kernel::Quantize);
        let round_xn = rounding.map(|r| (&r.xn, k::quantize_grid(t, c)));
        for b in &self.blocks {
            for (kernel, bind, g) in normed(mm, t, &b.ln_1, &b.c_attn, round_xn) {
                run(kernel, bind, g);
            }
            run(Kernel::KvWrite, &b.kv_write, k::elementwise_grid(t, c));
            let heads = k::attention_grid(self.config.n_head, t);
            run(Kernel::Attention, &b.attention, heads);
            if let Some(r) = rounding {
                run(quantize, &r.att, k::quantize_grid(t, c));
            }
            run(mm, &b.attn_c_proj.bind, grid(&b.attn_c_proj));
            for (kernel, bind, g) in normed(mm, t, &b.ln_2, &b.c_fc, round_xn) {
                run(kernel, bind, g);
            }
            if let Some(r) = rounding {
                run(quantize, &r.fc, k::quantize_grid(t, h));
            }
            run(mm, &b.mlp_c_proj.bind, grid(&b.mlp_c_proj));
        }
        // ln_f of the last row into xn's row 0, or of every row; then the head over them.
        let ln_f = if all { &self.ln_f_all } else { &self.ln_f };
        run(Kernel::LayerNorm, ln_f, k::layernorm_grid(t, !all));
        for chunk in &self.wte {
            run(
                Kernel::LmHead,
                &chunk.lm_head,
                k::lm_head_grid(chunk.rows, head),
            );
        }
        match pick {
            Pick::Argmax => run(Kernel::Argmax, &self.argmax, k::argmax_grid(head)),
            Pick::Top(_) => run(Kernel::TopK, &self.top_k, k::argmax_grid(head)),
            Pick::Logits => {}
        }
        n
    }
}

/// What a pass reads back of its logits rows: all of them, each one's argmax, or each one's k
/// largest with their ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Pick {
    Logits,
    Argmax,
    Top(usize),
}

/// Where a pass's ids come from: `ids_host`, written to the device, or the argmaxes the last
/// pass left in `chosen` (one per row of it), row i's id from its row `Chosen[i]`, copied on the
/// device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ids<'a> {
    Host,
    Chosen(&'a [usize]),
}

/// A pass submitted: which submission it is and what it asked of the GPU.
pub(super) struct Submitted {
    pub index: wgpu::SubmissionIndex,
    pub counters: GpuCounters,
}

/// A LayerNorm (`ln`) then the product `l` over its output: one fused dispatch where the product
/// is a GEMV (decode, verification), else the two, with `round` (quantize.wgsl over the
/// LayerNorm's output, q8 weights) between them.
fn normed<'a>(
    mm: Kernel,
    t: usize,
    ln: &'a wgpu::BindGroup,
    l: &'a Linear,
    round: Option<(&'a wgpu::BindGroup, [u32; 3])>,
) -> impl Iterator<Item = (Kernel, &'a wgpu::BindGroup, [u32; 3])> {
    let grid = k::matmul_grid(mm, t, l.n_out);
    let steps = match &l.fused {
        Some(fused) if mm == Kernel::MatmulGemv => {
            [Some((Kernel::MatmulGemvLn, fused, grid)), None, None]
        }
        _ => [
            Some((Kernel::LayerNorm, ln, k::layernorm_grid(t, false))),
            round.map(|(r, g)| (Kernel::Quantize, r, g)),
            Some((mm, &l.bind, grid)),
        ],
    };
    steps.into_iter().flatten()
}
