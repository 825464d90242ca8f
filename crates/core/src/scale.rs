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
    fn out_of_range_rates_are_clamped() {
        assert_eq!(SpaceScale::new(2.0).rate(), 1.0);
        assert_eq!(SpaceScale::new(f64::NAN).rate(), 1.0);
        assert!(SpaceScale::new(0.0).rate() > 0.0);
    }
}
