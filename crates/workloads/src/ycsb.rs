//! `ycsb`: the YCSB core workloads A, B, C, D, F and a write-only W over a
//! hash-indexed record store.
//!
//! This models the key-value runs of the seed papers: MULTI-CLOCK's Memcached
//! (YCSB), Chrono's Memcached/Redis, MEMTIS's Silo YCSB-C and PET's Redis YCSB-A/B.
//! The store is [`crate::kv`]'s layout (shared with `zipf-kv`): a hash index of 8-byte
//! buckets and a record array of `nr_records` records of `record_bytes` (1 KiB, YCSB's
//! ten 100-byte fields plus key and header), each its own anonymous mapping, loaded
//! in key order.
//!
//! | mix | operations (YCSB `workloads/workload*`) | request distribution |
//! | --- | --- | --- |
//! | `a` | 50% read, 50% update | scrambled zipfian |
//! | `b` | 95% read, 5% update | scrambled zipfian |
//! | `c` | 100% read | scrambled zipfian |
//! | `d` | 95% read, 5% insert | latest |
//! | `f` | 50% read, 50% read-modify-write | scrambled zipfian |
//! | `w` | 100% update (not a YCSB core workload: a write-only bound) | scrambled zipfian |
//!
//! Stream of each thread:
//! 1. **load**: its contiguous share of the `nr_records` keys, as in `zipf-kv`.
//! 2. **operations**: its share of `nr_ops`. The kind of each operation is drawn
//!    independently with the mix's proportions (YCSB's `DiscreteGenerator`), from a
//!    random stream of its own so that the counts can be known in advance. Then,
//!    with `L = lines_per_op`:
//!    - **read**: read the key's bucket (after `gap_ns` of request processing), then
//!      read `L` lines of the record;
//!    - **update**: read the bucket (after `gap_ns`), then write `L` lines of the
//!      record in place (YCSB's default `writeallfields=false` rewrites one field);
//!    - **read-modify-write**: read the bucket (after `gap_ns`), read `L` lines, then
//!      write the same `L` lines;
//!    - **insert** (D): a new record at the end of the thread's insert area: write
//!      its `L` lines (the first after `gap_ns`), then link it by writing its bucket.
//!
//! **Keys.** Zipfian mixes draw a rank with YCSB's zipfian (`theta`, default 0.99)
//! over the loaded keys and scramble it with FNV-1a as YCSB does (`scrambled`). D uses
//! YCSB's `latest` distribution (`SkewedLatestGenerator`): rank `r` of an unscrambled
//! zipfian over the keys inserted so far, counted back from the newest key, so the
//! most recent insert is the most popular record and popularity follows inserts.
//!
//! **Inserts grow the store by mmap.** Inserted records do not fit in the loaded
//! record array; each thread appends them to its own insert area that grows by
//! chunks of `insert_chunk_mib` (scaled), each chunk a new anonymous mapping emitted
//! as an [`Op::Mmap`] in the thread's stream just before the chunk's first record is
//! written — what an allocator does when its arena runs out (Memcached grows its
//! slab memory, Redis/jemalloc its extents, by mapping more). The index is sized for
//! every key the run will hold (`nr_records` + all inserts, a load factor of 1 at the
//! end), as a store started with a preset hash-table size would be.
//!
//! **Threads and `latest`.** A thread's inserts go to its own area (as per-thread
//! allocator arenas do) and its `latest` reads draw over the loaded keys plus its own
//! inserts, not the other threads'. A thread's stream must not depend on how far the
//! other threads have got (the determinism rule), and a record in another thread's
//! next chunk may not be mapped yet when it would be read. With one thread (the
//! default) this is exactly YCSB's `latest`.
//!
//! **Exact counts.** The number of inserts (D) and read-modify-writes (F) of each
//! thread is counted at construction by replaying its operation-kind stream (tens of
//! ms for 40 M operations), so the footprint and `expected_accesses` are exact.

use rand::RngCore;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use tierkit_core::{ConfigError, Op, ProcessShape, VmaKind, Workload, WorkloadShape, CACHE_LINE};

use crate::common;
use crate::kv::{self, KvStore, BUCKET_BYTES};
use crate::layout::{Layout, Mapping};
use crate::zipf::{fnv1a64, Zipfian};
use crate::{thread_rng, BATCH_OPS};

const NAME: &str = "ycsb";
/// Mixed into the seed of the operation-kind streams so they are independent of the
/// key streams (which use the plain seed).
const KIND_SEED_SALT: u64 = 0x6b69_6e64_5f72_6e67;

/// Which YCSB core workload to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum YcsbMix {
    /// Update heavy: 50% read, 50% update, zipfian.
    A,
    /// Read mostly: 95% read, 5% update, zipfian.
    B,
    /// Read only: 100% read, zipfian.
    C,
    /// Read latest: 95% read, 5% insert, latest.
    D,
    /// Read-modify-write: 50% read, 50% read-modify-write, zipfian.
    F,
    /// Write only: 100% update, zipfian.
    W,
}

/// The kind of one YCSB operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum YcsbOp {
    /// Read a record.
    Read,
    /// Overwrite part of a record in place.
    Update,
    /// Add a new record.
    Insert,
    /// Read a record, then write it back.
    ReadModifyWrite,
}

impl YcsbMix {
    /// `(read proportion, the other operation)`: every mix is reads plus at most
    /// one other kind.
    pub fn proportions(self) -> (f64, YcsbOp) {
        match self {
            YcsbMix::A => (0.5, YcsbOp::Update),
            YcsbMix::B => (0.95, YcsbOp::Update),
            YcsbMix::C => (1.0, YcsbOp::Update),
            YcsbMix::D => (0.95, YcsbOp::Insert),
            YcsbMix::F => (0.5, YcsbOp::ReadModifyWrite),
            YcsbMix::W => (0.0, YcsbOp::Update),
        }
    }

    /// True if keys follow YCSB's `latest` distribution (D), else zipfian.
    pub fn latest(self) -> bool {
        self == YcsbMix::D
    }
}

/// Configuration of [`Ycsb`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct YcsbConfig {
    /// Which core workload: `a`, `b`, `c`, `d`, `f` or `w` (see the module docs).
    /// Default `a`.
    pub mix: YcsbMix,
    /// Records loaded before the run (YCSB `recordcount`), before `scale`. Default
    /// 4 Mi (4,194,304): a 4 GiB record array at 1 KiB per record plus a 32 MiB index.
    /// Mix `d` grows the store by its inserts (5% of `nr_ops`: 2 Mi records, 2 GiB, at
    /// the defaults).
    pub nr_records: u64,
    /// Bytes per record: a multiple of 64 in [64, 4096]. Default 1024 (YCSB's ten
    /// 100-byte fields plus key and header, rounded to lines).
    pub record_bytes: u64,
    /// Operations (YCSB `operationcount`) before `scale`, split evenly over the
    /// threads. Default 40 M: 120 M accesses at 3 per operation (160 M for `f`), plus
    /// 8 M load writes.
    pub nr_ops: u64,
    /// Zipfian skew of the request distribution (zipfian and latest), in (0, 1).
    /// Default 0.99 (YCSB's `ZIPFIAN_CONSTANT`).
    pub theta: f64,
    /// Cache lines of the record an operation reads or writes, in
    /// [1, record_bytes / 64]. Default 2 (as `zipf-kv`).
    pub lines_per_op: u32,
    /// Scatter the zipfian mixes' hot keys over the key space by hashing the rank
    /// (YCSB's scrambled zipfian). Default true. `d`'s latest distribution is never
    /// scrambled (YCSB's is not).
    pub scrambled: bool,
    /// Size of each mapping the insert area grows by, in MiB before `scale` (rounded
    /// up to whole pages and to at least one record). Default 64 (a large allocator
    /// growth step; Memcached's own slab pages are 1 MiB, glibc serves anything above
    /// 128 KiB with its own mmap). Only `d` inserts.
    pub insert_chunk_mib: u64,
    /// Compute time before each operation's first access (request parsing, hashing,
    /// reply), in ns. Default 50.
    pub gap_ns: u32,
    /// Multiplies `nr_records`, `nr_ops` and `insert_chunk_mib` together. Default 1.0.
    pub scale: f64,
    /// Number of threads. Default 1.
    pub nr_threads: u32,
    /// Memory-level parallelism. Default 2.0: the record access depends on the bucket
    /// read (a pointer chase), as in `zipf-kv`.
    pub mlp: f64,
}

impl Default for YcsbConfig {
    fn default() -> Self {
        YcsbConfig {
            mix: YcsbMix::A,
            nr_records: 4 << 20,
            record_bytes: 1024,
            nr_ops: 40_000_000,
            theta: 0.99,
            lines_per_op: 2,
            scrambled: true,
            insert_chunk_mib: 64,
            gap_ns: 50,
            scale: 1.0,
            nr_threads: 1,
            mlp: 2.0,
        }
    }
}

impl YcsbConfig {
    /// Check every field; the error names the field and its valid range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        common::check_positive(NAME, "nr_records", self.nr_records)?;
        kv::check_record_bytes(NAME, self.record_bytes)?;
        kv::check_lines_per_op(NAME, self.lines_per_op, self.record_bytes)?;
        if !(self.theta > 0.0 && self.theta < 1.0) {
            return Err(format!("{NAME}.theta must be in (0, 1), got {}", self.theta).into());
        }
        if !(1..=common::MAX_FOOTPRINT_BYTES >> 20).contains(&self.insert_chunk_mib) {
            return Err(format!(
                "{NAME}.insert_chunk_mib must be in [1, {}], got {}",
                common::MAX_FOOTPRINT_BYTES >> 20,
                self.insert_chunk_mib
            )
            .into());
        }
        common::check_common(NAME, self.scale, self.nr_threads, self.mlp)?;
        let per_record = (self.record_bytes + BUCKET_BYTES) as f64 * self.scale;
        common::check_footprint(NAME, "nr_records", self.nr_records as f64 * per_record)?;
        let (read, _) = self.mix.proportions();
        common::check_footprint(
            NAME,
            "nr_ops",
            (self.nr_records as f64 + self.nr_ops as f64 * (1.0 - read)) * per_record,
        )
    }
}

/// The inserts of one thread (mix `d`): where its records go and how the `latest`
/// distribution sees them.
#[derive(Debug, Clone)]
struct InsertArea {
    /// The chunks the area will grow by, in order (mapped lazily, in-stream).
    chunks: Vec<Mapping>,
    /// Key id of the thread's first insert (keys are unique over all threads).
    first_key: u64,
    /// Records inserted so far.
    nr_inserted: u64,
    /// Zipfian over the thread's view (loaded keys + own inserts), grown per insert.
    latest: Zipfian,
}

/// Per-thread progress.
#[derive(Debug, Clone)]
struct ThreadState {
    /// Key draws.
    rng: Xoshiro256PlusPlus,
    /// Operation-kind draws (replayed at construction to count them).
    kind_rng: Xoshiro256PlusPlus,
    /// Next key to load, and the end of the thread's share.
    load_next: u64,
    load_end: u64,
    /// Operations still to generate.
    ops_left: u64,
    /// Mix `d` only.
    inserts: Option<InsertArea>,
}

/// The YCSB generator (see the module docs).
#[derive(Debug, Clone)]
pub struct Ycsb {
    mix: YcsbMix,
    store: KvStore,
    nr_records: u64,
    lines_per_op: u64,
    /// Draws below this (out of 2^64) are reads; the rest are `other`.
    read_below: u64,
    other: YcsbOp,
    zipf: Zipfian,
    scrambled: bool,
    records_per_chunk: u64,
    gap_ns: u32,
    nr_threads: u32,
    mlp: f64,
    footprint_bytes: u64,
    expected_accesses: u64,
    threads: Vec<ThreadState>,
}

/// `p × 2^64` as a threshold for one 64-bit draw; `p = 1` maps to `u64::MAX`, which
/// one draw in 2^64 misses — invisible at any run length.
fn threshold(p: f64) -> u64 {
    if p >= 1.0 {
        u64::MAX
    } else {
        (p * 18_446_744_073_709_551_616.0) as u64
    }
}

impl Ycsb {
    /// Build the generator for `cfg` with `seed`.
    ///
    /// # Panics
    /// If `cfg` does not pass [`YcsbConfig::validate`].
    pub fn new(cfg: &YcsbConfig, seed: u64) -> Self {
        if let Err(e) = cfg.validate() {
            panic!("invalid ycsb config: {e}");
        }
        let nr_records = common::scaled(cfg.nr_records, cfg.scale).max(1);
        let nr_ops = common::scaled(cfg.nr_ops, cfg.scale);
        let (read_p, other) = cfg.mix.proportions();
        let read_below = threshold(read_p);
        let lines_per_op = u64::from(cfg.lines_per_op);
        let chunk_bytes = common::scaled_bytes_from_mib(cfg.insert_chunk_mib, cfg.scale);
        let records_per_chunk = (chunk_bytes / cfg.record_bytes).max(1);

        // Replay each thread's kind stream to count its non-read operations.
        let kind_seed = common::mix64(seed ^ KIND_SEED_SALT);
        let mut threads = Vec::with_capacity(cfg.nr_threads as usize);
        let mut others = Vec::with_capacity(cfg.nr_threads as usize);
        for t in 0..cfg.nr_threads as usize {
            let (load_next, load_end) = common::share(nr_records, cfg.nr_threads, t);
            let (lo, hi) = common::share(nr_ops, cfg.nr_threads, t);
            let kind_rng = thread_rng(kind_seed, 0, t);
            let nr_other = if matches!(other, YcsbOp::Insert | YcsbOp::ReadModifyWrite) {
                let mut r = kind_rng.clone();
                (0..hi - lo).filter(|_| r.next_u64() >= read_below).count() as u64
            } else {
                0
            };
            others.push(nr_other);
            threads.push(ThreadState {
                rng: thread_rng(seed, 0, t),
                kind_rng,
                load_next,
                load_end,
                ops_left: hi - lo,
                inserts: None,
            });
        }
        let nr_inserts: u64 = if other == YcsbOp::Insert {
            others.iter().sum()
        } else {
            0
        };

        let mut layout = Layout::new();
        let store = KvStore::new(
            &mut layout,
            nr_records + nr_inserts,
            nr_records,
            cfg.record_bytes,
        );
        let mut footprint_bytes = store.index.len + store.records.len;
        if cfg.mix.latest() {
            let mut first_key = nr_records;
            let latest = Zipfian::new(nr_records, cfg.theta);
            for (t, &n) in threads.iter_mut().zip(&others) {
                let chunks: Vec<Mapping> = (0..n.div_ceil(records_per_chunk))
                    .map(|_| layout.map(records_per_chunk * cfg.record_bytes, VmaKind::Anon))
                    .collect();
                footprint_bytes += chunks.iter().map(|c| c.len).sum::<u64>();
                t.inserts = Some(InsertArea {
                    chunks,
                    first_key,
                    nr_inserted: 0,
                    latest: latest.clone(),
                });
                first_key += n;
            }
        }

        let per_op = 1 + lines_per_op;
        let nr_rmw: u64 = if other == YcsbOp::ReadModifyWrite {
            others.iter().sum()
        } else {
            0
        };
        Ycsb {
            mix: cfg.mix,
            store,
            nr_records,
            lines_per_op,
            read_below,
            other,
            zipf: Zipfian::new(nr_records, cfg.theta),
            scrambled: cfg.scrambled,
            records_per_chunk,
            gap_ns: cfg.gap_ns,
            nr_threads: cfg.nr_threads,
            mlp: cfg.mlp,
            footprint_bytes,
            expected_accesses: 2 * nr_records + nr_ops * per_op + nr_rmw * lines_per_op,
            threads,
        }
    }

    /// The mix this generator runs.
    pub fn mix(&self) -> YcsbMix {
        self.mix
    }

    /// The hash index's mapping.
    pub fn index(&self) -> Mapping {
        self.store.index
    }

    /// The loaded record array's mapping.
    pub fn records(&self) -> Mapping {
        self.store.records
    }

    /// Number of loaded records (after `scale`).
    pub fn nr_records(&self) -> u64 {
        self.nr_records
    }

    /// Records per insert chunk.
    pub fn records_per_chunk(&self) -> u64 {
        self.records_per_chunk
    }

    /// The chunks thread `thread`'s insert area grows by (empty unless mix `d`).
    pub fn insert_chunks(&self, thread: usize) -> &[Mapping] {
        self.threads
            .get(thread)
            .and_then(|t| t.inserts.as_ref())
            .map_or(&[], |a| &a.chunks)
    }

    /// The key that zipfian rank `rank` maps to (rank 0 is the hottest key).
    #[inline]
    pub fn key_of_rank(&self, rank: u64) -> u64 {
        if self.scrambled {
            fnv1a64(rank) % self.nr_records
        } else {
            rank
        }
    }

    /// Address of the first byte of loaded record `key`.
    #[inline]
    pub fn record_addr(&self, key: u64) -> u64 {
        self.store.record_addr(key)
    }

    /// Address of `key`'s index bucket.
    #[inline]
    pub fn bucket_addr(&self, key: u64) -> u64 {
        self.store.bucket_addr(key)
    }

    /// Position of the record at `addr` in thread `thread`'s view (loaded records
    /// `0..nr_records`, then the thread's inserts in order), if `addr` is the first
    /// byte of one.
    pub fn view_index(&self, thread: usize, addr: u64) -> Option<u64> {
        let rb = self.store.record_bytes;
        let rec = self.store.records;
        if rec.contains(addr) {
            let off = addr - rec.addr;
            return off.is_multiple_of(rb).then_some(off / rb);
        }
        let chunks = self.insert_chunks(thread);
        let (c, m) = chunks.iter().enumerate().find(|(_, m)| m.contains(addr))?;
        let off = addr - m.addr;
        (off.is_multiple_of(rb) && off / rb < self.records_per_chunk)
            .then_some(self.nr_records + c as u64 * self.records_per_chunk + off / rb)
    }

    /// `(key id, record address)` of position `idx` of a thread's view.
    #[inline]
    fn view_record(&self, area: &InsertArea, idx: u64) -> (u64, u64) {
        if idx < self.nr_records {
            (idx, self.store.record_addr(idx))
        } else {
            let j = idx - self.nr_records;
            let chunk = &area.chunks[(j / self.records_per_chunk) as usize];
            let addr = chunk.addr + (j % self.records_per_chunk) * self.store.record_bytes;
            (area.first_key + j, addr)
        }
    }

    /// Append `lines_per_op` line accesses of the record at `rec`, the first after
    /// `first_gap_ns`.
    #[inline]
    fn push_lines(&self, out: &mut Vec<Op>, rec: u64, write: bool, first_gap_ns: u32) {
        for line in 0..self.lines_per_op {
            out.push(Op::Access {
                addr: rec + line * CACHE_LINE,
                write,
                gap_ns: if line == 0 { first_gap_ns } else { 0 },
            });
        }
    }

    /// Append one operation of `kind` by thread state `t`.
    fn push_op(&self, t: &mut ThreadState, kind: YcsbOp, out: &mut Vec<Op>) {
        if kind == YcsbOp::Insert {
            let area = t.inserts.as_mut().expect("only mix d inserts");
            let j = area.nr_inserted;
            if j.is_multiple_of(self.records_per_chunk) {
                // The area is full: the allocator maps its next chunk.
                out.push(area.chunks[(j / self.records_per_chunk) as usize].mmap_op());
            }
            let (key, rec) = self.view_record(area, self.nr_records + j);
            self.push_lines(out, rec, true, self.gap_ns);
            out.push(Op::Access {
                addr: self.store.bucket_addr(key),
                write: true,
                gap_ns: 0,
            });
            area.nr_inserted += 1;
            area.latest.grow(self.nr_records + area.nr_inserted);
            return;
        }
        let (key, rec) = match &t.inserts {
            Some(area) => {
                // YCSB's SkewedLatestGenerator: newest key minus a zipfian rank.
                let newest = self.nr_records + area.nr_inserted - 1;
                self.view_record(area, newest - area.latest.sample(&mut t.rng))
            }
            None => {
                let key = self.key_of_rank(self.zipf.sample(&mut t.rng));
                (key, self.store.record_addr(key))
            }
        };
        out.push(Op::Access {
            addr: self.store.bucket_addr(key),
            write: false,
            gap_ns: self.gap_ns,
        });
        match kind {
            YcsbOp::Read => self.push_lines(out, rec, false, 0),
            YcsbOp::Update => self.push_lines(out, rec, true, 0),
            YcsbOp::ReadModifyWrite => {
                self.push_lines(out, rec, false, 0);
                self.push_lines(out, rec, true, 0);
            }
            YcsbOp::Insert => unreachable!("handled above"),
        }
    }
}

impl Workload for Ycsb {
    fn shape(&self) -> WorkloadShape {
        WorkloadShape {
            processes: vec![ProcessShape {
                name: NAME.to_string(),
                nr_threads: self.nr_threads,
                mlp: self.mlp,
            }],
            footprint_bytes: self.footprint_bytes,
        }
    }

    fn prologue(&mut self, process: usize, out: &mut Vec<Op>) {
        if process == 0 {
            out.push(self.store.index.mmap_op());
            out.push(self.store.records.mmap_op());
        }
    }

    fn fill(&mut self, process: usize, thread: usize, out: &mut Vec<Op>) {
        if process != 0 || thread >= self.threads.len() {
            return;
        }
        out.reserve(BATCH_OPS);
        // Take the thread's state out so `self` can be borrowed while it advances.
        let mut t = std::mem::replace(
            &mut self.threads[thread],
            ThreadState {
                rng: thread_rng(0, 0, 0),
                kind_rng: thread_rng(0, 0, 0),
                load_next: 0,
                load_end: 0,
                ops_left: 0,
                inserts: None,
            },
        );

        let n_load = (t.load_end - t.load_next).min(BATCH_OPS as u64 / 2);
        self.store.push_load(t.load_next, t.load_next + n_load, out);
        t.load_next += n_load;

        // The largest operation: an insert's mmap + lines + bucket, or a
        // read-modify-write's bucket + 2 × lines.
        let max_op = 2 + 2 * self.lines_per_op as usize;
        while t.ops_left > 0 && out.len() + max_op <= BATCH_OPS {
            let kind = if t.kind_rng.next_u64() < self.read_below {
                YcsbOp::Read
            } else {
                self.other
            };
            self.push_op(&mut t, kind, out);
            t.ops_left -= 1;
        }
        self.threads[thread] = t;
    }

    fn expected_accesses(&self) -> Option<u64> {
        Some(self.expected_accesses)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Mapping;
    use crate::testutil::drain;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn small(mix: YcsbMix, nr_records: u64, nr_ops: u64, nr_threads: u32) -> YcsbConfig {
        YcsbConfig {
            mix,
            nr_records,
            nr_ops,
            nr_threads,
            ..YcsbConfig::default()
        }
    }

    /// One parsed operation of a stream.
    #[derive(Debug, Clone, PartialEq)]
    struct Parsed {
        kind: YcsbOp,
        /// Bucket address (read, or written by an insert).
        bucket: u64,
        /// The record's line addresses, and for RMW the written ones.
        lines: Vec<u64>,
        written: Vec<u64>,
    }

    /// Split one thread's stream into its load accesses, the chunks it mapped, and
    /// its parsed operations. Panics on anything that is not a well-formed
    /// operation, which makes every test that parses also a shape check.
    fn parse(w: &Ycsb, stream: &[Op], nr_loaded: usize) -> (Vec<Mapping>, Vec<Parsed>) {
        let l = w.lines_per_op as usize;
        let mut maps = Vec::new();
        let mut ops = Vec::new();
        let mut acc = Vec::new();
        for op in stream {
            match *op {
                Op::Access {
                    addr,
                    write,
                    gap_ns,
                } => acc.push((addr, write, gap_ns)),
                Op::Mmap { addr, len, kind } => {
                    // The chunk is mapped before anything in it is touched.
                    assert!(acc.iter().all(|&(a, _, _)| a < addr || a >= addr + len));
                    maps.push(Mapping { addr, len, kind });
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        let acc = &acc[2 * nr_loaded..];
        let mut i = 0;
        while i < acc.len() {
            let (a0, w0, g0) = acc[i];
            assert_eq!(g0, w.gap_ns, "each operation starts after gap_ns");
            if w0 {
                // Insert: lines written, then the bucket.
                let lines: Vec<u64> = acc[i..i + l].iter().map(|x| x.0).collect();
                assert!(acc[i..i + l].iter().all(|x| x.1));
                let (b, bw, _) = acc[i + l];
                assert!(bw && w.index().contains(b));
                ops.push(Parsed {
                    kind: YcsbOp::Insert,
                    bucket: b,
                    lines,
                    written: vec![],
                });
                i += l + 1;
                continue;
            }
            assert!(w.index().contains(a0));
            let body = &acc[i + 1..i + 1 + l];
            let lines: Vec<u64> = body.iter().map(|x| x.0).collect();
            let mut p = Parsed {
                kind: if body[0].1 {
                    YcsbOp::Update
                } else {
                    YcsbOp::Read
                },
                bucket: a0,
                lines,
                written: vec![],
            };
            assert!(body.iter().all(|x| x.1 == body[0].1 && x.2 == 0));
            i += 1 + l;
            if p.kind == YcsbOp::Read && i < acc.len() && acc[i].1 && acc[i].2 == 0 {
                p.kind = YcsbOp::ReadModifyWrite;
                p.written = acc[i..i + l].iter().map(|x| x.0).collect();
                assert!(acc[i..i + l].iter().all(|x| x.1));
                i += l;
            }
            ops.push(p);
        }
        (maps, ops)
    }

    fn counts(ops: &[Parsed]) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for p in ops {
            *m.entry(format!("{:?}", p.kind)).or_insert(0) += 1;
        }
        m
    }

    const ALL: [YcsbMix; 6] = [
        YcsbMix::A,
        YcsbMix::B,
        YcsbMix::C,
        YcsbMix::D,
        YcsbMix::F,
        YcsbMix::W,
    ];

    #[test]
    fn same_seed_same_stream_different_seed_different_stream() {
        for mix in ALL {
            let cfg = small(mix, 5_000, 20_000, 2);
            let a = drain(&mut Ycsb::new(&cfg, 7));
            let b = drain(&mut Ycsb::new(&cfg, 7));
            let c = drain(&mut Ycsb::new(&cfg, 8));
            assert_eq!(a.streams, b.streams, "{mix:?}");
            assert_ne!(a.streams, c.streams, "{mix:?}");
            assert_ne!(a.streams[0][0], a.streams[0][1], "{mix:?}");
        }
    }

    /// Footprint equals everything mapped (prologue plus in-stream chunks), every
    /// access is inside a mapping mapped before it, and `expected_accesses` is exact.
    fn check_structure(w: &mut Ycsb) {
        let nr_threads = w.nr_threads as usize;
        let d = drain(w);
        let mut mapped = d.mappings.clone();
        let mut n = 0u64;
        for (t, stream) in d.streams[0].iter().enumerate() {
            let mut live = d.mappings.clone();
            for op in stream {
                match *op {
                    Op::Access { addr, .. } => {
                        n += 1;
                        assert!(live.iter().any(|m| m.contains(addr)), "{addr:#x}");
                    }
                    Op::Mmap { addr, len, kind } => {
                        let m = Mapping { addr, len, kind };
                        assert_eq!(kind, VmaKind::Anon);
                        assert!(w.insert_chunks(t).contains(&m));
                        live.push(m);
                        mapped.push(m);
                    }
                    other => panic!("unexpected {other:?}"),
                }
            }
        }
        // Every chunk of every thread got mapped, once.
        let all_chunks: usize = (0..nr_threads).map(|t| w.insert_chunks(t).len()).sum();
        assert_eq!(mapped.len(), d.mappings.len() + all_chunks);
        mapped.sort_by_key(|m| m.addr);
        for pair in mapped.windows(2) {
            assert!(pair[0].end() < pair[1].addr, "mappings overlap or touch");
        }
        let bytes: u64 = mapped.iter().map(|m| m.len).sum();
        assert_eq!(d.shape.footprint_bytes, bytes);
        assert_eq!(w.expected_accesses(), Some(n));
    }

    #[test]
    fn footprint_mappings_and_access_count_for_every_mix() {
        for mix in ALL {
            let mut cfg = small(mix, 3_000, 40_000, 3);
            cfg.insert_chunk_mib = 1;
            let mut w = Ycsb::new(&cfg, 1);
            if mix == YcsbMix::D {
                // ~2000 inserts over 3 threads at 1024 records per chunk.
                assert!((0..3).all(|t| !w.insert_chunks(t).is_empty()));
            } else {
                assert!((0..3).all(|t| w.insert_chunks(t).is_empty()));
            }
            check_structure(&mut w);
        }
    }

    #[test]
    fn operation_proportions_match_each_mix() {
        for mix in ALL {
            let mut cfg = small(mix, 2_000, 200_000, 1);
            cfg.gap_ns = 40;
            let w = &mut Ycsb::new(&cfg, 2);
            let d = drain(w);
            let (_, ops) = parse(w, &d.streams[0][0], 2_000);
            assert_eq!(ops.len(), 200_000);
            let c = counts(&ops);
            let (read_p, other) = mix.proportions();
            let share =
                |k: YcsbOp| *c.get(&format!("{k:?}")).unwrap_or(&0) as f64 / ops.len() as f64;
            assert!(
                (share(YcsbOp::Read) - read_p).abs() < 0.01,
                "{mix:?}: {c:?}"
            );
            assert!(
                (share(other) - (1.0 - read_p)).abs() < 0.01,
                "{mix:?}: {c:?}"
            );
            assert_eq!(c.len(), if read_p == 1.0 || read_p == 0.0 { 1 } else { 2 });
        }
    }

    #[test]
    fn read_modify_write_reads_then_writes_the_same_record() {
        let mut cfg = small(YcsbMix::F, 2_000, 50_000, 1);
        cfg.lines_per_op = 3;
        let w = &mut Ycsb::new(&cfg, 3);
        let d = drain(w);
        let (_, ops) = parse(w, &d.streams[0][0], 2_000);
        let mut rmw = 0;
        for p in &ops {
            let key = (p.lines[0] - w.records().addr) / 1024;
            assert_eq!(p.bucket, w.bucket_addr(key));
            let expect: Vec<u64> = (0..3).map(|l| w.record_addr(key) + l * 64).collect();
            assert_eq!(p.lines, expect);
            if p.kind == YcsbOp::ReadModifyWrite {
                assert_eq!(p.written, p.lines);
                rmw += 1;
            }
        }
        assert!(rmw > 20_000, "{rmw}");
    }

    #[test]
    fn read_only_c_key_popularity_follows_zipf_theta() {
        let cfg = small(YcsbMix::C, 100_000, 2_000_000, 1);
        let w = &mut Ycsb::new(&cfg, 4);
        let d = drain(w);
        // C's operations are all reads of 1 + L accesses: count the record hits of
        // the two ranks directly (the stream's shape is checked by the other tests).
        let (hot0, hot9) = (
            w.record_addr(w.key_of_rank(0)),
            w.record_addr(w.key_of_rank(9)),
        );
        let (mut c0, mut c9, mut n) = (0u64, 0u64, 0u64);
        for op in crate::testutil::accesses(&d.streams[0][0])
            .skip(2 * 100_000)
            .collect::<Vec<_>>()
            .chunks(3)
        {
            assert!(w.index().contains(op[0].0) && !op[1].1);
            n += 1;
            c0 += u64::from(op[1].0 == hot0);
            c9 += u64::from(op[1].0 == hot9);
        }
        assert_eq!(n, 2_000_000);
        let measured = c0 as f64 / c9 as f64;
        let expected = w.zipf.probability(0) / w.zipf.probability(9); // 10^theta
        assert!(
            (measured / expected - 1.0).abs() < 0.05,
            "rank0/rank9 {measured} vs Zipf {expected}"
        );
        let share0 = c0 as f64 / n as f64;
        assert!((share0 / w.zipf.probability(0) - 1.0).abs() < 0.02);
    }

    #[test]
    fn latest_distribution_of_d_favours_recent_inserts() {
        let mut cfg = small(YcsbMix::D, 20_000, 400_000, 1);
        cfg.insert_chunk_mib = 2;
        let w = &mut Ycsb::new(&cfg, 5);
        let d = drain(w);
        let (maps, ops) = parse(w, &d.streams[0][0], 20_000);
        assert_eq!(maps, w.insert_chunks(0).to_vec());
        assert_eq!(w.records_per_chunk(), 2048);
        let mut view = 20_000u64;
        let mut ages = Vec::new();
        for p in &ops {
            let idx = w.view_index(0, p.lines[0]).expect("a record start");
            if p.kind == YcsbOp::Insert {
                // Inserts append in order at the end of the view.
                assert_eq!(idx, view);
                view += 1;
            } else {
                assert!(idx < view);
                ages.push(view - 1 - idx);
            }
        }
        let inserted = view - 20_000;
        assert!((inserted as f64 / 400_000.0 - 0.05).abs() < 0.01);
        assert_eq!(maps.len() as u64, inserted.div_ceil(2048));
        let n = ages.len() as f64;
        let frac =
            |pred: &dyn Fn(u64) -> bool| ages.iter().filter(|&&a| pred(a)).count() as f64 / n;
        // The newest record is the most popular: Zipf's rank-0 share of ~20k-40k keys.
        let newest = frac(&|a| a == 0);
        let z = Zipfian::new(30_000, 0.99);
        assert!((newest / z.probability(0) - 1.0).abs() < 0.1, "{newest}");
        // Reads concentrate on recent inserts: the newest 1% of keys get far more
        // than 1% of reads, and popularity falls with age.
        assert!(frac(&|a| a < 300) > 0.5, "{}", frac(&|a| a < 300));
        assert!(frac(&|a| a < 10) > frac(&|a| (10..20).contains(&a)) * 3.0);
        // Reads of inserted records: a small fraction of the store, most of the reads.
        let of_inserted = ages.len()
            - ops
                .iter()
                .filter(|p| p.kind == YcsbOp::Read && w.records().contains(p.lines[0]))
                .count();
        assert!(of_inserted as f64 / n > 0.5);
    }

    #[test]
    fn validate_names_the_bad_field() {
        let bad = |f: &dyn Fn(&mut YcsbConfig), field: &str| {
            let mut c = YcsbConfig::default();
            f(&mut c);
            let e = c.validate().unwrap_err();
            assert!(e.to_string().contains(field), "{e:?} should name {field}");
        };
        bad(&|c| c.nr_records = 0, "nr_records");
        bad(&|c| c.record_bytes = 100, "record_bytes");
        bad(&|c| c.record_bytes = 8192, "record_bytes");
        bad(&|c| c.lines_per_op = 0, "lines_per_op");
        bad(&|c| c.lines_per_op = 17, "lines_per_op");
        bad(&|c| c.theta = 1.0, "theta");
        bad(&|c| c.theta = f64::NAN, "theta");
        bad(&|c| c.insert_chunk_mib = 0, "insert_chunk_mib");
        bad(&|c| c.scale = 0.0, "scale");
        bad(&|c| c.nr_threads = 0, "nr_threads");
        bad(&|c| c.mlp = 0.0, "mlp");
        bad(&|c| c.nr_records = 1 << 40, "nr_records");
        bad(
            &|c| {
                c.mix = YcsbMix::D;
                c.nr_ops = 1 << 45;
            },
            "nr_ops",
        );
        YcsbConfig::default().validate().unwrap();
        let mix: YcsbConfig = serde_json::from_str(r#"{"mix": "f"}"#).unwrap();
        assert_eq!(mix.mix, YcsbMix::F);
        assert!(serde_json::from_str::<YcsbConfig>(r#"{"mix": "e"}"#).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn any_valid_config_stays_inside_its_mappings(
            mix_i in 0usize..6,
            nr_records in 1u64..3000,
            record_lines in 1u64..=64,
            line_frac in 0.0f64..=1.0,
            nr_ops in 0u64..4000,
            nr_threads in 1u32..4,
            theta in 0.01f64..0.999,
            scrambled in any::<bool>(),
            scale in 0.05f64..2.0,
        ) {
            let cfg = YcsbConfig {
                mix: ALL[mix_i],
                nr_records,
                record_bytes: record_lines * 64,
                lines_per_op: 1 + (line_frac * (record_lines - 1) as f64) as u32,
                nr_ops,
                nr_threads,
                theta,
                scrambled,
                insert_chunk_mib: 1,
                scale,
                ..YcsbConfig::default()
            };
            prop_assert!(cfg.validate().is_ok());
            check_structure(&mut Ycsb::new(&cfg, 5));
        }
    }
}
