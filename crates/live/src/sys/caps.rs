//! Capabilities from `/proc/self/status` (`CapEff`), checked before anything runs so
//! a missing privilege is one clear line naming the capability.

/// `CAP_DAC_OVERRIDE`: write files whose mode does not let this user, such as DAMON
/// sysfs (root-owned, mode 0600) when tierkit does not run as root.
pub const CAP_DAC_OVERRIDE: u32 = 1;
/// `CAP_SYS_PTRACE`: ptrace-read access to another user's process (move_pages(2) of
/// its pages, its /proc/PID/pagemap).
pub const CAP_SYS_PTRACE: u32 = 19;
/// `CAP_SYS_ADMIN`: pagemap PFNs.
pub const CAP_SYS_ADMIN: u32 = 21;
/// `CAP_SYS_NICE`: move_pages(2) with `MPOL_MF_MOVE_ALL` (shared pages).
pub const CAP_SYS_NICE: u32 = 23;
/// `CAP_PERFMON`: system-wide perf events and tracepoints (5.8+).
pub const CAP_PERFMON: u32 = 38;

/// A capability set (the 64-bit mask of `CapEff`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CapSet(pub u64);

impl CapSet {
    /// True if capability number `cap` is in the set.
    pub fn has(self, cap: u32) -> bool {
        cap < 64 && self.0 & (1u64 << cap) != 0
    }
}

/// Parse `CapEff:` out of a `/proc/PID/status` text.
pub fn parse_cap_eff(status: &str) -> Option<CapSet> {
    let line = status.lines().find(|l| l.starts_with("CapEff:"))?;
    u64::from_str_radix(line["CapEff:".len()..].trim(), 16)
        .ok()
        .map(CapSet)
}

/// The daemon's own effective capabilities (empty if unreadable).
pub fn effective() -> CapSet {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| parse_cap_eff(&s))
        .unwrap_or_default()
}

/// The name of a capability the daemon checks.
pub fn name(cap: u32) -> &'static str {
    match cap {
        CAP_SYS_PTRACE => "CAP_SYS_PTRACE",
        CAP_SYS_ADMIN => "CAP_SYS_ADMIN",
        CAP_SYS_NICE => "CAP_SYS_NICE",
        CAP_PERFMON => "CAP_PERFMON",
        _ => "CAP_?",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_eff_of_root_and_of_nobody() {
        let root = "Name:\tcat\nCapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\nCapEff:\t000001ffffffffff\n";
        let c = parse_cap_eff(root).unwrap();
        assert!(c.has(CAP_SYS_ADMIN) && c.has(CAP_SYS_NICE) && c.has(CAP_PERFMON));
        let nobody = "CapEff:\t0000000000000000\n";
        assert!(!parse_cap_eff(nobody).unwrap().has(CAP_SYS_ADMIN));
        // Only CAP_SYS_NICE (bit 23 = 0x800000).
        let nice = parse_cap_eff("CapEff:\t0000000000800000").unwrap();
        assert!(nice.has(CAP_SYS_NICE) && !nice.has(CAP_SYS_ADMIN));
        assert!(parse_cap_eff("Name: x\n").is_none());
    }
}
