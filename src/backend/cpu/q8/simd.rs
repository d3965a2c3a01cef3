//! Which of the 8-bit dot-product kernels runs (chosen once, from the target and the CPU's or
//! the engine's features, unless `choose` named one), and the length checks in front of them:
//! the only place that calls into the kernels' `unsafe` functions.

#[cfg(target_arch = "x86_64")]
use super::avx2;
use super::portable;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
use super::simd128;
use super::{QK, RG, TILE};
use core::sync::atomic::{AtomicU8, Ordering};

/// The dot-product kernel in use: four interleaved weight rows against one activation row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Simd {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2(avx2::Dot),
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    Simd128(simd128::Dot),
}

/// The kernel `choose` named (`Simd::code`); 0: the automatic one.
static CHOSEN: AtomicU8 = AtomicU8::new(0);

/// The automatic choice that `calibrate` timed, for one activation row (a decode step's
/// product) and for several (a prompt's): `Simd::code`, 0 until it ran.
static TIMED: [AtomicU8; 2] = [AtomicU8::new(0), AtomicU8::new(0)];

impl Simd {
    /// The kernel for a product of `rows` activation rows: the one `choose` named, else the one
    /// `calibrate` timed fastest for that shape, else the best this build has on this CPU.
    pub(super) fn get(rows: usize) -> Simd {
        match CHOSEN.load(Ordering::Relaxed) {
            0 => match TIMED[(rows > 1) as usize].load(Ordering::Relaxed) {
                0 => Self::auto(),
                c => Self::from_code(c),
            },
            c => Self::from_code(c),
        }
    }

    fn from_code(c: u8) -> Simd {
        match c {
            #[cfg(target_arch = "x86_64")]
            2..=4 => Simd::Avx2(avx2::Dot::ALL[c as usize - 2]),
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            5..=7 => Simd::Simd128(simd128::Dot::ALL[c as usize - 5]),
            _ => Simd::Portable,
        }
    }

    /// The kernels the automatic choice cannot tell apart without timing them: in wasm, when
    /// the engine has no four-way 8-bit dot, its 16-bit dot (`I16`) against bytes widened to 16
    /// bits (`Widen`), whose speeds depend on the CPU (both multiply twice per 16 weights, in
    /// different instructions). Empty elsewhere, and when `choose` named a kernel.
    pub(super) fn undecided() -> Vec<Simd> {
        #[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
        if CHOSEN.load(Ordering::Relaxed) == 0 && Self::auto() != Simd::Simd128(simd128::Dot::Add) {
            return vec![
                Simd::Simd128(simd128::Dot::I16),
                Simd::Simd128(simd128::Dot::Widen),
            ];
        }
        Vec::new()
    }

    /// Makes `s` the automatic choice for products of one activation row (`decode`) or several.
    pub(super) fn set_timed(decode: bool, s: Simd) {
        TIMED[(!decode) as usize].store(s.code(), Ordering::Relaxed);
    }

    /// One byte per kernel, for `CHOSEN`.
    fn code(self) -> u8 {
        match self {
            Simd::Portable => 1,
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2(d) => 2 + d as u8,
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Simd::Simd128(d) => 5 + d as u8,
        }
    }

    /// The automatic choice: on x86-64 by the CPU's features; in wasm with relaxed SIMD by how
    /// the engine lowers its 8-bit dot (`simd128::Dot::probe`).
    fn auto() -> Simd {
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        return Simd::Simd128(simd128::Dot::probe());
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            return Simd::Avx2(avx2::Dot::detect());
        }
        #[allow(unreachable_code)]
        Simd::Portable
    }

    /// Every kernel this build can run on this CPU; in wasm, those with SIMD (the portable one
    /// is only the native tests' reference there).
    pub(super) fn available() -> Vec<Simd> {
        #[allow(unused_mut)]
        let mut all = vec![Simd::Portable];
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        all.clear();
        #[cfg(target_arch = "x86_64")]
        if let Simd::Avx2(best) = Self::auto() {
            all.push(Simd::Avx2(avx2::Dot::Avx2));
            for d in [avx2::Dot::AvxVnni, avx2::Dot::Avx512Vnni] {
                if d.supported() {
                    all.push(Simd::Avx2(d));
                }
            }
            debug_assert!(all.contains(&Simd::Avx2(best)));
        }
        #[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
        all.extend([
            Simd::Simd128(simd128::Dot::Add),
            Simd::Simd128(simd128::Dot::I16),
        ]);
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        all.push(Simd::Simd128(simd128::Dot::Widen));
        all
    }

    /// The kernel's name, as `kernel()` reports it and `choose` takes it.
    pub(super) fn name(self) -> &'static str {
        match self {
            Simd::Portable => "portable",
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2(d) => d.name(),
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Simd::Simd128(d) => d.name(),
        }
    }

    /// Makes every later product in this process (or wasm instance) use the kernel named `name`,
    /// or the automatic choice again for "auto" (what `calibrate` timed, if it ran). All of them give the same integer sums; their
    /// speeds differ, which is what naming one is for (benchmarks, A/B).
    pub(super) fn choose(name: &str) -> crate::Result<()> {
        if name == "auto" {
            CHOSEN.store(0, Ordering::Relaxed);
            return Ok(());
        }
        let all = Self::available();
        match all.iter().find(|s| s.name() == name) {
            Some(s) => {
                CHOSEN.store(s.code(), Ordering::Relaxed);
                Ok(())
            }
            None => Err(crate::Error::param(
                "kernel",
                format!(
                    "\"{name}\"; this build on this CPU has auto, {}",
                    all.iter().map(|s| s.name()).collect::<Vec<_>>().join(", ")
                ),
            )),
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
        let nb = xs.len();
        assert!(w.len() == nb * RG * QK && ws.len() == nb * RG && x.len() == nb * QK);
        assert!(xo.len() == nb);
        match self {
            Simd::Portable => portable::dot4(w, ws, x, xs, xo, out),
            // SAFETY: the lengths are checked above (one group of `nb` blocks, one activation row
            // of `nb` blocks) and the CPU features were detected in `get`.
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2(dot) => unsafe {
                avx2::dot_rows::<1>(dot, w, ws, x, xs, xo, nb, core::array::from_mut(out))
            },
            // SAFETY: as above.
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Simd::Simd128(dot) => unsafe { simd128::dot4(dot, w, ws, x, xs, xo, out) },
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
        let nb = xs.len() / TILE;
        assert!(w.len() == nb * RG * QK && ws.len() == nb * RG && x.len() == TILE * nb * QK);
        assert!(xs.len() == TILE * nb && xo.len() == TILE * nb);
        match self {
            // SAFETY: the lengths are checked above: one group of `nb` blocks, `TILE`
            // activation rows of `nb` blocks.
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Simd::Simd128(dot) => unsafe { simd128::dot4x4(dot, w, ws, x, xs, xo, out) },
            // SAFETY: as above, and the CPU features were detected in `get`.
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2(dot) => unsafe { avx2::dot_rows::<TILE>(dot, w, ws, x, xs, xo, nb, out) },
            _ => {
                for (k, out) in out.iter_mut().enumerate() {
                    let (x, xs, xo) = (
                        &x[k * nb * QK..][..nb * QK],
                        &xs[k * nb..][..nb],
                        &xo[k * nb..][..nb],
                    );
                    self.dot4(w, ws, x, xs, xo, out);
                }
            }
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
        let nb = xs.len();
        assert!(w.len() == 2 * nb * RG * QK && ws.len() == 2 * nb * RG);
        assert!(x.len() == nb * QK && xo.len() == nb);
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

    /// `dot4x4` for two groups (`w` and `ws` hold the first group's blocks, then the second's):
    /// `out[h]` is group h's. Each row's result is exactly what `dot4` gives it.
    #[inline]
    pub(super) fn dot8x4(
        self,
        w: &[i8],
        ws: &[f32],
        x: &[i8],
        xs: &[f32],
        xo: &[i32],
        out: &mut [[[f32; RG]; TILE]; 2],
    ) {
        let nb = xs.len() / TILE;
        assert!(w.len() == 2 * nb * RG * QK && ws.len() == 2 * nb * RG);
        assert!(x.len() == TILE * nb * QK && xo.len() == TILE * nb);
        match self {
            // SAFETY: the lengths are checked above: two groups of `nb` blocks, `TILE`
            // activation rows of `nb` blocks.
            #[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
            Simd::Simd128(simd128::Dot::I16) => unsafe {
                simd128::dot8x4::<{ simd128::I16 }>(w, ws, x, xs, xo, out)
            },
            // SAFETY: as above.
            #[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
            Simd::Simd128(simd128::Dot::Add) => unsafe {
                simd128::dot8x4::<{ simd128::ADD }>(w, ws, x, xs, xo, out)
            },
            _ => {
                let (w0, w1) = w.split_at(nb * RG * QK);
                let (s0, s1) = ws.split_at(nb * RG);
                let [o0, o1] = out;
                self.dot4x4(w0, s0, x, xs, xo, o0);
                self.dot4x4(w1, s1, x, xs, xo, o1);
            }
        }
    }
}
