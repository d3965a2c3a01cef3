//! The portable kernel: plain integer block dots, then the two scales, in f32. Also the tests'
//! reference for the SIMD kernels.

use super::{QK, RG};

/// The reference: integer block dots, then the two scales, in f32.
pub fn dot4(w: &[i8], ws: &[f32], x: &[i8], xs: &[f32], xo: &[i32], out: &mut [f32; RG]) {
    *out = [0.0; RG];
    for (b, ((xb, &sx), &off)) in x.chunks_exact(QK).zip(xs).zip(xo).enumerate() {
        for (l, o) in out.iter_mut().enumerate() {
            let at = b * RG + l;
            let wb = &w[at * QK..][..QK];
            let d: i32 = wb.iter().zip(xb).map(|(&a, &c)| a as i32 * c as i32).sum();
            *o += (d - off) as f32 * (ws[at] * sx);
        }
    }
}
