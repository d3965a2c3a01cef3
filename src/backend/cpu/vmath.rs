//! Branch-free f32 math that the compiler turns into SIMD loops (wasm simd128, x86 SSE/AVX):
//! `exp` by range reduction and a polynomial, GELU and rounding built on it. libm's `expf`,
//! `tanhf` and `rintf` are calls, one value at a time, and were a fifth of a prompt's time.

/// e^x within 2 ulp for x in [-87.3, 88.7]; clamped to that range outside it. No `mul_add`:
/// without hardware FMA (baseline x86-64, wasm) it is a libm call.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // ln 2 split in two so that n · LN2_HI is exact for |n| < 2^9 (Cephes' expf).
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    const MAGIC: f32 = 12_582_912.0; // 1.5 × 2^23: adding it rounds to an integer

    // Compare-and-select rather than `clamp`: wasm's f32x4.min/max are not IEEE minNum/maxNum,
    // so `clamp` vectorises to a longer sequence; this is f32x4.pmax/pmin.
    let x = if x < -87.3 { -87.3 } else { x };
    let x = if x > 88.7 { 88.7 } else { x };
    let t = x * LOG2E + MAGIC;
    let n = t - MAGIC; // round(x · log2 e), in -126..=128
    let r = (x - n * LN2_HI) - n * LN2_LO; // |r| ≤ ln2 / 2
    let p = 1.987_569_1e-4_f32;
    let p = p * r + 1.398_199_9e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 0.166_666_66;
    let p = p * r + 0.5;
    let e = p * r * r + r + 1.0;
    // 2^n from the exponent bits; t's low mantissa bits hold n (two's complement).
    let n = (t.to_bits() as i32).wrapping_sub(0x4B40_0000);
    let scale = f32::from_bits(((n + 127) as u32) << 23);
    e * scale
}

/// Rounds to the nearest integer, ties to even, for |x| < 2^22 (the default FP rounding mode).
#[inline(always)]
pub fn round(x: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0; // 1.5 × 2^23
    (x + MAGIC) - MAGIC
}

/// GELU with the tanh approximation: 0.5·x·(1 + tanh(u)) = x · sigmoid(2u) = x / (1 + e^(−2u)).
pub fn gelu_tanh(x: &mut [f32]) {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    for v in x {
        let u = SQRT_2_OVER_PI * *v * (1.0 + 0.044715 * *v * *v);
        *v /= 1.0 + exp(-2.0 * u);
    }
}

/// Σ e^(x − top) over `v` (`exp`, eight at a time, in `sum`'s order): a softmax's denominator.
pub fn exp_sum(v: &[f32], top: f32) -> f32 {
    let mut e = [0.0f32; 256];
    let mut total = 0.0;
    for part in v.chunks(e.len()) {
        let e = &mut e[..part.len()];
        for (e, x) in e.iter_mut().zip(part) {
            *e = exp(x - top);
        }
        total += sum(e);
    }
    total
}

/// out = h + SiLU(z) = h + z / (1 + e^(−z)), element by element.
pub fn silu_residual(h: &[f32], z: &[f32], out: &mut Vec<f32>) {
    out.clear();
    out.extend(h.iter().zip(z).map(|(h, z)| h + z / (1.0 + exp(-z))));
}

/// Σ v, in eight partial sums (so it vectorises).
pub fn sum(v: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let c = v.chunks_exact(8);
    let tail: f32 = c.remainder().iter().sum();
    for c in c {
        for k in 0..8 {
            acc[k] += c[k];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// max v (−∞ for none), in eight partial maxima (so it vectorises). With NaNs the result is
/// one of the others.
pub fn max(v: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; 8];
    let c = v.chunks_exact(8);
    let tail = c
        .remainder()
        .iter()
        .fold(f32::NEG_INFINITY, |a, &b| a.max(b));
    for c in c {
        for k in 0..8 {
            acc[k] = if c[k] > acc[k] { c[k] } else { acc[k] };
        }
    }
    acc.iter().fold(tail, |a, &b| a.max(b))
}

/// max |v| (0 for none), as `max`.
pub fn max_abs(v: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let c = v.chunks_exact(8);
    let tail = c.remainder().iter().fold(0f32, |a, &b| a.max(b.abs()));
    for c in c {
        for k in 0..8 {
            let x = c[k].abs();
            acc[k] = if x > acc[k] { x } else { acc[k] };
        }
    }
    acc.iter().fold(tail, |a, &b| a.max(b))
}

/// Σ (v − mean)², in eight partial sums (so it vectorises).
pub fn sum_sq_dev(v: &[f32], mean: f32) -> f32 {
    let mut acc = [0.0f32; 8];
    let c = v.chunks_exact(8);
    let tail: f32 = c.remainder().iter().map(|x| (x - mean) * (x - mean)).sum();
    for c in c {
        for k in 0..8 {
            acc[k] += (c[k] - mean) * (c[k] - mean);
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// Σ a·b. Eight partial sums let the compiler vectorise without -ffast-math.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// y[i][j] = dot(x[i], w[j]) (+ b[j]) for the rows x[i] of x (t, in) and w[j] of w (out, in):
/// each weight row is read once for all t rows, and each output is the same `dot` whatever t
/// is, so a row's result does not depend on the rows beside it.
pub fn gemv(x: &[f32], n_in: usize, w: &[f32], b: Option<&[f32]>, y: &mut [f32]) {
    // A decode step's output rows are split between the threads, a few chunks each.
    #[cfg(feature = "threads")]
    if rayon::current_num_threads() > 1 && x.len() == n_in && w.len() >= 64 * n_in {
        use rayon::prelude::*;
        let n_out = w.len() / n_in;
        let per = n_out.div_ceil(4 * rayon::current_num_threads());
        y[..n_out]
            .par_chunks_mut(per)
            .zip(w.par_chunks(per * n_in))
            .enumerate()
            .for_each(|(c, (y, w))| gemv_here(x, n_in, w, b.map(|b| &b[c * per..]), y));
        return;
    }
    gemv_here(x, n_in, w, b, y)
}

/// `gemv` on this thread.
fn gemv_here(x: &[f32], n_in: usize, w: &[f32], b: Option<&[f32]>, y: &mut [f32]) {
    let n_out = w.len() / n_in;
    for (j, row) in w.chunks_exact(n_in).enumerate() {
        let bias = b.map_or(0.0, |b| b[j]);
        for (i, xi) in x.chunks_exact(n_in).enumerate() {
            y[i * n_out + j] = dot(xi, row) + bias;
        }
    }
}

/// out = inv · Σ_p w[p] · v[p] over the rows of v (n, out.len()). Sixteen outputs at a time
/// stay in registers while the rows stream past.
pub fn weighted_sum(w: &[f32], v: &[f32], inv: f32, out: &mut [f32]) {
    let hs = out.len();
    let mut c0 = 0;
    while c0 + 16 <= hs {
        let mut acc = [0f32; 16];
        for (&w, row) in w.iter().zip(v.chunks_exact(hs)) {
            let r = &row[c0..c0 + 16];
            for k in 0..16 {
                acc[k] += w * r[k];
            }
        }
        for (o, a) in out[c0..c0 + 16].iter_mut().zip(acc) {
            *o = a * inv;
        }
        c0 += 16;
    }
    for (j, o) in out.iter_mut().enumerate().skip(c0) {
        *o = inv
            * w.iter()
                .zip(v.chunks_exact(hs))
                .map(|(w, r)| w * r[j])
                .sum::<f32>();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_matches_libm_within_2_ulp() {
        let mut worst = 0f32;
        let mut x = -87.0f32;
        while x < 88.0 {
            let (got, want) = (exp(x), x.exp());
            worst = worst.max((got - want).abs() / (want * f32::EPSILON));
            x += 0.0137;
        }
        assert!(worst <= 2.0, "worst error {worst} ulp");
        assert!(exp(-200.0) < 1e-37 && exp(200.0) > 1e38);
    }

    #[test]
    fn gelu_matches_the_tanh_formula() {
        let xs: Vec<f32> = (-800..800).map(|i| i as f32 * 0.01).collect();
        let mut got = xs.clone();
        gelu_tanh(&mut got);
        for (x, g) in xs.iter().zip(&got) {
            let want = 0.5 * x * (1.0 + (0.797_884_6 * x * (1.0 + 0.044715 * x * x)).tanh());
            assert!(
                (g - want).abs() <= 1e-6 * want.abs().max(1.0),
                "gelu({x}) = {g}, want {want}"
            );
        }
    }

    #[test]
    fn round_is_ties_to_even() {
        for (x, want) in [
            (0.5, 0.0),
            (1.5, 2.0),
            (2.5, 2.0),
            (-0.5, -0.0),
            (-1.5, -2.0),
            (126.7, 127.0),
        ] {
            assert_eq!(round(x), want, "round({x})");
        }
    }
}
