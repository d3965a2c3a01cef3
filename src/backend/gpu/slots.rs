//! KV caches for several sequences at once (beam search keeps one per beam). The kernels are
//! bound to one cache per block, so the other slots are parked in buffers of their own: making
//! a slot active copies the active one's positions out and the slot's in, on the GPU.

use super::GpuBackend;
use crate::error::{Error, Result};

impl GpuBackend {
    /// Makes `n` slots (at least 1), each a whole KV cache; slot 0 is active afterwards (what it
    /// held stays). Slots past `n` are freed.
    pub async fn kv_slots(&mut self, n: usize) -> Result<()> {
        self.kv_use(0, self.config.n_positions).await?;
        let n = n.max(1);
        if n == 1 {
            self.slots.clear();
            return Ok(());
        }
        self.slots.truncate(n);
        let scopes = self.ctx.scopes();
        let bytes = (self.config.n_positions * self.config.n_embd * 4) as u64;
        while self.slots.len() < n {
            let set = (0..self.config.n_layer)
                .map(|_| {
                    let k = self.ctx.storage("parked k_cache", bytes);
                    [k, self.ctx.storage("parked v_cache", bytes)]
                })
                .collect();
            self.slots.push(set);
        }
        scopes.close("making KV caches for beam search").await
    }

    /// Makes `slot` the KV cache later forwards use; `len` positions of it (and of the one
    /// active before) matter and are copied.
    pub async fn kv_use(&mut self, slot: usize, len: usize) -> Result<()> {
        if slot == self.active {
            return Ok(());
        }
        self.check_slot(slot)?;
        let bytes = self.prefix_bytes(len);
        let (out, into) = (self.active, slot);
        self.copy(bytes, |b, layer, i| {
            [
                (&b.blocks[layer].kv[i], &b.slots[out][layer][i]),
                (&b.slots[into][layer][i], &b.blocks[layer].kv[i]),
            ]
        })
        .await?;
        self.active = slot;
        Ok(())
    }

    /// Copies positions `0..len` of slot `from`'s KV cache into slot `to`'s.
    pub async fn kv_copy(&mut self, from: usize, to: usize, len: usize) -> Result<()> {
        self.check_slot(from)?;
        self.check_slot(to)?;
        if from == to {
            return Ok(());
        }
        let bytes = self.prefix_bytes(len);
        let active = self.active;
        self.copy(bytes, |b, layer, i| {
            let buffer = |slot: usize| match slot == active {
                true => &b.blocks[layer].kv[i],
                false => &b.slots[slot][layer][i],
            };
            [(buffer(from), buffer(to))]
        })
        .await
    }

    /// The slot forwards use now.
    pub fn active_slot(&self) -> usize {
        self.active
    }

    fn check_slot(&self, slot: usize) -> Result<()> {
        let n = self.slots.len().max(1);
        match slot < n {
            true => Ok(()),
            false => Err(Error::State(format!(
                "KV cache slot {slot} does not exist ({n} made)"
            ))),
        }
    }

    fn prefix_bytes(&self, len: usize) -> u64 {
        (len.min(self.config.n_positions) * self.config.n_embd * 4) as u64
    }

    /// One submission of buffer copies: for each layer and each of keys (0) and values (1),
    /// the (source, destination) pairs `pairs` names, `bytes` from the start of each.
    async fn copy<'a, const N: usize>(
        &'a self,
        bytes: u64,
        pairs: impl Fn(&'a Self, usize, usize) -> [(&'a wgpu::Buffer, &'a wgpu::Buffer); N],
    ) -> Result<()> {
        self.ctx.check()?;
        if bytes == 0 {
            return Ok(());
        }
        let scopes = self.ctx.scopes();
        let mut enc = (self.ctx.device).create_command_encoder(&Default::default());
        for layer in 0..self.config.n_layer {
            for i in 0..2 {
                for (src, dst) in pairs(self, layer, i) {
                    enc.copy_buffer_to_buffer(src, 0, dst, 0, bytes);
                }
            }
        }
        self.ctx.queue.submit([enc.finish()]);
        scopes.close("copying KV caches for beam search").await
    }
}
