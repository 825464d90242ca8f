//! What the daemon does about a move_pages(2) call that failed as a whole: stop, or
//! back off and try again.

use super::*;

/// What the daemon does about a move_pages(2) call that failed as a whole.
#[derive(Debug)]
pub(super) enum MoveFailure {
    /// The target is gone: stop, status 0.
    TargetGone,
    /// Nothing later can succeed (no privilege, no such node): stop with this error.
    Fatal(LiveError),
    /// Anything else (ENOMEM, EAGAIN, EINTR...) may pass: back off and try again, as
    /// the kernel's own migration does.
    Retry(String),
}

pub(super) fn move_failure(e: CallError, pid: i32) -> MoveFailure {
    match e {
        CallError::NoProcess => MoveFailure::TargetGone,
        CallError::Permission => MoveFailure::Fatal(LiveError::privilege(format!(
            "move_pages(2) on pid {pid} was refused (EPERM): moving another user's pages needs CAP_SYS_PTRACE"
        ))),
        CallError::NoNode => MoveFailure::Fatal(LiveError::usage(
            "move_pages(2): a tier's node has no memory online (ENODEV)",
        )),
        CallError::Other(errno) => MoveFailure::Retry(format!(
            "move_pages(2) on pid {pid} failed: {}",
            std::io::Error::from_raw_os_error(errno)
        )),
    }
}

/// Pauses moves after a failed call: 1 s, doubling to at most 30 s while calls keep
/// failing, reset by a call that succeeds. One warning per new kind of failure.
#[derive(Debug, Default)]
pub(super) struct MoveBackoff {
    pub(super) until: Nanos,
    pub(super) delay: Nanos,
    pub(super) last_warning: String,
}

impl MoveBackoff {
    const FIRST: Nanos = NS_PER_SEC;
    const MAX: Nanos = 30 * NS_PER_SEC;

    /// Whether moves may be tried at `now`.
    pub(super) fn ready(&self, now: Nanos) -> bool {
        now >= self.until
    }

    /// A call failed at `now` for `why`; returns the line to print, if it is new.
    pub(super) fn failed(&mut self, now: Nanos, why: String) -> Option<String> {
        self.delay = (self.delay * 2).clamp(Self::FIRST, Self::MAX);
        self.until = now + self.delay;
        let line = format!(
            "warning: {why}; moves paused for {} s and retried",
            self.delay / NS_PER_SEC
        );
        (why != self.last_warning).then(|| {
            self.last_warning = why;
            line
        })
    }

    /// A call succeeded: the next failure starts from the first delay again.
    pub(super) fn succeeded(&mut self) {
        self.delay = 0;
        self.last_warning.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_passing_move_failure_backs_off_instead_of_ending_the_daemon() {
        // Before: any errno but ESRCH/EPERM/ENODEV ended the daemon with status 1.
        for errno in [libc::ENOMEM, libc::EAGAIN, libc::EINTR, libc::EIO] {
            assert!(
                matches!(
                    move_failure(CallError::Other(errno), 7),
                    MoveFailure::Retry(_)
                ),
                "errno {errno}"
            );
        }
        assert!(matches!(
            move_failure(CallError::NoProcess, 7),
            MoveFailure::TargetGone
        ));
        match move_failure(CallError::Permission, 7) {
            MoveFailure::Fatal(e) => assert_eq!(e.code, 3, "{e}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            move_failure(CallError::NoNode, 7),
            MoveFailure::Fatal(_)
        ));
    }

    #[test]
    fn backoff_doubles_to_a_cap_warns_once_per_cause_and_resets() {
        let mut b = MoveBackoff::default();
        let s = NS_PER_SEC;
        assert!(b.ready(0));
        let w = b.failed(0, "move_pages(2) failed: ENOMEM".into());
        assert!(w.is_some_and(|l| l.contains("ENOMEM") && l.contains("1 s")));
        assert!(!b.ready(s - 1) && b.ready(s));
        assert_eq!(b.failed(s, "move_pages(2) failed: ENOMEM".into()), None);
        assert!(!b.ready(3 * s - 1) && b.ready(3 * s));
        for _ in 0..10 {
            b.failed(3 * s, "move_pages(2) failed: ENOMEM".into());
        }
        assert_eq!(b.until, 33 * s, "capped at 30 s");
        assert!(b.failed(3 * s, "another cause".into()).is_some());
        b.succeeded();
        b.failed(100 * s, "again".into());
        assert_eq!(b.until, 101 * s, "back to 1 s after a success");
    }
}
