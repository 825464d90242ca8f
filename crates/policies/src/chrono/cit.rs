//! Chrono's CIT logic without the machine: the threshold per page size (§3.4), the
//! hot test on one Captured Idle Time (§3.1.1), the n-round candidate filter
//! (§3.1.2, App. B) and the semi-auto threshold update (§3.2.1).
//!
//! Times are nanoseconds of policy time. The paper keeps CIT and the threshold in
//! milliseconds (1 ms timer); tierkit keeps nanoseconds because the threshold of a
//! 2 MiB page is `TH / 512`, below a millisecond at any realistic `TH` (spec §2.12).

use std::collections::BTreeMap;
use tierkit_core::*;

/// Base pages in a 1 GiB page (§3.4: `TH_1GB = TH_4KB / (512 · 512)`).
pub const SUBPAGES_PER_GIGANTIC: u64 = SUBPAGES_PER_HUGE * SUBPAGES_PER_HUGE;

/// The size of a page unit, which scales the threshold (§3.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageSize {
    /// 4 KiB.
    Base,
    /// 2 MiB (512 base pages).
    Huge2M,
    /// 1 GiB (512 × 512 base pages); tierkit's machine has none, kept for the rule.
    Huge1G,
}

impl PageSize {
    /// The unit size of a faulting page as the machine reports it.
    pub fn of(huge: bool) -> PageSize {
        if huge {
            PageSize::Huge2M
        } else {
            PageSize::Base
        }
    }

    /// Base pages in the unit.
    pub fn base_pages(self) -> u64 {
        match self {
            PageSize::Base => 1,
            PageSize::Huge2M => SUBPAGES_PER_HUGE,
            PageSize::Huge1G => SUBPAGES_PER_GIGANTIC,
        }
    }
}

/// The threshold for a unit of `size` given the 4 KiB threshold, ns (§3.4):
/// `TH_2MB = TH / 512`, `TH_1GB = TH / 512²`. A huge page whose 512 subpages are each
/// accessed at rate λ is accessed at 512λ as a whole, so its CIT is 512× shorter.
pub fn threshold_for(th_4k_ns: f64, size: PageSize) -> f64 {
    th_4k_ns / size.base_pages() as f64
}

/// Is one CIT sample hot? Strictly below the unit's threshold (§3.1.2: "CIT values
/// below the threshold"). A write fault is judged against `write_bias ×` the
/// threshold (the artifact's `numa_balancing_write_bias`; 1 = no bias, the paper).
pub fn is_hot(cit_ns: u64, th_4k_ns: f64, size: PageSize, write: bool, write_bias: f64) -> bool {
    let bias = if write { write_bias } else { 1.0 };
    (cit_ns as f64) < threshold_for(th_4k_ns, size) * bias
}

/// What the candidate filter did with one regular-path CIT sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterOutcome {
    /// Cold and not a candidate: nothing happens.
    Cold,
    /// Hot: the page passed round `k` and waits for the next round (Fig. 4).
    Candidate(u32),
    /// Hot in every round: the page goes to the promotion queue.
    Promote,
    /// A candidate that was not hot this round: dropped (the artifact's
    /// `hotpage_down`).
    Dropped,
}

/// The per-process candidate sets (the paper's XArray, §3.1.2) of the n-round filter:
/// a page is promoted iff each of `rounds` consecutive CIT samples is below the
/// threshold, i.e. iff the maximum of the n samples is (App. B). Ordered maps so that
/// re-arming walks candidates in address order, as an XArray walk does.
#[derive(Debug, Clone, Default)]
pub struct CandidateFilter {
    rounds: u32,
    /// Per pid: candidate page (huge-page head for huge pages) → rounds passed.
    procs: Vec<BTreeMap<Vpn, u32>>,
    len: usize,
}

impl CandidateFilter {
    /// A filter that needs `rounds` (≥ 1) hot samples in a row.
    pub fn new(rounds: u32) -> CandidateFilter {
        CandidateFilter {
            rounds: rounds.max(1),
            procs: Vec::new(),
            len: 0,
        }
    }

    /// Rounds a page must pass.
    pub fn rounds(&self) -> u32 {
        self.rounds
    }

    /// Candidates over all processes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if there is no candidate.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Rounds `page` of `pid` has passed (0 if it is not a candidate).
    pub fn rounds_passed(&self, pid: Pid, page: Vpn) -> u32 {
        self.procs
            .get(pid.index())
            .and_then(|m| m.get(&page))
            .copied()
            .unwrap_or(0)
    }

    /// Feed one CIT verdict of `page`: hot samples advance it one round, a cold
    /// sample drops it (§3.1.2, Fig. 4).
    pub fn observe(&mut self, pid: Pid, page: Vpn, hot: bool) -> FilterOutcome {
        if self.procs.len() <= pid.index() {
            self.procs.resize_with(pid.index() + 1, BTreeMap::new);
        }
        let set = &mut self.procs[pid.index()];
        let passed = set.get(&page).copied().unwrap_or(0);
        match (passed, hot) {
            (0, false) => FilterOutcome::Cold,
            (_, false) => {
                set.remove(&page);
                self.len -= 1;
                FilterOutcome::Dropped
            }
            (k, true) if k + 1 >= self.rounds => {
                if set.remove(&page).is_some() {
                    self.len -= 1;
                }
                FilterOutcome::Promote
            }
            (k, true) => {
                if set.insert(page, k + 1).is_none() {
                    self.len += 1;
                }
                FilterOutcome::Candidate(k + 1)
            }
        }
    }

    /// The candidates of `pid` in address order (to re-arm them, §3.1.2 "during the
    /// next scan cycle").
    pub fn candidates(&self, pid: Pid) -> Vec<Vpn> {
        self.procs
            .get(pid.index())
            .map(|m| m.keys().copied().collect())
            .unwrap_or_default()
    }

    /// Forget one candidate (its page went away). Returns true if it was one.
    pub fn remove(&mut self, pid: Pid, page: Vpn) -> bool {
        let removed = self
            .procs
            .get_mut(pid.index())
            .is_some_and(|m| m.remove(&page).is_some());
        if removed {
            self.len -= 1;
        }
        removed
    }

    /// Forget the candidates of `pid` in `[start, start + nr_pages)` (munmap); a huge
    /// page's head may precede `start`.
    pub fn remove_range(&mut self, pid: Pid, start: Vpn, nr_pages: u64) {
        let Some(m) = self.procs.get_mut(pid.index()) else {
            return;
        };
        let from = huge_head(start);
        let doomed: Vec<Vpn> = m
            .range(from..start.saturating_add(nr_pages))
            .map(|(&v, _)| v)
            .collect();
        for v in doomed {
            m.remove(&v);
            self.len -= 1;
        }
    }
}

/// Bounds and step of the semi-auto threshold update (§3.2.1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SemiAuto {
    /// δ, the adaptation step (Table 2: 0.5).
    pub delta: f64,
    /// Largest `r` used; also `r` when nothing was enqueued (tierkit: the paper has no
    /// guard for a zero enqueue rate, see docs).
    pub max_ratio: f64,
    /// Smallest threshold, ns.
    pub min_th_ns: f64,
    /// Largest threshold, ns.
    pub max_th_ns: f64,
}

impl SemiAuto {
    /// One update at the end of a Ticking-scan period (§3.2.1):
    /// `r = RateLimit / EnqueueRate`, `TH ← (1 − δ + δ·r) · TH`, with `r` capped at
    /// `max_ratio` (and equal to it when the enqueue rate is 0) and the result kept
    /// within `[min_th_ns, max_th_ns]`. Rates in any one unit (bytes/s here).
    pub fn update(&self, th_ns: f64, rate_limit: f64, enqueue_rate: f64) -> f64 {
        let r = if enqueue_rate > 0.0 {
            (rate_limit / enqueue_rate).min(self.max_ratio)
        } else {
            self.max_ratio
        };
        ((1.0 - self.delta + self.delta * r) * th_ns).clamp(self.min_th_ns, self.max_th_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chrono::test_rng::Rng;

    const MS: f64 = NS_PER_MS as f64;

    #[test]
    fn threshold_scales_by_page_size() {
        let th = 200.0 * MS;
        assert_eq!(threshold_for(th, PageSize::Base), th);
        assert_eq!(threshold_for(th, PageSize::Huge2M), th / 512.0);
        assert_eq!(threshold_for(th, PageSize::Huge1G), th / (512.0 * 512.0));
        // TH_2MB at 200 ms is 0.39 ms: below the paper's 1 ms timer (spec §2.12).
        assert!(threshold_for(th, PageSize::Huge2M) < MS);
    }

    #[test]
    fn hot_is_strictly_below_and_write_bias_widens() {
        let th = 100.0 * MS;
        assert!(is_hot(99_999_999, th, PageSize::Base, false, 1.0));
        assert!(!is_hot(100_000_000, th, PageSize::Base, false, 1.0));
        assert!(!is_hot(150_000_000, th, PageSize::Base, true, 1.0));
        assert!(is_hot(150_000_000, th, PageSize::Base, true, 2.0));
        assert!(!is_hot(150_000_000, th, PageSize::Base, false, 2.0));
    }

    /// Spec §7 oracle 16: a 2 MiB page whose 512 subpages are each accessed as a
    /// Poisson process of rate λ (aggregate 512λ) is judged hot as often as a 4 KiB
    /// page of rate λ, because its threshold is TH/512.
    #[test]
    fn oracle_16_huge_page_verdicts_match_base_pages_of_the_same_subpage_rate() {
        let mut rng = Rng::new(7);
        let th = 200.0 * MS;
        let n = 200_000;
        for rate_per_s in [1.0, 5.0, 20.0] {
            let exp = |rng: &mut Rng, rate: f64| -> u64 {
                (-(1.0 - rng.unit()).ln() / rate * 1e9) as u64
            };
            let base = (0..n)
                .filter(|_| is_hot(exp(&mut rng, rate_per_s), th, PageSize::Base, false, 1.0))
                .count() as f64
                / n as f64;
            let huge = (0..n)
                .filter(|_| {
                    is_hot(
                        exp(&mut rng, 512.0 * rate_per_s),
                        th,
                        PageSize::Huge2M,
                        false,
                        1.0,
                    )
                })
                .count() as f64
                / n as f64;
            let expect = 1.0 - (-rate_per_s * 0.2f64).exp();
            assert!((base - expect).abs() < 0.01, "base {base} vs {expect}");
            assert!((huge - expect).abs() < 0.01, "huge {huge} vs {expect}");
        }
    }

    #[test]
    fn filter_promotes_after_n_hot_rounds_and_drops_on_a_cold_one() {
        let p = Pid(3);
        let mut f = CandidateFilter::new(2);
        assert_eq!(f.observe(p, 10, false), FilterOutcome::Cold);
        assert_eq!(f.observe(p, 10, true), FilterOutcome::Candidate(1));
        assert_eq!(f.len(), 1);
        assert_eq!(f.candidates(p), vec![10]);
        assert_eq!(f.observe(p, 10, true), FilterOutcome::Promote);
        assert!(f.is_empty());
        assert_eq!(f.observe(p, 11, true), FilterOutcome::Candidate(1));
        assert_eq!(f.observe(p, 11, false), FilterOutcome::Dropped);
        assert_eq!(f.rounds_passed(p, 11), 0);
        // One round (Chrono-basic) promotes on the first hot sample.
        let mut basic = CandidateFilter::new(1);
        assert_eq!(basic.observe(p, 1, true), FilterOutcome::Promote);
        assert!(basic.is_empty());
        // Three rounds (Chrono-thrice).
        let mut thrice = CandidateFilter::new(3);
        assert_eq!(thrice.observe(p, 1, true), FilterOutcome::Candidate(1));
        assert_eq!(thrice.observe(p, 1, true), FilterOutcome::Candidate(2));
        assert_eq!(thrice.observe(p, 1, true), FilterOutcome::Promote);
        // Munmap forgets candidates, including a huge page whose head precedes the range.
        thrice.observe(p, 512, true);
        thrice.observe(p, 700, true);
        thrice.observe(p, 2000, true);
        thrice.remove_range(p, 600, 1000);
        assert_eq!(thrice.candidates(p), vec![2000]);
        assert_eq!(thrice.len(), 1);
    }

    /// Spec §7 oracle 4 (App. B.2): a page of period T ≥ TH accessed periodically has
    /// CIT ~ U[0, T] (random scan phase), so it passes n rounds with probability
    /// (TH/T)^n. Fed through the filter: 1, 2 and 3 rounds; at T = 2·TH: 50%, 25%,
    /// 12.5%.
    #[test]
    fn oracle_04_false_promotion_fraction_is_th_over_t_to_the_n() {
        let mut rng = Rng::new(42);
        let th = 100.0 * MS;
        let pages = 100_000u64;
        for (t_over_th, rounds) in [(2.0, 1), (2.0, 2), (2.0, 3), (4.0, 2), (1.25, 3)] {
            let t = t_over_th * th;
            let mut f = CandidateFilter::new(rounds);
            let mut promoted = 0u64;
            for page in 0..pages {
                // Each round samples a fresh scan phase; stop at the first verdict.
                loop {
                    let cit = (rng.unit() * t) as u64;
                    match f.observe(Pid(0), page, is_hot(cit, th, PageSize::Base, false, 1.0)) {
                        FilterOutcome::Candidate(_) => continue,
                        FilterOutcome::Promote => {
                            promoted += 1;
                            break;
                        }
                        FilterOutcome::Cold | FilterOutcome::Dropped => break,
                    }
                }
            }
            let got = promoted as f64 / pages as f64;
            let want = (1.0 / t_over_th).powi(rounds as i32);
            assert!(
                (got - want).abs() < 0.005,
                "T = {t_over_th}·TH, {rounds} rounds: {got:.4} vs (TH/T)^n = {want:.4}"
            );
        }
    }

    /// Spec §7 oracle 5 (App. B.1): over pairs of U[0, T0] samples, the max-based
    /// estimator (3/2)·max has variance T0²/8 and the mean-based one T0²/6.
    #[test]
    fn oracle_05_max_of_two_estimator_has_lower_variance_than_the_mean() {
        let mut rng = Rng::new(5);
        let t0 = 1.0;
        let n = 400_000;
        let (mut s_max, mut ss_max, mut s_mean, mut ss_mean) = (0.0, 0.0, 0.0, 0.0);
        for _ in 0..n {
            let (a, b) = (rng.unit() * t0, rng.unit() * t0);
            let e_max = 1.5 * a.max(b);
            let e_mean = a + b;
            s_max += e_max;
            ss_max += e_max * e_max;
            s_mean += e_mean;
            ss_mean += e_mean * e_mean;
        }
        let var = |s: f64, ss: f64| ss / n as f64 - (s / n as f64).powi(2);
        assert!((s_max / n as f64 - t0).abs() < 0.005);
        assert!((var(s_max, ss_max) - t0 * t0 / 8.0).abs() < 0.002);
        assert!((var(s_mean, ss_mean) - t0 * t0 / 6.0).abs() < 0.002);
    }

    /// Spec §7 oracle 6 (App. B.2): with cold pages at density h(x) = 1 for x = T/TH > 1
    /// (the uniform case, α = 1), n rounds leave S(n) = ∫₁^∞ x^−n dx cold pages per
    /// hot page; the real-hot ratio is R(n) = 1/(1 + S(n)) and the efficiency
    /// E(n) = R(n)/n = (n−1)/n², largest at n = 2. S(n) integrated numerically.
    #[test]
    fn oracle_06_two_rounds_maximise_selection_efficiency_for_uniform_hotness() {
        let s = |n: i32| -> f64 {
            // ∫₁^X x^−n dx by the midpoint rule on a log grid, X = 1e6.
            let steps = 200_000;
            let (a, b) = (0f64, 6.0 * std::f64::consts::LN_10);
            let h = (b - a) / steps as f64;
            (0..steps)
                .map(|i| {
                    let u = a + (i as f64 + 0.5) * h;
                    let x = u.exp();
                    x.powi(-n) * x * h
                })
                .sum()
        };
        let e = |n: i32| 1.0 / (1.0 + s(n)) / n as f64;
        for n in 2..=7 {
            let closed = (n - 1) as f64 / (n * n) as f64;
            assert!(
                (e(n) - closed).abs() < 1e-4,
                "E({n}) = {} vs {closed}",
                e(n)
            );
        }
        assert!((2..=7).all(|n| e(n) <= e(2) + 1e-12));
        assert!(e(3) < e(2) && e(4) < e(3));
    }

    #[test]
    fn semiauto_moves_threshold_toward_the_rate_limit() {
        let s = SemiAuto {
            delta: 0.5,
            max_ratio: 2.0,
            min_th_ns: MS,
            max_th_ns: 1e9 * MS,
        };
        // Spec worked example: RL 100, ER 400 → r = 0.25 → TH × 0.625.
        assert!((s.update(1000.0 * MS, 100.0, 400.0) - 625.0 * MS).abs() < 1e-6);
        // At the fixed point nothing changes.
        assert_eq!(s.update(300.0 * MS, 100.0, 100.0), 300.0 * MS);
        // Too few enqueues raise it, capped at r = 2 (×1.5); none at all: ×1.5 too.
        assert_eq!(s.update(300.0 * MS, 100.0, 10.0), 450.0 * MS);
        assert_eq!(s.update(300.0 * MS, 100.0, 0.0), 450.0 * MS);
        // Bounds.
        assert_eq!(s.update(1.5 * MS, 1.0, 1e9), MS);
    }

    /// Spec §7 oracle 7: under a stationary load, iterating the update drives the
    /// enqueue rate to the rate limit; doubling RL raises the steady TH; δ = 0.5
    /// converges in fewer periods than δ = 0.1. Load model: N pages with Poisson
    /// rates spread log-uniformly over [0.1, 100]/s, each sampled once per period,
    /// two rounds: a page is enqueued with probability (1 − e^{−λ·TH})².
    #[test]
    fn oracle_07_semiauto_fixed_point_is_enqueue_rate_equal_to_rate_limit() {
        let rates: Vec<f64> = (0..2000)
            .map(|i| 0.1 * 1000f64.powf(i as f64 / 1999.0))
            .collect();
        let period_s = 60.0;
        let page_bytes = PAGE_SIZE as f64;
        let enqueue_rate = |th_ns: f64| -> f64 {
            let th_s = th_ns / 1e9;
            let pages: f64 = rates
                .iter()
                .map(|l| (1.0 - (-l * th_s).exp()).powi(2))
                .sum();
            pages * page_bytes / period_s
        };
        let run = |delta: f64, rl: f64| -> (f64, usize) {
            let s = SemiAuto {
                delta,
                max_ratio: 2.0,
                min_th_ns: MS,
                max_th_ns: 1e12,
            };
            let mut th = 1000.0 * MS;
            let mut converged_at = usize::MAX;
            for i in 0..200 {
                th = s.update(th, rl, enqueue_rate(th));
                let er = enqueue_rate(th);
                if converged_at == usize::MAX && (er / rl - 1.0).abs() < 0.1 {
                    converged_at = i + 1;
                }
            }
            (th, converged_at)
        };
        let rl = 4000.0; // bytes/s: about 58 pages per 60 s period
        let (th, n_fast) = run(0.5, rl);
        assert!(
            (enqueue_rate(th) / rl - 1.0).abs() < 0.01,
            "enqueue rate {} vs rate limit {rl}",
            enqueue_rate(th)
        );
        let (th2, _) = run(0.5, 2.0 * rl);
        assert!(th2 > th, "doubling RL must raise TH: {th2} vs {th}");
        let (_, n_slow) = run(0.1, rl);
        assert!(
            n_fast < n_slow,
            "δ = 0.5 took {n_fast} periods, δ = 0.1 {n_slow}"
        );
    }
}
