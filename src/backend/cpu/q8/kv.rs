//! One attention head's KV cache in 8 bits, laid out so that attention's two products are this
//! module's kernels: the scores are the keys (positions × head_size) times the query, and the
//! output is the values transposed (head_size × positions) times the attention weights.
//!
//! Each position is quantized once, when it is stored, and never again: its keys with a scale
//! per block of 32 (as a weight row), its values with one scale of their own that the attention
//! weights take before they are quantized (the values' matrix has unit scales). So a query sees
//! the same numbers whether it is a decode step or one row of a prompt, and since each row of a
//! product is the same whatever rows share its tile, a prompt's rows equal decode steps bit for
//! bit. Positions past the ones a row sees are computed for a whole group and ignored (keys),
//! or meet attention weights of exactly zero (values).

use super::{lane_byte, quantize_block, Q8Act, Q8Matrix, Simd, OFFSET, QK, RG, TILE};
use crate::error::Result;

/// An all-zero matrix of `rows` × `cols` with every scale `scale`.
fn zeroed(rows: usize, cols: usize, scale: f32, what: &str) -> Result<Q8Matrix> {
    let (blocks, groups) = (cols.div_ceil(QK), rows.div_ceil(RG));
    let qs = crate::platform::try_zeroed(groups * blocks * RG * QK, what)?;
    let mut scales = crate::platform::try_zeroed(groups * blocks * RG, what)?;
    scales.fill(scale);
    Ok(Q8Matrix {
        rows,
        cols,
        blocks,
        qs,
        scales,
    })
}

/// The product of activation rows `act` with the first `nb` blocks of the groups `gs(i)` of
/// `m` (row i's being `0..gs(i)`, growing with i): row i's outputs go to
/// `out[i * stride + 4 g + l]` for group g's row l.
fn product(
    m: &Q8Matrix,
    act: &Q8Act,
    groups: impl Fn(usize) -> usize,
    out: &mut [f32],
    stride: usize,
) {
    let (kernel, nb, all) = (Simd::get(act.rows), act.blocks, m.blocks);
    let mut outs = [[0f32; RG]; TILE];
    let mut i = 0;
    while i < act.rows {
        let tile = if act.rows - i >= TILE { TILE } else { 1 };
        let x = act.x(kernel, i, tile);
        let xs = &act.scales[i * nb..][..tile * nb];
        let xo = &act.offsets[i * nb..][..tile * nb];
        for g in 0..groups(i + tile - 1) {
            let w = &m.qs[g * all * RG * QK..][..nb * RG * QK];
            let ws = &m.scales[g * all * RG..][..nb * RG];
            if tile == TILE {
                kernel.dot4x4(w, ws, x, xs, xo, &mut outs);
            } else {
                kernel.dot4(w, ws, x, xs, xo, &mut outs[0]);
            }
            for (k, o) in outs[..tile].iter().enumerate() {
                let at = (i + k) * stride + g * RG;
                if stride - g * RG >= RG {
                    // A fixed size, so no call to memcpy.
                    let dst: &mut [f32; RG] = (&mut out[at..at + RG]).try_into().unwrap();
                    *dst = *o;
                } else {
                    let n = stride - g * RG;
                    out[at..at + n].copy_from_slice(&o[..n]);
                }
            }
        }
        i += tile;
    }
}

impl Q8Act {
    /// `quantize(x, cols)` for rows of which row r holds values in its first `used(r)` columns
    /// only and zeros after: the same numbers, without reading or rounding the zeros.
    pub fn quantize_prefix(&mut self, x: &[f32], cols: usize, used: impl Fn(usize) -> usize) {
        let (rows, blocks) = (x.len() / cols, cols.div_ceil(QK));
        (self.rows, self.blocks) = (rows, blocks);
        if self.qs.len() < rows * blocks * QK {
            self.qs.resize(rows * blocks * QK, 0);
            self.scales.resize(rows * blocks, 0.0);
            self.offsets.resize(rows * blocks, 0);
        }
        for (r, x) in x.chunks_exact(cols).enumerate() {
            let n = used(r).min(cols);
            let own = n.div_ceil(QK);
            let (qs, scales, offsets) = (
                &mut self.qs[r * blocks * QK..][..blocks * QK],
                &mut self.scales[r * blocks..][..blocks],
                &mut self.offsets[r * blocks..][..blocks],
            );
            Q8Act::quantize_row(&x[..n], &mut qs[..own * QK], scales, offsets);
            qs[own * QK..].fill(0);
            scales[own..].fill(0.0);
            offsets[own..].fill(0);
        }
        self.spread_blocks();
    }
}

/// One head's keys: (n_ctx, head_size), a weight matrix whose rows are positions.
pub struct Keys(Q8Matrix);

impl Keys {
    pub fn new(n_ctx: usize, head_size: usize, what: &str) -> Result<Keys> {
        Ok(Keys(zeroed(n_ctx, head_size, 0.0, what)?))
    }

    /// Stores position `p`'s key (head_size values), a block of 32 at a time.
    pub fn store(&mut self, p: usize, k: &[f32]) {
        let m = &mut self.0;
        let (g, lane, nb) = (p / RG, p % RG, m.blocks);
        let (mut vals, mut q) = ([0f32; QK], [0i8; QK]);
        for (b, part) in k.chunks(QK).enumerate() {
            // A whole block from `k` itself; a partial one through zeros.
            let block: &[f32; QK] = match part.try_into() {
                Ok(block) => block,
                Err(_) => {
                    vals[..part.len()].copy_from_slice(part);
                    vals[part.len()..].fill(0.0);
                    &vals
                }
            };
            let at = (g * nb + b) * RG;
            m.scales[at + lane] = quantize_block(block, 63.0, &mut q);
            q.iter_mut().for_each(|q| *q += OFFSET as i8);
            // Four columns of a row are four bytes in a row.
            let block = &mut m.qs[at * QK..][..RG * QK];
            for j in 0..QK / 4 {
                let at = lane_byte(lane, 4 * j);
                let dst: &mut [i8; 4] = (&mut block[at..at + 4]).try_into().unwrap();
                *dst = [q[4 * j], q[4 * j + 1], q[4 * j + 2], q[4 * j + 3]];
            }
        }
    }

    /// q · k for the queries `q` (quantized, head_size columns) and the positions each sees,
    /// `seen(i)` for row i (growing with i): row i's into `out[i * stride..][..seen(i)]`, with
    /// `stride` at least the last row's `seen` rounded up to a multiple of 4.
    pub fn scores(&self, q: &Q8Act, seen: impl Fn(usize) -> usize, out: &mut [f32], stride: usize) {
        assert!(q.blocks == self.0.blocks && stride.is_multiple_of(RG));
        assert!(out.len() >= q.rows * stride && seen(q.rows - 1) <= stride.min(self.0.rows));
        product(&self.0, q, |i| seen(i).div_ceil(RG), out, stride);
    }

    pub fn allocated_bytes(&self) -> usize {
        self.0.allocated_bytes()
    }

    /// Positions `0..len` from `src` (a cache of the same shape).
    pub fn copy_from(&mut self, src: &Keys, len: usize) {
        let (m, s) = (&mut self.0, &src.0);
        let groups = len.div_ceil(RG).min(m.rows.div_ceil(RG));
        let n = groups * m.blocks * RG;
        m.qs[..n * QK].copy_from_slice(&s.qs[..n * QK]);
        m.scales[..n].copy_from_slice(&s.scales[..n]);
    }
}

/// One head's values, transposed: (head_size, n_ctx) with unit scales, and each position's
/// own scale apart.
pub struct Values {
    m: Q8Matrix,
    scale: Vec<f32>,
}

impl Values {
    pub fn new(n_ctx: usize, head_size: usize, what: &str) -> Result<Values> {
        Ok(Values {
            m: zeroed(head_size, n_ctx, 1.0, what)?,
            scale: crate::platform::try_zeroed(n_ctx, what)?,
        })
    }

    /// Stores position `p`'s value (head_size values) with one scale, max |v| / 63.
    pub fn store(&mut self, p: usize, v: &[f32]) {
        use super::super::vmath::{max_abs, round};
        let m = &mut self.m;
        let (b, c) = (p / QK, p % QK);
        let mut q = [0i8; QK];
        let scale = max_abs(v) / 63.0;
        let inv = if scale > 0.0 { 1.0 / scale } else { 0.0 };
        for (d0, part) in (0..).step_by(QK).zip(v.chunks(QK)) {
            for (q, &x) in q.iter_mut().zip(part) {
                // Compare-and-select, which vectorises in wasm (`clamp` does not); clamped for
                // a subnormal scale, and NaN becomes 0, as in `quantize_block`.
                let r = round(x * inv);
                let r = if r > 63.0 { 63.0 } else { r };
                let r = if r < -63.0 { -63.0 } else { r };
                *q = r as i32 as i8;
            }
            // Row d's byte for position p: group d / 4, block b, lane d % 4.
            for (g, q) in (d0 / RG..).zip(q[..part.len()].chunks(RG)) {
                let at = (g * m.blocks + b) * RG * QK + lane_byte(0, c);
                for (l, &q) in q.iter().enumerate() {
                    m.qs[at + l * 4] = q + OFFSET as i8;
                }
            }
        }
        self.scale[p] = scale;
    }

    /// Each position's scale: attention weights times these are what `weighted` takes.
    pub fn scales(&self) -> &[f32] {
        &self.scale
    }

    /// Σ_p w[p] · v[p] for each row of `w` (the attention weights, already times `scales`,
    /// quantized over positions): row i's head_size outputs into `out[i * head_size..]`.
    pub fn weighted(&self, w: &Q8Act, out: &mut [f32]) {
        let hs = self.m.rows;
        assert!(w.blocks <= self.m.blocks && out.len() >= w.rows * hs);
        product(&self.m, w, |_| hs.div_ceil(RG), out, hs);
    }

    pub fn allocated_bytes(&self) -> usize {
        self.m.allocated_bytes() + 4 * self.scale.capacity()
    }

    /// Positions `0..len` from `src` (a cache of the same shape).
    pub fn copy_from(&mut self, src: &Values, len: usize) {
        let nb = self.m.blocks;
        let (m, s) = (&mut self.m, &src.m);
        let run = len.div_ceil(QK).min(nb) * RG * QK;
        for g in 0..m.rows.div_ceil(RG) {
            let at = g * nb * RG * QK;
            m.qs[at..at + run].copy_from_slice(&s.qs[at..at + run]);
        }
        self.scale[..len].copy_from_slice(&src.scale[..len]);
    }
}
