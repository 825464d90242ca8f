//! How much of the machine a run simulates: the scale of spatially sampled simulation.
//!
//! With `sim.sample_rate = r < 1` the simulator runs only the 2 MiB regions of each
//! process whose hash falls under `r` (SHARDS-style spatial sampling, Waldspurger et
//! al., FAST'15). The sampled machine is the full machine shrunk in *space*, not in
//! time: every extensive quantity (tier capacities, LLC size, bandwidths, and every
//! fixed count or size per interval inside a policy) is multiplied by `r`; every
//! intensive one (latencies, time constants, per-page thresholds, virtual address
//! ranges) stays. A policy learns the scale from its [`BuildContext`](crate::BuildContext)
//! and scales its own extensive parameters with the helpers here, so that a policy
//! sees a machine `r` times smaller that behaves, per page, like the full one.

use serde::Serialize;

use std::sync::Arc;

use crate::{Vpn, SUBPAGES_PER_HUGE};

/// The space scale of a run: the share of 2 MiB regions simulated. 1 = exact.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SpaceScale {
    rate: f64,
}

impl Default for SpaceScale {
    fn default() -> Self {
        SpaceScale::EXACT
    }
}

impl SpaceScale {
    /// Every region simulated (no sampling).
    pub const EXACT: SpaceScale = SpaceScale { rate: 1.0 };

    /// A scale simulating `rate` of the regions, `0 < rate <= 1` (checked by the
    /// simulator's config before any run; out-of-range values are clamped here).
    pub fn new(rate: f64) -> SpaceScale {
        let rate = if rate.is_finite() {
            rate.clamp(f64::MIN_POSITIVE, 1.0)
        } else {
            1.0
        };
        SpaceScale { rate }
    }

    /// The sampled share of regions.
    #[inline]
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// True when nothing is sampled away.
    #[inline]
    pub fn is_exact(&self) -> bool {
        self.rate == 1.0
    }

    /// An extensive count (pages per scan, samples per interval, pages per second):
    /// `n · rate`, rounded, and at least 1 when `n` is at least 1 so that a mechanism
    /// that acts at full scale still acts when sampled.
    pub fn count(&self, n: u64) -> u64 {
        if n == 0 || self.is_exact() {
            return n;
        }
        ((n as f64 * self.rate).round() as u64).max(1)
    }

    /// An extensive real quantity (bytes per second, MB per scan): `x · rate`.
    pub fn amount(&self, x: f64) -> f64 {
        x * self.rate
    }

    /// An extensive size in MiB given as an integer: `mib · rate`, rounded, at least 1
    /// when `mib` is at least 1. (Use only for sizes of *memory* — capacities, quotas,
    /// rate limits — never for virtual address ranges, which keep their shape.)
    pub fn mib(&self, mib: u64) -> u64 {
        self.count(mib)
    }
}

/// Which 2 MiB regions a sampled run simulates. The region numbers of a process are
/// cut into blocks of `N = 1/rate` consecutive regions, and in each block exactly one
/// region, chosen by a 64-bit hash of (process, block) salted by the run's seed, is
/// kept: stratified spatial sampling. Like SHARDS's hashing it has no bias toward any
/// address pattern (which region of a block is kept is random), and unlike independent
/// hashing every mapping of `R` regions keeps `R/N` of them, give or take one, so a
/// sampled footprint is the full one times `rate` and not a random share of it (with
/// independent hashing a 4 GiB footprint at 1/64 keeps 32 ± 6 regions). The same salt
/// and rate always keep the same regions, so every policy of a comparison sees the
/// same sampled stream.
///
/// With [`SampleStrata::Mapping`] the strata are drawn inside each mapping instead
/// (see [`MappingStrata`]): a mapping's whole aligned blocks of N regions keep one
/// region each, and the rest of it keeps one base page in each N, so a mapping under
/// N regions is sampled page by page rather than kept whole or dropped whole.
///
/// A few pages may be sampled in time instead ([`RegionSampler::with_time_sampled`]):
/// simulated in every sample, whatever their unit, with one access in N of each
/// thread kept ([`TimeThinning`]). A page that carries a large share of all accesses
/// (the root of a connected-components run, `docs/sampling.md`) cannot be sampled in
/// space: kept it counts N times, dropped it is gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionSampler {
    salt: u64,
    /// `N - 1` where N = 1/rate is a power of two; 0 keeps every region.
    mask: u64,
    /// Added to a process id before hashing (see [`RegionSampler::for_processes_from`]).
    pid_offset: u32,
    /// Where the strata are drawn (`sim.sample_strata`).
    strata: SampleStrata,
    /// Pages sampled in time, as `(process, page)` of the run, sorted; empty in most
    /// runs.
    time_sampled: Arc<[(u32, Vpn)]>,
    /// What becomes of the compute of the accesses a stream drops
    /// (`sim.sampled_compute`).
    compute: SampledCompute,
}

/// What a sampled stream does with the compute time (`gap_ns`) of the accesses it
/// drops (`sim.sampled_compute`, `docs/sampling.md` "The compute between accesses").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SampledCompute {
    /// A kept access keeps its own gap and the dropped accesses' compute is gone: the
    /// kept compute, weighted by N, is a draw whose skew follows the accesses' (a
    /// zipfian store's hottest keys carry a few per cent of all compute each). The
    /// default before 2026-11-30.
    Kept,
    /// Compute does not depend on placement, so it is not sampled: a kept access
    /// carries its own gap plus the gaps of the accesses its thread dropped since its
    /// last kept one, and the machine adds gaps unweighted (where "kept" weighs each
    /// by N), so a thread's compute is the full stream's up to its last kept access.
    /// The default.
    #[default]
    Carried,
}

impl SampledCompute {
    /// The mode as `sim.sampled_compute` names it.
    pub fn name(self) -> &'static str {
        match self {
            SampledCompute::Kept => "kept",
            SampledCompute::Carried => "carried",
        }
    }
}

/// One thread's compute carried from the accesses a sampled stream drops to the next
/// one it keeps ([`SampledCompute::Carried`]).
///
/// A restricted generator ([`crate::Workload::restrict_to`]) and the simulator's
/// stream filter both give each kept access its own gap plus the gaps of the
/// accesses dropped since the thread's last kept one. A stream that drops nothing
/// passes through unchanged, so filtering a sampled stream again is harmless.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ComputeCarry {
    /// Compute not yet given to a kept access, ns.
    pending_ns: u64,
}

impl ComputeCarry {
    /// Carry `ns` of compute (a dropped access's gap, or several).
    #[inline]
    pub fn drop_ns(&mut self, ns: u64) {
        self.pending_ns = self.pending_ns.saturating_add(ns);
    }

    /// The gap of a kept access whose own gap is `gap_ns`: its own plus what is
    /// carried (up to `u32::MAX` ns; anything beyond stays carried to the next).
    #[inline]
    pub fn keep(&mut self, gap_ns: u32) -> u32 {
        let total = self.pending_ns.saturating_add(gap_ns as u64);
        let out = total.min(u32::MAX as u64);
        self.pending_ns = total - out;
        out as u32
    }

    /// Compute carried and not yet given to a kept access, ns.
    pub fn pending_ns(&self) -> u64 {
        self.pending_ns
    }
}

/// Where a sampled run draws its strata (`sim.sample_strata`, `docs/sampling.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SampleStrata {
    /// Blocks of N consecutive 2 MiB regions of each process's address space, one
    /// region kept per block. A mapping under N regions is kept whole or not at all,
    /// at N times its weight when kept: unbiased, but with a variance that a small,
    /// hot mapping (a BFS frontier bitmap) turns into a large error.
    #[default]
    Address,
    /// Strata inside each mapping: its whole aligned blocks of N regions keep one
    /// region each (huge pages keep their shape there), and its remaining pages (a
    /// mapping under N regions, the unaligned head and the remainder) keep one base
    /// page in each N, on base pages only. Every mapping keeps `1/N` of its pages,
    /// give or take one page.
    Mapping,
    /// Strata inside each mapping, every page of it sampled page by page (one base
    /// page kept in each N): [`SampleStrata::Mapping`] without a part sampled by
    /// region. No huge page can keep its shape, so only a machine without THP may use
    /// it; in exchange a mapping whose accesses fall off across its length (a
    /// connected-components label array, hottest at low vertex ids) is sampled evenly
    /// along it instead of by a few 2 MiB regions.
    Page,
}

/// How a mapping is sampled under [`SampleStrata::Mapping`]: computed from the mapping
/// as it was mapped (`Op::Mmap`), and kept by every part of it after a partial
/// `munmap`, so the machine and a stream filter decide alike. Under
/// [`SampleStrata::Address`] (or an exact run) it carries nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MappingStrata {
    /// First page of the mapping as mapped.
    start_vpn: Vpn,
    /// Pages `[body_start, body_end)` are sampled by 2 MiB region: the mapping's
    /// aligned regions, in whole blocks of N from its first aligned one. Empty
    /// (both at the mapping's end) when it has fewer than N aligned regions.
    body_start: Vpn,
    body_end: Vpn,
    /// True under [`SampleStrata::Address`]: the address-space strata decide.
    by_address: bool,
}

impl MappingStrata {
    /// The strata of an exact or address-sampled run: regions decide, huge pages go
    /// anywhere.
    pub const BY_ADDRESS: MappingStrata = MappingStrata {
        start_vpn: 0,
        body_start: 0,
        body_end: Vpn::MAX,
        by_address: true,
    };

    /// True if a huge page may start at `head` (a 2 MiB-aligned page number): always
    /// by address; by mapping only in the part sampled by region, since a page-sampled
    /// part keeps one base page in N and a huge page there would occupy N times its
    /// share.
    #[inline]
    pub fn huge_allowed(&self, head: Vpn) -> bool {
        self.by_address || (head >= self.body_start && head < self.body_end)
    }
}

impl RegionSampler {
    /// A sampler keeping `scale.rate()` of the regions, salted from `seed`. The rate is
    /// rounded to the nearest `1/N` with N a power of two (the simulator accepts only
    /// such rates). It keeps compute ([`SampledCompute::Kept`]) until
    /// [`RegionSampler::with_compute`] says otherwise; a run's sampler takes the run's
    /// `sim.sampled_compute`.
    pub fn new(scale: SpaceScale, seed: u64) -> RegionSampler {
        let n = (1.0 / scale.rate()).round().max(1.0) as u64;
        RegionSampler {
            salt: mix64(seed ^ 0x5348_4152_4453_2d74), // "SHARDS-t"
            mask: n.next_power_of_two() - 1,
            pid_offset: 0,
            strata: SampleStrata::Address,
            time_sampled: Arc::from([]),
            compute: SampledCompute::Kept,
        }
    }

    /// This sampler treating the compute of dropped accesses as `compute` says.
    pub fn with_compute(self, compute: SampledCompute) -> RegionSampler {
        RegionSampler { compute, ..self }
    }

    /// True when a stream sampled by this sampler carries its dropped accesses'
    /// compute to its kept ones ([`SampledCompute::Carried`]); never in an exact run.
    #[inline]
    pub fn carries_compute(&self) -> bool {
        self.compute == SampledCompute::Carried && !self.keeps_all()
    }

    /// This sampler simulating `pages` (`(process, page)` of the run) in time rather
    /// than in space: each is simulated in every sample, and a stream keeps one in N
    /// of each thread's accesses to it ([`TimeThinning`]), each standing for N as every
    /// sampled event does. Nothing changes in an exact run.
    pub fn with_time_sampled(self, mut pages: Vec<(u32, Vpn)>) -> RegionSampler {
        if self.keeps_all() {
            pages.clear();
        }
        pages.sort_unstable();
        pages.dedup();
        RegionSampler {
            time_sampled: pages.into(),
            ..self
        }
    }

    /// The pages sampled in time, as `(process, page)` of the run, sorted.
    pub fn time_sampled(&self) -> &[(u32, Vpn)] {
        &self.time_sampled
    }

    /// The index in [`RegionSampler::time_sampled`] of page `vpn` of process `pid`,
    /// if it is sampled in time.
    #[inline]
    pub fn time_sampled_index(&self, pid: u32, vpn: Vpn) -> Option<usize> {
        if self.time_sampled.is_empty() {
            return None;
        }
        self.time_sampled
            .binary_search(&(pid.wrapping_add(self.pid_offset), vpn))
            .ok()
    }

    /// True if the 2 MiB region holding `vpn` in process `pid` holds a page of that
    /// process sampled in time: no huge page may back it, since the region's other
    /// pages may not be simulated (`Machine`'s THP decisions).
    #[inline]
    pub fn region_holds_time_sampled(&self, pid: u32, vpn: Vpn) -> bool {
        if self.time_sampled.is_empty() {
            return false;
        }
        let head = vpn & !(SUBPAGES_PER_HUGE - 1);
        self.next_time_sampled(pid, head, head + SUBPAGES_PER_HUGE)
            .is_some()
    }

    /// The first page sampled in time of process `pid` in `[from, to)`.
    #[inline]
    fn next_time_sampled(&self, pid: u32, from: Vpn, to: Vpn) -> Option<Vpn> {
        let p = pid.wrapping_add(self.pid_offset);
        let i = self.time_sampled.partition_point(|&k| k < (p, from));
        self.time_sampled
            .get(i)
            .filter(|&&(q, v)| q == p && v < to)
            .map(|&(_, v)| v)
    }

    /// This sampler drawing its strata as `strata` says.
    pub fn with_strata(self, strata: SampleStrata) -> RegionSampler {
        RegionSampler { strata, ..self }
    }

    /// Where this sampler draws its strata.
    #[inline]
    pub fn strata(&self) -> SampleStrata {
        self.strata
    }

    /// True when strata are drawn per mapping and something is sampled away: what is
    /// kept then depends on the mapping an address belongs to ([`MappingStrata`]), not
    /// on the address alone.
    #[inline]
    pub fn by_mapping(&self) -> bool {
        self.strata != SampleStrata::Address && !self.keeps_all()
    }

    /// The strata of a mapping of `nr_pages` pages from `start_vpn`, as mapped.
    pub fn strata_of(&self, start_vpn: Vpn, nr_pages: u64) -> MappingStrata {
        if !self.by_mapping() {
            return MappingStrata::BY_ADDRESS;
        }
        let end = start_vpn + nr_pages;
        let first_region = start_vpn.div_ceil(SUBPAGES_PER_HUGE);
        let end_region = end / SUBPAGES_PER_HUGE;
        let whole = match self.strata {
            SampleStrata::Page => 0,
            _ => end_region.saturating_sub(first_region) & !self.mask,
        };
        let (body_start, body_end) = if whole == 0 {
            (end, end)
        } else {
            let b = first_region * SUBPAGES_PER_HUGE;
            (b, b + whole * SUBPAGES_PER_HUGE)
        };
        MappingStrata {
            start_vpn,
            body_start,
            body_end,
            by_address: false,
        }
    }

    /// Whether page `vpn` of a mapping with strata `m` in process `pid` is simulated,
    /// and the first page after the sampling unit that holds it (its 2 MiB region, or
    /// the page itself where the mapping is sampled page by page): every page of a
    /// unit is kept or dropped together.
    ///
    /// A page sampled in time is a kept unit of its own, and a dropped unit ends
    /// before the next one.
    #[inline]
    pub fn unit_at(&self, pid: u32, m: &MappingStrata, vpn: Vpn) -> (bool, Vpn) {
        let next_region = (vpn | (SUBPAGES_PER_HUGE - 1)) + 1;
        if self.keeps_all() {
            return (true, next_region);
        }
        // A unit is kept when it stands for itself in its stratum.
        let kept = self.representative(pid, m, vpn) == vpn;
        let by_region = m.by_address || (vpn >= m.body_start && vpn < m.body_end);
        let end = if by_region { next_region } else { vpn + 1 };
        if self.time_sampled.is_empty() || kept {
            return (kept, end);
        }
        if self.time_sampled_index(pid, vpn).is_some() {
            return (true, vpn + 1);
        }
        (
            false,
            self.next_time_sampled(pid, vpn + 1, end).unwrap_or(end),
        )
    }

    /// Call `f(from, to)` with each maximal run `[from, to)` of the pages in
    /// `[start, end)` of a mapping with strata `m` in process `pid` that are simulated,
    /// in address order: the walk the sampled machine makes over a VMA's simulated
    /// pages and a generator makes to list what it may draw, in one place.
    pub fn for_kept_runs(
        &self,
        pid: u32,
        m: &MappingStrata,
        start: Vpn,
        end: Vpn,
        mut f: impl FnMut(Vpn, Vpn),
    ) {
        if self.keeps_all() {
            if start < end {
                f(start, end);
            }
            return;
        }
        let mut vpn = start;
        let mut run: Option<Vpn> = None;
        while vpn < end {
            let (kept, unit_end) = self.unit_at(pid, m, vpn);
            match (kept, run) {
                (true, None) => run = Some(vpn),
                (false, Some(from)) => {
                    f(from, vpn);
                    run = None;
                }
                _ => {}
            }
            vpn = unit_end.min(end);
        }
        if let Some(from) = run {
            f(from, end);
        }
    }

    /// The simulated page that stands for page `vpn` of a mapping with strata `m` in
    /// process `pid`: the page at the same offset in the kept unit of `vpn`'s stratum
    /// (the kept 2 MiB region of its block of N regions, or the kept page of its group
    /// of N pages where the mapping is sampled page by page); `vpn` itself when it is
    /// kept or nothing is sampled away. A draw of a uniformly random page of a range,
    /// moved to its representative, lands on a simulated page as often as the full
    /// machine's draw lands on a page at all, and on each stratum as often as the full
    /// draw does: what a mechanism that checks one random page of a range needs
    /// (`Mechanisms::random_page`). The page may lie past the mapping's end (a partial
    /// last group) or outside the caller's range; the caller checks.
    #[inline]
    pub fn representative(&self, pid: u32, m: &MappingStrata, vpn: Vpn) -> Vpn {
        const REGION_PAGES_SHIFT: u32 = crate::HUGE_PAGE_SHIFT - crate::PAGE_SHIFT;
        let in_region = vpn & (SUBPAGES_PER_HUGE - 1);
        if self.keeps_all() {
            return vpn;
        }
        if m.by_address {
            let block = (vpn >> REGION_PAGES_SHIFT) & !self.mask;
            return ((block | self.kept_slot_of_block(pid, block)) << REGION_PAGES_SHIFT)
                | in_region;
        }
        let p = pid.wrapping_add(self.pid_offset) as u64;
        let owner = mix64(self.salt ^ m.start_vpn ^ (p << 48));
        if vpn >= m.body_start && vpn < m.body_end {
            let j = (vpn - m.body_start) >> REGION_PAGES_SHIFT;
            let block = j & !self.mask;
            let chosen = mix64(owner ^ 0x5245_4749_4f4e ^ block) & self.mask;
            return m.body_start + ((block | chosen) << REGION_PAGES_SHIFT) + in_region;
        }
        // The page-sampled part: the head before the body, then the pages after it,
        // numbered as one run.
        let head = m.body_start - m.start_vpn;
        let idx = if vpn < m.body_start {
            vpn.saturating_sub(m.start_vpn)
        } else {
            head + (vpn - m.body_end)
        };
        let group = idx & !self.mask;
        let kept = group | (mix64(owner ^ 0x5041_4745 ^ group) & self.mask);
        if kept < head {
            m.start_vpn + kept
        } else {
            m.body_end + (kept - head)
        }
    }

    /// True if page `vpn` of a mapping with strata `m` in process `pid` is simulated.
    #[inline]
    pub fn keeps_page(&self, pid: u32, m: &MappingStrata, vpn: Vpn) -> bool {
        self.unit_at(pid, m, vpn).0
    }

    /// This sampler as seen by a part of the run whose process `p` is the run's process
    /// `p + first`: a `mix` member restricts itself with it and keeps exactly the
    /// regions the run keeps for those processes.
    pub fn for_processes_from(&self, first: u32) -> RegionSampler {
        RegionSampler {
            pid_offset: self.pid_offset.wrapping_add(first),
            ..self.clone()
        }
    }

    /// True when every region is kept.
    #[inline]
    pub fn keeps_all(&self) -> bool {
        self.mask == 0
    }

    /// N: one region in every N is kept.
    #[inline]
    pub fn keeps_one_in(&self) -> u64 {
        self.mask + 1
    }

    /// True if the 2 MiB region holding `addr` in process `pid` is simulated under
    /// address strata (under mapping strata the mapping decides: see
    /// [`RegionSampler::keeps_page`] and [`StreamSampler`]).
    #[inline]
    pub fn keeps(&self, pid: u32, addr: u64) -> bool {
        self.keeps_region(pid, addr >> crate::HUGE_PAGE_SHIFT)
            || self
                .time_sampled_index(pid, addr >> crate::PAGE_SHIFT)
                .is_some()
    }

    /// True if region number `region` (an address shifted right by 21) of `pid` is
    /// simulated.
    #[inline]
    pub fn keeps_region(&self, pid: u32, region: u64) -> bool {
        region & self.mask == self.kept_slot_of_block(pid, region & !self.mask)
    }

    /// Which region of the address-strata block starting at region `block` (a multiple
    /// of N) process `pid` keeps, as an offset in the block.
    #[inline]
    fn kept_slot_of_block(&self, pid: u32, block: u64) -> u64 {
        let pid = pid.wrapping_add(self.pid_offset);
        mix64(self.salt ^ block ^ ((pid as u64) << 48)) & self.mask
    }
}

/// A [`RegionSampler`] that follows a stream's mappings (its `Op::Mmap` and
/// `Op::Munmap`), so that it can decide for an address alone what the sampler decides
/// for a page of a known mapping. The stream filter of a sampled run and a workload
/// that restricts itself at its output keep one; under [`SampleStrata::Address`] it is
/// the plain sampler.
#[derive(Debug, Clone)]
pub struct StreamSampler {
    sampler: RegionSampler,
    /// Per process: `(start_vpn, end_vpn, strata)` of each mapped range, sorted and
    /// disjoint; a range left by a partial unmap keeps its mapping's strata.
    maps: Vec<Vec<(Vpn, Vpn, MappingStrata)>>,
}

impl StreamSampler {
    /// A sampler that knows no mapping yet.
    pub fn new(sampler: RegionSampler) -> StreamSampler {
        StreamSampler {
            sampler,
            maps: Vec::new(),
        }
    }

    /// The sampler it applies.
    pub fn sampler(&self) -> &RegionSampler {
        &self.sampler
    }

    /// Follow `op` of process `pid`: a mapping or unmapping changes which strata an
    /// address falls in; an access changes nothing.
    pub fn observe(&mut self, pid: u32, op: &crate::Op) {
        if !self.sampler.by_mapping() {
            return;
        }
        let (addr, len, mapped) = match *op {
            crate::Op::Mmap { addr, len, .. } => (addr, len, true),
            crate::Op::Munmap { addr, len } => (addr, len, false),
            crate::Op::Access { .. } => return,
        };
        let p = pid as usize;
        if self.maps.len() <= p {
            self.maps.resize_with(p + 1, Vec::new);
        }
        let (s, e) = (addr >> crate::PAGE_SHIFT, (addr + len) >> crate::PAGE_SHIFT);
        let ranges = &mut self.maps[p];
        let mut kept = Vec::with_capacity(ranges.len() + 2);
        for &(a, b, m) in ranges.iter() {
            if b <= s || a >= e {
                kept.push((a, b, m));
                continue;
            }
            if a < s {
                kept.push((a, s, m));
            }
            if b > e {
                kept.push((e, b, m));
            }
        }
        if mapped {
            kept.push((s, e, self.sampler.strata_of(s, e - s)));
        }
        kept.sort_unstable_by_key(|r| r.0);
        *ranges = kept;
    }

    /// True if the access to `addr` in process `pid` is simulated. An address outside
    /// every mapping the stream declared is decided by address (the machine then
    /// reports the access as unmapped).
    #[inline]
    pub fn keeps(&self, pid: u32, addr: u64) -> bool {
        if !self.sampler.by_mapping() {
            return self.sampler.keeps(pid, addr);
        }
        let vpn = addr >> crate::PAGE_SHIFT;
        if let Some(ranges) = self.maps.get(pid as usize) {
            let i = ranges.partition_point(|r| r.1 <= vpn);
            if let Some(&(a, _, m)) = ranges.get(i) {
                if a <= vpn {
                    return self.sampler.keeps_page(pid, &m, vpn);
                }
            }
        }
        self.sampler.keeps(pid, addr)
    }
}

/// Which of one thread's accesses to the pages sampled in time a sampled stream keeps
/// ([`RegionSampler::with_time_sampled`]): of each page's accesses, in the thread's
/// order, one in N, at a phase drawn by a hash of (process, page, thread) salted by
/// the run's seed. Counting rather than drawing keeps exactly one in N (give or take
/// one per page and thread), and a stream filter and a generator that restricts
/// itself keep the same accesses of the same stream.
#[derive(Debug, Clone, Default)]
pub struct TimeThinning {
    /// Accesses seen so far to each page of [`RegionSampler::time_sampled`].
    seen: Vec<u64>,
}

impl TimeThinning {
    /// Whether thread `thread` of process `pid` keeps its next access to the page of
    /// index `index` in `sampler`'s [`RegionSampler::time_sampled`].
    #[inline]
    pub fn keeps(&mut self, sampler: &RegionSampler, pid: u32, thread: u32, index: usize) -> bool {
        if self.seen.len() <= index {
            self.seen
                .resize(sampler.time_sampled.len().max(index + 1), 0);
        }
        let n = self.seen[index];
        self.seen[index] = n + 1;
        let (p, vpn) = sampler.time_sampled[index];
        debug_assert_eq!(p, pid.wrapping_add(sampler.pid_offset));
        let phase =
            mix64(sampler.salt ^ 0x5449_4d45 ^ vpn ^ ((p as u64) << 48) ^ ((thread as u64) << 32));
        (n.wrapping_add(phase) & sampler.mask) == 0
    }
}

/// splitmix64's finaliser: a cheap, well-mixed 64-bit hash.
#[inline]
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_scale_and_never_vanish() {
        let s = SpaceScale::new(1.0 / 64.0);
        assert_eq!(s.count(1024), 16);
        assert_eq!(s.count(10), 1);
        assert_eq!(s.count(0), 0);
        assert_eq!(SpaceScale::EXACT.count(7), 7);
        assert!((s.amount(6400.0) - 100.0).abs() < 1e-9);
    }

    #[test]
    fn sampler_keeps_about_rate_of_regions_and_is_deterministic() {
        let r = RegionSampler::new(SpaceScale::new(1.0 / 64.0), 42);
        // Exactly one region of each aligned block of 64.
        let kept = (0..1u64 << 16).filter(|&g| r.keeps_region(0, g)).count();
        assert_eq!(kept, 1024);
        // Any range of R regions keeps R/64 of them, give or take one.
        for (start, len) in [(7u64, 1000u64), (12_345, 64 * 40 + 3)] {
            let k = (start..start + len)
                .filter(|&g| r.keeps_region(2, g))
                .count() as i64;
            assert!((k - (len / 64) as i64).abs() <= 1, "{k} of {len}");
        }
        // Which region of a block is kept varies from block to block.
        let slots: std::collections::BTreeSet<u64> = (0..64u64)
            .flat_map(|b| (b * 64..b * 64 + 64).filter(|&g| r.keeps_region(0, g)))
            .map(|g| g % 64)
            .collect();
        assert!(slots.len() > 30, "{}", slots.len());
        let again = RegionSampler::new(SpaceScale::new(1.0 / 64.0), 42);
        assert!((0..4096u64).all(|g| r.keeps_region(3, g) == again.keeps_region(3, g)));
        let other = RegionSampler::new(SpaceScale::new(1.0 / 64.0), 43);
        assert!((0..4096u64).any(|g| r.keeps_region(0, g) != other.keeps_region(0, g)));
        let all = RegionSampler::new(SpaceScale::EXACT, 42);
        assert!((0..4096u64).all(|g| all.keeps(1, g << 21)));
        // A region is kept or not as a whole.
        assert_eq!(r.keeps(0, 5 << 21), r.keeps(0, (5 << 21) + 4096 * 300));
    }

    #[test]
    fn pages_sampled_in_time_are_kept_whatever_their_unit_and_thinned_one_in_n() {
        for strata in [
            SampleStrata::Address,
            SampleStrata::Mapping,
            SampleStrata::Page,
        ] {
            let r = RegionSampler::new(SpaceScale::new(1.0 / 8.0), 7).with_strata(strata);
            let (start, nr) = (512 * 64, 512 * 16 + 40);
            let m = r.strata_of(start, nr);
            // A page in a dropped unit of process 1, and one of process 2.
            let dropped = (start..start + nr)
                .find(|&v| v % 512 > 100 && !r.keeps_page(1, &m, v))
                .unwrap();
            let t = r
                .clone()
                .with_time_sampled(vec![(2, dropped), (1, dropped)]);
            assert_eq!(t.time_sampled(), &[(1, dropped), (2, dropped)]);
            assert!(t.keeps_page(1, &m, dropped) && t.keeps_page(2, &m, dropped));
            assert_eq!(t.unit_at(1, &m, dropped), (true, dropped + 1));
            assert!(t.keeps(1, dropped << crate::PAGE_SHIFT));
            // A dropped unit before it ends at it at the latest; nothing else changes.
            for v in start..dropped {
                let (kept, end) = t.unit_at(1, &m, v);
                assert!(kept || end <= dropped, "{v}: {end}");
            }
            for v in start..start + nr {
                assert_eq!(t.keeps_page(0, &m, v), r.keeps_page(0, &m, v), "{v}");
                if v != dropped {
                    assert_eq!(t.keeps_page(1, &m, v), r.keeps_page(1, &m, v), "{v}");
                }
            }
            let mut runs = Vec::new();
            t.for_kept_runs(1, &m, start, start + nr, |a, b| runs.push((a, b)));
            assert!(runs.contains(&(dropped, dropped + 1)), "{runs:?}");
            assert!(t.region_holds_time_sampled(1, dropped & !511));
            assert!(t.region_holds_time_sampled(1, dropped | 511));
            assert!(!t.region_holds_time_sampled(1, (dropped & !511) + 512));
            // Only the process whose page it is: the same address of another is free.
            assert!(!t.region_holds_time_sampled(0, dropped));
            assert!(!r.region_holds_time_sampled(1, dropped));
            // Each thread keeps one access in 8 to each page, at its own phase.
            let mut phases = std::collections::BTreeSet::new();
            for thread in 0..16 {
                let mut th = TimeThinning::default();
                let kept: Vec<u64> = (0..80).filter(|_| th.keeps(&t, 1, thread, 0)).collect();
                assert_eq!(kept.len(), 10);
                assert!(kept.windows(2).all(|w| w[1] - w[0] == 8));
                phases.insert(kept[0]);
            }
            assert!(phases.len() > 4, "{phases:?}");
        }
        // An exact run samples nothing in time.
        let exact = RegionSampler::new(SpaceScale::EXACT, 7).with_time_sampled(vec![(0, 5)]);
        assert!(exact.time_sampled().is_empty());
    }

    #[test]
    fn page_strata_keep_one_page_in_n_of_every_mapping_and_no_huge_page() {
        let r = RegionSampler::new(SpaceScale::new(1.0 / 16.0), 9).with_strata(SampleStrata::Page);
        assert!(r.by_mapping());
        for (start, nr) in [(512 * 32, 512 * 64), (512 * 32 + 7, 1000), (3, 15)] {
            let m = r.strata_of(start, nr);
            let kept = (start..start + nr)
                .filter(|&v| r.keeps_page(0, &m, v))
                .count() as i64;
            assert!((kept - (nr / 16) as i64).abs() <= 1, "{kept} of {nr}");
            // Every page is its own unit, so no 2 MiB range may hold a huge page.
            assert!((start..start + nr).all(|v| r.unit_at(0, &m, v).1 == v + 1));
            assert!(!m.huge_allowed(start & !511) && !m.huge_allowed((start & !511) + 512));
        }
    }

    /// Pages of `[start, start + nr)` a sampler by mapping keeps in process `pid`.
    fn kept_pages(r: &RegionSampler, pid: u32, start: Vpn, nr: u64) -> Vec<Vpn> {
        let m = r.strata_of(start, nr);
        (start..start + nr)
            .filter(|&v| r.keeps_page(pid, &m, v))
            .collect()
    }

    #[test]
    fn kept_runs_are_the_kept_pages_in_maximal_runs() {
        let by_address = RegionSampler::new(SpaceScale::new(1.0 / 4.0), 3);
        let by_mapping = by_address.clone().with_strata(SampleStrata::Mapping);
        let exact = RegionSampler::new(SpaceScale::EXACT, 3);
        // A mapping with an unaligned head and a page-sampled tail, walked from an
        // unaligned page.
        let (map_start, map_pages) = (512 * 40 + 100, 512 * 9 + 37);
        for r in [&by_address, &by_mapping, &exact] {
            let m = r.strata_of(map_start, map_pages);
            let (start, end) = (map_start + 5, map_start + map_pages);
            let mut runs = Vec::new();
            r.for_kept_runs(1, &m, start, end, |a, b| runs.push((a, b)));
            let listed: Vec<Vpn> = runs.iter().flat_map(|&(a, b)| a..b).collect();
            let kept: Vec<Vpn> = (start..end).filter(|&v| r.unit_at(1, &m, v).0).collect();
            assert_eq!(listed, kept);
            // Maximal: no two runs touch, none is empty.
            assert!(runs.iter().all(|&(a, b)| a < b));
            assert!(runs.windows(2).all(|w| w[0].1 < w[1].0));
        }
    }

    #[test]
    fn strata_by_mapping_keep_one_page_in_n_of_every_mapping() {
        let r =
            RegionSampler::new(SpaceScale::new(1.0 / 16.0), 7).with_strata(SampleStrata::Mapping);
        assert!(r.by_mapping());
        // (start, pages): a few pages, one unaligned region, under a stratum, exactly
        // a stratum aligned, a stratum and a half unaligned, many strata.
        for (start, nr) in [
            (100u64, 40u64),
            (512 * 3 + 17, 512),
            (512 * 64, 512 * 15),
            (512 * 1024, 512 * 16),
            (512 * 2048 + 300, 512 * 24 + 5),
            (512 * 4096, 512 * 160),
        ] {
            let kept = kept_pages(&r, 0, start, nr).len() as f64;
            assert!(
                (kept - nr as f64 / 16.0).abs() <= 1.0,
                "{kept} pages kept of {nr} from {start}"
            );
        }
        // Under a stratum every kept unit is a base page: no huge page, and the kept
        // pages are spread over the mapping rather than in one region.
        let m = r.strata_of(512 * 64, 512 * 15);
        assert!((0..15).all(|k| !m.huge_allowed(512 * (64 + k))));
        let kept = kept_pages(&r, 0, 512 * 64, 512 * 15);
        let regions: std::collections::BTreeSet<u64> = kept.iter().map(|v| v / 512).collect();
        assert_eq!(regions.len(), 15);
        // An aligned stratum keeps one whole region and may hold huge pages.
        let m = r.strata_of(512 * 1024, 512 * 16);
        assert!((0..16).all(|k| m.huge_allowed(512 * (1024 + k))));
        let kept = kept_pages(&r, 0, 512 * 1024, 512 * 16);
        assert_eq!(kept.len(), 512);
        assert_eq!(kept[0] % 512, 0);
        assert_eq!(kept[511], kept[0] + 511);
        // Unaligned: the head before the first aligned region and the remainder after
        // the whole strata are page-sampled, the strata region-sampled.
        let m = r.strata_of(512 * 2048 + 300, 512 * 24 + 5);
        assert!(!m.huge_allowed(512 * 2048));
        assert!(m.huge_allowed(512 * 2049));
        assert!(m.huge_allowed(512 * 2064));
        assert!(!m.huge_allowed(512 * 2065));
        // Every page of a unit is decided alike, and the unit ends where it says.
        for v in 512 * 2048 + 300..512 * 2073 {
            let (k, end) = r.unit_at(3, &m, v);
            assert!(end > v);
            assert!((v..end.min(512 * 2073)).all(|u| r.keeps_page(3, &m, u) == k));
        }
    }

    #[test]
    fn every_page_stands_for_a_kept_page_of_its_stratum() {
        let by_mapping =
            RegionSampler::new(SpaceScale::new(1.0 / 16.0), 7).with_strata(SampleStrata::Mapping);
        let by_address = RegionSampler::new(SpaceScale::new(1.0 / 16.0), 7);
        // A mapping with a page-sampled head, a region-sampled body and a tail.
        let (start, nr) = (512 * 2048 + 300, 512 * 40 + 5);
        for r in [by_mapping, by_address] {
            let m = r.strata_of(start, nr);
            let mut hits = std::collections::BTreeMap::new();
            for v in start..start + nr {
                let rep = r.representative(3, &m, v);
                // Kept (unless a partial last group's kept page lies past the end),
                // and a kept page stands for itself.
                assert!(
                    rep >= start + nr || r.keeps_page(3, &m, rep),
                    "{v} -> {rep}"
                );
                assert_eq!(r.representative(3, &m, rep), rep);
                if r.keeps_page(3, &m, v) {
                    assert_eq!(rep, v);
                }
                *hits.entry(rep).or_insert(0u64) += 1;
            }
            // Every kept page stands for about N pages of the range, not a few for all.
            let kept: Vec<Vpn> = (start..start + nr)
                .filter(|&v| r.keeps_page(3, &m, v))
                .collect();
            assert!(kept.iter().all(|v| (1..=32).contains(&hits[v])), "{hits:?}");
            let inside: u64 = kept.iter().map(|v| hits[v]).sum();
            assert!(inside as f64 > 0.9 * nr as f64, "{inside} of {nr}");
        }
        let exact = RegionSampler::new(SpaceScale::EXACT, 7);
        let m = exact.strata_of(start, nr);
        assert!((start..start + nr).all(|v| exact.representative(3, &m, v) == v));
    }

    #[test]
    fn strata_by_mapping_are_salted_per_process_and_mapping() {
        let r =
            RegionSampler::new(SpaceScale::new(1.0 / 16.0), 7).with_strata(SampleStrata::Mapping);
        let a = kept_pages(&r, 0, 1000, 4096);
        assert_eq!(a, kept_pages(&r, 0, 1000, 4096), "deterministic");
        assert_ne!(a, kept_pages(&r, 1, 1000, 4096), "another process");
        let shifted: Vec<Vpn> = kept_pages(&r, 0, 1001, 4096)
            .iter()
            .map(|v| v - 1)
            .collect();
        assert_ne!(a, shifted, "another mapping");
        let other =
            RegionSampler::new(SpaceScale::new(1.0 / 16.0), 8).with_strata(SampleStrata::Mapping);
        assert_ne!(a, kept_pages(&other, 0, 1000, 4096), "another seed");
        // Exact, or by address: the mapping does not matter.
        let exact = RegionSampler::new(SpaceScale::EXACT, 7).with_strata(SampleStrata::Mapping);
        assert!(!exact.by_mapping());
        assert_eq!(kept_pages(&exact, 0, 1000, 4096).len(), 4096);
        let by_address = RegionSampler::new(SpaceScale::new(1.0 / 16.0), 7);
        let m = by_address.strata_of(1000, 4096);
        assert_eq!(m, MappingStrata::BY_ADDRESS);
        assert!(
            (1000..5096).all(|v| by_address.keeps_page(2, &m, v) == by_address.keeps(2, v << 12))
        );
    }

    #[test]
    fn a_stream_sampler_follows_mappings_through_partial_unmaps() {
        use crate::{Op, VmaKind};
        let r =
            RegionSampler::new(SpaceScale::new(1.0 / 8.0), 5).with_strata(SampleStrata::Mapping);
        let (addr, len) = (0x4000_0000u64 + 3 * 4096, 300 * 4096u64);
        let mut s = StreamSampler::new(r.clone());
        s.observe(
            1,
            &Op::Mmap {
                addr,
                len,
                kind: VmaKind::Anon,
            },
        );
        let m = r.strata_of(addr >> 12, len >> 12);
        let decided = |s: &StreamSampler| -> Vec<bool> {
            (0..300).map(|i| s.keeps(1, addr + i * 4096 + 64)).collect()
        };
        let before = decided(&s);
        assert_eq!(
            before,
            (0..300)
                .map(|i| r.keeps_page(1, &m, (addr >> 12) + i))
                .collect::<Vec<_>>()
        );
        assert!(before.iter().filter(|&&k| k).count() >= 37);
        // Unmapping the middle leaves the rest decided as before.
        s.observe(
            1,
            &Op::Munmap {
                addr: addr + 100 * 4096,
                len: 50 * 4096,
            },
        );
        let after = decided(&s);
        for i in (0..100).chain(150..300) {
            assert_eq!(after[i], before[i], "page {i}");
        }
        // Mapping it again makes a new mapping with its own strata.
        s.observe(
            1,
            &Op::Mmap {
                addr: addr + 100 * 4096,
                len: 50 * 4096,
                kind: VmaKind::Anon,
            },
        );
        let m2 = r.strata_of((addr >> 12) + 100, 50);
        for i in 100..150u64 {
            assert_eq!(
                s.keeps(1, addr + i * 4096),
                r.keeps_page(1, &m2, (addr >> 12) + i)
            );
        }
    }

    #[test]
    fn out_of_range_rates_are_clamped() {
        assert_eq!(SpaceScale::new(2.0).rate(), 1.0);
        assert_eq!(SpaceScale::new(f64::NAN).rate(), 1.0);
        assert!(SpaceScale::new(0.0).rate() > 0.0);
    }
}
