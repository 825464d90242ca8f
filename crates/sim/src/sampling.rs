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
    /// Per process and thread: which accesses to the pages sampled in time it keeps.
    thinning: Vec<Vec<TimeThinning>>,
    /// Per process and thread: compute carried from dropped accesses to kept ones,
    /// when the sampler carries it ([`SampledCompute::Carried`]).
    carry: Vec<Vec<ComputeCarry>>,
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
            thinning: Vec::new(),
            carry: Vec::new(),
        }
    }
}

impl Sampled {
    /// Drop the unsampled accesses of `out[first..]` of thread `thread` of process
    /// `pid`, following its mappings in stream order (a restricted workload's
    /// accesses are all kept; only its mappings are followed). When the sampler
    /// carries compute, a kept access's gap grows by the gaps of the accesses the
    /// thread dropped since its last kept one (a restricted workload's gaps already
    /// hold them, and nothing is dropped here), and the machine then weighs gaps by
    /// 1, not N (`Machine::gap_weight`): wrapping a sampled stream again changes
    /// nothing.
    fn filter(&mut self, pid: u32, thread: usize, out: &mut Vec<Op>, first: usize) {
        let sampler = &mut self.sampler;
        let restricted = self.restricted;
        let in_time = !restricted && !sampler.sampler().time_sampled().is_empty();
        let p = pid as usize;
        if in_time {
            grow(&mut self.thinning, p, thread);
        }
        let mut carry = if !restricted && sampler.sampler().carries_compute() {
            grow(&mut self.carry, p, thread);
            Some(&mut self.carry[p][thread])
        } else {
            None
        };
        let mut k = first;
        for i in first..out.len() {
            let mut op = out[i];
            let keep = match op {
                Op::Access { addr, .. } if in_time => {
                    let vpn = addr >> PAGE_SHIFT;
                    match sampler.sampler().time_sampled_index(pid, vpn) {
                        Some(index) => self.thinning[pid as usize][thread].keeps(
                            sampler.sampler(),
                            pid,
                            thread as u32,
                            index,
                        ),
                        None => sampler.keeps(pid, addr),
                    }
                }
                Op::Access { addr, .. } => restricted || sampler.keeps(pid, addr),
                _ => {
                    sampler.observe(pid, &op);
                    true
                }
            };
            if let Some(carry) = carry.as_deref_mut() {
                if let Op::Access { gap_ns, .. } = &mut op {
                    if keep {
                        *gap_ns = carry.keep(*gap_ns);
                    } else {
                        carry.drop_ns(*gap_ns as u64);
                    }
                }
            }
            if keep {
                out[k] = op;
                k += 1;
            }
        }
        out.truncate(k);
    }
}

/// Make `per[p][thread]` exist.
fn grow<T: Default>(per: &mut Vec<Vec<T>>, p: usize, thread: usize) {
    if per.len() <= p {
        per.resize_with(p + 1, Vec::new);
    }
    if per[p].len() <= thread {
        per[p].resize_with(thread + 1, T::default);
    }
}

/// The sampler of a run: `sim.sample_rate`, salted by the run's seed.
pub fn sampler_for(sim: &SimConfig, seed: u64) -> RegionSampler {
    RegionSampler::new(sim.sample_rate.scale(), seed)
        .with_strata(sim.sample_strata)
        .with_compute(sim.sampled_compute())
}

/// `workload` as a run with `sim` and `seed` simulates it, and the sampler the
/// machine must use for it: unchanged when exact, else wrapped in [`Sampled`], with
/// the pages the workload's profile finds would weigh `sim.time_sampled_weight` or
/// more of the sampled stream sampled in time.
pub fn sampled_workload(
    mut workload: Box<dyn Workload>,
    sim: &SimConfig,
    seed: u64,
) -> (Box<dyn Workload>, RegionSampler) {
    let mut sampler = sampler_for(sim, seed);
    if sampler.keeps_all() {
        return (workload, sampler);
    }
    if sim.time_sampled_weight > 0.0 {
        // A page of share s weighs s·N of the sampled stream when kept in space.
        let min_share = sim.time_sampled_weight / sampler.keeps_one_in() as f64;
        let pages = workload.time_sampled_pages(&sampler, min_share);
        sampler = sampler.with_time_sampled(pages);
    }
    (Box::new(Sampled::new(workload, sampler.clone())), sampler)
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
            self.filter(pid, thread, out, first);
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
            self.filter(pid, thread, out, 0);
            if !out.is_empty() {
                return;
            }
        }
    }

    fn restrict_to(&mut self, sampler: &RegionSampler) -> bool {
        // Already sampled: a second identical sampler changes nothing.
        sampler == self.sampler.sampler()
    }

    fn time_sampled_pages(&mut self, _sampler: &RegionSampler, _min_share: f64) -> Vec<(u32, Vpn)> {
        self.sampler.sampler().time_sampled().to_vec()
    }

    fn expected_accesses(&self) -> Option<u64> {
        None
    }
}
