//! Errors of the simulator, each one line that names what is wrong and what is valid.

use thiserror::Error;

/// Everything that can stop a simulation.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum SimError {
    /// A name (machine preset, policy, workload) that is not registered.
    #[error("unknown {kind} `{name}`; valid: {valid}")]
    UnknownName {
        /// What kind of name.
        kind: &'static str,
        /// The name given.
        name: String,
        /// The valid names, comma separated.
        valid: String,
    },
    /// A configuration value out of range.
    #[error("invalid {what}: {why}")]
    Config {
        /// The setting.
        what: String,
        /// Why it is wrong and what is valid.
        why: String,
    },
    /// The workload touched an address outside every mapping of its process.
    #[error("workload error: process {pid} accessed unmapped address {addr:#x}")]
    Unmapped {
        /// Process index.
        pid: u32,
        /// The address.
        addr: u64,
    },
    /// The workload issued a malformed mmap or munmap.
    #[error("workload error: process {pid}: {why}")]
    BadMapping {
        /// Process index.
        pid: u32,
        /// What was wrong.
        why: String,
    },
    /// A policy drove the machine into a state it cannot continue from.
    #[error("policy error: {why}")]
    Policy {
        /// What happened.
        why: String,
    },
    /// Every tier is full.
    #[error("out of memory: process {pid} needs a page but every tier is full (capacities {capacities}); the workload's declared footprint is too small")]
    OutOfMemory {
        /// Process index.
        pid: u32,
        /// Per-tier capacity in pages.
        capacities: String,
    },
}
