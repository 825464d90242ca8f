//! The page access histogram (MEMTIS §4.1.3), the hot/warm/cold classes and the
//! threshold adaptation of Algorithm 1 (§4.2.1). Pure logic, no mechanisms.
//!
//! A histogram has `nr_bins` exponential bins: bin `n` holds hotness `H` in
//! `[2^n, 2^(n+1))`, bin 0 also holds `H = 0` (never-sampled pages), and the last bin
//! has no upper bound. Each bin counts **4 KiB pages**: a huge page adds 512 to the
//! bin of its own hotness (§4.1.3, "counting at 4KB granularity").

/// Bins of the paper's histogram (§4.1.3, "16 bins by default").
pub const DEFAULT_NR_BINS: usize = 16;

/// The bin of hotness `h` in a histogram of `nr_bins` bins: `floor(log2 h)` capped at
/// the last bin, and 0 for `h < 2` (MEMTIS §4.1.3; the paper's edges, not the
/// artifact's off-by-one `log2(h + 1)`).
#[inline]
pub fn bin_of(h: u32, nr_bins: usize) -> usize {
    if h < 2 {
        0
    } else {
        ((31 - h.leading_zeros()) as usize).min(nr_bins - 1)
    }
}

/// The hotness at the lower edge of bin `bin` (`2^bin`), saturating at `u32::MAX`;
/// bins below 0 give 0. Used for the initial hotness of new pages (§4.2.1).
#[inline]
pub fn bin_floor(bin: i32) -> u32 {
    if bin < 0 {
        0
    } else if bin >= 32 {
        u32::MAX
    } else {
        1u32 << bin
    }
}

/// An exponential-bin histogram of page hotness, in 4 KiB pages per bin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Histogram {
    bins: Vec<u64>,
}

impl Histogram {
    /// An empty histogram of `nr_bins` bins.
    pub fn new(nr_bins: usize) -> Histogram {
        assert!(nr_bins >= 2, "a histogram needs at least 2 bins");
        Histogram {
            bins: vec![0; nr_bins],
        }
    }

    /// The number of bins.
    pub fn nr_bins(&self) -> usize {
        self.bins.len()
    }

    /// Pages per bin, bin 0 first.
    pub fn bins(&self) -> &[u64] {
        &self.bins
    }

    /// Pages counted over all bins: the tracked memory in 4 KiB pages.
    pub fn total(&self) -> u64 {
        self.bins.iter().sum()
    }

    /// Pages in bins `lo..=hi` (an empty or out-of-range span counts what it covers).
    pub fn pages_in(&self, lo: i32, hi: i32) -> u64 {
        let lo = lo.max(0) as usize;
        let hi = hi.min(self.bins.len() as i32 - 1);
        if hi < 0 || lo > hi as usize {
            return 0;
        }
        self.bins[lo..=hi as usize].iter().sum()
    }

    /// Count `pages` more pages in `bin`.
    #[inline]
    pub fn add(&mut self, bin: usize, pages: u64) {
        self.bins[bin] += pages;
    }

    /// Count `pages` fewer pages in `bin`.
    #[inline]
    pub fn remove(&mut self, bin: usize, pages: u64) {
        debug_assert!(self.bins[bin] >= pages, "histogram bin {bin} underflow");
        self.bins[bin] = self.bins[bin].saturating_sub(pages);
    }

    /// Move `pages` from bin `from` to bin `to` (a page's hotness crossed a bin edge;
    /// §4.1.3: "decrements the page count in bin 6 and increments ... bin 7").
    #[inline]
    pub fn shift(&mut self, from: usize, to: usize, pages: u64) {
        if from != to {
            self.remove(from, pages);
            self.add(to, pages);
        }
    }

    /// Cooling (§4.2.2): every page's hotness is halved, so every bin moves one bin to
    /// the left; bin 0 keeps its pages (0 and 1 halve to 0). Pages of the unbounded
    /// last bin that are still at or above its lower edge after halving must be moved
    /// back by the caller (the paper's "corrects the histogram if necessary").
    pub fn cool(&mut self) {
        let n = self.bins.len();
        self.bins[0] += self.bins[1];
        for b in 1..n - 1 {
            self.bins[b] = self.bins[b + 1];
        }
        self.bins[n - 1] = 0;
    }
}

/// The bin the cooling shift of [`Histogram::cool`] assumes a page of bin `bin` moves
/// to; the caller corrects pages whose real new bin differs.
#[inline]
pub fn cooled_bin(bin: usize) -> usize {
    bin.saturating_sub(1)
}

/// The class of a page by its bin (§4.2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// `T_hot ≤ B`: belongs in the fast tier.
    Hot,
    /// `T_cold < B ≤ T_warm` and not hot: left where it is.
    Warm,
    /// `B ≤ T_cold`: a demotion victim.
    Cold,
}

/// The three thresholds, as bin indices (§4.2.1). `hot` ranges over `0..=nr_bins`
/// (`nr_bins`: even the top bin overflows the fast tier, nothing is hot); `warm` and
/// `cold` may be negative (no page is that cold).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    /// `T_hot`.
    pub hot: i32,
    /// `T_warm`: `T_hot` (no warm band) or `T_hot - 1`.
    pub warm: i32,
    /// `T_cold = T_warm - 1`.
    pub cold: i32,
}

impl Thresholds {
    /// The start-up thresholds: `T_hot = T_warm = hot`, `T_cold = hot - 1` (§4.2.1:
    /// 1, 1, 0).
    pub fn initial(hot: i32) -> Thresholds {
        Thresholds {
            hot,
            warm: hot,
            cold: hot - 1,
        }
    }

    /// The class of a page in bin `bin`.
    #[inline]
    pub fn class(&self, bin: usize) -> Class {
        let b = bin as i32;
        if b >= self.hot {
            Class::Hot
        } else if b <= self.cold {
            Class::Cold
        } else {
            Class::Warm
        }
    }
}

/// The result of one threshold adaptation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Adaptation {
    /// The new thresholds.
    pub thresholds: Thresholds,
    /// `s`: pages in bins `≥ T_hot`, the identified hot set (≤ the fast tier).
    pub hot_set_pages: u64,
}

/// Algorithm 1 (§4.2.1) on `hist` for a fast tier of `fast_pages` 4 KiB pages.
///
/// Line 2 is read as `b ≥ 0 and s + HS_b ≤ MS_fast` (the printed `or` would always
/// run to `b = -1`; spec §2.12 item 1): take bins from the hottest down while they fit.
/// When even the top bin does not fit, `T_hot = nr_bins` (nothing is hot; the
/// artifact clamps to the last bin instead). The warm band (`T_warm = T_hot - 1`)
/// exists when `s ≤ alpha · MS_fast` and `warm_set` is on (the ablation switch turns
/// it off: `T_warm = T_hot`).
pub fn adapt(hist: &Histogram, fast_pages: u64, alpha: f64, warm_set: bool) -> Adaptation {
    let mut s = 0u64;
    let mut b = hist.nr_bins() as i32 - 1;
    while b >= 0 && s + hist.bins()[b as usize] <= fast_pages {
        s += hist.bins()[b as usize];
        b -= 1;
    }
    let hot = b + 1;
    let warm = if !warm_set || s as f64 > fast_pages as f64 * alpha {
        hot
    } else {
        hot - 1
    };
    Adaptation {
        thresholds: Thresholds {
            hot,
            warm,
            cold: warm - 1,
        },
        hot_set_pages: s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(bins: &[(usize, u64)]) -> Histogram {
        let mut h = Histogram::new(DEFAULT_NR_BINS);
        for &(b, n) in bins {
            h.add(b, n);
        }
        h
    }

    /// Spec §7 oracle 4 and §2.4: bin n holds [2^n, 2^(n+1)); 0 joins bin 0; the last
    /// bin is unbounded.
    #[test]
    fn oracle_04_bins_are_exponential_with_paper_edges() {
        let n = DEFAULT_NR_BINS;
        let cases = [
            (0, 0),
            (1, 0),
            (2, 1),
            (3, 1),
            (4, 2),
            (511, 8),
            (512, 9),
            (1023, 9),
            (1024, 10),
            (1 << 15, 15),
            ((1 << 15) - 1, 14),
            (1 << 20, 15),
            (u32::MAX, 15),
        ];
        for (h, bin) in cases {
            assert_eq!(bin_of(h, n), bin, "H = {h}");
        }
        assert_eq!(bin_of(1 << 20, 32), 20);
        assert_eq!(bin_floor(9), 512);
        assert_eq!(bin_floor(-1), 0);
        assert_eq!(bin_floor(40), u32::MAX);
    }

    /// Spec §7 oracle 1: the hot set is filled from the hottest bin down and stops
    /// before the bin that would overflow the fast tier.
    #[test]
    fn oracle_01_threshold_fills_fast_tier_from_hottest_bin_down() {
        // 100-page fast tier; bins 15..12 hold 10+20+30+50 pages.
        let h = hist(&[(15, 10), (14, 20), (13, 30), (12, 50), (3, 1000)]);
        let a = adapt(&h, 100, 0.9, true);
        // 10+20+30 = 60 fits, +50 = 110 does not: T_hot = 13.
        assert_eq!(a.hot_set_pages, 60);
        assert_eq!(a.thresholds.hot, 13);
        // 60 ≤ 90 → warm band one bin below.
        assert_eq!(a.thresholds.warm, 12);
        assert_eq!(a.thresholds.cold, 11);
        // Empty bins cost nothing: with bin 12 at 35 pages everything down to bin 4 fits.
        let h = hist(&[(15, 10), (14, 20), (13, 30), (12, 35), (3, 1000)]);
        let a = adapt(&h, 100, 0.9, true);
        assert_eq!(a.hot_set_pages, 95);
        assert_eq!(a.thresholds.hot, 4);
        // 95 > 90: no warm band.
        assert_eq!(a.thresholds.warm, 4);
        assert_eq!(a.thresholds.cold, 3);
    }

    #[test]
    fn threshold_extremes() {
        // Everything fits: T_hot = 0, the hot set is the whole histogram.
        let h = hist(&[(0, 5), (9, 5)]);
        let a = adapt(&h, 100, 0.9, true);
        assert_eq!(a.thresholds.hot, 0);
        assert_eq!(a.hot_set_pages, 10);
        assert_eq!(a.thresholds.warm, -1);
        // Even the top bin overflows: nothing is hot (paper: T_hot = max + 1).
        let h = hist(&[(15, 101)]);
        let a = adapt(&h, 100, 0.9, true);
        assert_eq!(a.thresholds.hot, 16);
        assert_eq!(a.hot_set_pages, 0);
        // The warm-set ablation never opens a band.
        let h = hist(&[(15, 10), (12, 500)]);
        let a = adapt(&h, 100, 0.9, false);
        assert_eq!(a.thresholds.hot, 13);
        assert_eq!(a.thresholds.warm, 13);
        assert_eq!(a.thresholds.cold, 12);
    }

    /// Spec §7 oracle 3: T_warm ∈ {T_hot, T_hot-1}, T_cold = T_warm - 1, warm band
    /// exactly when s ≤ α·MS_fast; and oracle 1: s ≤ MS_fast, and either T_hot = 0 or
    /// the next lower bin would overflow.
    #[test]
    fn oracle_01_03_threshold_invariants_hold_on_many_histograms() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            let mut h = Histogram::new(DEFAULT_NR_BINS);
            for b in 0..DEFAULT_NR_BINS {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                h.add(b, x % 64);
            }
            let fast = 1 + x % 600;
            let a = adapt(&h, fast, 0.9, true);
            let t = a.thresholds;
            assert!(a.hot_set_pages <= fast);
            assert_eq!(a.hot_set_pages, h.pages_in(t.hot, 15));
            assert!(t.hot == 0 || a.hot_set_pages + h.bins()[t.hot as usize - 1] > fast);
            assert!(t.warm == t.hot || t.warm == t.hot - 1);
            assert_eq!(t.cold, t.warm - 1);
            assert_eq!(
                t.warm == t.hot - 1,
                a.hot_set_pages as f64 <= 0.9 * fast as f64
            );
        }
    }

    /// Spec §7 oracle 6: cooling shifts every bin one to the left, bin 0 absorbs bin 1,
    /// and the total is unchanged.
    #[test]
    fn oracle_06_cooling_shifts_bins_left_and_conserves_pages() {
        let mut h = hist(&[(0, 3), (1, 4), (2, 5), (9, 7), (15, 11)]);
        let before = h.total();
        h.cool();
        assert_eq!(h.total(), before);
        assert_eq!(h.bins()[0], 7);
        assert_eq!(h.bins()[1], 5);
        assert_eq!(h.bins()[8], 7);
        assert_eq!(h.bins()[14], 11);
        assert_eq!(h.bins()[15], 0);
        // For every bin but the last, halving H lands exactly where the shift put it.
        for b in 0..DEFAULT_NR_BINS - 1 {
            for h in [bin_floor(b as i32), bin_floor(b as i32 + 1) - 1] {
                assert_eq!(bin_of(h / 2, DEFAULT_NR_BINS), cooled_bin(b), "H = {h}");
            }
        }
        // The last bin is unbounded: a very hot page stays there (the correction case).
        assert_eq!(bin_of((1 << 17) / 2, DEFAULT_NR_BINS), 15);
    }

    #[test]
    fn classes_follow_thresholds() {
        let t = Thresholds {
            hot: 10,
            warm: 9,
            cold: 8,
        };
        assert_eq!(t.class(12), Class::Hot);
        assert_eq!(t.class(10), Class::Hot);
        assert_eq!(t.class(9), Class::Warm);
        assert_eq!(t.class(8), Class::Cold);
        assert_eq!(t.class(0), Class::Cold);
        let t = Thresholds::initial(1);
        assert_eq!((t.hot, t.warm, t.cold), (1, 1, 0));
        assert_eq!(t.class(1), Class::Hot);
        assert_eq!(t.class(0), Class::Cold);
    }
}
