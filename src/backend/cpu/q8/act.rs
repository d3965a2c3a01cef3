//! Quantized activations (`Q8Act`): a product's input rows rounded to 8 bits in blocks of
//! `QK` with one scale each, once per linear layer, and the spread form the tiled kernels read.

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
use super::simd128;
use super::{simd, Simd, OFFSET, QK, RG};

/// One block of an activation row to -127..=127: its scale and the sum of its values.
#[inline(always)]
fn quantize_act_block(v: &[f32; QK], q: &mut [i8; QK]) -> (f32, i32) {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return simd128::quantize_block(v, 127.0, q);
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    {
        let scale = super::quantize_block_portable(v, 127.0, q);
        (scale, q.iter().map(|&v| v as i32).sum())
    }
}

/// Quantized activations: `rows` rows of `blocks` blocks, reused between calls (it only grows).
#[derive(Default)]
pub struct Q8Act {
    pub(super) rows: usize,
    pub(super) blocks: usize,
    pub(super) qs: Vec<i8>,
    pub(super) scales: Vec<f32>,
    /// Per block: −OFFSET × the sum of its values, what takes back out of a dot the part that
    /// the weights' offset adds (negative, so that a kernel starts its integer sum from it).
    pub(super) offsets: Vec<i32>,
    /// When there are at least two rows and the kernel reads tiles of rows spread
    /// (`Simd::x_block`), each block in that form, `SPREAD` bytes, so the kernel loads what it
    /// would otherwise rebuild for every row and load. x86-64 (`avx2.rs`): for each 32-byte load
    /// of a group's weights (eight columns of its four rows), the eight activation bytes of those
    /// columns, each four-byte half repeated four times. wasm's `widen` kernel (`simd128.rs`): for
    /// each 16-byte load (four columns of four rows), the four activation bytes widened to 16 bits
    /// and repeated twice. A single row, bound by reading the weights, reads the block itself.
    #[cfg(any(target_arch = "x86_64", target_arch = "wasm32"))]
    spread: Vec<i8>,
}

/// Bytes per block of `Q8Act::spread`.
#[cfg(any(target_arch = "x86_64", target_arch = "wasm32"))]
const SPREAD: usize = QK * RG;

impl Q8Act {
    /// Quantizes `x` (rows, cols) in place of the previous contents.
    pub fn quantize(&mut self, x: &[f32], cols: usize) {
        let rows = x.len() / cols;
        let blocks = cols.div_ceil(QK);
        (self.rows, self.blocks) = (rows, blocks);
        if self.qs.len() < rows * blocks * QK {
            self.qs.resize(rows * blocks * QK, 0);
            self.scales.resize(rows * blocks, 0.0);
            self.offsets.resize(rows * blocks, 0);
        }
        let qs = &mut self.qs[..rows * blocks * QK];
        let (scales, offsets) = (
            &mut self.scales[..rows * blocks],
            &mut self.offsets[..rows * blocks],
        );
        // A prompt's rows are split between the threads; each row's numbers are the same.
        #[cfg(feature = "threads")]
        let split = rayon::current_num_threads() > 1 && rows > 1;
        #[cfg(not(feature = "threads"))]
        let split = false;
        if split {
            #[cfg(feature = "threads")]
            {
                use rayon::prelude::*;
                (x.par_chunks(cols))
                    .zip(qs.par_chunks_mut(blocks * QK))
                    .zip(scales.par_chunks_mut(blocks))
                    .zip(offsets.par_chunks_mut(blocks))
                    .for_each(|(((x, q), s), o)| Self::quantize_row(x, q, s, o));
            }
        } else {
            for (((x, q), s), o) in (x.chunks_exact(cols))
                .zip(qs.chunks_exact_mut(blocks * QK))
                .zip(scales.chunks_exact_mut(blocks))
                .zip(offsets.chunks_exact_mut(blocks))
            {
                Self::quantize_row(x, q, s, o);
            }
        }
        self.spread_blocks();
    }

    /// Fills `spread` from `qs` when there is a tile of rows: whatever the kernel now, because
    /// the one that multiplies may be another (the kernel timing at load switches between them);
    /// a pass over the activations, small beside the product that reads them.
    pub(super) fn spread_blocks(&mut self) {
        #[cfg(any(target_arch = "x86_64", target_arch = "wasm32"))]
        {
            // A single row too where a kernel reads it spread (`Simd::row_x_block`).
            if self.rows < if simd::ROW_SPREAD { 1 } else { 2 } {
                return;
            }
            let n = self.rows * self.blocks;
            if self.spread.len() < n * SPREAD {
                self.spread.resize(n * SPREAD, 0);
            }
            for (src, dst) in
                (self.qs[..n * QK].chunks_exact(QK)).zip(self.spread.chunks_exact_mut(SPREAD))
            {
                Self::spread_block(src, dst);
            }
        }
    }

    /// x86-64: load p of a group's block holds columns 8p..8p+3 of its four rows in the low 16
    /// bytes and 8p+4..8p+7 in the high 16; each activation half repeated four times.
    #[cfg(target_arch = "x86_64")]
    fn spread_block(src: &[i8], dst: &mut [i8]) {
        for (half, out) in dst.chunks_exact_mut(RG * 4).enumerate() {
            let four = &src[half * 4..][..4];
            for lane in out.chunks_exact_mut(4) {
                lane.copy_from_slice(four);
            }
        }
    }

    /// wasm: load j of a group's block holds columns 4j..4j+3 of its four rows; the four
    /// activation bytes as little-endian i16, twice (for `i32x4.dot_i16x8_s` against the low and
    /// the high half of the widened weights).
    #[cfg(target_arch = "wasm32")]
    fn spread_block(src: &[i8], dst: &mut [i8]) {
        #[cfg(target_feature = "simd128")]
        for (four, out) in src.chunks_exact(4).zip(dst.chunks_exact_mut(16)) {
            use core::arch::wasm32::*;
            // SAFETY: four bytes read, sixteen written: the chunks' sizes.
            unsafe {
                let x = v128_load32_splat(four.as_ptr() as *const u32);
                v128_store(out.as_mut_ptr() as *mut v128, i16x8_extend_low_i8x16(x));
            }
        }
        #[cfg(not(target_feature = "simd128"))]
        for (four, out) in src.chunks_exact(4).zip(dst.chunks_exact_mut(16)) {
            for (i, pair) in out.chunks_exact_mut(2).enumerate() {
                pair.copy_from_slice(&(four[i % 4] as i16).to_le_bytes().map(|b| b as i8));
            }
        }
    }

    /// The activation bytes of rows `i..i + tile` in the form `kernel` reads them: a tile of
    /// rows as `Simd::x_block` says, a single row as it is.
    pub(super) fn x(&self, kernel: Simd, i: usize, tile: usize) -> &[i8] {
        let nb = self.blocks;
        #[cfg(any(target_arch = "x86_64", target_arch = "wasm32"))]
        if (if tile > 1 {
            kernel.x_block()
        } else {
            kernel.row_x_block()
        }) == SPREAD
        {
            return &self.spread[i * nb * SPREAD..][..tile * nb * SPREAD];
        }
        let _ = kernel;
        &self.qs[i * nb * QK..][..tile * nb * QK]
    }

    /// One row's blocks: `qs` (blocks · QK), their scales and offsets.
    pub(super) fn quantize_row(x: &[f32], qs: &mut [i8], scales: &mut [f32], offsets: &mut [i32]) {
        let mut vals = [0f32; QK];
        for (b, ((q, scale), offset)) in (qs.chunks_exact_mut(QK))
            .zip(scales.iter_mut())
            .zip(offsets.iter_mut())
            .enumerate()
        {
            let part = &x[b * QK..(b * QK + QK).min(x.len())];
            let q: &mut [i8; QK] = q.try_into().unwrap();
            // A whole block from `x` itself; the last, partial one through zeros.
            let (s, sum) = match part.try_into() {
                Ok(block) => quantize_act_block(block, q),
                Err(_) => {
                    vals[..part.len()].copy_from_slice(part);
                    vals[part.len()..].fill(0.0);
                    quantize_act_block(&vals, q)
                }
            };
            (*scale, *offset) = (s, -OFFSET * sum);
        }
    }
}
