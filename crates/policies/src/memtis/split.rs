//! Skewness-aware huge-page split (MEMTIS §4.3): the hit-ratio window (rHR vs eHR),
//! the split count of Eq. (2) and the skewness factor of Eq. (3). Pure logic.

use super::histogram::bin_of;

/// Counts of one benefit-estimation window (§4.3.1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HitWindow {
    /// Window number, to tell which huge pages were already seen in this window.
    pub id: u32,
    /// Samples in the window.
    pub samples: u64,
    /// Samples whose page was in the fast tier (rHR hits).
    pub rhr_hits: u64,
    /// Samples whose 4 KiB (sub)page was hot in the base-page histogram (eHR hits).
    pub ehr_hits: u64,
    /// Samples that hit huge pages.
    pub huge_samples: u64,
    /// Distinct huge pages sampled in the window.
    pub huge_pages_seen: u64,
}

impl HitWindow {
    /// The measured fast-tier hit ratio of the window (0 when empty).
    pub fn rhr(&self) -> f64 {
        ratio(self.rhr_hits, self.samples)
    }

    /// The estimated hit ratio with base pages only (0 when empty).
    pub fn ehr(&self) -> f64 {
        ratio(self.ehr_hits, self.samples)
    }

    /// `avg_samples_hp`: samples per distinct sampled huge page (0 when none).
    pub fn avg_samples_hp(&self) -> f64 {
        ratio(self.huge_samples, self.huge_pages_seen)
    }

    /// Start the next window.
    pub fn reset(&mut self) {
        *self = HitWindow {
            id: self.id.wrapping_add(1),
            ..HitWindow::default()
        };
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// Eq. (2) (§4.3.2), the number of huge pages to split, in the prose/artifact form
/// (spec §2.12 item 3: the printed extra `/L_fast` is dropped):
///
/// `N_s = min((eHR − rHR) · ΔL/L_fast · nr_samples · β / avg_samples_hp,
///            nr_samples / avg_samples_hp)`
///
/// `latency_gap_ratio` is `ΔL / L_fast`. Returns 0 when the benefit is not positive
/// or no huge page was sampled.
pub fn split_count(
    ehr: f64,
    rhr: f64,
    latency_gap_ratio: f64,
    nr_samples: u64,
    avg_samples_hp: f64,
    beta: f64,
) -> u64 {
    if ehr <= rhr || avg_samples_hp <= 0.0 || nr_samples == 0 {
        return 0;
    }
    let distinct = nr_samples as f64 / avg_samples_hp;
    let wanted = (ehr - rhr) * latency_gap_ratio * distinct * beta;
    // The epsilon keeps a product that is an integer on paper from flooring one below.
    (wanted.min(distinct).max(0.0) + 1e-9).floor() as u64
}

/// Eq. (3) (§4.3.2): the skewness factor `S = Σ_j H_ij² / U²` of a huge page whose
/// subpages have hotness `sub_h`, with `U` the number of subpages hot in the
/// base-page histogram (bin ≥ `t_hot_bp`). Returns `(S, U)`; `S = 0` when `U = 0`
/// (no hot subpage: nothing to gain from a split).
pub fn skewness(sub_h: &[u32], t_hot_bp: i32, nr_bins: usize) -> (f64, u32) {
    let mut sum_sq = 0.0f64;
    let mut u = 0u32;
    for &h in sub_h {
        sum_sq += h as f64 * h as f64;
        if bin_of(h, nr_bins) as i32 >= t_hot_bp {
            u += 1;
        }
    }
    if u == 0 {
        (0.0, 0)
    } else {
        (sum_sq / (u as f64 * u as f64), u)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memtis::histogram::DEFAULT_NR_BINS;

    /// Spec §7 oracle 19: Eq. (2), worked by hand.
    #[test]
    fn oracle_19_split_count_formula() {
        // eHR 0.875, rHR 0.25, CXL ΔL/L = (170-80)/80 = 1.125, 100 000 samples, 50 per
        // huge page (2000 distinct huge pages), β = 0.4:
        // 0.625 · 1.125 · 2000 · 0.4 = 562.5 → 562 < 2000.
        assert_eq!(split_count(0.875, 0.25, 1.125, 100_000, 50.0, 0.4), 562);
        // Optane (300 ns): ΔL/L = 2.75 → 1375; NVM splits more than CXL.
        assert_eq!(split_count(0.875, 0.25, 2.75, 100_000, 50.0, 0.4), 1375);
        // The cap: never more than the distinct huge pages sampled.
        assert_eq!(split_count(1.0, 0.0, 10.0, 100_000, 50.0, 0.4), 2000);
        // No benefit, or no huge page sampled: nothing to split.
        assert_eq!(split_count(0.25, 0.25, 1.125, 100_000, 50.0, 0.4), 0);
        assert_eq!(split_count(0.2, 0.3, 1.125, 100_000, 50.0, 0.4), 0);
        assert_eq!(split_count(0.875, 0.25, 1.125, 100_000, 0.0, 0.4), 0);
        // Proportional to the benefit.
        let a = split_count(0.5, 0.375, 1.125, 1_000_000, 10.0, 0.4);
        let b = split_count(0.625, 0.375, 1.125, 1_000_000, 10.0, 0.4);
        assert_eq!((a, b), (5625, 11250));
    }

    /// Spec §7 oracle 20: one hot subpage of hotness h gives S = h²; 512 equally hot
    /// subpages give h²/512, so the first is split first.
    #[test]
    fn oracle_20_skewness_separates_skewed_from_uniform() {
        let h = 4096u32; // bin 12
        let mut one = vec![0u32; 512];
        one[7] = h;
        let (s1, u1) = skewness(&one, 10, DEFAULT_NR_BINS);
        assert_eq!(u1, 1);
        assert_eq!(s1, (h as f64).powi(2));
        let all = vec![h; 512];
        let (s2, u2) = skewness(&all, 10, DEFAULT_NR_BINS);
        assert_eq!(u2, 512);
        assert_eq!(s2, (h as f64).powi(2) / 512.0);
        assert!(s1 > s2);
        // No hot subpage: S = 0.
        assert_eq!(skewness(&one, 13, DEFAULT_NR_BINS), (0.0, 0));
    }

    #[test]
    fn hit_window_ratios() {
        let mut w = HitWindow {
            id: 3,
            samples: 200,
            rhr_hits: 50,
            ehr_hits: 150,
            huge_samples: 180,
            huge_pages_seen: 9,
        };
        assert_eq!(w.rhr(), 0.25);
        assert_eq!(w.ehr(), 0.75);
        assert_eq!(w.avg_samples_hp(), 20.0);
        w.reset();
        assert_eq!(w.id, 4);
        assert_eq!(w.samples, 0);
        assert_eq!(w.avg_samples_hp(), 0.0);
    }
}
