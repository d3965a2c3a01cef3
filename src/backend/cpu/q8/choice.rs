//! Which 8-bit kernel runs: the one `set_kernel` named, else the one `calibrate` timed fastest
//! for the product's shape, else the best this build has, by the CPU's features (x86-64) or by
//! asking the engine how it lowers relaxed SIMD's four-way dot (`simd128::Dot::probe`). Every
//! kernel gives the same integer sums; only the speed depends on the choice.

#[cfg(target_arch = "x86_64")]
use super::avx2;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
use super::simd128;
use super::{simd::Simd, Q8Act, Q8Matrix, RG, TILE, WIDE_TILE};
use core::sync::atomic::{AtomicU8, Ordering};

/// The kernel `set_kernel` named (`Simd::code`); 0: the automatic one.
static CHOSEN: AtomicU8 = AtomicU8::new(0);

/// The automatic choice that `calibrate` timed, for one activation row (a decode step's
/// product) and for several (a prompt's): `Simd::code`, 0 until it ran.
static TIMED: [AtomicU8; 2] = [AtomicU8::new(0), AtomicU8::new(0)];

#[cfg(test)]
thread_local! {
    /// A test's kernel on its own thread (`on_this_thread`), before `CHOSEN`: a test that runs
    /// every kernel must not change the one the tests beside it run, or a test comparing bits
    /// could see the portable kernel (whose f32 rounding differs) in one product and another
    /// kernel in the next.
    static THIS_THREAD: core::cell::Cell<u8> = const { core::cell::Cell::new(0) };
}

/// Makes this thread's later products use the kernel named `name` (one of `kernels()`; "auto":
/// the process's choice again). Tests only.
#[cfg(test)]
pub(super) fn on_this_thread(name: &str) {
    let code = Simd::available().into_iter().find(|s| s.name() == name);
    THIS_THREAD.set(code.map_or(0, Simd::code));
}

impl Simd {
    /// The kernel for a product of `rows` activation rows.
    pub(super) fn get(rows: usize) -> Simd {
        #[cfg(test)]
        if let c @ 1.. = THIS_THREAD.get() {
            return Self::from_code(c);
        }
        match CHOSEN.load(Ordering::Relaxed) {
            0 => match TIMED[(rows > 1) as usize].load(Ordering::Relaxed) {
                0 => Self::auto(),
                c => Self::from_code(c),
            },
            c => Self::from_code(c),
        }
    }

    /// The automatic choice before any timing.
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
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        return simd128::Dot::ALL
            .into_iter()
            .filter(|d| (*d == simd128::Dot::Widen) || cfg!(target_feature = "relaxed-simd"))
            .map(Simd::Simd128)
            .collect();
        #[allow(unused_mut, unreachable_code)]
        let mut all = vec![Simd::Portable];
        #[cfg(target_arch = "x86_64")]
        if matches!(Self::auto(), Simd::Avx2(_)) {
            all.extend(
                (avx2::Dot::ALL.into_iter())
                    .filter(|d| d.supported())
                    .map(Simd::Avx2),
            );
        }
        all
    }

    /// The kernel's name, as `kernel()` reports it and `set_kernel` takes it.
    pub(super) fn name(self) -> &'static str {
        match self {
            Simd::Portable => "portable",
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2(d) => d.name(),
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Simd::Simd128(d) => d.name(),
        }
    }

    /// One byte per kernel, for `CHOSEN` and `TIMED`.
    fn code(self) -> u8 {
        match self {
            Simd::Portable => 1,
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2(d) => 2 + d as u8,
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Simd::Simd128(d) => 5 + d as u8,
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

    /// The kernels the automatic choice cannot tell apart without timing them: in the
    /// relaxed-SIMD wasm builds, the engine's 8-bit dot (`Add` where it has a four-way one, else
    /// `I16`) against bytes widened to 16 bits (`Widen`), whose speeds depend on the CPU, the
    /// engine and the product: without a four-way dot both multiply twice per 16 weights, in
    /// different instructions; with one, `Add` computes a prompt's tiles fastest, yet V8 ran a
    /// decode step of the GPT-2-124M shape in 0.84× the time with `Widen` on an AMD Zen 5
    /// (docs/performance.md, "How the engine picks"). Empty elsewhere, and when `set_kernel`
    /// named a kernel.
    fn undecided() -> Vec<Simd> {
        #[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
        if CHOSEN.load(Ordering::Relaxed) == 0 {
            return vec![Self::auto(), Simd::Simd128(simd128::Dot::Widen)];
        }
        Vec::new()
    }
}

/// The name of the 8-bit kernel in use: `dot-add`, `dot-i16` or `widen` (wasm: relaxed SIMD's
/// four-way dot, its 16-bit dot widened, bytes widened to 16 bits), `avx2`, `avx-vnni` or
/// `avx512-vnni` (x86-64), `portable`; "A (prompt), B (decode)" when a prompt's products and a
/// decode step's use different ones.
pub fn kernel() -> String {
    let (prompt, decode) = (Simd::get(TILE).name(), Simd::get(1).name());
    if prompt == decode {
        prompt.into()
    } else {
        format!("{prompt} (prompt), {decode} (decode)")
    }
}

/// The kernels `calibrate` times on this CPU, by name; empty where there is nothing to decide
/// (a build with one kernel, or a kernel named by `set_kernel`). A caller may time them in its
/// own regime and give the choice to `use_timed` (the browser's worker: decode steps of the model
/// it loaded).
pub fn undecided() -> Vec<&'static str> {
    Simd::undecided().into_iter().map(Simd::name).collect()
}

/// The kernels this build can run on this CPU, by name.
pub fn kernels() -> Vec<&'static str> {
    Simd::available().into_iter().map(Simd::name).collect()
}

/// Makes every later 8-bit product of this process (in wasm: of this instance, every model in
/// it) use the kernel named `name` (one of `kernels()`), or the automatic choice again for
/// "auto" (what `calibrate` timed, if it ran). The integer sums are the same in every kernel
/// (the portable one differs from the others only in f32 rounding); only the speed changes. For
/// benchmarks and A/B runs.
pub fn set_kernel(name: &str) -> crate::error::Result<()> {
    if name == "auto" {
        CHOSEN.store(0, Ordering::Relaxed);
        return Ok(());
    }
    let all = Simd::available();
    match all.iter().find(|s| s.name() == name) {
        Some(s) => {
            CHOSEN.store(s.code(), Ordering::Relaxed);
            Ok(())
        }
        None => Err(crate::error::Error::param(
            "kernel",
            format!(
                "\"{name}\"; this build on this CPU has auto, {}",
                all.iter().map(|s| s.name()).collect::<Vec<_>>().join(", ")
            ),
        )),
    }
}

/// Where the automatic choice cannot tell the kernels apart (`Simd::undecided`: the
/// relaxed-SIMD wasm builds; with a one-instruction dot, a decode step's only, which `time`
/// leaves to the caller), times them on this CPU and makes the faster one the
/// automatic choice, for a decode step's product (one activation row) and for a prompt's
/// apart. The products are GPT-2 small's width over a matrix that stays in the L2 cache (what
/// the kernels compute, not what memory delivers), in rounds that alternate the kernels, each
/// kernel's first round (its compile) not counted; the work of each is counted over windows of
/// the clock (whose resolution may be 0.1 ms or coarser), summed over the rounds. About 30 ms,
/// once per process (wasm instance): later calls return the first one's report. Returns what it
/// measured, or None where there is nothing to decide.
pub fn calibrate() -> Option<String> {
    static REPORT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let kernels = Simd::undecided();
    if kernels.len() < 2 {
        return None;
    }
    Some(REPORT.get_or_init(|| time(&kernels)).clone())
}

/// The kernels that timing chose, `(decode, prompt)` by name, once `calibrate` (or
/// `use_timed`) has run; None before, or where there was nothing to decide.
pub fn timed() -> Option<(&'static str, &'static str)> {
    let named = |i: usize| match TIMED[i].load(Ordering::Relaxed) {
        0 => None,
        c => Some(Simd::from_code(c).name()),
    };
    Some((named(0)?, named(1)?))
}

/// Makes `decode` and `prompt` the automatic choice, as `calibrate` would, without timing them:
/// an earlier load's timing on this device, kept by the caller (the browser's localStorage).
/// False, and nothing set, where there is nothing to decide here or either name is not one of
/// the kernels `calibrate` would time (the caller then calibrates).
pub fn use_timed(decode: &str, prompt: &str) -> bool {
    let kernels = Simd::undecided();
    let find = |name: &str| kernels.iter().find(|k| k.name() == name).copied();
    let (Some(d), Some(p)) = (find(decode), find(prompt)) else {
        return false;
    };
    TIMED[0].store(d.code(), Ordering::Relaxed);
    TIMED[1].store(p.code(), Ordering::Relaxed);
    true
}

/// `calibrate`'s timing of `kernels` (at least two): sets `TIMED`, returns what it measured.
/// With a four-way 8-bit dot in one instruction (`Add` first), nothing here: a prompt's tiles
/// run fastest with it (on the 2-core AMD EPYC Zen 5, V8's 64-token prompt of the GPT-2-124M
/// shape took 98.6 ms against `widen`'s 150.8, both in tiles of five rows), and a decode step's
/// choice is the caller's, over the model's own steps (the browser's worker); both start as
/// `Add`.
fn time(kernels: &[Simd]) -> String {
    #[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
    if kernels[0] == Simd::Simd128(simd128::Dot::Add) {
        for t in &TIMED {
            t.store(kernels[0].code(), Ordering::Relaxed);
        }
        return format!(
            "prompt: {} (the engine's one-instruction 8-bit dot, not timed)",
            kernels[0].name()
        );
    }
    // A prompt of whole tiles for every kernel (`TILE` and `Simd::wide_tile`'s).
    let (rows, cols, prompt_rows) = (256, 768, TILE * WIDE_TILE);
    // Seeded values: the kernels' speed does not depend on them.
    let mut s = 0x9e37_79b9u32;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        (s as f32 / u32::MAX as f32) - 0.5
    };
    let w: Vec<f32> = (0..rows * cols).map(|_| next()).collect();
    let x: Vec<f32> = (0..prompt_rows * cols).map(|_| next()).collect();
    // A matrix this small always fits in memory (1 x 256 x 768 bytes).
    let Ok(m) = Q8Matrix::quantize(&w, rows, cols, cols, 1) else {
        return "no memory for the timing".into();
    };
    let (mut one, mut many) = (Q8Act::default(), Q8Act::default());
    one.quantize(&x[..cols], cols);
    many.quantize(&x, cols);
    let mut y = vec![0f32; prompt_rows * rows];
    let groups = rows.div_ceil(RG);
    let mut report = Vec::new();
    for (decode, act) in [(true, &one), (false, &many)] {
        // Products and ms of each kernel, over the rounds after the first.
        let mut work = vec![(0usize, 0f64); kernels.len()];
        for round in 0..5 {
            for (k, &kernel) in kernels.iter().enumerate() {
                let (t0, mut n) = (crate::platform::now_ms(), 0);
                let mut t = t0;
                while t - t0 < 1.5 {
                    for _ in 0..4 {
                        m.part(kernel, act, None, 0..act.rows, 0..groups, &mut y);
                    }
                    n += 4;
                    t = crate::platform::now_ms();
                }
                if round > 0 {
                    work[k].0 += n;
                    work[k].1 += t - t0;
                }
            }
        }
        let us = |k: usize| 1e3 * work[k].1 / work[k].0 as f64; // per product (n ≥ 4)
        let best = (0..kernels.len())
            .min_by(|&a, &b| us(a).total_cmp(&us(b)))
            .unwrap_or(0); // kernels is not empty
        TIMED[(!decode) as usize].store(kernels[best].code(), Ordering::Relaxed);
        report.push(format!(
            "{}: {}",
            if decode { "decode" } else { "prompt" },
            (0..kernels.len())
                .map(|k| format!("{} {:.1} µs", kernels[k].name(), us(k)))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    report.join("; ")
}
