//! Accessed-bit answers from DAMON region snapshots.
//!
//! DAMON samples one page per region every sampling interval and reports, per
//! aggregation interval, `nr_accesses`: in how many samples the region's sampled page
//! had been accessed. So `rate = nr_accesses / (aggr / sample)` estimates the chance
//! that any one page of the region is accessed within one sampling interval. The
//! daemon answers [`Mechanisms::test_and_clear_young`](tierkit_core::Mechanisms) for
//! a page last tested at `since` with the probability that it was accessed in
//! `(since, now]`:
//!
//! `p = 1 - Π_s (1 - rate_s) ^ (overlap_s / sample)`
//!
//! over the snapshots `s` whose aggregation window overlaps `(since, now]`, the time
//! after the newest snapshot (at most one aggregation interval) extrapolated with its
//! rate. A region with rate 1 answers "young" for certain, rate 0 "not young" for
//! certain; in between the daemon draws with its seeded generator. What is lost
//! against a real per-page accessed bit: the region granularity (pages of one region
//! share one rate) and up to one aggregation interval of lag.
//!
//! Hinting faults use the same estimate: an "armed" page faults in the first
//! snapshot window after its arm time in which the draw says it was accessed, at an
//! estimated time inside that window (see [`fault_time`]).

use std::collections::VecDeque;
use tierkit_core::{Nanos, Vpn, PAGE_SHIFT};

/// One region of a snapshot, in pages.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RegionRate {
    /// First page.
    pub start: Vpn,
    /// One past the last page.
    pub end: Vpn,
    /// Per-sampling-interval access probability, 0..=1.
    pub rate: f64,
    /// DAMON age (aggregation intervals at this access level).
    pub age: u32,
    /// Raw `nr_accesses`.
    pub nr_accesses: u32,
}

/// One DAMON aggregation as the daemon saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// When it was read (end of its aggregation window), ns since attach.
    pub end_ns: Nanos,
    /// Aggregation interval, ns.
    pub aggr_ns: u64,
    /// Sampling interval, ns.
    pub sample_ns: u64,
    /// Regions sorted by `start`, not overlapping.
    pub regions: Vec<RegionRate>,
}

impl Snapshot {
    /// Build from DAMON's byte-addressed regions.
    pub fn from_damon(
        end_ns: Nanos,
        aggr_ns: u64,
        sample_ns: u64,
        regions: &[crate::sys::damon::Region],
    ) -> Snapshot {
        let max = (aggr_ns / sample_ns.max(1)).max(1) as f64;
        let mut v: Vec<RegionRate> = regions
            .iter()
            .map(|r| RegionRate {
                start: r.start >> PAGE_SHIFT,
                end: (r.end + (1 << PAGE_SHIFT) - 1) >> PAGE_SHIFT,
                rate: (r.nr_accesses as f64 / max).clamp(0.0, 1.0),
                age: r.age,
                nr_accesses: r.nr_accesses,
            })
            .collect();
        v.sort_by_key(|r| r.start);
        Snapshot {
            end_ns,
            aggr_ns,
            sample_ns,
            regions: v,
        }
    }

    /// The region holding `vpn`.
    pub fn region(&self, vpn: Vpn) -> Option<&RegionRate> {
        let i = self.regions.partition_point(|r| r.start <= vpn);
        let r = self.regions.get(i.checked_sub(1)?)?;
        (vpn < r.end).then_some(r)
    }

    fn start_ns(&self) -> Nanos {
        self.end_ns.saturating_sub(self.aggr_ns)
    }
}

/// The recent snapshots.
#[derive(Debug, Clone, Default)]
pub struct AccessView {
    snaps: VecDeque<Snapshot>,
    /// Snapshots received in total.
    pub nr_snapshots: u64,
}

/// Snapshots older than this are dropped: a page untested for longer is answered
/// from the last minute only.
pub const HISTORY_NS: u64 = 60_000_000_000;

impl AccessView {
    /// Add the newest snapshot.
    pub fn push(&mut self, s: Snapshot) {
        let keep_from = s.end_ns.saturating_sub(HISTORY_NS);
        self.snaps.push_back(s);
        while self.snaps.front().is_some_and(|f| f.end_ns < keep_from) {
            self.snaps.pop_front();
        }
        self.nr_snapshots += 1;
    }

    /// The newest snapshot.
    pub fn latest(&self) -> Option<&Snapshot> {
        self.snaps.back()
    }

    /// Probability that page `vpn` was accessed in `(since, now]`; `None` when no
    /// snapshot covers the page.
    pub fn p_accessed(&self, vpn: Vpn, since: Nanos, now: Nanos) -> Option<f64> {
        let mut log_not = 0.0f64;
        let mut covered = false;
        for s in self.snaps.iter().rev() {
            if s.end_ns <= since {
                break;
            }
            let overlap = s.end_ns.min(now).saturating_sub(s.start_ns().max(since));
            if let Some(r) = s.region(vpn) {
                covered = true;
                log_not += log_idle(samples(overlap, s.sample_ns), r.rate);
            }
        }
        if let Some(s) = self.latest() {
            // Unobserved time since the newest snapshot: predicted from it, for at most
            // one aggregation interval (a stalled monitor must not invent accesses).
            let from = s.end_ns.max(since);
            let gap = now.saturating_sub(from).min(s.aggr_ns);
            if let Some(r) = s.region(vpn) {
                covered = true;
                log_not += log_idle(samples(gap, s.sample_ns), r.rate);
            }
        }
        covered.then(|| 1.0 - log_not.exp())
    }
}

/// `ln((1 - rate)^n)`: 0 for no time, −∞ for a region accessed in every sample.
fn log_idle(n: f64, rate: f64) -> f64 {
    if n <= 0.0 || rate <= 0.0 {
        0.0
    } else if rate >= 1.0 {
        f64::NEG_INFINITY
    } else {
        n * (1.0 - rate).ln()
    }
}

fn samples(ns: u64, sample_ns: u64) -> f64 {
    ns as f64 / sample_ns.max(1) as f64
}

/// Whether an armed page faulted in snapshot `s`, and when: `u` is a uniform draw in
/// `[0, 1)`. The window counted is `(max(armed_at, window start), end]`; the fault
/// time is estimated as the expected first access in it,
/// `start + len / (1 + rate·samples)`.
pub fn fault_time(s: &Snapshot, rate: f64, armed_at: Nanos, u: f64) -> Option<Nanos> {
    if armed_at >= s.end_ns || rate <= 0.0 {
        return None;
    }
    let start = s.start_ns().max(armed_at);
    let n = samples(s.end_ns - start, s.sample_ns);
    let p = 1.0 - (1.0 - rate).powf(n);
    if u >= p {
        return None;
    }
    let len = (s.end_ns - start) as f64;
    Some(start + (len / (1.0 + rate * n)) as u64)
}

/// The daemon's generator (SplitMix64): deterministic for a seed, used for the
/// probabilistic answers above and for [`Mechanisms::random`](tierkit_core::Mechanisms).
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::damon::Region;

    const MS: u64 = 1_000_000;

    fn snap(end_ms: u64, regions: &[(u64, u64, u32)]) -> Snapshot {
        let r: Vec<Region> = regions
            .iter()
            .map(|&(s, e, n)| Region {
                start: s << 12,
                end: e << 12,
                nr_accesses: n,
                age: 3,
            })
            .collect();
        // 200 ms aggregation of 5 ms samples: 40 samples.
        Snapshot::from_damon(end_ms * MS, 200 * MS, 5 * MS, &r)
    }

    #[test]
    fn rates_come_from_nr_accesses_over_samples() {
        let s = snap(200, &[(0, 10, 40), (10, 20, 10), (20, 30, 0)]);
        assert_eq!(s.region(5).unwrap().rate, 1.0);
        assert_eq!(s.region(15).unwrap().rate, 0.25);
        assert_eq!(s.region(29).unwrap().rate, 0.0);
        assert!(s.region(30).is_none());
    }

    #[test]
    fn young_is_certain_for_hot_and_cold_regions_and_none_outside() {
        let mut v = AccessView::default();
        v.push(snap(200, &[(0, 10, 40), (10, 20, 1), (20, 30, 0)]));
        assert_eq!(v.p_accessed(3, 0, 200 * MS), Some(1.0));
        assert_eq!(v.p_accessed(25, 0, 200 * MS), Some(0.0));
        assert_eq!(v.p_accessed(99, 0, 200 * MS), None);
        // 1 of 40 samples: over a whole window p = 1 - (39/40)^40 ~ 0.64.
        let p = v.p_accessed(15, 0, 200 * MS).unwrap();
        assert!((p - (1.0 - (39.0f64 / 40.0).powi(40))).abs() < 1e-9, "{p}");
        // Tested 5 ms ago: about one sample's worth.
        let p = v.p_accessed(15, 195 * MS, 200 * MS).unwrap();
        assert!((p - 0.025).abs() < 1e-9, "{p}");
    }

    #[test]
    fn a_test_after_a_window_only_counts_time_after_it() {
        let mut v = AccessView::default();
        v.push(snap(200, &[(0, 10, 40)]));
        v.push(snap(400, &[(0, 10, 0)]));
        // Tested at 200 ms: the hot window is before, the idle one after -> not young.
        assert_eq!(v.p_accessed(5, 200 * MS, 400 * MS), Some(0.0));
        // Tested at 100 ms: half of the hot window counts -> young.
        assert_eq!(v.p_accessed(5, 100 * MS, 400 * MS), Some(1.0));
        // Extrapolation after the newest snapshot uses the newest (idle) rate.
        assert_eq!(v.p_accessed(5, 400 * MS, 450 * MS), Some(0.0));
    }

    #[test]
    fn extrapolation_is_capped_at_one_aggregation() {
        let mut v = AccessView::default();
        v.push(snap(200, &[(0, 10, 4)])); // rate 0.1
        let p1 = v.p_accessed(5, 200 * MS, 400 * MS).unwrap();
        let p2 = v.p_accessed(5, 200 * MS, 10_000 * MS).unwrap();
        assert_eq!(p1, p2);
    }

    #[test]
    fn history_is_bounded() {
        let mut v = AccessView::default();
        for i in 1..=400 {
            v.push(snap(i * 200, &[(0, 1, 0)]));
        }
        assert!(v.snaps.len() <= (HISTORY_NS / (200 * MS)) as usize + 1);
        assert_eq!(v.nr_snapshots, 400);
    }

    #[test]
    fn faults_land_inside_the_window_after_arming() {
        let s = snap(400, &[(0, 10, 40)]);
        // Armed before the window: fault early in it (rate 1: 1/41 into the window).
        let t = fault_time(&s, 1.0, 0, 0.5).unwrap();
        assert!((200 * MS..210 * MS).contains(&t), "{t}");
        // Armed mid-window: never before the arm time.
        let t = fault_time(&s, 1.0, 350 * MS, 0.5).unwrap();
        assert!((350 * MS..400 * MS).contains(&t));
        // Armed after the snapshot, or an idle region: no fault.
        assert_eq!(fault_time(&s, 1.0, 400 * MS, 0.0), None);
        assert_eq!(fault_time(&s, 0.0, 0, 0.0), None);
        // A low rate faults only when the draw is below p.
        let p = 1.0 - (1.0 - 0.025f64).powf(40.0);
        assert!(fault_time(&s, 0.025, 0, p - 0.01).is_some());
        assert!(fault_time(&s, 0.025, 0, p + 0.01).is_none());
    }

    #[test]
    fn rng_is_deterministic_and_uniform_enough() {
        let (mut a, mut b) = (Rng(7), Rng(7));
        assert_eq!(a.next_u64(), b.next_u64());
        let mean: f64 = (0..10_000).map(|_| a.unit()).sum::<f64>() / 10_000.0;
        assert!((mean - 0.5).abs() < 0.02, "{mean}");
    }
}
