//! `btree`: in-memory B+-tree lookups, MEMTIS's `Btree` benchmark (the Mitosis
//! `btree` workload, Achermann & Panwar).
//!
//! The benchmark inserts `n` keys in random order into Amittai Aviram's B+ tree of
//! order 6 (at most 6 pointers and 5 keys per node), then runs uniformly random
//! lookups over `[0, 2n)` (keys are the even numbers, so half the lookups hit). Its
//! memory is what MEMTIS §6.2.5 describes: skewed accesses (every lookup walks the
//! few top levels) and *low huge-page utilisation* (8.3–12.5%), because the nodes a
//! lookup touches are scattered over a large arena: each 2 MiB region holds a few hot
//! nodes among many cold ones.
//!
//! ## Memory layout (the real program's allocations)
//!
//! - `elements`: `n` 64-byte elements (key, stats, value, payload), one array.
//! - `records`: 32-byte records from 1 MiB slabs; a slab's free list hands its
//!   records out from the *end* (the slab is threaded into a LIFO list front to
//!   back), and records are allocated in insertion order.
//! - `nodes`: 56-byte node structs from 1 MiB slabs, handed out the same way, in the
//!   order the insertions created them.
//! - `heap`: each node's `keys` (5 × 8 bytes) and `pointers` (6 × 8 bytes) arrays,
//!   64-byte aligned small `malloc`s in node-creation order (one line each).
//!
//! The slabs of a kind are carved consecutively from one mapping per kind, as if the
//! allocator had placed them back to back.
//!
//! ## The tree
//!
//! Inserting tens of millions of keys one by one would take minutes, so the tree is
//! built bulk, with the shape random insertion produces: leaves hold 3, 4 or 5 keys
//! with the stationary frequencies of Yao's fringe analysis for this split rule
//! (0.481, 0.307, 0.211; mean fill 75%), internal nodes 3–6 children (0.25, 0.35,
//! 0.233, 0.167), and — what matters for tiering — nodes are *allocated in random
//! order*: under random insertion, splits happen all over the key space at all
//! times, so a node's position in the slabs is unrelated to its place in the tree.
//! The element and record of the `j`-th key sit at its random insertion rank.
//!
//! ## The stream
//!
//! Initialisation (thread 0): one store per page of `elements` (its `memset`), then
//! the pages of the three arenas interleaved in proportion, as the insertion loop
//! allocates and zeroes slabs over time. Each lookup (`find`): per internal level,
//! the node's header (the 40 bytes `find_leaf` reads: `pointers`, `keys`, `is_leaf`,
//! `num_keys`; one line or two), its `keys` line and its `pointers` line; at the
//! leaf the header and `keys`; on a hit, the leaf's `pointers` line, the record
//! (read and write: `r->stats++`) and the element (`e->value`). Lookups are split
//! over the threads (the benchmark's `omp parallel for`), each drawing its keys from
//! its own stream.

use rand::RngCore;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use tierkit_core::{ConfigError, Op, ProcessShape, VmaKind, Workload, WorkloadShape, PAGE_SIZE};

use crate::common;
use crate::graph::engine::{access_range, Counter, Sink};
use crate::graph::{tagged_rng, Shuffle};
use crate::layout::{Layout, Mapping};
use crate::{thread_rng, BATCH_OPS};

const NAME: &str = "btree";
/// Bytes of an element (`struct element`: one cache line).
pub const ELEMENT_BYTES: u64 = 64;
/// Bytes of a record (`struct record`).
pub const RECORD_BYTES: u64 = 32;
/// Bytes of a node (`struct node`).
pub const NODE_BYTES: u64 = 56;
/// Bytes of a slab (`NODE_SLAB_GROW`, `RECORD_SLAB_GROW`).
pub const SLAB_BYTES: u64 = 1 << 20;
/// Bytes of heap per node: its `keys` and `pointers` arrays, one line each.
pub const HEAP_BYTES_PER_NODE: u64 = 128;
/// Bytes of the node header a lookup reads (`pointers`, `keys`, `parent`,
/// `is_leaf`, `num_keys`).
const NODE_HEADER_BYTES: u64 = 40;
/// Most accesses one lookup can emit (two lines per header, 64 levels at most).
const MAX_LOOKUP_OPS: usize = 4 * 64 + 8;

/// Configuration of [`Btree`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BtreeConfig {
    /// Keys in the tree before `scale` (the benchmark's `-n`). Default 27 000 Ki
    /// (≈ 4 GiB with records, nodes and their arrays). Range [1, 2^32).
    pub nr_keys: u64,
    /// Lookups before `scale` (the benchmark's `-l`), split over the threads.
    /// Default 4 M (≈ 150 M accesses). Range >= 0.
    pub nr_lookups: u64,
    /// Most pointers per node (the tree's `order`). Default 6 (the benchmark's
    /// `CONFIG_DEFAULT_ORDER`). Only 6 is modelled: the fill frequencies are those
    /// of order 6. Range: 6.
    pub order: u32,
    /// Compute before each access, in ns. Default 2 (a key comparison).
    pub gap_ns: u32,
    /// Multiplies `nr_keys` and `nr_lookups` together. Default 1.0.
    pub scale: f64,
    /// Number of threads. Default 1.
    pub nr_threads: u32,
    /// Memory-level parallelism. Default 1.5: each level depends on the previous
    /// one; only a level's node, keys and pointers lines overlap.
    pub mlp: f64,
}

impl Default for BtreeConfig {
    fn default() -> Self {
        BtreeConfig {
            nr_keys: 27_000 << 10,
            nr_lookups: 4_000_000,
            order: 6,
            gap_ns: 2,
            scale: 1.0,
            nr_threads: 1,
            mlp: 1.5,
        }
    }
}

impl BtreeConfig {
    /// Check every field; the error names the field and its valid range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        common::check_positive(NAME, "nr_keys", self.nr_keys)?;
        if self.order != 6 {
            return Err(format!(
                "{NAME}.order must be 6 (the modelled fill frequencies are order 6's), got {}",
                self.order
            )
            .into());
        }
        common::check_common(NAME, self.scale, self.nr_threads, self.mlp)?;
        if common::scaled(self.nr_keys, self.scale) > u32::MAX as u64 {
            return Err(format!(
                "{NAME}.nr_keys × scale must be at most {}, got {}",
                u32::MAX,
                common::scaled(self.nr_keys, self.scale)
            )
            .into());
        }
        common::check_footprint(NAME, "nr_keys", self.nr_keys as f64 * self.scale * 180.0)
    }
}

/// Leaf key counts 3, 4, 5 and their stationary frequencies under random insertion.
const LEAF_FILL: [(u32, f64); 3] = [(3, 0.481), (4, 0.307), (5, 0.211)];
/// Internal-node child counts 3..=6 and their frequencies.
const INNER_FILL: [(u32, f64); 4] = [(3, 0.25), (4, 0.35), (5, 0.233), (6, 0.167)];

/// Draw a node size from `table`.
fn draw<R: RngCore>(rng: &mut R, table: &[(u32, f64)]) -> u32 {
    let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let mut acc = 0.0;
    for &(k, p) in table {
        acc += p;
        if u < acc {
            return k;
        }
    }
    table[table.len() - 1].0
}

/// The tree's shape: per level (0 = leaves), each node's first child (in the level
/// below; for leaves, first key index) and smallest key index.
#[derive(Debug, Clone)]
struct Tree {
    /// `first[level][i]`: first child (or key) of node `i`, plus a sentinel.
    first: Vec<Vec<u32>>,
    /// `min_key[level][i]`: smallest key index under node `i`.
    min_key: Vec<Vec<u32>>,
    /// Global id of node 0 of each level (leaves first).
    level_base: Vec<u64>,
    nr_nodes: u64,
}

impl Tree {
    fn build(nr_keys: u64, seed: u64) -> Tree {
        let mut rng = tagged_rng(seed, 10);
        let mut first = Vec::new();
        let mut min_key = Vec::new();
        // Leaves.
        let (mut f, mut m) = (Vec::new(), Vec::new());
        let mut k = 0u64;
        while k < nr_keys {
            f.push(k as u32);
            m.push(k as u32);
            k += u64::from(draw(&mut rng, &LEAF_FILL));
        }
        f.push(nr_keys as u32);
        first.push(f);
        min_key.push(m);
        // Internal levels until one root.
        while first.last().unwrap().len() - 1 > 1 {
            let below = first.len() - 1;
            let count = first[below].len() as u64 - 1;
            let (mut f, mut m) = (Vec::new(), Vec::new());
            let mut c = 0u64;
            while c < count {
                f.push(c as u32);
                m.push(min_key[below][c as usize]);
                c += u64::from(draw(&mut rng, &INNER_FILL));
            }
            f.push(count as u32);
            // A last node with a single child would not exist in a B+ tree: merge
            // it into its left neighbour.
            let len = f.len();
            if len >= 3 && f[len - 1] - f[len - 2] < 2 {
                f.remove(len - 2);
                m.pop();
            }
            first.push(f);
            min_key.push(m);
        }
        let mut level_base = Vec::new();
        let mut total = 0u64;
        for f in &first {
            level_base.push(total);
            total += f.len() as u64 - 1;
        }
        Tree {
            first,
            min_key,
            level_base,
            nr_nodes: total,
        }
    }

    fn height(&self) -> usize {
        self.first.len()
    }
}

/// Per-thread progress.
#[derive(Debug, Clone)]
struct ThreadState {
    rng: Xoshiro256PlusPlus,
    lookups_left: u64,
    /// Thread 0: initialisation pages emitted so far of the elements, records,
    /// nodes and heap mappings.
    init_done: [u64; 4],
}

/// The B-tree lookup generator (see the module docs).
#[derive(Debug, Clone)]
pub struct Btree {
    elements: Mapping,
    records: Mapping,
    nodes: Mapping,
    heap: Mapping,
    tree: std::sync::Arc<Tree>,
    nr_keys: u64,
    /// Random insertion order of the keys: key `j` was inserted `insertion(j)`-th.
    insertion: Shuffle,
    /// Random allocation order of the nodes.
    allocation: Shuffle,
    gap_ns: u32,
    nr_threads: u32,
    mlp: f64,
    expected: u64,
    threads: Vec<ThreadState>,
}

/// Address of the `rank`-th object handed out from consecutive slabs of
/// `per_slab` objects of `bytes` each, starting at `base` (LIFO free lists: a slab
/// hands out its last object first).
#[inline]
fn slab_addr(base: u64, rank: u64, bytes: u64) -> u64 {
    let per_slab = SLAB_BYTES / bytes;
    let slab = rank / per_slab;
    let idx = per_slab - 1 - rank % per_slab;
    base + slab * SLAB_BYTES + idx * bytes
}

/// Bytes of the slabs needed for `count` objects of `bytes` each.
fn slab_bytes(count: u64, bytes: u64) -> u64 {
    count.div_ceil(SLAB_BYTES / bytes).max(1) * SLAB_BYTES
}

impl Btree {
    /// Build the tree for `cfg` with `seed`.
    ///
    /// # Panics
    /// If `cfg` does not pass [`BtreeConfig::validate`].
    pub fn new(cfg: &BtreeConfig, seed: u64) -> Self {
        if let Err(e) = cfg.validate() {
            panic!("invalid {NAME} config: {e}");
        }
        let nr_keys = common::scaled(cfg.nr_keys, cfg.scale).max(1);
        let nr_lookups = common::scaled(cfg.nr_lookups, cfg.scale);
        let tree = Tree::build(nr_keys, seed);
        let mut layout = Layout::new();
        let elements = layout.map(nr_keys * ELEMENT_BYTES, VmaKind::Anon);
        let records = layout.map(slab_bytes(nr_keys, RECORD_BYTES), VmaKind::Anon);
        let nodes = layout.map(slab_bytes(tree.nr_nodes, NODE_BYTES), VmaKind::Anon);
        let heap = layout.map(tree.nr_nodes * HEAP_BYTES_PER_NODE, VmaKind::Anon);
        let threads = (0..cfg.nr_threads as usize)
            .map(|t| {
                let (lo, hi) = common::share(nr_lookups, cfg.nr_threads, t);
                ThreadState {
                    rng: thread_rng(seed, 0, t),
                    lookups_left: hi - lo,
                    init_done: if t == 0 { [0; 4] } else { [u64::MAX; 4] },
                }
            })
            .collect();
        let allocation = Shuffle::new(tree.nr_nodes, seed ^ 0x2222);
        let mut w = Btree {
            elements,
            records,
            nodes,
            heap,
            tree: std::sync::Arc::new(tree),
            nr_keys,
            insertion: Shuffle::new(nr_keys, seed ^ 0x1111),
            allocation,
            gap_ns: cfg.gap_ns,
            nr_threads: cfg.nr_threads,
            mlp: cfg.mlp,
            expected: 0,
            threads,
        };
        w.expected = w.count();
        w
    }

    /// Exact number of accesses: the initialisation pages plus a replay of every
    /// thread's lookups into a counter.
    fn count(&self) -> u64 {
        let mut c = Counter::default();
        for t in &self.threads {
            let mut rng = t.rng.clone();
            for _ in 0..t.lookups_left {
                self.lookup(&mut c, &mut rng);
            }
        }
        self.mappings()
            .iter()
            .map(|m| m.len / PAGE_SIZE)
            .sum::<u64>()
            + c.accesses
    }

    /// Height of the tree (levels, leaves included): the nodes a lookup visits.
    pub fn height(&self) -> usize {
        self.tree.height()
    }

    /// Number of nodes.
    pub fn nr_nodes(&self) -> u64 {
        self.tree.nr_nodes
    }

    /// The element, record, node and heap mappings.
    pub fn mappings(&self) -> [Mapping; 4] {
        [self.elements, self.records, self.nodes, self.heap]
    }

    /// Address of node `id` (global id, leaves first).
    #[inline]
    pub fn node_addr(&self, id: u64) -> u64 {
        slab_addr(self.nodes.addr, self.allocation.apply(id), NODE_BYTES)
    }

    #[inline]
    fn heap_addr(&self, id: u64) -> u64 {
        self.heap.addr + self.allocation.apply(id) * HEAP_BYTES_PER_NODE
    }

    /// The global ids of the nodes a lookup of key index `j` visits, root first.
    pub fn path(&self, j: u64) -> Vec<u64> {
        let mut out = Vec::new();
        self.walk(j, |id| out.push(id));
        out
    }

    /// Walk from the root to the leaf holding key index `j`, calling `visit` with
    /// each node's global id; returns the leaf's index within the leaves.
    #[inline]
    fn walk(&self, j: u64, mut visit: impl FnMut(u64)) -> usize {
        let tree = &self.tree;
        let mut node = 0usize;
        for level in (1..tree.height()).rev() {
            visit(tree.level_base[level] + node as u64);
            // find_leaf: the child after the last separator <= key.
            let (lo, hi) = (
                tree.first[level][node] as usize,
                tree.first[level][node + 1] as usize,
            );
            let keys = &tree.min_key[level - 1][lo + 1..hi];
            node = lo + keys.iter().take_while(|&&k| j >= u64::from(k)).count();
        }
        visit(node as u64);
        node
    }

    /// One lookup, its key drawn from `rng`.
    #[inline]
    fn lookup<S: Sink>(&self, s: &mut S, rng: &mut Xoshiro256PlusPlus) {
        let key = common::below(rng, 2 * self.nr_keys);
        let j = key / 2;
        let inner_from = self.tree.level_base.get(1).copied().unwrap_or(u64::MAX);
        let leaf = self.walk(j, |id| {
            let rank = self.allocation.apply(id);
            access_range(
                s,
                0,
                slab_addr(self.nodes.addr, rank, NODE_BYTES),
                NODE_HEADER_BYTES,
                false,
            );
            // keys, then pointers[i] for an inner node (a leaf's pointers line is
            // read only on a hit, below).
            let h = self.heap.addr + rank * HEAP_BYTES_PER_NODE;
            s.access(0, h, false);
            if id >= inner_from {
                s.access(0, h + 64, false);
            }
        });
        if key.is_multiple_of(2) {
            s.access(0, self.heap_addr(leaf as u64) + 64, false);
            let rank = self.insertion.apply(j);
            let rec = slab_addr(self.records.addr, rank, RECORD_BYTES);
            s.access(0, rec, false);
            s.access(0, rec, true);
            s.access(0, self.elements.addr + rank * ELEMENT_BYTES, false);
        }
    }

    /// Thread 0's next initialisation page, if any: the elements in order, then
    /// the three arenas interleaved in proportion (the page whose
    /// `(done + 0.5) / pages` fraction is smallest goes next).
    fn next_init_page(&self, done: &mut [u64; 4]) -> Option<u64> {
        let maps = self.mappings();
        let pages = maps.map(|m| m.len / PAGE_SIZE);
        let pick = if done[0] < pages[0] {
            Some(0)
        } else {
            (1..4).filter(|&a| done[a] < pages[a]).min_by(|&a, &b| {
                let fa = (done[a] as f64 + 0.5) / pages[a] as f64;
                let fb = (done[b] as f64 + 0.5) / pages[b] as f64;
                fa.total_cmp(&fb)
            })
        };
        pick.map(|a| {
            done[a] += 1;
            maps[a].addr + (done[a] - 1) * PAGE_SIZE
        })
    }
}

/// A sink appending to a thread's output batch.
struct OutSink<'a> {
    out: &'a mut Vec<Op>,
    gap_ns: u32,
}

impl Sink for OutSink<'_> {
    #[inline]
    fn access(&mut self, _thread: usize, addr: u64, write: bool) {
        self.out.push(Op::Access {
            addr,
            write,
            gap_ns: self.gap_ns,
        });
    }
}

impl Workload for Btree {
    fn shape(&self) -> WorkloadShape {
        WorkloadShape {
            processes: vec![ProcessShape {
                name: NAME.to_string(),
                nr_threads: self.nr_threads,
                mlp: self.mlp,
            }],
            footprint_bytes: self.mappings().iter().map(|m| m.len).sum(),
        }
    }

    fn prologue(&mut self, process: usize, out: &mut Vec<Op>) {
        if process == 0 {
            out.extend(self.mappings().iter().map(|m| m.mmap_op()));
        }
    }

    fn fill(&mut self, process: usize, thread: usize, out: &mut Vec<Op>) {
        if process != 0 || thread >= self.threads.len() {
            return;
        }
        out.reserve(BATCH_OPS);
        let mut t = self.threads[thread].clone();
        if t.init_done[0] != u64::MAX {
            while out.len() < BATCH_OPS {
                match self.next_init_page(&mut t.init_done) {
                    Some(addr) => out.push(Op::Access {
                        addr,
                        write: true,
                        gap_ns: 0,
                    }),
                    None => {
                        t.init_done = [u64::MAX; 4];
                        break;
                    }
                }
            }
        }
        let mut sink = OutSink {
            out,
            gap_ns: self.gap_ns,
        };
        while t.lookups_left > 0 && sink.out.len() + MAX_LOOKUP_OPS <= BATCH_OPS {
            self.lookup(&mut sink, &mut t.rng);
            t.lookups_left -= 1;
        }
        self.threads[thread] = t;
    }

    fn expected_accesses(&self) -> Option<u64> {
        Some(self.expected)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{accesses, check_structure, drain};
    use std::collections::{BTreeMap, BTreeSet};

    fn small(nr_keys: u64, nr_lookups: u64, nr_threads: u32) -> BtreeConfig {
        BtreeConfig {
            nr_keys,
            nr_lookups,
            nr_threads,
            ..BtreeConfig::default()
        }
    }

    #[test]
    fn same_seed_same_stream_different_seed_different_stream() {
        let cfg = small(50_000, 20_000, 2);
        let a = drain(&mut Btree::new(&cfg, 7));
        let b = drain(&mut Btree::new(&cfg, 7));
        let c = drain(&mut Btree::new(&cfg, 8));
        assert_eq!(a.streams, b.streams);
        assert_ne!(a.streams, c.streams);
        assert_ne!(a.streams[0][1], a.streams[0][0]);
    }

    #[test]
    fn footprint_mappings_and_access_count() {
        let mut w = Btree::new(&small(100_000, 10_000, 3), 1);
        let d = drain(&mut w);
        assert_eq!(d.mappings, w.mappings().to_vec());
        check_structure(&w, &d);
        // Every page is first-touched exactly once by the initialisation.
        let init: Vec<u64> = accesses(&d.streams[0][0])
            .take(d.shape.footprint_bytes as usize / PAGE_SIZE as usize)
            .map(|a| a.0)
            .collect();
        let distinct: BTreeSet<u64> = init.iter().copied().collect();
        assert_eq!(distinct.len(), init.len());
        assert!(init.iter().all(|a| a % PAGE_SIZE == 0));
    }

    #[test]
    fn the_tree_has_the_shape_of_random_insertion() {
        let w = Btree::new(&small(1_000_000, 0, 1), 3);
        let t = &w.tree;
        let leaves = t.first[0].len() as f64 - 1.0;
        let fill = 1_000_000.0 / leaves;
        assert!((fill - 3.73).abs() < 0.05, "mean leaf fill {fill}");
        for level in 1..t.height() {
            for i in 0..t.first[level].len() - 1 {
                let c = t.first[level][i + 1] - t.first[level][i];
                assert!((2..=8).contains(&c), "level {level} node {i}: {c} children");
            }
        }
        // Root: one node at the top.
        assert_eq!(t.first[t.height() - 1].len(), 2);
        // log_4.3(1e6 / 3.73) + 1 levels.
        assert!((9..=11).contains(&t.height()), "height {}", t.height());
    }

    #[test]
    fn lookups_visit_depth_many_nodes_on_the_path_to_the_key() {
        let w = Btree::new(&small(200_000, 0, 1), 4);
        let mut rng = thread_rng(99, 0, 0);
        for _ in 0..2000 {
            let mut rec = crate::graph::engine::testing::Recorder::default();
            let mut probe = rng.clone();
            let key = common::below(&mut probe, 2 * w.nr_keys);
            w.lookup(&mut rec, &mut rng);
            let node_slots: Vec<u64> = rec
                .events
                .iter()
                .filter_map(|e| match *e {
                    crate::graph::engine::testing::Event::Access { addr, .. }
                        if w.nodes.contains(addr) =>
                    {
                        let off = addr - w.nodes.addr;
                        Some(
                            off / SLAB_BYTES * SLAB_BYTES
                                + off % SLAB_BYTES / NODE_BYTES * NODE_BYTES,
                        )
                    }
                    _ => None,
                })
                .collect();
            let mut distinct = node_slots.clone();
            distinct.dedup();
            assert_eq!(distinct.len(), w.height(), "one node per level");
            let expected: Vec<u64> = w
                .path(key / 2)
                .iter()
                .map(|&id| w.node_addr(id) - w.nodes.addr)
                .collect();
            assert_eq!(distinct, expected);
            // The leaf holds the key's range.
            let leaf = *w.path(key / 2).last().unwrap() as usize;
            assert!(u64::from(w.tree.first[0][leaf]) <= key / 2);
            assert!(key / 2 < u64::from(w.tree.first[0][leaf + 1]));
            // Hits read record (twice: stats++) and element.
            let hits = rec
                .events
                .iter()
                .filter(|e| matches!(e, crate::graph::engine::testing::Event::Access { addr, .. } if w.elements.contains(*addr)))
                .count();
            assert_eq!(hits, usize::from(key.is_multiple_of(2)));
        }
    }

    #[test]
    fn hot_nodes_are_scattered_so_huge_page_utilisation_is_low() {
        let mut w = Btree::new(&small(2_000_000, 200_000, 1), 5);
        let d = drain(&mut w);
        let init = d.shape.footprint_bytes / PAGE_SIZE;
        // Accesses per 4 KiB page of the node arena during the lookups.
        let mut per_page: BTreeMap<u64, u64> = BTreeMap::new();
        for (addr, _, _) in accesses(&d.streams[0][0]).skip(init as usize) {
            if w.nodes.contains(addr) {
                *per_page.entry(addr / PAGE_SIZE).or_default() += 1;
            }
        }
        let total: u64 = per_page.values().sum();
        let mean = total as f64 / per_page.len() as f64;
        // Hot pages: ten times the mean page's accesses (the pages of the upper
        // levels' nodes).
        let hot: Vec<u64> = per_page
            .iter()
            .filter(|&(_, &c)| c as f64 > 10.0 * mean)
            .map(|(&p, _)| p)
            .collect();
        let hot_share: u64 = hot.iter().map(|p| per_page[p]).sum();
        assert!(
            hot_share as f64 > 0.25 * total as f64,
            "the hot pages take a large share of node accesses"
        );
        // Utilisation of each 2 MiB region holding a hot page: hot pages / 512.
        let mut per_region: BTreeMap<u64, u64> = BTreeMap::new();
        for p in &hot {
            *per_region.entry(p / 512).or_default() += 1;
        }
        let mean_util = per_region.values().sum::<u64>() as f64 / per_region.len() as f64 / 512.0;
        assert!(
            mean_util < 0.125,
            "mean hot-page utilisation {mean_util} of {} regions",
            per_region.len()
        );
        // Control: had the nodes been allocated level by level (root first), the
        // same hot nodes would pack into a handful of pages of one region.
        assert!(per_region.len() > 3, "hot nodes spread over many regions");
    }

    #[test]
    fn validate_names_the_bad_field() {
        let bad = |f: &dyn Fn(&mut BtreeConfig), field: &str| {
            let mut c = BtreeConfig::default();
            f(&mut c);
            let e = c.validate().unwrap_err();
            assert!(e.to_string().contains(field), "{e:?} should name {field}");
        };
        bad(&|c| c.nr_keys = 0, "nr_keys");
        bad(&|c| c.nr_keys = 1 << 40, "nr_keys");
        bad(&|c| c.order = 8, "order");
        bad(&|c| c.scale = 0.0, "scale");
        bad(&|c| c.nr_threads = 0, "nr_threads");
        bad(&|c| c.mlp = 0.0, "mlp");
        BtreeConfig::default().validate().unwrap();
    }
}
