//! The two raw system calls live mode makes that only Linux has, `move_pages(2)` and
//! `perf_event_open(2)`. On other systems (the simulator and the analysis tools build
//! on macOS too) they fail with `ENOSYS`, so live mode says it is not supported there
//! rather than the workspace failing to build. Each returns the call's non-negative
//! result or the errno.

/// `move_pages(2)`.
///
/// # Safety
/// `pages` and `status` must hold `count` elements (and `nodes`, when not null).
pub(crate) unsafe fn move_pages(
    pid: i32,
    count: usize,
    pages: *const *mut libc::c_void,
    nodes: *const i32,
    status: *mut i32,
    flags: i32,
) -> Result<libc::c_long, i32> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: the caller's contract.
        let r = unsafe {
            libc::syscall(
                libc::SYS_move_pages,
                pid as libc::c_long,
                count as libc::c_ulong,
                pages,
                nodes,
                status,
                flags as libc::c_long,
            )
        };
        errno_or(r)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (pid, count, pages, nodes, status, flags);
        Err(libc::ENOSYS)
    }
}

/// `perf_event_open(2)`.
///
/// # Safety
/// `attr` must point to a valid `perf_event_attr` of the size it declares.
pub(crate) unsafe fn perf_event_open<A>(
    attr: *const A,
    pid: i32,
    cpu: i32,
    group_fd: i32,
    flags: libc::c_ulong,
) -> Result<libc::c_long, i32> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: the caller's contract.
        let r =
            unsafe { libc::syscall(libc::SYS_perf_event_open, attr, pid, cpu, group_fd, flags) };
        errno_or(r)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (attr, pid, cpu, group_fd, flags);
        Err(libc::ENOSYS)
    }
}

#[cfg(target_os = "linux")]
fn errno_or(r: libc::c_long) -> Result<libc::c_long, i32> {
    if r < 0 {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    } else {
        Ok(r)
    }
}
