//! The 8-bit dot-product kernels (which one runs is `choice`'s), and the length check in front
//! of them (`blocks`, one for every call's shape): the only place that calls into the kernels'
//! `unsafe` functions.

#[cfg(target_arch = "x86_64")]
use super::avx2;
use super::portable;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
use super::simd128;
use super::{QK, RG, TILE};

/// The shape of one kernel call: weight groups (of `RG` interleaved rows), activation rows, and
/// the bytes of one activation block as the kernel reads it (`Simd::x_block`, or `QK` for a
/// single row).
#[derive(Clone, Copy)]
struct Shape {
    groups: usize,
    rows: usize,
    x_block: usize,
}

/// Blocks per row of a call, after checking every length against `shape`: the one check in front
/// of the `unsafe` kernels.
#[inline(always)]
fn blocks(w: &[i8], ws: &[f32], x: &[i8], xs: &[f32], xo: &[i32], shape: Shape) -> usize {
    let Shape {
        groups,
        rows,
        x_block,
    } = shape;
    let nb = xs.len() / rows;
    assert!(xs.len() == rows * nb && xo.len() == rows * nb && x.len() == rows * nb * x_block);
    assert!(w.len() == groups * nb * RG * QK && ws.len() == groups * nb * RG);
    nb
}

/// Whether a kernel of this build reads a single activation row spread (wasm's `widen`:
/// `simd128::dot4xn`), so that `Q8Act` spreads single rows too.
pub(super) const ROW_SPREAD: bool = cfg!(all(target_arch = "wasm32", target_feature = "simd128"));

/// The dot-product kernel in use: four interleaved weight rows against one activation row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Simd {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2(avx2::Dot),
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    Simd128(simd128::Dot),
}

impl Simd {
    /// Bytes of one activation block as this kernel reads a tile of rows (`dot4x4`, `dot8xn`):
    /// the block itself, or its spread form (`Q8Act::spread`: x86-64, and wasm's `widen`). A
    /// single row (`dot4`, `dot8`) is always the block itself.
    pub(super) fn x_block(self) -> usize {
        match self {
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2(_) => QK * RG,
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Simd::Simd128(simd128::Dot::Widen) => QK * RG,
            _ => QK,
        }
    }

    /// Bytes of one activation block as this kernel reads a single row (`dot4`, `dot8`): the
    /// block itself, but for wasm's `widen` (`ROW_SPREAD`), which reads it spread too
    /// (`Q8Act::spread`).
    pub(super) fn row_x_block(self) -> usize {
        match self {
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Simd::Simd128(simd128::Dot::Widen) => QK * RG,
            _ => QK,
        }
    }

    /// out[l] = Σ_b ws[b][l] · xs[b] · (Σ_k w[b][l][k] · x[b][k] + xo[b]) for the four rows l
    /// of a group, where w holds the offset weights and xo[b] = −OFFSET · Σ_k x[b][k].
    #[inline]
    pub(super) fn dot4(
        self,
        w: &[i8],
        ws: &[f32],
        x: &[i8],
        xs: &[f32],
        xo: &[i32],
        out: &mut [f32; RG],
    ) {
        let one = Shape {
            groups: 1,
            rows: 1,
            x_block: self.row_x_block(),
        };
        // Only the x86-64 kernel takes the block count; the others read it from the slices.
        #[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
        let nb = blocks(w, ws, x, xs, xo, one);
        match self {
            Simd::Portable => portable::dot4(w, ws, x, xs, xo, out),
            // SAFETY: the lengths are checked above (one group of `nb` blocks, one activation row
            // of `nb` blocks) and the CPU features were detected in `choice`.
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2(dot) => unsafe {
                avx2::dot_rows::<1>(dot, (w, ws), x, xs, xo, nb, core::array::from_mut(out))
            },
            // SAFETY: as above.
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Simd::Simd128(dot) => unsafe {
                simd128::dot4xn::<1>(dot, w, ws, x, xs, xo, core::array::from_mut(out))
            },
        }
    }

    /// `dot4` for `TILE` activation rows at once (x, xs, xo hold the rows one after another);
    /// each row's result is exactly what `dot4` gives it.
    #[inline]
    pub(super) fn dot4x4(
        self,
        w: &[i8],
        ws: &[f32],
        x: &[i8],
        xs: &[f32],
        xo: &[i32],
        out: &mut [[f32; RG]; TILE],
    ) {
        let tile = Shape {
            groups: 1,
            rows: TILE,
            x_block: self.x_block(),
        };
        // Only the x86-64 kernel takes the block count; the others read it from the slices.
        #[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
        let nb = blocks(w, ws, x, xs, xo, tile);
        match self {
            // SAFETY: the lengths are checked above: one group of `nb` blocks, `TILE`
            // activation rows of `nb` blocks.
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Simd::Simd128(dot) => unsafe { simd128::dot4x4(dot, w, ws, x, xs, xo, out) },
            // SAFETY: as above, and the CPU features were detected in `choice`.
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2(dot) => unsafe { avx2::dot_rows::<TILE>(dot, (w, ws), x, xs, xo, nb, out) },
            _ => self.dot4_each(w, ws, x, xs, xo, out),
        }
    }

    /// `dot4` for each of `out.len()` activation rows (x, xs, xo hold them one after another,
    /// as this kernel reads single rows): the tiles of kernels without a tiled form.
    fn dot4_each(
        self,
        w: &[i8],
        ws: &[f32],
        x: &[i8],
        xs: &[f32],
        xo: &[i32],
        out: &mut [[f32; RG]],
    ) {
        let nb = xs.len() / out.len();
        for (k, out) in out.iter_mut().enumerate() {
            let x = &x[k * nb * QK..][..nb * QK];
            self.dot4(w, ws, x, &xs[k * nb..][..nb], &xo[k * nb..][..nb], out);
        }
    }

    /// Whether two activation rows share the weights' loads (`dot4x2`): the x86-64 and wasm
    /// SIMD kernels.
    pub(super) fn pairs_rows(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        if let Simd::Avx2(_) = self {
            return true;
        }
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        if let Simd::Simd128(_) = self {
            return true;
        }
        false
    }

    /// `dot4x4` for two activation rows (`pairs_rows` kernels; the others run `dot4` twice);
    /// each row's result is exactly what `dot4` gives it.
    #[inline]
    pub(super) fn dot4x2(
        self,
        w: &[i8],
        ws: &[f32],
        x: &[i8],
        xs: &[f32],
        xo: &[i32],
        out: &mut [[f32; RG]; 2],
    ) {
        let two = Shape {
            groups: 1,
            rows: 2,
            x_block: self.x_block(),
        };
        // Only the x86-64 kernel takes the block count; the others read it from the slices.
        #[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
        let nb = blocks(w, ws, x, xs, xo, two);
        match self {
            // SAFETY: the lengths are checked above: one group of `nb` blocks, two spread
            // activation rows of `nb` blocks; the CPU features were detected in `choice`.
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2(dot) => unsafe { avx2::dot_rows::<2>(dot, (w, ws), x, xs, xo, nb, out) },
            // SAFETY: as above (the rows spread where `x_block` says so).
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Simd::Simd128(dot) => unsafe { simd128::dot4xn::<2>(dot, w, ws, x, xs, xo, out) },
            _ => self.dot4_each(w, ws, x, xs, xo, out),
        }
    }

    /// `dot4` for two groups (`w` and `ws` hold the first group's blocks, then the second's):
    /// `out[h]` is group h's, exactly what `dot4` gives it.
    #[inline]
    pub(super) fn dot8(
        self,
        w: &[i8],
        ws: &[f32],
        x: &[i8],
        xs: &[f32],
        xo: &[i32],
        out: [&mut [f32; RG]; 2],
    ) {
        let pair = Shape {
            groups: 2,
            rows: 1,
            x_block: self.row_x_block(),
        };
        let nb = blocks(w, ws, x, xs, xo, pair);
        let [o0, o1] = out;
        match self {
            // SAFETY: the lengths are checked above: two groups of `nb` blocks, one activation
            // row of `nb` blocks.
            #[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
            Simd::Simd128(dot @ (simd128::Dot::Add | simd128::Dot::I16)) => {
                let mut both = [[0f32; RG]; 2];
                match dot {
                    simd128::Dot::I16 => unsafe {
                        simd128::dot8::<{ simd128::I16 }>(w, ws, x, xs, xo, &mut both)
                    },
                    _ => unsafe { simd128::dot8::<{ simd128::ADD }>(w, ws, x, xs, xo, &mut both) },
                }
                (*o0, *o1) = (both[0], both[1]);
            }
            _ => {
                let (w0, w1) = w.split_at(nb * RG * QK);
                let (s0, s1) = ws.split_at(nb * RG);
                self.dot4(w0, s0, x, xs, xo, o0);
                self.dot4(w1, s1, x, xs, xo, o1);
            }
        }
    }

    /// Activation rows per tile of a prompt's product for two groups (`dot8xn`): `WIDE_TILE`
    /// in wasm but for relaxed SIMD's `dot-i16` (whose chains need more of the engine's vector
    /// registers), else `TILE`.
    pub(super) fn wide_tile(self) -> usize {
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        if let Simd::Simd128(dot) = self {
            if dot != simd128::Dot::I16 {
                return super::WIDE_TILE;
            }
        }
        TILE
    }

    /// Whether a product of a few rows (`FEW_ROWS`) takes them two at a time: in wasm.
    pub(super) fn pairs_few(self) -> bool {
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        if let Simd::Simd128(_) = self {
            return true;
        }
        false
    }

    /// `dot4x4` for two groups (`w` and `ws` hold the first group's blocks, then the second's)
    /// over `N` activation rows (`TILE`, or `wide_tile`'s): `out[h]` is group h's. Each row's
    /// result is exactly what `dot4` gives it.
    #[inline]
    pub(super) fn dot8xn<const N: usize>(
        self,
        w: &[i8],
        ws: &[f32],
        x: &[i8],
        xs: &[f32],
        xo: &[i32],
        out: [&mut [[f32; RG]; N]; 2],
    ) {
        let tiles = Shape {
            groups: 2,
            rows: N,
            x_block: self.x_block(),
        };
        let nb = blocks(w, ws, x, xs, xo, tiles);
        match self {
            // SAFETY: the lengths are checked above: two groups of `nb` blocks, `N` activation
            // rows of `nb` blocks.
            #[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
            Simd::Simd128(simd128::Dot::I16) => unsafe {
                simd128::dot8xn::<N, { simd128::I16 }>(w, ws, x, xs, xo, out)
            },
            // SAFETY: as above.
            #[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
            Simd::Simd128(simd128::Dot::Add) => unsafe {
                simd128::dot8xn::<N, { simd128::ADD }>(w, ws, x, xs, xo, out)
            },
            // `widen`: one group at a time, each weight step widened once for the `N` rows.
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Simd::Simd128(dot) => {
                let (w0, w1) = w.split_at(nb * RG * QK);
                let (s0, s1) = ws.split_at(nb * RG);
                for ((w, ws), out) in [(w0, s0), (w1, s1)].into_iter().zip(out) {
                    // SAFETY: as above, for one group (the rows spread, as `x_block` says).
                    unsafe { simd128::dot4xn::<N>(dot, w, ws, x, xs, xo, out) };
                }
            }
            _ => {
                // Only `TILE` rows come here (`wide_tile`).
                let (w0, w1) = w.split_at(nb * RG * QK);
                let (s0, s1) = ws.split_at(nb * RG);
                for ((w, ws), out) in [(w0, s0), (w1, s1)].into_iter().zip(out) {
                    let out: &mut [[f32; RG]; TILE] = (&mut out[..]).try_into().unwrap();
                    self.dot4x4(w, ws, x, xs, xo, out);
                }
            }
        }
    }
}
