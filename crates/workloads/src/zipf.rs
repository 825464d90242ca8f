//! Fast zipfian samplers: YCSB's `ZipfianGenerator` and `ScrambledZipfianGenerator`.
//!
//! [`Zipfian`] implements the rejection-free algorithm of Gray et al., "Quickly
//! Generating Billion-Record Synthetic Databases" (SIGMOD '94), exactly as YCSB does:
//! after precomputing `zeta(n, theta)` once, each sample costs one uniform draw and at
//! most one `powf`, so it is O(1) whatever `n` is. Rank `r` (0-based, rank 0 the most
//! popular) is drawn with probability close to `1 / ((r + 1)^theta * zeta(n, theta))`.
//! Ranks 0 and 1 are exact; the rest come from a continuous approximation that is
//! within a few percent for small ranks and converges as ranks grow — good enough
//! for a workload, and what every YCSB number in the literature was produced with.
//!
//! [`ScrambledZipfian`] is YCSB's default request distribution: a zipfian rank is
//! hashed with 64-bit FNV-1a and reduced modulo `n`, so the hottest keys are spread
//! all over the key space instead of being packed at its start. That matters for a
//! tiering study: unscrambled, the hot keys would sit in the first pages of the
//! record array, exactly where first-touch placement put the start of the load, and
//! every policy would look good. Like YCSB's, the hash is not a bijection on
//! `[0, n)`: a few ranks collide on one key and some keys are never requested,
//! which slightly reshapes the tail but leaves the hot head intact. (YCSB draws the
//! rank over a fixed 10-billion-item space before hashing; here the rank is drawn
//! over `n` itself, so before hashing the skew is exactly Zipf(theta) over `n`.)

use rand::RngCore;

/// Ranks up to which [`zeta`] sums exactly; beyond, the tail is integrated with the
/// Euler–Maclaurin formula (error far below f64 precision at this cut-off), so that
/// building a sampler over billions of keys stays instant.
const ZETA_EXACT_TERMS: u64 = 1 << 20;

/// `zeta(n, theta) = sum_{i=1..=n} 1 / i^theta`, the normalising constant of Zipf.
pub fn zeta(n: u64, theta: f64) -> f64 {
    zeta_with_cutoff(n, theta, ZETA_EXACT_TERMS)
}

/// [`zeta`] with an explicit exact/asymptotic cut-off (tests compare both paths).
fn zeta_with_cutoff(n: u64, theta: f64, cutoff: u64) -> f64 {
    let exact_n = n.min(cutoff);
    // Summing smallest terms first keeps the rounding error of the long sum low.
    let mut sum = 0.0f64;
    for i in (1..=exact_n).rev() {
        sum += (i as f64).powf(-theta);
    }
    if n > exact_n {
        // sum_{i=m..=n} f(i) ≈ ∫_m^n f + (f(m) + f(n))/2 + (f'(n) - f'(m))/12,
        // with m = exact_n + 1 and f(x) = x^-theta. The next Euler–Maclaurin term
        // is O(m^(-theta-3)), i.e. ~1e-18 at m = 2^20.
        let m = (exact_n + 1) as f64;
        let nf = n as f64;
        let f = |x: f64| x.powf(-theta);
        let df = |x: f64| -theta * x.powf(-theta - 1.0);
        let integral = if (theta - 1.0).abs() < 1e-12 {
            (nf / m).ln()
        } else {
            (nf.powf(1.0 - theta) - m.powf(1.0 - theta)) / (1.0 - theta)
        };
        sum += integral + (f(m) + f(nf)) / 2.0 + (df(nf) - df(m)) / 12.0;
    }
    sum
}

/// 64-bit FNV-1a over the 8 little-endian bytes of `x`, as YCSB's `fnvhash64`.
#[inline]
pub fn fnv1a64(x: u64) -> u64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = OFFSET_BASIS;
    let mut v = x;
    for _ in 0..8 {
        h ^= v & 0xff;
        h = h.wrapping_mul(PRIME);
        v >>= 8;
    }
    h
}

/// A uniform f64 in `[0, 1)` from the top 53 bits of one 64-bit draw.
#[inline]
fn unit_f64<R: RngCore + ?Sized>(rng: &mut R) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// YCSB's zipfian rank sampler over `[0, n)` (see the module docs).
#[derive(Debug, Clone)]
pub struct Zipfian {
    n: u64,
    theta: f64,
    zeta_n: f64,
    alpha: f64,
    eta: f64,
    /// `1 + 0.5^theta`: below it (in `u * zeta_n` units) the rank is 1.
    rank1_limit: f64,
}

impl Zipfian {
    /// A sampler of ranks in `[0, n)` with skew `theta`.
    ///
    /// # Panics
    /// If `n == 0` or `theta` is not in the open interval `(0, 1)` (the algorithm
    /// divides by `1 - theta`; YCSB has the same restriction).
    pub fn new(n: u64, theta: f64) -> Self {
        assert!(n > 0, "zipfian over an empty range");
        assert!(
            theta > 0.0 && theta < 1.0,
            "zipfian theta must be in (0, 1), got {theta}"
        );
        let zeta_n = zeta(n, theta);
        let zeta_2 = zeta(2, theta);
        let alpha = 1.0 / (1.0 - theta);
        // For n == 1 or 2 the approximate branch is never reached (rank1_limit covers
        // all of [0, zeta_n)); guard the division anyway.
        let eta = if n > 2 {
            (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta_2 / zeta_n)
        } else {
            1.0
        };
        Zipfian {
            n,
            theta,
            zeta_n,
            alpha,
            eta,
            rank1_limit: 1.0 + 0.5f64.powf(theta),
        }
    }

    /// The number of ranks.
    pub fn n(&self) -> u64 {
        self.n
    }

    /// The skew parameter.
    pub fn theta(&self) -> f64 {
        self.theta
    }

    /// The precomputed `zeta(n, theta)`.
    pub fn zeta_n(&self) -> f64 {
        self.zeta_n
    }

    /// The exact Zipf probability of `rank` (what the sampler approximates).
    pub fn probability(&self, rank: u64) -> f64 {
        ((rank + 1) as f64).powf(-self.theta) / self.zeta_n
    }

    /// Extend the range to `[0, n)`, `n` at least the current size, as YCSB's
    /// `ZipfianGenerator` does when its item count grows (the `latest` distribution
    /// of YCSB-D draws over the keys inserted so far): `zeta(n)` is extended term by
    /// term and `eta` recomputed, so growing by one costs two `powf`.
    ///
    /// # Panics
    /// If `n` is smaller than the current size.
    pub fn grow(&mut self, n: u64) {
        assert!(n >= self.n, "a zipfian range can only grow");
        for i in self.n + 1..=n {
            self.zeta_n += (i as f64).powf(-self.theta);
        }
        self.n = n;
        if n > 2 {
            // `rank1_limit` is zeta(2, theta) = 1 + 0.5^theta.
            self.eta = (1.0 - (2.0 / n as f64).powf(1.0 - self.theta))
                / (1.0 - self.rank1_limit / self.zeta_n);
        }
    }

    /// The interval `[lo, hi)` of the uniform draw `u` that [`Zipfian::sample`] maps
    /// to `rank`: its length is the probability the sampler (not exact Zipf) gives
    /// `rank`. Sampled simulation draws from these intervals to generate only the
    /// ranks it keeps, with the sampler's own law.
    pub fn rank_interval(&self, rank: u64) -> (f64, f64) {
        let n = self.n;
        if n == 1 {
            return (0.0, 1.0);
        }
        let z = self.zeta_n;
        let rank2_start = (self.rank1_limit / z).min(1.0);
        match rank {
            0 => (0.0, (1.0 / z).min(1.0)),
            1 => ((1.0 / z).min(1.0), if n == 2 { 1.0 } else { rank2_start }),
            r => {
                // sample() returns >= r iff n·(eta·u − eta + 1)^alpha >= r, i.e.
                // u >= ((r/n)^(1−theta) − 1 + eta) / eta.
                let at_least = |r: u64| {
                    (((r as f64 / n as f64).powf(1.0 - self.theta) - 1.0 + self.eta) / self.eta)
                        .clamp(rank2_start, 1.0)
                };
                let hi = if r + 1 >= n { 1.0 } else { at_least(r + 1) };
                (at_least(r).min(hi), hi)
            }
        }
    }

    /// Draw a rank in `[0, n)`; rank 0 is the most popular.
    #[inline]
    pub fn sample<R: RngCore + ?Sized>(&self, rng: &mut R) -> u64 {
        let u = unit_f64(rng);
        let uz = u * self.zeta_n;
        if uz < 1.0 {
            return 0;
        }
        if uz < self.rank1_limit {
            return 1.min(self.n - 1);
        }
        let r = (self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        // Rounding at u → 1 can give n; clamp as YCSB's callers effectively do.
        r.min(self.n - 1)
    }
}

/// YCSB's scrambled zipfian: a [`Zipfian`] rank hashed with [`fnv1a64`] modulo `n`,
/// so popular keys are scattered over the key space (see the module docs).
#[derive(Debug, Clone)]
pub struct ScrambledZipfian {
    inner: Zipfian,
}

impl ScrambledZipfian {
    /// A scrambled sampler of keys in `[0, n)` with skew `theta`.
    ///
    /// # Panics
    /// As [`Zipfian::new`].
    pub fn new(n: u64, theta: f64) -> Self {
        ScrambledZipfian {
            inner: Zipfian::new(n, theta),
        }
    }

    /// The key that rank `rank` is scrambled to.
    #[inline]
    pub fn key_of_rank(&self, rank: u64) -> u64 {
        fnv1a64(rank) % self.inner.n
    }

    /// The underlying rank sampler.
    pub fn ranks(&self) -> &Zipfian {
        &self.inner
    }

    /// Draw a key in `[0, n)`.
    #[inline]
    pub fn sample<R: RngCore + ?Sized>(&self, rng: &mut R) -> u64 {
        self.key_of_rank(self.inner.sample(rng))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn rng(seed: u64) -> Xoshiro256PlusPlus {
        Xoshiro256PlusPlus::seed_from_u64(seed)
    }

    #[test]
    fn rank_intervals_tile_the_unit_interval_and_give_the_samplers_law() {
        for (n, theta) in [(1u64, 0.5), (2, 0.9), (3, 0.99), (1000, 0.99), (50, 0.3)] {
            let z = Zipfian::new(n, theta);
            let mut end = 0.0;
            for r in 0..n {
                let (lo, hi) = z.rank_interval(r);
                assert!((lo - end).abs() < 1e-12 && hi >= lo, "n {n} rank {r}");
                end = hi;
            }
            assert!((end - 1.0).abs() < 1e-12);
        }
        // Empirical frequencies of the sampler match the intervals' lengths.
        let z = Zipfian::new(100, 0.99);
        let mut r = rng(5);
        let draws = 1_000_000;
        let mut counts = vec![0u64; 100];
        for _ in 0..draws {
            counts[z.sample(&mut r) as usize] += 1;
        }
        for (rank, &c) in counts.iter().enumerate() {
            let (lo, hi) = z.rank_interval(rank as u64);
            let p = hi - lo;
            let sd = (p * (1.0 - p) / draws as f64).sqrt();
            let f = c as f64 / draws as f64;
            assert!((f - p).abs() < 5.0 * sd + 1e-6, "rank {rank}: {f} vs {p}");
        }
    }

    #[test]
    fn zeta_matches_direct_sum() {
        let direct: f64 = (1..=1000u64).map(|i| 1.0 / (i as f64).powf(0.99)).sum();
        assert!((zeta(1000, 0.99) - direct).abs() < 1e-9);
        assert!((zeta(2, 0.5) - (1.0 + 0.5f64.sqrt())).abs() < 1e-12);
    }

    #[test]
    fn zeta_asymptotic_tail_matches_exact_sum() {
        for theta in [0.5, 0.9, 0.99] {
            let exact = zeta_with_cutoff(200_000, theta, u64::MAX);
            let approx = zeta_with_cutoff(200_000, theta, 1000);
            assert!(
                ((exact - approx) / exact).abs() < 1e-10,
                "theta {theta}: exact {exact} vs tail-integrated {approx}"
            );
        }
    }

    #[test]
    fn fnv1a64_reference_values() {
        // FNV-1a 64 of eight zero bytes, and the empty-input basis, from the reference
        // definition (computed byte by byte).
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for _ in 0..8 {
            h = h.wrapping_mul(0x100_0000_01b3);
        }
        assert_eq!(fnv1a64(0), h);
        assert_ne!(fnv1a64(1), fnv1a64(256));
    }

    #[test]
    fn rank0_probability_is_one_over_zeta() {
        let z = Zipfian::new(1000, 0.99);
        let mut r = rng(1);
        let draws = 2_000_000u64;
        let zeros = (0..draws).filter(|_| z.sample(&mut r) == 0).count() as f64;
        let expected = 1.0 / zeta(1000, 0.99);
        let measured = zeros / draws as f64;
        assert!(
            (measured / expected - 1.0).abs() < 0.02,
            "rank-0 frequency {measured}, expected {expected}"
        );
    }

    #[test]
    fn rank1_vs_rank10_frequency_matches_zipf_ratio() {
        let theta = 0.99;
        let z = Zipfian::new(1000, theta);
        let mut r = rng(2);
        let mut counts = vec![0u64; 1000];
        for _ in 0..4_000_000 {
            counts[z.sample(&mut r) as usize] += 1;
        }
        let measured = counts[1] as f64 / counts[10] as f64;
        let expected = z.probability(1) / z.probability(10); // (11/2)^theta
        assert!(
            (measured / expected - 1.0).abs() < 0.05,
            "rank1/rank10 = {measured}, Zipf ratio {expected}"
        );
        // Monotone in rank on the head (a sampler returning uniform ranks fails this).
        assert!(counts[0] > counts[1] && counts[1] > counts[10] && counts[10] > counts[500]);
    }

    #[test]
    fn samples_stay_in_range_for_tiny_n() {
        let mut r = rng(3);
        for n in 1..=4u64 {
            let z = Zipfian::new(n, 0.99);
            let s = ScrambledZipfian::new(n, 0.99);
            for _ in 0..10_000 {
                assert!(z.sample(&mut r) < n);
                assert!(s.sample(&mut r) < n);
            }
        }
    }

    #[test]
    fn scrambling_spreads_hot_keys() {
        let n = 1_000_000;
        let s = ScrambledZipfian::new(n, 0.99);
        // The ten hottest ranks land on ten distinct keys spread over the key space,
        // not packed at its start.
        let mut keys: Vec<u64> = (0..10).map(|r| s.key_of_rank(r)).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), 10);
        assert!(keys.iter().filter(|&&k| k >= n / 2).count() >= 2);
        assert!(keys.iter().filter(|&&k| k < n / 2).count() >= 2);
        // And the distribution stays skewed: the hottest key gets rank 0's share.
        let mut r = rng(4);
        let draws = 1_000_000;
        let hot = s.key_of_rank(0);
        let hits = (0..draws).filter(|_| s.sample(&mut r) == hot).count() as f64;
        let expected = s.ranks().probability(0);
        assert!((hits / draws as f64 / expected - 1.0).abs() < 0.05);
    }

    #[test]
    fn grown_sampler_equals_one_built_at_the_final_size() {
        let mut g = Zipfian::new(1000, 0.99);
        for n in [1001, 1500, 1500, 4000] {
            g.grow(n);
        }
        let b = Zipfian::new(4000, 0.99);
        assert_eq!(g.n(), 4000);
        assert!((g.zeta_n() / b.zeta_n() - 1.0).abs() < 1e-12);
        let (mut r1, mut r2) = (rng(5), rng(5));
        for _ in 0..10_000 {
            assert_eq!(g.sample(&mut r1), b.sample(&mut r2));
        }
    }

    #[test]
    #[should_panic(expected = "theta")]
    fn theta_one_is_rejected() {
        let _ = Zipfian::new(10, 1.0);
    }
}
