//! Memory-access sampling through perf_event_open(2): Intel PEBS (`mem-loads` with a
//! load-latency threshold, `mem-stores`) or AMD IBS op sampling, one event per thread
//! of the target, each with its own ring buffer, read by the daemon's loop.
//!
//! The pieces are separate so they can be tested without a PMU: [`encode_event`]
//! turns a sysfs event description into `perf_event_attr` config words through the
//! PMU's `format/` files; [`discover`] finds the events under a sysfs root; and
//! [`drain_ring`] parses the records between the ring's tail and head, wrap-around
//! included. [`Sampler`] does the system calls. This machine and the TCG guest have no
//! PMU, so `Sampler` itself has run only to its refusal (docs/live.md).

use super::perf::PerfEventAttr;
use std::io;
use std::path::Path;
use tierkit_core::SampleKind;

/// `PERF_SAMPLE_TID | PERF_SAMPLE_ADDR | PERF_SAMPLE_DATA_SRC`: the fields of every
/// sample record, in this order after the header: pid, tid, addr, data_src.
pub const SAMPLE_TYPE: u64 = (1 << 1) | (1 << 3) | (1 << 15);
const PERF_RECORD_LOST: u32 = 2;
const PERF_RECORD_SAMPLE: u32 = 9;
/// `PERF_MEM_OP_STORE` in `data_src`'s `mem_op` bits (0-4).
const MEM_OP_STORE: u64 = 0x04;

/// One sample: which thread touched which address, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawSample {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The data address.
    pub addr: u64,
    /// A store, or a load over the latency threshold (standing for an LLC miss, as
    /// MEMTIS reads PEBS load samples).
    pub kind: SampleKind,
}

/// One sampling event, ready for `perf_event_attr`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSpec {
    /// What it samples, for messages (`cpu/mem-loads,ldlat=64/`).
    pub name: String,
    /// PMU type (`/sys/bus/event_source/devices/PMU/type`).
    pub type_: u32,
    /// `config`, `config1`, `config2`.
    pub config: [u64; 3],
    /// Which samples it gives when `data_src` does not say (IBS gives both kinds).
    pub kind: Option<SampleKind>,
}

/// Encode an event description (`event=0xcd,umask=0x1,ldlat=3`) with the PMU's
/// field formats (`format(name)` returns the text of `format/NAME`, such as
/// `config:0-7` or `config1:0-15`) into the three config words.
pub fn encode_event(
    desc: &str,
    format: &dyn Fn(&str) -> Option<String>,
) -> Result<[u64; 3], String> {
    let mut words = [0u64; 3];
    for term in desc.trim().split(',').filter(|t| !t.is_empty()) {
        let (key, value) = term.split_once('=').unwrap_or((term, "1"));
        let value = parse_number(value).ok_or_else(|| format!("`{term}`: not a number"))?;
        let fmt = format(key.trim()).ok_or_else(|| format!("no format for field `{key}`"))?;
        let (word, bits) = fmt
            .trim()
            .split_once(':')
            .ok_or_else(|| format!("format `{fmt}` of `{key}`"))?;
        let w = match word {
            "config" => 0,
            "config1" => 1,
            "config2" => 2,
            other => return Err(format!("format of `{key}` names `{other}`")),
        };
        // A field may be split over several bit ranges, low bits first.
        let mut v = value;
        for range in bits.split(',') {
            let (lo, hi) = match range.split_once('-') {
                Some((a, b)) => (a.parse::<u32>(), b.parse::<u32>()),
                None => (range.parse::<u32>(), range.parse::<u32>()),
            };
            let (lo, hi) = match (lo, hi) {
                (Ok(l), Ok(h)) if l <= h && h < 64 => (l, h),
                _ => return Err(format!("format `{fmt}` of `{key}`")),
            };
            let width = hi - lo + 1;
            let mask = if width == 64 {
                u64::MAX
            } else {
                (1 << width) - 1
            };
            words[w] |= (v & mask) << lo;
            v = if width == 64 { 0 } else { v >> width };
        }
    }
    Ok(words)
}

fn parse_number(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// The sampling events under `devices` (`/sys/bus/event_source/devices`): Intel
/// `cpu/mem-loads` (with `ldlat` set to `ldlat` cycles) and `cpu/mem-stores`, else
/// AMD `ibs_op`. Err names what is missing.
pub fn discover(devices: &Path, ldlat: u32) -> Result<Vec<EventSpec>, String> {
    let read = |p: &Path| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    };
    let cpu = devices.join("cpu");
    if let Some(loads) = read(&cpu.join("events/mem-loads")) {
        let type_: u32 = read(&cpu.join("type"))
            .and_then(|t| t.parse().ok())
            .ok_or("no cpu/type")?;
        let format = |f: &str| read(&cpu.join("format").join(f));
        // The threshold replaces the default one in the description.
        let loads_desc = loads
            .split(',')
            .filter(|t| !t.starts_with("ldlat"))
            .chain(std::iter::once(format!("ldlat={ldlat}").as_str()))
            .collect::<Vec<_>>()
            .join(",");
        let mut out = vec![EventSpec {
            name: format!("cpu/mem-loads,ldlat={ldlat}/"),
            type_,
            config: encode_event(&loads_desc, &format)?,
            kind: Some(SampleKind::LlcLoadMiss),
        }];
        if let Some(stores) = read(&cpu.join("events/mem-stores")) {
            out.push(EventSpec {
                name: "cpu/mem-stores/".into(),
                type_,
                config: encode_event(&stores, &format)?,
                kind: Some(SampleKind::Store),
            });
        }
        return Ok(out);
    }
    let ibs = devices.join("ibs_op");
    if let Some(type_) = read(&ibs.join("type")).and_then(|t| t.parse().ok()) {
        return Ok(vec![EventSpec {
            name: "ibs_op//".into(),
            type_,
            config: [0; 3],
            kind: None,
        }]);
    }
    Err("no PEBS (cpu/events/mem-loads) or IBS (ibs_op) event".into())
}

/// Parse the records of a perf ring buffer `ring` (its data pages; a power of two in
/// size) from position `tail` to `head` (free-running byte counters). Returns the
/// samples, the samples the kernel reports lost, and the new tail (= `head`).
pub fn drain_ring(
    ring: &[u8],
    tail: u64,
    head: u64,
    kind_of: Option<SampleKind>,
) -> (Vec<RawSample>, u64, u64) {
    let size = ring.len() as u64;
    let byte = |pos: u64| ring[(pos % size) as usize];
    let read = |pos: u64, n: usize| -> Vec<u8> { (0..n as u64).map(|i| byte(pos + i)).collect() };
    let u32_at = |pos: u64| u32::from_le_bytes(read(pos, 4).try_into().expect("4 bytes"));
    let u64_at = |pos: u64| u64::from_le_bytes(read(pos, 8).try_into().expect("8 bytes"));
    let mut out = Vec::new();
    let mut lost = 0;
    let mut pos = tail;
    while pos + 8 <= head {
        let h = read(pos, 8);
        let type_ = u32::from_le_bytes(h[0..4].try_into().expect("4 bytes"));
        let len = u16::from_le_bytes(h[6..8].try_into().expect("2 bytes")) as u64;
        if len < 8 || pos + len > head {
            break; // a torn or empty record: stop, the kernel never writes these
        }
        let body = pos + 8;
        match type_ {
            PERF_RECORD_SAMPLE if len >= 8 + 24 => {
                let data_src = u64_at(body + 16);
                let kind = match kind_of {
                    Some(k) => k,
                    None if data_src & MEM_OP_STORE != 0 => SampleKind::Store,
                    None => SampleKind::LlcLoadMiss,
                };
                out.push(RawSample {
                    pid: u32_at(body),
                    tid: u32_at(body + 4),
                    addr: u64_at(body + 8),
                    kind,
                });
            }
            // PERF_RECORD_LOST: u64 id, u64 lost.
            PERF_RECORD_LOST if len >= 8 + 16 => lost += u64_at(body + 8),
            _ => {}
        }
        pos += len;
    }
    (out, lost, pos)
}

/// Data pages per ring buffer (2^n, plus one metadata page).
const RING_PAGES: usize = 16;
const PAGE: usize = 4096;
/// Offsets of `data_head` and `data_tail` in `struct perf_event_mmap_page`.
const DATA_HEAD: usize = 1024;
const DATA_TAIL: usize = 1032;
const PERF_EVENT_IOC_ENABLE: u64 = 0x2400;
const PERF_EVENT_IOC_PERIOD: u64 = 0x4008_2404;
const FLAG_EXCLUDE_KERNEL: u64 = 1 << 5;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;
const PRECISE_IP_SHIFT: u64 = 15;

/// One event on one thread: its fd and ring.
struct Ring {
    fd: i32,
    map: *mut u8,
    event: usize,
}

/// The sampler of one target: one event per (thread, event spec).
pub struct Sampler {
    pid: i32,
    events: Vec<EventSpec>,
    periods: [u64; 2],
    rings: Vec<Ring>,
    threads: Vec<i32>,
    /// Samples the kernel dropped (ring full), summed.
    pub lost: u64,
}

impl Sampler {
    /// Sample `pid`'s threads with `events`, loads every `periods[0]` and stores
    /// every `periods[1]` qualifying accesses.
    pub fn open(pid: i32, events: Vec<EventSpec>, periods: [u64; 2]) -> io::Result<Sampler> {
        let mut s = Sampler {
            pid,
            events,
            periods,
            rings: Vec::new(),
            threads: Vec::new(),
            lost: 0,
        };
        s.rescan()?;
        Ok(s)
    }

    fn period_of(&self, e: &EventSpec) -> u64 {
        match e.kind {
            Some(SampleKind::Store) => self.periods[1],
            _ => self.periods[0],
        }
        .max(1)
    }

    /// Open events on threads that appeared since the last call.
    pub fn rescan(&mut self) -> io::Result<()> {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", self.pid))?;
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            if self.threads.contains(&tid) {
                continue;
            }
            for (i, e) in self.events.iter().enumerate() {
                let ring = self.open_one(tid, i, e)?;
                self.rings.push(ring);
            }
            self.threads.push(tid);
        }
        Ok(())
    }

    fn open_one(&self, tid: i32, event: usize, e: &EventSpec) -> io::Result<Ring> {
        let attr = PerfEventAttr {
            type_: e.type_,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config: e.config[0],
            config1: e.config[1],
            config2: e.config[2],
            sample_period: self.period_of(e),
            sample_type: SAMPLE_TYPE,
            flags: FLAG_EXCLUDE_KERNEL | FLAG_EXCLUDE_HV | (2 << PRECISE_IP_SHIFT),
            wakeup_events: 1,
            ..Default::default()
        };
        // SAFETY: `attr` is a valid perf_event_attr of the size it declares.
        let fd = unsafe {
            super::syscalls::perf_event_open(
                &attr as *const PerfEventAttr,
                tid,
                -1,
                -1,
                libc::O_CLOEXEC as libc::c_ulong,
            )
        }
        .map_err(io::Error::from_raw_os_error)? as i32;
        let len = (RING_PAGES + 1) * PAGE;
        // SAFETY: mapping the event's ring buffer, as perf_event_open(2) documents;
        // the mapping lives until `Drop` unmaps it.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            // SAFETY: our fd.
            unsafe { libc::close(fd) };
            return Err(e);
        }
        // SAFETY: our fd; ENABLE takes no argument.
        unsafe { libc::ioctl(fd, PERF_EVENT_IOC_ENABLE as _, 0) };
        Ok(Ring {
            fd,
            map: map as *mut u8,
            event,
        })
    }

    /// Every sample written since the last call, all rings.
    pub fn poll(&mut self) -> Vec<RawSample> {
        let mut out = Vec::new();
        for r in &self.rings {
            // SAFETY: the metadata page is mapped and `data_head` is the kernel's
            // u64 at its documented offset; read it once, then fence before reading
            // the data it covers (perf_event_open(2)).
            let head = unsafe { std::ptr::read_volatile(r.map.add(DATA_HEAD) as *const u64) };
            std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
            // SAFETY: as above; only this thread writes `data_tail`.
            let tail = unsafe { std::ptr::read_volatile(r.map.add(DATA_TAIL) as *const u64) };
            // SAFETY: the data pages follow the metadata page for RING_PAGES pages.
            let data = unsafe { std::slice::from_raw_parts(r.map.add(PAGE), RING_PAGES * PAGE) };
            let (samples, lost, new_tail) = drain_ring(data, tail, head, self.events[r.event].kind);
            out.extend(samples);
            self.lost += lost;
            std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
            // SAFETY: tell the kernel the space is free again.
            unsafe { std::ptr::write_volatile(r.map.add(DATA_TAIL) as *mut u64, new_tail) };
        }
        out
    }

    /// Change the sample period of `kind`'s events (MEMTIS's CPU budget does).
    pub fn set_period(&mut self, kind: SampleKind, period: u64) {
        let k = usize::from(kind == SampleKind::Store);
        self.periods[k] = period.max(1);
        for r in &self.rings {
            let e = &self.events[r.event];
            if e.kind.is_none() || e.kind == Some(kind) {
                let p = self.period_of(e);
                // SAFETY: our fd; the ioctl reads a u64 period.
                unsafe { libc::ioctl(r.fd, PERF_EVENT_IOC_PERIOD as _, &p as *const u64) };
            }
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        for r in &self.rings {
            // SAFETY: the mapping and fd were created in `open_one` and are
            // released exactly once here.
            unsafe {
                libc::munmap(r.map as *mut libc::c_void, (RING_PAGES + 1) * PAGE);
                libc::close(r.fd);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Intel's sysfs, as a Skylake server shows it.
    fn intel_format(f: &str) -> Option<String> {
        Some(
            match f {
                "event" => "config:0-7",
                "umask" => "config:8-15",
                "ldlat" => "config1:0-15",
                "inv" => "config:23",
                "cmask" => "config:24-31",
                _ => return None,
            }
            .into(),
        )
    }

    #[test]
    fn events_encode_through_the_pmus_formats() {
        let w = encode_event("event=0xcd,umask=0x1,ldlat=3", &intel_format).unwrap();
        assert_eq!(w, [0x01cd, 3, 0]);
        let w = encode_event("event=0xd0,umask=0x82", &intel_format).unwrap();
        assert_eq!(w, [0x82d0, 0, 0]);
        // A split field: low bits first.
        let split = |f: &str| (f == "x").then(|| "config:0-3,8-11".to_string());
        assert_eq!(encode_event("x=0xab", &split).unwrap(), [0x0a0b, 0, 0]);
        assert!(encode_event("nope=1", &intel_format)
            .unwrap_err()
            .contains("nope"));
        assert!(encode_event("event=zz", &intel_format).is_err());
    }

    #[test]
    fn discovery_reads_intel_then_amd_sysfs() {
        let d = std::env::temp_dir().join(format!("tierkit-pmu-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        assert!(discover(&d, 64).is_err());
        std::fs::create_dir_all(d.join("ibs_op")).unwrap();
        std::fs::write(d.join("ibs_op/type"), "11\n").unwrap();
        let amd = discover(&d, 64).unwrap();
        assert_eq!((amd.len(), amd[0].type_, amd[0].kind), (1, 11, None));
        let cpu = d.join("cpu");
        std::fs::create_dir_all(cpu.join("events")).unwrap();
        std::fs::create_dir_all(cpu.join("format")).unwrap();
        std::fs::write(cpu.join("type"), "4\n").unwrap();
        std::fs::write(
            cpu.join("events/mem-loads"),
            "event=0xcd,umask=0x1,ldlat=3\n",
        )
        .unwrap();
        std::fs::write(cpu.join("events/mem-stores"), "event=0xd0,umask=0x82\n").unwrap();
        for f in ["event", "umask", "ldlat"] {
            std::fs::write(cpu.join("format").join(f), intel_format(f).unwrap()).unwrap();
        }
        let intel = discover(&d, 64).unwrap();
        std::fs::remove_dir_all(&d).ok();
        assert_eq!(intel.len(), 2);
        assert_eq!(
            intel[0].config,
            [0x01cd, 64, 0],
            "our threshold, not the default 3"
        );
        assert_eq!(intel[0].kind, Some(SampleKind::LlcLoadMiss));
        assert_eq!(intel[1].config, [0x82d0, 0, 0]);
        assert_eq!(intel[1].kind, Some(SampleKind::Store));
    }

    fn sample(pid: u32, tid: u32, addr: u64, data_src: u64) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&PERF_RECORD_SAMPLE.to_le_bytes());
        r.extend_from_slice(&0u16.to_le_bytes());
        r.extend_from_slice(&32u16.to_le_bytes());
        r.extend_from_slice(&pid.to_le_bytes());
        r.extend_from_slice(&tid.to_le_bytes());
        r.extend_from_slice(&addr.to_le_bytes());
        r.extend_from_slice(&data_src.to_le_bytes());
        r
    }

    #[test]
    fn ring_records_parse_across_the_wrap_with_losses_counted() {
        // A 64-byte ring holding, from position 48: a sample that wraps (bytes 48..63
        // then 0..15), a LOST record (24 bytes), and half of a sample not yet
        // complete (the head stops before it).
        let mut ring = vec![0u8; 64];
        let a = sample(7, 8, 0x7f00_0000_1040, MEM_OP_STORE);
        let mut lost = Vec::new();
        lost.extend_from_slice(&PERF_RECORD_LOST.to_le_bytes());
        lost.extend_from_slice(&0u16.to_le_bytes());
        lost.extend_from_slice(&24u16.to_le_bytes());
        lost.extend_from_slice(&1u64.to_le_bytes());
        lost.extend_from_slice(&5u64.to_le_bytes());
        let stream: Vec<u8> = a.iter().chain(&lost).copied().collect();
        for (i, b) in stream.iter().enumerate() {
            ring[(48 + i) % 64] = *b;
        }
        let tail = 64 * 3 + 48;
        let head = tail + stream.len() as u64;
        let (s, n_lost, new_tail) = drain_ring(&ring, tail, head, None);
        assert_eq!(
            s,
            vec![RawSample {
                pid: 7,
                tid: 8,
                addr: 0x7f00_0000_1040,
                kind: SampleKind::Store
            }]
        );
        assert_eq!((n_lost, new_tail), (5, head));
        // A load by data_src; and the event's own kind wins when it has one.
        let b = sample(1, 1, 0x1000, 0x02);
        let (s, _, _) = drain_ring(&b, 0, 32, None);
        assert_eq!(s[0].kind, SampleKind::LlcLoadMiss);
        let (s, _, _) = drain_ring(&b, 0, 32, Some(SampleKind::Store));
        assert_eq!(s[0].kind, SampleKind::Store);
        // A head inside a record: nothing parsed past the last whole record.
        let (s, _, t) = drain_ring(&b, 0, 20, None);
        assert!(s.is_empty() && t == 0);
    }

    #[test]
    fn opening_without_a_pmu_is_an_error_not_a_crash() {
        let e = EventSpec {
            name: "cpu/mem-loads/".into(),
            type_: 4,
            config: [0x01cd, 64, 0],
            kind: Some(SampleKind::LlcLoadMiss),
        };
        // On a machine with PEBS this opens; here (no PMU) it must fail cleanly.
        match Sampler::open(std::process::id() as i32, vec![e], [1000, 1000]) {
            Ok(mut s) => {
                let _ = s.poll();
            }
            Err(err) => assert!(err.raw_os_error().is_some(), "{err}"),
        }
    }
}
