//! The deterministic parallel-program engine behind the generators whose threads
//! share state (the graph kernels, liblinear, XGBoost, the stencils).
//!
//! A real OpenMP program runs its threads concurrently over shared arrays; what one
//! thread reads can depend on what another wrote a moment earlier (a BFS claims a
//! vertex with a compare-and-swap, Afforest links trees another thread is also
//! linking). A generator, however, must give every thread a stream that depends only
//! on the seed, never on the order in which the machine asks for the threads'
//! batches. The engine reconciles the two:
//!
//! - A [`Program`] is the real algorithm over host-side arrays, written as a state
//!   machine whose [`Program::step`] runs one *piece* of work — one grain of one
//!   thread's share of a parallel loop, or one serial action of the master thread —
//!   and sends that piece's loads and stores to a [`Sink`], attributed to the thread
//!   that runs it.
//! - Pieces run in one fixed global order: the threads of a parallel loop advance
//!   together grain by grain, round-robin ([`ParFor`]), which is how equally fast
//!   concurrent threads interleave. Races resolve in that order (the first claimant
//!   of a vertex in the global order wins its compare-and-swap), so results are as
//!   deterministic as the seed.
//! - [`Runner`] drives the program lazily: when the machine asks for thread `t`'s next
//!   batch, it runs pieces until `t`'s queue holds a batch, queueing the other
//!   threads' operations for their own turns. Each thread's stream is therefore the
//!   concatenation of its pieces in global order, whatever the fill order.
//!
//! **Replayed trials.** GAP runs a kernel `-n` times on one graph. A run long enough
//! for a tiering policy's periods (minutes of machine time) needs hundreds of trials,
//! and computing each one on the host costs as much as simulating it. A [`Runner`]
//! built [`Runner::with_replays`] therefore records each thread's operations from the
//! first `"trial"` mark on (the computed trials), and once the program has finished
//! it replays them, trial by trial in turn, for the extra trials: each thread's
//! stream is then what it would be if the program had run those trials again with the
//! same sources. For PageRank, whose every trial makes the same accesses, that is
//! exact; for BFS and BC a replayed trial repeats a computed trial's source. Only the
//! kept operations are recorded ([`Runner::keep_only`]), so a sampled run's recording
//! is the sample's size.
//!
//! Memory: the queues hold the operations of threads that lag behind the one being
//! filled, so they grow with the skew between threads' simulated progress (the
//! machine keeps threads within one time slice of each other, and the work of every
//! parallel loop is dealt evenly, so the skew stays small). With one thread nothing
//! is ever queued beyond one batch.
//!
//! Two emission conventions keep the streams at the granularity the memory system
//! sees (a tierkit access is one cache-line load or store):
//!
//! - **Sequential streams** (a loop walking an array in address order) emit one
//!   access per cache line entered ([`Stream`]); the following loads of the same line
//!   are L1 hits and never leave the core.
//! - **Data-dependent accesses** (`parent[v]` for a neighbour `v`, `w[feature]`) are
//!   emitted every time, however close to the previous one: whether they hit in a
//!   cache is for the simulated LLC to decide.

use std::collections::VecDeque;
use std::ops::Range;

use tierkit_core::{ComputeCarry, Op, StreamSampler, TimeThinning, PAGE_SIZE};

use crate::common;
use crate::BATCH_OPS;

/// Bytes per cache line: the unit of one access.
pub(crate) const LINE_BYTES: u64 = 64;

/// Where a program's memory operations go.
pub(crate) trait Sink {
    /// A load (`write == false`) or store by `thread` of the line holding `addr`.
    fn access(&mut self, thread: usize, addr: u64, write: bool);

    /// A non-access operation (an `mmap` or `munmap` of a short-lived allocation) by
    /// `thread`.
    fn op(&mut self, _thread: usize, _op: Op) {}

    /// A named point of the program (the start of a phase). Tests record marks to
    /// cut the stream into phases; emission ignores them.
    fn mark(&mut self, _what: &'static str) {}
}

/// A sink that only counts accesses: how a workload learns its exact
/// `expected_accesses` by running its program once.
#[derive(Debug, Default)]
pub(crate) struct Counter {
    /// Accesses seen so far.
    pub accesses: u64,
    /// The access count at each `"trial"` mark.
    pub trial_starts: Vec<u64>,
}

impl Sink for Counter {
    #[inline]
    fn access(&mut self, _thread: usize, _addr: u64, _write: bool) {
        self.accesses += 1;
    }

    fn mark(&mut self, what: &'static str) {
        if what == TRIAL_MARK {
            self.trial_starts.push(self.accesses);
        }
    }
}

/// The mark a program sends at the start of each trial (see "Replayed trials").
pub(crate) const TRIAL_MARK: &str = "trial";

/// A sink that counts the accesses to each page of a span during a program's first
/// trial (from the first `"trial"` mark to the second, or to the end).
#[derive(Debug)]
struct PageProfile {
    first_vpn: u64,
    /// Accesses to page `first_vpn + i`.
    counts: Vec<u64>,
    /// Accesses counted, inside the span or not.
    total: u64,
    trials_seen: u32,
}

impl Sink for PageProfile {
    #[inline]
    fn access(&mut self, _thread: usize, addr: u64, _write: bool) {
        let i = (addr / PAGE_SIZE).wrapping_sub(self.first_vpn);
        if let Some(c) = self.counts.get_mut(i as usize) {
            *c += 1;
        }
        self.total += 1;
    }

    fn mark(&mut self, what: &'static str) {
        if what == TRIAL_MARK {
            self.trials_seen += 1;
            if self.trials_seen == 1 {
                // What came before (building the graph) is not replayed.
                self.counts.iter_mut().for_each(|c| *c = 0);
                self.total = 0;
            }
        }
    }
}

/// The pages of `vpns` that take at least `min_share` of the accesses of a copy of
/// `program`'s first trial (all of it, when it marks no trial), hottest first: the
/// pages a sampled run must sample in time ([`tierkit_core::Workload::time_sampled_pages`]).
/// One trial is the profile because replayed trials repeat the computed ones.
pub(crate) fn hot_pages<P: Program>(program: &P, vpns: Range<u64>, min_share: f64) -> Vec<u64> {
    let mut p = program.clone();
    let mut profile = PageProfile {
        first_vpn: vpns.start,
        counts: vec![0; vpns.end.saturating_sub(vpns.start) as usize],
        total: 0,
        trials_seen: 0,
    };
    while profile.trials_seen < 2 && p.step(&mut profile) {}
    let floor = (min_share * profile.total as f64).ceil().max(1.0) as u64;
    let mut hot: Vec<(u64, u64)> = profile
        .counts
        .iter()
        .enumerate()
        .filter(|&(_, &c)| c >= floor)
        .map(|(i, &c)| (c, vpns.start + i as u64))
        .collect();
    hot.sort_unstable_by(|a, b| b.cmp(a));
    hot.into_iter().map(|(_, vpn)| vpn).collect()
}

/// Each thread's recorded operations of the computed trials, and where each trial
/// starts in them. Encoded as `recorded.rs` encodes a recording (2–5 bytes an access
/// rather than an [`Op`]'s 24): an exact trial can be hundreds of millions of accesses.
#[derive(Debug, Default)]
struct TrialRecording {
    /// Per thread: its encoded operations since the first trial mark.
    bytes: Vec<Vec<u8>>,
    /// Per thread: the encoder's previous access address.
    last: Vec<u64>,
    /// Per thread: (byte offset, previous access address) where each trial starts.
    starts: Vec<Vec<(usize, u64)>>,
    /// Per thread: replayed trials done, and (byte offset, previous access address)
    /// in the current one once started.
    cursor: Vec<(u32, Option<(usize, u64)>)>,
    /// Per thread, when compute is carried: the compute dropped after the last kept
    /// access of what precedes each trial mark (`tails[t][k + 1]` is trial `k`'s),
    /// and of the last trial once replay starts. A trial is recorded with the
    /// compute it carries within itself; a replay adds the previous trial's tail to
    /// its first access, as the filtered stream of the full replay would.
    tails: Vec<Vec<u64>>,
}

impl TrialRecording {
    fn new(nr_threads: usize) -> Self {
        TrialRecording {
            bytes: vec![Vec::new(); nr_threads],
            last: vec![0; nr_threads],
            starts: vec![Vec::new(); nr_threads],
            cursor: vec![(0, None); nr_threads],
            tails: vec![Vec::new(); nr_threads],
        }
    }

    /// Record `op` if the first trial has started (the build before it is not
    /// replayed).
    fn push(&mut self, thread: usize, op: &Op) {
        if !self.starts[thread].is_empty() {
            crate::recorded::encode(op, &mut self.last[thread], &mut self.bytes[thread]);
        }
    }

    /// Mark the start of a trial in every thread's recording.
    fn start_trial(&mut self) {
        for t in 0..self.bytes.len() {
            self.starts[t].push((self.bytes[t].len(), self.last[t]));
        }
    }

    /// Append thread `thread`'s next replayed operations to `out`, up to
    /// [`BATCH_OPS`], for `replayed_trials` trials in all. `carry`: the thread's
    /// carried compute when compute is carried.
    fn replay(
        &mut self,
        thread: usize,
        replayed_trials: u32,
        mut carry: Option<&mut ThreadCarry>,
        out: &mut Vec<Op>,
    ) {
        let computed = self.starts[thread].len();
        let bytes = &self.bytes[thread];
        if let Some(c) = carry.as_deref_mut() {
            // The last trial ends where replay starts.
            if self.tails[thread].len() == computed {
                self.tails[thread].push(c.end_segment());
            }
        }
        while out.len() < BATCH_OPS {
            let (done, at) = self.cursor[thread];
            if done == replayed_trials || computed == 0 {
                return;
            }
            let k = done as usize % computed;
            let (mut pos, mut last) = at.unwrap_or(self.starts[thread][k]);
            let end = self.starts[thread]
                .get(k + 1)
                .map_or(bytes.len(), |&(at, _)| at);
            while pos < end && out.len() < BATCH_OPS {
                let mut op = crate::recorded::decode(bytes, &mut pos, &mut last);
                if let (Some(c), Op::Access { gap_ns, .. }) = (carry.as_deref_mut(), &mut op) {
                    *gap_ns = c.owed.keep(*gap_ns);
                }
                out.push(op);
            }
            self.cursor[thread] = if pos == end {
                if let Some(c) = carry.as_deref_mut() {
                    c.owed.drop_ns(self.tails[thread][k + 1]);
                }
                (done + 1, None)
            } else {
                (done, Some((pos, last)))
            };
        }
    }
}

/// One thread's compute carried from dropped accesses to kept ones in a restricted
/// graph stream ([`tierkit_core::SampledCompute::Carried`]), split at trial marks so
/// that a recorded trial carries only its own compute (see [`TrialRecording`]).
#[derive(Debug, Clone, Copy, Default)]
struct ThreadCarry {
    /// Dropped since the last trial mark (or the start), for the next kept access.
    within: ComputeCarry,
    /// Owed to the next kept access from before the last trial mark.
    owed: ComputeCarry,
}

impl ThreadCarry {
    /// End a segment at a trial mark (or at the end of the computed trials): what
    /// it dropped after its last kept access becomes owed, and is returned as its
    /// tail.
    fn end_segment(&mut self) -> u64 {
        let tail = self.within.pending_ns();
        self.within = ComputeCarry::default();
        self.owed.drop_ns(tail);
        tail
    }
}

/// Which pages of process 0 a sampled stream keeps: the sampler's decision for each
/// page of a span, one bit a page, looked up per access. The sampler's own test
/// (a search of the mappings, then two hashes) took a sixth of a sampled
/// `graph-bc`'s generation time; a kernel's arrays are mapped once, so the bits
/// are computed once. An address outside the span, or any address once the
/// mappings changed, asks the sampler.
#[derive(Debug)]
struct KeptPages {
    sampler: StreamSampler,
    first_vpn: u64,
    /// Pages the bits cover; 0 once the mappings changed.
    nr_pages: u64,
    /// Bit `i` is set when page `first_vpn + i` is kept.
    bits: Vec<u64>,
    /// Per thread, when the sampler samples pages in time: which of its accesses to
    /// them are kept. Empty otherwise.
    thinning: Vec<TimeThinning>,
    /// True when the sampler samples some page in time.
    in_time: bool,
    /// Per thread, when the sampler carries compute: the dropped accesses' compute
    /// for the next kept one. Empty otherwise, so that empty means "not carried".
    carry: Vec<ThreadCarry>,
}

impl KeptPages {
    /// Spans longer than this (4 TiB of address space, 128 MiB of bits) ask the
    /// sampler for every access instead.
    const MAX_SPAN_PAGES: u64 = 1 << 30;

    fn new(sampler: StreamSampler, vpns: Range<u64>, nr_threads: usize) -> Self {
        let in_time = !sampler.sampler().time_sampled().is_empty();
        let carry = if sampler.sampler().carries_compute() {
            vec![ThreadCarry::default(); nr_threads]
        } else {
            Vec::new()
        };
        let mut span = vpns.end.saturating_sub(vpns.start);
        let mut bits = Vec::new();
        if span > Self::MAX_SPAN_PAGES {
            span = 0;
        } else {
            bits = vec![0u64; span.div_ceil(64) as usize];
            for (i, vpn) in vpns.clone().enumerate() {
                if sampler.keeps(0, vpn << tierkit_core::PAGE_SHIFT) {
                    bits[i / 64] |= 1 << (i % 64);
                }
            }
        }
        KeptPages {
            sampler,
            first_vpn: vpns.start,
            nr_pages: span,
            bits,
            thinning: Vec::new(),
            in_time,
            carry,
        }
    }

    /// True if the page of `addr` is simulated (sampled in space or in time).
    #[inline]
    fn keeps(&self, addr: u64) -> bool {
        let i = (addr >> tierkit_core::PAGE_SHIFT).wrapping_sub(self.first_vpn);
        if i < self.nr_pages {
            self.bits[(i / 64) as usize] >> (i % 64) & 1 == 1
        } else {
            self.sampler.keeps(0, addr)
        }
    }

    /// True if `thread`'s access to the kept page of `addr` is kept: always, unless
    /// the page is sampled in time ([`TimeThinning`]).
    #[inline]
    fn keeps_in_time(&mut self, thread: usize, addr: u64) -> bool {
        let sampler = self.sampler.sampler();
        let Some(index) = sampler.time_sampled_index(0, addr >> tierkit_core::PAGE_SHIFT) else {
            return true;
        };
        if self.thinning.len() <= thread {
            self.thinning.resize_with(thread + 1, TimeThinning::default);
        }
        self.thinning[thread].keeps(sampler, 0, thread as u32, index)
    }

    fn observe(&mut self, op: &Op) {
        self.sampler.observe(0, op);
        self.nr_pages = 0;
        self.bits = Vec::new();
    }
}

/// A sink that appends to one queue of operations per thread (and, when trials are
/// replayed, to the recording of the computed trials).
#[derive(Debug)]
pub(crate) struct Queues {
    queues: Vec<VecDeque<Op>>,
    gap_ns: u32,
    /// Only accesses of process 0 this filter keeps are emitted.
    keep: Option<KeptPages>,
    /// Set when trials are replayed; records from the first trial mark on.
    recording: Option<TrialRecording>,
}

impl Queues {
    fn new(nr_threads: u32, gap_ns: u32) -> Self {
        Queues {
            queues: (0..nr_threads).map(|_| VecDeque::new()).collect(),
            gap_ns,
            keep: None,
            recording: None,
        }
    }

    #[inline]
    fn push(&mut self, thread: usize, op: Op) {
        if let Some(r) = &mut self.recording {
            r.push(thread, &op);
        }
        self.queues[thread].push_back(op);
    }
}

impl Sink for Queues {
    #[inline]
    fn access(&mut self, thread: usize, addr: u64, write: bool) {
        let op = Op::Access {
            addr,
            write,
            gap_ns: self.gap_ns,
        };
        let Some(kept) = &mut self.keep else {
            return self.push(thread, op);
        };
        let keep = kept.keeps(addr) && (!kept.in_time || kept.keeps_in_time(thread, addr));
        let Some(c) = kept.carry.get_mut(thread) else {
            if keep {
                self.push(thread, op);
            }
            return;
        };
        if !keep {
            c.within.drop_ns(self.gap_ns as u64);
            return;
        }
        // Recorded with the compute it carries within its trial; queued with what
        // is owed from before too.
        let within = c.within.keep(self.gap_ns);
        let live = c.owed.keep(within);
        let recorded = Op::Access {
            addr,
            write,
            gap_ns: within,
        };
        if let Some(r) = &mut self.recording {
            r.push(thread, &recorded);
        }
        self.queues[thread].push_back(Op::Access {
            addr,
            write,
            gap_ns: live,
        });
    }

    fn op(&mut self, thread: usize, op: Op) {
        if let Some(kept) = &mut self.keep {
            kept.observe(&op);
        }
        self.push(thread, op);
    }

    fn mark(&mut self, what: &'static str) {
        if what != TRIAL_MARK {
            return;
        }
        if let Some(r) = &mut self.recording {
            r.start_trial();
            if let Some(kept) = &mut self.keep {
                for (t, c) in kept.carry.iter_mut().enumerate() {
                    r.tails[t].push(c.end_segment());
                }
            }
        }
    }
}

/// An algorithm written as a resumable state machine (see the module docs).
pub(crate) trait Program: Clone + Send {
    /// Run the next piece of work, sending its operations to `sink`. Returns false,
    /// having sent nothing, once the program has finished.
    fn step<S: Sink>(&mut self, sink: &mut S) -> bool;
}

/// Run a copy of `program` to the end and count its accesses.
pub(crate) fn count_accesses<P: Program>(program: &P) -> u64 {
    count_with_replays(program, 0)
}

/// Run a copy of `program` to the end and count its accesses, plus those of
/// `replayed_trials` replayed trials (the computed trials in turn, see "Replayed
/// trials").
pub(crate) fn count_with_replays<P: Program>(program: &P, replayed_trials: u32) -> u64 {
    let mut p = program.clone();
    let mut c = Counter::default();
    while p.step(&mut c) {}
    let starts = &c.trial_starts;
    if starts.is_empty() {
        return c.accesses;
    }
    let trial = |k: usize| starts.get(k + 1).copied().unwrap_or(c.accesses) - starts[k];
    c.accesses
        + (0..replayed_trials as usize)
            .map(|i| trial(i % starts.len()))
            .sum::<u64>()
}

/// Drives a [`Program`] lazily for [`tierkit_core::Workload::fill`].
#[derive(Debug)]
pub(crate) struct Runner<P> {
    program: P,
    queues: Queues,
    finished: bool,
    /// Trials replayed after the program's own (see "Replayed trials").
    replayed_trials: u32,
}

impl<P: Program> Runner<P> {
    /// A runner over `program` for `nr_threads` threads; every access carries
    /// `gap_ns` of compute before it.
    pub(crate) fn new(program: P, nr_threads: u32, gap_ns: u32) -> Self {
        Self::with_replays(program, nr_threads, gap_ns, 0)
    }

    /// As [`Runner::new`], and once the program has finished, each thread replays
    /// its operations of the program's trials for `replayed_trials` more trials (the
    /// computed trials in turn; see "Replayed trials").
    pub(crate) fn with_replays(
        program: P,
        nr_threads: u32,
        gap_ns: u32,
        replayed_trials: u32,
    ) -> Self {
        let mut queues = Queues::new(nr_threads, gap_ns);
        let n = nr_threads as usize;
        queues.recording = (replayed_trials > 0).then(|| TrialRecording::new(n));
        Runner {
            program,
            queues,
            finished: false,
            replayed_trials,
        }
    }

    /// Emit only the accesses of process 0 that `sampler` keeps (a workload's
    /// [`tierkit_core::Workload::restrict_to`]), `sampler` knowing the workload's
    /// mappings. Call before the first [`Runner::fill`].
    pub(crate) fn keep_only(&mut self, sampler: StreamSampler, vpns: Range<u64>) {
        self.queues.keep = Some(KeptPages::new(sampler, vpns, self.queues.queues.len()));
    }

    /// [`Runner::keep_only`] the pages `sampler` keeps of `mappings`, the workload's
    /// every mapping (its process 0's whole address space): what a one-process
    /// workload's [`tierkit_core::Workload::restrict_to`] does.
    pub(crate) fn keep_only_sampled(
        &mut self,
        sampler: &tierkit_core::RegionSampler,
        mappings: &[crate::layout::Mapping],
    ) {
        let mut kept = StreamSampler::new(sampler.clone());
        for m in mappings {
            kept.observe(0, &m.mmap_op());
        }
        let first = mappings.iter().map(|m| m.addr).min().unwrap_or(0);
        let end = mappings.iter().map(|m| m.end()).max().unwrap_or(0);
        self.keep_only(kept, first / PAGE_SIZE..end.div_ceil(PAGE_SIZE));
    }

    /// True once [`Runner::keep_only`] has restricted the stream to a sample.
    pub(crate) fn is_restricted(&self) -> bool {
        self.queues.keep.is_some()
    }

    /// The trials replayed after the program's own.
    pub(crate) fn replayed_trials(&self) -> u32 {
        self.replayed_trials
    }

    /// Append thread `thread`'s next batch (at most [`BATCH_OPS`] operations) to
    /// `out`; nothing once its stream has ended.
    pub(crate) fn fill(&mut self, thread: usize, out: &mut Vec<Op>) {
        if thread >= self.queues.queues.len() {
            return;
        }
        while self.queues.queues[thread].len() < BATCH_OPS && !self.finished {
            self.finished = !self.program.step(&mut self.queues);
        }
        let q = &mut self.queues.queues[thread];
        if !q.is_empty() {
            let n = q.len().min(BATCH_OPS);
            out.extend(q.drain(..n));
            return;
        }
        self.replay(thread, out);
    }

    /// Thread `thread`'s next batch of replayed trials.
    fn replay(&mut self, thread: usize, out: &mut Vec<Op>) {
        if let Some(r) = &mut self.queues.recording {
            let carry = self
                .queues
                .keep
                .as_mut()
                .and_then(|k| k.carry.get_mut(thread));
            r.replay(thread, self.replayed_trials, carry, out);
        }
    }
}

/// How a parallel loop's iterations are dealt to threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Schedule {
    /// OpenMP `schedule(static)`: thread `t` gets the `t`-th contiguous block.
    Blocked,
    /// OpenMP `schedule(static, c)` or `schedule(dynamic, c)`: chunks of `c`
    /// iterations dealt round-robin (what `dynamic` amounts to when the threads run
    /// at the same speed, which is the deterministic stand-in for it).
    Cyclic(u64),
}

#[derive(Debug, Clone, Copy)]
struct Cursor {
    next: u64,
    end: u64,
    chunk: u64,
}

/// A parallel `for i in 0..n`, dealt as its [`Schedule`] says and executed grain by
/// grain, the threads taking turns (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct ParFor {
    n: u64,
    schedule: Schedule,
    grain: u64,
    cursors: Vec<Cursor>,
    turn: usize,
}

impl ParFor {
    /// A loop over `0..n` for `nr_threads` threads, pieces of at most `grain`
    /// iterations.
    pub(crate) fn new(n: u64, nr_threads: u32, schedule: Schedule, grain: u64) -> Self {
        let nr = nr_threads.max(1);
        let cursors = (0..nr as usize)
            .map(|t| match schedule {
                Schedule::Blocked => {
                    let (lo, hi) = common::share(n, nr, t);
                    Cursor {
                        next: lo,
                        end: hi,
                        chunk: 0,
                    }
                }
                Schedule::Cyclic(c) => {
                    let lo = (t as u64 * c).min(n);
                    Cursor {
                        next: lo,
                        end: (lo + c).min(n),
                        chunk: t as u64,
                    }
                }
            })
            .collect();
        ParFor {
            n,
            schedule,
            grain: grain.max(1),
            cursors,
            turn: 0,
        }
    }

    /// A loop whose thread `t` runs iterations `blocks[t]` (a static schedule of
    /// the outer loop of a nest, e.g. whole `k`-planes), pieces of at most `grain`.
    pub(crate) fn with_blocks(blocks: &[(u64, u64)], grain: u64) -> Self {
        ParFor {
            n: blocks.iter().map(|b| b.1).max().unwrap_or(0),
            schedule: Schedule::Blocked,
            grain: grain.max(1),
            cursors: blocks
                .iter()
                .map(|&(lo, hi)| Cursor {
                    next: lo,
                    end: hi,
                    chunk: 0,
                })
                .collect(),
            turn: 0,
        }
    }

    /// The next piece `(thread, lo, hi)`, or `None` once every iteration was dealt.
    pub(crate) fn next_piece(&mut self) -> Option<(usize, u64, u64)> {
        let nr = self.cursors.len();
        for _ in 0..nr {
            let t = self.turn;
            self.turn = (self.turn + 1) % nr;
            let c = &mut self.cursors[t];
            if c.next >= c.end {
                if let Schedule::Cyclic(size) = self.schedule {
                    c.chunk += nr as u64;
                    let lo = c.chunk.saturating_mul(size);
                    if lo < self.n {
                        c.next = lo;
                        c.end = (lo + size).min(self.n);
                    }
                }
            }
            if c.next < c.end {
                let lo = c.next;
                let hi = (lo + self.grain).min(c.end);
                c.next = hi;
                return Some((t, lo, hi));
            }
        }
        None
    }
}

/// One sequential stream through an array: emits an access only when it enters a
/// new cache line.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stream {
    line: u64,
}

impl Default for Stream {
    fn default() -> Self {
        Stream { line: u64::MAX }
    }
}

impl Stream {
    /// Touch the byte at `addr`.
    #[inline]
    pub(crate) fn touch<S: Sink>(&mut self, sink: &mut S, thread: usize, addr: u64, write: bool) {
        let line = addr / LINE_BYTES;
        if line != self.line {
            self.line = line;
            sink.access(thread, addr, write);
        }
    }

    /// Touch every byte of `[addr, addr + len)` (`len > 0`).
    #[inline]
    pub(crate) fn touch_range<S: Sink>(
        &mut self,
        sink: &mut S,
        thread: usize,
        addr: u64,
        len: u64,
        write: bool,
    ) {
        let first = addr / LINE_BYTES;
        let last = (addr + len - 1) / LINE_BYTES;
        let start = if first == self.line { first + 1 } else { first };
        for line in start..=last {
            sink.access(thread, line * LINE_BYTES, write);
        }
        self.line = last;
    }
}

/// Load the element `[addr, addr + len)` that a data-dependent access reads: one
/// access per line it spans (an 8-byte element spans one; a 48-byte record two or
/// three).
#[inline]
pub(crate) fn access_range<S: Sink>(sink: &mut S, thread: usize, addr: u64, len: u64, write: bool) {
    let first = addr / LINE_BYTES;
    let last = (addr + len - 1) / LINE_BYTES;
    sink.access(thread, addr, write);
    for line in first + 1..=last {
        sink.access(thread, line * LINE_BYTES, write);
    }
}

/// First-touch writes for pages `[lo, hi)` of the array at `base`: one store per
/// 4 KiB page, the way an initialisation loop faults a fresh allocation in.
#[inline]
pub(crate) fn first_touch<S: Sink>(sink: &mut S, thread: usize, base: u64, lo: u64, hi: u64) {
    for page in lo..hi {
        sink.access(thread, base + page * PAGE_SIZE, true);
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! A recording sink for the programs' tests.

    use super::*;

    /// One recorded event.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Event {
        /// An access by `thread`.
        Access {
            /// Thread.
            thread: usize,
            /// Address.
            addr: u64,
            /// Store?
            write: bool,
        },
        /// Another operation.
        Op(usize, Op),
        /// A mark.
        Mark(&'static str),
    }

    /// Records everything a program sends, in global order.
    #[derive(Debug, Default)]
    pub struct Recorder {
        /// The events.
        pub events: Vec<Event>,
    }

    impl Sink for Recorder {
        fn access(&mut self, thread: usize, addr: u64, write: bool) {
            self.events.push(Event::Access {
                thread,
                addr,
                write,
            });
        }
        fn op(&mut self, thread: usize, op: Op) {
            self.events.push(Event::Op(thread, op));
        }
        fn mark(&mut self, what: &'static str) {
            self.events.push(Event::Mark(what));
        }
    }

    /// Run `p` to the end and record it.
    pub fn record<P: Program>(p: &mut P) -> Vec<Event> {
        let mut r = Recorder::default();
        while p.step(&mut r) {}
        r.events
    }

    /// (address, write) of each access of a stretch of events.
    pub type Accesses = Vec<(u64, bool)>;

    /// The accesses before the first `"trial"` mark, and those of each trial (from its
    /// mark to the next one or the end).
    pub fn accesses_by_trial(events: &[Event]) -> (Accesses, Vec<Accesses>) {
        let accesses = |evs: &[Event]| -> Accesses {
            evs.iter()
                .filter_map(|e| match *e {
                    Event::Access { addr, write, .. } => Some((addr, write)),
                    _ => None,
                })
                .collect()
        };
        let mut at: Vec<usize> = events
            .iter()
            .enumerate()
            .filter(|(_, e)| matches!(e, Event::Mark(TRIAL_MARK)))
            .map(|(i, _)| i)
            .collect();
        let before = accesses(&events[..at.first().copied().unwrap_or(events.len())]);
        at.push(events.len());
        let trials = at
            .windows(2)
            .map(|w| accesses(&events[w[0]..w[1]]))
            .collect();
        (before, trials)
    }

    /// The events between the `n`-th mark called `from` (0-based) and the next mark
    /// of any name.
    pub fn phase<'a>(events: &'a [Event], from: &str, n: usize) -> &'a [Event] {
        let starts: Vec<usize> = events
            .iter()
            .enumerate()
            .filter(|(_, e)| matches!(e, Event::Mark(m) if *m == from))
            .map(|(i, _)| i + 1)
            .collect();
        let start = starts[n];
        let end = events[start..]
            .iter()
            .position(|e| matches!(e, Event::Mark(_)))
            .map_or(events.len(), |p| start + p);
        &events[start..end]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_pages_decide_as_the_sampler_inside_their_span_and_after_a_remap() {
        use tierkit_core::{RegionSampler, SampleStrata, SpaceScale, PAGE_SHIFT};
        let sampler =
            RegionSampler::new(SpaceScale::new(1.0 / 8.0), 11).with_strata(SampleStrata::Mapping);
        let mut stream = StreamSampler::new(sampler);
        // Two mappings with a hole between them and partial regions at both ends.
        let maps = [
            (1u64 << 30, 37u64 << 21),
            ((1u64 << 30) + (40 << 21), 5 << 12),
        ];
        for &(addr, len) in &maps {
            stream.observe(
                0,
                &Op::Mmap {
                    addr,
                    len,
                    kind: tierkit_core::VmaKind::Anon,
                },
            );
        }
        let first = maps[0].0 >> PAGE_SHIFT;
        let end = (maps[1].0 + maps[1].1) >> PAGE_SHIFT;
        let mut kept = KeptPages::new(stream.clone(), first..end, 1);
        let (mut yes, mut no) = (0, 0);
        // Every page of the span, and pages on either side of it.
        for vpn in first - 600..end + 600 {
            let addr = vpn << PAGE_SHIFT | 0x123;
            let want = stream.keeps(0, addr);
            assert_eq!(kept.keeps(addr), want, "page {vpn:#x}");
            if want {
                yes += 1
            } else {
                no += 1
            }
        }
        assert!(
            yes > 0 && no > 0,
            "a test of one answer only: {yes} kept, {no} not"
        );
        // Once the mappings change, every answer is the sampler's again.
        let unmap = Op::Munmap {
            addr: maps[0].0,
            len: 4 << 21,
        };
        stream.observe(0, &unmap);
        kept.observe(&unmap);
        for vpn in first..end {
            let addr = vpn << PAGE_SHIFT;
            assert_eq!(
                kept.keeps(addr),
                stream.keeps(0, addr),
                "page {vpn:#x} after munmap"
            );
        }
    }

    fn pieces(pf: &mut ParFor) -> Vec<(usize, u64, u64)> {
        std::iter::from_fn(|| pf.next_piece()).collect()
    }

    #[test]
    fn blocked_loops_cover_each_iteration_once_in_interleaved_grains() {
        let mut pf = ParFor::new(10, 2, Schedule::Blocked, 2);
        assert_eq!(
            pieces(&mut pf),
            vec![
                (0, 0, 2),
                (1, 5, 7),
                (0, 2, 4),
                (1, 7, 9),
                (0, 4, 5),
                (1, 9, 10)
            ]
        );
    }

    #[test]
    fn cyclic_loops_deal_chunks_round_robin() {
        let mut pf = ParFor::new(10, 2, Schedule::Cyclic(3), 8);
        assert_eq!(
            pieces(&mut pf),
            vec![(0, 0, 3), (1, 3, 6), (0, 6, 9), (1, 9, 10)]
        );
        // More threads than chunks: the idle threads get nothing.
        let mut pf = ParFor::new(4, 8, Schedule::Cyclic(3), 8);
        assert_eq!(pieces(&mut pf), vec![(0, 0, 3), (1, 3, 4)]);
        assert!(pieces(&mut ParFor::new(0, 3, Schedule::Blocked, 4)).is_empty());
    }

    #[test]
    fn streams_emit_one_access_per_line() {
        let mut r = testing::Recorder::default();
        let mut s = Stream::default();
        for i in 0..32u64 {
            s.touch(&mut r, 0, 4096 + 4 * i, false);
        }
        assert_eq!(r.events.len(), 2);
        let mut s = Stream::default();
        s.touch_range(&mut r, 1, 60, 8, true); // lines 0 and 1
        s.touch_range(&mut r, 1, 68, 100, true); // lines 1 (skipped), 2
        assert_eq!(r.events.len(), 5);
        access_range(&mut r, 0, 120, 48, false); // lines 1 and 2
        assert_eq!(r.events.len(), 7);
    }
}
