//! The demotion scan (Algorithm 2, as corrected by spec §2.6; §V-B1).

use super::*;

/// A position in the scanned address space: processes in pid order, each in address
/// order (FreqTier tiers one process; several are scanned one after another).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ScanPos {
    /// Process.
    pub pid: Pid,
    /// Page.
    pub vpn: Vpn,
}

impl ScanPos {
    /// The start of the address space.
    pub const START: ScanPos = ScanPos {
        pid: Pid(0),
        vpn: 0,
    };
}

/// The result of one demotion round.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanOutcome {
    /// Cold fast-tier page units found: (process, page, base pages).
    pub cold: Vec<(Pid, Vpn, u64)>,
    /// Virtual pages scanned.
    pub scanned_pages: u64,
    /// Placement reads issued (one per `batch_pages` at most).
    pub reads: u64,
    /// The round covered the whole address space once.
    pub full_pass: bool,
}

/// Algorithm 2 with the semantics the prose intends (spec §2.6): resume at the
/// checkpoint, walk the VMAs reading placement `batch_pages` at a time, collect
/// fast-tier pages the caller calls cold until `need_pages` are found or one full
/// pass is done, wrapping from the last VMA to the first (Fig. 7), and checkpoint the
/// page after the last one examined.
#[derive(Debug, Clone)]
pub struct DemotionScan {
    /// Where the next round starts (`LastScannedPage`).
    pub checkpoint: ScanPos,
    /// Pages per placement read (pagemap batch).
    pub batch_pages: u64,
}

impl DemotionScan {
    /// A scan starting at the beginning of the address space.
    pub fn new(batch_pages: u64) -> DemotionScan {
        DemotionScan {
            checkpoint: ScanPos::START,
            batch_pages: batch_pages.max(1),
        }
    }

    /// One round over `space` (every VMA of every process, in scan order).
    /// `read(pid, start, n)` returns the resident units of `[start, start+n)` in
    /// address order (huge pages by their head); `is_cold(pid, vpn)` judges one
    /// fast-tier unit.
    pub fn run(
        &mut self,
        space: &[(Pid, Vma)],
        need_pages: u64,
        read: &mut dyn FnMut(Pid, Vpn, u64) -> Vec<(Vpn, PageInfo)>,
        is_cold: &mut dyn FnMut(Pid, Vpn) -> bool,
    ) -> ScanOutcome {
        let mut out = ScanOutcome::default();
        let total: u64 = space.iter().map(|(_, v)| v.nr_pages).sum();
        if total == 0 {
            out.full_pass = true;
            return out;
        }
        if need_pages == 0 {
            return out;
        }
        let cp = self.checkpoint;
        // The VMA holding the checkpoint or the first one after it; past the end,
        // wrap to the first VMA.
        let mut seg = space
            .iter()
            .position(|(p, v)| (*p, v.end_vpn()) > (cp.pid, cp.vpn))
            .unwrap_or(0);
        let mut pos = {
            let (p, v) = space[seg];
            if p == cp.pid {
                v.start_vpn.max(cp.vpn)
            } else {
                v.start_vpn
            }
        };
        let mut budget = total;
        let mut collected = 0u64;
        while budget > 0 {
            let (pid, vma) = space[seg];
            let len = (vma.end_vpn() - pos).min(self.batch_pages).min(budget);
            let units = read(pid, pos, len);
            out.reads += 1;
            let mut consumed = len;
            let mut done = false;
            for (vpn, info) in units {
                if vpn < pos {
                    continue; // a huge page that began in the previous read
                }
                let unit = if info.huge { SUBPAGES_PER_HUGE } else { 1 };
                if info.tier.is_fast() && is_cold(pid, vpn) {
                    out.cold.push((pid, vpn, unit));
                    collected += unit;
                    if collected >= need_pages {
                        consumed = (vpn + unit).min(vma.end_vpn()) - pos;
                        done = true;
                        break;
                    }
                }
            }
            budget = budget.saturating_sub(consumed);
            out.scanned_pages += consumed;
            pos += consumed;
            if pos >= vma.end_vpn() {
                seg = (seg + 1) % space.len();
                pos = space[seg].1.start_vpn;
            }
            if done {
                break;
            }
        }
        out.full_pass = budget == 0;
        self.checkpoint = ScanPos {
            pid: space[seg].0,
            vpn: pos,
        };
        out
    }
}
