//! The `tierkit` binary: a thin shell over the `tierkit` library crate.

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;
use tierkit::run_config::{self, RunArgs};
use tierkit::{bench, claims, compare, list, run};

/// tierkit: compare tiered-memory placement policies on a simulated machine.
#[derive(Parser)]
#[command(name = "tierkit", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate one policy on one workload and print a summary table.
    Sim {
        /// Workload name (see `tierkit list`). Default: gups.
        #[arg(long)]
        workload: Option<String>,
        /// Policy name (see `tierkit list`). Default: autonuma.
        #[arg(long)]
        policy: Option<String>,
        /// Machine preset: cxl, cxl-lowbw, optane. Default: cxl.
        #[arg(long)]
        machine: Option<String>,
        /// Fast-tier size: FAST:SLOW ratio of the footprint (1:8), a multiple of it (1.42x) or a size (512MiB).
        #[arg(long, allow_hyphen_values = true)]
        ratio: Option<String>,
        /// TOML run configuration; flags and --set override it.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Override any configuration key, e.g. --set workload.hot_fraction=0.2.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Seed. Default: 42.
        #[arg(long)]
        seed: Option<u64>,
        /// Write summary.json, timeseries.csv and config.toml here.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Overwrite earlier results in --out.
        #[arg(long)]
        force: bool,
    },
    /// Run every chosen policy on the same workloads, side by side, and write a report.
    Compare {
        /// A built-in suite: quick (default), default, chrono, memtis, freqtier, multiclock, pet.
        #[arg(long)]
        suite: Option<String>,
        /// A TOML matrix (policies, workloads, ratios, machines, machine_ratios, seed, set, policy_set; docs/compare.md).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Policies, comma separated (`*` for every registered one).
        #[arg(long, value_delimiter = ',')]
        policies: Option<Vec<String>>,
        /// Workloads, comma separated: labels the results show (ycsb-c, mix-5min: that entry)
        /// or workload names (every entry of that workload).
        #[arg(long, value_delimiter = ',')]
        workloads: Option<Vec<String>>,
        /// Fast:slow ratios (or multiples of the footprint like 1.42x, or sizes), comma separated.
        #[arg(long, value_delimiter = ',')]
        ratios: Option<Vec<String>>,
        /// Machine presets, comma separated.
        #[arg(long, value_delimiter = ',')]
        machine: Option<Vec<String>>,
        /// Override any run setting in every run, e.g. --set sim.policy_time_scale=10.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Seed of every run.
        #[arg(long)]
        seed: Option<u64>,
        /// Runs at once (default: the number of cores).
        #[arg(long)]
        jobs: Option<usize>,
        /// Output directory; rerunning into it reuses finished runs.
        #[arg(long, default_value = "tierkit-compare")]
        out: PathBuf,
        /// Write into --out even if it holds files tierkit compare did not write.
        #[arg(long)]
        force: bool,
        /// Run the matrix exactly and at each of --rates, and report per policy how far
        /// sampled simulation moves slowdown, fast-access ratio, F1 and promotions
        /// (docs/sampling.md).
        #[arg(long)]
        validate_sampling: bool,
        /// Sample rates for --validate-sampling, comma separated.
        #[arg(long, value_delimiter = ',', default_value = "1/8,1/64,1/256")]
        rates: Vec<String>,
        /// Run the matrix once per seed (comma separated, at least two) and report per
        /// cell and policy how far the slowdown and the policy's rank move with the seed
        /// alone (docs/compare.md, "Seeds").
        #[arg(long, value_delimiter = ',', conflicts_with_all = ["seed", "validate_sampling"])]
        seeds: Vec<u64>,
        /// Where the runs execute: `local` (this machine's cores) or `ray` (one task
        /// per run on a Ray cluster, through the Python package; docs/python.md).
        #[arg(long, default_value = "local", value_parser = ["local", "ray"])]
        executor: String,
        /// The Ray cluster's address (HOST:PORT) for --executor ray; default: the one
        /// `ray.init()` finds.
        #[arg(long)]
        address: Option<String>,
    },
    /// Rerun the five papers' claims as experiments and judge each: reproduced, partly,
    /// not reproduced, or cannot be tested (claim files in crates/cli/claims/).
    Claims {
        /// Papers, comma separated: chrono, memtis, freqtier, multiclock, pet. Default: all.
        #[arg(long, value_delimiter = ',')]
        paper: Vec<String>,
        /// Output directory (one compare directory per matrix, claims.md, claims.json);
        /// rerunning into it reuses finished runs.
        #[arg(long, default_value = "tierkit-claims")]
        out: PathBuf,
        /// Runs at once (default: the number of cores).
        #[arg(long)]
        jobs: Option<usize>,
        /// Cut every run to a few hundred thousand accesses: checks that every claim's
        /// matrix runs and is judged, not the claims.
        #[arg(long)]
        smoke: bool,
        /// Write claims.md into this docs directory and each paper's table into its
        /// page under policies/ (between the claims markers). With --paper, only those
        /// papers' rows and sections of the existing claims.md are replaced.
        #[arg(long)]
        write_docs: Option<PathBuf>,
        /// Write into --out even if it holds files tierkit claims did not write.
        #[arg(long)]
        force: bool,
        /// Claim ids, comma separated (`tierkit claims` lists them in claims.md): judge
        /// only these, running only the cells and policies they compare.
        #[arg(long, value_delimiter = ',')]
        claim: Vec<String>,
        /// Judge the claims once per seed (comma separated, at least two), each seed in
        /// OUT/seed-N, and write claims-seeds.md: each claim's verdict and gain by seed
        /// and the cells whose direction moves with the seed.
        #[arg(long, value_delimiter = ',')]
        seeds: Vec<u64>,
    },
    /// List policies, workloads, machines and suites (a section in full with its name).
    List {
        /// One section with every parameter and default: policies, workloads,
        /// machines or suites. Default: a short index of all of them.
        section: Option<list::Section>,
    },
    /// Record, import or capture access traces, or inspect one (see docs/traces.md).
    #[command(subcommand)]
    Trace(tierkit::trace_cmd::TraceCommand),
    /// What this machine offers live tiering (NUMA nodes, tiers, DAMON, perf,
    /// privileges) and which policies can run live.
    Doctor {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Start COMMAND and tier its pages live with a policy until it exits.
    Run {
        #[command(flatten)]
        live: tierkit::live_cmd::LiveArgs,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Tier the pages of running processes live with a policy.
    Attach {
        /// Process id of the target, or several separated by commas (they share the
        /// fast budget as the policy decides).
        #[arg(
            long,
            allow_hyphen_values = true,
            required_unless_present = "cgroup",
            conflicts_with = "cgroup"
        )]
        pid: Option<String>,
        /// A cgroup v2 directory (or a name under /sys/fs/cgroup): tier its processes
        /// and its descendants', following them as they join and leave.
        #[arg(long)]
        cgroup: Option<std::path::PathBuf>,
        #[command(flatten)]
        live: tierkit::live_cmd::LiveArgs,
    },
    /// Measure simulated accesses per wall-clock second (median of --reps runs), and
    /// each as a fraction of this host's random read-modify-write rate over the same
    /// working set, measured in the same run.
    Bench {
        /// Runs per case.
        #[arg(long, default_value_t = 5)]
        reps: usize,
        /// Accesses per run.
        #[arg(long, default_value_t = 40_000_000)]
        accesses: u64,
    },
}

fn main() {
    if let Err(e) = real_main() {
        eprintln!("error: {}", format!("{e:#}").replace('\n', " "));
        std::process::exit(2);
    }
}

fn real_main() -> Result<()> {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version
        Err(e) => {
            // clap's message without its usage block, so every error is one line; a
            // message that lists what is missing on the lines below keeps the list.
            let text = e.render().to_string();
            let msg: Vec<&str> = text
                .lines()
                .take_while(|l| !l.trim().is_empty())
                .map(str::trim)
                .collect();
            let msg = msg.join(" ");
            let msg = msg.trim_start_matches("error: ");
            let msg = if msg.is_empty() {
                "invalid arguments"
            } else {
                msg
            };
            anyhow::bail!("{msg} (see `tierkit --help`)");
        }
    };
    match cli.command {
        Command::Sim {
            workload,
            policy,
            machine,
            ratio,
            config,
            sets,
            seed,
            out,
            force,
        } => {
            let config_file = match config {
                Some(p) => Some((
                    p.display().to_string(),
                    std::fs::read_to_string(&p)
                        .with_context(|| format!("cannot read config file {}", p.display()))?,
                )),
                None => None,
            };
            let args = RunArgs {
                config_file,
                workload,
                policy,
                machine,
                fast: ratio,
                seed,
                sets,
            };
            let cfg = run_config::build(&args)?;
            if let Some(dir) = &out {
                run::check_out_dir(dir, force)?;
            }
            let start = Instant::now();
            let result = run::simulate(&cfg, std::io::stderr().is_terminal())?;
            print!("{}", run::table(&result, start.elapsed()));
            if let Some(dir) = &out {
                run::write_files(dir, &cfg, &result)?;
                println!("  results in {}", dir.display());
            }
        }
        Command::Claims {
            paper,
            out,
            jobs,
            smoke,
            write_docs,
            force,
            claim,
            seeds,
        } => {
            let args = claims::ClaimsArgs {
                force,
                papers: paper,
                claims: claim,
                out,
                smoke,
                jobs: jobs
                    .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
                write_docs,
                seeds,
                seed: None,
            };
            if args.seeds.is_empty() {
                let (_, summary) = claims::run(&args)?;
                print!("{summary}");
                println!("claims: {}", args.out.join("claims.md").display());
            } else {
                let (_, md) = claims::seeds::run_seeds(&args)?;
                print!("{md}");
                println!("claims: {}", args.out.join("claims-seeds.md").display());
            }
        }
        Command::Compare {
            suite,
            config,
            policies,
            workloads,
            ratios,
            machine,
            sets,
            seed,
            jobs,
            out,
            force,
            validate_sampling,
            rates,
            seeds,
            executor,
            address,
        } => {
            if executor == "ray" {
                if validate_sampling {
                    bail!("--validate-sampling runs locally only; drop --executor ray");
                }
                if !seeds.is_empty() {
                    bail!("--seeds runs locally only; drop --executor ray");
                }
                let kwargs = serde_json::json!({
                    "matrix": config.as_ref().map(|p| p.display().to_string()).or(suite),
                    "policies": policies, "workloads": workloads, "ratios": ratios,
                    "machines": machine, "seed": seed, "sets": sets, "jobs": jobs,
                    "out": out, "force": force, "address": address,
                });
                std::process::exit(tierkit::compare::ray::delegate(&kwargs)?);
            }
            let config = match config {
                Some(p) => Some((
                    p.display().to_string(),
                    std::fs::read_to_string(&p)
                        .with_context(|| format!("cannot read compare config {}", p.display()))?,
                )),
                None => None,
            };
            let args = compare::CompareArgs {
                suite,
                config,
                policies,
                workloads,
                ratios,
                machines: machine,
                seed,
                sets,
                jobs: jobs
                    .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
                out,
                force,
                progress: std::io::stderr().is_terminal(),
                only_finished: false,
                recording_budget: None,
            };
            if validate_sampling {
                let (_, table) = compare::validate::validate_sampling(&args, &rates)?;
                print!("{table}");
                println!("tables: {}", args.out.join("sampling.md").display());
            } else if !seeds.is_empty() {
                let (_, table) = compare::seeds::sweep_seeds(&args, &seeds)?;
                print!("{table}");
                println!("tables: {}", args.out.join("seeds.md").display());
            } else {
                let (board, report) = compare::compare(&args)?;
                print!("{board}");
                println!("report: {}", report.display());
            }
        }
        Command::List { section } => match section {
            Some(sec) => print!("{}", list::section(sec)),
            None => print!("{}", list::index()),
        },
        Command::Doctor { json } => std::process::exit(tierkit::live_cmd::doctor(json)),
        Command::Run { live, command } => {
            std::process::exit(tierkit::live_cmd::run(&command, &live))
        }
        Command::Attach { pid, cgroup, live } => std::process::exit(tierkit::live_cmd::attach(
            pid.as_deref(),
            cgroup.as_deref(),
            &live,
        )),
        Command::Trace(cmd) => tierkit::trace_cmd::run(cmd)?,
        Command::Bench { reps, accesses } => {
            bench::run(reps, accesses)?;
        }
    }
    Ok(())
}
