//! `tierkit compare`: every chosen policy on the same work, side by side.
//!
//! A comparison is a matrix — workloads × machines × fast:slow ratios × policies —
//! plus the reference runs every row is measured against (`all-fast` per workload and
//! machine, `first-touch`, `oracle` and `oracle-static` per cell). Runs are independent and each is
//! single-threaded and deterministic, so they run in parallel (`--jobs`) without
//! changing any result. Each run lives in `OUT/runs/<id>/`, where `<id>` ends in a
//! hash of the run's full configuration: rerunning into the same `OUT` reuses every
//! run whose configuration is unchanged.
//!
//! Outputs in `OUT`: `results.csv` (one tidy row per run), `results.json`,
//! `runs/<id>/` (summary, time series, placement epochs, heat map, config) and
//! `report.html` (see [`report`]).

pub mod ray;
pub mod report;
mod schedule;
pub mod seeds;
pub mod suites;
pub mod validate;

use crate::run::{record_workload, simulate_with, RecordedStreams};
use crate::run_config::{self, RunArgs, RunConfig};
use anyhow::{anyhow, bail, Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tierkit_policies::PolicyConfig;
use tierkit_sim::config::preset_names;
use tierkit_sim::future::FutureView;
use tierkit_sim::metrics::{IntervalRow, Placement, Summary};
use tierkit_workloads::WorkloadConfig;

/// The policies every cell is measured against.
pub const REFERENCES: &[&str] = &["all-fast", "first-touch", "oracle", "oracle-static"];

/// The clairvoyant references. Neither is a proven bound (a per-epoch top-k pays for
/// its moves and can lose to a placement that never moves), so a cell's bound is
/// whichever of them ran faster there.
pub const CLAIRVOYANT: &[&str] = &["oracle", "oracle-static"];

/// A comparison matrix as written in TOML (`--config FILE`, or a built-in suite).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatrixSpec {
    /// Policy names; `"*"` means every registered policy.
    #[serde(default)]
    pub policies: Vec<String>,
    /// Fast-tier sizes (`1:8`, `512MiB`).
    #[serde(default)]
    pub ratios: Vec<String>,
    /// Machine presets.
    #[serde(default)]
    pub machines: Vec<String>,
    /// The ratios a machine runs, by machine: a subset of `ratios` (all of them for a
    /// machine not named). A paper may evaluate a device at one fast-tier size only
    /// (FreqTier's low-bandwidth CXL-2 had 8 GB of DRAM to 64 GB of CXL memory), and a
    /// long cell costs too much to repeat where no claim reads it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub machine_ratios: BTreeMap<String, Vec<String>>,
    /// Seed of every run.
    #[serde(default)]
    pub seed: Option<u64>,
    /// `--set` overrides applied to every run.
    #[serde(default)]
    pub set: Vec<String>,
    /// `--set` overrides for one policy's runs, by policy name (e.g. MEMTIS with
    /// `machine.thp="always"` where its paper's comparator ran it so): applied after
    /// the matrix's `set`, before the workload's own.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub policy_set: BTreeMap<String, Vec<String>>,
    /// Workloads with their own overrides.
    #[serde(default)]
    pub workloads: Vec<WorkloadSpec>,
    /// `--set` overrides from the command line: applied to every run after the
    /// matrix's and the workload's own, so what the user types always wins.
    #[serde(skip)]
    pub set_last: Vec<String>,
}

/// One workload of a matrix.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// Registered workload name.
    pub name: String,
    /// `--set` overrides for this workload's runs (`workload.scale=0.5`).
    #[serde(default)]
    pub set: Vec<String>,
    /// `--set` overrides for one policy's runs of this workload, by policy name;
    /// applied after the workload's `set`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub policy_set: BTreeMap<String, Vec<String>>,
    /// Label in reports; defaults to the name plus any `mix`/`kernel` setting.
    #[serde(default)]
    pub label: Option<String>,
    /// The matrix's machines this workload runs on (all of them if absent): a paper
    /// may evaluate a workload on one device only, and a long cell costs too much to
    /// repeat where no claim reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machines: Option<Vec<String>>,
    /// Policies of the matrix this workload does not run: one whose sampled runs of
    /// this workload failed validation (docs/sampling.md), or a clairvoyant reference
    /// whose reading of the future does not hold for it (docs/policies/oracle.md,
    /// "Limits"), is left out rather than reported wrong. Each must be a registered
    /// policy; all-fast and first-touch always run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skip_policies: Vec<String>,
}

/// What the command line asked for.
#[derive(Debug, Clone, Default)]
pub struct CompareArgs {
    /// `--suite`.
    pub suite: Option<String>,
    /// `--config` path and contents.
    pub config: Option<(String, String)>,
    /// `--policies`.
    pub policies: Option<Vec<String>>,
    /// `--workloads`.
    pub workloads: Option<Vec<String>>,
    /// `--ratios`.
    pub ratios: Option<Vec<String>>,
    /// `--machine` (one or more).
    pub machines: Option<Vec<String>>,
    /// `--seed`.
    pub seed: Option<u64>,
    /// `--set` for every run.
    pub sets: Vec<String>,
    /// `--jobs`.
    pub jobs: usize,
    /// `--out`.
    pub out: PathBuf,
    /// `--force`: write into an `--out` that holds files tierkit did not write.
    pub force: bool,
    /// Draw a progress bar (on a terminal).
    pub progress: bool,
    /// Execute nothing: derive the results from the runs already finished in `out`
    /// (another executor, such as a Ray cluster, ran them) and report every other
    /// run as failed.
    pub only_finished: bool,
    /// The most bytes one workload's recording may take before its runs fall back to
    /// generating it each; `None` for [`crate::run::default_recording_budget`].
    pub recording_budget: Option<u64>,
}

/// One planned run.
#[derive(Debug, Clone)]
pub struct PlannedRun {
    /// Directory name under `runs/`.
    pub id: String,
    /// Workload label.
    pub workload: String,
    /// Machine preset.
    pub machine: String,
    /// Fast-tier size as given.
    pub ratio: String,
    /// Policy name.
    pub policy: String,
    /// Added only as a reference for the others.
    pub reference: bool,
    /// The resolved configuration.
    pub config: RunConfig,
}

/// A finished run with what the report needs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    /// Directory name under `runs/`.
    pub id: String,
    /// Workload label.
    pub workload: String,
    /// Machine preset.
    pub machine: String,
    /// Fast-tier size.
    pub ratio: String,
    /// Policy.
    pub policy: String,
    /// Reference run added by compare.
    pub reference: bool,
    /// The run's summary.
    pub summary: Summary,
    /// The interval time series.
    pub series: Vec<IntervalRow>,
    /// Placement epochs and heat map.
    pub placement: Placement,
}

/// Derived metrics of a run, against its references.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ResultRow {
    /// Run id.
    pub id: String,
    /// Workload label.
    pub workload: String,
    /// Machine preset.
    pub machine: String,
    /// Fast-tier size.
    pub ratio: String,
    /// Policy.
    pub policy: String,
    /// Added as a reference.
    pub reference: bool,
    /// Seed.
    pub seed: u64,
    /// Policy time scale of the run.
    pub policy_time_scale: f64,
    /// Sample rate of the run (`1` = exact; counts are of the full machine).
    pub sample_rate: String,
    /// Simulated runtime, s.
    pub sim_seconds: f64,
    /// Runtime over `all-fast`'s on the same workload and machine.
    pub slowdown: f64,
    /// Share of memory accesses served by the fast tier.
    pub fast_access_ratio: f64,
    /// The cell's best clairvoyant reference ([`CLAIRVOYANT`], the faster one).
    pub bound_policy: String,
    /// The bound's fast access ratio minus this one.
    pub bound_far_gap: f64,
    /// Runtime over the bound's (below 1: this run beat both clairvoyant references).
    pub bound_runtime_ratio: f64,
    /// Mean precision of fast-tier contents against each epoch's hot set.
    pub precision: f64,
    /// Mean recall.
    pub recall: f64,
    /// Mean F1.
    pub f1: f64,
    /// Pages promoted.
    pub promoted_pages: u64,
    /// Pages demoted.
    pub demoted_pages: u64,
    /// Bytes migrated.
    pub migrated_bytes: u64,
    /// Migration bytes as a share of memory traffic.
    pub migration_traffic_share: f64,
    /// Pages promoted again within the ping-pong window of their demotion.
    pub pingpong_pages: u64,
    /// Hinting faults.
    pub hint_faults: u64,
    /// Samples.
    pub samples: u64,
    /// Tiering CPU, s.
    pub tiering_cpu_seconds: f64,
    /// Policy metadata, bytes.
    pub policy_metadata_bytes: u64,
    /// Mean fast-tier pages in use.
    pub fast_mean_used_pages: f64,
    /// 1 − mean fast use / `first-touch`'s mean fast use.
    pub fast_saving_vs_first_touch: f64,
}

/// Build the matrix spec from a suite or file and the flags; returns it with its title.
pub fn resolve_spec(args: &CompareArgs) -> Result<(MatrixSpec, String)> {
    let (mut spec, title) = match (&args.config, &args.suite) {
        (Some(_), Some(_)) => bail!("give --suite or --config, not both"),
        (Some((path, text)), None) => {
            let spec: MatrixSpec = toml::from_str(text).map_err(|e| {
                anyhow!(
                    "compare config {path}: {}",
                    e.to_string()
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" ")
                )
            })?;
            (spec, format!("config {path}"))
        }
        (None, suite) => {
            let name = suite.as_deref().unwrap_or("quick");
            let s = suites::find(name).ok_or_else(|| {
                anyhow!(
                    "unknown suite `{name}`; valid: {}",
                    suites::names().join(", ")
                )
            })?;
            let spec: MatrixSpec = toml::from_str(s.toml).expect("built-in suites parse");
            (spec, format!("suite {name}"))
        }
    };
    if let Some(p) = &args.policies {
        spec.policies = p.clone();
    }
    if let Some(ws) = &args.workloads {
        let old = std::mem::take(&mut spec.workloads);
        let mut chosen: Vec<WorkloadSpec> = Vec::new();
        for name in ws {
            // A label the results show picks that entry; a workload name picks every
            // entry of it; a registered workload the matrix lacks runs on its
            // defaults.
            let mut picked: Vec<&WorkloadSpec> =
                old.iter().filter(|w| workload_label(w) == *name).collect();
            if picked.is_empty() {
                picked = old.iter().filter(|w| &w.name == name).collect();
            }
            let own: Vec<Option<&WorkloadSpec>> = if picked.is_empty() {
                let registered = tierkit_workloads::WorkloadConfig::names();
                if !registered.contains(&name.as_str()) && !name.starts_with("trace:") {
                    let labels: Vec<String> = old.iter().map(workload_label).collect();
                    bail!(
                        "unknown workload `{name}`; valid: a registered workload ({}){}",
                        registered.join(", "),
                        if labels.is_empty() {
                            String::new()
                        } else {
                            format!(", or a label of the {title} ({})", labels.join(", "))
                        }
                    );
                }
                let bare = WorkloadSpec {
                    name: name.clone(),
                    ..Default::default()
                };
                if !chosen
                    .iter()
                    .any(|c| workload_label(c) == workload_label(&bare))
                {
                    chosen.push(bare);
                }
                vec![None]
            } else {
                picked.iter().map(|w| Some(*w)).collect()
            };
            // Each kept entry keeps the matrix's settings for it; say which, so nothing
            // a run inherits is silent.
            for own in own {
                let label = own.map_or(name.clone(), workload_label);
                if let Some(w) = own {
                    if chosen.iter().any(|c| workload_label(c) == label) {
                        continue;
                    }
                    chosen.push(w.clone());
                }
                let inherited: Vec<&str> = spec
                    .set
                    .iter()
                    .chain(own.map_or(&[][..], |w| &w.set[..]))
                    .map(|s| s.as_str())
                    .collect();
                let per_policy: Vec<String> = spec
                    .policy_set
                    .iter()
                    .chain(own.into_iter().flat_map(|w| w.policy_set.iter()))
                    .map(|(p, sets)| format!("{p}: {}", sets.join(", ")))
                    .collect();
                if !per_policy.is_empty() {
                    eprintln!(
                        "note: workload {label} keeps the {title}'s per-policy settings: {}",
                        per_policy.join("; ")
                    );
                }
                if !inherited.is_empty() {
                    eprintln!(
                        "note: workload {label} keeps the {title}'s settings: {} (override with --set)",
                        inherited.join(", ")
                    );
                }
            }
        }
        spec.workloads = chosen;
    }
    // Machines first: a machine a flag names keeps the matrix's ratios for it, which
    // `--ratios` then narrows.
    if let Some(m) = &args.machines {
        keep_machines(&mut spec, m, &title, "--machines");
    }
    if let Some(r) = &args.ratios {
        spec.ratios = r.clone();
        // A machine the matrix runs at some ratios only keeps those of them the flag
        // names; one left with none is left out, and said so.
        let mut left_out = Vec::new();
        spec.machine_ratios.retain(|m, own| {
            let all = own.join(", ");
            own.retain(|x| r.contains(x));
            if own.is_empty() {
                eprintln!(
                    "note: machine {m} runs only at {all} in the {title}, none of --ratios; it is left out"
                );
                left_out.push(m.clone());
            }
            !own.is_empty()
        });
        if !left_out.is_empty() {
            let kept: Vec<String> = spec
                .machines
                .iter()
                .filter(|m| !left_out.contains(m))
                .cloned()
                .collect();
            keep_machines(&mut spec, &kept, &title, "--ratios");
        }
    }
    if args.seed.is_some() {
        spec.seed = args.seed;
    }
    spec.set_last.extend(args.sets.iter().cloned());
    // A matrix changed by flags is no longer the suite or file it started from.
    let changed: Vec<&str> = [
        ("--policies", args.policies.is_some()),
        ("--workloads", args.workloads.is_some()),
        ("--ratios", args.ratios.is_some()),
        ("--machines", args.machines.is_some()),
        ("--seed", args.seed.is_some()),
        ("--set", !args.sets.is_empty()),
    ]
    .into_iter()
    .filter_map(|(flag, given)| given.then_some(flag))
    .collect();
    let title = if changed.is_empty() {
        title
    } else {
        format!("{title} changed by {}", changed.join(", "))
    };
    Ok((spec, title))
}

/// Run the matrix on `machines` only: a workload the matrix runs on some machines only
/// keeps those of them among `machines`, and one left with none is dropped, said so
/// with the `flag` that narrowed it; per-machine ratios of machines left out go too.
fn keep_machines(spec: &mut MatrixSpec, machines: &[String], title: &str, flag: &str) {
    spec.machines = machines.to_vec();
    spec.machine_ratios.retain(|m, _| machines.contains(m));
    spec.workloads.retain_mut(|w| {
        let Some(own) = &mut w.machines else {
            return true;
        };
        let all = own.join(", ");
        own.retain(|x| machines.contains(x));
        if own.is_empty() {
            eprintln!(
                "note: workload {} runs only on {all} in the {title}, none of {flag}; it is left out",
                w.name
            );
        }
        !own.is_empty()
    });
}

/// The names in `given`, each once, in order; an unregistered one is an error (a
/// built-in suite too: a comparison never drops a system silently).
fn keep_registered(kind: &str, given: &[String], valid: &[&str]) -> Result<Vec<String>> {
    if let Some(missing) = given.iter().find(|n| !valid.contains(&n.as_str())) {
        bail!("unknown {kind} `{missing}`; valid: {}", valid.join(", "));
    }
    let mut seen = Vec::new();
    for n in given.iter().cloned() {
        if !seen.contains(&n) {
            seen.push(n);
        }
    }
    Ok(seen)
}

fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

fn workload_label(w: &WorkloadSpec) -> String {
    if let Some(l) = &w.label {
        return l.clone();
    }
    // A replayed trace is named by its file.
    if let Some(path) = w.name.strip_prefix("trace:") {
        let stem = Path::new(path)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        return format!("trace-{stem}");
    }
    // Distinguish entries of one workload by their selecting knobs.
    let mut label = w.name.clone();
    for s in &w.set {
        for key in ["workload.mix=", "workload.kernel=", "workload.style="] {
            if let Some(v) = s.strip_prefix(key) {
                label.push('-');
                label.push_str(v.trim_matches('"'));
            }
        }
    }
    label
}

/// Plan every run of the matrix, validating each configuration before anything runs.
pub fn plan(spec: &MatrixSpec) -> Result<Vec<PlannedRun>> {
    let registered_policies = PolicyConfig::names();
    let policies: Vec<String> = if spec.policies.iter().any(|p| p == "*") {
        registered_policies.iter().map(|s| s.to_string()).collect()
    } else {
        keep_registered("policy", &spec.policies, &registered_policies)?
    };
    // `trace:PATH` is the `trace` workload replaying PATH, as in `tierkit sim`.
    let registry_name = |name: &str| -> String {
        if name.starts_with("trace:") {
            "trace".to_string()
        } else {
            name.to_string()
        }
    };
    let wnames: Vec<String> = spec
        .workloads
        .iter()
        .map(|w| registry_name(&w.name))
        .collect();
    let registered_workloads = WorkloadConfig::names();
    keep_registered("workload", &wnames, &registered_workloads)?;
    let workloads: Vec<&WorkloadSpec> = spec.workloads.iter().collect();
    let machines = keep_registered("machine", &spec.machines, &preset_names())?;
    let ratios = spec.ratios.clone();
    for (what, empty) in [
        ("policies", policies.is_empty()),
        ("workloads", workloads.is_empty()),
        ("machines", machines.is_empty()),
        ("ratios", ratios.is_empty()),
    ] {
        if empty {
            bail!("the comparison has no {what}; give at least one (e.g. --{what} ...)");
        }
    }
    check_policy_names("policy_set", spec.policy_set.keys(), &registered_policies)?;
    check_machine_ratios(spec, &machines, &ratios)?;
    for w in &workloads {
        check_policy_names(
            &format!("workload `{}`'s policy_set", w.name),
            w.policy_set.keys(),
            &registered_policies,
        )?;
        check_policy_names(
            &format!("workload `{}`'s skip_policies", w.name),
            &w.skip_policies,
            &registered_policies,
        )?;
    }
    let mut runs = Vec::new();
    let mut labels_seen = BTreeMap::new();
    for w in &workloads {
        let mut label = workload_label(w);
        let n = labels_seen.entry(label.clone()).or_insert(0);
        *n += 1;
        if *n > 1 {
            label = format!("{label}-{n}");
        }
        // Validate the workload once and size check every ratio against its footprint.
        let probe = build_config(spec, w, "first-touch", &machines[0], &ratios[0])?;
        let footprint = probe
            .workload
            .build(probe.config_seed())
            .shape()
            .footprint_bytes;
        let own_machines = workload_machines(w, &machines, &label)?;
        for m in &own_machines {
            let ratios = spec.machine_ratios.get(*m).unwrap_or(&ratios);
            for r in ratios {
                let cfg = build_config(spec, w, "first-touch", m, r)?;
                cfg.machine
                    .resolve(footprint, false)
                    .map_err(|e| anyhow!("workload `{label}`, ratio `{r}`: {e}"))?;
            }
            let add = |policy: &str,
                       ratio: &str,
                       reference: bool,
                       runs: &mut Vec<PlannedRun>|
             -> Result<()> {
                let config = build_config(spec, w, policy, m, ratio)?;
                let text = config.to_toml();
                let id = format!(
                    "{}_{}_{}_{}_{:08x}",
                    sanitize(&label),
                    m,
                    sanitize(ratio),
                    policy,
                    fnv1a(&text) as u32
                );
                runs.push(PlannedRun {
                    id,
                    workload: label.clone(),
                    machine: m.to_string(),
                    ratio: ratio.to_string(),
                    policy: policy.to_string(),
                    reference,
                    config,
                });
                Ok(())
            };
            // all-fast does not depend on the ratio: once per workload and machine.
            add(
                "all-fast",
                &ratios[0],
                !policies.iter().any(|p| p == "all-fast"),
                &mut runs,
            )?;
            for r in ratios {
                for reference in &REFERENCES[1..] {
                    let skipped = CLAIRVOYANT.contains(reference)
                        && w.skip_policies.iter().any(|p| p == reference);
                    if !policies.iter().any(|p| p == reference) && !skipped {
                        add(reference, r, true, &mut runs)?;
                    }
                }
                for p in &policies {
                    if p != "all-fast" && !w.skip_policies.contains(p) {
                        add(p, r, false, &mut runs)?;
                    }
                }
            }
        }
    }
    Ok(runs)
}

/// Check `spec.machine_ratios`: each names one of the matrix's `machines` and a
/// non-empty subset of its `ratios`.
fn check_machine_ratios(spec: &MatrixSpec, machines: &[String], ratios: &[String]) -> Result<()> {
    for (m, own) in &spec.machine_ratios {
        if !machines.contains(m) {
            bail!(
                "machine_ratios names machine `{m}`, which the comparison does not run; valid: {}",
                machines.join(", ")
            );
        }
        if own.is_empty() {
            bail!("machine_ratios gives machine `{m}` no ratio; leave it out to run every ratio on it");
        }
        if let Some(x) = own.iter().find(|x| !ratios.contains(x)) {
            bail!(
                "machine_ratios gives machine `{m}` ratio `{x}`, which the comparison does not run; valid: {}",
                ratios.join(", ")
            );
        }
    }
    Ok(())
}

/// The machines of `machines` (the matrix's) that workload `w` runs on: all of them,
/// or those its own `machines` names, each of which must be one of the matrix's.
fn workload_machines<'a>(
    w: &WorkloadSpec,
    machines: &'a [String],
    label: &str,
) -> Result<Vec<&'a String>> {
    let Some(own) = &w.machines else {
        return Ok(machines.iter().collect());
    };
    if own.is_empty() {
        bail!("workload `{label}` has an empty `machines`; leave it out to run on every machine");
    }
    if let Some(x) = own.iter().find(|x| !machines.contains(x)) {
        bail!(
            "workload `{label}`'s machines name `{x}`, which the comparison does not run; valid: {}",
            machines.join(", ")
        );
    }
    Ok(machines.iter().filter(|m| own.contains(m)).collect())
}

/// A `policy_set` or `skip_policies` may only name registered policies: a misspelt
/// name would drop its settings, or keep the runs it meant to skip, without a word.
/// (A registered policy the comparison does not run, e.g. after `--policies`, simply
/// has no runs to apply them to.)
fn check_policy_names<'a>(
    what: &str,
    names: impl IntoIterator<Item = &'a String>,
    registered: &[&str],
) -> Result<()> {
    if let Some(name) = names
        .into_iter()
        .find(|n| !registered.contains(&n.as_str()))
    {
        bail!(
            "{what} names `{name}`, which is not a registered policy; valid: {}",
            registered.join(", ")
        );
    }
    Ok(())
}

trait ConfigSeed {
    fn config_seed(&self) -> u64;
}
impl ConfigSeed for RunConfig {
    fn config_seed(&self) -> u64 {
        self.seed
    }
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

fn build_config(
    spec: &MatrixSpec,
    w: &WorkloadSpec,
    policy: &str,
    machine: &str,
    ratio: &str,
) -> Result<RunConfig> {
    let mut sets = spec.set.clone();
    sets.extend(spec.policy_set.get(policy).into_iter().flatten().cloned());
    sets.extend(w.set.iter().cloned());
    sets.extend(w.policy_set.get(policy).into_iter().flatten().cloned());
    sets.extend(spec.set_last.iter().cloned());
    run_config::build(&RunArgs {
        config_file: None,
        workload: Some(w.name.clone()),
        policy: Some(policy.into()),
        machine: Some(machine.into()),
        fast: Some(ratio.into()),
        seed: spec.seed,
        sets,
    })
    .map_err(|e| anyhow!("workload `{}`: {e}", w.name))
}

/// The finished record of `run` in `dir/runs/<id>` if its configuration is unchanged.
fn finished(run: &PlannedRun, dir: &Path) -> Option<RunRecord> {
    let rdir = dir.join("runs").join(&run.id);
    let text = run.config.to_toml();
    if std::fs::read_to_string(rdir.join("config.toml")).ok()? != text {
        return None;
    }
    let bytes = std::fs::read(rdir.join("run.json")).ok()?;
    serde_json::from_slice::<RunRecord>(&bytes).ok()
}

/// The runs of a matrix, in order, and whether each is already finished in `out`
/// (for an executor that runs them elsewhere).
pub fn planned_runs(args: &CompareArgs) -> Result<Vec<(PlannedRun, bool)>> {
    let (spec, _) = resolve_spec(args)?;
    let runs = plan(&spec)?;
    Ok(runs
        .into_iter()
        .map(|r| {
            let done = finished(&r, &args.out).is_some();
            (r, done)
        })
        .collect())
}

/// Run the planned run `id` of the matrix `args` describes into `dir/runs/<id>/`,
/// exactly as the local runner does, and return that directory. What another
/// executor calls on a worker: the files it leaves are the ones a local run writes
/// (`config.toml` last), so results derived from them are byte-identical.
pub fn execute_one(args: &CompareArgs, id: &str, dir: &Path) -> Result<PathBuf> {
    let (run, _) = planned_runs(args)?
        .into_iter()
        .find(|(r, _)| r.id == id)
        .ok_or_else(|| anyhow!("no run `{id}` in this matrix"))?;
    execute(&run, dir, None)?;
    Ok(dir.join("runs").join(id))
}

/// The key of the streams a run consumes: runs with equal keys replay one recording.
fn stream_key(cfg: &RunConfig) -> String {
    // The strata decide which accesses a sampled stream keeps.
    let strata = match cfg.sim.sample_strata {
        tierkit_core::SampleStrata::Address => "",
        tierkit_core::SampleStrata::Mapping => "\nsample_strata=mapping",
        tierkit_core::SampleStrata::Page => "\nsample_strata=page",
    };
    // So do the pages sampled in time.
    let in_time = match cfg.sim.time_sampled_weight {
        x if x > 0.0 => format!("\ntime_sampled_weight={x}"),
        _ => String::new(),
    };
    // And, when carried, the dropped accesses' compute rides on the kept ones.
    let compute = match cfg.sim.sampled_compute() {
        tierkit_core::SampledCompute::Kept => "",
        tierkit_core::SampledCompute::Carried => "\nsampled_compute=carried",
    };
    format!(
        "{}\nseed={}\nsample_rate={}{strata}{in_time}{compute}",
        toml::to_string(&cfg.workload).unwrap_or_default(),
        cfg.seed,
        cfg.sim.sample_rate
    )
}

/// The view of its stream a run reads as a clairvoyant reference (`oracle`,
/// `oracle-static`), or `None` for a run that does not read the future (or whose
/// view cannot be built: that fails the run itself).
fn future_view(run: &PlannedRun) -> Option<FutureView> {
    let cfg = &run.config;
    let reads = cfg
        .policy
        .build(&tierkit_core::BuildContext::default())
        .requirements()
        .future_knowledge;
    reads
        .then(|| FutureView::new(&cfg.machine, &cfg.sim).ok())
        .flatten()
}

/// A group's runs in the order workers should take them, and the views of its
/// stream that more than one of them reads ([`RecordedStreams`] reads each once for
/// all). The first reader of a view keeps its place; the others go to the end of the
/// group, so that a worker does not wait for the tape another is reading while runs
/// that need none are left.
fn order_for_shared_futures(
    members: Vec<usize>,
    views: &[Option<FutureView>],
) -> (Vec<usize>, Vec<FutureView>) {
    let mut readers: Vec<(FutureView, usize)> = Vec::new();
    let (mut first, mut later) = (Vec::new(), Vec::new());
    for i in members {
        match views[i] {
            Some(view) => match readers.iter_mut().find(|(v, _)| *v == view) {
                Some((_, n)) => {
                    *n += 1;
                    later.push(i);
                }
                None => {
                    readers.push((view, 1));
                    first.push(i);
                }
            },
            None => first.push(i),
        }
    }
    first.extend(later);
    let shared = readers
        .into_iter()
        .filter(|&(_, n)| n > 1)
        .map(|(v, _)| v)
        .collect();
    (first, shared)
}

/// Run one planned run in `dir/runs/<id>`, replaying `streams` if given.
fn execute(
    run: &PlannedRun,
    dir: &Path,
    streams: Option<&Arc<RecordedStreams>>,
) -> Result<RunRecord> {
    let rdir = dir.join("runs").join(&run.id);
    let text = run.config.to_toml();
    let record_path = rdir.join("run.json");
    let out =
        simulate_with(&run.config, false, streams).with_context(|| format!("run {}", run.id))?;
    std::fs::create_dir_all(&rdir).with_context(|| format!("cannot create {}", rdir.display()))?;
    let rec = RunRecord {
        id: run.id.clone(),
        workload: run.workload.clone(),
        machine: run.machine.clone(),
        ratio: run.ratio.clone(),
        policy: run.policy.clone(),
        reference: run.reference,
        summary: out.summary.clone(),
        series: out.series.rows.clone(),
        placement: out.placement.clone(),
    };
    // The config is written last: a run interrupted before it is redone next time.
    crate::run::write_files(&rdir, &run.config, &out)?;
    std::fs::write(&record_path, serde_json::to_vec(&rec)?)?;
    std::fs::write(rdir.join("config.toml"), &text)?;
    Ok(rec)
}

/// Derive the comparison metrics of every run from its references.
pub fn derive(records: &[RunRecord]) -> Vec<ResultRow> {
    let find = |w: &str, m: &str, r: Option<&str>, p: &str| {
        records.iter().find(|x| {
            x.workload == w && x.machine == m && r.is_none_or(|r| x.ratio == r) && x.policy == p
        })
    };
    records
        .iter()
        .map(|x| {
            let s = &x.summary;
            let fast = find(&x.workload, &x.machine, None, "all-fast");
            let bound = CLAIRVOYANT
                .iter()
                .filter_map(|p| find(&x.workload, &x.machine, Some(&x.ratio), p))
                .min_by(|a, b| a.summary.sim_seconds.total_cmp(&b.summary.sim_seconds));
            let ft = find(&x.workload, &x.machine, Some(&x.ratio), "first-touch");
            let ratio = |a: f64, b: Option<f64>| b.filter(|b| *b > 0.0).map_or(f64::NAN, |b| a / b);
            ResultRow {
                id: x.id.clone(),
                workload: x.workload.clone(),
                machine: x.machine.clone(),
                ratio: x.ratio.clone(),
                policy: x.policy.clone(),
                reference: x.reference,
                seed: s.seed,
                policy_time_scale: s.policy_time_scale,
                sample_rate: format!(
                    "{}{}{}",
                    s.sample_rate,
                    s.sample_strata
                        .as_ref()
                        .map_or(String::new(), |strata| format!(" by {strata}")),
                    // Only the mode that is not the default is named.
                    s.sampled_compute
                        .filter(|&c| c == tierkit_core::SampledCompute::Kept)
                        .map_or(String::new(), |c| format!(" with compute {}", c.name()))
                ),
                sim_seconds: s.sim_seconds,
                slowdown: ratio(s.sim_seconds, fast.map(|f| f.summary.sim_seconds)),
                fast_access_ratio: s.fast_access_ratio,
                bound_policy: bound.map_or(String::new(), |b| b.policy.clone()),
                bound_far_gap: bound.map_or(f64::NAN, |b| {
                    b.summary.fast_access_ratio - s.fast_access_ratio
                }),
                bound_runtime_ratio: ratio(s.sim_seconds, bound.map(|b| b.summary.sim_seconds)),
                precision: s.placement_precision,
                recall: s.placement_recall,
                f1: s.placement_f1,
                promoted_pages: s.promoted_pages,
                demoted_pages: s.demoted_pages,
                migrated_bytes: s.migrated_bytes,
                migration_traffic_share: s.migration_traffic_share,
                pingpong_pages: s.pingpong_pages,
                hint_faults: s.hint_faults,
                samples: s.samples,
                tiering_cpu_seconds: s.tiering_cpu_seconds,
                policy_metadata_bytes: s.policy_metadata_bytes,
                fast_mean_used_pages: s.fast_mean_used_pages,
                // all-fast has no fast-tier limit to save against.
                fast_saving_vs_first_touch: ft.filter(|_| x.policy != "all-fast").map_or(
                    f64::NAN,
                    |f| {
                        if f.summary.fast_mean_used_pages > 0.0 {
                            1.0 - s.fast_mean_used_pages / f.summary.fast_mean_used_pages
                        } else {
                            f64::NAN
                        }
                    },
                ),
            }
        })
        .collect()
}

/// One leaderboard line: a policy's standing over the whole comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Standing {
    /// Policy.
    pub policy: String,
    /// Geometric-mean slowdown against all-fast over the cells it ran in.
    pub geomean_slowdown: f64,
    /// Mean fast access ratio.
    pub mean_fast_access_ratio: f64,
    /// Mean F1 against the epochs' hot sets.
    pub mean_f1: f64,
    /// Total bytes migrated.
    pub migrated_bytes: u64,
    /// Total tiering CPU, s.
    pub tiering_cpu_seconds: f64,
    /// Cells.
    pub cells: usize,
}

/// Policies that never move pages by design; they are not flagged as idle.
const STATIC_POLICIES: &[&str] = &["all-fast", "first-touch"];

/// Migrating policies that moved no page in any run of the board. A researcher
/// reading the leaderboard must not mistake "did not act within these runs" for "acts
/// and loses": a policy whose periods, sample counts or quota ramps are longer than the
/// runs ties with first-touch for that reason alone (docs/compare.md, "Policies that move little or nothing").
pub fn idle_policies(board: &[Standing]) -> Vec<String> {
    board
        .iter()
        .filter(|b| b.migrated_bytes == 0 && !STATIC_POLICIES.contains(&b.policy.as_str()))
        .map(|b| b.policy.clone())
        .collect()
}

/// The one-line warning about [`idle_policies`], if any.
pub fn idle_note(board: &[Standing]) -> Option<String> {
    let idle = idle_policies(board);
    (!idle.is_empty()).then(|| {
        format!(
            "note: {} moved no page in any run, so {} with first-touch here \
             (docs/compare.md, \"Policies that move little or nothing\", says why for each)",
            idle.join(", "),
            if idle.len() == 1 {
                "it ties"
            } else {
                "they tie"
            }
        )
    })
}

/// The leaderboard, best (lowest geometric-mean slowdown) first.
pub fn leaderboard(rows: &[ResultRow]) -> Vec<Standing> {
    let mut by: BTreeMap<&str, Vec<&ResultRow>> = BTreeMap::new();
    for r in rows {
        by.entry(r.policy.as_str()).or_default().push(r);
    }
    let mut out: Vec<Standing> = by
        .into_iter()
        .map(|(p, rs)| {
            let valid: Vec<f64> = rs
                .iter()
                .map(|r| r.slowdown)
                .filter(|s| s.is_finite() && *s > 0.0)
                .collect();
            let geo = if valid.is_empty() {
                f64::NAN
            } else {
                (valid.iter().map(|s| s.ln()).sum::<f64>() / valid.len() as f64).exp()
            };
            let n = rs.len() as f64;
            Standing {
                policy: p.to_string(),
                geomean_slowdown: geo,
                mean_fast_access_ratio: rs.iter().map(|r| r.fast_access_ratio).sum::<f64>() / n,
                mean_f1: rs.iter().map(|r| r.f1).sum::<f64>() / n,
                migrated_bytes: rs.iter().map(|r| r.migrated_bytes).sum(),
                tiering_cpu_seconds: rs.iter().map(|r| r.tiering_cpu_seconds).sum(),
                cells: rs.len(),
            }
        })
        .collect();
    out.sort_by(|a, b| {
        a.geomean_slowdown
            .total_cmp(&b.geomean_slowdown)
            .then(a.policy.cmp(&b.policy))
    });
    out
}

/// The cells where a policy ran faster than both clairvoyant references — possible,
/// since they are heuristics, and worth knowing before calling either a bound.
pub fn bound_note(rows: &[ResultRow]) -> Option<String> {
    let beat: Vec<String> = rows
        .iter()
        // all-fast has no fast-tier limit: it is the other end of the scale.
        .filter(|r| {
            !CLAIRVOYANT.contains(&r.policy.as_str())
                && r.policy != "all-fast"
                && r.bound_runtime_ratio < 1.0
        })
        .map(|r| {
            format!(
                "{} on {} {} {} ({:.3}x of {})",
                r.policy, r.workload, r.machine, r.ratio, r.bound_runtime_ratio, r.bound_policy
            )
        })
        .collect();
    const SHOWN: usize = 8;
    (!beat.is_empty()).then(|| {
        let more = match beat.len().saturating_sub(SHOWN) {
            0 => String::new(),
            n => format!("; and {n} more (results.csv: bound_runtime_ratio < 1)"),
        };
        format!(
            "note: faster than both clairvoyant references (oracle, oracle-static: heuristics, not proven bounds): {}{more}",
            beat[..beat.len().min(SHOWN)].join("; ")
        )
    })
}

/// The compact stdout table.
pub fn leaderboard_text(board: &[Standing]) -> String {
    // As wide as the longest name (`linux-tiering-mglru` is 19), so columns line up.
    let w = board.iter().map(|b| b.policy.len()).fold(18, usize::max);
    let mut s = format!(
        "{:<4} {:<w$} {:>10} {:>9} {:>6} {:>12} {:>10} {:>6}\n",
        "rank", "policy", "slowdown", "fast-acc", "F1", "migrated", "tier-CPU", "cells"
    );
    for (i, b) in board.iter().enumerate() {
        s.push_str(&format!(
            "{:<4} {:<w$} {:>9.3}x {:>8.1}% {:>6.2} {:>9.1} MiB {:>9.2}s {:>6}\n",
            i + 1,
            b.policy,
            b.geomean_slowdown,
            b.mean_fast_access_ratio * 100.0,
            b.mean_f1,
            b.migrated_bytes as f64 / (1u64 << 20) as f64,
            b.tiering_cpu_seconds,
            b.cells
        ));
    }
    if let Some(note) = idle_note(board) {
        s.push_str(&note);
        s.push('\n');
    }
    s
}

fn csv_field(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) if s.contains(',') || s.contains('"') => {
            format!("\"{}\"", s.replace('"', "\"\""))
        }
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => "NA".into(),
        other => other.to_string(),
    }
}

/// Rows as tidy CSV (column order = field order; NaN as NA).
pub fn results_csv(rows: &[ResultRow]) -> Result<String> {
    let mut out = String::new();
    for (i, r) in rows.iter().enumerate() {
        let v = serde_json::to_value(r)?;
        let obj = v.as_object().expect("a struct serializes to an object");
        if i == 0 {
            out.push_str(&obj.keys().cloned().collect::<Vec<_>>().join(","));
            out.push('\n');
        }
        out.push_str(&obj.values().map(csv_field).collect::<Vec<_>>().join(","));
        out.push('\n');
    }
    Ok(out)
}

/// Run the comparison; returns the leaderboard text and the report path.
pub fn compare(args: &CompareArgs) -> Result<(String, PathBuf)> {
    let (_, board, report) = run_matrix(args)?;
    Ok((board, report))
}

/// A plain warning when any run shortened policy time (`sim.policy_time_scale` ≠ 1).
pub fn time_scale_note(rows: &[ResultRow]) -> Option<String> {
    let mut scales: Vec<String> = rows
        .iter()
        .filter(|r| r.policy_time_scale != 1.0)
        .map(|r| format!("{}", r.policy_time_scale))
        .collect();
    scales.sort();
    scales.dedup();
    (!scales.is_empty()).then(|| {
        format!(
            "warning: sim.policy_time_scale = {} in these runs: every policy period, threshold \
             and rate was shortened by that factor, so policies pay their mechanism costs \
             that many times as often per simulated second; results are not at the papers' \
             time constants",
            scales.join(", ")
        )
    })
}

/// The per-policy settings of a comparison (`policy_set`), said in its report so
/// that no run's difference from the others is silent.
pub fn policy_set_note(spec: &MatrixSpec) -> Option<String> {
    let mut parts: Vec<String> = spec
        .policy_set
        .iter()
        .map(|(p, sets)| format!("{p}: {}", sets.join(", ")))
        .collect();
    for w in &spec.workloads {
        parts.extend(
            w.policy_set
                .iter()
                .map(|(p, sets)| format!("on {}, {p}: {}", workload_label(w), sets.join(", "))),
        );
    }
    (!parts.is_empty()).then(|| format!("per-policy settings: {}", parts.join("; ")))
}

/// A warning naming the sampled workloads that map something smaller than one sampling
/// stratum, which sampling cannot represent faithfully (docs/sampling.md, "Limits").
pub fn coarse_sampling_note(records: &[RunRecord]) -> Option<String> {
    let mut cells: Vec<String> = records
        .iter()
        .filter_map(|r| {
            r.summary.coarse_sampling.as_ref().map(|c| {
                format!(
                    "{} at {}: {}",
                    r.workload,
                    r.summary.sample_rate,
                    crate::run::coarse_sampling_text(c)
                )
            })
        })
        .collect();
    cells.sort();
    cells.dedup();
    (!cells.is_empty()).then(|| format!("warning: sampled too coarsely: {}", cells.join("; ")))
}

/// The file that marks a directory as `tierkit compare` output, so a rerun may update
/// it (resume) while any other directory's files are refused without `--force`.
pub const OUT_MARKER: &str = ".tierkit-compare";

/// Make `dir` ready for compare outputs: create it, or accept it if it is empty or
/// tierkit's own (it holds [`OUT_MARKER`], or `runs/` from before the marker existed);
/// refuse a non-empty directory of someone else's files unless `force`, since
/// `results.csv`, `results.json` and `report.html` would overwrite theirs.
pub fn prepare_out_dir(dir: &Path, force: bool) -> Result<()> {
    crate::output::prepare_owned_dir(
        dir,
        force,
        dir.join(OUT_MARKER).exists() || dir.join("runs").is_dir(),
        "tierkit compare did not write (its results.csv, results.json and report.html would replace any there)",
        OUT_MARKER,
        "written by tierkit compare: a rerun into this directory reuses finished runs and rewrites the results\n",
    )
}

/// Run the comparison; returns the derived rows, the leaderboard text and the report
/// path.
pub fn run_matrix(args: &CompareArgs) -> Result<(Vec<ResultRow>, String, PathBuf)> {
    let (spec, title) = resolve_spec(args)?;
    let runs = plan(&spec)?;
    prepare_out_dir(&args.out, args.force)?;
    let bar = ProgressBar::with_draw_target(
        Some(runs.len() as u64),
        if args.progress {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        },
    );
    bar.set_style(
        ProgressStyle::with_template(
            "{bar:40} {pos}/{len} runs done, {msg} ({elapsed}, eta {eta})",
        )
        .expect("static template"),
    );
    let running = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let total = runs.len();
    let set_msg = |bar: &ProgressBar| {
        let r = running.load(Ordering::SeqCst);
        let d = done.load(Ordering::SeqCst);
        bar.set_message(format!("{r} running, {} left", total - d - r));
    };
    // Finished runs are reused; the rest are grouped by the streams they consume, and
    // each group's workload is generated once and replayed by all its runs (a stream
    // does not depend on placement), recorded one group ahead of the workers
    // (`schedule`).
    let mut slots: Vec<Option<RunRecord>> = runs.iter().map(|r| finished(r, &args.out)).collect();
    let reused = slots.iter().filter(|s| s.is_some()).count();
    done.store(reused, Ordering::SeqCst);
    bar.inc(reused as u64);
    let mut failures: Vec<String> = Vec::new();
    let budget = match args.recording_budget {
        Some(b) => b,
        None => crate::run::default_recording_budget()?,
    };
    let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, run) in runs.iter().enumerate() {
        if slots[i].is_none() {
            groups.entry(stream_key(&run.config)).or_default().push(i);
        }
    }
    if args.only_finished {
        for members in std::mem::take(&mut groups).values() {
            for &i in members {
                failures.push(format!(
                    "{}: not finished by the executor (no complete run in {})",
                    runs[i].id,
                    args.out.join("runs").join(&runs[i].id).display()
                ));
            }
        }
    }
    let views: Vec<Option<FutureView>> = runs.iter().map(future_view).collect();
    let (groups, shared_views): (Vec<schedule::Group>, Vec<Vec<FutureView>>) = groups
        .into_values()
        .map(|members| {
            // One run needs no recording; more share one. Runs capped by
            // `sim.max_accesses` read only the start of the stream, so recording all
            // of it would cost more than generating that start again for each.
            let capped = runs[members[0]].config.sim.max_accesses != 0;
            let record = members.len() > 1 && !capped;
            let (members, shared) = order_for_shared_futures(members, &views);
            (
                schedule::Group {
                    record,
                    runs: members,
                },
                shared,
            )
        })
        .unzip();
    let say = |line: String| {
        if !args.progress {
            // Not a terminal (a log, CI): one line per event.
            eprintln!("{line}");
        }
    };
    let record = |g: usize, max_bytes: u64| {
        let first = &runs[groups[g].runs[0]];
        bar.set_message(format!("generating {}", first.workload));
        let started = std::time::Instant::now();
        let rec = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            record_workload(&first.config, max_bytes)
                .map(|r| Arc::new(RecordedStreams::new(r, shared_views[g].clone())))
        }))
        // A workload that panics while recorded panics again in each run, which
        // reports it as that run's failure.
        .unwrap_or(None);
        match &rec {
            Some(r) => say(format!(
                "recorded {}'s streams for {} runs in {:.1} s ({} MiB)",
                first.workload,
                groups[g].runs.len(),
                started.elapsed().as_secs_f64(),
                r.encoded_bytes() >> 20
            )),
            // A first try beside another group's recording may be retried alone
            // with the whole budget; only that last word is news.
            None if max_bytes < budget => {}
            None => bar.suspend(|| {
                eprintln!(
                    "note: {}'s streams would take more than {} MiB to record \
                     (TIERKIT_RECORDING_BUDGET_MIB); its {} runs generate it each",
                    first.workload,
                    max_bytes >> 20,
                    groups[g].runs.len()
                )
            }),
        }
        set_msg(&bar);
        rec
    };
    let run = |i: usize, streams: Option<&Arc<RecordedStreams>>| {
        running.fetch_add(1, Ordering::SeqCst);
        set_msg(&bar);
        let started = std::time::Instant::now();
        // A run that panics is a failed run, not a failed comparison.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            execute(&runs[i], &args.out, streams)
        }))
        .unwrap_or_else(|p| Err(anyhow!("run {}: panicked: {}", runs[i].id, panic_text(&p))));
        running.fetch_sub(1, Ordering::SeqCst);
        let d = done.fetch_add(1, Ordering::SeqCst) + 1;
        bar.inc(1);
        set_msg(&bar);
        say(format!(
            "[{d}/{total}] {} {} ({:.1} s)",
            runs[i].id,
            if r.is_ok() { "done" } else { "FAILED" },
            started.elapsed().as_secs_f64()
        ));
        r
    };
    let results = schedule::run_groups(
        &groups,
        args.jobs,
        budget,
        record,
        RecordedStreams::encoded_bytes,
        run,
    );
    for (i, r) in results {
        match r {
            Ok(rec) => slots[i] = Some(rec),
            Err(e) => failures.push(format!("{}: {e:#}", runs[i].id)),
        }
    }
    bar.finish_and_clear();
    let records: Vec<RunRecord> = slots.into_iter().flatten().collect();
    if records.is_empty() && !failures.is_empty() {
        bail!("every run failed; the first: {}", failures[0]);
    }
    if reused > 0 {
        eprintln!(
            "reused {reused} of {} runs already finished in {}",
            records.len(),
            args.out.display()
        );
    }
    let rows = derive(&records);
    let board = leaderboard(&rows);
    std::fs::write(args.out.join("results.csv"), results_csv(&rows)?)?;
    std::fs::write(
        args.out.join("results.json"),
        serde_json::to_string_pretty(&rows)? + "\n",
    )?;
    let report_path = args.out.join("report.html");
    std::fs::write(
        &report_path,
        report::render(&title, &spec, &records, &rows, &board, &failures),
    )?;
    let mut text = leaderboard_text(&board);
    if let Some(note) = bound_note(&rows) {
        text.push_str(&note);
        text.push('\n');
    }
    if let Some(note) = time_scale_note(&rows) {
        text.push_str(&note);
        text.push('\n');
    }
    if let Some(note) = policy_set_note(&spec) {
        text.push_str(&note);
        text.push('\n');
    }
    if let Some(note) = coarse_sampling_note(&records) {
        text.push_str(&note);
        text.push('\n');
    }
    if !failures.is_empty() {
        // The report is written; the exit status still says something went wrong.
        for f in &failures {
            text.push_str(&format!("failed: {f}\n"));
        }
        print!("{text}");
        bail!(
            "{} of {} runs failed (report written to {}); the first: {}",
            failures.len(),
            runs.len(),
            report_path.display(),
            failures[0]
        );
    }
    Ok((rows, text, report_path))
}

/// The message of a caught panic.
fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(policies: &[&str], workloads: &[&str], ratios: &[&str]) -> MatrixSpec {
        MatrixSpec {
            policies: policies.iter().map(|s| s.to_string()).collect(),
            ratios: ratios.iter().map(|s| s.to_string()).collect(),
            machines: vec!["cxl".into()],
            machine_ratios: BTreeMap::new(),
            seed: Some(1),
            set: vec![],
            policy_set: BTreeMap::new(),
            set_last: vec![],
            workloads: workloads
                .iter()
                .map(|n| WorkloadSpec {
                    name: n.to_string(),
                    set: vec!["workload.scale=0.01".into()],
                    policy_set: BTreeMap::new(),
                    label: None,
                    machines: None,
                    skip_policies: vec![],
                })
                .collect(),
        }
    }

    #[test]
    fn idle_note_names_migrating_policies_that_moved_nothing() {
        let standing = |policy: &str, migrated_bytes| Standing {
            policy: policy.into(),
            geomean_slowdown: 1.5,
            mean_fast_access_ratio: 0.2,
            mean_f1: 0.1,
            migrated_bytes,
            tiering_cpu_seconds: 0.0,
            cells: 3,
        };
        let board = vec![
            standing("first-touch", 0),
            standing("all-fast", 0),
            standing("pet", 0),
            standing("hemem", 4096),
            standing("memtis", 0),
        ];
        assert_eq!(idle_policies(&board), ["pet", "memtis"]);
        let text = leaderboard_text(&board);
        assert!(
            text.contains("note: pet, memtis moved no page in any run"),
            "{text}"
        );
        assert_eq!(idle_note(&board[..2]), None);
        // A name longer than the default column widens it for every row.
        let board = vec![standing("linux-tiering-mglru", 1), standing("pet", 1)];
        let text = leaderboard_text(&board);
        // The slowdown column ends at the same place in the header and every row.
        let ends: Vec<usize> = text
            .lines()
            .take(3)
            .map(|l| {
                let (at, len) = l
                    .find("slowdown")
                    .map(|i| (i, "slowdown".len()))
                    .unwrap_or_else(|| (l.find("1.500x").unwrap(), "1.500x".len()));
                at + len
            })
            .collect();
        assert_eq!(ends, vec![ends[0]; 3], "{text}");
    }

    #[test]
    fn the_bound_note_names_placements_faster_than_both_clairvoyant_references() {
        let row = |policy: &str, ratio: f64| ResultRow {
            policy: policy.into(),
            workload: "gups".into(),
            machine: "cxl".into(),
            ratio: "1:8".into(),
            bound_policy: "oracle-static".into(),
            bound_runtime_ratio: ratio,
            ..Default::default()
        };
        // all-fast and the references themselves never count; a policy at 1.0 or
        // NaN (no bound) does not either.
        let rows = [
            row("all-fast", 0.7),
            row("oracle", 0.99),
            row("oracle-static", 1.0),
            row("hemem", 1.0),
            row("memtis", f64::NAN),
        ];
        assert_eq!(bound_note(&rows), None);
        let note = bound_note(&[row("hemem", 0.98)]).unwrap();
        assert!(
            note.contains("hemem on gups cxl 1:8 (0.980x of oracle-static)"),
            "{note}"
        );
    }

    #[test]
    fn later_readers_of_a_shared_future_go_last_and_single_readers_share_nothing() {
        let sim = tierkit_sim::SimConfig::default();
        let llc_on = FutureView::new(&tierkit_sim::MachineConfig::default(), &sim).unwrap();
        let llc_off = FutureView::new(
            &tierkit_sim::MachineConfig {
                llc_enabled: false,
                ..Default::default()
            },
            &sim,
        )
        .unwrap();
        assert_ne!(llc_on, llc_off);
        // Runs 0-6: a policy, two readers of `llc_on`, a policy, a third reader of
        // it, a lone reader of `llc_off`, a policy.
        let views = [
            None,
            Some(llc_on),
            Some(llc_on),
            None,
            Some(llc_on),
            Some(llc_off),
            None,
        ];
        let (order, shared) = order_for_shared_futures((0..7).collect(), &views);
        assert_eq!(order, vec![0, 1, 3, 5, 6, 2, 4]);
        assert_eq!(shared, vec![llc_on]);
        let (order, shared) = order_for_shared_futures(vec![6, 5, 3], &views);
        assert_eq!(order, vec![6, 5, 3]);
        assert!(shared.is_empty());
    }

    #[test]
    fn a_reference_reads_the_future_and_a_policy_does_not() {
        let plan = |policy: &str| PlannedRun {
            id: policy.into(),
            workload: "gups".into(),
            machine: "cxl".into(),
            ratio: "1:8".into(),
            policy: policy.into(),
            reference: false,
            config: run_config::build(&RunArgs {
                workload: Some("gups".into()),
                policy: Some(policy.into()),
                ..Default::default()
            })
            .unwrap(),
        };
        assert!(future_view(&plan("oracle")).is_some());
        assert!(future_view(&plan("oracle-static")).is_some());
        assert!(future_view(&plan("first-touch")).is_none());
        assert!(future_view(&plan("all-fast")).is_none());
    }

    #[test]
    fn plan_adds_references_once_and_ids_are_unique() {
        let runs = plan(&spec(&["autonuma"], &["gups"], &["1:8", "1:4"])).unwrap();
        let names: Vec<_> = runs
            .iter()
            .map(|r| (r.policy.as_str(), r.ratio.as_str()))
            .collect();
        assert_eq!(names.iter().filter(|(p, _)| *p == "all-fast").count(), 1);
        assert_eq!(names.iter().filter(|(p, _)| *p == "oracle").count(), 2);
        assert_eq!(
            names.iter().filter(|(p, _)| *p == "oracle-static").count(),
            2
        );
        assert_eq!(names.iter().filter(|(p, _)| *p == "autonuma").count(), 2);
        let mut ids: Vec<_> = runs.iter().map(|r| r.id.clone()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), runs.len());
    }

    #[test]
    fn policy_sets_reach_only_their_policy_and_workload() {
        let mut m = spec(&["memtis", "tpp"], &["gups", "pmbench"], &["1:8"]);
        m.policy_set
            .insert("memtis".into(), vec!["machine.thp=\"always\"".into()]);
        m.workloads[1]
            .policy_set
            .insert("tpp".into(), vec!["workload.page_stride=2".into()]);
        let runs = plan(&m).unwrap();
        for r in &runs {
            let thp = r.config.machine.thp == tierkit_sim::config::ThpMode::Always;
            assert_eq!(thp, r.policy == "memtis", "{}", r.id);
            let text = r.config.to_toml();
            let strided = text.contains("page_stride = 2");
            assert_eq!(
                strided,
                r.policy == "tpp" && r.workload == "pmbench",
                "{}",
                r.id
            );
        }
        assert_eq!(
            policy_set_note(&m).as_deref(),
            Some("per-policy settings: memtis: machine.thp=\"always\"; on pmbench, tpp: workload.page_stride=2")
        );
        m.policy_set.insert("memtsi".into(), vec![]);
        let e = plan(&m).unwrap_err().to_string();
        assert!(
            e.contains("policy_set names `memtsi`, which is not a registered policy"),
            "{e}"
        );
    }

    #[test]
    fn a_workload_skips_its_skip_policies_only() {
        let mut m = spec(&["autonuma", "tpp"], &["gups", "pmbench"], &["1:8"]);
        m.workloads[1].skip_policies = vec!["tpp".into()];
        let runs = plan(&m).unwrap();
        let n = |w: &str, p: &str| {
            runs.iter()
                .filter(|r| r.workload == w && r.policy == p)
                .count()
        };
        assert_eq!((n("gups", "tpp"), n("gups", "autonuma")), (1, 1));
        assert_eq!((n("pmbench", "tpp"), n("pmbench", "autonuma")), (0, 1));
        // The references still run where a policy is skipped.
        assert_eq!(n("pmbench", "all-fast"), 1);
        assert_eq!(n("pmbench", "oracle"), 1);
        // A clairvoyant reference can be skipped; all-fast and first-touch cannot.
        m.workloads[1].skip_policies =
            vec!["oracle".into(), "all-fast".into(), "first-touch".into()];
        let runs = plan(&m).unwrap();
        let n = |w: &str, p: &str| {
            runs.iter()
                .filter(|r| r.workload == w && r.policy == p)
                .count()
        };
        assert_eq!(
            (n("pmbench", "oracle"), n("pmbench", "oracle-static")),
            (0, 1)
        );
        assert_eq!(
            (n("pmbench", "all-fast"), n("pmbench", "first-touch")),
            (1, 1)
        );
        assert_eq!(n("gups", "oracle"), 1);
        // A name that is no policy is refused, with the valid ones.
        m.workloads[1].skip_policies = vec!["tp".into()];
        let e = plan(&m).unwrap_err().to_string();
        assert!(
            e.contains("workload `pmbench`'s skip_policies names `tp`") && e.contains("autonuma"),
            "{e}"
        );
    }

    #[test]
    fn a_workload_runs_on_its_own_machines_only() {
        let mut m = spec(&["autonuma"], &["gups", "pmbench"], &["1:8"]);
        m.machines = vec!["cxl".into(), "optane".into()];
        m.workloads[1].machines = Some(vec!["optane".into()]);
        let runs = plan(&m).unwrap();
        let on = |w: &str, machine: &str| {
            runs.iter()
                .filter(|r| r.workload == w && r.machine == machine)
                .count()
        };
        assert_eq!(on("gups", "cxl"), on("gups", "optane"));
        assert!(on("gups", "cxl") > 0 && on("pmbench", "optane") > 0);
        assert_eq!(on("pmbench", "cxl"), 0);
        // A machine the comparison does not run is named, with the valid ones.
        m.workloads[1].machines = Some(vec!["cxl-lowbw".into()]);
        let e = plan(&m).unwrap_err().to_string();
        assert!(
            e.contains("workload `pmbench`'s machines name `cxl-lowbw`")
                && e.contains("cxl, optane"),
            "{e}"
        );
        m.workloads[1].machines = Some(vec![]);
        assert!(plan(&m)
            .unwrap_err()
            .to_string()
            .contains("empty `machines`"));
        // `--machines` keeps a narrowed workload's machines among those it names and
        // leaves out a workload with none left.
        let config = "policies = [\"autonuma\"]\nratios = [\"1:8\"]\nmachines = [\"cxl\", \"optane\"]\n\
            [[workloads]]\nname = \"gups\"\n[[workloads]]\nname = \"pmbench\"\nmachines = [\"optane\"]\n";
        let args = |machines: &[&str]| CompareArgs {
            config: Some(("m.toml".into(), config.into())),
            machines: Some(machines.iter().map(|s| s.to_string()).collect()),
            ..Default::default()
        };
        let (s, _) = resolve_spec(&args(&["cxl"])).unwrap();
        assert_eq!(s.workloads.len(), 1);
        assert_eq!(s.workloads[0].name, "gups");
        let (s, _) = resolve_spec(&args(&["optane", "cxl-lowbw"])).unwrap();
        assert_eq!(
            s.workloads[1].machines.as_deref(),
            Some(&["optane".to_string()][..])
        );
    }

    #[test]
    fn workloads_flag_picks_entries_by_label_or_every_entry_of_a_name() {
        let config = "policies = [\"autonuma\"]\nratios = [\"1:8\"]\nmachines = [\"cxl\"]\n\
            [[workloads]]\nname = \"ycsb\"\nset = [\"workload.mix=\\\"a\\\"\"]\n\
            [[workloads]]\nname = \"ycsb\"\nset = [\"workload.mix=\\\"b\\\"\"]\n\
            [[workloads]]\nname = \"mix\"\nlabel = \"mix-5min\"\n";
        let args = |ws: &[&str]| CompareArgs {
            config: Some(("m.toml".into(), config.into())),
            workloads: Some(ws.iter().map(|s| s.to_string()).collect()),
            ..Default::default()
        };
        let labels = |ws: &[&str]| -> Vec<String> {
            let (s, _) = resolve_spec(&args(ws)).unwrap();
            s.workloads.iter().map(workload_label).collect()
        };
        // A label the results show picks its entry, with its settings.
        assert_eq!(labels(&["mix-5min"]), vec!["mix-5min"]);
        assert_eq!(labels(&["ycsb-b"]), vec!["ycsb-b"]);
        // A name picks every entry of it; one named twice runs once.
        assert_eq!(labels(&["ycsb", "ycsb-a"]), vec!["ycsb-a", "ycsb-b"]);
        assert_eq!(labels(&["mix"]), vec!["mix-5min"]);
        // A registered workload the matrix lacks runs on its defaults.
        assert_eq!(labels(&["gups"]), vec!["gups"]);
        let e = resolve_spec(&args(&["mix-1min"])).unwrap_err().to_string();
        assert!(
            e.contains("unknown workload `mix-1min`")
                && e.contains("gups")
                && e.contains("ycsb-a, ycsb-b, mix-5min"),
            "{e}"
        );
    }

    #[test]
    fn a_machine_runs_at_its_own_ratios_only() {
        let mut m = spec(&["autonuma"], &["gups"], &["1:32", "1:8"]);
        m.machines = vec!["cxl".into(), "cxl-lowbw".into()];
        m.machine_ratios
            .insert("cxl-lowbw".into(), vec!["1:8".into()]);
        let runs = plan(&m).unwrap();
        let at = |machine: &str, ratio: &str, policy: &str| {
            runs.iter()
                .filter(|r| r.machine == machine && r.ratio == ratio && r.policy == policy)
                .count()
        };
        assert_eq!(
            (at("cxl", "1:32", "autonuma"), at("cxl", "1:8", "autonuma")),
            (1, 1)
        );
        assert_eq!(
            (
                at("cxl-lowbw", "1:32", "autonuma"),
                at("cxl-lowbw", "1:8", "autonuma")
            ),
            (0, 1)
        );
        // all-fast runs once per machine, at a ratio that machine runs.
        assert_eq!(at("cxl-lowbw", "1:8", "all-fast"), 1);
        assert_eq!(runs.iter().filter(|r| r.policy == "all-fast").count(), 2);
        // A machine or ratio the comparison does not run is named, with the valid ones.
        m.machine_ratios = [("optane".to_string(), vec!["1:8".to_string()])].into();
        let e = plan(&m).unwrap_err().to_string();
        assert!(
            e.contains("machine_ratios names machine `optane`") && e.contains("cxl, cxl-lowbw"),
            "{e}"
        );
        m.machine_ratios = [("cxl".to_string(), vec!["1:16".to_string()])].into();
        let e = plan(&m).unwrap_err().to_string();
        assert!(
            e.contains("gives machine `cxl` ratio `1:16`") && e.contains("1:32, 1:8"),
            "{e}"
        );
        m.machine_ratios = [("cxl".to_string(), vec![])].into();
        assert!(plan(&m).unwrap_err().to_string().contains("no ratio"));
        // `--ratios` keeps a machine's own ratios among those it names and leaves out a
        // machine with none left, and with it a workload that ran on that machine only;
        // `--machines` drops the ratios of machines it leaves out.
        let config = "policies = [\"autonuma\"]\nratios = [\"1:32\", \"1:8\"]\nmachines = [\"cxl\", \"cxl-lowbw\"]\n\
            machine_ratios = { cxl-lowbw = [\"1:8\"] }\n\
            [[workloads]]\nname = \"gups\"\n[[workloads]]\nname = \"pmbench\"\nmachines = [\"cxl-lowbw\"]\n";
        let args = |ratios: Option<&[&str]>, machines: Option<&[&str]>| CompareArgs {
            config: Some(("m.toml".into(), config.into())),
            ratios: ratios.map(|r| r.iter().map(|s| s.to_string()).collect()),
            machines: machines.map(|m| m.iter().map(|s| s.to_string()).collect()),
            ..Default::default()
        };
        let (s, _) = resolve_spec(&args(Some(&["1:32"]), None)).unwrap();
        assert_eq!(s.machines, vec!["cxl".to_string()]);
        assert!(s.machine_ratios.is_empty());
        assert_eq!(s.workloads.len(), 1);
        assert!(plan(&s).is_ok());
        let (s, _) = resolve_spec(&args(Some(&["1:8", "1:16"]), None)).unwrap();
        assert_eq!(s.machines.len(), 2);
        assert_eq!(s.machine_ratios["cxl-lowbw"], vec!["1:8".to_string()]);
        let (s, _) = resolve_spec(&args(None, Some(&["cxl"]))).unwrap();
        assert!(s.machine_ratios.is_empty());
        assert!(plan(&s).is_ok());
        // Naming the machine as well does not lift its own ratios.
        let (s, _) = resolve_spec(&args(Some(&["1:32"]), Some(&["cxl", "cxl-lowbw"]))).unwrap();
        assert_eq!(s.machines, vec!["cxl".to_string()]);
        assert!(plan(&s).is_ok());
    }

    #[test]
    fn invalid_matrices_fail_before_running() {
        let e = plan(&spec(&["nope"], &["gups"], &["1:8"]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown policy `nope`") && e.contains("autonuma"),
            "{e}"
        );
        let e = plan(&spec(&["autonuma"], &["nope"], &["1:8"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown workload `nope`"), "{e}");
        let e = plan(&spec(&[], &["gups"], &["1:8"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no policies"), "{e}");
        let e = plan(&spec(&["autonuma"], &["gups"], &[]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no ratios"), "{e}");
        let e = plan(&spec(&["autonuma"], &["gups"], &["0:8"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("fast-tier size"), "{e}");
        // A ratio so small the fast tier has no page at this footprint.
        let e = plan(&spec(&["autonuma"], &["gups"], &["1:10000000"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("0 pages"), "{e}");
        let mut s = spec(&["autonuma"], &["gups"], &["1:8"]);
        s.machines = vec!["nope".into()];
        assert!(plan(&s)
            .unwrap_err()
            .to_string()
            .contains("unknown machine"));
    }

    #[test]
    fn every_builtin_suite_parses_and_plans() {
        // One thread per suite: planning builds every workload of a suite once, and
        // the suites are independent.
        std::thread::scope(|scope| {
            for s in suites::SUITES {
                scope.spawn(move || {
                    // Planning builds each workload once for its footprint: the
                    // suites' graphs, trees and stores take 50 s of CPU to build at
                    // their own scales (the faithful BFS cells' 2^25-vertex graph a
                    // minute and 6.5 GB more), so they are planned at the claims'
                    // smoke scale (the names and sets are what this checks; the
                    // smaller footprints make the ratios' fast tiers smaller still).
                    let mut spec: MatrixSpec =
                        toml::from_str(s.toml).unwrap_or_else(|e| panic!("{}: {e}", s.name));
                    crate::claims::shrink_for_smoke(&mut spec);
                    // Every name must be registered: a suite never drops a system
                    // silently.
                    let runs = plan(&spec).unwrap_or_else(|e| panic!("suite {}: {e}", s.name));
                    assert!(!runs.is_empty());
                    for p in spec.policies.iter().filter(|p| *p != "*") {
                        assert!(runs.iter().any(|r| &r.policy == p), "{}: {p}", s.name);
                    }
                });
            }
        });
    }
}
