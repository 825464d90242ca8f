//! Small helpers shared by the generators: range arithmetic, scaling and the
//! checks behind every `validate()`.

use rand::RngCore;
pub(crate) use tierkit_core::host::prefetch;
use tierkit_core::ConfigError;
use tierkit_core::{GIB, PAGE_SIZE};

/// Largest footprint a generator accepts. Keeps every address of the bump layout
/// (which starts at 1 GiB) far below the 47-bit user address-space limit, and turns
/// a mistyped `scale` into a clear error instead of a simulator that tries to size
/// tables for petabytes.
pub(crate) const MAX_FOOTPRINT_BYTES: u64 = 64 * 1024 * GIB;

/// Largest accepted `scale`; larger values are almost certainly typos.
pub(crate) const MAX_SCALE: f64 = 1024.0;
/// Largest accepted `nr_threads`.
pub(crate) const MAX_THREADS: u32 = 1024;
/// Accepted memory-level parallelism range: below 1 would make memory slower than
/// one outstanding miss at a time, above 64 exceeds any core's miss-handling
/// resources (line-fill buffers plus prefetchers) by a wide margin.
pub(crate) const MLP_RANGE: (f64, f64) = (1.0, 64.0);

/// SplitMix64's output function: a strong 64-bit mixer, used to derive seeds and
/// to hash keys to buckets.
#[inline]
pub(crate) fn mix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Map a 64-bit hash onto `[0, n)` with one multiply (Lemire's reduction). The bias,
/// at most `n / 2^64`, is invisible at any size a simulation can use.
#[inline]
pub(crate) fn reduce(h: u64, n: u64) -> u64 {
    ((h as u128 * n as u128) >> 64) as u64
}

/// A uniform integer in `[0, n)` from one 64-bit draw (see [`reduce`]).
#[inline]
pub(crate) fn below<R: RngCore + ?Sized>(rng: &mut R, n: u64) -> u64 {
    reduce(rng.next_u64(), n)
}

/// Thread `i` of `parts`'s contiguous share `[lo, hi)` of `total` items; the first
/// `total % parts` threads get one extra item.
pub(crate) fn share(total: u64, parts: u32, i: usize) -> (u64, u64) {
    let parts = parts.max(1) as u64;
    let i = i as u64;
    let base = total / parts;
    let extra = total % parts;
    let lo = i * base + i.min(extra);
    let hi = lo + base + u64::from(i < extra);
    (lo, hi)
}

/// `count × scale`, rounded to the nearest integer.
pub(crate) fn scaled(count: u64, scale: f64) -> u64 {
    (count as f64 * scale).round() as u64
}

/// `mib × scale` MiB in bytes, rounded up to whole pages and at least one page.
pub(crate) fn scaled_bytes_from_mib(mib: u64, scale: f64) -> u64 {
    let bytes = (mib as f64 * scale * (1u64 << 20) as f64).ceil() as u64;
    bytes.max(1).div_ceil(PAGE_SIZE) * PAGE_SIZE
}

/// Check a value lies in `[0, 1]`.
pub(crate) fn check_unit(workload: &str, field: &str, v: f64) -> Result<(), ConfigError> {
    if (0.0..=1.0).contains(&v) {
        Ok(())
    } else {
        Err(format!("{workload}.{field} must be in [0, 1], got {v}").into())
    }
}

/// Check a value lies in `(0, 1]`.
pub(crate) fn check_unit_nonzero(workload: &str, field: &str, v: f64) -> Result<(), ConfigError> {
    if v > 0.0 && v <= 1.0 {
        Ok(())
    } else {
        Err(format!("{workload}.{field} must be in (0, 1], got {v}").into())
    }
}

/// Check an integer size is at least 1.
pub(crate) fn check_positive(workload: &str, field: &str, v: u64) -> Result<(), ConfigError> {
    if v >= 1 {
        Ok(())
    } else {
        Err(format!("{workload}.{field} must be >= 1, got {v}").into())
    }
}

/// The checks every config shares: `scale`, `nr_threads`, `mlp`.
pub(crate) fn check_common(
    workload: &str,
    scale: f64,
    nr_threads: u32,
    mlp: f64,
) -> Result<(), ConfigError> {
    if !(scale > 0.0 && scale <= MAX_SCALE) {
        return Err(format!("{workload}.scale must be in (0, {MAX_SCALE}], got {scale}").into());
    }
    if !(1..=MAX_THREADS).contains(&nr_threads) {
        return Err(format!(
            "{workload}.nr_threads must be in [1, {MAX_THREADS}], got {nr_threads}"
        )
        .into());
    }
    let (lo, hi) = MLP_RANGE;
    if !(mlp >= lo && mlp <= hi) {
        return Err(format!("{workload}.mlp must be in [{lo}, {hi}], got {mlp}").into());
    }
    Ok(())
}

/// Check the scaled footprint stays within [`MAX_FOOTPRINT_BYTES`]; `field` names the
/// size parameter to blame.
pub(crate) fn check_footprint(workload: &str, field: &str, bytes: f64) -> Result<(), ConfigError> {
    if bytes <= MAX_FOOTPRINT_BYTES as f64 {
        Ok(())
    } else {
        Err(format!(
            "{workload}.{field} × scale gives a {:.0} GiB footprint; it must be at most {} GiB",
            bytes / GIB as f64,
            MAX_FOOTPRINT_BYTES / GIB
        )
        .into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_partition_the_total() {
        for (total, parts) in [(10u64, 3u32), (0, 4), (7, 7), (1_000_003, 16), (3, 8)] {
            let mut next = 0;
            for i in 0..parts as usize {
                let (lo, hi) = share(total, parts, i);
                assert_eq!(lo, next);
                assert!(hi >= lo && hi - lo <= total / parts as u64 + 1);
                next = hi;
            }
            assert_eq!(next, total);
        }
    }

    #[test]
    fn reduce_covers_the_range() {
        assert_eq!(reduce(0, 10), 0);
        assert_eq!(reduce(u64::MAX, 10), 9);
        assert_eq!(reduce(u64::MAX / 2 + 1, 10), 5);
    }

    #[test]
    fn scaled_bytes_are_whole_pages() {
        assert_eq!(scaled_bytes_from_mib(4096, 1.0), 4096 << 20);
        assert_eq!(scaled_bytes_from_mib(1, 0.5), 512 << 10);
        assert_eq!(scaled_bytes_from_mib(1, 1e-9), PAGE_SIZE);
    }
}
