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
    /// The kernel wrote no status for the page: the call stopped before it (it returns
    /// how many pages it could not move and leaves the rest of the array alone), and a
    /// query afterwards could not say where the page is either.
    Unknown,
}

/// What the status array holds before a call: no status the kernel writes (a node id
/// or a negative errno) is this value, so an unwritten word is never read as node 0.
const UNWRITTEN: i32 = i32::MIN;

impl PageStatus {
    /// Classify a status word returned by the kernel.
    pub fn from_raw(s: i32) -> PageStatus {
        if s == UNWRITTEN {
            return PageStatus::Unknown;
        }
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
    /// Classify a failed call's errno. A process killed but not yet reaped (or still
    /// exiting) exists without an address space, and the kernel answers EINVAL, not
    /// ESRCH: for the daemon that target is gone all the same.
    fn from_errno(e: i32, pid: i32) -> CallError {
        match e {
            libc::ESRCH => CallError::NoProcess,
            libc::EINVAL if super::procfs::memory_gone(pid) => CallError::NoProcess,
            libc::EPERM | libc::EACCES => CallError::Permission,
            libc::ENODEV => CallError::NoNode,
            e => CallError::Other(e),
        }
    }
}

/// One move_pages(2) call. `status` must be filled with [`UNWRITTEN`]. Returns how
/// many pages the kernel reports it could not move (0 for a query).
fn raw(
    pid: i32,
    pages: &[u64],
    nodes: Option<&[i32]>,
    status: &mut [i32],
    flags: i32,
) -> Result<usize, CallError> {
    debug_assert_eq!(pages.len(), status.len());
    if pages.is_empty() {
        return Ok(0);
    }
    let ptrs: Vec<*mut libc::c_void> = pages.iter().map(|&a| a as *mut libc::c_void).collect();
    let nodes_ptr = nodes.map_or(std::ptr::null(), |n| n.as_ptr());
    // SAFETY: the arrays live for the call and have `pages.len()` elements; the kernel
    // only reads `ptrs`/`nodes` and writes `status`. Nothing of the target is written.
    let r = unsafe {
        super::syscalls::move_pages(
            pid,
            pages.len(),
            ptrs.as_ptr(),
            nodes_ptr,
            status.as_mut_ptr(),
            flags,
        )
    }
    .map_err(|errno| CallError::from_errno(errno, pid))?;
    Ok(r as usize)
}

/// Query the node of each page (`nodes = NULL`), in chunks of [`QUERY_CHUNK`].
pub fn query(pid: i32, pages: &[u64]) -> Result<Vec<PageStatus>, CallError> {
    let mut out = Vec::with_capacity(pages.len());
    let mut status = vec![UNWRITTEN; QUERY_CHUNK.min(pages.len())];
    for chunk in pages.chunks(QUERY_CHUNK) {
        let st = &mut status[..chunk.len()];
        st.fill(UNWRITTEN);
        raw(pid, chunk, None, st, 0)?;
        out.extend(st.iter().map(|&s| PageStatus::from_raw(s)));
    }
    Ok(out)
}

/// Move each page to its node with `MPOL_MF_MOVE` in one call; the caller bounds the
/// batch size. Returns each page's status afterwards.
///
/// When the kernel cannot move some pages (pinned ones, for instance) the call returns
/// their count and may leave status words unwritten; those pages are then looked up
/// with a query, so each one reads where it really is, as numactl's tools do.
pub fn move_to(pid: i32, pages: &[u64], nodes: &[i32]) -> Result<Vec<PageStatus>, CallError> {
    assert_eq!(pages.len(), nodes.len());
    let mut status = vec![UNWRITTEN; pages.len()];
    let not_moved = raw(pid, pages, Some(nodes), &mut status, MPOL_MF_MOVE)?;
    resolve_statuses(&mut status, not_moved, |asked| {
        let addrs: Vec<u64> = asked.iter().map(|&i| pages[i]).collect();
        let mut st = vec![UNWRITTEN; addrs.len()];
        raw(pid, &addrs, None, &mut st, 0).ok().map(|_| st)
    });
    Ok(status.into_iter().map(PageStatus::from_raw).collect())
}

/// Settle a move's status array. Words the kernel left unwritten are looked up.
/// When it reports pages it could not move (`not_moved > 0`, pinned pages for
/// instance), the whole batch is looked up instead: the count says the batch did not
/// go as the words alone may suggest, and one query of a failing batch (at most a
/// batch's pages) is cheap. `query` gets the indices and returns their statuses, or
/// nothing when it fails (the words then read [`PageStatus::Unknown`]).
fn resolve_statuses(
    status: &mut [i32],
    not_moved: usize,
    query: impl FnOnce(&[usize]) -> Option<Vec<i32>>,
) {
    let asked: Vec<usize> = if not_moved > 0 {
        status.fill(UNWRITTEN);
        (0..status.len()).collect()
    } else {
        (0..status.len())
            .filter(|&i| status[i] == UNWRITTEN)
            .collect()
    };
    if asked.is_empty() {
        return;
    }
    if let Some(st) = query(&asked) {
        for (&i, s) in asked.iter().zip(st) {
            status[i] = s;
        }
    }
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
    fn unwritten_status_words_are_looked_up_never_read_as_node_0() {
        // A batch to node 1 whose every page moved, but whose status words the kernel
        // left unwritten for two: they are asked, not read as 0 (a node id), which is
        // what the array held before the fix.
        let mut status = vec![1, UNWRITTEN, 1, UNWRITTEN];
        let mut asked = Vec::new();
        resolve_statuses(&mut status, 0, |idx| {
            asked = idx.to_vec();
            Some(vec![1, 1])
        });
        assert_eq!(asked, vec![1, 3]);
        assert!(status.iter().all(|&s| s == 1));
        // A failed lookup leaves them unknown, not on a node.
        let mut status = vec![UNWRITTEN, 1];
        resolve_statuses(&mut status, 0, |_| None);
        assert_eq!(PageStatus::from_raw(status[0]), PageStatus::Unknown);
        assert_eq!(PageStatus::from_raw(status[1]), PageStatus::Node(1));
    }

    #[test]
    fn a_batch_with_pages_not_moved_is_looked_up_whole() {
        // 4 pages to node 0, words reading 0 for all of them, and a return of 2 (two
        // pinned pages stayed on node 1): every page is asked where it is.
        let mut status = vec![0, 0, 0, 0];
        let mut asked = Vec::new();
        resolve_statuses(&mut status, 2, |idx| {
            asked = idx.to_vec();
            Some(vec![1, 0, 1, 0])
        });
        assert_eq!(asked, vec![0, 1, 2, 3]);
        let st: Vec<PageStatus> = status.into_iter().map(PageStatus::from_raw).collect();
        assert_eq!(
            st,
            vec![
                PageStatus::Node(1),
                PageStatus::Node(0),
                PageStatus::Node(1),
                PageStatus::Node(0)
            ]
        );
    }

    #[test]
    fn a_killed_unreaped_target_is_gone_not_an_error() {
        // A child killed and not yet reaped still has a pid but no memory map: the
        // kernel answers EINVAL. Before the fix that was `Other(EINVAL)` and ended
        // the daemon with status 1.
        let mut child = std::process::Command::new("sleep")
            .arg("100")
            .spawn()
            .expect("sleep runs");
        let pid = child.id() as i32;
        // SAFETY: signalling our own child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !super::super::procfs::memory_gone(pid) {
            assert!(std::time::Instant::now() < deadline, "child never died");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(
            super::super::procfs::read_status(pid).is_some(),
            "the zombie is still there"
        );
        assert_eq!(query(pid, &[4096]), Err(CallError::NoProcess));
        assert_eq!(move_to(pid, &[4096], &[0]), Err(CallError::NoProcess));
        child.wait().unwrap();
    }

    #[test]
    fn query_of_a_missing_process_is_esrch() {
        assert_eq!(query(i32::MAX - 7, &[4096]), Err(CallError::NoProcess));
    }
}
