//! The daemon's settings, `--set` overrides, sizes, and which facilities each
//! registered policy needs live.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tierkit_core::ConfigError;
use tierkit_policies::PolicyConfig;

/// Daemon settings (`--set live.KEY=VALUE`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LiveConfig {
    /// Observation interval, ms: placement refresh (move_pages query, /proc maps,
    /// node meminfo), budget enforcement and one stats line. Range 50..=60000.
    pub interval_ms: u64,
    /// Pages per move_pages(2) call. Range 1..=4096.
    pub batch_pages: usize,
    /// Migration rate cap, pages per second (25600 = 100 MiB/s). Range 1..=1048576.
    pub rate_pages_per_s: u64,
    /// Seconds of migrations the queue may hold (at the rate cap). Range 1..=60.
    pub queue_s: u64,
    /// DAMON operations: `auto` (fvaddr, else vaddr), `fvaddr`, `vaddr`.
    pub damon_ops: String,
    /// DAMON sampling interval, µs (DAMON default 5000). Range 100..=1000000.
    pub damon_sample_us: u64,
    /// DAMON aggregation interval, ms: one snapshot each. Range 10..=10000.
    pub damon_aggr_ms: u64,
    /// DAMON minimum regions. Range 3..=damon_max_nr_regions.
    pub damon_min_nr_regions: u32,
    /// DAMON maximum regions (spatial resolution vs. daemon CPU: each snapshot reads
    /// four sysfs files per region). Range 3..=100000.
    pub damon_max_nr_regions: u32,
    /// Watching time before an accessed-bit policy starts, ms: DAMON's first
    /// snapshots hold a few coarse regions (the whole buffer as one), so a policy (or
    /// the budget) ranking on them would pick blindly. Range 0..=60000.
    pub warmup_ms: u64,
    /// Seed of the daemon's generator (`random()`, probabilistic young bits).
    pub seed: u64,
    /// Intel PEBS load-latency threshold, core cycles: loads slower than this are
    /// sampled, standing for LLC misses (MEMTIS samples `mem-loads` the same way; 64
    /// cycles is above an L2 hit and below any DRAM access). Range 3..=65535. AMD IBS
    /// samples every op and ignores it.
    pub sample_ldlat: u32,
}

impl Default for LiveConfig {
    fn default() -> Self {
        LiveConfig {
            interval_ms: 1000,
            batch_pages: 512,
            rate_pages_per_s: 25_600,
            queue_s: 4,
            damon_ops: "auto".into(),
            damon_sample_us: 5000,
            damon_aggr_ms: 200,
            damon_min_nr_regions: 10,
            damon_max_nr_regions: 200,
            warmup_ms: 2000,
            seed: 42,
            sample_ldlat: 64,
        }
    }
}

impl LiveConfig {
    /// Check ranges; the error names the field and its range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let r = |name: &str, v: u64, lo: u64, hi: u64| {
            if v < lo || v > hi {
                Err(format!("live.{name} = {v} is out of range {lo}..={hi}"))
            } else {
                Ok(())
            }
        };
        r("interval_ms", self.interval_ms, 50, 60_000)?;
        r("batch_pages", self.batch_pages as u64, 1, 4096)?;
        r("rate_pages_per_s", self.rate_pages_per_s, 1, 1 << 20)?;
        r("queue_s", self.queue_s, 1, 60)?;
        r("damon_sample_us", self.damon_sample_us, 100, 1_000_000)?;
        r("damon_aggr_ms", self.damon_aggr_ms, 10, 10_000)?;
        r("warmup_ms", self.warmup_ms, 0, 60_000)?;
        r("sample_ldlat", self.sample_ldlat as u64, 3, 65_535)?;
        r(
            "damon_max_nr_regions",
            self.damon_max_nr_regions as u64,
            3,
            100_000,
        )?;
        r(
            "damon_min_nr_regions",
            self.damon_min_nr_regions as u64,
            3,
            self.damon_max_nr_regions as u64,
        )?;
        if self.damon_sample_us > self.damon_aggr_ms * 1000 {
            return Err("live.damon_sample_us must not exceed live.damon_aggr_ms".into());
        }
        if !["auto", "fvaddr", "vaddr"].contains(&self.damon_ops.as_str()) {
            return Err(format!(
                "live.damon_ops = `{}`: valid are auto, fvaddr, vaddr",
                self.damon_ops
            )
            .into());
        }
        Ok(())
    }
}

/// Parse a size: `64MiB`, `1GiB`, `4096KiB`, `2G`, `512M`, or bytes. Binary units.
pub fn parse_size(s: &str) -> Result<u64, ConfigError> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("bad size `{s}`: use e.g. 64MiB, 1GiB, 4096KiB or a byte count"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => {
            return Err(
                format!("bad size `{s}`: unit `{unit}` is not one of KiB, MiB, GiB, TiB").into(),
            )
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("size `{s}` is too large").into())
}

fn set_path(root: &mut Value, path: &[&str], v: Value) -> Result<(), String> {
    let mut cur = root;
    for (i, k) in path.iter().enumerate() {
        let obj = cur
            .as_object_mut()
            .ok_or_else(|| format!("`{}` is a value, not a section", path[..i].join(".")))?;
        if i + 1 == path.len() {
            obj.insert((*k).to_string(), v);
            return Ok(());
        }
        cur = obj
            .entry((*k).to_string())
            .or_insert_with(|| Value::Object(Default::default()));
    }
    Ok(())
}

fn parse_value(v: &str) -> Value {
    serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_string()))
}

/// Build the policy's config (its defaults plus `policy.KEY=VALUE` / bare `KEY=VALUE`
/// sets) and the daemon's (`live.KEY=VALUE`).
pub fn build(
    policy: &str,
    sets: &[String],
    interval_ms: Option<u64>,
) -> Result<(PolicyConfig, LiveConfig), String> {
    let pc = PolicyConfig::default_for(policy).ok_or_else(|| {
        format!(
            "unknown policy `{policy}`; valid: {}",
            PolicyConfig::names().join(", ")
        )
    })?;
    let mut pv = serde_json::to_value(&pc).map_err(|e| e.to_string())?;
    let mut lv = serde_json::to_value(LiveConfig::default()).map_err(|e| e.to_string())?;
    if let Some(ms) = interval_ms {
        lv["interval_ms"] = Value::from(ms);
    }
    for kv in sets {
        let (k, v) = kv.split_once('=').ok_or_else(|| {
            format!("--set `{kv}`: expected KEY=VALUE, e.g. --set live.batch_pages=256")
        })?;
        let parts: Vec<&str> = k.trim().split('.').collect();
        if parts.iter().any(|p| p.is_empty()) {
            return Err(format!("--set key `{k}` is malformed"));
        }
        match parts[0] {
            "live" if parts.len() > 1 => set_path(&mut lv, &parts[1..], parse_value(v.trim()))?,
            "policy" if parts.len() > 1 => set_path(&mut pv, &parts[1..], parse_value(v.trim()))?,
            "name" => return Err("--set name: choose the policy with --policy".into()),
            _ => set_path(&mut pv, &parts, parse_value(v.trim()))?,
        }
    }
    let pc: PolicyConfig =
        serde_json::from_value(pv).map_err(|e| format!("policy `{policy}`: {e}"))?;
    pc.validate()
        .map_err(|e| format!("policy `{policy}`: {e}"))?;
    let lc: LiveConfig = serde_json::from_value(lv).map_err(|e| format!("live settings: {e}"))?;
    lc.validate().map_err(|e| e.to_string())?;
    Ok((pc, lc))
}

/// A facility a policy needs live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Need {
    /// Accessed ("young") bits: DAMON vaddr/fvaddr here.
    AccessedBits,
    /// Hinting faults: derived from accessed-bit observation of armed pages.
    HintFaults,
    /// PEBS/IBS memory-access sampling.
    Sampling,
    /// The workload's future (clairvoyant references).
    Future,
    /// An unbounded fast tier (the `all-fast` reference).
    UnboundedFastTier,
}

/// What a policy, as configured, needs live: what it declares it observes
/// ([`tierkit_core::Requirements`], which may depend on its settings). The simulator
/// checks the declarations (debug builds), so a policy that observes something live
/// mode cannot give is refused rather than silently blind.
pub fn needs_of(cfg: &PolicyConfig) -> Vec<Need> {
    let req = cfg
        .build(&tierkit_core::BuildContext::default())
        .requirements();
    [
        (req.future_knowledge, Need::Future),
        (req.unbounded_fast_tier, Need::UnboundedFastTier),
        (req.hint_faults, Need::HintFaults),
        (req.accessed_bits, Need::AccessedBits),
        (req.sampling, Need::Sampling),
    ]
    .into_iter()
    .filter_map(|(declared, need)| declared.then_some(need))
    .collect()
}

/// [`needs_of`] a registered policy with its default settings; `None` for a name the
/// registry does not know.
pub fn needs(policy: &str) -> Option<Vec<Need>> {
    PolicyConfig::default_for(policy).map(|c| needs_of(&c))
}

/// What this machine offers the daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
pub struct Offer {
    /// DAMON sysfs with vaddr or fvaddr operations.
    pub damon_vaddr: bool,
    /// PEBS/IBS sampling with data addresses.
    pub memory_sampling: bool,
}

/// Whether `policy` can run live with `offer`: `Ok(facility summary)` or `Err(why
/// not, naming the missing facility)`.
pub fn runnable(policy: &str, offer: Offer) -> Result<String, String> {
    let needs = needs(policy).ok_or_else(|| format!("`{policy}` is not a registered policy"))?;
    runnable_needs(&needs, offer)
}

/// Whether a policy that needs `needs` can run live with `offer` (see [`runnable`]).
pub fn runnable_needs(needs: &[Need], offer: Offer) -> Result<String, String> {
    let mut used = Vec::new();
    for n in needs {
        match n {
            Need::Future => return Err("reads the workload's future (simulator only)".into()),
            Need::UnboundedFastTier => {
                return Err("needs an unbounded fast tier (a simulator reference)".into())
            }
            Need::Sampling if !offer.memory_sampling => {
                return Err("needs memory-access sampling (PEBS/IBS via perf_event_open), which this machine does not offer".into())
            }
            Need::Sampling => used.push("PEBS/IBS memory-access samples (perf_event_open)"),
            Need::AccessedBits | Need::HintFaults if !offer.damon_vaddr => {
                return Err("needs accessed bits: DAMON sysfs with vaddr/fvaddr operations (CONFIG_DAMON_VADDR, CONFIG_DAMON_SYSFS) is missing and idle page tracking is not used".into())
            }
            Need::AccessedBits => used.push("accessed bits from DAMON regions"),
            Need::HintFaults => used.push("hinting faults derived from DAMON regions of armed pages"),
        }
    }
    if used.is_empty() {
        used.push("placement only (move_pages)");
    }
    Ok(used.join(" + "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("4096KiB"), Ok(4096 << 10));
        assert_eq!(parse_size("12345"), Ok(12345));
        assert_eq!(parse_size("2g"), Ok(2 << 30));
        assert!(parse_size("12 parsecs")
            .unwrap_err()
            .to_string()
            .contains("unit"));
        assert!(parse_size("MiB").is_err());
        assert!(parse_size("99999999999999TiB").is_err());
    }

    #[test]
    fn needs_follow_the_policies_declarations() {
        use Need::*;
        // What the hand-kept table said before the policies declared it themselves.
        let table: &[(&str, &[Need])] = &[
            ("first-touch", &[]),
            ("all-fast", &[UnboundedFastTier]),
            ("oracle", &[Future]),
            ("oracle-static", &[Future]),
            ("damon-tiering", &[AccessedBits]),
            ("multiclock", &[AccessedBits]),
            ("nimble", &[AccessedBits]),
            ("autonuma", &[HintFaults]),
            ("autotiering", &[HintFaults]),
            ("autotiering-cpm", &[HintFaults]),
            ("linux-tiering", &[HintFaults, AccessedBits]),
            ("linux-nb", &[HintFaults, AccessedBits]),
            ("tpp", &[HintFaults, AccessedBits]),
            ("chrono", &[HintFaults, AccessedBits]),
            ("chrono-semiauto", &[HintFaults, AccessedBits]),
            ("pet", &[HintFaults, AccessedBits]),
            ("mglru-pd", &[HintFaults, AccessedBits]),
            ("linux-tiering-mglru", &[HintFaults, AccessedBits]),
            ("thermostat", &[HintFaults, AccessedBits]),
            ("hemem", &[Sampling]),
            ("freqtier", &[Sampling]),
            ("memtis", &[Sampling]),
        ];
        assert_eq!(
            table.len(),
            PolicyConfig::names().len(),
            "a policy per line"
        );
        for (name, want) in table {
            assert_eq!(needs(name).as_deref(), Some(*want), "{name}");
        }
        assert_eq!(needs("nope"), None);
        // A setting can add an observation: multiclock's re-access meter arms hinting
        // faults (the simulator's check found it undeclared).
        let (measuring, _) = build("multiclock", &["measure_reaccess=true".into()], None).unwrap();
        assert_eq!(needs_of(&measuring), vec![HintFaults, AccessedBits]);
    }

    #[test]
    fn runnable_follows_the_offer() {
        let none = Offer::default();
        let damon = Offer {
            damon_vaddr: true,
            memory_sampling: false,
        };
        assert!(runnable("first-touch", none).is_ok());
        assert!(runnable("multiclock", none).unwrap_err().contains("DAMON"));
        assert!(runnable("multiclock", damon).is_ok());
        assert!(runnable("chrono", damon)
            .unwrap()
            .contains("hinting faults"));
        assert!(runnable("memtis", damon).unwrap_err().contains("PEBS"));
        let pebs = Offer {
            damon_vaddr: false,
            memory_sampling: true,
        };
        assert!(runnable("memtis", pebs).unwrap().contains("PEBS/IBS"));
        assert!(runnable("oracle", damon).unwrap_err().contains("future"));
        assert!(runnable("all-fast", damon).is_err());
    }

    #[test]
    fn sets_reach_policy_and_daemon_and_typos_fail() {
        let (p, l) = build("multiclock", &["live.batch_pages=64".into()], Some(500)).unwrap();
        assert_eq!(p.name(), "multiclock");
        assert_eq!((l.batch_pages, l.interval_ms), (64, 500));
        assert!(build("multiclock", &["live.bach_pages=1".into()], None)
            .unwrap_err()
            .contains("bach_pages"));
        assert!(build("multiclock", &["live.batch_pages=0".into()], None)
            .unwrap_err()
            .contains("batch_pages"));
        assert!(build("multiclock", &["no_such_field=1".into()], None).is_err());
        assert!(build("nope", &[], None).unwrap_err().contains("valid:"));
        assert!(build("multiclock", &["x".into()], None).is_err());
    }
}
