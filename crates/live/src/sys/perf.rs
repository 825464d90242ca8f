//! perf_event_open(2) probes: can this machine sample memory accesses with data
//! addresses (Intel PEBS `mem-loads`, AMD IBS op)? And the page-fault tracepoint.

use serde::Serialize;

/// `struct perf_event_attr` up to `PERF_ATTR_SIZE_VER5` (112 bytes).
#[repr(C)]
#[derive(Default)]
pub(crate) struct PerfEventAttr {
    pub(crate) type_: u32,
    pub(crate) size: u32,
    pub(crate) config: u64,
    pub(crate) sample_period: u64,
    pub(crate) sample_type: u64,
    pub(crate) read_format: u64,
    pub(crate) flags: u64,
    pub(crate) wakeup_events: u32,
    pub(crate) bp_type: u32,
    pub(crate) config1: u64,
    pub(crate) config2: u64,
    pub(crate) branch_sample_type: u64,
    pub(crate) sample_regs_user: u64,
    pub(crate) sample_stack_user: u32,
    pub(crate) clockid: i32,
    pub(crate) sample_regs_intr: u64,
    pub(crate) aux_watermark: u32,
    pub(crate) sample_max_stack: u16,
    pub(crate) reserved: u16,
}

const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_COUNT_HW_CPU_CYCLES: u64 = 0;
const PERF_SAMPLE_TID: u64 = 1 << 1;
const PERF_SAMPLE_ADDR: u64 = 1 << 3;
const FLAG_DISABLED: u64 = 1;
const FLAG_EXCLUDE_KERNEL: u64 = 1 << 5;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;
const PRECISE_IP_SHIFT: u64 = 15;

/// What the perf probes found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PerfProbe {
    /// A precise (`precise_ip = 2`) cycles event with `PERF_SAMPLE_ADDR` opened on
    /// the daemon itself.
    pub precise_sampling: bool,
    /// errno of that attempt when it failed.
    pub precise_errno: Option<i32>,
    /// The `cpu` PMU lists a `mem-loads` event (Intel PEBS load latency).
    pub mem_loads_event: bool,
    /// An AMD IBS op PMU exists.
    pub ibs_op: bool,
    /// `/proc/sys/kernel/perf_event_paranoid`.
    pub paranoid: Option<i32>,
    /// The `exceptions:page_fault_user` tracepoint exists (tracefs).
    pub page_fault_tracepoint: bool,
}

impl PerfProbe {
    /// Memory-access sampling with data addresses is possible.
    pub fn memory_sampling(&self) -> bool {
        self.precise_sampling && (self.mem_loads_event || self.ibs_op)
    }
}

fn try_precise() -> Result<(), i32> {
    let attr = PerfEventAttr {
        type_: PERF_TYPE_HARDWARE,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config: PERF_COUNT_HW_CPU_CYCLES,
        sample_period: 10_007,
        sample_type: PERF_SAMPLE_TID | PERF_SAMPLE_ADDR,
        flags: FLAG_DISABLED | FLAG_EXCLUDE_KERNEL | FLAG_EXCLUDE_HV | (2 << PRECISE_IP_SHIFT),
        ..Default::default()
    };
    // SAFETY: `attr` is a valid perf_event_attr of the size it declares; the event is
    // created disabled on this process only and closed right away.
    let fd =
        unsafe { super::syscalls::perf_event_open(&attr as *const PerfEventAttr, 0, -1, -1, 0) }?;
    // SAFETY: fd was just returned by the kernel and is ours.
    unsafe { libc::close(fd as i32) };
    Ok(())
}

/// Run the probes.
pub fn probe() -> PerfProbe {
    let r = try_precise();
    let tp = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .iter()
        .any(|t| {
            std::path::Path::new(t)
                .join("events/exceptions/page_fault_user/id")
                .exists()
        });
    PerfProbe {
        precise_sampling: r.is_ok(),
        precise_errno: r.err(),
        mem_loads_event: std::path::Path::new("/sys/bus/event_source/devices/cpu/events/mem-loads")
            .exists(),
        ibs_op: std::path::Path::new("/sys/bus/event_source/devices/ibs_op").exists(),
        paranoid: super::read_trim("/proc/sys/kernel/perf_event_paranoid")
            .and_then(|s| s.parse().ok()),
        page_fault_tracepoint: tp,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_has_the_ver5_size() {
        assert_eq!(std::mem::size_of::<PerfEventAttr>(), 112);
    }

    #[test]
    fn sampling_needs_a_precise_event_and_a_memory_pmu() {
        let mut p = PerfProbe {
            precise_sampling: true,
            precise_errno: None,
            mem_loads_event: false,
            ibs_op: false,
            paranoid: Some(2),
            page_fault_tracepoint: false,
        };
        assert!(!p.memory_sampling());
        p.ibs_op = true;
        assert!(p.memory_sampling());
        p.precise_sampling = false;
        assert!(!p.memory_sampling());
        // The probe itself never panics, whatever the machine offers.
        let _ = probe();
    }
}
