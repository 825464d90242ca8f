//! The future a clairvoyant reference reads: the run's memory accesses in order, as
//! dense page ids ([`PageIds`]).
//!
//! A reference reads it either from a fresh copy of the stream ([`StreamedFuture`],
//! from [`BuildContext::fresh_workload`](crate::BuildContext::fresh_workload)), or
//! from a [`FutureTape`] read once and shared by every reference of a comparison that
//! consumes the same stream on the same LLC
//! ([`BuildContext::shared_future`](crate::BuildContext::shared_future)): the tape
//! holds each access's id and where each mapping appeared, so a [`TapeReader`] sees
//! at every access exactly the ids and mappings a streamed read would.

use std::sync::Arc;

use crate::units::{Pid, Vpn, PAGE_SHIFT};
use crate::workload::{Op, VmaKind, Workload};

/// One mapping of [`PageIds`]: `(first id, pid, start vpn, pages, kind)`.
pub type PageIdRange = (u32, Pid, Vpn, u64, VmaKind);

/// Dense ids for every page the workload maps, in order of mapping, so per-page
/// counts are plain vectors.
#[derive(Debug, Default, Clone)]
pub struct PageIds {
    /// Per process: (start vpn, pages, first id), sorted by start.
    ranges: Vec<Vec<(Vpn, u64, u32)>>,
    /// One entry per mapping, in order of mapping (so of first id).
    starts: Vec<PageIdRange>,
    next: u32,
}

impl PageIds {
    /// Give the `nr` pages from `start` of process `pid` the next ids.
    pub fn map(&mut self, pid: usize, start: Vpn, nr: u64, kind: VmaKind) {
        if self.ranges.len() <= pid {
            self.ranges.resize(pid + 1, Vec::new());
        }
        let r = &mut self.ranges[pid];
        let at = r.partition_point(|&(s, _, _)| s < start);
        // A remapped range keeps its old ids where they overlap; new pages get new ids.
        r.insert(at, (start, nr, self.next));
        self.starts
            .push((self.next, Pid(pid as u32), start, nr, kind));
        self.next = self
            .next
            .checked_add(nr as u32)
            .expect("fewer than 2^32 pages");
    }

    /// The id of page `vpn` of process `pid`, if mapped.
    #[inline]
    pub fn id(&self, pid: usize, vpn: Vpn) -> Option<u32> {
        let r = self.ranges.get(pid)?;
        let i = r.partition_point(|&(s, _, _)| s <= vpn).checked_sub(1)?;
        let (s, n, base) = r[i];
        (vpn < s + n).then(|| base + (vpn - s) as u32)
    }

    /// The mapping `id` belongs to.
    pub fn entry_of(&self, id: u32) -> Option<&PageIdRange> {
        // Entries are appended with increasing first ids.
        let i = self.starts.partition_point(|e| e.0 <= id).checked_sub(1)?;
        let e = &self.starts[i];
        (((id - e.0) as u64) < e.3).then_some(e)
    }

    /// Every mapping, in order of first id.
    pub fn mappings(&self) -> &[PageIdRange] {
        &self.starts
    }

    /// Ids given so far (one past the largest).
    pub fn len(&self) -> usize {
        self.next as usize
    }

    /// Whether no page is mapped.
    pub fn is_empty(&self) -> bool {
        self.next == 0
    }
}

/// A mapping met in the stream after `before` accesses had been read.
#[derive(Debug, Clone, Copy)]
struct MapEvent {
    before: u64,
    pid: usize,
    start: Vpn,
    nr: u64,
    kind: VmaKind,
}

/// The workload's future read from a fresh copy of its stream, in the engine's order
/// for a single thread and round-robin by batch across threads.
pub struct StreamedFuture {
    workload: Box<dyn Workload>,
    ids: PageIds,
    live: Vec<(usize, usize)>,
    turn: usize,
    batch: Vec<Op>,
    pos: usize,
    /// Accesses returned so far.
    read: u64,
    /// Where the stream's own mappings appeared, when a tape is being made.
    map_log: Option<Vec<MapEvent>>,
}

impl StreamedFuture {
    /// The future of `workload` (fresh: nothing filled yet), its prologues mapped.
    pub fn new(mut workload: Box<dyn Workload>) -> StreamedFuture {
        let shape = workload.shape();
        let mut ids = PageIds::default();
        let mut live = Vec::new();
        let mut buf = Vec::new();
        for (p, proc) in shape.processes.iter().enumerate() {
            buf.clear();
            workload.prologue(p, &mut buf);
            for op in &buf {
                if let Op::Mmap { addr, len, kind } = *op {
                    ids.map(p, addr >> PAGE_SHIFT, len >> PAGE_SHIFT, kind);
                }
            }
            for t in 0..proc.nr_threads as usize {
                live.push((p, t));
            }
        }
        StreamedFuture {
            workload,
            ids,
            live,
            turn: 0,
            batch: Vec::new(),
            pos: 0,
            read: 0,
            map_log: None,
        }
    }

    /// The pages mapped so far.
    pub fn ids(&self) -> &PageIds {
        &self.ids
    }

    /// The next access's page id, or `None` at the end of the stream.
    pub fn next_id(&mut self) -> Option<u32> {
        loop {
            while self.pos < self.batch.len() {
                let op = self.batch[self.pos];
                self.pos += 1;
                let process = self.live[self.turn % self.live.len().max(1)].0;
                match op {
                    Op::Access { addr, .. } => {
                        if let Some(id) = self.ids.id(process, addr >> PAGE_SHIFT) {
                            self.read += 1;
                            return Some(id);
                        }
                    }
                    Op::Mmap { addr, len, kind } => {
                        let (start, nr) = (addr >> PAGE_SHIFT, len >> PAGE_SHIFT);
                        self.ids.map(process, start, nr, kind);
                        if let Some(log) = self.map_log.as_mut() {
                            log.push(MapEvent {
                                before: self.read,
                                pid: process,
                                start,
                                nr,
                                kind,
                            });
                        }
                    }
                    Op::Munmap { .. } => {}
                }
            }
            if self.live.is_empty() {
                return None;
            }
            if !self.batch.is_empty() {
                self.turn = (self.turn + 1) % self.live.len();
            }
            self.batch.clear();
            self.pos = 0;
            let (p, t) = self.live[self.turn];
            self.workload.fill(p, t, &mut self.batch);
            if self.batch.is_empty() {
                self.live.remove(self.turn);
                if self.live.is_empty() {
                    return None;
                }
                self.turn %= self.live.len();
            }
        }
    }
}

/// A run's whole future, read once: each access's page id, and where each mapping
/// appeared, so that any number of readers can replay it.
pub struct FutureTape {
    /// The ids the prologues gave.
    prologue_ids: PageIds,
    /// Each access's page id, in the order a [`StreamedFuture`] reads them.
    ids: Vec<u32>,
    /// The stream's own mappings, in order.
    maps: Vec<MapEvent>,
}

impl FutureTape {
    /// Read `workload` (fresh) to its end.
    pub fn read(workload: Box<dyn Workload>) -> FutureTape {
        Self::read_within(workload, u64::MAX).expect("a read without a limit completes")
    }

    /// Like [`FutureTape::read`], but give up and return `None` as soon as the tape
    /// takes more than `max_bytes`.
    pub fn read_within(workload: Box<dyn Workload>, max_bytes: u64) -> Option<FutureTape> {
        let mut fut = StreamedFuture::new(workload);
        let prologue_ids = fut.ids.clone();
        fut.map_log = Some(Vec::new());
        let max_ids = max_bytes / std::mem::size_of::<u32>() as u64;
        let mut ids = Vec::new();
        while let Some(id) = fut.next_id() {
            if ids.len() as u64 >= max_ids {
                return None;
            }
            ids.push(id);
        }
        ids.shrink_to_fit();
        Some(FutureTape {
            prologue_ids,
            ids,
            maps: fut.map_log.take().unwrap_or_default(),
        })
    }

    /// Accesses on the tape.
    pub fn accesses(&self) -> u64 {
        self.ids.len() as u64
    }

    /// Bytes the tape takes.
    pub fn bytes(&self) -> u64 {
        (self.ids.len() * std::mem::size_of::<u32>()
            + self.maps.len() * std::mem::size_of::<MapEvent>()) as u64
    }
}

/// A reader of a shared [`FutureTape`]: at every access it has the ids and mappings a
/// [`StreamedFuture`] of the same stream would have at that access.
pub struct TapeReader {
    tape: Arc<FutureTape>,
    ids: PageIds,
    /// Accesses returned so far.
    read: usize,
    /// Mapping events applied so far.
    mapped: usize,
}

impl TapeReader {
    /// A reader at the start of `tape`.
    pub fn new(tape: Arc<FutureTape>) -> TapeReader {
        TapeReader {
            ids: tape.prologue_ids.clone(),
            tape,
            read: 0,
            mapped: 0,
        }
    }

    /// The pages mapped so far.
    pub fn ids(&self) -> &PageIds {
        &self.ids
    }

    /// The next access's page id, or `None` at the end of the tape.
    #[inline]
    pub fn next_id(&mut self) -> Option<u32> {
        // A streamed read applies the mappings it meets before the access it returns.
        while let Some(m) = self.tape.maps.get(self.mapped) {
            if m.before > self.read as u64 {
                break;
            }
            self.ids.map(m.pid, m.start, m.nr, m.kind);
            self.mapped += 1;
        }
        let id = *self.tape.ids.get(self.read)?;
        self.read += 1;
        Some(id)
    }
}

/// A future read either way.
pub enum Future {
    /// From a fresh copy of the stream.
    Streamed(StreamedFuture),
    /// From a shared tape.
    Taped(TapeReader),
}

impl Future {
    /// The next access's page id, or `None` at the end.
    #[inline]
    pub fn next_id(&mut self) -> Option<u32> {
        match self {
            Future::Streamed(f) => f.next_id(),
            Future::Taped(f) => f.next_id(),
        }
    }

    /// The pages mapped so far.
    pub fn ids(&self) -> &PageIds {
        match self {
            Future::Streamed(f) => f.ids(),
            Future::Taped(f) => f.ids(),
        }
    }

    /// The pages mapped so far, kept after the read.
    pub fn into_ids(self) -> PageIds {
        match self {
            Future::Streamed(f) => f.ids,
            Future::Taped(f) => f.ids,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{ProcessShape, WorkloadShape};

    #[test]
    fn page_ids_are_dense_and_follow_mappings() {
        let mut ids = PageIds::default();
        ids.map(0, 100, 10, VmaKind::Anon);
        ids.map(1, 100, 5, VmaKind::Anon);
        ids.map(0, 50, 4, VmaKind::Anon);
        assert_eq!(ids.id(0, 100), Some(0));
        assert_eq!(ids.id(0, 109), Some(9));
        assert_eq!(ids.id(0, 110), None);
        assert_eq!(ids.id(1, 104), Some(14));
        assert_eq!(ids.id(0, 53), Some(18));
        assert_eq!(ids.id(0, 49), None);
        assert_eq!(ids.len(), 19);
        assert_eq!(ids.entry_of(16).map(|e| e.2), Some(50));
    }

    /// Two processes of two threads; each thread maps a new 8-page range every third
    /// batch and reads pages of its last ranges, some not mapped yet (skipped), for
    /// `batches` batches.
    struct Mapper {
        batches: u32,
        filled: Vec<u32>,
    }

    impl Workload for Mapper {
        fn shape(&self) -> WorkloadShape {
            let process = |name: &str| ProcessShape {
                name: name.into(),
                nr_threads: 2,
                mlp: 1.0,
            };
            WorkloadShape {
                processes: vec![process("a"), process("b")],
                footprint_bytes: 1 << 30,
            }
        }
        fn prologue(&mut self, process: usize, out: &mut Vec<Op>) {
            out.push(Op::Mmap {
                addr: (process as u64 + 1) << 32,
                len: 4 << PAGE_SHIFT,
                kind: VmaKind::Anon,
            });
        }
        fn fill(&mut self, process: usize, thread: usize, out: &mut Vec<Op>) {
            let k = process * 2 + thread;
            let n = self.filled[k];
            if n == self.batches + thread as u32 {
                return;
            }
            self.filled[k] += 1;
            let base = (process as u64 + 1) << 32;
            let range = |r: u64| base + ((1 + r * 4 + thread as u64) << (PAGE_SHIFT + 3));
            if n % 3 == 1 {
                out.push(Op::Mmap {
                    addr: range(n as u64),
                    len: 8 << PAGE_SHIFT,
                    kind: if n.is_multiple_of(2) {
                        VmaKind::Anon
                    } else {
                        VmaKind::File
                    },
                });
            }
            for j in 0..5u64 {
                // The range mapped this batch, the next (not mapped yet) and the prologue's.
                let addr = match j % 3 {
                    0 => range(n as u64) + (j << PAGE_SHIFT),
                    1 => range(n as u64 + 1) + (j << PAGE_SHIFT),
                    _ => base + ((j % 4) << PAGE_SHIFT),
                };
                out.push(Op::Access {
                    addr,
                    write: j == 2,
                    gap_ns: 0,
                });
            }
        }
    }

    fn mapper() -> Box<dyn Workload> {
        Box::new(Mapper {
            batches: 20,
            filled: vec![0; 4],
        })
    }

    #[test]
    fn a_tape_reads_as_the_stream_would_at_every_access() {
        let tape = Arc::new(FutureTape::read(mapper()));
        let mut streamed = StreamedFuture::new(mapper());
        let mut taped = TapeReader::new(Arc::clone(&tape));
        let mut again = TapeReader::new(Arc::clone(&tape));
        assert_eq!(taped.ids().len(), 8, "the prologues' ids before any read");
        let mut n = 0;
        loop {
            let (s, t) = (streamed.next_id(), taped.next_id());
            assert_eq!(s, t, "access {n}");
            assert_eq!(again.next_id(), s, "a second reader, access {n}");
            // The mappings met so far, the same at every access.
            assert_eq!(streamed.ids().len(), taped.ids().len(), "access {n}");
            assert_eq!(
                streamed.ids().mappings(),
                taped.ids().mappings(),
                "access {n}"
            );
            if s.is_none() {
                break;
            }
            n += 1;
        }
        assert_eq!(n, tape.accesses());
        assert!(
            streamed.ids().mappings().len() > 8,
            "mappings met mid-stream"
        );
        // Accesses to ranges not mapped yet are not on the tape.
        assert!(n < 4 * 20 * 5, "{n}");
        assert_eq!(taped.next_id(), None, "the end stays the end");
    }

    #[test]
    fn a_tape_over_its_limit_is_abandoned() {
        let whole = FutureTape::read(mapper());
        let bytes = whole.accesses() * 4;
        assert!(FutureTape::read_within(mapper(), bytes).is_some());
        assert!(FutureTape::read_within(mapper(), bytes - 4).is_none());
    }
}
