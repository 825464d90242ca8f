//! DAMOS, DAMON-based operation schemes (the `damos_*` half of `mm/damon/core.c` and
//! the scores of `mm/damon/ops-common.c`): an access pattern selects regions, an
//! action is applied to them, a quota bounds how much per reset interval, regions
//! beyond the quota are prioritized by a hotness or coldness score, quota goals
//! feedback-tune the effective quota, and filters accept or reject single pages.
//!
//! [`apply_schemes`] is `kdamond_apply_schemes`; [`DamonCtx::on_sample`] calls it at
//! every sampling interval, and it applies the schemes whose apply interval has come.

use super::{split_region_at, ApplyOutcome, DamonAttrs, DamonCtx, DamonOps, Region};
use tierkit_core::*;

/// `DAMOS_MAX_SCORE`: the largest prioritization score.
pub const DAMOS_MAX_SCORE: u32 = 99;
/// `DAMON_MAX_SUBSCORE` of the hot score.
const MAX_SUBSCORE: i64 = 100;
/// `DAMON_MAX_AGE_IN_LOG` of the hot score.
const MAX_AGE_IN_LOG: i64 = 32;

/// A DAMOS action (`enum damos_action`), the subset paddr tiering uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DamosAction {
    /// `DAMOS_MIGRATE_HOT`: migrate to `target_nid`, hottest regions first.
    MigrateHot,
    /// `DAMOS_MIGRATE_COLD`: migrate to `target_nid`, coldest regions first.
    MigrateCold,
    /// `DAMOS_STAT`: only count.
    Stat,
}

/// Which regions a scheme applies to (`struct damos_access_pattern`); bounds are
/// inclusive. `nr_accesses` is in samples per aggregation, `age` in aggregations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessPattern {
    /// Smallest region, bytes.
    pub min_sz_bytes: u64,
    /// Largest region, bytes.
    pub max_sz_bytes: u64,
    /// Fewest accessed samples.
    pub min_nr_accesses: u32,
    /// Most accessed samples.
    pub max_nr_accesses: u32,
    /// Youngest age.
    pub min_age: u32,
    /// Oldest age.
    pub max_age: u32,
}

impl AccessPattern {
    /// Every region.
    pub const ANY: AccessPattern = AccessPattern {
        min_sz_bytes: PAGE_SIZE,
        max_sz_bytes: u64::MAX,
        min_nr_accesses: 0,
        max_nr_accesses: u32::MAX,
        min_age: 0,
        max_age: u32::MAX,
    };
}

/// A quota goal metric (`enum damos_quota_goal_metric`), the node-memory ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GoalMetric {
    /// `DAMOS_QUOTA_NODE_MEM_USED_BP`: used memory of node `nid`, basis points.
    NodeMemUsedBp,
    /// `DAMOS_QUOTA_NODE_MEM_FREE_BP`: free memory of node `nid`, basis points.
    NodeMemFreeBp,
}

/// A quota goal (`struct damos_quota_goal`): the quota is tuned so that the metric
/// approaches `target_value`, assuming more quota raises the metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaGoal {
    /// What is measured.
    pub metric: GoalMetric,
    /// The target, in the metric's unit (bp).
    pub target_value: u64,
    /// The node (tier) measured.
    pub nid: TierId,
    /// Last measured value.
    pub current_value: u64,
}

/// A scheme's quota (`struct damos_quota`). Public fields are the user's; the rest
/// is DAMON's running state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quota {
    /// CPU time per reset interval, ms; 0 = none.
    pub ms: u64,
    /// Bytes per reset interval; 0 = none.
    pub sz_bytes: u64,
    /// The charge window, ms.
    pub reset_interval_ms: u64,
    /// Size weight of prioritization (unused by the hot/cold scores, as upstream).
    pub weight_sz: u32,
    /// Access-frequency weight of prioritization.
    pub weight_nr_accesses: u32,
    /// Age weight of prioritization.
    pub weight_age: u32,
    /// Goals that tune the effective quota.
    pub goals: Vec<QuotaGoal>,
    esz: u64,
    esz_bp: u64,
    total_charged_sz: u64,
    total_charged_ns: u64,
    charged_sz: u64,
    charged_from: Option<Nanos>,
    charge_target_from: Option<usize>,
    /// Bytes, as the kernel's `charge_addr_from` (`r->ar.end + 1`).
    charge_addr_from: u64,
    min_score: u32,
}

impl Quota {
    /// A quota with the given limits and weights and no goals.
    pub fn new(ms: u64, sz_bytes: u64, reset_interval_ms: u64, weights: (u32, u32, u32)) -> Quota {
        Quota {
            ms,
            sz_bytes,
            reset_interval_ms,
            weight_sz: weights.0,
            weight_nr_accesses: weights.1,
            weight_age: weights.2,
            goals: Vec::new(),
            esz: 0,
            esz_bp: 0,
            total_charged_sz: 0,
            total_charged_ns: 0,
            charged_sz: 0,
            charged_from: None,
            charge_target_from: None,
            charge_addr_from: 0,
            min_score: 0,
        }
    }

    /// No quota at all: unlimited.
    pub fn unlimited() -> Quota {
        Quota::new(0, 0, 0, (0, 0, 0))
    }

    /// The effective size quota of the current window, bytes (0: unlimited).
    pub fn esz(&self) -> u64 {
        self.esz
    }

    /// Bytes charged in the current window.
    pub fn charged_sz(&self) -> u64 {
        self.charged_sz
    }

    fn active(&self) -> bool {
        self.ms > 0 || self.sz_bytes > 0 || !self.goals.is_empty()
    }
}

/// A per-page filter (`struct damos_filter`), the ops-layer `young` type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DamosFilter {
    /// The filter matches pages whose "accessed since last check" equals this.
    pub matching: bool,
    /// Matching pages are allowed (else rejected).
    pub allow: bool,
}

/// Per-scheme statistics (`struct damos_stat`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DamosStat {
    /// Regions the scheme was tried on.
    pub nr_tried: u64,
    /// Bytes of those regions.
    pub sz_tried: u64,
    /// Regions the action applied to (non-zero bytes).
    pub nr_applied: u64,
    /// Bytes the action applied to.
    pub sz_applied: u64,
    /// Bytes that passed the ops filters.
    pub sz_ops_filter_passed: u64,
    /// Reset intervals whose quota was used up.
    pub qt_exceeds: u64,
}

/// One scheme (`struct damos`).
#[derive(Debug, Clone)]
pub struct Damos {
    /// Regions it applies to.
    pub pattern: AccessPattern,
    /// What it does.
    pub action: DamosAction,
    /// How often it is applied, µs; 0 = every aggregation interval.
    pub apply_interval_us: u64,
    /// Its quota.
    pub quota: Quota,
    /// Its young filters, in order.
    pub filters: Vec<DamosFilter>,
    /// Migration target (`target_nid`).
    pub target_nid: Option<TierId>,
    /// Statistics.
    pub stat: DamosStat,
    pub(crate) next_apply_sis: u64,
    pub(crate) last_applied: Option<u64>,
}

impl Damos {
    /// A scheme with no filters.
    pub fn new(
        pattern: AccessPattern,
        action: DamosAction,
        apply_interval_us: u64,
        quota: Quota,
        target_nid: Option<TierId>,
    ) -> Damos {
        Damos {
            pattern,
            action,
            apply_interval_us,
            quota,
            filters: Vec::new(),
            target_nid,
            stat: DamosStat::default(),
            next_apply_sis: 0,
            last_applied: None,
        }
    }

    /// True if a page test is needed to filter.
    pub fn has_young_filter(&self) -> bool {
        !self.filters.is_empty()
    }

    /// `damos_pa_filter_out`: should the page be skipped? `young` tests (and clears)
    /// the page's accessed bit. A page no filter matches is rejected when the last
    /// filter is an allow filter (`damos_filters_default_reject`).
    pub fn filter_out(&self, mut young: impl FnMut() -> bool) -> bool {
        for f in &self.filters {
            if young() == f.matching {
                return !f.allow;
            }
        }
        self.filters.last().is_some_and(|f| f.allow)
    }
}

// ----- scores -----------------------------------------------------------------------

/// `damon_hot_score`: hotness in `[0, DAMOS_MAX_SCORE]` from the access frequency
/// (share of samples) and the log2 of the age in seconds (negative when idle),
/// weighted by the quota's weights.
pub fn hot_score(attrs: &DamonAttrs, r: &Region, q: &Quota) -> u32 {
    let freq_subscore = r.nr_accesses as i64 * MAX_SUBSCORE / attrs.max_nr_accesses().max(1) as i64;
    let mut age_in_sec = r.age as u64 * attrs.aggr_us / 1_000_000;
    let mut age_in_log = 0i64;
    while age_in_log < MAX_AGE_IN_LOG && age_in_sec > 0 {
        age_in_log += 1;
        age_in_sec >>= 1;
    }
    // An idle region that has stayed idle longer is colder.
    if freq_subscore == 0 {
        age_in_log = -age_in_log;
    }
    let age_subscore = (age_in_log + MAX_AGE_IN_LOG) * MAX_SUBSCORE / MAX_AGE_IN_LOG / 2;
    let (fw, aw) = (q.weight_nr_accesses as i64, q.weight_age as i64);
    let mut hotness = fw * freq_subscore + aw * age_subscore;
    if fw + aw > 0 {
        hotness /= fw + aw;
    }
    (hotness * DAMOS_MAX_SCORE as i64 / MAX_SUBSCORE) as u32
}

/// `damon_cold_score`: `DAMOS_MAX_SCORE` minus the hot score.
pub fn cold_score(attrs: &DamonAttrs, r: &Region, q: &Quota) -> u32 {
    DAMOS_MAX_SCORE - hot_score(attrs, r, q)
}

// ----- quota -------------------------------------------------------------------------

/// `damos_get_node_mem_bp`: used or free memory of the goal's node, basis points.
pub fn node_mem_bp(metric: GoalMetric, nid: TierId, mech: &dyn Mechanisms) -> u64 {
    let Some(info) = mech.tiers().get(nid.index()) else {
        return 0;
    };
    let total = info.capacity_pages.max(1);
    let free = mech.free_pages(nid).min(total);
    let numerator = match metric {
        GoalMetric::NodeMemUsedBp => total - free,
        GoalMetric::NodeMemFreeBp => free,
    };
    numerator * 10_000 / total
}

/// `damos_quota_score`: measure every goal; the highest score (the least aggressive)
/// wins.
fn quota_score(q: &mut Quota, mech: &dyn Mechanisms) -> u64 {
    let mut highest = 0;
    for g in &mut q.goals {
        g.current_value = node_mem_bp(g.metric, g.nid, mech);
        highest = highest.max(g.current_value * 10_000 / g.target_value.max(1));
    }
    highest
}

/// `damos_set_effective_quota`: the effective size quota of a new window: the
/// goal-tuned size (`esz_bp` through the feedback loop, the "consist" tuner), capped
/// by what `ms` of CPU moves at the measured throughput and by `sz_bytes`.
pub fn set_effective_quota(q: &mut Quota, mech: &dyn Mechanisms) {
    if q.ms == 0 && q.goals.is_empty() {
        q.esz = q.sz_bytes;
        return;
    }
    let mut esz = u64::MAX;
    if !q.goals.is_empty() {
        let score = quota_score(q, mech);
        q.esz_bp = super::feed_loop_next_input(q.esz_bp.max(10_000), score);
        esz = q.esz_bp / 10_000;
    }
    if q.ms > 0 {
        // Bytes per ms of apply time so far; before any, PAGE_SIZE × 1024 per ms.
        let throughput = q
            .total_charged_sz
            .saturating_mul(1_000_000)
            .checked_div(q.total_charged_ns)
            .unwrap_or(PAGE_SIZE * 1024);
        esz = esz.min(throughput.saturating_mul(q.ms));
    }
    if q.sz_bytes > 0 && q.sz_bytes < esz {
        esz = q.sz_bytes;
    }
    q.esz = esz;
}

/// `__damos_valid_target`: does the region fit the access pattern? Between
/// aggregations the frequency is the moving sum (`nr_accesses_bp`).
pub fn matches_pattern(r: &Region, p: &AccessPattern) -> bool {
    let sz = r.sz() * PAGE_SIZE;
    let nr_accesses = (r.nr_accesses_bp / 10_000).min(u32::MAX as u64) as u32;
    p.min_sz_bytes <= sz
        && sz <= p.max_sz_bytes
        && p.min_nr_accesses <= nr_accesses
        && nr_accesses <= p.max_nr_accesses
        && p.min_age <= r.age
        && r.age <= p.max_age
}

/// `damos_adjust_quota`: open a new charge window when the reset interval passed,
/// then set the minimum score so that the regions at or above it just fill the
/// effective quota.
fn adjust_quota(ctx: &mut DamonCtx, si: usize, ops: &dyn DamonOps, mech: &dyn Mechanisms) {
    let now = mech.now();
    let s = &mut ctx.schemes[si];
    if !s.quota.active() {
        return;
    }
    let q = &mut s.quota;
    let window_over = q
        .charged_from
        .is_none_or(|from| now >= from + q.reset_interval_ms * NS_PER_MS);
    if window_over {
        if q.esz > 0 && q.charged_sz >= q.esz {
            s.stat.qt_exceeds += 1;
        }
        q.total_charged_sz += q.charged_sz;
        q.charged_from = Some(now);
        q.charged_sz = 0;
        set_effective_quota(q, mech);
    }
    let s = &ctx.schemes[si];
    let mut hist = [0u64; DAMOS_MAX_SCORE as usize + 1];
    let mut max_score = 0;
    for r in ctx.targets.iter().flat_map(|t| t.regions.iter()) {
        if !matches_pattern(r, &s.pattern) {
            continue;
        }
        let score = ops.scheme_score(&ctx.attrs, r, s).min(DAMOS_MAX_SCORE);
        hist[score as usize] += r.sz() * PAGE_SIZE;
        max_score = max_score.max(score);
    }
    let mut cumulated = 0;
    let mut score = max_score;
    loop {
        cumulated += hist[score as usize];
        if cumulated >= s.quota.esz || score == 0 {
            break;
        }
        score -= 1;
    }
    ctx.schemes[si].quota.min_score = score;
}

/// `damos_skip_charged_region`: after a window whose quota ran out at some address,
/// the next window resumes after it rather than re-applying to the same regions.
/// Returns whether to skip the region; may split it, moving `ri` to the second part
/// and counting the inserted region in `inserted`.
fn skip_charged_region(
    ctx: &mut DamonCtx,
    t: usize,
    ri: &mut usize,
    si: usize,
    inserted: &mut usize,
) -> bool {
    let q = &mut ctx.schemes[si].quota;
    let Some(from_t) = q.charge_target_from else {
        return false;
    };
    if t != from_t {
        return true;
    }
    let regions = &mut ctx.targets[t].regions;
    if *ri + 1 == regions.len() {
        q.charge_target_from = None;
        q.charge_addr_from = 0;
        return true;
    }
    let r = regions[*ri];
    let (start_b, end_b) = (r.start * PAGE_SIZE, r.end * PAGE_SIZE);
    if q.charge_addr_from > 0 && end_b <= q.charge_addr_from {
        return true;
    }
    if q.charge_addr_from > 0 && start_b < q.charge_addr_from {
        let mut sz_to_skip = (q.charge_addr_from - start_b) / PAGE_SIZE;
        if sz_to_skip == 0 {
            if r.sz() <= super::MIN_REGION {
                return true;
            }
            sz_to_skip = super::MIN_REGION;
        }
        let second = split_region_at(&mut regions[*ri], sz_to_skip);
        regions.insert(*ri + 1, second);
        *ri += 1;
        *inserted += 1;
    }
    q.charge_target_from = None;
    q.charge_addr_from = 0;
    false
}

fn update_stat(s: &mut Damos, sz_tried: u64, o: ApplyOutcome) {
    s.stat.nr_tried += 1;
    s.stat.sz_tried += sz_tried;
    if o.sz_applied > 0 {
        s.stat.nr_applied += 1;
    }
    s.stat.sz_applied += o.sz_applied;
    s.stat.sz_ops_filter_passed += o.sz_filter_passed;
}

/// `damos_apply_scheme`: trim the region to what is left of the quota, apply the
/// action, charge the quota with the (trimmed) region size, and reset the region's
/// age. Returns the number of regions inserted.
fn apply_scheme(
    ctx: &mut DamonCtx,
    t: usize,
    ri: usize,
    si: usize,
    ops: &mut dyn DamonOps,
    mech: &mut dyn Mechanisms,
) -> usize {
    let mut inserted = 0;
    let r = ctx.targets[t].regions[ri];
    let mut sz = r.sz() * PAGE_SIZE;
    let q = &ctx.schemes[si].quota;
    if q.esz > 0 && q.charged_sz + sz > q.esz {
        sz = (q.esz - q.charged_sz) / PAGE_SIZE * PAGE_SIZE;
        if sz == 0 {
            update_stat(&mut ctx.schemes[si], 0, ApplyOutcome::default());
            return 0;
        }
        let second = split_region_at(&mut ctx.targets[t].regions[ri], sz / PAGE_SIZE);
        ctx.targets[t].regions.insert(ri + 1, second);
        inserted += 1;
    }
    let r = ctx.targets[t].regions[ri];
    let o = ops.apply_scheme(&ctx.attrs, t, &r, &mut ctx.schemes[si], mech);
    let s = &mut ctx.schemes[si];
    s.quota.total_charged_ns += o.cost_ns;
    s.quota.charged_sz += sz;
    if s.quota.esz > 0 && s.quota.charged_sz >= s.quota.esz {
        s.quota.charge_target_from = Some(t);
        s.quota.charge_addr_from = r.end * PAGE_SIZE + 1;
    }
    if s.action != DamosAction::Stat {
        ctx.targets[t].regions[ri].age = 0;
    }
    update_stat(&mut ctx.schemes[si], sz, o);
    inserted
}

/// `damon_do_apply_schemes`: every due scheme whose quota is not used up and whose
/// pattern and minimum score the region meets is applied to it. Returns the number
/// of regions inserted after it (not visited in this pass, as in the kernel's safe
/// list walk).
fn do_apply_schemes(
    ctx: &mut DamonCtx,
    t: usize,
    mut ri: usize,
    ops: &mut dyn DamonOps,
    mech: &mut dyn Mechanisms,
) -> usize {
    let mut inserted = 0;
    for si in 0..ctx.schemes.len() {
        let s = &ctx.schemes[si];
        if ctx.passed_sample_intervals < s.next_apply_sis {
            continue;
        }
        if s.quota.esz > 0 && s.quota.charged_sz >= s.quota.esz {
            continue;
        }
        if skip_charged_region(ctx, t, &mut ri, si, &mut inserted) {
            continue;
        }
        let s = &ctx.schemes[si];
        let r = &ctx.targets[t].regions[ri];
        if !matches_pattern(r, &s.pattern) {
            continue;
        }
        if s.quota.esz > 0 && ops.scheme_score(&ctx.attrs, r, s) < s.quota.min_score {
            continue;
        }
        inserted += apply_scheme(ctx, t, ri, si, ops, mech);
    }
    inserted
}

/// CPU of testing one region against one due scheme (pattern, score), ns. An
/// estimate.
pub const SCHEME_REGION_NS: u64 = 10;

/// `kdamond_apply_schemes`: adjust the quotas of the due schemes, walk every region
/// applying them, then schedule each due scheme's next application.
pub fn apply_schemes(ctx: &mut DamonCtx, ops: &mut dyn DamonOps, mech: &mut dyn Mechanisms) {
    let passed = ctx.passed_sample_intervals;
    let due: Vec<usize> = (0..ctx.schemes.len())
        .filter(|&i| passed >= ctx.schemes[i].next_apply_sis)
        .collect();
    if due.is_empty() {
        return;
    }
    for &si in &due {
        adjust_quota(ctx, si, ops, mech);
    }
    mech.charge_cpu(ctx.nr_regions() as u64 * due.len() as u64 * 2 * SCHEME_REGION_NS);
    for t in 0..ctx.targets.len() {
        let mut ri = 0;
        while ri < ctx.targets[t].regions.len() {
            ri += 1 + do_apply_schemes(ctx, t, ri, ops, mech);
        }
    }
    let sample = ctx.attrs.sample_us.max(1);
    for si in due {
        let apply_us = ctx.apply_interval_us(si);
        let s = &mut ctx.schemes[si];
        s.next_apply_sis = passed + apply_us / sample;
        s.last_applied = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(nr_accesses: u32, age: u32) -> Region {
        Region {
            nr_accesses,
            age,
            ..Region::new(0, 10)
        }
    }

    #[test]
    fn hot_score_follows_ops_common() {
        let attrs = DamonAttrs::default();
        let q = Quota::new(0, 0, 1000, (0, 100, 100));
        // Always accessed, age 0: freq 100, age subscore 50 → 75 → ×99/100 = 74.
        assert_eq!(hot_score(&attrs, &region(20, 0), &q), 74);
        // Never accessed, age 0: (0 + 50) / 2 = 25 → 24.
        assert_eq!(hot_score(&attrs, &region(0, 0), &q), 24);
        // Never accessed for 10 s (100 aggregations): log2 age 4, negated → 28 →
        // subscore 43 → 21 → 20. Older idle memory is colder.
        assert_eq!(hot_score(&attrs, &region(0, 100), &q), 20);
        assert_eq!(cold_score(&attrs, &region(0, 100), &q), 79);
        // Hot for long is hotter than hot just now.
        assert!(hot_score(&attrs, &region(20, 100), &q) > 74);
    }

    #[test]
    fn young_filters_allow_or_reject_as_in_mtier() {
        let mut promote = Damos::new(
            AccessPattern::ANY,
            DamosAction::MigrateHot,
            0,
            Quota::unlimited(),
            None,
        );
        promote.filters.push(DamosFilter {
            matching: true,
            allow: true,
        });
        // Allow young; a page no filter matches is rejected (the last filter allows).
        assert!(!promote.filter_out(|| true));
        assert!(promote.filter_out(|| false));
        let mut demote = Damos::new(
            AccessPattern::ANY,
            DamosAction::MigrateCold,
            0,
            Quota::unlimited(),
            None,
        );
        demote.filters.push(DamosFilter {
            matching: true,
            allow: false,
        });
        assert!(demote.filter_out(|| true));
        assert!(!demote.filter_out(|| false));
        let none = Damos::new(
            AccessPattern::ANY,
            DamosAction::Stat,
            0,
            Quota::unlimited(),
            None,
        );
        assert!(!none.filter_out(|| unreachable!("no filter, no page test")));
    }

    #[test]
    fn pattern_reads_the_moving_sum_between_aggregations() {
        let p = AccessPattern {
            min_nr_accesses: 1,
            ..AccessPattern::ANY
        };
        let mut r = region(0, 0);
        r.nr_accesses_bp = 9_999;
        assert!(!matches_pattern(&r, &p));
        r.nr_accesses_bp = 10_000;
        assert!(matches_pattern(&r, &p));
    }
}
