//! The x86-64 kernel, chosen at run time when the CPU has AVX2 and FMA, with VNNI's one-instruction
//! int8 dot where the CPU has it.
//!
//! A 32-byte load of a group's block holds eight columns of its four rows: columns 0-3 of rows
//! 0-3 in the low half, columns 4-7 in the high half. The activation's matching four bytes are
//! repeated across each half — for a tile of rows as `Q8Act::spread` stores them (a load, not a
//! lane-crossing shuffle per row and load), for one row by a shuffle (`vpermd`: that row is
//! bound by reading the weights) — so one `vpmaddubsw` + `vpmaddwd` leaves row l's sums in lanes
//! l and l + 4, folded together once per block.

use super::{PREFETCH, QK, RG};
use std::arch::x86_64::*;

/// 32-byte loads per block of a group: 32 columns × 4 rows / 32 bytes.
const STEPS: usize = QK * RG / 32;

/// The integer dot instruction: `vpmaddubsw` + `vpmaddwd` + `vpaddd` on AVX2, one `vpdpbusd`
/// with AVX-VNNI (Intel since Alder Lake, AMD since Zen 5) or AVX-512 VNNI (Zen 4, Xeons).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dot {
    Avx2,
    AvxVnni,
    Avx512Vnni,
}

impl Dot {
    /// In the order of their discriminants.
    pub const ALL: [Dot; 3] = [Dot::Avx2, Dot::AvxVnni, Dot::Avx512Vnni];

    /// The best this CPU has (it has AVX2 and FMA: the caller checked).
    pub fn detect() -> Dot {
        [Dot::AvxVnni, Dot::Avx512Vnni]
            .into_iter()
            .find(|d| d.supported())
            .unwrap_or(Dot::Avx2)
    }

    /// Whether this CPU has the instruction (given AVX2 and FMA).
    pub fn supported(self) -> bool {
        match self {
            Dot::Avx2 => true,
            Dot::AvxVnni => is_x86_feature_detected!("avxvnni"),
            Dot::Avx512Vnni => {
                is_x86_feature_detected!("avx512vnni") && is_x86_feature_detected!("avx512vl")
            }
        }
    }

    /// The name `gpt2 --kernel` takes.
    pub fn name(self) -> &'static str {
        match self {
            Dot::Avx2 => "avx2",
            Dot::AvxVnni => "avx-vnni",
            Dot::Avx512Vnni => "avx512-vnni",
        }
    }
}

/// `N` activation rows against one group: one row as it is (`nb` blocks of `QK` bytes), more in
/// the spread form (row k's blocks start at `x[k * nb * QK * RG]`, each `STEPS` loads of 32
/// bytes); each row's
/// arithmetic is the same whatever `N`, and the same integers whatever `dot`.
///
/// # Safety
/// The CPU has AVX2 and FMA, and `dot`'s features; `w` holds `nb` blocks of four rows and `ws`
/// their scales; `x` holds the row's `nb` blocks (N = 1) or `N` rows of `nb` spread blocks, `xs`
/// and `xo` `N` rows of `nb`.
#[inline]
pub unsafe fn dot_rows<const N: usize>(
    dot: Dot,
    (w, ws): (&[i8], &[f32]),
    x: &[i8],
    xs: &[f32],
    xo: &[i32],
    nb: usize,
    out: &mut [[f32; RG]; N],
) {
    // SAFETY: the caller checked the features and the lengths.
    unsafe {
        match dot {
            Dot::Avx2 => rows_avx2(w, ws, x, xs, xo, nb, out),
            Dot::AvxVnni => rows_avxvnni(w, ws, x, xs, xo, nb, out),
            Dot::Avx512Vnni => rows_avx512vnni(w, ws, x, xs, xo, nb, out),
        }
    }
}

/// A function with `rows` inlined under target `features`, whose int8 dot is `dot`.
macro_rules! rows_with {
    ($name:ident, $features:literal, $dot:expr) => {
        #[target_feature(enable = $features)]
        unsafe fn $name<const N: usize>(
            w: &[i8],
            ws: &[f32],
            x: &[i8],
            xs: &[f32],
            xo: &[i32],
            nb: usize,
            out: &mut [[f32; RG]; N],
        ) {
            // SAFETY: the features are enabled; the lengths are the caller's.
            unsafe { rows((w, ws), x, xs, xo, nb, out, $dot) }
        }
    };
}

rows_with!(rows_avx2, "avx2,fma", |d, w, x| {
    let p = _mm256_maddubs_epi16(w, x);
    _mm256_add_epi32(d, _mm256_madd_epi16(p, _mm256_set1_epi16(1)))
});
rows_with!(rows_avxvnni, "avx2,fma,avxvnni", |d, w, x| {
    _mm256_dpbusd_avx_epi32(d, w, x)
});
rows_with!(
    rows_avx512vnni,
    "avx2,fma,avx512vnni,avx512vl",
    |d, w, x| { _mm256_dpbusd_epi32(d, w, x) }
);

/// The kernel's body, inlined into each feature set's function above; `dot(d, w, x)` adds the
/// products of unsigned `w` and signed `x` bytes, four per lane, to `d`.
#[inline(always)]
unsafe fn rows<const N: usize>(
    (w, ws): (&[i8], &[f32]),
    x: &[i8],
    xs: &[f32],
    xo: &[i32],
    nb: usize,
    out: &mut [[f32; RG]; N],
    dot: impl Fn(__m256i, __m256i, __m256i) -> __m256i,
) {
    let (wp, wsp, xp) = (w.as_ptr(), ws.as_ptr(), x.as_ptr());
    let spread: [__m256i; STEPS] = core::array::from_fn(|p| {
        let (a, b) = (2 * p as i32, 2 * p as i32 + 1);
        _mm256_setr_epi32(a, a, a, a, b, b, b, b)
    });
    // Rows 2j and 2j + 1 in acc[j]'s low and high halves (their finishing in one 256-bit op
    // each); an odd last row in `last`. Every row's lanes see the same operations either way.
    let mut acc = [_mm256_setzero_ps(); N];
    let mut last = _mm_setzero_ps();
    for b in 0..nb {
        // SAFETY (whole body): every offset stays inside block b of the slices; the prefetch
        // address is only a hint.
        unsafe {
            let wb = wp.add(b * RG * QK);
            let ahead = wp.wrapping_add(b * RG * QK + PREFETCH);
            crate::platform::prefetch(ahead);
            crate::platform::prefetch(ahead.wrapping_add(64));
            // Two chains of dots per row (four for one row), so that VNNI's latency is hidden.
            // The first starts from the block's offset term in its low half, which the fold
            // below adds once to each of the four sums.
            let mut chains = [[_mm256_setzero_si256(); N]; 4];
            for (k, c) in chains[0].iter_mut().enumerate() {
                *c = _mm256_zextsi128_si256(_mm_set1_epi32(xo[k * nb + b]));
            }
            let nc = if N >= 4 { 2 } else { 4 };
            let one = match N {
                1 => _mm256_loadu_si256(xp.add(b * QK) as *const __m256i),
                _ => _mm256_setzero_si256(),
            };
            for (p, spread) in spread.iter().enumerate() {
                let wv = _mm256_loadu_si256(wb.add(p * 32) as *const __m256i);
                let c = &mut chains[p % nc];
                for (k, c) in c.iter_mut().enumerate().take(N) {
                    let xk = match N {
                        1 => _mm256_permutevar8x32_epi32(one, *spread),
                        _ => {
                            let at = ((k * nb + b) * STEPS + p) * 32;
                            _mm256_loadu_si256(xp.add(at) as *const __m256i)
                        }
                    };
                    // unsigned 7-bit weights × signed activations, as vpmaddubsw wants them
                    *c = dot(*c, wv, xk);
                }
            }
            let d: [__m256i; N] = core::array::from_fn(|k| {
                (chains[1..nc].iter()).fold(chains[0][k], |d, c| _mm256_add_epi32(d, c[k]))
            });
            // Per row: its lanes l and l + 4 folded, to f32, times the weight row's scale times
            // the activation block's, added to the row's sums.
            let s = _mm_loadu_ps(wsp.add(b * RG));
            let s2 = _mm256_set_m128(s, s);
            for (j, acc) in acc.iter_mut().enumerate().take(N / 2) {
                let (k0, k1) = (2 * j, 2 * j + 1);
                let lo = _mm256_permute2x128_si256::<0x20>(d[k0], d[k1]);
                let hi = _mm256_permute2x128_si256::<0x31>(d[k0], d[k1]);
                let sums = _mm256_cvtepi32_ps(_mm256_add_epi32(lo, hi));
                let xs2 =
                    _mm256_set_m128(_mm_set1_ps(xs[k1 * nb + b]), _mm_set1_ps(xs[k0 * nb + b]));
                *acc = _mm256_fmadd_ps(sums, _mm256_mul_ps(s2, xs2), *acc);
            }
            if N % 2 == 1 {
                let k = N - 1;
                let (lo, hi) = (
                    _mm256_castsi256_si128(d[k]),
                    _mm256_extracti128_si256(d[k], 1),
                );
                let s = _mm_mul_ps(s, _mm_set1_ps(xs[k * nb + b]));
                last = _mm_fmadd_ps(_mm_cvtepi32_ps(_mm_add_epi32(lo, hi)), s, last);
            }
        }
    }
    for (k, o) in out.iter_mut().enumerate() {
        let a = match (k % 2, k == N - 1 && N % 2 == 1) {
            (_, true) => last,
            (0, _) => _mm256_castps256_ps128(acc[k / 2]),
            _ => _mm256_extractf128_ps(acc[k / 2], 1),
        };
        // SAFETY: each output is four f32.
        unsafe { _mm_storeu_ps(o.as_mut_ptr(), a) };
    }
}
