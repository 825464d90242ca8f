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

/// The short index: every name with its one-line description, and how to see more.
pub fn index() -> String {
    let mut s = String::from("POLICIES (tierkit list policies: parameters and defaults)\n");
    for (name, what) in PolicyConfig::describe() {
        s.push_str(&format!("  {name:<16} {what}\n"));
    }
    s.push_str("\nWORKLOADS (tierkit list workloads)\n");
    for (name, what) in WorkloadConfig::describe() {
        s.push_str(&format!("  {name:<16} {what}\n"));
    }
    s.push_str("\nMACHINES (tierkit list machines: every machine and sim setting)\n");
    for p in PRESETS {
        s.push_str(&format!("  {:<16} {}\n", p.name, p.description));
    }
    s.push_str("\nSUITES (tierkit compare --suite NAME; tierkit list suites)\n");
    for suite in crate::compare::suites::SUITES {
        s.push_str(&format!("  {:<16} {}\n", suite.name, suite.description));
    }
    s
}

/// One section in full.
pub fn section(which: Section) -> String {
    let mut s = String::new();
    match which {
        Section::Policies => {
            s.push_str("POLICIES (--policy NAME; parameters via --set policy.KEY=VALUE)\n");
            for (name, what) in PolicyConfig::describe() {
                s.push_str(&format!("  {name:<14} {what}\n"));
                s.push_str(&params(
                    &PolicyConfig::default_for(name).expect("registered"),
                ));
            }
        }
        Section::Workloads => {
            s.push_str("WORKLOADS (--workload NAME; parameters via --set workload.KEY=VALUE)\n");
            for (name, what) in WorkloadConfig::describe() {
                s.push_str(&format!("  {name:<14} {what}\n"));
                s.push_str(&params(
                    &WorkloadConfig::default_for(name).expect("registered"),
                ));
            }
        }
        Section::Machines => {
            s.push_str(
                "MACHINES (--machine NAME; --ratio FAST:SLOW or a size; --set machine.KEY=VALUE)\n",
            );
            for p in PRESETS {
                s.push_str(&format!("  {:<14} {}\n", p.name, p.description));
            }
            s.push_str("    machine parameters and defaults:\n");
            s.push_str(&params(&MachineConfig::default()));
            s.push_str("    sim parameters and defaults (--set sim.KEY=VALUE):\n");
            s.push_str(&params(&tierkit_sim::SimConfig::default()));
        }
        Section::Suites => {
            s.push_str("SUITES (tierkit compare --suite NAME; each is a TOML matrix)\n");
            for suite in crate::compare::suites::SUITES {
                s.push_str(&format!("  {:<14} {}\n", suite.name, suite.description));
                for line in suite.toml.lines().filter(|l| !l.trim().is_empty()) {
                    s.push_str(&format!("      {line}\n"));
                }
            }
        }
    }
    s
}

/// Every section in full, one after another.
pub fn listing() -> String {
    [
        Section::Policies,
        Section::Workloads,
        Section::Machines,
        Section::Suites,
    ]
    .map(section)
    .join("\n")
}

#[cfg(test)]
mod tests {
    #[test]
    fn listing_names_everything_registered() {
        let l = super::listing();
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
