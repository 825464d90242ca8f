//! `mglru-pd`: the PET paper's **Base+PD** comparator (PET §4.5, §5.1) — Linux memory
//! tiering (NUMA-balancing promotion, "Base+") plus proactive demotion of the oldest
//! generation of the multi-generational LRU (MGLRU) every `pd_interval_ms`, whatever
//! the fast tier's free memory.
//!
//! - **Generations** ([`Generations`]): every fast-tier page carries the sequence
//!   number of the youngest generation it was seen in (`folio->flags` gen bits):
//!   `max_seq` when it is allocated or promoted (MGLRU adds faulted-in and migrated
//!   pages to the youngest generation), and again whenever an aging pass finds its
//!   accessed bit set. Pages sit on per-generation lists that are sorted lazily: an
//!   eviction that meets a page whose gen is younger than its list moves it to its
//!   gen's list instead (`sort_folio`).
//! - **Proactive demotion** (timer every `pd_interval_ms`, PET §5.1: 10 s, "periodically
//!   sorting LRU lists and demoting the oldest generation"): one aging pass
//!   (`inc_max_seq` after a page-table walk over every resident fast-tier page,
//!   test-and-clearing its accessed bit, like `walk_mm`), then every page of the
//!   oldest of `nr_gens` generations is demoted (asynchronously, as `memory.reclaim`
//!   with demotion would). A page is thus demoted after `nr_gens − 1` aging passes
//!   without an access: 30–40 s after its last access at the defaults, the same
//!   latency as PET's three scan intervals.
//! - **Base+ promotion** ([`crate::numa_scan`], [`crate::linux_tiering::TieringPromotion`]):
//!   the NUMA-balancing scanner arms slow-tier pages; a hinting fault within the hot
//!   threshold and the rate limit promotes the page in the fault, if the fast tier
//!   stays above its high watermark; otherwise kswapd is woken.
//! - **kswapd** (pressure): with MGLRU, reclaim evicts from the oldest generations;
//!   here it demotes oldest-generation pages first until the promotion watermark is
//!   free, giving pages of the youngest generation a second chance if their accessed
//!   bit is set.
//!
//! **`linux-tiering-mglru`** is the same machinery without proactive demotion: Linux
//! 6.2's memory tiering with MGLRU as its LRU, the "AutoNUMA" FreqTier compares
//! against (FreqTier §VI: "for AutoNUMA, we enable MGLRU based demotion"). Demotion
//! happens only in kswapd under pressure, and aging only when reclaim needs it (MGLRU's
//! `should_run_aging`: fewer than `MIN_NR_GENS + 1` generations), and reclaim never
//! evicts the `MIN_NR_GENS` youngest generations.
//!
//! Parameters and decisions: `docs/policies/mglru-pd.md`.

use crate::linux_tiering::{FaultOutcome, TieringPromotion};
use crate::lru::{
    promo_watermark, refusal_reclaims_at_once, sampled_round, KswapdConfig, ReclaimOrder,
};
use crate::numa_scan::{ArmFilter, NumaScanConfig};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use tierkit_core::*;

/// The proactive-demotion tick.
const PD_TIMER: TimerId = 0x1000_0000;
/// MGLRU's `MIN_NR_GENS`: reclaim leaves the two youngest generations alone and ages
/// when it would have to evict from them.
const MIN_NR_GENS: u32 = 2;
/// kswapd's batches on the fast tier.
const KSWAPD_TIMER: TimerId = 0x1000_0001;
/// A page with no generation (not resident or never seen).
const NO_GEN: u32 = u32::MAX;
/// List bookkeeping per page looked at, ns.
const LIST_OP_NS: u64 = 5;

/// `mglru-pd` parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MglruPdConfig {
    /// The NUMA-balancing scanner of Base+ (`kernel.numa_balancing_scan_*`).
    pub scan: NumaScanConfig,
    /// Base+ hot threshold on the hint-fault latency, ms (debugfs
    /// `numa_balancing/hot_threshold_ms`, 1000; range ≥ 1).
    pub hot_threshold_ms: u64,
    /// Base+ promotion rate limit, MB/s (`numa_balancing_promote_rate_limit_MBps`,
    /// 65536; range ≥ 0).
    pub promote_rate_limit_mbps: u64,
    /// Proactive-demotion period, ms: one aging pass and one eviction of the oldest
    /// generation (PET §5.1: 10 s, equal to PET's scan interval). Range ≥ 1.
    pub pd_interval_ms: u64,
    /// Generations kept (MGLRU `MAX_NR_GENS` = 4); the oldest is demoted each period,
    /// so a page idle for `nr_gens − 1` periods goes. Range 2–16.
    pub nr_gens: u32,
    /// Pacing of kswapd under pressure (not a kernel parameter; see
    /// [`KswapdConfig`]).
    pub kswapd: KswapdConfig,
}

impl Default for MglruPdConfig {
    fn default() -> Self {
        MglruPdConfig {
            scan: NumaScanConfig::default(),
            hot_threshold_ms: 1000,
            promote_rate_limit_mbps: 65_536,
            pd_interval_ms: 10_000,
            nr_gens: 4,
            kswapd: KswapdConfig::default(),
        }
    }
}

impl MglruPdConfig {
    /// Check ranges; the error names the field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.scan
            .validate()
            .map_err(|e| format!("policy.scan: {e}"))?;
        if self.hot_threshold_ms == 0 {
            return Err("policy.hot_threshold_ms must be at least 1 (ms)".into());
        }
        if self.promote_rate_limit_mbps > u32::MAX as u64 {
            return Err(format!(
                "policy.promote_rate_limit_mbps must be in [0, {}], got {}",
                u32::MAX,
                self.promote_rate_limit_mbps
            )
            .into());
        }
        if self.pd_interval_ms == 0 {
            return Err("policy.pd_interval_ms must be at least 1 (ms)".into());
        }
        if !(2..=16).contains(&self.nr_gens) {
            return Err(format!("policy.nr_gens must be in [2, 16], got {}", self.nr_gens).into());
        }
        self.kswapd.validate().map_err(|e| e.prefixed("policy."))
    }
}

/// The generation bookkeeping of the fast tier, without the machine: per-page gens
/// per mapping, per-generation lists, and `max_seq`.
#[derive(Debug, Clone, Default)]
pub struct Generations {
    /// Per mapping (owner, first page): the gen of each page, [`NO_GEN`] if none.
    gens: BTreeMap<(Pid, Vpn), Vec<u32>>,
    /// Pages listed under the gen they had when listed (lazily sorted).
    lists: BTreeMap<u32, VecDeque<(Pid, Vpn)>>,
    /// The youngest generation.
    max_seq: u32,
}

impl Generations {
    /// The youngest generation's sequence number.
    pub fn max_seq(&self) -> u32 {
        self.max_seq
    }

    /// Track a new mapping.
    pub fn map(&mut self, pid: Pid, start: Vpn, nr_pages: u64) {
        self.gens
            .insert((pid, start), vec![NO_GEN; nr_pages as usize]);
    }

    /// Forget `[start, start + nr_pages)` of `pid`.
    pub fn unmap(&mut self, pid: Pid, start: Vpn, nr_pages: u64) {
        let end = start + nr_pages;
        let keys: Vec<(Pid, Vpn)> = self
            .gens
            .range((pid, 0)..(pid, end))
            .filter(|((_, s), v)| s + v.len() as u64 > start)
            .map(|(k, _)| *k)
            .collect();
        for k in keys {
            let v = self.gens.get_mut(&k).expect("listed");
            let (s, e) = (start.max(k.1), end.min(k.1 + v.len() as u64));
            if s == k.1 && e == k.1 + v.len() as u64 {
                self.gens.remove(&k);
            } else {
                v[(s - k.1) as usize..(e - k.1) as usize].fill(NO_GEN);
            }
        }
    }

    fn slot(&mut self, pid: Pid, vpn: Vpn) -> Option<&mut u32> {
        let (k, v) = self.gens.range_mut(..=(pid, vpn)).next_back()?;
        if k.0 != pid {
            return None;
        }
        v.get_mut((vpn - k.1) as usize)
    }

    /// The gen of a page (None if untracked).
    pub fn gen(&self, pid: Pid, vpn: Vpn) -> Option<u32> {
        let (k, v) = self.gens.range(..=(pid, vpn)).next_back()?;
        if k.0 != pid {
            return None;
        }
        v.get((vpn - k.1) as usize)
            .copied()
            .filter(|&g| g != NO_GEN)
    }

    /// A page entered the fast tier (allocated or promoted): youngest generation.
    pub fn add_young(&mut self, pid: Pid, vpn: Vpn) {
        let seq = self.max_seq;
        if let Some(g) = self.slot(pid, vpn) {
            *g = seq;
            self.lists.entry(seq).or_default().push_back((pid, vpn));
        }
    }

    /// The aging pass found the page accessed: it joins the youngest generation (its
    /// list entry moves lazily).
    pub fn mark_young(&mut self, pid: Pid, vpn: Vpn) {
        let seq = self.max_seq;
        if let Some(g) = self.slot(pid, vpn) {
            *g = seq;
        }
    }

    /// `inc_max_seq`: open a new youngest generation.
    pub fn inc_max_seq(&mut self) {
        self.max_seq += 1;
    }

    /// Take the next page of the oldest non-empty list whose list gen is at most
    /// `upto`, sorting on the way: entries whose page is now younger than `upto` move
    /// to their gen's list. Returns the page and the number of entries looked at;
    /// `None` when nothing at or below `upto` is left.
    pub fn pop_oldest(&mut self, upto: u32) -> (Option<(Pid, Vpn)>, u64) {
        let mut looked = 0;
        loop {
            let Some(mut entry) = self.lists.first_entry() else {
                return (None, looked);
            };
            let seq = *entry.key();
            if seq > upto {
                return (None, looked);
            }
            let Some((pid, vpn)) = entry.get_mut().pop_front() else {
                entry.remove();
                continue;
            };
            looked += 1;
            match self.gen(pid, vpn) {
                Some(g) if g > upto => {
                    self.lists.entry(g).or_default().push_back((pid, vpn));
                }
                Some(_) => return (Some((pid, vpn)), looked),
                None => {} // unmapped or demoted since: drop the stale entry
            }
        }
    }

    /// The page left the fast tier.
    pub fn remove(&mut self, pid: Pid, vpn: Vpn) {
        if let Some(g) = self.slot(pid, vpn) {
            *g = NO_GEN;
        }
    }

    /// The oldest generation with a list (stale entries included, as the kernel's
    /// `min_seq` also advances lazily); None when nothing is listed.
    pub fn oldest_listed(&self) -> Option<u32> {
        self.lists
            .iter()
            .find(|(_, l)| !l.is_empty())
            .map(|(&seq, _)| seq)
    }

    /// Pages listed (stale entries included).
    pub fn nr_listed(&self) -> u64 {
        self.lists.values().map(|l| l.len() as u64).sum()
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Stats {
    aging_passes: u64,
    aged_pages: u64,
    young_pages: u64,
    pd_demoted_pages: u64,
    kswapd_wakeups: u64,
    kswapd_demoted_pages: u64,
    second_chances: u64,
    demote_failed: u64,
}

/// The policy.
pub struct MglruPd {
    name: &'static str,
    /// Base+PD's periodic aging and eviction (false: `linux-tiering-mglru`).
    proactive: bool,
    cfg: MglruPdConfig,
    promotion: TieringPromotion,
    gens: Generations,
    kswapd_awake: bool,
    /// When kswapd is done with its last batch.
    kswapd_busy_until: Nanos,
    /// The order kswapd was woken for and what it reclaimed since.
    kswapd_order: ReclaimOrder,
    stats: Stats,
}

impl MglruPd {
    /// Base+PD (`mglru-pd`) with the given parameters.
    pub fn new(cfg: MglruPdConfig) -> MglruPd {
        MglruPd {
            name: "mglru-pd",
            proactive: true,
            promotion: TieringPromotion::new(
                cfg.scan.clone(),
                cfg.hot_threshold_ms,
                cfg.promote_rate_limit_mbps,
            ),
            gens: Generations::default(),
            kswapd_awake: false,
            kswapd_busy_until: 0,
            kswapd_order: ReclaimOrder::default(),
            stats: Stats::default(),
            cfg,
        }
    }

    /// `linux-tiering-mglru`: no proactive demotion; kswapd ages on demand and evicts
    /// from the oldest generations (`pd_interval_ms` is not used).
    pub fn kswapd_only(cfg: MglruPdConfig) -> MglruPd {
        MglruPd {
            name: "linux-tiering-mglru",
            proactive: false,
            ..MglruPd::new(cfg)
        }
    }

    /// Base+: `linux-tiering`'s fault path (`should_numa_migrate_memory` +
    /// `migrate_misplaced_folio`), shared with it; a promoted page joins the youngest
    /// generation, a refused one wakes kswapd (on a sampled machine, an idle kswapd
    /// reclaims at once and the promotion is tried again: [`refusal_reclaims_at_once`]).
    fn on_hint_fault(&mut self, f: &HintFault, mech: &mut dyn Mechanisms) {
        let mut outcome = self.promotion.on_hint_fault(f, mech);
        if let FaultOutcome::NeedsReclaim { pages } = outcome {
            if refusal_reclaims_at_once(mech.pages_per_simulated_page(), pages)
                && self.kswapd_at_once_if_idle(pages, mech)
            {
                outcome = self.promotion.retry_after_reclaim(f, mech);
            }
        }
        match outcome {
            FaultOutcome::Promoted { head, .. } => self.gens.add_young(f.pid, head),
            FaultOutcome::NeedsReclaim { pages } => self.wake_kswapd(pages, mech),
            FaultOutcome::Stayed => {}
        }
    }

    /// For a refusal on a sampled machine ([`refusal_reclaims_at_once`]): if kswapd is
    /// idle (asleep, and done with its last batch), wake it for a unit of `unit_pages`
    /// and run its first batch now, as the kthread. Returns whether it ran.
    fn kswapd_at_once_if_idle(&mut self, unit_pages: u64, mech: &mut dyn Mechanisms) -> bool {
        if self.kswapd_awake || mech.now() < self.kswapd_busy_until {
            return false;
        }
        self.kswapd_order.raise(unit_pages);
        self.stats.kswapd_wakeups += 1;
        mech.as_kthread(&mut |m| self.kswapd(m));
        true
    }

    /// `wakeup_kswapd` for a unit of `unit_pages` base pages (see [`ReclaimOrder`]).
    fn wake_kswapd(&mut self, unit_pages: u64, mech: &mut dyn Mechanisms) {
        self.kswapd_order.raise(unit_pages);
        if !self.kswapd_awake {
            self.kswapd_awake = true;
            self.stats.kswapd_wakeups += 1;
            // One thread: a wakeup while it is still busy with its last batch runs
            // when that batch is done.
            mech.schedule(
                mech.now().max(self.kswapd_busy_until),
                KSWAPD_TIMER,
                Runner::Kthread,
            );
        }
    }

    /// The proactive-demotion tick: age, then demote the oldest generation.
    fn proactive_demotion(&mut self, mech: &mut dyn Mechanisms) {
        self.age(mech);
        let oldest = self.gens.max_seq().saturating_sub(self.cfg.nr_gens - 1);
        if self.gens.max_seq() >= self.cfg.nr_gens - 1 {
            let (n, looked) = self.evict(mech, oldest, u64::MAX);
            self.stats.pd_demoted_pages += n;
            mech.charge_cpu(looked * LIST_OP_NS);
        }
        mech.schedule(
            mech.now() + self.cfg.pd_interval_ms * NS_PER_MS,
            PD_TIMER,
            Runner::Kthread,
        );
    }

    /// One aging pass: a new generation, and every resident fast-tier page whose
    /// accessed bit is set joins it (MGLRU's page-table walk, `walk_mm`).
    fn age(&mut self, mech: &mut dyn Mechanisms) {
        self.gens.inc_max_seq();
        self.stats.aging_passes += 1;
        for pid in mech.processes() {
            for vma in mech.vmas(pid) {
                let mut fast_units = Vec::new();
                mech.walk_pages(pid, vma.start_vpn, vma.nr_pages, &mut |vpn, info| {
                    if info.tier.is_fast() {
                        fast_units.push(vpn);
                    }
                });
                for vpn in fast_units {
                    self.stats.aged_pages += 1;
                    if mech.test_and_clear_young(pid, vpn) == Some(true) {
                        self.stats.young_pages += 1;
                        self.gens.mark_young(pid, vpn);
                    }
                }
            }
        }
    }

    /// Demote fast-tier pages of generations up to `upto`, oldest first, at most
    /// `max_pages` base pages: (pages demoted, list entries looked at).
    fn evict(&mut self, mech: &mut dyn Mechanisms, upto: u32, max_pages: u64) -> (u64, u64) {
        let (mut demoted, mut looked) = (0, 0);
        while demoted < max_pages {
            let (next, l) = self.gens.pop_oldest(upto);
            looked += l;
            let Some((pid, vpn)) = next else {
                break;
            };
            let Some(info) = mech.page(pid, vpn) else {
                self.gens.remove(pid, vpn);
                continue;
            };
            if !info.tier.is_fast() {
                continue;
            }
            match mech.migrate(pid, vpn, TierId(1), MigrateMode::Async) {
                Ok(()) => {
                    self.gens.remove(pid, vpn);
                    demoted += if info.huge { SUBPAGES_PER_HUGE } else { 1 };
                }
                Err(_) => {
                    self.stats.demote_failed += 1;
                    self.gens.add_young(pid, vpn);
                    break;
                }
            }
        }
        (demoted, looked)
    }

    /// Demote fast-tier pages of generations up to `upto` as [`MglruPd::evict`] does,
    /// at most `max_pages` base pages, in rounds of `max_pages` / N pages
    /// ([`sampled_round`]; N = `Mechanisms::pages_per_simulated_page`, so exactly one
    /// round of the whole batch), looking at the fast tier's free pages after each round and
    /// stopping once they reach `target`. A round is demoted whole before kswapd looks
    /// again, so on a sampled machine a round of the whole batch would stand for N
    /// full ones, as [`crate::lru::isolated_per_round`] says for the classic lists
    /// (docs/sampling.md, "Why the sampled kswapd's cycles were coarse"). Stops after
    /// a round that demoted less than it asked for (the generations ran out, or a
    /// migration failed), as a single call does. Returns (pages demoted, list entries
    /// looked at).
    fn evict_until(
        &mut self,
        mech: &mut dyn Mechanisms,
        upto: u32,
        max_pages: u64,
        target: u64,
    ) -> (u64, u64) {
        let round = sampled_round(max_pages, mech.pages_per_simulated_page());
        let (mut demoted, mut looked) = (0, 0);
        while demoted < max_pages && mech.free_pages(TierId::FAST) < target {
            let ask = round.min(max_pages - demoted);
            let (n, l) = self.evict(mech, upto, ask);
            demoted += n;
            looked += l;
            if n < ask {
                break;
            }
        }
        (demoted, looked)
    }

    /// kswapd under pressure: demote from the oldest generations until the promotion
    /// watermark is free, in paced batches. The youngest generation is evicted only
    /// after a look at the accessed bit (a set bit gives the page another round).
    fn kswapd(&mut self, mech: &mut dyn Mechanisms) {
        if !self.proactive {
            return self.kswapd_mglru(mech);
        }
        self.kswapd_awake = false;
        let target = self.kswapd_target(mech);
        let batch = self.cfg.kswapd.batch_pages;
        let mut demoted = 0;
        let mut looked = 0;
        if mech.free_pages(TierId::FAST) < target {
            // Older generations first.
            let older = self.gens.max_seq().saturating_sub(1);
            let (n, l) = self.evict_until(mech, older, batch, target);
            demoted += n;
            looked += l;
            // Then the youngest, with a second chance for accessed pages.
            let mut budget = 4 * batch;
            while demoted < batch && budget > 0 && mech.free_pages(TierId::FAST) < target {
                budget -= 1;
                let (next, l) = self.gens.pop_oldest(self.gens.max_seq());
                looked += l;
                let Some((pid, vpn)) = next else {
                    break;
                };
                match mech.test_and_clear_young(pid, vpn) {
                    Some(true) => {
                        self.stats.second_chances += 1;
                        self.gens.add_young(pid, vpn);
                    }
                    Some(false) => {
                        if let Some(info) = mech.page(pid, vpn).filter(|i| i.tier.is_fast()) {
                            if mech
                                .migrate(pid, vpn, TierId(1), MigrateMode::Async)
                                .is_ok()
                            {
                                self.gens.remove(pid, vpn);
                                demoted += if info.huge { SUBPAGES_PER_HUGE } else { 1 };
                            }
                        }
                    }
                    None => self.gens.remove(pid, vpn),
                }
            }
        }
        self.end_kswapd_batch(demoted, looked, mech);
    }

    /// The end of a kswapd batch: count it, charge the list work, and come back after
    /// the batch's busy time while demotion progresses and the target is not met.
    fn end_kswapd_batch(&mut self, demoted: u64, looked: u64, mech: &mut dyn Mechanisms) {
        self.stats.kswapd_demoted_pages += demoted;
        self.kswapd_order.reclaimed_pages += demoted;
        mech.charge_cpu(looked * LIST_OP_NS);
        // The batch occupies the thread whether or not it sleeps after it.
        self.kswapd_busy_until = mech.now() + self.cfg.kswapd.busy_ns(demoted, looked, mech);
        if demoted > 0 && mech.free_pages(TierId::FAST) < self.kswapd_target(mech) {
            self.kswapd_awake = true;
            mech.schedule(self.kswapd_busy_until, KSWAPD_TIMER, Runner::Kthread);
        } else {
            self.kswapd_order.sleep();
        }
    }

    /// Free pages at which kswapd counts the fast tier balanced: the promotion
    /// watermark, plus what the unit it was woken for asks ([`ReclaimOrder`]), as the
    /// first whole number of free pages that reaches it.
    fn kswapd_target(&self, mech: &dyn Mechanisms) -> u64 {
        self.kswapd_order
            .balanced_free(promo_watermark(mech.watermarks(TierId::FAST)))
            .ceil() as u64
    }

    /// `linux-tiering-mglru`'s kswapd: MGLRU reclaim under pressure. Age first if
    /// fewer than `MIN_NR_GENS + 1` generations are listed (`should_run_aging` →
    /// `try_to_inc_max_seq`), then demote from the generations older than the
    /// `MIN_NR_GENS` youngest, oldest first, in paced batches until the promotion
    /// watermark is free.
    fn kswapd_mglru(&mut self, mech: &mut dyn Mechanisms) {
        self.kswapd_awake = false;
        if mech.free_pages(TierId::FAST) >= self.kswapd_target(mech) {
            return self.kswapd_order.sleep();
        }
        let max_seq = self.gens.max_seq();
        if self
            .gens
            .oldest_listed()
            .is_none_or(|min_seq| min_seq + MIN_NR_GENS > max_seq)
        {
            self.age(mech);
        }
        let Some(upto) = self.gens.max_seq().checked_sub(MIN_NR_GENS) else {
            return self.kswapd_order.sleep();
        };
        let target = self.kswapd_target(mech);
        let (demoted, looked) = self.evict_until(mech, upto, self.cfg.kswapd.batch_pages, target);
        self.end_kswapd_batch(demoted, looked, mech);
    }
}

impl Policy for MglruPd {
    fn name(&self) -> &'static str {
        self.name
    }

    fn requirements(&self) -> Requirements {
        Requirements {
            page_alloc_events: true,
            hint_faults: true,
            accessed_bits: true,
            ..Requirements::default()
        }
    }

    fn init(&mut self, mech: &mut dyn Mechanisms) {
        self.promotion.scanner.start_all(mech);
        if self.proactive {
            mech.schedule(
                mech.now() + self.cfg.pd_interval_ms * NS_PER_MS,
                PD_TIMER,
                Runner::Kthread,
            );
        }
    }

    fn on_event(&mut self, event: &Event, mech: &mut dyn Mechanisms) {
        match *event {
            Event::HintFault(ref f) => self.on_hint_fault(f, mech),
            Event::Mmap { pid, vma } => self.gens.map(pid, vma.start_vpn, vma.nr_pages),
            Event::Munmap {
                pid,
                start_vpn,
                nr_pages,
                ..
            } => self.gens.unmap(pid, start_vpn, nr_pages),
            Event::PageAlloc { pid, vpn, tier, .. } => {
                if tier.is_fast() {
                    self.gens.add_young(pid, vpn);
                }
            }
            // Moved by someone else: a page that arrives in the fast tier joins the
            // youngest generation, as a promoted one does; one that leaves it is dropped.
            Event::PageMoved { pid, vpn, from, to } => {
                if to.is_fast() {
                    self.gens.add_young(pid, vpn);
                } else if from.is_fast() {
                    self.gens.remove(pid, vpn);
                }
            }
            Event::Timer { id: PD_TIMER } => self.proactive_demotion(mech),
            Event::Timer { id: KSWAPD_TIMER } => self.kswapd(mech),
            Event::Timer { id } => {
                if let Some(pid) = self.promotion.scanner.owns(id) {
                    self.promotion.scanner.step(pid, mech, ArmFilter::NotFast);
                }
            }
            Event::Sample(_) | Event::LowWatermark { .. } => {}
        }
    }

    /// MGLRU keeps the gen in `folio->flags` and the lists in `struct page`: nothing
    /// is added per page.
    fn metadata_bytes(&self) -> u64 {
        0
    }

    fn stats(&self) -> Vec<(&'static str, f64)> {
        let s = &self.stats;
        let p = &self.promotion.stats;
        vec![
            ("max_seq", self.gens.max_seq() as f64),
            ("aging_passes", s.aging_passes as f64),
            ("aged_pages", s.aged_pages as f64),
            ("young_pages", s.young_pages as f64),
            ("pd_demoted_pages", s.pd_demoted_pages as f64),
            ("kswapd_wakeups", s.kswapd_wakeups as f64),
            ("kswapd_demoted_pages", s.kswapd_demoted_pages as f64),
            ("second_chances", s.second_chances as f64),
            ("demote_failed", s.demote_failed as f64),
            ("promoted_pages", p.promoted_pages as f64),
            ("free_space_promotion_pages", p.free_space_promotions as f64),
            ("cold_faults", p.cold_faults as f64),
            ("rate_limited_pages", p.rate_limited_pages as f64),
            ("watermark_failed_pages", p.watermark_failed_pages as f64),
            (
                "promoted_after_reclaim_pages",
                p.promoted_after_reclaim_pages as f64,
            ),
            ("listed_pages", self.gens.nr_listed() as f64),
        ]
    }
}

impl MglruPdConfig {
    /// Sampled simulation: the promotion rate limit (MB/s) scales; the hot threshold,
    /// the aging interval and the generation count do not.
    pub fn scale_space(&mut self, s: SpaceScale) {
        self.promote_rate_limit_mbps = s.count(self.promote_rate_limit_mbps);
    }
}

/// The registry's view of [`MglruPdConfig`] (`PolicyConfig` in the crate root).
impl crate::RegisteredConfig for MglruPdConfig {
    fn check(&self) -> Result<(), ConfigError> {
        self.validate()
    }

    fn scale(&mut self, scale: tierkit_core::SpaceScale) {
        self.scale_space(scale)
    }

    fn build_policy(&self, _ctx: &tierkit_core::BuildContext) -> Box<dyn tierkit_core::Policy> {
        Box::new(MglruPd::new(self.clone()))
    }
}

/// `linux-tiering-mglru` parameters: [`MglruPdConfig`]'s, of which `pd_interval_ms`
/// is not used (there is no proactive demotion).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(transparent)]
pub struct LinuxTieringMglruConfig(pub MglruPdConfig);

/// The registry's view of [`LinuxTieringMglruConfig`].
impl crate::RegisteredConfig for LinuxTieringMglruConfig {
    fn check(&self) -> Result<(), ConfigError> {
        self.0.validate()
    }

    fn scale(&mut self, scale: tierkit_core::SpaceScale) {
        self.0.scale_space(scale)
    }

    fn build_policy(&self, _ctx: &tierkit_core::BuildContext) -> Box<dyn tierkit_core::Policy> {
        Box::new(MglruPd::kswapd_only(self.0.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_leave_in_generation_order_and_young_ones_are_sorted_forward() {
        let mut g = Generations::default();
        g.map(Pid(0), 100, 10);
        for v in 100..104 {
            g.add_young(Pid(0), v); // gen 0
        }
        g.inc_max_seq();
        g.add_young(Pid(0), 104); // gen 1
        g.mark_young(Pid(0), 101); // seen accessed in aging 1
        g.inc_max_seq();
        // Evict gen ≤ 0: 100, 102, 103 (101 moved to gen 1, 104 is gen 1).
        let mut out = Vec::new();
        while let (Some((_, v)), _) = g.pop_oldest(0) {
            out.push(v);
            g.remove(Pid(0), v);
        }
        assert_eq!(out, vec![100, 102, 103]);
        let mut out = Vec::new();
        while let (Some((_, v)), _) = g.pop_oldest(1) {
            out.push(v);
            g.remove(Pid(0), v);
        }
        assert_eq!(out, vec![104, 101]);
        assert_eq!(g.pop_oldest(5).0, None);
    }

    #[test]
    fn unmap_forgets_pages_and_drops_whole_mappings() {
        let mut g = Generations::default();
        g.map(Pid(1), 0, 8);
        g.add_young(Pid(1), 3);
        g.add_young(Pid(1), 6);
        g.unmap(Pid(1), 2, 3);
        assert_eq!(g.gen(Pid(1), 3), None);
        assert_eq!(g.gen(Pid(1), 6), Some(0));
        g.unmap(Pid(1), 0, 8);
        assert_eq!(g.gen(Pid(1), 6), None);
        assert_eq!(g.pop_oldest(0).0, None, "stale entries are dropped");
    }
}

#[cfg(test)]
mod sim_tests {
    use crate::lru::test_scripts::stat;
    use crate::pet::tests::{optane_machine, policy_s, sim, step, Phases};
    use tierkit_core::*;
    use tierkit_sim::testing::run;

    #[test]
    fn an_idle_block_goes_with_the_oldest_generation_30_to_40_s_later_and_comes_back_when_hot() {
        // Block 1 is used until t ≈ 13 s, idle until 70 s, then hot; block 0 all along.
        let t_last = 13.0;
        let w = Phases::new(
            4,
            2,
            2_000,
            vec![vec![
                step(&[0, 1], &[0, 1], t_last),
                step(&[], &[0], 57.0),
                step(&[], &[1], 20.0),
            ]],
        );
        let (out, _) = run(
            &optane_machine(64, 64),
            &sim(),
            // A fixed 1 s scan pass: the adaptive period would have backed off to 60 s
            // while the slow tier was empty, as the kernel's does.
            Box::new(super::MglruPd::new(super::MglruPdConfig {
                scan: crate::numa_scan::NumaScanConfig {
                    adaptive_period: false,
                    ..Default::default()
                },
                ..Default::default()
            })),
            Box::new(w),
        );
        let block = 4 * MIB / PAGE_SIZE;
        let demoted_at = out
            .series
            .rows
            .iter()
            .find(|r| r.demoted_pages > 0)
            .map(policy_s)
            .unwrap();
        eprintln!("demoted {:.1} s after the last access", demoted_at - t_last);
        assert!((30.0..=40.5).contains(&(demoted_at - t_last)));
        assert_eq!(
            stat(&out, "pd_demoted_pages"),
            block as f64,
            "exactly the idle block"
        );
        // Every aging pass tests every fast page's accessed bit.
        assert!(stat(&out, "aged_pages") >= 7.0 * block as f64);
        // Base+ promotes it back once it is hot again.
        assert!(
            out.summary.promoted_pages >= block / 2,
            "promoted {}",
            out.summary.promoted_pages
        );
    }

    /// `linux-tiering-mglru` (Linux 6.2 tiering with MGLRU) has no proactive
    /// demotion: an idle block stays in a fast tier with room to spare, where Base+PD
    /// demotes it 30–40 s after its last access. Under pressure (a hot block on the
    /// slow tier, no free fast memory) kswapd ages on demand and demotes, and the hot
    /// block comes up.
    #[test]
    fn linux_tiering_mglru_demotes_only_under_pressure_and_ages_on_demand() {
        // Blocks 0 and 1 fill 8 of 12 MiB; block 1 idles for 60 s with room to spare.
        // Then blocks 2 and 3 are written (the fast tier fills, block 3 lands on the
        // slow tier) and block 3 is hot for 60 s.
        let w = || {
            Box::new(Phases::new(
                4,
                4,
                2_000,
                vec![vec![step(&[0, 1], &[0], 60.0), step(&[2, 3], &[3], 60.0)]],
            ))
        };
        let scan = crate::numa_scan::NumaScanConfig {
            adaptive_period: false,
            ..Default::default()
        };
        let cfg = super::MglruPdConfig {
            scan,
            ..Default::default()
        };
        let machine = optane_machine(12, 64);
        let (pd, _) = run(
            &machine,
            &sim(),
            Box::new(super::MglruPd::new(cfg.clone())),
            w(),
        );
        let (mg, _) = run(
            &machine,
            &sim(),
            Box::new(super::MglruPd::kswapd_only(cfg)),
            w(),
        );
        let block = 4 * MIB / PAGE_SIZE;
        let demoted_before = |out: &tierkit_sim::RunOutput, t: f64| -> u64 {
            out.series
                .rows
                .iter()
                .filter(|r| policy_s(r) < t)
                .map(|r| r.demoted_pages)
                .sum()
        };
        assert!(
            demoted_before(&pd, 55.0) >= block / 2,
            "Base+PD demotes the idle block"
        );
        assert_eq!(demoted_before(&mg, 55.0), 0, "no pressure, no demotion");
        assert_eq!(stat(&mg, "pd_demoted_pages"), 0.0);
        assert!(stat(&mg, "kswapd_demoted_pages") > 0.0);
        let aging = stat(&mg, "aging_passes");
        assert!(
            aging >= 1.0 && aging <= stat(&mg, "kswapd_wakeups"),
            "aging only in reclaim: {aging} passes"
        );
        assert!(
            mg.summary.promoted_pages >= block / 2,
            "the hot block comes up: {} pages",
            mg.summary.promoted_pages
        );
    }
}
