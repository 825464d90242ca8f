//! The oracle's measurement of placement quality per epoch (precision, recall, heat map),
//! and where each process's pages are at the end of a run.

use super::*;

/// Placement quality of one epoch: the fast tier's contents against the epoch's hot
/// set (the pages with the most memory accesses in the epoch, as many as the fast tier
/// holds), plus the epoch's memory accesses binned by address for the heat map.
#[derive(Debug, Clone, PartialEq)]
pub struct EpochPlacement {
    /// Pages in the hot set.
    pub hot_pages: u64,
    /// Pages in the fast tier at the end of the epoch.
    pub fast_pages: u64,
    /// Hot pages that are in the fast tier.
    pub hot_in_fast: u64,
    /// Memory accesses per address bin (pages of all processes in address order).
    pub heat: Vec<u64>,
}

/// One page a placement epoch found accessed: its heat-map bin, its count and whether
/// it is in the fast tier.
#[derive(Debug, Clone, Copy)]
struct TouchedPage {
    bin: u32,
    count: u16,
    fast: bool,
}

/// Buffers [`Machine::placement_epoch`] reuses from one epoch to the next.
#[derive(Debug, Clone, Default)]
pub(crate) struct EpochScratch {
    /// The epoch's accessed pages, in address order.
    touched: Vec<TouchedPage>,
    /// Their counts, reordered to find the hot set's threshold.
    counts: Vec<u16>,
}

impl Machine {
    /// Close a placement epoch: measure, then reset the per-page epoch counters.
    ///
    /// One pass over the kept pages collects the accessed ones; the hot set and the
    /// heat map are then made from those alone (a page with no access is never hot).
    /// Two passes over every kept page took a fifth of a CacheLib run at 1/8 (3 M pages).
    pub fn placement_epoch(&mut self, bins: usize) -> EpochPlacement {
        let budget = self.hot_set_pages;
        let bins = bins.max(1);
        let total_pages: u64 = self
            .spaces
            .iter()
            .flat_map(|s| s.vmas.iter())
            .map(|v| v.vma.nr_pages)
            .sum();
        let sampler = &self.sampler;
        let EpochScratch { touched, counts } = &mut self.placement_scratch;
        touched.clear();
        let mut fast_pages = 0u64;
        // Pages of all processes in address order, for the heat map's bins.
        let mut vma_base = 0u64;
        let mut chunks = Vec::new();
        for (pid, s) in self.spaces.iter_mut().enumerate() {
            for v in s.vmas.iter_mut() {
                let base = vma_base;
                vma_base += v.vma.nr_pages;
                chunks.clear();
                for_sampled_chunks(sampler, pid as u32, v, |range| chunks.push(range));
                for range in chunks.drain(..) {
                    let first = base + range.start as u64;
                    for (index, p) in (first..).zip(v.pages[range].iter_mut()) {
                        let fast = p.tier() == 0;
                        fast_pages += fast as u64;
                        let count = p.epoch_accesses;
                        if count > 0 {
                            let bin = (index * bins as u64 / total_pages.max(1)) as u32;
                            touched.push(TouchedPage { bin, count, fast });
                            p.epoch_accesses = 0;
                        }
                    }
                }
            }
        }
        // Hot set: counts above the threshold, plus ties at it in address order.
        let (threshold, mut tie_room) = if (touched.len() as u64) <= budget {
            (1u16, u64::MAX)
        } else {
            counts.clear();
            counts.extend(touched.iter().map(|t| t.count));
            let k = counts.len() - budget as usize;
            let (_, t, _) = counts.select_nth_unstable(k);
            let t = *t;
            let above = counts.iter().filter(|&&c| c > t).count() as u64;
            (t, budget - above)
        };
        let mut out = EpochPlacement {
            hot_pages: 0,
            fast_pages,
            hot_in_fast: 0,
            heat: vec![0; bins],
        };
        for t in touched.iter() {
            let hot = t.count > threshold
                || (t.count == threshold && tie_room > 0 && {
                    tie_room -= 1;
                    true
                });
            out.hot_pages += hot as u64;
            out.hot_in_fast += (hot && t.fast) as u64;
            out.heat[t.bin as usize] += t.count as u64;
        }
        out
    }
}

impl Machine {
    /// Resident and fast-tier base pages of each process, in process-id order, in
    /// pages of the full machine (what the run's summary reports per process). Only
    /// the kept pages are walked; a huge page's subpages carry its tier (an invariant
    /// `check_invariants` holds).
    pub fn pages_by_process(&self) -> Vec<(u64, u64)> {
        let full = |n: u64| (n as f64 * self.event_weight).round() as u64;
        self.spaces
            .iter()
            .enumerate()
            .map(|(pid, s)| {
                let (mut resident, mut fast) = (0u64, 0u64);
                for v in &s.vmas {
                    for_sampled_chunks(&self.sampler, pid as u32, v, |range| {
                        for p in &v.pages[range] {
                            resident += u64::from(p.present());
                            fast += u64::from(p.present() && TierId(p.tier()).is_fast());
                        }
                    });
                }
                (full(resident), full(fast))
            })
            .collect()
    }
}

/// Call `f` with each index range of `v`'s pages that the sampler keeps (the whole
/// VMA when exact), in address order.
fn for_sampled_chunks(
    sampler: &RegionSampler,
    pid: u32,
    v: &VmaState,
    mut f: impl FnMut(std::ops::Range<usize>),
) {
    if sampler.keeps_all() {
        f(0..v.pages.len());
        return;
    }
    let start = v.vma.start_vpn;
    sampler.for_kept_runs(pid, &v.strata, start, v.vma.end_vpn(), |from, to| {
        f((from - start) as usize..(to - start) as usize)
    });
}
