//! # tierkit (command line)
//!
//! The binary's logic, kept in a library so tests can drive it: building a run's
//! configuration ([`run_config`]), running one simulation and writing its outputs
//! ([`run`]), comparisons of many runs ([`compare`]), paper claims as experiments ([`claims`]), the listing of what is registered ([`list`]) and the throughput
//! benchmark ([`bench`]).

pub mod bench;
pub mod claims;
pub mod compare;
pub mod list;
pub mod live_cmd;
pub mod output;
pub mod run;
pub mod run_config;
pub mod trace_cmd;
