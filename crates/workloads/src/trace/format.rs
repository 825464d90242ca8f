//! The native trace file: byte layout, the record codec, the writer and the reader.
//!
//! See the [module docs](super) and `docs/traces.md` for the layout this file
//! implements; every constant below is part of format version 1.

use std::io::{Read, Seek, SeekFrom, Write};

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};
use tierkit_core::{Op, ProcessShape, VmaKind, WorkloadShape};

use super::TraceError;

/// First eight bytes of every native trace.
pub const MAGIC: [u8; 8] = *b"TIERKTRC";
/// Format version written by this code; readers reject newer versions.
pub const VERSION: u32 = 1;
/// Flag bit 0: every chunk payload is a zlib stream (RFC 1950) rather than raw bytes.
pub const FLAG_ZLIB: u32 = 1;
/// Every flag bit version 1 defines; readers reject files with any other bit set.
pub const KNOWN_FLAGS: u32 = FLAG_ZLIB;
/// The `thread` value of a chunk that holds a process's prologue (its start-up mmaps).
pub const PROLOGUE_THREAD: u32 = u32::MAX;
/// Magic at the start of the directory (the header block at the end of the file).
pub const DIRECTORY_MAGIC: [u8; 8] = *b"TKTRDIR1";

/// Bytes of the fixed preamble: magic, version, flags, directory offset.
pub const PREAMBLE_BYTES: u64 = 24;
/// Bytes of one chunk-table entry in the directory.
pub const CHUNK_ENTRY_BYTES: u64 = 32;
/// A stream's pending records are sealed into a chunk once they reach this many raw
/// bytes: large enough for deflate to find repetition, small enough that a replay
/// keeps one decoded chunk per thread in L2-sized buffers.
pub const CHUNK_TARGET_BYTES: usize = 192 << 10;
/// Largest raw chunk a reader accepts (the target plus one maximal record, rounded
/// up); bounds the memory a hostile file can make a reader allocate per thread.
pub const MAX_CHUNK_RAW_BYTES: u32 = 256 << 10;
/// Upper bounds on the process table, so a corrupt count cannot make a reader
/// allocate without limit.
pub const MAX_PROCESSES: u32 = 1 << 16;
/// Threads per process a trace may declare.
pub const MAX_THREADS_PER_PROCESS: u32 = 1 << 16;
/// Threads over all processes a trace may declare (a replay keeps a cursor each).
pub const MAX_TOTAL_THREADS: u64 = 1 << 16;
/// Largest directory a reader loads (1 GiB ≈ 33 M chunks ≈ 10^12 accesses).
const MAX_DIRECTORY_BYTES: u64 = 1 << 30;

// Record tags (low two bits of the tag byte).
const KIND_READ: u8 = 0;
const KIND_WRITE: u8 = 1;
const KIND_MMAP: u8 = 2;
const KIND_MUNMAP: u8 = 3;
/// Access: a gap varint follows (else the gap repeats the previous access's).
const BIT_GAP: u8 = 1 << 2;
/// Access: an address-delta varint follows (else the address repeats).
const BIT_DELTA: u8 = 1 << 3;
/// Mmap: the mapping is file-backed.
const BIT_FILE: u8 = 1 << 2;

/// Everything the directory says about a trace besides its chunk table.
#[derive(Debug, Clone)]
pub struct TraceHeader {
    /// Processes (names, thread counts, MLP) and the footprint.
    pub shape: WorkloadShape,
    /// Free text saying where the trace came from (a generator's config, an
    /// importer's input file); informational only.
    pub description: String,
}

/// One entry of the chunk table: where a chunk is and what it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkEntry {
    /// Byte offset of the chunk's stored bytes in the file.
    pub offset: u64,
    /// Process index.
    pub process: u32,
    /// Thread index within the process, or [`PROLOGUE_THREAD`].
    pub thread: u32,
    /// Records in the chunk.
    pub nr_ops: u32,
    /// Access records among them.
    pub nr_accesses: u32,
    /// Bytes of the decoded (raw) record stream.
    pub raw_len: u32,
    /// Bytes stored in the file (equal to `raw_len` when not compressed).
    pub stored_len: u32,
}

/// Counts a writer reports when it finishes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TraceStats {
    /// Access records written.
    pub accesses: u64,
    /// All records written (accesses, mmaps, munmaps, prologue mmaps).
    pub ops: u64,
    /// Chunks written.
    pub chunks: u64,
    /// Size of the finished file in bytes.
    pub file_bytes: u64,
}

// ---------------------------------------------------------------------------------
// Record codec

#[inline]
fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push(v as u8 | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

#[inline]
fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline]
fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Encoder state of one stream: the previous access's address and gap, which the
/// next record is coded against. Reset at every chunk so chunks decode alone.
#[derive(Debug, Clone, Copy, Default)]
struct CodecState {
    prev_addr: u64,
    prev_gap: u32,
}

#[inline]
fn encode_op(buf: &mut Vec<u8>, st: &mut CodecState, op: &Op) {
    match *op {
        Op::Access {
            addr,
            write,
            gap_ns,
        } => {
            let mut tag = if write { KIND_WRITE } else { KIND_READ };
            if gap_ns != st.prev_gap {
                tag |= BIT_GAP;
            }
            if addr != st.prev_addr {
                tag |= BIT_DELTA;
            }
            buf.push(tag);
            if gap_ns != st.prev_gap {
                put_varint(buf, gap_ns as u64);
            }
            if addr != st.prev_addr {
                put_varint(buf, zigzag(addr.wrapping_sub(st.prev_addr) as i64));
            }
            st.prev_addr = addr;
            st.prev_gap = gap_ns;
        }
        Op::Mmap { addr, len, kind } => {
            buf.push(KIND_MMAP | if kind == VmaKind::File { BIT_FILE } else { 0 });
            put_varint(buf, addr);
            put_varint(buf, len);
        }
        Op::Munmap { addr, len } => {
            buf.push(KIND_MUNMAP);
            put_varint(buf, addr);
            put_varint(buf, len);
        }
    }
}

/// A decoder over one chunk's raw bytes.
#[derive(Debug, Default)]
pub(crate) struct ChunkDecoder {
    st: CodecState,
    pos: usize,
}

impl ChunkDecoder {
    /// Start of a chunk.
    pub(crate) fn new() -> ChunkDecoder {
        ChunkDecoder::default()
    }

    /// Bytes consumed so far.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    #[inline]
    fn varint(&mut self, raw: &[u8]) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let Some(&b) = raw.get(self.pos) else {
                return Err(format!(
                    "record stream ends inside a varint at byte {}",
                    self.pos
                ));
            };
            self.pos += 1;
            if shift == 63 && b > 1 {
                return Err(format!("varint overflows 64 bits at byte {}", self.pos - 1));
            }
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(format!(
            "varint longer than 10 bytes at byte {}",
            self.pos - 1
        ))
    }

    /// Decode the next record of `raw`; `None` at the end of the chunk.
    #[inline]
    pub(crate) fn next(&mut self, raw: &[u8]) -> Result<Option<Op>, String> {
        let Some(&tag) = raw.get(self.pos) else {
            return Ok(None);
        };
        let at = self.pos;
        self.pos += 1;
        match tag & 3 {
            KIND_READ | KIND_WRITE => {
                if tag & 0xf0 != 0 {
                    return Err(format!(
                        "reserved bits set in access tag {tag:#04x} at byte {at}"
                    ));
                }
                if tag & BIT_GAP != 0 {
                    let g = self.varint(raw)?;
                    self.st.prev_gap = u32::try_from(g)
                        .map_err(|_| format!("gap {g} ns exceeds u32 at byte {at}"))?;
                }
                if tag & BIT_DELTA != 0 {
                    let d = unzigzag(self.varint(raw)?);
                    self.st.prev_addr = self.st.prev_addr.wrapping_add(d as u64);
                }
                Ok(Some(Op::Access {
                    addr: self.st.prev_addr,
                    write: tag & 3 == KIND_WRITE,
                    gap_ns: self.st.prev_gap,
                }))
            }
            KIND_MMAP => {
                if tag & 0xf8 != 0 {
                    return Err(format!(
                        "reserved bits set in mmap tag {tag:#04x} at byte {at}"
                    ));
                }
                let addr = self.varint(raw)?;
                let len = self.varint(raw)?;
                let kind = if tag & BIT_FILE != 0 {
                    VmaKind::File
                } else {
                    VmaKind::Anon
                };
                Ok(Some(Op::Mmap { addr, len, kind }))
            }
            _ => {
                if tag & 0xfc != 0 {
                    return Err(format!(
                        "reserved bits set in munmap tag {tag:#04x} at byte {at}"
                    ));
                }
                let addr = self.varint(raw)?;
                let len = self.varint(raw)?;
                Ok(Some(Op::Munmap { addr, len }))
            }
        }
    }
}

// ---------------------------------------------------------------------------------
// Writer

/// The pending records of one stream (a thread, or a process's prologue).
#[derive(Debug)]
struct StreamBuf {
    process: u32,
    thread: u32,
    raw: Vec<u8>,
    st: CodecState,
    nr_ops: u32,
    nr_accesses: u32,
}

/// Writes a native trace: records are appended per stream and sealed into
/// compressed chunks; [`TraceWriter::finish`] writes the directory (header and
/// chunk table) and patches its offset into the preamble.
///
/// Streams are independent, so records of different threads may be pushed in any
/// interleaving; only each stream's own order is kept.
pub struct TraceWriter<W: Write + Seek> {
    out: W,
    pos: u64,
    compress: bool,
    deflate: Compress,
    zbuf: Vec<u8>,
    /// Open streams in creation order, looked up through `index`.
    streams: Vec<StreamBuf>,
    index: std::collections::BTreeMap<(u32, u32), usize>,
    last: Option<(u32, u32, usize)>,
    chunks: Vec<ChunkEntry>,
    stats: TraceStats,
}

fn io_err(what: &str, e: std::io::Error) -> TraceError {
    TraceError::new(format!("{what}: {e}"))
}

impl<W: Write + Seek> TraceWriter<W> {
    /// Start a compressed trace on `out` (written from its current position 0).
    pub fn new(out: W) -> Result<Self, TraceError> {
        Self::with_compression(out, true)
    }

    /// Start a trace; `compress = false` stores chunks raw (for debugging the codec).
    pub fn with_compression(mut out: W, compress: bool) -> Result<Self, TraceError> {
        let flags = if compress { FLAG_ZLIB } else { 0 };
        let mut pre = Vec::with_capacity(PREAMBLE_BYTES as usize);
        pre.extend_from_slice(&MAGIC);
        pre.extend_from_slice(&VERSION.to_le_bytes());
        pre.extend_from_slice(&flags.to_le_bytes());
        // Directory offset 0 marks an unfinished trace until `finish` patches it.
        pre.extend_from_slice(&0u64.to_le_bytes());
        out.seek(SeekFrom::Start(0))
            .and_then(|_| out.write_all(&pre))
            .map_err(|e| io_err("cannot write the trace preamble", e))?;
        Ok(TraceWriter {
            out,
            pos: PREAMBLE_BYTES,
            compress,
            // Level 1: the trace is written once per recording and the codec has
            // already removed most redundancy; speed matters more than ratio.
            deflate: Compress::new(Compression::fast(), true),
            zbuf: Vec::new(),
            streams: Vec::new(),
            index: Default::default(),
            last: None,
            chunks: Vec::new(),
            stats: TraceStats::default(),
        })
    }

    fn stream(&mut self, process: u32, thread: u32) -> usize {
        if let Some((p, t, i)) = self.last {
            if p == process && t == thread {
                return i;
            }
        }
        let i = *self.index.entry((process, thread)).or_insert_with(|| {
            self.streams.push(StreamBuf {
                process,
                thread,
                raw: Vec::with_capacity(CHUNK_TARGET_BYTES + 64),
                st: CodecState::default(),
                nr_ops: 0,
                nr_accesses: 0,
            });
            self.streams.len() - 1
        });
        self.last = Some((process, thread, i));
        i
    }

    /// Append `ops` to thread `thread` of process `process`.
    pub fn push_ops(&mut self, process: u32, thread: u32, ops: &[Op]) -> Result<(), TraceError> {
        if thread == PROLOGUE_THREAD {
            return Err(TraceError::new(format!(
                "thread index {PROLOGUE_THREAD} is reserved for prologues"
            )));
        }
        let i = self.stream(process, thread);
        for op in ops {
            let s = &mut self.streams[i];
            encode_op(&mut s.raw, &mut s.st, op);
            s.nr_ops += 1;
            s.nr_accesses += u32::from(matches!(op, Op::Access { .. }));
            if s.raw.len() >= CHUNK_TARGET_BYTES {
                self.seal(i)?;
            }
        }
        Ok(())
    }

    /// Append one op to a thread's stream.
    #[inline]
    pub fn push(&mut self, process: u32, thread: u32, op: Op) -> Result<(), TraceError> {
        self.push_ops(process, thread, std::slice::from_ref(&op))
    }

    /// Append a start-up mapping of `process` (only `Op::Mmap` is allowed there, as in
    /// [`tierkit_core::Workload::prologue`]).
    pub fn push_prologue(&mut self, process: u32, op: Op) -> Result<(), TraceError> {
        if !matches!(op, Op::Mmap { .. }) {
            return Err(TraceError::new(format!(
                "only mmap may appear in a prologue, got {op:?}"
            )));
        }
        let i = self.stream(process, PROLOGUE_THREAD);
        let s = &mut self.streams[i];
        encode_op(&mut s.raw, &mut s.st, &op);
        s.nr_ops += 1;
        if s.raw.len() >= CHUNK_TARGET_BYTES {
            self.seal(i)?;
        }
        Ok(())
    }

    /// Compress and write stream `i`'s pending records as one chunk.
    fn seal(&mut self, i: usize) -> Result<(), TraceError> {
        let s = &mut self.streams[i];
        if s.nr_ops == 0 {
            return Ok(());
        }
        let raw_len = s.raw.len() as u32;
        let stored: &[u8] = if self.compress {
            self.deflate.reset();
            self.zbuf.clear();
            // Deflate's worst case grows incompressible data by a few bytes per
            // 16 KiB block plus the zlib header and checksum.
            self.zbuf.reserve(s.raw.len() + s.raw.len() / 64 + 64);
            loop {
                let consumed = self.deflate.total_in() as usize;
                let status = self
                    .deflate
                    .compress_vec(&s.raw[consumed..], &mut self.zbuf, FlushCompress::Finish)
                    .map_err(|e| TraceError::new(format!("deflate failed: {e}")))?;
                if status == Status::StreamEnd {
                    break;
                }
                self.zbuf.reserve(self.zbuf.capacity().max(4096));
            }
            &self.zbuf
        } else {
            &s.raw
        };
        self.out
            .write_all(stored)
            .map_err(|e| io_err("cannot write a trace chunk", e))?;
        let entry = ChunkEntry {
            offset: self.pos,
            process: s.process,
            thread: s.thread,
            nr_ops: s.nr_ops,
            nr_accesses: s.nr_accesses,
            raw_len,
            stored_len: stored.len() as u32,
        };
        self.pos += stored.len() as u64;
        self.stats.ops += s.nr_ops as u64;
        self.stats.accesses += s.nr_accesses as u64;
        self.stats.chunks += 1;
        self.chunks.push(entry);
        s.raw.clear();
        s.st = CodecState::default();
        s.nr_ops = 0;
        s.nr_accesses = 0;
        Ok(())
    }

    /// Seal every stream, write the directory with `header`, and patch the
    /// preamble. Fails if a stream lies outside `header`'s process table.
    pub fn finish(mut self, header: &TraceHeader) -> Result<(W, TraceStats), TraceError> {
        // Seal in (process, thread) order so the file does not depend on the order
        // streams were first used.
        let order: Vec<usize> = self.index.values().copied().collect();
        for i in order {
            self.seal(i)?;
        }
        let procs = &header.shape.processes;
        check_shape(procs).map_err(TraceError::new)?;
        for c in &self.chunks {
            let known = procs
                .get(c.process as usize)
                .is_some_and(|p| c.thread == PROLOGUE_THREAD || c.thread < p.nr_threads);
            if !known {
                return Err(TraceError::new(format!(
                    "stream (process {}, thread {}) is outside the header's process table",
                    c.process, c.thread
                )));
            }
        }
        let mut dir = Vec::new();
        dir.extend_from_slice(&DIRECTORY_MAGIC);
        dir.extend_from_slice(&header.shape.footprint_bytes.to_le_bytes());
        dir.extend_from_slice(&(procs.len() as u32).to_le_bytes());
        for p in procs {
            dir.extend_from_slice(&p.nr_threads.to_le_bytes());
            dir.extend_from_slice(&p.mlp.to_le_bytes());
            let name = truncate_utf8(&p.name, u16::MAX as usize);
            dir.extend_from_slice(&(name.len() as u16).to_le_bytes());
            dir.extend_from_slice(name.as_bytes());
        }
        let desc = truncate_utf8(&header.description, u32::MAX as usize);
        dir.extend_from_slice(&(desc.len() as u32).to_le_bytes());
        dir.extend_from_slice(desc.as_bytes());
        dir.extend_from_slice(&(self.chunks.len() as u64).to_le_bytes());
        for c in &self.chunks {
            dir.extend_from_slice(&c.offset.to_le_bytes());
            for v in [
                c.process,
                c.thread,
                c.nr_ops,
                c.nr_accesses,
                c.raw_len,
                c.stored_len,
            ] {
                dir.extend_from_slice(&v.to_le_bytes());
            }
        }
        let dir_offset = self.pos;
        self.out
            .write_all(&dir)
            .and_then(|_| self.out.seek(SeekFrom::Start(16)))
            .and_then(|_| self.out.write_all(&dir_offset.to_le_bytes()))
            .and_then(|_| self.out.seek(SeekFrom::End(0)))
            .and_then(|_| self.out.flush())
            .map_err(|e| io_err("cannot write the trace directory", e))?;
        self.stats.file_bytes = dir_offset + dir.len() as u64;
        Ok((self.out, self.stats))
    }
}

fn truncate_utf8(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Check a process table is one a reader accepts.
pub(crate) fn check_shape(procs: &[ProcessShape]) -> Result<(), String> {
    if procs.is_empty() || procs.len() as u64 > MAX_PROCESSES as u64 {
        return Err(format!(
            "a trace needs 1 to {MAX_PROCESSES} processes, got {}",
            procs.len()
        ));
    }
    for (i, p) in procs.iter().enumerate() {
        check_process(i, p)?;
    }
    let total: u64 = procs.iter().map(|p| p.nr_threads as u64).sum();
    if total > MAX_TOTAL_THREADS {
        return Err(format!(
            "a trace may have at most {MAX_TOTAL_THREADS} threads in all, got {total}"
        ));
    }
    Ok(())
}

/// Check one process-table entry: 1 to [`MAX_THREADS_PER_PROCESS`] threads and an
/// MLP in the range every generator accepts.
fn check_process(i: usize, p: &ProcessShape) -> Result<(), String> {
    if !(1..=MAX_THREADS_PER_PROCESS).contains(&p.nr_threads) {
        return Err(format!(
            "process {i} ({}) has {} threads; 1 to {MAX_THREADS_PER_PROCESS} are allowed",
            p.name, p.nr_threads
        ));
    }
    let (lo, hi) = crate::common::MLP_RANGE;
    if !(p.mlp >= lo && p.mlp <= hi) {
        return Err(format!(
            "process {i} ({}) has mlp {}; it must be in [{lo}, {hi}]",
            p.name, p.mlp
        ));
    }
    Ok(())
}

/// Record every operation of `w` into a native trace on `out`: each process's
/// prologue, then all threads round-robin one batch at a time (the order the
/// simulator consumes them in; each thread's own sequence is what is kept).
pub fn record<W: Write + Seek>(
    w: &mut dyn tierkit_core::Workload,
    out: W,
    description: &str,
) -> Result<(W, TraceStats), TraceError> {
    let shape = w.shape();
    check_shape(&shape.processes).map_err(TraceError::new)?;
    let mut tw = TraceWriter::new(out)?;
    let mut buf: Vec<Op> = Vec::with_capacity(crate::BATCH_OPS);
    let mut live: Vec<(usize, usize)> = Vec::new();
    for (p, ps) in shape.processes.iter().enumerate() {
        buf.clear();
        w.prologue(p, &mut buf);
        for &op in &buf {
            tw.push_prologue(p as u32, op)?;
        }
        live.extend((0..ps.nr_threads as usize).map(|t| (p, t)));
    }
    while !live.is_empty() {
        let mut err = None;
        live.retain(|&(p, t)| {
            if err.is_some() {
                return true;
            }
            buf.clear();
            w.fill(p, t, &mut buf);
            if let Err(e) = tw.push_ops(p as u32, t as u32, &buf) {
                err = Some(e);
            }
            !buf.is_empty()
        });
        if let Some(e) = err {
            return Err(e);
        }
    }
    tw.finish(&TraceHeader {
        shape,
        description: description.to_string(),
    })
}

// ---------------------------------------------------------------------------------
// Reader

/// A trace's directory, read and checked: header, chunk table, compression flag.
#[derive(Debug, Clone)]
pub struct TraceIndex {
    /// Processes, footprint, description.
    pub header: TraceHeader,
    /// Every chunk, in file order.
    pub chunks: Vec<ChunkEntry>,
    /// Chunks are zlib streams.
    pub compressed: bool,
    /// Format version of the file.
    pub version: u32,
}

/// Little-endian field reader over the directory bytes that names the absolute
/// file offset of whatever it cannot read.
struct Fields<'a> {
    data: &'a [u8],
    pos: usize,
    base: u64,
}

impl Fields<'_> {
    fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&[u8], String> {
        if self.data.len() - self.pos < n {
            return Err(format!(
                "byte offset {}: file ends inside the {what}",
                self.offset()
            ));
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn u16(&mut self, what: &str) -> Result<u16, String> {
        Ok(u16::from_le_bytes(
            self.take(2, what)?.try_into().expect("2 bytes"),
        ))
    }

    fn u32(&mut self, what: &str) -> Result<u32, String> {
        Ok(u32::from_le_bytes(
            self.take(4, what)?.try_into().expect("4 bytes"),
        ))
    }

    fn u64(&mut self, what: &str) -> Result<u64, String> {
        Ok(u64::from_le_bytes(
            self.take(8, what)?.try_into().expect("8 bytes"),
        ))
    }
}

impl TraceIndex {
    /// Read and check the preamble and directory of the trace in `r`. Errors name
    /// the byte offset of the first field that is wrong.
    pub fn read<R: Read + Seek>(r: &mut R) -> Result<TraceIndex, TraceError> {
        Self::read_inner(r).map_err(TraceError::new)
    }

    fn read_inner<R: Read + Seek>(r: &mut R) -> Result<TraceIndex, String> {
        let file_len = r
            .seek(SeekFrom::End(0))
            .map_err(|e| format!("cannot seek: {e}"))?;
        let mut pre = [0u8; PREAMBLE_BYTES as usize];
        r.seek(SeekFrom::Start(0))
            .map_err(|e| format!("cannot seek: {e}"))?;
        if file_len < PREAMBLE_BYTES {
            return Err(format!(
                "byte offset 0: {file_len} bytes is too short for a trace preamble ({PREAMBLE_BYTES} bytes)"
            ));
        }
        r.read_exact(&mut pre)
            .map_err(|e| format!("byte offset 0: cannot read the preamble: {e}"))?;
        if pre[..8] != MAGIC {
            return Err(format!(
                "byte offset 0: not a tierkit trace (magic {:?}, expected {:?})",
                String::from_utf8_lossy(&pre[..8]),
                String::from_utf8_lossy(&MAGIC)
            ));
        }
        let version = u32::from_le_bytes(pre[8..12].try_into().expect("4 bytes"));
        if version == 0 || version > VERSION {
            return Err(format!(
                "byte offset 8: trace format version {version} is not supported (this tierkit reads 1 to {VERSION})"
            ));
        }
        let flags = u32::from_le_bytes(pre[12..16].try_into().expect("4 bytes"));
        if flags & !KNOWN_FLAGS != 0 {
            return Err(format!(
                "byte offset 12: unknown flag bits {:#x} (version {VERSION} defines {KNOWN_FLAGS:#x})",
                flags & !KNOWN_FLAGS
            ));
        }
        let dir_offset = u64::from_le_bytes(pre[16..24].try_into().expect("8 bytes"));
        if dir_offset == 0 {
            return Err(
                "byte offset 16: the trace was never finished (no directory offset); was its writer interrupted?"
                    .into(),
            );
        }
        if dir_offset < PREAMBLE_BYTES || dir_offset >= file_len {
            return Err(format!(
                "byte offset 16: directory offset {dir_offset} is outside the file ({file_len} bytes)"
            ));
        }
        let dir_len = file_len - dir_offset;
        if dir_len > MAX_DIRECTORY_BYTES {
            return Err(format!(
                "byte offset {dir_offset}: directory of {dir_len} bytes is larger than the {MAX_DIRECTORY_BYTES}-byte limit"
            ));
        }
        let mut data = vec![0u8; dir_len as usize];
        r.seek(SeekFrom::Start(dir_offset))
            .and_then(|_| r.read_exact(&mut data))
            .map_err(|e| format!("byte offset {dir_offset}: cannot read the directory: {e}"))?;
        let mut f = Fields {
            data: &data,
            pos: 0,
            base: dir_offset,
        };
        if f.take(8, "directory magic")? != DIRECTORY_MAGIC {
            return Err(format!(
                "byte offset {dir_offset}: directory magic is wrong (expected {:?})",
                String::from_utf8_lossy(&DIRECTORY_MAGIC)
            ));
        }
        let footprint_bytes = f.u64("footprint")?;
        let at = f.offset();
        let nr_processes = f.u32("process count")?;
        if nr_processes == 0 || nr_processes > MAX_PROCESSES {
            return Err(format!(
                "byte offset {at}: process count {nr_processes} is not in [1, {MAX_PROCESSES}]"
            ));
        }
        let mut processes = Vec::with_capacity(nr_processes as usize);
        let mut total_threads = 0u64;
        for i in 0..nr_processes {
            let at = f.offset();
            let nr_threads = f.u32("thread count")?;
            let mlp = f64::from_le_bytes(f.take(8, "mlp")?.try_into().expect("8 bytes"));
            let name_len = f.u16("process name length")? as usize;
            let name = std::str::from_utf8(f.take(name_len, "process name")?)
                .map_err(|_| format!("byte offset {at}: process {i}'s name is not UTF-8"))?
                .to_string();
            let p = ProcessShape {
                name,
                nr_threads,
                mlp,
            };
            check_process(i as usize, &p).map_err(|e| format!("byte offset {at}: {e}"))?;
            total_threads += p.nr_threads as u64;
            if total_threads > MAX_TOTAL_THREADS {
                return Err(format!(
                    "byte offset {at}: more than {MAX_TOTAL_THREADS} threads in all"
                ));
            }
            processes.push(p);
        }
        let at = f.offset();
        let desc_len = f.u32("description length")? as usize;
        let description = std::str::from_utf8(f.take(desc_len, "description")?)
            .map_err(|_| format!("byte offset {at}: the description is not UTF-8"))?
            .to_string();
        let at = f.offset();
        let nr_chunks = f.u64("chunk count")?;
        let left = (data.len() - f.pos) as u64;
        if nr_chunks.checked_mul(CHUNK_ENTRY_BYTES) != Some(left) {
            return Err(format!(
                "byte offset {at}: chunk count {nr_chunks} needs {} bytes of chunk table, the file has {left}",
                nr_chunks.saturating_mul(CHUNK_ENTRY_BYTES)
            ));
        }
        let compressed = flags & FLAG_ZLIB != 0;
        let mut chunks = Vec::with_capacity(nr_chunks as usize);
        let mut next = PREAMBLE_BYTES;
        for k in 0..nr_chunks {
            let at = f.offset();
            let c = ChunkEntry {
                offset: f.u64("chunk offset")?,
                process: f.u32("chunk process")?,
                thread: f.u32("chunk thread")?,
                nr_ops: f.u32("chunk record count")?,
                nr_accesses: f.u32("chunk access count")?,
                raw_len: f.u32("chunk raw length")?,
                stored_len: f.u32("chunk stored length")?,
            };
            let bad = |why: String| format!("byte offset {at}: chunk {k}: {why}");
            if c.offset != next {
                return Err(bad(format!(
                    "starts at {} but the previous chunk ends at {next}",
                    c.offset
                )));
            }
            next = c.offset + c.stored_len as u64;
            if next > dir_offset {
                return Err(bad(format!(
                    "runs to {next}, past the directory at {dir_offset}"
                )));
            }
            let Some(p) = processes.get(c.process as usize) else {
                return Err(bad(format!(
                    "process {} is not in the process table ({nr_processes} processes)",
                    c.process
                )));
            };
            if c.thread != PROLOGUE_THREAD && c.thread >= p.nr_threads {
                return Err(bad(format!(
                    "thread {} of process {} does not exist ({} threads)",
                    c.thread, c.process, p.nr_threads
                )));
            }
            if c.raw_len > MAX_CHUNK_RAW_BYTES || c.raw_len < c.nr_ops || c.nr_ops == 0 {
                return Err(bad(format!(
                    "{} records in {} raw bytes is impossible (1 to {MAX_CHUNK_RAW_BYTES} bytes, at least one byte per record)",
                    c.nr_ops, c.raw_len
                )));
            }
            if c.nr_accesses > c.nr_ops || (c.thread == PROLOGUE_THREAD && c.nr_accesses > 0) {
                return Err(bad(format!(
                    "{} accesses among {} records is impossible",
                    c.nr_accesses, c.nr_ops
                )));
            }
            if !compressed && c.stored_len != c.raw_len {
                return Err(bad(format!(
                    "stored length {} differs from raw length {} in an uncompressed trace",
                    c.stored_len, c.raw_len
                )));
            }
            chunks.push(c);
        }
        if next != dir_offset {
            return Err(format!(
                "byte offset {next}: {} bytes between the last chunk and the directory",
                dir_offset - next
            ));
        }
        Ok(TraceIndex {
            header: TraceHeader {
                shape: WorkloadShape {
                    processes,
                    footprint_bytes,
                },
                description,
            },
            chunks,
            compressed,
            version,
        })
    }

    /// Total access records in the trace.
    pub fn nr_accesses(&self) -> u64 {
        self.chunks.iter().map(|c| c.nr_accesses as u64).sum()
    }

    /// Total records in the trace.
    pub fn nr_ops(&self) -> u64 {
        self.chunks.iter().map(|c| c.nr_ops as u64).sum()
    }
}

/// Reads chunk payloads: the stored bytes at a chunk's offset, inflated if the
/// trace is compressed.
pub(crate) struct ChunkLoader {
    inflate: Decompress,
    zbuf: Vec<u8>,
}

impl ChunkLoader {
    pub(crate) fn new() -> ChunkLoader {
        ChunkLoader {
            inflate: Decompress::new(true),
            zbuf: Vec::new(),
        }
    }

    /// Load chunk `c` (number `k`) of `src` into `raw`.
    pub(crate) fn load<R: Read + Seek>(
        &mut self,
        src: &mut R,
        compressed: bool,
        k: usize,
        c: &ChunkEntry,
        raw: &mut Vec<u8>,
    ) -> Result<(), String> {
        let bad = |why: String| format!("chunk {k} at byte offset {}: {why}", c.offset);
        let target: &mut Vec<u8> = if compressed {
            &mut self.zbuf
        } else {
            &mut *raw
        };
        target.clear();
        target.resize(c.stored_len as usize, 0);
        src.seek(SeekFrom::Start(c.offset))
            .and_then(|_| src.read_exact(target))
            .map_err(|e| bad(format!("cannot read: {e}")))?;
        if compressed {
            raw.clear();
            raw.reserve(c.raw_len as usize);
            self.inflate.reset(true);
            let status = self
                .inflate
                .decompress_vec(&self.zbuf, raw, FlushDecompress::Finish)
                .map_err(|e| bad(format!("corrupt zlib data: {e}")))?;
            if status != Status::StreamEnd || raw.len() != c.raw_len as usize {
                return Err(bad(format!(
                    "inflates to {}{} bytes, the directory says {}",
                    raw.len(),
                    if status == Status::StreamEnd { "" } else { "+" },
                    c.raw_len
                )));
            }
        }
        Ok(())
    }
}

/// Decode every chunk of the trace in `src` and check it against the directory:
/// record counts, access counts, prologue chunks holding only mmaps. Returns the
/// number of access records.
pub fn verify<R: Read + Seek>(src: &mut R) -> Result<TraceIndex, TraceError> {
    let index = TraceIndex::read(src)?;
    let mut loader = ChunkLoader::new();
    let mut raw = Vec::new();
    for (k, c) in index.chunks.iter().enumerate() {
        loader
            .load(src, index.compressed, k, c, &mut raw)
            .map_err(TraceError::new)?;
        let mut dec = ChunkDecoder::new();
        let (mut ops, mut accesses) = (0u32, 0u32);
        let bad =
            |why: String| TraceError::new(format!("chunk {k} at byte offset {}: {why}", c.offset));
        while let Some(op) = dec.next(&raw).map_err(bad)? {
            ops += 1;
            if matches!(op, Op::Access { .. }) {
                accesses += 1;
                if c.thread == PROLOGUE_THREAD {
                    return Err(bad("an access in a prologue chunk".into()));
                }
            } else if c.thread == PROLOGUE_THREAD && !matches!(op, Op::Mmap { .. }) {
                return Err(bad(format!(
                    "{op:?} in a prologue chunk (only mmap is allowed)"
                )));
            }
        }
        if ops != c.nr_ops || accesses != c.nr_accesses {
            return Err(bad(format!(
                "decodes to {ops} records ({accesses} accesses), the directory says {} ({})",
                c.nr_ops, c.nr_accesses
            )));
        }
    }
    Ok(index)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn roundtrip(ops: &[Op]) -> Vec<Op> {
        let mut raw = Vec::new();
        let mut st = CodecState::default();
        for op in ops {
            encode_op(&mut raw, &mut st, op);
        }
        let mut dec = ChunkDecoder::new();
        let mut back = Vec::new();
        while let Some(op) = dec.next(&raw).unwrap() {
            back.push(op);
        }
        back
    }

    #[test]
    fn codec_round_trips_extremes_and_repeats_are_one_byte() {
        let ops = vec![
            Op::Access {
                addr: 0,
                write: false,
                gap_ns: 0,
            },
            Op::Access {
                addr: u64::MAX,
                write: true,
                gap_ns: u32::MAX,
            },
            Op::Access {
                addr: 1,
                write: false,
                gap_ns: 0,
            },
            Op::Mmap {
                addr: 1 << 47,
                len: 4096,
                kind: VmaKind::File,
            },
            Op::Munmap {
                addr: u64::MAX,
                len: u64::MAX,
            },
            Op::Access {
                addr: 1,
                write: true,
                gap_ns: 0,
            },
        ];
        assert_eq!(roundtrip(&ops), ops);
        // An access repeating the previous address and gap is a single tag byte.
        let mut raw = Vec::new();
        let mut st = CodecState::default();
        encode_op(&mut raw, &mut st, &ops[2]);
        let n = raw.len();
        encode_op(&mut raw, &mut st, &ops[5]);
        assert_eq!(raw.len(), n + 1);
    }

    #[test]
    fn decoder_rejects_reserved_bits_and_truncated_varints() {
        let mut dec = ChunkDecoder::new();
        assert!(dec.next(&[0x10]).unwrap_err().contains("reserved"));
        let mut dec = ChunkDecoder::new();
        assert!(dec.next(&[BIT_DELTA, 0x80]).unwrap_err().contains("varint"));
        let mut dec = ChunkDecoder::new();
        let e = dec.next(&[
            BIT_DELTA, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
        ]);
        assert!(e.unwrap_err().contains("overflows"));
    }

    proptest! {
        #[test]
        fn any_op_sequence_round_trips(
            raw_ops in prop::collection::vec((any::<u64>(), 0u8..4, any::<u32>(), any::<u64>()), 0..200)
        ) {
            let ops: Vec<Op> = raw_ops
                .into_iter()
                .map(|(a, k, g, l)| match k {
                    0 | 1 => Op::Access { addr: a, write: k == 1, gap_ns: g % 3 },
                    2 => Op::Mmap { addr: a, len: l, kind: if g % 2 == 0 { VmaKind::Anon } else { VmaKind::File } },
                    _ => Op::Munmap { addr: a, len: l },
                })
                .collect();
            prop_assert_eq!(roundtrip(&ops), ops);
        }

        #[test]
        fn decoder_never_panics_on_random_bytes(raw in prop::collection::vec(any::<u8>(), 0..256)) {
            let mut dec = ChunkDecoder::new();
            for _ in 0..300 {
                match dec.next(&raw) {
                    Ok(Some(_)) => {}
                    Ok(None) | Err(_) => break,
                }
            }
        }
    }
}
