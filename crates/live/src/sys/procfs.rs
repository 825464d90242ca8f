//! `/proc/PID/{maps,status,numa_maps,stat}` parsers and readers.

/// One line of `/proc/PID/maps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapEntry {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// `rwxp` / `rw-s` permission letters.
    pub perms: String,
    /// Inode of the backing file (0 for anonymous memory).
    pub inode: u64,
    /// Path or pseudo-name (`[heap]`, `[stack]`), empty for plain anonymous memory.
    pub path: String,
}

impl MapEntry {
    /// Private anonymous memory the daemon tiers: no file, private, readable or
    /// writable (PROT_NONE guard areas hold no pages), the heap or unnamed/`[anon:]`
    /// mappings. Stacks, vdso and file mappings are left alone: moving page cache
    /// would move other processes' data too.
    pub fn is_private_anon(&self) -> bool {
        let b = self.perms.as_bytes();
        let private = b.get(3) == Some(&b'p');
        let accessible = b.first() == Some(&b'r') || b.get(1) == Some(&b'w');
        let anon_name =
            self.path.is_empty() || self.path == "[heap]" || self.path.starts_with("[anon:");
        private && accessible && self.inode == 0 && anon_name
    }
}

/// Parse the text of `/proc/PID/maps`.
pub fn parse_maps(text: &str) -> Result<Vec<MapEntry>, String> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mut it = line.split_ascii_whitespace();
        let bad = || format!("bad maps line `{line}`");
        let range = it.next().ok_or_else(bad)?;
        let (a, b) = range.split_once('-').ok_or_else(bad)?;
        let start = u64::from_str_radix(a, 16).map_err(|_| bad())?;
        let end = u64::from_str_radix(b, 16).map_err(|_| bad())?;
        let perms = it.next().ok_or_else(bad)?.to_string();
        let _offset = it.next().ok_or_else(bad)?;
        let _dev = it.next().ok_or_else(bad)?;
        let inode = it.next().ok_or_else(bad)?.parse().map_err(|_| bad())?;
        let path = it.collect::<Vec<_>>().join(" ");
        if end <= start {
            return Err(bad());
        }
        out.push(MapEntry {
            start,
            end,
            perms,
            inode,
            path,
        });
    }
    Ok(out)
}

/// The private anonymous ranges of a maps listing, adjacent ones merged, in
/// address order, as `(start, end)` byte addresses.
pub fn anon_ranges(maps: &[MapEntry]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for m in maps.iter().filter(|m| m.is_private_anon()) {
        match out.last_mut() {
            Some(last) if last.1 == m.start => last.1 = m.end,
            _ => out.push((m.start, m.end)),
        }
    }
    out
}

/// Read and parse `/proc/PID/maps`.
pub fn read_maps(pid: i32) -> std::io::Result<Vec<MapEntry>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/maps"))?;
    parse_maps(&text).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// What the daemon reads from `/proc/PID/status`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Status {
    /// Command name.
    pub name: String,
    /// State letter (`R`, `S`, `Z`...).
    pub state: char,
    /// Real user id.
    pub uid: u32,
    /// Resident anonymous memory, KiB.
    pub rss_anon_kb: u64,
    /// Whether the process still has an address space: the kernel prints the `Vm*`
    /// lines only while it does (not for a zombie, nor once an exiting process has
    /// dropped its memory).
    pub has_memory: bool,
}

/// Parse the text of `/proc/PID/status`.
pub fn parse_status(text: &str) -> Status {
    let mut s = Status::default();
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim();
        match k {
            "Name" => s.name = v.to_string(),
            "State" => s.state = v.chars().next().unwrap_or('?'),
            "Uid" => {
                s.uid = v
                    .split_whitespace()
                    .next()
                    .and_then(|x| x.parse().ok())
                    .unwrap_or(0)
            }
            "VmSize" => s.has_memory = true,
            "RssAnon" => {
                s.rss_anon_kb = v
                    .split_whitespace()
                    .next()
                    .and_then(|x| x.parse().ok())
                    .unwrap_or(0)
            }
            _ => {}
        }
    }
    s
}

/// Read `/proc/PID/status`; `None` if the process does not exist.
pub fn read_status(pid: i32) -> Option<Status> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .map(|t| parse_status(&t))
}

/// For each page of `[start_vpn, end_vpn)` in `pid`, whether it is resident or swapped
/// (bits 63 and 62 of its `/proc/PID/pagemap` entry). Reading pagemap walks the page
/// tables and costs little for holes, unlike a per-page move_pages(2) query; it needs
/// the same ptrace-read access.
pub fn mapped_pages(pid: i32, start_vpn: u64, end_vpn: u64) -> std::io::Result<Vec<bool>> {
    use std::io::{Read, Seek, SeekFrom};
    const CHUNK: u64 = 64 * 1024;
    let mut f = std::fs::File::open(format!("/proc/{pid}/pagemap"))?;
    let mut out = Vec::with_capacity(end_vpn.saturating_sub(start_vpn) as usize);
    let mut buf = vec![0u8; (CHUNK * 8) as usize];
    let mut vpn = start_vpn;
    while vpn < end_vpn {
        let n = (end_vpn - vpn).min(CHUNK);
        let b = &mut buf[..(n * 8) as usize];
        f.seek(SeekFrom::Start(vpn * 8))?;
        f.read_exact(b)?;
        out.extend(b.chunks_exact(8).map(|e| {
            let e = u64::from_le_bytes(e.try_into().expect("8 bytes"));
            e & (0b11 << 62) != 0
        }));
        vpn += n;
    }
    Ok(out)
}

/// The start time of `pid` (clock ticks after boot, field 22 of `/proc/PID/stat`):
/// with the pid, it names one process even after the pid is reused.
pub fn start_time(pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_start_time(&text)
}

/// Field 22 of a `/proc/PID/stat` line; the command name (field 2) may hold spaces
/// and parentheses, so fields are counted after its last `)`.
pub fn parse_start_time(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// True if `pid` has exited as far as its memory goes: no such process, a zombie, or a
/// process whose address space is gone (killed and not yet reaped, or exiting).
pub fn memory_gone(pid: i32) -> bool {
    read_status(pid).is_none_or(|s| s.state == 'Z' || s.state == 'X' || !s.has_memory)
}

/// True if `pid` exists and is not a zombie.
pub fn alive(pid: i32) -> bool {
    read_status(pid).is_some_and(|s| s.state != 'Z' && s.state != 'X')
}

/// The processes of cgroup v2 directory `dir` and of every cgroup below it (their
/// `cgroup.procs`), sorted. An error when `dir` itself is no cgroup (or is gone); a
/// child cgroup removed during the walk is skipped.
pub fn cgroup_members(dir: &std::path::Path) -> std::io::Result<Vec<i32>> {
    let mut pids: Vec<i32> = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    let mut first = true;
    while let Some(d) = stack.pop() {
        match std::fs::read_to_string(d.join("cgroup.procs")) {
            Ok(text) => pids.extend(text.lines().filter_map(|l| l.trim().parse::<i32>().ok())),
            Err(e) if first => return Err(e),
            Err(_) => continue,
        }
        first = false;
        if let Ok(entries) = std::fs::read_dir(&d) {
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push(e.path());
                }
            }
        }
    }
    pids.sort_unstable();
    pids.dedup();
    Ok(pids)
}

/// Pages per node summed over the lines of `/proc/PID/numa_maps` (`N0=12 N1=3`),
/// indexed by node id.
pub fn parse_numa_maps(text: &str) -> Vec<u64> {
    let mut out: Vec<u64> = Vec::new();
    for tok in text.split_ascii_whitespace() {
        let Some(rest) = tok.strip_prefix('N') else {
            continue;
        };
        let Some((n, c)) = rest.split_once('=') else {
            continue;
        };
        if let (Ok(n), Ok(c)) = (n.parse::<usize>(), c.parse::<u64>()) {
            if n < 1024 {
                if out.len() <= n {
                    out.resize(n + 1, 0);
                }
                out[n] += c;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_members_cover_the_subtree_and_a_missing_cgroup_is_an_error() {
        let d = std::env::temp_dir().join(format!("tierkit-cgroup-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("a/b")).unwrap();
        std::fs::write(d.join("cgroup.procs"), "30\n10\n").unwrap();
        std::fs::write(d.join("a/cgroup.procs"), "").unwrap();
        std::fs::write(d.join("a/b/cgroup.procs"), "20\n10\n").unwrap();
        assert_eq!(cgroup_members(&d).unwrap(), vec![10, 20, 30]);
        assert!(cgroup_members(&d.join("nope")).is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }

    const MAPS: &str = "\
55d0c0a00000-55d0c0a02000 r--p 00000000 08:01 1311 /usr/bin/hog
55d0c0c03000-55d0c0c24000 rw-p 00000000 00:00 0 [heap]
7f1000000000-7f1004000000 rw-p 00000000 00:00 0 
7f1004000000-7f1004001000 ---p 00000000 00:00 0 
7f1004001000-7f1004801000 rw-p 00000000 00:00 0 
7f1004801000-7f1004802000 rw-p 00000000 00:00 0 [anon:glibc malloc]
7f2000000000-7f2000100000 rw-s 00000000 00:05 77 /dev/zero (deleted)
7f3000000000-7f3000001000 rw-p 00001000 08:01 1312 /usr/lib/libc.so.6
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]
";

    #[test]
    fn maps_keep_private_anon_only_and_merge_neighbours() {
        let m = parse_maps(MAPS).unwrap();
        assert_eq!(m.len(), 10);
        assert_eq!(m[1].path, "[heap]");
        assert_eq!(m[6].path, "/dev/zero (deleted)");
        let r = anon_ranges(&m);
        assert_eq!(
            r,
            vec![
                (0x55d0c0c03000, 0x55d0c0c24000),
                (0x7f1000000000, 0x7f1004000000),
                (0x7f1004001000, 0x7f1004802000),
            ]
        );
    }

    #[test]
    fn maps_reject_garbage() {
        assert!(parse_maps("zzz r--p").is_err());
        assert!(parse_maps("2000-1000 r--p 0 0:0 0").is_err());
    }

    #[test]
    fn stat_start_time_survives_odd_command_names() {
        let line =
            "4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(parse_start_time(line), Some(987654));
        assert_eq!(parse_start_time("garbage"), None);
        assert!(start_time(std::process::id() as i32).is_some());
    }

    #[test]
    fn status_fields() {
        let s = parse_status("Name:\thog\nState:\tS (sleeping)\nUid:\t65534\t65534\t65534\t65534\nVmSize:\t  123456 kB\nRssAnon:\t   65536 kB\n");
        assert_eq!(
            s,
            Status {
                name: "hog".into(),
                state: 'S',
                uid: 65534,
                rss_anon_kb: 65536,
                has_memory: true,
            }
        );
        let z = parse_status("State:\tZ (zombie)\n");
        assert_eq!(z.state, 'Z');
        assert!(!z.has_memory);
    }

    #[test]
    fn numa_maps_sum_per_node() {
        let t = "7f10 default anon=16384 dirty=16384 N0=2048 N1=14336 kernelpagesize_kB=4\n\
                 55d0 default heap anon=3 dirty=3 N0=3 kernelpagesize_kB=4\n";
        assert_eq!(parse_numa_maps(t), vec![2051, 14336]);
    }
}
