//! The plain text format: one access per line.
//!
//! ```text
//! # comment lines and blank lines are skipped
//! R 0x7f3a2c001040
//! W 7f3a2c001080 120
//! ```
//!
//! Each line is `R` (read) or `W` (write, either case), a hexadecimal address (`0x`
//! optional) below 2^56, and optionally the compute gap before the access in
//! nanoseconds (decimal, default 0), separated by whitespace. All accesses belong to
//! one thread of one process named `text`; mappings are synthesized (see
//! [`super`]).

use std::io::{BufRead, Seek, Write};

use super::{line_error, parse_hex, quote, Lines, Sink, MAX_ADDRESS};
use crate::trace::TraceError;

const WHAT: &str = "text";

/// Parse `input` into `sink`.
pub(crate) fn convert<R: BufRead, W: Write + Seek>(
    input: R,
    sink: &mut Sink<W>,
) -> Result<(), TraceError> {
    let mut lines = Lines::new(input, WHAT);
    let (p, t) = sink.thread(0, 0, || "text".to_string());
    while let Some((n, line)) = lines.next_line()? {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (write, addr, gap) = parse_line(line).map_err(|why| line_error(WHAT, n, &why))?;
        sink.access(p, t, addr, write, gap)?;
    }
    sink.stats.lines = lines.count();
    Ok(())
}

fn parse_line(line: &str) -> Result<(bool, u64, u32), String> {
    let expected = || format!("expected `R|W HEX-ADDRESS [GAP_NS]`, got {}", quote(line));
    let mut it = line.split_whitespace();
    let write = match it.next() {
        Some("R" | "r") => false,
        Some("W" | "w") => true,
        _ => return Err(expected()),
    };
    let a = it.next().ok_or_else(expected)?;
    let addr = parse_hex(a)
        .ok_or_else(|| format!("`{}` is not a hexadecimal address", a.escape_debug()))?;
    if addr >= MAX_ADDRESS {
        return Err(format!(
            "address {addr:#x} is not below 2^56 (the user address space)"
        ));
    }
    let gap = match it.next() {
        None => 0,
        Some(g) => g.parse::<u32>().map_err(|_| {
            format!(
                "gap `{}` is not a whole number of ns in [0, {}]",
                g.escape_debug(),
                u32::MAX
            )
        })?,
    };
    if it.next().is_some() {
        return Err(expected());
    }
    Ok((write, addr, gap))
}

#[cfg(test)]
mod tests {
    use crate::testutil::drain;
    use crate::trace::import::{import, ImportFormat, ImportOptions};
    use crate::trace::TraceWorkload;
    use proptest::prelude::*;
    use std::io::Cursor;
    use tierkit_core::{Op, HUGE_PAGE_SIZE};

    fn run(input: &[u8]) -> Result<Vec<u8>, String> {
        import(
            ImportFormat::Text,
            input,
            Cursor::new(Vec::new()),
            &ImportOptions::default(),
        )
        .map(|(c, _)| c.into_inner())
        .map_err(|e| e.to_string())
    }

    #[test]
    fn sample_file_imports_with_synthesized_2mib_mappings() {
        let sample = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/data/sample.txt"
        ))
        .unwrap();
        let bytes = run(&sample).unwrap();
        let mut w = TraceWorkload::from_reader(Cursor::new(bytes.clone()), "text", 1.0).unwrap();
        let d = drain(&mut w);
        let accesses: Vec<_> = crate::testutil::accesses(&d.streams[0][0]).collect();
        let data_lines = std::str::from_utf8(&sample)
            .unwrap()
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
            .count();
        assert_eq!(accesses.len(), data_lines);
        assert_eq!(accesses[0], (0x7f3a_2c00_1040, false, 0));
        // Every mapping is whole 2 MiB ranges and every access lies in one.
        for m in &d.mappings {
            assert_eq!(m.addr % HUGE_PAGE_SIZE, 0);
            assert_eq!(m.len % HUGE_PAGE_SIZE, 0);
        }
        crate::testutil::check_imported_structure(&w, &d);
        assert!(d.streams[0][0]
            .iter()
            .all(|op| matches!(op, Op::Access { .. })));
        assert_eq!(
            crate::trace::import::check::replay_is_consistent(&bytes),
            data_lines as u64
        );
    }

    #[test]
    fn gaps_and_footprint() {
        let bytes = run(b"R 0x1000 5\nW 0x1000\nr 200000 7\n").unwrap();
        let mut w = TraceWorkload::from_reader(Cursor::new(bytes), "t", 1.0).unwrap();
        let d = drain(&mut w);
        let acc: Vec<_> = crate::testutil::accesses(&d.streams[0][0]).collect();
        assert_eq!(
            acc,
            vec![(0x1000, false, 5), (0x1000, true, 0), (0x200000, false, 7)]
        );
        // Two pages accessed, in different 2 MiB ranges: the footprint is the two
        // pages; the ranges, adjacent, become one 4 MiB mapping.
        assert_eq!(d.shape.footprint_bytes, 2 * tierkit_core::PAGE_SIZE);
        assert_eq!(d.mappings.len(), 1);
    }

    #[test]
    fn malformed_lines_are_named() {
        for (input, needle) in [
            (&b"R 0x10\nX 0x20\n"[..], "text input line 2: expected"),
            (b"R zz\n", "line 1: `zz` is not a hexadecimal"),
            (b"W 0x1 -3\n", "line 1: gap `-3`"),
            (b"W 0x1 3 4\n", "line 1: expected"),
            (
                b"R 0xffffffffffffffff\n",
                "line 1: address 0xffffffffffffffff is not below",
            ),
            (b"# nothing\n\n", "no memory accesses"),
            (b"R 1\n\xff\n", "line 2: not UTF-8"),
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
        fn random_plausible_lines_never_panic(
            lines in prop::collection::vec(("[RWrwX ]", "(0x)?[0-9a-fA-F]{0,18}", "( [0-9-]{0,11})?"), 0..40)
        ) {
            let text: String = lines.iter().map(|(a, b, c)| format!("{a} {b}{c}\n")).collect();
            let _ = run(text.as_bytes());
        }
    }
}
