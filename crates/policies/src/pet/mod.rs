//! `pet`: PET, proactive demotion for efficient tiered memory management (Doh et al.,
//! EuroSys '25).
//!
//! How it runs here (paper sections in brackets; spec: `specs/pet.md`):
//! - **P-block capture** ([`Event::Mmap`], §4.1): every anonymous mapping the workload
//!   creates becomes P-blocks of at most `max_pblock_mb`, as the mmap path would record
//!   them before the VMA merges with its neighbours. They start NORMAL.
//! - **kdemoted** (a [`Runner::Kthread`] timer every `sampling_interval_ms`, §4.2):
//!   for every NORMAL P-block and every temporary block of a PHASE1/PHASE2 P-block it
//!   checks the accessed bit of the page it sampled last time, then draws a new random
//!   page and clears its bit. Every `scan_interval_ms` it runs the state machine
//!   ([`state`]): NORMAL → PHASE1 (split into `temp_block_mb` temporary blocks) →
//!   PHASE2 (`canary_ratio_pct` of each temporary block demoted and armed for hinting
//!   faults) → split into runs: accessed runs back to NORMAL (canaries promoted), cold
//!   runs demoted in full and DEMOTED — whatever the fast tier's free memory.
//! - **Fake-fault handler** ([`Event::HintFault`], §4.2–§4.3): a canary fault marks a
//!   PHASE2 temporary block accessed, or counts against a DEMOTED block's share of the
//!   promotion budget ([`promote`]: R_promo = 3% × 10% / 8.3 µs, th_total per
//!   sampling interval, th_block by size, all faulted blocks once th_total is reached).
//! - **kpromoted** (a [`Runner::Kthread`] timer, §4.3): migrates whole requested
//!   P-blocks to the fast tier off the fault path; they become NORMAL.
//!
//! Pure logic: [`pblock`] (splitting, runs), [`state`] (transitions), [`promote`]
//! (budget). Parameters and every decision where the paper is silent:
//! `docs/policies/pet.md`.

pub mod pblock;
pub mod promote;
pub mod state;

impl PetConfig {
    /// Sampled simulation: R_promo is a budget of canary faults per second of the whole
    /// machine; each sampled fault stands for 1/rate faults, so each costs the budget
    /// 1/rate times the mis-demotion penalty (R_promo, th_total and th_block shrink by
    /// the rate). P-block sizes are ranges of address space (which keeps its shape),
    /// and intervals and percentages are intensive: none of them scale.
    pub fn scale_space(&mut self, s: SpaceScale) {
        self.mis_demotion_penalty_us /= s.rate();
    }
}

#[cfg(test)]
pub(crate) mod tests;

use pblock::{split, PBlock, Span, Unit};
use promote::PromoBudget;
use serde::{Deserialize, Serialize};
use state::{evaluate, State, Transition};
use std::collections::BTreeMap;
use tierkit_core::*;

/// kdemoted's sampling tick.
const KDEMOTED_TIMER: TimerId = 1;
/// kpromoted, woken by the fault handler or by kdemoted.
const KPROMOTED_TIMER: TimerId = 2;
/// Page-table entries probed from the random offset to find a resident page to
/// sample (tierkit decision: the paper does not say what happens when the drawn page
/// is not populated).
const SAMPLE_PROBES: u64 = 64;
/// One PTE probe while looking for a sample page, ns (the machine's `pte_scan_ns`).
const PROBE_NS: u64 = 10;
/// kdemoted's bookkeeping per unit per tick (list walk, counters), ns.
const UNIT_UPKEEP_NS: u64 = 20;
/// The fake-fault handler's P-block lookup and counting, ns.
const FAULT_LOOKUP_NS: u64 = 100;
/// Kernel metadata per P-block and per temporary block, bytes (§4.1: 128 B per
/// P-block; temporary blocks are assumed to use the same structure).
const BLOCK_METADATA_BYTES: u64 = 128;

/// `pet` parameters: the paper's defaults in its units (§5.1 unless noted).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PetConfig {
    /// Sampling interval, ms: one page per unit has its accessed bit checked and a new
    /// one cleared every interval; also the promotion-budget interval (§4.2 "hundreds
    /// of ms", §5.1: 500). Range ≥ 1.
    pub sampling_interval_ms: u64,
    /// Scan interval, ms: coldness is decided and the state machine steps once per
    /// scan interval (§4.2 "several tens of times the sampling interval", §5.1: 10 s).
    /// Range: a multiple of `sampling_interval_ms`.
    pub scan_interval_ms: u64,
    /// Maximum P-block size, MiB: larger new P-blocks are split into pieces of this
    /// size (§4.1, §5.1: 1 GB = 1024). Range ≥ 1.
    pub max_pblock_mb: u64,
    /// Temporary block size, MiB: the PHASE1 split unit (§4.2, §5.1: 128; §5.3.3:
    /// 256 hurts). Range ≥ 1.
    pub temp_block_mb: u64,
    /// Canary pages, percent of each temporary block's resident pages (§4.2, §5.1,
    /// §5.3.1: 10). Range (0, 100].
    pub canary_ratio_pct: f64,
    /// Tolerable slowdown behind R_promo, percent (§4.3: 3, Thermostat's). Range
    /// (0, 100].
    pub tolerable_slowdown_pct: f64,
    /// Mis-demotion penalty behind R_promo, µs per fake fault (§4.3: 8.3, measured;
    /// Thermostat used 1). Range > 0.
    pub mis_demotion_penalty_us: f64,
    /// Promote the slow-tier pages of a NORMAL P-block that was accessed in a scan
    /// window (pages the allocator spilled to the slow tier when the fast tier was
    /// full, or left there by a promotion that found no room), through kpromoted at
    /// P-block granularity while the fast tier has room. Not in the paper (PET runs
    /// on a Base kernel without NUMA-balancing promotion; spec §2.5 [unspecified]);
    /// tierkit default true, see `docs/policies/pet.md`. `false` is the literal
    /// reading: only DEMOTED blocks are ever promoted.
    pub promote_spilled_blocks: bool,
}

impl Default for PetConfig {
    fn default() -> Self {
        PetConfig {
            sampling_interval_ms: 500,
            scan_interval_ms: 10_000,
            max_pblock_mb: 1024,
            temp_block_mb: 128,
            canary_ratio_pct: 10.0,
            tolerable_slowdown_pct: 3.0,
            mis_demotion_penalty_us: 8.3,
            promote_spilled_blocks: true,
        }
    }
}

impl PetConfig {
    /// Check ranges; the error names the field and its valid range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.sampling_interval_ms == 0 {
            return Err("policy.sampling_interval_ms must be at least 1 (ms)".into());
        }
        if self.scan_interval_ms == 0
            || !self
                .scan_interval_ms
                .is_multiple_of(self.sampling_interval_ms)
        {
            return Err(format!(
                "policy.scan_interval_ms must be a positive multiple of sampling_interval_ms ({}), got {}",
                self.sampling_interval_ms, self.scan_interval_ms
            ).into());
        }
        if self.max_pblock_mb == 0 {
            return Err("policy.max_pblock_mb must be at least 1 (MiB)".into());
        }
        if self.temp_block_mb == 0 {
            return Err("policy.temp_block_mb must be at least 1 (MiB)".into());
        }
        for (field, v) in [
            ("canary_ratio_pct", self.canary_ratio_pct),
            ("tolerable_slowdown_pct", self.tolerable_slowdown_pct),
        ] {
            if !(v > 0.0 && v <= 100.0) {
                return Err(format!("policy.{field} must be in (0, 100], got {v}").into());
            }
        }
        if !(self.mis_demotion_penalty_us.is_finite() && self.mis_demotion_penalty_us > 0.0) {
            return Err(format!(
                "policy.mis_demotion_penalty_us must be > 0, got {}",
                self.mis_demotion_penalty_us
            )
            .into());
        }
        Ok(())
    }

    /// R_promo, faults per second (§4.3).
    pub fn r_promo(&self) -> f64 {
        promote::r_promo(
            self.tolerable_slowdown_pct,
            self.canary_ratio_pct,
            self.mis_demotion_penalty_us,
        )
    }

    /// th_total, faults per sampling interval (§4.3).
    pub fn th_total(&self) -> u64 {
        promote::th_total(self.r_promo(), self.sampling_interval_ms)
    }

    /// Sampling ticks per scan interval (20 at the defaults).
    pub fn ticks_per_scan(&self) -> u64 {
        (self.scan_interval_ms / self.sampling_interval_ms.max(1)).max(1)
    }

    fn max_pblock_pages(&self) -> u64 {
        (self.max_pblock_mb * MIB / PAGE_SIZE).max(1)
    }

    fn temp_pages(&self) -> u64 {
        (self.temp_block_mb * MIB / PAGE_SIZE).max(1)
    }
}

/// P-blocks are keyed by owner and first page: ordered, so every walk is
/// deterministic.
type Key = (Pid, Vpn);

#[derive(Debug, Clone, Copy, Default)]
struct Stats {
    captured_pblocks: u64,
    sampled_units: u64,
    last_tick_sampled_units: u64,
    scans: u64,
    to_phase1: u64,
    to_phase2: u64,
    back_to_normal: u64,
    resolved: u64,
    demoted_blocks: u64,
    canary_pages: u64,
    canary_demoted_pages: u64,
    bulk_demoted_pages: u64,
    demote_failed: u64,
    phase2_canary_faults: u64,
    demoted_canary_faults: u64,
    stale_faults: u64,
    promotion_requests: u64,
    promoted_blocks: u64,
    promoted_pages: u64,
    canary_promoted_pages: u64,
    spilled_promoted_pages: u64,
    promote_no_room: u64,
}

/// The policy.
pub struct Pet {
    cfg: PetConfig,
    blocks: BTreeMap<Key, PBlock>,
    budget: PromoBudget<Key>,
    /// P-blocks handed to kpromoted and not yet promoted.
    promo_queue: Vec<Key>,
    kpromoted_scheduled: bool,
    /// Sampling ticks so far.
    ticks: u64,
    /// Start of the current scan window (policy time).
    window_start: Nanos,
    /// Canaries of DEMOTED blocks that faulted this sampling interval: re-armed at its
    /// end.
    rearm: Vec<(Key, Vpn)>,
    /// Where demotion goes.
    slow: TierId,
    stats: Stats,
}

impl Pet {
    /// A policy with the given parameters.
    pub fn new(cfg: PetConfig) -> Pet {
        Pet {
            budget: PromoBudget::new(cfg.th_total()),
            cfg,
            blocks: BTreeMap::new(),
            promo_queue: Vec::new(),
            kpromoted_scheduled: false,
            ticks: 0,
            window_start: 0,
            rearm: Vec::new(),
            slow: TierId(1),
            stats: Stats::default(),
        }
    }

    /// The P-blocks, in (pid, address) order: for tests and reports.
    pub fn pblocks(&self) -> impl Iterator<Item = &PBlock> {
        self.blocks.values()
    }

    /// The P-block holding `(pid, vpn)`.
    fn lookup(&self, pid: Pid, vpn: Vpn) -> Option<Key> {
        let (k, b) = self.blocks.range(..=(pid, vpn)).next_back()?;
        (k.0 == pid && vpn < b.span.end()).then_some(*k)
    }

    // ----- capture (§4.1) --------------------------------------------------------

    fn on_mmap(&mut self, pid: Pid, vma: &Vma, now: Nanos) {
        if vma.kind != VmaKind::Anon {
            return; // file mappings are not P-blocks (§4.1)
        }
        let whole = Span {
            start: vma.start_vpn,
            nr_pages: vma.nr_pages,
        };
        for span in split(whole, self.cfg.max_pblock_pages()) {
            self.blocks
                .insert((pid, span.start), PBlock::new(pid, span, now));
            self.stats.captured_pblocks += 1;
        }
    }

    /// munmap: drop the unmapped part of every overlapping P-block. What is left of a
    /// block stays DEMOTED if it was (with its remaining canaries); otherwise it
    /// becomes a fresh NORMAL block (tierkit decision; §4.1 only says P-block
    /// information is "periodically updated").
    fn on_munmap(&mut self, pid: Pid, start: Vpn, nr_pages: u64, now: Nanos) {
        let end = start + nr_pages;
        let keys: Vec<Key> = self
            .blocks
            .range((pid, 0)..(pid, end))
            .filter(|(_, b)| b.span.end() > start)
            .map(|(k, _)| *k)
            .collect();
        for k in keys {
            let b = self.blocks.remove(&k).expect("listed");
            let mut pieces = Vec::new();
            if b.span.start < start {
                pieces.push(Span {
                    start: b.span.start,
                    nr_pages: start - b.span.start,
                });
            }
            if b.span.end() > end {
                pieces.push(Span {
                    start: end,
                    nr_pages: b.span.end() - end,
                });
            }
            for span in pieces {
                let mut nb = PBlock::new(pid, span, now);
                nb.resident_pages = b.resident_pages * span.nr_pages / b.span.nr_pages.max(1);
                if b.state == State::Demoted {
                    nb.state = State::Demoted;
                    nb.canaries = b
                        .canaries
                        .iter()
                        .copied()
                        .filter(|&c| c >= span.start && c < span.end())
                        .collect();
                } else {
                    nb.spilled = b.spilled || b.state != State::Normal;
                }
                self.blocks.insert((pid, span.start), nb);
            }
        }
    }

    fn on_page_alloc(&mut self, pid: Pid, vpn: Vpn, tier: TierId, huge: bool) {
        let Some(k) = self.lookup(pid, vpn) else {
            return;
        };
        let b = self.blocks.get_mut(&k).expect("looked up");
        b.resident_pages += if huge { SUBPAGES_PER_HUGE } else { 1 };
        if !tier.is_fast() && b.state != State::Demoted {
            b.spilled = true;
        }
    }

    /// A page of a block was moved by someone else (live). One that left the fast
    /// tier of a block PET has not demoted is, to PET, what a page the allocator spilled
    /// is: the block is marked so kpromoted brings it back if the block is hot.
    fn on_page_moved(&mut self, pid: Pid, vpn: Vpn, to: TierId) {
        let Some(k) = self.lookup(pid, vpn) else {
            return;
        };
        let b = self.blocks.get_mut(&k).expect("looked up");
        if !to.is_fast() && b.state != State::Demoted {
            b.spilled = true;
        }
    }

    // ----- kdemoted: sampling (§4.2, Fig. 6) -------------------------------------

    fn kdemoted_tick(&mut self, mech: &mut dyn Mechanisms) {
        let now = mech.now();
        self.ticks += 1;
        self.sample_all(mech);
        if self.ticks.is_multiple_of(self.cfg.ticks_per_scan()) {
            self.scan(mech, now);
            self.window_start = now;
        }
        self.end_sampling_interval(mech);
        mech.schedule(
            now + self.cfg.sampling_interval_ms * NS_PER_MS,
            KDEMOTED_TIMER,
            Runner::Kthread,
        );
    }

    /// One sampling tick over every tracked unit.
    fn sample_all(&mut self, mech: &mut dyn Mechanisms) {
        let mut nr_units = 0;
        for b in self.blocks.values_mut() {
            let pid = b.pid;
            for u in b.units_mut() {
                sample_unit(mech, pid, u);
                nr_units += 1;
            }
        }
        mech.charge_cpu(nr_units * UNIT_UPKEEP_NS);
        self.stats.sampled_units += nr_units;
        self.stats.last_tick_sampled_units = nr_units;
    }

    // ----- kdemoted: the state machine (§4.2, Fig. 7) ----------------------------

    fn scan(&mut self, mech: &mut dyn Mechanisms, now: Nanos) {
        self.stats.scans += 1;
        let keys: Vec<Key> = self.blocks.keys().copied().collect();
        for k in keys {
            let b = self.blocks.get_mut(&k).expect("listed");
            if b.born_at > self.window_start {
                // Captured or promoted inside this window: judge it after a full one.
                b.clear_window();
                continue;
            }
            let tr = evaluate(
                b.state,
                b.unit.accessed,
                &b.temp_flags(),
                b.resident_pages > 0,
            );
            match tr {
                Transition::Stay => {
                    let wants_promotion = b.state == State::Normal
                        && b.unit.accessed
                        && b.spilled
                        && self.cfg.promote_spilled_blocks;
                    b.clear_window();
                    if wants_promotion {
                        self.request_promotion(k, mech);
                    }
                }
                Transition::EnterPhase1 => {
                    self.stats.to_phase1 += 1;
                    b.state = State::Phase1;
                    b.temps = split(b.span, self.cfg.temp_pages())
                        .into_iter()
                        .map(Unit::new)
                        .collect();
                    let pid = b.pid;
                    for t in &mut b.temps {
                        sample_unit(mech, pid, t);
                    }
                    b.clear_window();
                }
                Transition::EnterPhase2 => {
                    self.stats.to_phase2 += 1;
                    self.enter_phase2(k, mech);
                }
                Transition::BackToNormal => {
                    self.stats.back_to_normal += 1;
                    let b = self.blocks.get_mut(&k).expect("listed");
                    let canaries: Vec<Vpn> = b
                        .temps
                        .iter()
                        .flat_map(|t| t.canaries.iter().copied())
                        .collect();
                    let pid = b.pid;
                    b.state = State::Normal;
                    b.temps.clear();
                    b.unit = Unit::new(b.span);
                    sample_unit(mech, pid, &mut b.unit);
                    if !self.promote_canaries(pid, &canaries, mech) {
                        self.blocks.get_mut(&k).expect("listed").spilled = true;
                    }
                }
                Transition::Resolve(runs) => {
                    self.stats.resolved += 1;
                    let old = self.blocks.remove(&k).expect("listed");
                    for run in runs {
                        let canaries: Vec<Vpn> = old.temps[run.first..run.last]
                            .iter()
                            .flat_map(|t| t.canaries.iter().copied())
                            .collect();
                        let mut nb = PBlock::new(old.pid, run.span, now);
                        nb.resident_pages =
                            old.resident_pages * run.span.nr_pages / old.span.nr_pages.max(1);
                        if run.accessed {
                            sample_unit(mech, old.pid, &mut nb.unit);
                            nb.spilled = !self.promote_canaries(old.pid, &canaries, mech);
                        } else {
                            self.stats.demoted_blocks += 1;
                            nb.state = State::Demoted;
                            self.demote_all_but(old.pid, run.span, &canaries, mech);
                            nb.canaries = canaries;
                        }
                        self.blocks.insert((old.pid, run.span.start), nb);
                    }
                }
            }
            mech.charge_cpu(UNIT_UPKEEP_NS);
        }
    }

    /// PHASE1 → PHASE2: in each temporary block pick `canary_ratio_pct` of its
    /// resident pages at random, demote them and arm them (§4.2).
    fn enter_phase2(&mut self, k: Key, mech: &mut dyn Mechanisms) {
        let ratio = self.cfg.canary_ratio_pct / 100.0;
        let slow = self.slow;
        let b = self.blocks.get_mut(&k).expect("listed");
        b.state = State::Phase2;
        let pid = b.pid;
        let (mut nr_canary, mut nr_demoted) = (0, 0);
        for t in &mut b.temps {
            t.canaries = pick_canaries(mech, pid, t.span, ratio);
            for &c in &t.canaries {
                let n = mech.page(pid, c).map_or(1, unit_pages);
                nr_canary += n;
                if mech.migrate(pid, c, slow, MigrateMode::Async).is_ok() {
                    nr_demoted += n;
                }
                mech.arm_hint_fault(pid, c);
            }
        }
        b.clear_window();
        self.stats.canary_pages += nr_canary;
        self.stats.canary_demoted_pages += nr_demoted;
    }

    /// Demote every fast-tier page of `span` except the canaries (already demoted).
    fn demote_all_but(
        &mut self,
        pid: Pid,
        span: Span,
        canaries: &[Vpn],
        mech: &mut dyn Mechanisms,
    ) {
        let mut victims = Vec::new();
        mech.walk_pages(pid, span.start, span.nr_pages, &mut |vpn, info| {
            if info.tier.is_fast() && canaries.binary_search(&vpn).is_err() {
                victims.push((vpn, unit_pages(info)));
            }
        });
        for (vpn, n) in victims {
            match mech.migrate(pid, vpn, self.slow, MigrateMode::Async) {
                Ok(()) => self.stats.bulk_demoted_pages += n,
                Err(MigrateError::NoSpace) => {
                    self.stats.demote_failed += 1;
                    return;
                }
                Err(_) => {}
            }
        }
    }

    /// Bring canaries back to the fast tier while it has room above its high
    /// watermark; false if some stayed behind. They stay armed: the machine offers no
    /// way to drop a PROT_NONE mark, so each faults once more, harmlessly.
    fn promote_canaries(&mut self, pid: Pid, canaries: &[Vpn], mech: &mut dyn Mechanisms) -> bool {
        for &c in canaries {
            let Some(info) = mech.page(pid, c) else {
                continue;
            };
            if info.tier.is_fast() {
                continue;
            }
            let n = unit_pages(info);
            if !fast_has_room(mech, n) {
                self.stats.promote_no_room += 1;
                return false;
            }
            if mech
                .migrate(pid, c, TierId::FAST, MigrateMode::Async)
                .is_ok()
            {
                self.stats.canary_promoted_pages += n;
            }
        }
        true
    }

    /// End of a sampling interval: reset the fault counters, recompute th_block, and
    /// re-arm the DEMOTED canaries that faulted in it.
    fn end_sampling_interval(&mut self, mech: &mut dyn Mechanisms) {
        let demoted: Vec<(Key, u64)> = self
            .blocks
            .iter()
            .filter(|(_, b)| b.state == State::Demoted)
            .map(|(k, b)| (*k, b.span.nr_pages))
            .collect();
        self.budget.rollover(&demoted);
        for (k, head) in std::mem::take(&mut self.rearm) {
            if self
                .blocks
                .get(&k)
                .is_some_and(|b| b.state == State::Demoted && b.is_canary(head))
            {
                mech.arm_hint_fault(k.0, head);
            }
        }
    }

    // ----- fake faults and kpromoted (§4.3, Fig. 9) ------------------------------

    fn on_hint_fault(&mut self, f: &HintFault, mech: &mut dyn Mechanisms) {
        mech.charge_cpu(FAULT_LOOKUP_NS);
        let Some(k) = self.lookup(f.pid, f.vpn) else {
            self.stats.stale_faults += 1;
            return;
        };
        let head = if f.huge { huge_head(f.vpn) } else { f.vpn };
        let temp_pages = self.cfg.temp_pages();
        let b = self.blocks.get_mut(&k).expect("looked up");
        match b.state {
            State::Phase2 => {
                // §4.2: the fault counts toward its temporary block's coldness check.
                // Not re-armed: one fault already makes the block accessed.
                if let Some(i) = b.temp_index(f.vpn, temp_pages) {
                    b.temps[i].accessed = true;
                    b.temps[i].canary_faults += 1;
                }
                self.stats.phase2_canary_faults += 1;
            }
            State::Demoted => {
                self.stats.demoted_canary_faults += 1;
                if b.is_canary(head) {
                    self.rearm.push((k, head));
                }
                for p in self.budget.on_fault(k) {
                    self.request_promotion(p, mech);
                }
            }
            State::Normal | State::Phase1 => self.stats.stale_faults += 1,
        }
    }

    /// Hand `k` to kpromoted (wake it if it sleeps).
    fn request_promotion(&mut self, k: Key, mech: &mut dyn Mechanisms) {
        let Some(b) = self.blocks.get_mut(&k) else {
            return;
        };
        if b.promo_queued {
            return;
        }
        b.promo_queued = true;
        self.stats.promotion_requests += 1;
        self.promo_queue.push(k);
        if !self.kpromoted_scheduled {
            self.kpromoted_scheduled = true;
            mech.schedule(mech.now(), KPROMOTED_TIMER, Runner::Kthread);
        }
    }

    /// kpromoted: migrate every queued block's slow pages to the fast tier; a DEMOTED
    /// block becomes NORMAL and starts a fresh observation (§4.3; the state after
    /// promotion is the spec's inferred NORMAL).
    fn kpromoted(&mut self, mech: &mut dyn Mechanisms) {
        self.kpromoted_scheduled = false;
        let now = mech.now();
        for k in std::mem::take(&mut self.promo_queue) {
            let Some(b) = self.blocks.get_mut(&k) else {
                continue;
            };
            b.promo_queued = false;
            let (pid, span, state) = (b.pid, b.span, b.state);
            if !matches!(state, State::Demoted | State::Normal) {
                continue;
            }
            let (pages, complete) = promote_span(mech, pid, span);
            let b = self.blocks.get_mut(&k).expect("still there");
            if state == State::Demoted {
                self.stats.promoted_blocks += 1;
                self.stats.promoted_pages += pages;
                b.state = State::Normal;
                b.canaries.clear();
                b.unit = Unit::new(span);
                b.born_at = now;
                sample_unit(mech, pid, &mut b.unit);
            } else {
                self.stats.spilled_promoted_pages += pages;
            }
            b.spilled = !complete;
            if !complete {
                self.stats.promote_no_room += 1;
            }
        }
    }

    fn count_state(&self, s: State) -> u64 {
        self.blocks.values().filter(|b| b.state == s).count() as u64
    }
}

/// Base pages in a page unit.
fn unit_pages(info: PageInfo) -> u64 {
    if info.huge {
        SUBPAGES_PER_HUGE
    } else {
        1
    }
}

/// A promotion of `n` pages keeps the fast tier above its high watermark (tierkit
/// decision: kpromoted never eats into the headroom allocations rely on).
fn fast_has_room(mech: &dyn Mechanisms, n: u64) -> bool {
    mech.free_pages(TierId::FAST) as f64 > mech.watermarks(TierId::FAST).high + n as f64
}

/// Migrate the slow-tier pages of `span` to the fast tier while it has room:
/// (base pages promoted, all of them made it).
fn promote_span(mech: &mut dyn Mechanisms, pid: Pid, span: Span) -> (u64, bool) {
    let mut slow_units = Vec::new();
    mech.walk_pages(pid, span.start, span.nr_pages, &mut |vpn, info| {
        if !info.tier.is_fast() {
            slow_units.push((vpn, unit_pages(info)));
        }
    });
    let mut done = 0;
    for (vpn, n) in slow_units {
        if !fast_has_room(mech, n) {
            return (done, false);
        }
        match mech.migrate(pid, vpn, TierId::FAST, MigrateMode::Async) {
            Ok(()) => done += n,
            Err(MigrateError::NoSpace) => return (done, false),
            Err(_) => {}
        }
    }
    (done, true)
}

/// Check the unit's previous sample, then draw and clear a new one (§4.2: "randomly
/// samples one page per P-block and clears the sample page's PTE access bit ...
/// After a sampling interval is passed, PET checks whether the access bit is set").
fn sample_unit(mech: &mut dyn Mechanisms, pid: Pid, u: &mut Unit) {
    if let Some(v) = u.sample {
        if mech.test_and_clear_young(pid, v) == Some(true) {
            u.accessed = true;
        }
    }
    u.sample = pick_resident(mech, pid, u.span);
    if let Some(v) = u.sample {
        mech.test_and_clear_young(pid, v);
    }
}

/// A random resident page of `span`: a random offset, then the first resident page
/// among the next [`SAMPLE_PROBES`] (wrapping); `None` if there is none there. The
/// offset comes from [`Mechanisms::random_page`], so that a sampled machine, which
/// simulates one page in N, draws among its simulated pages: a uniform offset would
/// find none there N times as often as on the full machine, and PET would take a hot
/// block for a cold one.
fn pick_resident(mech: &mut dyn Mechanisms, pid: Pid, span: Span) -> Option<Vpn> {
    let off = mech.random_page(pid, span.start, span.nr_pages) - span.start;
    let probes = SAMPLE_PROBES.min(span.nr_pages);
    for i in 0..probes {
        let vpn = span.start + (off + i) % span.nr_pages;
        if mech.page(pid, vpn).is_some() {
            mech.charge_cpu((i + 1) * PROBE_NS);
            return Some(vpn);
        }
    }
    mech.charge_cpu(probes * PROBE_NS);
    None
}

/// `ratio` of the resident pages of `span`, at random (page-unit heads, sorted).
fn pick_canaries(mech: &mut dyn Mechanisms, pid: Pid, span: Span, ratio: f64) -> Vec<Vpn> {
    let mut units: Vec<(Vpn, u64)> = Vec::new();
    mech.walk_pages(pid, span.start, span.nr_pages, &mut |vpn, info| {
        units.push((vpn, unit_pages(info)));
    });
    let resident: u64 = units.iter().map(|u| u.1).sum();
    let want = (resident as f64 * ratio).ceil() as u64;
    let (mut picked, mut got) = (Vec::new(), 0);
    // Partial Fisher–Yates: the first picks of a random permutation.
    let mut i = 0;
    while got < want && i < units.len() {
        let j = i + (mech.random() % (units.len() - i) as u64) as usize;
        units.swap(i, j);
        picked.push(units[i].0);
        got += units[i].1;
        i += 1;
    }
    picked.sort_unstable();
    picked
}

impl Policy for Pet {
    fn name(&self) -> &'static str {
        "pet"
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
        self.slow = TierId(1.min(mech.tiers().len().saturating_sub(1)) as u8);
        self.window_start = mech.now();
        mech.schedule(
            mech.now() + self.cfg.sampling_interval_ms * NS_PER_MS,
            KDEMOTED_TIMER,
            Runner::Kthread,
        );
    }

    fn on_event(&mut self, event: &Event, mech: &mut dyn Mechanisms) {
        match *event {
            Event::Mmap { pid, ref vma } => self.on_mmap(pid, vma, mech.now()),
            Event::Munmap {
                pid,
                start_vpn,
                nr_pages,
                ..
            } => self.on_munmap(pid, start_vpn, nr_pages, mech.now()),
            Event::PageAlloc {
                pid,
                vpn,
                tier,
                huge,
            } => self.on_page_alloc(pid, vpn, tier, huge),
            Event::PageMoved { pid, vpn, to, .. } => self.on_page_moved(pid, vpn, to),
            Event::HintFault(ref f) => self.on_hint_fault(f, mech),
            Event::Timer { id: KDEMOTED_TIMER } => self.kdemoted_tick(mech),
            Event::Timer {
                id: KPROMOTED_TIMER,
            } => self.kpromoted(mech),
            Event::Timer { .. } | Event::Sample(_) | Event::LowWatermark { .. } => {}
        }
    }

    /// 128 B per P-block (§4.1) and per temporary block.
    fn metadata_bytes(&self) -> u64 {
        let units: u64 = self.blocks.values().map(|b| 1 + b.temps.len() as u64).sum();
        units * BLOCK_METADATA_BYTES
    }

    fn stats(&self) -> Vec<(&'static str, f64)> {
        let s = &self.stats;
        vec![
            ("r_promo_per_s", self.cfg.r_promo()),
            ("th_total", self.budget.th_total() as f64),
            ("captured_pblocks", s.captured_pblocks as f64),
            ("pblocks", self.blocks.len() as f64),
            ("pblocks_normal", self.count_state(State::Normal) as f64),
            ("pblocks_phase1", self.count_state(State::Phase1) as f64),
            ("pblocks_phase2", self.count_state(State::Phase2) as f64),
            ("pblocks_demoted", self.count_state(State::Demoted) as f64),
            ("sampled_units", s.sampled_units as f64),
            ("last_tick_sampled_units", s.last_tick_sampled_units as f64),
            ("scans", s.scans as f64),
            ("to_phase1", s.to_phase1 as f64),
            ("to_phase2", s.to_phase2 as f64),
            ("back_to_normal", s.back_to_normal as f64),
            ("phase2_resolved", s.resolved as f64),
            ("demoted_blocks", s.demoted_blocks as f64),
            ("canary_pages", s.canary_pages as f64),
            ("canary_demoted_pages", s.canary_demoted_pages as f64),
            ("bulk_demoted_pages", s.bulk_demoted_pages as f64),
            ("demote_failed", s.demote_failed as f64),
            ("phase2_canary_faults", s.phase2_canary_faults as f64),
            ("demoted_canary_faults", s.demoted_canary_faults as f64),
            ("stale_faults", s.stale_faults as f64),
            (
                "budget_exhausted_intervals",
                self.budget.nr_exhausted() as f64,
            ),
            ("promotion_requests", s.promotion_requests as f64),
            ("promoted_blocks", s.promoted_blocks as f64),
            ("promoted_pages", s.promoted_pages as f64),
            ("canary_promoted_pages", s.canary_promoted_pages as f64),
            ("spilled_promoted_pages", s.spilled_promoted_pages as f64),
            ("promote_no_room", s.promote_no_room as f64),
        ]
    }
}

/// The registry's view of [`PetConfig`] (`PolicyConfig` in the crate root).
impl crate::RegisteredConfig for PetConfig {
    fn check(&self) -> Result<(), ConfigError> {
        self.validate()
    }

    fn scale(&mut self, scale: tierkit_core::SpaceScale) {
        self.scale_space(scale)
    }

    fn build_policy(&self, _ctx: &tierkit_core::BuildContext) -> Box<dyn tierkit_core::Policy> {
        Box::new(Pet::new(self.clone()))
    }
}
