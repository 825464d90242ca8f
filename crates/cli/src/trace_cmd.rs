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
use tierkit_workloads::trace::import::lackey::AccessCounter;
use tierkit_workloads::trace::import::{
    import, import_lackey_logs, ImportFormat, ImportOptions, ImportStats,
};
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
        /// lackey: keep the accesses an L1 data cache would serve (dropped by default:
        /// the simulated machine starts below the L1, docs/traces.md).
        #[arg(long)]
        keep_l1_hits: bool,
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
        /// Keep Valgrind's logs (the raw lackey traces, one `PID.lackey` per traced
        /// process) in this new directory.
        #[arg(long, value_name = "DIR")]
        keep_log: Option<PathBuf>,
        /// Stop the program once this many accesses are logged; the trace holds the
        /// first N (an event crossing N kept whole).
        #[arg(long, value_name = "N")]
        max_accesses: Option<u64>,
        /// Trace only the process started, not the programs it execs or forks (a
        /// launcher script's own interpreter, say).
        #[arg(long)]
        no_follow: bool,
        /// Keep the accesses an L1 data cache would serve (dropped by default: the
        /// simulated machine starts below the L1, docs/traces.md).
        #[arg(long)]
        keep_l1_hits: bool,
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
            keep_l1_hits,
        } => {
            output::check_target(&out, &[&input], force)?;
            let format: ImportFormat = format.parse().map_err(|e: String| anyhow!(e))?;
            let mut opts = options(mlp, ns_per_instruction);
            opts.l1_filter = !keep_l1_hits;
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
            max_accesses,
            no_follow,
            keep_l1_hits,
            command,
        } => {
            let valgrind =
                std::env::var_os("TIERKIT_VALGRIND").unwrap_or_else(|| "valgrind".into());
            output::check_target(&out, &[], force)?;
            if let Some(dir) = &keep_log {
                check_log_dir(dir, &out, force)?;
            }
            if max_accesses == Some(0) {
                bail!("--max-accesses must be at least 1");
            }
            let mut opts = options(mlp, ns_per_instruction);
            opts.max_accesses = max_accesses;
            opts.l1_filter = !keep_l1_hits;
            let start = Instant::now();
            let stats = capture(
                &valgrind,
                &command,
                &out,
                &CaptureSettings {
                    keep_log: keep_log.as_deref(),
                    follow: !no_follow,
                },
                opts,
            )?;
            println!("{}", import_line(&out, &stats, start));
            println!("{}", traced_line(&stats));
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

/// How `tierkit trace capture` runs Valgrind.
#[derive(Debug, Clone, Copy, Default)]
pub struct CaptureSettings<'a> {
    /// Keep the logs in this new directory (else a temporary one, removed after).
    pub keep_log: Option<&'a Path>,
    /// Follow execs and forks (`--trace-children=yes`): the program a launcher
    /// script execs is traced, not only the launcher.
    pub follow: bool,
}

/// `--keep-log DIR` must be new (or, with `--force`, an empty directory or a file,
/// which is replaced): a capture never mixes its logs with other files.
fn check_log_dir(dir: &Path, out: &Path, force: bool) -> Result<()> {
    output::check_target(dir, &[out], force)?;
    if dir.is_dir() && std::fs::read_dir(dir).map_or(true, |mut d| d.next().is_some()) {
        bail!(
            "--keep-log {} is a directory that is not empty; name a new directory",
            dir.display()
        );
    }
    Ok(())
}

/// Run `command` under `valgrind` (lackey, memory and syscall tracing, following
/// execs and forks unless told not to) and convert its logs — one per traced
/// process — into the trace `out`, a process per log.
pub fn capture(
    valgrind: &OsStr,
    command: &[String],
    out: &Path,
    settings: &CaptureSettings,
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
    let dir = match settings.keep_log {
        Some(d) => {
            if d.is_file() {
                std::fs::remove_file(d)
                    .with_context(|| format!("cannot replace {}", d.display()))?;
            }
            d.to_path_buf()
        }
        None => {
            let d = std::env::temp_dir().join(format!(
                "tierkit-capture-{}-{}",
                std::process::id(),
                out.file_name()
                    .map(|n| n.to_string_lossy().to_string())
                    .unwrap_or_default()
            ));
            // Ours by name: a leftover of an earlier capture must not join this one.
            let _ = std::fs::remove_dir_all(&d);
            d
        }
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let result = capture_into(valgrind, command, out, settings, &dir, &mut opts);
    if settings.keep_log.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result
}

fn capture_into(
    valgrind: &OsStr,
    command: &[String],
    out: &Path,
    settings: &CaptureSettings,
    dir: &Path,
    opts: &mut ImportOptions,
) -> Result<ImportStats> {
    use std::os::unix::process::CommandExt;
    let mut child = Command::new(valgrind)
        .arg("--tool=lackey")
        .arg("--trace-mem=yes")
        .arg("--trace-syscalls=yes")
        .arg(format!(
            "--trace-children={}",
            if settings.follow { "yes" } else { "no" }
        ))
        // %p: one log per process. An exec keeps the pid, and Valgrind truncates the
        // log when the new program starts, so each log holds the last program its
        // process ran — the one a launcher execs.
        .arg(format!("--log-file={}/%p.lackey", dir.display()))
        .arg("--")
        .args(command)
        // Its own process group, so that --max-accesses stops forked children too.
        .process_group(0)
        .spawn()
        .with_context(|| format!("cannot start `{}`", valgrind.to_string_lossy()))?;
    let cmdline = command.join(" ");
    let mut progress = LogProgress::new(opts.l1_filter);
    let started = Instant::now();
    let mut last_report = Instant::now();
    let mut stopped_at = None;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        progress.update(dir);
        if stopped_at.is_none() && opts.max_accesses.is_some_and(|m| progress.accesses >= m) {
            // SAFETY: kill(2) on the child's process group, which we created.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            stopped_at = Some(progress.accesses);
        }
        if last_report.elapsed().as_secs() >= 10 {
            last_report = Instant::now();
            eprintln!(
                "capturing: {:.1} M accesses logged in {} process(es), {:.0} s (Valgrind lackey runs a program ~100x slower or more; --max-accesses N stops it)",
                progress.accesses as f64 / 1e6,
                progress.logs,
                started.elapsed().as_secs_f64()
            );
        }
    };
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "lackey"))
        .collect();
    // Processes in the order they started (pids grow; wrap-around aside).
    logs.sort_by_key(|p| {
        p.file_stem()
            .and_then(|s| s.to_str())
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(u64::MAX)
    });
    if logs.is_empty() {
        bail!("valgrind could not start `{cmdline}` ({status}); see its message above");
    }
    if let Some(n) = stopped_at {
        eprintln!("note: stopped `{cmdline}` after {n} logged accesses (--max-accesses)");
        for log in &logs {
            cut_partial_line(log)?;
        }
    } else if !status.success() {
        eprintln!("note: `{cmdline}` exited with {status} under valgrind; converting what it did");
    }
    opts.description = format!("captured with valgrind lackey: {cmdline}");
    let mut inputs = Vec::with_capacity(logs.len());
    for log in &logs {
        let f = File::open(log).with_context(|| format!("cannot open {}", log.display()))?;
        inputs.push((
            log.display().to_string(),
            BufReader::with_capacity(1 << 20, f),
        ));
    }
    let result = output::write_atomically(out, |o| {
        import_lackey_logs(inputs, o, opts)
            .map(|(_, s)| s)
            .map_err(|e| anyhow!(e))
    });
    result.map_err(|e| {
        if status.success() || stopped_at.is_some() {
            e
        } else {
            anyhow!("`{cmdline}` failed under valgrind ({status}) and left no usable trace: {e}")
        }
    })
}

/// Accesses logged so far by a running capture, counted from the logs' new bytes as
/// the import will count them (`AccessCounter`: lines split at 64 bytes, a modify as
/// two, L1 hits dropped unless kept), so that `--max-accesses` stops the program once
/// the trace would hold N.
#[derive(Debug)]
struct LogProgress {
    /// Per log: bytes read, the incomplete last line read so far, and its counter.
    logs_seen: std::collections::BTreeMap<PathBuf, (u64, Vec<u8>, AccessCounter)>,
    l1_filter: bool,
    accesses: u64,
    logs: usize,
}

impl LogProgress {
    fn new(l1_filter: bool) -> LogProgress {
        LogProgress {
            logs_seen: Default::default(),
            l1_filter,
            accesses: 0,
            logs: 0,
        }
    }

    fn update(&mut self, dir: &Path) {
        use std::io::{Read, Seek, SeekFrom};
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let path = e.path();
            let l1_filter = self.l1_filter;
            let (offset, carry, counter) = self
                .logs_seen
                .entry(path.clone())
                .or_insert_with(|| (0, Vec::new(), AccessCounter::new(l1_filter)));
            let Ok(mut f) = File::open(&path) else {
                continue;
            };
            let len = f.metadata().map_or(0, |m| m.len());
            if len < *offset {
                // Truncated by an exec: the new program starts its log afresh.
                *offset = 0;
                carry.clear();
                *counter = AccessCounter::new(l1_filter);
            }
            if f.seek(SeekFrom::Start(*offset)).is_err() {
                continue;
            }
            let mut buf = Vec::new();
            if (&mut f).take(len - *offset).read_to_end(&mut buf).is_err() {
                continue;
            }
            *offset += buf.len() as u64;
            carry.extend_from_slice(&buf);
            let complete = carry.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            self.accesses += carry[..complete]
                .split(|&b| b == b'\n')
                .map(|l| std::str::from_utf8(l).map_or(0, |l| counter.line(l)))
                .sum::<u64>();
            carry.drain(..complete);
        }
        self.logs = self.logs_seen.len();
    }
}

/// Drop a log's last line if it was cut mid-way (the program was stopped). Reads
/// only the log's tail: logs run to gigabytes.
fn cut_partial_line(log: &Path) -> Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(log)
        .with_context(|| format!("cannot open {}", log.display()))?;
    let len = f.metadata()?.len();
    let from = len.saturating_sub(1 << 16);
    f.seek(SeekFrom::Start(from))?;
    let mut tail = Vec::new();
    f.read_to_end(&mut tail)
        .with_context(|| format!("cannot read {}", log.display()))?;
    // A lackey line is far shorter than 64 KiB, so the tail holds the last newline
    // unless the log has none at all.
    let keep = from
        + tail
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i as u64 + 1);
    if keep < len {
        f.set_len(keep)
            .with_context(|| format!("cannot cut {}", log.display()))?;
    }
    Ok(())
}

/// What a capture traced: each process's program and its accesses, so that a trace of
/// a launcher rather than the program is seen at once.
fn traced_line(s: &ImportStats) -> String {
    let per: Vec<String> = s
        .process_accesses
        .iter()
        .enumerate()
        .map(|(i, (name, n))| format!("process {i} `{name}` {n} accesses"))
        .collect();
    format!("traced: {}", per.join(", "))
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
        "; {} processes, {} threads, footprint {:.2} MiB (pages touched; tiers are sized from it); mappings: {} start-up (2 MiB ranges), {} from the input, {} on demand",
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
    if s.l1_hits_dropped > 0 {
        line += &format!(
            "; {} L1 hits dropped (--keep-l1-hits keeps them)",
            s.l1_hits_dropped
        );
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
            &CaptureSettings::default(),
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
