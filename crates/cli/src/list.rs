//! `tierkit list`: every registered policy, workload and machine, with parameters and
//! defaults.

use tierkit_policies::PolicyConfig;
use tierkit_sim::config::{MachineConfig, PRESETS};
use tierkit_workloads::WorkloadConfig;

/// The default parameters of a config, as indented `key = value` lines (the `name`
/// tag left out).
fn params<T: serde::Serialize>(cfg: &T) -> String {
    let text = toml::to_string(cfg).unwrap_or_default();
    let mut out = String::new();
    let mut section = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with("name =") {
            continue;
        }
        if line.starts_with('[') {
            section = line.trim_matches(|c| c == '[' || c == ']').to_string() + ".";
            continue;
        }
        out.push_str(&format!("      {section}{line}\n"));
    }
    out
}

/// What `tierkit list` shows: a short index by default, or one section in full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Section {
    /// Policies with their parameters and defaults.
    Policies,
    /// Workloads with their parameters and defaults.
    Workloads,
    /// Machine presets, machine and simulator settings.
    Machines,
    /// The built-in `compare` suites.
    Suites,
}

/// Indented `name  description` lines, names padded to `width`.
fn entries<'a>(width: usize, items: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    items
        .into_iter()
        .map(|(name, what)| format!("  {name:<width$} {what}\n"))
        .collect()
}

fn presets() -> impl Iterator<Item = (&'static str, &'static str)> {
    PRESETS.iter().map(|p| (p.name, p.description))
}

fn suites() -> impl Iterator<Item = &'static crate::compare::suites::Suite> {
    crate::compare::suites::SUITES.iter()
}

/// The short index: every name with its one-line description, and how to see more.
pub fn index() -> String {
    [
        "POLICIES (tierkit list policies: parameters and defaults)\n".to_string(),
        entries(16, PolicyConfig::describe().iter().copied()),
        "\nWORKLOADS (tierkit list workloads)\n".to_string(),
        entries(16, WorkloadConfig::describe()),
        "\nMACHINES (tierkit list machines: every machine and sim setting)\n".to_string(),
        entries(16, presets()),
        "\nSUITES (tierkit compare --suite NAME; tierkit list suites)\n".to_string(),
        entries(16, suites().map(|s| (s.name, s.description))),
    ]
    .concat()
}

/// One section in full.
pub fn section(which: Section) -> String {
    let mut s = String::new();
    match which {
        Section::Policies => {
            s.push_str("POLICIES (--policy NAME; parameters via --set policy.KEY=VALUE)\n");
            for &(name, what) in PolicyConfig::describe() {
                s += &entries(14, [(name, what)]);
                s += &params(&PolicyConfig::default_for(name).expect("registered"));
            }
        }
        Section::Workloads => {
            s.push_str("WORKLOADS (--workload NAME; parameters via --set workload.KEY=VALUE)\n");
            for (name, what) in WorkloadConfig::describe() {
                s += &entries(14, [(name, what)]);
                s += &params(&WorkloadConfig::default_for(name).expect("registered"));
            }
        }
        Section::Machines => {
            s.push_str(
                "MACHINES (--machine NAME; --ratio FAST:SLOW or a size; --set machine.KEY=VALUE)\n",
            );
            s += &entries(14, presets());
            s.push_str("    machine parameters and defaults:\n");
            s.push_str(&params(&MachineConfig::default()));
            s.push_str("    sim parameters and defaults (--set sim.KEY=VALUE):\n");
            s.push_str(&params(&tierkit_sim::SimConfig::default()));
        }
        Section::Suites => {
            s.push_str("SUITES (tierkit compare --suite NAME; each is a TOML matrix)\n");
            for suite in suites() {
                s += &entries(14, [(suite.name, suite.description)]);
                for line in suite.toml.lines().filter(|l| !l.trim().is_empty()) {
                    s.push_str(&format!("      {line}\n"));
                }
            }
        }
    }
    s
}

/// One section as data, for programs (the Python package): each entry's `name`,
/// `description` and `defaults` (its parameters and default values, as the TOML
/// config would hold them). Machines also carry the machine and sim defaults once,
/// in the first entry's `machine_defaults` and `sim_defaults`.
pub fn catalog(which: Section) -> serde_json::Value {
    use serde_json::{json, to_value, Value};
    let without_name = |v: Value| match v {
        Value::Object(mut m) => {
            m.remove("name");
            Value::Object(m)
        }
        v => v,
    };
    let entries: Vec<Value> = match which {
        Section::Policies => PolicyConfig::describe()
            .iter()
            .map(|&(name, what)| {
                let d = PolicyConfig::default_for(name).expect("registered");
                json!({"name": name, "description": what,
                       "defaults": without_name(to_value(d).unwrap_or_default())})
            })
            .collect(),
        Section::Workloads => WorkloadConfig::describe()
            .into_iter()
            .map(|(name, what)| {
                let d = WorkloadConfig::default_for(name).expect("registered");
                json!({"name": name, "description": what,
                       "defaults": without_name(to_value(d).unwrap_or_default())})
            })
            .collect(),
        Section::Machines => presets()
            .map(|(name, what)| {
                json!({"name": name, "description": what,
                       "machine_defaults": to_value(MachineConfig::default()).unwrap_or_default(),
                       "sim_defaults": to_value(tierkit_sim::SimConfig::default()).unwrap_or_default()})
            })
            .collect(),
        Section::Suites => suites()
            .map(|s| json!({"name": s.name, "description": s.description, "toml": s.toml}))
            .collect(),
    };
    Value::Array(entries)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_catalog_holds_every_name_with_its_defaults() {
        use super::Section::*;
        let p = super::catalog(Policies);
        let names: Vec<&str> = p
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, tierkit_policies::PolicyConfig::names());
        let memtis = p
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == "memtis")
            .unwrap();
        assert!(memtis["defaults"]
            .as_object()
            .is_some_and(|m| !m.is_empty() && !m.contains_key("name")));
        let w = super::catalog(Workloads);
        assert_eq!(
            w.as_array().unwrap().len(),
            tierkit_workloads::WorkloadConfig::names().len()
        );
        assert!(super::catalog(Machines)[0]["machine_defaults"]["llc_ways"].is_number());
    }

    #[test]
    fn listing_names_everything_registered() {
        use super::Section::*;
        let l = [Policies, Workloads, Machines, Suites]
            .map(super::section)
            .concat();
        for n in tierkit_policies::PolicyConfig::names() {
            assert!(l.contains(n), "{n}");
        }
        for n in tierkit_workloads::WorkloadConfig::names() {
            assert!(l.contains(n), "{n}");
        }
        assert!(
            l.contains("cxl-lowbw") && l.contains("scan.scan_size_mb = 256"),
            "{l}"
        );
    }

    #[test]
    fn the_index_is_short_and_names_every_section_and_suite() {
        let i = super::index();
        for n in tierkit_policies::PolicyConfig::names() {
            assert!(i.contains(n), "{n}");
        }
        for s in crate::compare::suites::SUITES {
            assert!(i.contains(s.name), "{}", s.name);
        }
        assert!(
            !i.contains("scan.scan_size_mb"),
            "the index has no parameters"
        );
        assert!(i.lines().count() < 80, "{} lines", i.lines().count());
    }
}
