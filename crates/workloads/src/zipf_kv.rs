//! `zipf-kv`: YCSB-style point lookups in a hash-indexed store of fixed-size records.
//!
//! The store is the shared hash-indexed layout of [`crate::kv`]: a hash index of
//! `nr_records` 8-byte buckets (one bucket per record: a load factor of 1) and a record
//! array of `nr_records × record_bytes`, each its own anonymous mapping.
//!
//! Stream of each thread:
//! 1. **load**: its contiguous share of the keys, in order; per record one write of
//!    the record's first line and one write of its index bucket (see [`crate::kv`]
//!    for why one line is enough).
//! 2. **operations**: its share of `nr_ops`. Each picks a key from a scrambled
//!    zipfian (YCSB's default request distribution, see [`crate::zipf`]), reads the
//!    key's index bucket (after `gap_ns` of request processing), then the first
//!    `lines_per_op` lines of the record. With probability `1 - read_proportion` the
//!    operation is an update and *writes* the record's first line instead of reading
//!    it, so every operation makes exactly `1 + lines_per_op` accesses.

use rand::distributions::{Bernoulli, Distribution};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use tierkit_core::{
    ComputeCarry, ConfigError, Op, ProcessShape, RegionSampler, Workload, WorkloadShape, CACHE_LINE,
};

use crate::common;
use crate::kept::{gap_after, skip_to_kept, AliasTable};
use crate::kv::{self, KvStore};
use crate::layout::{Layout, Mapping};
use crate::zipf::{fnv1a64, Zipfian};
use crate::{thread_rng, BATCH_OPS};
#[cfg(test)]
use tierkit_core::PAGE_SIZE;

const NAME: &str = "zipf-kv";
pub use crate::kv::BUCKET_BYTES;

/// Configuration of [`ZipfKv`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ZipfKvConfig {
    /// Number of records before `scale`. Default 4 Mi (4,194,304), i.e. a 4 GiB
    /// record array at 1 KiB per record, plus a 32 MiB index.
    pub nr_records: u64,
    /// Bytes per record: a multiple of 64 in [64, 4096]. Default 1024 (YCSB's ten
    /// 100-byte fields plus key and header, rounded to lines).
    pub record_bytes: u64,
    /// Number of operations before `scale`, split evenly over the threads. Default
    /// 40 M, i.e. 120 M accesses at 3 per operation, plus 8 M load writes.
    pub nr_ops: u64,
    /// Zipfian skew, in (0, 1). Default 0.99 (YCSB's zipfian constant).
    pub theta: f64,
    /// Cache lines of the record each operation touches: the line with the key and
    /// header, then the following ones. Default 2. At most `record_bytes / 64`.
    pub lines_per_op: u32,
    /// Fraction of operations that are reads, in [0, 1]. Default 1.0 (YCSB-C,
    /// read-only); 0.95 is YCSB-B, 0.5 YCSB-A.
    pub read_proportion: f64,
    /// Scatter hot keys over the key space by hashing the zipfian rank (YCSB's
    /// scrambled zipfian). Default true; false puts the hottest keys at the start of
    /// the record array, where first-touch placement also puts its first pages.
    pub scrambled: bool,
    /// Compute time before each operation's first access (request parsing, hashing,
    /// reply), in ns. Default 50.
    pub gap_ns: u32,
    /// Multiplies `nr_records` and `nr_ops` together. Default 1.0.
    pub scale: f64,
    /// Number of threads. Default 1.
    pub nr_threads: u32,
    /// Memory-level parallelism. Default 2.0: within one operation the record read
    /// depends on the bucket read (a pointer chase), so only the lines of one record
    /// and the start of the next request overlap.
    pub mlp: f64,
}

impl Default for ZipfKvConfig {
    fn default() -> Self {
        ZipfKvConfig {
            nr_records: 4 << 20,
            record_bytes: 1024,
            nr_ops: 40_000_000,
            theta: 0.99,
            lines_per_op: 2,
            read_proportion: 1.0,
            scrambled: true,
            gap_ns: 50,
            scale: 1.0,
            nr_threads: 1,
            mlp: 2.0,
        }
    }
}

impl ZipfKvConfig {
    /// Check every field; the error names the field and its valid range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        common::check_positive(NAME, "nr_records", self.nr_records)?;
        kv::check_record_bytes(NAME, self.record_bytes)?;
        kv::check_lines_per_op(NAME, self.lines_per_op, self.record_bytes)?;
        if !(self.theta > 0.0 && self.theta < 1.0) {
            return Err(format!("{NAME}.theta must be in (0, 1), got {}", self.theta).into());
        }
        common::check_unit(NAME, "read_proportion", self.read_proportion)?;
        common::check_common(NAME, self.scale, self.nr_threads, self.mlp)?;
        common::check_footprint(
            NAME,
            "nr_records",
            self.nr_records as f64 * self.scale * (self.record_bytes + BUCKET_BYTES) as f64,
        )
    }
}

/// Per-thread progress.
#[derive(Debug, Clone)]
struct ThreadState {
    rng: Xoshiro256PlusPlus,
    /// Next key to load, and the end of the thread's share.
    load_next: u64,
    load_end: u64,
    /// Operations still to generate.
    ops_left: u64,
    /// Compute of the operations a restricted stream dropped, for the next kept one.
    carry: ComputeCarry,
}

/// The zipfian key-value generator (see the module docs).
#[derive(Debug, Clone)]
pub struct ZipfKv {
    store: KvStore,
    nr_records: u64,
    lines_per_op: u64,
    zipf: Zipfian,
    scrambled: bool,
    read: Bernoulli,
    gap_ns: u32,
    nr_threads: u32,
    mlp: f64,
    expected_accesses: u64,
    threads: Vec<ThreadState>,
    /// Set by [`Workload::restrict_to`]: generate only the sampled regions.
    restricted: Option<Restriction>,
}

/// Restricted generation keeps one entry per kept rank; beyond this many (about
/// 2 · rate · nr_records) the workload lets the machine filter instead, to bound the
/// table's memory (16 bytes per entry).
const MAX_KEPT_RANKS: u64 = 8 << 20;

/// What a sampled zipf-kv needs to draw kept operations directly (see [`crate::kept`]).
#[derive(Debug, Clone)]
struct Restriction {
    sampler: RegionSampler,
    /// Every rank whose bucket or record a kept region holds, as
    /// `rank << 2 | bucket_kept << 1 | record_kept`, in rank order.
    ranks: Vec<u64>,
    /// Draws an entry of `ranks` by its probability under the sampler's law (`None`
    /// when no key lives in a kept region, so every operation is dropped).
    table: Option<AliasTable>,
    /// Probability that one operation of the full stream touches a kept region.
    q: f64,
}

impl ZipfKv {
    /// Build the generator for `cfg` with `seed`.
    ///
    /// # Panics
    /// If `cfg` does not pass [`ZipfKvConfig::validate`].
    pub fn new(cfg: &ZipfKvConfig, seed: u64) -> Self {
        if let Err(e) = cfg.validate() {
            panic!("invalid zipf-kv config: {e}");
        }
        let nr_records = common::scaled(cfg.nr_records, cfg.scale).max(1);
        let nr_ops = common::scaled(cfg.nr_ops, cfg.scale);
        // One bucket per record: a load factor of 1.
        let store = KvStore::new(&mut Layout::new(), nr_records, nr_records, cfg.record_bytes);
        let lines_per_op = u64::from(cfg.lines_per_op);
        let threads = (0..cfg.nr_threads as usize)
            .map(|t| {
                let (load_next, load_end) = common::share(nr_records, cfg.nr_threads, t);
                let (lo, hi) = common::share(nr_ops, cfg.nr_threads, t);
                ThreadState {
                    rng: thread_rng(seed, 0, t),
                    load_next,
                    load_end,
                    ops_left: hi - lo,
                    carry: ComputeCarry::default(),
                }
            })
            .collect();
        ZipfKv {
            store,
            nr_records,
            lines_per_op,
            zipf: Zipfian::new(nr_records, cfg.theta),
            scrambled: cfg.scrambled,
            read: Bernoulli::new(cfg.read_proportion).expect("validated probability"),
            gap_ns: cfg.gap_ns,
            nr_threads: cfg.nr_threads,
            mlp: cfg.mlp,
            expected_accesses: 2 * nr_records + nr_ops * (1 + lines_per_op),
            threads,
            restricted: None,
        }
    }

    /// The hash index's mapping.
    pub fn index(&self) -> Mapping {
        self.store.index
    }

    /// The record array's mapping.
    pub fn records(&self) -> Mapping {
        self.store.records
    }

    /// Number of records (after `scale`).
    pub fn nr_records(&self) -> u64 {
        self.nr_records
    }

    /// Address of `key`'s index bucket.
    #[inline]
    pub fn bucket_addr(&self, key: u64) -> u64 {
        self.store.bucket_addr(key)
    }

    /// Address of the first byte of `key`'s record.
    #[inline]
    pub fn record_addr(&self, key: u64) -> u64 {
        self.store.record_addr(key)
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
}

impl Workload for ZipfKv {
    fn shape(&self) -> WorkloadShape {
        WorkloadShape {
            processes: vec![ProcessShape {
                name: NAME.to_string(),
                nr_threads: self.nr_threads,
                mlp: self.mlp,
            }],
            footprint_bytes: self.store.index.len + self.store.records.len,
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
        if self.restricted.is_some() {
            return self.fill_restricted(thread, out);
        }
        out.reserve(BATCH_OPS);
        let mut t = self.threads[thread].clone();

        // Load: record header write, then index bucket write, key by key.
        let n_load = (t.load_end - t.load_next).min(BATCH_OPS as u64 / 2);
        self.store.push_load(t.load_next, t.load_next + n_load, out);
        t.load_next += n_load;

        // Operations in the rest of the batch.
        let per_op = 1 + self.lines_per_op;
        let room = (BATCH_OPS - out.len()) as u64 / per_op;
        let n_ops = t.ops_left.min(room);
        for _ in 0..n_ops {
            let key = self.key_of_rank(self.zipf.sample(&mut t.rng));
            out.push(Op::Access {
                addr: self.bucket_addr(key),
                write: false,
                gap_ns: self.gap_ns,
            });
            let rec = self.record_addr(key);
            out.push(Op::Access {
                addr: rec,
                write: !self.read.sample(&mut t.rng),
                gap_ns: 0,
            });
            for line in 1..self.lines_per_op {
                out.push(Op::Access {
                    addr: rec + line * CACHE_LINE,
                    write: false,
                    gap_ns: 0,
                });
            }
        }
        t.ops_left -= n_ops;
        self.threads[thread] = t;
    }

    fn restrict_to(&mut self, sampler: &RegionSampler) -> bool {
        // Its kept elements are listed by region; under strata by mapping the
        // stream filter decides instead.
        if sampler.by_mapping() {
            return false;
        }
        let kept_share = 1.0 / (sampler.keeps_one_in() as f64);
        if 2.0 * kept_share * self.nr_records as f64 > MAX_KEPT_RANKS as f64 {
            return false;
        }
        let (mut ranks, mut weights) = (Vec::new(), Vec::new());
        for rank in 0..self.nr_records {
            let key = self.key_of_rank(rank);
            let bucket = sampler.keeps(0, self.bucket_addr(key));
            let record = sampler.keeps(0, self.record_addr(key));
            if bucket || record {
                let (lo, hi) = self.zipf.rank_interval(rank);
                ranks.push(rank << 2 | (bucket as u64) << 1 | record as u64);
                weights.push(hi - lo);
            }
        }
        let table = AliasTable::new(&weights);
        self.restricted = Some(Restriction {
            sampler: sampler.clone(),
            ranks,
            q: table.as_ref().map_or(0.0, AliasTable::total),
            table,
        });
        true
    }

    fn expected_accesses(&self) -> Option<u64> {
        if self.restricted.is_some() {
            return None;
        }
        Some(self.expected_accesses)
    }
}

impl ZipfKv {
    /// [`Workload::fill`] of a restricted zipf-kv: the full stream's law with the
    /// unsampled regions' accesses left out. The load writes only kept records and
    /// buckets; operations jump over those that touch no kept region by a geometric
    /// skip, then draw a kept rank with the sampler's probability conditioned on being
    /// kept and emit its kept accesses (a record read keeps no gap when its bucket
    /// read, which carries the operation's gap, is dropped, unless compute is
    /// carried).
    fn fill_restricted(&mut self, thread: usize, out: &mut Vec<Op>) {
        let r = self.restricted.as_ref().expect("restricted");
        let t = &mut self.threads[thread];
        out.reserve(BATCH_OPS);
        let per_op = (1 + self.lines_per_op) as usize;
        let carried = r.sampler.carries_compute();
        while t.load_next < t.load_end && out.len() + 2 <= BATCH_OPS {
            let key = t.load_next;
            // The load's order: record header, then bucket.
            for addr in [self.store.record_addr(key), self.store.bucket_addr(key)] {
                if r.sampler.keeps(0, addr) {
                    out.push(Op::Access {
                        addr,
                        write: true,
                        gap_ns: 0,
                    });
                }
            }
            t.load_next += 1;
        }
        while t.ops_left > 0 && out.len() + per_op <= BATCH_OPS {
            let skip = skip_to_kept(&mut t.rng, r.q);
            let Some(table) = r.table.as_ref().filter(|_| skip <= t.ops_left) else {
                t.ops_left = 0;
                break;
            };
            t.ops_left -= skip;
            let entry = r.ranks[table.sample(&mut t.rng)];
            let key = if self.scrambled {
                fnv1a64(entry >> 2) % self.nr_records
            } else {
                entry >> 2
            };
            // The operation's gap rides on its bucket read, or when that is dropped
            // and compute is carried, on its record read.
            let gap_ns = gap_after(&mut t.carry, carried, skip - 1, self.gap_ns);
            if entry & 2 != 0 {
                out.push(Op::Access {
                    addr: self.store.bucket_addr(key),
                    write: false,
                    gap_ns,
                });
            }
            if entry & 1 != 0 {
                let rec = self.store.record_addr(key);
                out.push(Op::Access {
                    addr: rec,
                    write: !self.read.sample(&mut t.rng),
                    gap_ns: if entry & 2 == 0 && carried { gap_ns } else { 0 },
                });
                for line in 1..self.lines_per_op {
                    out.push(Op::Access {
                        addr: rec + line * CACHE_LINE,
                        write: false,
                        gap_ns: 0,
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{accesses, check_structure, drain};
    use proptest::prelude::*;

    fn small(nr_records: u64, nr_ops: u64, nr_threads: u32) -> ZipfKvConfig {
        ZipfKvConfig {
            nr_records,
            nr_ops,
            nr_threads,
            ..ZipfKvConfig::default()
        }
    }

    /// The operation-phase accesses of one thread's stream, grouped per operation.
    fn operations(w: &ZipfKv, stream: &[Op], nr_loaded: u64) -> Vec<Vec<(u64, bool, u32)>> {
        let acc: Vec<_> = accesses(stream).skip(2 * nr_loaded as usize).collect();
        acc.chunks((1 + w.lines_per_op) as usize)
            .map(|c| c.to_vec())
            .collect()
    }

    #[test]
    fn restricted_generation_keeps_the_filtered_law() {
        let sampler = RegionSampler::new(tierkit_core::SpaceScale::new(1.0 / 4.0), 3);
        for scrambled in [true, false] {
            let cfg = ZipfKvConfig {
                scrambled,
                read_proportion: 0.8,
                lines_per_op: 3,
                ..small(131_072, 1_000_000, 2)
            };
            crate::testutil::check_restricted(&|| Box::new(ZipfKv::new(&cfg, 6)), &sampler, 0.01);
        }
    }

    #[test]
    fn same_seed_same_stream_different_seed_different_stream() {
        let cfg = small(10_000, 20_000, 2);
        let a = drain(&mut ZipfKv::new(&cfg, 7));
        let b = drain(&mut ZipfKv::new(&cfg, 7));
        let c = drain(&mut ZipfKv::new(&cfg, 8));
        assert_eq!(a.streams, b.streams);
        assert_ne!(a.streams, c.streams);
        assert_ne!(a.streams[0][0], a.streams[0][1]);
    }

    #[test]
    fn footprint_mappings_and_access_count() {
        let cfg = small(10_000, 5_000, 3);
        let mut w = ZipfKv::new(&cfg, 1);
        let d = drain(&mut w);
        assert_eq!(d.mappings, vec![w.index(), w.records()]);
        assert_eq!(
            w.index().len,
            (10_000 * 8u64).div_ceil(PAGE_SIZE) * PAGE_SIZE
        );
        assert_eq!(w.records().len, 10_000 * 1024);
        check_structure(&w, &d);
    }

    #[test]
    fn load_writes_each_record_and_bucket_and_touches_every_page() {
        let cfg = small(20_000, 0, 3);
        let mut w = ZipfKv::new(&cfg, 2);
        let d = drain(&mut w);
        let mut records = Vec::new();
        let mut pages = std::collections::BTreeSet::new();
        for stream in &d.streams[0] {
            let acc: Vec<_> = accesses(stream).collect();
            for pair in acc.chunks(2) {
                let (ra, rw, _) = pair[0];
                let (ba, bw, _) = pair[1];
                assert!(rw && bw);
                let key = (ra - w.records().addr) / 1024;
                assert_eq!(ra, w.record_addr(key));
                assert_eq!(ba, w.bucket_addr(key));
                records.push(key);
                pages.insert(ra / PAGE_SIZE);
                pages.insert(ba / PAGE_SIZE);
            }
        }
        assert_eq!(records, (0..20_000).collect::<Vec<_>>());
        assert_eq!(
            pages.len() as u64,
            (w.index().len + w.records().len) / PAGE_SIZE
        );
    }

    #[test]
    fn operations_read_bucket_then_record_lines() {
        let mut cfg = small(5_000, 20_000, 1);
        cfg.lines_per_op = 3;
        let mut w = ZipfKv::new(&cfg, 3);
        let d = drain(&mut w);
        let ops = operations(&w, &d.streams[0][0], 5_000);
        assert_eq!(ops.len(), 20_000);
        for op in &ops {
            let rec = op[1].0;
            let key = (rec - w.records().addr) / 1024;
            assert_eq!(rec, w.record_addr(key));
            assert_eq!(op[0], (w.bucket_addr(key), false, 50));
            for (l, &(addr, write, gap)) in op[1..].iter().enumerate() {
                assert_eq!((addr, write, gap), (rec + l as u64 * 64, false, 0));
            }
        }
    }

    #[test]
    fn update_share_matches_read_proportion() {
        let mut cfg = small(1_000, 400_000, 1);
        cfg.read_proportion = 0.7;
        let mut w = ZipfKv::new(&cfg, 4);
        let d = drain(&mut w);
        let ops = operations(&w, &d.streams[0][0], 1_000);
        let updates = ops.iter().filter(|op| op[1].1).count() as f64;
        let share = updates / ops.len() as f64;
        assert!((share - 0.3).abs() < 0.01, "update share {share}");
        // Updates write only the record's first line.
        assert!(ops
            .iter()
            .all(|op| !op[0].1 && op[2..].iter().all(|a| !a.1)));
    }

    #[test]
    fn hottest_record_is_rank_zero_scrambled_or_not() {
        for scrambled in [true, false] {
            let mut cfg = small(100_000, 300_000, 1);
            cfg.scrambled = scrambled;
            let mut w = ZipfKv::new(&cfg, 5);
            let d = drain(&mut w);
            let mut counts = std::collections::BTreeMap::new();
            for op in operations(&w, &d.streams[0][0], 100_000) {
                *counts.entry(op[1].0).or_insert(0u64) += 1;
            }
            let (&hottest, &n) = counts.iter().max_by_key(|(_, &c)| c).unwrap();
            let hot_key = w.key_of_rank(0);
            assert_eq!(hottest, w.record_addr(hot_key), "scrambled={scrambled}");
            if !scrambled {
                assert_eq!(hot_key, 0);
            }
            let share = n as f64 / 300_000.0;
            let expected = w.zipf.probability(0);
            assert!(
                (share / expected - 1.0).abs() < 0.05,
                "{share} vs {expected}"
            );
        }
    }

    #[test]
    fn validate_names_the_bad_field() {
        let bad = |f: &dyn Fn(&mut ZipfKvConfig), field: &str| {
            let mut c = ZipfKvConfig::default();
            f(&mut c);
            let e = c.validate().unwrap_err();
            assert!(e.to_string().contains(field), "{e:?} should name {field}");
        };
        bad(&|c| c.nr_records = 0, "nr_records");
        bad(&|c| c.record_bytes = 0, "record_bytes");
        bad(&|c| c.record_bytes = 100, "record_bytes");
        bad(&|c| c.record_bytes = 8192, "record_bytes");
        bad(&|c| c.lines_per_op = 0, "lines_per_op");
        bad(&|c| c.lines_per_op = 17, "lines_per_op");
        bad(&|c| c.theta = 1.0, "theta");
        bad(&|c| c.theta = 0.0, "theta");
        bad(&|c| c.read_proportion = 1.2, "read_proportion");
        bad(&|c| c.read_proportion = -0.2, "read_proportion");
        bad(&|c| c.scale = -2.0, "scale");
        bad(&|c| c.nr_threads = 0, "nr_threads");
        bad(&|c| c.mlp = 100.0, "mlp");
        bad(&|c| c.nr_records = 1 << 40, "nr_records");
        ZipfKvConfig::default().validate().unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn any_valid_config_stays_inside_its_mappings(
            nr_records in 1u64..5000,
            record_lines in 1u64..=64,
            line_frac in 0.0f64..=1.0,
            nr_ops in 0u64..3000,
            nr_threads in 1u32..5,
            theta in 0.01f64..0.999,
            read_proportion in 0.0f64..=1.0,
            scrambled in any::<bool>(),
            scale in 0.05f64..2.0,
        ) {
            let cfg = ZipfKvConfig {
                nr_records,
                record_bytes: record_lines * 64,
                lines_per_op: 1 + (line_frac * (record_lines - 1) as f64) as u32,
                nr_ops,
                nr_threads,
                theta,
                read_proportion,
                scrambled,
                scale,
                ..ZipfKvConfig::default()
            };
            prop_assert!(cfg.validate().is_ok());
            let mut w = ZipfKv::new(&cfg, 5);
            let d = drain(&mut w);
            check_structure(&w, &d);
        }
    }
}
