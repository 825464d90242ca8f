//! damo (DAMON user-space tool) record files.
//!
//! `damo record` writes, by default, zlib-compressed JSON (`--output_type
//! json_compressed`); `--output_type json` writes it plain, and `damo report raw
//! --json [--raw_number]` prints the same document. Both are accepted (a zlib
//! stream is recognised by its header). The document is a list of records, one
//! per monitoring target (damo's `_damo_records.py`, `DamonRecord.to_kvpairs`):
//!
//! ```json
//! [{"kdamond_idx": 0, "context_idx": 0, "scheme_idx": null, "target_id": 0,
//!   "intervals": {"sample_us": "5000", "aggr_us": "100000", "ops_update_us": "1000000"},
//!   "snapshots": [
//!     {"start_time": "3185100000", "end_time": "3285100000", "total_bytes": "…",
//!      "regions": [{"start": "94743553343488", "end": "94743557537792",
//!                   "nr_accesses": {"samples": 12, "percent": null},
//!                   "age": {"usec": null, "aggr_intervals": "3"}, "sz_filter_passed": "0"}]}]}]
//! ```
//!
//! Numbers may be JSON numbers or strings: raw (`"5000"`), with thousands separators
//! (`"94,743,553,343,488"`), or, without `--raw_number`, with units (`"5 ms"`,
//! `"1 s 200 ms"`). `start_time`/`end_time` are ns, `*_us` µs. `nr_accesses` may be
//! `{"samples": n}`, `{"percent": p}` (of `aggr_us / sample_us`), or a bare number.
//! `age`, `total_bytes`, `sz_filter_passed` and scheme fields are not needed.
//!
//! **Replay.** Each record becomes a process (`damo target ID`) with one thread.
//! DAMON's `nr_accesses` of a region is the number of sampling intervals of the
//! aggregation window in which the region's sampled page was found accessed;
//! DAMON assumes all pages of a region are alike. So in a snapshot
//! `[start_time, end_time)` region `r` of `pages_r` 4 KiB pages gets
//! `round(nr_accesses_r × pages_r × damo_accesses_per_sample)` accesses — at least
//! one per page per interval in which it was seen accessed — at uniformly random
//! cache lines of the region (a fixed-seed generator, so imports are
//! deterministic), evenly spread in time over the snapshot: access `j` of `c_r` at
//! `start + (j + ½)·(end − start)/c_r`, all regions merged in time order. The gaps
//! between consecutive accesses carry the time, so a snapshot lasts as long as it
//! did. DAMON does not tell reads from writes: every access is a read. With
//! [`ImportOptions::damo_init_touch`] each page of a target's first snapshot is
//! written once first (in address order), so the monitored memory is resident as it
//! was. Mappings are synthesized over the accessed 2 MiB ranges (with the initial
//! touch, over every monitored region).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{BufRead, Read, Seek, Write};

use serde_json::Value;
use tierkit_core::PAGE_SIZE;

use super::{ImportOptions, Sink, MAX_ADDRESS};
use crate::common::below;
use crate::trace::TraceError;

const WHAT: &str = "damo";
/// Largest decompressed document accepted.
const MAX_JSON_BYTES: u64 = 4 << 30;
/// Most accesses one snapshot (or one initial touch) may expand to.
const MAX_ACCESSES_PER_SNAPSHOT: u64 = 1 << 32;
/// DAMON's default intervals (`damo` and the kernel): used when a record has none.
const DEFAULT_SAMPLE_US: u64 = 5_000;
const DEFAULT_AGGR_US: u64 = 100_000;

/// A region of a snapshot: `[start, end)` and its DAMON access count in samples.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Region {
    start: u64,
    end: u64,
    samples: f64,
}

/// A snapshot: its window in ns and its regions.
#[derive(Debug, Clone, PartialEq)]
struct Snapshot {
    start_ns: u64,
    end_ns: u64,
    regions: Vec<Region>,
}

/// A monitoring target's record.
#[derive(Debug, Clone, PartialEq)]
struct Record {
    name: String,
    snapshots: Vec<Snapshot>,
}

/// Parse `input` into `sink`.
pub(crate) fn convert<R: BufRead, W: Write + Seek>(
    mut input: R,
    sink: &mut Sink<W>,
    opts: &ImportOptions,
) -> Result<(), TraceError> {
    let err = |why: String| TraceError::new(format!("{WHAT} input {why}"));
    let mut bytes = Vec::new();
    (&mut input)
        .take(MAX_JSON_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| err(format!("cannot be read: {e}")))?;
    let compressed = bytes.len() >= 2
        && bytes[0] & 0x0f == 8
        && (u16::from(bytes[0]) << 8 | u16::from(bytes[1])) % 31 == 0;
    if compressed {
        let mut plain = Vec::new();
        flate2::read::ZlibDecoder::new(&bytes[..])
            .take(MAX_JSON_BYTES + 1)
            .read_to_end(&mut plain)
            .map_err(|e| err(format!("looks zlib-compressed but does not inflate: {e}")))?;
        bytes = plain;
    }
    if bytes.len() as u64 > MAX_JSON_BYTES {
        return Err(err(format!("is larger than {MAX_JSON_BYTES} bytes")));
    }
    let doc: Value = serde_json::from_slice(&bytes).map_err(|e| {
        err(format!(
            "line {}, column {}{}: invalid JSON: {e}",
            e.line(),
            e.column(),
            if compressed {
                " (of the inflated text)"
            } else {
                ""
            }
        ))
    })?;
    sink.stats.lines = bytes.iter().filter(|&&b| b == b'\n').count() as u64 + 1;
    let records = parse_records(&doc).map_err(|why| err(format!("at {why}")))?;
    let t0 = records
        .iter()
        .filter_map(|r| r.snapshots.first())
        .map(|s| s.start_ns)
        .min()
        .unwrap_or(0);
    for (ri, rec) in records.iter().enumerate() {
        replay_record(ri, rec, t0, sink, opts)
            .map_err(|why| err(format!("at records[{ri}]{why}")))?;
    }
    Ok(())
}

/// Emit one record's accesses.
fn replay_record<W: Write + Seek>(
    ri: usize,
    rec: &Record,
    t0: u64,
    sink: &mut Sink<W>,
    opts: &ImportOptions,
) -> Result<(), String> {
    let Some(first) = rec.snapshots.first() else {
        return Ok(());
    };
    let name = rec.name.clone();
    let (p, t) = sink.thread(ri as u64, 0, || name);
    let mut rng = crate::thread_rng(0, ri, 0);
    let io = |e: TraceError| format!(": {e}");
    if opts.damo_init_touch {
        let pages: u64 = first.regions.iter().map(nr_pages).sum();
        if pages > MAX_ACCESSES_PER_SNAPSHOT {
            return Err(format!(
                ".snapshots[0]: the initial touch would be {pages} accesses, more than {MAX_ACCESSES_PER_SNAPSHOT}"
            ));
        }
        for r in &first.regions {
            let mut a = r.start.div_ceil(PAGE_SIZE) * PAGE_SIZE;
            if a >= r.end {
                a = r.start;
            }
            while a < r.end {
                sink.access(p, t, a, true, 0).map_err(io)?;
                a += PAGE_SIZE;
            }
        }
    }
    let mut now = t0;
    let mut heap: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    for (si, snap) in rec.snapshots.iter().enumerate() {
        let dur = (snap.end_ns - snap.start_ns).max(1) as u128;
        let counts: Vec<u64> = snap
            .regions
            .iter()
            .map(|r| {
                (r.samples * nr_pages(r) as f64 * opts.damo_accesses_per_sample).round() as u64
            })
            .collect();
        let total = counts.iter().fold(0u64, |a, &c| a.saturating_add(c));
        if total > MAX_ACCESSES_PER_SNAPSHOT {
            return Err(format!(
                ".snapshots[{si}]: {total} accesses, more than the {MAX_ACCESSES_PER_SNAPSHOT} one snapshot may expand to; lower damo_accesses_per_sample"
            ));
        }
        let at = |r: usize, j: u64| -> u64 {
            let c = counts[r] as u128;
            snap.start_ns + ((2 * j as u128 + 1) * dur / (2 * c)) as u64
        };
        heap.clear();
        let mut next_j = vec![0u64; counts.len()];
        for (r, &c) in counts.iter().enumerate() {
            if c > 0 {
                heap.push(Reverse((at(r, 0), r)));
            }
        }
        while let Some(Reverse((time, r))) = heap.pop() {
            let reg = &snap.regions[r];
            let offset = below(&mut rng, reg.end - reg.start);
            let addr = ((reg.start + offset) & !63).max(reg.start);
            let ns = time.saturating_sub(now);
            let gap = if ns > u32::MAX as u64 {
                sink.stats.gaps_clamped += 1;
                u32::MAX
            } else {
                ns as u32
            };
            now = now.max(time);
            sink.access(p, t, addr, false, gap).map_err(io)?;
            next_j[r] += 1;
            if next_j[r] < counts[r] {
                heap.push(Reverse((at(r, next_j[r]), r)));
            }
        }
    }
    Ok(())
}

fn nr_pages(r: &Region) -> u64 {
    (r.end - r.start).div_ceil(PAGE_SIZE)
}

// ---------------------------------------------------------------------------------
// Schema

fn parse_records(doc: &Value) -> Result<Vec<Record>, String> {
    let list = match doc {
        Value::Array(a) => a,
        // A single record object is accepted too.
        Value::Object(_) => std::slice::from_ref(doc),
        _ => return Err("the top level: expected a list of records".into()),
    };
    list.iter()
        .enumerate()
        .map(|(i, r)| parse_record(r, &format!("records[{i}]")))
        .collect()
}

fn parse_record(v: &Value, path: &str) -> Result<Record, String> {
    let obj = v
        .as_object()
        .ok_or_else(|| format!("{path}: expected an object"))?;
    let name = match obj.get("target_id") {
        Some(Value::Number(n)) => format!("damo target {n}"),
        Some(Value::String(s)) => format!("damo target {s}"),
        _ => format!("damo {path}"),
    };
    let (sample_us, aggr_us) = match obj.get("intervals") {
        None | Some(Value::Null) => (DEFAULT_SAMPLE_US, DEFAULT_AGGR_US),
        Some(iv) => {
            let p = format!("{path}.intervals");
            let s = time(
                field(iv, "sample_us", &p)?,
                1_000,
                &format!("{p}.sample_us"),
            )? / 1_000;
            let a = time(field(iv, "aggr_us", &p)?, 1_000, &format!("{p}.aggr_us"))? / 1_000;
            if s == 0 || a < s {
                return Err(format!(
                    "{p}: sample_us {s} and aggr_us {a} must satisfy 0 < sample_us <= aggr_us"
                ));
            }
            (s, a)
        }
    };
    let max_samples = (aggr_us / sample_us) as f64;
    let snaps = field(v, "snapshots", path)?
        .as_array()
        .ok_or_else(|| format!("{path}.snapshots: expected a list"))?;
    let mut snapshots = Vec::with_capacity(snaps.len());
    let mut prev_end: Option<u64> = None;
    for (i, s) in snaps.iter().enumerate() {
        let p = format!("{path}.snapshots[{i}]");
        let end_ns = time(field(s, "end_time", &p)?, 1, &format!("{p}.end_time"))?;
        let start_ns = match s.get("start_time") {
            None | Some(Value::Null) => prev_end.unwrap_or(end_ns.saturating_sub(aggr_us * 1_000)),
            Some(t) => time(t, 1, &format!("{p}.start_time"))?,
        };
        if end_ns < start_ns {
            return Err(format!(
                "{p}: end_time {end_ns} is before start_time {start_ns}"
            ));
        }
        if prev_end.is_some_and(|e| start_ns < e) {
            return Err(format!(
                "{p}: start_time {start_ns} is before the previous snapshot's end"
            ));
        }
        prev_end = Some(end_ns);
        let regs = field(s, "regions", &p)?
            .as_array()
            .ok_or_else(|| format!("{p}.regions: expected a list"))?;
        let mut regions = Vec::with_capacity(regs.len());
        for (j, r) in regs.iter().enumerate() {
            let rp = format!("{p}.regions[{j}]");
            let start = int(field(r, "start", &rp)?, &format!("{rp}.start"))?;
            let end = int(field(r, "end", &rp)?, &format!("{rp}.end"))?;
            let samples = accesses(
                field(r, "nr_accesses", &rp)?,
                max_samples,
                &format!("{rp}.nr_accesses"),
            )?;
            if start == 0 && end == 0 {
                continue; // damo's placeholder region of a fake last snapshot
            }
            if end <= start || end > MAX_ADDRESS {
                return Err(format!(
                    "{rp}: [{start:#x}, {end:#x}) is not a non-empty range below 2^56"
                ));
            }
            regions.push(Region {
                start,
                end,
                samples,
            });
        }
        snapshots.push(Snapshot {
            start_ns,
            end_ns,
            regions,
        });
    }
    Ok(Record { name, snapshots })
}

fn field<'a>(v: &'a Value, key: &str, path: &str) -> Result<&'a Value, String> {
    v.get(key)
        .ok_or_else(|| format!("{path}: `{key}` is missing"))
}

/// A non-negative integer: a JSON number or a decimal string (commas allowed).
fn int(v: &Value, path: &str) -> Result<u64, String> {
    let bad = || format!("{path}: expected a non-negative integer, got {v}");
    match v {
        Value::Number(n) => n
            .as_u64()
            .or_else(|| {
                n.as_f64()
                    .filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f < 1.8e19)
                    .map(|f| f as u64)
            })
            .ok_or_else(bad),
        Value::String(s) => {
            let digits: String = s.trim().chars().filter(|&c| c != ',').collect();
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            digits.parse().map_err(|_| bad())
        }
        _ => Err(bad()),
    }
}

/// A non-negative decimal number (commas allowed).
fn decimal(s: &str) -> Option<f64> {
    let d: String = s.chars().filter(|&c| c != ',').collect();
    if d.is_empty() || !d.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    d.parse::<f64>().ok().filter(|f| f.is_finite())
}

/// A duration in ns: a bare number counts in `unit_ns`; a string may carry units
/// as damo prints them (`5 ms`, `1 m 3 s 200 ms`).
fn time(v: &Value, unit_ns: u64, path: &str) -> Result<u64, String> {
    let bad = || format!("{path}: expected a time, got {v}");
    if let Ok(n) = int(v, path) {
        return n.checked_mul(unit_ns).ok_or_else(bad);
    }
    let s = v.as_str().ok_or_else(bad)?;
    let toks: Vec<&str> = s.split_whitespace().collect();
    if toks.is_empty() || !toks.len().is_multiple_of(2) {
        return Err(bad());
    }
    let mut ns = 0f64;
    for pair in toks.chunks(2) {
        let x = decimal(pair[0]).ok_or_else(bad)?;
        let u = match pair[1] {
            "ns" => 1.0,
            "us" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "d" => 86400e9,
            _ => return Err(bad()),
        };
        ns += x * u;
    }
    if ns >= 1.8e19 {
        return Err(bad());
    }
    Ok(ns.round() as u64)
}

/// `nr_accesses` in samples.
fn accesses(v: &Value, max_samples: f64, path: &str) -> Result<f64, String> {
    let bad = || format!("{path}: expected samples or percent, got {v}");
    let plain = |x: &Value, p: &str| -> Result<f64, String> {
        match x {
            Value::Number(n) => n
                .as_f64()
                .filter(|f| *f >= 0.0 && f.is_finite())
                .ok_or_else(bad),
            Value::String(s) => decimal(s.trim_end_matches('%').trim())
                .ok_or_else(|| format!("{p}: expected a number, got {x}")),
            _ => Err(bad()),
        }
    };
    let n = match v {
        Value::Object(o) => match (o.get("samples"), o.get("percent")) {
            (Some(s), _) if !s.is_null() => plain(s, &format!("{path}.samples"))?,
            (_, Some(p)) if !p.is_null() => {
                plain(p, &format!("{path}.percent"))? * max_samples / 100.0
            }
            _ => return Err(bad()),
        },
        other => plain(other, path)?,
    };
    if n > 1e9 {
        return Err(format!(
            "{path}: {n} samples is implausible (more than 10^9)"
        ));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{accesses as acc_of, drain};
    use crate::trace::import::{import, ImportFormat, ImportStats};
    use crate::trace::TraceWorkload;
    use proptest::prelude::*;
    use std::io::Cursor;
    use tierkit_core::Workload;

    fn run_with(input: &[u8], opts: &ImportOptions) -> Result<(Vec<u8>, ImportStats), String> {
        import(ImportFormat::Damo, input, Cursor::new(Vec::new()), opts)
            .map(|(c, s)| (c.into_inner(), s))
            .map_err(|e| e.to_string())
    }

    fn run(input: &[u8]) -> Result<(Vec<u8>, ImportStats), String> {
        run_with(input, &ImportOptions::default())
    }

    fn sample() -> Vec<u8> {
        std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/data/damo-record.json"
        ))
        .unwrap()
    }

    #[test]
    fn sample_record_replays_regions_at_their_rates() {
        let no_touch = ImportOptions {
            damo_init_touch: false,
            ..ImportOptions::default()
        };
        let (bytes, stats) = run_with(&sample(), &no_touch).unwrap();
        assert_eq!(
            crate::trace::import::check::replay_is_consistent(&bytes),
            stats.trace.accesses
        );
        let doc: Value = serde_json::from_slice(&sample()).unwrap();
        let recs = parse_records(&doc).unwrap();
        let mut w = TraceWorkload::from_reader(Cursor::new(bytes), "damo", 1.0).unwrap();
        assert_eq!(w.shape().processes.len(), recs.len());
        assert_eq!(w.shape().processes[0].name, "damo target 0");
        let d = drain(&mut w);
        let acc: Vec<_> = acc_of(&d.streams[0][0]).collect();
        // Per snapshot and region: exactly round(samples × pages) accesses inside
        // the region, all reads.
        let mut k = 0;
        for s in &recs[0].snapshots {
            let expect: u64 = s
                .regions
                .iter()
                .map(|r| (r.samples * nr_pages(r) as f64).round() as u64)
                .sum();
            let window = &acc[k..k + expect as usize];
            for r in &s.regions {
                let n = window
                    .iter()
                    .filter(|a| a.0 >= r.start && a.0 < r.end)
                    .count() as u64;
                assert_eq!(n, (r.samples * nr_pages(r) as f64).round() as u64);
            }
            assert!(window.iter().all(|a| !a.1));
            // The gaps inside a snapshot add up to (almost) its length.
            let inner: u64 = window[1..].iter().map(|a| a.2 as u64).sum();
            let len = s.end_ns - s.start_ns;
            assert!(inner <= len && inner >= len / 2, "{inner} vs {len}");
            k += expect as usize;
        }
        assert_eq!(k, acc.len());
        assert_eq!(stats.trace.accesses, acc.len() as u64);
        crate::testutil::check_imported_structure(&w, &d);
    }

    #[test]
    fn initial_touch_writes_every_page_of_the_first_snapshot_once() {
        let (bytes, _) = run(&sample()).unwrap();
        let d = drain(&mut TraceWorkload::from_reader(Cursor::new(bytes), "damo", 1.0).unwrap());
        let doc: Value = serde_json::from_slice(&sample()).unwrap();
        let recs = parse_records(&doc).unwrap();
        let pages: u64 = recs[0].snapshots[0].regions.iter().map(nr_pages).sum();
        let acc: Vec<_> = acc_of(&d.streams[0][0]).take(pages as usize).collect();
        assert!(acc.iter().all(|a| a.1 && a.2 == 0 && a.0 % PAGE_SIZE == 0));
        let mut sorted: Vec<u64> = acc.iter().map(|a| a.0).collect();
        sorted.dedup();
        assert_eq!(sorted.len() as u64, pages);
    }

    #[test]
    fn compressed_records_and_human_numbers_are_accepted() {
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&sample()).unwrap();
        let packed = z.finish().unwrap();
        let (a, _) = run(&sample()).unwrap();
        let (b, _) = run(&packed).unwrap();
        assert_eq!(a, b, "zlib-compressed input imports to the same trace");
        let human = r#"[{"target_id": 7, "intervals": {"sample_us": "5 ms", "aggr_us": "100 ms", "ops_update_us": "1 s"},
            "snapshots": [{"start_time": "1 s 500 ms", "end_time": "1 s 600 ms",
              "regions": [{"start": "1,048,576", "end": "1,056,768", "nr_accesses": {"samples": null, "percent": 50}}]}]}]"#;
        let (bytes, stats) = run(human.as_bytes()).unwrap();
        // 2 pages, 50% of 20 samples = 10 each, plus the initial touch of 2 pages.
        assert_eq!(stats.trace.accesses, 2 + 20);
        let w = TraceWorkload::from_reader(Cursor::new(bytes), "h", 1.0).unwrap();
        assert_eq!(w.shape().processes[0].name, "damo target 7");
    }

    #[test]
    fn malformed_records_are_named() {
        for (input, needle) in [
            (&b"[{\"snapshots\": 3}"[..], "damo input line 1, column 17: invalid JSON"),
            (b"{\"x\": 1}", "records[0]: `snapshots` is missing"),
            (b"[{\"snapshots\": [{\"end_time\": 5, \"regions\": [{\"start\": 4096, \"end\": 0, \"nr_accesses\": 1}]}]}]", "records[0].snapshots[0].regions[0]: [0x1000, 0x0) is not"),
            (b"[{\"snapshots\": [{\"end_time\": \"soon\", \"regions\": []}]}]", "records[0].snapshots[0].end_time: expected a time"),
            (b"[{\"snapshots\": [{\"end_time\": 9, \"regions\": [{\"start\": 0, \"end\": 4096, \"nr_accesses\": {\"age\": 1}}]}]}]", "nr_accesses: expected samples or percent"),
            (b"[{\"snapshots\": [{\"start_time\": 0, \"end_time\": 9, \"regions\": [{\"start\": 0, \"end\": 72057594037927936, \"nr_accesses\": 20}]}]}]", "more than"),
            (b"[]", "no memory accesses"),
            (b"\x78\x9c\x01\x02", "does not inflate"),
        ] {
            let e = run(input).unwrap_err();
            assert!(e.contains(needle), "{e:?} should contain {needle:?}");
            assert!(!e.contains('\n'));
        }
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(input in prop::collection::vec(any::<u8>(), 0..512)) {
            let _ = run(&input);
        }

        #[test]
        fn random_records_never_panic(
            snaps in prop::collection::vec(
                (any::<u64>(), 0u64..1_000_000, prop::collection::vec((any::<u64>(), 0u64..(1 << 18), any::<i32>()), 0..4)),
                0..4,
            )
        ) {
            let snapshots: Vec<Value> = snaps
                .iter()
                .map(|(start, len, regions)| {
                    serde_json::json!({
                        "start_time": start % (1 << 40),
                        "end_time": (start % (1 << 40)) + len,
                        "regions": regions.iter().map(|(s, l, n)| serde_json::json!({
                            "start": s % (1 << 57),
                            "end": (s % (1 << 57)).saturating_add(*l),
                            "nr_accesses": {"samples": n % 40, "percent": null},
                        })).collect::<Vec<_>>(),
                    })
                })
                .collect();
            let doc = serde_json::json!([{ "target_id": 1, "intervals": null, "snapshots": snapshots }]);
            let _ = run(doc.to_string().as_bytes());
        }
    }
}
