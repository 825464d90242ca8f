//! DAMON sysfs control (`/sys/kernel/mm/damon/admin`, Linux 5.18+): one kdamond
//! with one context monitoring the targets (`vaddr`, or `fvaddr` over explicit
//! ranges), and a `stat` scheme matching every region, whose `tried_regions` give a
//! snapshot of every region's `nr_accesses` and `age` (6.2+). The write sequence
//! is the one in `shared/reference/qemu-numa.md`.
//!
//! Several processes share the one kdamond (the kernel adds no kdamond while one
//! runs, so a second one could not be started beside the first): one target per
//! process, and one `stat` scheme per target with a `target` filter (Linux 6.5+)
//! that keeps only that target's regions, because a scheme's `tried_regions` do not
//! say which target a region belongs to. A single target needs no filter, so one
//! process works on older kernels too.
//!
//! DAMON is shared with other tools (damo, DAMON_RECLAIM-like setups). tierkit uses
//! a kdamond of its own and never touches one it did not start: it records each
//! kdamond it takes in a registry file (`/run/tierkit/kdamond-N`: the daemon's pid
//! and start time), so a later daemon recognises one left by a killed daemon and
//! takes it back. A new kdamond is added by growing `nr_kdamonds` by one, which the
//! kernel allows only while no kdamond is on (it answers EBUSY otherwise, and
//! rebuilds every kdamond directory when it does allow it).

use serde::Serialize;
use std::io;
use std::path::{Path, PathBuf};

/// The DAMON sysfs admin directory.
pub const ADMIN: &str = "/sys/kernel/mm/damon/admin";
/// Where tierkit records the kdamonds it owns.
pub const REGISTRY: &str = "/run/tierkit";

/// Monitoring attributes of the daemon's kdamond.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Attrs {
    /// Sampling interval, µs (DAMON default 5000).
    pub sample_us: u64,
    /// Aggregation interval, µs: one snapshot per aggregation.
    pub aggr_us: u64,
    /// Regions update interval, µs (vaddr re-reads the VMAs).
    pub update_us: u64,
    /// Fewest regions.
    pub min_nr_regions: u32,
    /// Most regions: the finest spatial resolution DAMON may reach.
    pub max_nr_regions: u32,
}

/// One monitored process: its pid, and for `fvaddr` the address ranges to watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// OS pid.
    pub pid: i32,
    /// `fvaddr` ranges `[start, end)` in bytes (ignored by `vaddr`).
    pub ranges: Vec<(u64, u64)>,
}

/// One region of a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Region {
    /// First byte (virtual address).
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// Sampling intervals of the last aggregation in which the region's sampled page
    /// was accessed (0 ..= aggr/sample).
    pub nr_accesses: u32,
    /// Aggregation intervals the region kept its access level.
    pub age: u32,
}

/// What the DAMON sysfs interface offers here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Probe {
    /// `/sys/kernel/mm/damon/admin` exists.
    pub present: bool,
    /// kdamonds configured right now (`nr_kdamonds`).
    pub nr_kdamonds: u32,
    /// Indices of kdamonds that are on (someone else is using DAMON).
    pub running: Vec<u32>,
    /// `avail_operations` (6.2+) when it could be read.
    pub avail_operations: Option<Vec<String>>,
}

impl Probe {
    /// True if `ops` is listed (or the list is unknown and DAMON is present).
    pub fn has_ops(&self, ops: &str) -> bool {
        match &self.avail_operations {
            Some(v) => v.iter().any(|o| o == ops),
            None => false,
        }
    }
}

fn write(p: &Path, v: &str) -> io::Result<()> {
    std::fs::write(p, v)
        .map_err(|e| io::Error::new(e.kind(), format!("write `{v}` to {}: {e}", p.display())))
}

fn read_u64(p: &Path) -> io::Result<u64> {
    let s = std::fs::read_to_string(p)?;
    s.trim().parse().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: not a number", p.display()),
        )
    })
}

/// Inspect DAMON sysfs under `admin`. With `allow_touch` and no kdamond configured,
/// creates one context for a moment to read `avail_operations`, then removes it.
pub fn probe_at(admin: &Path, allow_touch: bool) -> Probe {
    let kd = admin.join("kdamonds");
    if !kd.is_dir() {
        return Probe::default();
    }
    let nr = read_u64(&kd.join("nr_kdamonds")).unwrap_or(0) as u32;
    let running = (0..nr)
        .filter(|i| {
            std::fs::read_to_string(kd.join(format!("{i}/state"))).is_ok_and(|s| s.trim() == "on")
        })
        .collect();
    let ops_file = |kd: &Path| kd.join("0/contexts/0/avail_operations");
    let parse_ops = |s: String| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    let mut avail = std::fs::read_to_string(ops_file(&kd)).ok().map(parse_ops);
    if avail.is_none() && nr == 0 && allow_touch && write(&kd.join("nr_kdamonds"), "1").is_ok() {
        if write(&kd.join("0/contexts/nr_contexts"), "1").is_ok() {
            avail = std::fs::read_to_string(ops_file(&kd)).ok().map(parse_ops);
        }
        let _ = write(&kd.join("nr_kdamonds"), "0");
    }
    Probe {
        present: true,
        nr_kdamonds: nr,
        running,
        avail_operations: avail,
    }
}

/// The registry file of kdamond `idx`.
fn owner_file(registry: &Path, idx: u32) -> PathBuf {
    registry.join(format!("kdamond-{idx}"))
}

/// `pid start_time` of this process, the content of a registry file.
fn owner_stamp() -> String {
    let pid = std::process::id() as i32;
    format!("{pid} {}\n", super::procfs::start_time(pid).unwrap_or(0))
}

/// Kdamonds below `nr` that a tierkit daemon took and that no living daemon holds
/// (its process is gone, or the pid now names another process).
fn stale_own(registry: &Path, nr: u32) -> Vec<u32> {
    (0..nr)
        .filter(|&i| {
            let Ok(text) = std::fs::read_to_string(owner_file(registry, i)) else {
                return false;
            };
            let mut f = text.split_whitespace().map(|x| x.parse::<u64>().ok());
            match (f.next().flatten(), f.next().flatten()) {
                (Some(pid), Some(start)) => super::procfs::start_time(pid as i32) != Some(start),
                _ => true,
            }
        })
        .collect()
}

/// Whether a daemon could take a kdamond now: one left by a dead tierkit daemon, or
/// room to add one (no kdamond is on). The error says which kdamonds are in the way.
pub fn can_start(admin: &Path, registry: &Path) -> Result<(), String> {
    let p = probe_at(admin, false);
    if !p.present || p.running.is_empty() || !stale_own(registry, p.nr_kdamonds).is_empty() {
        return Ok(());
    }
    Err(format!(
        "DAMON is in use by another tool: kdamond(s) {:?} are on, and the kernel adds no kdamond while one runs (nr_kdamonds is busy); tierkit leaves them alone — stop them, or attach when they are done",
        p.running
    ))
}

/// A kdamond the daemon configured and started; turned off, and given back, on drop.
#[derive(Debug)]
pub struct Kdamond {
    kd: PathBuf,
    on: bool,
    owner: PathBuf,
    /// `nr_kdamonds` before this daemon added its kdamond, restored on stop when
    /// nothing else changed it.
    grown_from: Option<u32>,
}

impl Kdamond {
    /// Take a kdamond (one a dead tierkit daemon left, or a new one), configure it to
    /// monitor `targets` with `ops` (`vaddr` or `fvaddr`) and turn it on. Fails,
    /// touching nothing, when another tool's kdamond is on and no kdamond of tierkit's
    /// is free.
    pub fn start(
        admin: &Path,
        registry: &Path,
        targets: &[Target],
        ops: &str,
        a: &Attrs,
    ) -> io::Result<Kdamond> {
        let kds = admin.join("kdamonds");
        let p = probe_at(admin, false);
        let (idx, grown_from) = match stale_own(registry, p.nr_kdamonds).first() {
            Some(&i) => {
                // A killed daemon's kdamond may still run; turning it off is the only
                // way to reconfigure it.
                let _ = write(&kds.join(format!("{i}/state")), "off");
                (i, None)
            }
            None if p.running.is_empty() => {
                write(&kds.join("nr_kdamonds"), &(p.nr_kdamonds + 1).to_string())?;
                (p.nr_kdamonds, Some(p.nr_kdamonds))
            }
            None => {
                return Err(io::Error::new(
                    io::ErrorKind::ResourceBusy,
                    can_start(admin, registry)
                        .err()
                        .unwrap_or_else(|| "DAMON is in use".into()),
                ))
            }
        };
        std::fs::create_dir_all(registry)?;
        let owner = owner_file(registry, idx);
        write(&owner, &owner_stamp())?;
        let mut me = Kdamond {
            kd: kds.join(idx.to_string()),
            on: false,
            owner,
            grown_from,
        };
        me.configure(targets, ops, a)?;
        write(&me.kd.join("state"), "on")?;
        me.on = true;
        Ok(me)
    }

    fn configure(&self, targets: &[Target], ops: &str, a: &Attrs) -> io::Result<()> {
        write(&self.kd.join("contexts/nr_contexts"), "1")?;
        let c = self.ctx();
        write(&c.join("operations"), ops)?;
        let iv = c.join("monitoring_attrs/intervals");
        write(&iv.join("sample_us"), &a.sample_us.to_string())?;
        write(&iv.join("aggr_us"), &a.aggr_us.to_string())?;
        write(&iv.join("update_us"), &a.update_us.to_string())?;
        let nr = c.join("monitoring_attrs/nr_regions");
        // max first: the defaults are 10..1000 and min must stay <= max at `on`.
        write(&nr.join("max"), &a.max_nr_regions.to_string())?;
        write(&nr.join("min"), &a.min_nr_regions.to_string())?;
        write(&c.join("targets/nr_targets"), &targets.len().to_string())?;
        for (i, t) in targets.iter().enumerate() {
            write(
                &c.join(format!("targets/{i}/pid_target")),
                &t.pid.to_string(),
            )?;
            if ops == "fvaddr" {
                self.write_regions(i, &t.ranges)?;
            }
        }
        let s = c.join("schemes");
        write(&s.join("nr_schemes"), &targets.len().max(1).to_string())?;
        for i in 0..targets.len().max(1) {
            let sc = s.join(i.to_string());
            write(&sc.join("action"), "stat")?;
            // New schemes match nothing until the maxima are set (qemu-numa.md).
            write(&sc.join("access_pattern/sz/max"), &u64::MAX.to_string())?;
            write(
                &sc.join("access_pattern/nr_accesses/max"),
                &u32::MAX.to_string(),
            )?;
            write(&sc.join("access_pattern/age/max"), &u32::MAX.to_string())?;
            if targets.len() > 1 {
                // Keep target i only: filter out what does not match it (`matching`
                // N; with 6.14's `allow` left at its default N this still rejects).
                let f = sc.join("filters");
                write(&f.join("nr_filters"), "1")
                    .and_then(|()| write(&f.join("0/type"), "target"))
                    .and_then(|()| write(&f.join("0/damon_target_idx"), &i.to_string()))
                    .and_then(|()| write(&f.join("0/matching"), "N"))
                    .map_err(|e| {
                        // sysfs answers EACCES for a file it does not have: say what is
                        // missing rather than blame privileges.
                        io::Error::new(
                            io::ErrorKind::Unsupported,
                            format!("monitoring several processes with one kdamond needs DAMOS target filters (Linux 6.5+): {e}"),
                        )
                    })?;
            }
        }
        Ok(())
    }

    fn ctx(&self) -> PathBuf {
        self.kd.join("contexts/0")
    }

    fn write_regions(&self, target: usize, ranges: &[(u64, u64)]) -> io::Result<()> {
        let r = self.ctx().join(format!("targets/{target}/regions"));
        write(&r.join("nr_regions"), &ranges.len().to_string())?;
        for (i, (s, e)) in ranges.iter().enumerate() {
            // Zero both first so a shrinking start never passes the old end.
            write(&r.join(format!("{i}/start")), "0")?;
            write(&r.join(format!("{i}/end")), &e.to_string())?;
            write(&r.join(format!("{i}/start")), &s.to_string())?;
        }
        Ok(())
    }

    /// fvaddr: replace the targets' ranges (the same targets, in the same order) and
    /// `commit` them to the running kdamond.
    pub fn set_ranges(&self, targets: &[Target]) -> io::Result<()> {
        for (i, t) in targets.iter().enumerate() {
            self.write_regions(i, &t.ranges)?;
        }
        write(&self.kd.join("state"), "commit")
    }

    /// Ask for the regions of the latest aggregation (`update_schemes_tried_regions`;
    /// the kernel answers at the schemes' next apply, so this blocks up to one
    /// aggregation interval) and read them: one list per target, in target order.
    pub fn snapshot(&self, nr_targets: usize) -> io::Result<Vec<Vec<Region>>> {
        write(&self.kd.join("state"), "update_schemes_tried_regions")?;
        (0..nr_targets.max(1))
            .map(|i| read_tried_regions(&self.ctx().join(format!("schemes/{i}/tried_regions"))))
            .collect()
    }

    /// Monitor a new set of targets (processes joined or left): the kdamond is turned
    /// off, configured afresh and turned on again, in place (DAMON's regions of the
    /// targets that stay start over). It stays this daemon's.
    pub fn retarget(&mut self, targets: &[Target], ops: &str, a: &Attrs) -> io::Result<()> {
        if self.state() != Some(false) {
            write(&self.kd.join("state"), "off")?;
            // The kdamond thread ends asynchronously; `on` fails until it has.
            let t = std::time::Instant::now();
            while self.state() != Some(false) && t.elapsed() < std::time::Duration::from_secs(5) {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
        self.on = false;
        self.restart(targets, ops, a)
    }

    /// True while the kdamond runs (it stops by itself when its target exits).
    pub fn running(&self) -> bool {
        self.state() == Some(true)
    }

    /// The kdamond's `state`: on, off, or None when it cannot be read right now (a
    /// sysfs read can fail while a command to the kdamond is in progress) — not the
    /// same as off.
    pub fn state(&self) -> Option<bool> {
        match std::fs::read_to_string(self.kd.join("state")).ok()?.trim() {
            "on" => Some(true),
            "off" => Some(false),
            _ => None,
        }
    }

    /// Start this kdamond again, in place, after it stopped by itself: configure it
    /// afresh and turn it on. It stays this daemon's (no `nr_kdamonds` change, which
    /// the kernel would refuse while another kdamond runs). A kdamond that is still on
    /// is left as it is.
    pub fn restart(&mut self, targets: &[Target], ops: &str, a: &Attrs) -> io::Result<()> {
        if self.state() == Some(true) {
            return Ok(());
        }
        self.on = false;
        self.configure(targets, ops, a)?;
        write(&self.kd.join("state"), "on")?;
        self.on = true;
        Ok(())
    }

    /// Turn the kdamond off and give it back (also done on drop): the registry entry
    /// goes, and a kdamond this daemon added is removed again if the count is still
    /// the one it left and nothing is on.
    pub fn stop(&mut self) {
        if self.on {
            let _ = write(&self.kd.join("state"), "off");
            self.on = false;
        }
        if let (Some(before), Some(kds)) = (self.grown_from.take(), self.kd.parent()) {
            let admin = kds.parent().unwrap_or(kds);
            let p = probe_at(admin, false);
            if p.nr_kdamonds == before + 1 && p.running.is_empty() {
                let _ = write(&kds.join("nr_kdamonds"), &before.to_string());
            }
        }
        let _ = std::fs::remove_file(&self.owner);
    }
}

impl Drop for Kdamond {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Read every `tried_regions/<N>/{start,end,nr_accesses,age}` under `dir`, in
/// address order.
pub fn read_tried_regions(dir: &Path) -> io::Result<Vec<Region>> {
    let mut idx: Vec<u32> = std::fs::read_dir(dir)?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    idx.sort_unstable();
    let mut out = Vec::with_capacity(idx.len());
    for i in idx {
        let d = dir.join(i.to_string());
        let r = Region {
            start: read_u64(&d.join("start"))?,
            end: read_u64(&d.join("end"))?,
            nr_accesses: read_u64(&d.join("nr_accesses"))? as u32,
            age: read_u64(&d.join("age"))? as u32,
        };
        if r.end > r.start {
            out.push(r);
        }
    }
    out.sort_by_key(|r| r.start);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tried_regions_fixture_reads_in_address_order() {
        let d = std::env::temp_dir().join(format!("tierkit-damon-{}", std::process::id()));
        for (i, (s, e, n, a)) in [(8192u64, 12288u64, 0u32, 7u32), (4096, 8192, 20, 1)]
            .iter()
            .enumerate()
        {
            let r = d.join(i.to_string());
            std::fs::create_dir_all(&r).unwrap();
            std::fs::write(r.join("start"), format!("{s}\n")).unwrap();
            std::fs::write(r.join("end"), format!("{e}\n")).unwrap();
            std::fs::write(r.join("nr_accesses"), format!("{n}\n")).unwrap();
            std::fs::write(r.join("age"), format!("{a}\n")).unwrap();
        }
        std::fs::write(d.join("total_bytes"), "8192\n").unwrap();
        let v = read_tried_regions(&d).unwrap();
        std::fs::remove_dir_all(&d).ok();
        assert_eq!(
            v,
            vec![
                Region {
                    start: 4096,
                    end: 8192,
                    nr_accesses: 20,
                    age: 1
                },
                Region {
                    start: 8192,
                    end: 12288,
                    nr_accesses: 0,
                    age: 7
                }
            ]
        );
    }

    /// A DAMON sysfs tree in a temporary directory, as the kernel shows it with `nr`
    /// kdamonds whose states are `states` (directories made for `dirs` kdamonds: the
    /// kernel makes them when `nr_kdamonds` is written, the fake in advance).
    struct FakeDamon {
        root: PathBuf,
    }

    impl FakeDamon {
        fn new(name: &str, states: &[&str], dirs: u32) -> FakeDamon {
            let root = std::env::temp_dir()
                .join(format!("tierkit-fake-damon-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&root);
            let kds = root.join("admin/kdamonds");
            for i in 0..dirs {
                let c = kds.join(format!("{i}/contexts/0"));
                for d in ["monitoring_attrs/intervals", "monitoring_attrs/nr_regions"] {
                    std::fs::create_dir_all(c.join(d)).unwrap();
                }
                // Two targets' and two schemes' directories (the kernel makes them
                // when nr_targets / nr_schemes are written).
                for t in 0..2 {
                    for d in [
                        format!("targets/{t}/regions/0"),
                        format!("schemes/{t}/access_pattern/sz"),
                        format!("schemes/{t}/access_pattern/nr_accesses"),
                        format!("schemes/{t}/access_pattern/age"),
                        format!("schemes/{t}/filters/0"),
                    ] {
                        std::fs::create_dir_all(c.join(d)).unwrap();
                    }
                }
                std::fs::write(c.join("avail_operations"), "vaddr fvaddr paddr\n").unwrap();
            }
            std::fs::write(kds.join("nr_kdamonds"), format!("{}\n", states.len())).unwrap();
            for (i, st) in states.iter().enumerate() {
                std::fs::write(kds.join(format!("{i}/state")), format!("{st}\n")).unwrap();
            }
            FakeDamon { root }
        }
        fn admin(&self) -> PathBuf {
            self.root.join("admin")
        }
        fn registry(&self) -> PathBuf {
            self.root.join("run")
        }
        fn read(&self, rel: &str) -> Option<String> {
            std::fs::read_to_string(self.admin().join("kdamonds").join(rel))
                .ok()
                .map(|s| s.trim().to_string())
        }
    }

    impl Drop for FakeDamon {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }

    fn one(pid: i32) -> Vec<Target> {
        vec![Target {
            pid,
            ranges: Vec::new(),
        }]
    }

    const ATTRS: Attrs = Attrs {
        sample_us: 5000,
        aggr_us: 100_000,
        update_us: 1_000_000,
        min_nr_regions: 10,
        max_nr_regions: 1000,
    };

    #[test]
    fn another_tools_running_kdamond_is_left_alone() {
        let f = FakeDamon::new("busy", &["on"], 2);
        let e = Kdamond::start(&f.admin(), &f.registry(), &one(1), "vaddr", &ATTRS).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ResourceBusy);
        assert!(
            e.to_string().contains("[0]") && e.to_string().contains("another tool"),
            "{e}"
        );
        assert!(can_start(&f.admin(), &f.registry()).is_err());
        assert_eq!(f.read("nr_kdamonds").as_deref(), Some("1"));
        assert_eq!(f.read("0/state").as_deref(), Some("on"));
        assert_eq!(f.read("0/contexts/nr_contexts"), None, "nothing written");
        assert!(!owner_file(&f.registry(), 0).exists());
    }

    #[test]
    fn a_new_kdamond_is_added_beside_an_idle_one_and_given_back() {
        // Before: tierkit wrote nr_kdamonds 1 and configured kdamond 0, whoever's it was.
        let f = FakeDamon::new("idle", &["off"], 2);
        assert!(can_start(&f.admin(), &f.registry()).is_ok());
        let mut k = Kdamond::start(&f.admin(), &f.registry(), &one(77), "vaddr", &ATTRS).unwrap();
        assert_eq!(f.read("nr_kdamonds").as_deref(), Some("2"));
        assert_eq!(f.read("1/state").as_deref(), Some("on"));
        assert_eq!(
            f.read("1/contexts/0/targets/0/pid_target").as_deref(),
            Some("77")
        );
        assert_eq!(
            f.read("0/contexts/nr_contexts"),
            None,
            "kdamond 0 untouched"
        );
        let stamp = std::fs::read_to_string(owner_file(&f.registry(), 1)).unwrap();
        assert_eq!(stamp, owner_stamp());
        k.stop();
        assert_eq!(f.read("1/state").as_deref(), Some("off"));
        assert_eq!(
            f.read("nr_kdamonds").as_deref(),
            Some("1"),
            "count restored"
        );
        assert!(!owner_file(&f.registry(), 1).exists());
    }

    #[test]
    fn a_killed_daemons_kdamond_is_recognised_and_taken_back() {
        // A SIGKILLed daemon left kdamond 0 on. Before: refused ("DAMON is in use").
        let f = FakeDamon::new("stale", &["on"], 1);
        std::fs::create_dir_all(f.registry()).unwrap();
        // A pid that cannot exist (above pid_max's ceiling), so the owner is dead.
        std::fs::write(owner_file(&f.registry(), 0), "4194400 12345\n").unwrap();
        assert!(can_start(&f.admin(), &f.registry()).is_ok());
        let k = Kdamond::start(&f.admin(), &f.registry(), &one(78), "vaddr", &ATTRS).unwrap();
        assert_eq!(
            f.read("nr_kdamonds").as_deref(),
            Some("1"),
            "no kdamond added"
        );
        assert_eq!(
            f.read("0/contexts/0/targets/0/pid_target").as_deref(),
            Some("78")
        );
        assert_eq!(f.read("0/state").as_deref(), Some("on"));
        assert_eq!(
            std::fs::read_to_string(owner_file(&f.registry(), 0)).unwrap(),
            owner_stamp()
        );
        drop(k);
        assert_eq!(f.read("0/state").as_deref(), Some("off"));
        assert!(!owner_file(&f.registry(), 0).exists());
        // A living owner's kdamond (this test process) is not stale.
        std::fs::create_dir_all(f.registry()).unwrap();
        std::fs::write(owner_file(&f.registry(), 0), owner_stamp()).unwrap();
        assert!(stale_own(&f.registry(), 1).is_empty());
    }

    #[test]
    fn a_stopped_kdamond_restarts_in_place_and_stays_ours() {
        // Another tool's kdamond 0 is on; ours (1) stops by itself. Before, the
        // observer gave ours back and asked for a new one, which the kernel refuses
        // while kdamond 0 runs: "could not be restarted".
        let f = FakeDamon::new("restart", &["off"], 2);
        let mut k = Kdamond::start(&f.admin(), &f.registry(), &one(77), "vaddr", &ATTRS).unwrap();
        std::fs::write(f.admin().join("kdamonds/0/state"), "on\n").unwrap();
        std::fs::write(f.admin().join("kdamonds/1/state"), "off\n").unwrap();
        assert_eq!(k.state(), Some(false));
        k.restart(&one(78), "vaddr", &ATTRS).unwrap();
        assert_eq!(f.read("1/state").as_deref(), Some("on"));
        assert_eq!(
            f.read("1/contexts/0/targets/0/pid_target").as_deref(),
            Some("78")
        );
        assert_eq!(f.read("nr_kdamonds").as_deref(), Some("2"));
        assert_eq!(
            f.read("0/state").as_deref(),
            Some("on"),
            "the other is untouched"
        );
        assert!(owner_file(&f.registry(), 1).exists(), "still ours");
        // Unreadable is not off.
        std::fs::write(f.admin().join("kdamonds/1/state"), "\n").unwrap();
        assert_eq!(k.state(), None);
        assert!(!k.running());
    }

    #[test]
    fn several_processes_share_one_kdamond_with_a_filtered_scheme_each() {
        let f = FakeDamon::new("multi", &[], 1);
        let two = vec![
            Target {
                pid: 41,
                ranges: vec![(4096, 8192)],
            },
            Target {
                pid: 42,
                ranges: vec![(4096, 16384)],
            },
        ];
        let mut k = Kdamond::start(&f.admin(), &f.registry(), &two, "fvaddr", &ATTRS).unwrap();
        let c = "0/contexts/0";
        assert_eq!(
            f.read(&format!("{c}/targets/nr_targets")).as_deref(),
            Some("2")
        );
        for (i, pid, end) in [(0, "41", "8192"), (1, "42", "16384")] {
            assert_eq!(
                f.read(&format!("{c}/targets/{i}/pid_target")).as_deref(),
                Some(pid)
            );
            assert_eq!(
                f.read(&format!("{c}/targets/{i}/regions/0/end")).as_deref(),
                Some(end)
            );
            // Scheme i keeps target i only: a `target` filter that rejects the rest.
            let flt = format!("{c}/schemes/{i}/filters/0");
            assert_eq!(f.read(&format!("{flt}/type")).as_deref(), Some("target"));
            assert_eq!(
                f.read(&format!("{flt}/damon_target_idx")),
                Some(i.to_string())
            );
            assert_eq!(f.read(&format!("{flt}/matching")).as_deref(), Some("N"));
        }
        assert_eq!(
            f.read(&format!("{c}/schemes/nr_schemes")).as_deref(),
            Some("2")
        );
        // Each scheme's tried regions are its target's snapshot.
        let tried = |i: usize, start: u64| {
            let d = f
                .admin()
                .join(format!("kdamonds/{c}/schemes/{i}/tried_regions/0"));
            std::fs::create_dir_all(&d).unwrap();
            for (k, v) in [
                ("start", start),
                ("end", start + 4096),
                ("nr_accesses", 3),
                ("age", 1),
            ] {
                std::fs::write(d.join(k), format!("{v}\n")).unwrap();
            }
        };
        tried(0, 4096);
        tried(1, 12288);
        let snaps = k.snapshot(2).unwrap();
        assert_eq!(snaps.len(), 2);
        assert_eq!((snaps[0][0].start, snaps[1][0].start), (4096, 12288));
        // One process leaves: the kdamond is reconfigured in place for the other.
        k.retarget(&one(42), "vaddr", &ATTRS).unwrap();
        assert_eq!(f.read("0/state").as_deref(), Some("on"));
        assert_eq!(
            f.read(&format!("{c}/targets/nr_targets")).as_deref(),
            Some("1")
        );
        assert_eq!(
            f.read(&format!("{c}/targets/0/pid_target")).as_deref(),
            Some("42")
        );
        assert_eq!(
            f.read("nr_kdamonds").as_deref(),
            Some("1"),
            "no kdamond added"
        );
    }

    #[test]
    fn probe_of_a_missing_tree_is_absent() {
        let p = probe_at(Path::new("/nonexistent/damon"), true);
        assert!(!p.present && !p.has_ops("vaddr"));
    }
}
