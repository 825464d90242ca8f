//! Importers: convert traces of other tools into native traces.
//!
//! | format | input | processes / threads | mappings |
//! | --- | --- | --- | --- |
//! | [`lackey`] | Valgrind `--tool=lackey --trace-mem=yes` output (optionally with `--trace-syscalls=yes`) | one / one | from traced mmap/munmap/brk/mremap syscalls; the rest synthesized |
//! | [`perf`] | `perf script` output of samples with a data address | one per pid / one per tid | synthesized |
//! | [`damo`] | damo record files (JSON, or zlib-compressed JSON as `damo record` writes by default) and `damo report raw --json` | one per monitoring target / one | synthesized over the monitored regions |
//! | [`text`] | one access per line: `R` or `W`, a hexadecimal address, an optional gap in ns | one / one | synthesized |
//!
//! **Synthesized mappings.** When the input says nothing about mappings, every
//! 2 MiB-aligned range that holds an accessed address becomes part of a start-up
//! anonymous mapping (adjacent ranges merge into one mapping, as Linux merges
//! adjacent anonymous VMAs). When the input does carry mappings (lackey with
//! syscalls), those are replayed where they happened, each preceded by an munmap of
//! its range (MAP_FIXED semantics); accesses outside them (the executable, the
//! dynamic loader and the stack, which Valgrind maps itself) are covered the same
//! 2 MiB way, and an access to a page that an earlier munmap removed gets a
//! mapping made on the spot for the free pages around it (within its 2 MiB range).
//!
//! **Footprint.** The sum over processes of the smaller of (start-up mappings +
//! the peak of the mappings made while running) and (the number of 2 MiB ranges
//! ever accessed × 2 MiB): both bound the memory the simulator can make resident,
//! even with transparent huge pages.
//!
//! **Errors.** Every importer rejects malformed input with one line naming the
//! input line (or, for damo's JSON, the line and column) and never panics.

pub mod damo;
pub mod lackey;
pub mod perf;
pub mod text;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, Seek, Write};

use tierkit_core::{
    ConfigError, Op, ProcessShape, VmaKind, WorkloadShape, HUGE_PAGE_SIZE, PAGE_SIZE,
};

use super::{TraceError, TraceHeader, TraceStats, TraceWriter};

/// Addresses at or above this are rejected (or, for perf, skipped as kernel
/// addresses): the x86-64 user address space ends below 2^47 (2^56 with 5-level
/// paging).
pub const MAX_ADDRESS: u64 = 1 << 56;
/// Longest input line accepted by the line-oriented importers.
pub const MAX_LINE_BYTES: usize = 64 << 10;

const PAGE_SHIFT: u32 = PAGE_SIZE.trailing_zeros();
const CHUNK_SHIFT: u32 = HUGE_PAGE_SIZE.trailing_zeros();

/// The input formats [`import`] understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportFormat {
    /// Valgrind lackey `--trace-mem=yes` output.
    Lackey,
    /// `perf script` output of samples carrying a data address.
    Perf,
    /// damo record files / `damo report raw --json`.
    Damo,
    /// Plain text: `R` or `W`, a hexadecimal address, an optional gap, per line.
    Text,
}

impl ImportFormat {
    /// Every format's name, as the command line spells it.
    pub const NAMES: [&'static str; 4] = ["lackey", "perf", "damo", "text"];

    /// The format's name.
    pub fn name(self) -> &'static str {
        match self {
            ImportFormat::Lackey => "lackey",
            ImportFormat::Perf => "perf",
            ImportFormat::Damo => "damo",
            ImportFormat::Text => "text",
        }
    }
}

impl std::str::FromStr for ImportFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "lackey" => Ok(ImportFormat::Lackey),
            "perf" => Ok(ImportFormat::Perf),
            "damo" => Ok(ImportFormat::Damo),
            "text" => Ok(ImportFormat::Text),
            _ => Err(format!(
                "unknown trace format `{s}`; valid: {}",
                Self::NAMES.join(", ")
            )),
        }
    }
}

/// Settings of an import.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportOptions {
    /// Memory-level parallelism given to every imported process, in [1, 64].
    /// Default 1.0: none of the inputs says how many misses overlap, and 1 is the
    /// conservative (latency-bound) assumption.
    pub mlp: f64,
    /// lackey: compute time per executed instruction between two data accesses, ns,
    /// in [0, 1000]. Default 0.3 (a ~3 GHz core retiring about one instruction per
    /// cycle); lackey counts instructions but not time.
    pub ns_per_instruction: f64,
    /// damo: accesses generated per page for each sampling interval in which DAMON
    /// saw the page's region accessed, in (0, 1000]. Default 1.0, the least the
    /// observation implies.
    pub damo_accesses_per_sample: f64,
    /// damo: touch every page of each target's first snapshot once (writes, in
    /// address order) before replaying, so the monitored memory is resident as it
    /// was in the real process. Default true.
    pub damo_init_touch: bool,
    /// lackey: drop the accesses a per-process L1 data cache (32 KiB, 8-way, 64-byte
    /// lines, LRU) would serve. Lackey logs every load and store, most of them L1
    /// hits (stack, loop variables), and the simulator would charge each an LLC hit;
    /// the machine model starts below the L1 (`docs/machine.md`). A store to a line
    /// the filter holds clean is kept, so written pages stay written. A dropped
    /// access's instructions join the next kept access's gap. Default true.
    pub l1_filter: bool,
    /// lackey: stop converting once the trace holds this many accesses (the event
    /// that reaches it is kept whole). `None` converts everything.
    pub max_accesses: Option<u64>,
    /// Stored as the trace's description.
    pub description: String,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            mlp: 1.0,
            ns_per_instruction: 0.3,
            damo_accesses_per_sample: 1.0,
            damo_init_touch: true,
            l1_filter: true,
            max_accesses: None,
            description: String::new(),
        }
    }
}

impl ImportOptions {
    /// Check every field; the error names it and its range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let (lo, hi) = crate::common::MLP_RANGE;
        if !(self.mlp >= lo && self.mlp <= hi) {
            return Err(format!("mlp must be in [{lo}, {hi}], got {}", self.mlp).into());
        }
        if !(self.ns_per_instruction >= 0.0 && self.ns_per_instruction <= 1000.0) {
            return Err(format!(
                "ns_per_instruction must be in [0, 1000], got {}",
                self.ns_per_instruction
            )
            .into());
        }
        if !(self.damo_accesses_per_sample > 0.0 && self.damo_accesses_per_sample <= 1000.0) {
            return Err(format!(
                "damo_accesses_per_sample must be in (0, 1000], got {}",
                self.damo_accesses_per_sample
            )
            .into());
        }
        Ok(())
    }
}

/// What an import produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImportStats {
    /// Input lines read (damo: JSON bytes).
    pub lines: u64,
    /// The written trace's counts.
    pub trace: TraceStats,
    /// Processes and threads in the trace.
    pub processes: u64,
    /// Threads over all processes.
    pub threads: u64,
    /// Input records skipped (perf: samples without a user data address).
    pub skipped: u64,
    /// Compute gaps longer than u32::MAX ns, cut to that.
    pub gaps_clamped: u64,
    /// Mappings taken from the input (lackey syscalls).
    pub input_mappings: u64,
    /// Start-up mappings synthesized over 2 MiB ranges.
    pub startup_mappings: u64,
    /// Mappings made on the spot for accesses to unmapped pages.
    pub on_demand_mappings: u64,
    /// The trace's footprint.
    pub footprint_bytes: u64,
    /// lackey: accesses dropped as L1 hits ([`ImportOptions::l1_filter`]).
    pub l1_hits_dropped: u64,
    /// Each process of the trace, in order: its name and its accesses.
    pub process_accesses: Vec<(String, u64)>,
}

/// Convert `input` in `format` into a native trace written to `out`.
pub fn import<R: BufRead, W: Write + Seek>(
    format: ImportFormat,
    input: R,
    out: W,
    opts: &ImportOptions,
) -> Result<(W, ImportStats), TraceError> {
    opts.validate()
        .map_err(|e| TraceError::new(e.to_string()))?;
    let mut sink = Sink::new(TraceWriter::new(out)?, opts.mlp);
    match format {
        ImportFormat::Lackey => lackey::convert(input, &mut sink, opts)?,
        ImportFormat::Perf => perf::convert(input, &mut sink)?,
        ImportFormat::Damo => damo::convert(input, &mut sink, opts)?,
        ImportFormat::Text => text::convert(input, &mut sink)?,
    }
    sink.finish(format.name(), &opts.description)
}

/// Convert several Valgrind lackey logs, one per traced process (a capture that
/// follows forks and execs writes one log per process), into one native trace with
/// a process per log that holds any memory access, in the order given. `inputs` pairs
/// each log with a name for error messages. [`ImportOptions::max_accesses`] caps the
/// whole trace: later logs get what earlier ones left.
pub fn import_lackey_logs<R: BufRead, W: Write + Seek>(
    inputs: Vec<(String, R)>,
    out: W,
    opts: &ImportOptions,
) -> Result<(W, ImportStats), TraceError> {
    opts.validate()
        .map_err(|e| TraceError::new(e.to_string()))?;
    let mut sink = Sink::new(TraceWriter::new(out)?, opts.mlp);
    let mut lines = 0;
    for (i, (name, input)) in inputs.into_iter().enumerate() {
        if opts.max_accesses.is_some_and(|max| sink.accesses >= max) {
            break; // the cap is reached: later processes are not in the trace
        }
        lackey::convert_process(input, &mut sink, opts, i as u64)
            .map_err(|e| TraceError::new(format!("{name}: {e}")))?;
        lines += sink.stats.lines;
    }
    sink.stats.lines = lines;
    sink.finish(ImportFormat::Lackey.name(), &opts.description)
}

// ---------------------------------------------------------------------------------
// Shared line reading

/// Reads input lines with their 1-based numbers, refusing lines longer than
/// [`MAX_LINE_BYTES`] and text that is not UTF-8.
pub(crate) struct Lines<R> {
    r: R,
    buf: Vec<u8>,
    line_no: u64,
    what: &'static str,
}

impl<R: BufRead> Lines<R> {
    pub(crate) fn new(r: R, what: &'static str) -> Self {
        Lines {
            r,
            buf: Vec::new(),
            line_no: 0,
            what,
        }
    }

    /// The next line without its terminator, or `None` at the end of the input.
    pub(crate) fn next_line(&mut self) -> Result<Option<(u64, &str)>, TraceError> {
        self.buf.clear();
        self.line_no += 1;
        let n = self.line_no;
        loop {
            let avail = match self.r.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.err(n, &format!("cannot read: {e}"))),
            };
            if avail.is_empty() {
                break;
            }
            let (take, done) = match avail.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (avail.len(), false),
            };
            if self.buf.len() + take > MAX_LINE_BYTES + 1 {
                return Err(self.err(n, &format!("longer than {MAX_LINE_BYTES} bytes")));
            }
            self.buf.extend_from_slice(&avail[..take]);
            self.r.consume(take);
            if done {
                break;
            }
        }
        if self.buf.is_empty() {
            return Ok(None);
        }
        while matches!(self.buf.last(), Some(b'\n' | b'\r')) {
            self.buf.pop();
        }
        match std::str::from_utf8(&self.buf) {
            Ok(s) => Ok(Some((n, s))),
            Err(e) => Err(self.err(
                n,
                &format!(
                    "not UTF-8 text (invalid byte at column {})",
                    e.valid_up_to() + 1
                ),
            )),
        }
    }

    fn err(&self, line: u64, why: &str) -> TraceError {
        line_error(self.what, line, why)
    }

    /// Lines read so far.
    pub(crate) fn count(&self) -> u64 {
        self.line_no.saturating_sub(1)
    }
}

/// `"{what} input line {line}: {why}"`.
pub(crate) fn line_error(what: &str, line: u64, why: &str) -> TraceError {
    TraceError::new(format!("{what} input line {line}: {why}"))
}

/// A line quoted for an error message, shortened to 60 characters.
pub(crate) fn quote(line: &str) -> String {
    let mut s: String = line.chars().take(60).collect();
    if line.chars().count() > 60 {
        s.push('…');
    }
    format!("`{}`", s.escape_debug())
}

/// A hexadecimal number with an optional `0x`/`0X` prefix.
pub(crate) fn parse_hex(s: &str) -> Option<u64> {
    let digits = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    u64::from_str_radix(digits, 16).ok()
}

/// Turns elapsed time into compute gaps: whole nanoseconds, carrying the fraction
/// to the next gap so no time is lost, cut at `u32::MAX`.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct GapClock {
    carry: f64,
}

impl GapClock {
    /// The gap for `ns` more nanoseconds of compute; `clamped` is set if it was cut.
    pub(crate) fn gap(&mut self, ns: f64, clamped: &mut u64) -> u32 {
        let total = self.carry + ns;
        let whole = total.floor();
        if whole >= u32::MAX as f64 {
            *clamped += 1;
            self.carry = 0.0;
            return u32::MAX;
        }
        self.carry = total - whole;
        whole as u32
    }
}

// ---------------------------------------------------------------------------------
// Address-space model and the sink every importer writes through

/// A set of page numbers kept as disjoint, non-adjacent `[start, end)` ranges.
#[derive(Debug, Default, Clone)]
pub(crate) struct RangeSet {
    ranges: BTreeMap<u64, u64>,
    pages: u64,
}

impl RangeSet {
    /// True if page `x` is in the set.
    pub(crate) fn contains(&self, x: u64) -> bool {
        self.ranges
            .range(..=x)
            .next_back()
            .is_some_and(|(_, &e)| x < e)
    }

    /// Pages in the set.
    pub(crate) fn pages(&self) -> u64 {
        self.pages
    }

    /// Add `[s, e)`.
    pub(crate) fn insert(&mut self, mut s: u64, mut e: u64) {
        if s >= e {
            return;
        }
        let touching: Vec<(u64, u64)> = self
            .ranges
            .range(..=e)
            .rev()
            .take_while(|&(_, &re)| re >= s)
            .map(|(&rs, &re)| (rs, re))
            .collect();
        for (rs, re) in touching {
            self.ranges.remove(&rs);
            self.pages -= re - rs;
            s = s.min(rs);
            e = e.max(re);
        }
        self.ranges.insert(s, e);
        self.pages += e - s;
    }

    /// Remove `[s, e)`.
    pub(crate) fn remove(&mut self, s: u64, e: u64) {
        if s >= e {
            return;
        }
        let overlapping: Vec<(u64, u64)> = self
            .ranges
            .range(..e)
            .rev()
            .take_while(|&(_, &re)| re > s)
            .map(|(&rs, &re)| (rs, re))
            .collect();
        for (rs, re) in overlapping {
            self.ranges.remove(&rs);
            self.pages -= re - rs;
            if rs < s {
                self.ranges.insert(rs, s);
                self.pages += s - rs;
            }
            if re > e {
                self.ranges.insert(e, re);
                self.pages += re - e;
            }
        }
    }
}

/// What the replay's address space of one process looks like while an import
/// streams its records (see the module docs): start-up 2 MiB ranges (`startup`),
/// pages mapped in the stream and still mapped (`live`), and pages some in-stream
/// munmap has removed (`cut`; a start-up range never gets them back).
#[derive(Debug, Default)]
pub(crate) struct AddressModel {
    live: RangeSet,
    cut: RangeSet,
    startup: BTreeSet<u64>,
    /// Per 2 MiB range ever accessed: a bitmap of its 512 pages accessed.
    touched: BTreeMap<u64, [u64; 8]>,
    peak_live_pages: u64,
}

impl AddressModel {
    /// True if page `page` is mapped in the replay right now.
    fn mapped(&self, page: u64) -> bool {
        self.live.contains(page)
            || (self.startup.contains(&(page >> (CHUNK_SHIFT - PAGE_SHIFT)))
                && !self.cut.contains(page))
    }

    /// Record an access to `addr`; returns the page range `[s, e)` to map on the
    /// spot first, if the page was removed by an earlier munmap.
    fn access(&mut self, addr: u64) -> Option<(u64, u64)> {
        let page = addr >> PAGE_SHIFT;
        let chunk = addr >> CHUNK_SHIFT;
        let bit = (page & 511) as usize;
        self.touched.entry(chunk).or_default()[bit / 64] |= 1 << (bit % 64);
        if self.live.contains(page) || !self.cut.contains(page) {
            // Mapped in the stream, or a start-up range never cut here (joining the
            // start-up set now is sound: nothing in the stream unmapped this page).
            if !self.live.contains(page) {
                self.startup.insert(chunk);
            }
            return None;
        }
        // The free pages around `page` within its 2 MiB range.
        let lo_limit = chunk << (CHUNK_SHIFT - PAGE_SHIFT);
        let hi_limit = lo_limit + (HUGE_PAGE_SIZE >> PAGE_SHIFT);
        let mut lo = page;
        while lo > lo_limit && !self.mapped(lo - 1) {
            lo -= 1;
        }
        let mut hi = page + 1;
        while hi < hi_limit && !self.mapped(hi) {
            hi += 1;
        }
        self.map(lo, hi);
        Some((lo, hi))
    }

    /// An in-stream mapping of pages `[s, e)` (after an munmap of the same range).
    fn map(&mut self, s: u64, e: u64) {
        self.cut.insert(s, e);
        self.live.insert(s, e);
        self.peak_live_pages = self.peak_live_pages.max(self.live.pages());
    }

    /// An in-stream munmap of pages `[s, e)`.
    fn unmap(&mut self, s: u64, e: u64) {
        self.cut.insert(s, e);
        self.live.remove(s, e);
    }

    /// Start-up mappings: runs of consecutive 2 MiB ranges, as `(addr, len)`.
    fn startup_mappings(&self) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        for &c in &self.startup {
            match out.last_mut() {
                Some((start, len)) if *start + *len == c << CHUNK_SHIFT => *len += HUGE_PAGE_SIZE,
                _ => out.push((c << CHUNK_SHIFT, HUGE_PAGE_SIZE)),
            }
        }
        out
    }

    /// The footprint: the pages ever accessed (what first touch makes resident), at
    /// most what is mapped. With THP a huge page makes its untouched subpages resident
    /// too; the machine then falls back to base pages once a huge page no longer fits.
    fn footprint_bytes(&self) -> u64 {
        let mapped = self.startup.len() as u64 * HUGE_PAGE_SIZE + self.peak_live_pages * PAGE_SIZE;
        let touched: u64 = self
            .touched
            .values()
            .flat_map(|b| b.iter())
            .map(|w| w.count_ones() as u64)
            .sum();
        mapped.min(touched * PAGE_SIZE)
    }
}

#[derive(Debug)]
struct ProcState {
    name: String,
    tids: BTreeMap<u64, u32>,
    model: AddressModel,
    accesses: u64,
}

/// Where importers send what they parse: keeps the process/thread tables and the
/// address model, and writes the native trace.
pub(crate) struct Sink<W: Write + Seek> {
    w: TraceWriter<W>,
    procs: Vec<ProcState>,
    by_pid: BTreeMap<u64, u32>,
    mlp: f64,
    /// Accesses pushed so far, over all processes.
    pub(crate) accesses: u64,
    pub(crate) stats: ImportStats,
}

impl<W: Write + Seek> Sink<W> {
    fn new(w: TraceWriter<W>, mlp: f64) -> Self {
        Sink {
            w,
            procs: Vec::new(),
            by_pid: BTreeMap::new(),
            mlp,
            accesses: 0,
            stats: ImportStats::default(),
        }
    }

    /// The (process, thread) indices of the input's `(pid, tid)`, registering them
    /// on first sight; `name` names a new process.
    pub(crate) fn thread(
        &mut self,
        pid: u64,
        tid: u64,
        name: impl FnOnce() -> String,
    ) -> (u32, u32) {
        let p = *self.by_pid.entry(pid).or_insert_with(|| {
            self.procs.push(ProcState {
                name: name(),
                tids: BTreeMap::new(),
                model: AddressModel::default(),
                accesses: 0,
            });
            (self.procs.len() - 1) as u32
        });
        let tids = &mut self.procs[p as usize].tids;
        let next = tids.len() as u32;
        let t = *tids.entry(tid).or_insert(next);
        (p, t)
    }

    /// An access by thread `(p, t)`; `addr` must be below [`MAX_ADDRESS`].
    pub(crate) fn access(
        &mut self,
        p: u32,
        t: u32,
        addr: u64,
        write: bool,
        gap_ns: u32,
    ) -> Result<(), TraceError> {
        debug_assert!(addr < MAX_ADDRESS);
        self.procs[p as usize].accesses += 1;
        self.accesses += 1;
        if let Some((s, e)) = self.procs[p as usize].model.access(addr) {
            self.stats.on_demand_mappings += 1;
            self.emit_map(p, t, s, e, VmaKind::Anon)?;
        }
        self.w.push(
            p,
            t,
            Op::Access {
                addr,
                write,
                gap_ns,
            },
        )
    }

    /// An mmap of `[addr, addr + len)` seen in the input (rounded out to pages).
    pub(crate) fn mmap(
        &mut self,
        p: u32,
        t: u32,
        addr: u64,
        len: u64,
        kind: VmaKind,
    ) -> Result<(), String> {
        let (s, e) = page_range(addr, len)?;
        self.procs[p as usize].model.map(s, e);
        self.stats.input_mappings += 1;
        self.emit_map(p, t, s, e, kind).map_err(|e| e.to_string())
    }

    /// An munmap of `[addr, addr + len)` seen in the input (rounded out to pages).
    pub(crate) fn munmap(&mut self, p: u32, t: u32, addr: u64, len: u64) -> Result<(), String> {
        let (s, e) = page_range(addr, len)?;
        self.procs[p as usize].model.unmap(s, e);
        self.w
            .push(
                p,
                t,
                Op::Munmap {
                    addr: s << PAGE_SHIFT,
                    len: (e - s) << PAGE_SHIFT,
                },
            )
            .map_err(|e| e.to_string())
    }

    fn emit_map(
        &mut self,
        p: u32,
        t: u32,
        s: u64,
        e: u64,
        kind: VmaKind,
    ) -> Result<(), TraceError> {
        let (addr, len) = (s << PAGE_SHIFT, (e - s) << PAGE_SHIFT);
        // Every in-stream mapping first unmaps its range, so it never overlaps a
        // start-up range (which may only be decided later in the input).
        self.w.push(p, t, Op::Munmap { addr, len })?;
        self.w.push(p, t, Op::Mmap { addr, len, kind })
    }

    /// Write the start-up mappings and the directory.
    fn finish(mut self, format: &str, description: &str) -> Result<(W, ImportStats), TraceError> {
        let mut processes = Vec::with_capacity(self.procs.len());
        let mut footprint = 0u64;
        for (p, ps) in self.procs.iter().enumerate() {
            for (addr, len) in ps.model.startup_mappings() {
                self.stats.startup_mappings += 1;
                self.w.push_prologue(
                    p as u32,
                    Op::Mmap {
                        addr,
                        len,
                        kind: VmaKind::Anon,
                    },
                )?;
            }
            footprint += ps.model.footprint_bytes();
            self.stats
                .process_accesses
                .push((ps.name.clone(), ps.accesses));
            processes.push(ProcessShape {
                name: ps.name.clone(),
                nr_threads: ps.tids.len().max(1) as u32,
                mlp: self.mlp,
            });
        }
        self.stats.processes = processes.len() as u64;
        self.stats.threads = processes.iter().map(|p| p.nr_threads as u64).sum();
        self.stats.footprint_bytes = footprint;
        let header = TraceHeader {
            shape: WorkloadShape {
                processes,
                footprint_bytes: footprint,
            },
            description: description.to_string(),
        };
        if self.stats.processes == 0 {
            return Err(TraceError::new(format!(
                "{format} input has no memory accesses to import"
            )));
        }
        let (out, trace) = self.w.finish(&header)?;
        if trace.accesses == 0 {
            return Err(TraceError::new(format!(
                "{format} input has no memory accesses to import"
            )));
        }
        self.stats.trace = trace;
        Ok((out, self.stats))
    }
}

/// Pages `[s, e)` covering `[addr, addr + len)`, which must lie below [`MAX_ADDRESS`].
fn page_range(addr: u64, len: u64) -> Result<(u64, u64), String> {
    let end = addr
        .checked_add(len)
        .filter(|&e| e <= MAX_ADDRESS)
        .ok_or_else(|| {
            format!("range {addr:#x}+{len:#x} reaches past the user address space (2^56)")
        })?;
    Ok((addr >> PAGE_SHIFT, end.div_ceil(PAGE_SIZE)))
}

/// Test support: replay an imported trace under the simulator's address-space rules.
#[cfg(test)]
pub(crate) mod check {
    use super::*;
    use crate::trace::TraceWorkload;
    use std::io::Cursor;
    use tierkit_core::Workload;

    /// Replay `bytes` against an exact page-level model of each process's address
    /// space, asserting what the simulator demands: page-aligned mappings, every
    /// mmap (start-up or in-stream) disjoint from what is mapped at that moment, and
    /// every access to a mapped page. Also checks that the footprint covers the
    /// peak of touched 2 MiB ranges. Returns the number of accesses.
    pub(crate) fn replay_is_consistent(bytes: &[u8]) -> u64 {
        let mut w = TraceWorkload::from_reader(Cursor::new(bytes.to_vec()), "check", 1.0).unwrap();
        let shape = w.shape();
        let mut accesses = 0;
        let mut chunks_touched = 0u64;
        for (p, ps) in shape.processes.iter().enumerate() {
            let mut live = RangeSet::default();
            let map = |live: &mut RangeSet, addr: u64, len: u64| {
                assert!(
                    addr.is_multiple_of(PAGE_SIZE) && len.is_multiple_of(PAGE_SIZE) && len > 0,
                    "mmap({addr:#x}, {len})"
                );
                let before = live.pages();
                live.insert(addr >> PAGE_SHIFT, (addr + len) >> PAGE_SHIFT);
                assert_eq!(
                    live.pages(),
                    before + len / PAGE_SIZE,
                    "mmap({addr:#x}, {len}) overlaps a mapping"
                );
            };
            let mut buf = Vec::new();
            w.prologue(p, &mut buf);
            for op in &buf {
                match *op {
                    Op::Mmap { addr, len, .. } => map(&mut live, addr, len),
                    other => panic!("{other:?} in a prologue"),
                }
            }
            let mut touched = BTreeSet::new();
            for t in 0..ps.nr_threads as usize {
                loop {
                    buf.clear();
                    w.fill(p, t, &mut buf);
                    if buf.is_empty() {
                        break;
                    }
                    for op in &buf {
                        match *op {
                            Op::Access { addr, .. } => {
                                assert!(
                                    live.contains(addr >> PAGE_SHIFT),
                                    "process {p} thread {t}: access {addr:#x} is unmapped"
                                );
                                touched.insert(addr >> CHUNK_SHIFT);
                                accesses += 1;
                            }
                            Op::Mmap { addr, len, .. } => map(&mut live, addr, len),
                            Op::Munmap { addr, len } => {
                                assert!(
                                    addr.is_multiple_of(PAGE_SIZE) && len.is_multiple_of(PAGE_SIZE),
                                    "munmap({addr:#x}, {len})"
                                );
                                live.remove(addr >> PAGE_SHIFT, (addr + len) >> PAGE_SHIFT);
                            }
                        }
                    }
                }
            }
            chunks_touched += touched.len() as u64;
        }
        assert!(shape.footprint_bytes > 0);
        assert!(shape.footprint_bytes <= chunks_touched * HUGE_PAGE_SIZE);
        assert_eq!(w.expected_accesses(), Some(accesses));
        accesses
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_set_merges_splits_and_counts() {
        let mut r = RangeSet::default();
        r.insert(10, 20);
        r.insert(20, 25); // adjacent: merges
        r.insert(30, 40);
        assert_eq!(r.pages(), 25);
        assert_eq!(r.ranges.len(), 2);
        r.insert(15, 35); // bridges both
        assert_eq!(r.ranges.len(), 1);
        assert_eq!(r.pages(), 30);
        r.remove(12, 14);
        assert!(r.contains(11) && !r.contains(12) && !r.contains(13) && r.contains(14));
        assert_eq!(r.pages(), 28);
        r.remove(0, 100);
        assert_eq!(r.pages(), 0);
        assert!(!r.contains(15));
    }

    #[test]
    fn model_startup_ranges_merge_and_cut_pages_get_mapped_on_demand() {
        let mut m = AddressModel::default();
        let base = 64 * HUGE_PAGE_SIZE;
        assert_eq!(m.access(base + 5), None);
        assert_eq!(m.access(base + HUGE_PAGE_SIZE + 7), None);
        assert_eq!(m.access(base + 10 * HUGE_PAGE_SIZE), None);
        assert_eq!(
            m.startup_mappings(),
            vec![
                (base, 2 * HUGE_PAGE_SIZE),
                (base + 10 * HUGE_PAGE_SIZE, HUGE_PAGE_SIZE)
            ]
        );
        // An munmap in the middle of a start-up range, then an access there: the
        // free pages around it (the unmapped 3 pages) are mapped again.
        let p0 = base >> PAGE_SHIFT;
        m.unmap(p0 + 4, p0 + 7);
        assert!(m.mapped(p0 + 3) && !m.mapped(p0 + 5));
        assert_eq!(m.access(base + 5 * PAGE_SIZE), Some((p0 + 4, p0 + 7)));
        assert!(m.mapped(p0 + 5));
        // The footprint is the pages accessed (4), not the three 2 MiB ranges that
        // hold them (issue 22: a 1:8 fast tier is an eighth of what is touched).
        assert_eq!(m.footprint_bytes(), 4 * PAGE_SIZE);
    }

    #[test]
    fn gap_clock_carries_fractions_and_clamps() {
        let mut g = GapClock::default();
        let mut clamped = 0;
        let gaps: Vec<u32> = (0..10).map(|_| g.gap(0.3, &mut clamped)).collect();
        assert_eq!(gaps.iter().sum::<u32>(), 2); // 3.0 ns minus the carried 0.x
        assert_eq!(g.gap(1e12, &mut clamped), u32::MAX);
        assert_eq!(clamped, 1);
    }

    #[test]
    fn hex_and_formats_parse() {
        assert_eq!(parse_hex("0x1f"), Some(31));
        assert_eq!(parse_hex("1F"), Some(31));
        assert_eq!(parse_hex(""), None);
        assert_eq!(parse_hex("0x"), None);
        assert_eq!(parse_hex("12345678901234567"), None);
        assert_eq!("perf".parse::<ImportFormat>(), Ok(ImportFormat::Perf));
        assert!("pin"
            .parse::<ImportFormat>()
            .unwrap_err()
            .contains("lackey, perf, damo, text"));
    }

    #[test]
    fn lines_reject_long_and_non_utf8_lines_naming_them() {
        let mut l = Lines::new(&b"ok\r\n\xff\xfe\n"[..], "x");
        assert_eq!(l.next_line().unwrap(), Some((1, "ok")));
        let e = l.next_line().unwrap_err().to_string();
        assert!(e.starts_with("x input line 2: not UTF-8"), "{e}");
        let long = vec![b'a'; MAX_LINE_BYTES + 10];
        let mut l = Lines::new(&long[..], "x");
        assert!(l
            .next_line()
            .unwrap_err()
            .to_string()
            .contains("line 1: longer"));
    }
}
