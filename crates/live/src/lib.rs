//! # tierkit-live: the same policies, on a real Linux process
//!
//! `tierkit run`/`tierkit attach` build a policy with
//! [`tierkit_policies::PolicyConfig`] and drive it with events observed on a live
//! process through [`mechanisms::LiveMechanisms`], the live implementation of
//! [`tierkit_core::Mechanisms`]: placement from move_pages(2) queries, accessed bits
//! from DAMON sysfs region snapshots, VMA events from `/proc/PID/maps`, migration with
//! move_pages(2) in bounded, rate-capped batches. `tierkit doctor` reports what a
//! machine offers. How each mechanism maps and what is lost: `docs/live.md`.
//!
//! - [`sys`]: parsers and wrappers of the kernel interfaces.
//! - [`access`]: accessed bits and hinting faults from DAMON snapshots (pure logic).
//! - [`mover`]: the migration queue, batching and rate cap (pure logic).
//! - [`mechanisms`]: the live `Mechanisms`.
//! - [`daemon`]: the event loop.
//! - [`stats`], [`doctor`], [`config`].

pub mod access;
pub mod config;
pub mod daemon;
pub mod doctor;
pub mod mechanisms;
pub mod mover;
pub mod stats;
pub mod sys;

/// A daemon error with its exit code: 2 bad usage or a machine that cannot run the
/// request, 3 missing privileges, 1 a runtime failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveError {
    /// Process exit code.
    pub code: i32,
    /// One line, without the `tierkit: ` prefix.
    pub msg: String,
}

impl LiveError {
    /// Bad usage or input (exit 2).
    pub fn usage(msg: impl Into<String>) -> LiveError {
        LiveError {
            code: 2,
            msg: msg.into(),
        }
    }
    /// Missing privilege (exit 3); the message names the capability.
    pub fn privilege(msg: impl Into<String>) -> LiveError {
        LiveError {
            code: 3,
            msg: msg.into(),
        }
    }
    /// Runtime failure (exit 1).
    pub fn runtime(msg: impl Into<String>) -> LiveError {
        LiveError {
            code: 1,
            msg: msg.into(),
        }
    }
}

impl std::fmt::Display for LiveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for LiveError {}
