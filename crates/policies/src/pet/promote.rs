//! PET's promotion budget (PET §4.3, Fig. 9), without the machine.
//!
//! The system-wide fake-fault rate PET tolerates comes from Thermostat's equation:
//!
//! ```text
//! R_promo  = tolerable slowdown × canary ratio / mis-demotion penalty
//!          = 0.03 × 0.10 / 8.3 µs = 361.4 /s                 (paper: "360 faults/sec")
//! th_total = ⌊R_promo × sampling interval⌋ = ⌊180.7⌋ = 180 faults per 500 ms
//! th_block(b) = th_total × size(b) / Σ size(DEMOTED)          (Fig. 9-(a))
//! ```
//!
//! A canary fault counts against its block and against the interval's total. A block
//! whose count reaches its `th_block` is handed to `kpromoted` (Fig. 9-(b)); once the
//! total reaches `th_total`, every block that faulted in the interval is handed over,
//! and so is any block that faults later in it (Fig. 9-(c)). Counters reset at every
//! sampling-interval boundary, where `th_block` is recomputed from the DEMOTED sizes.
//!
//! `th_total` is floored to whole faults so that the paper's 360/s gives its 180 per
//! interval; "reaches" (Fig. 9 caption) is read as `≥` (spec §2.5 [unspecified]).

use std::collections::BTreeMap;

/// R_promo, faults per second: `tolerable_slowdown_pct`% × `canary_ratio_pct`% /
/// `penalty_us` µs.
pub fn r_promo(tolerable_slowdown_pct: f64, canary_ratio_pct: f64, penalty_us: f64) -> f64 {
    (tolerable_slowdown_pct / 100.0) * (canary_ratio_pct / 100.0) / (penalty_us * 1e-6)
}

/// th_total: whole faults per sampling interval of `sampling_interval_ms`, at least
/// one (a budget below one fault per interval — a sampled run at 1/256, or a tiny
/// tolerable slowdown — is reached by the interval's first fault, which is what a
/// fractional budget would do too).
pub fn th_total(r_promo_per_s: f64, sampling_interval_ms: u64) -> u64 {
    ((r_promo_per_s * sampling_interval_ms as f64 / 1000.0).floor() as u64).max(1)
}

/// th_block of a DEMOTED block of `pages` when all DEMOTED blocks hold `total_pages`.
pub fn th_block(th_total: u64, pages: u64, total_pages: u64) -> f64 {
    if total_pages == 0 {
        th_total as f64
    } else {
        th_total as f64 * pages as f64 / total_pages as f64
    }
}

/// Fault counting over one sampling interval, per DEMOTED block `K`.
#[derive(Debug, Clone)]
pub struct PromoBudget<K: Ord + Copy> {
    th_total: u64,
    /// Σ size of DEMOTED blocks when `th_block` was last computed, pages.
    total_pages: u64,
    th_block: BTreeMap<K, f64>,
    /// Faults of each block in this interval.
    faults: BTreeMap<K, u64>,
    /// Faults of all blocks in this interval.
    nr_faults: u64,
    /// th_total was reached in this interval.
    exhausted: bool,
    /// Blocks already handed to kpromoted in this interval.
    requested: Vec<K>,
    /// Intervals in which th_total was reached.
    nr_exhausted: u64,
}

impl<K: Ord + Copy> PromoBudget<K> {
    /// A budget of `th_total` faults per interval, nothing demoted yet.
    pub fn new(th_total: u64) -> PromoBudget<K> {
        PromoBudget {
            th_total,
            total_pages: 0,
            th_block: BTreeMap::new(),
            faults: BTreeMap::new(),
            nr_faults: 0,
            exhausted: false,
            requested: Vec::new(),
            nr_exhausted: 0,
        }
    }

    /// th_total.
    pub fn th_total(&self) -> u64 {
        self.th_total
    }

    /// The current th_block of `k` (None if `k` was not DEMOTED at the last
    /// rollover).
    pub fn th_block(&self, k: K) -> Option<f64> {
        self.th_block.get(&k).copied()
    }

    /// Faults counted in this interval.
    pub fn nr_faults(&self) -> u64 {
        self.nr_faults
    }

    /// Intervals in which th_total was reached.
    pub fn nr_exhausted(&self) -> u64 {
        self.nr_exhausted
    }

    /// Σ DEMOTED size th_block was computed from, pages.
    pub fn total_pages(&self) -> u64 {
        self.total_pages
    }

    /// A canary fault on DEMOTED block `k`: the blocks to hand to kpromoted now
    /// (each at most once per interval).
    pub fn on_fault(&mut self, k: K) -> Vec<K> {
        self.nr_faults += 1;
        let n = {
            let c = self.faults.entry(k).or_insert(0);
            *c += 1;
            *c
        };
        if self.requested.contains(&k) {
            return Vec::new();
        }
        if !self.exhausted && self.nr_faults >= self.th_total {
            // Fig. 9-(c): every block accessed in this interval goes.
            self.exhausted = true;
            self.nr_exhausted += 1;
            let all: Vec<K> = self
                .faults
                .keys()
                .copied()
                .filter(|b| !self.requested.contains(b))
                .collect();
            self.requested.extend(all.iter().copied());
            return all;
        }
        let th = self
            .th_block
            .get(&k)
            .copied()
            .unwrap_or(self.th_total as f64);
        if self.exhausted || n as f64 >= th {
            self.requested.push(k);
            return vec![k];
        }
        Vec::new()
    }

    /// End of a sampling interval: reset every counter and recompute th_block from
    /// the DEMOTED blocks `(key, pages)` now. Their values change only if Σ size
    /// changed (a block's share of an unchanged total is unchanged).
    pub fn rollover(&mut self, demoted: &[(K, u64)]) {
        self.faults.clear();
        self.requested.clear();
        self.nr_faults = 0;
        self.exhausted = false;
        self.total_pages = demoted.iter().map(|&(_, p)| p).sum();
        self.th_block = demoted
            .iter()
            .map(|&(k, p)| (k, th_block(self.th_total, p, self.total_pages)))
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oracle_14_r_promo_and_th_total_are_the_papers_360_per_s_and_180_per_interval() {
        // Spec oracle 14: 0.03 × 0.10 / 8.3 µs = 361.4 /s, the paper's "360".
        let r = r_promo(3.0, 10.0, 8.3);
        assert!((r - 361.445).abs() < 0.01, "{r}");
        assert_eq!(th_total(r, 500), 180);
        // Thermostat's own penalty (1 µs) without canaries: 3% / 1 µs = 30 000/s.
        assert!((r_promo(3.0, 100.0, 1.0) - 30_000.0).abs() < 1e-6);
        assert_eq!(th_total(r, 1000), 361);
        // Below one fault per interval (PET at 1/256: R_promo 1.4/s): one.
        assert_eq!(th_total(r / 256.0, 500), 1);
        // th_block in proportion to size.
        assert_eq!(th_block(180, 1, 4), 45.0);
        assert_eq!(th_block(180, 3, 4), 135.0);
    }

    #[test]
    fn a_single_demoted_block_is_promoted_on_its_180th_fault() {
        let mut b = PromoBudget::new(180);
        b.rollover(&[(7u32, 1000)]);
        assert_eq!(b.th_block(7), Some(180.0));
        for i in 1..180 {
            assert!(b.on_fault(7).is_empty(), "fault {i} must not promote");
        }
        assert_eq!(b.on_fault(7), vec![7]);
        // Handed over once per interval.
        assert!(b.on_fault(7).is_empty());
    }

    #[test]
    fn oracle_15_first_fault_promotes_only_when_th_block_is_at_most_one() {
        // Spec oracle 15. 180 × 1/100 = 1.8: the first fault does not promote.
        let mut b = PromoBudget::new(180);
        b.rollover(&[(1u32, 1), (2, 99)]);
        assert!(b.on_fault(1).is_empty());
        assert_eq!(b.on_fault(1), vec![1]);
        // 180 × 1/200 = 0.9 ≤ 1: the first fault promotes.
        let mut b = PromoBudget::new(180);
        b.rollover(&[(1u32, 1), (2, 199)]);
        assert_eq!(b.on_fault(1), vec![1]);
    }

    #[test]
    fn oracle_16_reaching_th_total_promotes_every_block_that_faulted_then_any_later_one() {
        // Spec oracle 16: ten equal blocks, th_block = 18 each; 18 faults short of
        // that on each of ten blocks makes 170, then 10 more on block 0 reach 180.
        let mut b = PromoBudget::new(180);
        let blocks: Vec<(u32, u64)> = (0..11).map(|k| (k, 100)).collect();
        b.rollover(&blocks);
        let th = b.th_block(0).unwrap();
        assert!((th - 180.0 / 11.0).abs() < 1e-9);
        let mut promoted = Vec::new();
        for k in 0..10u32 {
            for _ in 0..16 {
                promoted.extend(b.on_fault(k));
            }
        }
        assert!(promoted.is_empty(), "160 faults, none at its th_block");
        for _ in 0..19 {
            promoted.extend(b.on_fault(10));
        }
        // Block 10 reached th_block (16.4) on its 17th fault, before the total hit
        // 180: then, at 180, all of blocks 0..9 go together.
        assert_eq!(promoted[0], 10);
        assert_eq!(b.nr_faults(), 179);
        promoted.extend(b.on_fault(3));
        let mut all = promoted.clone();
        all.sort();
        assert_eq!(all, (0..11).collect::<Vec<_>>());
        assert_eq!(b.nr_exhausted(), 1);
        // A block faulting after exhaustion is promoted at once: add a new block.
        b.rollover(&[(20u32, 100), (21, 100)]);
        for _ in 0..180 {
            b.on_fault(20);
        }
        assert_eq!(b.on_fault(21), vec![21], "first fault after th_total");
    }

    #[test]
    fn oracle_17_counters_reset_each_interval_so_th_block_minus_one_per_interval_never_promotes() {
        // Spec oracle 17.
        let mut b = PromoBudget::new(180);
        let demoted = [(1u32, 100), (2, 100)];
        b.rollover(&demoted);
        for _ in 0..50 {
            for _ in 0..89 {
                assert!(b.on_fault(1).is_empty());
            }
            b.rollover(&demoted);
        }
    }

    #[test]
    fn oracle_18_th_block_changes_only_when_the_total_demoted_size_changes() {
        // Spec oracle 18.
        let mut b = PromoBudget::new(180);
        b.rollover(&[(1u32, 100), (2, 300)]);
        assert_eq!(b.th_block(1), Some(45.0));
        b.rollover(&[(1u32, 100), (2, 300)]);
        assert_eq!(b.th_block(1), Some(45.0));
        // Block 2 promoted: block 1 now holds the whole budget.
        b.rollover(&[(1u32, 100)]);
        assert_eq!(b.th_block(1), Some(180.0));
        assert_eq!(b.total_pages(), 100);
    }
}
