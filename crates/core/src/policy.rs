//! The policy interface: one trait, called on events, acting through [`Mechanisms`].

use crate::mechanisms::*;
use crate::units::*;
use crate::workload::VmaKind;

/// A hinting fault: the first access to a page armed by
/// [`Mechanisms::arm_hint_fault`] or [`Mechanisms::arm_range`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HintFault {
    /// Faulting process.
    pub pid: Pid,
    /// Faulting page (the exact 4 KiB page, even inside a huge page).
    pub vpn: Vpn,
    /// Tier of the page at the time of the fault.
    pub tier: TierId,
    /// The page is part of a huge page.
    pub huge: bool,
    /// The faulting access was a store.
    pub write: bool,
    /// When the page was armed. `now() - armed_at` is the hint-fault latency Linux
    /// tiering and Chrono's CIT measure.
    pub armed_at: Nanos,
}

/// A sampled memory access (PEBS-like record).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// Process that made the access.
    pub pid: Pid,
    /// Page accessed (exact 4 KiB page).
    pub vpn: Vpn,
    /// Tier that served it (for stores that hit the LLC: the tier holding the page).
    pub tier: TierId,
    /// The page is part of a huge page.
    pub huge: bool,
    /// Which counter overflowed.
    pub kind: SampleKind,
}

/// What the machine tells a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A hinting fault. Runs in the faulting thread ([`Runner::Task`]); a `Sync`
    /// migration here stalls that thread.
    HintFault(HintFault),
    /// A sampled access. Runs on a tiering CPU ([`Runner::Kthread`]).
    Sample(Sample),
    /// A mapping was created (before any page of it is touched).
    Mmap {
        /// Owner.
        pid: Pid,
        /// The new area.
        vma: Vma,
    },
    /// A range was unmapped; its pages are already freed.
    Munmap {
        /// Owner.
        pid: Pid,
        /// First page of the range.
        start_vpn: Vpn,
        /// Length in base pages.
        nr_pages: u64,
        /// Kind of the mapping.
        kind: VmaKind,
    },
    /// A page was allocated on first touch (delivered only to policies whose
    /// [`Requirements::page_alloc_events`] is set).
    PageAlloc {
        /// Owner.
        pid: Pid,
        /// The page (huge-page head when `huge`).
        vpn: Vpn,
        /// Tier it was allocated in.
        tier: TierId,
        /// A whole 2 MiB huge page was allocated.
        huge: bool,
    },
    /// A page was found on another tier than the one the policy last knew it on,
    /// moved by someone else: the application or an operator (move_pages(2), mbind),
    /// the kernel, or the live daemon holding a fast-tier budget. Live mode only: in
    /// the simulator nothing but the policy moves pages. Delivered only to policies
    /// whose [`Requirements::page_alloc_events`] is set: those that list pages from
    /// their allocation relist them, as the kernel's migration puts a page on the new
    /// node's lists.
    PageMoved {
        /// Owner.
        pid: Pid,
        /// The page.
        vpn: Vpn,
        /// Tier the policy last knew it on.
        from: TierId,
        /// Tier it is on now.
        to: TierId,
    },
    /// An allocation left `tier` below its low watermark (the point where Linux wakes
    /// kswapd). Raised at most once per millisecond per tier.
    LowWatermark {
        /// The tier under pressure.
        tier: TierId,
    },
    /// A timer the policy scheduled fired.
    Timer {
        /// The id given to [`Mechanisms::schedule`].
        id: TimerId,
    },
}

/// What a policy needs from the machine beyond the defaults, and what it observes.
///
/// The observation flags are a declaration the rest of tierkit relies on: live mode
/// decides from them whether a policy can run on a machine (DAMON for accessed bits
/// and hinting faults, PEBS/IBS for samples), and the simulator checks, in debug
/// builds, that a policy uses no observation it did not declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Requirements {
    /// The fast tier is unbounded (the `all-fast` reference).
    pub unbounded_fast_tier: bool,
    /// Deliver [`Event::PageAlloc`] (costs a call per first touch) and, live,
    /// [`Event::PageMoved`].
    pub page_alloc_events: bool,
    /// It arms hinting faults ([`Mechanisms::arm_hint_fault`],
    /// [`Mechanisms::arm_range`]) and reacts to [`Event::HintFault`].
    pub hint_faults: bool,
    /// It tests and clears accessed bits ([`Mechanisms::test_and_clear_young`]).
    pub accessed_bits: bool,
    /// It sets sample periods ([`Mechanisms::set_sample_period`]) and reacts to
    /// [`Event::Sample`].
    pub sampling: bool,
    /// It reads the workload's future (the clairvoyant references): simulator only.
    pub future_knowledge: bool,
}

/// A tiering policy. One module per system implements it.
///
/// The machine calls [`Policy::init`] once, then [`Policy::on_event`] for every event
/// in time order. A policy acts only through the [`Mechanisms`] it is handed; it must
/// keep all its randomness in [`Mechanisms::random`] so runs are deterministic.
pub trait Policy: Send {
    /// Registered name (`autonuma`, `chrono`...).
    fn name(&self) -> &'static str;

    /// What the policy needs from the machine. Read once, before `init`.
    fn requirements(&self) -> Requirements {
        Requirements::default()
    }

    /// Called once at time 0, before any access: schedule timers, set sample periods.
    fn init(&mut self, _mech: &mut dyn Mechanisms) {}

    /// React to one event.
    fn on_event(&mut self, event: &Event, mech: &mut dyn Mechanisms);

    /// Bytes of metadata the policy keeps (per-page counters, lists, sketches), as a
    /// kernel implementation would; reported in the summary.
    fn metadata_bytes(&self) -> u64 {
        0
    }

    /// Policy-specific counters for the summary (name, value), in a stable order.
    fn stats(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
}

/// What a policy may need at construction beyond its config.
#[derive(Default)]
pub struct BuildContext {
    /// The run's space scale (sampled simulation): the policy registry scales each
    /// policy's extensive parameters by it before building (`PolicyConfig::build`).
    /// Exact (1) unless the simulator samples; always exact live.
    pub space_scale: crate::scale::SpaceScale,
    /// Builds a fresh copy of the run's workload (same config, same seed) as memory
    /// will see it: sampled as the run is, and keeping only the accesses that miss
    /// the run's LLC (the simulator's `llc::MemoryStream`), since placement changes
    /// the cost of those alone. Only clairvoyant reference policies (`oracle`) use
    /// it, to read the future; `None` where the workload cannot be replayed (a live
    /// process).
    pub fresh_workload: Option<Box<dyn Fn() -> Box<dyn crate::workload::Workload>>>,
    /// The same future read once and shared with every run of a comparison that
    /// consumes the same stream on the same LLC (`oracle` and `oracle-static` at each
    /// of a machine's ratios): reading it is a second replay of the stream through a
    /// second LLC model, as costly as the run's own. `None`, or a call that returns
    /// `None` (a tape too large to keep), where no one shares it: a reference then
    /// reads [`BuildContext::fresh_workload`].
    #[allow(clippy::type_complexity)]
    pub shared_future: Option<Box<dyn Fn() -> Option<std::sync::Arc<crate::future::FutureTape>>>>,
}
