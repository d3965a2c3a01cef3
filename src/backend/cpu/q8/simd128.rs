//! wasm simd128 kernels (and relaxed SIMD's int8 dot when built with `+relaxed-simd`).
//!
//! In the interleaved layout each 16-byte vector of a group's block holds four columns of its
//! four rows, row by row, so one dot of that vector with four activation bytes splatted to
//! every lane leaves row l's partial sum in lane l: no horizontal sums, and an activation row's
//! splat serves all four rows.
//!
//! A kernel takes its dot one of three ways (`Dot`: relaxed SIMD's two 8-bit dots, or plain
//! widening); which is fastest depends on how the engine lowers them on this CPU, and the
//! integers are the same.

use super::{QK, RG, TILE};
use core::arch::wasm32::*;

/// How a kernel takes the dot of four signed activation bytes with four unsigned 7-bit weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(target_feature = "relaxed-simd"), allow(dead_code))]
pub enum Dot {
    /// `i32x4.relaxed_dot_i8x16_i7x16_add_s`: one instruction where the engine has a four-way
    /// 8-bit dot (V8 with AVX-VNNI: `vpdpbusd`; with AVX-VNNI-INT8: `vpdpbssd`; Arm: `sdot`).
    /// V8 without one makes it five: `vpmaddubsw`, `vpmaddwd` and `vpaddd`, and two more that
    /// make the 16-bit ones `vpmaddwd` takes, at every use.
    Add,
    /// `i16x8.relaxed_dot_i8x16_i7x16_s`, then `i32x4.dot_i16x8_s` with 16-bit ones and
    /// `i32x4.add`: three instructions in every engine (`vpmaddubsw`, `vpmaddwd`, `vpaddd`).
    /// Exact for our operands: a pair of products is at most 2 · 127 · 127 = 32258, inside i16,
    /// so the 16-bit step neither wraps nor saturates. (`i32x4.extadd_pairwise_i16x8_s` is the
    /// same sum, but V8 loads the address of its ones into a register at every use: the prompt's
    /// product took 1.5× as long with it.)
    I16,
    /// Bytes widened to 16 bits and `i32x4.dot_i16x8_s`: the only way without relaxed SIMD, and
    /// a candidate with it (`choice::calibrate` and the worker's decode steps time it).
    Widen,
}

impl Dot {
    /// In the order of their discriminants.
    pub const ALL: [Dot; 3] = [Dot::Add, Dot::I16, Dot::Widen];

    /// Which lowering this engine gives `i32x4.relaxed_dot_i8x16_i7x16_add_s`, told by the one
    /// input where lowerings differ: a weight byte of 255, outside i7's range, times 127. A
    /// four-way dot instruction adds the four products exactly (4 · 127 · 255 = 129540 as
    /// unsigned bytes, −508 as signed ones); V8 without one sums pairs in `vpmaddubsw`, which
    /// saturates each at 32767, so the lane is 65534. That engine gets `I16` (three instructions
    /// instead of five; `choice::calibrate` then times it against `Widen`); every other answer
    /// keeps `Add`. Unlike timing the two, this costs
    /// nothing and cannot be misled by a JIT tier that has not arrived yet or a busy machine.
    pub fn probe() -> Dot {
        #[cfg(target_feature = "relaxed-simd")]
        {
            let a = i8x16_splat(core::hint::black_box(127));
            let b = i8x16_splat(core::hint::black_box(-1));
            let r = i32x4_relaxed_dot_i8x16_i7x16_add(a, b, i32x4_splat(0));
            if i32x4_extract_lane::<0>(core::hint::black_box(r)) == 2 * i16::MAX as i32 {
                return Dot::I16;
            }
            Dot::Add
        }
        #[cfg(not(target_feature = "relaxed-simd"))]
        Dot::Widen
    }

    /// The name `Gpt2.load`'s `kernel` option takes and `model.kernel` reports.
    pub fn name(self) -> &'static str {
        super::WASM_KERNELS[self as usize]
    }
}

/// `Dot` as the kernels' const generic parameter.
#[cfg(target_feature = "relaxed-simd")]
pub(super) const ADD: u8 = Dot::Add as u8;
#[cfg(target_feature = "relaxed-simd")]
pub(super) const I16: u8 = Dot::I16 as u8;
const WIDEN: u8 = Dot::Widen as u8;

/// `acc` + the four-way dots of signed `x` and unsigned 7-bit `w` bytes, taken as `DOT` says
/// (`I16`, else `ADD`): the same integers either way.
#[cfg(target_feature = "relaxed-simd")]
#[inline(always)]
fn dot_add<const DOT: u8>(x: v128, w: v128, acc: v128) -> v128 {
    if DOT == I16 {
        let pairs = i16x8_relaxed_dot_i8x16_i7x16(x, w); // (row l: columns 0+1, 2+3) in lanes 2l, 2l+1
        i32x4_add(acc, i32x4_dot_i16x8(pairs, i16x8_splat(1)))
    } else {
        i32x4_relaxed_dot_i8x16_i7x16_add(x, w, acc)
    }
}

/// Vectors per block of a group: 32 columns × 4 rows / 16 bytes.
const STEPS: usize = QK * RG / 16;

/// One block of `N` activation rows against a group's four rows, as integers: lane l of row k's
/// result is Σ_c w[l][c] · x[k][c] + xo[k] (the offset's correction, negative). With `SPREAD`
/// (`WIDEN` only) the rows come spread (`Q8Act::spread`: step j's four bytes already widened to
/// 16 bits, twice), so a step loads them instead of splatting and widening them: the same
/// integers.
///
/// # Safety
/// `wb` points at the block's 128 weight bytes, `xb[k]` at row k's 32 activation bytes (128
/// spread), `xo[k]` at row k's correction for the block.
#[inline(always)]
unsafe fn block_dots<const N: usize, const DOT: u8, const SPREAD: bool>(
    wb: *const v128,
    xb: [*const i8; N],
    xo: [*const i32; N],
) -> [v128; N] {
    // The sums start from the corrections, splatted by their load (no move from an integer
    // register, no add at the end).
    // SAFETY: the caller's contract.
    let init: [v128; N] =
        core::array::from_fn(|k| unsafe { v128_load32_splat(xo[k] as *const u32) });
    #[cfg(target_feature = "relaxed-simd")]
    if DOT != WIDEN && !SPREAD {
        // One row alone gets four independent chains of dots, so that each dot's latency (5
        // cycles with VNNI) is hidden; a tile's four rows are four chains already (more spill
        // out of the engine's 15 vector registers). Integer sums: the result is the same.
        let z = [i32x4_splat(0); N];
        let (mut c0, mut c1, mut c2, mut c3) = (init, z, z, z);
        if N >= 4 {
            for j in 0..STEPS {
                // SAFETY: step j lies inside the block.
                unsafe { dot_step::<N, DOT>(v128_load(wb.add(j)), xb, j, &mut c0) };
            }
            return c0;
        }
        for j in (0..STEPS).step_by(4) {
            // SAFETY: steps j to j + 3 lie inside the block.
            unsafe {
                dot_step::<N, DOT>(v128_load(wb.add(j)), xb, j, &mut c0);
                dot_step::<N, DOT>(v128_load(wb.add(j + 1)), xb, j + 1, &mut c1);
                dot_step::<N, DOT>(v128_load(wb.add(j + 2)), xb, j + 2, &mut c2);
                dot_step::<N, DOT>(v128_load(wb.add(j + 3)), xb, j + 3, &mut c3);
            }
        }
        return core::array::from_fn(|k| {
            i32x4_add(i32x4_add(c0[k], c1[k]), i32x4_add(c2[k], c3[k]))
        });
    }
    {
        // `WIDEN`: bytes widened to 16 bits, pairs of products by `i32x4.dot_i16x8_s` (no
        // 8-bit dot; two multiplies per 16 weights, as relaxed SIMD's without VNNI). Pairs of
        // products: lanes (row 0: columns 0-1, 2-3; row 1: …) in `lo`, rows 2 and 3 in
        // `hi`; the pairs are added at the end of the block.
        let mut lo = [i32x4_splat(0); N];
        let mut hi = [i32x4_splat(0); N];
        for j in 0..STEPS {
            // SAFETY: as above.
            unsafe {
                let w = v128_load(wb.add(j));
                let (wl, wh) = (u16x8_extend_low_u8x16(w), u16x8_extend_high_u8x16(w));
                for k in 0..N {
                    let x = if SPREAD {
                        v128_load(xb[k].add(16 * j) as *const v128)
                    } else {
                        i16x8_extend_low_i8x16(v128_load32_splat(xb[k].add(4 * j) as *const u32))
                    };
                    lo[k] = i32x4_add(lo[k], i32x4_dot_i16x8(wl, x));
                    hi[k] = i32x4_add(hi[k], i32x4_dot_i16x8(wh, x));
                }
            }
        }
        core::array::from_fn(|k| {
            let pairs = i32x4_add(
                i32x4_shuffle::<0, 2, 4, 6>(lo[k], hi[k]),
                i32x4_shuffle::<1, 3, 5, 7>(lo[k], hi[k]),
            );
            i32x4_add(init[k], pairs)
        })
    }
}

/// Step j of a block (four columns of the group's four rows) for each activation row, added to
/// `acc`: signed activations × unsigned 7-bit weights `w`, four products per lane.
///
/// # Safety
/// As `block_dots`, and j < STEPS.
#[cfg(target_feature = "relaxed-simd")]
#[inline(always)]
unsafe fn dot_step<const N: usize, const DOT: u8>(
    w: v128,
    xb: [*const i8; N],
    j: usize,
    acc: &mut [v128; N],
) {
    for k in 0..N {
        // SAFETY: step j's four activation bytes lie inside the block.
        let x = unsafe { v128_load32_splat(xb[k].add(4 * j) as *const u32) };
        acc[k] = dot_add::<DOT>(x, w, acc[k]);
    }
}

/// `acc` += (the block's integer dots) · weight scales · activation scale (`sx`, splatted).
#[inline(always)]
fn scale_add(acc: v128, d: v128, s: v128, sx: v128) -> v128 {
    let (d, s) = (f32x4_convert_i32x4(d), f32x4_mul(s, sx));
    #[cfg(target_feature = "relaxed-simd")]
    return f32x4_relaxed_madd(d, s, acc);
    #[cfg(not(target_feature = "relaxed-simd"))]
    f32x4_add(acc, f32x4_mul(d, s))
}

/// `N` activation rows (row k's blocks start at `x[k * nb * QK]`, or `x[k * nb * QK * RG]`
/// spread) against one group: each row's arithmetic is the same whatever `N` and `SPREAD`, so a
/// row's result does not depend on its tile.
///
/// # Safety
/// `w` holds `nb` blocks of four rows and `ws` their scales; `x`, `xs`, `xo` hold `N` rows of
/// `nb` blocks (spread ones in `x` with `SPREAD`).
#[inline(always)]
unsafe fn dot_rows<const N: usize, const DOT: u8, const SPREAD: bool>(
    w: &[i8],
    ws: &[f32],
    x: &[i8],
    xs: &[f32],
    xo: &[i32],
    nb: usize,
    out: &mut [[f32; RG]; N],
) {
    let (wp, wsp, xp) = (w.as_ptr() as *const v128, ws.as_ptr(), x.as_ptr());
    let (xsp, xop) = (xs.as_ptr() as *const u32, xo.as_ptr());
    let xblock = if SPREAD { QK * RG } else { QK };
    let mut acc = [f32x4_splat(0.0); N];
    for b in 0..nb {
        // SAFETY: block b of the group and of each activation row are in bounds.
        unsafe {
            let d = block_dots::<N, DOT, SPREAD>(
                wp.add(b * STEPS),
                core::array::from_fn(|k| xp.add((k * nb + b) * xblock)),
                core::array::from_fn(|k| xop.add(k * nb + b)),
            );
            let s = v128_load(wsp.add(b * RG) as *const v128);
            for k in 0..N {
                let sx = v128_load32_splat(xsp.add(k * nb + b));
                acc[k] = scale_add(acc[k], d[k], s, sx);
            }
        }
    }
    for (o, a) in out.iter_mut().zip(acc) {
        // SAFETY: each output is four f32, the size of a v128.
        unsafe { v128_store(o.as_mut_ptr() as *mut v128, a) };
    }
}

/// `N` activation rows (one, or two sharing each load of the weights: a batch of two or three
/// sequences, a draft's verification, a prompt's last rows; `widen`'s prompt tiles of
/// `WIDE_TILE`) against one group in the kernel `dot`;
/// each row's arithmetic is the same whatever `N` (`dot_rows`), so a row's result is the same bit
/// for bit alone or beside another. `widen` reads its rows spread (`Q8Act::spread`: each step's
/// four bytes already widened, one load instead of a splat and a widening), a single row too: in
/// JavaScriptCore a decode step of the demo model took 0.54× the time with it (the portable
/// build), in SpiderMonkey one of the GPT-2-124M shape 0.82× (the relaxed build, where Firefox's
/// decode runs `widen`), in V8 about the same (docs/performance.md, "One row spread").
///
/// # Safety
/// `w` holds `nb` blocks of four rows and `ws` their scales, `x` `N` rows of `nb` blocks (spread
/// for `widen`), `xs` and `xo` `N` rows of `nb`, where `nb = xs.len() / N`.
#[inline]
pub unsafe fn dot4xn<const N: usize>(
    dot: Dot,
    w: &[i8],
    ws: &[f32],
    x: &[i8],
    xs: &[f32],
    xo: &[i32],
    out: &mut [[f32; RG]; N],
) {
    let nb = xs.len() / N;
    // SAFETY (each arm): the caller's contract.
    match dot {
        #[cfg(target_feature = "relaxed-simd")]
        Dot::Add => unsafe { dot_rows::<N, ADD, false>(w, ws, x, xs, xo, nb, out) },
        #[cfg(target_feature = "relaxed-simd")]
        Dot::I16 => unsafe { dot_rows::<N, I16, false>(w, ws, x, xs, xo, nb, out) },
        _ => unsafe { dot_rows::<N, WIDEN, true>(w, ws, x, xs, xo, nb, out) },
    }
}

/// `dot4xn` for `TILE` activation rows, which share each load of the weights; each row's
/// arithmetic is a single row's, so the results are the same bit for bit.
///
/// # Safety
/// `w` holds `nb` blocks of four rows and `ws` their scales, `x` `TILE` rows of `nb`
/// blocks, `xs` and `xo` `TILE` rows of `nb`, where `nb = xs.len() / TILE`.
#[inline]
pub unsafe fn dot4x4(
    dot: Dot,
    w: &[i8],
    ws: &[f32],
    x: &[i8],
    xs: &[f32],
    xo: &[i32],
    out: &mut [[f32; RG]; TILE],
) {
    let nb = xs.len() / TILE;
    // An 8-bit dot: two rows at a time, four dot chains each: eight chains in flight without
    // spilling out of the engine's vector registers (the group's weights come from L1 the
    // second time).
    #[cfg(target_feature = "relaxed-simd")]
    if dot != Dot::Widen {
        for (p, out) in out.chunks_exact_mut(2).enumerate() {
            let x = &x[2 * p * nb * QK..][..2 * nb * QK];
            let (xs, xo) = (&xs[2 * p * nb..][..2 * nb], &xo[2 * p * nb..][..2 * nb]);
            let out: &mut [[f32; RG]; 2] = out.try_into().unwrap(); // chunks of 2
                                                                    // SAFETY: the caller's contract, for rows 2p and 2p + 1.
            unsafe { dot4xn(dot, w, ws, x, xs, xo, out) }
        }
        return;
    }
    #[cfg(not(target_feature = "relaxed-simd"))]
    let _ = dot; // widening is all this build has

    // Widening: the four rows at once, so each step's weights are widened once for all four
    // (eight accumulators, the two widened halves and an activation: within the engine's vector
    // registers), the activations read spread (already widened: one load per row and step).
    // SAFETY: the caller's contract, for the four rows.
    unsafe { dot_rows::<TILE, WIDEN, true>(w, ws, x, xs, xo, nb, out) }
}

/// `dot4x4` for two groups at once (`w` and `ws` hold the first group's blocks, then the
/// second's), over `N` activation rows (a tile of four, or `WIDE_TILE` where the engine's 8-bit
/// dot is one instruction): each activation splat serves eight weight rows and each weight load
/// `N` activation rows, with 2 · `N` dot chains in flight, and a block's corrections and scales
/// cost a load each. Each row's integer sums and the order its scales are applied in are one
/// row's, so the results are the same bit for bit.
///
/// # Safety
/// `w` holds 2 × `nb` blocks of four rows and `ws` their scales, `x` `N` rows of `nb`
/// blocks, `xs` and `xo` `N` rows of `nb`, where `nb = xs.len() / N`.
#[cfg(target_feature = "relaxed-simd")]
#[inline]
pub unsafe fn dot8xn<const N: usize, const DOT: u8>(
    w: &[i8],
    ws: &[f32],
    x: &[i8],
    xs: &[f32],
    xo: &[i32],
    mut out: [&mut [[f32; RG]; N]; 2],
) {
    let nb = xs.len() / N;
    let (wp, wsp, xp) = (w.as_ptr() as *const v128, ws.as_ptr(), x.as_ptr());
    let (xsp, xop) = (xs.as_ptr() as *const u32, xo.as_ptr() as *const u32);
    let mut acc = [[f32x4_splat(0.0); N]; 2];
    for b in 0..nb {
        // SAFETY (whole body): block b of both groups and of each activation row is in bounds.
        unsafe {
            let xb: [*const i8; N] = core::array::from_fn(|k| xp.add((k * nb + b) * QK));
            let init: [v128; N] = core::array::from_fn(|k| v128_load32_splat(xop.add(k * nb + b)));
            let mut c = [init; 2];
            let wb = [wp.add(b * STEPS), wp.add((nb + b) * STEPS)];
            for j in 0..STEPS {
                let wv = [v128_load(wb[0].add(j)), v128_load(wb[1].add(j))];
                for k in 0..N {
                    let xv = v128_load32_splat(xb[k].add(4 * j) as *const u32);
                    c[0][k] = dot_add::<DOT>(xv, wv[0], c[0][k]);
                    c[1][k] = dot_add::<DOT>(xv, wv[1], c[1][k]);
                }
            }
            for h in 0..2 {
                let s = v128_load(wsp.add((h * nb + b) * RG) as *const v128);
                for k in 0..N {
                    let sx = v128_load32_splat(xsp.add(k * nb + b));
                    acc[h][k] = scale_add(acc[h][k], c[h][k], s, sx);
                }
            }
        }
    }
    for (o, a) in out.iter_mut().zip(acc) {
        for (o, a) in o.iter_mut().zip(a) {
            // SAFETY: each output is four f32, the size of a v128.
            unsafe { v128_store(o.as_mut_ptr() as *mut v128, a) };
        }
    }
}

/// `dot4xn` for two groups at once (`w` and `ws` hold the first group's blocks, then the
/// second's), a decode step's product: each activation splat serves eight weight rows, two
/// chains of dots per group. The same integer sums and scales as `dot4xn`, so the same results
/// bit for bit.
///
/// # Safety
/// `w` holds 2 × `nb` blocks of four rows and `ws` their scales, `x` `nb` blocks, `xs` and `xo`
/// `nb` values, where `nb = xs.len()`.
#[cfg(target_feature = "relaxed-simd")]
#[inline]
pub unsafe fn dot8<const DOT: u8>(
    w: &[i8],
    ws: &[f32],
    x: &[i8],
    xs: &[f32],
    xo: &[i32],
    out: &mut [[f32; RG]; 2],
) {
    let nb = xs.len();
    let (wp, wsp, xp) = (w.as_ptr() as *const v128, ws.as_ptr(), x.as_ptr());
    let (xsp, xop) = (xs.as_ptr() as *const u32, xo.as_ptr() as *const u32);
    let mut acc = [f32x4_splat(0.0); 2];
    for b in 0..nb {
        // SAFETY (whole body): block b of both groups and of the activation row is in bounds.
        unsafe {
            let xb = xp.add(b * QK);
            let wb = [wp.add(b * STEPS), wp.add((nb + b) * STEPS)];
            let mut c0 = [v128_load32_splat(xop.add(b)); 2];
            let mut c1 = [i32x4_splat(0); 2];
            for j in (0..STEPS).step_by(2) {
                let x0 = v128_load32_splat(xb.add(4 * j) as *const u32);
                let x1 = v128_load32_splat(xb.add(4 * j + 4) as *const u32);
                for h in 0..2 {
                    c0[h] = dot_add::<DOT>(x0, v128_load(wb[h].add(j)), c0[h]);
                    c1[h] = dot_add::<DOT>(x1, v128_load(wb[h].add(j + 1)), c1[h]);
                }
            }
            let sx = v128_load32_splat(xsp.add(b));
            for h in 0..2 {
                let s = v128_load(wsp.add((h * nb + b) * RG) as *const v128);
                acc[h] = scale_add(acc[h], i32x4_add(c0[h], c1[h]), s, sx);
            }
        }
    }
    for (o, a) in out.iter_mut().zip(acc) {
        // SAFETY: each output is four f32, the size of a v128.
        unsafe { v128_store(o.as_mut_ptr() as *mut v128, a) };
    }
}

/// `quantize_block` four lanes at a time (the compiler does not vectorise the rounding
/// conversion, and scalarises f32 max and clamp, whose NaN rules wasm's f32x4.max lacks): the
/// same numbers as the portable path, whose rounding is also ties to even. Returns the scale and
/// the sum of the values.
#[inline(always)]
pub fn quantize_block(v: &[f32; QK], levels: f32, q: &mut [i8; QK]) -> (f32, i32) {
    // SAFETY: 32 f32 in, 32 bytes out: eight and two whole v128.
    unsafe {
        use core::arch::wasm32::*;
        let p = v.as_ptr() as *const v128;
        let x: [v128; 8] = core::array::from_fn(|k| v128_load(p.add(k)));
        let mut m = f32x4_abs(x[0]);
        for x in &x[1..] {
            m = f32x4_pmax(m, f32x4_abs(*x));
        }
        m = f32x4_pmax(m, i32x4_shuffle::<2, 3, 0, 1>(m, m));
        m = f32x4_pmax(m, i32x4_shuffle::<1, 0, 3, 2>(m, m));
        let scale = f32x4_extract_lane::<0>(m) / levels;
        let inv = f32x4_splat(if scale > 0.0 { 1.0 / scale } else { 0.0 });
        // Clamped: with a subnormal scale, 1/scale is infinite (as in the portable path).
        let (lo, hi) = (i32x4_splat(-(levels as i32)), i32x4_splat(levels as i32));
        let r: [v128; 8] = core::array::from_fn(|k| {
            let r = i32x4_trunc_sat_f32x4(f32x4_nearest(f32x4_mul(x[k], inv)));
            i32x4_max(lo, i32x4_min(hi, r))
        });
        let h = [
            i16x8_narrow_i32x4(r[0], r[1]),
            i16x8_narrow_i32x4(r[2], r[3]),
            i16x8_narrow_i32x4(r[4], r[5]),
            i16x8_narrow_i32x4(r[6], r[7]),
        ];
        let b = [
            i8x16_narrow_i16x8(h[0], h[1]),
            i8x16_narrow_i16x8(h[2], h[3]),
        ];
        let qp = q.as_mut_ptr() as *mut v128;
        v128_store(qp, b[0]);
        v128_store(qp.add(1), b[1]);
        let s = i32x4_add(
            i32x4_extadd_pairwise_i16x8(i16x8_add(h[0], h[1])),
            i32x4_extadd_pairwise_i16x8(i16x8_add(h[2], h[3])),
        );
        let s = i32x4_add(s, i32x4_shuffle::<2, 3, 0, 1>(s, s));
        let s = i32x4_add(s, i32x4_shuffle::<1, 0, 3, 2>(s, s));
        (scale, i32x4_extract_lane::<0>(s))
    }
}
