//! Valgrind lackey: `valgrind --tool=lackey --trace-mem=yes [--trace-syscalls=yes]`.
//!
//! Lackey prints one line per guest memory event (Valgrind's
//! `lackey/lk_main.c`, format strings `"I  %08lx,%lu"`, `" L %08lx,%lu"`,
//! `" S %08lx,%lu"`, `" M %08lx,%lu"`):
//!
//! ```text
//! I  0401ab70,3          instruction fetch: address (hex), size (decimal)
//!  L 1fff000758,8        data load
//!  S 1fff000750,8        data store
//!  M 0403e0e8,4          data modify (load then store of the same bytes)
//! ```
//!
//! How each becomes trace records:
//!
//! - `I` lines are not memory accesses of the trace (instruction fetches are served
//!   by the i-cache); each counts as one executed instruction, and the instructions
//!   since the previous data access become its compute gap at
//!   [`ImportOptions::ns_per_instruction`].
//! - `L` is a read and `S` a write of the address; `M` is a read then a write (gap 0).
//!   An access whose bytes cross a 64-byte line touches each line it covers (the
//!   first at the exact address, later ones at their line starts, gap 0).
//! - Lines starting `==PID==`, `--PID--` or `**PID**` are Valgrind's own messages and
//!   are skipped; `==PID== Command: PROG ARGS` names the process after `PROG`'s base
//!   name.
//! - With `--trace-syscalls=yes` Valgrind also prints the guest's system calls, in
//!   order with the accesses: `SYSCALL[PID,TID](NR) sys_NAME ( ARGS ) --> … Success(0xRESULT)`
//!   (or `--> [async] ...` then a later `SYSCALL[PID,TID](NR) ... [async] --> Success(…)`).
//!   Successful `mmap`/`mmap2` (result = address, arg 1 = length, arg 3 flags:
//!   `MAP_ANONYMOUS` 0x20 means anonymous, otherwise file-backed; `PROT_NONE`
//!   reservations, arg 2 = 0, are skipped), `munmap` (args 0
//!   and 1), `brk` (the first result is the heap start; growth maps and shrinking
//!   unmaps the page-rounded difference) and `mremap` (args 0 and 1 unmapped, the
//!   result mapped with arg 2 bytes, anonymous) become mmap/munmap records where they
//!   happened. Other system calls are ignored.
//!
//! Lackey says nothing about threads, so all accesses belong to one thread (a
//! multi-threaded program's accesses are interleaved as Valgrind serialised them).

use std::collections::BTreeMap;
use std::io::{BufRead, Seek, Write};

use tierkit_core::VmaKind;

use super::{line_error, parse_hex, quote, GapClock, ImportOptions, Lines, Sink, MAX_ADDRESS};
use crate::trace::TraceError;

const WHAT: &str = "lackey";
/// Largest access size accepted (lackey reports at most a vector register's width).
const MAX_ACCESS_BYTES: u64 = 4096;
/// `MAP_ANONYMOUS` on Linux (x86, arm, riscv).
const MAP_ANONYMOUS: u64 = 0x20;
const LINE_BYTES: u64 = 64;

/// A memory-management syscall whose result decides what it did.
#[derive(Debug, Clone)]
struct PendingCall {
    name: String,
    args: Vec<u64>,
}

/// State of the conversion: the heap break and calls waiting for their results
/// (async ones by thread; a synchronous one whose ` --> …` result Valgrind printed
/// on a line of its own).
#[derive(Debug, Default)]
struct Syscalls {
    brk: Option<u64>,
    pending: BTreeMap<u64, PendingCall>,
    unfinished: Option<PendingCall>,
}

/// Parse `input` into `sink`.
pub(crate) fn convert<R: BufRead, W: Write + Seek>(
    input: R,
    sink: &mut Sink<W>,
    opts: &ImportOptions,
) -> Result<(), TraceError> {
    convert_process(input, sink, opts, 0)
}

/// Parse one process's log `input` into `sink` as the process keyed `pid` (a log
/// holds one process: Valgrind writes one per traced process).
pub(crate) fn convert_process<R: BufRead, W: Write + Seek>(
    input: R,
    sink: &mut Sink<W>,
    opts: &ImportOptions,
    pid: u64,
) -> Result<(), TraceError> {
    let mut lines = Lines::new(input, WHAT);
    let mut name = String::from("lackey");
    let mut thread: Option<(u32, u32)> = None;
    let mut instructions: u64 = 0;
    let mut clock = GapClock::default();
    let mut sys = Syscalls::default();
    let mut clamped = 0u64;
    let mut l1 = opts.l1_filter.then(L1::default);
    while let Some((n, line)) = lines.next_line()? {
        let err = |why: String| line_error(WHAT, n, &why);
        if let Some(rest) = valgrind_message(line) {
            if let Some(cmd) = rest.trim_start().strip_prefix("Command:") {
                if let Some(prog) = cmd.split_whitespace().next() {
                    name = prog.rsplit('/').next().unwrap_or(prog).to_string();
                }
            }
            continue;
        }
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        let (p, t) = *thread.get_or_insert_with(|| sink.thread(pid, 0, || name.clone()));
        if let Some(call) = trimmed.strip_prefix("SYSCALL[") {
            syscall(call, &mut sys, sink, p, t).map_err(err)?;
            continue;
        }
        if trimmed.starts_with("-->") {
            // The result of the previous SYSCALL line, printed on its own line.
            if let (Some(call), Some(r)) = (sys.unfinished.take(), result_of(trimmed)) {
                apply(&call, r, &mut sys, sink, p, t).map_err(err)?;
            }
            continue;
        }
        let (kind, addr, size) = parse_event(trimmed).ok_or_else(|| {
            err(format!(
                "expected `I  ADDR,SIZE`, ` L|S|M ADDR,SIZE`, a `==PID==` message or a `SYSCALL[` line, got {}",
                quote(line)
            ))
        })?;
        if size == 0 || size > MAX_ACCESS_BYTES {
            return Err(err(format!(
                "access size {size} is not in [1, {MAX_ACCESS_BYTES}]"
            )));
        }
        if addr >= MAX_ADDRESS - MAX_ACCESS_BYTES {
            return Err(err(format!(
                "address {addr:#x} is not below 2^56 (the user address space)"
            )));
        }
        if kind == 'I' {
            instructions += 1;
            continue;
        }
        if opts.max_accesses.is_some_and(|max| sink.accesses >= max) {
            break;
        }
        // The gap goes to the event's first kept access; an event the L1 serves
        // whole leaves its instructions to the next one.
        let mut gap_due = true;
        let first_line = addr / LINE_BYTES;
        let last_line = (addr + size - 1) / LINE_BYTES;
        for (i, line_no) in (first_line..=last_line).enumerate() {
            let a = if i == 0 { addr } else { line_no * LINE_BYTES };
            let (read, write) = kept_accesses(&mut l1, kind, line_no);
            if !(read || write) {
                sink.stats.l1_hits_dropped += 1 + (kind == 'M') as u64;
                continue;
            }
            let g = if std::mem::take(&mut gap_due) {
                let g = clock.gap(instructions as f64 * opts.ns_per_instruction, &mut clamped);
                instructions = 0;
                g
            } else {
                0
            };
            if read {
                sink.access(p, t, a, false, g)?;
            }
            if write {
                sink.access(p, t, a, true, if read { 0 } else { g })?;
            }
        }
    }
    sink.stats.lines = lines.count();
    sink.stats.gaps_clamped += clamped;
    Ok(())
}

/// Counts the accesses a lackey log's lines will give the trace, as the import makes
/// them (lines split at 64-byte boundaries, a modify as two, L1 hits dropped when
/// filtering), for a capture that watches its log grow.
#[derive(Debug, Clone)]
pub struct AccessCounter {
    l1: Option<L1>,
}

impl AccessCounter {
    /// A counter for one process's log; `l1_filter` as [`ImportOptions::l1_filter`].
    pub fn new(l1_filter: bool) -> AccessCounter {
        AccessCounter {
            l1: l1_filter.then(L1::default),
        }
    }

    /// The accesses one log line adds (0 for anything but a well-formed ` L`, ` S` or
    /// ` M` line).
    pub fn line(&mut self, line: &str) -> u64 {
        let Some((kind, addr, size)) = parse_event(line.trim()) else {
            return 0;
        };
        if kind == 'I' || size == 0 || size > MAX_ACCESS_BYTES {
            return 0;
        }
        (addr / LINE_BYTES..=(addr + size - 1) / LINE_BYTES)
            .map(|line_no| {
                let (read, write) = kept_accesses(&mut self.l1, kind, line_no);
                read as u64 + write as u64
            })
            .sum()
    }
}

/// Which accesses an `L`, `S` or `M` event on one 64-byte line gives the trace:
/// (a read, a write). Everything without an L1 filter; with one, nothing for an L1
/// hit and only the store for a first write to a line the L1 holds clean.
fn kept_accesses(l1: &mut Option<L1>, kind: char, line_no: u64) -> (bool, bool) {
    let seen = match l1 {
        None => L1Outcome::Miss,
        Some(c) => c.access(line_no, kind != 'L'),
    };
    match (kind, seen) {
        (_, L1Outcome::Hit) => (false, false),
        ('L', _) => (true, false),
        ('S', _) => (false, true),
        (_, L1Outcome::Miss) => (true, true), // M: a read, then a write
        (_, L1Outcome::FirstWrite) => (false, true),
    }
}

/// What the L1 filter saw of one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum L1Outcome {
    /// Not held: the access reaches the simulated machine.
    Miss,
    /// Held clean and now written: the store is kept (the page becomes written).
    FirstWrite,
    /// Served by the L1: dropped.
    Hit,
}

/// A 32 KiB, 8-way, 64-byte-line L1 data cache with LRU replacement and a dirty bit
/// per line ([`ImportOptions::l1_filter`]).
#[derive(Debug, Clone)]
struct L1 {
    /// Per set, ways most recent first: line number + 1 (0 = empty) and dirty.
    ways: Vec<(u64, bool)>,
}

const L1_SETS: usize = 64;
const L1_WAYS: usize = 8;

impl Default for L1 {
    fn default() -> Self {
        L1 {
            ways: vec![(0, false); L1_SETS * L1_WAYS],
        }
    }
}

impl L1 {
    fn access(&mut self, line: u64, write: bool) -> L1Outcome {
        let set = (line as usize % L1_SETS) * L1_WAYS;
        let ways = &mut self.ways[set..set + L1_WAYS];
        match ways.iter().position(|&(tag, _)| tag == line + 1) {
            Some(w) => {
                ways[..=w].rotate_right(1);
                if write && !ways[0].1 {
                    ways[0].1 = true;
                    L1Outcome::FirstWrite
                } else {
                    L1Outcome::Hit
                }
            }
            None => {
                ways.rotate_right(1);
                ways[0] = (line + 1, write);
                L1Outcome::Miss
            }
        }
    }
}

/// The text after a `==PID==`, `--PID--` or `**PID**` prefix.
fn valgrind_message(line: &str) -> Option<&str> {
    for m in ["==", "--", "**"] {
        if let Some(rest) = line.strip_prefix(m) {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            if digits > 0 {
                if let Some(after) = rest[digits..].strip_prefix(m) {
                    return Some(after);
                }
            }
        }
    }
    None
}

/// `I  ADDR,SIZE` or `L|S|M ADDR,SIZE` (already trimmed).
fn parse_event(s: &str) -> Option<(char, u64, u64)> {
    let kind = s.chars().next()?;
    if !matches!(kind, 'I' | 'L' | 'S' | 'M') {
        return None;
    }
    let rest = s[1..].trim_start();
    if rest.len() == s.len() - 1 {
        return None; // no space after the kind letter
    }
    let (a, z) = rest.split_once(',')?;
    Some((kind, parse_hex(a)?, z.parse().ok()?))
}

/// Handle the text after `SYSCALL[`.
fn syscall<W: Write + Seek>(
    s: &str,
    sys: &mut Syscalls,
    sink: &mut Sink<W>,
    p: u32,
    t: u32,
) -> Result<(), String> {
    let bad = || format!("malformed SYSCALL line {}", quote(s));
    let (ids, rest) = s.split_once(']').ok_or_else(bad)?;
    let (_pid, tid) = ids.split_once(',').ok_or_else(bad)?;
    let tid: u64 = tid.trim().parse().map_err(|_| bad())?;
    // Skip "(NR) ".
    let rest = rest.trim_start();
    let rest = rest
        .strip_prefix('(')
        .and_then(|r| r.split_once(')'))
        .map(|(_, r)| r.trim_start())
        .ok_or_else(bad)?;
    let result = result_of(rest);
    sys.unfinished = None;
    if let Some(cont) = rest.strip_prefix("...") {
        // The completion of an async call: `... [async] --> Success(0x..)`.
        if cont.contains("[async]") {
            if let (Some(call), Some(r)) = (sys.pending.remove(&tid), result) {
                apply(&call, r, sys, sink, p, t)?;
            }
        }
        return Ok(());
    }
    let Some(name) = rest
        .split_whitespace()
        .next()
        .and_then(|n| n.strip_prefix("sys_"))
    else {
        return Ok(());
    };
    if !matches!(name, "mmap" | "mmap2" | "munmap" | "brk" | "mremap") {
        return Ok(());
    }
    let open = rest.find('(').ok_or_else(bad)?;
    let close = rest[open..].find(')').ok_or_else(bad)? + open;
    let args = rest[open + 1..close]
        .split(',')
        .map(|a| {
            let a = a.trim();
            match a.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16).ok(),
                None => a.parse::<u64>().ok(),
            }
        })
        .collect::<Option<Vec<u64>>>()
        .ok_or_else(|| {
            format!(
                "sys_{name} has an argument that is not a number in {}",
                quote(s)
            )
        })?;
    let need = match name {
        "mmap" | "mmap2" => 4,
        "munmap" => 2,
        "brk" => 1,
        _ => 3,
    };
    if args.len() < need {
        return Err(format!(
            "sys_{name} has {} arguments, expected at least {need}",
            args.len()
        ));
    }
    let call = PendingCall {
        name: name.to_string(),
        args,
    };
    match result {
        Some(r) => apply(&call, r, sys, sink, p, t),
        None if rest.contains("[async]") => {
            sys.pending.insert(tid, call);
            Ok(())
        }
        None if !rest.contains("-->") => {
            sys.unfinished = Some(call);
            Ok(())
        }
        None => Ok(()), // failed call
    }
}

/// The value in `Success(0x...)`, if the line reports success.
fn result_of(s: &str) -> Option<u64> {
    let i = s.find("Success(")?;
    let v = &s[i + "Success(".len()..];
    let end = v.find(')')?;
    parse_hex(v[..end].trim())
}

fn apply<W: Write + Seek>(
    call: &PendingCall,
    result: u64,
    sys: &mut Syscalls,
    sink: &mut Sink<W>,
    p: u32,
    t: u32,
) -> Result<(), String> {
    let a = &call.args;
    let page_up = |x: u64| x.div_ceil(tierkit_core::PAGE_SIZE) * tierkit_core::PAGE_SIZE;
    match call.name.as_str() {
        // PROT_NONE reservations (Go, the JVM, sanitizers) are skipped: they can be
        // huge and are not memory until mprotect makes parts of them accessible;
        // accesses there are then covered like any unexplained access.
        "mmap" | "mmap2" if a[2] == 0 => {}
        "mmap" | "mmap2" => {
            let kind = if a[3] & MAP_ANONYMOUS != 0 {
                VmaKind::Anon
            } else {
                VmaKind::File
            };
            if a[1] > 0 {
                sink.mmap(p, t, result, a[1], kind)?;
            }
        }
        "munmap" => {
            if a[1] > 0 {
                sink.munmap(p, t, a[0], a[1])?;
            }
        }
        "brk" => {
            let old = *sys.brk.get_or_insert(result);
            if result >= MAX_ADDRESS {
                return Err(format!("brk result {result:#x} is not below 2^56"));
            }
            let (o, r) = (page_up(old), page_up(result));
            if r > o {
                sink.mmap(p, t, o, r - o, VmaKind::Anon)?;
            } else if r < o {
                sink.munmap(p, t, r, o - r)?;
            }
            sys.brk = Some(result);
        }
        _ => {
            // mremap(old, old_len, new_len, ...): the data moves to `result`.
            if a[1] > 0 {
                sink.munmap(p, t, a[0], a[1])?;
            }
            if a[2] > 0 {
                sink.mmap(p, t, result, a[2], VmaKind::Anon)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::testutil::{accesses, drain};
    use crate::trace::import::{import, ImportFormat, ImportOptions, ImportStats};
    use crate::trace::TraceWorkload;
    use proptest::prelude::*;
    use std::io::Cursor;
    use tierkit_core::{Op, Workload, HUGE_PAGE_SIZE};

    fn run(input: &[u8]) -> Result<(Vec<u8>, ImportStats), String> {
        // The conversion rules themselves, every access kept; the L1 filter has
        // tests of its own.
        let opts = ImportOptions {
            ns_per_instruction: 1.0,
            l1_filter: false,
            ..ImportOptions::default()
        };
        import(ImportFormat::Lackey, input, Cursor::new(Vec::new()), &opts)
            .map(|(c, s)| (c.into_inner(), s))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn sample_file_of_bin_true_imports() {
        let sample = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/data/lackey-true.txt"
        ))
        .unwrap();
        let (bytes, stats) = run(&sample).unwrap();
        let text = std::str::from_utf8(&sample).unwrap();
        let count = |p: &str| text.lines().filter(|l| l.starts_with(p)).count() as u64;
        let (loads, stores, modifies) = (count(" L"), count(" S"), count(" M"));
        assert_eq!(
            crate::trace::import::check::replay_is_consistent(&bytes),
            stats.trace.accesses
        );
        let mut w = TraceWorkload::from_reader(Cursor::new(bytes), "lackey", 1.0).unwrap();
        assert_eq!(w.shape().processes[0].name, "true");
        let d = drain(&mut w);
        let acc: Vec<_> = accesses(&d.streams[0][0]).collect();
        // Every data event is at least one access (line-crossing ones are more).
        assert!(acc.len() as u64 >= loads + stores + 2 * modifies);
        assert!(acc.len() as u64 <= 2 * (loads + stores + 2 * modifies));
        assert_eq!(stats.trace.accesses, acc.len() as u64);
        // The first data events of the sample: ` S 1fff000748,8` after 2
        // instructions, then ` S 1fff000740,8` after 1.
        assert_eq!(acc[0], (0x1f_ff00_0748, true, 2));
        assert_eq!(acc[1], (0x1f_ff00_0740, true, 1));
        // No syscalls in a plain --trace-mem run: everything is start-up mappings.
        assert_eq!(stats.input_mappings, 0);
        assert!(stats.startup_mappings >= 2);
        crate::testutil::check_imported_structure(&w, &d);
    }

    #[test]
    fn syscalls_become_mappings_in_order() {
        let log = "\
==7== Command: /tmp/prog arg
I  04001000,3
 S 1ffefff000,8
SYSCALL[7,1](12) sys_brk ( 0x0 ) --> [pre-success] Success(0x4035000) 
SYSCALL[7,1](12) sys_brk ( 0x4056000 ) --> [pre-success] Success(0x4056000) 
 S 04040000,8
SYSCALL[7,1](9) sys_mmap ( 0x0, 8192, 3, 34, 4294967295, 0 ) --> [pre-success] Success(0x4835000) 
 L 04835008,8
SYSCALL[7,1](11) sys_munmap ( 0x4835000, 8192 ) --> [pre-success] Success(0x0) 
SYSCALL[7,1](9) sys_mmap ( 0x0, 4096, 1, 2, 3, 0 ) --> [async] ... 
SYSCALL[7,1](9) ... [async] --> Success(0x5000000) 
 L 05000010,4
SYSCALL[7,1](9) sys_mmap ( 0x0, 4096, 1, 2, 3, 0 ) --> [pre-fail] Failure(0xc) 
SYSCALL[7,1](334) unimplemented (by the kernel) syscall: 334! (ni_syscall)
 --> [pre-fail] Failure(0x26) 
SYSCALL[7,1](9) sys_mmap ( 0x0, 4096, 0, 34, 4294967295, 0 ) --> [pre-success] Success(0x6000000) 
SYSCALL[7,1](9) sys_mmap ( 0x0, 8192, 3, 34, 4294967295, 0 )
 --> [pre-success] Success(0x7000000) 
 M 04835010,8
";
        let (bytes, stats) = run(log.as_bytes()).unwrap();
        assert_eq!(crate::trace::import::check::replay_is_consistent(&bytes), 6);
        let mut w = TraceWorkload::from_reader(Cursor::new(bytes), "s", 1.0).unwrap();
        assert_eq!(w.shape().processes[0].name, "prog");
        let d = drain(&mut w);
        let s = &d.streams[0][0];
        let mm: Vec<_> = s
            .iter()
            .filter(|o| !matches!(o, Op::Access { .. }))
            .copied()
            .collect();
        use tierkit_core::VmaKind::*;
        assert_eq!(
            mm,
            vec![
                // brk growth 0x4035000 -> 0x4056000
                Op::Munmap {
                    addr: 0x4035000,
                    len: 0x21000
                },
                Op::Mmap {
                    addr: 0x4035000,
                    len: 0x21000,
                    kind: Anon
                },
                Op::Munmap {
                    addr: 0x4835000,
                    len: 8192
                },
                Op::Mmap {
                    addr: 0x4835000,
                    len: 8192,
                    kind: Anon
                },
                Op::Munmap {
                    addr: 0x4835000,
                    len: 8192
                },
                Op::Munmap {
                    addr: 0x5000000,
                    len: 4096
                },
                Op::Mmap {
                    addr: 0x5000000,
                    len: 4096,
                    kind: File
                },
                // The PROT_NONE reservation at 0x6000000 is skipped; the mmap whose
                // result came on the next line is not.
                Op::Munmap {
                    addr: 0x7000000,
                    len: 8192
                },
                Op::Mmap {
                    addr: 0x7000000,
                    len: 8192,
                    kind: Anon
                },
                // The access after the munmap: mapped on the spot, the whole free
                // 2 MiB range around it (nothing else there is mapped).
                Op::Munmap {
                    addr: 0x4800000,
                    len: 0x200000
                },
                Op::Mmap {
                    addr: 0x4800000,
                    len: 0x200000,
                    kind: Anon
                },
            ]
        );
        assert_eq!(stats.input_mappings, 4);
        assert_eq!(stats.on_demand_mappings, 1);
        // Start-up: only the stack's 2 MiB range. The store to 0x4040000 lies in
        // the brk heap, which the trace maps in-stream, and `I` fetches are not
        // accesses.
        assert_eq!(
            d.mappings
                .iter()
                .map(|m| (m.addr, m.len))
                .collect::<Vec<_>>(),
            vec![(0x1f_fee0_0000, HUGE_PAGE_SIZE)]
        );
    }

    #[test]
    fn line_crossing_and_modify() {
        let (bytes, _) = run(b"I  1000,2\nI  1002,2\n M 7fc,8\n").unwrap();
        let d = drain(&mut TraceWorkload::from_reader(Cursor::new(bytes), "x", 1.0).unwrap());
        let acc: Vec<_> = accesses(&d.streams[0][0]).collect();
        assert_eq!(
            acc,
            vec![
                (0x7fc, false, 2),
                (0x7fc, true, 0),
                (0x800, false, 0),
                (0x800, true, 0)
            ]
        );
    }

    /// Issue 22, point 4: with the L1 filter (the default), repeated accesses to a
    /// line are L1 hits and are dropped, their instructions joining the next kept
    /// access's gap; a store to a line held clean is kept once; a ninth line of one
    /// set evicts the least recently used.
    #[test]
    fn the_l1_filter_keeps_misses_and_first_writes_only() {
        let opts = ImportOptions {
            ns_per_instruction: 1.0,
            ..ImportOptions::default()
        };
        assert!(opts.l1_filter, "on by default");
        // Line 0x40 (addr 0x1000) read, read again, written, written again; then 8
        // more lines of the same set (stride 64 lines = 4 KiB), evicting 0x1000,
        // which is then a miss again.
        let mut input = String::from(
            "I  1,1\n L 1000,8\nI  1,1\n L 1008,8\nI  1,1\n S 1010,8\nI  1,1\n S 1018,8\n",
        );
        for k in 1..=8u64 {
            input += &format!(" L {:x},8\n", 0x1000 + k * 0x1000);
        }
        input += " L 1000,8\n";
        let (bytes, stats) = import(
            ImportFormat::Lackey,
            input.as_bytes(),
            Cursor::new(Vec::new()),
            &opts,
        )
        .map(|(c, s)| (c.into_inner(), s))
        .unwrap();
        let d = drain(&mut TraceWorkload::from_reader(Cursor::new(bytes), "x", 1.0).unwrap());
        let acc: Vec<_> = accesses(&d.streams[0][0]).collect();
        let mut want = vec![(0x1000, false, 1), (0x1010, true, 2)];
        // The dropped second store's instruction goes to the next kept access.
        want.extend((1..=8u64).map(|k| (0x1000 + k * 0x1000, false, (k == 1) as u32)));
        want.push((0x1000, false, 0));
        assert_eq!(acc, want);
        assert_eq!(stats.l1_hits_dropped, 2);
    }

    #[test]
    fn malformed_lines_are_named() {
        for (input, needle) in [
            (
                &b"I  1000,2\n X 10,4\n"[..],
                "lackey input line 2: expected",
            ),
            (b" L 10\n", "line 1: expected"),
            (b" L 10,0\n", "line 1: access size 0"),
            (b" L zz,4\n", "line 1: expected"),
            (b" L ffffffffffffff00,4\n", "line 1: address"),
            (
                b"SYSCALL[1,1](9) sys_mmap ( 0x0, x, 3, 34, 0, 0 ) --> Success(0x1000)\n",
                "line 1: sys_mmap has an argument",
            ),
            (
                b"SYSCALL[1,1](9) sys_mmap ( 0x0 ) --> Success(0x1000)\n",
                "line 1: sys_mmap has 1 arguments",
            ),
            (b"SYSCALL[oops\n", "line 1: malformed SYSCALL"),
            (b"==1== hello\n", "no memory accesses"),
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
                prop_oneof![
                    ("[ILSMX ]{1,3}", "[0-9a-f]{0,17}", ",[0-9]{0,5}").prop_map(|(a, b, c)| format!("{a}{b}{c}")),
                    ("(mmap|munmap|brk|mremap)", "[0-9a-fx, ]{0,40}", "(Success|Failure)\\(0x[0-9a-f]{0,16}\\)")
                        .prop_map(|(n, a, r)| format!("SYSCALL[1,1](9) sys_{n} ( {a} ) --> {r}")),
                ],
                0..40,
            )
        ) {
            let text = lines.join("\n");
            // Whatever imports must replay under the simulator's mapping rules.
            if let Ok((bytes, _)) = run(text.as_bytes()) {
                crate::trace::import::check::replay_is_consistent(&bytes);
            }
        }
    }
}
