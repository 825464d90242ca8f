//! MULTI-CLOCK's per-tier CLOCK lists and the page state machine of its Fig. 4,
//! kept apart from the plumbing so every transition can be tested on its own.
//!
//! **States** (spec §2.2). A page is on one list of its tier and carries
//! `PG_referenced`:
//!
//! | state | list | `PG_referenced` |
//! |---|---|---|
//! | IU | inactive | 0 |
//! | IR | inactive | 1 |
//! | AU | active | 0 |
//! | AR | active | 1 |
//! | P | promote (non-top tiers only) | set only by a supervised access |
//!
//! **Transitions.** [`mark_accessed`] is the extended `mark_page_accessed()` (§III-A,
//! §IV): IU→IR (1/2), IR→AU (6), AU→AR (7/8), AR→P (10), P→P (12). [`observe`] is one
//! look of the CLOCK hand (§III-A): a set accessed bit is handed to
//! `mark_page_accessed` ("mark as referenced, activate, or re-activate"); otherwise a
//! set `PG_referenced` is cleared — the second chance IR→IU (1) and AR→AU (the
//! unnumbered edge) — and an unreferenced page is left for [`verdict`], which applies
//! the list's shrink rule: deactivate AU→IU (9), demote IU (3), P→AU (11), promote
//! P (13).
//!
//! **Lists.** [`ClockLists`] holds, per tier and per LRU type (anon, file), the
//! inactive, active and promote lists as intrusive doubly linked lists (the `lru`
//! link of `struct page`). Head = where pages are inserted, tail = where the hand
//! reads. Scanning isolates from the tail and puts back at the head, as the kernel
//! does, so the hand advances between runs by construction (spec A4). Pages are
//! keyed by `(pid, vpn)`, the head vpn for a huge page; the hash map only answers
//! lookups, every walk follows list order, so results never depend on hash order.

use std::collections::HashMap;
use tierkit_core::*;

/// Which list of a tier a page is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ClockList {
    /// Demotion candidates: new pages, pages not referenced for a while.
    Inactive = 0,
    /// Pages referenced on two looks in a row ("warm").
    Active = 1,
    /// Pages referenced again while active and referenced: promotion candidates
    /// ("hot"). Exists only in tiers that have a higher tier (§III).
    Promote = 2,
}

/// The LRU type of a page: Linux keeps separate lists for anonymous and file pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LruType {
    /// Anonymous memory.
    Anon = 0,
    /// File-backed memory (page cache).
    File = 1,
}

impl LruType {
    /// Both types, in the order reclaim and kpromoted visit them (pseudo-code §2.9).
    pub const ALL: [LruType; 2] = [LruType::Anon, LruType::File];
}

/// A page's LRU state: its list and `PG_referenced`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageFlags {
    /// The list.
    pub list: ClockList,
    /// `PG_referenced`.
    pub referenced: bool,
}

impl PageFlags {
    /// IU: where a new page starts (§IV).
    pub const IU: PageFlags = PageFlags {
        list: ClockList::Inactive,
        referenced: false,
    };
    /// IR.
    pub const IR: PageFlags = PageFlags {
        list: ClockList::Inactive,
        referenced: true,
    };
    /// AU.
    pub const AU: PageFlags = PageFlags {
        list: ClockList::Active,
        referenced: false,
    };
    /// AR.
    pub const AR: PageFlags = PageFlags {
        list: ClockList::Active,
        referenced: true,
    };
    /// P, as a page enters the promote list.
    pub const P: PageFlags = PageFlags {
        list: ClockList::Promote,
        referenced: false,
    };
}

/// The edges of Fig. 4 (plus the ones the figure leaves implicit), for counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edge {
    /// (1)/(2) IU→IR: referenced since the last look.
    Reference = 0,
    /// (1) IR→IU: the inactive second chance (scan found `PG_referenced` only).
    InactiveSecondChance,
    /// (6) IR→AU: activation.
    Activate,
    /// (7)/(8) AU→AR.
    ReferenceActive,
    /// AR→AU (not numbered in §IV): the active second chance.
    ActiveSecondChance,
    /// (9) AU→IU: deactivation by reclaim.
    Deactivate,
    /// (10) AR→P: re-activation onto the promote list.
    Reactivate,
    /// (11) P→AU: not referenced while on the promote list.
    PromoteIdle,
    /// (12) P→P: referenced while on the promote list.
    PromoteStay,
    /// (13) P→higher tier (MULTI-CLOCK), or Fig. 3 (11) active→higher tier (Nimble).
    Promoted,
    /// A selected promotion failed: the page goes to the active list (§III-C).
    PromoteFailed,
    /// (3) IU→lower tier.
    Demoted,
    /// (4) freed (munmap).
    Freed,
    /// (5) added to the LRU (allocation).
    Added,
}

impl Edge {
    /// Number of edges.
    pub const COUNT: usize = 14;
    /// Every edge with its stats name, in counter order.
    pub const NAMES: [(Edge, &'static str); Edge::COUNT] = [
        (Edge::Reference, "edge_iu_ir"),
        (Edge::InactiveSecondChance, "edge_ir_iu"),
        (Edge::Activate, "edge_ir_au"),
        (Edge::ReferenceActive, "edge_au_ar"),
        (Edge::ActiveSecondChance, "edge_ar_au"),
        (Edge::Deactivate, "edge_au_iu"),
        (Edge::Reactivate, "edge_ar_p"),
        (Edge::PromoteIdle, "edge_p_au"),
        (Edge::PromoteStay, "edge_p_p"),
        (Edge::Promoted, "edge_promoted"),
        (Edge::PromoteFailed, "edge_promote_failed"),
        (Edge::Demoted, "edge_demoted"),
        (Edge::Freed, "edge_freed"),
        (Edge::Added, "edge_added"),
    ];
}

/// MULTI-CLOCK's `mark_page_accessed()` (§III-A, §IV): one step up the lists.
/// `promote_list` is false on the top tier (and for Nimble), where an active,
/// referenced page stays as it is. Returns the new flags and the edge taken (`None`
/// if nothing changed).
pub fn mark_accessed(f: PageFlags, promote_list: bool) -> (PageFlags, Option<Edge>) {
    match (f.list, f.referenced) {
        (ClockList::Inactive, false) => (PageFlags::IR, Some(Edge::Reference)),
        (ClockList::Inactive, true) => (PageFlags::AU, Some(Edge::Activate)),
        (ClockList::Active, false) => (PageFlags::AR, Some(Edge::ReferenceActive)),
        (ClockList::Active, true) if promote_list => (PageFlags::P, Some(Edge::Reactivate)),
        (ClockList::Active, true) => (f, None),
        (ClockList::Promote, _) => (
            PageFlags {
                list: ClockList::Promote,
                referenced: true,
            },
            Some(Edge::PromoteStay),
        ),
    }
}

/// What one look of the CLOCK hand found (`observe` in spec §2.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Look {
    /// Referenced, and `mark_page_accessed` moved the page to another list.
    Moved,
    /// Referenced: the page stays on its list (and goes to its head).
    Referenced,
    /// Not referenced since the last look.
    Unreferenced,
}

/// One look at a page whose accessed bit read `young` (test-and-clear already done).
/// Returns the new flags, what was found, and the edge taken.
pub fn observe(f: PageFlags, young: bool, promote_list: bool) -> (PageFlags, Look, Option<Edge>) {
    if young {
        let (nf, e) = mark_accessed(f, promote_list);
        let look = if nf.list != f.list {
            Look::Moved
        } else {
            Look::Referenced
        };
        return (nf, look, e);
    }
    if f.referenced {
        // §III-A: "marked as not referenced and moved to the head of the list".
        let e = match f.list {
            ClockList::Inactive => Some(Edge::InactiveSecondChance),
            ClockList::Active => Some(Edge::ActiveSecondChance),
            ClockList::Promote => None, // referenced by a supervised access: promote
        };
        return (
            PageFlags {
                referenced: false,
                ..f
            },
            Look::Referenced,
            e,
        );
    }
    (f, Look::Unreferenced, None)
}

/// Who is scanning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanMode {
    /// kpromoted's periodic run (no memory pressure).
    Periodic,
    /// Watermark-driven reclaim (kswapd or direct reclaim).
    Reclaim,
}

/// Where a looked-at page goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// To the head of the list its (new) flags name.
    Head,
    /// Into the promotion batch (13).
    Promote,
    /// Into the demotion batch (3).
    Demote,
    /// To the head of the inactive list, unreferenced (9).
    Deactivate,
    /// To the head of the active list, unreferenced (11).
    ToActive,
}

/// The shrink rule of the list a page was on (§III-A, §III-C; pseudo-code `scan`).
///
/// - `Moved` and `Referenced` pages go to the head of their (new) list, except a
///   referenced promote-list page, which is promoted in this run (12)→(13).
/// - An unreferenced promote-list page returns to the active list (11).
/// - An unreferenced active page is deactivated (9) only by reclaim while the
///   inactive list is low, or in periodic runs if `periodic_deactivate` (spec A5);
///   otherwise it is rotated.
/// - An unreferenced inactive page is demoted (3) by reclaim if the tier has a lower
///   tier; otherwise rotated (A5; the lowest tier cannot evict in the simulator).
pub fn verdict(
    list: ClockList,
    look: Look,
    mode: ScanMode,
    inactive_low: bool,
    periodic_deactivate: bool,
    has_lower: bool,
) -> Verdict {
    match (list, look) {
        (_, Look::Moved) => Verdict::Head,
        (ClockList::Promote, Look::Referenced) => Verdict::Promote,
        (ClockList::Promote, Look::Unreferenced) => Verdict::ToActive,
        (_, Look::Referenced) => Verdict::Head,
        (ClockList::Active, Look::Unreferenced) => {
            let deactivate = match mode {
                ScanMode::Reclaim => inactive_low,
                ScanMode::Periodic => periodic_deactivate,
            };
            if deactivate {
                Verdict::Deactivate
            } else {
                Verdict::Head
            }
        }
        (ClockList::Inactive, Look::Unreferenced) => {
            if mode == ScanMode::Reclaim && has_lower {
                Verdict::Demote
            } else {
                Verdict::Head
            }
        }
    }
}

/// Stock Linux 5.3 reclaim instead of the paper's second chances (spec A10), for the
/// `stock_pfra_reclaim` switch: `shrink_active_list` deactivates every page it scans
/// (referenced anonymous pages included), and `page_check_references` activates a
/// mapped anonymous page whose PTE was young at once and reclaims (demotes) it
/// otherwise, whatever `PG_referenced` says.
pub fn stock_reclaim_verdict(f: PageFlags, young: bool, has_lower: bool) -> (PageFlags, Verdict) {
    match f.list {
        ClockList::Active => (PageFlags::IU, Verdict::Deactivate),
        ClockList::Inactive if young => (PageFlags::AU, Verdict::Head),
        ClockList::Inactive if has_lower => (PageFlags::IU, Verdict::Demote),
        ClockList::Inactive => (PageFlags::IU, Verdict::Head),
        ClockList::Promote => (f, Verdict::Promote),
    }
}

/// `inactive_ratio` of Linux 5.3 `inactive_list_is_low()`: `int_sqrt(10 · gb)` for a
/// list pair of `gb` whole GiB, 1 below 1 GiB (§III-C "√(10·n):1"). The kernel
/// formula is shared with [`crate::lru`].
pub use crate::lru::{inactive_is_low, inactive_ratio};

/// A page as the lists know it (also an isolated page, off every list).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockPage {
    /// Owner.
    pub pid: Pid,
    /// The page (huge-page head for a huge page).
    pub vpn: Vpn,
    /// Tier whose lists hold it.
    pub tier: TierId,
    /// Anonymous or file.
    pub ty: LruType,
    /// List and `PG_referenced`.
    pub flags: PageFlags,
    /// Base pages in the unit (1, or 512 for a huge page).
    pub nr_pages: u64,
}

/// Which end of a list a page is inserted at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// Most recent end (where the hand arrives last).
    Head,
    /// Oldest end (where the hand reads next). Nimble inserts promoted pages at the
    /// "bottom" of the fast tier's active list (Fig. 3 (11)).
    Tail,
}

const NIL: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Node {
    page: ClockPage,
    prev: u32,
    next: u32,
}

#[derive(Debug, Clone, Copy)]
struct List {
    head: u32,
    tail: u32,
    nr_units: u64,
    nr_pages: u64,
}

impl List {
    const EMPTY: List = List {
        head: NIL,
        tail: NIL,
        nr_units: 0,
        nr_pages: 0,
    };
}

type TierLists = [[List; 3]; 2];

/// The inactive/active/promote lists of every tier, for both LRU types.
#[derive(Debug, Clone, Default)]
pub struct ClockLists {
    nodes: Vec<Node>,
    free_slots: Vec<u32>,
    index: HashMap<(Pid, Vpn), u32>,
    lists: Vec<TierLists>,
}

impl ClockLists {
    /// Empty lists for `nr_tiers` tiers.
    pub fn new(nr_tiers: usize) -> ClockLists {
        ClockLists {
            lists: vec![[[List::EMPTY; 3]; 2]; nr_tiers],
            ..ClockLists::default()
        }
    }

    fn list(&self, tier: TierId, ty: LruType, list: ClockList) -> Option<&List> {
        self.lists
            .get(tier.index())
            .map(|l| &l[ty as usize][list as usize])
    }

    /// Base pages on one list.
    pub fn nr_pages(&self, tier: TierId, ty: LruType, list: ClockList) -> u64 {
        self.list(tier, ty, list).map_or(0, |l| l.nr_pages)
    }

    /// Page units (base or huge) on one list.
    pub fn nr_units(&self, tier: TierId, ty: LruType, list: ClockList) -> u64 {
        self.list(tier, ty, list).map_or(0, |l| l.nr_units)
    }

    /// Base pages on `list` of `tier`, both types.
    pub fn tier_pages(&self, tier: TierId, list: ClockList) -> u64 {
        LruType::ALL
            .iter()
            .map(|&t| self.nr_pages(tier, t, list))
            .sum()
    }

    /// Page units tracked (on a list) over all tiers.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// True if no page is on any list.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// The page, if it is on a list.
    pub fn get(&self, pid: Pid, vpn: Vpn) -> Option<ClockPage> {
        self.index
            .get(&(pid, vpn))
            .map(|&i| self.nodes[i as usize].page)
    }

    /// One list from head to tail, for tests and inspection.
    pub fn pages(&self, tier: TierId, ty: LruType, list: ClockList) -> Vec<(Pid, Vpn)> {
        let mut out = Vec::new();
        let Some(l) = self.list(tier, ty, list) else {
            return out;
        };
        let mut i = l.head;
        while i != NIL {
            let n = &self.nodes[i as usize];
            out.push((n.page.pid, n.page.vpn));
            i = n.next;
        }
        out
    }

    /// Put a page on the list its flags name, at `end`. A page already on a list is
    /// moved.
    pub fn insert(&mut self, page: ClockPage, end: End) {
        if self.lists.len() <= page.tier.index() {
            self.lists
                .resize(page.tier.index() + 1, [[List::EMPTY; 3]; 2]);
        }
        let key = (page.pid, page.vpn);
        let i = match self.index.get(&key).copied() {
            Some(i) => {
                self.unlink(i);
                i
            }
            None => {
                let node = Node {
                    page,
                    prev: NIL,
                    next: NIL,
                };
                let i = match self.free_slots.pop() {
                    Some(i) => {
                        self.nodes[i as usize] = node;
                        i
                    }
                    None => {
                        self.nodes.push(node);
                        (self.nodes.len() - 1) as u32
                    }
                };
                self.index.insert(key, i);
                i
            }
        };
        self.nodes[i as usize].page = page;
        self.link(i, end);
    }

    /// Take a page off its list (isolate it, or forget it when freed).
    pub fn remove(&mut self, pid: Pid, vpn: Vpn) -> Option<ClockPage> {
        let i = self.index.remove(&(pid, vpn))?;
        self.unlink(i);
        self.free_slots.push(i);
        Some(self.nodes[i as usize].page)
    }

    /// Isolate the page under the hand (the tail) of one list.
    pub fn pop_tail(&mut self, tier: TierId, ty: LruType, list: ClockList) -> Option<ClockPage> {
        let i = self.list(tier, ty, list)?.tail;
        if i == NIL {
            return None;
        }
        let p = self.nodes[i as usize].page;
        self.remove(p.pid, p.vpn)
    }

    /// Isolate the page at the head (the most recently added) of one list.
    pub fn pop_head(&mut self, tier: TierId, ty: LruType, list: ClockList) -> Option<ClockPage> {
        let i = self.list(tier, ty, list)?.head;
        if i == NIL {
            return None;
        }
        let p = self.nodes[i as usize].page;
        self.remove(p.pid, p.vpn)
    }

    /// The page nearest the tail of one list, within `max_look` pages, whose unit
    /// has `nr_pages` base pages (an exchange partner must be the same size).
    pub fn tail_matching(
        &self,
        tier: TierId,
        ty: LruType,
        list: ClockList,
        nr_pages: u64,
        max_look: usize,
    ) -> Option<ClockPage> {
        let mut i = self.list(tier, ty, list)?.tail;
        let mut looked = 0;
        while i != NIL && looked < max_look {
            let n = &self.nodes[i as usize];
            if n.page.nr_pages == nr_pages {
                return Some(n.page);
            }
            i = n.prev;
            looked += 1;
        }
        None
    }

    /// Forget every page of `pid` in `[start_vpn, start_vpn + nr_pages)` (munmap).
    /// Returns the units removed.
    pub fn remove_range(&mut self, pid: Pid, start_vpn: Vpn, nr_pages: u64) -> u64 {
        let end = start_vpn.saturating_add(nr_pages);
        let mut removed = 0;
        // A huge page is keyed by its head, which may precede the range.
        let head = huge_head(start_vpn);
        if head != start_vpn && self.get(pid, head).is_some_and(|p| p.nr_pages > 1) {
            self.remove(pid, head);
            removed += 1;
        }
        if nr_pages as usize <= self.index.len() {
            for vpn in start_vpn..end {
                removed += self.remove(pid, vpn).is_some() as u64;
            }
        } else {
            // Sorted so slot reuse does not depend on hash order.
            let mut doomed: Vec<Vpn> = self
                .index
                .keys()
                .filter(|(p, v)| *p == pid && *v >= start_vpn && *v < end)
                .map(|&(_, v)| v)
                .collect();
            doomed.sort_unstable();
            for vpn in doomed {
                removed += self.remove(pid, vpn).is_some() as u64;
            }
        }
        removed
    }

    fn link(&mut self, i: u32, end: End) {
        let p = self.nodes[i as usize].page;
        let l = &mut self.lists[p.tier.index()][p.ty as usize][p.flags.list as usize];
        l.nr_units += 1;
        l.nr_pages += p.nr_pages;
        match end {
            End::Head => {
                let old = l.head;
                l.head = i;
                if old == NIL {
                    l.tail = i;
                }
                self.nodes[i as usize].prev = NIL;
                self.nodes[i as usize].next = old;
                if old != NIL {
                    self.nodes[old as usize].prev = i;
                }
            }
            End::Tail => {
                let old = l.tail;
                l.tail = i;
                if old == NIL {
                    l.head = i;
                }
                self.nodes[i as usize].next = NIL;
                self.nodes[i as usize].prev = old;
                if old != NIL {
                    self.nodes[old as usize].next = i;
                }
            }
        }
    }

    fn unlink(&mut self, i: u32) {
        let n = self.nodes[i as usize];
        if n.prev != NIL {
            self.nodes[n.prev as usize].next = n.next;
        }
        if n.next != NIL {
            self.nodes[n.next as usize].prev = n.prev;
        }
        let p = n.page;
        let l = &mut self.lists[p.tier.index()][p.ty as usize][p.flags.list as usize];
        if l.head == i {
            l.head = n.next;
        }
        if l.tail == i {
            l.tail = n.prev;
        }
        l.nr_units -= 1;
        l.nr_pages -= p.nr_pages;
        self.nodes[i as usize].prev = NIL;
        self.nodes[i as usize].next = NIL;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P0: Pid = Pid(0);
    const FAST: TierId = TierId(0);
    const SLOW: TierId = TierId(1);

    fn page(vpn: Vpn, tier: TierId, flags: PageFlags) -> ClockPage {
        ClockPage {
            pid: P0,
            vpn,
            tier,
            ty: LruType::Anon,
            flags,
            nr_pages: 1,
        }
    }

    /// Every transition of Fig. 4 reachable by `mark_page_accessed`.
    #[test]
    fn mark_accessed_climbs_one_step_per_access() {
        use PageFlags as F;
        let cases = [
            (F::IU, true, F::IR, Some(Edge::Reference)),
            (F::IR, true, F::AU, Some(Edge::Activate)),
            (F::AU, true, F::AR, Some(Edge::ReferenceActive)),
            (F::AR, true, F::P, Some(Edge::Reactivate)),
            (F::AR, false, F::AR, None), // top tier: no promote list
            (
                F::P,
                true,
                PageFlags {
                    list: ClockList::Promote,
                    referenced: true,
                },
                Some(Edge::PromoteStay),
            ),
        ];
        for (from, promote_list, to, edge) in cases {
            assert_eq!(
                mark_accessed(from, promote_list),
                (to, edge),
                "{from:?} (promote list {promote_list})"
            );
        }
    }

    /// Spec §2.7 / oracle 6: with supervised accesses, four `mark_page_accessed`
    /// calls take a page from IU to P with no scan.
    #[test]
    fn oracle_06_four_supervised_accesses_reach_the_promote_list() {
        let mut f = PageFlags::IU;
        for _ in 0..4 {
            f = mark_accessed(f, true).0;
        }
        assert_eq!(f, PageFlags::P);
    }

    /// Oracle 7: a referenced page found by a scan loses its flag and stays.
    #[test]
    fn oracle_07_observe_gives_second_chances_and_climbs_on_young_bits() {
        use PageFlags as F;
        assert_eq!(
            observe(F::IR, false, true),
            (F::IU, Look::Referenced, Some(Edge::InactiveSecondChance))
        );
        assert_eq!(
            observe(F::AR, false, true),
            (F::AU, Look::Referenced, Some(Edge::ActiveSecondChance))
        );
        assert_eq!(
            observe(F::IU, true, true),
            (F::IR, Look::Referenced, Some(Edge::Reference))
        );
        assert_eq!(
            observe(F::IR, true, true),
            (F::AU, Look::Moved, Some(Edge::Activate))
        );
        assert_eq!(
            observe(F::AR, true, true),
            (F::P, Look::Moved, Some(Edge::Reactivate))
        );
        assert_eq!(
            observe(F::AR, true, false),
            (F::AR, Look::Referenced, None),
            "top tier: a hot active page just stays"
        );
        assert_eq!(
            observe(F::IU, false, true),
            (F::IU, Look::Unreferenced, None)
        );
        assert_eq!(observe(F::P, false, true), (F::P, Look::Unreferenced, None));
        assert_eq!(observe(F::P, true, true).1, Look::Referenced);
    }

    #[test]
    fn verdicts_follow_the_shrink_rules() {
        use ClockList::*;
        use Look::*;
        use ScanMode::*;
        // Periodic runs never deactivate or demote by default (A5).
        assert_eq!(
            verdict(Active, Unreferenced, Periodic, true, false, true),
            Verdict::Head
        );
        assert_eq!(
            verdict(Inactive, Unreferenced, Periodic, true, false, true),
            Verdict::Head
        );
        assert_eq!(
            verdict(Active, Unreferenced, Periodic, false, true, true),
            Verdict::Deactivate
        );
        // Reclaim deactivates only while the inactive list is low, demotes IU.
        assert_eq!(
            verdict(Active, Unreferenced, Reclaim, false, false, true),
            Verdict::Head
        );
        assert_eq!(
            verdict(Active, Unreferenced, Reclaim, true, false, true),
            Verdict::Deactivate
        );
        assert_eq!(
            verdict(Inactive, Unreferenced, Reclaim, false, false, true),
            Verdict::Demote
        );
        assert_eq!(
            verdict(Inactive, Unreferenced, Reclaim, false, false, false),
            Verdict::Head,
            "the lowest tier cannot demote"
        );
        // Oracle 16: a referenced page is never demoted in that pass.
        assert_eq!(
            verdict(Inactive, Referenced, Reclaim, true, true, true),
            Verdict::Head
        );
        // Reading B: referenced P pages are promoted, idle ones return (11).
        assert_eq!(
            verdict(Promote, Referenced, Periodic, false, false, true),
            Verdict::Promote
        );
        assert_eq!(
            verdict(Promote, Unreferenced, Periodic, false, false, true),
            Verdict::ToActive
        );
        assert_eq!(
            verdict(Active, Moved, Reclaim, true, false, true),
            Verdict::Head
        );
    }

    #[test]
    fn stock_reclaim_ignores_second_chances() {
        assert_eq!(
            stock_reclaim_verdict(PageFlags::AR, true, true),
            (PageFlags::IU, Verdict::Deactivate)
        );
        assert_eq!(
            stock_reclaim_verdict(PageFlags::IU, true, true),
            (PageFlags::AU, Verdict::Head)
        );
        assert_eq!(
            stock_reclaim_verdict(PageFlags::IR, false, true),
            (PageFlags::IU, Verdict::Demote)
        );
    }

    #[test]
    fn lists_insert_at_either_end_and_pop_from_both() {
        let mut l = ClockLists::new(2);
        for v in 0..3 {
            l.insert(page(v, SLOW, PageFlags::IU), End::Head);
        }
        l.insert(page(9, SLOW, PageFlags::IU), End::Tail);
        assert_eq!(
            l.pages(SLOW, LruType::Anon, ClockList::Inactive),
            vec![(P0, 2), (P0, 1), (P0, 0), (P0, 9)]
        );
        assert_eq!(
            l.pop_tail(SLOW, LruType::Anon, ClockList::Inactive)
                .unwrap()
                .vpn,
            9
        );
        assert_eq!(
            l.pop_head(SLOW, LruType::Anon, ClockList::Inactive)
                .unwrap()
                .vpn,
            2
        );
        assert_eq!(l.nr_units(SLOW, LruType::Anon, ClockList::Inactive), 2);
        // Moving a page re-links it on its new list.
        l.insert(page(1, FAST, PageFlags::AU), End::Head);
        assert_eq!(l.nr_pages(SLOW, LruType::Anon, ClockList::Inactive), 1);
        assert_eq!(l.nr_pages(FAST, LruType::Anon, ClockList::Active), 1);
        assert_eq!(l.get(P0, 1).unwrap().tier, FAST);
        // Huge pages count 512 base pages; exchange partners match sizes.
        l.insert(
            ClockPage {
                nr_pages: 512,
                ..page(512, FAST, PageFlags::AU)
            },
            End::Tail,
        );
        assert_eq!(l.tier_pages(FAST, ClockList::Active), 513);
        assert_eq!(
            l.tail_matching(FAST, LruType::Anon, ClockList::Active, 1, 8)
                .unwrap()
                .vpn,
            1
        );
        assert_eq!(l.remove_range(P0, 0, 1024), 3);
        assert!(l.is_empty());
        assert_eq!(l.tier_pages(FAST, ClockList::Active), 0);
    }
}
