//! `autonuma`: Linux NUMA balancing in its original mode (`numa_balancing=1`) on a
//! machine whose slow tier is a CPU-less NUMA node.
//!
//! The scanner ([`crate::numa_scan`]) arms every resident page of each process, fast
//! or slow. On a hinting fault on a slow-tier page the page is promoted at once,
//! synchronously in the fault (`migrate_misplaced_folio`): the kernel's two-stage
//! filter never rejects it because a CPU-less node can never be the last faulting
//! node, so any single access after arming promotes — the most-recently-used
//! behaviour Chrono and FreqTier criticise. Promotion needs the fast tier to stay above
//! its high watermark (`migrate_balanced_pgdat`); otherwise it fails (and the scan
//! slows down). Nothing is ever demoted: mode 1 has no demotion path of its own.
//! Parameters and decisions: `docs/policies/autonuma.md`.

use crate::numa_scan::{ArmFilter, NumaScanConfig, NumaScanner};
use serde::{Deserialize, Serialize};
use tierkit_core::*;

/// `autonuma` parameters: the kernel's scan sysctls.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AutonumaConfig {
    /// The NUMA-balancing scanner.
    pub scan: NumaScanConfig,
}

impl AutonumaConfig {
    /// Check ranges.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.scan
            .validate()
            .map_err(|e| ConfigError::from(format!("policy.scan: {e}")))
    }
}

/// The policy.
pub struct Autonuma {
    scanner: NumaScanner,
    promoted: u64,
    failed: u64,
}

impl Autonuma {
    /// A policy with the given parameters.
    pub fn new(cfg: AutonumaConfig) -> Autonuma {
        Autonuma {
            scanner: NumaScanner::new(cfg.scan),
            promoted: 0,
            failed: 0,
        }
    }

    fn on_hint_fault(&mut self, f: &HintFault, mech: &mut dyn Mechanisms) {
        let pages = if f.huge { SUBPAGES_PER_HUGE } else { 1 };
        if f.tier.is_fast() {
            self.scanner.record_fault(f.pid, pages, true);
            return;
        }
        // migrate_balanced_pgdat: zone_watermark_ok(high + nr) needs free pages strictly
        // above the high watermark plus the page.
        let room = mech.free_pages(TierId::FAST) as f64
            > mech.watermarks(TierId::FAST).high + pages as f64;
        let ok = room
            && mech
                .migrate(f.pid, f.vpn, TierId::FAST, MigrateMode::Sync)
                .is_ok();
        if ok {
            self.promoted += pages;
        } else {
            self.failed += pages;
            self.scanner.record_failed(f.pid, pages);
        }
        self.scanner.record_fault(f.pid, pages, ok);
    }
}

impl Policy for Autonuma {
    fn requirements(&self) -> Requirements {
        Requirements {
            hint_faults: true,
            ..Requirements::default()
        }
    }

    fn name(&self) -> &'static str {
        "autonuma"
    }

    fn init(&mut self, mech: &mut dyn Mechanisms) {
        self.scanner.start_all(mech);
    }

    fn on_event(&mut self, event: &Event, mech: &mut dyn Mechanisms) {
        match event {
            Event::HintFault(f) => self.on_hint_fault(f, mech),
            Event::Timer { id } => {
                if let Some(pid) = self.scanner.owns(*id) {
                    self.scanner.step(pid, mech, ArmFilter::All);
                }
            }
            _ => {}
        }
    }

    fn stats(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("promoted_in_fault_pages", self.promoted as f64),
            ("failed_promotion_pages", self.failed as f64),
            ("scan_passes_pid0", self.scanner.passes(Pid(0)) as f64),
            ("scan_step_period_ms_pid0", self.scanner.period_ms(Pid(0))),
        ]
    }
}

/// The registry's view of [`AutonumaConfig`] (`PolicyConfig` in the crate root).
impl crate::RegisteredConfig for AutonumaConfig {
    fn check(&self) -> Result<(), ConfigError> {
        self.validate()
    }

    fn build_policy(&self, _ctx: &tierkit_core::BuildContext) -> Box<dyn tierkit_core::Policy> {
        Box::new(Autonuma::new(self.clone()))
    }
}
