//! Whose pages are tiered: a pid list, a cgroup subtree or a started command, and how
//! the tracked processes follow them.

use super::*;

/// Whose pages are tiered, and how membership is followed.
pub(super) enum Members {
    /// Processes given by pid; they only leave.
    Pids(Vec<i32>),
    /// A cgroup v2 subtree: processes join and leave.
    Cgroup(PathBuf),
    /// The command `tierkit run` started.
    Command,
}

pub(super) struct Running {
    pub(super) members: Members,
    /// The command `tierkit run` started (None for `attach`), its pid and name, and
    /// how it ended once it has.
    pub(super) child: Option<std::process::Child>,
    pub(super) pid: i32,
    pub(super) name: String,
    pub(super) status: Option<std::process::ExitStatus>,
}

impl Running {
    /// Follow `target`; for a command, start it.
    pub(super) fn start(target: Target) -> Result<Running, LiveError> {
        Ok(match target {
            Target::Pids(p) => Running {
                pid: p[0],
                members: Members::Pids(p),
                child: None,
                name: String::new(),
                status: None,
            },
            Target::Cgroup(dir) => Running {
                pid: 0,
                members: Members::Cgroup(dir),
                child: None,
                name: String::new(),
                status: None,
            },
            Target::Command(cmd) => {
                let child = std::process::Command::new(&cmd[0])
                    .args(&cmd[1..])
                    .spawn()
                    .map_err(|e| LiveError::usage(format!("cannot start `{}`: {e}", cmd[0])))?;
                Running {
                    pid: child.id() as i32,
                    members: Members::Command,
                    child: Some(child),
                    name: cmd[0].clone(),
                    status: None,
                }
            }
        })
    }

    /// Why tiering must stop because of the targets, if it must: the command or
    /// every given process exited, or the cgroup was removed.
    pub(super) fn ended(&mut self, mech: &LiveMechanisms) -> Option<&'static str> {
        match &self.members {
            Members::Command => self.exited().then_some("target-exited"),
            Members::Pids(pids) => (mech.all_gone() || !pids.iter().any(|&p| procfs::alive(p)))
                .then_some("target-exited"),
            Members::Cgroup(dir) => {
                (!dir.join("cgroup.procs").exists()).then_some("cgroup-removed")
            }
        }
    }

    /// The processes to tier now (None: the cgroup is gone).
    pub(super) fn current(&mut self) -> Option<Vec<i32>> {
        match &self.members {
            Members::Command => Some(if self.exited() {
                vec![]
            } else {
                vec![self.pid]
            }),
            Members::Pids(p) => Some(p.iter().copied().filter(|&p| procfs::alive(p)).collect()),
            Members::Cgroup(dir) => procfs::cgroup_members(dir).ok(),
        }
    }

    pub(super) fn exited(&mut self) -> bool {
        if self.status.is_some() {
            return true;
        }
        match &mut self.child {
            Some(c) => match c.try_wait() {
                Ok(Some(st)) => {
                    self.status = Some(st);
                    true
                }
                Ok(None) => false,
                Err(_) => true,
            },
            None => false,
        }
    }

    /// For a command tierkit started: wait until it ends, first passing on the
    /// signal that stopped tierkit, and saying what happens to it. Returns its status.
    pub(super) fn wait_for_command(
        &mut self,
        why: &str,
        signal: i32,
    ) -> Option<std::process::ExitStatus> {
        let child = self.child.as_mut()?;
        if self.status.is_none() {
            if signal != 0 {
                // SAFETY: signalling our own child, which we have not reaped.
                unsafe { libc::kill(self.pid, signal) };
                eprintln!(
                    "tierkit: passed signal {signal} on to `{}` (pid {}); waiting for it to exit",
                    self.name, self.pid
                );
            } else {
                eprintln!(
                    "tierkit: {why}; `{}` (pid {}) runs on untiered, waiting for it to exit",
                    self.name, self.pid
                );
            }
            self.status = child.wait().ok();
        }
        self.status
    }
}

/// Keeps the processes tracked in step with the targets: processes that joined are
/// added (after the privilege check a later joiner of a cgroup must pass too), and
/// those that left are removed, with Munmap events for their pages.
pub(super) struct Membership {
    pub(super) caps: caps::CapSet,
    pub(super) my_uid: u32,
    /// Processes of a cgroup left alone: another user's, without CAP_SYS_PTRACE.
    pub(super) refused: Vec<i32>,
}

impl Membership {
    pub(super) fn sync(
        &mut self,
        running: &mut Running,
        mech: &mut LiveMechanisms,
        mut policy: Option<&mut dyn Policy>,
        floor: &mut Nanos,
    ) {
        let Some(now) = running.current() else {
            return;
        };
        for (pid, os) in mech.live_processes() {
            if !now.contains(&os) || !procfs::alive(os) {
                match policy.as_deref_mut() {
                    Some(p) => process_left(mech, p, pid, floor),
                    None => {
                        mech.remove_process(pid);
                    }
                }
            }
        }
        for os in now {
            if self.refused.contains(&os) || mech.live_processes().iter().any(|&(_, o)| o == os) {
                continue;
            }
            let uid = procfs::read_status(os).map(|s| s.uid);
            if let Some(uid) = uid {
                if check_privileges("", false, self.caps, self.my_uid, Some(uid)).is_err() {
                    eprintln!(
                        "tierkit: warning: pid {os} belongs to uid {uid}; without CAP_SYS_PTRACE its pages are left alone"
                    );
                    self.refused.push(os);
                    continue;
                }
            }
            mech.add_process(os);
        }
    }
}

/// Process `pid` left (exited, left the cgroup, or was found gone): stop tracking it
/// and tell the policy its memory is gone.
pub(super) fn process_left(
    mech: &mut LiveMechanisms,
    policy: &mut dyn Policy,
    pid: Pid,
    floor: &mut Nanos,
) {
    let ranges = mech.remove_process(pid);
    *floor = (*floor).max(mech.elapsed());
    mech.set_time(Some(*floor));
    tell_munmaps(mech, policy, pid, &ranges);
    mech.set_time(None);
}

/// Tell the policy that `pid`'s anonymous page ranges `(start, nr_pages)` are gone.
pub(super) fn tell_munmaps(
    mech: &mut LiveMechanisms,
    policy: &mut dyn Policy,
    pid: Pid,
    ranges: &[(Vpn, u64)],
) {
    for &(start_vpn, nr_pages) in ranges {
        policy.on_event(
            &Event::Munmap {
                pid,
                start_vpn,
                nr_pages,
                kind: VmaKind::Anon,
            },
            mech,
        );
    }
}
