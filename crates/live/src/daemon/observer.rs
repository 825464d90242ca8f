//! The DAMON observer: a thread that owns the daemon's kdamond, reads a snapshot per
//! process every aggregation, follows the processes as they change, and restarts a
//! kdamond that stopped.

use super::*;

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
pub(super) type SharedTargets = Arc<Mutex<Option<Vec<damon::Target>>>>;

pub(super) enum ObsMsg {
    /// One DAMON read: a snapshot per monitored process, by OS pid.
    Snap(Vec<(i32, Snapshot)>),
    /// The kdamond had stopped while a target lived and was started again.
    Restarted,
    Stopped(String),
}

/// Consecutive failed snapshot reads retried, and kdamond restarts allowed, per run.
pub(super) const OBSERVER_RETRIES: u32 = 3;

pub(super) fn admin_path() -> &'static std::path::Path {
    std::path::Path::new(damon::ADMIN)
}

pub(super) fn registry_path() -> &'static std::path::Path {
    std::path::Path::new(damon::REGISTRY)
}

pub(super) fn pids_of(t: &[damon::Target]) -> Vec<i32> {
    t.iter().map(|t| t.pid).collect()
}

pub(super) struct Observer {
    pub(super) stop: Arc<AtomicBool>,
    pub(super) targets: SharedTargets,
    pub(super) last_sent: Vec<damon::Target>,
    pub(super) rx: Receiver<ObsMsg>,
    pub(super) handle: Option<std::thread::JoinHandle<()>>,
    pub(super) fvaddr: bool,
    /// When it started, ns since attach.
    pub(super) started_ns: Nanos,
}

impl Observer {
    pub(super) fn start(
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
    pub(super) fn update_targets(&mut self, t: Vec<damon::Target>) {
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

    pub(super) fn shutdown(&mut self) {
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
pub(super) type AnonRanges = Vec<(i32, Vec<(u64, u64)>)>;

/// The DAMON targets of the processes tracked: each with its anonymous ranges
/// (coalesced so all of them together stay within half of `max_nr_regions`).
pub(super) fn damon_targets(ranges: &AnonRanges, max_nr_regions: u32) -> Vec<damon::Target> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalesce_closes_smallest_gaps() {
        let r = [(0, 10), (12, 20), (100, 110), (111, 120)];
        assert_eq!(coalesce(&r, 4), r.to_vec());
        assert_eq!(coalesce(&r, 2), vec![(0, 20), (100, 120)]);
        assert_eq!(coalesce(&r, 1), vec![(0, 120)]);
        assert_eq!(coalesce(&r, 0), vec![(0, 120)]);
    }
}
