//! `perf script` output of samples that carry a data address.
//!
//! Record with an event that samples data addresses — `perf mem record`,
//! `perf record -e cpu/mem-loads,ldlat=30/P -e cpu/mem-stores/P -d`, or, on any
//! machine, `perf record -e page-faults -c 1 -d` — and print with
//!
//! ```text
//! perf script -F comm,pid,tid,time,event,addr
//! ```
//!
//! (`period`, `cpu`, and fields after `addr` such as `ip,sym,dso,data_src` may be
//! added; `-F pid,tid,time,addr` also works). Each line is parsed as
//!
//! ```text
//! [COMM...] PID/TID [[CPU]] SECONDS.FRACTION: [PERIOD] [EVENT:] ADDR [anything...]
//!   ls 27920/27920  4331.539549: page-faults:     55cbfa5b25c0 __progname (/usr/bin/ls) ...
//! ```
//!
//! The time token is the first one of the form `DIGITS[.DIGITS]:`; the token before
//! it (after skipping a `[CPU]` token) is `PID/TID` (or just `PID`), and the tokens
//! before that are the command name. After the time come an optional decimal period
//! and an optional event name ending in `:`, then the data address in hexadecimal.
//! If you print `period`, print `event` too, or the period would be taken for the
//! address. Blank lines and `#` lines are skipped.
//!
//! Each sample becomes one access: a write if the event name contains `store` or
//! the rest of the line contains `OP STORE` (from `data_src`), else a read. Its
//! compute gap is the time since the thread's previous sample (the first sample of
//! a thread: since the first sample in the file), so the trace keeps the real
//! timing but only the sampled accesses — it is as sparse as the sampling period.
//! Samples without a user-space data address (address 0, or kernel addresses at or
//! above 2^56) are skipped and counted. Every PID becomes a process (named after
//! its first COMM) and every TID one of its threads. Mappings are synthesized.

use std::collections::BTreeMap;
use std::io::{BufRead, Seek, Write};

use super::{line_error, parse_hex, quote, Lines, Sink, MAX_ADDRESS};
use crate::trace::TraceError;

const WHAT: &str = "perf";

/// One parsed sample line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Sample {
    comm: String,
    pid: u64,
    tid: u64,
    time_ns: u64,
    write: bool,
    addr: u64,
}

/// Parse `input` into `sink`.
pub(crate) fn convert<R: BufRead, W: Write + Seek>(
    input: R,
    sink: &mut Sink<W>,
) -> Result<(), TraceError> {
    let mut lines = Lines::new(input, WHAT);
    let mut first_time: Option<u64> = None;
    let mut last: BTreeMap<(u32, u32), u64> = BTreeMap::new();
    while let Some((n, line)) = lines.next_line()? {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let s = parse_line(trimmed).map_err(|why| line_error(WHAT, n, &why))?;
        let t0 = *first_time.get_or_insert(s.time_ns);
        if s.addr == 0 || s.addr >= MAX_ADDRESS {
            sink.stats.skipped += 1;
            continue;
        }
        let comm = s.comm.clone();
        let pid = s.pid;
        let (p, t) = sink.thread(s.pid, s.tid, || {
            if comm.is_empty() {
                format!("pid {pid}")
            } else {
                comm
            }
        });
        let prev = last.insert((p, t), s.time_ns).unwrap_or(t0);
        // Out-of-order samples (perf script sorts by time, but per-CPU buffers can
        // disagree by a little) get no gap.
        let ns = s.time_ns.saturating_sub(prev);
        let gap = if ns > u32::MAX as u64 {
            sink.stats.gaps_clamped += 1;
            u32::MAX
        } else {
            ns as u32
        };
        sink.access(p, t, s.addr, s.write, gap)?;
    }
    sink.stats.lines = lines.count();
    Ok(())
}

/// `SECONDS[.FRACTION]:` in nanoseconds.
fn parse_time(tok: &str) -> Option<u64> {
    let t = tok.strip_suffix(':')?;
    let (secs, frac) = t.split_once('.').unwrap_or((t, ""));
    if secs.is_empty()
        || !secs.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let secs: u64 = secs.parse().ok()?;
    let mut frac_ns = 0u64;
    for (i, b) in frac.bytes().take(9).enumerate() {
        frac_ns += (b - b'0') as u64 * 10u64.pow(8 - i as u32);
    }
    secs.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}

fn parse_pid_tid(tok: &str) -> Option<(u64, u64)> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match tok.split_once('/') {
        Some((p, t)) if digits(p) && digits(t) => Some((p.parse().ok()?, t.parse().ok()?)),
        None if digits(tok) => {
            let p = tok.parse().ok()?;
            Some((p, p))
        }
        _ => None,
    }
}

fn parse_line(line: &str) -> Result<Sample, String> {
    let expected = || {
        format!(
            "expected `[COMM] PID/TID [CPU] SECONDS: [PERIOD] [EVENT:] HEX-ADDR ...` (perf script -F comm,pid,tid,time,event,addr), got {}",
            quote(line)
        )
    };
    let toks: Vec<&str> = line.split_whitespace().collect();
    let k = toks
        .iter()
        .position(|t| parse_time(t).is_some())
        .ok_or_else(expected)?;
    let time_ns = parse_time(toks[k]).expect("matched above");
    let mut j = k.checked_sub(1).ok_or_else(expected)?;
    if toks[j].starts_with('[') && toks[j].ends_with(']') {
        j = j.checked_sub(1).ok_or_else(expected)?;
    }
    let (pid, tid) = parse_pid_tid(toks[j]).ok_or_else(expected)?;
    let comm = toks[..j].join(" ");
    let mut i = k + 1;
    let mut event = "";
    if toks.get(i).is_some_and(|t| t.ends_with(':')) {
        event = toks[i];
        i += 1;
    } else if toks
        .get(i)
        .is_some_and(|t| t.bytes().all(|b| b.is_ascii_digit()))
        && toks.get(i + 1).is_some_and(|t| t.ends_with(':'))
    {
        event = toks[i + 1];
        i += 2;
    }
    let a = toks.get(i).ok_or_else(expected)?;
    let addr = parse_hex(a).ok_or_else(|| {
        format!(
            "data address `{}` is not hexadecimal ({})",
            a.escape_debug(),
            expected()
        )
    })?;
    // The remainder of the line, for `data_src`'s "|OP STORE|".
    let write = event.to_ascii_lowercase().contains("store")
        || toks[i + 1..].join(" ").contains("OP STORE");
    Ok(Sample {
        comm,
        pid,
        tid,
        time_ns,
        write,
        addr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{accesses, drain};
    use crate::trace::import::{import, ImportFormat, ImportOptions, ImportStats};
    use crate::trace::TraceWorkload;
    use proptest::prelude::*;
    use std::io::Cursor;
    use tierkit_core::Workload;

    fn run(input: &[u8]) -> Result<(Vec<u8>, ImportStats), String> {
        import(
            ImportFormat::Perf,
            input,
            Cursor::new(Vec::new()),
            &ImportOptions::default(),
        )
        .map(|(c, s)| (c.into_inner(), s))
        .map_err(|e| e.to_string())
    }

    #[test]
    fn field_layouts_parse() {
        let s = parse_line(
            "ls 27920/27920  4331.539549: page-faults:     55cbfa5b25c0 __progname (/usr/bin/ls)",
        )
        .unwrap();
        assert_eq!(
            (s.comm.as_str(), s.pid, s.tid, s.time_ns, s.write, s.addr),
            (
                "ls",
                27920,
                27920,
                4_331_539_549_000,
                false,
                0x55cb_fa5b_25c0
            )
        );
        let s = parse_line("27920/27921  4331.5: 7ffd00001000").unwrap();
        assert_eq!(
            (s.comm.as_str(), s.tid, s.time_ns, s.addr),
            ("", 27921, 4_331_500_000_000, 0x7ffd_0000_1000)
        );
        let s = parse_line("my prog 12 [003] 1.000000001:      30 cpu/mem-stores/P:  7f00deadbe00")
            .unwrap();
        assert_eq!(
            (s.comm.as_str(), s.pid, s.time_ns, s.write, s.addr),
            ("my prog", 12, 1_000_000_001, true, 0x7f00_dead_be00)
        );
        let s =
            parse_line("a 1/2 3.0: cpu/mem-loads,ldlat=30/P: 1000 |OP STORE|LVL L1 hit").unwrap();
        assert!(s.write);
    }

    #[test]
    fn sample_file_imports_threads_processes_and_gaps() {
        let sample = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/data/perf-script.txt"
        ))
        .unwrap();
        let (bytes, stats) = run(&sample).unwrap();
        let text = std::str::from_utf8(&sample).unwrap();
        let samples = text
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .count() as u64;
        assert_eq!(stats.trace.accesses + stats.skipped, samples);
        let mut w = TraceWorkload::from_reader(Cursor::new(bytes.clone()), "perf", 1.0).unwrap();
        let shape = w.shape();
        // The sample holds a two-thread program and a second process.
        assert_eq!(shape.processes.len(), 2, "{shape:?}");
        assert_eq!(shape.processes[0].nr_threads, 2);
        let d = drain(&mut w);
        let first: Vec<_> = accesses(&d.streams[0][0]).collect();
        assert_eq!(first[0].2, 0, "the first sample of the file has no gap");
        // Gaps add up to the sample times: the last sample of thread 0 lies at its
        // time minus the file's first time.
        let total: u64 = first.iter().map(|a| a.2 as u64).sum();
        assert!(total > 0);
        // Page-fault samples carry no load/store information: all reads.
        assert!(d
            .streams
            .iter()
            .flatten()
            .flatten()
            .all(|op| matches!(op, tierkit_core::Op::Access { write: false, .. })));
        // Two processes share addresses after fork: check each address space alone.
        assert_eq!(
            crate::trace::import::check::replay_is_consistent(&bytes),
            stats.trace.accesses
        );
    }

    #[test]
    fn perf_mem_sample_keeps_stores_gaps_and_skips_kernel_addresses() {
        let sample = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/data/perf-mem.txt"
        ))
        .unwrap();
        let (bytes, stats) = run(&sample).unwrap();
        assert_eq!(stats.skipped, 2, "one kernel and one zero data address");
        let mut w =
            TraceWorkload::from_reader(Cursor::new(bytes.clone()), "perf-mem", 1.0).unwrap();
        assert_eq!(w.shape().processes[0].name, "stream");
        assert_eq!(w.shape().processes[0].nr_threads, 2);
        let d = drain(&mut w);
        let t0: Vec<_> = accesses(&d.streams[0][0]).collect();
        let t1: Vec<_> = accesses(&d.streams[0][1]).collect();
        assert_eq!((t0.len(), t1.len()), (11, 7));
        // Thread 0: 8812.345678 load, 8812.345702 load (24 µs later), then a store.
        assert_eq!(t0[0], (0x7f1c_2a40_0040, false, 0));
        assert_eq!(t0[1], (0x7f1c_2a40_00c0, false, 24_000));
        assert_eq!(t0[2], (0x7f1c_2a80_0040, true, 29_000));
        // Thread 1's first sample comes 55 µs after the file's first.
        assert_eq!(t1[0], (0x7f1c_2a5f_0000, false, 55_000));
        assert_eq!(t1.iter().filter(|a| a.1).count(), 2);
        crate::testutil::check_imported_structure(&w, &d);
        assert_eq!(
            crate::trace::import::check::replay_is_consistent(&bytes),
            18
        );
    }

    #[test]
    fn zero_and_kernel_addresses_are_skipped() {
        let (_, stats) =
            run(b"p 1/1 1.0: e: 0\np 1/1 1.1: e: ffffffff81000000\np 1/1 1.2: e: 1000\n").unwrap();
        assert_eq!(stats.skipped, 2);
        assert_eq!(stats.trace.accesses, 1);
    }

    #[test]
    fn malformed_lines_are_named() {
        for (input, needle) in [
            (
                &b"p 1/1 1.0: e: 1000\ngarbage here\n"[..],
                "perf input line 2: expected",
            ),
            (b"p 1/1 1.0: e: zz\n", "line 1: data address `zz`"),
            (b"1.0: e: 1000\n", "line 1: expected"),
            (b"p x/1 1.0: e: 1000\n", "line 1: expected"),
            (b"p 1/1 1.0: e:\n", "line 1: expected"),
            (b"# only a header\n", "no memory accesses"),
        ] {
            let e = run(input).unwrap_err();
            assert!(e.contains(needle), "{e:?} should contain {needle:?}");
        }
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(input in prop::collection::vec(any::<u8>(), 0..512)) {
            let _ = run(&input);
        }

        #[test]
        fn random_plausible_lines_never_panic(
            lines in prop::collection::vec(
                ("[a-z ]{0,6}", "[0-9]{0,21}(/[0-9]{0,21})?", "( \\[[0-9]{1,3}\\])?", "[0-9]{0,21}(\\.[0-9]{0,12})?:?", "( [0-9]{1,4})?( [a-z/-]{1,12}:)?", " [0-9a-fx]{0,18}"),
                0..30,
            )
        ) {
            let text: String = lines
                .iter()
                .map(|(a, b, c, d, e, f)| format!("{a} {b}{c} {d}{e}{f}\n"))
                .collect();
            let _ = run(text.as_bytes());
        }
    }
}
