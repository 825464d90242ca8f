//! End-to-end checks of traces: a recorded generator replays to identical
//! simulation results, every importer's sample runs through the simulator, a real
//! program is captured under Valgrind and replayed, and bad input gives one line.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::process::Command;

use tierkit_core::{Op, Workload};
use tierkit_policies::PolicyConfig;
use tierkit_sim::testing::{run, small_machine};
use tierkit_sim::SimConfig;
use tierkit_workloads::trace::{record, TraceWorkload};
use tierkit_workloads::{Gups, GupsConfig};

fn tierkit() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tierkit"))
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tierkit-trace-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data")
        .join(name)
}

/// Run the binary, insisting on success; returns stdout.
fn ok(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap();
    assert!(
        o.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// Run the binary, insisting on failure; returns stderr.
fn fails(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap();
    assert!(!o.status.success(), "{cmd:?} should have failed");
    String::from_utf8(o.stderr).unwrap()
}

#[test]
fn recorded_gups_replays_to_identical_summaries_in_the_simulator() {
    let cfg = GupsConfig {
        footprint_mib: 32,
        nr_updates: 300_000,
        nr_threads: 2,
        gap_ns: 5,
        ..GupsConfig::default()
    };
    let (bytes, _) = record(&mut Gups::new(&cfg, 11), Cursor::new(Vec::new()), "test").unwrap();
    let bytes = bytes.into_inner();
    let machine = small_machine(8, 64);
    let sim = SimConfig::default();
    for policy in ["first-touch", "autonuma"] {
        let p = || {
            PolicyConfig::default_for(policy)
                .unwrap()
                .try_build(&Default::default())
                .unwrap()
        };
        let (a, _) = run(&machine, &sim, p(), Box::new(Gups::new(&cfg, 11)));
        let replay = TraceWorkload::from_reader(Cursor::new(bytes.clone()), "gups", 1.0).unwrap();
        let (b, _) = run(&machine, &sim, p(), Box::new(replay));
        assert!(a.summary.accesses > 600_000);
        assert_eq!(
            serde_json::to_string(&a.summary).unwrap(),
            serde_json::to_string(&b.summary).unwrap(),
            "{policy}: replay differs from the generator"
        );
        assert_eq!(a.series.to_csv(), b.series.to_csv(), "{policy}");
    }
}

#[test]
fn cli_record_then_sim_trace_path_matches_the_generator() {
    let d = scratch("cli-record");
    let t = d.join("gups.tktrace");
    let sets = [
        "--set",
        "workload.footprint_mib=32",
        "--set",
        "workload.nr_updates=200000",
    ];
    let out = ok(tierkit()
        .args([
            "trace",
            "record",
            "--workload",
            "gups",
            "--seed",
            "5",
            "--out",
        ])
        .arg(&t)
        .args(sets));
    assert!(out.contains("408192 accesses"), "{out}");
    let run_dir = |name: &str| d.join(name);
    ok(tierkit()
        .args(["sim", "--policy", "autonuma", "--seed", "5", "--out"])
        .arg(run_dir("gen"))
        .args(["--workload", "gups"])
        .args(sets)
        .args(["--set", "policy.scan.scan_delay_ms=1"]));
    ok(tierkit()
        .args(["sim", "--policy", "autonuma", "--seed", "5", "--out"])
        .arg(run_dir("replay"))
        .arg("--workload")
        .arg(format!("trace:{}", t.display()))
        .args(["--set", "policy.scan.scan_delay_ms=1"]));
    let summary = |dir: &str| {
        let text = std::fs::read_to_string(run_dir(dir).join("summary.json")).unwrap();
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v.as_object_mut().unwrap().remove("workload"); // the label: "gups" vs "trace"
        v
    };
    assert_eq!(summary("gen"), summary("replay"));
    for f in ["timeseries.csv", "epochs.csv", "heatmap.csv"] {
        assert_eq!(
            std::fs::read(run_dir("gen").join(f)).unwrap(),
            std::fs::read(run_dir("replay").join(f)).unwrap(),
            "{f}"
        );
    }
    // The written config replays the same trace.
    let toml = std::fs::read_to_string(run_dir("replay").join("config.toml")).unwrap();
    assert!(
        toml.contains("name = \"trace\"") && toml.contains("gups.tktrace"),
        "{toml}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn every_importer_sample_imports_and_simulates() {
    let d = scratch("import");
    // lackey drops L1 hits by default (issue 22): of the sample's 498 accesses, 86
    // miss a 32 KiB L1; --keep-l1-hits keeps all 498.
    for (format, file, extra, min_accesses) in [
        ("lackey", "lackey-true.txt", None, 80),
        ("lackey", "lackey-true.txt", Some("--keep-l1-hits"), 400),
        ("perf", "perf-script.txt", None, 200),
        ("perf", "perf-mem.txt", None, 18),
        ("damo", "damo-record.json", None, 50_000),
        ("text", "sample.txt", None, 14),
    ] {
        let t = d.join(format!("{file}{}.tktrace", extra.unwrap_or("")));
        ok(tierkit()
            .args(["trace", "import", "--format", format])
            .args(extra)
            .arg(data(file))
            .arg("--out")
            .arg(&t));
        let info = ok(tierkit().args(["trace", "info"]).arg(&t));
        assert!(info.contains("every chunk checked"), "{info}");
        // The samples touch a handful of pages, and a trace's footprint is the pages
        // it touches (issue 22): 1:8 of them is no page at all, 1:1 is half.
        let sim = ok(tierkit()
            .args([
                "sim",
                "--policy",
                "autonuma",
                "--ratio",
                "1:1",
                "--workload",
            ])
            .arg(format!("trace:{}", t.display())));
        let n: u64 = sim
            .lines()
            .find_map(|l| l.trim().strip_prefix("accesses"))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no access count in {sim}"));
        assert!(n >= min_accesses, "{file}: {n} accesses");
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bad_input_gives_one_line_naming_the_place() {
    let d = scratch("bad");
    let input = d.join("broken.txt");
    std::fs::write(&input, " L 04001000,8\n L 04001008,8\n L oops\n").unwrap();
    let t = d.join("x.tktrace");
    let e = fails(
        tierkit()
            .args(["trace", "import", "--format", "lackey"])
            .arg(&input)
            .arg("--out")
            .arg(&t),
    );
    assert!(e.contains("lackey input line 3"), "{e}");
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    assert!(!t.exists(), "no partial trace is left");
    let e = fails(
        tierkit()
            .args(["trace", "import", "--format", "pin"])
            .arg(&input)
            .arg("--out")
            .arg(&t),
    );
    assert!(e.contains("unknown trace format `pin`"), "{e}");
    let e = fails(tierkit().args(["trace", "info"]).arg(&input));
    assert!(
        e.contains("byte offset 0") && e.contains("not a tierkit trace"),
        "{e}"
    );
    let e = fails(
        tierkit()
            .args(["sim", "--workload"])
            .arg(format!("trace:{}", input.display())),
    );
    assert!(
        e.contains("trace.path") && e.contains("not a tierkit trace"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A small C program with a known shape: a 1 MiB heap array written line by line,
/// an explicit 1 MiB anonymous mmap written page by page and then unmapped, and a
/// strided read pass over the array.
const PROGRAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

int main(void) {
    size_t n = 1 << 18; /* 1 MiB of ints: glibc serves it with its own mmap */
    int *a = malloc(n * sizeof *a);
    for (size_t i = 0; i < n; i += 16)
        a[i] = (int)i;
    char *m = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return 1;
    for (size_t i = 0; i < (1 << 20); i += 4096)
        m[i] = 1;
    long sum = 0;
    for (size_t i = 0; i < n; i += 16)
        sum += a[(i * 7919) % n];
    munmap(m, 1 << 20);
    free(a);
    if (sum == 42)
        puts("unlikely");
    return 0;
}
"#;

/// Compile [`PROGRAM`] into `dir/prog` with `cc`.
fn compile_program(dir: &Path) -> PathBuf {
    std::fs::write(dir.join("prog.c"), PROGRAM).unwrap();
    let prog = dir.join("prog");
    let cc = Command::new("cc")
        .args(["-O1", "-o"])
        .arg(&prog)
        .arg(dir.join("prog.c"))
        .output()
        .unwrap();
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    prog
}

#[test]
#[cfg_attr(
    tierkit_no_valgrind,
    ignore = "valgrind or cc is not installed (.ci/run installs them)"
)]
fn a_real_program_is_captured_with_its_mappings_and_replayed() {
    assert!(
        have("valgrind") && have("cc"),
        "valgrind and cc were found when the tests were built but not now: cargo clean -p tierkit"
    );
    let d = scratch("capture");
    let prog = compile_program(&d);
    let t = d.join("prog.tktrace");
    let out = ok(tierkit()
        .args(["trace", "capture", "--out"])
        .arg(&t)
        .arg("--")
        .arg(&prog));
    assert!(out.contains("from the input"), "{out}");

    // The explicit mmap: a 1 MiB anonymous Mmap, 256 stores to distinct pages of it,
    // then its Munmap — in that order in the one thread's stream.
    let mut w = TraceWorkload::open(&t, 1.0).unwrap();
    assert_eq!(w.shape().processes[0].name, "prog");
    let mut ops = Vec::new();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        w.fill(0, 0, &mut buf);
        if buf.is_empty() {
            break;
        }
        ops.extend_from_slice(&buf);
    }
    let mib = 1u64 << 20;
    let maps: Vec<(usize, u64)> = ops
        .iter()
        .enumerate()
        .filter_map(|(i, op)| match *op {
            Op::Mmap { addr, len, .. } if len == mib => Some((i, addr)),
            _ => None,
        })
        .collect();
    let found = maps.iter().any(|&(i, base)| {
        let end = ops[i..]
            .iter()
            .position(|op| matches!(*op, Op::Munmap { addr, len } if addr == base && len == mib));
        end.is_some_and(|e| {
            let mut pages: Vec<u64> = ops[i..i + e]
                .iter()
                .filter_map(|op| match *op {
                    Op::Access {
                        addr, write: true, ..
                    } if addr >= base && addr < base + mib => Some((addr - base) / 4096),
                    _ => None,
                })
                .collect();
            pages.sort_unstable();
            pages.dedup();
            pages.len() == 256
        })
    });
    assert!(
        found,
        "no 1 MiB mmap with 256 page writes before its munmap; mmaps at {maps:?}"
    );
    // At least the program's own loops (16 Ki stores, 256 page stores, 16 Ki loads).
    let accesses = ops
        .iter()
        .filter(|op| matches!(op, Op::Access { .. }))
        .count();
    assert!(accesses > 32_000, "{accesses}");

    // And it runs through the simulator.
    let sim = ok(tierkit()
        .args(["sim", "--policy", "first-touch", "--workload"])
        .arg(format!("trace:{}", t.display())));
    assert!(
        sim.contains(&format!("accesses                     {accesses} ")),
        "{sim}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// Issue 16: nothing a user gave is lost. An output that is the input is refused and
/// the input kept; an existing output is refused without --force; a failed import
/// leaves an existing output as it was.
#[test]
fn trace_outputs_never_destroy_a_users_file() {
    let d = scratch("keep");
    let input = d.join("mine.txt");
    std::fs::copy(data("sample.txt"), &input).unwrap();
    let before = std::fs::read(&input).unwrap();
    for format in ["text", "lackey"] {
        let e = fails(
            tierkit()
                .args(["trace", "import", "--format", format])
                .arg(&input)
                .arg("--out")
                .arg(&input)
                .arg("--force"),
        );
        assert!(e.contains("is the input") && e.lines().count() == 1, "{e}");
        assert_eq!(
            std::fs::read(&input).unwrap(),
            before,
            "{format} import kept the input"
        );
    }
    // An existing output: refused without --force, untouched by a failed import.
    let out = d.join("out.tktrace");
    std::fs::write(&out, "precious").unwrap();
    let e = fails(
        tierkit()
            .args(["trace", "import", "--format", "text"])
            .arg(&input)
            .arg("--out")
            .arg(&out),
    );
    assert!(e.contains("already exists") && e.contains("--force"), "{e}");
    let e = fails(
        tierkit()
            .args(["trace", "record", "--workload", "gups", "--out"])
            .arg(&out),
    );
    assert!(e.contains("already exists"), "{e}");
    let bad = d.join("bad.txt");
    std::fs::write(&bad, "this is not a trace\n").unwrap();
    fails(
        tierkit()
            .args(["trace", "import", "--format", "text"])
            .arg(&bad)
            .arg("--out")
            .arg(&out)
            .arg("--force"),
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "precious");
    // With --force a good import replaces it, and nothing partial is left beside it.
    ok(tierkit()
        .args(["trace", "import", "--format", "text"])
        .arg(&input)
        .arg("--out")
        .arg(&out)
        .arg("--force"));
    assert_ne!(std::fs::read(&out).unwrap(), b"precious");
    let names: Vec<String> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.contains("partial")), "{names:?}");
}

/// Issue 16: no input panics. Every single-byte corruption (at a stride over the
/// file) and truncation of a native trace is either refused when the configuration is
/// validated, with a one-line error, or replays through the simulator without a panic
/// (a flip can leave a valid trace with other addresses or gaps).
#[test]
fn corrupted_traces_are_refused_or_replayed_never_a_panic() {
    use tierkit_sim::{RunLabels, Simulation};
    use tierkit_workloads::trace::TraceConfig;
    let d = scratch("fuzz");
    let cfg = GupsConfig {
        footprint_mib: 4,
        nr_updates: 3_000,
        nr_threads: 2,
        ..GupsConfig::default()
    };
    let (cur, _) = record(&mut Gups::new(&cfg, 3), Cursor::new(Vec::new()), "fuzz").unwrap();
    let good = cur.into_inner();
    let mut variants: Vec<Vec<u8>> = Vec::new();
    let stride = (good.len() / 400).max(1);
    for i in (0..good.len()).step_by(stride) {
        for x in [0x01u8, 0x80, 0xff] {
            let mut v = good.clone();
            v[i] ^= x;
            variants.push(v);
        }
    }
    for cut in [0, 7, 24, 100, good.len() / 2, good.len() - 1] {
        variants.push(good[..cut].to_vec());
    }
    let (mut refused, mut replayed) = (0, 0);
    for (k, bytes) in variants.iter().enumerate() {
        let path = d.join(format!("v{k}.tktrace"));
        std::fs::write(&path, bytes).unwrap();
        let tc = TraceConfig {
            path: path.display().to_string(),
            scale: 1.0,
        };
        match tc.validate() {
            Err(e) => {
                assert_eq!(e.to_string().lines().count(), 1, "variant {k}: {e}");
                refused += 1;
            }
            Ok(()) => {
                let outcome = std::panic::catch_unwind(|| {
                    let w = Box::new(TraceWorkload::from_config(&tc));
                    let policy = PolicyConfig::default_for("first-touch")
                        .unwrap()
                        .build(&Default::default());
                    let labels = RunLabels {
                        policy: "first-touch".into(),
                        workload: "trace".into(),
                        seed: 1,
                    };
                    // An error (say an access outside every mapping) is an answer.
                    Simulation::new(
                        &small_machine(2, 16),
                        &SimConfig::default(),
                        policy,
                        w,
                        labels,
                    )
                    .map(|s| s.run(&mut |_| {}).is_ok())
                });
                assert!(outcome.is_ok(), "variant {k} panicked in replay");
                replayed += 1;
            }
        }
        std::fs::remove_file(&path).unwrap();
    }
    assert!(
        refused > 0 && replayed > 0,
        "{refused} refused, {replayed} replayed"
    );
    // And from the command line: one line, no backtrace.
    let mut bad = good.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0xff;
    let path = d.join("bad.tktrace");
    std::fs::write(&path, &bad).unwrap();
    let o = tierkit()
        .args(["sim", "--policy", "first-touch", "--workload"])
        .arg(format!("trace:{}", path.display()))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && !err.contains("panicked"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

/// Issue 21: a launcher script that execs the program (pyenv's `python3`, conda, many
/// distro launchers) is followed, so the trace holds the program the user named, and
/// the summary says which programs were traced with their accesses. A launcher that
/// runs the program as a child gives one process each; `--max-accesses` stops the
/// capture with a trace of exactly the first N accesses.
#[test]
#[cfg_attr(
    tierkit_no_valgrind,
    ignore = "valgrind or cc is not installed (.ci/run installs them)"
)]
fn capture_follows_a_launcher_to_the_program_it_runs() {
    assert!(
        have("valgrind") && have("cc"),
        "valgrind and cc were found when the tests were built but not now: cargo clean -p tierkit"
    );
    let d = scratch("launcher");
    let prog = compile_program(&d);
    let exec_shim = d.join("run-prog");
    std::fs::write(
        &exec_shim,
        format!("#!/bin/sh\nexec {} \"$@\"\n", prog.display()),
    )
    .unwrap();
    let child_shim = d.join("run-prog-twice");
    std::fs::write(
        &child_shim,
        format!("#!/bin/sh\n{0}\n{0}\n", prog.display()),
    )
    .unwrap();
    for s in [&exec_shim, &child_shim] {
        Command::new("chmod").arg("+x").arg(s).status().unwrap();
    }
    let accesses_of = |t: &std::path::Path| -> Vec<(String, u64)> {
        let mut w = TraceWorkload::open(t, 1.0).unwrap();
        let names: Vec<String> = w.shape().processes.iter().map(|p| p.name.clone()).collect();
        let mut buf = Vec::new();
        names
            .into_iter()
            .enumerate()
            .map(|(p, name)| {
                let mut n = 0;
                loop {
                    buf.clear();
                    w.fill(p, 0, &mut buf);
                    if buf.is_empty() {
                        break;
                    }
                    n += buf
                        .iter()
                        .filter(|op| matches!(op, Op::Access { .. }))
                        .count() as u64;
                }
                (name, n)
            })
            .collect()
    };

    let direct = d.join("direct.tktrace");
    ok(tierkit()
        .args(["trace", "capture", "--out"])
        .arg(&direct)
        .arg("--")
        .arg(&prog));
    let direct_n = accesses_of(&direct)[0].1;
    assert!(direct_n > 32_000, "{direct_n}");

    // exec: one process, the program, with the program's accesses (give or take the
    // environment's effect on start-up), not the shell's.
    let via = d.join("via.tktrace");
    let out = ok(tierkit()
        .args(["trace", "capture", "--out"])
        .arg(&via)
        .arg("--")
        .arg(&exec_shim));
    let procs = accesses_of(&via);
    assert_eq!(procs.len(), 1, "{procs:?}");
    assert_eq!(procs[0].0, "prog", "{procs:?}");
    let n = procs[0].1;
    assert!(
        n.abs_diff(direct_n) * 50 < direct_n,
        "{n} vs direct {direct_n}"
    );
    assert!(
        out.contains(&format!("traced: process 0 `prog` {n} accesses")),
        "{out}"
    );

    // Without following, the launcher is all there is — and the line says so.
    let shell = d.join("shell.tktrace");
    let out = ok(tierkit()
        .args(["trace", "capture", "--no-follow", "--out"])
        .arg(&shell)
        .arg("--")
        .arg(&exec_shim));
    assert!(out.contains("traced: process 0 `run-prog`"), "{out}");

    // Children: the shell and the program twice, in the order they started.
    let twice = d.join("twice.tktrace");
    let out = ok(tierkit()
        .args(["trace", "capture", "--out"])
        .arg(&twice)
        .arg("--")
        .arg(&child_shim));
    let procs = accesses_of(&twice);
    let names: Vec<&str> = procs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["run-prog-twice", "prog", "prog"], "{out}");
    assert!(procs[1].1.abs_diff(direct_n) * 50 < direct_n, "{procs:?}");

    // A limit stops the program and keeps the first N accesses (the event reaching N
    // whole: a modify is two accesses, an access crossing cache lines one per line).
    let cut = d.join("cut.tktrace");
    ok(tierkit()
        .args(["trace", "capture", "--max-accesses", "10000", "--out"])
        .arg(&cut)
        .arg("--")
        .arg(&prog));
    let total: u64 = accesses_of(&cut).iter().map(|(_, n)| n).sum();
    assert!((10_000..10_004).contains(&total), "{total}");
    let _ = std::fs::remove_dir_all(&d);
}
