//! P-blocks (PET §4.1): the allocation units PET manages, captured from anonymous
//! mmaps, split at the maximum P-block size, cut into temporary blocks in PHASE1/2
//! and re-formed from runs of temporary blocks at the end of PHASE2.
//!
//! Everything here is pure range arithmetic plus the per-block records; the policy
//! ([`super::Pet`]) does the sampling and the migrations.
//!
//! ```text
//!  one mmap (2.6 GiB) ─ initial split at 1 GiB ─▶ [ 1 GiB ][ 1 GiB ][ 0.6 GiB ]   (Fig. 5-❹)
//!  a cold P-block ───── PHASE1 split at 128 MiB ─▶ [t0][t1][t2][t3][t4][t5][t6][t7] (Fig. 7-a)
//!  end of PHASE2: runs of equal temps ───────────▶ [ A  A ][ C  C  C  C  C  C ]      (Fig. 7-c)
//!                                                   NORMAL       DEMOTED
//! ```

use super::state::State;
use tierkit_core::*;

/// A range of base pages `[start, start + nr_pages)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// First page.
    pub start: Vpn,
    /// Length in base pages (> 0).
    pub nr_pages: u64,
}

impl Span {
    /// One past the last page.
    pub fn end(&self) -> Vpn {
        self.start + self.nr_pages
    }
}

/// Cut `span` into consecutive pieces of `piece_pages`, the last one possibly
/// shorter: ⌈S / piece⌉ pieces (spec §7 oracles 3 and 8). Used for the initial split
/// at the maximum P-block size (Fig. 5-❹) and for the PHASE1 split into temporary
/// blocks (Fig. 7-(a)); the spec's inferred reading that the remainder is the last
/// piece (2.6 GiB → 1 + 1 + 0.6).
pub fn split(span: Span, piece_pages: u64) -> Vec<Span> {
    let piece = piece_pages.max(1);
    let mut out = Vec::with_capacity(span.nr_pages.div_ceil(piece) as usize);
    let mut start = span.start;
    while start < span.end() {
        let nr_pages = piece.min(span.end() - start);
        out.push(Span { start, nr_pages });
        start += nr_pages;
    }
    out
}

/// A maximal run of adjacent temporary blocks with the same property (PET §4.2: "merges
/// adjacent temporary blocks with the same property (i.e., accessed or cold) into one
/// P-block").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// The pages of the run.
    pub span: Span,
    /// The run's temporary blocks were accessed.
    pub accessed: bool,
    /// Index of the run's first temporary block.
    pub first: usize,
    /// One past the index of its last temporary block.
    pub last: usize,
}

/// The maximal runs of `temps` (each `(span, accessed)`, adjacent and in address
/// order), in address order.
pub fn runs(temps: &[(Span, bool)]) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::new();
    for (i, &(span, accessed)) in temps.iter().enumerate() {
        match out.last_mut() {
            Some(r) if r.accessed == accessed && r.span.end() == span.start => {
                r.span.nr_pages += span.nr_pages;
                r.last = i + 1;
            }
            _ => out.push(Run {
                span,
                accessed,
                first: i,
                last: i + 1,
            }),
        }
    }
    out
}

/// One tracked unit: a NORMAL P-block as a whole, or one temporary block of a P-block
/// in PHASE1/PHASE2. One page of it is sampled per sampling interval (§4.2, Fig. 6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    /// The unit's pages.
    pub span: Span,
    /// The page whose accessed bit was cleared at the last sampling tick, checked at
    /// the next one; `None` if no resident page was found.
    pub sample: Option<Vpn>,
    /// An access was seen in the current scan window (a sampled accessed bit, or a
    /// canary fault in PHASE2).
    pub accessed: bool,
    /// PHASE2 only: this temporary block's canary pages (page-unit heads, sorted).
    pub canaries: Vec<Vpn>,
    /// PHASE2 only: canary faults counted in the current scan window.
    pub canary_faults: u64,
}

impl Unit {
    /// A fresh unit with nothing sampled yet.
    pub fn new(span: Span) -> Unit {
        Unit {
            span,
            sample: None,
            accessed: false,
            canaries: Vec::new(),
            canary_faults: 0,
        }
    }
}

/// A P-block: PET's management unit (128 bytes of kernel metadata, §4.1).
#[derive(Debug, Clone, PartialEq)]
pub struct PBlock {
    /// Owner.
    pub pid: Pid,
    /// Its pages.
    pub span: Span,
    /// Demotion state (§4.2, Fig. 7).
    pub state: State,
    /// The NORMAL-state sampling unit (the whole block).
    pub unit: Unit,
    /// PHASE1/PHASE2: the temporary blocks, adjacent, in address order.
    pub temps: Vec<Unit>,
    /// DEMOTED: the canary pages left armed as promotion sensors (page-unit heads,
    /// sorted).
    pub canaries: Vec<Vpn>,
    /// When the block's current tracking began: a block captured or promoted in the
    /// middle of a scan window is judged only after its first full window.
    pub born_at: Nanos,
    /// Base pages first touched inside the block so far (from allocation events): a
    /// block with nothing resident has nothing to demote and is never cold.
    pub resident_pages: u64,
    /// Some of its pages are (or may be) in a slow tier although the block is not
    /// DEMOTED: the allocator placed them there when the fast tier was full, or a
    /// promotion stopped for lack of room.
    pub spilled: bool,
    /// A promotion request is queued for `kpromoted`.
    pub promo_queued: bool,
}

impl PBlock {
    /// A NORMAL P-block over `span`, tracking from `now`.
    pub fn new(pid: Pid, span: Span, now: Nanos) -> PBlock {
        PBlock {
            pid,
            span,
            state: State::Normal,
            unit: Unit::new(span),
            temps: Vec::new(),
            canaries: Vec::new(),
            born_at: now,
            resident_pages: 0,
            spilled: false,
            promo_queued: false,
        }
    }

    /// The units sampled in the block's state: itself when NORMAL, its temporary
    /// blocks in PHASE1/PHASE2, none when DEMOTED (canary faults only, spec §2.2).
    pub fn units_mut(&mut self) -> &mut [Unit] {
        match self.state {
            State::Normal => std::slice::from_mut(&mut self.unit),
            State::Phase1 | State::Phase2 => &mut self.temps,
            State::Demoted => &mut [],
        }
    }

    /// Number of units sampled per sampling interval.
    pub fn nr_units(&self) -> usize {
        match self.state {
            State::Normal => 1,
            State::Phase1 | State::Phase2 => self.temps.len(),
            State::Demoted => 0,
        }
    }

    /// `(span, accessed)` of each temporary block.
    pub fn temp_flags(&self) -> Vec<(Span, bool)> {
        self.temps.iter().map(|t| (t.span, t.accessed)).collect()
    }

    /// The temporary block holding `vpn`, for a block cut at `temp_pages`.
    pub fn temp_index(&self, vpn: Vpn, temp_pages: u64) -> Option<usize> {
        if !(self.span.start..self.span.end()).contains(&vpn) || self.temps.is_empty() {
            return None;
        }
        let i = ((vpn - self.span.start) / temp_pages.max(1)) as usize;
        Some(i.min(self.temps.len() - 1))
    }

    /// True if `head` (a page-unit head) is one of the DEMOTED block's canaries.
    pub fn is_canary(&self, head: Vpn) -> bool {
        self.canaries.binary_search(&head).is_ok()
    }

    /// Forget every scan-window observation (start of a new window).
    pub fn clear_window(&mut self) {
        self.unit.accessed = false;
        for t in &mut self.temps {
            t.accessed = false;
            t.canary_faults = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB_PAGES: u64 = MIB / PAGE_SIZE;

    #[test]
    fn oracle_03_initial_split_gives_ceil_size_over_max_blocks_the_last_shorter() {
        // Fig. 5: liblinear's 0x83fd49000–0x8e640b870 object, page-aligned, is
        // 2.60 GiB: three P-blocks of at most 1 GiB (spec oracle 3).
        let start = 0x83fd49000u64 >> PAGE_SHIFT;
        let end = 0x8e640b870u64.div_ceil(PAGE_SIZE);
        let s = Span {
            start,
            nr_pages: end - start,
        };
        let gib = GIB / PAGE_SIZE;
        let blocks = split(s, gib);
        assert_eq!(blocks.len(), 3);
        assert_eq!(blocks[0].nr_pages, gib);
        assert_eq!(blocks[1].nr_pages, gib);
        assert_eq!(blocks[2].nr_pages, s.nr_pages - 2 * gib);
        assert_eq!(blocks[0].start, start);
        assert_eq!(blocks[2].end(), end);
        // Exactly 1 GiB stays one block; one page more makes two.
        assert_eq!(
            split(
                Span {
                    start: 0,
                    nr_pages: gib
                },
                gib
            )
            .len(),
            1
        );
        assert_eq!(
            split(
                Span {
                    start: 0,
                    nr_pages: gib + 1
                },
                gib
            )
            .len(),
            2
        );
    }

    #[test]
    fn oracle_08_phase1_split_gives_ceil_size_over_128mib_temporary_blocks() {
        // Spec oracle 8: a 1 GiB block → 8 temps; 200 MiB → 2 (128 + 72); a block
        // smaller than 128 MiB is one temporary block.
        let t = 128 * MIB_PAGES;
        assert_eq!(
            split(
                Span {
                    start: 7,
                    nr_pages: 1024 * MIB_PAGES
                },
                t
            )
            .len(),
            8
        );
        let two = split(
            Span {
                start: 7,
                nr_pages: 200 * MIB_PAGES,
            },
            t,
        );
        assert_eq!(two.len(), 2);
        assert_eq!(two[1].nr_pages, 72 * MIB_PAGES);
        assert_eq!(
            split(
                Span {
                    start: 7,
                    nr_pages: 5
                },
                t
            )
            .len(),
            1
        );
    }

    #[test]
    fn runs_merge_adjacent_temporary_blocks_with_the_same_property() {
        let t = 128 * MIB_PAGES;
        let temps: Vec<(Span, bool)> = split(
            Span {
                start: 0,
                nr_pages: 1024 * MIB_PAGES,
            },
            t,
        )
        .into_iter()
        .enumerate()
        .map(|(i, s)| (s, matches!(i, 0 | 1 | 5)))
        .collect();
        let r = runs(&temps);
        let shape: Vec<(u64, bool, usize, usize)> = r
            .iter()
            .map(|r| (r.span.nr_pages / MIB_PAGES, r.accessed, r.first, r.last))
            .collect();
        assert_eq!(
            shape,
            vec![
                (256, true, 0, 2),
                (384, false, 2, 5),
                (128, true, 5, 6),
                (256, false, 6, 8)
            ]
        );
        assert_eq!(r[3].span.end(), 1024 * MIB_PAGES);
    }

    #[test]
    fn temp_index_maps_pages_to_their_temporary_block() {
        let mut b = PBlock::new(
            Pid(0),
            Span {
                start: 100,
                nr_pages: 250,
            },
            0,
        );
        b.state = State::Phase1;
        b.temps = split(b.span, 100).into_iter().map(Unit::new).collect();
        assert_eq!(b.temp_index(100, 100), Some(0));
        assert_eq!(b.temp_index(199, 100), Some(0));
        assert_eq!(b.temp_index(200, 100), Some(1));
        assert_eq!(b.temp_index(349, 100), Some(2));
        assert_eq!(b.temp_index(350, 100), None);
        assert_eq!(b.nr_units(), 3);
    }
}
