//! move_pages(2) through `libc::syscall(SYS_move_pages)` (no libnuma): per-page node
//! queries (`nodes = NULL`) and moves with `MPOL_MF_MOVE`, with per-page status
//! classification.

use serde::Serialize;

/// `MPOL_MF_MOVE`: move pages mapped only by this process (shared pages stay;
/// `MPOL_MF_MOVE_ALL` would need CAP_SYS_NICE and moves other processes' memory).
pub const MPOL_MF_MOVE: i32 = 1 << 1;
/// Largest number of pages handed to one query call.
pub const QUERY_CHUNK: usize = 16 * 1024;

/// What happened to one page of a move (or a query).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum PageStatus {
    /// The page is (now) on this node.
    Node(i32),
    /// `-ENOENT`: not present (never touched, or freed).
    NotPresent,
    /// `-EFAULT`: not mapped (unmapped since the daemon looked) or the zero page.
    Fault,
    /// `-EBUSY`: pinned or under I/O; try later.
    Busy,
    /// `-ENOMEM`: the target node had no free memory.
    NoMem,
    /// `-EACCES`: mapped by several processes (MPOL_MF_MOVE leaves it).
    Shared,
    /// Any other negative status.
    Other(i32),
}

impl PageStatus {
    /// Classify a status word returned by the kernel.
    pub fn from_raw(s: i32) -> PageStatus {
        if s >= 0 {
            return PageStatus::Node(s);
        }
        match -s {
            libc::ENOENT => PageStatus::NotPresent,
            libc::EFAULT => PageStatus::Fault,
            libc::EBUSY => PageStatus::Busy,
            libc::ENOMEM => PageStatus::NoMem,
            libc::EACCES => PageStatus::Shared,
            e => PageStatus::Other(e),
        }
    }
}

/// Why a whole move_pages call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallError {
    /// `ESRCH`: the target is gone.
    NoProcess,
    /// `EPERM`/`EACCES`: no ptrace-read access to the target.
    Permission,
    /// `ENODEV`: a target node is not online / has no memory.
    NoNode,
    /// Anything else (errno).
    Other(i32),
}

impl CallError {
    fn from_errno(e: i32) -> CallError {
        match e {
            libc::ESRCH => CallError::NoProcess,
            libc::EPERM | libc::EACCES => CallError::Permission,
            libc::ENODEV => CallError::NoNode,
            e => CallError::Other(e),
        }
    }
}

fn raw(
    pid: i32,
    pages: &[u64],
    nodes: Option<&[i32]>,
    status: &mut [i32],
    flags: i32,
) -> Result<(), CallError> {
    debug_assert_eq!(pages.len(), status.len());
    if pages.is_empty() {
        return Ok(());
    }
    let ptrs: Vec<*mut libc::c_void> = pages.iter().map(|&a| a as *mut libc::c_void).collect();
    let nodes_ptr = nodes.map_or(std::ptr::null(), |n| n.as_ptr());
    // SAFETY: the arrays live for the call and have `pages.len()` elements; the kernel
    // only reads `ptrs`/`nodes` and writes `status`. Nothing of the target is written.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            pid as libc::c_long,
            pages.len() as libc::c_ulong,
            ptrs.as_ptr(),
            nodes_ptr,
            status.as_mut_ptr(),
            flags as libc::c_long,
        )
    };
    if r < 0 {
        return Err(CallError::from_errno(
            std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
        ));
    }
    Ok(())
}

/// Query the node of each page (`nodes = NULL`), in chunks of [`QUERY_CHUNK`].
pub fn query(pid: i32, pages: &[u64]) -> Result<Vec<PageStatus>, CallError> {
    let mut out = Vec::with_capacity(pages.len());
    let mut status = vec![0i32; QUERY_CHUNK.min(pages.len())];
    for chunk in pages.chunks(QUERY_CHUNK) {
        let st = &mut status[..chunk.len()];
        raw(pid, chunk, None, st, 0)?;
        out.extend(st.iter().map(|&s| PageStatus::from_raw(s)));
    }
    Ok(out)
}

/// Move each page to its node with `MPOL_MF_MOVE` in one call; the caller bounds the
/// batch size. Returns each page's status afterwards.
pub fn move_to(pid: i32, pages: &[u64], nodes: &[i32]) -> Result<Vec<PageStatus>, CallError> {
    assert_eq!(pages.len(), nodes.len());
    let mut status = vec![0i32; pages.len()];
    raw(pid, pages, Some(nodes), &mut status, MPOL_MF_MOVE)?;
    Ok(status.into_iter().map(PageStatus::from_raw).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_classify() {
        assert_eq!(PageStatus::from_raw(1), PageStatus::Node(1));
        assert_eq!(PageStatus::from_raw(-libc::ENOENT), PageStatus::NotPresent);
        assert_eq!(PageStatus::from_raw(-libc::EBUSY), PageStatus::Busy);
        assert_eq!(PageStatus::from_raw(-libc::ENOMEM), PageStatus::NoMem);
        assert_eq!(PageStatus::from_raw(-libc::EFAULT), PageStatus::Fault);
        assert_eq!(PageStatus::from_raw(-libc::EACCES), PageStatus::Shared);
        assert_eq!(
            PageStatus::from_raw(-libc::EIO),
            PageStatus::Other(libc::EIO)
        );
    }

    #[test]
    fn query_own_pages_sees_touched_and_untouched() {
        // Two pages of our own memory: one touched, one never touched.
        let len = 2 * 4096;
        // SAFETY: plain anonymous mapping owned by the test, unmapped below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        // SAFETY: inside the mapping.
        unsafe { *(p as *mut u8) = 1 };
        let a = p as u64;
        let st = query(std::process::id() as i32, &[a, a + 4096]).unwrap();
        assert!(matches!(st[0], PageStatus::Node(n) if n >= 0));
        assert_eq!(st[1], PageStatus::NotPresent);
        // A move to the node it is on succeeds in place.
        let PageStatus::Node(n) = st[0] else {
            unreachable!()
        };
        assert_eq!(
            move_to(std::process::id() as i32, &[a], &[n]).unwrap()[0],
            PageStatus::Node(n)
        );
        // SAFETY: the mapping above.
        unsafe { libc::munmap(p, len) };
    }

    #[test]
    fn query_of_a_missing_process_is_esrch() {
        assert_eq!(query(i32::MAX - 7, &[4096]), Err(CallError::NoProcess));
    }
}
