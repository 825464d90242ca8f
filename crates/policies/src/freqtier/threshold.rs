//! The hot-page histogram and the dynamic hot threshold (§V-C-a).

use super::*;

/// How many tracked pages have each estimated count (spec §2.12: a CBF cannot
/// enumerate its keys, so the histogram is kept incrementally as estimates change).
///
/// It follows each *sampled* page's own estimate; pages whose estimate rose only
/// through collisions are not in it (the filter cannot tell), so it approximates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HotHistogram {
    /// `pages[v]`: pages whose estimate is `v`, for `v` in 1..=15 (`pages[0]` unused).
    pub pages: [u64; MAX_COUNT as usize + 1],
}

impl HotHistogram {
    /// A page's estimate moved from `old` to `new`.
    pub fn record(&mut self, old: u8, new: u8) {
        if old == new {
            return;
        }
        if old > 0 {
            self.pages[old as usize] = self.pages[old as usize].saturating_sub(1);
        }
        if new > 0 {
            self.pages[new as usize] += 1;
        }
    }

    /// Every counter was halved: a page at `v` is now at `v / 2`; those reaching 0
    /// leave the histogram.
    pub fn age(&mut self) {
        let mut next = [0u64; MAX_COUNT as usize + 1];
        for v in 1..=MAX_COUNT as usize {
            next[v / 2] += self.pages[v];
        }
        next[0] = 0;
        self.pages = next;
    }

    /// Pages whose estimate is at least `threshold`.
    pub fn hot_pages(&self, threshold: u8) -> u64 {
        self.pages[threshold.max(1) as usize..].iter().sum()
    }
}

/// One step of the dynamic hot threshold (§V-C-a): raise it when the hot pages
/// exceed `capacity_pages`, lower it when the pages one step below would still fit,
/// within `[min, 15]`. Repeated, it settles on the lowest threshold whose hot pages
/// fit the fast tier.
pub fn step_hot_threshold(threshold: u8, hist: &HotHistogram, capacity_pages: u64, min: u8) -> u8 {
    if hist.hot_pages(threshold) > capacity_pages && threshold < MAX_COUNT {
        threshold + 1
    } else if threshold > min && hist.hot_pages(threshold - 1) <= capacity_pages {
        threshold - 1
    } else {
        threshold
    }
}
