//! Restricted generation for sampled simulation ([`Workload::restrict_to`]).
//!
//! A sampled run simulates only the 2 MiB regions a [`RegionSampler`] keeps. A
//! generator that can draw its accesses from the kept regions directly saves the
//! machine from generating, then dropping, `1 - rate` of them — at 1/256 that is
//! the difference between 25 G and 100 M random draws. The helpers here turn "draw an
//! element uniformly, keep it if its region is kept" into "skip the dropped draws,
//! then draw a kept element", with the same law:
//!
//! - [`KeptElements`] lists the kept elements of a mapping (as runs of consecutive
//!   element indices) and draws the `k`-th kept element of a sub-range;
//! - [`skip_to_kept`] draws how many independent trials, each kept with probability
//!   `q`, it takes to reach the next kept one (geometric), so a generator that makes
//!   `n` independent draws can jump from one kept draw to the next.
//!
//! [`Workload::restrict_to`]: tierkit_core::Workload::restrict_to

use rand::RngCore;
use tierkit_core::{ComputeCarry, Op, RegionSampler, HUGE_PAGE_SIZE, PAGE_SIZE};

use crate::layout::Mapping;
use crate::BATCH_OPS;

/// The elements of one mapping whose 2 MiB region a sampler keeps, as sorted runs of
/// element indices (element `i` is the `element_bytes` bytes at `addr + i ·
/// element_bytes`; an element never straddles a region because `element_bytes`
/// divides 2 MiB).
#[derive(Debug, Clone)]
pub struct KeptElements {
    /// `(first, end)` element indices of each kept run, in address order.
    runs: Vec<(u64, u64)>,
    /// `prefix[j]`: kept elements in runs before run `j`; one more entry than `runs`.
    prefix: Vec<u64>,
    /// `bucket_run[b]`: the run holding kept element `b << bucket_shift`, so that
    /// [`nth`](Self::nth) finds a run with a load and a short forward step instead of
    /// a binary search (a dependent load per step: 25% of a sampled GUPS run's
    /// profile, 6% of its time once replaced). A bucket is one region's worth of
    /// elements. A mapping starts on a region, so where whole regions are kept every
    /// run but the last spans whole
    /// regions and a bucket lies in one run; only the page-sampled tail of a mapping
    /// sampled by mapping has runs of one page, a bucket then meeting up to
    /// 512 / N of them.
    bucket_run: Vec<u32>,
    /// log2 of the elements in a bucket.
    bucket_shift: u32,
}

impl KeptElements {
    /// The kept elements of `mapping` in process `pid`, in units of `element_bytes`
    /// (a power of two at most 2 MiB, at most a page under strata by mapping, whose
    /// units can be single pages).
    pub fn new(
        sampler: &RegionSampler,
        pid: u32,
        mapping: Mapping,
        element_bytes: u64,
    ) -> KeptElements {
        let unit_max = if sampler.by_mapping() {
            PAGE_SIZE
        } else {
            HUGE_PAGE_SIZE
        };
        assert!(
            element_bytes.is_power_of_two() && element_bytes <= unit_max,
            "element size {element_bytes} must be a power of two up to {unit_max} bytes"
        );
        assert!(
            mapping.addr.is_multiple_of(HUGE_PAGE_SIZE),
            "a mapping starts on a 2 MiB region"
        );
        let nr_elements = mapping.len / element_bytes;
        let mut runs: Vec<(u64, u64)> = Vec::new();
        // Add the kept bytes [lo, hi) of the mapping.
        let mut keep = |lo: u64, hi: u64| {
            let (a, b) = (
                (lo - mapping.addr) / element_bytes,
                ((hi - mapping.addr) / element_bytes).min(nr_elements),
            );
            if a >= b {
                return;
            }
            match runs.last_mut() {
                Some(last) if last.1 == a => last.1 = b,
                _ => runs.push((a, b)),
            }
        };
        // The mapping's own strata decide, unit by unit: its 2 MiB regions, or under
        // strata by mapping the pages of a page-sampled head or tail.
        let (start, end) = (mapping.addr / PAGE_SIZE, mapping.end() / PAGE_SIZE);
        let strata = sampler.strata_of(start, end - start);
        sampler.for_kept_runs(pid, &strata, start, end, |from, to| {
            keep(from * PAGE_SIZE, to * PAGE_SIZE)
        });
        let mut prefix = Vec::with_capacity(runs.len() + 1);
        let mut total = 0;
        prefix.push(0);
        for &(a, b) in &runs {
            total += b - a;
            prefix.push(total);
        }
        let bucket_shift = (HUGE_PAGE_SIZE / element_bytes).trailing_zeros();
        let buckets = total.div_ceil(1 << bucket_shift);
        let bucket_run = (0..buckets)
            .map(|b| (prefix.partition_point(|&p| p <= b << bucket_shift) - 1) as u32)
            .collect();
        KeptElements {
            runs,
            prefix,
            bucket_run,
            bucket_shift,
        }
    }

    /// Kept elements with index below `i`.
    pub fn rank(&self, i: u64) -> u64 {
        // First run that starts at or after `i`: everything before it is below `i`,
        // except the part of the previous run at or beyond `i`.
        let j = self.runs.partition_point(|&(a, _)| a < i);
        if j == 0 {
            return 0;
        }
        let (a, b) = self.runs[j - 1];
        self.prefix[j - 1] + (b.min(i) - a)
    }

    /// Kept elements with index in `[lo, hi)`.
    pub fn count_in(&self, lo: u64, hi: u64) -> u64 {
        self.rank(hi.max(lo)) - self.rank(lo)
    }

    /// The index of the `target`-th kept element of the mapping (0-based).
    ///
    /// # Panics
    /// If the mapping has at most `target` kept elements.
    #[inline]
    pub fn nth(&self, target: u64) -> u64 {
        let mut j = self.bucket_run[(target >> self.bucket_shift) as usize] as usize;
        while self.prefix[j + 1] <= target {
            j += 1;
        }
        self.runs[j].0 + (target - self.prefix[j])
    }

    /// How many elements are kept.
    pub fn len(&self) -> u64 {
        *self.prefix.last().expect("prefix has a first entry")
    }

    /// True when no element is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The kept runs `(first, end)`, in index order.
    pub fn runs(&self) -> &[(u64, u64)] {
        &self.runs
    }
}

/// The restricted form of a first-touch init loop: from page `*next` up to `end` of
/// the 2 MiB aligned mapping at `base`, append one write (no gap) per page whose region
/// `sampler` keeps for `pid`, until `out` holds [`BATCH_OPS`] ops; `*next` advances
/// past every page written or skipped.
pub fn push_kept_page_writes(
    sampler: &RegionSampler,
    pid: u32,
    base: u64,
    next: &mut u64,
    end: u64,
    out: &mut Vec<Op>,
) {
    let pages_per_region = HUGE_PAGE_SIZE / PAGE_SIZE;
    while *next < end && out.len() < BATCH_OPS {
        let addr = base + *next * PAGE_SIZE;
        if sampler.keeps(pid, addr) {
            out.push(Op::Access {
                addr,
                write: true,
                gap_ns: 0,
            });
            *next += 1;
        } else {
            *next = ((*next / pages_per_region + 1) * pages_per_region).min(end);
        }
    }
}

/// The gap of a restricted stream's kept operation that comes after `dropped`
/// operations the sample dropped, each of them (and itself) `gap_ns` of compute: its
/// own gap, plus, when the sampler carries compute
/// ([`tierkit_core::SampledCompute::Carried`]), the dropped ones', through the
/// thread's `carry`.
#[inline]
pub fn gap_after(carry: &mut ComputeCarry, carried: bool, dropped: u64, gap_ns: u32) -> u32 {
    if !carried {
        return gap_ns;
    }
    carry.drop_ns(dropped.saturating_mul(gap_ns as u64));
    carry.keep(gap_ns)
}

/// Walker's alias method (Vose's construction): draws an index in `[0, n)` with
/// given weights in O(1) — one uniform index and one comparison — where a binary
/// search over running sums would take a cache miss per level on tables of millions
/// of kept pages or ranks.
#[derive(Debug, Clone)]
pub struct AliasTable {
    /// Probability, scaled so the mean is 1, of keeping the drawn column itself.
    keep: Vec<f64>,
    /// The column's alias, drawn otherwise.
    alias: Vec<u32>,
    total: f64,
}

impl AliasTable {
    /// A table over `weights` (non-negative), or `None` when there is nothing to
    /// draw: no weights, or a total of zero.
    ///
    /// # Panics
    /// If there are `u32::MAX` weights or more.
    pub fn new(weights: &[f64]) -> Option<AliasTable> {
        let n = weights.len();
        assert!(n <= u32::MAX as usize, "alias table of {n} weights");
        let total: f64 = weights.iter().sum();
        if n == 0 || total <= 0.0 {
            return None;
        }
        let mut keep: Vec<f64> = weights.iter().map(|w| w * n as f64 / total).collect();
        let mut alias: Vec<u32> = (0..n as u32).collect();
        let (mut small, mut large): (Vec<u32>, Vec<u32>) =
            (0..n as u32).partition(|&i| keep[i as usize] < 1.0);
        while let (Some(&s), Some(&l)) = (small.last(), large.last()) {
            small.pop();
            alias[s as usize] = l;
            keep[l as usize] -= 1.0 - keep[s as usize];
            if keep[l as usize] < 1.0 {
                large.pop();
                small.push(l);
            }
        }
        // What is left is 1 up to rounding.
        for i in small.into_iter().chain(large) {
            keep[i as usize] = 1.0;
        }
        Some(AliasTable { keep, alias, total })
    }

    /// The sum of the weights.
    pub fn total(&self) -> f64 {
        self.total
    }

    /// Draw an index with probability proportional to its weight.
    #[inline]
    pub fn sample<R: RngCore + ?Sized>(&self, rng: &mut R) -> usize {
        let n = self.keep.len() as f64;
        let x = unit_f64(rng) * n;
        let column = (x as usize).min(self.keep.len() - 1);
        // The fractional part is a second uniform, independent of the column.
        if x - (column as f64) < self.keep[column] {
            column
        } else {
            self.alias[column] as usize
        }
    }
}

/// A uniform f64 in `[0, 1)` from the top 53 bits of one 64-bit draw.
#[inline]
pub fn unit_f64<R: RngCore + ?Sized>(rng: &mut R) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// The number of independent trials, each a success with probability `q`, up to and
/// including the first success: a geometric variable in `1, 2, …`. Returns
/// `u64::MAX` when `q` is 0 (no trial ever succeeds).
pub fn skip_to_kept<R: RngCore + ?Sized>(rng: &mut R, q: f64) -> u64 {
    if q >= 1.0 {
        return 1;
    }
    if q <= 0.0 {
        return u64::MAX;
    }
    // Inversion: P(G > g) = (1 - q)^g; u in (0, 1] so ln u is finite.
    let u = ((rng.next_u64() >> 11) as f64 + 1.0) * (1.0 / (1u64 << 53) as f64);
    let g = (u.ln() / (-q).ln_1p()).floor() + 1.0;
    if g >= u64::MAX as f64 {
        u64::MAX
    } else {
        g as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Layout;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;
    use tierkit_core::{SpaceScale, VmaKind};

    #[test]
    fn kept_elements_match_the_sampler_element_by_element() {
        let sampler = RegionSampler::new(SpaceScale::new(1.0 / 4.0), 9);
        // Not a whole number of regions, and not starting at region 0.
        let mut layout = Layout::new();
        layout.map(3 * HUGE_PAGE_SIZE, VmaKind::Anon);
        let m = layout.map(37 * HUGE_PAGE_SIZE + 5 * PAGE_SIZE, VmaKind::Anon);
        let k = KeptElements::new(&sampler, 1, m, PAGE_SIZE);
        let n = m.len / PAGE_SIZE;
        let kept: Vec<u64> = (0..n)
            .filter(|&i| sampler.keeps(1, m.addr + i * PAGE_SIZE))
            .collect();
        assert!(!kept.is_empty() && kept.len() < n as usize);
        for i in 0..=n {
            assert_eq!(k.rank(i), kept.iter().filter(|&&x| x < i).count() as u64);
        }
        for lo in [0, 1, 511, 512, 700, n - 1] {
            let from: Vec<u64> = kept.iter().copied().filter(|&x| x >= lo).collect();
            assert_eq!(k.count_in(lo, n), from.len() as u64);
            for (j, &x) in from.iter().enumerate() {
                assert_eq!(k.nth(k.rank(lo) + j as u64), x);
            }
        }
    }

    /// `nth`'s bucket index agrees with the runs for every kept element, with elements
    /// from 64 bytes to a region, runs of one to several regions, the last partial,
    /// and (by mapping) the page-sampled tail's runs of one page, several to a bucket.
    #[test]
    fn nth_finds_every_kept_element_of_many_runs() {
        let by_address = RegionSampler::new(SpaceScale::new(1.0 / 2.0), 3);
        let by_mapping = RegionSampler::new(SpaceScale::new(1.0 / 4.0), 3)
            .with_strata(tierkit_core::SampleStrata::Mapping);
        let mut layout = Layout::new();
        let m = layout.map(61 * HUGE_PAGE_SIZE + 3 * PAGE_SIZE, VmaKind::Anon);
        for (sampler, element_bytes) in [
            (by_address.clone(), 64),
            (by_address.clone(), PAGE_SIZE),
            (by_address.clone(), HUGE_PAGE_SIZE),
            (by_mapping.clone(), 64),
            (by_mapping.clone(), PAGE_SIZE),
        ] {
            let k = KeptElements::new(&sampler, 2, m, element_bytes);
            assert!(k.runs().len() > 5, "{} runs", k.runs().len());
            let kept: Vec<u64> = k.runs().iter().flat_map(|&(a, b)| a..b).collect();
            let n = m.len / element_bytes;
            let mut stream = tierkit_core::StreamSampler::new(sampler);
            stream.observe(2, &m.mmap_op());
            assert_eq!(
                kept,
                (0..n)
                    .filter(|&i| stream.keeps(2, m.addr + i * element_bytes))
                    .collect::<Vec<u64>>()
            );
            assert_eq!(k.len(), kept.len() as u64);
            for (t, &x) in kept.iter().enumerate() {
                assert_eq!(k.nth(t as u64), x);
            }
        }
    }

    #[test]
    fn alias_table_draws_each_index_by_its_weight() {
        let weights = [0.0, 1.0, 5.0, 0.25, 3.75, 10.0];
        assert!(AliasTable::new(&[]).is_none() && AliasTable::new(&[0.0, 0.0]).is_none());
        let t = AliasTable::new(&weights).unwrap();
        assert_eq!(t.total(), 20.0);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let draws = 1_000_000;
        let mut counts = [0u64; 6];
        for _ in 0..draws {
            counts[t.sample(&mut rng)] += 1;
        }
        assert_eq!(counts[0], 0);
        for (i, &c) in counts.iter().enumerate() {
            let p = weights[i] / 20.0;
            let sd = (p * (1.0 - p) / draws as f64).sqrt();
            let f = c as f64 / draws as f64;
            assert!((f - p).abs() <= 5.0 * sd, "index {i}: {f} vs {p}");
        }
    }

    #[test]
    fn geometric_skip_has_the_right_mean_and_edges() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        assert_eq!(skip_to_kept(&mut rng, 1.0), 1);
        assert_eq!(skip_to_kept(&mut rng, 0.0), u64::MAX);
        for q in [0.5, 1.0 / 64.0, 1e-4] {
            let n = 200_000;
            let sum: f64 = (0..n).map(|_| skip_to_kept(&mut rng, q) as f64).sum();
            let mean = sum / n as f64;
            // Mean 1/q, standard deviation of the mean sqrt(1-q)/q/sqrt(n).
            let sd = (1.0 - q).sqrt() / q / (n as f64).sqrt();
            assert!((mean - 1.0 / q).abs() < 5.0 * sd, "q {q}: mean {mean}");
        }
    }
}
