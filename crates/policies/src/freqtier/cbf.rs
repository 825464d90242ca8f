//! FreqTier's page-frequency trackers, behind one small trait ([`FreqTracker`]):
//!
//! - [`CountingBloomFilter`] with [`CbfLayout::Flat`]: the counting Bloom filter of
//!   FreqTier §V-A — one shared array of 4-bit saturating counters, `k` hash functions,
//!   GET = minimum of the `k` counters, INCREMENT = raise only the minimum counter(s)
//!   (conservative update), periodic aging by halving every counter.
//! - the same with [`CbfLayout::Blocked`]: FreqTier §V-C-b, after Caffeine's blocked
//!   sketch: one hash picks a 64-byte block (one cache line), the rest of the hash bits
//!   pick the `k` counters inside it, so every operation touches one line.
//! - [`ExactTracker`]: a hash table `page → count` with the same 4-bit saturating
//!   counters and the same aging, the HeMem-style exact tracking FreqTier is compared
//!   against for accuracy and memory (§III, §VII-E).
//!
//! Counters are packed sixteen to a `u64`, as moka's `frequency_sketch.rs` (and
//! Caffeine's `FrequencySketch`, which it ports) packs them, so that aging is one shift
//! and one mask per word: `(w >> 1) & 0x7777_7777_7777_7777` halves sixteen counters
//! at once (the mask clears the bit each counter would receive from its neighbour).
//!
//! [`FreqTracker::increase`] is the increment-coalescing primitive of §V-C-c: it
//! leaves exactly the state that `amount` successive INCREMENTs would (spec §2.3
//! implementation note: every counter below `min(GET + amount, 15)` is raised to it).

use std::collections::HashMap;

/// Bits per counter (FreqTier §V-A: 4 bits, "allowing a maximum frequency count of
/// 2^4 − 1 = 15").
pub const COUNTER_BITS: u32 = 4;
/// The saturation value of a counter (§V-A).
pub const MAX_COUNT: u8 = (1 << COUNTER_BITS) - 1;
/// Counters per `u64` word.
const COUNTERS_PER_WORD: u64 = 64 / COUNTER_BITS as u64;
/// Words per 64-byte block (one cache line).
const WORDS_PER_LINE: usize = 8;
/// Counters per 64-byte block: 128 (spec §2.3, derived).
pub const COUNTERS_PER_LINE: u64 = COUNTERS_PER_WORD * WORDS_PER_LINE as u64;
/// Clears the bit each 4-bit counter receives from its upper neighbour on `>> 1`.
const HALVE_MASK: u64 = 0x7777_7777_7777_7777;
/// Most hash functions a tracker accepts.
pub const MAX_HASHES: usize = 8;

/// Policy-thread cost of touching one cache line of the sketch, ns: a sketch of a
/// few MiB lives mostly in L2/LLC; a few ns per line (the unblocked CBF touches `k`
/// lines per operation, the blocked one a single line — §V-C-b's point).
pub const LINE_TOUCH_NS: u64 = 5;
/// Policy-thread cost of one counter read-modify-write inside a touched line, ns.
pub const COUNTER_TOUCH_NS: u64 = 1;
/// Cost of one exact-table operation (hash, probe one bucket group), ns.
pub const EXACT_OP_NS: u64 = 10;

/// What the policy needs from a page-frequency tracker.
///
/// Keys are opaque 64-bit page identifiers (the policy mixes in the process id).
pub trait FreqTracker: Send {
    /// The estimated sample count of `key` (GET), in `0..=MAX_COUNT`.
    fn get(&self, key: u64) -> u8;

    /// Record `amount` samples of `key`: exactly the state `amount` successive
    /// INCREMENTs would leave. Returns the estimate before and after.
    fn increase(&mut self, key: u64, amount: u32) -> (u8, u8);

    /// Record one sample of `key` (INCREMENT); returns the estimate before and after.
    fn increment(&mut self, key: u64) -> (u8, u8) {
        self.increase(key, 1)
    }

    /// Halve every counter (aging, §V-A).
    fn age(&mut self);

    /// Bytes the tracker occupies, as a real implementation would allocate them.
    fn memory_bytes(&self) -> u64;

    /// Policy-thread time one GET or INCREMENT costs, ns.
    fn op_cost_ns(&self) -> u64;

    /// Policy-thread time one aging pass costs, ns.
    fn age_cost_ns(&self) -> u64;
}

/// SplitMix64's finaliser: a fast, well-mixing 64-bit hash (spec §2.12 suggestion).
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Map a uniform 64-bit hash onto `0..n` without division bias worth noting
/// (Lemire's multiply-shift); uses the high bits of `h`.
#[inline]
fn fastrange(h: u64, n: u64) -> u64 {
    ((h as u128 * n as u128) >> 64) as u64
}

/// Counters per tracked item for a counting Bloom filter of `k` hash functions and
/// false-positive rate `fpr`: `m/n = −k / ln(1 − fpr^{1/k})` (Broder & Mitzenmacher,
/// the paper's [8]; FreqTier §V-A). k = 3, fpr = 10⁻³ gives 28.47.
pub fn counters_per_item(k: u32, fpr: f64) -> f64 {
    -(k as f64) / (1.0 - fpr.powf(1.0 / k as f64)).ln()
}

/// Counters needed to hold `nr_items` at `fpr` with `k` hashes, rounded up to whole
/// 64-byte blocks (at least one).
pub fn counters_for(nr_items: u64, k: u32, fpr: f64) -> u64 {
    let m = (nr_items.max(1) as f64 * counters_per_item(k, fpr)).ceil() as u64;
    m.div_ceil(COUNTERS_PER_LINE).max(1) * COUNTERS_PER_LINE
}

/// How a counting Bloom filter places a key's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CbfLayout {
    /// `k` independent hashes over the whole array (§V-A).
    Flat,
    /// All `k` counters in one 64-byte block chosen by the hash (§V-C-b).
    Blocked,
}

/// One 64-byte block of 128 counters, aligned to a cache line as a real
/// implementation would allocate it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C, align(64))]
struct Line([u64; WORDS_PER_LINE]);

/// A counting Bloom filter of 4-bit saturating counters (FreqTier §V-A, §V-C-b).
#[derive(Debug, Clone)]
pub struct CountingBloomFilter {
    lines: Vec<Line>,
    k: usize,
    layout: CbfLayout,
    seed: u64,
}

impl CountingBloomFilter {
    /// A filter of at least `nr_counters` counters (rounded up to whole 64-byte
    /// blocks), with `k` hash functions (1..=8) and a fixed hash `seed`.
    pub fn new(nr_counters: u64, k: u32, layout: CbfLayout, seed: u64) -> CountingBloomFilter {
        assert!(
            (1..=MAX_HASHES as u32).contains(&k),
            "k must be in 1..=8, got {k}"
        );
        let nr_lines = nr_counters.div_ceil(COUNTERS_PER_LINE).max(1) as usize;
        CountingBloomFilter {
            lines: vec![Line::default(); nr_lines],
            k: k as usize,
            layout,
            seed,
        }
    }

    /// A filter sized for `nr_items` distinct keys at false-positive rate `fpr`
    /// (FreqTier's default sizing: all fast-tier pages at 10⁻³, §V-A).
    pub fn for_items(
        nr_items: u64,
        k: u32,
        fpr: f64,
        layout: CbfLayout,
        seed: u64,
    ) -> CountingBloomFilter {
        CountingBloomFilter::new(counters_for(nr_items, k, fpr), k, layout, seed)
    }

    /// Number of counters.
    pub fn nr_counters(&self) -> u64 {
        self.lines.len() as u64 * COUNTERS_PER_LINE
    }

    /// The layout.
    pub fn layout(&self) -> CbfLayout {
        self.layout
    }

    /// The distinct counter indices of `key`; returns how many of `out` are used.
    /// Duplicates are dropped so a counter hit by two hash functions is raised once.
    pub fn indices(&self, key: u64, out: &mut [u64; MAX_HASHES]) -> usize {
        let h = mix64(key ^ self.seed);
        let mut n = 0;
        match self.layout {
            CbfLayout::Flat => {
                let m = self.nr_counters();
                for i in 0..self.k as u64 {
                    let idx = fastrange(
                        mix64(h.wrapping_add(i.wrapping_mul(0x9e37_79b9_7f4a_7c15))),
                        m,
                    );
                    if !out[..n].contains(&idx) {
                        out[n] = idx;
                        n += 1;
                    }
                }
            }
            CbfLayout::Blocked => {
                // Caffeine-style (spec §2.12): the hash's high bits pick the block; a
                // rehash supplies 7-bit fields that pick k distinct counters of its 128.
                let base = fastrange(h, self.lines.len() as u64) * COUNTERS_PER_LINE;
                let mut bits = mix64(h ^ 0x5851_f42d_4c95_7f2d);
                let mut fields_left = 64 / 7;
                let mut fallback = 0u64;
                while n < self.k {
                    let off = if fields_left > 0 {
                        fields_left -= 1;
                        let f = bits & (COUNTERS_PER_LINE - 1);
                        bits >>= 7;
                        f
                    } else {
                        // Nine fields without k distinct values: astronomically rare;
                        // take the next free slot so the count stays k.
                        fallback += 1;
                        fallback % COUNTERS_PER_LINE
                    };
                    let idx = base + off;
                    if !out[..n].contains(&idx) {
                        out[n] = idx;
                        n += 1;
                    }
                }
            }
        }
        n
    }

    /// The value of counter `idx`.
    #[inline]
    pub fn counter(&self, idx: u64) -> u8 {
        let (line, word, shift) = Self::locate(idx);
        ((self.lines[line].0[word] >> shift) & MAX_COUNT as u64) as u8
    }

    /// Set counter `idx` (values above 15 saturate). For tests and worked examples.
    pub fn set_counter(&mut self, idx: u64, value: u8) {
        let (line, word, shift) = Self::locate(idx);
        let w = &mut self.lines[line].0[word];
        *w = (*w & !((MAX_COUNT as u64) << shift)) | ((value.min(MAX_COUNT) as u64) << shift);
    }

    #[inline]
    fn locate(idx: u64) -> (usize, usize, u32) {
        let line = (idx / COUNTERS_PER_LINE) as usize;
        let in_line = idx % COUNTERS_PER_LINE;
        let word = (in_line / COUNTERS_PER_WORD) as usize;
        let shift = ((in_line % COUNTERS_PER_WORD) as u32) * COUNTER_BITS;
        (line, word, shift)
    }

    /// GET over explicit counter indices: the minimum (§V-A).
    pub fn get_at(&self, idx: &[u64]) -> u8 {
        idx.iter().map(|&i| self.counter(i)).min().unwrap_or(0)
    }

    /// `amount` conservative INCREMENTs over explicit counter indices: every counter
    /// below `min(GET + amount, 15)` is raised to it, the others are left alone.
    /// Returns the estimate before and after.
    pub fn increase_at(&mut self, idx: &[u64], amount: u32) -> (u8, u8) {
        let old = self.get_at(idx);
        let target = (old as u32 + amount).min(MAX_COUNT as u32) as u8;
        for &i in idx {
            if self.counter(i) < target {
                self.set_counter(i, target);
            }
        }
        (old, target)
    }

    /// Cache lines one operation on `key` touches (1 for the blocked layout).
    pub fn lines_touched(&self, key: u64) -> usize {
        let mut idx = [0u64; MAX_HASHES];
        let n = self.indices(key, &mut idx);
        let mut lines = [u64::MAX; MAX_HASHES];
        let mut nr = 0;
        for &i in &idx[..n] {
            let l = i / COUNTERS_PER_LINE;
            if !lines[..nr].contains(&l) {
                lines[nr] = l;
                nr += 1;
            }
        }
        nr
    }
}

impl FreqTracker for CountingBloomFilter {
    fn get(&self, key: u64) -> u8 {
        let mut idx = [0u64; MAX_HASHES];
        let n = self.indices(key, &mut idx);
        self.get_at(&idx[..n])
    }

    fn increase(&mut self, key: u64, amount: u32) -> (u8, u8) {
        let mut idx = [0u64; MAX_HASHES];
        let n = self.indices(key, &mut idx);
        self.increase_at(&idx[..n], amount)
    }

    fn age(&mut self) {
        for line in &mut self.lines {
            for w in &mut line.0 {
                *w = (*w >> 1) & HALVE_MASK;
            }
        }
    }

    fn memory_bytes(&self) -> u64 {
        (self.lines.len() * std::mem::size_of::<Line>()) as u64
    }

    fn op_cost_ns(&self) -> u64 {
        let lines = match self.layout {
            CbfLayout::Flat => self.k as u64,
            CbfLayout::Blocked => 1,
        };
        lines * LINE_TOUCH_NS + self.k as u64 * COUNTER_TOUCH_NS
    }

    fn age_cost_ns(&self) -> u64 {
        // One streaming pass: a shift and a mask per word, a line per 8 words.
        self.lines.len() as u64 * (LINE_TOUCH_NS + WORDS_PER_LINE as u64)
    }
}

/// Exact per-page counts in a hash table, saturating at 15 and aged by halving like
/// the CBF, so a comparison isolates the effect of collisions (§VII-E).
#[derive(Debug, Clone, Default)]
pub struct ExactTracker {
    // Lookups only: nothing iterates this map in an order that can reach a result
    // (aging halves every entry independently).
    counts: HashMap<u64, u8>,
}

impl ExactTracker {
    /// An empty table.
    pub fn new() -> ExactTracker {
        ExactTracker::default()
    }

    /// Keys currently tracked (count > 0).
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// No key tracked.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }
}

impl FreqTracker for ExactTracker {
    fn get(&self, key: u64) -> u8 {
        self.counts.get(&key).copied().unwrap_or(0)
    }

    fn increase(&mut self, key: u64, amount: u32) -> (u8, u8) {
        let c = self.counts.entry(key).or_insert(0);
        let old = *c;
        *c = (old as u32 + amount).min(MAX_COUNT as u32) as u8;
        let new = *c;
        if new == 0 {
            self.counts.remove(&key);
        }
        (old, new)
    }

    fn age(&mut self) {
        self.counts.retain(|_, c| {
            *c >>= 1;
            *c > 0
        });
    }

    fn memory_bytes(&self) -> u64 {
        // A SwissTable of (u64 key, u8 count): 16-byte slots plus one control byte,
        // buckets at most 7/8 full — the cheapest exact table one would build. (HeMem's
        // per-page records are 168 B, FreqTier §I; this is a lower bound.)
        let slot = std::mem::size_of::<(u64, u8)>() as u64 + 1;
        (self.counts.capacity() as u64 * 8).div_ceil(7) * slot
    }

    fn op_cost_ns(&self) -> u64 {
        EXACT_OP_NS
    }

    fn age_cost_ns(&self) -> u64 {
        self.counts.len() as u64 * 3
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flat(nr_counters: u64) -> CountingBloomFilter {
        CountingBloomFilter::new(nr_counters, 3, CbfLayout::Flat, 7)
    }

    /// A deterministic skewed key stream: key i with weight ~ 1/(i+1) (Zipf-like).
    fn skewed_stream(nr_keys: u64, len: usize, mut s: u64) -> Vec<u64> {
        let mut out = Vec::with_capacity(len);
        let h: f64 = (1..=nr_keys).map(|i| 1.0 / i as f64).sum();
        while out.len() < len {
            s = mix64(s.wrapping_add(1));
            let u = (s >> 11) as f64 / (1u64 << 53) as f64 * h;
            // Invert the harmonic CDF approximately: ln(i) ≈ u − γ.
            let i = ((u - 0.5772).exp())
                .floor()
                .clamp(0.0, (nr_keys - 1) as f64) as u64;
            out.push(i * 4096 + 17);
        }
        out
    }

    #[test]
    fn oracle_01_fig5_get_is_min_and_increment_raises_only_the_minimum_counters() {
        // FreqTier Fig. 5 (k = 3): page A's counters hold 3, x > 3, 3 at indices 0, 1, 4.
        let mut c = flat(128);
        c.set_counter(0, 3);
        c.set_counter(1, 6);
        c.set_counter(4, 3);
        let a = [0, 1, 4];
        assert_eq!(c.get_at(&a), 3);
        assert_eq!(c.increase_at(&a, 1), (3, 4));
        assert_eq!((c.counter(0), c.counter(1), c.counter(4)), (4, 6, 4));
        assert_eq!(c.get_at(&a), 4);
        // Page B's counters at indices 2, 5, 7 are all 9: INCREMENT raises all three.
        for i in [2, 5, 7] {
            c.set_counter(i, 9);
        }
        let b = [2, 5, 7];
        assert_eq!(c.increase_at(&b, 1), (9, 10));
        assert_eq!((c.counter(2), c.counter(5), c.counter(7)), (10, 10, 10));
        assert_eq!(c.get_at(&b), 10);
        // Nothing else moved.
        for i in [3, 6, 8, 100] {
            assert_eq!(c.counter(i), 0);
        }
    }

    #[test]
    fn oracle_03_counters_saturate_at_15() {
        for layout in [CbfLayout::Flat, CbfLayout::Blocked] {
            let mut c = CountingBloomFilter::new(1024, 3, layout, 1);
            for n in 1..=40u32 {
                let (_, new) = c.increment(42);
                assert_eq!(new as u32, n.min(15));
            }
            assert_eq!(c.get(42), 15);
            assert_eq!(c.increase(42, 1000), (15, 15));
            assert!((0..c.nr_counters()).all(|i| c.counter(i) <= 15));
            let mut e = ExactTracker::new();
            assert_eq!(e.increase(42, 1000), (0, 15));
            assert_eq!(e.increment(42), (15, 15));
        }
    }

    #[test]
    fn oracle_02_no_undercount_between_agings() {
        // Spec §7.2: GET(p) ≥ min(true count, 15), errors are over-counts only.
        for layout in [CbfLayout::Flat, CbfLayout::Blocked] {
            // Deliberately small: 2 048 counters for ~3 000 keys, many collisions.
            let mut c = CountingBloomFilter::new(2048, 3, layout, 3);
            let mut exact: HashMap<u64, u32> = HashMap::new();
            for k in skewed_stream(3000, 50_000, 9) {
                c.increment(k);
                *exact.entry(k).or_insert(0) += 1;
            }
            let mut over = 0;
            for (&k, &n) in &exact {
                let want = n.min(15) as u8;
                assert!(
                    c.get(k) >= want,
                    "{layout:?}: key {k} true {n} got {}",
                    c.get(k)
                );
                over += (c.get(k) > want) as u32;
            }
            assert!(over > 0, "a crowded filter over-counts some keys");
        }
    }

    #[test]
    fn oracle_04_aging_halves_every_counter_and_every_estimate() {
        let mut c = CountingBloomFilter::new(4096, 3, CbfLayout::Flat, 5);
        let keys = skewed_stream(2000, 30_000, 4);
        for &k in &keys {
            c.increment(k);
        }
        let before: Vec<u8> = (0..c.nr_counters()).map(|i| c.counter(i)).collect();
        let est: Vec<u8> = keys.iter().map(|&k| c.get(k)).collect();
        assert!(before.contains(&15) && before.iter().any(|&v| v % 2 == 1));
        c.age();
        for (i, &b) in before.iter().enumerate() {
            assert_eq!(c.counter(i as u64), b / 2, "counter {i}");
        }
        // Floor-halving is monotone, so it commutes with min (spec §7.4).
        for (&k, &e) in keys.iter().zip(&est) {
            assert_eq!(c.get(k), e / 2);
        }
        let mut x = ExactTracker::new();
        x.increase(1, 15);
        x.increase(2, 1);
        x.age();
        assert_eq!((x.get(1), x.get(2), x.len()), (7, 0, 1));
    }

    #[test]
    fn oracle_05_coalesced_increase_equals_repeated_increments() {
        // Spec §7.5, on crowded filters with unequal counters.
        for layout in [CbfLayout::Flat, CbfLayout::Blocked] {
            let mut base = CountingBloomFilter::new(512, 3, layout, 11);
            for k in skewed_stream(400, 3_000, 2) {
                base.increment(k);
            }
            for key in (0..200u64).map(|i| i * 4096 + 17) {
                for n in [1u32, 2, 3, 7, 16, 40] {
                    let mut once = base.clone();
                    let mut rep = base.clone();
                    let r1 = once.increase(key, n);
                    let mut r2 = (rep.get(key), rep.get(key));
                    for _ in 0..n {
                        r2.1 = rep.increment(key).1;
                    }
                    assert_eq!(r1, r2, "{layout:?} key {key} n {n}");
                    assert_eq!(once.lines, rep.lines, "{layout:?} key {key} n {n}");
                }
            }
        }
    }

    #[test]
    fn oracle_06_blocked_filter_touches_one_line_per_key() {
        let c = CountingBloomFilter::new(1 << 16, 3, CbfLayout::Blocked, 3);
        let f = CountingBloomFilter::new(1 << 16, 3, CbfLayout::Flat, 3);
        let mut spread = 0;
        for key in 0..10_000u64 {
            let mut idx = [0u64; MAX_HASHES];
            assert_eq!(c.indices(key, &mut idx), 3, "three distinct counters");
            assert_eq!(c.lines_touched(key), 1);
            spread += (f.lines_touched(key) > 1) as u32;
        }
        assert!(spread > 9_900, "the flat layout spreads keys over lines");
        assert!(c.op_cost_ns() < f.op_cost_ns());
    }

    #[test]
    fn oracle_06_blocked_and_flat_classify_hot_and_cold_alike() {
        // Spec §7.6: "negligible" loss — ≥ ~99% agreement on a skewed trace, both
        // filters sized by the default rule for the 4 096 pages a fast tier holds.
        let mut f = CountingBloomFilter::for_items(4096, 3, 1e-3, CbfLayout::Flat, 1);
        let mut b = CountingBloomFilter::for_items(4096, 3, 1e-3, CbfLayout::Blocked, 1);
        let keys = skewed_stream(50_000, 200_000, 77);
        for &k in &keys {
            f.increment(k);
            b.increment(k);
        }
        let mut distinct = keys.clone();
        distinct.sort_unstable();
        distinct.dedup();
        let agree = distinct
            .iter()
            .filter(|&&k| (f.get(k) >= 5) == (b.get(k) >= 5))
            .count();
        let share = agree as f64 / distinct.len() as f64;
        assert!(share >= 0.99, "agreement {share:.4}");
    }

    #[test]
    fn default_size_matches_the_broder_mitzenmacher_formula() {
        // Spec §2.3 table: k = 3, FPR 10⁻³ → 28.47 counters per page; 16 GiB of fast
        // pages (4 194 304) → ≈ 57 MiB of 4-bit counters.
        assert!((counters_per_item(3, 1e-3) - 28.47).abs() < 0.01);
        let m = counters_for(4_194_304, 3, 1e-3);
        let mib = m as f64 / 2.0 / (1 << 20) as f64;
        assert!((mib - 56.9).abs() < 0.2, "{mib} MiB");
        assert_eq!(m % COUNTERS_PER_LINE, 0);
        let c = CountingBloomFilter::for_items(1000, 3, 1e-3, CbfLayout::Blocked, 0);
        assert_eq!(c.memory_bytes(), c.nr_counters() / 2);
        assert!(c.nr_counters() >= 28_470);
    }

    #[test]
    fn exact_tracker_memory_grows_with_tracked_pages() {
        let mut e = ExactTracker::new();
        assert_eq!(e.memory_bytes(), 0);
        for k in 0..10_000 {
            e.increment(k);
        }
        assert!(e.memory_bytes() >= 10_000 * 17);
        let cbf = CountingBloomFilter::for_items(10_000, 3, 1e-3, CbfLayout::Blocked, 0);
        assert!(cbf.memory_bytes() < e.memory_bytes());
    }
}
