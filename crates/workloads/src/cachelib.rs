//! `cachelib`: a CacheLib-like DRAM object cache serving a CDN-style request mix
//! (FreqTier's CacheLib CDN workload, FreqTier §VI-C).
//!
//! The real benchmark is Meta's cachebench driving CacheLib with the CDN popularity,
//! size and operation distributions shipped with CacheLib. Those distribution files
//! are not public in a form we can use, so this generator reproduces their documented
//! *shape* and CacheLib's memory layout:
//!
//! **Requests.** With probability `one_hit_wonder_ratio` a request asks for a
//! brand-new object that will never be asked for again (a one-hit wonder: CDN caches
//! see many); otherwise it asks for object `r` of a catalogue of `nr_objects`, `r`
//! drawn from YCSB's zipfian with skew `popularity_theta`. The default 0.685 is set so
//! that the top 20% of catalogue objects receive 60% of catalogue requests, the
//! figure FreqTier §I quotes for Meta's CDN cache (from the CacheLib paper, OSDI '20).
//!
//! **Object sizes.** Each object's size (the whole item: CacheLib's header, key and
//! value) is a fixed function of its key, drawn from a bounded Pareto distribution
//! on `[min_object_bytes, max_object_bytes]` with shape `size_pareto_alpha`:
//! `P(size > s) = ((L/s)^α − (L/H)^α) / (1 − (L/H)^α)`. CDN object sizes are
//! heavy-tailed, spanning orders of magnitude (Berger et al., AdaptSize, NSDI '17);
//! at the defaults (256 B to 1 MiB, α = 0.8) the median is ≈ 610 B, the mean
//! ≈ 4.3 KiB, 1.2% of objects exceed 64 KiB and they hold over half the bytes.
//! Popularity and size are independent.
//!
//! **Memory layout, as CacheLib's.** Two mappings, both made at start-up:
//! - the cache memory (`cache_mib`), carved into 4 MiB slabs (CacheLib's
//!   `Slab::kSize`); a slab is given to one allocation class the first time that
//!   class needs memory, in address order, and never moves to another class (no pool
//!   rebalancing). The classes are CacheLib's `generateAllocSizes` with cachebench's
//!   defaults: factor `alloc_factor` (1.5) from 64 B up to `max_object_bytes`, with
//!   "reduce fragmentation" (each size raised to the largest one that keeps its
//!   number of chunks per slab). An object lives in the smallest class that fits it.
//! - the hash table: 4-byte buckets (CacheLib's compressed pointers), a power of two
//!   at least the number of objects the cache can hold.
//!
//! **A request's accesses.** After `gap_ns` of request handling:
//! 1. read the key's hash bucket;
//! 2. **hit**: read the object — its first `read_lines` cache lines (header and key
//!    first), then one line at the start of every further 4 KiB page it spans. A GET
//!    really copies every line; touching each page once keeps the accesses per
//!    request bounded while every page the object occupies is touched, which is what
//!    page placement depends on. If the item has not been moved up for a while it
//!    moves to the head of its class's LRU, writing its own header, its two
//!    neighbours' and the old head's (the list is intrusive, in the item headers).
//!    "A while" is CacheLib's dynamic refresh: `lruRefreshRatio` (0.1) × the age of
//!    the LRU tail, ages counted in the shard's requests. (CacheLib also never
//!    relinks within `lruRefreshTime`, 60 s; a generator has no clock, so that floor
//!    is left out.) Hot items are therefore relinked rarely, as in CacheLib.
//! 3. **miss**: insert the object. Allocate a chunk of its class: the class's current
//!    slab if it has room, else a free slab, else evict the class's LRU tail (LRU per
//!    allocation class, as CacheLib's MMLru per allocation class): read the victim's
//!    header, write its bucket (hash unlink) and the new tail's header (LRU unlink).
//!    Then write the new object (the same lines and pages as a read), the old LRU
//!    head's header (LRU link) and the key's bucket (hash link). If the class has no
//!    slab and none is free, the insert fails (as a CacheLib allocation does).
//!
//! Hash chains are taken to have length one (the table has a bucket per object).
//!
//! **Threads are shards.** Each thread owns a contiguous share of the slabs, of the
//! hash table and of the catalogue, as a sharded cache behind a key-hash load
//! balancer: a thread's stream must depend only on its own history (the
//! determinism rule), which a cache shared by threads would break.
//!
//! **Length.** Hits and misses make different numbers of accesses, so the run is
//! measured in accesses: each thread stops after its share of `nr_accesses` (its
//! last request may be cut short). The cache starts empty: the first requests all
//! miss and fill it, slab by slab in address order, which decides first-touch
//! placement (a cache warming up).

use std::collections::VecDeque;

use rand::RngCore;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use tierkit_core::{
    ConfigError, Op, ProcessShape, VmaKind, Workload, WorkloadShape, CACHE_LINE, PAGE_SIZE,
};

use crate::common::{self, prefetch};
use crate::layout::{Layout, Mapping};
use crate::zipf::Zipfian;
use crate::{thread_rng, BATCH_OPS};

const NAME: &str = "cachelib";
/// CacheLib's slab size (`Slab::kSize`).
pub const SLAB_BYTES: u64 = 4 << 20;
/// Bytes per hash-table bucket (a CacheLib `CompressedPtr`).
pub const BUCKET_BYTES: u64 = 4;
/// Alignment of CacheLib allocation sizes (`MemoryAllocator::kAlignment`).
const ALLOC_ALIGN: u32 = 8;
/// Smallest allocation class (cachebench's `minAllocSize`).
pub const MIN_ALLOC_BYTES: u32 = 64;
/// Mixed into a key to derive its object size.
const SIZE_SALT: u64 = 0x7369_7a65_5f73_616c;
/// No item / no list link.
const NONE: u32 = u32::MAX;
/// Requests drawn ahead of the one being served, so the host can prefetch their
/// lookup state (generation speed only: requests never depend on the cache state,
/// so drawing them early changes nothing in the stream).
const LOOKAHEAD: usize = 32;
/// CacheLib's `lruRefreshRatio` (cachebench default): an item is moved to the LRU
/// head only if its last move is older than this fraction of the LRU tail's age.
const LRU_REFRESH_RATIO: f64 = 0.1;

/// Configuration of [`Cachelib`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CachelibConfig {
    /// Cache memory in MiB before `scale` (FreqTier: 256 GB). Default 4096. At least
    /// one 4 MiB slab per thread after `scale`.
    pub cache_mib: u64,
    /// Catalogue size: distinct objects that are requested repeatedly, before
    /// `scale`. Default 4 M, about 5× what the default cache holds (FreqTier scaled
    /// its catalogue up "for realistic hit ratios"). At least 1.
    pub nr_objects: u64,
    /// Zipfian skew of catalogue popularity, in (0, 1). Default 0.685: the top 20% of
    /// objects get 60% of catalogue requests (FreqTier §I, Meta CDN).
    pub popularity_theta: f64,
    /// Fraction of requests for a new object never requested again, in [0, 1).
    /// Default 0.1 (a choice: the sources give no figure for the request share).
    pub one_hit_wonder_ratio: f64,
    /// Smallest object (whole item) in bytes, in [64, max_object_bytes]. Default 256.
    pub min_object_bytes: u64,
    /// Largest object in bytes; also the largest allocation class (cachebench's
    /// `maxAllocSize`), in [min_object_bytes, 4 MiB]. Default 1 MiB.
    pub max_object_bytes: u64,
    /// Shape α of the bounded Pareto object-size distribution, in (0, 10]. Default 0.8
    /// (heavy-tailed: see the module docs).
    pub size_pareto_alpha: f64,
    /// Growth factor between allocation classes, in (1, 4]. Default 1.5
    /// (cachebench's `allocFactor`).
    pub alloc_factor: f64,
    /// Cache lines read (or written) at the start of an object, in [1, 64]; every
    /// further page it spans gets one access. Default 4.
    pub read_lines: u32,
    /// Compute time before each request's first access (parsing, hashing, reply),
    /// in ns. Default 100.
    pub gap_ns: u32,
    /// Accesses to generate before `scale`, split evenly over the threads. Default
    /// 120 M.
    pub nr_accesses: u64,
    /// Multiplies `cache_mib`, `nr_objects` and `nr_accesses` together. Default 1.0.
    pub scale: f64,
    /// Number of threads (cache shards). Default 1.
    pub nr_threads: u32,
    /// Memory-level parallelism. Default 2.0: the object access depends on the
    /// bucket read (a pointer chase), as in the key-value workloads.
    pub mlp: f64,
}

impl Default for CachelibConfig {
    fn default() -> Self {
        CachelibConfig {
            cache_mib: 4096,
            nr_objects: 4_000_000,
            popularity_theta: 0.685,
            one_hit_wonder_ratio: 0.1,
            min_object_bytes: 256,
            max_object_bytes: 1 << 20,
            size_pareto_alpha: 0.8,
            alloc_factor: 1.5,
            read_lines: 4,
            gap_ns: 100,
            nr_accesses: 120_000_000,
            scale: 1.0,
            nr_threads: 1,
            mlp: 2.0,
        }
    }
}

impl CachelibConfig {
    /// Check every field; the error names the field and its valid range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        common::check_positive(NAME, "cache_mib", self.cache_mib)?;
        common::check_positive(NAME, "nr_objects", self.nr_objects)?;
        if !(self.popularity_theta > 0.0 && self.popularity_theta < 1.0) {
            return Err(format!(
                "{NAME}.popularity_theta must be in (0, 1), got {}",
                self.popularity_theta
            )
            .into());
        }
        if !(0.0..1.0).contains(&self.one_hit_wonder_ratio) {
            return Err(format!(
                "{NAME}.one_hit_wonder_ratio must be in [0, 1), got {}",
                self.one_hit_wonder_ratio
            )
            .into());
        }
        if !(u64::from(MIN_ALLOC_BYTES)..=SLAB_BYTES).contains(&self.max_object_bytes) {
            return Err(format!(
                "{NAME}.max_object_bytes must be in [{MIN_ALLOC_BYTES}, {SLAB_BYTES}], got {}",
                self.max_object_bytes
            )
            .into());
        }
        if !(u64::from(MIN_ALLOC_BYTES)..=self.max_object_bytes).contains(&self.min_object_bytes) {
            return Err(format!(
                "{NAME}.min_object_bytes must be in [{MIN_ALLOC_BYTES}, max_object_bytes = {}], got {}",
                self.max_object_bytes, self.min_object_bytes
            ).into());
        }
        if !(self.size_pareto_alpha > 0.0 && self.size_pareto_alpha <= 10.0) {
            return Err(format!(
                "{NAME}.size_pareto_alpha must be in (0, 10], got {}",
                self.size_pareto_alpha
            )
            .into());
        }
        if !(self.alloc_factor > 1.0 && self.alloc_factor <= 4.0) {
            return Err(format!(
                "{NAME}.alloc_factor must be in (1, 4], got {}",
                self.alloc_factor
            )
            .into());
        }
        if !(1..=64).contains(&self.read_lines) {
            return Err(format!(
                "{NAME}.read_lines must be in [1, 64], got {}",
                self.read_lines
            )
            .into());
        }
        common::check_common(NAME, self.scale, self.nr_threads, self.mlp)?;
        let cache_bytes = self.cache_mib as f64 * self.scale * (1u64 << 20) as f64;
        common::check_footprint(NAME, "cache_mib", 2.0 * cache_bytes)?;
        let slabs = (cache_bytes / SLAB_BYTES as f64).floor();
        if slabs < f64::from(self.nr_threads) {
            return Err(format!(
                "{NAME}.cache_mib × scale must give at least one 4 MiB slab per thread ({} MiB), got {:.1} MiB",
                4 * self.nr_threads,
                cache_bytes / (1u64 << 20) as f64
            ).into());
        }
        common::check_footprint(
            NAME,
            "nr_objects",
            self.nr_objects as f64 * self.scale * 4.0,
        )
    }
}

/// CacheLib's `MemoryAllocator::generateAllocSizes(factor, max, min,
/// reduceFragmentation = true)` for 4 MiB slabs: the allocation class sizes, sorted.
pub fn alloc_sizes(factor: f64, max_bytes: u32, min_bytes: u32) -> Vec<u32> {
    let slab = SLAB_BYTES as u32;
    let align = |x: u32| x.div_ceil(ALLOC_ALIGN) * ALLOC_ALIGN;
    // The next size: grow by `factor` until the number of chunks per slab changes,
    // then take the largest size with that many chunks per slab.
    let next = |prev: u32| -> u32 {
        let mut size = prev;
        loop {
            let grown = align((f64::from(size) * factor) as u32).max(size + ALLOC_ALIGN);
            size = grown;
            if size > slab || slab / size != slab / prev {
                break;
            }
        }
        if size > slab {
            return size;
        }
        let max_same = slab / (slab / size);
        max_same - max_same % ALLOC_ALIGN
    };
    let mut sizes = Vec::new();
    let mut size = align(min_bytes);
    while size < max_bytes {
        if slab / size <= 1 {
            break;
        }
        sizes.push(size);
        size = next(size);
    }
    sizes.push(align(max_bytes));
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// The bounded Pareto object-size distribution (see the module docs).
#[derive(Debug, Clone, Copy)]
pub struct SizeDist {
    min: f64,
    max: f64,
    alpha: f64,
    /// `1 − (min/max)^α`.
    span: f64,
}

impl SizeDist {
    /// Sizes in `[min_bytes, max_bytes]` with shape `alpha`.
    pub fn new(min_bytes: u64, max_bytes: u64, alpha: f64) -> Self {
        let (min, max) = (min_bytes as f64, max_bytes as f64);
        SizeDist {
            min,
            max,
            alpha,
            span: 1.0 - (min / max).powf(alpha),
        }
    }

    /// `P(size > s)`.
    pub fn tail(&self, s: f64) -> f64 {
        if s < self.min {
            return 1.0;
        }
        if s >= self.max {
            return 0.0;
        }
        ((self.min / s).powf(self.alpha) - (self.min / self.max).powf(self.alpha)) / self.span
    }

    /// The mean size in bytes.
    pub fn mean(&self) -> f64 {
        let (l, h, a) = (self.min, self.max, self.alpha);
        let c = a * l.powf(a) / self.span;
        if (a - 1.0).abs() < 1e-9 {
            c * (h / l).ln()
        } else {
            c * (h.powf(1.0 - a) - l.powf(1.0 - a)) / (1.0 - a)
        }
    }

    /// The size at quantile `u` in `[0, 1)` (inverse CDF), whole bytes.
    #[inline]
    pub fn quantile(&self, u: f64) -> u64 {
        let s = self.min * (1.0 - u * self.span).powf(-1.0 / self.alpha);
        (s as u64).clamp(self.min as u64, self.max as u64)
    }

    /// The size of the object with global key `key` (a fixed function of the key).
    #[inline]
    pub fn size_of(&self, key: u64) -> u64 {
        let u = (common::mix64(key ^ SIZE_SALT) >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        self.quantile(u)
    }
}

/// Counters of one cache shard (or their sum).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Requests started.
    pub requests: u64,
    /// Requests that found their object.
    pub hits: u64,
    /// Requests that did not (each tries an insert).
    pub misses: u64,
    /// Items evicted to make room.
    pub evictions: u64,
    /// Inserts that found no memory (class without a slab, none free).
    pub alloc_failures: u64,
    /// Slabs given to classes so far.
    pub slabs_used: u64,
}

impl CacheStats {
    /// Hits over requests.
    pub fn hit_ratio(&self) -> f64 {
        self.hits as f64 / self.requests.max(1) as f64
    }
}

/// One cached object.
#[derive(Debug, Clone, Copy)]
struct Item {
    /// Global key.
    key: u64,
    /// First byte of its chunk.
    addr: u64,
    /// Object size in bytes.
    size: u32,
    /// Allocation class.
    class: u16,
    /// LRU neighbours (towards the head, towards the tail).
    prev: u32,
    next: u32,
    /// The shard's request count when the item was inserted or last moved to the
    /// LRU head (CacheLib's update time, in requests).
    update_req: u64,
}

/// One allocation class of a shard.
#[derive(Debug, Clone)]
struct Class {
    /// Chunk size.
    alloc_bytes: u64,
    /// Chunks per slab.
    per_slab: u64,
    /// Current slab's address, and chunks handed out of it (`per_slab` = full).
    slab_addr: u64,
    slab_used: u64,
    /// LRU list: most recently used at the head.
    head: u32,
    tail: u32,
}

/// One thread's cache shard and request stream.
#[derive(Debug, Clone)]
struct Shard {
    rng: Xoshiro256PlusPlus,
    accesses_left: u64,
    /// Catalogue keys are `catalogue_base..catalogue_base + nr_catalogue`.
    catalogue_base: u64,
    nr_catalogue: u64,
    /// Index into `Cachelib::zipfs`.
    zipf: usize,
    /// Next one-hit-wonder key (above every catalogue key, unique per thread).
    next_ohw: u64,
    /// Free slabs: `next_slab..end_slab` (indices into the cache region).
    next_slab: u64,
    end_slab: u64,
    /// This shard's buckets: `bucket_base..bucket_base + nr_buckets`.
    bucket_base: u64,
    nr_buckets: u64,
    /// Catalogue key − base → item, or `NONE`.
    loc: Vec<u32>,
    items: Vec<Item>,
    classes: Vec<Class>,
    stats: CacheStats,
    /// The next requests, already drawn (see `LOOKAHEAD`).
    pending: VecDeque<Request>,
}

/// A request: the global key and whether it is a one-hit wonder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Global key.
    pub key: u64,
    /// True for a never-repeated object.
    pub one_hit_wonder: bool,
}

/// The CacheLib CDN generator (see the module docs).
#[derive(Debug, Clone)]
pub struct Cachelib {
    region: Mapping,
    table: Mapping,
    sizes: SizeDist,
    class_bytes: Vec<u32>,
    zipfs: Vec<Zipfian>,
    ohw_below: u64,
    read_lines: u64,
    gap_ns: u32,
    nr_threads: u32,
    mlp: f64,
    expected_accesses: u64,
    shards: Vec<Shard>,
}

impl Cachelib {
    /// Build the generator for `cfg` with `seed`.
    ///
    /// # Panics
    /// If `cfg` does not pass [`CachelibConfig::validate`].
    pub fn new(cfg: &CachelibConfig, seed: u64) -> Self {
        if let Err(e) = cfg.validate() {
            panic!("invalid cachelib config: {e}");
        }
        let cache_bytes = common::scaled_bytes_from_mib(cfg.cache_mib, cfg.scale);
        let nr_slabs = cache_bytes / SLAB_BYTES;
        let nr_objects = common::scaled(cfg.nr_objects, cfg.scale).max(1);
        let nr_accesses = common::scaled(cfg.nr_accesses, cfg.scale);
        let sizes = SizeDist::new(
            cfg.min_object_bytes,
            cfg.max_object_bytes,
            cfg.size_pareto_alpha,
        );
        let class_bytes = alloc_sizes(
            cfg.alloc_factor,
            cfg.max_object_bytes as u32,
            MIN_ALLOC_BYTES,
        );
        // A bucket per object the cache can hold (CacheLib sizes its table up front).
        let nr_buckets = ((nr_slabs * SLAB_BYTES) as f64 / sizes.mean())
            .ceil()
            .max(f64::from(cfg.nr_threads)) as u64;
        let nr_buckets = nr_buckets.next_power_of_two();
        let mut layout = Layout::new();
        let region = layout.map(nr_slabs * SLAB_BYTES, VmaKind::Anon);
        let table = layout.map(nr_buckets * BUCKET_BYTES, VmaKind::Anon);

        let mut zipfs: Vec<Zipfian> = Vec::new();
        let shards = (0..cfg.nr_threads as usize)
            .map(|t| {
                let (cat_lo, cat_hi) = common::share(nr_objects, cfg.nr_threads, t);
                let n = (cat_hi - cat_lo).max(1);
                // Shares differ by at most one: build each distinct sampler once.
                let zipf = match zipfs.iter().position(|z| z.n() == n) {
                    Some(i) => i,
                    None => {
                        zipfs.push(Zipfian::new(n, cfg.popularity_theta));
                        zipfs.len() - 1
                    }
                };
                let (slab_lo, slab_hi) = common::share(nr_slabs, cfg.nr_threads, t);
                let (b_lo, b_hi) = common::share(nr_buckets, cfg.nr_threads, t);
                let (lo, hi) = common::share(nr_accesses, cfg.nr_threads, t);
                Shard {
                    rng: thread_rng(seed, 0, t),
                    accesses_left: hi - lo,
                    catalogue_base: cat_lo,
                    nr_catalogue: n,
                    zipf,
                    next_ohw: nr_objects + t as u64,
                    next_slab: slab_lo,
                    end_slab: slab_hi,
                    bucket_base: b_lo,
                    nr_buckets: b_hi - b_lo,
                    loc: vec![NONE; n as usize],
                    items: Vec::new(),
                    classes: class_bytes
                        .iter()
                        .map(|&b| Class {
                            alloc_bytes: u64::from(b),
                            per_slab: SLAB_BYTES / u64::from(b),
                            slab_addr: 0,
                            slab_used: SLAB_BYTES / u64::from(b),
                            head: NONE,
                            tail: NONE,
                        })
                        .collect(),
                    stats: CacheStats::default(),
                    pending: VecDeque::with_capacity(LOOKAHEAD + 1),
                }
            })
            .collect();
        Cachelib {
            region,
            table,
            sizes,
            class_bytes,
            zipfs,
            ohw_below: (cfg.one_hit_wonder_ratio * 18_446_744_073_709_551_616.0) as u64,
            read_lines: u64::from(cfg.read_lines),
            gap_ns: cfg.gap_ns,
            nr_threads: cfg.nr_threads,
            mlp: cfg.mlp,
            expected_accesses: nr_accesses,
            shards,
        }
    }

    /// The cache memory's mapping (slabs).
    pub fn region(&self) -> Mapping {
        self.region
    }

    /// The hash table's mapping.
    pub fn table(&self) -> Mapping {
        self.table
    }

    /// The allocation class sizes, ascending.
    pub fn class_bytes(&self) -> &[u32] {
        &self.class_bytes
    }

    /// The object-size distribution.
    pub fn sizes(&self) -> SizeDist {
        self.sizes
    }

    /// The counters summed over all shards.
    pub fn stats(&self) -> CacheStats {
        let mut s = CacheStats::default();
        for sh in &self.shards {
            s.requests += sh.stats.requests;
            s.hits += sh.stats.hits;
            s.misses += sh.stats.misses;
            s.evictions += sh.stats.evictions;
            s.alloc_failures += sh.stats.alloc_failures;
            s.slabs_used += sh.stats.slabs_used;
        }
        s
    }

    /// The allocation class of an object of `size` bytes: the smallest that fits.
    #[inline]
    pub fn class_of(&self, size: u64) -> usize {
        self.class_bytes.partition_point(|&b| u64::from(b) < size)
    }

    /// Draw thread `thread`'s next request (pure: no cache state involved).
    fn next_request(&self, sh: &mut Shard) -> Request {
        if sh.rng.next_u64() < self.ohw_below {
            let key = sh.next_ohw;
            sh.next_ohw += u64::from(self.nr_threads);
            Request {
                key,
                one_hit_wonder: true,
            }
        } else {
            let rank = self.zipfs[sh.zipf].sample(&mut sh.rng);
            Request {
                key: sh.catalogue_base + rank,
                one_hit_wonder: false,
            }
        }
    }

    #[inline]
    fn bucket_addr(&self, sh: &Shard, key: u64) -> u64 {
        self.table.addr
            + (sh.bucket_base + common::reduce(common::mix64(key), sh.nr_buckets)) * BUCKET_BYTES
    }

    /// Append the object accesses of an item at `addr` of `size` bytes: its first
    /// `read_lines` lines, then the first byte of each further page it spans.
    #[inline]
    fn push_object(&self, out: &mut Vec<Op>, addr: u64, size: u64, write: bool) {
        let end = addr + size;
        let lines = size.div_ceil(CACHE_LINE).min(self.read_lines);
        for l in 0..lines {
            out.push(Op::Access {
                addr: addr + l * CACHE_LINE,
                write,
                gap_ns: 0,
            });
        }
        let mut page = (addr + lines * CACHE_LINE).next_multiple_of(PAGE_SIZE);
        while page < end {
            out.push(Op::Access {
                addr: page,
                write,
                gap_ns: 0,
            });
            page += PAGE_SIZE;
        }
    }

    /// Append one request of shard `sh`.
    fn push_request(&self, sh: &mut Shard, out: &mut Vec<Op>) {
        // Keep LOOKAHEAD requests drawn and prefetch in three stages, each using
        // what the previous one should have brought in by then: the lookup slot of
        // the newest, the item of the one halfway, the LRU neighbours of the one a
        // quarter ahead (a hit may relink it).
        while sh.pending.len() <= LOOKAHEAD {
            let r = self.next_request(sh);
            if !r.one_hit_wonder {
                prefetch(&sh.loc[(r.key - sh.catalogue_base) as usize]);
            }
            sh.pending.push_back(r);
        }
        for (ahead, neighbours) in [(LOOKAHEAD / 2, false), (LOOKAHEAD / 4, true)] {
            let r = sh.pending[ahead];
            if r.one_hit_wonder {
                continue;
            }
            let i = sh.loc[(r.key - sh.catalogue_base) as usize];
            if let Some(it) = sh.items.get(i as usize) {
                if !neighbours {
                    prefetch(it);
                    continue;
                }
                for j in [it.prev, it.next] {
                    if let Some(n) = sh.items.get(j as usize) {
                        prefetch(n);
                    }
                }
            }
        }
        let req = sh.pending.pop_front().expect("just filled");
        sh.stats.requests += 1;
        out.push(Op::Access {
            addr: self.bucket_addr(sh, req.key),
            write: false,
            gap_ns: self.gap_ns,
        });
        let cat = (!req.one_hit_wonder).then(|| (req.key - sh.catalogue_base) as usize);
        if let Some(i) = cat.map(|c| sh.loc[c]).filter(|&i| i != NONE) {
            sh.stats.hits += 1;
            let it = sh.items[i as usize];
            self.push_object(out, it.addr, u64::from(it.size), false);
            self.record_access(sh, i, out);
            return;
        }
        sh.stats.misses += 1;
        let size = self.sizes.size_of(req.key);
        let class = self.class_of(size);
        let Some(i) = self.allocate(sh, class, out) else {
            sh.stats.alloc_failures += 1;
            return;
        };
        let it = &mut sh.items[i as usize];
        it.key = req.key;
        it.size = size as u32;
        it.update_req = sh.stats.requests;
        let addr = it.addr;
        self.push_object(out, addr, size, true);
        let old_head = sh.classes[class].head;
        if old_head != NONE {
            out.push(Op::Access {
                addr: sh.items[old_head as usize].addr,
                write: true,
                gap_ns: 0,
            });
        }
        lru_push_head(sh, i);
        if let Some(c) = cat {
            sh.loc[c] = i;
        }
        out.push(Op::Access {
            addr: self.bucket_addr(sh, req.key),
            write: true,
            gap_ns: 0,
        });
    }

    /// CacheLib's `MMLru::recordAccess` on a hit of item `i`: move it to the head of
    /// its LRU if its last move is older than `LRU_REFRESH_RATIO` × the tail's age,
    /// writing the four headers the intrusive list relinks.
    fn record_access(&self, sh: &mut Shard, i: u32, out: &mut Vec<Op>) {
        let now = sh.stats.requests;
        let it = sh.items[i as usize];
        let class = &sh.classes[usize::from(it.class)];
        let tail_age = now - sh.items[class.tail as usize].update_req;
        if ((now - it.update_req) as f64) <= LRU_REFRESH_RATIO * tail_age as f64 {
            return;
        }
        sh.items[i as usize].update_req = now;
        let old_head = class.head;
        if old_head == i {
            return;
        }
        for j in [i, it.prev, it.next, old_head] {
            if j != NONE {
                out.push(Op::Access {
                    addr: sh.items[j as usize].addr,
                    write: true,
                    gap_ns: 0,
                });
            }
        }
        lru_unlink(sh, i);
        lru_push_head(sh, i);
    }

    /// A chunk of `class` for a new item: the current slab, a new slab, or the LRU
    /// tail's chunk (evicting it, with its accesses). Returns the item index.
    fn allocate(&self, sh: &mut Shard, class: usize, out: &mut Vec<Op>) -> Option<u32> {
        let c = &mut sh.classes[class];
        if c.slab_used == c.per_slab && sh.next_slab < sh.end_slab {
            c.slab_addr = self.region.addr + sh.next_slab * SLAB_BYTES;
            c.slab_used = 0;
            sh.next_slab += 1;
            sh.stats.slabs_used += 1;
        }
        if c.slab_used < c.per_slab {
            let addr = c.slab_addr + c.slab_used * c.alloc_bytes;
            c.slab_used += 1;
            sh.items.push(Item {
                key: 0,
                addr,
                size: 0,
                class: class as u16,
                prev: NONE,
                next: NONE,
                update_req: 0,
            });
            return Some((sh.items.len() - 1) as u32);
        }
        let victim = c.tail;
        if victim == NONE {
            return None;
        }
        // Evict: read the victim's header, unlink it from the hash chain and the LRU.
        sh.stats.evictions += 1;
        let v = sh.items[victim as usize];
        out.push(Op::Access {
            addr: v.addr,
            write: false,
            gap_ns: 0,
        });
        out.push(Op::Access {
            addr: self.bucket_addr(sh, v.key),
            write: true,
            gap_ns: 0,
        });
        lru_unlink(sh, victim);
        let new_tail = sh.classes[class].tail;
        if new_tail != NONE {
            let t = sh.items[new_tail as usize];
            out.push(Op::Access {
                addr: t.addr,
                write: true,
                gap_ns: 0,
            });
            // The class's next eviction unlinks this one and needs its predecessor.
            if let Some(p) = sh.items.get(t.prev as usize) {
                prefetch(p);
            }
        }
        if v.key >= sh.catalogue_base && v.key < sh.catalogue_base + sh.nr_catalogue {
            sh.loc[(v.key - sh.catalogue_base) as usize] = NONE;
        }
        Some(victim)
    }

    /// Most ops one request can append: bucket, eviction (3), object lines and
    /// pages, LRU relink (4) or LRU head, bucket.
    fn max_request_ops(&self) -> usize {
        let max_pages =
            (u64::from(*self.class_bytes.last().unwrap_or(&0)) / PAGE_SIZE) as usize + 2;
        9 + self.read_lines as usize + max_pages
    }
}

/// Remove item `i` from its class's LRU list.
fn lru_unlink(sh: &mut Shard, i: u32) {
    let it = sh.items[i as usize];
    let c = &mut sh.classes[it.class as usize];
    if it.prev == NONE {
        c.head = it.next;
    } else {
        sh.items[it.prev as usize].next = it.next;
    }
    let c = &mut sh.classes[it.class as usize];
    if it.next == NONE {
        c.tail = it.prev;
    } else {
        sh.items[it.next as usize].prev = it.prev;
    }
    let it = &mut sh.items[i as usize];
    it.prev = NONE;
    it.next = NONE;
}

/// Put item `i` at the head (most recently used end) of its class's LRU list.
fn lru_push_head(sh: &mut Shard, i: u32) {
    let class = sh.items[i as usize].class as usize;
    let old = sh.classes[class].head;
    sh.items[i as usize].prev = NONE;
    sh.items[i as usize].next = old;
    if old == NONE {
        sh.classes[class].tail = i;
    } else {
        sh.items[old as usize].prev = i;
    }
    sh.classes[class].head = i;
}

impl Workload for Cachelib {
    fn shape(&self) -> WorkloadShape {
        WorkloadShape {
            processes: vec![ProcessShape {
                name: NAME.to_string(),
                nr_threads: self.nr_threads,
                mlp: self.mlp,
            }],
            footprint_bytes: self.region.len + self.table.len,
        }
    }

    fn prologue(&mut self, process: usize, out: &mut Vec<Op>) {
        if process == 0 {
            out.push(self.region.mmap_op());
            out.push(self.table.mmap_op());
        }
    }

    fn fill(&mut self, process: usize, thread: usize, out: &mut Vec<Op>) {
        if process != 0 || thread >= self.shards.len() {
            return;
        }
        out.reserve(BATCH_OPS);
        let max_req = self.max_request_ops();
        let mut sh = std::mem::take(&mut self.shards[thread]);
        while sh.accesses_left > 0 && out.len() + max_req <= BATCH_OPS {
            let start = out.len();
            self.push_request(&mut sh, out);
            let n = (out.len() - start) as u64;
            if n >= sh.accesses_left {
                // The run ends inside this request.
                out.truncate(start + sh.accesses_left as usize);
                sh.accesses_left = 0;
            } else {
                sh.accesses_left -= n;
            }
        }
        self.shards[thread] = sh;
    }

    fn expected_accesses(&self) -> Option<u64> {
        Some(self.expected_accesses)
    }
}

impl Default for Shard {
    /// An empty placeholder, only for taking a shard out of the generator while it
    /// advances.
    fn default() -> Self {
        Shard {
            rng: thread_rng(0, 0, 0),
            accesses_left: 0,
            catalogue_base: 0,
            nr_catalogue: 0,
            zipf: 0,
            next_ohw: 0,
            next_slab: 0,
            end_slab: 0,
            bucket_base: 0,
            nr_buckets: 0,
            loc: Vec::new(),
            items: Vec::new(),
            classes: Vec::new(),
            stats: CacheStats::default(),
            pending: VecDeque::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{accesses, check_structure, drain};
    use proptest::prelude::*;

    fn small(cache_mib: u64, nr_objects: u64, nr_accesses: u64, nr_threads: u32) -> CachelibConfig {
        CachelibConfig {
            cache_mib,
            nr_objects,
            nr_accesses,
            nr_threads,
            ..CachelibConfig::default()
        }
    }

    #[test]
    fn alloc_sizes_match_cachelib_generate_alloc_sizes() {
        let s = alloc_sizes(1.5, 1 << 20, 64);
        assert_eq!(s[0], 64);
        assert_eq!(*s.last().unwrap(), 1 << 20);
        for pair in s.windows(2) {
            // Growing by at least the factor (then maximised), each with its own
            // chunk count per slab.
            assert!(
                f64::from(pair[1]) >= f64::from(pair[0]) * 1.5 - 8.0,
                "{s:?}"
            );
            assert_ne!(
                SLAB_BYTES / u64::from(pair[0]),
                SLAB_BYTES / u64::from(pair[1])
            );
            assert_eq!(pair[1] % 8, 0);
        }
        // "Reduce fragmentation": every size but the last is the largest with its
        // number of chunks per slab.
        for &b in &s[..s.len() - 1] {
            let per = SLAB_BYTES / u64::from(b);
            assert!(SLAB_BYTES / (u64::from(b) + 8) < per || b == 64, "{b}");
        }
        // 64 → 96 → 144 (×1.5, all with distinct chunk counts, already maximal? no:
        // maximised to the largest size with the same count).
        assert_eq!(s[1], 96);
        assert!(s.len() > 20 && s.len() < 40, "{}", s.len());
    }

    #[test]
    fn object_sizes_follow_the_bounded_pareto() {
        let d = SizeDist::new(256, 1 << 20, 0.8);
        // Analytic figures quoted in the docs.
        assert!((d.mean() / 4384.0 - 1.0).abs() < 0.01, "{}", d.mean());
        let n = 400_000u64;
        let sizes: Vec<u64> = (0..n).map(|k| d.size_of(k)).collect();
        assert!(sizes.iter().all(|&s| (256..=1 << 20).contains(&s)));
        for s in [512.0, 609.0, 4096.0, 65536.0] {
            let measured = sizes.iter().filter(|&&x| x as f64 > s).count() as f64 / n as f64;
            let expected = d.tail(s);
            assert!(
                (measured - expected).abs() < 0.005 + 0.02 * expected,
                "P(size > {s}) = {measured}, expected {expected}"
            );
        }
        let median = {
            let mut v = sizes.clone();
            v.sort_unstable();
            v[v.len() / 2]
        };
        assert!((590..=630).contains(&median), "{median}");
        let mean = sizes.iter().sum::<u64>() as f64 / n as f64;
        assert!((mean / d.mean() - 1.0).abs() < 0.1, "{mean}");
    }

    #[test]
    fn popularity_puts_60_percent_on_the_top_20_percent() {
        let cfg = small(64, 100_000, 0, 1);
        let w = Cachelib::new(&cfg, 1);
        let mut sh = w.shards[0].clone();
        let (mut top, mut cat, mut ohw) = (0u64, 0u64, 0u64);
        let mut last_ohw = 0;
        for _ in 0..500_000 {
            let r = w.next_request(&mut sh);
            if r.one_hit_wonder {
                ohw += 1;
                assert!(r.key >= 100_000 && r.key > last_ohw);
                last_ohw = r.key;
            } else {
                cat += 1;
                top += u64::from(r.key < 20_000);
            }
        }
        let ohw_share = ohw as f64 / 500_000.0;
        assert!((ohw_share - 0.1).abs() < 0.005, "{ohw_share}");
        let top_share = top as f64 / cat as f64;
        assert!((top_share - 0.6).abs() < 0.02, "{top_share}");
    }

    #[test]
    fn same_seed_same_stream_different_seed_different_stream() {
        let cfg = small(16, 20_000, 100_000, 2);
        let a = drain(&mut Cachelib::new(&cfg, 7));
        let b = drain(&mut Cachelib::new(&cfg, 7));
        let c = drain(&mut Cachelib::new(&cfg, 8));
        assert_eq!(a.streams, b.streams);
        assert_ne!(a.streams, c.streams);
        assert_ne!(a.streams[0][0], a.streams[0][1]);
    }

    #[test]
    fn footprint_mappings_and_access_count() {
        let cfg = small(32, 50_000, 300_000, 3);
        let mut w = Cachelib::new(&cfg, 1);
        let d = drain(&mut w);
        assert_eq!(d.mappings, vec![w.region(), w.table()]);
        assert_eq!(w.region().len, 32 << 20);
        check_structure(&w, &d);
        // Each request begins with a bucket read after the request gap.
        let first: Vec<_> = accesses(&d.streams[0][1]).take(1).collect();
        assert!(w.table().contains(first[0].0) && !first[0].1 && first[0].2 == 100);
    }

    #[test]
    fn hit_ratio_rises_with_cache_size() {
        let mut ratios = Vec::new();
        for cache_mib in [16, 64, 256] {
            let mut w = Cachelib::new(&small(cache_mib, 100_000, 3_000_000, 1), 2);
            drain(&mut w);
            ratios.push(w.stats().hit_ratio());
        }
        assert!(
            ratios[0] + 0.05 < ratios[1] && ratios[1] + 0.05 < ratios[2],
            "{ratios:?}"
        );
        // Never above the share of catalogue requests.
        assert!(ratios[2] < 0.9);
    }

    #[test]
    fn evictions_happen_only_when_the_cache_is_full() {
        // ~100k objects × ~4.3 KiB ≈ 430 MiB of catalogue: a 32 MiB cache fills up.
        let mut w = Cachelib::new(&small(32, 100_000, 1_000_000, 1), 3);
        drain(&mut w);
        let s = w.stats();
        assert_eq!(s.slabs_used, 8);
        assert!(s.evictions > 10_000, "{s:?}");
        assert_eq!(s.hits + s.misses, s.requests);
        // A catalogue that fits (1000 objects, ≤ 1 MiB each in 1 GiB) never evicts.
        let mut cfg = small(1024, 1000, 1_000_000, 1);
        cfg.one_hit_wonder_ratio = 0.0;
        let mut w = Cachelib::new(&cfg, 3);
        drain(&mut w);
        let s = w.stats();
        assert_eq!((s.evictions, s.alloc_failures), (0, 0), "{s:?}");
        assert!(s.misses <= 1000 && s.hits >= s.requests - 1000, "{s:?}");
    }

    #[test]
    fn inserts_write_the_object_where_its_class_puts_it() {
        // A 4 MiB cache (one slab): replay the stream and check every object access
        // against the generator's own bookkeeping after the run.
        let cfg = small(4, 10_000, 200_000, 1);
        let mut w = Cachelib::new(&cfg, 4);
        let d = drain(&mut w);
        let sh = &w.shards[0];
        for it in &sh.items {
            if it.size == 0 {
                continue;
            }
            let size = u64::from(it.size);
            assert_eq!(size, w.sizes.size_of(it.key));
            let class = w.class_of(size);
            assert_eq!(usize::from(it.class), class);
            assert!(u64::from(w.class_bytes[class]) >= size);
            assert!(class == 0 || u64::from(w.class_bytes[class - 1]) < size);
            // Chunks are aligned to their class size within the slab.
            let off = (it.addr - w.region().addr) % SLAB_BYTES;
            assert_eq!(off % u64::from(w.class_bytes[class]), 0);
        }
        let writes = accesses(&d.streams[0][0]).filter(|a| a.1).count();
        assert!(writes > 0);
    }

    #[test]
    fn validate_names_the_bad_field() {
        let bad = |f: &dyn Fn(&mut CachelibConfig), field: &str| {
            let mut c = CachelibConfig::default();
            f(&mut c);
            let e = c.validate().unwrap_err();
            assert!(e.to_string().contains(field), "{e:?} should name {field}");
        };
        bad(&|c| c.cache_mib = 0, "cache_mib");
        bad(&|c| c.cache_mib = 3, "cache_mib");
        bad(&|c| c.nr_objects = 0, "nr_objects");
        bad(&|c| c.popularity_theta = 1.0, "popularity_theta");
        bad(&|c| c.one_hit_wonder_ratio = 1.0, "one_hit_wonder_ratio");
        bad(&|c| c.min_object_bytes = 32, "min_object_bytes");
        bad(&|c| c.min_object_bytes = 2 << 20, "min_object_bytes");
        bad(&|c| c.max_object_bytes = 8 << 20, "max_object_bytes");
        bad(&|c| c.size_pareto_alpha = 0.0, "size_pareto_alpha");
        bad(&|c| c.alloc_factor = 1.0, "alloc_factor");
        bad(&|c| c.read_lines = 0, "read_lines");
        bad(&|c| c.read_lines = 65, "read_lines");
        bad(&|c| c.scale = -1.0, "scale");
        bad(&|c| c.nr_threads = 0, "nr_threads");
        bad(&|c| c.mlp = 0.9, "mlp");
        bad(
            &|c| {
                c.cache_mib = 8;
                c.nr_threads = 3;
            },
            "cache_mib",
        );
        bad(&|c| c.cache_mib = 1 << 40, "cache_mib");
        CachelibConfig::default().validate().unwrap();
    }

    /// The default run's cache behaviour, as `docs/workloads.md` states it: the line
    /// there is generated here and checked against the page.
    #[test]
    fn default_run_in_the_docs_is_what_the_generator_gives() {
        let cfg = CachelibConfig::default();
        let mut w = Cachelib::new(&cfg, 1);
        crate::count_accesses(&mut w, u64::MAX);
        let s = w.stats();
        let line = format!(
            "Default run: {:.1} M requests, hit ratio {:.3}, {:.2} M evictions, {} slabs in use, {} failed inserts; footprint {} MiB.\n",
            s.requests as f64 / 1e6,
            s.hit_ratio(),
            s.evictions as f64 / 1e6,
            s.slabs_used,
            s.alloc_failures,
            w.shape().footprint_bytes >> 20,
        );
        tierkit_core::doc_tables::check_generated(
            "workloads.md",
            "cachelib-default-run",
            &line,
            "-p tierkit-workloads --lib default_run_in_the_docs",
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(16))]
        #[test]
        fn any_valid_config_stays_inside_its_mappings(
            cache_slabs in 1u64..6,
            nr_objects in 1u64..5000,
            nr_accesses in 0u64..20_000,
            nr_threads in 1u32..3,
            ohw in 0.0f64..0.9,
            min_lines in 1u64..8,
            max_kib in 1u64..2048,
            alpha in 0.2f64..3.0,
            read_lines in 1u32..=64,
        ) {
            let cfg = CachelibConfig {
                cache_mib: 4 * cache_slabs * u64::from(nr_threads),
                nr_objects,
                nr_accesses,
                nr_threads,
                one_hit_wonder_ratio: ohw,
                min_object_bytes: (min_lines * 64).min(max_kib * 1024),
                max_object_bytes: max_kib * 1024,
                size_pareto_alpha: alpha,
                read_lines,
                ..CachelibConfig::default()
            };
            prop_assert!(cfg.validate().is_ok());
            let mut w = Cachelib::new(&cfg, 5);
            let d = drain(&mut w);
            check_structure(&w, &d);
        }
    }
}
