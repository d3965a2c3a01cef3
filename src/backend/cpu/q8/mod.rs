//! 8-bit weights for the CPU backend, in blocks of 32 values with one f32 scale each (ggml's
//! q8_0 layout), quantized at load time, against activations quantized the same way once per
//! linear layer. A product is the integer dot of each block times the two scales, summed over the
//! blocks, so each block keeps its own range and one outlier spoils only its 32 neighbours.
//!
//! Weights are rounded to -63..=63 (scale `max|w| / 63`) and stored offset by +64, as bytes
//! 1..=127: the form the fastest int8 dot products want, one operand unsigned and 7-bit
//! (`i32x4.relaxed_dot_i8x16_i7x16_add_s` in wasm, `vpmaddubsw` on x86). Activations keep the
//! full -127..=127 (scale `max|x| / 127`); the offset comes back out as 64 × the activation
//! block's sum, once per block for all rows.
//!
//! Layout: output rows come in groups of four and the four rows' blocks are interleaved four
//! columns at a time, `[group][block][column / 4][row 0..4][column % 4]`, so a kernel streams
//! one contiguous run of bytes while it computes four outputs, and an int8 dot of one 16-byte
//! vector with four activation bytes repeated leaves each row's sum in its own lane: no
//! horizontal sums per block. The group's scales sit `[group][block][4]`, so the four scales of
//! a block are one load. Rows are padded to a multiple of 4 and columns to a multiple of 32
//! with zeros.
//!
//! Kernels: wasm relaxed SIMD (its four-way 8-bit dot, or its 16-bit dot widened), wasm simd128
//! (`i32x4.dot_i16x8_s` over widened bytes, also in the relaxed builds), x86-64 AVX2 with or
//! without VNNI, and a portable one that is also the tests' reference. None of them allocates.
//! `choice` picks one (`kernel()` names it, `set_kernel` names another).

/// Values per block.
pub const QK: usize = 32;
/// Output rows per group.
const RG: usize = 4;
/// Activation rows per tile of a prompt's product.
const TILE: usize = 4;
/// Activation rows per tile of a prompt's product for two groups in wasm (`Simd::wide_tile`):
/// five rows' dot chains still fit the engines' 15 or 16 vector registers, and each weight load
/// serves one more row. A 64-token prompt of the GPT-2-124M shape took 0.86x the time in V8
/// (`dot-add`) and 0.78x in JavaScriptCore (`widen`) against tiles of four; six rows spill.
const WIDE_TILE: usize = 5;
/// At most this many activation rows (a batch of sequences, a draft's verification, a short
/// prompt) go two at a time in wasm (`Simd::pairs_few`): each group's weights come from memory
/// once, for the first pair, and from L1 for the next. Against tiles of four, in Chromium (V8's
/// `dot-add`, GPT-2-124M shape) a batch of four took 0.87x the time a step, of eight 0.82x, and
/// an 8-token prompt 0.84x (docs/performance.md, "A few rows two at a time in wasm").
const FEW_ROWS: usize = 8;
/// Activation rows whose product costs about one row's weight loads: a tile where the kernel
/// shares them (wasm simd128, x86-64 AVX2), one where it computes rows one by one (portable).
pub const ROWS_SHARING_LOADS: usize =
    if cfg!(any(target_arch = "x86_64", target_feature = "simd128")) {
        TILE
    } else {
        1
    };
/// The weights' offset: stored byte = rounded weight + 64.
const OFFSET: i32 = 64;
/// How far ahead of the weights being read a kernel asks for the next ones, in bytes.
pub const PREFETCH: usize = 2048;

/// Where weight (row `l` of its group, column `c` of its block) sits in the group's block.
#[inline(always)]
const fn lane_byte(l: usize, c: usize) -> usize {
    (c / 4) * (RG * 4) + l * 4 + c % 4
}

/// A weight matrix (out, in) in the interleaved q8_0 layout above.
pub struct Q8Matrix {
    rows: usize,
    cols: usize,
    blocks: usize, // per row: cols / QK rounded up
    qs: Vec<i8>,
    scales: Vec<f32>,
}

impl Q8Matrix {
    /// Quantizes `w` whose element (row r, column c) is `w[r * row_stride + c * col_stride]`:
    /// `(rows, cols, cols, 1)` for a row-major (out, in) matrix, `(rows, cols, 1, rows)` for
    /// transformers' Conv1D (in, out) weight.
    pub fn quantize(
        w: &[f32],
        rows: usize,
        cols: usize,
        row_stride: usize,
        col_stride: usize,
    ) -> crate::error::Result<Q8Matrix> {
        Self::quantize_with(|i| w[i], rows, cols, row_stride, col_stride)
    }

    /// `quantize` with element `i` of the weights given by `w(i)`: straight from a checkpoint's
    /// bytes, so the tensor is never widened to f32 as a whole.
    pub fn quantize_with(
        w: impl Fn(usize) -> f32,
        rows: usize,
        cols: usize,
        row_stride: usize,
        col_stride: usize,
    ) -> crate::error::Result<Q8Matrix> {
        let mut m = Self::zeroed(rows, cols)?;
        let (mut vals, mut q) = ([0f32; QK], [0i8; QK]);
        for b in 0..m.blocks {
            let c0 = b * QK;
            let n = QK.min(cols - c0);
            for r in 0..rows {
                for (i, v) in vals.iter_mut().enumerate() {
                    *v = if i < n {
                        w(r * row_stride + (c0 + i) * col_stride)
                    } else {
                        0.0
                    };
                }
                let scale = quantize_block(&vals, 63.0, &mut q);
                m.put_block(r, b, scale, &q);
            }
        }
        Ok(m)
    }

    /// From GGUF Q8_0 blocks (34 bytes: an f16 scale, 32 × i8) of a row-major (out, in) matrix
    /// whose rows are whole blocks. A block whose values all lie in -63..=63 (as a file written for
    /// these kernels has them, `tools/make_gguf.py --q7`) is copied: no rounding at load, and the
    /// file's values are used exactly. Any other block is rounded again from its values, as
    /// `quantize_with` would.
    pub fn from_q8_0(d: &[u8], rows: usize, cols: usize) -> crate::error::Result<Q8Matrix> {
        debug_assert!(cols.is_multiple_of(QK) && d.len() >= rows * cols / QK * 34);
        let mut m = Self::zeroed(rows, cols)?;
        let (mut vals, mut q) = ([0f32; QK], [0i8; QK]);
        for (i, src) in d.chunks_exact(34).take(rows * m.blocks).enumerate() {
            let (r, b) = (i / m.blocks, i % m.blocks);
            let scale = half::f16::from_bits(u16::from_le_bytes([src[0], src[1]])).to_f32();
            // Four values to a word, each byte added to without a carry into the next: in range
            // when every v + OFFSET - 1 is at most 2·OFFSET - 2 (no byte of `high` with its top
            // bit), stored as v + OFFSET. Straight-line integer code: it runs once per visit, in
            // the engine's first tier (Node 20's Liftoff: 24 ms a byte at a time for the demo
            // model, 16 so).
            const BYTES: u32 = 0x0101_0101;
            const _: () = assert!(OFFSET == 64, "the check takes 127 as the first byte out");
            let (mut words, mut high) = ([0u32; QK / 4], 0u32);
            for (w, c) in words.iter_mut().zip(src[2..].chunks_exact(4)) {
                let v = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                let (low, top) = (v & 0x7f7f_7f7f, v & 0x8080_8080);
                let t = (low + BYTES * (OFFSET as u32 - 1)) ^ top;
                high |= ((t & 0x7f7f_7f7f) + BYTES) | t;
                *w = (low + BYTES * OFFSET as u32) ^ top;
            }
            if high & 0x8080_8080 == 0 {
                m.put_words(r, b, scale, &words);
            } else {
                for (x, &v) in q.iter_mut().zip(&src[2..]) {
                    *x = v as i8;
                }
                for (x, &v) in vals.iter_mut().zip(&q) {
                    *x = v as f32 * scale;
                }
                let scale = quantize_block(&vals, 63.0, &mut q);
                m.put_block(r, b, scale, &q);
            }
        }
        Ok(m)
    }

    /// All zeros, in the layout above, for `rows` × `cols` weights.
    fn zeroed(rows: usize, cols: usize) -> crate::error::Result<Q8Matrix> {
        let (blocks, groups) = (cols.div_ceil(QK), rows.div_ceil(RG));
        Ok(Q8Matrix {
            rows,
            cols,
            blocks,
            qs: crate::platform::try_zeroed_huge(groups * blocks * RG * QK, "8-bit weights")?,
            scales: crate::platform::try_zeroed(groups * blocks * RG, "8-bit weights")?,
        })
    }

    /// Block `b` of row `r`: its scale and its 32 values (-63..=63), put in their lanes.
    fn put_block(&mut self, r: usize, b: usize, scale: f32, q: &[i8; QK]) {
        let words = core::array::from_fn(|j| {
            u32::from_le_bytes(core::array::from_fn(|k| {
                (q[4 * j + k] + OFFSET as i8) as u8
            }))
        });
        self.put_words(r, b, scale, &words);
    }

    /// `put_block` of a block already stored: its 32 bytes (v + `OFFSET`) four to a word, each
    /// word four columns of the row, which lie side by side in the layout.
    fn put_words(&mut self, r: usize, b: usize, scale: f32, words: &[u32; QK / 4]) {
        let (g, lane) = (r / RG, r % RG);
        let at = (g * self.blocks + b) * RG;
        self.scales[at + lane] = scale;
        let block = &mut self.qs[at * QK..][..RG * QK];
        for (j, w) in words.iter().enumerate() {
            let at = lane_byte(lane, 4 * j);
            for (x, v) in block[at..at + 4].iter_mut().zip(w.to_le_bytes()) {
                *x = v as i8;
            }
        }
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Bytes a full pass over the matrix reads: one per weight plus the scales.
    pub fn bytes(&self) -> usize {
        self.qs.len() + 4 * self.scales.len()
    }

    /// Bytes allocated for the matrix (capacity, not length).
    pub fn allocated_bytes(&self) -> usize {
        self.qs.capacity() + 4 * self.scales.capacity()
    }

    /// Row `r` dequantized into `out` (cols), e.g. an embedding lookup.
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let (g, lane) = (r / RG, r % RG);
        for (b, chunk) in out[..self.cols].chunks_mut(QK).enumerate() {
            let at = (g * self.blocks + b) * RG;
            let (s, block) = (self.scales[at + lane], &self.qs[at * QK..][..RG * QK]);
            for (c, o) in chunk.iter_mut().enumerate() {
                *o = (block[lane_byte(lane, c)] as i32 - OFFSET) as f32 * s;
            }
        }
    }

    /// y (t, rows) = x (t, cols) · Wᵀ (+ bias), with the rows of `x` quantized in `act`. With the
    /// `threads` feature and a pool of more than one thread, a decode step (t = 1) splits the
    /// output rows between the threads and a prompt splits its rows.
    pub fn matmul(&self, act: &Q8Act, bias: Option<&[f32]>, y: &mut [f32]) {
        assert_eq!(
            act.blocks, self.blocks,
            "activation and weight widths differ"
        );
        let (t, n, groups) = (act.rows, self.rows, self.rows.div_ceil(RG));
        let y = &mut y[..t * n];
        let kernel = Simd::get(t);
        #[cfg(feature = "threads")]
        {
            use rayon::prelude::*;
            let threads = rayon::current_num_threads();
            if threads > 1 && t == 1 {
                let per = groups.div_ceil(4 * threads); // a few chunks per thread for balance
                y.par_chunks_mut(per * RG).enumerate().for_each(|(c, y)| {
                    let g0 = c * per;
                    self.part(kernel, act, bias, 0..1, g0..(g0 + per).min(groups), y);
                });
                return;
            }
            if threads > 1 {
                let per = t.div_ceil(threads);
                y.par_chunks_mut(per * n).enumerate().for_each(|(c, y)| {
                    let i0 = c * per;
                    self.part(kernel, act, bias, i0..(i0 + per).min(t), 0..groups, y);
                });
                return;
            }
        }
        self.part(kernel, act, bias, 0..t, 0..groups, y);
    }

    /// The outputs of activation rows `is` and row groups `gs` into `y`, whose element
    /// (i, r) is `y[(i - is.start) * self.rows + r - gs.start * RG]`: the whole product's layout
    /// from its first element on.
    fn part(
        &self,
        kernel: Simd,
        act: &Q8Act,
        bias: Option<&[f32]>,
        is: std::ops::Range<usize>,
        gs: std::ops::Range<usize>,
        y: &mut [f32],
    ) {
        let nb = self.blocks;
        let mut outs = [[[0f32; RG]; WIDE_TILE]; 2];
        let wide = kernel.wide_tile();
        let few = is.len() <= FEW_ROWS && kernel.pairs_few();
        let mut g = gs.start;
        while g < gs.end {
            // Two groups at a time: where the kernel shares activation loads between them, a
            // prompt's tile computes eight rows of weights for about four rows' loads.
            let pair = if gs.end - g >= 2 { 2 } else { 1 };
            let w = &self.qs[g * nb * RG * QK..][..pair * nb * RG * QK];
            let ws = &self.scales[g * nb * RG..][..pair * nb * RG];
            let mut i = is.start;
            while i < is.end {
                // Four prompt rows at a time share each load of the groups' weights (two, where
                // the kernel shares loads between two: a batch of two or three sequences).
                let left = is.end - i;
                let tile = match left {
                    _ if few && left >= 2 => 2,
                    _ if few => 1,
                    // Five rows unless the rows after them would split badly (eight rows left
                    // are two tiles of four, not five, a pair and one).
                    _ if pair == 2 && left >= wide && !matches!(left - wide, 1 | 3) => wide,
                    _ if left >= TILE => TILE,
                    2.. if kernel.pairs_rows() => 2,
                    _ => 1,
                };
                let x = act.x(kernel, i, tile);
                let xs = &act.scales[i * nb..][..tile * nb];
                let xo = &act.offsets[i * nb..][..tile * nb];
                if tile == WIDE_TILE && pair == 2 {
                    let [o0, o1] = &mut outs;
                    kernel.dot8xn::<WIDE_TILE>(w, ws, x, xs, xo, [o0, o1]);
                } else if tile == TILE && pair == 2 {
                    let [o0, o1] = &mut outs;
                    kernel.dot8xn::<TILE>(w, ws, x, xs, xo, [first(o0), first(o1)]);
                } else if pair == 2 && tile == 1 {
                    let [o0, o1] = &mut outs;
                    kernel.dot8(w, ws, x, xs, xo, [&mut o0[0], &mut o1[0]]);
                } else {
                    for (h, outs) in outs[..pair].iter_mut().enumerate() {
                        let w = &w[h * nb * RG * QK..][..nb * RG * QK];
                        let ws = &ws[h * nb * RG..][..nb * RG];
                        if tile == TILE {
                            kernel.dot4x4(w, ws, x, xs, xo, first::<TILE>(outs));
                        } else if tile == 2 {
                            let two: &mut [[f32; RG]; 2] = (&mut outs[..2]).try_into().unwrap();
                            kernel.dot4x2(w, ws, x, xs, xo, two);
                        } else {
                            kernel.dot4(w, ws, x, xs, xo, &mut outs[0]);
                        }
                    }
                }
                for (h, outs) in outs[..pair].iter().enumerate() {
                    let r0 = (g + h) * RG;
                    let n = RG.min(self.rows - r0);
                    for (k, out) in outs[..tile].iter().enumerate() {
                        let at = (i + k - is.start) * self.rows + r0 - gs.start * RG;
                        for (l, yv) in y[at..at + n].iter_mut().enumerate() {
                            *yv = out[l] + bias.map_or(0.0, |b| b[r0 + l]);
                        }
                    }
                }
                i += tile;
            }
            g += pair;
        }
    }
}

/// The first `N` rows' outputs of a tile's.
fn first<const N: usize>(outs: &mut [[f32; RG]; WIDE_TILE]) -> &mut [[f32; RG]; N] {
    (&mut outs[..N]).try_into().unwrap()
}

/// Rounds 32 values to -levels..=levels with one scale; returns the scale. In wasm with SIMD,
/// four lanes at a time (`simd128::quantize_block`, the same numbers).
#[inline(always)]
fn quantize_block(v: &[f32; QK], levels: f32, q: &mut [i8]) -> f32 {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return simd128::quantize_block(v, levels, (&mut q[..QK]).try_into().unwrap()).0;
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    quantize_block_portable(v, levels, q)
}

/// `quantize_block` branch-free over fixed-size arrays, so it compiles to SIMD where the
/// compiler can.
#[inline(always)]
#[cfg_attr(
    all(target_arch = "wasm32", target_feature = "simd128"),
    allow(dead_code)
)]
fn quantize_block_portable(v: &[f32; QK], levels: f32, q: &mut [i8]) -> f32 {
    let mut m = [0f32; 8];
    for c in v.chunks_exact(8) {
        for k in 0..8 {
            m[k] = m[k].max(c[k].abs());
        }
    }
    let amax = m.iter().fold(0f32, |a, &b| a.max(b));
    let scale = amax / levels;
    let inv = if scale > 0.0 { 1.0 / scale } else { 0.0 };
    for (q, x) in q[..QK].iter_mut().zip(v) {
        // Clamped: with a subnormal scale, 1/scale is infinite and x·inv would leave the range
        // (a weight of 127 would then overflow its +64 offset; found by the fuzzer). Through
        // i32: a saturating conversion to i8 is a scalar loop; NaN becomes 0 either way.
        *q = super::vmath::round(x * inv).clamp(-levels, levels) as i32 as i8;
    }
    scale
}

#[cfg(target_arch = "x86_64")]
mod avx2;
mod choice;

/// The browser's 8-bit kernels (simd128.rs `Dot`, in the order of its discriminants), by the
/// names `Gpt2.load`'s `kernel` option takes: named here, outside the wasm-only file, so native
/// code (the generated www/api/options.js) lists them too.
pub const WASM_KERNELS: [&str; 3] = ["dot-add", "dot-i16", "widen"];
mod act;
mod kv;
mod portable;

pub use act::Q8Act;
pub use choice::{calibrate, kernel, kernels, set_kernel, timed, undecided, use_timed};
pub use kv::{Keys, Values};
mod simd;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod simd128;
use simd::Simd;

#[cfg(test)]
pub(super) mod tests;
