//! `tierkit trace`: make and inspect native traces (format: `docs/traces.md`).
//!
//! - `record` runs a generated workload and stores every operation it produces;
//!   `tierkit sim --workload trace:FILE` replays it with identical results.
//! - `import` converts Valgrind lackey, `perf script`, damo and plain-text traces.
//! - `capture` runs a program under Valgrind lackey (with its system calls traced,
//!   so mmap/munmap/brk are replayed where they happened) and converts the result.
//! - `info` prints a trace's header and checks every chunk.

use std::ffi::OsStr;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use clap::Subcommand;
use tierkit_workloads::trace::import::{import, ImportFormat, ImportOptions, ImportStats};
use tierkit_workloads::trace::{self, TraceStats};

use crate::output;
use crate::run_config::{self, RunArgs};

/// The `tierkit trace` subcommands.
#[derive(Debug, Subcommand)]
pub enum TraceCommand {
    /// Record a generated workload into a native trace (replay it with --workload trace:FILE).
    Record {
        /// Workload name (see `tierkit list`).
        #[arg(long)]
        workload: String,
        /// Override a workload parameter, e.g. --set workload.scale=0.1.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Seed of the generator. Default: 42, as `tierkit sim`.
        #[arg(long)]
        seed: Option<u64>,
        /// The trace file to write.
        #[arg(long)]
        out: PathBuf,
        /// Overwrite --out if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Convert a trace of another tool into a native trace.
    Import {
        /// Input format: lackey, perf, damo or text.
        #[arg(long)]
        format: String,
        /// The input file.
        input: PathBuf,
        /// The trace file to write.
        #[arg(long)]
        out: PathBuf,
        /// Overwrite --out if it exists.
        #[arg(long)]
        force: bool,
        /// Memory-level parallelism of the imported processes, in [1, 64]. Default 1.
        #[arg(long)]
        mlp: Option<f64>,
        /// lackey: compute ns per executed instruction between data accesses. Default 0.3.
        #[arg(long)]
        ns_per_instruction: Option<f64>,
        /// damo: accesses per page per sampling interval it was seen accessed. Default 1.
        #[arg(long)]
        damo_accesses_per_sample: Option<f64>,
        /// damo: do not write every monitored page once before replaying.
        #[arg(long)]
        damo_no_init_touch: bool,
    },
    /// Run a program under Valgrind lackey and turn its memory accesses into a native trace.
    Capture {
        /// The trace file to write.
        #[arg(long)]
        out: PathBuf,
        /// Overwrite --out (and --keep-log) if they exist.
        #[arg(long)]
        force: bool,
        /// Memory-level parallelism of the program, in [1, 64]. Default 1.
        #[arg(long)]
        mlp: Option<f64>,
        /// Compute ns per executed instruction between data accesses. Default 0.3.
        #[arg(long)]
        ns_per_instruction: Option<f64>,
        /// Keep Valgrind's log (the raw lackey trace) at this path.
        #[arg(long)]
        keep_log: Option<PathBuf>,
        /// The program and its arguments, after `--`.
        #[arg(last = true, required = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Print a native trace's header and check every chunk.
    Info {
        /// The trace file.
        file: PathBuf,
    },
}

/// Run a `tierkit trace` subcommand, printing a summary on stdout.
pub fn run(cmd: TraceCommand) -> Result<()> {
    match cmd {
        TraceCommand::Record {
            workload,
            sets,
            seed,
            out,
            force,
        } => {
            output::check_target(&out, &[], force)?;
            let start = Instant::now();
            let stats = record(&workload, &sets, seed, &out)?;
            println!("{}", summary_line(&out, &stats, start));
        }
        TraceCommand::Import {
            format,
            input,
            out,
            force,
            mlp,
            ns_per_instruction,
            damo_accesses_per_sample,
            damo_no_init_touch,
        } => {
            output::check_target(&out, &[&input], force)?;
            let format: ImportFormat = format.parse().map_err(|e: String| anyhow!(e))?;
            let mut opts = options(mlp, ns_per_instruction);
            if let Some(d) = damo_accesses_per_sample {
                opts.damo_accesses_per_sample = d;
            }
            opts.damo_init_touch = !damo_no_init_touch;
            opts.description = format!("imported from {} file {}", format.name(), input.display());
            let start = Instant::now();
            let stats = import_file(format, &input, &out, &opts)?;
            println!("{}", import_line(&out, &stats, start));
        }
        TraceCommand::Capture {
            out,
            force,
            mlp,
            ns_per_instruction,
            keep_log,
            command,
        } => {
            let valgrind =
                std::env::var_os("TIERKIT_VALGRIND").unwrap_or_else(|| "valgrind".into());
            output::check_target(&out, &[], force)?;
            if let Some(log) = &keep_log {
                output::check_target(log, &[&out], force)?;
            }
            let opts = options(mlp, ns_per_instruction);
            let start = Instant::now();
            let stats = capture(&valgrind, &command, &out, keep_log.as_deref(), opts)?;
            println!("{}", import_line(&out, &stats, start));
        }
        TraceCommand::Info { file } => print!("{}", info(&file)?),
    }
    Ok(())
}

fn options(mlp: Option<f64>, ns_per_instruction: Option<f64>) -> ImportOptions {
    let mut o = ImportOptions::default();
    if let Some(m) = mlp {
        o.mlp = m;
    }
    if let Some(n) = ns_per_instruction {
        o.ns_per_instruction = n;
    }
    o
}

/// Record workload `name` (with `--set` overrides and `seed`) into `out`, atomically
/// (see [`output::write_atomically`]).
pub fn record(name: &str, sets: &[String], seed: Option<u64>, out: &Path) -> Result<TraceStats> {
    let cfg = run_config::build(&RunArgs {
        workload: Some(name.to_string()),
        seed,
        sets: sets.to_vec(),
        ..RunArgs::default()
    })?;
    let mut w = cfg.workload.build(cfg.seed);
    let description = format!(
        "recorded from workload {} with seed {}: {}",
        cfg.workload.name(),
        cfg.seed,
        serde_json::to_string(&cfg.workload).unwrap_or_default()
    );
    output::write_atomically(out, |f| {
        trace::record(w.as_mut(), f, &description)
            .map(|(_, s)| s)
            .map_err(|e| anyhow!(e))
    })
}

/// Import `input` (in `format`) into `out`, atomically: on failure `out` is left as it
/// was (see [`output::write_atomically`]).
pub fn import_file(
    format: ImportFormat,
    input: &Path,
    out: &Path,
    opts: &ImportOptions,
) -> Result<ImportStats> {
    let f = File::open(input).with_context(|| format!("cannot open {}", input.display()))?;
    let reader = BufReader::with_capacity(1 << 20, f);
    output::write_atomically(out, |o| {
        import(format, reader, o, opts)
            .map(|(_, s)| s)
            .map_err(|e| anyhow!("{}: {e}", input.display()))
    })
}

/// Run `command` under `valgrind` (lackey, memory and syscall tracing) and convert
/// its log into the trace `out`. The log is kept at `keep_log` if given.
pub fn capture(
    valgrind: &OsStr,
    command: &[String],
    out: &Path,
    keep_log: Option<&Path>,
    mut opts: ImportOptions,
) -> Result<ImportStats> {
    if command.is_empty() {
        bail!("trace capture needs a command after `--`, e.g. tierkit trace capture --out t.tktrace -- ./prog");
    }
    match Command::new(valgrind).arg("--version").output() {
        Ok(o) if o.status.success() => {}
        Ok(o) => bail!(
            "`{} --version` failed ({}); tierkit trace capture needs a working Valgrind",
            valgrind.to_string_lossy(),
            o.status
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "valgrind is not installed (`{}` not found); tierkit trace capture runs the program under Valgrind lackey: install it (e.g. `apt-get install valgrind`), or record with perf and use `tierkit trace import --format perf`",
            valgrind.to_string_lossy()
        ),
        Err(e) => bail!("cannot run `{}`: {e}", valgrind.to_string_lossy()),
    }
    let log = match keep_log {
        Some(p) => p.to_path_buf(),
        None => std::env::temp_dir().join(format!(
            "tierkit-capture-{}-{}.lackey",
            std::process::id(),
            out.file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_default()
        )),
    };
    let status = Command::new(valgrind)
        .arg("--tool=lackey")
        .arg("--trace-mem=yes")
        .arg("--trace-syscalls=yes")
        .arg(format!("--log-file={}", log.display()))
        .arg("--")
        .args(command)
        .status()
        .with_context(|| format!("cannot start `{}`", valgrind.to_string_lossy()))?;
    let cmdline = command.join(" ");
    if !log.exists() {
        bail!("valgrind could not start `{cmdline}` ({status}); see its message above");
    }
    if !status.success() {
        eprintln!("note: `{cmdline}` exited with {status} under valgrind; converting what it did");
    }
    opts.description = format!("captured with valgrind lackey: {cmdline}");
    let result = import_file(ImportFormat::Lackey, &log, out, &opts);
    if keep_log.is_none() {
        let _ = std::fs::remove_file(&log);
    }
    result.map_err(|e| {
        if status.success() {
            e
        } else {
            anyhow!("`{cmdline}` failed under valgrind ({status}) and left no usable trace: {e}")
        }
    })
}

/// A trace's header and totals, after checking every chunk.
pub fn info(file: &Path) -> Result<String> {
    let mut f = File::open(file).with_context(|| format!("cannot open {}", file.display()))?;
    let idx = trace::verify(&mut f).map_err(|e| anyhow!("{}: {e}", file.display()))?;
    let bytes = f.metadata().map(|m| m.len()).unwrap_or(0);
    let h = &idx.header;
    let n = idx.nr_accesses();
    let mut s = format!(
        "{}: tierkit trace version {}, {}\n",
        file.display(),
        idx.version,
        if idx.compressed {
            "zlib chunks"
        } else {
            "raw chunks"
        }
    );
    s += &format!("  description   {}\n", h.description);
    s += &format!(
        "  footprint     {:.1} MiB\n",
        h.shape.footprint_bytes as f64 / (1u64 << 20) as f64
    );
    for (i, p) in h.shape.processes.iter().enumerate() {
        s += &format!(
            "  process {i:<5} {} ({} threads, mlp {})\n",
            p.name, p.nr_threads, p.mlp
        );
    }
    s += &format!(
        "  records       {} ({n} accesses) in {} chunks, {bytes} bytes ({:.2} bytes/access); every chunk checked\n",
        idx.nr_ops(),
        idx.chunks.len(),
        bytes as f64 / n.max(1) as f64
    );
    Ok(s)
}

fn summary_line(out: &Path, s: &TraceStats, start: Instant) -> String {
    let secs = start.elapsed().as_secs_f64();
    format!(
        "wrote {}: {} accesses ({} records) in {} chunks, {} bytes ({:.2} bytes/access), {:.2} s ({:.1} M accesses/s)",
        out.display(),
        s.accesses,
        s.ops,
        s.chunks,
        s.file_bytes,
        s.file_bytes as f64 / s.accesses.max(1) as f64,
        secs,
        s.accesses as f64 / secs.max(1e-9) / 1e6
    )
}

fn import_line(out: &Path, s: &ImportStats, start: Instant) -> String {
    let mut line = summary_line(out, &s.trace, start);
    line += &format!(
        "; {} processes, {} threads, footprint {:.1} MiB; mappings: {} start-up (2 MiB ranges), {} from the input, {} on demand",
        s.processes,
        s.threads,
        s.footprint_bytes as f64 / (1u64 << 20) as f64,
        s.startup_mappings,
        s.input_mappings,
        s.on_demand_mappings
    );
    if s.skipped > 0 {
        line += &format!(
            "; {} samples without a user data address skipped",
            s.skipped
        );
    }
    if s.gaps_clamped > 0 {
        line += &format!("; {} gaps longer than 4.29 s cut", s.gaps_clamped);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("tierkit-trace-cmd-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn missing_valgrind_is_one_clear_line() {
        let d = scratch("novg");
        let e = capture(
            OsStr::new("/nonexistent/valgrind"),
            &["/bin/true".into()],
            &d.join("t"),
            None,
            ImportOptions::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("valgrind is not installed"), "{e}");
        assert!(!e.contains('\n'));
        assert!(!d.join("t").exists());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn trace_shorthand_sets_the_path_and_record_info_round_trip() {
        let d = scratch("short");
        let out = d.join("g.tktrace");
        let stats = record(
            "gups",
            &[
                "workload.footprint_mib=8".into(),
                "workload.nr_updates=1000".into(),
            ],
            Some(3),
            &out,
        )
        .unwrap();
        assert_eq!(stats.accesses, 2048 + 2000);
        let cfg = run_config::build(&RunArgs {
            workload: Some(format!("trace:{}", out.display())),
            ..RunArgs::default()
        })
        .unwrap();
        assert_eq!(cfg.workload.name(), "trace");
        assert!(cfg.to_toml().contains(&out.display().to_string()));
        let text = info(&out).unwrap();
        assert!(
            text.contains("4048 accesses") && text.contains("gups (1 threads"),
            "{text}"
        );
        // A missing trace is a one-line config error naming the field.
        let e = run_config::build(&RunArgs {
            workload: Some("trace:/nonexistent.tktrace".into()),
            ..RunArgs::default()
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("trace.path") && e.contains("/nonexistent.tktrace"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn failed_import_leaves_no_file_and_names_the_line() {
        let d = scratch("bad");
        let input = d.join("in.txt");
        std::fs::write(&input, "R 0x1000\nQ 0x2000\n").unwrap();
        let out = d.join("out.tktrace");
        let e = import_file(ImportFormat::Text, &input, &out, &ImportOptions::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("in.txt: text input line 2"), "{e}");
        assert!(!out.exists());
        let _ = std::fs::remove_dir_all(&d);
    }
}
