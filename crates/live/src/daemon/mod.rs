//! The live event loop: checks before anything runs ([`plan`]), then, as named steps
//! of the `Daemon` loop, PEBS/IBS samples, DAMON snapshots (`observer`), periodic
//! refreshes (membership of the targets (`targets`), VMA diffs, PageAlloc, budget
//! enforcement, LowWatermark), timers, rate-capped migration batches (`moves` for
//! failed calls), and a clean stop (kdamond off and given back) when the targets end,
//! on `--duration-s`, SIGINT or SIGTERM.

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

mod moves;
mod observer;
mod plan;
mod targets;

use moves::{move_failure, MoveBackoff, MoveFailure};
pub use observer::coalesce;
use observer::{admin_path, damon_targets, registry_path, AnonRanges, ObsMsg, Observer};
use plan::tier_setup;
pub use plan::{check_privileges, may_write_damon_sysfs, plan, Plan};
use targets::{process_left, tell_munmaps, Membership, Running};

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
            if let Err(end) = self.step() {
                return end;
            }
        }
    }

    /// One pass of the loop.
    fn step(&mut self) -> Result<(), End> {
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
        self.floor = self.floor.max(now);
        self.mech.set_time(Some(self.floor));
        tell_unseen_moves(&mut self.mech, self.policy.as_mut(), self.wants_alloc);
        self.mech.set_time(None);
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
        tell_munmaps(mech, policy, pid, &r.munmaps);
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
    // Pages the queries found moved by others, then the budget's demotions. Before the
    // watermark: a policy that reclaims on it must know which of its fast pages the
    // budget already took (else it takes the pages it keeps instead).
    tell_unseen_moves(mech, policy, wants_alloc);
    if (mech.free_pages(TierId::FAST) as f64) < mech.watermarks(TierId::FAST).low {
        policy.on_event(&Event::LowWatermark { tier: TierId::FAST }, mech);
    }
    mech.set_time(None);
    Ok(out)
}

/// Hand the policy the tier changes it has not been told of ([`Event::PageMoved`]),
/// if it lists pages (`wants_alloc`); the others read tiers when they act.
fn tell_unseen_moves(mech: &mut LiveMechanisms, policy: &mut dyn Policy, wants_alloc: bool) {
    let moves = mech.take_unseen_moves();
    if !wants_alloc {
        return;
    }
    for (pid, vpn, from, to) in moves {
        if mech.is_live(pid) {
            policy.on_event(&Event::PageMoved { pid, vpn, from, to }, mech);
        }
    }
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
        damon_empty_snapshots: c.empty_snapshots,
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
}
