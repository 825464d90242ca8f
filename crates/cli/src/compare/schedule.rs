//! Running a matrix's unfinished runs: `jobs` workers take the runs in order while
//! one more thread records the next group's streams, so no core waits for a
//! recording.
//!
//! Runs are grouped by the streams they consume (`stream_key`); a group of more than
//! one run replays one recording of its workload. Recording is single-threaded and
//! takes as long as a run or two (a zipfian store's 2.4 G operations at 1/64: ~12 s),
//! so recording every group before its runs, as tierkit first did, left all but one
//! core idle that long, and again while a group's last run finished alone. Here the
//! recorder works one group ahead of the workers: while they replay group k it
//! records group k + 1, and a worker that reaches group k + 1's runs early waits for
//! it. At most two recordings are held at a time, and together they stay within the
//! recording budget: a recording that does not fit beside the one being replayed is
//! retried alone once that one is released. Only how long a comparison takes depends
//! on any of this; every run replays the same streams in any order.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Runs that consume the same streams.
pub struct Group {
    /// Indices of the runs, in the order workers should take them.
    pub runs: Vec<usize>,
    /// Whether the group's streams are recorded once for all its runs (otherwise each
    /// run generates its own).
    pub record: bool,
}

/// Where a group's recording stands.
enum Slot<T> {
    /// Not recorded yet; the group's runs wait.
    Pending,
    /// Recorded (`Some`), or not recordable within the budget / not to be recorded
    /// (`None`: each run generates its own streams).
    Ready(Option<Arc<T>>),
    /// Every run of the group finished; the recording is released.
    Released,
}

struct State<T> {
    slots: Vec<Slot<T>>,
    /// Unfinished runs per group.
    remaining: Vec<usize>,
}

impl<T> State<T> {
    /// The recordings held: how many and the bytes they take.
    fn held(&self, bytes: impl Fn(&T) -> u64) -> (usize, u64) {
        self.slots
            .iter()
            .filter_map(|s| match s {
                Slot::Ready(Some(r)) => Some(bytes(r)),
                _ => None,
            })
            .fold((0, 0), |(n, b), x| (n + 1, b + x))
    }
}

/// Wait on `changed` while `busy` holds for the state (a poisoned lock is still
/// used: its holder panicked outside any update of the state).
fn wait_until<'a, T>(
    changed: &Condvar,
    st: MutexGuard<'a, State<T>>,
    busy: &dyn Fn(&State<T>) -> bool,
) -> MutexGuard<'a, State<T>> {
    changed
        .wait_while(st, |st| busy(st))
        .unwrap_or_else(|e| e.into_inner())
}

/// Run every group's runs on `jobs` workers, recording groups one ahead of them.
///
/// `record(g, max_bytes)` records group `g`'s streams, or returns `None` if they
/// would take more than `max_bytes`; `bytes` says what a recording takes;
/// `run(i, recording)` carries out run `i`. Both must not panic (callers catch).
/// Returns each run's result with its index, in the order the runs finished.
pub fn run_groups<T, R>(
    groups: &[Group],
    jobs: usize,
    budget: u64,
    record: impl Fn(usize, u64) -> Option<Arc<T>> + Sync,
    bytes: impl Fn(&T) -> u64 + Sync,
    run: impl Fn(usize, Option<&Arc<T>>) -> R + Sync,
) -> Vec<(usize, R)>
where
    T: Send + Sync,
    R: Send,
{
    let state = Mutex::new(State {
        slots: groups
            .iter()
            .map(|g| {
                if g.record {
                    Slot::Pending
                } else {
                    Slot::Ready(None)
                }
            })
            .collect(),
        remaining: groups.iter().map(|g| g.runs.len()).collect(),
    });
    let changed = Condvar::new();
    let order: Vec<(usize, usize)> = groups
        .iter()
        .enumerate()
        .flat_map(|(g, grp)| grp.runs.iter().map(move |&i| (g, i)))
        .collect();
    let next = AtomicUsize::new(0);
    let results = Mutex::new(Vec::with_capacity(order.len()));
    let lock = || state.lock().unwrap_or_else(|e| e.into_inner());
    std::thread::scope(|s| {
        s.spawn(|| {
            for (g, grp) in groups.iter().enumerate() {
                if !grp.record {
                    continue;
                }
                // One recording ahead of the one being replayed, no more.
                let st = wait_until(&changed, lock(), &|st| st.held(&bytes).0 >= 2);
                let (held, held_bytes) = st.held(&bytes);
                drop(st);
                let mut rec = record(g, budget.saturating_sub(held_bytes));
                if rec.is_none() && held > 0 {
                    // It may fit alone: wait until the runs before it let go of theirs.
                    drop(wait_until(&changed, lock(), &|st| st.held(&bytes).0 > 0));
                    rec = record(g, budget);
                }
                lock().slots[g] = Slot::Ready(rec);
                changed.notify_all();
            }
        });
        for _ in 0..jobs.max(1) {
            s.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::SeqCst);
                let Some(&(g, i)) = order.get(k) else { break };
                let st = wait_until(&changed, lock(), &|st| matches!(st.slots[g], Slot::Pending));
                let rec = match &st.slots[g] {
                    Slot::Ready(r) => r.clone(),
                    Slot::Pending | Slot::Released => {
                        unreachable!("waited past Pending; a group is released after its runs")
                    }
                };
                drop(st);
                let r = run(i, rec.as_ref());
                drop(rec);
                let mut st = lock();
                st.remaining[g] -= 1;
                if st.remaining[g] == 0 {
                    st.slots[g] = Slot::Released;
                    changed.notify_all();
                }
                drop(st);
                results
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((i, r));
            });
        }
    });
    results.into_inner().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    /// A fake recording: its group and its size.
    struct Rec(usize, u64);

    fn groups(sizes: &[usize], record: bool) -> Vec<Group> {
        let mut first = 0;
        sizes
            .iter()
            .map(|&n| {
                let g = Group {
                    runs: (first..first + n).collect(),
                    record,
                };
                first += n;
                g
            })
            .collect()
    }

    #[test]
    fn every_run_replays_its_own_groups_recording() {
        let gs = groups(&[3, 1, 5, 2], true);
        let group_of = |i: usize| gs.iter().position(|g| g.runs.contains(&i)).unwrap();
        for jobs in [1, 2, 4] {
            let out = run_groups(
                &gs,
                jobs,
                1000,
                |g, _| Some(Arc::new(Rec(g, 10))),
                |r| r.1,
                |_, r| r.map(|r| r.0),
            );
            assert_eq!(out.len(), 11);
            let mut seen: Vec<usize> = out.iter().map(|(i, _)| *i).collect();
            seen.sort();
            assert_eq!(seen, (0..11).collect::<Vec<_>>());
            for (i, g) in out {
                assert_eq!(g, Some(group_of(i)), "run {i} with {jobs} workers");
            }
        }
    }

    /// A fake recording that counts the bytes alive.
    struct Counted<'a>(u64, &'a AtomicU64);

    impl Drop for Counted<'_> {
        fn drop(&mut self) {
            self.1.fetch_sub(self.0, Ordering::SeqCst);
        }
    }

    #[test]
    fn recordings_held_together_stay_within_the_budget() {
        // Each recording takes 60 of a budget of 100: two never fit together, so the
        // recorder must wait for the group before to finish and record again alone.
        let gs = groups(&[2, 2, 2, 2], true);
        let alive = AtomicU64::new(0);
        let peak = AtomicU64::new(0);
        let attempts = AtomicUsize::new(0);
        let out = run_groups(
            &gs,
            2,
            100,
            |_, max| {
                attempts.fetch_add(1, Ordering::SeqCst);
                (max >= 60).then(|| {
                    let now = alive.fetch_add(60, Ordering::SeqCst) + 60;
                    peak.fetch_max(now, Ordering::SeqCst);
                    Arc::new(Counted(60, &alive))
                })
            },
            |r| r.0,
            |_, r| {
                std::thread::sleep(std::time::Duration::from_millis(5));
                r.is_some()
            },
        );
        assert!(
            out.iter().all(|(_, got)| *got),
            "a run went without its recording"
        );
        assert_eq!(
            peak.load(Ordering::SeqCst),
            60,
            "two recordings were alive at once"
        );
        assert!(attempts.load(Ordering::SeqCst) >= 4);
        assert_eq!(
            alive.load(Ordering::SeqCst),
            0,
            "a recording outlived its runs"
        );
    }

    #[test]
    fn groups_that_are_not_recorded_run_without_waiting() {
        let gs = groups(&[2, 3], false);
        let recorded = AtomicUsize::new(0);
        let out = run_groups(
            &gs,
            2,
            1000,
            |g, _| {
                recorded.fetch_add(1, Ordering::SeqCst);
                Some(Arc::new(Rec(g, 1)))
            },
            |r| r.1,
            |_, r| r.is_none(),
        );
        assert_eq!(recorded.load(Ordering::SeqCst), 0);
        assert!(out.iter().all(|(_, none)| *none));
        assert_eq!(out.len(), 5);
    }

    #[test]
    fn a_recording_too_large_for_the_budget_leaves_its_runs_to_generate() {
        let gs = groups(&[2, 2], true);
        let out = run_groups(
            &gs,
            2,
            50,
            |g, max| (g == 0 && max >= 10).then(|| Arc::new(Rec(g, 10))),
            |r| r.1,
            |i, r| (i, r.is_some()),
        );
        for (i, (_, got)) in out {
            assert_eq!(got, i < 2, "run {i}");
        }
    }
}
