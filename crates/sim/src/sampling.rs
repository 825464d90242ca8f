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
    /// The sampler, following the stream's mappings (their strata decide under
    /// `sim.sample_strata = "mapping"`).
    sampler: StreamSampler,
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
            sampler: StreamSampler::new(sampler),
            restricted,
        }
    }
}

impl Sampled {
    /// Drop the unsampled accesses of `out[first..]`, following its mappings in
    /// stream order (a restricted workload's accesses are all kept; only its
    /// mappings are followed).
    fn filter(&mut self, pid: u32, out: &mut Vec<Op>, first: usize) {
        let sampler = &mut self.sampler;
        let restricted = self.restricted;
        let mut k = first;
        for i in first..out.len() {
            let op = out[i];
            let keep = match op {
                Op::Access { addr, .. } => restricted || sampler.keeps(pid, addr),
                _ => {
                    sampler.observe(pid, &op);
                    true
                }
            };
            if keep {
                out[k] = op;
                k += 1;
            }
        }
        out.truncate(k);
    }
}

/// The sampler of a run: `sim.sample_rate`, salted by the run's seed.
pub fn sampler_for(sim: &SimConfig, seed: u64) -> RegionSampler {
    RegionSampler::new(sim.sample_rate.scale(), seed).with_strata(sim.sample_strata)
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
        let first = out.len();
        self.inner.prologue(process, out);
        // A prologue's operations pass whole, as they always have; its mappings are
        // followed.
        for op in &out[first..] {
            self.sampler.observe(process as u32, op);
        }
    }

    fn fill(&mut self, process: usize, thread: usize, out: &mut Vec<Op>) {
        let pid = process as u32;
        if self.restricted {
            let first = out.len();
            self.inner.fill(process, thread, out);
            self.filter(pid, out, first);
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
            self.filter(pid, out, 0);
            if !out.is_empty() {
                return;
            }
        }
    }

    fn restrict_to(&mut self, sampler: &RegionSampler) -> bool {
        // Already sampled: a second identical sampler changes nothing.
        sampler == self.sampler.sampler()
    }

    fn expected_accesses(&self) -> Option<u64> {
        None
    }
}
