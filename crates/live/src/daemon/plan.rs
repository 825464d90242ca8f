//! Everything checked before a target is touched: the machine's nodes, the policy's
//! facilities, the privileges; and the tiers the policy sees.

use super::*;

/// Everything checked before the target is touched (or the command started).
pub struct Plan {
    pub(super) topo: numa::Topology,
    pub(super) nodes: [u32; 2],
    pub(super) facility: String,
    pub(super) needs_damon: bool,
    pub(super) needs_sampling: bool,
    pub(super) damon_ops: String,
}

/// Check the machine, the nodes, the policy's facilities and the privileges, in
/// that order. `target_uids` are the uids of the processes given by pid (none for a
/// command we start; a cgroup's members are checked as they join).
pub fn plan(opts: &Options, target_uids: &[u32]) -> Result<Plan, LiveError> {
    let topo = numa::read_topology()
        .map_err(|e| LiveError::usage(format!("cannot read the NUMA topology: {e}")))?;
    let with_mem: Vec<u32> = topo
        .nodes
        .iter()
        .filter(|n| n.mem_total_kb > 0)
        .map(|n| n.id)
        .collect();
    if with_mem.len() < 2 {
        return Err(LiveError::usage(format!(
            "this machine has {} NUMA node(s) with memory ({:?}); live tiering needs a fast and a slow node (see `tierkit doctor`)",
            with_mem.len(),
            with_mem
        )));
    }
    let check = |n: u32, what: &str| {
        if with_mem.contains(&n) {
            Ok(n)
        } else {
            Err(LiveError::usage(format!(
                "--{what}-node {n}: no such node with memory; valid: {with_mem:?}"
            )))
        }
    };
    let fast = match opts.fast_node {
        Some(n) => check(n, "fast")?,
        None => topo.default_fast().ok_or_else(|| {
            LiveError::usage("no node with CPUs and memory to be the fast tier; give --fast-node")
        })?,
    };
    let slow = match opts.slow_node {
        Some(n) => check(n, "slow")?,
        None => topo
            .default_slow(fast)
            .ok_or_else(|| LiveError::usage("no slow node found; give --slow-node"))?,
    };
    if fast == slow {
        return Err(LiveError::usage(format!(
            "--fast-node and --slow-node are both {fast}; they must differ"
        )));
    }
    let name = opts.policy.name();
    let caps = caps::effective();
    // Which DAMON operations the kernel has is known only from a context's
    // `avail_operations`; with no kdamond configured, a privileged user of a DAMON
    // policy creates one for a moment to read it (nobody else is using DAMON then), so
    // a kernel without per-process monitoring is refused here rather than at kdamond
    // start.
    let me = procfs::read_status(std::process::id() as i32).map_or(u32::MAX, |s| s.uid);
    let needs = config::needs_of(&opts.policy);
    let needs_damon = needs
        .iter()
        .any(|n| matches!(n, Need::AccessedBits | Need::HintFaults));
    let damon_probe = damon::probe_at(
        std::path::Path::new(damon::ADMIN),
        needs_damon && may_write_damon_sysfs(caps, me),
    );
    let perf_probe = perf::probe();
    let offer: Offer = crate::doctor::offer_from(&damon_probe, &perf_probe);
    // An unprivileged user cannot read the DAMON tree at all: judge by its presence.
    let facility = config::runnable_needs(&needs, offer).map_err(|why| {
        LiveError::usage(format!("policy `{name}` cannot run live here: it {why}"))
    })?;
    check_privileges(name, needs_damon, caps, me, None)?;
    for &uid in target_uids {
        check_privileges(name, needs_damon, caps, me, Some(uid))?;
    }
    if needs_damon {
        damon::can_start(admin_path(), registry_path()).map_err(LiveError::usage)?;
    }
    let damon_ops = match opts.live.damon_ops.as_str() {
        "auto"
            if damon_probe
                .avail_operations
                .as_ref()
                .is_some_and(|o| !o.iter().any(|x| x == "fvaddr")) =>
        {
            "vaddr"
        }
        "auto" => "fvaddr",
        o => o,
    }
    .to_string();
    Ok(Plan {
        topo,
        nodes: [fast, slow],
        facility,
        needs_damon,
        needs_sampling: needs.contains(&Need::Sampling),
        damon_ops,
    })
}

/// Whether this user may write DAMON sysfs: its files are root-owned with mode 0600,
/// so what counts is being root or holding CAP_DAC_OVERRIDE (DAMON checks no
/// capability of its own).
pub fn may_write_damon_sysfs(caps: caps::CapSet, uid: u32) -> bool {
    uid == 0 || caps.has(caps::CAP_DAC_OVERRIDE)
}

/// The privilege checks, before anything is touched: DAMON sysfs needs root or
/// CAP_DAC_OVERRIDE; another user's process needs CAP_SYS_PTRACE (move_pages(2) checks
/// ptrace-read access; CAP_SYS_NICE matters only for MPOL_MF_MOVE_ALL).
pub fn check_privileges(
    policy: &str,
    needs_damon: bool,
    caps: caps::CapSet,
    my_uid: u32,
    target_uid: Option<u32>,
) -> Result<(), LiveError> {
    if needs_damon && !may_write_damon_sysfs(caps, my_uid) {
        return Err(LiveError::privilege(format!(
            "policy `{policy}` reads accessed bits through DAMON sysfs, whose files are root's with mode 0600: run tierkit as root or give it CAP_DAC_OVERRIDE"
        )));
    }
    if let Some(uid) = target_uid {
        if uid != my_uid && !caps.has(caps::CAP_SYS_PTRACE) {
            return Err(LiveError::privilege(format!(
                "the target belongs to uid {uid} and tierkit runs as uid {my_uid}: moving another user's pages with move_pages(2) needs CAP_SYS_PTRACE (ptrace-read access; CAP_SYS_NICE is needed only for MPOL_MF_MOVE_ALL, which tierkit does not use)"
            )));
        }
    }
    Ok(())
}

pub(super) fn tier_setup(plan: &Plan, budget_bytes: Option<u64>) -> Result<TierSetup, LiveError> {
    let node = |id: u32| plan.topo.node(id).expect("checked in plan");
    let pages = |kb: u64| kb * 1024 / PAGE_SIZE;
    let (f, s) = (node(plan.nodes[0]), node(plan.nodes[1]));
    let (f_total, s_total) = (pages(f.mem_total_kb), pages(s.mem_total_kb));
    let budget = match budget_bytes {
        Some(b) if b < PAGE_SIZE => {
            return Err(LiveError::usage(format!(
                "--fast-budget {b} bytes is below one page ({PAGE_SIZE} bytes)"
            )))
        }
        Some(b) => Some((b / PAGE_SIZE).min(f_total)),
        None => None,
    };
    let info = |id: u8, n: &numa::Node, cap: u64, default_ns: f64, default_bw: f64| {
        let lat = n
            .hmat
            .map(|h| h.read_latency_ns as f64)
            .filter(|&x| x > 0.0);
        let wlat = n
            .hmat
            .map(|h| h.write_latency_ns as f64)
            .filter(|&x| x > 0.0);
        let bw = n
            .hmat
            .map(|h| h.read_bandwidth_mbps as f64 * 1e6)
            .filter(|&x| x > 0.0);
        TierInfo {
            id: TierId(id),
            name: format!("node{}", n.id),
            capacity_pages: cap,
            load_ns: lat.unwrap_or(default_ns),
            store_ns: wlat.or(lat).unwrap_or(default_ns),
            bandwidth_bytes_per_s: bw.unwrap_or(default_bw),
        }
    };
    let dist = f
        .distances
        .get(s.id as usize)
        .copied()
        .unwrap_or(20)
        .max(10) as f64;
    let f_cap = budget.unwrap_or(f_total);
    let tiers = vec![
        info(0, f, f_cap, 100.0, 20e9),
        info(1, s, s_total, 10.0 * dist, 5e9),
    ];
    let node_wm = |n: &numa::Node, total: u64| {
        n.watermarks
            .map(|w| Watermarks::pages(w.min, w.low, w.high))
            .unwrap_or_else(|| budget_watermarks(pages(n.mem_total_kb), total))
    };
    let total = f_total + s_total;
    let fast_wm = match budget {
        Some(b) => budget_watermarks(b, b + s_total),
        None => node_wm(f, total),
    };
    Ok(TierSetup {
        nodes: plan.nodes,
        tiers,
        budget_pages: budget,
        watermarks: [fast_wm, node_wm(s, total)],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn privileges_name_the_missing_capability() {
        let none = caps::CapSet(0);
        let admin = caps::CapSet(1 << caps::CAP_SYS_ADMIN);
        let dac = caps::CapSet(1 << caps::CAP_DAC_OVERRIDE);
        let e = check_privileges("pet", true, none, 1000, None).unwrap_err();
        assert_eq!(e.code, 3);
        assert!(
            e.msg.contains("CAP_DAC_OVERRIDE") && e.msg.contains("root"),
            "{e}"
        );
        // DAMON's files are root's, mode 0600: CAP_SYS_ADMIN alone cannot open them
        // (this passed before the fix), CAP_DAC_OVERRIDE or uid 0 can.
        assert!(check_privileges("pet", true, admin, 1000, None).is_err());
        assert!(check_privileges("pet", true, dac, 1000, None).is_ok());
        assert!(check_privileges("pet", true, none, 0, Some(0)).is_ok());
        // Placement-only policy, own child: nothing needed.
        assert!(check_privileges("first-touch", false, none, 1000, None).is_ok());
        let e = check_privileges("first-touch", false, none, 1000, Some(0)).unwrap_err();
        assert!(e.code == 3 && e.msg.contains("CAP_SYS_PTRACE"), "{e}");
        let ptrace = caps::CapSet(1 << caps::CAP_SYS_PTRACE);
        assert!(check_privileges("first-touch", false, ptrace, 1000, Some(0)).is_ok());
    }
}
