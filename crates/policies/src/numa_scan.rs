//! Linux's NUMA-balancing scanner (`task_numa_work`, `update_task_scan_period` in
//! `kernel/sched/fair.c`), reusable by every policy built on it: `autonuma`,
//! `linux-tiering`, TPP and Chrono's Ticking-scan.
//!
//! Per process, every scan step arms up to `scan_size_mb` of resident pages (and walks
//! at most 8× that of virtual space), continuing where the last step stopped and
//! wrapping at the end of the address space (one *pass*). The time between steps is
//! the per-process `numa_scan_period`, kept between `task_scan_min` and
//! `task_scan_max`, which divide `scan_period_{min,max}_ms` by the number of
//! `scan_size` windows in the RSS, so that one pass takes between
//! `scan_period_min_ms` and `scan_period_max_ms`. After each pass the period adapts
//! to the fault locality seen in it, as `update_task_scan_period` does.

use serde::{Deserialize, Serialize};
use tierkit_core::*;

/// The kernel's `numa_balancing_scan_*` sysctls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NumaScanConfig {
    /// Delay before a process's first scan, ms (`numa_balancing_scan_delay_ms`, 1000).
    pub scan_delay_ms: u64,
    /// Shortest time for one pass over the address space, ms
    /// (`numa_balancing_scan_period_min_ms`, 1000).
    pub scan_period_min_ms: u64,
    /// Longest time for one pass, ms (`numa_balancing_scan_period_max_ms`, 60000).
    pub scan_period_max_ms: u64,
    /// Resident memory armed per scan step, MB (`numa_balancing_scan_size_mb`, 256).
    pub scan_size_mb: u64,
    /// Adapt the step interval to fault locality after each pass (the kernel does);
    /// `false` keeps one pass per `scan_period_min_ms`.
    pub adaptive_period: bool,
}

impl Default for NumaScanConfig {
    fn default() -> Self {
        NumaScanConfig {
            scan_delay_ms: 1000,
            scan_period_min_ms: 1000,
            scan_period_max_ms: 60_000,
            scan_size_mb: 256,
            adaptive_period: true,
        }
    }
}

impl NumaScanConfig {
    /// Check ranges.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.scan_size_mb == 0 {
            return Err("scan_size_mb must be at least 1".into());
        }
        if self.scan_period_min_ms == 0 || self.scan_period_max_ms < self.scan_period_min_ms {
            return Err(format!(
                "scan periods must satisfy 0 < scan_period_min_ms ({}) <= scan_period_max_ms ({})",
                self.scan_period_min_ms, self.scan_period_max_ms
            )
            .into());
        }
        Ok(())
    }

    fn scan_size_pages(&self) -> u64 {
        (self.scan_size_mb * MIB / PAGE_SIZE).max(1)
    }

    /// `task_scan_min`: the shortest step interval for a process of `rss` pages, ms.
    pub fn task_scan_min_ms(&self, rss_pages: u64) -> f64 {
        // MAX_SCAN_WINDOW = 2560 MB/s caps the scan rate: floor = 1000 ms / (2560 / scan_size).
        let floor = 1000.0 * self.scan_size_mb as f64 / 2560.0;
        let windows = (rss_pages / self.scan_size_pages()).max(1) as f64;
        (self.scan_period_min_ms as f64 / windows).max(floor)
    }

    /// `task_scan_max`: the longest step interval, ms (never below the minimum).
    pub fn task_scan_max_ms(&self, rss_pages: u64) -> f64 {
        let windows = (rss_pages / self.scan_size_pages()).max(1) as f64;
        (self.scan_period_max_ms as f64 / windows).max(self.task_scan_min_ms(rss_pages))
    }
}

/// Which pages a scan step arms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArmFilter {
    /// Every resident page (numa_balancing=1).
    All,
    /// Pages outside the fast tier (numa_balancing=2 skips top-tier pages).
    NotFast,
}

/// Fault locality of one pass (`numa_faults_locality`), in pages.
#[derive(Debug, Clone, Copy, Default)]
struct Locality {
    remote: u64,
    local: u64,
    failed: u64,
}

#[derive(Debug, Clone, Default)]
struct ProcScan {
    cursor: Vpn,
    /// Step interval (`numa_scan_period`), ms; 0 until the first step.
    period_ms: f64,
    passes: u64,
    locality: Locality,
}

/// What one scan step did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StepOutcome {
    /// Page units armed.
    pub armed: u64,
    /// The step reached the end of the address space (a pass completed).
    pub wrapped: bool,
}

/// Timer ids at or above this belong to the scanner; the low bits are the pid.
pub const SCAN_TIMER_BASE: TimerId = 0x4000_0000;

/// The scanner for all processes.
#[derive(Debug, Clone)]
pub struct NumaScanner {
    cfg: NumaScanConfig,
    procs: Vec<ProcScan>,
}

impl NumaScanner {
    /// A scanner with the given sysctls.
    pub fn new(cfg: NumaScanConfig) -> NumaScanner {
        NumaScanner {
            cfg,
            procs: Vec::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &NumaScanConfig {
        &self.cfg
    }

    /// Schedule the first scan of every process (`scan_delay_ms` from now).
    pub fn start_all(&mut self, mech: &mut dyn Mechanisms) {
        for pid in mech.processes() {
            if self.procs.len() <= pid.index() {
                self.procs.resize(pid.index() + 1, ProcScan::default());
            }
            let at = mech.now() + self.cfg.scan_delay_ms * NS_PER_MS;
            mech.schedule(at, SCAN_TIMER_BASE + pid.0, Runner::Task(pid));
        }
    }

    /// The process whose scan timer `id` is, if it is one.
    pub fn owns(&self, id: TimerId) -> Option<Pid> {
        (id >= SCAN_TIMER_BASE).then(|| Pid(id - SCAN_TIMER_BASE))
    }

    /// Current step interval of `pid`, ms (0 before its first step).
    pub fn period_ms(&self, pid: Pid) -> f64 {
        self.procs.get(pid.index()).map_or(0.0, |p| p.period_ms)
    }

    /// Passes completed by `pid`.
    pub fn passes(&self, pid: Pid) -> u64 {
        self.procs.get(pid.index()).map_or(0, |p| p.passes)
    }

    /// Record a hinting fault's locality: `local` if the page is (now) in the fast tier.
    pub fn record_fault(&mut self, pid: Pid, pages: u64, local: bool) {
        if let Some(p) = self.procs.get_mut(pid.index()) {
            if local {
                p.locality.local += pages;
            } else {
                p.locality.remote += pages;
            }
        }
    }

    /// Record a failed promotion (`TNF_MIGRATE_FAIL`).
    pub fn record_failed(&mut self, pid: Pid, pages: u64) {
        if let Some(p) = self.procs.get_mut(pid.index()) {
            p.locality.failed += pages;
        }
    }

    /// One `task_numa_work` step for `pid`, run from its timer: arm the next window
    /// and schedule the next step.
    pub fn step(&mut self, pid: Pid, mech: &mut dyn Mechanisms, filter: ArmFilter) -> StepOutcome {
        // task_scan_min/max divide by the full process's RSS: a sampled machine's RSS
        // is a share of it, and the scanner walks the full address space per step.
        let rss = mech.rss_pages(pid) * mech.pages_per_simulated_page();
        let cfg = self.cfg.clone();
        let p = &mut self.procs[pid.index()];
        if p.period_ms == 0.0 {
            // task_scan_start: a new task scans at its fastest rate.
            p.period_ms = cfg.task_scan_min_ms(rss);
        }
        let out = arm_window(mech, pid, &mut p.cursor, cfg.scan_size_pages(), filter);
        if out.wrapped {
            p.passes += 1;
            if cfg.adaptive_period {
                let loc = std::mem::take(&mut p.locality);
                p.period_ms = update_scan_period(p.period_ms, loc, &cfg, rss);
            }
        }
        let next = mech.now() + (p.period_ms * NS_PER_MS as f64) as u64;
        mech.schedule(next, SCAN_TIMER_BASE + pid.0, Runner::Task(pid));
        out
    }
}

/// Arm up to `budget` pages of resident memory from `cursor` (walking at most 8× that
/// of virtual space); wrap to the start at the end of the address space.
fn arm_window(
    mech: &mut dyn Mechanisms,
    pid: Pid,
    cursor: &mut Vpn,
    budget: u64,
    filter: ArmFilter,
) -> StepOutcome {
    let mut pages_left = budget as i64;
    let mut virt_left = 8 * budget as i64;
    let mut out = StepOutcome::default();
    let nr_tiers = mech.tiers().len() as u8;
    for vma in mech.vmas(pid) {
        if vma.end_vpn() <= *cursor {
            continue;
        }
        let mut s = vma.start_vpn.max(*cursor);
        while s < vma.end_vpn() {
            let chunk = (pages_left as u64).min(vma.end_vpn() - s);
            let armed = match filter {
                ArmFilter::All => mech.arm_range(pid, s, chunk, None),
                ArmFilter::NotFast => (1..nr_tiers)
                    .map(|t| mech.arm_range(pid, s, chunk, Some(TierId(t))))
                    .sum(),
            };
            out.armed += armed;
            // change_prot_numa: a window that updated PTEs uses up scan budget.
            if armed > 0 {
                pages_left -= chunk as i64;
            }
            virt_left -= chunk as i64;
            s += chunk;
            if pages_left <= 0 || virt_left <= 0 {
                *cursor = s;
                // A budget that ends exactly at the end of the address space completes
                // the pass now, as task_numa_work resets the offset in the same call.
                if mech.vmas(pid).last().is_none_or(|v| v.end_vpn() <= s) {
                    *cursor = 0;
                    out.wrapped = true;
                }
                return out;
            }
        }
    }
    *cursor = 0;
    out.wrapped = true;
    out
}

/// `update_task_scan_period` for a task whose faults are all private (tierkit has no
/// notion of pages shared between tasks, see docs/policies/autonuma.md).
fn update_scan_period(period_ms: f64, loc: Locality, cfg: &NumaScanConfig, rss: u64) -> f64 {
    const SLOTS: f64 = 10.0; // NUMA_PERIOD_SLOTS
    const THRESHOLD: f64 = 7.0; // NUMA_PERIOD_THRESHOLD
    let (min, max) = (cfg.task_scan_min_ms(rss), cfg.task_scan_max_ms(rss));
    let (local, remote, shared, private) = (
        loc.local as f64,
        loc.remote as f64,
        0.0,
        (loc.local + loc.remote) as f64,
    );
    // No local or shared faults, or failed migrations: scan slower.
    if local + shared == 0.0 || loc.failed > 0 {
        return (period_ms * 2.0).clamp(min, max);
    }
    let slot = (period_ms / SLOTS).ceil();
    let lr_ratio = (local * SLOTS / (local + remote)).floor();
    let ps_ratio = (private * SLOTS / (private + shared)).floor();
    let diff = if lr_ratio >= THRESHOLD {
        // Mostly local already: no need to scan fast.
        (lr_ratio - THRESHOLD).max(1.0) * slot
    } else {
        // Private faults: adjust on the better of the private and local ratios.
        -(THRESHOLD - lr_ratio.max(ps_ratio)) * slot
    };
    (period_ms + diff).clamp(min, max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_bounds_follow_kernel_formulas() {
        let c = NumaScanConfig::default();
        // 4 GiB RSS = 16 windows of 256 MB: min = max(100 ms, 1000/16) = 100 ms.
        let rss = 4 * GIB / PAGE_SIZE;
        assert_eq!(c.task_scan_min_ms(rss), 100.0);
        assert_eq!(c.task_scan_max_ms(rss), 60_000.0 / 16.0);
        // A small task: one window.
        assert_eq!(c.task_scan_min_ms(10), 1000.0);
        assert_eq!(c.task_scan_max_ms(10), 60_000.0);
    }

    #[test]
    fn period_slows_when_faults_are_local_or_migrations_fail() {
        let c = NumaScanConfig::default();
        let rss = 10;
        let all_local = Locality {
            local: 100,
            remote: 0,
            failed: 0,
        };
        assert!(update_scan_period(1000.0, all_local, &c, rss) > 1000.0);
        let failed = Locality {
            local: 10,
            remote: 90,
            failed: 5,
        };
        assert_eq!(update_scan_period(1000.0, failed, &c, rss), 2000.0);
        let none = Locality::default();
        assert_eq!(update_scan_period(1000.0, none, &c, rss), 2000.0);
        // Private remote faults still slow the scan (ps_ratio = 10 dominates).
        let remote = Locality {
            local: 10,
            remote: 90,
            failed: 0,
        };
        assert_eq!(update_scan_period(1000.0, remote, &c, rss), 1300.0);
        assert_eq!(update_scan_period(59_000.0, all_local, &c, rss), 60_000.0);
    }
}
