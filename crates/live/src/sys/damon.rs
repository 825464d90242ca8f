//! DAMON sysfs control (`/sys/kernel/mm/damon/admin`, Linux 5.18+): one kdamond
//! with one context monitoring the target (`vaddr`, or `fvaddr` over explicit
//! ranges), and a `stat` scheme matching every region, whose `tried_regions` give a
//! snapshot of every region's `nr_accesses` and `age` (6.2+). The write sequence
//! is the one in `shared/reference/qemu-numa.md`.

use serde::Serialize;
use std::io;
use std::path::{Path, PathBuf};

/// The DAMON sysfs admin directory.
pub const ADMIN: &str = "/sys/kernel/mm/damon/admin";

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

/// A kdamond the daemon configured and started; turned off and removed on drop.
#[derive(Debug)]
pub struct Kdamond {
    kd: PathBuf,
    on: bool,
}

impl Kdamond {
    /// Configure kdamond 0 to monitor `pid` with `ops` (`vaddr` or `fvaddr`; `ranges`
    /// are the fvaddr target regions, ignored by vaddr) and turn it on. Fails if
    /// another kdamond is running (writing `nr_kdamonds` would fail with EBUSY).
    pub fn start(
        admin: &Path,
        pid: i32,
        ops: &str,
        ranges: &[(u64, u64)],
        a: &Attrs,
    ) -> io::Result<Kdamond> {
        let kd = admin.join("kdamonds");
        let p = probe_at(admin, false);
        if !p.running.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::ResourceBusy,
                format!(
                    "DAMON is in use: kdamond {:?} is on; turn it off first",
                    p.running
                ),
            ));
        }
        write(&kd.join("nr_kdamonds"), "1")?;
        let mut me = Kdamond {
            kd: kd.join("0"),
            on: false,
        };
        write(&me.kd.join("contexts/nr_contexts"), "1")?;
        let c = me.ctx();
        write(&c.join("operations"), ops)?;
        let iv = c.join("monitoring_attrs/intervals");
        write(&iv.join("sample_us"), &a.sample_us.to_string())?;
        write(&iv.join("aggr_us"), &a.aggr_us.to_string())?;
        write(&iv.join("update_us"), &a.update_us.to_string())?;
        let nr = c.join("monitoring_attrs/nr_regions");
        // max first: the defaults are 10..1000 and min must stay <= max at `on`.
        write(&nr.join("max"), &a.max_nr_regions.to_string())?;
        write(&nr.join("min"), &a.min_nr_regions.to_string())?;
        write(&c.join("targets/nr_targets"), "1")?;
        write(&c.join("targets/0/pid_target"), &pid.to_string())?;
        if ops == "fvaddr" {
            me.write_regions(ranges)?;
        }
        let s = c.join("schemes");
        write(&s.join("nr_schemes"), "1")?;
        write(&s.join("0/action"), "stat")?;
        // New schemes match nothing until the maxima are set (qemu-numa.md).
        write(&s.join("0/access_pattern/sz/max"), &u64::MAX.to_string())?;
        write(
            &s.join("0/access_pattern/nr_accesses/max"),
            &u32::MAX.to_string(),
        )?;
        write(&s.join("0/access_pattern/age/max"), &u32::MAX.to_string())?;
        write(&me.kd.join("state"), "on")?;
        me.on = true;
        Ok(me)
    }

    fn ctx(&self) -> PathBuf {
        self.kd.join("contexts/0")
    }

    fn write_regions(&self, ranges: &[(u64, u64)]) -> io::Result<()> {
        let r = self.ctx().join("targets/0/regions");
        write(&r.join("nr_regions"), &ranges.len().to_string())?;
        for (i, (s, e)) in ranges.iter().enumerate() {
            // Zero both first so a shrinking start never passes the old end.
            write(&r.join(format!("{i}/start")), "0")?;
            write(&r.join(format!("{i}/end")), &e.to_string())?;
            write(&r.join(format!("{i}/start")), &s.to_string())?;
        }
        Ok(())
    }

    /// fvaddr: replace the target ranges and `commit` them to the running kdamond.
    pub fn set_ranges(&self, ranges: &[(u64, u64)]) -> io::Result<()> {
        self.write_regions(ranges)?;
        write(&self.kd.join("state"), "commit")
    }

    /// Ask for the regions of the latest aggregation (`update_schemes_tried_regions`;
    /// the kernel answers at the scheme's next apply, so this blocks up to one
    /// aggregation interval) and read them.
    pub fn snapshot(&self) -> io::Result<Vec<Region>> {
        write(&self.kd.join("state"), "update_schemes_tried_regions")?;
        read_tried_regions(&self.ctx().join("schemes/0/tried_regions"))
    }

    /// True while the kdamond runs (it stops by itself when its target exits).
    pub fn running(&self) -> bool {
        std::fs::read_to_string(self.kd.join("state")).is_ok_and(|s| s.trim() == "on")
    }

    /// Turn the kdamond off and remove it (also done on drop).
    pub fn stop(&mut self) {
        if self.on {
            let _ = write(&self.kd.join("state"), "off");
            if let Some(kds) = self.kd.parent() {
                let _ = write(&kds.join("nr_kdamonds"), "0");
            }
            self.on = false;
        }
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

    #[test]
    fn probe_of_a_missing_tree_is_absent() {
        let p = probe_at(Path::new("/nonexistent/damon"), true);
        assert!(!p.present && !p.has_ops("vaddr"));
    }
}
