//! DAMON, the Linux kernel's region-based data access monitor, as a reusable
//! observation source: the monitoring core of `mm/damon/core.c` (regions, sampling,
//! aggregation, adaptive region split and merge, `nr_accesses` and `age` per region,
//! interval auto-tuning), an operations seam modelled on `struct damon_operations`
//! ([`DamonOps`]), and the physical-address operations set of `mm/damon/paddr.c`
//! ([`PaddrOps`]) built on the simulator's mechanisms.
//!
//! # Brief overview
//!
//! A [`DamonCtx`] is one monitoring context (one `kdamond`): [`DamonAttrs`], one or
//! more [`Target`]s made of [`Region`]s, and DAMOS [`schemes`]. Whoever owns the
//! context drives it: [`DamonCtx::start`] once, then [`DamonCtx::on_sample`] at the
//! end of every sampling interval, which does what one iteration of `kdamond_fn` does
//! after its sleep and returns the length of the next sampling interval. The core
//! never touches pages: it asks the [`DamonOps`] it is handed, as `kdamond_fn` calls
//! `ctx->ops`. A policy reads the monitoring results from [`DamonCtx::targets`]: after
//! an aggregation (`on_sample` returned `aggregated`), `Region::last_nr_accesses` is
//! the finished interval's access count and `Region::age` its age.
//!
//! The live daemon will implement the same context on DAMON sysfs
//! (`/sys/kernel/mm/damon/admin/kdamonds/<N>/contexts/<N>/`, see
//! `docs/policies/damon-tiering.md`); the simulator runs this core.
//!
//! # Address units
//!
//! Region addresses are in base pages (DAMON's `addr_unit` = 4096, v6.18), so
//! `DAMON_MIN_REGION` is one page ([`MIN_REGION`]). Sizes handed to DAMOS (quotas,
//! access-pattern sizes) are in bytes, as in the kernel.
//!
//! # The physical view (paddr targets)
//!
//! The simulator has no physical addresses. [`PhysView`] gives each tier a
//! deterministic "physical address space" of `capacity_pages` frames: the first time
//! the view is built, the tier's resident pages get frames in `(pid, vpn)` order
//! (walked with [`Mechanisms::walk_pages`]); afterwards a page keeps its frame while it
//! stays in the tier, as a physical address does, a page that leaves the tier frees
//! its frame, and a page that arrives takes the most recently freed frame (the
//! per-CPU free lists are LIFO) or else the lowest never-used one. A 2 MiB page takes
//! 512 frames aligned to 512. Limits: frames are not the kernel's physical layout
//! (no zones, holes or other users' memory); pages allocated or freed by the workload
//! are only noticed when the view is next refreshed (checked at every sample against
//! the tier's used-page count, refreshed at most once per [`VIEW_REFRESH_MIN_NS`]), and
//! each refresh walks every mapped page, which the simulator charges although the
//! kernel pays nothing of the kind.

pub mod schemes;

use schemes::{Damos, DamosAction};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tierkit_core::*;

/// `DAMON_MIN_REGION`: the smallest region, in address units (one base page).
pub const MIN_REGION: u64 = 1;

/// Bytes of one `struct damon_region` (`ar` 16, `sampling_addr` 8, `nr_accesses` 4,
/// `nr_accesses_bp` 4, `list` 16, `age` 4, `last_nr_accesses` 4), for metadata size.
pub const REGION_STRUCT_BYTES: u64 = 56;

/// Bookkeeping CPU of one region in one sampling interval besides the PTE work the
/// mechanisms charge (list walk, `damon_rand`, moving sum), ns. An estimate.
pub const REGION_SAMPLE_NS: u64 = 10;
/// Bookkeeping CPU of one region at an aggregation (merge test, reset, split), ns.
pub const REGION_AGGREGATE_NS: u64 = 20;

/// The physical view is refreshed at most this often when it goes stale, ns: one
/// default aggregation interval, so a newly allocated page is unseen by the monitor
/// for at most about one aggregation.
pub const VIEW_REFRESH_MIN_NS: u64 = 100 * NS_PER_MS;

/// Timer ids at or above this are DAMON contexts' sampling timers; the low bits are
/// the context index.
pub const DAMON_TIMER_BASE: TimerId = 0x2000_0000;

// ----- attributes -------------------------------------------------------------------

/// Auto-tuning of the sampling and aggregation intervals (`struct
/// damon_intervals_goal`, v6.15): aim at `access_bp` of the maximum possible observed
/// accesses, re-tuning every `aggrs` aggregations, keeping the sampling interval in
/// `[min_sample_us, max_sample_us]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IntervalsGoal {
    /// Target ratio of observed to maximum possible access events, basis points
    /// (`intervals_goal/access_bp`; mtier.c 400 = 4%). Range 1..=10000.
    pub access_bp: u32,
    /// Aggregations between two tunings (`intervals_goal/aggrs`; mtier.c 3). 0 turns
    /// tuning off (DAMON's own default).
    pub aggrs: u32,
    /// Smallest sampling interval, µs (`intervals_goal/min_sample_us`; mtier.c 5000).
    pub min_sample_us: u64,
    /// Largest sampling interval, µs (`intervals_goal/max_sample_us`; mtier.c
    /// 10 000 000).
    pub max_sample_us: u64,
}

impl Default for IntervalsGoal {
    fn default() -> Self {
        // samples/damon/mtier.c: "aiming 4% DAMON-observed accesses ratio, keeping
        // sampling interval in [5ms, 10s] range".
        IntervalsGoal {
            access_bp: 400,
            aggrs: 3,
            min_sample_us: 5_000,
            max_sample_us: 10_000_000,
        }
    }
}

/// Monitoring attributes of a context (`struct damon_attrs`). Defaults: those of
/// `samples/damon/mtier.c`, which equal `damon_new_ctx`'s except that mtier.c turns on
/// interval auto-tuning.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DamonAttrs {
    /// Sampling interval, µs (`monitoring_attrs/intervals/sample_us`; 5000).
    pub sample_us: u64,
    /// Aggregation interval, µs (`intervals/aggr_us`; 100 000). At least `sample_us`.
    pub aggr_us: u64,
    /// Operations update interval, µs (`intervals/update_us`; 60 000 000).
    pub ops_update_us: u64,
    /// Minimum number of regions (`nr_regions/min`; 10). At least 3.
    pub min_nr_regions: u32,
    /// Maximum number of regions (`nr_regions/max`; 1000). At least `min_nr_regions`.
    pub max_nr_regions: u32,
    /// Interval auto-tuning (`intervals/intervals_goal/`).
    pub intervals_goal: IntervalsGoal,
}

impl Default for DamonAttrs {
    fn default() -> Self {
        DamonAttrs {
            sample_us: 5_000,
            aggr_us: 100_000,
            ops_update_us: 60_000_000,
            min_nr_regions: 10,
            max_nr_regions: 1000,
            intervals_goal: IntervalsGoal::default(),
        }
    }
}

impl DamonAttrs {
    /// Check ranges as `damon_set_attrs` does; the error names the field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.sample_us == 0 {
            return Err("sample_us must be at least 1".into());
        }
        if self.aggr_us < self.sample_us {
            return Err(format!(
                "aggr_us ({}) must be at least sample_us ({})",
                self.aggr_us, self.sample_us
            )
            .into());
        }
        if self.ops_update_us == 0 {
            return Err("ops_update_us must be at least 1".into());
        }
        if self.min_nr_regions < 3 {
            return Err(format!(
                "min_nr_regions must be at least 3, got {}",
                self.min_nr_regions
            )
            .into());
        }
        if self.max_nr_regions < self.min_nr_regions {
            return Err(format!(
                "max_nr_regions ({}) must be at least min_nr_regions ({})",
                self.max_nr_regions, self.min_nr_regions
            )
            .into());
        }
        let g = &self.intervals_goal;
        if g.aggrs > 0 {
            if g.access_bp == 0 || g.access_bp > 10_000 {
                return Err(format!(
                    "intervals_goal.access_bp must be in 1..=10000, got {}",
                    g.access_bp
                )
                .into());
            }
            if g.min_sample_us == 0 || g.min_sample_us > g.max_sample_us {
                return Err(format!(
                    "intervals_goal needs 0 < min_sample_us ({}) <= max_sample_us ({})",
                    g.min_sample_us, g.max_sample_us
                )
                .into());
            }
            if self.sample_us < g.min_sample_us || self.sample_us > g.max_sample_us {
                return Err(format!(
                    "sample_us ({}) must lie in intervals_goal [min_sample_us, max_sample_us] = [{}, {}]",
                    self.sample_us, g.min_sample_us, g.max_sample_us
                ).into());
            }
        }
        Ok(())
    }

    /// `damon_max_nr_accesses`: sampling intervals per aggregation interval.
    pub fn max_nr_accesses(&self) -> u32 {
        (self.aggr_us / self.sample_us.max(1)).min(u32::MAX as u64) as u32
    }
}

// ----- regions and targets ----------------------------------------------------------

/// One monitoring region (`struct damon_region`): `[start, end)` in pages.
///
/// `nr_accesses` counts the sampling intervals of the current aggregation interval in
/// which the region's sampled page was found accessed; `last_nr_accesses` is the count
/// of the previous aggregation; `nr_accesses_bp` is a pseudo moving sum of the last
/// aggregation interval's samples, ×10000, that DAMOS reads between aggregations;
/// `age` counts the aggregation intervals the access frequency has stayed within the
/// merge threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    /// First page.
    pub start: u64,
    /// One past the last page.
    pub end: u64,
    /// Accessed samples in the current aggregation interval.
    pub nr_accesses: u32,
    /// Moving sum of accessed samples over one aggregation interval, ×10000.
    pub nr_accesses_bp: u64,
    /// `nr_accesses` of the previous aggregation interval.
    pub last_nr_accesses: u32,
    /// Aggregation intervals the access frequency has been kept.
    pub age: u32,
    /// The page sampled in the current sampling interval.
    pub sampling_addr: u64,
}

impl Region {
    /// A fresh region (`damon_new_region`).
    pub fn new(start: u64, end: u64) -> Region {
        Region {
            start,
            end,
            nr_accesses: 0,
            nr_accesses_bp: 0,
            last_nr_accesses: 0,
            age: 0,
            sampling_addr: start,
        }
    }

    /// Size in pages (`damon_sz_region`).
    pub fn sz(&self) -> u64 {
        self.end - self.start
    }
}

/// One monitoring target (`struct damon_target`): its regions in address order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Target {
    /// Regions, sorted, non-overlapping.
    pub regions: Vec<Region>,
}

// ----- the ops seam -----------------------------------------------------------------

/// What applying a scheme action to one region did (the return of
/// `damon_operations.apply_scheme` plus what the core measures around it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ApplyOutcome {
    /// Bytes the action was applied to (`sz_applied`).
    pub sz_applied: u64,
    /// Bytes that passed the ops-layer filters (`sz_ops_filter_passed`).
    pub sz_filter_passed: u64,
    /// Estimated CPU time of the application, ns (the kernel measures it with
    /// `ktime`; it feeds the `ms` quota).
    pub cost_ns: u64,
}

/// An operations set (`struct damon_operations`): everything that depends on the
/// address space being monitored. The core calls it and never touches pages itself.
///
/// When each method runs, as in `kdamond_fn`: `init` once at start;
/// `prepare_access_checks` before every sampling interval; `check_accesses` after it
/// (returning the largest `nr_accesses`, the core's merge threshold base);
/// `apply_scheme` for each region a due scheme selects; `update` every ops update
/// interval.
pub trait DamonOps {
    /// Set up the targets' regions (`ops.init`).
    fn init(&mut self, _attrs: &DamonAttrs, _targets: &mut [Target], _mech: &mut dyn Mechanisms) {}
    /// Periodic update of the targets (`ops.update`).
    fn update(&mut self, _attrs: &DamonAttrs, _targets: &mut [Target], _mech: &mut dyn Mechanisms) {
    }
    /// Pick each region's sampled page and clear its accessed bit
    /// (`ops.prepare_access_checks`).
    fn prepare_access_checks(
        &mut self,
        attrs: &DamonAttrs,
        targets: &mut [Target],
        mech: &mut dyn Mechanisms,
    );
    /// Check whether each region's sampled page was accessed and update its counts
    /// with [`update_region_access_rate`]; return the largest `nr_accesses`
    /// (`ops.check_accesses`).
    fn check_accesses(
        &mut self,
        attrs: &DamonAttrs,
        targets: &mut [Target],
        mech: &mut dyn Mechanisms,
    ) -> u32;
    /// Apply `scheme`'s action to `region` of target `target` (`ops.apply_scheme`).
    fn apply_scheme(
        &mut self,
        attrs: &DamonAttrs,
        target: usize,
        region: &Region,
        scheme: &mut Damos,
        mech: &mut dyn Mechanisms,
    ) -> ApplyOutcome;
    /// Priority of `region` for `scheme` in `[0, DAMOS_MAX_SCORE]`
    /// (`ops.get_scheme_score`). Default: the hot score for promotion-like actions,
    /// the cold score for demotion-like ones, as paddr does.
    fn scheme_score(&self, attrs: &DamonAttrs, region: &Region, scheme: &Damos) -> u32 {
        match scheme.action {
            DamosAction::MigrateHot => schemes::hot_score(attrs, region, &scheme.quota),
            DamosAction::MigrateCold => schemes::cold_score(attrs, region, &scheme.quota),
            DamosAction::Stat => schemes::DAMOS_MAX_SCORE,
        }
    }
}

// ----- the core: pure steps ---------------------------------------------------------

/// `damon_moving_sum`: a pseudo moving sum that drops `nomvsum / len_window` and adds
/// the new value, without keeping the window.
pub fn moving_sum(mvsum: u64, nomvsum: u64, len_window: u64, new_value: u64) -> u64 {
    mvsum.saturating_sub(nomvsum / len_window.max(1)) + new_value
}

/// `damon_update_region_access_rate`: record one sampling interval's access check.
pub fn update_region_access_rate(r: &mut Region, accessed: bool, attrs: &DamonAttrs) {
    let len_window = attrs.max_nr_accesses().max(1) as u64;
    r.nr_accesses_bp = moving_sum(
        r.nr_accesses_bp,
        r.last_nr_accesses as u64 * 10_000,
        len_window,
        if accessed { 10_000 } else { 0 },
    );
    if accessed {
        r.nr_accesses += 1;
    }
}

/// `damon_merge_two_regions`: merge `r` into `l` (adjacent), size-weighting
/// `nr_accesses` and `age`.
pub fn merge_two_regions(l: &mut Region, r: &Region) {
    let (sz_l, sz_r) = (l.sz(), r.sz());
    let total = sz_l + sz_r;
    l.nr_accesses = ((l.nr_accesses as u64 * sz_l + r.nr_accesses as u64 * sz_r) / total) as u32;
    l.nr_accesses_bp = l.nr_accesses as u64 * 10_000;
    l.age = ((l.age as u64 * sz_l + r.age as u64 * sz_r) / total) as u32;
    l.end = r.end;
}

/// `damon_merge_regions_of`: age each region (reset when its `nr_accesses` moved by
/// more than `thres` from the last aggregation, else +1) and merge adjacent regions
/// whose `nr_accesses` differ by at most `thres` while the result stays within
/// `sz_limit` pages.
pub fn merge_regions_of(regions: &mut Vec<Region>, thres: u32, sz_limit: u64) {
    let mut out: Vec<Region> = Vec::with_capacity(regions.len());
    for mut r in regions.drain(..) {
        if r.nr_accesses.abs_diff(r.last_nr_accesses) > thres {
            r.age = 0;
        } else {
            r.age += 1;
        }
        if let Some(prev) = out.last_mut() {
            if prev.end == r.start
                && prev.nr_accesses.abs_diff(r.nr_accesses) <= thres
                && prev.sz() + r.sz() <= sz_limit
            {
                merge_two_regions(prev, &r);
                continue;
            }
        }
        out.push(r);
    }
    *regions = out;
}

/// `kdamond_merge_regions`: merge every target's regions with `threshold`; while the
/// region count exceeds `max_nr_regions`, repeat with a doubled threshold (up to the
/// largest possible `nr_accesses`).
pub fn merge_regions(
    targets: &mut [Target],
    attrs: &DamonAttrs,
    mut threshold: u32,
    sz_limit: u64,
) {
    let max_thres = attrs.max_nr_accesses();
    loop {
        let mut nr_regions = 0;
        for t in targets.iter_mut() {
            merge_regions_of(&mut t.regions, threshold, sz_limit);
            nr_regions += t.regions.len();
        }
        threshold = (threshold * 2).max(1);
        if !(nr_regions > attrs.max_nr_regions as usize && threshold / 2 < max_thres) {
            break;
        }
    }
}

/// `damon_split_region_at`: split `r` so that it keeps its first `sz_r` pages; return
/// the second part, which inherits the counts.
pub fn split_region_at(r: &mut Region, sz_r: u64) -> Region {
    let mut new = *r;
    new.start = r.start + sz_r;
    new.sampling_addr = new.start;
    r.end = new.start;
    new
}

/// `damon_split_regions_of`: split every region into up to `nr_subs` pieces at random
/// points, each left piece 10–90% of what remains; `rand_below(n)` draws from `[0, n)`.
pub fn split_regions_of(
    regions: &mut Vec<Region>,
    nr_subs: u32,
    rand_below: &mut dyn FnMut(u64) -> u64,
) {
    let mut out = Vec::with_capacity(regions.len() * nr_subs as usize);
    for mut r in regions.drain(..) {
        let mut rights = Vec::new();
        let mut sz_region = r.sz();
        let mut i = 0;
        while i < nr_subs.saturating_sub(1) && sz_region > 2 * MIN_REGION {
            i += 1;
            // damon_rand(1, 10): the left piece is 10% to 90% of the region.
            let tenths = 1 + rand_below(9);
            let sz_sub = tenths * sz_region / 10 / MIN_REGION * MIN_REGION;
            if sz_sub == 0 || sz_sub >= sz_region {
                continue;
            }
            rights.push(split_region_at(&mut r, sz_sub));
            sz_region = sz_sub;
        }
        out.push(r);
        // Each split inserts right after the region, so later pieces come first.
        out.extend(rights.into_iter().rev());
    }
    *regions = out;
}

/// `damon_region_sz_limit`: the size limit of a merged region, total size over
/// `min_nr_regions`, in pages.
pub fn region_sz_limit(targets: &[Target], min_nr_regions: u32) -> u64 {
    let sz: u64 = targets
        .iter()
        .flat_map(|t| t.regions.iter())
        .map(Region::sz)
        .sum();
    (sz / min_nr_regions.max(1) as u64).max(MIN_REGION)
}

/// Split regions larger than the size limit into equal pieces so a context starts
/// with at least `min_nr_regions` regions. paddr gives one region per node; upstream
/// DAMON (damon/next, 2026, "split regions for min_nr_regions at beginning") now
/// does this in the core for every operations set.
pub fn apply_min_nr_regions(targets: &mut [Target], min_nr_regions: u32) {
    let limit = region_sz_limit(targets, min_nr_regions);
    for t in targets.iter_mut() {
        let mut out = Vec::new();
        for r in t.regions.drain(..) {
            let pieces = r.sz().div_ceil(limit).max(1);
            let step = (r.sz() / pieces / MIN_REGION * MIN_REGION).max(MIN_REGION);
            let mut s = r.start;
            for k in 0..pieces {
                let e = if k + 1 == pieces {
                    r.end
                } else {
                    (s + step).min(r.end)
                };
                if e > s {
                    out.push(Region {
                        start: s,
                        end: e,
                        ..r
                    });
                }
                s = e;
            }
        }
        t.regions = out;
    }
}

/// `kdamond_reset_aggregated`: close an aggregation interval.
pub fn reset_aggregated(targets: &mut [Target]) {
    for r in targets.iter_mut().flat_map(|t| t.regions.iter_mut()) {
        // damon_warn_fix_nr_accesses_corruption: at an aggregation boundary the moving
        // sum equals nr_accesses ×10000.
        r.nr_accesses_bp = r.nr_accesses as u64 * 10_000;
        r.last_nr_accesses = r.nr_accesses;
        r.nr_accesses = 0;
    }
}

/// `damon_feed_loop_next_input`: the next input of a feedback loop whose score should
/// reach 10000, assuming input and score are proportional:
/// `max(last_input × (1 + (10000 − score) / 10000), 10000)`; a score of at least
/// 20000 drops the input to the minimum (10000).
pub fn feed_loop_next_input(last_input: u64, score: u64) -> u64 {
    const GOAL: u64 = 10_000;
    const MIN_INPUT: u64 = 10_000;
    if score == GOAL {
        return last_input;
    }
    if score >= GOAL * 2 {
        return MIN_INPUT;
    }
    let over = score > GOAL;
    let diff = score.abs_diff(GOAL);
    let compensation = if last_input < u64::MAX / diff {
        last_input * diff / GOAL
    } else {
        last_input / GOAL * diff
    };
    if over {
        last_input.saturating_sub(compensation).max(MIN_INPUT)
    } else {
        last_input.saturating_add(compensation)
    }
}

/// `damon_get_intervals_score`: observed access events relative to the goal, ×10000.
pub fn intervals_score(targets: &[Target], attrs: &DamonAttrs) -> u64 {
    let (mut max_events, mut events) = (0u64, 0u64);
    for r in targets.iter().flat_map(|t| t.regions.iter()) {
        max_events += r.sz() * attrs.max_nr_accesses() as u64;
        events += r.sz() * r.nr_accesses as u64;
    }
    let target = (max_events * attrs.intervals_goal.access_bp as u64 / 10_000).max(1);
    events * 10_000 / target
}

/// `damon_get_intervals_adaptation_bp`: the factor (×10000) to scale the intervals
/// by, with reductions softened to at most halving.
pub fn intervals_adaptation_bp(score_bp: u64) -> u64 {
    let a = feed_loop_next_input(100_000_000, score_bp) / 10_000;
    if a <= 10_000 {
        5_000 + a / 2
    } else {
        a
    }
}

// ----- the context: kdamond_fn ------------------------------------------------------

/// What one call of [`DamonCtx::on_sample`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleOutcome {
    /// Length of the next sampling interval, ns (the caller sleeps this long).
    pub next_sample_ns: u64,
    /// An aggregation interval ended in this call.
    pub aggregated: bool,
}

/// One DAMON context (`struct damon_ctx`) and the state of its `kdamond`.
#[derive(Debug, Clone)]
pub struct DamonCtx {
    /// Current attributes (interval tuning changes the intervals).
    pub attrs: DamonAttrs,
    /// Monitoring targets.
    pub targets: Vec<Target>,
    /// DAMOS schemes, applied in order.
    pub schemes: Vec<Damos>,
    passed_sample_intervals: u64,
    next_aggregation_sis: u64,
    next_ops_update_sis: u64,
    next_intervals_tune_sis: u64,
    /// `aggr_samples`: kept constant through interval tuning.
    aggr_samples: u64,
    sz_limit: u64,
    /// `kdamond_split_regions`' `last_nr_regions` (a function-static shared by all
    /// contexts in the kernel; per context here).
    last_nr_regions: usize,
    nr_aggregations: u64,
    nr_tunings: u64,
}

impl DamonCtx {
    /// A context with `attrs` (validated by the caller) monitoring `targets`.
    pub fn new(attrs: DamonAttrs, targets: Vec<Target>, schemes: Vec<Damos>) -> DamonCtx {
        let aggr_samples = attrs.aggr_us / attrs.sample_us.max(1);
        DamonCtx {
            attrs,
            targets,
            schemes,
            passed_sample_intervals: 0,
            next_aggregation_sis: 0,
            next_ops_update_sis: 0,
            next_intervals_tune_sis: 0,
            aggr_samples,
            sz_limit: MIN_REGION,
            last_nr_regions: 0,
            nr_aggregations: 0,
            nr_tunings: 0,
        }
    }

    /// Total regions over all targets.
    pub fn nr_regions(&self) -> usize {
        self.targets.iter().map(|t| t.regions.len()).sum()
    }

    /// Aggregation intervals completed.
    pub fn nr_aggregations(&self) -> u64 {
        self.nr_aggregations
    }

    /// Interval tunings that changed the intervals.
    pub fn nr_tunings(&self) -> u64 {
        self.nr_tunings
    }

    /// Sampling intervals passed (`passed_sample_intervals`).
    pub fn passed_sample_intervals(&self) -> u64 {
        self.passed_sample_intervals
    }

    /// Bytes of kernel metadata: the regions, plus the score histogram
    /// (`DAMOS_MAX_SCORE + 1` longs) when the context has schemes.
    pub fn metadata_bytes(&self) -> u64 {
        let hist = if self.schemes.is_empty() {
            0
        } else {
            (schemes::DAMOS_MAX_SCORE as u64 + 1) * 8
        };
        self.nr_regions() as u64 * REGION_STRUCT_BYTES + hist
    }

    fn sample_sis(&self, us: u64) -> u64 {
        us / self.attrs.sample_us.max(1)
    }

    /// Start the kdamond: `kdamond_init_ctx`, `ops.init`, the initial split to
    /// `min_nr_regions`, and the first `prepare_access_checks`. Returns the length of
    /// the first sampling interval, ns.
    pub fn start(&mut self, ops: &mut dyn DamonOps, mech: &mut dyn Mechanisms) -> u64 {
        self.passed_sample_intervals = 0;
        self.next_aggregation_sis = self.sample_sis(self.attrs.aggr_us);
        self.next_ops_update_sis = self.sample_sis(self.attrs.ops_update_us);
        self.next_intervals_tune_sis =
            self.next_aggregation_sis * self.attrs.intervals_goal.aggrs as u64;
        for i in 0..self.schemes.len() {
            let apply_us = self.apply_interval_us(i);
            self.schemes[i].next_apply_sis = self.sample_sis(apply_us);
        }
        ops.init(&self.attrs, &mut self.targets, mech);
        apply_min_nr_regions(&mut self.targets, self.attrs.min_nr_regions);
        self.sz_limit = region_sz_limit(&self.targets, self.attrs.min_nr_regions);
        ops.prepare_access_checks(&self.attrs, &mut self.targets, mech);
        self.attrs.sample_us * 1000
    }

    fn apply_interval_us(&self, i: usize) -> u64 {
        let s = &self.schemes[i];
        if s.apply_interval_us > 0 {
            s.apply_interval_us
        } else {
            self.attrs.aggr_us
        }
    }

    /// The end of a sampling interval: the body of `kdamond_fn`'s loop after its
    /// sleep, then the next iteration's `prepare_access_checks`.
    pub fn on_sample(
        &mut self,
        ops: &mut dyn DamonOps,
        mech: &mut dyn Mechanisms,
    ) -> SampleOutcome {
        // kdamond_fn reads these before the step: updates made during it take effect
        // from the next iteration.
        let next_aggregation_sis = self.next_aggregation_sis;
        let next_ops_update_sis = self.next_ops_update_sis;
        self.passed_sample_intervals += 1;
        let max_nr_accesses = ops.check_accesses(&self.attrs, &mut self.targets, mech);
        mech.charge_cpu(self.nr_regions() as u64 * REGION_SAMPLE_NS);
        let aggregated = self.passed_sample_intervals >= next_aggregation_sis;
        if aggregated {
            merge_regions(
                &mut self.targets,
                &self.attrs,
                max_nr_accesses / 10,
                self.sz_limit,
            );
        }
        if !self.schemes.is_empty() {
            schemes::apply_schemes(self, ops, mech);
        }
        if aggregated {
            let g = self.attrs.intervals_goal.clone();
            if g.aggrs > 0 && self.passed_sample_intervals >= self.next_intervals_tune_sis {
                self.next_intervals_tune_sis += self.aggr_samples * g.aggrs as u64;
                self.tune_intervals();
            }
            self.next_aggregation_sis = next_aggregation_sis + self.sample_sis(self.attrs.aggr_us);
            reset_aggregated(&mut self.targets);
            self.split_regions(mech);
            mech.charge_cpu(self.nr_regions() as u64 * REGION_AGGREGATE_NS);
            self.nr_aggregations += 1;
        }
        if self.passed_sample_intervals >= next_ops_update_sis {
            self.next_ops_update_sis =
                next_ops_update_sis + self.sample_sis(self.attrs.ops_update_us);
            ops.update(&self.attrs, &mut self.targets, mech);
            self.sz_limit = region_sz_limit(&self.targets, self.attrs.min_nr_regions);
        }
        ops.prepare_access_checks(&self.attrs, &mut self.targets, mech);
        SampleOutcome {
            next_sample_ns: self.attrs.sample_us * 1000,
            aggregated,
        }
    }

    /// `kdamond_split_regions`: when there are at most half `max_nr_regions` regions,
    /// split each in two (three if the count did not change since last time and is
    /// below a third of the maximum: "maybe the middle of the region has different
    /// access frequency").
    fn split_regions(&mut self, mech: &mut dyn Mechanisms) {
        let nr_regions = self.nr_regions();
        let max = self.attrs.max_nr_regions as usize;
        if nr_regions > max / 2 {
            return;
        }
        let nr_subs = if self.last_nr_regions == nr_regions && nr_regions < max / 3 {
            3
        } else {
            2
        };
        let mut rand_below = |n: u64| mech.random() % n.max(1);
        for t in &mut self.targets {
            split_regions_of(&mut t.regions, nr_subs, &mut rand_below);
        }
        self.last_nr_regions = nr_regions;
    }

    /// `kdamond_tune_intervals`: scale the sampling interval (and the aggregation
    /// interval with it, keeping `aggr_samples`) towards the access-ratio goal.
    fn tune_intervals(&mut self) {
        let score = intervals_score(&self.targets, &self.attrs);
        let adaptation_bp = intervals_adaptation_bp(score);
        if adaptation_bp == 10_000 {
            return;
        }
        let g = &self.attrs.intervals_goal;
        let sample_us = (self.attrs.sample_us * adaptation_bp / 10_000)
            .min(g.max_sample_us)
            .max(g.min_sample_us);
        // Decision (docs/policies/damon-tiering.md): the kernel calls
        // damon_set_attrs even when the clamped interval is unchanged, which restarts
        // every scheme's apply countdown; at the 5 ms floor that would keep a 1 s
        // apply interval from ever arriving. An unchanged interval changes nothing here.
        if sample_us == self.attrs.sample_us {
            return;
        }
        let mut new = self.attrs.clone();
        new.sample_us = sample_us;
        new.aggr_us = sample_us * self.aggr_samples;
        self.set_attrs(new);
        self.nr_tunings += 1;
    }

    /// `damon_set_attrs` while running: reschedule aggregation, ops update and scheme
    /// application from now, and convert `nr_accesses` and `age` to the new intervals.
    pub fn set_attrs(&mut self, new: DamonAttrs) {
        let aggregating = self.passed_sample_intervals < self.next_aggregation_sis;
        let old = self.attrs.clone();
        let sample = new.sample_us.max(1);
        self.next_aggregation_sis = self.passed_sample_intervals + new.aggr_us / sample;
        self.next_ops_update_sis = self.passed_sample_intervals + new.ops_update_us / sample;
        for r in self.targets.iter_mut().flat_map(|t| t.regions.iter_mut()) {
            update_monitoring_result(r, &old, &new, aggregating);
        }
        self.attrs = new;
        for i in 0..self.schemes.len() {
            let apply_us = self.apply_interval_us(i);
            self.schemes[i].next_apply_sis = self.passed_sample_intervals + apply_us / sample;
        }
    }
}

/// `damon_update_monitoring_result`: rescale a region's counts to new intervals (in
/// the middle of an aggregation, restart it).
fn update_monitoring_result(r: &mut Region, old: &DamonAttrs, new: &DamonAttrs, aggregating: bool) {
    let convert = |nr: u32| -> u32 {
        let bp = nr as u64 * 10_000 / old.max_nr_accesses().max(1) as u64;
        (bp * new.max_nr_accesses() as u64 / 10_000) as u32
    };
    if !aggregating {
        r.nr_accesses = convert(r.nr_accesses);
        r.nr_accesses_bp = r.nr_accesses as u64 * 10_000;
    } else {
        r.last_nr_accesses = convert(r.last_nr_accesses);
        r.nr_accesses_bp = r.last_nr_accesses as u64 * 10_000;
        r.nr_accesses = 0;
    }
    r.age = (r.age as u64 * old.aggr_us / new.aggr_us.max(1)) as u32;
}

// ----- the physical view -----------------------------------------------------------

const EMPTY: u64 = u64::MAX;

/// Pack a page unit for a frame: `page_key(pid, vpn) << 1 | huge`. Sorting packed
/// values sorts by `(pid, vpn)`.
fn pack(pid: Pid, vpn: Vpn, huge: bool) -> u64 {
    (page_key(pid, vpn) << 1) | huge as u64
}

fn unpack(v: u64) -> (Pid, Vpn, bool) {
    let (pid, vpn) = page_key_parts(v >> 1);
    (pid, vpn, v & 1 == 1)
}

/// The frames of one tier.
#[derive(Debug, Clone, Default)]
struct TierFrames {
    /// Per frame: the packed unit occupying it, or `EMPTY`.
    frames: Vec<u64>,
    /// Packed unit → its first frame.
    index: BTreeMap<u64, u32>,
    /// Freed frames, reused last-freed first.
    free: Vec<u32>,
    /// Frames from here on were never used.
    bump: u32,
    /// Base pages with a frame.
    tracked_pages: u64,
    /// Base pages resident in the tier that found no frame (only huge pages can, when
    /// no aligned block is free).
    untracked_pages: u64,
}

impl TierFrames {
    fn with_capacity(n: u64) -> TierFrames {
        TierFrames {
            frames: vec![EMPTY; n as usize],
            ..TierFrames::default()
        }
    }

    fn release(&mut self, v: u64) {
        let Some(first) = self.index.remove(&v) else {
            return;
        };
        let n = if v & 1 == 1 {
            SUBPAGES_PER_HUGE as u32
        } else {
            1
        };
        for f in (first..first + n).rev() {
            self.frames[f as usize] = EMPTY;
            self.free.push(f);
        }
        self.tracked_pages -= n as u64;
    }

    fn place(&mut self, v: u64) {
        let huge = v & 1 == 1;
        let first = if huge {
            self.take_block()
        } else {
            self.take_frame()
        };
        let n = if huge { SUBPAGES_PER_HUGE } else { 1 };
        match first {
            Some(f) => {
                for slot in &mut self.frames[f as usize..(f as u64 + n) as usize] {
                    *slot = v;
                }
                self.index.insert(v, f);
                self.tracked_pages += n;
            }
            None => self.untracked_pages += n,
        }
    }

    fn take_frame(&mut self) -> Option<u32> {
        while let Some(f) = self.free.pop() {
            if self.frames[f as usize] == EMPTY {
                return Some(f);
            }
        }
        if (self.bump as usize) < self.frames.len() {
            self.bump += 1;
            return Some(self.bump - 1);
        }
        None
    }

    /// 512 free frames aligned to 512: from the never-used end, else the lowest
    /// fully free aligned block.
    fn take_block(&mut self) -> Option<u32> {
        let n = SUBPAGES_PER_HUGE as u32;
        let aligned = self.bump.div_ceil(n) * n;
        if aligned as usize + n as usize <= self.frames.len() {
            for f in (self.bump..aligned).rev() {
                self.free.push(f);
            }
            self.bump = aligned + n;
            return Some(aligned);
        }
        let block = self
            .frames
            .chunks(n as usize)
            .position(|c| c.len() == n as usize && c.iter().all(|&v| v == EMPTY))?;
        // Its frames may sit in the free list; take_frame skips occupied ones.
        Some(block as u32 * n)
    }
}

/// The simulator's stand-in for physical addresses: one frame table per tier (see
/// the module docs for the mapping and its limits).
#[derive(Debug, Clone, Default)]
pub struct PhysView {
    tiers: Vec<TierFrames>,
    dirty: bool,
    last_refresh: Option<Nanos>,
    nr_refreshes: u64,
}

impl PhysView {
    /// An empty view; sized from the machine's tiers at the first [`PhysView::sync`].
    pub fn new() -> PhysView {
        PhysView::default()
    }

    /// Note that pages may have been freed (an `Event::Munmap`).
    pub fn mark_dirty(&mut self) {
        self.dirty = true;
    }

    /// Refreshes done so far.
    pub fn nr_refreshes(&self) -> u64 {
        self.nr_refreshes
    }

    /// Frames of `tier` (its capacity in pages): the size of its address space.
    pub fn nr_frames(&self, tier: TierId) -> u64 {
        self.tiers
            .get(tier.index())
            .map_or(0, |t| t.frames.len() as u64)
    }

    /// The page unit in `frame` of `tier`: `(pid, head vpn, huge, first frame)`.
    pub fn page_at(&self, tier: TierId, frame: u64) -> Option<(Pid, Vpn, bool, u64)> {
        let t = self.tiers.get(tier.index())?;
        let v = *t.frames.get(frame as usize)?;
        if v == EMPTY {
            return None;
        }
        let (pid, vpn, huge) = unpack(v);
        let first = if huge {
            frame - frame % SUBPAGES_PER_HUGE
        } else {
            frame
        };
        Some((pid, vpn, huge, first))
    }

    /// Pages resident in `tier` that have no frame.
    pub fn untracked_pages(&self, tier: TierId) -> u64 {
        self.tiers
            .get(tier.index())
            .map_or(0, |t| t.untracked_pages)
    }

    /// Record a migration made by the monitor's owner: the unit leaves its frame in
    /// `from` and takes one in `to`.
    pub fn moved(&mut self, pid: Pid, head: Vpn, huge: bool, from: TierId, to: TierId) {
        let v = pack(pid, head, huge);
        if let Some(t) = self.tiers.get_mut(from.index()) {
            t.release(v);
        }
        if let Some(t) = self.tiers.get_mut(to.index()) {
            t.place(v);
        }
    }

    fn stale(&self, mech: &dyn Mechanisms) -> bool {
        self.dirty
            || mech.tiers().iter().zip(&self.tiers).any(|(info, t)| {
                let used = info.capacity_pages - mech.free_pages(info.id).min(info.capacity_pages);
                used != t.tracked_pages + t.untracked_pages
            })
    }

    /// Bring the view up to date with the machine when pages were allocated or freed
    /// behind the monitor's back, at most once per [`VIEW_REFRESH_MIN_NS`]. The walk
    /// of every mapped page is charged by [`Mechanisms::walk_pages`].
    pub fn sync(&mut self, mech: &mut dyn Mechanisms) {
        if self.tiers.is_empty() {
            self.tiers = mech
                .tiers()
                .iter()
                .map(|t| TierFrames::with_capacity(t.capacity_pages))
                .collect();
        }
        let now = mech.now();
        if self
            .last_refresh
            .is_some_and(|t| now < t + VIEW_REFRESH_MIN_NS)
            || !self.stale(mech)
        {
            return;
        }
        self.refresh(mech);
        self.dirty = false;
        self.last_refresh = Some(now);
        self.nr_refreshes += 1;
    }

    fn refresh(&mut self, mech: &mut dyn Mechanisms) {
        let mut present: Vec<Vec<u64>> = vec![Vec::new(); self.tiers.len()];
        for pid in mech.processes() {
            for vma in mech.vmas(pid) {
                mech.walk_pages(pid, vma.start_vpn, vma.nr_pages, &mut |vpn, info| {
                    if let Some(list) = present.get_mut(info.tier.index()) {
                        list.push(pack(pid, vpn, info.huge));
                    }
                });
            }
        }
        for (t, mut now_in) in self.tiers.iter_mut().zip(present) {
            now_in.sort_unstable();
            now_in.dedup();
            // Merge-join the old index with the pages now resident: gone pages free
            // their frames first, so arrivals can reuse them.
            let gone: Vec<u64> = t
                .index
                .keys()
                .filter(|v| now_in.binary_search(v).is_err())
                .copied()
                .collect();
            for v in gone {
                t.release(v);
            }
            t.untracked_pages = 0;
            for v in now_in {
                if !t.index.contains_key(&v) {
                    t.place(v);
                }
            }
        }
    }
}

// ----- paddr -------------------------------------------------------------------------

/// CPU of looking up one frame's page (`damon_get_folio`), ns. An estimate.
pub const FRAME_LOOKUP_NS: u64 = 2;
/// The paddr ops' estimate of one accessed-bit test (rmap walk), ns: the simulator's
/// default `young_test_ns`. Used only to estimate apply time for the `ms` quota.
pub const EST_YOUNG_TEST_NS: u64 = 50;
/// The estimate of migrating one 4 KiB page, ns: the simulator's default fixed
/// migration cost (3 µs) plus 4 KiB at 8 GB/s. Used only for the `ms` quota.
pub const EST_MIGRATE_PAGE_NS: u64 = 3_000 + 512;

/// The physical-address operations set (`mm/damon/paddr.c`) over a [`PhysView`]:
/// target `i` is the address space of tier `tiers[i]`.
pub struct PaddrOps<'a> {
    /// The frame tables.
    pub view: &'a mut PhysView,
    /// The tier of each target.
    pub tiers: &'a [TierId],
}

impl PaddrOps<'_> {
    fn tier(&self, target: usize) -> TierId {
        self.tiers[target]
    }
}

impl DamonOps for PaddrOps<'_> {
    /// paddr has no `init`; the owner gives each target its node's whole range. Here
    /// the view is sized and filled so the range is known.
    fn init(&mut self, _attrs: &DamonAttrs, targets: &mut [Target], mech: &mut dyn Mechanisms) {
        self.view.sync(mech);
        for (i, t) in targets.iter_mut().enumerate() {
            if t.regions.is_empty() {
                let n = self.view.nr_frames(self.tier(i));
                if n > 0 {
                    t.regions.push(Region::new(0, n));
                }
            }
        }
    }

    /// `__damon_pa_prepare_access_check`: a random page per region, made old.
    fn prepare_access_checks(
        &mut self,
        _attrs: &DamonAttrs,
        targets: &mut [Target],
        mech: &mut dyn Mechanisms,
    ) {
        self.view.sync(mech);
        for (i, t) in targets.iter_mut().enumerate() {
            let tier = self.tier(i);
            for r in &mut t.regions {
                r.sampling_addr = r.start + mech.random() % r.sz().max(1);
                if let Some((pid, vpn, _, _)) = self.view.page_at(tier, r.sampling_addr) {
                    mech.test_and_clear_young(pid, vpn);
                }
            }
        }
    }

    /// `damon_pa_check_accesses`: was each region's sampled page accessed? A free
    /// frame was not (`damon_get_folio` finds no folio). A region whose sampled page
    /// lies in the unit checked just before reuses that result, as
    /// `__damon_pa_check_access` does.
    fn check_accesses(
        &mut self,
        attrs: &DamonAttrs,
        targets: &mut [Target],
        mech: &mut dyn Mechanisms,
    ) -> u32 {
        let mut max_nr_accesses = 0;
        let mut last: Option<(TierId, u64, u64, bool)> = None;
        for (i, t) in targets.iter_mut().enumerate() {
            let tier = self.tier(i);
            for r in &mut t.regions {
                let accessed = match last {
                    Some((lt, lo, hi, acc))
                        if lt == tier && (lo..hi).contains(&r.sampling_addr) =>
                    {
                        acc
                    }
                    _ => match self.view.page_at(tier, r.sampling_addr) {
                        Some((pid, vpn, huge, first)) => {
                            let acc = mech.test_and_clear_young(pid, vpn).unwrap_or(false);
                            let n = if huge { SUBPAGES_PER_HUGE } else { 1 };
                            last = Some((tier, first, first + n, acc));
                            acc
                        }
                        None => false,
                    },
                };
                update_region_access_rate(r, accessed, attrs);
                max_nr_accesses = max_nr_accesses.max(r.nr_accesses);
            }
        }
        max_nr_accesses
    }

    /// `damon_pa_migrate` / `damon_pa_stat`: walk the region's frames, skip free ones
    /// and the unit applied last, run the ops filters, and migrate what passes to the
    /// scheme's target tier (asynchronously, from the kdamond).
    fn apply_scheme(
        &mut self,
        _attrs: &DamonAttrs,
        target: usize,
        region: &Region,
        scheme: &mut Damos,
        mech: &mut dyn Mechanisms,
    ) -> ApplyOutcome {
        let tier = self.tier(target);
        let mut out = ApplyOutcome::default();
        let mut frame = region.start;
        let mut lookups = 0u64;
        let mut young_tests = 0u64;
        let mut migrated_pages = 0u64;
        while frame < region.end {
            lookups += 1;
            let Some((pid, vpn, huge, first)) = self.view.page_at(tier, frame) else {
                frame += 1;
                continue;
            };
            let n = if huge { SUBPAGES_PER_HUGE } else { 1 };
            frame = first + n;
            let key = pack(pid, vpn, huge);
            if scheme.last_applied == Some(key) {
                continue;
            }
            scheme.last_applied = Some(key);
            if scheme.has_young_filter() {
                young_tests += 1;
            }
            if scheme.filter_out(|| mech.test_and_clear_young(pid, vpn).unwrap_or(false)) {
                continue;
            }
            out.sz_filter_passed += n * PAGE_SIZE;
            let Some(to) = scheme.target_nid else {
                continue;
            };
            if !matches!(
                scheme.action,
                DamosAction::MigrateHot | DamosAction::MigrateCold
            ) {
                continue;
            }
            if mech.migrate(pid, vpn, to, MigrateMode::Async).is_ok() {
                self.view.moved(pid, vpn, huge, tier, to);
                out.sz_applied += n * PAGE_SIZE;
                migrated_pages += n;
            }
        }
        mech.charge_cpu(lookups * FRAME_LOOKUP_NS);
        out.cost_ns = lookups * FRAME_LOOKUP_NS
            + young_tests * EST_YOUNG_TEST_NS
            + migrated_pages * EST_MIGRATE_PAGE_NS;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierkit_sim::machine::Machine;

    /// A bare simulated machine: only its `random()` and costs are used here.
    fn test_machine() -> Machine {
        tierkit_sim::testing::bare_machine(&tierkit_sim::testing::small_machine(4, 4), None)
    }

    /// An operations set over an imaginary address space where a sampled address is
    /// accessed iff `accessed(addr)`.
    struct FakeOps<F: FnMut(u64) -> bool> {
        accessed: F,
    }

    impl<F: FnMut(u64) -> bool> DamonOps for FakeOps<F> {
        fn prepare_access_checks(
            &mut self,
            _: &DamonAttrs,
            targets: &mut [Target],
            mech: &mut dyn Mechanisms,
        ) {
            for r in targets.iter_mut().flat_map(|t| t.regions.iter_mut()) {
                r.sampling_addr = r.start + mech.random() % r.sz();
            }
        }
        fn check_accesses(
            &mut self,
            attrs: &DamonAttrs,
            targets: &mut [Target],
            _: &mut dyn Mechanisms,
        ) -> u32 {
            let mut max = 0;
            for r in targets.iter_mut().flat_map(|t| t.regions.iter_mut()) {
                let a = (self.accessed)(r.sampling_addr);
                update_region_access_rate(r, a, attrs);
                max = max.max(r.nr_accesses);
            }
            max
        }
        fn apply_scheme(
            &mut self,
            _: &DamonAttrs,
            _: usize,
            _: &Region,
            _: &mut Damos,
            _: &mut dyn Mechanisms,
        ) -> ApplyOutcome {
            ApplyOutcome::default()
        }
    }

    fn attrs(min: u32, max: u32) -> DamonAttrs {
        DamonAttrs {
            min_nr_regions: min,
            max_nr_regions: max,
            intervals_goal: IntervalsGoal {
                aggrs: 0,
                ..IntervalsGoal::default()
            },
            ..DamonAttrs::default()
        }
    }

    fn region(start: u64, end: u64, nr_accesses: u32, last: u32, age: u32) -> Region {
        Region {
            nr_accesses,
            last_nr_accesses: last,
            age,
            ..Region::new(start, end)
        }
    }

    fn boundaries(ctx: &DamonCtx) -> Vec<u64> {
        ctx.targets[0].regions.iter().map(|r| r.start).collect()
    }

    #[test]
    fn split_finds_the_boundary_between_hot_and_idle_halves() {
        let mut mech = test_machine();
        // One region of 1000 pages; the first half is accessed in every sampling
        // interval, the second never.
        let target = Target {
            regions: vec![Region::new(0, 1000)],
        };
        let mut ctx = DamonCtx::new(attrs(3, 20), vec![target], Vec::new());
        let mut ops = FakeOps {
            accessed: |a| a < 500,
        };
        ctx.start(&mut ops, &mut mech);
        while ctx.nr_aggregations() < 30 {
            ctx.on_sample(&mut ops, &mut mech);
        }
        let b = boundaries(&ctx);
        let nearest = b.iter().map(|&x| x.abs_diff(500)).min().unwrap();
        assert!(
            nearest <= 20,
            "no region boundary within 2% of the middle: {b:?}"
        );
        // And the regions on each side report the halves' rates.
        for r in &ctx.targets[0].regions {
            if r.end <= 500 {
                assert_eq!(r.last_nr_accesses, 20, "{r:?}");
            } else if r.start >= 500 {
                assert_eq!(r.last_nr_accesses, 0, "{r:?}");
            }
        }
    }

    #[test]
    fn adjacent_regions_with_similar_access_counts_merge() {
        let mut regions = vec![
            region(0, 100, 10, 10, 4),
            region(100, 300, 11, 11, 1),
            region(300, 400, 30, 30, 9),
        ];
        merge_regions_of(&mut regions, 2, 1000);
        assert_eq!(regions.len(), 2);
        let m = regions[0];
        assert_eq!((m.start, m.end), (0, 300));
        // Size-weighted: (10·100 + 11·200) / 300 = 10; ages 5 and 2 → (500 + 400) / 300 = 3.
        assert_eq!(m.nr_accesses, 10);
        assert_eq!(m.nr_accesses_bp, 100_000);
        assert_eq!(m.age, 3);
        assert_eq!((regions[1].start, regions[1].nr_accesses), (300, 30));
        // Not merged: a difference above the threshold, or a result above the limit.
        let mut far = vec![region(0, 100, 10, 10, 0), region(100, 200, 13, 13, 0)];
        merge_regions_of(&mut far, 2, 1000);
        assert_eq!(far.len(), 2);
        let mut big = vec![region(0, 100, 10, 10, 0), region(100, 200, 10, 10, 0)];
        merge_regions_of(&mut big, 2, 150);
        assert_eq!(big.len(), 2);
    }

    #[test]
    fn age_grows_while_the_frequency_holds_and_resets_when_it_changes() {
        let mut regions = vec![
            region(0, 10, 5, 5, 7),
            region(20, 30, 12, 5, 7),
            region(40, 50, 6, 5, 7),
        ];
        merge_regions_of(&mut regions, 1, 1);
        assert_eq!(
            regions.iter().map(|r| r.age).collect::<Vec<_>>(),
            vec![8, 0, 8]
        );

        // Over whole aggregations: a steady region ages by one per aggregation, then
        // restarts at 0 when its access rate changes.
        let mut mech = test_machine();
        let target = Target {
            regions: vec![Region::new(0, 300)],
        };
        let mut ctx = DamonCtx::new(attrs(3, 3), vec![target], Vec::new());
        let hot = std::cell::Cell::new(true);
        let mut ops = FakeOps {
            accessed: |_| hot.get(),
        };
        ctx.start(&mut ops, &mut mech);
        while ctx.nr_aggregations() < 5 {
            ctx.on_sample(&mut ops, &mut mech);
        }
        // Aggregation 1 changes 0 → 20 samples (age 0), then four steady ones.
        assert!(
            ctx.targets[0].regions.iter().all(|r| r.age == 4),
            "{:?}",
            ctx.targets[0].regions
        );
        hot.set(false);
        while ctx.nr_aggregations() < 6 {
            ctx.on_sample(&mut ops, &mut mech);
        }
        assert!(ctx.targets[0].regions.iter().all(|r| r.age == 0));
    }

    #[test]
    fn region_count_stays_within_min_and_max() {
        let mut mech = test_machine();
        let target = Target {
            regions: vec![Region::new(0, 4096)],
        };
        let (min, max) = (10, 40);
        let mut ctx = DamonCtx::new(attrs(min, max), vec![target], Vec::new());
        // Stripes of different hotness that drift over time.
        let mut t = 0u64;
        let mut ops = FakeOps {
            accessed: move |a: u64| {
                t += 1;
                (a / 97 + t / 2000) % 5 < 1 || (a / 300) % 3 < 1
            },
        };
        ctx.start(&mut ops, &mut mech);
        assert!(ctx.nr_regions() >= min as usize);
        let mut saw_max_half = false;
        while ctx.nr_aggregations() < 200 {
            ctx.on_sample(&mut ops, &mut mech);
            let n = ctx.nr_regions();
            assert!((min as usize..=max as usize).contains(&n), "{n} regions");
            saw_max_half |= n > max as usize / 2;
            let regions = &ctx.targets[0].regions;
            assert!(regions.windows(2).all(|w| w[0].end == w[1].start));
            assert_eq!((regions[0].start, regions.last().unwrap().end), (0, 4096));
        }
        assert!(saw_max_half, "splitting never used the region budget");
    }

    #[test]
    fn splits_are_random_between_a_tenth_and_nine_tenths() {
        let mut regions = vec![Region::new(0, 1000)];
        let mut draws = vec![0u64, 8].into_iter();
        split_regions_of(&mut regions, 3, &mut |_| draws.next().unwrap());
        // First split at 1/10 of 1000, then the left part (100) at 9/10 → 90.
        let spans: Vec<_> = regions.iter().map(|r| (r.start, r.end)).collect();
        assert_eq!(spans, vec![(0, 90), (90, 100), (100, 1000)]);
    }

    #[test]
    fn feed_loop_matches_the_kernel_formula() {
        assert_eq!(feed_loop_next_input(10_000, 0), 20_000);
        assert_eq!(feed_loop_next_input(10_000, 10_000), 10_000);
        assert_eq!(feed_loop_next_input(1_000_000, 5_000), 1_500_000);
        assert_eq!(feed_loop_next_input(1_000_000, 15_000), 500_000);
        assert_eq!(feed_loop_next_input(1_000_000, 20_000), 10_000);
        assert_eq!(feed_loop_next_input(20_000, 19_999), 10_000);
        // Interval tuning: far below the goal → double; far above → halve at most.
        assert_eq!(intervals_adaptation_bp(0), 20_000);
        assert_eq!(intervals_adaptation_bp(40_000), 5_000);
    }

    #[test]
    fn interval_tuning_stretches_intervals_when_accesses_are_rare() {
        let mut mech = test_machine();
        let target = Target {
            regions: vec![Region::new(0, 1000)],
        };
        let mut a = attrs(10, 100);
        a.intervals_goal.aggrs = 3;
        let mut ctx = DamonCtx::new(a, vec![target], Vec::new());
        // Nothing is ever accessed: observed ratio 0% against a 4% goal.
        let mut ops = FakeOps {
            accessed: |_| false,
        };
        ctx.start(&mut ops, &mut mech);
        while ctx.nr_aggregations() < 9 {
            ctx.on_sample(&mut ops, &mut mech);
        }
        // Three tunings, each doubling: 5 ms → 40 ms, aggregation kept at 20 samples.
        assert_eq!(ctx.attrs.sample_us, 40_000);
        assert_eq!(ctx.attrs.aggr_us, 800_000);
        assert_eq!(ctx.nr_tunings(), 3);
    }

    #[test]
    fn physical_view_keeps_frames_and_reuses_freed_ones() {
        let mut t = TierFrames::with_capacity(8);
        for vpn in [10, 11, 12] {
            t.place(pack(Pid(0), vpn, false));
        }
        assert_eq!(t.index[&pack(Pid(0), 11, false)], 1);
        t.release(pack(Pid(0), 11, false));
        assert_eq!(t.frames[1], EMPTY);
        // Frame 2 keeps its page; the next arrival takes the freed frame 1.
        assert_eq!(t.frames[2], pack(Pid(0), 12, false));
        t.place(pack(Pid(1), 5, false));
        assert_eq!(t.index[&pack(Pid(1), 5, false)], 1);
        assert_eq!(unpack(t.frames[1]), (Pid(1), 5, false));
        assert_eq!(t.tracked_pages, 3);
    }
}
