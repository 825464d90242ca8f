//! Randomized stress: whatever a workload and a policy do, every page stays in exactly
//! one tier, no tier exceeds its capacity, and migrations conserve pages.

use proptest::prelude::*;
use tierkit_core::*;
use tierkit_sim::config::ThpMode;
use tierkit_sim::testing::{run, small_machine, Script};
use tierkit_sim::SimConfig;

const BASE: u64 = 1 << 30;
const REGION: u64 = 16 * MIB;

/// On every event, does something random through the mechanisms.
struct Chaos {
    seen: Vec<(Pid, Vpn)>,
}

impl Chaos {
    fn act(&mut self, m: &mut dyn Mechanisms) {
        if self.seen.is_empty() {
            return;
        }
        let pick = |m: &mut dyn Mechanisms, seen: &[(Pid, Vpn)]| {
            seen[(m.random() % seen.len() as u64) as usize]
        };
        let (pid, vpn) = pick(m, &self.seen);
        let tiers = m.tiers().len() as u64;
        let to = TierId((m.random() % tiers) as u8);
        let mode = if m.random().is_multiple_of(2) {
            MigrateMode::Sync
        } else {
            MigrateMode::Async
        };
        match m.random() % 8 {
            0..=2 => {
                let _ = m.migrate(pid, vpn, to, mode);
            }
            3 => {
                let other = pick(m, &self.seen);
                let _ = m.exchange((pid, vpn), other, mode);
            }
            4 => {
                let free_zero = m.random().is_multiple_of(2);
                let _ = m.split_huge(pid, vpn, free_zero);
            }
            5 => {
                let _ = m.collapse_huge(pid, vpn, to);
            }
            6 => {
                m.arm_range(pid, vpn, 600, None);
            }
            _ => {
                let _ = m.test_and_clear_young(pid, vpn);
            }
        }
        // Conservation: used pages never exceed capacity after any action.
        for t in 0..tiers {
            assert!(m.free_pages(TierId(t as u8)) <= m.tiers()[t as usize].capacity_pages);
        }
    }
}

impl Policy for Chaos {
    fn name(&self) -> &'static str {
        "chaos"
    }
    fn requirements(&self) -> Requirements {
        // It uses every observation, at random.
        Requirements {
            page_alloc_events: true,
            hint_faults: true,
            accessed_bits: true,
            sampling: true,
            ..Default::default()
        }
    }
    fn init(&mut self, m: &mut dyn Mechanisms) {
        m.set_sample_period(SampleKind::LlcLoadMiss, 3);
        m.set_sample_period(SampleKind::Store, 5);
        m.schedule(NS_PER_MS / 10, 0, Runner::Kthread);
    }
    fn on_event(&mut self, e: &Event, m: &mut dyn Mechanisms) {
        match e {
            Event::PageAlloc { pid, vpn, .. } => self.seen.push((*pid, *vpn)),
            Event::Timer { .. } => {
                let next = m.now() + NS_PER_MS / 10;
                m.schedule(next, 0, Runner::Kthread);
            }
            _ => {}
        }
        self.act(m);
    }
}

#[derive(Debug, Clone)]
enum Step {
    Access { offset: u64, write: bool, gap: u32 },
    Munmap { page: u64, pages: u64 },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        8 => (0..REGION / 64, any::<bool>(), 0u32..20_000).prop_map(|(l, write, gap)| Step::Access { offset: l * 64, write, gap }),
        1 => (0..REGION / PAGE_SIZE, 1u64..700).prop_map(|(page, pages)| Step::Munmap { page, pages }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_under_random_streams_and_actions(
        steps in prop::collection::vec(step(), 1..1500),
        thp in any::<bool>(),
        fast_mib in 1u64..12,
    ) {
        // Two processes; unmapped ranges are never accessed again.
        let mut procs = Vec::new();
        for p in 0..2u64 {
            let mut unmapped: Vec<(u64, u64)> = Vec::new();
            let mut ops = Vec::new();
            for s in steps.iter().skip(p as usize) {
                match *s {
                    Step::Access { offset, write, gap } => {
                        let page = offset / PAGE_SIZE;
                        if unmapped.iter().any(|&(a, n)| page >= a && page < a + n) {
                            continue;
                        }
                        ops.push(Op::Access { addr: BASE + offset, write, gap_ns: gap });
                    }
                    Step::Munmap { page, pages } => {
                        let pages = pages.min(REGION / PAGE_SIZE - page);
                        ops.push(Op::Munmap { addr: BASE + page * PAGE_SIZE, len: pages * PAGE_SIZE });
                        unmapped.push((page, pages));
                    }
                }
            }
            procs.push(ops);
        }
        let mut w = Script::new(2 * REGION);
        for ops in procs {
            w = w.process(&[(BASE, REGION)], ops);
        }
        let mut m = small_machine(fast_mib, 64);
        m.thp = if thp { ThpMode::Always } else { ThpMode::Never };
        // run() checks the invariants at the end (and debug builds at every move).
        let (out, machine) = run(&m, &SimConfig::default(), Box::new(Chaos { seen: Vec::new() }), Box::new(w));
        let resident: u64 = machine.resident_pages_total();
        let used: u64 = machine.used_pages_total();
        prop_assert_eq!(resident, used);
        let c = &out.summary.counters;
        prop_assert_eq!(c.promoted_pages + c.demoted_pages, c.migrated_bytes / PAGE_SIZE);
    }
}
