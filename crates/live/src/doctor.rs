//! `tierkit doctor`: what this machine offers the live daemon, and which policies
//! can therefore run live.

use crate::config::{self, Offer};
use crate::sys::{caps, damon, numa, perf, read_trim};
use serde::Serialize;
use tierkit_policies::PolicyConfig;

/// Privileges the daemon may need.
#[derive(Debug, Clone, Serialize)]
pub struct Privileges {
    /// Real uid.
    pub uid: u32,
    /// CAP_DAC_OVERRIDE (DAMON sysfs and idle page tracking when not root).
    pub cap_dac_override: bool,
    /// CAP_SYS_ADMIN (pagemap PFNs).
    pub cap_sys_admin: bool,
    /// CAP_SYS_PTRACE (move another user's process's pages).
    pub cap_sys_ptrace: bool,
    /// CAP_SYS_NICE (MPOL_MF_MOVE_ALL; not used).
    pub cap_sys_nice: bool,
    /// CAP_PERFMON (system-wide perf, tracepoints).
    pub cap_perfmon: bool,
}

/// One policy's live status.
#[derive(Debug, Clone, Serialize)]
pub struct PolicyLive {
    /// Registered name.
    pub name: String,
    /// Can run here.
    pub runnable: bool,
    /// The facility it uses, or why it cannot run.
    pub detail: String,
}

/// The doctor's findings.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// `uname -r`.
    pub kernel: String,
    /// NUMA nodes.
    pub topology: Option<numa::Topology>,
    /// Error reading the topology.
    pub topology_error: Option<String>,
    /// Default fast and slow nodes.
    pub default_nodes: Option<(u32, u32)>,
    /// DAMON sysfs.
    pub damon: damon::Probe,
    /// `/sys/kernel/mm/page_idle/bitmap` exists (CONFIG_IDLE_PAGE_TRACKING).
    pub idle_page_tracking: bool,
    /// `/proc/self/pagemap` shows PFNs (needs CAP_SYS_ADMIN).
    pub pagemap_pfns: bool,
    /// perf probes.
    pub perf: perf::PerfProbe,
    /// `/proc/sys/kernel/numa_balancing` (0 off, 1 NUMA, 2 tiering, 3 both).
    pub numa_balancing: Option<String>,
    /// `/sys/kernel/mm/numa/demotion_enabled`.
    pub demotion_enabled: Option<String>,
    /// Privileges.
    pub privileges: Privileges,
    /// What the daemon can use.
    pub offer: Offer,
    /// Every registered policy.
    pub policies: Vec<PolicyLive>,
    /// Warnings and hints.
    pub notes: Vec<String>,
}

fn uname_release() -> String {
    read_trim("/proc/sys/kernel/osrelease").unwrap_or_else(|| "?".into())
}

/// True if this process's pagemap shows a PFN for one of its own touched pages.
pub fn pagemap_pfns_visible() -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let probe = Box::new([1u8; 4096]);
    let addr = probe.as_ptr() as u64;
    std::hint::black_box(&probe);
    let Ok(mut f) = std::fs::File::open("/proc/self/pagemap") else {
        return false;
    };
    let mut b = [0u8; 8];
    if f.seek(SeekFrom::Start((addr >> 12) * 8)).is_err() || f.read_exact(&mut b).is_err() {
        return false;
    }
    let e = u64::from_le_bytes(b);
    e & (1 << 63) != 0 && e & ((1 << 55) - 1) != 0
}

/// What the daemon can use, from the probes.
pub fn offer_from(d: &damon::Probe, p: &perf::PerfProbe) -> Offer {
    Offer {
        damon_vaddr: d.present
            && (d.has_ops("vaddr") || d.has_ops("fvaddr") || d.avail_operations.is_none()),
        memory_sampling: p.memory_sampling(),
    }
}

/// Gather the report. May create and remove a DAMON kdamond for a moment to read
/// `avail_operations` when none is configured.
pub fn gather() -> Report {
    let caps = caps::effective();
    let uid =
        crate::sys::procfs::read_status(std::process::id() as i32).map_or(u32::MAX, |s| s.uid);
    let (topology, topology_error) = match numa::read_topology() {
        Ok(t) => (Some(t), None),
        Err(e) => (None, Some(e)),
    };
    let default_nodes = topology.as_ref().and_then(|t| {
        t.default_fast()
            .and_then(|f| t.default_slow(f).map(|s| (f, s)))
    });
    let damon = damon::probe_at(
        std::path::Path::new(damon::ADMIN),
        caps.has(caps::CAP_SYS_ADMIN),
    );
    let perf = perf::probe();
    let offer = offer_from(&damon, &perf);
    let policies = PolicyConfig::names()
        .into_iter()
        .map(|n| match config::runnable(n, offer) {
            Ok(d) => PolicyLive {
                name: n.into(),
                runnable: true,
                detail: d,
            },
            Err(d) => PolicyLive {
                name: n.into(),
                runnable: false,
                detail: d,
            },
        })
        .collect();
    let numa_balancing = read_trim("/proc/sys/kernel/numa_balancing");
    let mut notes = Vec::new();
    if default_nodes.is_none() {
        notes.push(
            "only one NUMA node with memory: `tierkit run`/`attach` need a fast and a slow node (e.g. a CPU-less CXL node); the simulator (`tierkit sim`) works anywhere".into(),
        );
    }
    if numa_balancing.as_deref().is_some_and(|m| m != "0") {
        notes.push("kernel NUMA balancing is on and migrates pages itself; set /proc/sys/kernel/numa_balancing to 0 so only the policy moves pages".into());
    }
    if let Err(why) = damon::can_start(
        std::path::Path::new(damon::ADMIN),
        std::path::Path::new(damon::REGISTRY),
    ) {
        notes.push(why);
    }
    if damon.present && !crate::daemon::may_write_damon_sysfs(caps, uid) {
        notes.push(
            "DAMON sysfs files are root's (mode 0600): accessed-bit policies need root or CAP_DAC_OVERRIDE".into(),
        );
    }
    if !damon.present {
        notes.push("no DAMON sysfs (/sys/kernel/mm/damon/admin): accessed-bit and hint-fault policies cannot run".into());
    } else if damon
        .avail_operations
        .as_ref()
        .is_some_and(|o| !o.iter().any(|x| x == "vaddr" || x == "fvaddr"))
    {
        notes.push("DAMON has no vaddr/fvaddr operations (CONFIG_DAMON_VADDR unset): per-process accessed bits are unavailable".into());
    }
    if read_trim("/sys/kernel/mm/page_idle/bitmap").is_none()
        && !std::path::Path::new("/sys/kernel/mm/page_idle/bitmap").exists()
    {
        notes.push("no idle page tracking (CONFIG_IDLE_PAGE_TRACKING unset, as on Debian kernels); the daemon uses DAMON regions for accessed bits".into());
    }
    Report {
        kernel: uname_release(),
        topology,
        topology_error,
        default_nodes,
        idle_page_tracking: std::path::Path::new("/sys/kernel/mm/page_idle/bitmap").exists(),
        pagemap_pfns: pagemap_pfns_visible(),
        damon,
        perf,
        numa_balancing,
        demotion_enabled: read_trim("/sys/kernel/mm/numa/demotion_enabled"),
        privileges: Privileges {
            uid,
            cap_dac_override: caps.has(caps::CAP_DAC_OVERRIDE),
            cap_sys_admin: caps.has(caps::CAP_SYS_ADMIN),
            cap_sys_ptrace: caps.has(caps::CAP_SYS_PTRACE),
            cap_sys_nice: caps.has(caps::CAP_SYS_NICE),
            cap_perfmon: caps.has(caps::CAP_PERFMON),
        },
        offer,
        policies,
        notes,
    }
}

fn yn(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// The report as text.
pub fn render(r: &Report) -> String {
    let mut s = String::new();
    s.push_str(&format!("kernel {}\n\nNUMA nodes\n", r.kernel));
    if let Some(t) = &r.topology {
        for n in &t.nodes {
            let cpus = if n.cpus.is_empty() {
                "none (CPU-less)".to_string()
            } else {
                format!("{:?}", n.cpus)
            };
            s.push_str(&format!(
                "  node{}: cpus {}, memory {} MiB ({} MiB free), distance {:?}, memory tier {}\n",
                n.id,
                cpus,
                n.mem_total_kb / 1024,
                n.mem_free_kb / 1024,
                n.distances,
                n.memory_tier.map_or("-".into(), |t| t.to_string())
            ));
            if let Some(h) = n.hmat {
                s.push_str(&format!(
                    "         HMAT access0: read {} ns / {} MB/s, write {} ns / {} MB/s\n",
                    h.read_latency_ns,
                    h.read_bandwidth_mbps,
                    h.write_latency_ns,
                    h.write_bandwidth_mbps
                ));
            }
        }
    }
    if let Some(e) = &r.topology_error {
        s.push_str(&format!("  cannot read: {e}\n"));
    }
    match r.default_nodes {
        Some((f, sl)) => s.push_str(&format!("  default tiers: fast node {f}, slow node {sl}\n")),
        None => s.push_str("  default tiers: none (one node with memory)\n"),
    }
    s.push_str("\nobservation and migration facilities\n");
    let ops = r
        .damon
        .avail_operations
        .as_ref()
        .map_or("unknown".into(), |o| o.join(" "));
    s.push_str(&format!(
        "  DAMON sysfs: {} (operations: {ops}; kdamonds on: {:?})\n",
        yn(r.damon.present),
        r.damon.running
    ));
    s.push_str(&format!(
        "  idle page tracking: {}\n",
        yn(r.idle_page_tracking)
    ));
    s.push_str(&format!("  pagemap PFNs: {}\n", yn(r.pagemap_pfns)));
    s.push_str(&format!(
        "  perf memory sampling (PEBS/IBS): {} (precise event: {}{}, mem-loads: {}, ibs_op: {}, perf_event_paranoid {})\n",
        yn(r.perf.memory_sampling()),
        yn(r.perf.precise_sampling),
        r.perf.precise_errno.map_or(String::new(), |e| format!(" errno {e}")),
        yn(r.perf.mem_loads_event),
        yn(r.perf.ibs_op),
        r.perf.paranoid.map_or("?".into(), |p| p.to_string())
    ));
    s.push_str(&format!(
        "  page-fault tracepoint: {}\n",
        yn(r.perf.page_fault_tracepoint)
    ));
    s.push_str(&format!(
        "  numa_balancing: {}, demotion_enabled: {}\n",
        r.numa_balancing.as_deref().unwrap_or("absent"),
        r.demotion_enabled.as_deref().unwrap_or("absent")
    ));
    s.push_str(
        "  move_pages(2): yes (hint faults are derived from DAMON regions of armed pages)\n",
    );
    let p = &r.privileges;
    s.push_str(&format!(
        "\nprivileges (uid {}): CAP_DAC_OVERRIDE {}, CAP_SYS_ADMIN {}, CAP_SYS_PTRACE {}, CAP_SYS_NICE {}, CAP_PERFMON {}\n",
        p.uid,
        yn(p.cap_dac_override),
        yn(p.cap_sys_admin),
        yn(p.cap_sys_ptrace),
        yn(p.cap_sys_nice),
        yn(p.cap_perfmon)
    ));
    s.push_str("\npolicies live\n");
    for pl in &r.policies {
        s.push_str(&format!(
            "  {:<16} {:<4} {}\n",
            pl.name,
            if pl.runnable { "yes" } else { "no" },
            pl.detail
        ));
    }
    if !r.notes.is_empty() {
        s.push_str("\nnotes\n");
        for n in &r.notes {
            s.push_str(&format!("  - {n}\n"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_lists_every_policy_and_renders() {
        let r = gather();
        assert_eq!(r.policies.len(), PolicyConfig::names().len());
        let t = render(&r);
        assert!(
            t.contains("NUMA nodes") && t.contains("policies live") && t.contains("first-touch")
        );
        assert!(r
            .policies
            .iter()
            .any(|p| p.name == "first-touch" && p.runnable));
        assert!(r.policies.iter().any(|p| p.name == "oracle" && !p.runnable));
        serde_json::to_string(&r).unwrap();
    }
}
