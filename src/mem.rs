//! Large buffers that one decode step streams through: the weights, and the bandwidth probe that
//! gives their bound. On Linux they ask for 2 MiB pages (transparent huge pages are usually
//! `madvise`-only), which takes TLB misses out of the stream: single-thread reads here go from
//! ~11 to ~16 GB/s.

/// `n` zeros, or an error naming `what` when that memory cannot be had (the allocation is tried
/// first, so wasm reports it instead of aborting the instance).
pub fn try_zeroed<T: Copy + Default>(n: usize, what: &str) -> crate::Result<Vec<T>> {
    let mut v: Vec<T> = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        crate::Error::Backend(format!(
            "out of memory: {what} needs {} MB more",
            (n as u64).saturating_mul(std::mem::size_of::<T>() as u64) / 1_000_000
        ))
    })?;
    v.resize(n, T::default());
    Ok(v)
}

/// `n` zeros, backed by huge pages where the OS grants them. On Linux the allocation is padded to
/// whole 2 MiB pages (plus one, since it need not start on a page boundary) so that every byte
/// of the data can lie on one; elsewhere (wasm, other systems) it is exactly `n`.
pub fn zeroed_huge<T: Copy + Default>(n: usize) -> Vec<T> {
    #[cfg(target_os = "linux")]
    let capacity = {
        let (size, huge) = (std::mem::size_of::<T>().max(1), 2usize << 20);
        (n * size).next_multiple_of(huge).saturating_add(huge) / size
    };
    #[cfg(not(target_os = "linux"))]
    let capacity = n;
    let mut v: Vec<T> = Vec::with_capacity(capacity);
    #[cfg(target_os = "linux")]
    advise_huge(v.as_mut_ptr() as usize, capacity * std::mem::size_of::<T>());
    v.resize(n, T::default()); // the first touch, after the advice
    v
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
