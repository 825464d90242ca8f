//! Host-side hints: a CPU prefetch and huge pages for the large arrays of the
//! simulator (page state, LLC tags) and of the generators (a graph kernel's vertex
//! state). Neither has any effect on results, only on speed.

/// Hint that `r` will be read soon.
#[inline(always)]
pub fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it never faults and reads nothing into Rust state.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch(r as *const T as *const i8, _MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}

/// Arrays smaller than this stay on base pages: the hint only pays where random
/// accesses over the array would miss the host's TLB.
pub const HUGE_HINT_MIN_BYTES: usize = 8 << 20;

/// A vector of `n` copies of `value` whose memory the host kernel is asked to back
/// with transparent huge pages (`madvise(MADV_HUGEPAGE)`) before it is first written.
///
/// The page-state arrays and LLC tags are read at random; on 4 KiB host pages every
/// such read also misses the host TLB, and a software prefetch cannot retire before
/// its page walk ends, so the walks, not the cache misses, set the simulator's pace.
/// Where the hint is refused (THP disabled, a non-Linux host) the vector is the same.
pub fn vec_on_huge_pages<T: Clone>(value: T, n: usize) -> Vec<T> {
    let mut v = Vec::with_capacity(n);
    advise_huge_pages(v.as_ptr() as usize, n * std::mem::size_of::<T>());
    v.resize(n, value);
    v
}

/// Ask the host kernel to back `[addr, addr + len)`, memory this process owns and has
/// not written yet, with transparent huge pages (arrays under
/// [`HUGE_HINT_MIN_BYTES`] are left alone). A hint: it never changes the contents.
#[cfg(target_os = "linux")]
pub fn advise_huge_pages(addr: usize, len: usize) {
    if len < HUGE_HINT_MIN_BYTES {
        return;
    }
    const HOST_PAGE: usize = 4096;
    let start = addr.next_multiple_of(HOST_PAGE);
    let end = (addr + len) & !(HOST_PAGE - 1);
    if end > start {
        // SAFETY: the range lies inside an allocation this process owns and has not
        // written yet; MADV_HUGEPAGE changes only how the kernel backs it, never its
        // contents, and a refusal leaves it as it was.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

/// Ask the host kernel to back `[addr, addr + len)` with huge pages: nothing to ask
/// on this host.
#[cfg(not(target_os = "linux"))]
pub fn advise_huge_pages(_addr: usize, _len: usize) {}
