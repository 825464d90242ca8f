//! A set-associative last-level cache filter with LRU replacement.
//!
//! Only misses reach memory (and can be sampled as LLC load misses). The cache is
//! shared by all processes and indexed by a hash of (process, line), standing in for a
//! physically indexed cache. Each way stores the line id with, in its low bits, the
//! dirty flag and the tier the line was filled from, so a dirty eviction can charge
//! write-back bandwidth to the right tier. Within a set the ways are kept in recency
//! order, most recent first (true LRU).

use tierkit_core::{Op, Workload, WorkloadShape};

const EMPTY: u64 = u64::MAX;
const META_BITS: u32 = 4;
const DIRTY: u64 = 1 << 3;
const TIER_MASK: u64 = 0b111;

/// Result of one lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LlcResult {
    /// Served by the cache.
    Hit,
    /// Missed; `writeback` names the tier of a dirty line evicted to make room.
    Miss {
        /// Tier to charge a 64-byte write-back to.
        writeback: Option<u8>,
    },
}

/// The cache.
pub struct Llc {
    ways: usize,
    set_mask: u64,
    /// `sets × ways` tags from index `first`; within a set, the first way is the most
    /// recently used.
    tags: Vec<u64>,
    /// Index of the first set's first way: one that starts a host cache line, so a set
    /// of 8 or 16 ways fills whole host lines (an allocator's pointer is only 16-byte
    /// aligned, and a 16-way set that straddles three host lines costs a third miss).
    first: usize,
}

/// Tags per host cache line.
const TAGS_PER_HOST_LINE: usize = 8;

impl Llc {
    /// A cache of `size_bytes` with `ways` ways of 64-byte lines. The set count
    /// (`size / 64 / ways`) must be a power of two (checked by the machine config).
    pub fn new(size_bytes: u64, ways: u32) -> Llc {
        let sets = size_bytes / tierkit_core::CACHE_LINE / ways as u64;
        assert!(
            sets.is_power_of_two(),
            "LLC set count must be a power of two"
        );
        let n = (sets * ways as u64) as usize;
        let tags = tierkit_core::host::vec_on_huge_pages(EMPTY, n + TAGS_PER_HOST_LINE);
        let misalign = (tags.as_ptr() as usize / 8) % TAGS_PER_HOST_LINE;
        Llc {
            ways: ways as usize,
            set_mask: sets - 1,
            first: (TAGS_PER_HOST_LINE - misalign) % TAGS_PER_HOST_LINE,
            tags,
        }
    }

    #[inline]
    fn set_of(&self, pid: u32, addr: u64) -> (u64, usize) {
        let line = ((pid as u64) << 42) | (addr >> 6);
        // A multiplicative hash spreads pages of all processes over the sets.
        let set = ((line.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20) & self.set_mask) as usize;
        (line, self.first + set * self.ways)
    }

    /// Hint the host CPU to fetch the set `addr` maps to (see `Machine::prefetch`).
    #[inline]
    pub fn prefetch(&self, pid: u32, addr: u64) {
        let (_, base) = self.set_of(pid, addr);
        // Every host line of the set: a 16-way set spans two.
        let mut way = 0;
        while way < self.ways {
            tierkit_core::host::prefetch(&self.tags[base + way]);
            way += TAGS_PER_HOST_LINE;
        }
    }

    /// Look up the line of `addr` in process `pid`, filling it on a miss. `tier` is
    /// where the line's page lives (remembered for write-back). Always inlined: a
    /// call on the access's path spills the engine loop's registers.
    #[inline(always)]
    pub fn access(&mut self, pid: u32, addr: u64, write: bool, tier: u8) -> LlcResult {
        let (line, base) = self.set_of(pid, addr);
        let want = line << META_BITS;
        // Every machine preset has 16 ways. With the set's length a constant the scan
        // unrolls and a miss's shift of fifteen ways compiles to a few vector moves:
        // 4-6% on `tierkit bench`'s LLC-on cases (docs/performance.md).
        if self.ways == 16 {
            let set: &mut [u64; 16] = (&mut self.tags[base..base + 16]).try_into().unwrap();
            lookup(set, want, write, tier)
        } else {
            lookup(&mut self.tags[base..base + self.ways], want, write, tier)
        }
    }

    /// Bytes of simulator memory the cache model uses.
    pub fn model_bytes(&self) -> u64 {
        (self.tags.len() * 8) as u64
    }
}

/// Look `want` up in one set, most recently used way first; on a miss fill it in
/// place of the least recently used way.
#[inline(always)]
fn lookup(set_tags: &mut [u64], want: u64, write: bool, tier: u8) -> LlcResult {
    // Empty ways hold EMPTY, whose line bits are all ones: no line id matches them.
    let hit = set_tags
        .iter()
        .position(|&t| t & !((1 << META_BITS) - 1) == want);
    let (from, new) = match hit {
        Some(i) => {
            let t = set_tags[i] | if write { DIRTY } else { 0 };
            (i, t)
        }
        None => {
            let last = set_tags.len() - 1;
            let victim = set_tags[last];
            let writeback =
                (victim != EMPTY && victim & DIRTY != 0).then_some((victim & TIER_MASK) as u8);
            move_to_front(
                set_tags,
                last,
                want | (tier as u64 & TIER_MASK) | if write { DIRTY } else { 0 },
            );
            return LlcResult::Miss { writeback };
        }
    };
    move_to_front(set_tags, from, new);
    LlcResult::Hit
}

/// Put `t` at the front of the set, shifting ways `0..i` back by one (way `i` is
/// overwritten). A plain loop rather than `copy_within`: the shifts are at most a set
/// long, too short to pay for a call to memmove, and a hit on the most recently used
/// way (a store after a load of the same line) shifts nothing.
#[inline(always)]
fn move_to_front(set: &mut [u64], i: usize, t: u64) {
    let mut k = i.min(set.len() - 1);
    while k > 0 {
        set[k] = set[k - 1];
        k -= 1;
    }
    set[0] = t;
}

/// A workload's stream as memory sees it: mappings pass whole, and of its accesses only
/// those that miss an LLC like the machine's. The cache is indexed by process and
/// address alone, never by where a page lives, so for one thread this is exactly the
/// stream of accesses the machine will send to a tier; for several it is close (the
/// reader interleaves threads by batch, the engine by time). A clairvoyant reference
/// ranks pages by it: placement changes the cost of misses only.
pub struct MemoryStream {
    inner: Box<dyn Workload>,
    llc: Llc,
}

impl MemoryStream {
    /// `inner` filtered through a fresh LLC of `size_bytes` and `ways` (the machine's
    /// geometry, [`crate::engine::llc_geometry`]).
    pub fn new(inner: Box<dyn Workload>, size_bytes: u64, ways: u32) -> MemoryStream {
        MemoryStream {
            inner,
            llc: Llc::new(size_bytes, ways),
        }
    }
}

impl Workload for MemoryStream {
    fn shape(&self) -> WorkloadShape {
        self.inner.shape()
    }

    fn prologue(&mut self, process: usize, out: &mut Vec<Op>) {
        self.inner.prologue(process, out);
    }

    fn fill(&mut self, process: usize, thread: usize, out: &mut Vec<Op>) {
        // An empty batch ends the thread, so refill until something missed or the
        // inner stream ended.
        loop {
            let first = out.len();
            self.inner.fill(process, thread, out);
            if out.len() == first {
                return;
            }
            let llc = &mut self.llc;
            let mut keep = first;
            for i in first..out.len() {
                let op = out[i];
                let pass = match op {
                    Op::Access { addr, write, .. } => matches!(
                        llc.access(process as u32, addr, write, 0),
                        LlcResult::Miss { .. }
                    ),
                    Op::Mmap { .. } | Op::Munmap { .. } => true,
                };
                if pass {
                    out[keep] = op;
                    keep += 1;
                }
            }
            out.truncate(keep);
            if keep > first {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_access_hits_and_capacity_evicts_lru() {
        // 1 set × 2 ways: size = 2 lines.
        let mut c = Llc::new(128, 2);
        assert_eq!(
            c.access(0, 0, false, 0),
            LlcResult::Miss { writeback: None }
        );
        assert_eq!(c.access(0, 0, false, 0), LlcResult::Hit);
        assert_eq!(
            c.access(0, 64, true, 1),
            LlcResult::Miss { writeback: None }
        );
        // Touch line 0 so line 64 (dirty, tier 1) is the LRU victim.
        assert_eq!(c.access(0, 0, false, 0), LlcResult::Hit);
        assert_eq!(
            c.access(0, 128, false, 0),
            LlcResult::Miss { writeback: Some(1) }
        );
        assert_eq!(c.access(0, 0, false, 0), LlcResult::Hit);
        assert_eq!(
            c.access(0, 64, false, 1),
            LlcResult::Miss { writeback: None }
        );
    }

    /// The plainest true LRU: per set, a list of (line, dirty, tier), most recent first.
    struct ReferenceLru {
        sets: Vec<Vec<(u64, bool, u8)>>,
        ways: usize,
    }

    impl ReferenceLru {
        fn access(&mut self, set: usize, line: u64, write: bool, tier: u8) -> LlcResult {
            let ways = &mut self.sets[set];
            if let Some(i) = ways.iter().position(|w| w.0 == line) {
                let (_, dirty, t) = ways.remove(i);
                ways.insert(0, (line, dirty || write, t));
                return LlcResult::Hit;
            }
            let writeback = if ways.len() == self.ways {
                let (_, dirty, t) = ways.pop().unwrap();
                dirty.then_some(t)
            } else {
                None
            };
            ways.insert(0, (line, write, tier));
            LlcResult::Miss { writeback }
        }
    }

    proptest::proptest! {
        /// Both lookups (16 ways, the length a constant, and any other count) behave as
        /// the reference, hits, misses and write-backs, on streams that hit and miss.
        #[test]
        fn lookups_are_true_lru(ways in proptest::sample::select(vec![2u32, 8, 16]),
                                ops in proptest::collection::vec((0u64..96, 0u32..2, proptest::bool::ANY, 0u8..4), 1..3000)) {
            // Four sets, each drawn from ~48 lines (96 addresses, two processes): at
            // 2 to 16 ways both hits and misses come.
            let mut llc = Llc::new(64 * 4 * ways as u64, ways);
            let mut reference = ReferenceLru { sets: vec![Vec::new(); 4], ways: ways as usize };
            for (i, &(line, pid, write, tier)) in ops.iter().enumerate() {
                let addr = line * 64;
                let (id, base) = llc.set_of(pid, addr);
                let set = (base - llc.first) / ways as usize;
                let got = llc.access(pid, addr, write, tier);
                proptest::prop_assert_eq!(got, reference.access(set, id, write, tier), "access {}", i);
            }
        }
    }

    #[test]
    fn processes_do_not_share_lines() {
        let mut c = Llc::new(1 << 20, 16);
        c.access(0, 4096, false, 0);
        assert_eq!(
            c.access(1, 4096, false, 0),
            LlcResult::Miss { writeback: None }
        );
        assert_eq!(c.access(0, 4096, false, 0), LlcResult::Hit);
    }

    #[test]
    fn a_memory_stream_keeps_mappings_and_the_accesses_that_miss() {
        use tierkit_core::{ProcessShape, VmaKind};
        struct Fixed(Vec<Op>);
        impl Workload for Fixed {
            fn shape(&self) -> WorkloadShape {
                WorkloadShape {
                    processes: vec![ProcessShape {
                        name: "p".into(),
                        nr_threads: 1,
                        mlp: 1.0,
                    }],
                    footprint_bytes: 1 << 20,
                }
            }
            fn fill(&mut self, _: usize, _: usize, out: &mut Vec<Op>) {
                out.append(&mut self.0);
            }
        }
        let read = |addr| Op::Access {
            addr,
            write: false,
            gap_ns: 1,
        };
        let map = Op::Mmap {
            addr: 0,
            len: 1 << 20,
            kind: VmaKind::Anon,
        };
        // 2 lines of cache: the repeat of line 0 hits, line 0 after two others misses.
        let ops = vec![map, read(0), read(8), read(64), read(128), read(0)];
        let mut s = MemoryStream::new(Box::new(Fixed(ops)), 128, 2);
        let mut out = Vec::new();
        s.fill(0, 0, &mut out);
        assert_eq!(out, vec![map, read(0), read(64), read(128), read(0)]);
        out.clear();
        s.fill(0, 0, &mut out);
        assert!(out.is_empty(), "the stream ends when the inner one does");
    }
}
