//! What an operating system lets a tiering policy observe and do.
//!
//! Modelled on DAMON's `damon_operations`: the policy (core) never walks page tables
//! or copies pages itself; it asks a [`Mechanisms`] implementation, which is the
//! simulated machine in `tierkit-sim` and the Linux kernel (DAMON, perf, pagemap,
//! move_pages) in the live daemon.
//!
//! **Costs.** Every call that a real kernel pays for is charged by the implementation
//! to whoever is running the policy code at the time (see [`Runner`]): a hinting-fault
//! handler charges the faulting thread, a background timer charges a tiering CPU, a
//! task-context scan charges the scanned process. The documentation of each method
//! says what it costs in the simulator.

use crate::units::*;
use crate::workload::VmaKind;
use serde::Serialize;

/// Static description of one memory tier.
#[derive(Debug, Clone, Serialize)]
pub struct TierInfo {
    /// Tier id; 0 is the fastest.
    pub id: TierId,
    /// Short name (`dram`, `cxl`, `pmem`).
    pub name: String,
    /// Capacity in base pages.
    pub capacity_pages: u64,
    /// Unloaded load latency in nanoseconds.
    pub load_ns: f64,
    /// Unloaded store latency in nanoseconds.
    pub store_ns: f64,
    /// Peak bandwidth in bytes per second.
    pub bandwidth_bytes_per_s: f64,
}

/// Free-page watermarks of a tier, in base pages (Linux `min`/`low`/`high`).
///
/// Fractional on a sampled machine: a tier shrunk N-fold keeps the full machine's
/// watermarks divided by N, so that a band of 1.8 sampled pages between two marks
/// (the full machine's 115) is not rounded to one or two (docs/sampling.md,
/// "Watermarks of a small sampled tier"). Whole numbers on an exact machine and live,
/// where every comparison is the kernel's integer one.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Watermarks {
    /// Below this, allocations fall back to the next tier and migrations into the
    /// tier fail.
    pub min: f64,
    /// Below this, the kernel wakes kswapd (the machine raises
    /// [`Event::LowWatermark`](crate::policy::Event::LowWatermark)).
    pub low: f64,
    /// kswapd reclaims until free pages reach this.
    pub high: f64,
}

impl Watermarks {
    /// Watermarks of whole pages.
    pub fn pages(min: u64, low: u64, high: u64) -> Watermarks {
        Watermarks {
            min: min as f64,
            low: low as f64,
            high: high as f64,
        }
    }

    /// The whole pages of `pages` above `mark` (one of these watermarks, fractional on
    /// a sampled tier), or 0 below it: what a budget may use without crossing the mark.
    pub fn whole_pages_above(pages: u64, mark: f64) -> u64 {
        (pages as f64 - mark).max(0.0) as u64
    }
}

/// What a policy can learn about one resident page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageInfo {
    /// Tier holding the page.
    pub tier: TierId,
    /// The page is part of a 2 MiB huge page (its head is [`huge_head`] of the vpn).
    pub huge: bool,
}

/// A virtual memory area of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Vma {
    /// First page.
    pub start_vpn: Vpn,
    /// Number of base pages.
    pub nr_pages: u64,
    /// Anonymous or file-backed.
    pub kind: crate::workload::VmaKind,
}

impl Vma {
    /// One past the last page.
    pub fn end_vpn(&self) -> Vpn {
        self.start_vpn + self.nr_pages
    }
    /// True if `vpn` lies inside.
    pub fn contains(&self, vpn: Vpn) -> bool {
        vpn >= self.start_vpn && vpn < self.end_vpn()
    }
}

/// Which event stream a sampling period applies to (PEBS-like).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum SampleKind {
    /// Loads that miss the LLC (`MEM_LOAD_L3_MISS_RETIRED`-like).
    LlcLoadMiss,
    /// All retired stores (`MEM_INST_RETIRED.ALL_STORES`-like), LLC hits included.
    Store,
}

/// Who runs a piece of policy code, and so who pays for the mechanisms it calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Runner {
    /// A kernel or daemon thread of the tiering system (kswapd, kpromoted,
    /// ksampled...). Its time is tiering CPU; when tiering threads share the
    /// application's CPUs (a machine setting) the application is slowed by it too.
    Kthread,
    /// Work done in the context of a process (like `task_numa_work`): charged as
    /// tiering CPU *and* as stall time on that process's threads.
    Task(Pid),
}

/// How a migration is carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MigrateMode {
    /// Inside a fault handler: the faulting thread waits for the copy.
    Sync,
    /// From a background thread: the runner pays CPU; the copy consumes bandwidth.
    Async,
}

/// Why a migration did not happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum MigrateError {
    /// The page is not mapped or not resident.
    NotPresent,
    /// The page is already in the target tier.
    AlreadyThere,
    /// The target tier would fall below its min watermark.
    NoSpace,
    /// The target tier does not exist.
    BadTier,
}

/// Identifies a timer a policy scheduled; the policy chooses the numbers.
pub type TimerId = u32;

/// The operating-system services a tiering policy may use.
///
/// All methods that take `(pid, vpn)` address the page containing `vpn`; for a page
/// inside a huge page they act on the whole huge page, as the kernel does on a
/// PMD-mapped THP.
pub trait Mechanisms {
    // ----- time, tiers and processes -------------------------------------------------

    /// Current time. In a fault handler: the fault time; in a timer: its deadline.
    fn now(&self) -> Nanos;
    /// The tiers, fastest first.
    fn tiers(&self) -> &[TierInfo];
    /// Free base pages in `tier`.
    fn free_pages(&self, tier: TierId) -> u64;
    /// The watermarks of `tier`.
    fn watermarks(&self, tier: TierId) -> Watermarks;
    /// Live processes, in pid order.
    fn processes(&self) -> Vec<Pid>;
    /// The VMAs of `pid` in address order (empty for an unknown pid).
    fn vmas(&self, pid: Pid) -> Vec<Vma>;
    /// Resident set size of `pid` in base pages (of the simulated machine: in a sampled
    /// run, the sampled regions' pages only).
    fn rss_pages(&self, pid: Pid) -> u64;
    /// How many pages of the full machine each simulated page stands for: `1 /
    /// sim.sample_rate` in a sampled simulation, 1 when exact (always, live). A
    /// mechanism whose pace the kernel derives from a process's full size (the NUMA
    /// scanner's `task_scan_min`, which divides by the RSS) multiplies by it.
    fn pages_per_simulated_page(&self) -> u64 {
        1
    }
    /// Accesses of the workload that reached memory so far (missed the LLC), where
    /// the backend can know it (the simulator does; a live process does not): the
    /// position in the stream [`BuildContext::fresh_workload`](crate::BuildContext)
    /// hands a clairvoyant reference. Only those policies (`oracle`) may use it.
    fn access_count(&self) -> Option<u64> {
        None
    }

    /// Whether a first touch of `vpn` by process `pid` would get a huge page, in an
    /// anonymous or file mapping of `kind` over `[start_vpn, start_vpn + nr_pages)`
    /// none of which is resident yet: THP is on, the 2 MiB range holding `vpn` lies
    /// inside the mapping, and a sampled run keeps that range whole. Only clairvoyant
    /// reference policies (`oracle-static`) use it, to plan in the units the machine
    /// will allocate before any page exists. `false` where the backend cannot know
    /// (live).
    fn would_map_huge(
        &self,
        _pid: Pid,
        _kind: VmaKind,
        _start_vpn: Vpn,
        _nr_pages: u64,
        _vpn: Vpn,
    ) -> bool {
        false
    }

    // ----- page state (pagemap / move_pages query) ------------------------------------

    /// Where the page containing `vpn` is, or `None` if it is not resident.
    /// Cost: none in the simulator (the kernel reads it from the page struct).
    fn page(&self, pid: Pid, vpn: Vpn) -> Option<PageInfo>;

    /// Call `f` for every resident page unit in `[start_vpn, start_vpn + nr_pages)`:
    /// once per base page, and once per huge page (with its head vpn). Returns the
    /// number of page-table entries walked. Cost: per entry walked, like a pagemap read.
    fn walk_pages(
        &mut self,
        pid: Pid,
        start_vpn: Vpn,
        nr_pages: u64,
        f: &mut dyn FnMut(Vpn, PageInfo),
    ) -> u64;

    /// [`walk_pages`](Self::walk_pages) for a caller that wants only the page units in
    /// `tier`: `f` is called for those alone. The walk and its cost are the same (a
    /// pagemap read visits every entry; the filter is the reader's); the simulator
    /// skips the call for the others, which a policy that looks for one tier's pages
    /// across every mapping (the `oracle`, each second) would otherwise pay per page.
    fn walk_tier_pages(
        &mut self,
        pid: Pid,
        start_vpn: Vpn,
        nr_pages: u64,
        tier: TierId,
        f: &mut dyn FnMut(Vpn, PageInfo),
    ) -> u64 {
        self.walk_pages(pid, start_vpn, nr_pages, &mut |vpn, info| {
            if info.tier == tier {
                f(vpn, info)
            }
        })
    }

    // ----- observation ---------------------------------------------------------------

    /// Arm the page so its next access raises a hinting fault
    /// ([`Event::HintFault`](crate::policy::Event::HintFault)) carrying the arm time.
    /// Returns false if the page is not resident. Arming a page that is already armed
    /// changes nothing — its arm time stays — as the kernel skips PROT_NONE PTEs.
    /// Cost: one PTE update.
    fn arm_hint_fault(&mut self, pid: Pid, vpn: Vpn) -> bool;

    /// Arm every resident page in the range whose tier passes `tier_filter` (or all
    /// if `None`), like one `change_prot_numa` call of a NUMA-balancing scan step.
    /// Pages already armed are skipped and keep their arm time. Returns the number of
    /// page units newly armed. Cost: per PTE walked.
    fn arm_range(
        &mut self,
        pid: Pid,
        start_vpn: Vpn,
        nr_pages: u64,
        tier_filter: Option<TierId>,
    ) -> u64;

    /// Test and clear the accessed ("young") bit of the page: true if it was accessed
    /// since the last clear. `None` if not resident. Cost: one PTE update plus its
    /// share of a TLB flush.
    fn test_and_clear_young(&mut self, pid: Pid, vpn: Vpn) -> Option<bool>;

    /// Set the sampling period for `kind`: one
    /// [`Event::Sample`](crate::policy::Event::Sample) every `period` qualifying
    /// events; 0 turns sampling of that kind off (the default). Cost: each delivered
    /// sample costs the tiering CPU its processing time.
    fn set_sample_period(&mut self, kind: SampleKind, period: u64);

    // ----- time ---------------------------------------------------------------------

    /// Raise [`Event::Timer`](crate::policy::Event::Timer) with `id` at time `at`
    /// (clamped to now), run by `runner`.
    fn schedule(&mut self, at: Nanos, id: TimerId, runner: Runner);

    /// Charge `ns` of the policy's own computation to the current runner (data
    /// structure upkeep that the mechanisms cannot see).
    fn charge_cpu(&mut self, ns: u64);

    /// Run `work` as a tiering kthread ([`Runner::Kthread`]): whatever it costs is
    /// charged to the kthread, not to the thread or task running now. For a kthread's
    /// work a policy must do at once inside another runner's event — on a sampled
    /// machine, the reclaim that the full machine's kswapd does alongside the faults
    /// one sampled fault stands for.
    fn as_kthread(&mut self, work: &mut dyn FnMut(&mut dyn Mechanisms));

    /// Stall every running application thread by `ns` (of the policy's time, as
    /// [`now`](Self::now)): the time a tiering thread that never sleeps (a busy
    /// poller) took from each of them since the last call, when it shares the
    /// application's cores. Only where tiering threads run on the
    /// application's CPUs (`machine.tiering_cpus = "shared"`); a no-op on dedicated
    /// tiering CPUs, and in live mode, where the thread takes real CPU.
    fn stall_app_threads(&mut self, _ns: u64) {}

    /// A deterministic pseudo-random number (seeded from the run's seed). Policies
    /// must take their randomness from here, never from the environment.
    fn random(&mut self) -> u64;

    /// A page of `[start_vpn, start_vpn + nr_pages)` (`nr_pages > 0`) drawn at random
    /// for a policy that checks one random page of a range (PET's sample page per
    /// block): uniform over the range on a full machine. A sampled machine simulates
    /// one page in N and draws among those, moving a uniform draw to the simulated page
    /// that stands for it in its stratum (`RegionSampler::representative`), so that
    /// the draw finds a page as often as the full machine's would, where a uniform
    /// draw would find one N times less often. Cost: none beyond the policy's own.
    fn random_page(&mut self, _pid: Pid, start_vpn: Vpn, nr_pages: u64) -> Vpn {
        start_vpn + self.random() % nr_pages.max(1)
    }

    // ----- actions (the mover) -------------------------------------------------------

    /// Move the page (huge page as a whole) to `to`. Fails rather than overfill: a
    /// migration that would leave `to` below its min watermark returns
    /// [`MigrateError::NoSpace`]. Cost: a fixed per-page cost plus the copy at the
    /// migration bandwidth, to the faulting thread (`Sync`) or the runner (`Async`);
    /// the copy also loads both tiers' bandwidth.
    fn migrate(
        &mut self,
        pid: Pid,
        vpn: Vpn,
        to: TierId,
        mode: MigrateMode,
    ) -> Result<(), MigrateError>;

    /// Swap the tiers of two pages of equal size in different tiers (Nimble /
    /// AutoTiering page exchange); needs no free space. Cost: two migrations.
    fn exchange(
        &mut self,
        a: (Pid, Vpn),
        b: (Pid, Vpn),
        mode: MigrateMode,
    ) -> Result<(), MigrateError>;

    /// Split the huge page containing `vpn` into base pages that stay where they are.
    /// With `free_zero_subpages`, subpages never written are freed instead (Linux's
    /// THP shrinker; MEMTIS §4.3). Returns the number of subpages freed, or `None` if
    /// the page is not huge. Cost: a fixed split cost.
    fn split_huge(&mut self, pid: Pid, vpn: Vpn, free_zero_subpages: bool) -> Option<u64>;

    /// Collapse the 512 base pages of the 2 MiB range containing `vpn` into a huge
    /// page in `tier` (khugepaged). All must be resident in one VMA. Cost: a copy of
    /// 2 MiB plus the fixed cost.
    fn collapse_huge(&mut self, pid: Pid, vpn: Vpn, tier: TierId) -> Result<(), MigrateError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_pages_above_a_fractional_mark_are_floored_and_never_negative() {
        assert_eq!(Watermarks::whole_pages_above(10, 2.5), 7);
        assert_eq!(Watermarks::whole_pages_above(10, 3.0), 7);
        assert_eq!(Watermarks::whole_pages_above(10, 0.0), 10);
        assert_eq!(Watermarks::whole_pages_above(2, 2.5), 0);
        assert_eq!(Watermarks::whole_pages_above(0, 0.0), 0);
    }
}
