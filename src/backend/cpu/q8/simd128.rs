//! wasm simd128 kernels (and relaxed SIMD's int8 dot when built with `+relaxed-simd`).

use super::{QK, RG, TILE};
use core::arch::wasm32::*;

/// Lane l of the result is the sum of the four lanes of `a[l]`.
#[inline(always)]
fn hsum4(a: [v128; 4]) -> v128 {
    let t0 = i32x4_add(
        i32x4_shuffle::<0, 4, 1, 5>(a[0], a[1]),
        i32x4_shuffle::<2, 6, 3, 7>(a[0], a[1]),
    );
    let t1 = i32x4_add(
        i32x4_shuffle::<0, 4, 1, 5>(a[2], a[3]),
        i32x4_shuffle::<2, 6, 3, 7>(a[2], a[3]),
    );
    i32x4_add(
        i32x4_shuffle::<0, 1, 4, 5>(t0, t1),
        i32x4_shuffle::<2, 3, 6, 7>(t0, t1),
    )
}

/// Σ over 32 bytes of w (unsigned 7-bit) · x (signed), as four partial sums.
#[cfg(target_feature = "relaxed-simd")]
#[inline(always)]
fn block_dot(w0: v128, w1: v128, x0: v128, x1: v128) -> v128 {
    let d = i32x4_relaxed_dot_i8x16_i7x16_add(x0, w0, i32x4_splat(0));
    i32x4_relaxed_dot_i8x16_i7x16_add(x1, w1, d)
}

/// Σ over 32 bytes of w (unsigned 7-bit) · x (signed), as four partial sums.
#[cfg(not(target_feature = "relaxed-simd"))]
#[inline(always)]
fn block_dot(w0: v128, w1: v128, x0: v128, x1: v128) -> v128 {
    let p0 = i32x4_add(
        i32x4_dot_i16x8(u16x8_extend_low_u8x16(w0), i16x8_extend_low_i8x16(x0)),
        i32x4_dot_i16x8(u16x8_extend_high_u8x16(w0), i16x8_extend_high_i8x16(x0)),
    );
    let p1 = i32x4_add(
        i32x4_dot_i16x8(u16x8_extend_low_u8x16(w1), i16x8_extend_low_i8x16(x1)),
        i32x4_dot_i16x8(u16x8_extend_high_u8x16(w1), i16x8_extend_high_i8x16(x1)),
    );
    i32x4_add(p0, p1)
}

/// One block of one activation row against a group's four rows: `acc` += the four
/// outputs' share, (dot − offset) · weight scale · activation scale.
#[inline(always)]
fn block_step(w: &[v128; 8], s: v128, x0: v128, x1: v128, sx: f32, off: i32, acc: v128) -> v128 {
    let d = [
        block_dot(w[0], w[1], x0, x1),
        block_dot(w[2], w[3], x0, x1),
        block_dot(w[4], w[5], x0, x1),
        block_dot(w[6], w[7], x0, x1),
    ];
    let d = i32x4_sub(hsum4(d), i32x4_splat(off));
    f32x4_add(
        acc,
        f32x4_mul(f32x4_convert_i32x4(d), f32x4_mul(s, f32x4_splat(sx))),
    )
}

/// The group's weights and scales of block `b`.
///
/// # Safety
/// `wp` and `wsp` point at a group of more than `b` blocks.
#[inline(always)]
unsafe fn load_block(wp: *const i8, wsp: *const f32, b: usize) -> ([v128; 8], v128) {
    // SAFETY: block b's 128 weight bytes and 4 scales lie inside the group.
    unsafe {
        let wb = wp.add(b * RG * QK) as *const v128;
        let w = core::array::from_fn(|k| v128_load(wb.add(k)));
        (w, v128_load(wsp.add(b * RG) as *const v128))
    }
}

/// # Safety
/// `w` holds `xs.len()` blocks of four rows, `ws` their scales, `x` `xs.len()` blocks, `xo`
/// `xs.len()` offsets.
#[inline]
pub unsafe fn dot4(w: &[i8], ws: &[f32], x: &[i8], xs: &[f32], xo: &[i32], out: &mut [f32; RG]) {
    let xp = x.as_ptr();
    let mut acc = f32x4_splat(0.0);
    for (b, (&sx, &off)) in xs.iter().zip(xo).enumerate() {
        // SAFETY: block b of the group and of the activation row are in bounds.
        unsafe {
            let (wv, s) = load_block(w.as_ptr(), ws.as_ptr(), b);
            let xb = xp.add(b * QK) as *const v128;
            acc = block_step(&wv, s, v128_load(xb), v128_load(xb.add(1)), sx, off, acc);
        }
    }
    // SAFETY: `out` is four f32, the size of a v128.
    unsafe { v128_store(out.as_mut_ptr() as *mut v128, acc) };
}

/// `dot4` for `TILE` activation rows, which share each load of the weights; each row's
/// arithmetic is `dot4`'s, so the results are the same bit for bit.
///
/// # Safety
/// `w` holds `nb` blocks of four rows and `ws` their scales, `x` `TILE` rows of `nb`
/// blocks, `xs` and `xo` `TILE` rows of `nb`, where `nb = xs.len() / TILE`.
#[inline]
pub unsafe fn dot4x4(
    w: &[i8],
    ws: &[f32],
    x: &[i8],
    xs: &[f32],
    xo: &[i32],
    out: &mut [[f32; RG]; TILE],
) {
    let nb = xs.len() / TILE;
    let xp = x.as_ptr();
    let mut acc = [f32x4_splat(0.0); TILE];
    for b in 0..nb {
        // SAFETY: block b of the group and of each activation row are in bounds.
        unsafe {
            let (wv, s) = load_block(w.as_ptr(), ws.as_ptr(), b);
            for (k, acc) in acc.iter_mut().enumerate() {
                let xb = xp.add((k * nb + b) * QK) as *const v128;
                let (sx, off) = (xs[k * nb + b], xo[k * nb + b]);
                *acc = block_step(&wv, s, v128_load(xb), v128_load(xb.add(1)), sx, off, *acc);
            }
        }
    }
    for (o, a) in out.iter_mut().zip(acc) {
        // SAFETY: each output is four f32, the size of a v128.
        unsafe { v128_store(o.as_mut_ptr() as *mut v128, a) };
    }
}

/// `quantize_act_block` four lanes at a time (the compiler does not vectorise the rounding
/// conversion): the same numbers as the portable path, whose rounding is also ties to even.
#[inline(always)]
pub fn quantize_act_block(v: &[f32; QK], q: &mut [i8; QK]) -> (f32, i32) {
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
        let scale = f32x4_extract_lane::<0>(m) / 127.0;
        let inv = f32x4_splat(if scale > 0.0 { 1.0 / scale } else { 0.0 });
        let r: [v128; 8] =
            core::array::from_fn(|k| i32x4_trunc_sat_f32x4(f32x4_nearest(f32x4_mul(x[k], inv))));
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
