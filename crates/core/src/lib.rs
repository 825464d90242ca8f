//! # tierkit-core: the interface every other crate speaks
//!
//! tierkit moves data in one direction:
//!
//! ```text
//! workload ──Op──▶ machine ──Event──▶ policy ──Mechanisms calls──▶ mover ──▶ metrics
//! ```
//!
//! This crate holds only the vocabulary of that flow, so that a policy written against
//! it runs unchanged on the simulator (`tierkit-sim`) and, later, on a live Linux
//! process (the daemon):
//!
//! - [`units`]: page sizes, tier and process ids, nanosecond time.
//! - [`workload`]: the [`Workload`](workload::Workload) trait and the [`Op`](workload::Op)
//!   stream it produces (accesses, mmap, munmap).
//! - [`mechanisms`]: the [`Mechanisms`](mechanisms::Mechanisms) trait — everything an
//!   operating system can observe and do for a tiering policy, and nothing more.
//! - [`scale`]: [`SpaceScale`](scale::SpaceScale), how much of the machine a sampled
//!   run simulates, and how a policy scales its extensive parameters with it.
//! - [`policy`]: the [`Policy`](policy::Policy) trait and the [`Event`](policy::Event)s
//!   it is called with.
//! - [`host`]: hints to the host CPU and kernel (a prefetch, huge pages) that the
//!   simulator's and the generators' large arrays use; they change speed, never a result.
//! - [`error`]: [`ConfigError`](error::ConfigError), the error of every configuration
//!   check (policies, workloads, machine, daemon).
//! - [`future`]: the future of a run's memory accesses as page ids, which only the
//!   simulator's clairvoyant references read.
//!
//! The interface deliberately carries no simulator knowledge: a policy never sees
//! the access stream itself, only what a kernel could observe (hinting faults, sampled
//! LLC misses, accessed bits, VMA changes, tier occupancy).

#[doc(hidden)]
pub mod doc_tables;
pub mod error;
pub mod future;
pub mod host;
pub mod mechanisms;
pub mod policy;
pub mod scale;
pub mod units;
pub mod workload;

pub use error::ConfigError;
pub use mechanisms::*;
pub use policy::*;
pub use scale::*;
pub use units::*;
pub use workload::*;
