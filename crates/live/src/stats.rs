//! Live statistics: one JSON object per interval (`--stats`), the final
//! `summary.json` (`--summary`), and a Prometheus text endpoint on loopback
//! (`--prometheus`). Field names follow the simulator's metrics where they mean the
//! same (`promoted_pages`, `demoted_pages`, `hint_faults`, `young_tests`,
//! `armed_ptes`, `allocated_pages`).

use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};

/// One interval's line (counters cumulative since attach).
#[derive(Debug, Clone, Serialize, Default)]
pub struct IntervalStats {
    /// Each process tiered (those that left included, marked `gone`), in the order
    /// they were added. First, so a field name's last occurrence in a line (or in
    /// summary.json) is the total's, as scripts grepping a field expect.
    pub processes: Vec<ProcessStats>,
    /// Seconds since attach.
    pub time_s: f64,
    /// Target pages on the fast node (move_pages query, queued moves counted done).
    pub fast_pages: u64,
    /// Target pages on the slow node.
    pub slow_pages: u64,
    /// Target pages on other nodes.
    pub other_node_pages: u64,
    /// The fast budget, pages (absent: unlimited).
    pub fast_budget_pages: Option<u64>,
    /// Free pages of the fast tier as the policy sees it.
    pub free_fast_pages: u64,
    /// Moves waiting for the rate cap.
    pub queued_pages: u64,
    /// Pages promoted (confirmed by move_pages status).
    pub promoted_pages: u64,
    /// Pages demoted (confirmed), budget demotions included.
    pub demoted_pages: u64,
    /// Demotions the daemon queued to hold the budget.
    pub budget_demote_requests: u64,
    /// Pages a move_pages call failed to move.
    pub migrate_failures: u64,
    /// ... `-EBUSY`.
    pub fail_busy: u64,
    /// ... `-ENOMEM`.
    pub fail_nomem: u64,
    /// ... unmapped/freed meanwhile.
    pub fail_gone: u64,
    /// ... other.
    pub fail_other: u64,
    /// Moves queued again after a passing failure (EBUSY, ENOMEM).
    pub retried_moves: u64,
    /// `migrate` calls refused (no space in the budget, queue full).
    pub refused_migrations: u64,
    /// Hinting faults delivered.
    pub hint_faults: u64,
    /// Accessed-bit tests answered.
    pub young_tests: u64,
    /// Pages armed.
    pub armed_ptes: u64,
    /// Pages first seen present.
    pub allocated_pages: u64,
    /// DAMON snapshots received.
    pub damon_snapshots: u64,
    /// DAMON kdamonds restarted after stopping while the target lived.
    pub damon_restarts: u64,
    /// DAMON snapshots of a process that held no region (not kept).
    pub damon_empty_snapshots: u64,
    /// Regions in the newest snapshot.
    pub damon_regions: u64,
    /// move_pages(2) calls that moved pages.
    pub move_calls: u64,
    /// PEBS/IBS samples delivered as `Sample` events, dropped (not a tracked resident
    /// page of the target), and lost by the kernel (a full ring buffer).
    pub samples: u64,
    /// See `samples`.
    pub samples_dropped: u64,
    /// See `samples`.
    pub samples_lost: u64,
    /// Pages placement refreshes asked move_pages(2) for (mapped pages only).
    pub queried_pages: u64,
    /// move_pages(2) calls that failed as a whole for a passing reason (the daemon
    /// backed off and went on).
    pub move_call_failures: u64,
    /// Pages that would have moved under `--dry-run`.
    pub dry_run_pages: u64,
    /// The daemon's own CPU time (all threads), ns.
    pub daemon_cpu_ns: u64,
}

/// One tiered process's share of an interval's line.
#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct ProcessStats {
    /// OS pid.
    pub pid: i32,
    /// Its pages on the fast node (queued moves counted done).
    pub fast_pages: u64,
    /// Its pages on the slow node.
    pub slow_pages: u64,
    /// Its pages on other nodes.
    pub other_node_pages: u64,
    /// Its pages promoted (confirmed).
    pub promoted_pages: u64,
    /// Its pages demoted (confirmed).
    pub demoted_pages: u64,
    /// Its pages a move_pages call did not move.
    pub migrate_failures: u64,
    /// Hinting faults delivered for its pages.
    pub hint_faults: u64,
    /// It exited or left the cgroup.
    pub gone: bool,
}

/// The final summary.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Policy name.
    pub policy: String,
    /// Its configuration.
    pub policy_config: serde_json::Value,
    /// Daemon settings.
    pub live_config: serde_json::Value,
    /// What the policy used live.
    pub facility: String,
    /// The first process tiered (the command of `tierkit run`).
    pub pid: i32,
    /// Every process tiered, in the order they were added.
    pub pids: Vec<i32>,
    /// Processes of a cgroup left alone (another user's, without CAP_SYS_PTRACE).
    pub refused_pids: Vec<i32>,
    /// Fast node, slow node.
    pub nodes: [u32; 2],
    /// `--dry-run`.
    pub dry_run: bool,
    /// Why the daemon stopped: `target-exited`, `cgroup-removed`, `duration`,
    /// `signal`, `error`.
    pub end_reason: String,
    /// For `tierkit run`: the command's status as a shell reports it (its exit code,
    /// or 128 + the signal that killed it), which `run` exits with.
    pub command_status: Option<i32>,
    /// For `tierkit run`: how the command ended, in words.
    pub command_ended: Option<String>,
    /// Wall seconds attached.
    pub duration_s: f64,
    /// Daemon CPU over wall time, percent of one CPU.
    pub daemon_cpu_pct: f64,
    /// Pages per second through move_pages while moving (pages requested / time in
    /// the calls).
    pub move_pages_per_s: f64,
    /// Mean wall time of one move_pages batch, µs.
    pub move_batch_us: f64,
    /// Metadata the policy keeps (its own estimate).
    pub metadata_bytes: u64,
    /// The policy's counters.
    pub policy_stats: BTreeMap<String, f64>,
    /// The last interval's counters.
    pub last: IntervalStats,
}

/// CPU time of this process (all threads), ns.
pub fn process_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we pass.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    if r != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Prometheus text exposition of the numeric fields of `s` (`tierkit_<field>`).
pub fn prometheus_text(s: &IntervalStats, policy: &str) -> String {
    let v = serde_json::to_value(s).unwrap_or_default();
    let mut out = String::new();
    if let Some(obj) = v.as_object() {
        for (k, val) in obj {
            if let Some(x) = val.as_f64() {
                out.push_str(&format!(
                    "# TYPE tierkit_{k} gauge\ntierkit_{k}{{policy=\"{policy}\"}} {x}\n"
                ));
            }
        }
    }
    // Per-process gauges, one series per pid.
    type Field = (&'static str, fn(&ProcessStats) -> u64);
    let fields: [Field; 6] = [
        ("fast_pages", |p| p.fast_pages),
        ("slow_pages", |p| p.slow_pages),
        ("promoted_pages", |p| p.promoted_pages),
        ("demoted_pages", |p| p.demoted_pages),
        ("migrate_failures", |p| p.migrate_failures),
        ("hint_faults", |p| p.hint_faults),
    ];
    for (name, get) in fields {
        out.push_str(&format!("# TYPE tierkit_process_{name} gauge\n"));
        for p in s.processes.iter().filter(|p| !p.gone) {
            out.push_str(&format!(
                "tierkit_process_{name}{{policy=\"{policy}\",pid=\"{}\"}} {}\n",
                p.pid,
                get(p)
            ));
        }
    }
    out
}

/// Serve `body` as Prometheus text on a loopback address from a background thread.
/// Refuses non-loopback addresses: the daemon runs privileged.
pub fn serve_prometheus(addr: SocketAddr, body: Arc<Mutex<String>>) -> std::io::Result<SocketAddr> {
    if !addr.ip().is_loopback() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("--prometheus {addr}: only loopback addresses (127.0.0.1, ::1) are served"),
        ));
    }
    let l = TcpListener::bind(addr)?;
    let bound = l.local_addr()?;
    std::thread::spawn(move || {
        for conn in l.incoming().flatten() {
            let mut conn = conn;
            let _ = conn.set_read_timeout(Some(std::time::Duration::from_millis(500)));
            let mut buf = [0u8; 1024];
            let _ = conn.read(&mut buf);
            let text = body.lock().map(|b| b.clone()).unwrap_or_default();
            let _ = write!(
                conn,
                "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n{}",
                text.len(),
                text
            );
        }
    });
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_lists_numeric_fields_only() {
        let s = IntervalStats {
            fast_pages: 7,
            fast_budget_pages: None,
            ..Default::default()
        };
        let t = prometheus_text(&s, "pet");
        assert!(t.contains("tierkit_fast_pages{policy=\"pet\"} 7\n"));
        assert!(!t.contains("fast_budget_pages"), "null is skipped");
    }

    #[test]
    fn prometheus_has_a_series_per_live_process() {
        let p = |pid, fast, gone| ProcessStats {
            pid,
            fast_pages: fast,
            gone,
            ..Default::default()
        };
        let s = IntervalStats {
            fast_pages: 12,
            processes: vec![p(41, 5, false), p(42, 7, false), p(43, 9, true)],
            ..Default::default()
        };
        let t = prometheus_text(&s, "tpp");
        assert!(t.contains("tierkit_process_fast_pages{policy=\"tpp\",pid=\"41\"} 5\n"));
        assert!(t.contains("tierkit_process_fast_pages{policy=\"tpp\",pid=\"42\"} 7\n"));
        assert!(
            !t.contains("pid=\"43\""),
            "a process that left has no series"
        );
        // The totals stay as they were, and each metric is typed once.
        assert!(t.contains("tierkit_fast_pages{policy=\"tpp\"} 12\n"));
        assert_eq!(
            t.matches("# TYPE tierkit_process_fast_pages gauge").count(),
            1
        );
    }

    #[test]
    fn endpoint_serves_loopback_and_refuses_others() {
        let body = Arc::new(Mutex::new("tierkit_x 1\n".to_string()));
        let a = serve_prometheus("127.0.0.1:0".parse().unwrap(), body).unwrap();
        let mut c = std::net::TcpStream::connect(a).unwrap();
        c.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        let mut s = String::new();
        c.read_to_string(&mut s).unwrap();
        assert!(
            s.starts_with("HTTP/1.0 200") && s.ends_with("tierkit_x 1\n"),
            "{s}"
        );
        assert!(serve_prometheus("0.0.0.0:0".parse().unwrap(), Arc::default()).is_err());
    }

    #[test]
    fn cpu_clock_advances() {
        let a = process_cpu_ns();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(process_cpu_ns() > a);
    }
}
