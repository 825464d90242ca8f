//! The access stream: what a workload (generator, trace, or live process) produces.
//!
//! A workload is a set of processes, each with threads. Every thread produces its own
//! stream of [`Op`]s; the machine interleaves threads by their virtual clocks, so a
//! workload never reasons about time except through the compute gap between accesses.

use serde::Serialize;

/// What kind of mapping an mmap creates. Policies that care about allocation units
/// (PET's P-blocks) only consider anonymous mappings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum VmaKind {
    /// Private anonymous memory (heap arrays, mmap(MAP_ANONYMOUS)).
    Anon,
    /// A file mapping (page cache); tracked but never huge.
    File,
}

/// One operation of a thread's stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// A load or store of one cache line at `addr`, issued `gap_ns` of compute time
    /// after the previous operation of the same thread.
    Access {
        /// Virtual address.
        addr: u64,
        /// Store (true) or load (false).
        write: bool,
        /// Compute time before this access, in nanoseconds.
        gap_ns: u32,
    },
    /// A new mapping `[addr, addr+len)`; `addr` and `len` are page aligned.
    Mmap {
        /// Start address (page aligned).
        addr: u64,
        /// Length in bytes (page aligned, > 0).
        len: u64,
        /// Anonymous or file-backed.
        kind: VmaKind,
    },
    /// Unmap `[addr, addr+len)`; every page in it is freed.
    Munmap {
        /// Start address (page aligned).
        addr: u64,
        /// Length in bytes (page aligned).
        len: u64,
    },
}

/// The static shape of a workload, known before it runs: the machine sizes its fast
/// tier from `footprint_bytes` and creates the processes and threads.
#[derive(Debug, Clone, Serialize)]
pub struct WorkloadShape {
    /// One entry per process.
    pub processes: Vec<ProcessShape>,
    /// Peak bytes of memory the workload maps and touches (sum over processes); the
    /// fast tier of a `1:N` ratio is `footprint_bytes / (N + 1)`.
    pub footprint_bytes: u64,
}

/// One process of a workload.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessShape {
    /// Human-readable name (e.g. `gups`, `pmbench-delay-3`).
    pub name: String,
    /// Number of threads; each produces its own stream.
    pub nr_threads: u32,
    /// Memory-level parallelism of this process's threads: how many LLC misses a
    /// thread overlaps on average. Memory latency is divided by it.
    pub mlp: f64,
}

/// A source of accesses.
///
/// The machine calls [`Workload::fill`] for a thread whenever that thread's buffered
/// operations run out. A workload must be deterministic for a given construction
/// (seed included) and must not depend on the order in which threads are filled
/// beyond each thread's own sequence.
pub trait Workload: Send {
    /// The processes, threads and footprint. Called once, before the first `fill`.
    fn shape(&self) -> WorkloadShape;

    /// Mappings the process creates before any of its threads runs (its start-up
    /// allocations). Only `Mmap` operations belong here. Default: none.
    fn prologue(&mut self, _process: usize, _out: &mut Vec<Op>) {}

    /// Append the next operations of `(process, thread)` to `out` (`out` is empty on
    /// entry). Appending nothing means that thread has finished.
    fn fill(&mut self, process: usize, thread: usize, out: &mut Vec<Op>);

    /// Sampled simulation (`sim.sample_rate < 1`): produce only the accesses to the 2 MiB
    /// regions `sampler` keeps, generating them directly instead of generating every
    /// access for the machine to drop. Called once, before `shape` is used to size the
    /// machine and before the first `prologue`. Returns true if the workload now
    /// restricts itself; false (the default) leaves the filtering to the machine.
    ///
    /// Contract: a restricted stream has the law of the full stream filtered by the
    /// sampler — per thread, the kept accesses with the same distribution, order and
    /// compute gaps (a dropped access's gap is dropped with it) — though not the same
    /// bytes, since the generator draws fewer random numbers. Mappings are unchanged.
    /// Under strata by mapping ([`crate::RegionSampler::by_mapping`]) what is kept
    /// depends on the mapping an address is in: a workload restricting itself then
    /// follows its mappings with a [`crate::StreamSampler`].
    ///
    /// Pages the sampler samples in time ([`crate::RegionSampler::time_sampled`]) are
    /// kept whatever their unit, and a restricted stream keeps the accesses to them
    /// that [`crate::TimeThinning`] keeps, thread by thread.
    fn restrict_to(&mut self, _sampler: &crate::scale::RegionSampler) -> bool {
        false
    }

    /// Sampled simulation with `sim.time_sampled_weight > 0`: the pages, as
    /// `(process, page)`, that carry at least `min_share` of the workload's accesses
    /// by a profile of its own (a graph kernel's first trial), to be sampled in time
    /// rather than in space (`docs/sampling.md`). Called once, before
    /// [`Workload::restrict_to`], with the sampler before any page is sampled in
    /// time. Default: none (the workload has no profile; everything is sampled in
    /// space).
    fn time_sampled_pages(
        &mut self,
        _sampler: &crate::scale::RegionSampler,
        _min_share: f64,
    ) -> Vec<(u32, crate::Vpn)> {
        Vec::new()
    }

    /// Total number of accesses this workload will produce if known in advance; used
    /// only for progress reporting.
    fn expected_accesses(&self) -> Option<u64> {
        None
    }
}
