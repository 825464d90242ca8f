//! Thin, testable wrappers over the Linux interfaces the daemon uses. Every parser
//! takes the file's text so it can be unit tested with fixtures; the readers that
//! open the real files are one-liners beside them.

pub mod caps;
pub mod damon;
pub mod move_pages;
pub mod numa;
pub mod perf;
pub mod procfs;
pub mod sampler;
mod syscalls;

/// Read a small sysfs/procfs file, trimmed; `None` if it cannot be read.
pub fn read_trim(path: impl AsRef<std::path::Path>) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// Parse a kernel cpu/node list (`0-3,8,10-11`); empty text is an empty list.
pub fn parse_list(text: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let a: u32 = a
                    .trim()
                    .parse()
                    .map_err(|_| format!("bad list item `{part}`"))?;
                let b: u32 = b
                    .trim()
                    .parse()
                    .map_err(|_| format!("bad list item `{part}`"))?;
                if b < a || b - a > 1 << 16 {
                    return Err(format!("bad list range `{part}`"));
                }
                out.extend(a..=b);
            }
            None => out.push(
                part.trim()
                    .parse()
                    .map_err(|_| format!("bad list item `{part}`"))?,
            ),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_ranges_and_singles() {
        assert_eq!(parse_list("0-2,5,7-8\n").unwrap(), vec![0, 1, 2, 5, 7, 8]);
        assert_eq!(parse_list("").unwrap(), Vec::<u32>::new());
        assert!(parse_list("3-1").is_err());
        assert!(parse_list("x").is_err());
    }
}
