//! What differs between the browser and a native build, other than the JS bindings (`wasm.rs`) and
//! the GPU context: the clock, and how much memory this build can use.

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

/// The memory this build can use, in bytes, with the limit in words: what a wasm32 build can
/// address, or natively the machine's physical memory (where the OS says; `None` elsewhere).
pub fn memory_limit() -> Option<(u64, &'static str)> {
    #[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
    return Some((2 << 30, "the 2 GiB the threaded wasm build can address"));
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
