//! DCSC, Chrono's Dynamic CIT Statistic Collection (§3.2.2, Fig. 5, §4): victim
//! probes of both tiers, their two-round CIT, per-tier heat maps of 28 log2 buckets,
//! and the overlap of the slow tier's hot pages with the fast tier's cold pages, which
//! gives the misplacement ratio (→ rate limit) and the overlap point (→ threshold).
//!
//! [`HeatMap`], [`overlap`], [`threshold_at_rank`] and [`rate_limit_bytes_per_s`] are
//! pure; [`Probes`] is the probe bookkeeping (`PG_probed` pages), driven by the
//! policy with the machine's fault times.

use std::collections::{BTreeMap, VecDeque};
use tierkit_core::*;

/// Buckets of a heat map (Table 2, B-bucket = 28).
pub const DEFAULT_NR_BUCKETS: usize = 28;

/// The heat-map bucket of a CIT (§4): bucket 0 holds CIT < 1 ms, bucket i ≥ 1 holds
/// `[2^(i−1), 2^i)` ms; CITs past the last bucket are clamped into it (§4: values
/// above 2^27 ms "will not be considered as key points").
pub fn bucket_of(cit_ns: u64, nr_buckets: usize) -> usize {
    let ms = cit_ns / NS_PER_MS;
    let b = if ms == 0 {
        0
    } else {
        (64 - ms.leading_zeros()) as usize
    };
    b.min(nr_buckets - 1)
}

/// The bucket a unit of `unit_pages` base pages with CIT `cit_ns` counts in, as 4 KiB
/// pages (§3.4): a unit of 512 pages is accessed 512× as often as each of its 4 KiB
/// parts, so its 4 KiB-equivalent CIT is 512× longer — bucket `i + 9` for a 2 MiB
/// page in bucket `i ≥ 1` (adjacent buckets differ 2×). Computed on the scaled CIT, so
/// a sub-millisecond huge-page CIT lands in its exact bucket too.
pub fn bucket_4k_equivalent(cit_ns: u64, unit_pages: u64, nr_buckets: usize) -> usize {
    bucket_of(cit_ns.saturating_mul(unit_pages), nr_buckets)
}

/// Lower and upper CIT bound of bucket `b`, ns.
pub fn bucket_bounds_ns(b: usize) -> (f64, f64) {
    let ms = NS_PER_MS as f64;
    if b == 0 {
        (0.0, ms)
    } else {
        (2f64.powi(b as i32 - 1) * ms, 2f64.powi(b as i32) * ms)
    }
}

/// CIT counts of one tier, in 4 KiB pages per bucket (bucket 0 hottest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeatMap {
    /// Counts per bucket.
    pub counts: Vec<u64>,
}

impl HeatMap {
    /// An empty map of `nr_buckets` buckets.
    pub fn new(nr_buckets: usize) -> HeatMap {
        HeatMap {
            counts: vec![0; nr_buckets],
        }
    }

    /// Pages counted.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Count `count` samples of a unit of `unit_pages` base pages with CIT `cit_ns`.
    /// §3.4's rule for a unit-sampled huge page is `add(cit, 512, 512)`: 512 base
    /// pages in bucket `i + 9`.
    pub fn add(&mut self, cit_ns: u64, unit_pages: u64, count: u64) {
        let b = bucket_4k_equivalent(cit_ns, unit_pages, self.counts.len());
        self.counts[b] += count;
    }

    /// Add another map bucket by bucket.
    pub fn merge(&mut self, other: &HeatMap) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
    }
}

/// What the two heat maps say.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OverlapResult {
    /// Overlapping pages: the pairs (hot slow page, cold fast page) at the same or an
    /// inverted hotness level (§3.2.2).
    pub overlap: u64,
    /// Samples in both maps.
    pub total: u64,
    /// `overlap / total`: the misplacement ratio.
    pub misplacement_ratio: f64,
    /// Slow-tier bucket where the pairing stopped.
    pub slow_bucket: usize,
    /// Fast-tier bucket where the pairing stopped.
    pub fast_bucket: usize,
    /// The threshold at the overlap point, ns ([`threshold_at_rank`]); `None` if the
    /// fast map is empty.
    pub threshold_ns: Option<f64>,
}

/// Compare the slow tier's hot pages with the fast tier's cold pages (§3.2.2). Pair
/// the hottest slow samples with the coldest fast samples while the slow one is at
/// least as hot (bucket index ≤): every pair is a misplaced page that a swap would
/// fix, and their number is the overlap (the artifact's `calculate_promote_info` two
/// pointers). Where the pairing stops is the overlap point: after the swaps the fast
/// tier would hold exactly the hottest `|F|` samples, so the threshold goes at rank
/// `|F|` of the merged map.
pub fn overlap(slow: &HeatMap, fast: &HeatMap) -> OverlapResult {
    let nb = slow.counts.len() as isize;
    // Pointers skip empty buckets: i walks the slow map hot → cold, j the fast map
    // cold → hot.
    let next_slow = |mut i: isize| {
        while i < nb && slow.counts[i as usize] == 0 {
            i += 1;
        }
        i
    };
    let next_fast = |mut j: isize| {
        while j >= 0 && fast.counts[j as usize] == 0 {
            j -= 1;
        }
        j
    };
    let (mut i, mut j) = (next_slow(0), next_fast(nb - 1));
    let mut overlap = 0u64;
    let (mut s, mut f) = (0, 0);
    if i < nb && j >= 0 {
        (s, f) = (slow.counts[i as usize], fast.counts[j as usize]);
    }
    while i < nb && j >= 0 && i <= j {
        let m = s.min(f);
        overlap += m;
        s -= m;
        f -= m;
        if s == 0 {
            i = next_slow(i + 1);
            if i < nb {
                s = slow.counts[i as usize];
            }
        }
        if f == 0 {
            j = next_fast(j - 1);
            if j >= 0 {
                f = fast.counts[j as usize];
            }
        }
    }
    let (i, j) = (i.min(nb - 1) as usize, j.max(0) as usize);
    let total = slow.total() + fast.total();
    let mut merged = slow.clone();
    merged.merge(fast);
    let fast_total = fast.total();
    OverlapResult {
        overlap,
        total,
        misplacement_ratio: if total == 0 {
            0.0
        } else {
            overlap as f64 / total as f64
        },
        slow_bucket: i,
        fast_bucket: j,
        threshold_ns: (fast_total > 0).then(|| threshold_at_rank(&merged, fast_total)),
    }
}

/// [`overlap`] with `free_samples` empty fast-tier frames added to the fast map's
/// coldest bucket: a free frame is colder than any page, so a hot slow page paired
/// with it is misplaced too (tierkit; without this an empty fast tier gives overlap
/// 0 and DCSC's rate limit 0). The misplacement ratio keeps the real samples as its
/// denominator (it multiplies the memory in use); the threshold is the rank of the
/// fast tier's capacity in the merged map.
pub fn overlap_with_free(slow: &HeatMap, fast: &HeatMap, free_samples: u64) -> OverlapResult {
    let real = slow.total() + fast.total();
    let mut f = fast.clone();
    let last = f.counts.len() - 1;
    f.counts[last] += free_samples;
    let mut r = overlap(slow, &f);
    r.total = real;
    r.misplacement_ratio = if real == 0 {
        0.0
    } else {
        r.overlap as f64 / real as f64
    };
    r
}

/// The CIT below which `rank` of the map's pages lie, ns: the bucket holding the
/// rank-th hottest page, interpolated log-linearly inside it (linearly in bucket 0,
/// `[0, 1 ms)`). Past the last page: the upper bound of the last non-empty bucket.
pub fn threshold_at_rank(map: &HeatMap, rank: u64) -> f64 {
    let mut below = 0u64;
    let mut last = 0usize;
    for (b, &c) in map.counts.iter().enumerate() {
        if c == 0 {
            continue;
        }
        last = b;
        if below + c >= rank {
            let frac = (rank - below) as f64 / c as f64;
            let (lo, hi) = bucket_bounds_ns(b);
            return if b == 0 {
                frac * hi
            } else {
                lo * (hi / lo).powf(frac)
            };
        }
        below += c;
    }
    bucket_bounds_ns(last).1
}

/// DCSC's rate limit (§3.2.2): the misplacement ratio × the memory in use, moved
/// within one Ticking-scan period, bytes per second.
pub fn rate_limit_bytes_per_s(misplacement_ratio: f64, memory_bytes: u64, period_ms: u64) -> f64 {
    misplacement_ratio * memory_bytes as f64 * 1000.0 / period_ms.max(1) as f64
}

/// Per-tier heat maps over a sliding window of DCSC rounds: the aggregate of the
/// processes' statistic tables (§3.2.2).
#[derive(Debug, Clone)]
pub struct HeatMaps {
    nr_buckets: usize,
    window: usize,
    /// Newest last: `[slow, fast]` maps of one round.
    rounds: VecDeque<[HeatMap; 2]>,
}

impl HeatMaps {
    /// Maps of `nr_buckets` buckets keeping the last `window` rounds.
    pub fn new(nr_buckets: usize, window: usize) -> HeatMaps {
        HeatMaps {
            nr_buckets,
            window: window.max(1),
            rounds: VecDeque::new(),
        }
    }

    /// Start a round, dropping the oldest beyond the window.
    pub fn next_round(&mut self) {
        self.rounds
            .push_back([HeatMap::new(self.nr_buckets), HeatMap::new(self.nr_buckets)]);
        while self.rounds.len() > self.window {
            self.rounds.pop_front();
        }
    }

    /// Count a finished probe of a unit in `tier` in the current round.
    pub fn record(&mut self, tier: TierId, cit_ns: u64, unit_pages: u64, count: u64) {
        if self.rounds.is_empty() {
            self.next_round();
        }
        let k = if tier.is_fast() { 1 } else { 0 };
        self.rounds.back_mut().expect("a round")[k].add(cit_ns, unit_pages, count);
    }

    /// `(slow, fast)` summed over the window.
    pub fn aggregate(&self) -> (HeatMap, HeatMap) {
        let mut slow = HeatMap::new(self.nr_buckets);
        let mut fast = HeatMap::new(self.nr_buckets);
        for [s, f] in &self.rounds {
            slow.merge(s);
            fast.merge(f);
        }
        (slow, fast)
    }

    /// Bytes of the maps (8-byte counters).
    pub fn bytes(&self) -> u64 {
        (self.rounds.len() * 2 * self.nr_buckets * 8) as u64
    }
}

/// Where a probe is in its two rounds.
#[derive(Debug, Clone, Copy, PartialEq)]
enum ProbeState {
    /// Armed by DCSC, waiting for round 1's fault.
    Round1,
    /// Round 1 measured; re-armed at the next DCSC round.
    Measured1 { cit1: u64 },
    /// Re-armed, waiting for round 2's fault.
    Round2 { cit1: u64 },
    /// Counted in the heat map after timing out; the PTE is still armed, so the entry
    /// stays until its fault arrives (which must not be mistaken for a regular one)
    /// or another timeout passes.
    Retired,
}

#[derive(Debug, Clone, Copy)]
struct Probe {
    /// When DCSC last armed the PTE, ns (a PTE already armed keeps an earlier time).
    armed_at: Nanos,
    /// Start of the probe's current round, ns.
    round_start: Nanos,
    state: ProbeState,
    unit_pages: u64,
}

/// How a hinting fault relates to DCSC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeFault {
    /// DCSC armed this PTE (`PG_probed`): its fault feeds the statistics and not the
    /// regular promotion path.
    pub probe_armed: bool,
    /// A finished two-round CIT, `max(CIT₁, CIT₂)`, ns.
    pub finished_cit_ns: Option<u64>,
}

/// The `PG_probed` pages: victims armed by DCSC and their two-round CITs (§3.2.2:
/// "the CIT values of the probed pages are gathered using a two-round CIT generation
/// mechanism"). Ordered by (pid, page) so rounds walk them deterministically.
#[derive(Debug, Clone, Default)]
pub struct Probes {
    map: BTreeMap<(Pid, Vpn), Probe>,
}

impl Probes {
    /// Probes in flight (retired ones included).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True if none.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Is `(pid, page)` a probe (in any state)?
    pub fn contains(&self, pid: Pid, page: Vpn) -> bool {
        self.map.contains_key(&(pid, page))
    }

    /// A new victim armed at `now`.
    pub fn start(&mut self, pid: Pid, page: Vpn, unit_pages: u64, now: Nanos) {
        self.map.insert(
            (pid, page),
            Probe {
                armed_at: now,
                round_start: now,
                state: ProbeState::Round1,
                unit_pages,
            },
        );
    }

    /// A hinting fault on `(pid, page)` whose PTE was armed at `armed_at`. The fault
    /// is DCSC's alone if DCSC armed the PTE (`armed_at ≥` DCSC's arm time); an earlier
    /// arm time means a regular scan had armed the page first, and then both paths use
    /// the fault. Faults of probes waiting for a round are measured (CIT from the PTE's
    /// arm time).
    pub fn on_fault(&mut self, pid: Pid, page: Vpn, armed_at: Nanos, now: Nanos) -> ProbeFault {
        let mut out = ProbeFault {
            probe_armed: false,
            finished_cit_ns: None,
        };
        let Some(p) = self.map.get_mut(&(pid, page)) else {
            return out;
        };
        let cit = now.saturating_sub(armed_at);
        match p.state {
            ProbeState::Round1 => {
                out.probe_armed = armed_at >= p.armed_at;
                p.state = ProbeState::Measured1 { cit1: cit };
            }
            ProbeState::Round2 { cit1 } => {
                out.probe_armed = armed_at >= p.armed_at;
                out.finished_cit_ns = Some(cit1.max(cit));
                self.map.remove(&(pid, page));
            }
            ProbeState::Retired => {
                out.probe_armed = armed_at >= p.armed_at;
                self.map.remove(&(pid, page));
            }
            // Re-armed by a regular scan after round 1: not DCSC's fault.
            ProbeState::Measured1 { .. } => {}
        }
        out
    }

    /// Advance every probe at a DCSC round (time `now`): probes measured in round 1
    /// are re-armed through `arm` for round 2 (dropped if `arm` says the page is
    /// gone); a probe that has waited `timeout_ns` in a round without a fault is
    /// finished with its CIT censored at `timeout_ns` (a page idle that long is cold
    /// whatever its second sample). Finished probes go to
    /// `done(pid, page, max CIT, unit_pages)`. Retired probes are forgotten after
    /// another `timeout_ns`.
    pub fn round(
        &mut self,
        now: Nanos,
        timeout_ns: u64,
        arm: &mut dyn FnMut(Pid, Vpn) -> bool,
        done: &mut dyn FnMut(Pid, Vpn, u64, u64),
    ) {
        let mut gone = Vec::new();
        for (&(pid, page), p) in self.map.iter_mut() {
            let waited = now.saturating_sub(p.round_start);
            match p.state {
                ProbeState::Round1 if waited >= timeout_ns => {
                    done(pid, page, timeout_ns, p.unit_pages);
                    p.state = ProbeState::Retired;
                    p.round_start = now;
                }
                ProbeState::Measured1 { cit1 } => {
                    if arm(pid, page) {
                        p.state = ProbeState::Round2 { cit1 };
                        p.armed_at = now;
                        p.round_start = now;
                    } else {
                        gone.push((pid, page));
                    }
                }
                ProbeState::Round2 { cit1 } if waited >= timeout_ns => {
                    done(pid, page, cit1.max(timeout_ns), p.unit_pages);
                    p.state = ProbeState::Retired;
                    p.round_start = now;
                }
                ProbeState::Retired if waited >= timeout_ns => gone.push((pid, page)),
                _ => {}
            }
        }
        for k in gone {
            self.map.remove(&k);
        }
    }

    /// Forget the probes of `pid` in `[start, start + nr_pages)`.
    pub fn remove_range(&mut self, pid: Pid, start: Vpn, nr_pages: u64) {
        let from = (pid, huge_head(start));
        let to = (pid, start.saturating_add(nr_pages));
        let doomed: Vec<_> = self.map.range(from..to).map(|(&k, _)| k).collect();
        for k in doomed {
            self.map.remove(&k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = NS_PER_MS;

    fn map(counts: &[u64]) -> HeatMap {
        let mut m = HeatMap::new(DEFAULT_NR_BUCKETS);
        m.counts[..counts.len()].copy_from_slice(counts);
        m
    }

    /// Spec §7 oracle 17: bucket i holds [2^(i−1), 2^i) ms, bucket 0 below 1 ms, 28
    /// buckets, nothing at or beyond 2^27 ms goes past the last bucket.
    #[test]
    fn oracle_17_buckets_are_log2_milliseconds() {
        let b = |ms_f: f64| bucket_of((ms_f * MS as f64) as u64, DEFAULT_NR_BUCKETS);
        assert_eq!(b(0.0), 0);
        assert_eq!(b(0.999), 0);
        assert_eq!(b(1.0), 1);
        assert_eq!(b(1.999), 1);
        assert_eq!(b(2.0), 2);
        assert_eq!(b(3.0), 2);
        assert_eq!(b(4.0), 3);
        assert_eq!(b(200.0), 8); // [128, 256)
        assert_eq!(b(1000.0), 10); // [512, 1024)
        assert_eq!(b(2f64.powi(26)), 27);
        assert_eq!(b(2f64.powi(27) - 1.0), 27);
        assert_eq!(b(2f64.powi(27)), 27, "clamped into the last bucket");
        assert_eq!(b(1e12), 27);
        for i in 1..DEFAULT_NR_BUCKETS {
            let (lo, hi) = bucket_bounds_ns(i);
            assert_eq!(bucket_of(lo as u64, DEFAULT_NR_BUCKETS), i);
            assert_eq!(bucket_of(hi as u64 - 1, DEFAULT_NR_BUCKETS), i);
        }
    }

    /// Spec §7 oracle 16 (DCSC part): a 2 MiB page in bucket i counts as 512 base
    /// pages in bucket i + 9.
    #[test]
    fn oracle_16_huge_page_counts_512_base_pages_nine_buckets_colder() {
        for cit_ms in [1u64, 3, 100, 999, 60_000] {
            let cit = cit_ms * MS;
            let i = bucket_of(cit, DEFAULT_NR_BUCKETS);
            let mut m = HeatMap::new(DEFAULT_NR_BUCKETS);
            m.add(cit, SUBPAGES_PER_HUGE, SUBPAGES_PER_HUGE);
            let j = (i + 9).min(DEFAULT_NR_BUCKETS - 1);
            assert_eq!(m.counts[j], 512, "CIT {cit_ms} ms: bucket {i} → {j}");
            assert_eq!(m.total(), 512);
        }
        // Sub-millisecond huge-page CITs get their exact 4 KiB-equivalent bucket.
        assert_eq!(bucket_4k_equivalent(MS / 4, 512, DEFAULT_NR_BUCKETS), 8); // 128 ms
        assert_eq!(bucket_4k_equivalent(MS / 600, 512, DEFAULT_NR_BUCKETS), 0);
    }

    #[test]
    fn heat_maps_window_drops_old_rounds_and_keeps_tiers_apart() {
        let mut h = HeatMaps::new(DEFAULT_NR_BUCKETS, 2);
        h.next_round();
        h.record(TierId(1), 3 * MS, 1, 1);
        h.record(TierId::FAST, 600 * MS, 1, 2);
        h.next_round();
        h.record(TierId(1), 3 * MS, 1, 1);
        let (s, f) = h.aggregate();
        assert_eq!(
            (s.counts[2], f.counts[10], s.total(), f.total()),
            (2, 2, 2, 2)
        );
        h.next_round();
        let (s, f) = h.aggregate();
        assert_eq!(
            (s.total(), f.total()),
            (1, 0),
            "the first round left the window"
        );
        assert_eq!(h.bytes(), 2 * 2 * 28 * 8);
    }

    #[test]
    fn perfect_placement_has_no_overlap_and_threshold_between_the_tiers() {
        // Fast: 100 pages at [8,16) ms. Slow: 300 pages at [256,512) ms.
        let fast = map(&[0, 0, 0, 0, 100]);
        let mut slow = HeatMap::new(DEFAULT_NR_BUCKETS);
        slow.counts[9] = 300;
        let r = overlap(&slow, &fast);
        assert_eq!(r.overlap, 0);
        assert_eq!(r.misplacement_ratio, 0.0);
        // Rank 100 of the merged map is the coldest fast page: the top of bucket 4.
        assert_eq!(r.threshold_ns, Some(16.0 * MS as f64));
        assert!(r.slow_bucket > r.fast_bucket);
    }

    #[test]
    fn inverted_placement_overlaps_fully() {
        // Fast holds 100 cold pages, slow 100 hot ones and 200 colder still.
        let mut fast = HeatMap::new(DEFAULT_NR_BUCKETS);
        fast.counts[12] = 100;
        let mut slow = HeatMap::new(DEFAULT_NR_BUCKETS);
        slow.counts[3] = 100;
        slow.counts[15] = 200;
        let r = overlap(&slow, &fast);
        assert_eq!(r.overlap, 100);
        assert_eq!(r.total, 400);
        assert!((r.misplacement_ratio - 0.25).abs() < 1e-12);
        // After the swap the fast tier holds the 100 pages of bucket 3 ([4, 8) ms).
        assert_eq!(r.threshold_ns, Some(8.0 * MS as f64));
        // 25% of 1 GiB in 60 s.
        let rl = rate_limit_bytes_per_s(r.misplacement_ratio, GIB, 60_000);
        assert!((rl - GIB as f64 / 4.0 / 60.0).abs() < 1e-6);
    }

    #[test]
    fn same_level_pages_in_both_tiers_count_as_overlap() {
        // §3.2.2: "overlaps on the same hotness levels in different tiers".
        let mut fast = HeatMap::new(DEFAULT_NR_BUCKETS);
        fast.counts[7] = 50;
        fast.counts[5] = 50;
        let mut slow = HeatMap::new(DEFAULT_NR_BUCKETS);
        slow.counts[7] = 30;
        slow.counts[10] = 270;
        let r = overlap(&slow, &fast);
        assert_eq!(r.overlap, 30);
        assert_eq!((r.slow_bucket, r.fast_bucket), (10, 7));
        // Rank 100 in the merged map: 50 in bucket 5, then 80 in bucket 7 → 50/80 of
        // the way through [64, 128) ms on a log scale.
        let th = r.threshold_ns.unwrap() / MS as f64;
        assert!((th - 64.0 * 2f64.powf(50.0 / 80.0)).abs() < 1e-9, "{th}");
    }

    /// An empty fast tier with room for 100 of 400 sampled pages: the 100 hottest
    /// slow pages are misplaced (ratio 100/400), and the threshold falls at the top
    /// of the hottest 100 — not ratio 0 and RL 0 as the plain overlap gives.
    #[test]
    fn free_fast_frames_count_as_the_coldest_fast_pages() {
        let mut slow = HeatMap::new(DEFAULT_NR_BUCKETS);
        slow.counts[3] = 100;
        slow.counts[15] = 300;
        let empty = HeatMap::new(DEFAULT_NR_BUCKETS);
        let plain = overlap(&slow, &empty);
        assert_eq!((plain.overlap, plain.threshold_ns), (0, None));
        let r = overlap_with_free(&slow, &empty, 100);
        assert_eq!(r.overlap, 100);
        assert_eq!(r.total, 400);
        assert!((r.misplacement_ratio - 0.25).abs() < 1e-12);
        assert_eq!(r.threshold_ns, Some(8.0 * MS as f64));
        // No free frames: the same as the plain overlap.
        let mut fast = HeatMap::new(DEFAULT_NR_BUCKETS);
        fast.counts[12] = 100;
        assert_eq!(overlap_with_free(&slow, &fast, 0), overlap(&slow, &fast));
    }

    #[test]
    fn threshold_at_rank_interpolates_and_saturates() {
        let m = map(&[10, 0, 0, 0, 0, 0, 0, 0, 0, 10]);
        assert_eq!(threshold_at_rank(&m, 5), 0.5 * MS as f64);
        assert_eq!(threshold_at_rank(&m, 10), MS as f64);
        let th = threshold_at_rank(&m, 15) / MS as f64;
        assert!((th - 256.0 * 2f64.sqrt()).abs() < 1e-9);
        assert_eq!(threshold_at_rank(&m, 1000), 512.0 * MS as f64);
        // Nothing past 2^27 ms: the last bucket's top bounds every threshold.
        let mut far = HeatMap::new(DEFAULT_NR_BUCKETS);
        far.add(u64::MAX / 2, 1, 5);
        assert!(threshold_at_rank(&far, 5) <= 2f64.powi(27) * MS as f64);
    }

    #[test]
    fn probes_measure_two_rounds_and_censor_silent_pages() {
        let p = Pid(0);
        let t_out = 60_000 * MS;
        let mut probes = Probes::default();
        let mut armed = Vec::new();
        let mut done = Vec::new();
        for v in 1..=4 {
            probes.start(p, v, 1, 100 * MS);
        }
        // Page 1 faults 30 ms after its probe: round 1, DCSC's fault alone.
        let f = probes.on_fault(p, 1, 100 * MS, 130 * MS);
        assert_eq!(
            f,
            ProbeFault {
                probe_armed: true,
                finished_cit_ns: None
            }
        );
        // Page 3 had been armed by a regular scan at 50 ms (DCSC found it armed): its
        // CIT runs from 50 ms and the regular path sees the fault too.
        let f = probes.on_fault(p, 3, 50 * MS, 450 * MS);
        assert!(!f.probe_armed);
        // Round at 1.1 s: 1 and 3 are re-armed; 2 and 4 keep waiting.
        let round =
            |probes: &mut Probes, now: u64, armed: &mut Vec<Vpn>, done: &mut Vec<(Vpn, u64)>| {
                probes.round(
                    now,
                    t_out,
                    &mut |_, v| {
                        armed.push(v);
                        true
                    },
                    &mut |_, v, cit, _| done.push((v, cit)),
                )
            };
        round(&mut probes, 1100 * MS, &mut armed, &mut done);
        assert_eq!(armed, vec![1, 3]);
        assert!(done.is_empty());
        // Round 2: page 1 faults 10 ms after its re-arm: max(30, 10) = 30 ms.
        let f = probes.on_fault(p, 1, 1100 * MS, 1110 * MS);
        assert_eq!(f.finished_cit_ns, Some(30 * MS));
        assert!(f.probe_armed);
        // A regular scan re-armed page 3 at 1000 ms, before DCSC's re-arm.
        let f = probes.on_fault(p, 3, 1000 * MS, 1600 * MS);
        assert_eq!(f.finished_cit_ns, Some(600 * MS));
        assert!(!f.probe_armed);
        // Page 4 faults 5 s after its probe: round 1 = 5 s, then round 2 = 2 s.
        let f = probes.on_fault(p, 4, 100 * MS, 5100 * MS);
        assert!(f.probe_armed && f.finished_cit_ns.is_none());
        round(&mut probes, 6000 * MS, &mut armed, &mut done);
        let f = probes.on_fault(p, 4, 6000 * MS, 8000 * MS);
        assert_eq!(f.finished_cit_ns, Some(5000 * MS));
        // Page 2 never faults: censored at the timeout, once.
        round(&mut probes, 60_099 * MS, &mut armed, &mut done);
        assert!(done.is_empty());
        round(&mut probes, 60_100 * MS, &mut armed, &mut done);
        assert_eq!(done, vec![(2, t_out)]);
        // Its late fault is still DCSC's (nobody re-armed it), then it is forgotten.
        let f = probes.on_fault(p, 2, 100 * MS, 70_000 * MS);
        assert!(f.probe_armed && f.finished_cit_ns.is_none());
        assert!(probes.is_empty(), "{} left", probes.len());
        // Retired probes are forgotten after another timeout.
        probes.start(p, 9, 1, 0);
        round(&mut probes, t_out, &mut armed, &mut done);
        assert_eq!(probes.len(), 1);
        round(&mut probes, 2 * t_out, &mut armed, &mut done);
        assert!(probes.is_empty());
    }
}
