//! The portable kernel: plain integer block dots, then the two scales, in f32. Also the tests'
//! reference for the SIMD kernels.

use super::{lane_byte, QK, RG};

/// The reference: integer block dots, then the two scales, in f32.
pub fn dot4(w: &[i8], ws: &[f32], x: &[i8], xs: &[f32], xo: &[i32], out: &mut [f32; RG]) {
    *out = [0.0; RG];
    for (b, ((xb, &sx), &off)) in x.chunks_exact(QK).zip(xs).zip(xo).enumerate() {
        let wb = &w[b * RG * QK..][..RG * QK];
        for (l, o) in out.iter_mut().enumerate() {
            let d: i32 = (xb.iter().enumerate())
                .map(|(c, &x)| wb[lane_byte(l, c)] as i32 * x as i32)
                .sum();
            *o += (d + off) as f32 * (ws[b * RG + l] * sx);
        }
    }
}
