//! The hash-indexed record store shared by the key-value generators (`zipf-kv`,
//! `ycsb`): its layout, its address arithmetic and its load phase.
//!
//! The store is two arrays, each its own anonymous mapping as a real store's big
//! allocations would be:
//! - a **hash index** of `nr_buckets` 8-byte buckets (one pointer each), the bucket of
//!   a key chosen by hashing the key, and
//! - a **record array** of `nr_records × record_bytes`, record `k` at offset
//!   `k × record_bytes` (the store is loaded in key order).
//!
//! The **load** of one record is one write of the record's first line and one write
//! of its index bucket. Writing every line of every record would multiply the load by
//! `record_bytes / 64` for no benefit: since a record is at most one page, every page
//! of the record array holds some record's first line, so the load still
//! first-touches every page in address order — which is all that placement depends on.

use tierkit_core::ConfigError;
use tierkit_core::{Op, VmaKind, CACHE_LINE, PAGE_SIZE};

use crate::common;
use crate::layout::{Layout, Mapping};

/// Bytes per index bucket (one pointer).
pub const BUCKET_BYTES: u64 = 8;

/// The index and record array of a hash-indexed store (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct KvStore {
    /// The hash index's mapping.
    pub index: Mapping,
    /// The record array's mapping.
    pub records: Mapping,
    /// Buckets in the index.
    pub nr_buckets: u64,
    /// Bytes per record.
    pub record_bytes: u64,
}

impl KvStore {
    /// Map the index (`nr_buckets` buckets) and then the record array (`nr_records`
    /// records of `record_bytes`) from `layout`.
    pub fn new(layout: &mut Layout, nr_buckets: u64, nr_records: u64, record_bytes: u64) -> Self {
        let index = layout.map(nr_buckets * BUCKET_BYTES, VmaKind::Anon);
        let records = layout.map(nr_records * record_bytes, VmaKind::Anon);
        KvStore {
            index,
            records,
            nr_buckets,
            record_bytes,
        }
    }

    /// Address of `key`'s index bucket.
    #[inline]
    pub fn bucket_addr(&self, key: u64) -> u64 {
        // A different hash from YCSB's FNV scrambling, so that bucket order is
        // unrelated to popularity order.
        self.index.addr + common::reduce(common::mix64(key), self.nr_buckets) * BUCKET_BYTES
    }

    /// Address of the first byte of record `key` of the record array.
    #[inline]
    pub fn record_addr(&self, key: u64) -> u64 {
        self.records.addr + key * self.record_bytes
    }

    /// Append the load of keys `[first, end)`: per key, a write of the record's
    /// first line then a write of its bucket, no compute gap.
    pub fn push_load(&self, first: u64, end: u64, out: &mut Vec<Op>) {
        for key in first..end {
            out.push(Op::Access {
                addr: self.record_addr(key),
                write: true,
                gap_ns: 0,
            });
            out.push(Op::Access {
                addr: self.bucket_addr(key),
                write: true,
                gap_ns: 0,
            });
        }
    }
}

/// Check `record_bytes` is a multiple of 64 in `[64, 4096]`.
pub(crate) fn check_record_bytes(workload: &str, record_bytes: u64) -> Result<(), ConfigError> {
    if (CACHE_LINE..=PAGE_SIZE).contains(&record_bytes) && record_bytes.is_multiple_of(CACHE_LINE) {
        Ok(())
    } else {
        Err(format!(
            "{workload}.record_bytes must be a multiple of {CACHE_LINE} in [{CACHE_LINE}, {PAGE_SIZE}], got {record_bytes}"
        ).into())
    }
}

/// Check `lines_per_op` is in `[1, record_bytes / 64]` (call after
/// [`check_record_bytes`]).
pub(crate) fn check_lines_per_op(
    workload: &str,
    lines_per_op: u32,
    record_bytes: u64,
) -> Result<(), String> {
    let max_lines = record_bytes / CACHE_LINE;
    if (1..=max_lines).contains(&u64::from(lines_per_op)) {
        Ok(())
    } else {
        Err(format!(
            "{workload}.lines_per_op must be in [1, record_bytes / 64] = [1, {max_lines}], got {lines_per_op}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_stay_in_the_index_and_records_are_contiguous() {
        let mut l = Layout::new();
        let s = KvStore::new(&mut l, 1000, 500, 1024);
        assert!(s.index.end() <= s.records.addr);
        assert_eq!(s.records.len, 500 * 1024);
        for key in 0..5000 {
            let b = s.bucket_addr(key);
            assert!(s.index.contains(b) && (b - s.index.addr).is_multiple_of(BUCKET_BYTES));
            assert!(b < s.index.addr + 1000 * BUCKET_BYTES);
        }
        assert_eq!(s.record_addr(3), s.records.addr + 3 * 1024);
        let mut out = Vec::new();
        s.push_load(2, 4, &mut out);
        assert_eq!(out.len(), 4);
        assert_eq!(
            out[2],
            Op::Access {
                addr: s.record_addr(3),
                write: true,
                gap_ns: 0
            }
        );
    }
}
