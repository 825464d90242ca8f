//! `tierkit doctor`, `tierkit run` and `tierkit attach`: the live daemon's command
//! line (see docs/live.md). Errors are one line on stderr starting `tierkit: `; exit
//! 2 for bad usage or a machine that cannot run the request, 3 for a missing
//! privilege, 1 for a runtime failure.

use clap::Args;
use std::path::PathBuf;
use tierkit_live::daemon::{self, Options, Target};
use tierkit_live::{config, doctor, LiveError};

/// Options shared by `run` and `attach`.
#[derive(Args, Debug, Clone)]
pub struct LiveArgs {
    /// Policy name (see `tierkit doctor` for the ones that run live here).
    #[arg(long)]
    pub policy: String,
    /// Fast node. Default: the node with CPUs in the top memory tier.
    #[arg(long)]
    pub fast_node: Option<u32>,
    /// Slow node. Default: a CPU-less node in a lower memory tier.
    #[arg(long)]
    pub slow_node: Option<u32>,
    /// Fast-tier budget of the target: 64MiB, 1GiB, 4096KiB or bytes. Default: the
    /// fast node's capacity.
    #[arg(long)]
    pub fast_budget: Option<String>,
    /// Observation interval in ms (placement refresh, budget, stats line). Default 1000.
    #[arg(long)]
    pub interval_ms: Option<u64>,
    /// Decide, but do not move pages.
    #[arg(long)]
    pub dry_run: bool,
    /// Write one JSON object per interval here.
    #[arg(long)]
    pub stats: Option<PathBuf>,
    /// Write the final summary.json here.
    #[arg(long)]
    pub summary: Option<PathBuf>,
    /// Serve Prometheus text on this loopback address (127.0.0.1:PORT).
    #[arg(long)]
    pub prometheus: Option<String>,
    /// Detach after this many seconds (the target keeps running).
    #[arg(long)]
    pub duration_s: Option<f64>,
    /// Override a policy (`policy.KEY` or `KEY`) or daemon (`live.KEY`) setting.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Print each interval's JSON line on stdout too.
    #[arg(long)]
    pub verbose: bool,
}

/// Print the doctor's report; exit code 0.
pub fn doctor(json: bool) -> i32 {
    let r = doctor::gather();
    if json {
        println!("{}", serde_json::to_string_pretty(&r).unwrap_or_default());
    } else {
        print!("{}", doctor::render(&r));
    }
    0
}

/// Parse a pid argument: one process id, or several separated by commas.
pub fn parse_pids(s: &str) -> Result<Vec<i32>, LiveError> {
    let mut out = Vec::new();
    for part in s.split(',') {
        match part.trim().parse::<i32>() {
            Ok(p) if p > 0 => {
                if out.contains(&p) {
                    return Err(LiveError::usage(format!("--pid `{s}` names pid {p} twice")));
                }
                out.push(p)
            }
            _ => {
                return Err(LiveError::usage(format!(
                    "--pid `{s}`: `{}` is not a process id (give positive integers separated by commas, e.g. 1234,5678)",
                    part.trim()
                )))
            }
        }
    }
    Ok(out)
}

/// The cgroup directory `--cgroup` names: a path, or a name under /sys/fs/cgroup.
pub fn cgroup_dir(s: &std::path::Path) -> PathBuf {
    if s.is_absolute() || s.exists() {
        s.to_path_buf()
    } else {
        std::path::Path::new("/sys/fs/cgroup").join(s)
    }
}

/// Build the daemon's options from the command line.
pub fn options(a: &LiveArgs) -> Result<Options, LiveError> {
    let (policy, live) =
        config::build(&a.policy, &a.sets, a.interval_ms).map_err(LiveError::usage)?;
    let fast_budget_bytes = match &a.fast_budget {
        Some(s) => Some(
            config::parse_size(s).map_err(|e| LiveError::usage(format!("--fast-budget: {e}")))?,
        ),
        None => None,
    };
    let prometheus = match &a.prometheus {
        Some(s) => Some(s.parse().map_err(|_| {
            LiveError::usage(format!(
                "--prometheus `{s}` is not an address; use 127.0.0.1:PORT"
            ))
        })?),
        None => None,
    };
    if let Some(d) = a.duration_s {
        if !(d > 0.0 && d.is_finite()) {
            return Err(LiveError::usage(format!(
                "--duration-s {d}: give a positive number of seconds"
            )));
        }
    }
    Ok(Options {
        policy,
        live,
        fast_node: a.fast_node,
        slow_node: a.slow_node,
        fast_budget_bytes,
        dry_run: a.dry_run,
        stats_path: a.stats.clone(),
        summary_path: a.summary.clone(),
        prometheus,
        duration_s: a.duration_s,
        verbose: a.verbose,
    })
}

fn finish(r: Result<tierkit_live::stats::Summary, LiveError>) -> i32 {
    match r {
        Ok(s) => {
            eprintln!(
                "tierkit: {} stopped ({}) after {:.1} s: promoted {} and demoted {} pages, {} failures, daemon CPU {:.1}%",
                s.policy,
                s.end_reason,
                s.duration_s,
                s.last.promoted_pages,
                s.last.demoted_pages,
                s.last.migrate_failures,
                s.daemon_cpu_pct
            );
            // `tierkit run` is a wrapper: it ends as its command did.
            match (s.command_status, &s.command_ended) {
                (Some(code), Some(how)) => {
                    if code != 0 {
                        eprintln!("tierkit: the command {how}");
                    }
                    code
                }
                _ => 0,
            }
        }
        Err(e) => {
            eprintln!("tierkit: {e}");
            e.code
        }
    }
}

/// `tierkit attach`: `--pid A[,B...]` or `--cgroup PATH` (clap makes sure exactly one
/// is given).
pub fn attach(pid: Option<&str>, cgroup: Option<&std::path::Path>, a: &LiveArgs) -> i32 {
    let target = match (pid, cgroup) {
        (Some(p), _) => parse_pids(p).map(Target::Pids),
        (None, Some(c)) => Ok(Target::Cgroup(cgroup_dir(c))),
        (None, None) => Err(LiveError::usage("give --pid PID[,PID...] or --cgroup PATH")),
    };
    finish(
        target
            .and_then(|t| options(a).map(|o| (t, o)))
            .and_then(|(t, o)| daemon::run(&o, t)),
    )
}

/// `tierkit run -- COMMAND...`.
pub fn run(command: &[String], a: &LiveArgs) -> i32 {
    if command.is_empty() {
        return finish(Err(LiveError::usage("give the command to run after `--`")));
    }
    finish(options(a).and_then(|o| daemon::run(&o, Target::Command(command.to_vec()))))
}
