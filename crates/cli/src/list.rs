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

/// The listing text.
pub fn listing() -> String {
    let mut s = String::from("POLICIES (--policy NAME; parameters via --set policy.KEY=VALUE)\n");
    for (name, what) in PolicyConfig::describe() {
        s.push_str(&format!("  {name:<14} {what}\n"));
        s.push_str(&params(
            &PolicyConfig::default_for(name).expect("registered"),
        ));
    }
    s.push_str("\nWORKLOADS (--workload NAME; parameters via --set workload.KEY=VALUE)\n");
    for (name, what) in WorkloadConfig::describe() {
        s.push_str(&format!("  {name:<14} {what}\n"));
        s.push_str(&params(
            &WorkloadConfig::default_for(name).expect("registered"),
        ));
    }
    s.push_str(
        "\nMACHINES (--machine NAME; --ratio FAST:SLOW or a size; --set machine.KEY=VALUE)\n",
    );
    for p in PRESETS {
        s.push_str(&format!("  {:<14} {}\n", p.name, p.description));
    }
    s.push_str("    machine parameters and defaults:\n");
    s.push_str(&params(&MachineConfig::default()));
    s.push_str("    sim parameters and defaults (--set sim.KEY=VALUE):\n");
    s.push_str(&params(&tierkit_sim::SimConfig::default()));
    s
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
}
