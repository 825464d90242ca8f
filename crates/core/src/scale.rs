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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionSampler {
    salt: u64,
    /// `N - 1` where N = 1/rate is a power of two; 0 keeps every region.
    mask: u64,
    /// Added to a process id before hashing (see [`RegionSampler::for_processes_from`]).
    pid_offset: u32,
}

impl RegionSampler {
    /// A sampler keeping `scale.rate()` of the regions, salted from `seed`. The rate is
    /// rounded to the nearest `1/N` with N a power of two (the simulator accepts only
    /// such rates).
    pub fn new(scale: SpaceScale, seed: u64) -> RegionSampler {
        let n = (1.0 / scale.rate()).round().max(1.0) as u64;
        RegionSampler {
            salt: mix64(seed ^ 0x5348_4152_4453_2d74), // "SHARDS-t"
            mask: n.next_power_of_two() - 1,
            pid_offset: 0,
        }
    }

    /// This sampler as seen by a part of the run whose process `p` is the run's process
    /// `p + first`: a `mix` member restricts itself with it and keeps exactly the
    /// regions the run keeps for those processes.
    pub fn for_processes_from(&self, first: u32) -> RegionSampler {
        RegionSampler {
            pid_offset: self.pid_offset.wrapping_add(first),
            ..*self
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

    /// True if the 2 MiB region holding `addr` in process `pid` is simulated.
    #[inline]
    pub fn keeps(&self, pid: u32, addr: u64) -> bool {
        self.keeps_region(pid, addr >> crate::HUGE_PAGE_SHIFT)
    }

    /// True if region number `region` (an address shifted right by 21) of `pid` is
    /// simulated.
    #[inline]
    pub fn keeps_region(&self, pid: u32, region: u64) -> bool {
        let block = region & !self.mask;
        let pid = pid.wrapping_add(self.pid_offset);
        let chosen = mix64(self.salt ^ block ^ ((pid as u64) << 48)) & self.mask;
        region & self.mask == chosen
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
    fn out_of_range_rates_are_clamped() {
        assert_eq!(SpaceScale::new(2.0).rate(), 1.0);
        assert_eq!(SpaceScale::new(f64::NAN).rate(), 1.0);
        assert!(SpaceScale::new(0.0).rate() > 0.0);
    }
}
