//! KV caches for several sequences at once (a batch, beam search): every block's cache holds
//! `capacity` slots of n_ctx positions one after another, and each row of a pass names its slot
//! in the row table, so a pass over rows of several sequences needs no copying. Making more
//! slots than there is room for grows the caches (copying what they hold); a copy between slots
//! (a beam that continues another's sequence, a prompt that starts as another's) goes through
//! the attention output buffer, free between passes.

use super::kernels::{Kernel, Kernels};
use super::{GpuBackend, KvInputs};
use crate::error::{Error, Result};

impl KvInputs {
    /// kv_write's and attention's bind groups for a block's caches `kv`.
    pub(super) fn bind(
        &self,
        kernels: &Kernels,
        device: &wgpu::Device,
        att_dims: &wgpu::Buffer,
        kv: &[wgpu::Buffer; 2],
    ) -> [wgpu::BindGroup; 2] {
        let [k, v] = kv;
        let write = [&self.step, &self.kv_dims, &self.qkv, &self.rows, k, v];
        let attend = [&self.step, att_dims, &self.qkv, k, v, &self.rows, &self.att];
        [
            kernels.bind_group(device, Kernel::KvWrite, "kv_write", &write),
            kernels.bind_group(device, Kernel::Attention, "attention", &attend),
        ]
    }
}

impl GpuBackend {
    /// Makes `n` slots (at least 1); the first `n` keep what they held. The caches grow (to the
    /// next power of two) when they lack room, and shrink back to one slot when `n` is 1.
    pub async fn kv_slots(&mut self, n: usize) -> Result<()> {
        self.drop_ahead();
        let n = n.max(1);
        if n > self.capacity || (n == 1 && self.capacity > 1) {
            let most = self.most_slots();
            if n > most {
                return Err(Error::Budget(format!(
                    "{n} sequences at once need {} bytes of KV cache per layer in one GPU \
                     buffer; this device allows {} ({most} sequences)",
                    n as u64 * self.slot_bytes(),
                    self.ctx.max_binding.min(self.ctx.max_buffer)
                )));
            }
            self.resize(n.next_power_of_two().min(most)).await?;
        }
        self.slots = n;
        Ok(())
    }

    /// Copies positions `0..len` of slot `from`'s KV cache into slot `to`'s.
    pub async fn kv_copy(&mut self, from: usize, to: usize, len: usize) -> Result<()> {
        self.drop_ahead();
        self.check_slot(from)?;
        self.check_slot(to)?;
        let bytes = (len.min(self.config.n_positions) * self.config.n_embd * 4) as u64;
        if from == to || bytes == 0 {
            return Ok(());
        }
        self.ctx.check()?;
        let (src, dst) = (
            from as u64 * self.slot_bytes(),
            to as u64 * self.slot_bytes(),
        );
        let scopes = self.ctx.scopes();
        let mut enc = (self.ctx.device).create_command_encoder(&Default::default());
        // A buffer cannot be copied into itself: through the attention output, whose contents
        // matter only during a pass.
        let via = &self.kv_inputs.att;
        for b in &self.blocks {
            for cache in &b.kv {
                enc.copy_buffer_to_buffer(cache, src, via, 0, bytes);
                enc.copy_buffer_to_buffer(via, 0, cache, dst, bytes);
            }
        }
        self.ctx.queue.submit([enc.finish()]);
        self.totals.submissions += 1;
        scopes.close("copying a KV cache slot").await
    }

    /// An error unless slot `slot` was made.
    pub(super) fn check_slot(&self, slot: usize) -> Result<()> {
        match slot < self.slots {
            true => Ok(()),
            false => Err(Error::State(format!(
                "KV cache slot {slot} does not exist ({} made)",
                self.slots
            ))),
        }
    }

    /// Bytes of one slot in one block's keys (or values): n_ctx × C floats.
    pub(super) fn slot_bytes(&self) -> u64 {
        self.config.n_positions as u64 * self.config.n_embd as u64 * 4
    }

    /// The most slots one buffer of this device holds.
    fn most_slots(&self) -> usize {
        let limit = self.ctx.max_binding.min(self.ctx.max_buffer);
        (limit / self.slot_bytes()).max(1) as usize
    }

    /// New caches with room for `capacity` slots, the old ones' slots copied in (as many as fit),
    /// and the bind groups that use them made again.
    async fn resize(&mut self, capacity: usize) -> Result<()> {
        self.ctx.check()?;
        let scopes = self.ctx.scopes();
        let bytes = capacity as u64 * self.slot_bytes();
        let keep = capacity.min(self.capacity) as u64 * self.slot_bytes();
        let mut enc = (self.ctx.device).create_command_encoder(&Default::default());
        let (kernels, device, inputs) = (&self.kernels, &self.ctx.device, &self.kv_inputs);
        for b in &mut self.blocks {
            let kv = [
                self.ctx.storage("k_cache", bytes),
                self.ctx.storage("v_cache", bytes),
            ];
            for (old, new) in b.kv.iter().zip(&kv) {
                enc.copy_buffer_to_buffer(old, 0, new, 0, keep);
            }
            [b.kv_write, b.attention] = inputs.bind(kernels, device, &b.att_dims, &kv);
            b.kv = kv;
        }
        self.ctx.queue.submit([enc.finish()]);
        self.capacity = capacity;
        scopes.close("making KV caches for more sequences").await
    }
}
