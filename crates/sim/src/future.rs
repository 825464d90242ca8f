//! The future a clairvoyant reference reads ([`BuildContext::fresh_workload`]): the
//! run's own stream, ended where the run ends, as memory sees it.
//!
//! A run stops at `sim.max_accesses`; a reference that read the workload to its end
//! would plan for accesses the run never makes (`oracle-static` ranks pages by the
//! whole stream) and pay to read them (a smoke run's graph kernel: 200 k accesses
//! run, hundreds of millions read).
//!
//! [`BuildContext::fresh_workload`]: tierkit_core::BuildContext

use tierkit_core::{Op, Workload, WorkloadShape};

use crate::llc::MemoryStream;
use crate::{MachineConfig, SimConfig, SimError};

/// How a run's future is read, checked once for a run and applied to each fresh copy
/// of its stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FutureView {
    limit: Option<u64>,
    llc: Option<(u64, u32)>,
}

impl FutureView {
    /// The view of a run with `machine_cfg` and `sim`; fails where the run itself would
    /// (an LLC the sample rate shrinks below one set).
    pub fn new(machine_cfg: &MachineConfig, sim: &SimConfig) -> Result<FutureView, SimError> {
        Ok(FutureView {
            limit: run_access_limit(sim),
            llc: crate::engine::llc_geometry(machine_cfg, sim)?,
        })
    }

    /// `stream` (the run's, sampled as the run is) as the run will consume it: ended
    /// after the accesses the run makes at most ([`run_access_limit`]), then, when the
    /// machine has an LLC, only the accesses that miss it ([`MemoryStream`]).
    pub fn of(&self, stream: Box<dyn Workload>) -> Box<dyn Workload> {
        let stream = match self.limit {
            Some(limit) => Box::new(Truncated::new(stream, limit)) as Box<dyn Workload>,
            None => stream,
        };
        match self.llc {
            Some((size, ways)) => Box::new(MemoryStream::new(stream, size, ways)),
            None => stream,
        }
    }
}

/// How many accesses of its (sampled) stream a run with `sim` makes at most, or `None`
/// when it runs to the workload's end: where the engine stops a run. `sim.max_accesses`
/// counts accesses of the full machine, so a sampled run stops after its share of them.
pub fn run_access_limit(sim: &SimConfig) -> Option<u64> {
    (sim.max_accesses != 0).then(|| {
        sim.max_accesses
            .div_ceil(sim.sample_rate.denominator as u64)
    })
}

/// A workload ended after `limit` accesses in the order its batches are read: the
/// batch that reaches the limit is cut there, and every later batch is empty (which
/// ends each thread). The engine stops at a total over threads interleaved by time,
/// a reader interleaves them by batch: for one thread the two end at the same access,
/// for several within a batch per thread.
pub struct Truncated {
    inner: Box<dyn Workload>,
    left: u64,
}

impl Truncated {
    /// `inner`, ended after `limit` accesses.
    pub fn new(inner: Box<dyn Workload>, limit: u64) -> Truncated {
        Truncated { inner, left: limit }
    }
}

impl Workload for Truncated {
    fn shape(&self) -> WorkloadShape {
        self.inner.shape()
    }

    fn prologue(&mut self, process: usize, out: &mut Vec<Op>) {
        self.inner.prologue(process, out);
    }

    fn fill(&mut self, process: usize, thread: usize, out: &mut Vec<Op>) {
        if self.left == 0 {
            return;
        }
        let first = out.len();
        self.inner.fill(process, thread, out);
        for i in first..out.len() {
            if let Op::Access { .. } = out[i] {
                if self.left == 0 {
                    out.truncate(i);
                    return;
                }
                self.left -= 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SampleRate;
    use tierkit_core::{ProcessShape, VmaKind};

    /// One process of `threads` threads, each filling batches of 3 reads forever.
    struct Endless {
        threads: u32,
    }

    impl Workload for Endless {
        fn shape(&self) -> WorkloadShape {
            WorkloadShape {
                processes: vec![ProcessShape {
                    name: "p".into(),
                    nr_threads: self.threads,
                    mlp: 1.0,
                }],
                footprint_bytes: 1 << 20,
            }
        }
        fn prologue(&mut self, _: usize, out: &mut Vec<Op>) {
            out.push(Op::Mmap {
                addr: 0,
                len: 1 << 20,
                kind: VmaKind::Anon,
            });
        }
        fn fill(&mut self, _: usize, thread: usize, out: &mut Vec<Op>) {
            for k in 0..3 {
                out.push(Op::Access {
                    addr: (thread as u64) << 12 | k << 6,
                    write: false,
                    gap_ns: 1,
                });
            }
        }
    }

    fn accesses(ops: &[Op]) -> usize {
        ops.iter()
            .filter(|op| matches!(op, Op::Access { .. }))
            .count()
    }

    #[test]
    fn a_truncated_stream_ends_after_its_limit_across_threads() {
        let mut w = Truncated::new(Box::new(Endless { threads: 2 }), 7);
        let mut out = Vec::new();
        w.prologue(0, &mut out);
        assert_eq!(out.len(), 1, "the prologue passes whole");
        let mut read = 0;
        for round in 0..4 {
            for t in 0..2 {
                out.clear();
                w.fill(0, t, &mut out);
                read += accesses(&out);
                if round >= 2 || (round == 1 && t == 1) {
                    assert!(out.len() <= 1, "round {round} thread {t}: {out:?}");
                }
            }
        }
        assert_eq!(read, 7);
    }

    #[test]
    fn the_future_ends_where_the_run_does() {
        let mut sim = SimConfig::default();
        assert_eq!(run_access_limit(&sim), None);
        sim.max_accesses = 1000;
        assert_eq!(run_access_limit(&sim), Some(1000));
        sim.sample_rate = SampleRate { denominator: 64 };
        assert_eq!(run_access_limit(&sim), Some(16), "a sampled run's share");
        let machine = MachineConfig {
            llc_enabled: false,
            ..MachineConfig::default()
        };
        sim.sample_rate = SampleRate::EXACT;
        sim.max_accesses = 10;
        let mut w = FutureView::new(&machine, &sim)
            .unwrap()
            .of(Box::new(Endless { threads: 1 }));
        let mut out = Vec::new();
        let mut read = 0;
        loop {
            out.clear();
            w.fill(0, 0, &mut out);
            if out.is_empty() {
                break;
            }
            read += accesses(&out);
        }
        assert_eq!(read, 10);
    }
}
