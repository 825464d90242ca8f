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

/// One page a placement epoch found accessed: its place among the pages of all
/// processes in address order, its heat-map bin, its count and whether it is in the
/// fast tier.
#[derive(Debug, Clone, Copy)]
struct TouchedPage {
    index: u64,
    bin: u32,
    count: u16,
    fast: bool,
}

/// A page whose epoch count an access raised from zero: where its state is.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AccessedPage {
    pid: u32,
    vma: u32,
    page: u64,
}

/// Buffers [`Machine::placement_epoch`] reuses from one epoch to the next, and the
/// pages accessed since the last epoch.
#[derive(Debug, Clone)]
pub(crate) struct EpochScratch {
    /// Every page whose count went from zero to one since the last epoch (a page
    /// freed and accessed again may appear twice), while the VMAs have not changed and
    /// the list is no longer than `list_limit`.
    accessed: Vec<AccessedPage>,
    /// The longest list worth keeping: an eighth of the kept pages the last walk
    /// visited. Reading a list entry costs a random read where the walk reads on in
    /// order, so an epoch that touches more of the kept pages (GUPS at 1/256: 120 k of
    /// 128 k each second) walks instead.
    list_limit: usize,
    /// The next epoch walks every kept page: a mapping was made or removed since the
    /// last epoch (`accessed` may name VMAs by stale positions), or the list outgrew
    /// `list_limit`.
    walk_next: bool,
    /// The epoch's accessed pages.
    touched: Vec<TouchedPage>,
    /// Their counts, reordered to find the hot set's threshold.
    counts: Vec<u16>,
    /// The pages at the threshold (index, fast), reordered to find the lowest addresses.
    ties: Vec<(u64, bool)>,
}

impl Default for EpochScratch {
    fn default() -> Self {
        EpochScratch {
            accessed: Vec::new(),
            list_limit: 0,
            walk_next: true,
            touched: Vec::new(),
            counts: Vec::new(),
            ties: Vec::new(),
        }
    }
}

impl EpochScratch {
    /// Note a page whose epoch count an access is about to raise from zero.
    #[inline]
    pub(crate) fn note_accessed(&mut self, pid: u32, vma: usize, page: usize) {
        // The list's room is reserved when its limit is set, so this push never
        // allocates (no call on the access's fast path).
        let len = self.accessed.len();
        if len < self.list_limit && len < self.accessed.capacity() {
            self.accessed.push(AccessedPage {
                pid,
                vma: vma as u32,
                page: page as u64,
            });
        } else {
            self.walk_next = true;
        }
    }

    /// A mapping was made or removed.
    pub(crate) fn note_vmas_changed(&mut self) {
        self.walk_next = true;
    }
}

impl Machine {
    /// Close a placement epoch: measure, then reset the per-page epoch counters.
    ///
    /// The epoch's accessed pages come from the list the accesses kept
    /// ([`EpochScratch::note_accessed`]), so an epoch costs what it touched, not what
    /// the run keeps: a pass over every kept page took a quarter of an `all-fast`
    /// CacheLib run at 1/8 (2 M pages, 300 epochs). After a mapping changed, the list
    /// may name VMAs by stale positions, and where the epoch touched more than an
    /// eighth of the kept pages the list costs more than a walk; then the epoch walks
    /// every kept page once, as it did before. The hot set and the heat map are made
    /// from the accessed pages alone (a page with no access is never hot); the fast
    /// tier's pages are the tier's count (a resident page is always a kept one).
    pub fn placement_epoch(&mut self, bins: usize) -> EpochPlacement {
        let budget = self.hot_set_pages;
        let bins = bins.max(1);
        // Where each VMA's pages start among all processes' pages in address order
        // (the heat map's bins, and the order that breaks ties in the hot set).
        let mut bases: Vec<Vec<u64>> = Vec::with_capacity(self.spaces.len());
        let mut total_pages = 0u64;
        for s in &self.spaces {
            bases.push(
                s.vmas
                    .iter()
                    .map(|v| {
                        let base = total_pages;
                        total_pages += v.vma.nr_pages;
                        base
                    })
                    .collect(),
            );
        }
        let sampler = &self.sampler;
        let EpochScratch {
            accessed,
            list_limit,
            walk_next,
            touched,
            counts,
            ties,
        } = &mut self.placement_scratch;
        touched.clear();
        // Take a page's count for this epoch, if it has one.
        let mut take = |index: u64, p: &mut PageState| {
            let count = std::mem::take(&mut p.epoch_accesses);
            if count > 0 {
                touched.push(TouchedPage {
                    index,
                    bin: (index * bins as u64 / total_pages.max(1)) as u32,
                    count,
                    fast: p.tier() == 0,
                });
            }
        };
        if std::mem::take(walk_next) {
            accessed.clear();
            let (mut fast_seen, mut kept_seen) = (0u64, 0usize);
            let mut chunks = Vec::new();
            for (pid, s) in self.spaces.iter_mut().enumerate() {
                for (v, &base) in s.vmas.iter_mut().zip(&bases[pid]) {
                    chunks.clear();
                    for_sampled_chunks(sampler, pid as u32, v, |range| chunks.push(range));
                    for range in chunks.drain(..) {
                        kept_seen += range.len();
                        let first = base + range.start as u64;
                        for (index, p) in (first..).zip(v.pages[range].iter_mut()) {
                            fast_seen += (p.tier() == 0) as u64;
                            take(index, p);
                        }
                    }
                }
            }
            debug_assert_eq!(
                fast_seen, self.tiers[0].used,
                "fast pages outside kept units"
            );
            *list_limit = kept_seen / 8;
            accessed.reserve(*list_limit);
        } else {
            // A page listed twice finds its count taken by the first read (or the page
            // freed since): zero, skipped.
            for a in accessed.drain(..) {
                let (pid, vma) = (a.pid as usize, a.vma as usize);
                let p = &mut self.spaces[pid].vmas[vma].pages[a.page as usize];
                take(bases[pid][vma] + a.page, p);
            }
        }
        // Hot set: counts above the threshold, plus as many ties at it as there is room
        // for, lowest addresses first.
        let (threshold, tie_room) = if (touched.len() as u64) <= budget {
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
            fast_pages: self.tiers[0].used,
            hot_in_fast: 0,
            heat: vec![0; bins],
        };
        ties.clear();
        for t in touched.iter() {
            out.heat[t.bin as usize] += t.count as u64;
            if t.count > threshold {
                out.hot_pages += 1;
                out.hot_in_fast += t.fast as u64;
            } else if t.count == threshold {
                ties.push((t.index, t.fast));
            }
        }
        if (ties.len() as u64) > tie_room {
            ties.select_nth_unstable_by_key(tie_room as usize, |&(index, _)| index);
            ties.truncate(tie_room as usize);
        }
        out.hot_pages += ties.len() as u64;
        out.hot_in_fast += ties.iter().filter(|&&(_, fast)| fast).count() as u64;
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
