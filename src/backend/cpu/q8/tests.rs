use super::*;

/// `n` seeded values in [-1, 1] (xorshift), for the CPU backend's tests.
pub(in crate::backend::cpu) fn data(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2654435761).max(1);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s as f32 / u32::MAX as f32) * 2.0 - 1.0
        })
        .collect()
}

/// Every kernel this CPU has (the one in use among them).
fn kernels() -> Vec<Simd> {
    let all = Simd::available();
    assert!(
        all.contains(&Simd::get(1)) && all.contains(&Simd::get(2)),
        "{all:?}"
    );
    all
}

/// The kernel's names: the one in use among those listed; an unknown one refused with the list.
/// (Choosing another one here would change it under the tests running beside this one.)
#[test]
fn kernels_by_name() {
    let names = super::kernels();
    assert!(names.contains(&super::kernel().as_str()), "{names:?}");
    assert!(names.contains(&"portable"));
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        assert!(names.contains(&"avx2"), "{names:?}");
    }
    let e = super::set_kernel("vnni-please").unwrap_err().to_string();
    assert!(
        e.contains("vnni-please") && e.contains(&names.join(", ")),
        "{e}"
    );
    super::set_kernel("auto").unwrap();
}

/// Every kernel against the f32 product, at sizes that are not multiples of 4 rows or
/// 32 columns, from both weight layouts.
#[test]
fn matmul_matches_f32_within_quantization_error() {
    for &(rows, cols, t) in &[(7, 45, 3), (12, 96, 1), (5, 200, 4)] {
        let w = data(rows * cols, 1);
        let x = data(t * cols, 2);
        let bias = data(rows, 3);
        let wt: Vec<f32> = (0..cols * rows)
            .map(|i| w[(i % rows) * cols + i / rows])
            .collect();
        let a = Q8Matrix::quantize(&w, rows, cols, cols, 1).unwrap();
        let b = Q8Matrix::quantize(&wt, rows, cols, 1, rows).unwrap();
        assert_eq!(a.qs, b.qs);
        assert_eq!(a.scales, b.scales);
        let mut act = Q8Act::default();
        act.quantize(&x, cols);
        let mut y = vec![0f32; t * rows];
        a.matmul(&act, Some(&bias), &mut y);
        for i in 0..t {
            for r in 0..rows {
                let exact: f32 = (0..cols).map(|c| w[r * cols + c] * x[i * cols + c]).sum();
                let got = y[i * rows + r] - bias[r];
                let tol = 0.02 * (cols as f32).sqrt();
                assert!(
                    (got - exact).abs() < tol,
                    "{rows}x{cols} t={t} row {r}: {got} vs {exact}"
                );
            }
        }
        // Every kernel this CPU has equals the portable reference up to f32 rounding.
        let mut out = [0f32; RG];
        let mut reference = [0f32; RG];
        let nb = a.blocks;
        for kernel in kernels() {
            for g in 0..rows.div_ceil(RG) {
                let w = &a.qs[g * nb * RG * QK..][..nb * RG * QK];
                let ws = &a.scales[g * nb * RG..][..nb * RG];
                let (xs, xo) = (&act.scales[..nb], &act.offsets[..nb]);
                kernel.dot4(w, ws, &act.qs[..nb * QK], xs, xo, &mut out);
                portable::dot4(w, ws, &act.qs[..nb * QK], xs, xo, &mut reference);
                for (o, r) in out.iter().zip(&reference) {
                    assert!((o - r).abs() <= 1e-4 * r.abs().max(1.0), "{o} vs {r}");
                }
            }
        }
    }
}

/// A prompt's tile of rows gives each row exactly what that row alone gives (speculative
/// decoding's verification relies on it).
#[test]
fn a_tile_of_rows_equals_each_row_alone() {
    let (rows, cols, t) = (9, 100, 7);
    let a = Q8Matrix::quantize(&data(rows * cols, 4), rows, cols, cols, 1).unwrap();
    let x = data(t * cols, 5);
    let mut act = Q8Act::default();
    act.quantize(&x, cols);
    // In every kernel this CPU has (each tile shape: two groups by four rows, one by four, two
    // by two, …), chosen for this test's thread only: the tests beside it keep theirs.
    for name in super::kernels() {
        super::choice::on_this_thread(name);
        let mut all = vec![0f32; t * rows];
        a.matmul(&act, None, &mut all);
        for i in 0..t {
            let mut one = Q8Act::default();
            one.quantize(&x[i * cols..][..cols], cols);
            let mut y = vec![0f32; rows];
            a.matmul(&one, None, &mut y);
            assert_eq!(y, all[i * rows..][..rows], "{name}: row {i}");
        }
    }
    super::choice::on_this_thread("auto");
}

#[test]
fn dequantized_rows_are_within_half_a_step() {
    let (rows, cols) = (6, 70);
    let w = data(rows * cols, 9);
    let m = Q8Matrix::quantize(&w, rows, cols, cols, 1).unwrap();
    let mut row = vec![0f32; cols];
    for r in 0..rows {
        m.dequantize_row(r, &mut row);
        for (c, v) in row.iter().enumerate() {
            let step = 1.0 / 63.0;
            assert!((v - w[r * cols + c]).abs() <= step * 0.5 + 1e-6);
        }
    }
}

/// Q8_0 blocks in the kernels' range are taken as they are (the file's values exactly); a block
/// with values past ±63 is rounded again, to what `quantize_with` makes of the same values.
#[test]
fn q8_0_blocks_copied_when_in_range() {
    let (rows, cols) = (6, 64);
    let w = data(rows * cols, 9);
    let mut file = Vec::new();
    let mut wide_block = vec![false; rows * cols / QK];
    for (b, chunk) in w.chunks(QK).enumerate() {
        // Every third block uses the full -127..=127 range, the others the kernels' -63..=63,
        // some of them not all of it (rounding again would change those).
        let levels = [127.0, 63.0, 50.0][b % 3];
        wide_block[b] = b % 3 == 0;
        let amax = chunk.iter().fold(0f32, |a, v| a.max(v.abs()));
        let d = half::f16::from_f32(amax / levels);
        file.extend_from_slice(&d.to_bits().to_le_bytes());
        file.extend(
            chunk
                .iter()
                .map(|v| (v / d.to_f32()).round().clamp(-levels, levels) as i8 as u8),
        );
    }
    let value = |i: usize| {
        let b = &file[i / QK * 34..];
        half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32() * b[2 + i % QK] as i8 as f32
    };
    let copied = Q8Matrix::from_q8_0(&file, rows, cols).unwrap();
    let rounded = Q8Matrix::quantize_with(value, rows, cols, cols, 1).unwrap();
    let (mut a, mut b) = (vec![0f32; cols], vec![0f32; cols]);
    for r in 0..rows {
        copied.dequantize_row(r, &mut a);
        rounded.dequantize_row(r, &mut b);
        for c in 0..cols {
            let i = r * cols + c;
            if wide_block[i / QK] {
                assert_eq!(
                    a[c], b[c],
                    "row {r} col {c}: a wide block is rounded as before"
                );
            } else {
                assert_eq!(a[c], value(i), "row {r} col {c}: the file's value exactly");
            }
        }
    }
}

/// The range's edges: a Q8_0 block whose values reach ±63 is copied, one with a single 64 or
/// -64 (or -128) is rounded again.
#[test]
fn q8_0_range_edges() {
    let d = half::f16::from_f32(0.5);
    for (edge, copied) in [
        (63i8, true),
        (-63, true),
        (64, false),
        (-64, false),
        (-128, false),
    ] {
        let mut file = d.to_bits().to_le_bytes().to_vec();
        file.extend((0..QK as i8).map(|i| (i - 16) as u8));
        file[2 + 7] = edge as u8;
        let m = Q8Matrix::from_q8_0(&file, 1, QK).unwrap();
        let mut row = vec![0f32; QK];
        m.dequantize_row(0, &mut row);
        let exact = (0..QK).all(|c| row[c] == f32::from(file[2 + c] as i8) * 0.5);
        assert_eq!(exact, copied, "a block holding {edge}");
    }
}
