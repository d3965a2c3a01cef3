//! The x86-64 AVX2 kernel, chosen at run time when the CPU has AVX2 and FMA.

use super::{PREFETCH, QK, RG};
use std::arch::x86_64::*;

/// # Safety
/// The CPU has AVX2 and FMA; `w` holds `xs.len()` blocks of four rows, `ws` their scales,
/// `x` `xs.len()` blocks, `xo` `xs.len()` offsets.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn dot4(w: &[i8], ws: &[f32], x: &[i8], xs: &[f32], xo: &[i32], out: &mut [f32; RG]) {
    let (wp, wsp, xp) = (w.as_ptr(), ws.as_ptr(), x.as_ptr());
    let ones = _mm256_set1_epi16(1);
    let mut acc = [_mm256_setzero_ps(); RG];
    for (b, (&sx, &off)) in xs.iter().zip(xo).enumerate() {
        // SAFETY (whole body): every offset stays inside the block b of the slices.
        unsafe {
            let ahead = wp.wrapping_add(b * RG * QK + PREFETCH);
            crate::platform::prefetch(ahead);
            crate::platform::prefetch(ahead.wrapping_add(64));
            let xv = _mm256_loadu_si256(xp.add(b * QK) as *const __m256i);
            let corr = _mm256_setr_epi32(off, 0, 0, 0, 0, 0, 0, 0);
            for (l, acc) in acc.iter_mut().enumerate() {
                let wv = _mm256_loadu_si256(wp.add((b * RG + l) * QK) as *const __m256i);
                // unsigned 7-bit weights × signed activations, as vpmaddubsw wants them
                let p = _mm256_madd_epi16(_mm256_maddubs_epi16(wv, xv), ones);
                let d = _mm256_cvtepi32_ps(_mm256_sub_epi32(p, corr));
                let s = _mm256_set1_ps(*wsp.add(b * RG + l) * sx);
                *acc = _mm256_fmadd_ps(d, s, *acc);
            }
        }
    }
    for (o, a) in out.iter_mut().zip(acc) {
        let h = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
        let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
        let h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
        *o = _mm_cvtss_f32(h);
    }
}
