//! Spatially sampled simulation: the stream filter.
//!
//! A run at `sim.sample_rate = r` simulates only the 2 MiB regions a
//! [`RegionSampler`] keeps (SHARDS-style spatial hashing, Waldspurger et al.,
//! FAST'15). [`Sampled`] wraps any workload and drops every access to a region that is
//! not kept; mappings pass through whole, so VMAs, huge-page alignment and allocation
//! units keep their shape. The machine (`machine/`) then shrinks every extensive
//! quantity by `r` and weighs each event by `1/r`; `docs/sampling.md` has the model
//! and its validation.

use crate::config::SimConfig;
use tierkit_core::*;

/// A workload restricted to the regions a sampler keeps.
pub struct Sampled {
    inner: Box<dyn Workload>,
    sampler: RegionSampler,
    /// The inner workload generates only kept regions itself
    /// ([`Workload::restrict_to`]); nothing is left to filter.
    restricted: bool,
}

impl Sampled {
    /// Wrap `inner`, keeping only the regions `sampler` keeps: the workload restricts
    /// itself if it can, else this filters its stream.
    pub fn new(mut inner: Box<dyn Workload>, sampler: RegionSampler) -> Sampled {
        let restricted = inner.restrict_to(&sampler);
        Sampled {
            inner,
            sampler,
            restricted,
        }
    }
}

/// The sampler of a run: `sim.sample_rate`, salted by the run's seed.
pub fn sampler_for(sim: &SimConfig, seed: u64) -> RegionSampler {
    RegionSampler::new(sim.sample_rate.scale(), seed)
}

/// `workload` as a run with `sim` and `seed` simulates it: unchanged when exact, else
/// wrapped in [`Sampled`].
pub fn sampled_workload(
    workload: Box<dyn Workload>,
    sim: &SimConfig,
    seed: u64,
) -> Box<dyn Workload> {
    let sampler = sampler_for(sim, seed);
    if sampler.keeps_all() {
        workload
    } else {
        Box::new(Sampled::new(workload, sampler))
    }
}

impl Workload for Sampled {
    fn shape(&self) -> WorkloadShape {
        self.inner.shape()
    }

    fn prologue(&mut self, process: usize, out: &mut Vec<Op>) {
        self.inner.prologue(process, out)
    }

    fn fill(&mut self, process: usize, thread: usize, out: &mut Vec<Op>) {
        let pid = process as u32;
        if self.restricted {
            self.inner.fill(process, thread, out);
            debug_assert!(out.iter().all(|op| match *op {
                Op::Access { addr, .. } => self.sampler.keeps(pid, addr),
                _ => true,
            }));
            return;
        }
        // A batch can hold nothing but unsampled accesses; only an empty batch from the
        // inner workload means the thread has finished.
        loop {
            self.inner.fill(process, thread, out);
            if out.is_empty() {
                return;
            }
            out.retain(|op| match *op {
                Op::Access { addr, .. } => self.sampler.keeps(pid, addr),
                _ => true,
            });
            if !out.is_empty() {
                return;
            }
        }
    }

    fn restrict_to(&mut self, sampler: &RegionSampler) -> bool {
        // Already sampled: a second identical sampler changes nothing.
        *sampler == self.sampler
    }

    fn expected_accesses(&self) -> Option<u64> {
        None
    }
}
