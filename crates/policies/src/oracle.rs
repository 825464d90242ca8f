//! `oracle` and `oracle-static`: clairvoyant placements that bound what an online
//! policy can reach. They read the future of the access stream from a fresh copy of
//! the (deterministic) workload, handed over in [`BuildContext::fresh_workload`], or
//! from a tape of it a comparison shares among its references
//! ([`BuildContext::shared_future`], [`future_of`]), and so exist only in the
//! simulator.
//!
//! - `oracle`: every `epoch_ms` of simulated time, the pages that will be accessed most
//!   in the coming epoch are placed in the fast tier (the rest demoted to make room);
//!   migrations cost what the mover charges.
//! - `oracle-static`: the pages most accessed over the whole run are placed in the fast
//!   tier when they are allocated, and never move again.
//!
//! Decisions: `docs/policies/oracle.md`.

use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use tierkit_core::future::{Future, PageIds, StreamedFuture, TapeReader};
use tierkit_core::*;

/// `oracle` parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OracleConfig {
    /// Length of an epoch, ms of simulated time (issue #3: 1 s).
    pub epoch_ms: u64,
    /// Memory accesses (LLC misses) assumed for the first epoch, before a rate has been
    /// measured.
    pub first_epoch_accesses: u64,
}

impl Default for OracleConfig {
    fn default() -> Self {
        OracleConfig {
            epoch_ms: 1000,
            first_epoch_accesses: 16_000_000,
        }
    }
}

impl OracleConfig {
    /// Check ranges.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.epoch_ms == 0 {
            return Err("epoch_ms must be at least 1".into());
        }
        if self.first_epoch_accesses == 0 {
            return Err("first_epoch_accesses must be at least 1".into());
        }
        Ok(())
    }
}

/// `oracle-static` has no parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OracleStaticConfig {}

/// The page ids chosen for the fast tier: a membership flag per id, and the ids
/// flagged, so that the next choice clears only those (a sampled 32 GiB mapping is
/// 8 M ids, and a fresh vector each epoch cost the host a zeroed allocation).
#[derive(Debug, Default)]
struct FastSet {
    member: Vec<bool>,
    ids: Vec<u32>,
}

impl FastSet {
    fn contains(&self, id: u32) -> bool {
        self.member.get(id as usize).copied().unwrap_or(false)
    }

    /// Empty, with room for `len` ids.
    fn reset(&mut self, len: usize) {
        for &id in &self.ids {
            self.member[id as usize] = false;
        }
        self.ids.clear();
        self.member.resize(len, false);
    }

    /// Flag `id`, if the mapping has it.
    fn insert(&mut self, id: usize) {
        if let Some(s) = self.member.get_mut(id) {
            if !*s {
                *s = true;
                // Below `member.len()`, which page ids (u32) bound.
                self.ids.push(id as u32);
            }
        }
    }
}

/// Pick the page units to hold in the fast tier: the hottest by `counts`, up to
/// `budget_pages` base pages, huge pages counted as 512 with the sum of their subpages'
/// counts. A page not resident yet counts in the unit its first touch will get
/// ([`Mechanisms::would_map_huge`]): with THP, a plan in base pages would pick hot
/// subpages whose huge pages then fill the fast tier with their cold neighbours.
/// `touched` lists, in increasing order, every id whose count is not zero: only those
/// can make a unit, so the choice costs what the epoch touched, not what the workload
/// maps (a sampled 32 GiB mapping is 8 M ids, most never touched). Fills `set` and
/// returns the base pages it holds.
fn choose_fast_set(
    counts: &[u32],
    touched: &[u32],
    ids: &PageIds,
    mech: &dyn Mechanisms,
    budget_pages: u64,
    set: &mut FastSet,
) -> u64 {
    // (count, id of the unit head, pages)
    let mut units: Vec<(u64, u32, u64)> = Vec::new();
    // The huge unit last added: touched ids come in order, so a unit's subpages meet it
    // one after another.
    let mut last_huge: Option<u32> = None;
    for &id in touched {
        let Some(&(base, pid, start, nr, kind)) = ids.entry_of(id) else {
            continue;
        };
        let vpn = start + (id - base) as u64;
        let huge = match mech.page(pid, vpn) {
            Some(p) => p.huge,
            None => mech.would_map_huge(pid, kind, start, nr, vpn),
        };
        if huge {
            let head = huge_head(vpn);
            let end = (head + SUBPAGES_PER_HUGE).min(start + nr);
            let first = base + (head.max(start) - start) as u32;
            if last_huge == Some(first) {
                continue;
            }
            last_huge = Some(first);
            let last = base + (end - start) as u32;
            let sum: u64 = counts[first as usize..last as usize]
                .iter()
                .map(|&c| c as u64)
                .sum();
            units.push((sum, first, SUBPAGES_PER_HUGE));
        } else {
            units.push((counts[id as usize] as u64, id, 1));
        }
    }
    set.reset(ids.len());
    fill_hottest(&mut units, budget_pages, |id, pages| {
        for k in 0..pages as usize {
            set.insert(id as usize + k);
        }
    })
}

/// A unit of a plan: (count, id of its head, base pages).
type Unit = (u64, u32, u64);

/// Hottest first; ties by id, so that the order is total and the choice deterministic.
fn hotter(a: &Unit, b: &Unit) -> std::cmp::Ordering {
    b.0.cmp(&a.0).then(a.1.cmp(&b.1))
}

/// Fill `budget_pages` greedily with `units`, hottest first, skipping a unit that does
/// not fit in what is left: `take(id, pages)` for each unit taken, in that order.
/// Returns the pages taken. The result is that of sorting every unit, but only the
/// units the fill can reach are sorted: each is a page or more, so at most
/// `budget_pages` of them fit, and the rest are sorted only if room is left after
/// those (huge units skipped). An epoch touches many more units than the fast tier
/// holds at small ratios (the `freqtier` suite's 1:32), and the full sort of every
/// epoch was most of the dynamic oracle's own time.
fn fill_hottest(units: &mut [Unit], budget_pages: u64, mut take: impl FnMut(u32, u64)) -> u64 {
    let reach = usize::try_from(budget_pages).map_or(units.len(), |b| b.min(units.len()));
    let (head, rest) = if reach < units.len() {
        units.select_nth_unstable_by(reach, hotter);
        units.split_at_mut(reach)
    } else {
        (units, &mut [][..])
    };
    let mut used = 0;
    for part in [head, rest] {
        if used >= budget_pages {
            break;
        }
        part.sort_unstable_by(hotter);
        for &(_, id, pages) in part.iter() {
            if used + pages > budget_pages {
                continue;
            }
            used += pages;
            take(id, pages);
        }
    }
    used
}

/// Move resident pages so that the chosen set of `set_pages` base pages (as far as it
/// fits the budget) is in the fast tier or has room there, moving no more than that
/// takes: fast pages outside the set are demoted, the coldest of the coming epoch
/// first, only until the fast tier has room for the set's pages not in it yet (slow
/// ones, and those first touch will allocate during the epoch); then the set's slow
/// pages are promoted hottest first. (Demoting every fast page outside the set, as
/// this did until 2026-11-27, emptied the fast tier whenever an epoch's window touched
/// fewer pages than it holds; with many threads the migrations then starved the
/// application, the next window was smaller still, and a 50-thread pmbench run never
/// ended.)
///
/// The fast pages come from a walk of every mapping (charged as one, page-table
/// entry by entry), which hands over the fast tier's pages only; the set's slow pages
/// from the set itself, page by page (`Mechanisms::page`, free): a sampled CacheLib
/// keeps 8 to 32 times as many pages as the fast tier holds, and handing each of
/// them to the oracle was most of its time.
fn rebalance(
    set: &FastSet,
    set_pages: u64,
    counts: &[u32],
    ids: &PageIds,
    mech: &mut dyn Mechanisms,
) {
    // (count in the coming epoch, pid, vpn, pages)
    let mut demote = Vec::new();
    let (mut fast_used, mut fast_wanted) = (0u64, 0u64);
    for &(base, pid, start, nr, _) in ids.mappings() {
        mech.walk_tier_pages(pid, start, nr, TierId::FAST, &mut |vpn, info| {
            let id = base + (vpn.max(start) - start) as u32;
            let pages = if info.huge { SUBPAGES_PER_HUGE } else { 1 };
            fast_used += pages;
            if set.contains(id) {
                fast_wanted += pages;
            } else {
                let count = counts.get(id as usize).copied().unwrap_or(0);
                demote.push(Reverse((count, pid, vpn, pages)));
            }
        });
    }
    // The set's resident slow pages, each once: a huge page by the id of its head (the
    // id a walk of its mapping would give it).
    let mut promote = Vec::new();
    for &id in &set.ids {
        let Some(&(base, pid, start, _, _)) = ids.entry_of(id) else {
            continue;
        };
        let vpn = start + (id - base) as u64;
        let Some(info) = mech.page(pid, vpn) else {
            continue;
        };
        if info.tier.is_fast() {
            continue;
        }
        let (vpn, pages) = if info.huge {
            let head = huge_head(vpn);
            if id != base + (head.max(start) - start) as u32 {
                continue;
            }
            (head, SUBPAGES_PER_HUGE)
        } else {
            (vpn, 1)
        };
        let count = counts.get(id as usize).copied().unwrap_or(0);
        promote.push((count, Reverse((pid, vpn)), pages));
    }
    // Coldest first, then hottest first; ties by address so the moves are deterministic.
    // Heaps, not sorted lists: an epoch takes what it needs off the top.
    let mut victims = BinaryHeap::from(demote);
    let mut promote = BinaryHeap::from(promote);
    let mut free = fast_budget(mech).saturating_sub(fast_used);
    // Demote the next coldest outsiders until `need` pages are free; false if they ran out.
    let mut make_room = |free: &mut u64, need: u64, mech: &mut dyn Mechanisms| {
        while *free < need {
            let Some(Reverse((_, pid, vpn, pages))) = victims.pop() else {
                return false;
            };
            if mech
                .migrate(pid, vpn, TierId(1), MigrateMode::Async)
                .is_ok()
            {
                *free += pages;
            }
        }
        true
    };
    // Room for the rest of the set: its slow pages and the ones not allocated yet.
    make_room(&mut free, set_pages.saturating_sub(fast_wanted), mech);
    while let Some((_, Reverse((pid, vpn)), pages)) = promote.pop() {
        if !make_room(&mut free, pages, mech) {
            break;
        }
        match mech.migrate(pid, vpn, TierId::FAST, MigrateMode::Async) {
            Ok(_) => free -= pages,
            Err(MigrateError::NoSpace) => break,
            Err(_) => {}
        }
    }
}

/// Fast-tier pages a clairvoyant placement fills: capacity less the high watermark, so
/// first-touch allocations keep finding room as they would under kswapd.
fn fast_budget(mech: &dyn Mechanisms) -> u64 {
    let cap = mech.tiers()[0].capacity_pages;
    Watermarks::whole_pages_above(cap, mech.watermarks(TierId::FAST).high)
}

/// When a page is allocated: bring it to the fast tier if it belongs there (making
/// room from `evictable` if needed), or queue it as evictable if it does not.
fn place_new(
    pid: Pid,
    vpn: Vpn,
    tier: TierId,
    wanted: bool,
    evictable: &mut VecDeque<(Pid, Vpn)>,
    mech: &mut dyn Mechanisms,
) {
    if wanted && !tier.is_fast() {
        while let Err(MigrateError::NoSpace) =
            mech.migrate(pid, vpn, TierId::FAST, MigrateMode::Async)
        {
            let Some((p, v)) = evictable.pop_front() else {
                break;
            };
            let _ = mech.migrate(p, v, TierId(1), MigrateMode::Async);
        }
    } else if !wanted && tier.is_fast() {
        evictable.push_back((pid, vpn));
    }
}

/// The run's future as `ctx` hands it over: the shared tape where the comparison
/// made one, else a fresh copy of the stream; `None` where neither exists (live).
pub fn future_of(ctx: &BuildContext) -> Option<Future> {
    if let Some(tape) = ctx.shared_future.as_ref().and_then(|f| f()) {
        return Some(Future::Taped(TapeReader::new(tape)));
    }
    ctx.fresh_workload
        .as_ref()
        .map(|f| Future::Streamed(StreamedFuture::new(f())))
}

const EPOCH_TIMER: TimerId = 1;

/// The per-epoch clairvoyant placement.
pub struct Oracle {
    cfg: OracleConfig,
    future: Option<Future>,
    /// Future page ids from access number `buf_start` on.
    buf: VecDeque<u32>,
    buf_start: u64,
    counts: Vec<u32>,
    /// The ids whose count is not zero, in increasing order.
    touched: Vec<u32>,
    set: FastSet,
    last_epoch_start: Option<u64>,
    evictable: VecDeque<(Pid, Vpn)>,
    epochs: u64,
}

impl Oracle {
    /// An oracle reading `future` (the run's, [`future_of`]).
    pub fn new(cfg: OracleConfig, future: Option<Future>) -> Oracle {
        Oracle {
            cfg,
            future,
            buf: VecDeque::new(),
            buf_start: 0,
            counts: Vec::new(),
            touched: Vec::new(),
            set: FastSet::default(),
            last_epoch_start: None,
            evictable: VecDeque::new(),
            epochs: 0,
        }
    }

    /// Count the page accesses of the window `[start, start + n)`.
    fn count_window(&mut self, start: u64, n: u64) {
        let Some(fut) = self.future.as_mut() else {
            return;
        };
        // Drop what is already past; skip ahead if the buffer is behind.
        while self.buf_start < start {
            if self.buf.pop_front().is_none() && fut.next_id().is_none() {
                break;
            }
            self.buf_start += 1;
        }
        while (self.buf.len() as u64) < n {
            match fut.next_id() {
                Some(id) => self.buf.push_back(id),
                None => break,
            }
        }
        // Zero only what the last window counted: the id space is the whole mapping.
        for &id in &self.touched {
            self.counts[id as usize] = 0;
        }
        self.touched.clear();
        self.counts.resize(fut.ids().len(), 0);
        for &id in self.buf.iter().take(n as usize) {
            let c = &mut self.counts[id as usize];
            if *c == 0 {
                self.touched.push(id);
            }
            *c = c.saturating_add(1);
        }
        self.touched.sort_unstable();
    }

    fn on_epoch(&mut self, mech: &mut dyn Mechanisms) {
        let now_accesses = mech.access_count().unwrap_or(0);
        let n = match self.last_epoch_start {
            Some(prev) if now_accesses > prev => now_accesses - prev,
            _ => self.cfg.first_epoch_accesses,
        };
        self.last_epoch_start = Some(now_accesses);
        self.count_window(now_accesses, n);
        let Some(fut) = self.future.as_ref() else {
            return;
        };
        let set_pages = choose_fast_set(
            &self.counts,
            &self.touched,
            fut.ids(),
            mech,
            fast_budget(mech),
            &mut self.set,
        );
        rebalance(&self.set, set_pages, &self.counts, fut.ids(), mech);
        self.evictable.clear();
        self.epochs += 1;
        let next = mech.now() + self.cfg.epoch_ms * NS_PER_MS;
        mech.schedule(next, EPOCH_TIMER, Runner::Kthread);
    }
}

impl Policy for Oracle {
    fn name(&self) -> &'static str {
        "oracle"
    }
    fn requirements(&self) -> Requirements {
        Requirements {
            page_alloc_events: true,
            future_knowledge: true,
            ..Default::default()
        }
    }
    fn init(&mut self, mech: &mut dyn Mechanisms) {
        // Epoch 0 starts now: its set decides where first touches should end up.
        self.on_epoch(mech);
    }
    fn on_event(&mut self, event: &Event, mech: &mut dyn Mechanisms) {
        match *event {
            Event::Timer { id: EPOCH_TIMER } => self.on_epoch(mech),
            Event::PageAlloc { pid, vpn, tier, .. } => {
                let wanted = self
                    .future
                    .as_ref()
                    .and_then(|f| f.ids().id(pid.index(), vpn))
                    .is_some_and(|id| self.set.contains(id));
                place_new(pid, vpn, tier, wanted, &mut self.evictable, mech);
            }
            _ => {}
        }
    }
    fn metadata_bytes(&self) -> u64 {
        // Clairvoyance is not a data structure a real system could keep; reported as 0.
        0
    }
    fn stats(&self) -> Vec<(&'static str, f64)> {
        vec![("epochs", self.epochs as f64)]
    }
}

/// The whole-run clairvoyant placement.
pub struct OracleStatic {
    ids: PageIds,
    set: FastSet,
    evictable: VecDeque<(Pid, Vpn)>,
    future: Option<Future>,
}

impl OracleStatic {
    /// An oracle reading the whole of `future` (the run's, [`future_of`]) at init.
    pub fn new(future: Option<Future>) -> OracleStatic {
        OracleStatic {
            ids: PageIds::default(),
            set: FastSet::default(),
            evictable: VecDeque::new(),
            future,
        }
    }
}

impl Policy for OracleStatic {
    fn name(&self) -> &'static str {
        "oracle-static"
    }
    fn requirements(&self) -> Requirements {
        Requirements {
            page_alloc_events: true,
            future_knowledge: true,
            ..Default::default()
        }
    }
    fn init(&mut self, mech: &mut dyn Mechanisms) {
        let Some(mut fut) = self.future.take() else {
            return;
        };
        let mut counts: Vec<u32> = Vec::new();
        while let Some(id) = fut.next_id() {
            if counts.len() <= id as usize {
                counts.resize(fut.ids().len().max(id as usize + 1), 0);
            }
            counts[id as usize] = counts[id as usize].saturating_add(1);
        }
        counts.resize(fut.ids().len(), 0);
        let touched: Vec<u32> = (0..counts.len() as u32)
            .filter(|&id| counts[id as usize] > 0)
            .collect();
        // No page exists yet: with THP, the choice counts the 2 MiB units first touches
        // will allocate (choose_fast_set).
        choose_fast_set(
            &counts,
            &touched,
            fut.ids(),
            mech,
            fast_budget(mech),
            &mut self.set,
        );
        self.ids = fut.into_ids();
    }
    fn on_event(&mut self, event: &Event, mech: &mut dyn Mechanisms) {
        if let Event::PageAlloc { pid, vpn, tier, .. } = *event {
            let wanted = self
                .ids
                .id(pid.index(), vpn)
                .is_some_and(|id| self.set.contains(id));
            place_new(pid, vpn, tier, wanted, &mut self.evictable, mech);
        }
    }
}

impl OracleConfig {
    /// Sampled simulation: `first_epoch_accesses` counts accesses of the (sampled)
    /// stream, so it scales; `epoch_ms` is time and does not.
    pub fn scale_space(&mut self, s: SpaceScale) {
        self.first_epoch_accesses = s.count(self.first_epoch_accesses);
    }
}

/// The registry's view of [`OracleConfig`] (`PolicyConfig` in the crate root).
impl crate::RegisteredConfig for OracleConfig {
    fn check(&self) -> Result<(), ConfigError> {
        self.validate()
    }

    fn scale(&mut self, scale: tierkit_core::SpaceScale) {
        self.scale_space(scale)
    }

    fn build_policy(&self, ctx: &tierkit_core::BuildContext) -> Box<dyn tierkit_core::Policy> {
        Box::new(Oracle::new(self.clone(), future_of(ctx)))
    }
}

/// The registry's view of [`OracleStaticConfig`] (`PolicyConfig` in the crate root).
impl crate::RegisteredConfig for OracleStaticConfig {
    fn build_policy(&self, ctx: &tierkit_core::BuildContext) -> Box<dyn tierkit_core::Policy> {
        Box::new(OracleStatic::new(future_of(ctx)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The fill as it was until 2026-11-30: every unit sorted, then taken in order.
    fn fill_after_full_sort(units: &[Unit], budget_pages: u64) -> Vec<(u32, u64)> {
        let mut sorted = units.to_vec();
        sorted.sort_unstable_by(hotter);
        let mut used = 0;
        let mut taken = Vec::new();
        for (_, id, pages) in sorted {
            if used + pages <= budget_pages {
                used += pages;
                taken.push((id, pages));
            }
        }
        taken
    }

    proptest! {
        /// Few distinct counts (many ties) and a mix of base and huge units, so that
        /// the fill skips huge units and goes on past the units it sorted first.
        #[test]
        fn a_fill_takes_what_sorting_every_unit_would(
            raw in proptest::collection::vec((0u64..6, prop::bool::weighted(0.2)), 0..400),
            budget_pages in 0u64..3000,
        ) {
            // Distinct ids, not in count order.
            let mut units: Vec<Unit> = raw
                .iter()
                .enumerate()
                .map(|(i, &(count, huge))| {
                    let pages = if huge { SUBPAGES_PER_HUGE } else { 1 };
                    (count, (i as u32).wrapping_mul(7919) % 65_536, pages)
                })
                .collect();
            let want = fill_after_full_sort(&units, budget_pages);
            let mut got = Vec::new();
            let used = fill_hottest(&mut units, budget_pages, |id, pages| got.push((id, pages)));
            prop_assert_eq!(used, want.iter().map(|&(_, p)| p).sum::<u64>());
            prop_assert_eq!(got, want);
        }
    }
}
