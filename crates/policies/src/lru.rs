//! Linux's per-tier LRU lists and a kswapd-like demotion thread, reusable by every
//! policy that demotes "through reclaim": `linux-tiering`, `tpp`, Chrono.
//!
//! **What is emulated.** The classic (non-MGLRU) two-list LRU of `mm/vmscan.c` for
//! anonymous pages, one pair of lists per tier (a node's `lruvec`):
//!
//! - pages enter a tier's **inactive** list at its head when they are allocated
//!   (since v5.9 new anonymous pages start inactive) and when they migrate into the
//!   tier (`folio_migrate_flags` keeps `PG_active`/`PG_referenced`, so a page keeps
//!   its list kind; a demoted page arrives inactive and unreferenced);
//! - [`Lru::shrink_active_list`] moves pages from the active tail to the inactive
//!   head, clearing their accessed bits. Like the kernel, it deactivates *referenced*
//!   anonymous pages too: only referenced executable file pages get another trip
//!   around the active list, and tierkit has none;
//! - [`Lru::shrink_inactive_list`] takes pages from the inactive tail and applies
//!   `folio_check_references`: a page whose accessed bit was set is activated if it
//!   already carried `PG_referenced` (its second look), otherwise it gets
//!   `PG_referenced` and another trip around the inactive list; a page whose bit was
//!   clear is reclaimed, which in a tiered machine means demoted to the next tier;
//! - [`inactive_is_low`] is the kernel's inactive:active balance with
//!   `inactive_ratio = int_sqrt(10 · size in GB)`;
//! - [`Lru::mark_page_accessed`] is `folio_mark_accessed` (the three-state
//!   inactive,unreferenced → inactive,referenced → active step TPP's fault path uses).
//!
//! [`Kswapd`] is the reclaim loop of `balance_pgdat` reduced to what tiering needs:
//! woken for a tier, it ages the lists and demotes from the inactive tail, in rounds
//! of [`SWAP_CLUSTER_MAX`] (its N-th on a machine sampled at 1/N:
//! [`isolated_per_round`]), until the tier's free pages reach a target the policy
//! gives (`linux-tiering`: the promotion watermark; TPP: its demotion watermark).
//!
//! **Metadata.** The lists are the `lru` links and flag bits of `struct page`, which
//! every Linux kernel keeps whatever the tiering policy; a kernel implementation adds
//! no memory for them, so policies built on this report none for it.
//!
//! Accessed bits are read through [`Mechanisms::test_and_clear_young`], so every look
//! at a page costs what an rmap walk costs; list operations are charged a few ns each.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use tierkit_core::*;

/// Pages reclaim isolates per round (`SWAP_CLUSTER_MAX`).
pub const SWAP_CLUSTER_MAX: u64 = 32;

/// Timer ids in `[KSWAPD_TIMER_BASE, KSWAPD_TIMER_BASE + 256)` belong to [`Kswapd`];
/// the low bits are the tier.
pub const KSWAPD_TIMER_BASE: TimerId = 0x2000_0000;

/// Passes over a tier's lists without a demotion before kswapd gives up until the
/// next wakeup (the role of `MAX_RECLAIM_RETRIES`; two looks make a page demotable,
/// so three passes without progress mean nothing can be).
const MAX_RECLAIM_PASSES: u64 = 3;

/// CPU time of one list operation (isolate, splice, putback), ns.
const LIST_OP_NS: u64 = 5;

/// Which list of a tier a page is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LruList {
    /// Not recently used: the reclaim (demotion) candidates.
    Inactive = 0,
    /// Recently used (referenced on two looks, or activated by a fault).
    Active = 1,
}

/// `inactive_ratio` of a list pair holding `total_pages` 4 KiB pages: the inactive
/// list is "low" when `inactive · ratio < active`. The kernel takes
/// `int_sqrt(10 · gb)` with `gb` the size in whole GiB, and 1 below 1 GiB
/// (`inactive_is_low`, mm/vmscan.c): 1 GB → 3, 10 GB → 10, 100 GB → 31.
pub fn inactive_ratio(total_pages: u64) -> u64 {
    let gb = total_pages >> (30 - PAGE_SHIFT);
    if gb == 0 {
        1
    } else {
        isqrt(10 * gb)
    }
}

/// True if the inactive list is too small next to the active one, so reclaim must
/// deactivate pages first (`inactive_is_low`). `pages_per_page` is what each counted
/// page stands for (`Mechanisms::pages_per_simulated_page`: N in a run sampled at 1/N,
/// else 1): the ratio depends on the size of the lists on the full machine, not on
/// how many of their pages a sample keeps.
pub fn inactive_is_low(inactive_pages: u64, active_pages: u64, pages_per_page: u64) -> bool {
    let full_size = (inactive_pages + active_pages) * pages_per_page.max(1);
    inactive_pages * inactive_ratio(full_size) < active_pages
}

/// Integer square root, rounded down (`int_sqrt`).
fn isqrt(n: u64) -> u64 {
    let mut r = (n as f64).sqrt() as u64;
    while r * r > n {
        r -= 1;
    }
    while (r + 1) * (r + 1) <= n {
        r += 1;
    }
    r
}

/// What the LRU knows about one page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LruEntry {
    /// Tier whose lists hold the page.
    pub tier: TierId,
    /// Which list.
    pub list: LruList,
    /// `PG_referenced`.
    pub referenced: bool,
    /// Base pages in the unit (1, or 512 for a huge page).
    pub nr_pages: u64,
}

/// A page reclaim chose to demote, already isolated from its list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Victim {
    /// Owner.
    pub pid: Pid,
    /// The page (huge-page head for a huge page).
    pub vpn: Vpn,
    /// Tier it was taken from.
    pub tier: TierId,
    /// Base pages in the unit.
    pub nr_pages: u64,
}

/// What one pass of [`Lru::shrink_inactive_list`] did, in page units.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InactiveScan {
    /// Units taken off the inactive tail.
    pub scanned: u64,
    /// Referenced on their second look: moved to the active list.
    pub activated: u64,
    /// Referenced on their first look: marked `PG_referenced`, back to the inactive head.
    pub kept: u64,
    /// Not referenced: isolated as victims.
    pub isolated: u64,
    /// Found not resident any more: dropped from the lists.
    pub dropped: u64,
}

const NIL: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Node {
    pid: Pid,
    vpn: Vpn,
    prev: u32,
    next: u32,
    tier: u8,
    list: LruList,
    referenced: bool,
    nr_pages: u32,
}

/// One list: head = most recently added, tail = the oldest.
#[derive(Debug, Clone, Copy)]
struct List {
    head: u32,
    tail: u32,
    nr_pages: u64,
}

impl List {
    const EMPTY: List = List {
        head: NIL,
        tail: NIL,
        nr_pages: 0,
    };
}

/// The LRU lists of every tier. Pages are keyed by `(pid, vpn)` (the head vpn for a
/// huge page); the hash map only answers lookups, every walk follows list order, so
/// results never depend on hash order.
#[derive(Debug, Clone, Default)]
pub struct Lru {
    nodes: Vec<Node>,
    free_slots: Vec<u32>,
    index: HashMap<(Pid, Vpn), u32>,
    /// Per tier: `[inactive, active]`.
    lists: Vec<[List; 2]>,
}

impl Lru {
    /// Empty lists for `nr_tiers` tiers.
    pub fn new(nr_tiers: usize) -> Lru {
        Lru {
            lists: vec![[List::EMPTY; 2]; nr_tiers],
            ..Lru::default()
        }
    }

    /// Base pages on `list` of `tier`.
    pub fn nr_pages(&self, tier: TierId, list: LruList) -> u64 {
        self.lists
            .get(tier.index())
            .map_or(0, |l| l[list as usize].nr_pages)
    }

    /// Page units tracked over all tiers.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// True if no page is tracked.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// The state of a page, if tracked.
    pub fn get(&self, pid: Pid, vpn: Vpn) -> Option<LruEntry> {
        let n = &self.nodes[*self.index.get(&(pid, vpn))? as usize];
        Some(LruEntry {
            tier: TierId(n.tier),
            list: n.list,
            referenced: n.referenced,
            nr_pages: n.nr_pages as u64,
        })
    }

    /// Pages of `list` of `tier` from head (newest) to tail (oldest); for tests and
    /// inspection.
    pub fn pages(&self, tier: TierId, list: LruList) -> Vec<(Pid, Vpn)> {
        let mut out = Vec::new();
        let Some(l) = self.lists.get(tier.index()) else {
            return out;
        };
        let mut i = l[list as usize].head;
        while i != NIL {
            let n = &self.nodes[i as usize];
            out.push((n.pid, n.vpn));
            i = n.next;
        }
        out
    }

    /// A page was allocated on first touch: it enters the inactive list of its tier
    /// (`lru_cache_add_inactive_or_unevictable`).
    pub fn on_alloc(&mut self, pid: Pid, vpn: Vpn, tier: TierId, huge: bool) {
        let nr = if huge { SUBPAGES_PER_HUGE } else { 1 };
        self.insert(pid, vpn, tier, nr, LruList::Inactive, false);
    }

    /// A page migrated into `to`: it joins the head of the same kind of list there
    /// (migration copies `PG_active` and `PG_referenced`). An untracked page joins the
    /// inactive list.
    pub fn on_migrated(&mut self, pid: Pid, vpn: Vpn, to: TierId, nr_pages: u64) {
        match self.index.get(&(pid, vpn)).copied() {
            Some(i) => {
                self.unlink(i);
                self.nodes[i as usize].tier = to.0;
                self.link_head(i);
            }
            None => self.insert(pid, vpn, to, nr_pages, LruList::Inactive, false),
        }
    }

    /// A victim was demoted to `to`: it joins the head of `to`'s inactive list,
    /// unreferenced (reclaim cleared `PG_referenced` when it chose the page).
    pub fn on_demoted(&mut self, v: &Victim, to: TierId) {
        self.insert(v.pid, v.vpn, to, v.nr_pages, LruList::Inactive, false);
    }

    /// A victim could not be demoted: back to the head of its inactive list.
    pub fn putback(&mut self, v: &Victim) {
        self.insert(v.pid, v.vpn, v.tier, v.nr_pages, LruList::Inactive, false);
    }

    /// Forget a page (freed). Returns true if it was tracked.
    pub fn remove(&mut self, pid: Pid, vpn: Vpn) -> bool {
        match self.index.remove(&(pid, vpn)) {
            Some(i) => {
                self.unlink(i);
                self.free_slots.push(i);
                true
            }
            None => false,
        }
    }

    /// Forget every page of `pid` in `[start_vpn, start_vpn + nr_pages)` (munmap).
    pub fn remove_range(&mut self, pid: Pid, start_vpn: Vpn, nr_pages: u64) {
        let end = start_vpn.saturating_add(nr_pages);
        // A huge page is keyed by its head, which may precede the range.
        let head = huge_head(start_vpn);
        if head != start_vpn && self.get(pid, head).is_some_and(|e| e.nr_pages > 1) {
            self.remove(pid, head);
        }
        if nr_pages as usize <= self.index.len() {
            for vpn in start_vpn..end {
                self.remove(pid, vpn);
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
                self.remove(pid, vpn);
            }
        }
    }

    /// Move a page to the head of its tier's active list (`folio_activate`).
    /// Returns false if the page is not tracked.
    pub fn activate(&mut self, pid: Pid, vpn: Vpn) -> bool {
        let Some(&i) = self.index.get(&(pid, vpn)) else {
            return false;
        };
        self.unlink(i);
        self.nodes[i as usize].list = LruList::Active;
        self.link_head(i);
        true
    }

    /// `folio_mark_accessed`: inactive,unreferenced → inactive,referenced;
    /// inactive,referenced → active,unreferenced; active,unreferenced →
    /// active,referenced. Returns the page's list afterwards (`None` if untracked).
    pub fn mark_page_accessed(&mut self, pid: Pid, vpn: Vpn) -> Option<LruList> {
        let i = *self.index.get(&(pid, vpn))? as usize;
        let n = self.nodes[i];
        if !n.referenced {
            self.nodes[i].referenced = true;
        } else if n.list == LruList::Inactive {
            self.activate(pid, vpn);
            self.nodes[i].referenced = false;
        }
        Some(self.nodes[i].list)
    }

    /// `shrink_active_list`: move units from the tail of `tier`'s active list to the
    /// head of its inactive list until `nr_to_scan` base pages have been taken, oldest
    /// first so they keep their relative age, clearing each one's accessed bit through
    /// `young`. Referenced anonymous pages are deactivated too, as in the kernel.
    /// Returns units scanned.
    ///
    /// `nr_to_scan` counts base pages, as `isolate_lru_folios` does ("Account all
    /// pages in a folio"): one huge page ends a scan of `SWAP_CLUSTER_MAX`.
    pub fn shrink_active_list(
        &mut self,
        tier: TierId,
        nr_to_scan: u64,
        young: &mut dyn FnMut(Pid, Vpn) -> Option<bool>,
    ) -> u64 {
        let (mut scanned, mut scanned_pages) = (0, 0);
        while scanned_pages < nr_to_scan {
            let i = self.lists[tier.index()][LruList::Active as usize].tail;
            if i == NIL {
                break;
            }
            scanned += 1;
            scanned_pages += self.nodes[i as usize].nr_pages as u64;
            let (pid, vpn) = (self.nodes[i as usize].pid, self.nodes[i as usize].vpn);
            self.unlink(i);
            if young(pid, vpn).is_none() {
                self.index.remove(&(pid, vpn));
                self.free_slots.push(i);
                continue;
            }
            self.nodes[i as usize].list = LruList::Inactive;
            self.link_head(i);
        }
        scanned
    }

    /// `shrink_inactive_list` + `folio_check_references`: take units from the tail of
    /// `tier`'s inactive list until `nr_to_scan` base pages have been taken (as
    /// `isolate_lru_folios` counts them: a huge page counts 512, so a scan of
    /// `SWAP_CLUSTER_MAX` takes one). Referenced (accessed bit set) with
    /// `PG_referenced` already set → activated; referenced without it → marked and
    /// rotated to the inactive head; not referenced → isolated into `victims` (the
    /// caller demotes them, or puts them back with [`Lru::putback`]).
    pub fn shrink_inactive_list(
        &mut self,
        tier: TierId,
        nr_to_scan: u64,
        young: &mut dyn FnMut(Pid, Vpn) -> Option<bool>,
        victims: &mut Vec<Victim>,
    ) -> InactiveScan {
        let mut s = InactiveScan::default();
        let mut scanned_pages = 0;
        // Rotated pages go to the head; stop after `nr_to_scan` so a list of only
        // referenced pages is not walked twice in one call.
        while scanned_pages < nr_to_scan {
            let i = self.lists[tier.index()][LruList::Inactive as usize].tail;
            if i == NIL {
                break;
            }
            s.scanned += 1;
            scanned_pages += self.nodes[i as usize].nr_pages as u64;
            let n = self.nodes[i as usize];
            self.unlink(i);
            let Some(referenced_ptes) = young(n.pid, n.vpn) else {
                self.index.remove(&(n.pid, n.vpn));
                self.free_slots.push(i);
                s.dropped += 1;
                continue;
            };
            let referenced_folio = n.referenced;
            let node = &mut self.nodes[i as usize];
            node.referenced = false;
            if referenced_ptes {
                // Mapped pages start out referenced by their instantiating fault, so
                // a page needs two looks with references to be activated.
                node.referenced = true;
                if referenced_folio {
                    node.list = LruList::Active;
                    s.activated += 1;
                } else {
                    s.kept += 1;
                }
                self.link_head(i);
            } else {
                self.index.remove(&(n.pid, n.vpn));
                self.free_slots.push(i);
                victims.push(Victim {
                    pid: n.pid,
                    vpn: n.vpn,
                    tier,
                    nr_pages: n.nr_pages as u64,
                });
                s.isolated += 1;
            }
        }
        s
    }

    // ----- list plumbing -------------------------------------------------------------

    fn insert(
        &mut self,
        pid: Pid,
        vpn: Vpn,
        tier: TierId,
        nr_pages: u64,
        list: LruList,
        referenced: bool,
    ) {
        if self.lists.len() <= tier.index() {
            self.lists.resize(tier.index() + 1, [List::EMPTY; 2]);
        }
        let node = Node {
            pid,
            vpn,
            prev: NIL,
            next: NIL,
            tier: tier.0,
            list,
            referenced,
            nr_pages: nr_pages as u32,
        };
        let i = match self.index.get(&(pid, vpn)).copied() {
            Some(i) => {
                self.unlink(i);
                i
            }
            None => {
                let i = match self.free_slots.pop() {
                    Some(i) => i,
                    None => {
                        self.nodes.push(node);
                        (self.nodes.len() - 1) as u32
                    }
                };
                self.index.insert((pid, vpn), i);
                i
            }
        };
        self.nodes[i as usize] = node;
        self.link_head(i);
    }

    fn link_head(&mut self, i: u32) {
        let n = self.nodes[i as usize];
        let l = &mut self.lists[n.tier as usize][n.list as usize];
        let old = l.head;
        l.head = i;
        if old == NIL {
            l.tail = i;
        }
        l.nr_pages += n.nr_pages as u64;
        let node = &mut self.nodes[i as usize];
        node.prev = NIL;
        node.next = old;
        if old != NIL {
            self.nodes[old as usize].prev = i;
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
        let l = &mut self.lists[n.tier as usize][n.list as usize];
        if l.head == i {
            l.head = n.next;
        }
        if l.tail == i {
            l.tail = n.prev;
        }
        l.nr_pages -= n.nr_pages as u64;
        let node = &mut self.nodes[i as usize];
        node.prev = NIL;
        node.next = NIL;
    }
}

/// What an LRU-based NUMA-tiering policy observes (`linux-tiering`, `tpp`, `chrono`):
/// page allocations (to list pages), hinting faults (promotion) and accessed bits
/// (LRU aging).
pub const LRU_TIERING_REQUIREMENTS: Requirements = Requirements {
    page_alloc_events: true,
    hint_faults: true,
    accessed_bits: true,
    unbounded_fast_tier: false,
    sampling: false,
    future_knowledge: false,
};

/// The reclaim half the kernel shares among its tiering modes, sized for the
/// machine's tiers: the per-tier LRU lists and one kswapd per tier
/// (`linux-tiering`, `tpp` and `chrono` set it up in `init`).
pub fn lists_and_kswapd(cfg: &KswapdConfig, mech: &dyn Mechanisms) -> (Lru, Kswapd) {
    let nr_tiers = mech.tiers().len();
    (Lru::new(nr_tiers), Kswapd::new(cfg.clone(), nr_tiers))
}

/// How the kswapd-like thread paces itself. These are not kernel parameters: the
/// machine charges the real costs of every young test and migration; these only
/// space out kswapd's batches in simulated time the way a single reclaim thread
/// doing that work would be spaced, so it cannot demote faster than one CPU can.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KswapdConfig {
    /// Page units demoted per batch before kswapd yields, pages (`SWAP_CLUSTER_MAX` =
    /// 32; range ≥ 1).
    pub batch_pages: u64,
    /// Time one demotion occupies kswapd, ns (default 3500: the simulator's default
    /// fixed migration cost 3000 ns plus a 4 KiB copy at 8 GB/s, `docs/machine.md`;
    /// range ≥ 0).
    pub demote_ns_per_page: u64,
    /// Time one accessed-bit look occupies kswapd, ns (default 50: the simulator's
    /// default `young_test_ns`; range ≥ 0).
    pub scan_ns_per_page: u64,
}

impl Default for KswapdConfig {
    fn default() -> Self {
        KswapdConfig {
            batch_pages: SWAP_CLUSTER_MAX,
            demote_ns_per_page: 3_500,
            scan_ns_per_page: 50,
        }
    }
}

impl KswapdConfig {
    /// How long a batch that demoted `demoted` and looked at `scanned` pages occupies
    /// kswapd, ns (at least 1). One thread: in a sampled run each page it handles
    /// stands for N (`Mechanisms::pages_per_simulated_page`), so a batch occupies it N
    /// times as long and it reclaims at the full machine's pace.
    pub fn busy_ns(&self, demoted: u64, scanned: u64, mech: &dyn Mechanisms) -> u64 {
        ((demoted * self.demote_ns_per_page + scanned * self.scan_ns_per_page)
            * mech.pages_per_simulated_page())
        .max(1)
    }

    /// Check ranges.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.batch_pages == 0 {
            return Err("kswapd.batch_pages must be at least 1".into());
        }
        Ok(())
    }
}

/// Counters of the kswapd-like thread, over all tiers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KswapdStats {
    /// Wakeups that started a run.
    pub nr_wakeups: u64,
    /// Batches run.
    pub nr_batches: u64,
    /// Page units whose accessed bit was looked at.
    pub nr_scanned: u64,
    /// Units moved inactive → active by reclaim.
    pub nr_activated: u64,
    /// Base pages demoted.
    pub nr_demoted_pages: u64,
    /// Demotions the mover refused.
    pub nr_demote_failed: u64,
}

/// Whether a promotion of a unit of `unit_pages` refused on the watermark, finding the
/// fast tier's kswapd idle, makes it reclaim at once and is then tried again: for a
/// base page on a sampled machine only.
///
/// On the full machine a refused hinting-fault promotion wakes kswapd, which frees a
/// batch while the next faults go on: about one fault per kswapd cycle is refused
/// (GUPS under Base+PD: 68 k of 2.71 M). A sampled fault stands for N faults (N =
/// 1 / rate) on N pages, of which the full machine refuses about the first and
/// promotes the rest into the room kswapd makes; refusing the sampled one refuses all
/// N (measured: 1 sampled promotion in 5 refused at 1/64, against 1 in 40 exactly).
/// So a sampled refusal runs kswapd's batch at once, on the kthread, and retries.
/// The refusal itself stays on record (a failed migration and a remote fault for the
/// scanner, whose period doubles after any failure in a pass, as it does on the full
/// machine with its one refusal per cycle). Not for a huge page: kswapd woken for
/// one reclaims about one huge page's room per cycle, so the full machine refuses a
/// large share of the N attempts too (measured: retrying them made Linux tiering's
/// THP cells of the `memtis` suite 10-13% slower). See docs/sampling.md, "A refusal
/// stands for N attempts".
/// `pages_per_simulated_page` is the machine's
/// ([`Mechanisms::pages_per_simulated_page`]): 1 exact and live.
pub fn refusal_reclaims_at_once(pages_per_simulated_page: u64, unit_pages: u64) -> bool {
    unit_pages == 1 && pages_per_simulated_page > 1
}

/// Pages kswapd isolates from a list per round (`SWAP_CLUSTER_MAX` exactly) on a
/// machine where a simulated page stands for `pages_per_simulated_page` (N): 32 / N,
/// at least 1.
///
/// kswapd demotes every unreferenced page of an isolated round before it looks at
/// the watermark again (`shrink_folio_list` → `demote_folio_list`), so a round is the
/// step by which it overshoots the mark and the number of cycles it takes to free a
/// given room. The watermarks scale with the machine; a round of 32 sampled pages
/// would stand for 32·N pages, and the sampled kswapd would wake about N times too
/// seldom and free N times too much per wakeup (measured at 1/16: 2 659 wakeups
/// against 27 306 exactly, docs/sampling.md, "Why the sampled kswapd's cycles were
/// coarse"). A round of 32 / N sampled pages is the full round's image. A huge page
/// still ends a round by itself, as exactly. 1 exact and live.
pub fn isolated_per_round(pages_per_simulated_page: u64) -> u64 {
    sampled_round(SWAP_CLUSTER_MAX, pages_per_simulated_page)
}

/// A reclaim round of `full_round` pages on the full machine, in sampled pages on a
/// machine where a simulated page stands for `pages_per_simulated_page` (N):
/// `full_round` / N, at least 1 (see [`isolated_per_round`]; the MGLRU forms' kswapd
/// batch uses it too).
pub fn sampled_round(full_round: u64, pages_per_simulated_page: u64) -> u64 {
    (full_round / pages_per_simulated_page.max(1)).max(1)
}

/// A kswapd per tier, demoting from that tier to the next.
#[derive(Debug, Clone)]
pub struct Kswapd {
    cfg: KswapdConfig,
    /// Per tier: a batch is scheduled.
    awake: Vec<bool>,
    /// Per tier: page units looked at since the last demotion.
    idle_scanned: Vec<u64>,
    /// Per tier: the order it was woken for and what it reclaimed since.
    order: Vec<ReclaimOrder>,
    /// Per tier: when the thread is done with its last batch ([`KswapdConfig::busy_ns`]).
    busy_until: Vec<Nanos>,
    stats: KswapdStats,
}

impl Kswapd {
    /// kswapd threads for `nr_tiers` tiers (the last tier has nowhere to demote to).
    pub fn new(cfg: KswapdConfig, nr_tiers: usize) -> Kswapd {
        Kswapd {
            cfg,
            awake: vec![false; nr_tiers],
            idle_scanned: vec![0; nr_tiers],
            order: vec![ReclaimOrder::default(); nr_tiers],
            busy_until: vec![0; nr_tiers],
            stats: KswapdStats::default(),
        }
    }

    /// Counters.
    pub fn stats(&self) -> KswapdStats {
        self.stats
    }

    /// The tier whose kswapd timer `id` is, if it is one.
    pub fn owns(&self, id: TimerId) -> Option<TierId> {
        (KSWAPD_TIMER_BASE..KSWAPD_TIMER_BASE + 256)
            .contains(&id)
            .then(|| TierId((id - KSWAPD_TIMER_BASE) as u8))
    }

    /// Wake `tier`'s kswapd for an order-0 allocation (`wakeup_kswapd(.., 0, ..)`);
    /// see [`Kswapd::wake_for_unit`].
    pub fn wake(&mut self, tier: TierId, mech: &mut dyn Mechanisms) {
        self.wake_for_unit(tier, 1, mech);
    }

    /// Wake `tier`'s kswapd (`wakeup_kswapd`) for an allocation of `unit_pages` base
    /// pages (512 for a huge page that could not be promoted: `folio_order`). Until
    /// it sleeps again it reclaims for the largest unit it was woken for (see
    /// [`kswapd_balanced_free`]). Its first batch runs as soon as the machine fires
    /// timers, on a tiering CPU. Only the unit is recorded if it is already awake; a
    /// no-op on the last tier.
    pub fn wake_for_unit(&mut self, tier: TierId, unit_pages: u64, mech: &mut dyn Mechanisms) {
        let t = tier.index();
        if t + 1 >= self.awake.len() {
            return;
        }
        // `wakeup_kswapd` raises `kswapd_order` before it looks whether kswapd sleeps.
        self.order[t].raise(unit_pages);
        if self.awake[t] {
            return;
        }
        self.awake[t] = true;
        self.idle_scanned[t] = 0;
        self.stats.nr_wakeups += 1;
        // One thread: a wakeup while it is still busy with its last batch runs when
        // that batch is done.
        mech.schedule(
            mech.now().max(self.busy_until[t]),
            KSWAPD_TIMER_BASE + t as TimerId,
            Runner::Kthread,
        );
    }

    /// For a refusal on a sampled machine ([`refusal_reclaims_at_once`]): if `tier`'s
    /// kswapd is idle (asleep, and done with its last batch), wake it for a unit of
    /// `unit_pages` and run its first batch now, as the kthread ([`Kswapd::run`]'s
    /// arguments). Returns whether it ran; if not, the caller wakes it as usual.
    pub fn run_at_once_if_idle(
        &mut self,
        tier: TierId,
        unit_pages: u64,
        mark: f64,
        lru: &mut Lru,
        mech: &mut dyn Mechanisms,
        demoted: &mut Vec<Victim>,
    ) -> bool {
        let t = tier.index();
        if t + 1 >= self.awake.len() || self.awake[t] || mech.now() < self.busy_until[t] {
            return false;
        }
        self.order[t].raise(unit_pages);
        self.idle_scanned[t] = 0;
        self.stats.nr_wakeups += 1;
        mech.as_kthread(&mut |m| self.run(tier, mark, lru, m, demoted));
        true
    }

    /// Run one batch of `tier`'s kswapd from its timer: while the tier is not
    /// balanced for the watermark `mark` (fewer free pages than
    /// [`kswapd_balanced_free`] asks for the unit it was woken for), age its lists
    /// and demote unreferenced inactive pages to the next tier (async), up to
    /// `batch_pages` demotions. Demoted pages are appended to `demoted`. Reschedules
    /// itself while the tier is not balanced and it still makes progress.
    pub fn run(
        &mut self,
        tier: TierId,
        mark: f64,
        lru: &mut Lru,
        mech: &mut dyn Mechanisms,
        demoted: &mut Vec<Victim>,
    ) {
        let t = tier.index();
        if t + 1 >= self.awake.len() {
            return;
        }
        self.awake[t] = false;
        self.stats.nr_batches += 1;
        let to = TierId(tier.0 + 1);
        let (mut scanned, mut nr_demoted, mut isolated) = (0u64, 0u64, 0u64);
        let scan_budget = 4 * self.cfg.batch_pages.max(SWAP_CLUSTER_MAX);
        let nr_to_scan = isolated_per_round(mech.pages_per_simulated_page());
        let mut victims = Vec::new();
        while (mech.free_pages(tier) as f64) < self.order[t].balanced_free(mark)
            && nr_demoted < self.cfg.batch_pages
            && scanned < scan_budget
        {
            let before = scanned;
            // age_active_anon / shrink_list: keep the inactive list large enough.
            if inactive_is_low(
                lru.nr_pages(tier, LruList::Inactive),
                lru.nr_pages(tier, LruList::Active),
                mech.pages_per_simulated_page(),
            ) {
                scanned += lru.shrink_active_list(tier, nr_to_scan, &mut |p, v| {
                    mech.test_and_clear_young(p, v)
                });
            }
            let s = lru.shrink_inactive_list(
                tier,
                nr_to_scan,
                &mut |p, v| mech.test_and_clear_young(p, v),
                &mut victims,
            );
            scanned += s.scanned;
            isolated += s.isolated;
            self.stats.nr_activated += s.activated;
            // demote_folio_list: the whole isolated batch goes, as in the kernel.
            for v in victims.drain(..) {
                match mech.migrate(v.pid, v.vpn, to, MigrateMode::Async) {
                    Ok(()) => {
                        lru.on_demoted(&v, to);
                        nr_demoted += 1;
                        self.stats.nr_demoted_pages += v.nr_pages;
                        self.order[t].reclaimed_pages += v.nr_pages;
                        demoted.push(v);
                    }
                    Err(MigrateError::NotPresent) => {}
                    Err(_) => {
                        self.stats.nr_demote_failed += 1;
                        lru.putback(&v);
                    }
                }
            }
            if scanned == before {
                break; // both lists empty
            }
        }
        self.stats.nr_scanned += scanned;
        mech.charge_cpu((scanned + isolated) * LIST_OP_NS);
        // The batch occupies the thread whether or not it sleeps after it.
        let busy_ns = self.cfg.busy_ns(nr_demoted, scanned, mech);
        self.busy_until[t] = mech.now() + busy_ns;
        if mech.free_pages(tier) as f64 >= self.order[t].balanced_free(mark) {
            return self.order[t].sleep();
        }
        if nr_demoted == 0 {
            // kswapd_failures: give up until the next wakeup once every page of the
            // tier has had its two looks without anything to demote.
            self.idle_scanned[t] += scanned;
            let units = lru.nr_pages(tier, LruList::Inactive) + lru.nr_pages(tier, LruList::Active);
            if scanned == 0 || self.idle_scanned[t] > MAX_RECLAIM_PASSES * units {
                return self.order[t].sleep();
            }
        } else {
            self.idle_scanned[t] = 0;
        }
        self.awake[t] = true;
        mech.schedule(
            self.busy_until[t],
            KSWAPD_TIMER_BASE + t as TimerId,
            Runner::Kthread,
        );
    }
}

/// What one kswapd's current `balance_pgdat` reclaims for: the largest unit it was
/// woken for since it last slept and what it has reclaimed since (shared by
/// [`Kswapd`] and MGLRU's kswapd in `mglru_pd`).
#[derive(Debug, Clone, Copy, Default)]
pub struct ReclaimOrder {
    /// Base pages of the largest unit an allocation or promotion woke kswapd for
    /// (`1 << pgdat->kswapd_order`; 0 while asleep).
    pub unit_pages: u64,
    /// Base pages demoted since kswapd last went to sleep (`sc.nr_reclaimed`).
    pub reclaimed_pages: u64,
}

impl ReclaimOrder {
    /// A wakeup for a unit of `unit_pages` base pages: the order only grows until
    /// kswapd sleeps.
    pub fn raise(&mut self, unit_pages: u64) {
        self.unit_pages = self.unit_pages.max(unit_pages.max(1));
    }

    /// Free pages at which the tier counts as balanced for watermark `mark` now
    /// ([`kswapd_balanced_free`]).
    pub fn balanced_free(&self, mark: f64) -> f64 {
        kswapd_balanced_free(mark, self.unit_pages, self.reclaimed_pages)
    }

    /// kswapd goes back to sleep: the next wakeup starts a new `balance_pgdat`.
    pub fn sleep(&mut self) {
        *self = ReclaimOrder::default();
    }
}

/// Free pages at which kswapd, woken for units of `unit_pages` base pages (`1 <<
/// order`; 0 or 1 for order 0) and having demoted `reclaimed_pages` since, counts a
/// tier with watermark `mark` balanced (`pgdat_balanced` → `zone_watermark_ok_safe`
/// at that order, which first takes the `2^order - 1` pages a high-order request
/// cannot use off the free count). A huge page that failed to promote therefore
/// makes kswapd free 511 pages more than the mark; once it has reclaimed twice the
/// unit (`compact_gap`) it checks at order 0 again (`kswapd_shrink_node`).
///
/// The order-0 mark is the simulator's `free ≥ mark` (the kernel's test is strict);
/// a high-order one adds exactly the kernel's `2^order - 1`. The free block of that
/// order that `__zone_watermark_ok` also asks for is not modelled (the simulator's
/// tiers keep no buddy lists, so any free count of 512 pages holds a huge page).
pub fn kswapd_balanced_free(mark: f64, unit_pages: u64, reclaimed_pages: u64) -> f64 {
    if unit_pages > 1 && reclaimed_pages < 2 * unit_pages {
        mark + (unit_pages - 1) as f64
    } else {
        mark
    }
}

/// The promotion watermark of a tier (`WMARK_PROMO`, v5.18+): `high` plus one more
/// `watermark_scale_factor` step, the step being `high - low`. In tiering mode kswapd
/// reclaims until free pages reach it (`pgdat_balanced`), leaving room to promote.
pub fn promo_watermark(wm: Watermarks) -> f64 {
    wm.high + (wm.high - wm.low)
}

/// `migrate_balanced_pgdat`: a migration of `nr_pages` into a tier with `free` free
/// pages may go ahead only if the tier stays above its high watermark
/// (`zone_watermark_ok(high + nr)`, which needs free strictly above the mark).
pub fn migrate_balanced(free: u64, wm: Watermarks, nr_pages: u64) -> bool {
    free as f64 > wm.high + nr_pages as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    const P: Pid = Pid(0);
    const FAST: TierId = TierId(0);

    /// A young-bit oracle: pages in `hot` read as accessed (and the test clears them).
    fn young_from(hot: &mut BTreeSet<Vpn>) -> impl FnMut(Pid, Vpn) -> Option<bool> + '_ {
        move |_, v| Some(hot.remove(&v))
    }

    #[test]
    fn inactive_ratio_matches_the_kernel_formula() {
        let gib = GIB / PAGE_SIZE;
        assert_eq!(inactive_ratio(gib / 2), 1);
        assert_eq!(inactive_ratio(gib), 3); // int_sqrt(10)
        assert_eq!(inactive_ratio(10 * gib), 10); // int_sqrt(100)
        assert_eq!(inactive_ratio(100 * gib), 31); // int_sqrt(1000)
                                                   // 10 GB: inactive is low below a tenth of active.
        assert!(inactive_is_low(gib / 2, 10 * gib - gib / 2, 1));
        assert!(!inactive_is_low(2 * gib, 8 * gib, 1));
        // Below 1 GB the lists are kept at 1:1.
        assert!(inactive_is_low(99, 100, 1));
        assert!(!inactive_is_low(100, 100, 1));
    }

    #[test]
    fn only_a_base_page_refused_on_a_sampled_machine_reclaims_at_once() {
        assert!(!refusal_reclaims_at_once(1, 1), "exact machine");
        assert!(refusal_reclaims_at_once(64, 1), "base page at 1/64");
        assert!(!refusal_reclaims_at_once(64, 512), "huge page at 1/64");
        assert!(!refusal_reclaims_at_once(1, 512), "huge page exactly");
    }

    #[test]
    fn a_sampled_list_pair_is_balanced_for_the_size_it_stands_for() {
        // 40 960 counted pages (160 MiB) standing for 10 GiB at 1/64: the kernel's ratio
        // for 10 GB (10) applies, not the 1:1 of a list pair under 1 GB.
        let total = 10 * (GIB / PAGE_SIZE) / 64;
        let (inactive, active) = (5_000, total - 5_000);
        assert!(inactive_is_low(inactive, active, 1), "160 MiB: kept 1:1");
        assert!(
            !inactive_is_low(inactive, active, 64),
            "10 GiB: 1:10 is enough"
        );
        assert!(
            inactive_is_low(3_000, total - 3_000, 64),
            "below 1:10 it is low"
        );
    }

    #[test]
    fn pages_enter_inactive_and_keep_their_list_when_migrated() {
        let mut lru = Lru::new(2);
        for v in 0..4 {
            lru.on_alloc(P, v, FAST, false);
        }
        assert_eq!(
            lru.pages(FAST, LruList::Inactive),
            vec![(P, 3), (P, 2), (P, 1), (P, 0)]
        );
        assert!(lru.activate(P, 1));
        lru.on_migrated(P, 1, TierId(1), 1);
        assert_eq!(lru.get(P, 1).unwrap().list, LruList::Active);
        assert_eq!(lru.get(P, 1).unwrap().tier, TierId(1));
        assert_eq!(lru.nr_pages(FAST, LruList::Inactive), 3);
        assert_eq!(lru.nr_pages(TierId(1), LruList::Active), 1);
        lru.on_alloc(P, 512, FAST, true);
        assert_eq!(lru.nr_pages(FAST, LruList::Inactive), 3 + 512);
        lru.remove_range(P, 0, 1024);
        assert!(lru.is_empty());
        assert_eq!(lru.nr_pages(FAST, LruList::Inactive), 0);
    }

    #[test]
    fn aging_moves_unreferenced_active_pages_to_inactive_oldest_first() {
        let mut lru = Lru::new(2);
        for v in 0..4 {
            lru.on_alloc(P, v, FAST, false);
            lru.activate(P, v);
        }
        // Active list, head→tail: 3 2 1 0. Age two: 0 then 1 go to the inactive head.
        let mut hot = BTreeSet::new();
        let scanned = lru.shrink_active_list(FAST, 2, &mut young_from(&mut hot));
        assert_eq!(scanned, 2);
        assert_eq!(lru.pages(FAST, LruList::Active), vec![(P, 3), (P, 2)]);
        // Page 0 is older than page 1, so it stays nearer the inactive tail.
        assert_eq!(lru.pages(FAST, LruList::Inactive), vec![(P, 1), (P, 0)]);
        // A referenced anonymous page is deactivated too (kernel behaviour), but its
        // accessed bit is consumed by the look.
        let mut hot: BTreeSet<Vpn> = [2].into();
        lru.shrink_active_list(FAST, 1, &mut young_from(&mut hot));
        assert_eq!(lru.get(P, 2).unwrap().list, LruList::Inactive);
        assert!(hot.is_empty());
    }

    #[test]
    fn referenced_inactive_pages_are_activated_on_their_second_look() {
        let mut lru = Lru::new(2);
        for v in 0..3 {
            lru.on_alloc(P, v, FAST, false);
        }
        // First look: 0 and 1 referenced, 2 not (tail is 0).
        let mut hot: BTreeSet<Vpn> = [0, 1].into();
        let mut victims = Vec::new();
        let s = lru.shrink_inactive_list(FAST, 3, &mut young_from(&mut hot), &mut victims);
        assert_eq!((s.scanned, s.kept, s.activated, s.isolated), (3, 2, 0, 1));
        assert_eq!(
            victims,
            vec![Victim {
                pid: P,
                vpn: 2,
                tier: FAST,
                nr_pages: 1
            }]
        );
        assert!(lru.get(P, 0).unwrap().referenced);
        // Second look: 0 referenced again → active; 1 idle → victim.
        let mut hot: BTreeSet<Vpn> = [0].into();
        victims.clear();
        let s = lru.shrink_inactive_list(FAST, 2, &mut young_from(&mut hot), &mut victims);
        assert_eq!((s.activated, s.isolated), (1, 1));
        assert_eq!(lru.get(P, 0).unwrap().list, LruList::Active);
        assert_eq!(victims[0].vpn, 1);
        assert!(
            lru.get(P, 1).is_none(),
            "victims are isolated from the lists"
        );
        // A page that is no longer resident is dropped.
        lru.on_alloc(P, 9, FAST, false);
        let s = lru.shrink_inactive_list(FAST, 1, &mut |_, _| None, &mut victims);
        assert_eq!(s.dropped, 1);
        assert!(lru.get(P, 9).is_none());
    }

    #[test]
    fn mark_page_accessed_steps_through_three_states() {
        let mut lru = Lru::new(2);
        lru.on_alloc(P, 7, TierId(1), false);
        assert_eq!(lru.mark_page_accessed(P, 7), Some(LruList::Inactive));
        assert!(lru.get(P, 7).unwrap().referenced);
        assert_eq!(lru.mark_page_accessed(P, 7), Some(LruList::Active));
        assert!(!lru.get(P, 7).unwrap().referenced);
        assert_eq!(lru.mark_page_accessed(P, 7), Some(LruList::Active));
        assert!(lru.get(P, 7).unwrap().referenced);
        assert_eq!(lru.mark_page_accessed(P, 8), None);
    }

    /// HeMem's GUPS at 1:8 with its hot tenth starting on the slow tier: both policies
    /// built on these lists find much of it, first-touch by construction cannot.
    /// Time series at 1 ms so kswapd timers woken inside an access fire within 1 ms.
    #[test]
    fn gups_linux_tiering_and_tpp_beat_first_touch() {
        use crate::numa_scan::NumaScanConfig;
        use tierkit_sim::testing::run;
        use tierkit_sim::{MachineConfig, SimConfig};
        use tierkit_workloads::{Gups, GupsConfig};
        let machine = MachineConfig {
            fast: "1:8".into(),
            llc_enabled: false,
            ..MachineConfig::default()
        };
        let sim = SimConfig {
            interval_ms: 1,
            ..SimConfig::default()
        };
        // ~4.3 simulated seconds: scan passes arm the slow tier at 1 s and 3 s.
        let gups = GupsConfig {
            footprint_mib: 256,
            nr_updates: 11_000_000,
            gap_ns: 300,
            ..GupsConfig::default()
        };
        let scan = NumaScanConfig {
            adaptive_period: false,
            ..NumaScanConfig::default()
        };
        let ratios = |p: Box<dyn Policy>| {
            let (out, _) = run(&machine, &sim, p, Box::new(Gups::new(&gups, 1)));
            let last: Vec<_> = out.series.rows.iter().rev().take(500).collect();
            let mem: u64 = last.iter().map(|r| r.mem_accesses).sum();
            let fast: f64 = last
                .iter()
                .map(|r| r.fast_access_ratio * r.mem_accesses as f64)
                .sum();
            eprintln!(
                "{}: promoted {} demoted {} stats {:?}",
                out.summary.policy,
                out.summary.promoted_pages,
                out.summary.demoted_pages,
                out.summary.policy_stats
            );
            (out.summary.fast_access_ratio, fast / mem as f64)
        };
        let (ft_run, ft_end) = ratios(Box::new(crate::FirstTouch));
        let lt = crate::LinuxTiering::new(crate::LinuxTieringConfig {
            scan: scan.clone(),
            ..Default::default()
        });
        let tpp = crate::Tpp::new(crate::TppConfig {
            scan,
            ..Default::default()
        });
        for (name, p) in [
            ("linux-tiering", Box::new(lt) as Box<dyn Policy>),
            ("tpp", Box::new(tpp)),
        ] {
            let (run_ratio, end_ratio) = ratios(p);
            eprintln!(
                "{name}: fast access ratio {run_ratio:.3} over the run, {end_ratio:.3} in the \
                 last 0.5 s; first-touch {ft_run:.3}, {ft_end:.3}"
            );
            assert!(
                run_ratio > 3.0 * ft_run && end_ratio > 5.0 * ft_end && end_ratio > 0.08,
                "{name}: fast access ratio {run_ratio:.3} over the run, {end_ratio:.3} in the \
                 last 0.5 s; first-touch {ft_run:.3}, {ft_end:.3}"
            );
        }
    }

    #[test]
    fn watermark_helpers() {
        let wm = Watermarks::pages(10, 13, 16);
        assert_eq!(promo_watermark(wm), 19.0);
        assert!(migrate_balanced(18, wm, 1));
        assert!(!migrate_balanced(17, wm, 1));
    }

    /// `isolate_lru_folios` counts every base page of a folio against `nr_to_scan`
    /// ("Account all pages in a folio"): a scan of `SWAP_CLUSTER_MAX` takes one huge
    /// page off either list, and 32 base pages.
    #[test]
    fn a_scan_of_swap_cluster_max_takes_one_huge_page_or_32_base_pages() {
        let mut lru = Lru::new(2);
        for h in 0..4 {
            lru.on_alloc(P, h * 512, FAST, true);
        }
        let mut victims = Vec::new();
        let s = lru.shrink_inactive_list(
            FAST,
            SWAP_CLUSTER_MAX,
            &mut |_, _| Some(false),
            &mut victims,
        );
        assert_eq!((s.scanned, s.isolated), (1, 1));
        assert_eq!(victims[0].nr_pages, 512);
        for h in 1..4 {
            lru.activate(P, h * 512);
        }
        let scanned = lru.shrink_active_list(FAST, SWAP_CLUSTER_MAX, &mut |_, _| Some(false));
        assert_eq!(scanned, 1);
        assert_eq!(lru.nr_pages(FAST, LruList::Active), 2 * 512);
        // Base pages: exactly 32 of 40.
        let mut lru = Lru::new(2);
        for v in 0..40 {
            lru.on_alloc(P, v, FAST, false);
        }
        victims.clear();
        let s = lru.shrink_inactive_list(
            FAST,
            SWAP_CLUSTER_MAX,
            &mut |_, _| Some(false),
            &mut victims,
        );
        assert_eq!((s.scanned, s.isolated), (32, 32));
        // A scan that has taken 31 base pages still takes the huge page behind them.
        let mut lru = Lru::new(2);
        for v in 0..31 {
            lru.on_alloc(P, v, FAST, false);
        }
        lru.on_alloc(P, 4096, FAST, true);
        lru.on_alloc(P, 5000, FAST, false);
        victims.clear();
        let s = lru.shrink_inactive_list(
            FAST,
            SWAP_CLUSTER_MAX,
            &mut |_, _| Some(false),
            &mut victims,
        );
        assert_eq!(
            (s.scanned, victims.last().map(|v| v.nr_pages)),
            (32, Some(512))
        );
    }

    /// `pgdat_balanced` at the order kswapd was woken for: an order-9 request takes
    /// 511 pages off the free count before comparing with the mark, until kswapd has
    /// reclaimed `compact_gap(9)` = 1024 pages and checks at order 0.
    #[test]
    fn kswapd_woken_for_a_huge_page_frees_511_pages_more_until_it_reclaimed_two() {
        let mark = 1000.0;
        assert_eq!(kswapd_balanced_free(mark, 0, 0), mark);
        assert_eq!(kswapd_balanced_free(mark, 1, 0), mark);
        assert_eq!(kswapd_balanced_free(mark, 512, 0), mark + 511.0);
        assert_eq!(kswapd_balanced_free(mark, 512, 1023), mark + 511.0);
        assert_eq!(kswapd_balanced_free(mark, 512, 1024), mark);
        // With the promotion marks of a real zone (step < 512), the free memory an
        // order-9 kswapd leaves lets the huge page through `migrate_balanced_pgdat`;
        // the order-0 mark does not.
        let wm = Watermarks::pages(1000, 1254, 1508);
        let order0 = kswapd_balanced_free(promo_watermark(wm), 1, 0) as u64;
        let order9 = kswapd_balanced_free(promo_watermark(wm), 512, 0) as u64;
        assert!(!migrate_balanced(order0, wm, 512));
        assert!(migrate_balanced(order9, wm, 512));
    }
}

/// Scripted workloads shared by the tests of the policies built on these lists.
#[cfg(test)]
pub(crate) mod test_scripts {
    use tierkit_core::*;
    use tierkit_sim::machine::Machine;
    use tierkit_sim::metrics::IntervalRow;
    use tierkit_sim::testing::*;
    use tierkit_sim::{MachineConfig, RunOutput};

    const TARGETS: u64 = 0x1000_0000;
    const CLOCK: u64 = 0x2000_0000;
    const REGION: u64 = 0x4000_0000;
    const SLOW_MIB: u64 = 64;
    const IDLE_STEP_NS: u64 = 10 * NS_PER_MS;

    /// A policy counter from a run summary (panics if the policy has none by that name).
    pub fn stat(out: &RunOutput, name: &str) -> f64 {
        out.summary
            .policy_stats
            .iter()
            .find(|(k, _)| k == name)
            .unwrap_or_else(|| panic!("no policy stat {name}"))
            .1
    }

    /// Sum a per-interval column into 1 s buckets of simulated time.
    pub fn per_second(rows: &[IntervalRow], f: impl Fn(&IntervalRow) -> u64) -> Vec<u64> {
        let mut out: Vec<u64> = Vec::new();
        for r in rows {
            // A row covers (end - interval, end]: bucket by its end, just inside.
            let sec = ((r.time_s * 1000.0).round() as u64).saturating_sub(1) / 1000;
            if out.len() <= sec as usize {
                out.resize(sec as usize + 1, 0);
            }
            out[sec as usize] += f(r);
        }
        out
    }

    /// One process with a few *target* pages touched first, then a clock page, then
    /// filler twice the size of the fast tier. kswapd demotes from the LRU tail, so
    /// the targets are the first pages demoted: after the start-up they sit on the
    /// slow tier, idle, ready for the test to fault them at chosen times. The thread
    /// idles by reading the clock page every 10 ms.
    pub struct DemotedTargets {
        fast_mib: u64,
        nr_targets: u64,
        ops: Vec<Op>,
        t_ns: u64,
    }

    impl DemotedTargets {
        /// The start-up phase on a `fast_mib` fast tier with `nr_targets` targets.
        pub fn new(fast_mib: u64, nr_targets: u64) -> DemotedTargets {
            let mut s = DemotedTargets {
                fast_mib,
                nr_targets,
                ops: Vec::new(),
                t_ns: 0,
            };
            for i in 0..nr_targets {
                s.op(write(TARGETS + i * PAGE_SIZE, 100));
            }
            s.op(write(CLOCK, 100));
            for i in 0..s.filler_pages() {
                s.op(write(REGION + i * PAGE_SIZE, 1_000));
            }
            s
        }

        fn filler_pages(&self) -> u64 {
            2 * self.fast_mib * MIB / PAGE_SIZE
        }

        fn op(&mut self, op: Op) {
            if let Op::Access { gap_ns, .. } = op {
                self.t_ns += gap_ns as u64;
            }
            self.ops.push(op);
        }

        /// Read the clock page every 10 ms until about `t_ns` (compute time only;
        /// memory latencies add a few µs).
        pub fn idle_until(&mut self, t_ns: u64) {
            while self.t_ns + IDLE_STEP_NS < t_ns {
                self.op(read(CLOCK, IDLE_STEP_NS as u32));
            }
            if self.t_ns < t_ns {
                self.op(read(CLOCK, (t_ns - self.t_ns) as u32));
            }
        }

        /// Read target `i` now.
        pub fn read_target(&mut self, i: u64) {
            assert!(i < self.nr_targets);
            self.op(read(TARGETS + i * PAGE_SIZE, 0));
        }

        /// The machine: `fast_mib` fast, 64 MiB slow, no LLC.
        pub fn machine(&self) -> MachineConfig {
            small_machine(self.fast_mib, SLOW_MIB)
        }

        /// The workload.
        pub fn script(&self) -> Box<dyn Workload> {
            let filler = self.filler_pages() * PAGE_SIZE;
            let mappings = [
                (TARGETS, self.nr_targets * PAGE_SIZE),
                (CLOCK, PAGE_SIZE),
                (REGION, filler),
            ];
            Box::new(
                Script::new(filler + (self.nr_targets + 1) * PAGE_SIZE)
                    .process(&mappings, self.ops.clone()),
            )
        }

        /// Where target `i` is at the end of the run.
        pub fn tier_of(&self, m: &Machine, i: u64) -> TierId {
            m.page(Pid(0), (TARGETS >> PAGE_SHIFT) + i)
                .expect("target resident")
                .tier
        }
    }

    /// One region of `region_mib` touched in order, then swept in order (one read per
    /// page, 5 µs apart) until `until_ns`: every armed slow page faults within one
    /// sweep of its arming, so every fault is a promotion candidate.
    pub struct SweepWorkload {
        fast_mib: u64,
        region_pages: u64,
        ops: Vec<Op>,
    }

    impl SweepWorkload {
        /// Build it.
        pub fn new(fast_mib: u64, region_mib: u64, until_ns: u64) -> SweepWorkload {
            let region_pages = region_mib * MIB / PAGE_SIZE;
            let mut ops = Vec::new();
            let mut t = 0;
            for i in 0..region_pages {
                ops.push(write(REGION + i * PAGE_SIZE, 1_000));
                t += 1_000;
            }
            'sweeps: loop {
                for i in 0..region_pages {
                    ops.push(read(REGION + i * PAGE_SIZE, 5_000));
                    t += 5_000;
                    if t >= until_ns {
                        break 'sweeps;
                    }
                }
            }
            SweepWorkload {
                fast_mib,
                region_pages,
                ops,
            }
        }

        /// The machine: `fast_mib` fast, 64 MiB slow, no LLC.
        pub fn machine(&self) -> MachineConfig {
            small_machine(self.fast_mib, SLOW_MIB)
        }

        /// The workload.
        pub fn script(&self) -> Box<dyn Workload> {
            let len = self.region_pages * PAGE_SIZE;
            Box::new(Script::new(len).process(&[(REGION, len)], self.ops.clone()))
        }
    }

    /// Touch `nr_pages` pages of one region in order (1 µs apart), then idle until
    /// 300 ms reading the last of them every 10 ms.
    pub struct TouchThenIdle {
        fast_mib: u64,
        slow_mib: u64,
        nr_pages: u64,
    }

    impl TouchThenIdle {
        /// Build it.
        pub fn new(fast_mib: u64, slow_mib: u64, nr_pages: u64) -> TouchThenIdle {
            TouchThenIdle {
                fast_mib,
                slow_mib,
                nr_pages,
            }
        }

        /// The machine.
        pub fn machine(&self) -> MachineConfig {
            small_machine(self.fast_mib, self.slow_mib)
        }

        /// The workload.
        pub fn script(&self) -> Box<dyn Workload> {
            let mut ops = Vec::new();
            let mut t = 0u64;
            for i in 0..self.nr_pages {
                ops.push(write(REGION + i * PAGE_SIZE, 1_000));
                t += 1_000;
            }
            let last = REGION + (self.nr_pages - 1) * PAGE_SIZE;
            while t < 300 * NS_PER_MS {
                ops.push(read(last, IDLE_STEP_NS as u32));
                t += IDLE_STEP_NS;
            }
            let len = self.nr_pages * PAGE_SIZE;
            Box::new(Script::new(len).process(&[(REGION, len)], ops))
        }

        /// Where page `i` of the region is at the end of the run.
        pub fn tier_of(&self, m: &Machine, i: u64) -> TierId {
            m.page(Pid(0), (REGION >> PAGE_SHIFT) + i)
                .expect("page resident")
                .tier
        }
    }
}
