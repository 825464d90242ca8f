//! Generate once, replay many: a workload's streams recorded in memory.
//!
//! A thread's access stream does not depend on page placement, so within a comparison
//! every policy on one workload (same config, seed and sample rate) consumes the same
//! streams. `tierkit compare` records each workload once with [`Recording::record`]
//! and hands every run a [`Replay`], instead of regenerating the streams for each
//! policy. Replay yields exactly the operations recorded, so a run is byte-identical
//! whether its workload was generated or replayed.
//!
//! Encoding, per thread, one record per operation: a tag byte (bits 0–1: read, write,
//! mmap, munmap; bit 2: a nonzero compute gap follows), then LEB128 varints — for an
//! access the zigzag delta of its address from the thread's previous access and the
//! gap; for a mapping its address and length (and, for mmap, its kind). Random
//! accesses cost about 4–5 bytes, sequential ones 2.

use std::sync::Arc;
use tierkit_core::{Op, RegionSampler, VmaKind, Workload, WorkloadShape};

const READ: u8 = 0;
const WRITE: u8 = 1;
const MMAP: u8 = 2;
const MUNMAP: u8 = 3;
const HAS_GAP: u8 = 4;
/// The fewest bytes an access is encoded in.
const MIN_ACCESS_BYTES: u64 = 2;

/// Every stream of a workload, recorded.
pub struct Recording {
    shape: WorkloadShape,
    prologues: Vec<Vec<Op>>,
    /// One encoded stream per thread, process-major (the machine's thread order).
    streams: Vec<Vec<u8>>,
    /// First stream index of each process.
    first_stream: Vec<usize>,
    accesses: u64,
    /// The sampler the recorded workload was restricted with, if sampled.
    sampler: Option<RegionSampler>,
}

impl Recording {
    /// Drain `workload` (fresh: nothing filled yet) into a recording. `sampler` names
    /// the sampler the workload was already restricted to, if any, so a replay can
    /// tell the machine it needs no filtering.
    pub fn record(workload: &mut dyn Workload, sampler: Option<RegionSampler>) -> Recording {
        Self::record_within(workload, sampler, u64::MAX)
            .expect("a recording without a budget always completes")
    }

    /// Like [`Recording::record`], but give up and return `None` as soon as the
    /// encoded streams exceed `max_bytes`: a long exact workload can take more memory
    /// than the host has (1.8 G accesses of a 30-minute hot-shift take ~12 GB), and
    /// its runs are better off generating it again each.
    pub fn record_within(
        workload: &mut dyn Workload,
        sampler: Option<RegionSampler>,
        max_bytes: u64,
    ) -> Option<Recording> {
        // Every access takes at least two bytes (a tag and a one-byte delta): a workload
        // that announces more accesses than fit is not started.
        if let Some(n) = workload.expected_accesses() {
            if n.saturating_mul(MIN_ACCESS_BYTES) > max_bytes {
                return None;
            }
        }
        // Bytes of the streams already finished; the current one is `enc`.
        let mut finished_bytes = 0u64;
        let shape = workload.shape();
        let mut prologues = Vec::with_capacity(shape.processes.len());
        let mut streams = Vec::new();
        let mut first_stream = Vec::with_capacity(shape.processes.len());
        let mut accesses = 0;
        let mut buf = Vec::new();
        for (p, proc_shape) in shape.processes.iter().enumerate() {
            let mut prologue = Vec::new();
            workload.prologue(p, &mut prologue);
            prologues.push(prologue);
            first_stream.push(streams.len());
            for t in 0..proc_shape.nr_threads as usize {
                let mut enc = Vec::new();
                let mut last = 0u64;
                loop {
                    buf.clear();
                    workload.fill(p, t, &mut buf);
                    if buf.is_empty() {
                        break;
                    }
                    for op in &buf {
                        accesses += matches!(op, Op::Access { .. }) as u64;
                        encode(op, &mut last, &mut enc);
                    }
                    if finished_bytes + enc.len() as u64 > max_bytes {
                        return None;
                    }
                }
                enc.shrink_to_fit();
                finished_bytes += enc.len() as u64;
                streams.push(enc);
            }
        }
        Some(Recording {
            shape,
            prologues,
            streams,
            first_stream,
            accesses,
            sampler,
        })
    }

    /// Accesses recorded (all threads).
    pub fn accesses(&self) -> u64 {
        self.accesses
    }

    /// Bytes the encoded streams take.
    pub fn encoded_bytes(&self) -> u64 {
        self.streams.iter().map(|s| s.len() as u64).sum()
    }

    /// A fresh replay from the start of every stream.
    pub fn replay(self: &Arc<Self>) -> Replay {
        Replay {
            rec: Arc::clone(self),
            cursor: vec![0; self.streams.len()],
            last: vec![0; self.streams.len()],
        }
    }
}

/// A workload that replays a [`Recording`].
pub struct Replay {
    rec: Arc<Recording>,
    cursor: Vec<usize>,
    last: Vec<u64>,
}

/// Operations a replay hands out per fill, as generators do.
const REPLAY_BATCH: usize = crate::BATCH_OPS;

impl Workload for Replay {
    fn shape(&self) -> WorkloadShape {
        self.rec.shape.clone()
    }

    fn prologue(&mut self, process: usize, out: &mut Vec<Op>) {
        if let Some(p) = self.rec.prologues.get(process) {
            out.extend_from_slice(p);
        }
    }

    fn fill(&mut self, process: usize, thread: usize, out: &mut Vec<Op>) {
        let Some(&first) = self.rec.first_stream.get(process) else {
            return;
        };
        let s = first + thread;
        let Some(stream) = self.rec.streams.get(s) else {
            return;
        };
        let mut pos = self.cursor[s];
        let mut last = self.last[s];
        while pos < stream.len() && out.len() < REPLAY_BATCH {
            out.push(decode(stream, &mut pos, &mut last));
        }
        self.cursor[s] = pos;
        self.last[s] = last;
    }

    fn restrict_to(&mut self, sampler: &RegionSampler) -> bool {
        self.rec.sampler.as_ref() == Some(sampler)
    }

    fn time_sampled_pages(
        &mut self,
        _sampler: &RegionSampler,
        _min_share: f64,
    ) -> Vec<(u32, tierkit_core::Vpn)> {
        // The recorded stream was thinned for these pages; the machine replaying it
        // must sample them in time too.
        self.rec
            .sampler
            .as_ref()
            .map_or_else(Vec::new, |s| s.time_sampled().to_vec())
    }

    fn expected_accesses(&self) -> Option<u64> {
        Some(self.rec.accesses)
    }
}

fn put_varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Read the varint at `pos`. Random accesses over a large space give deltas of four
/// to six bytes whose length varies from record to record, so a loop that stops at
/// the last byte mispredicts its exit on most records; eight bytes are read at once
/// instead, the record's length found from their continuation bits, and the 7-bit
/// groups gathered without a branch. Records longer than eight bytes (values of 2^56
/// and more) and the buffer's last seven bytes take the loop.
#[inline]
fn get_varint(buf: &[u8], pos: &mut usize) -> u64 {
    if let Some(bytes) = buf.get(*pos..*pos + 8) {
        let word = u64::from_le_bytes(bytes.try_into().expect("eight bytes"));
        let stops = !word & 0x8080_8080_8080_8080;
        if stops != 0 {
            let len = (stops.trailing_zeros() / 8 + 1) as usize;
            *pos += len;
            let w = word & (u64::MAX >> (64 - 8 * len)) & 0x7f7f_7f7f_7f7f_7f7f;
            return (w & 0x7f)
                | ((w >> 1) & (0x7f << 7))
                | ((w >> 2) & (0x7f << 14))
                | ((w >> 3) & (0x7f << 21))
                | ((w >> 4) & (0x7f << 28))
                | ((w >> 5) & (0x7f << 35))
                | ((w >> 6) & (0x7f << 42))
                | ((w >> 7) & (0x7f << 49));
        }
    }
    get_varint_bytewise(buf, pos)
}

/// [`get_varint`] one byte at a time.
fn get_varint_bytewise(buf: &[u8], pos: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let b = buf[*pos];
        *pos += 1;
        v |= ((b & 0x7f) as u64) << shift;
        if b < 0x80 {
            return v;
        }
        shift += 7;
    }
}

/// Append `op`'s record to `out`; `last` is the thread's previous access address.
pub(crate) fn encode(op: &Op, last: &mut u64, out: &mut Vec<u8>) {
    match *op {
        Op::Access {
            addr,
            write,
            gap_ns,
        } => {
            let tag = if write { WRITE } else { READ } | if gap_ns != 0 { HAS_GAP } else { 0 };
            out.push(tag);
            let delta = addr.wrapping_sub(*last) as i64;
            put_varint(((delta << 1) ^ (delta >> 63)) as u64, out);
            if gap_ns != 0 {
                put_varint(gap_ns as u64, out);
            }
            *last = addr;
        }
        Op::Mmap { addr, len, kind } => {
            out.push(MMAP);
            put_varint(addr, out);
            put_varint(len, out);
            out.push((kind == VmaKind::File) as u8);
        }
        Op::Munmap { addr, len } => {
            out.push(MUNMAP);
            put_varint(addr, out);
            put_varint(len, out);
        }
    }
}

/// Decode the record at `pos`. The buffer was written by [`encode`] in this process,
/// so it is well formed by construction.
#[inline]
pub(crate) fn decode(buf: &[u8], pos: &mut usize, last: &mut u64) -> Op {
    let tag = buf[*pos];
    *pos += 1;
    match tag & 3 {
        READ | WRITE => {
            let z = get_varint(buf, pos);
            let delta = ((z >> 1) as i64) ^ -((z & 1) as i64);
            let addr = last.wrapping_add(delta as u64);
            *last = addr;
            let gap_ns = if tag & HAS_GAP != 0 {
                get_varint(buf, pos) as u32
            } else {
                0
            };
            Op::Access {
                addr,
                write: tag & 3 == WRITE,
                gap_ns,
            }
        }
        MMAP => {
            let addr = get_varint(buf, pos);
            let len = get_varint(buf, pos);
            let kind = if buf[*pos] == 1 {
                VmaKind::File
            } else {
                VmaKind::Anon
            };
            *pos += 1;
            Op::Mmap { addr, len, kind }
        }
        _ => {
            let addr = get_varint(buf, pos);
            let len = get_varint(buf, pos);
            Op::Munmap { addr, len }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::drain;
    use crate::WorkloadConfig;

    #[test]
    fn varints_read_back_at_every_length_and_near_the_buffer_end() {
        let mut values = vec![0, 1, 127, 128, 16_383, 16_384, u64::MAX, u64::MAX / 3];
        for bits in 1..64 {
            values.extend([(1u64 << bits) - 1, 1u64 << bits, (1u64 << bits) + 1]);
        }
        // A short record last: the buffer's tail takes the bytewise path.
        values.push(5);
        let mut buf = Vec::new();
        for &v in &values {
            put_varint(v, &mut buf);
        }
        let mut pos = 0;
        for &v in &values {
            let mut slow = pos;
            assert_eq!(get_varint_bytewise(&buf, &mut slow), v);
            assert_eq!(get_varint(&buf, &mut pos), v);
            assert_eq!(pos, slow, "{v}: both stop after the record");
        }
        assert_eq!(pos, buf.len());
    }

    #[test]
    fn replay_yields_exactly_the_generated_streams() {
        for (name, fields) in [
            (
                "gups",
                r#""footprint_mib": 16, "nr_updates": 20000, "nr_threads": 3"#,
            ),
            ("pmbench", r#""footprint_mib": 8, "nr_accesses": 30000"#),
            ("mix", r#""scale": 0.01"#),
        ] {
            let cfg: WorkloadConfig =
                serde_json::from_str(&format!(r#"{{"name": "{name}", {fields}}}"#)).unwrap();
            let expected = drain(&mut *cfg.build(5));
            let rec = Arc::new(Recording::record(&mut *cfg.build(5), None));
            let got = drain(&mut rec.replay());
            assert_eq!(got.streams, expected.streams, "{name}");
            assert_eq!(
                format!("{:?}", got.mappings),
                format!("{:?}", expected.mappings),
                "{name}"
            );
            // A second replay of the same recording starts from the beginning.
            assert_eq!(drain(&mut rec.replay()).streams, expected.streams, "{name}");
            assert!(rec.encoded_bytes() < rec.accesses() * 8, "{name}");
        }
    }

    #[test]
    fn a_recording_over_its_budget_is_abandoned() {
        let cfg: WorkloadConfig = serde_json::from_str(
            r#"{"name": "pmbench", "footprint_mib": 8, "nr_accesses": 30000}"#,
        )
        .unwrap();
        let full = Recording::record(&mut *cfg.build(5), None);
        let bytes = full.encoded_bytes();
        // Exactly the bytes it needs: recorded, and the same streams.
        let fits = Recording::record_within(&mut *cfg.build(5), None, bytes).unwrap();
        assert_eq!(fits.encoded_bytes(), bytes);
        // One byte short: abandoned, though the announced accesses alone would fit.
        assert!(30_000 * MIN_ACCESS_BYTES < bytes - 1);
        assert!(Recording::record_within(&mut *cfg.build(5), None, bytes - 1).is_none());
        // A workload announcing more accesses than fit in two bytes each is not started.
        struct Announces(u64);
        impl Workload for Announces {
            fn shape(&self) -> WorkloadShape {
                panic!("started a workload whose announced accesses cannot fit")
            }
            fn prologue(&mut self, _: usize, _: &mut Vec<Op>) {}
            fn fill(&mut self, _: usize, _: usize, _: &mut Vec<Op>) {}
            fn expected_accesses(&self) -> Option<u64> {
                Some(self.0)
            }
        }
        assert!(Recording::record_within(&mut Announces(1000), None, 1999).is_none());
    }

    #[test]
    fn encoding_round_trips_extreme_values() {
        let ops = [
            Op::Access {
                addr: u64::MAX - 63,
                write: true,
                gap_ns: u32::MAX,
            },
            Op::Access {
                addr: 0,
                write: false,
                gap_ns: 0,
            },
            Op::Mmap {
                addr: 1 << 47,
                len: 1 << 40,
                kind: VmaKind::File,
            },
            Op::Munmap {
                addr: 4096,
                len: 8192,
            },
            Op::Access {
                addr: 1 << 46,
                write: false,
                gap_ns: 1,
            },
        ];
        let mut buf = Vec::new();
        let mut last = 0;
        for op in &ops {
            encode(op, &mut last, &mut buf);
        }
        let (mut pos, mut last) = (0, 0);
        for op in &ops {
            assert_eq!(&decode(&buf, &mut pos, &mut last), op);
        }
        assert_eq!(pos, buf.len());
    }
}
