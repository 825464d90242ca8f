//! # tierkit-sim: a deterministic simulated tiered-memory machine
//!
//! The flow, module by module:
//!
//! - [`config`]: tiers and presets, fast-tier sizing, LLC, THP, mechanism costs.
//! - [`space`]: address spaces, VMAs and the 16-byte per-page state.
//! - [`llc`]: the set-associative LLC filter.
//! - [`machine`]: the hot access path, the [`Mechanisms`](tierkit_core::Mechanisms)
//!   implementation a policy talks to, and the mover that carries out migrations.
//! - [`engine`]: the run loop interleaving threads by virtual time, firing timers.
//! - [`future`]: the stream a clairvoyant reference reads, ended where the run ends.
//! - [`sampling`]: spatially sampled simulation's stream filter (`sim.sample_rate`).
//! - [`metrics`]: counters, the interval time series, the run summary.
//!
//! Determinism: one seeded RNG (for policies), no hash-map iteration, no threads.

pub mod config;
pub mod engine;
pub mod error;
pub mod future;
pub mod llc;
pub mod machine;
pub mod metrics;
pub mod sampling;
pub mod space;
pub mod testing;

pub use config::{MachineConfig, SampleRate, SimConfig};
pub use engine::{RunLabels, RunOutput, Simulation};
pub use error::SimError;
