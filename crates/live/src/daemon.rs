//! The live event loop: checks before anything runs, then timers, DAMON snapshots,
//! periodic placement refreshes (VMA diffs, PageAlloc, budget enforcement,
//! LowWatermark), rate-capped migration batches, target-exit detection, and a clean
//! stop (kdamond off and removed) on exit, SIGINT or SIGTERM.

use crate::access::Snapshot;
use crate::config::{self, LiveConfig, Need, Offer};
use crate::mechanisms::{budget_watermarks, LiveMechanisms, TierSetup};
use crate::mover::MoverLimits;
use crate::stats::{self, IntervalStats, Summary};
use crate::sys::damon::{self, Kdamond};
use crate::sys::move_pages::CallError;
use crate::sys::{caps, numa, perf, procfs, sampler};
use crate::LiveError;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tierkit_core::*;
use tierkit_policies::PolicyConfig;

/// What to run and how.
#[derive(Debug, Clone)]
pub struct Options {
    /// The policy and its configuration.
    pub policy: PolicyConfig,
    /// Daemon settings.
    pub live: LiveConfig,
    /// Fast node (default: a node with CPUs in the top memory tier).
    pub fast_node: Option<u32>,
    /// Slow node (default: a CPU-less node in a lower tier).
    pub slow_node: Option<u32>,
    /// Fast budget, bytes (default: the fast node's capacity).
    pub fast_budget_bytes: Option<u64>,
    /// Decide but do not move.
    pub dry_run: bool,
    /// JSON lines, one per interval.
    pub stats_path: Option<PathBuf>,
    /// Final summary.json.
    pub summary_path: Option<PathBuf>,
    /// Prometheus endpoint (loopback only).
    pub prometheus: Option<SocketAddr>,
    /// Detach after this many seconds.
    pub duration_s: Option<f64>,
    /// Also print each interval's line on stdout.
    pub verbose: bool,
}

/// Whom to tier.
#[derive(Debug, Clone)]
pub enum Target {
    /// Running processes, sharing the fast budget; tiering ends when all have exited.
    Pids(Vec<i32>),
    /// The processes of a cgroup v2 directory and its descendants, followed as they
    /// join and leave; tiering ends when the cgroup is removed.
    Cgroup(PathBuf),
    /// A command to start (program and arguments).
    Command(Vec<String>),
}

/// Longest wait for DAMON's first snapshot before giving up.
const WARMUP_LIMIT_NS: u64 = 30 * NS_PER_SEC;

static STOP: AtomicBool = AtomicBool::new(false);
/// The signal that set [`STOP`], forwarded to a command `tierkit run` started.
static STOP_SIGNAL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    STOP_SIGNAL.store(sig, Ordering::SeqCst);
    STOP.store(true, Ordering::SeqCst);
}

fn install_signal_handlers() {
    let h = on_signal as extern "C" fn(libc::c_int);
    // SAFETY: the handler only stores to atomics, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, h as libc::sighandler_t);
        libc::signal(libc::SIGTERM, h as libc::sighandler_t);
        libc::signal(libc::SIGHUP, h as libc::sighandler_t);
    }
}

/// A finished command's status as a shell reports it: its exit code, or 128 plus the
/// number of the signal that killed it.
pub fn shell_status(st: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0))
}

/// How a finished command ended, in words.
pub fn describe_status(st: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (st.code(), st.signal()) {
        (Some(c), _) => format!("exited with status {c}"),
        (None, Some(sig)) => format!("was killed by signal {sig}"),
        _ => "ended".into(),
    }
}

/// Everything checked before the target is touched (or the command started).
pub struct Plan {
    topo: numa::Topology,
    nodes: [u32; 2],
    facility: String,
    needs_damon: bool,
    needs_sampling: bool,
    damon_ops: String,
}

/// Check the machine, the nodes, the policy's facilities and the privileges, in
/// that order. `target_uids` are the uids of the processes given by pid (none for a
/// command we start; a cgroup's members are checked as they join).
pub fn plan(opts: &Options, target_uids: &[u32]) -> Result<Plan, LiveError> {
    let topo = numa::read_topology()
        .map_err(|e| LiveError::usage(format!("cannot read the NUMA topology: {e}")))?;
    let with_mem: Vec<u32> = topo
        .nodes
        .iter()
        .filter(|n| n.mem_total_kb > 0)
        .map(|n| n.id)
        .collect();
    if with_mem.len() < 2 {
        return Err(LiveError::usage(format!(
            "this machine has {} NUMA node(s) with memory ({:?}); live tiering needs a fast and a slow node (see `tierkit doctor`)",
            with_mem.len(),
            with_mem
        )));
    }
    let check = |n: u32, what: &str| {
        if with_mem.contains(&n) {
            Ok(n)
        } else {
            Err(LiveError::usage(format!(
                "--{what}-node {n}: no such node with memory; valid: {with_mem:?}"
            )))
        }
    };
    let fast = match opts.fast_node {
        Some(n) => check(n, "fast")?,
        None => topo.default_fast().ok_or_else(|| {
            LiveError::usage("no node with CPUs and memory to be the fast tier; give --fast-node")
        })?,
    };
    let slow = match opts.slow_node {
        Some(n) => check(n, "slow")?,
        None => topo
            .default_slow(fast)
            .ok_or_else(|| LiveError::usage("no slow node found; give --slow-node"))?,
    };
    if fast == slow {
        return Err(LiveError::usage(format!(
            "--fast-node and --slow-node are both {fast}; they must differ"
        )));
    }
    let name = opts.policy.name();
    let caps = caps::effective();
    // Which DAMON operations the kernel has is known only from a context's
    // `avail_operations`; with no kdamond configured, a privileged user of a DAMON
    // policy creates one for a moment to read it (nobody else is using DAMON then), so
    // a kernel without per-process monitoring is refused here rather than at kdamond
    // start.
    let me = procfs::read_status(std::process::id() as i32).map_or(u32::MAX, |s| s.uid);
    let needs = config::needs(name).unwrap_or(&[]);
    let needs_damon = needs
        .iter()
        .any(|n| matches!(n, Need::AccessedBits | Need::HintFaults));
    let damon_probe = damon::probe_at(
        std::path::Path::new(damon::ADMIN),
        needs_damon && may_write_damon_sysfs(caps, me),
    );
    let perf_probe = perf::probe();
    let offer: Offer = crate::doctor::offer_from(&damon_probe, &perf_probe);
    // An unprivileged user cannot read the DAMON tree at all: judge by its presence.
    let facility = config::runnable(name, offer).map_err(|why| {
        LiveError::usage(format!("policy `{name}` cannot run live here: it {why}"))
    })?;
    check_privileges(name, needs_damon, caps, me, None)?;
    for &uid in target_uids {
        check_privileges(name, needs_damon, caps, me, Some(uid))?;
    }
    if needs_damon {
        damon::can_start(admin_path(), registry_path()).map_err(LiveError::usage)?;
    }
    let damon_ops = match opts.live.damon_ops.as_str() {
        "auto"
            if damon_probe
                .avail_operations
                .as_ref()
                .is_some_and(|o| !o.iter().any(|x| x == "fvaddr")) =>
        {
            "vaddr"
        }
        "auto" => "fvaddr",
        o => o,
    }
    .to_string();
    Ok(Plan {
        topo,
        nodes: [fast, slow],
        facility,
        needs_damon,
        needs_sampling: needs.contains(&Need::Sampling),
        damon_ops,
    })
}

/// Whether this user may write DAMON sysfs: its files are root-owned with mode 0600,
/// so what counts is being root or holding CAP_DAC_OVERRIDE (DAMON checks no
/// capability of its own).
pub fn may_write_damon_sysfs(caps: caps::CapSet, uid: u32) -> bool {
    uid == 0 || caps.has(caps::CAP_DAC_OVERRIDE)
}

/// The privilege checks, before anything is touched: DAMON sysfs needs root or
/// CAP_DAC_OVERRIDE; another user's process needs CAP_SYS_PTRACE (move_pages(2) checks
/// ptrace-read access; CAP_SYS_NICE matters only for MPOL_MF_MOVE_ALL).
pub fn check_privileges(
    policy: &str,
    needs_damon: bool,
    caps: caps::CapSet,
    my_uid: u32,
    target_uid: Option<u32>,
) -> Result<(), LiveError> {
    if needs_damon && !may_write_damon_sysfs(caps, my_uid) {
        return Err(LiveError::privilege(format!(
            "policy `{policy}` reads accessed bits through DAMON sysfs, whose files are root's with mode 0600: run tierkit as root or give it CAP_DAC_OVERRIDE"
        )));
    }
    if let Some(uid) = target_uid {
        if uid != my_uid && !caps.has(caps::CAP_SYS_PTRACE) {
            return Err(LiveError::privilege(format!(
                "the target belongs to uid {uid} and tierkit runs as uid {my_uid}: moving another user's pages with move_pages(2) needs CAP_SYS_PTRACE (ptrace-read access; CAP_SYS_NICE is needed only for MPOL_MF_MOVE_ALL, which tierkit does not use)"
            )));
        }
    }
    Ok(())
}

fn tier_setup(plan: &Plan, budget_bytes: Option<u64>) -> Result<TierSetup, LiveError> {
    let node = |id: u32| plan.topo.node(id).expect("checked in plan");
    let pages = |kb: u64| kb * 1024 / PAGE_SIZE;
    let (f, s) = (node(plan.nodes[0]), node(plan.nodes[1]));
    let (f_total, s_total) = (pages(f.mem_total_kb), pages(s.mem_total_kb));
    let budget = match budget_bytes {
        Some(b) if b < PAGE_SIZE => {
            return Err(LiveError::usage(format!(
                "--fast-budget {b} bytes is below one page ({PAGE_SIZE} bytes)"
            )))
        }
        Some(b) => Some((b / PAGE_SIZE).min(f_total)),
        None => None,
    };
    let info = |id: u8, n: &numa::Node, cap: u64, default_ns: f64, default_bw: f64| {
        let lat = n
            .hmat
            .map(|h| h.read_latency_ns as f64)
            .filter(|&x| x > 0.0);
        let wlat = n
            .hmat
            .map(|h| h.write_latency_ns as f64)
            .filter(|&x| x > 0.0);
        let bw = n
            .hmat
            .map(|h| h.read_bandwidth_mbps as f64 * 1e6)
            .filter(|&x| x > 0.0);
        TierInfo {
            id: TierId(id),
            name: format!("node{}", n.id),
            capacity_pages: cap,
            load_ns: lat.unwrap_or(default_ns),
            store_ns: wlat.or(lat).unwrap_or(default_ns),
            bandwidth_bytes_per_s: bw.unwrap_or(default_bw),
        }
    };
    let dist = f
        .distances
        .get(s.id as usize)
        .copied()
        .unwrap_or(20)
        .max(10) as f64;
    let f_cap = budget.unwrap_or(f_total);
    let tiers = vec![
        info(0, f, f_cap, 100.0, 20e9),
        info(1, s, s_total, 10.0 * dist, 5e9),
    ];
    let node_wm = |n: &numa::Node, total: u64| {
        n.watermarks
            .map(|w| Watermarks {
                min: w.min,
                low: w.low,
                high: w.high,
            })
            .unwrap_or_else(|| budget_watermarks(pages(n.mem_total_kb), total))
    };
    let total = f_total + s_total;
    let fast_wm = match budget {
        Some(b) => budget_watermarks(b, b + s_total),
        None => node_wm(f, total),
    };
    Ok(TierSetup {
        nodes: plan.nodes,
        tiers,
        budget_pages: budget,
        watermarks: [fast_wm, node_wm(s, total)],
    })
}

/// Merge ranges until at most `max` remain, closing the smallest gaps first.
pub fn coalesce(ranges: &[(u64, u64)], max: usize) -> Vec<(u64, u64)> {
    let mut v = ranges.to_vec();
    let max = max.max(1);
    while v.len() > max {
        let i = (0..v.len() - 1)
            .min_by_key(|&i| v[i + 1].0 - v[i].1)
            .expect("len > 1");
        v[i].1 = v[i + 1].1;
        v.remove(i + 1);
    }
    v
}

/// DAMON targets handed from the loop to the observer thread.
type SharedTargets = Arc<Mutex<Option<Vec<damon::Target>>>>;

enum ObsMsg {
    /// One DAMON read: a snapshot per monitored process, by OS pid.
    Snap(Vec<(i32, Snapshot)>),
    /// The kdamond had stopped while a target lived and was started again.
    Restarted,
    Stopped(String),
}

/// Consecutive failed snapshot reads retried, and kdamond restarts allowed, per run.
const OBSERVER_RETRIES: u32 = 3;

fn admin_path() -> &'static std::path::Path {
    std::path::Path::new(damon::ADMIN)
}

fn registry_path() -> &'static std::path::Path {
    std::path::Path::new(damon::REGISTRY)
}

fn pids_of(t: &[damon::Target]) -> Vec<i32> {
    t.iter().map(|t| t.pid).collect()
}

struct Observer {
    stop: Arc<AtomicBool>,
    targets: SharedTargets,
    last_sent: Vec<damon::Target>,
    rx: Receiver<ObsMsg>,
    handle: Option<std::thread::JoinHandle<()>>,
    fvaddr: bool,
    /// When it started, ns since attach.
    started_ns: Nanos,
}

impl Observer {
    fn start(
        targets: Vec<damon::Target>,
        ops: &str,
        live: &LiveConfig,
        clock: Instant,
    ) -> Result<Observer, LiveError> {
        let attrs = damon::Attrs {
            sample_us: live.damon_sample_us,
            aggr_us: live.damon_aggr_ms * 1000,
            update_us: (live.damon_aggr_ms * 1000 * 5).max(1_000_000),
            min_nr_regions: live.damon_min_nr_regions,
            max_nr_regions: live.damon_max_nr_regions,
        };
        let kd = Kdamond::start(admin_path(), registry_path(), &targets, ops, &attrs).map_err(|e| {
            match e.kind() {
                std::io::ErrorKind::PermissionDenied => LiveError::privilege(format!(
                    "DAMON sysfs refused a write ({e}); run tierkit as root or give it CAP_DAC_OVERRIDE"
                )),
                std::io::ErrorKind::Unsupported => LiveError::usage(e.to_string()),
                _ => LiveError::runtime(format!(
                    "cannot start a DAMON kdamond with {ops} operations: {e}"
                )),
            }
        })?;
        let stop = Arc::new(AtomicBool::new(false));
        let shared: SharedTargets = Arc::default();
        let (tx, rx) = mpsc::channel();
        let (st, sh) = (stop.clone(), shared.clone());
        let (aggr_ns, sample_ns) = (attrs.aggr_us * 1000, attrs.sample_us * 1000);
        let thread_ops = ops.to_string();
        let last_sent = targets.clone();
        let handle = std::thread::spawn(move || {
            let mut kd = kd;
            let mut targets = targets;
            let mut failures = 0u32;
            let mut restarts = 0u32;
            while !st.load(Ordering::SeqCst) {
                let mut result = Ok(());
                if let Some(t) = sh.lock().ok().and_then(|mut g| g.take()) {
                    // The same processes: new fvaddr ranges are committed to the
                    // running kdamond; others: it is reconfigured in place.
                    result = if pids_of(&t) == pids_of(&targets) {
                        kd.set_ranges(&t)
                            .map_err(|e| format!("DAMON commit failed: {e}"))
                    } else {
                        kd.retarget(&t, &thread_ops, &attrs)
                            .map_err(|e| format!("DAMON could not follow the processes: {e}"))
                    };
                    targets = t;
                }
                let result = result.and_then(|()| {
                    kd.snapshot(targets.len())
                        .map_err(|e| format!("DAMON snapshot failed: {e}"))
                });
                let why = match result {
                    Ok(per_target) => {
                        failures = 0;
                        let t = clock.elapsed().as_nanos() as Nanos;
                        let snaps = targets
                            .iter()
                            .zip(&per_target)
                            .map(|(tg, regions)| {
                                (tg.pid, Snapshot::from_damon(t, aggr_ns, sample_ns, regions))
                            })
                            .collect();
                        if tx.send(ObsMsg::Snap(snaps)).is_err() {
                            break;
                        }
                        continue;
                    }
                    Err(why) => why,
                };
                // A read can race with the kernel regenerating tried_regions, and a
                // kdamond can stop while a target lives (the e2e harness saw one stop
                // 24 s into a run, after a region commit): retry a read a few times,
                // and restart a stopped kdamond from a fresh configuration, a bounded
                // number of times, before giving up.
                let target_alive = targets.iter().any(|t| procfs::alive(t.pid));
                // Only a kdamond that reads "off" has stopped; one that is on, or
                // whose state cannot be read just now, gets the retries.
                let state = kd.state();
                if state != Some(false) && failures < OBSERVER_RETRIES {
                    failures += 1;
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
                if state == Some(false) && target_alive && restarts < OBSERVER_RETRIES {
                    // Restarted in place: it stays this daemon's kdamond, whatever
                    // other kdamonds run meanwhile. Targets that exited are left out.
                    targets.retain(|t| procfs::alive(t.pid));
                    match kd.restart(&targets, &thread_ops, &attrs) {
                        Ok(()) => {
                            restarts += 1;
                            failures = 0;
                            let _ = tx.send(ObsMsg::Restarted);
                            continue;
                        }
                        Err(e) => {
                            let _ = tx.send(ObsMsg::Stopped(format!(
                                "the kdamond stopped and could not be restarted: {e}"
                            )));
                            break;
                        }
                    }
                }
                let why = if kd.running() || target_alive {
                    why
                } else {
                    "the kdamond stopped (its targets exited?)".into()
                };
                let _ = tx.send(ObsMsg::Stopped(why));
                break;
            }
            kd.stop();
        });
        Ok(Observer {
            stop,
            targets: shared,
            last_sent,
            rx,
            handle: Some(handle),
            fvaddr: ops == "fvaddr",
            started_ns: clock.elapsed().as_nanos() as Nanos,
        })
    }

    /// Hand the thread a new set of targets when it differs from the last one in a
    /// way the kdamond sees (vaddr: the processes; fvaddr: their ranges too).
    fn update_targets(&mut self, t: Vec<damon::Target>) {
        let changed = if self.fvaddr {
            t != self.last_sent
        } else {
            pids_of(&t) != pids_of(&self.last_sent)
        };
        if changed && !t.is_empty() {
            if let Ok(mut g) = self.targets.lock() {
                *g = Some(t.clone());
            }
            self.last_sent = t;
        }
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Each process's private anonymous byte ranges `[start, end)`, by OS pid.
type AnonRanges = Vec<(i32, Vec<(u64, u64)>)>;

/// The DAMON targets of the processes tracked: each with its anonymous ranges
/// (coalesced so all of them together stay within half of `max_nr_regions`).
fn damon_targets(ranges: &AnonRanges, max_nr_regions: u32) -> Vec<damon::Target> {
    let per = ((max_nr_regions / 2) as usize / ranges.len().max(1)).max(1);
    ranges
        .iter()
        .filter(|(_, r)| !r.is_empty())
        .map(|(pid, r)| damon::Target {
            pid: *pid,
            ranges: coalesce(r, per),
        })
        .collect()
}

/// Whose pages are tiered, and how membership is followed.
enum Members {
    /// Processes given by pid; they only leave.
    Pids(Vec<i32>),
    /// A cgroup v2 subtree: processes join and leave.
    Cgroup(PathBuf),
    /// The command `tierkit run` started.
    Command,
}

struct Running {
    members: Members,
    /// The command `tierkit run` started (None for `attach`), its pid and name, and
    /// how it ended once it has.
    child: Option<std::process::Child>,
    pid: i32,
    name: String,
    status: Option<std::process::ExitStatus>,
}

impl Running {
    /// Follow `target`; for a command, start it.
    fn start(target: Target) -> Result<Running, LiveError> {
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
    fn ended(&mut self, mech: &LiveMechanisms) -> Option<&'static str> {
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
    fn current(&mut self) -> Option<Vec<i32>> {
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

    fn exited(&mut self) -> bool {
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
    fn wait_for_command(&mut self, why: &str, signal: i32) -> Option<std::process::ExitStatus> {
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

/// Where the kernel lists its PMUs and their events.
const PMU_DEVICES: &str = "/sys/bus/event_source/devices";
/// Sample period of an event whose policy set none, accesses (a prime, so samples do
/// not beat with loop strides).
const DEFAULT_SAMPLE_PERIOD: u64 = 10_007;

/// Open the PEBS/IBS sampler on the target with the periods the policy set.
fn open_sampler(
    pid: i32,
    live: &LiveConfig,
    periods: [u64; 2],
) -> Result<sampler::Sampler, LiveError> {
    let events = sampler::discover(std::path::Path::new(PMU_DEVICES), live.sample_ldlat)
        .map_err(|e| LiveError::usage(format!("memory-access sampling: {e}")))?;
    let names: Vec<&str> = events.iter().map(|e| e.name.as_str()).collect();
    let names = names.join(", ");
    sampler::Sampler::open(pid, events, periods).map_err(|e| match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => LiveError::privilege(format!(
            "perf_event_open(2) of {names} on pid {pid} was refused: sampling needs CAP_PERFMON (or CAP_SYS_ADMIN), or perf_event_paranoid <= 1 for a process of your own"
        )),
        _ => LiveError::runtime(format!("cannot open {names} on pid {pid}: {e}")),
    })
}

/// What the daemon does about a move_pages(2) call that failed as a whole.
#[derive(Debug)]
enum MoveFailure {
    /// The target is gone: stop, status 0.
    TargetGone,
    /// Nothing later can succeed (no privilege, no such node): stop with this error.
    Fatal(LiveError),
    /// Anything else (ENOMEM, EAGAIN, EINTR...) may pass: back off and try again, as
    /// the kernel's own migration does.
    Retry(String),
}

fn move_failure(e: CallError, pid: i32) -> MoveFailure {
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
struct MoveBackoff {
    until: Nanos,
    delay: Nanos,
    last_warning: String,
}

impl MoveBackoff {
    const FIRST: Nanos = NS_PER_SEC;
    const MAX: Nanos = 30 * NS_PER_SEC;

    /// Whether moves may be tried at `now`.
    fn ready(&self, now: Nanos) -> bool {
        now >= self.until
    }

    /// A call failed at `now` for `why`; returns the line to print, if it is new.
    fn failed(&mut self, now: Nanos, why: String) -> Option<String> {
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
    fn succeeded(&mut self) {
        self.delay = 0;
        self.last_warning.clear();
    }
}

/// Attach to (or start) the targets and tier them until they exit (a cgroup: until
/// it is removed), `--duration-s` passes, or a signal arrives.
pub fn run(opts: &Options, target: Target) -> Result<Summary, LiveError> {
    let target_uids = check_target(&target)?;
    let plan = plan(opts, &target_uids)?;
    let setup = tier_setup(&plan, opts.fast_budget_bytes)?;
    if procfs_numa_balancing_on() {
        eprintln!("tierkit: warning: kernel NUMA balancing is on and migrates pages too; set /proc/sys/kernel/numa_balancing to 0 for the policy alone");
    }
    let stats_file = match &opts.stats_path {
        Some(p) => Some(
            std::fs::File::create(p)
                .map_err(|e| LiveError::usage(format!("--stats {}: {e}", p.display())))?,
        ),
        None => None,
    };
    let prom = match opts.prometheus {
        Some(a) => {
            let body: Arc<Mutex<String>> = Arc::default();
            stats::serve_prometheus(a, body.clone())
                .map_err(|e| LiveError::usage(format!("--prometheus {a}: {e}")))?;
            Some(body)
        }
        None => None,
    };
    // Everything that can fail is done before a command is started, so no error
    // leaves it running unattended; a signal from now on stops tiering cleanly (the
    // command starts with the default dispositions: exec resets handlers).
    install_signal_handlers();
    let policy = opts
        .policy
        .try_build(&BuildContext::default())
        .map_err(|e| LiveError::usage(format!("policy `{}`: {e}", opts.policy.name())))?;
    let running = Running::start(target)?;
    let live = &opts.live;
    let limits = MoverLimits {
        batch_pages: live.batch_pages,
        rate_pages_per_s: live.rate_pages_per_s,
        max_queue_pages: ((live.rate_pages_per_s * live.queue_s) as usize).max(live.batch_pages),
    };
    let me = procfs::read_status(std::process::id() as i32).map_or(u32::MAX, |s| s.uid);
    let mut d = Daemon {
        opts,
        mech: LiveMechanisms::new(setup, limits, live.seed, opts.dry_run),
        members: Membership {
            caps: caps::effective(),
            my_uid: me,
            refused: Vec::new(),
        },
        wants_alloc: policy.requirements().page_alloc_events,
        policy,
        running,
        cpu0: stats::process_cpu_ns(),
        deadline: opts.duration_s.map(|s| (s * 1e9) as Nanos),
        stats_file,
        prom,
        observer: None,
        inbox: Vec::new(),
        floor: 0,
        next_refresh: 0,
        last_line: IntervalStats::default(),
        // A policy that reads accessed bits starts only once DAMON has delivered its
        // first snapshot: before it, every page would read "not accessed" and a first
        // reclaim pass would demote the hot set as readily as the cold.
        started: !plan.needs_damon,
        first_snap: None,
        backoff: MoveBackoff::default(),
        samplers: Vec::new(),
        periods: [DEFAULT_SAMPLE_PERIOD; 2],
        plan,
    };
    d.members
        .sync(&mut d.running, &mut d.mech, None, &mut d.floor);
    if d.started {
        d.policy.init(&mut d.mech);
    }
    let end = d.run_loop();
    d.finish(end)
}

/// The checks of the targets before anything else; returns the uids of the processes
/// given by pid.
fn check_target(target: &Target) -> Result<Vec<u32>, LiveError> {
    let mut uids = Vec::new();
    match target {
        Target::Pids(pids) => {
            if pids.is_empty() {
                return Err(LiveError::usage("give at least one process id"));
            }
            for p in pids {
                let st = procfs::read_status(*p)
                    .filter(|s| s.state != 'Z' && s.state != 'X')
                    .ok_or_else(|| {
                        LiveError::usage(format!(
                            "no process with pid {p} (give the pid of a running process)"
                        ))
                    })?;
                uids.push(st.uid);
            }
        }
        Target::Cgroup(dir) => {
            // Its members are checked as they join: another user's process without
            // CAP_SYS_PTRACE is left alone with a warning, not an error.
            procfs::cgroup_members(dir).map_err(|e| {
                LiveError::usage(format!(
                    "--cgroup {}: not a cgroup v2 directory ({e}); give a directory under /sys/fs/cgroup",
                    dir.display()
                ))
            })?;
        }
        Target::Command(_) => {}
    }
    Ok(uids)
}

/// Why the daemon's loop ended: a reason (`signal`, `duration`, `target-exited`,
/// `cgroup-removed`), or an error.
enum End {
    Reason(&'static str),
    Failed(LiveError),
}

impl From<LiveError> for End {
    fn from(e: LiveError) -> End {
        End::Failed(e)
    }
}

/// The daemon's state between the steps of its loop.
struct Daemon<'a> {
    opts: &'a Options,
    plan: Plan,
    policy: Box<dyn Policy>,
    wants_alloc: bool,
    mech: LiveMechanisms,
    running: Running,
    members: Membership,
    cpu0: u64,
    deadline: Option<Nanos>,
    stats_file: Option<std::fs::File>,
    prom: Option<Arc<Mutex<String>>>,
    observer: Option<Observer>,
    inbox: Vec<ObsMsg>,
    /// Event times never go backwards: the latest time handed to the policy.
    floor: Nanos,
    next_refresh: Nanos,
    last_line: IntervalStats,
    started: bool,
    first_snap: Option<Nanos>,
    backoff: MoveBackoff,
    samplers: Vec<(Pid, sampler::Sampler)>,
    periods: [u64; 2],
}

impl Daemon<'_> {
    /// The event loop, as DAMON's `kdamond_fn` reads: one named step after another
    /// until one of them says why to stop.
    fn run_loop(&mut self) -> End {
        loop {
            let step = (|| {
                self.check_stop()?;
                self.collect_observer();
                self.sample()?;
                if !self.started {
                    self.warm_up()?;
                }
                self.handle_snapshots()?;
                if !self.started {
                    self.wait(Duration::from_millis(100));
                    return Ok(());
                }
                self.refresh_if_due()?;
                self.fire_timers();
                self.move_batch()?;
                self.sleep();
                Ok(())
            })();
            if let Err(end) = step {
                return end;
            }
        }
    }

    /// A signal, `--duration-s`, or the targets gone.
    fn check_stop(&mut self) -> Result<(), End> {
        if STOP.load(Ordering::SeqCst) {
            return Err(End::Reason("signal"));
        }
        if self.deadline.is_some_and(|d| self.mech.elapsed() >= d) {
            return Err(End::Reason("duration"));
        }
        match self.running.ended(&self.mech) {
            Some(why) => Err(End::Reason(why)),
            None => Ok(()),
        }
    }

    /// A start failure of the observer: the targets' end if that is what it was.
    fn start_failed(&mut self, e: LiveError) -> End {
        match self.running.ended(&self.mech) {
            Some(why) => End::Reason(why),
            None => End::Failed(e),
        }
    }

    fn collect_observer(&mut self) {
        if let Some(o) = &self.observer {
            self.inbox.extend(o.rx.try_iter());
        }
    }

    /// PEBS/IBS: open the events of processes that have none, hand on the periods the
    /// policy set (MEMTIS adjusts them to its CPU budget), and deliver the samples
    /// since the last pass as `Sample` events.
    fn sample(&mut self) -> Result<(), End> {
        if self.plan.needs_sampling && self.started {
            if let Some(p) = self.mech.take_sample_periods() {
                for (kind, i) in [(SampleKind::LlcLoadMiss, 0), (SampleKind::Store, 1)] {
                    if p[i] > 0 {
                        self.periods[i] = p[i];
                        for (_, s) in &mut self.samplers {
                            s.set_period(kind, p[i]);
                        }
                    }
                }
            }
            let mech = &self.mech;
            self.samplers.retain(|(pid, _)| mech.is_live(*pid));
            for (pid, os_pid) in self.mech.live_processes() {
                if self.samplers.iter().any(|(p, _)| *p == pid) {
                    continue;
                }
                match open_sampler(os_pid, &self.opts.live, self.periods) {
                    Ok(s) => self.samplers.push((pid, s)),
                    Err(_) if !procfs::alive(os_pid) => {}
                    Err(e) => return Err(End::Failed(e)),
                }
            }
        }
        for (pid, s) in &mut self.samplers {
            let samples = s.poll();
            if samples.is_empty() {
                continue;
            }
            self.floor = self.floor.max(self.mech.elapsed());
            self.mech.set_time(Some(self.floor));
            for raw in &samples {
                if let Some(ev) = self.mech.sample_event(*pid, raw) {
                    self.policy.on_event(&Event::Sample(ev), &mut self.mech);
                }
            }
            self.mech.set_time(None);
        }
        self.mech.counters.samples_lost = self.samplers.iter().map(|(_, s)| s.lost).sum();
        Ok(())
    }

    /// Before the policy starts: snapshots only feed the access view (nothing is
    /// armed); the policy starts `warmup_ms` after the first; the kdamond starts as
    /// soon as a target has anonymous memory.
    fn warm_up(&mut self) -> Result<(), End> {
        let live = &self.opts.live;
        let now = self.mech.elapsed();
        let mut rest = Vec::new();
        for m in std::mem::take(&mut self.inbox) {
            match m {
                ObsMsg::Snap(s) => {
                    let t = s.first().map_or(now, |(_, x)| x.end_ns);
                    self.first_snap.get_or_insert(t);
                    let snaps = by_policy_pid(&self.mech, s);
                    self.mech.add_snapshots(snaps);
                }
                other => rest.push(other),
            }
        }
        self.inbox = rest;
        if self
            .first_snap
            .is_some_and(|t| now >= t + live.warmup_ms * NS_PER_MS)
        {
            self.started = true;
            self.policy.init(&mut self.mech);
            self.next_refresh = now;
        } else if self.first_snap.is_none()
            && self
                .observer
                .as_ref()
                .is_some_and(|o| now > o.started_ns + WARMUP_LIMIT_NS + live.warmup_ms * NS_PER_MS)
        {
            return Err(End::Failed(LiveError::runtime(format!(
                "no DAMON snapshot within {} s of starting the kdamond",
                WARMUP_LIMIT_NS / NS_PER_SEC
            ))));
        } else if self.observer.is_none() {
            self.members
                .sync(&mut self.running, &mut self.mech, None, &mut self.floor);
            let ranges: AnonRanges = self
                .mech
                .live_processes()
                .into_iter()
                .filter_map(|(_, os)| {
                    procfs::read_maps(os)
                        .ok()
                        .map(|m| (os, procfs::anon_ranges(&m)))
                })
                .collect();
            self.start_observer(damon_targets(&ranges, live.damon_max_nr_regions))?;
        }
        Ok(())
    }

    /// Start the kdamond for `targets` (nothing when there are none).
    fn start_observer(&mut self, targets: Vec<damon::Target>) -> Result<(), End> {
        if targets.is_empty() {
            return Ok(());
        }
        let clock = mech_clock(&self.mech);
        match Observer::start(targets, &self.plan.damon_ops, &self.opts.live, clock) {
            Ok(o) => {
                self.observer = Some(o);
                Ok(())
            }
            Err(e) => Err(self.start_failed(e)),
        }
    }

    /// DAMON snapshots and the hinting faults they reveal; a stopped monitor (handled
    /// even before the start).
    fn handle_snapshots(&mut self) -> Result<(), End> {
        let mut stopped = None;
        for msg in std::mem::take(&mut self.inbox) {
            match msg {
                ObsMsg::Snap(s) => {
                    let snaps = by_policy_pid(&self.mech, s);
                    for (t, pid, vpn, tier, armed_at) in self.mech.add_snapshots(snaps) {
                        self.floor = self.floor.max(t);
                        let f = HintFault {
                            pid,
                            vpn,
                            tier,
                            huge: false,
                            write: false,
                            armed_at,
                        };
                        self.mech.set_time(Some(self.floor));
                        self.policy.on_event(&Event::HintFault(f), &mut self.mech);
                    }
                    self.mech.set_time(None);
                }
                ObsMsg::Restarted => self.mech.counters.damon_restarts += 1,
                ObsMsg::Stopped(why) => stopped = Some(why),
            }
        }
        let Some(why) = stopped else {
            return Ok(());
        };
        if let Some(r) = self.running.ended(&self.mech) {
            return Err(End::Reason(r));
        }
        let any_alive = self
            .mech
            .live_processes()
            .iter()
            .any(|&(_, os)| procfs::alive(os));
        if any_alive {
            return Err(End::Failed(LiveError::runtime(format!(
                "accessed-bit monitor stopped: {why}"
            ))));
        }
        // Every process it watched left (a cgroup that emptied): a new kdamond starts
        // once processes with memory are back.
        if let Some(mut o) = self.observer.take() {
            o.shutdown();
        }
        Ok(())
    }

    /// Once per interval: membership, placement, the budget, the watermark, the
    /// kdamond's targets, new threads' sampling events, and a stats line.
    fn refresh_if_due(&mut self) -> Result<(), End> {
        let now = self.mech.elapsed();
        if now < self.next_refresh {
            return Ok(());
        }
        let live = &self.opts.live;
        let per_interval =
            (live.rate_pages_per_s * live.interval_ms / 1000).max(live.batch_pages as u64);
        self.members.sync(
            &mut self.running,
            &mut self.mech,
            Some(self.policy.as_mut()),
            &mut self.floor,
        );
        let ranges = refresh(
            &mut self.mech,
            self.policy.as_mut(),
            self.wants_alloc,
            &mut self.floor,
            self.plan.needs_damon,
            per_interval,
        )?;
        if self.plan.needs_damon {
            let t = damon_targets(&ranges, live.damon_max_nr_regions);
            match &mut self.observer {
                Some(o) => o.update_targets(t),
                None => self.start_observer(t)?,
            }
        }
        for (_, s) in &mut self.samplers {
            // Threads started since the last refresh get their events too.
            let _ = s.rescan();
        }
        let interval_ns = live.interval_ms * NS_PER_MS;
        self.next_refresh = (self.next_refresh + interval_ns).max(now + interval_ns / 2);
        self.last_line = line(&self.mech, self.cpu0);
        self.emit_line(&self.last_line.clone());
        Ok(())
    }

    fn emit_line(&mut self, l: &IntervalStats) {
        emit(
            l,
            &mut self.stats_file,
            self.opts.verbose,
            self.prom.as_ref(),
            self.opts.policy.name(),
        );
    }

    /// Timers due, at most 10 000 per pass.
    fn fire_timers(&mut self) {
        for _ in 0..10_000 {
            let Some((at, id)) = self.mech.pop_due_timer(self.mech.elapsed()) else {
                break;
            };
            self.floor = self.floor.max(at);
            self.mech.set_time(Some(self.floor));
            self.policy.on_event(&Event::Timer { id }, &mut self.mech);
        }
        self.mech.set_time(None);
    }

    /// One migration batch if the rate cap allows and no failure is being waited out.
    fn move_batch(&mut self) -> Result<(), End> {
        let now = self.mech.elapsed();
        if !self.backoff.ready(now) {
            return Ok(());
        }
        let flush = self.mech.flush_moves(now);
        let mut retry = None;
        for (pid, e) in flush.failed {
            let os_pid = self.mech.os_pid(pid).unwrap_or(0);
            match move_failure(e, os_pid) {
                // The mechanisms stopped tracking it; its pages leave the policy.
                MoveFailure::TargetGone => {
                    process_left(&mut self.mech, self.policy.as_mut(), pid, &mut self.floor)
                }
                MoveFailure::Fatal(err) => return Err(End::Failed(err)),
                MoveFailure::Retry(why) => retry = Some(why),
            }
        }
        if retry.is_none() && flush.nomem_pages > 0 {
            // Pages the node had no room for: wait before trying them again, as for a
            // call that failed with ENOMEM.
            retry = Some(format!(
                "{} page(s) could not move: the target node is full (ENOMEM)",
                flush.nomem_pages
            ));
        }
        match retry {
            Some(why) => {
                self.mech.counters.move_call_failures += 1;
                if let Some(line) = self.backoff.failed(now, why) {
                    eprintln!("tierkit: {line}");
                }
            }
            None if flush.pages > 0 => self.backoff.succeeded(),
            None => {}
        }
        Ok(())
    }

    /// Sleep until the next thing to do: a refresh, a timer, a token for the mover,
    /// the deadline, or a snapshot arriving (at most 100 ms).
    fn sleep(&mut self) {
        let now = self.mech.elapsed();
        let mut wake = self.next_refresh.min(now + 100 * NS_PER_MS);
        if let Some(t) = self.mech.next_timer() {
            wake = wake.min(t);
        }
        if let Some(t) = self.mech.mover.next_ready_ns(now) {
            wake = wake.min(t);
        }
        if let Some(d) = self.deadline {
            wake = wake.min(d);
        }
        self.wait(Duration::from_nanos(wake.saturating_sub(now)));
    }

    /// Wait up to `dur` for the observer's next message.
    fn wait(&mut self, dur: Duration) {
        if dur.is_zero() {
            return;
        }
        match &self.observer {
            Some(o) => match o.rx.recv_timeout(dur) {
                Ok(m) => self.inbox.push(m),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => std::thread::sleep(dur),
            },
            None => std::thread::sleep(dur),
        }
    }

    /// Stop the observer, let a command `run` started end, write the last line and
    /// the summary.
    fn finish(mut self, end: End) -> Result<Summary, LiveError> {
        if let Some(mut o) = self.observer.take() {
            o.shutdown();
        }
        let (end_reason, failure) = match end {
            End::Reason(r) => (r, None),
            End::Failed(e) => ("error", Some(e)),
        };
        let wall_ns = self.mech.elapsed();
        // A wrapper ends with its command: tiering stops first (the daemon's work is an
        // optimisation; a failure of it never kills the command).
        let why = match (&failure, end_reason) {
            (Some(e), _) => e.msg.clone(),
            (None, "duration") => "tiering stopped after --duration-s".to_string(),
            (None, r) => format!("tiering stopped ({r})"),
        };
        let signal = if end_reason == "signal" {
            STOP_SIGNAL.load(Ordering::SeqCst)
        } else {
            0
        };
        let command_status = self.running.wait_for_command(&why, signal);
        let mut last = line(&self.mech, self.cpu0);
        last.damon_regions = self.last_line.damon_regions;
        self.emit_line(&last);
        let c = &self.mech.counters;
        let pids: Vec<i32> = self.mech.process_stats().iter().map(|p| p.pid).collect();
        let opts = self.opts;
        let summary = Summary {
            policy: opts.policy.name().to_string(),
            policy_config: serde_json::to_value(&opts.policy).unwrap_or_default(),
            live_config: serde_json::to_value(&opts.live).unwrap_or_default(),
            facility: self.plan.facility.clone(),
            pid: pids.first().copied().unwrap_or(self.running.pid),
            pids,
            refused_pids: self.members.refused.clone(),
            nodes: self.plan.nodes,
            dry_run: opts.dry_run,
            end_reason: end_reason.to_string(),
            command_status: command_status.map(shell_status),
            command_ended: command_status.map(describe_status),
            duration_s: wall_ns as f64 / 1e9,
            daemon_cpu_pct: 100.0 * last.daemon_cpu_ns as f64 / wall_ns.max(1) as f64,
            move_pages_per_s: if c.move_ns > 0 {
                c.move_pages_requested as f64 * 1e9 / c.move_ns as f64
            } else {
                0.0
            },
            move_batch_us: if c.move_calls > 0 {
                c.move_ns as f64 / c.move_calls as f64 / 1e3
            } else {
                0.0
            },
            metadata_bytes: self.policy.metadata_bytes(),
            policy_stats: self
                .policy
                .stats()
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            last,
        };
        if let Some(p) = &opts.summary_path {
            let text = serde_json::to_string_pretty(&summary).unwrap_or_default();
            std::fs::write(p, text + "\n")
                .map_err(|e| LiveError::runtime(format!("--summary {}: {e}", p.display())))?;
        }
        match (failure, command_status) {
            (Some(mut e), Some(st)) => {
                e.msg = format!("{}; `{}` {}", e.msg, self.running.name, describe_status(st));
                Err(e)
            }
            (Some(e), None) => Err(e),
            (None, _) => Ok(summary),
        }
    }
}

/// A DAMON read's snapshots keyed by policy pid (processes no longer tracked are
/// dropped).
fn by_policy_pid(mech: &LiveMechanisms, snaps: Vec<(i32, Snapshot)>) -> Vec<(Pid, Snapshot)> {
    let live = mech.live_processes();
    snaps
        .into_iter()
        .filter_map(|(os, s)| live.iter().find(|(_, o)| *o == os).map(|(p, _)| (*p, s)))
        .collect()
}

/// Keeps the processes tracked in step with the targets: processes that joined are
/// added (after the privilege check a later joiner of a cgroup must pass too), and
/// those that left are removed, with Munmap events for their pages.
struct Membership {
    caps: caps::CapSet,
    my_uid: u32,
    /// Processes of a cgroup left alone: another user's, without CAP_SYS_PTRACE.
    refused: Vec<i32>,
}

impl Membership {
    fn sync(
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
fn process_left(mech: &mut LiveMechanisms, policy: &mut dyn Policy, pid: Pid, floor: &mut Nanos) {
    let ranges = mech.remove_process(pid);
    *floor = (*floor).max(mech.elapsed());
    mech.set_time(Some(*floor));
    for (start_vpn, nr_pages) in ranges {
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
    mech.set_time(None);
}

fn mech_clock(mech: &LiveMechanisms) -> Instant {
    Instant::now() - Duration::from_nanos(mech.elapsed())
}

fn procfs_numa_balancing_on() -> bool {
    crate::sys::read_trim("/proc/sys/kernel/numa_balancing").is_some_and(|m| m != "0")
}

/// One placement refresh of every tracked process, then the budget and the
/// watermark; returns each live process's anonymous byte ranges, by OS pid. A
/// process found gone leaves the policy's view; only what nothing can fix is an error.
fn refresh(
    mech: &mut LiveMechanisms,
    policy: &mut dyn Policy,
    wants_alloc: bool,
    floor: &mut Nanos,
    needs_damon: bool,
    budget_per_interval: u64,
) -> Result<AnonRanges, LiveError> {
    let mut out = Vec::new();
    for (pid, os_pid) in mech.live_processes() {
        let maps = match procfs::read_maps(os_pid) {
            Ok(m) => m,
            Err(_) if !procfs::alive(os_pid) => {
                process_left(mech, policy, pid, floor);
                continue;
            }
            Err(e) => {
                return Err(LiveError::runtime(format!(
                    "cannot read /proc/{os_pid}/maps: {e}"
                )))
            }
        };
        let ranges = procfs::anon_ranges(&maps);
        let r = match mech.refresh_placement(pid, &ranges) {
            Ok(r) => r,
            Err(e) => match move_failure(e, os_pid) {
                MoveFailure::TargetGone => {
                    process_left(mech, policy, pid, floor);
                    continue;
                }
                MoveFailure::Fatal(err) => return Err(err),
                // The policy keeps the view of the last refresh until the next one.
                MoveFailure::Retry(_) => {
                    mech.counters.move_call_failures += 1;
                    out.push((os_pid, ranges));
                    continue;
                }
            },
        };
        let now = mech.elapsed().max(*floor);
        *floor = now;
        mech.set_time(Some(now));
        for &(start_vpn, nr_pages) in &r.munmaps {
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
        for &(start_vpn, nr_pages) in &r.mmaps {
            let vma = Vma {
                start_vpn,
                nr_pages,
                kind: VmaKind::Anon,
            };
            policy.on_event(&Event::Mmap { pid, vma }, mech);
        }
        if wants_alloc {
            for &(vpn, tier) in &r.allocs {
                policy.on_event(
                    &Event::PageAlloc {
                        pid,
                        vpn,
                        tier,
                        huge: false,
                    },
                    mech,
                );
            }
        }
        mech.set_time(None);
        out.push((os_pid, ranges));
    }
    let [f, s] = mech.setup().nodes;
    let free = |n: u32| numa::node_meminfo(n).1 * 1024 / PAGE_SIZE;
    mech.set_node_free([free(f), free(s)]);
    let now = mech.elapsed().max(*floor);
    *floor = now;
    mech.set_time(Some(now));
    // Rank by coldness only once DAMON has answered (else the first, blind pass
    // would pick by address: the hot set as likely as any), and at most what the rate
    // cap moves in one interval, so each interval ranks again with fresh snapshots.
    if !needs_damon || mech.has_snapshot() {
        mech.enforce_budget(budget_per_interval);
    }
    if mech.free_pages(TierId::FAST) < mech.watermarks(TierId::FAST).low {
        policy.on_event(&Event::LowWatermark { tier: TierId::FAST }, mech);
    }
    mech.set_time(None);
    Ok(out)
}

fn line(mech: &LiveMechanisms, cpu0: u64) -> IntervalStats {
    let c = &mech.counters;
    let [fast, slow] = mech.tier_pages();
    IntervalStats {
        time_s: mech.elapsed() as f64 / 1e9,
        fast_pages: fast,
        slow_pages: slow,
        other_node_pages: mech.other_pages(),
        fast_budget_pages: mech.setup().budget_pages,
        free_fast_pages: mech.free_pages(TierId::FAST),
        queued_pages: mech.mover.len() as u64,
        promoted_pages: c.promoted_pages,
        demoted_pages: c.demoted_pages,
        budget_demote_requests: c.budget_demote_requests,
        migrate_failures: c.migrate_failures,
        fail_busy: c.fail_busy,
        fail_nomem: c.fail_nomem,
        fail_gone: c.fail_gone,
        fail_other: c.fail_other,
        retried_moves: c.retried_moves,
        refused_migrations: c.refused_migrations,
        hint_faults: c.hint_faults,
        young_tests: c.young_tests,
        armed_ptes: c.armed_ptes,
        allocated_pages: c.allocated_pages,
        damon_snapshots: mech.nr_snapshots,
        damon_restarts: c.damon_restarts,
        damon_regions: mech.latest_regions(),
        move_calls: c.move_calls,
        move_call_failures: c.move_call_failures,
        queried_pages: c.queried_pages,
        samples: c.samples,
        samples_dropped: c.samples_dropped,
        samples_lost: c.samples_lost,
        dry_run_pages: c.dry_run_pages,
        daemon_cpu_ns: stats::process_cpu_ns().saturating_sub(cpu0),
        processes: mech.process_stats(),
    }
}

fn emit(
    l: &IntervalStats,
    file: &mut Option<std::fs::File>,
    verbose: bool,
    prom: Option<&Arc<Mutex<String>>>,
    policy: &str,
) {
    let text = serde_json::to_string(l).unwrap_or_default();
    if let Some(f) = file {
        let _ = writeln!(f, "{text}");
    }
    if verbose {
        println!("{text}");
    }
    if let Some(p) = prom {
        if let Ok(mut g) = p.lock() {
            *g = stats::prometheus_text(l, policy);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_status_reads_as_a_shell_reports_it() {
        let run = |script: &str| {
            std::process::Command::new("sh")
                .args(["-c", script])
                .status()
                .unwrap()
        };
        let st = run("exit 3");
        assert_eq!(
            (shell_status(st), describe_status(st).as_str()),
            (3, "exited with status 3")
        );
        let st = run("kill -TERM $$");
        assert_eq!(shell_status(st), 128 + libc::SIGTERM);
        assert_eq!(
            describe_status(st),
            format!("was killed by signal {}", libc::SIGTERM)
        );
        assert_eq!(shell_status(run("true")), 0);
    }

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

    #[test]
    fn privileges_name_the_missing_capability() {
        let none = caps::CapSet(0);
        let admin = caps::CapSet(1 << caps::CAP_SYS_ADMIN);
        let dac = caps::CapSet(1 << caps::CAP_DAC_OVERRIDE);
        let e = check_privileges("pet", true, none, 1000, None).unwrap_err();
        assert_eq!(e.code, 3);
        assert!(
            e.msg.contains("CAP_DAC_OVERRIDE") && e.msg.contains("root"),
            "{e}"
        );
        // DAMON's files are root's, mode 0600: CAP_SYS_ADMIN alone cannot open them
        // (this passed before the fix), CAP_DAC_OVERRIDE or uid 0 can.
        assert!(check_privileges("pet", true, admin, 1000, None).is_err());
        assert!(check_privileges("pet", true, dac, 1000, None).is_ok());
        assert!(check_privileges("pet", true, none, 0, Some(0)).is_ok());
        // Placement-only policy, own child: nothing needed.
        assert!(check_privileges("first-touch", false, none, 1000, None).is_ok());
        let e = check_privileges("first-touch", false, none, 1000, Some(0)).unwrap_err();
        assert!(e.code == 3 && e.msg.contains("CAP_SYS_PTRACE"), "{e}");
        let ptrace = caps::CapSet(1 << caps::CAP_SYS_PTRACE);
        assert!(check_privileges("first-touch", false, ptrace, 1000, Some(0)).is_ok());
    }

    #[test]
    fn coalesce_closes_smallest_gaps() {
        let r = [(0, 10), (12, 20), (100, 110), (111, 120)];
        assert_eq!(coalesce(&r, 4), r.to_vec());
        assert_eq!(coalesce(&r, 2), vec![(0, 20), (100, 120)]);
        assert_eq!(coalesce(&r, 1), vec![(0, 120)]);
        assert_eq!(coalesce(&r, 0), vec![(0, 120)]);
    }
}
