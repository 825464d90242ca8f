//! Helpers for tests of the machine and of policies: a scripted workload and a small
//! machine, so a test can say "touch these pages, wait, touch again" and inspect where
//! pages ended up.

use crate::config::{MachineConfig, SimConfig, TierSpec};
use crate::engine::{RunLabels, RunOutput, Simulation};
use crate::machine::{Machine, MachineParams};
use tierkit_core::*;

/// A workload that replays fixed operation lists: one process per list, one thread
/// each, mapping `[base, base + len)` for each `(base, len)` in its prologue.
pub struct Script {
    procs: Vec<ScriptProcess>,
    footprint_bytes: u64,
}

struct ScriptProcess {
    mappings: Vec<(u64, u64, VmaKind)>,
    ops: Vec<Op>,
    done: bool,
    mlp: f64,
}

impl Script {
    /// An empty script declaring `footprint_bytes` (sizes the fast tier from a ratio).
    pub fn new(footprint_bytes: u64) -> Script {
        Script {
            procs: Vec::new(),
            footprint_bytes,
        }
    }

    /// Add a process with anonymous mappings `(addr, len)` and its operations.
    pub fn process(self, mappings: &[(u64, u64)], ops: Vec<Op>) -> Script {
        self.process_with_mlp(mappings, ops, 1.0)
    }

    /// Like [`process`](Self::process) with each mapping's kind given (file-backed
    /// as well as anonymous).
    pub fn process_with_kinds(mut self, mappings: &[(u64, u64, VmaKind)], ops: Vec<Op>) -> Script {
        self.procs.push(ScriptProcess {
            mappings: mappings.to_vec(),
            ops,
            done: false,
            mlp: 1.0,
        });
        self
    }

    /// Like [`process`](Self::process) with a memory-level parallelism other than 1.
    pub fn process_with_mlp(mut self, mappings: &[(u64, u64)], ops: Vec<Op>, mlp: f64) -> Script {
        self.procs.push(ScriptProcess {
            mappings: mappings
                .iter()
                .map(|&(a, l)| (a, l, VmaKind::Anon))
                .collect(),
            ops,
            done: false,
            mlp,
        });
        self
    }
}

impl Workload for Script {
    fn shape(&self) -> WorkloadShape {
        WorkloadShape {
            processes: self
                .procs
                .iter()
                .enumerate()
                .map(|(i, p)| ProcessShape {
                    name: format!("script{i}"),
                    nr_threads: 1,
                    mlp: p.mlp,
                })
                .collect(),
            footprint_bytes: self.footprint_bytes,
        }
    }

    fn prologue(&mut self, process: usize, out: &mut Vec<Op>) {
        for &(addr, len, kind) in &self.procs[process].mappings {
            out.push(Op::Mmap { addr, len, kind });
        }
    }

    fn fill(&mut self, process: usize, _thread: usize, out: &mut Vec<Op>) {
        let p = &mut self.procs[process];
        if !p.done {
            out.append(&mut p.ops);
            p.done = true;
        }
    }
}

/// A read of `addr` after `gap_ns` of compute.
pub fn read(addr: u64, gap_ns: u32) -> Op {
    Op::Access {
        addr,
        write: false,
        gap_ns,
    }
}

/// A write of `addr` after `gap_ns` of compute.
pub fn write(addr: u64, gap_ns: u32) -> Op {
    Op::Access {
        addr,
        write: true,
        gap_ns,
    }
}

/// Compute for `ns` (as a read of `addr` — which must be mapped — after a long gap);
/// gaps are u32, so long waits are chained.
pub fn wait_then_read(addr: u64, mut ns: u64, out: &mut Vec<Op>) {
    while ns > u32::MAX as u64 {
        out.push(read(addr, u32::MAX));
        ns -= u32::MAX as u64;
    }
    out.push(read(addr, ns as u32));
}

/// A two-tier machine with explicit capacities (MiB), latencies of the `cxl` preset
/// and the LLC off, so every access reaches memory.
pub fn small_machine(fast_mib: u64, slow_mib: u64) -> MachineConfig {
    MachineConfig {
        tiers: vec![
            TierSpec {
                name: "dram".into(),
                load_ns: 80.0,
                store_ns: 80.0,
                bandwidth_gbps: 96.0,
                capacity_mib: Some(fast_mib),
            },
            TierSpec {
                name: "cxl".into(),
                load_ns: 170.0,
                store_ns: 170.0,
                bandwidth_gbps: 64.0,
                capacity_mib: Some(slow_mib),
            },
        ],
        llc_enabled: false,
        ..MachineConfig::default()
    }
}

/// A bare machine of `cfg`'s tiers, THP mode and costs with the LLC `llc` (size in
/// bytes, ways) or none, one process of one thread, exact, seed 7: for tests that
/// drive a `Machine` or its `Mechanisms` directly, without an engine.
pub fn bare_machine(cfg: &MachineConfig, llc: Option<(u64, u32)>) -> Machine {
    Machine::new(MachineParams {
        tiers: cfg.resolve(MIB, false).expect("valid test tiers"),
        thp: cfg.thp,
        llc,
        costs: cfg.costs.clone(),
        tiering_cpus: cfg.tiering_cpus,
        seed: 7,
        pingpong_window_ms: 1000,
        threads_per_process: vec![1],
        policy_time_scale: 1.0,
        space_scale: Default::default(),
        sampler: RegionSampler::new(Default::default(), 0),
    })
}

/// Run `policy` on `workload` and hand back the output and the final machine.
pub fn run(
    machine: &MachineConfig,
    sim: &SimConfig,
    policy: Box<dyn Policy>,
    workload: Box<dyn Workload>,
) -> (RunOutput, Machine) {
    let labels = RunLabels {
        policy: policy.name().into(),
        workload: "script".into(),
        seed: 1,
    };
    let s = Simulation::new(machine, sim, policy, workload, labels).expect("valid test setup");
    let (out, m) = s
        .run_keeping_machine(&mut |_| {})
        .expect("test run succeeds");
    m.check_invariants().expect("invariants hold after the run");
    (out, m)
}
