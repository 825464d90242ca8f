//! One run's configuration: built-in defaults, then a TOML file, then command-line
//! flags, then `--set key=value` overrides, validated before anything runs.

use anyhow::{anyhow, bail, Result};
use serde::{Deserialize, Serialize};
use tierkit_policies::PolicyConfig;
use tierkit_sim::{config::preset_names, MachineConfig, SimConfig};
use tierkit_workloads::WorkloadConfig;

/// Default seed of a run.
pub const DEFAULT_SEED: u64 = 42;
/// Default workload of `tierkit sim`.
pub const DEFAULT_WORKLOAD: &str = "gups";
/// Default policy of `tierkit sim`: MEMTIS, one of the five systems tierkit exists
/// for, visibly tiering on the default GUPS (its hot set starts in the slow tier).
pub const DEFAULT_POLICY: &str = "memtis";

fn default_seed() -> u64 {
    DEFAULT_SEED
}

/// Everything that defines one simulation run.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    /// Seed for the workload and the policy's randomness.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// The workload and its parameters.
    pub workload: WorkloadConfig,
    /// The policy and its parameters.
    pub policy: PolicyConfig,
    /// The machine.
    #[serde(default)]
    pub machine: MachineConfig,
    /// Simulation settings.
    #[serde(default)]
    pub sim: SimConfig,
}

/// The command-line pieces a run configuration is built from.
#[derive(Debug, Default, Clone)]
pub struct RunArgs {
    /// `--config FILE` contents and path.
    pub config_file: Option<(String, String)>,
    /// `--workload`.
    pub workload: Option<String>,
    /// `--policy`.
    pub policy: Option<String>,
    /// `--machine`.
    pub machine: Option<String>,
    /// `--ratio` (a ratio or a size).
    pub fast: Option<String>,
    /// `--seed`.
    pub seed: Option<u64>,
    /// `--set key=value`, in order.
    pub sets: Vec<String>,
}

/// Build and validate a run configuration.
pub fn build(args: &RunArgs) -> Result<RunConfig> {
    let mut root = toml::Table::new();
    if let Some((path, text)) = &args.config_file {
        root = text.parse::<toml::Table>().map_err(|e| {
            let (line, col) = e.span().map(|s| line_col(text, s.start)).unwrap_or((0, 0));
            anyhow!(
                "config file {path}: parse error at line {line}, column {col}: {}",
                e.message().trim()
            )
        })?;
    }
    // Flags choose names; a name different from the file's resets that section.
    let wname = section_name(&root, "workload")?
        .or(args.workload.clone())
        .unwrap_or_else(|| DEFAULT_WORKLOAD.into());
    let wname = args.workload.clone().unwrap_or(wname);
    // `--workload trace:PATH` is the `trace` workload with `workload.path = PATH`.
    let (wname, trace_path) = match wname.strip_prefix("trace:") {
        Some(path) => ("trace".to_string(), Some(path.to_string())),
        None => (wname, None),
    };
    let pname = section_name(&root, "policy")?
        .or(args.policy.clone())
        .unwrap_or_else(|| DEFAULT_POLICY.into());
    let pname = args.policy.clone().unwrap_or(pname);
    check_name("workload", &wname, &WorkloadConfig::names())?;
    check_name("policy", &pname, &PolicyConfig::names())?;
    set_section_name(&mut root, "workload", &wname);
    if let Some(path) = trace_path {
        set_path(&mut root, "workload.path", toml::Value::String(path))?;
    }
    set_section_name(&mut root, "policy", &pname);
    if let Some(m) = &args.machine {
        check_name("machine", m, &preset_names())?;
        set_path(&mut root, "machine.preset", toml::Value::String(m.clone()))?;
    }
    if let Some(f) = &args.fast {
        set_path(&mut root, "machine.fast", toml::Value::String(f.clone()))?;
    }
    if let Some(s) = args.seed {
        set_path(&mut root, "seed", toml::Value::Integer(s as i64))?;
    }
    for kv in &args.sets {
        let (key, value) = kv.split_once('=').ok_or_else(|| {
            anyhow!("--set `{kv}`: expected key=value, e.g. --set workload.hot_fraction=0.2")
        })?;
        set_path(&mut root, key.trim(), parse_value(value.trim()))?;
    }
    let mut cfg: RunConfig =
        toml::Value::Table(root)
            .try_into()
            .map_err(|e: toml::de::Error| {
                anyhow!("invalid configuration: {}", one_line(&e.to_string()))
            })?;
    // Checked first, so that a bad value is refused even where it would do nothing.
    cfg.validate()?;
    // An exact run drops no access, so it has no dropped compute to carry, no strata
    // and no page sampled in time: it is the same run (same identity, reused by
    // `compare`) whatever `sim.sampled_compute`, `sim.sample_strata` and
    // `sim.time_sampled_weight` say, which lets `--validate-sampling` of either mode
    // or strata share their exact runs. A sampled run names its compute mode, the
    // default included, so that its identity differs from a run resolved before the
    // default changed (which named only "carried").
    let exact = cfg.sim.sample_rate == tierkit_sim::config::SampleRate::EXACT;
    cfg.sim.sampled_compute = (!exact).then(|| cfg.sim.sampled_compute());
    if exact {
        cfg.sim.sample_strata = tierkit_core::SampleStrata::Address;
        cfg.sim.time_sampled_weight = 0.0;
    }
    Ok(cfg)
}

impl RunConfig {
    /// Check every section.
    pub fn validate(&self) -> Result<()> {
        self.workload
            .validate()
            .map_err(|e| anyhow!("invalid workload `{}` setting: {e}", self.workload.name()))?;
        self.policy
            .validate()
            .map_err(|e| anyhow!("invalid policy `{}` setting: {e}", self.policy.name()))?;
        self.machine.validate()?;
        self.sim.validate()?;
        Ok(())
    }

    /// The configuration as TOML (written beside the results so a run can be redone).
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a run config always serializes")
    }
}

fn check_name(kind: &str, name: &str, valid: &[&str]) -> Result<()> {
    if valid.contains(&name) {
        Ok(())
    } else {
        bail!("unknown {kind} `{name}`; valid: {}", valid.join(", "))
    }
}

fn section_name(root: &toml::Table, section: &str) -> Result<Option<String>> {
    match root.get(section) {
        None => Ok(None),
        Some(toml::Value::Table(t)) => match t.get("name") {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => bail!("[{section}] name must be a string, got `{other}`"),
        },
        Some(_) => bail!("`{section}` must be a table ([{section}])"),
    }
}

fn set_section_name(root: &mut toml::Table, section: &str, name: &str) {
    let keep = matches!(root.get(section), Some(toml::Value::Table(t))
        if t.get("name").and_then(|v| v.as_str()).is_none_or(|n| n == name));
    if !keep {
        root.insert(section.into(), toml::Value::Table(toml::Table::new()));
    }
    if let Some(toml::Value::Table(t)) = root.get_mut(section) {
        t.insert("name".into(), toml::Value::String(name.into()));
    }
}

/// Set a dotted key in the table, creating intermediate tables.
fn set_path(root: &mut toml::Table, key: &str, value: toml::Value) -> Result<()> {
    let parts: Vec<&str> = key.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        bail!("--set key `{key}` is malformed; use dotted names like policy.scan.scan_size_mb");
    }
    if parts[parts.len() - 1] == "name" && parts.len() == 2 {
        bail!(
            "--set {key}: choose the {} with --{} instead",
            parts[0],
            parts[0]
        );
    }
    let mut t = root;
    for p in &parts[..parts.len() - 1] {
        let entry = t
            .entry(p.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        t = match entry {
            toml::Value::Table(t) => t,
            _ => bail!("--set {key}: `{p}` is a value, not a section"),
        };
    }
    t.insert(parts[parts.len() - 1].to_string(), value);
    Ok(())
}

/// A `--set` value: TOML syntax (`42`, `0.5`, `true`, `"x"`, `[1, 2]`), else a bare string.
fn parse_value(s: &str) -> toml::Value {
    format!("v = {s}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(s.to_string()))
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, col)
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> RunArgs {
        RunArgs::default()
    }

    #[test]
    fn defaults_build() {
        let c = build(&args()).unwrap();
        assert_eq!(c.workload.name(), DEFAULT_WORKLOAD);
        assert_eq!(c.policy.name(), DEFAULT_POLICY);
        assert_eq!(c.seed, DEFAULT_SEED);
    }

    #[test]
    fn set_overrides_nested_fields_and_unknown_keys_fail() {
        let mut a = args();
        a.sets = vec![
            "machine.llc_enabled=false".into(),
            "sim.interval_ms=50".into(),
        ];
        let c = build(&a).unwrap();
        assert!(!c.machine.llc_enabled);
        assert_eq!(c.sim.interval_ms, 50);
        a.sets = vec!["machine.llc_enabld=false".into()];
        let e = build(&a).unwrap_err().to_string();
        assert!(e.contains("llc_enabld") && e.contains("llc_enabled"), "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn unknown_names_list_valid_ones() {
        for (field, f) in [
            ("policy", &mut |a: &mut RunArgs| {
                a.policy = Some("magic".into()) as _
            }),
            ("workload", &mut |a: &mut RunArgs| {
                a.workload = Some("magic".into()) as _
            }),
            ("machine", &mut |a: &mut RunArgs| {
                a.machine = Some("magic".into()) as _
            }),
        ] as [(&str, &mut dyn FnMut(&mut RunArgs)); 3]
        {
            let mut a = args();
            f(&mut a);
            let e = build(&a).unwrap_err().to_string();
            assert!(
                e.contains(&format!("unknown {field} `magic`")) && e.contains("valid:"),
                "{e}"
            );
        }
    }

    #[test]
    fn malformed_ratio_and_bad_toml_are_reported() {
        let mut a = args();
        a.fast = Some("1:zero".into());
        assert!(build(&a)
            .unwrap_err()
            .to_string()
            .contains("fast-tier size"));
        let mut a = args();
        a.config_file = Some(("x.toml".into(), "seed = 1\n[machine\n".into()));
        let e = build(&a).unwrap_err().to_string();
        assert!(e.contains("x.toml") && e.contains("line 2"), "{e}");
    }

    #[test]
    fn file_then_flags_then_sets() {
        let mut a = args();
        a.config_file = Some((
            "f.toml".into(),
            "seed = 7\n[workload]\nname = \"gups\"\nhot_fraction = 0.2\n[machine]\nfast = \"1:4\"\n".into(),
        ));
        a.fast = Some("1:2".into());
        let c = build(&a).unwrap();
        assert_eq!(c.seed, 7);
        assert_eq!(c.machine.fast, "1:2");
        let text = c.to_toml();
        assert!(text.contains("hot_fraction = 0.2"), "{text}");
        // Round trip: the written config rebuilds the same run.
        let mut b = args();
        b.config_file = Some(("again.toml".into(), text.clone()));
        assert_eq!(build(&b).unwrap().to_toml(), text);
    }

    /// A sampled run's resolved config names its compute mode, the default included
    /// (a build before carried became the default wrote only "carried", so a config
    /// without the key must not be this build's carried run: `compare` reuses a run by
    /// its config's text); an exact run's never does (no effect, shared by both modes).
    #[test]
    fn a_sampled_run_names_its_compute_mode_and_an_exact_run_no_sampling_setting() {
        let text = |sets: &[&str]| {
            let mut a = args();
            a.sets = sets.iter().map(|s| s.to_string()).collect();
            build(&a).unwrap().to_toml()
        };
        let carried = text(&["sim.sample_rate=\"1/8\""]);
        assert!(
            carried.contains("sampled_compute = \"carried\""),
            "{carried}"
        );
        let kept = text(&["sim.sample_rate=\"1/8\"", "sim.sampled_compute=\"kept\""]);
        assert!(kept.contains("sampled_compute = \"kept\""), "{kept}");
        for mode in ["kept", "carried"] {
            let exact = text(&[&format!("sim.sampled_compute=\"{mode}\"")]);
            assert!(!exact.contains("sampled_compute"), "{exact}");
            assert_eq!(exact, text(&[]));
        }
        // Nor do an exact run's strata or pages sampled in time (none without a sample).
        for strata in ["mapping", "page"] {
            let exact = text(&[
                &format!("sim.sample_strata=\"{strata}\""),
                "sim.time_sampled_weight=0.032",
            ]);
            assert_eq!(exact, text(&[]));
        }
        let by_page = text(&["sim.sample_rate=\"1/8\"", "sim.sample_strata=\"page\""]);
        assert!(by_page.contains("sample_strata = \"page\""), "{by_page}");
        // A value out of range is refused even where it would do nothing.
        let mut a = args();
        a.sets = vec!["sim.time_sampled_weight=1.5".into()];
        let err = build(&a).unwrap_err().to_string();
        assert!(err.contains("time_sampled_weight"), "{err}");
        // The written config rebuilds the same run.
        let mut b = args();
        b.config_file = Some(("again.toml".into(), carried.clone()));
        assert_eq!(build(&b).unwrap().to_toml(), carried);
    }
}
