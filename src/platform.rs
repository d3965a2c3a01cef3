//! What differs between the browser and a native build, other than the JS bindings (`wasm.rs`),
//! the GPU context and the per-instruction-set kernels (`backend::cpu::q8`): the clock, how much
//! memory this build can use, and how large buffers are allocated.
//!
//! The weights that one decode step streams through ask for 2 MiB pages on Linux (transparent
//! huge pages are usually `madvise`-only), which takes TLB misses out of the stream:
//! single-thread reads here go from ~11 to ~16 GB/s.

#[cfg(target_arch = "wasm32")]
#[wasm_bindgen::prelude::wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = performance, js_name = now)]
    fn performance_now() -> f64;
}

/// Milliseconds on a monotonic clock with an arbitrary origin: `performance.now()` in the browser
/// (also in workers, where the thread pool runs), `Instant` natively.
pub fn now_ms() -> f64 {
    #[cfg(target_arch = "wasm32")]
    return performance_now();
    #[cfg(not(target_arch = "wasm32"))]
    {
        static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        START
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_secs_f64()
            * 1e3
    }
}

/// The threads build's limit, in words.
pub const THREADED_LIMIT: &str = "the 2 GiB the threaded wasm build can address";

/// The memory this build can use, in bytes, with the limit in words: what a wasm32 build can
/// address, or natively the machine's physical memory (where the OS says; `None` elsewhere).
pub fn memory_limit() -> Option<(u64, &'static str)> {
    #[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
    return Some((2 << 30, THREADED_LIMIT));
    #[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
    return Some((4 << 30, "the 4 GiB a wasm32 build can address"));
    #[cfg(not(target_arch = "wasm32"))]
    physical_memory().map(|bytes| (bytes, "this machine's memory"))
}

/// MemTotal from /proc/meminfo (Linux).
#[cfg(not(target_arch = "wasm32"))]
fn physical_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// `n` zeros, or an error naming `what` when that memory cannot be had (the allocation is tried
/// first, so wasm reports it instead of aborting the instance).
pub fn try_zeroed<T: Copy + Default>(n: usize, what: &str) -> crate::error::Result<Vec<T>> {
    let mut v: Vec<T> = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| out_of_memory(what, n, std::mem::size_of::<T>()))?;
    v.resize(n, T::default());
    Ok(v)
}

/// `n` zeros, exactly, or an error naming `what`; on Linux the whole 2 MiB pages inside the
/// allocation are asked to be huge pages. (Padding every matrix to whole huge pages, as before,
/// cost GPT-2 small ~95 MB more resident memory with q8 and no TPOT that could be measured:
/// its matrices are 0.6–2.4 MB, so the padding was most of each; docs/architecture.md.)
pub fn try_zeroed_huge<T: Copy + Default>(n: usize, what: &str) -> crate::error::Result<Vec<T>> {
    let mut v: Vec<T> = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| out_of_memory(what, n, std::mem::size_of::<T>()))?;
    #[cfg(target_os = "linux")]
    advise_huge(
        v.as_mut_ptr() as usize,
        v.capacity() * std::mem::size_of::<T>(),
    );
    v.resize(n, T::default()); // the first touch, after the advice
    Ok(v)
}

fn out_of_memory(what: &str, n: usize, size: usize) -> crate::error::Error {
    crate::error::Error::Memory(format!(
        "{what} needs {} MB more",
        (n as u64).saturating_mul(size as u64) / 1_000_000
    ))
}

#[cfg(target_os = "linux")]
fn advise_huge(addr: usize, len: usize) {
    const HUGE: usize = 2 << 20;
    let (start, end) = (addr.next_multiple_of(HUGE), (addr + len) / HUGE * HUGE);
    if end > start {
        // SAFETY: the range lies inside the allocation just made and only advises the kernel;
        // a refusal (an old kernel, THP disabled) changes nothing.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    }
}

/// Asks for the cache line at `p` ahead of use (x86-64; elsewhere nothing). A hint: it reads
/// nothing and cannot fault, whatever the address.
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch only hints the cache; it has no effect a program can observe.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
