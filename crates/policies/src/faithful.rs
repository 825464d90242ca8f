//! Test helper: run a registered policy with its defaults at its paper's own time
//! constants (policy time scale 1), on a sampled machine so that tens of seconds of
//! machine time cost a second of test time — the way `tierkit sim` runs it, extensive
//! parameters scaled by the sample rate.

use tierkit_core::{BuildContext, Workload};
use tierkit_sim::testing::run;
use tierkit_sim::{MachineConfig, RunOutput, SampleRate, SimConfig};

/// Run policy `name` (registry defaults) on `w` and `machine`, sampled at
/// `1/sample_denominator`, at policy time scale 1; prints a one-line summary.
pub(crate) fn run_registered(
    name: &str,
    machine: &MachineConfig,
    sample_denominator: u32,
    w: Box<dyn Workload>,
) -> RunOutput {
    let sim = SimConfig {
        sample_rate: SampleRate {
            denominator: sample_denominator,
        },
        ..SimConfig::default()
    };
    let ctx = BuildContext {
        space_scale: sim.sample_rate.scale(),
        ..BuildContext::default()
    };
    let policy = crate::PolicyConfig::default_for(name)
        .expect("registered")
        .build(&ctx);
    let (out, _) = run(machine, &sim, policy, w);
    let s = &out.summary;
    eprintln!(
        "{name:>14}: {:.3} s, fast ratio {:.3}, promoted {} demoted {}",
        s.sim_seconds, s.fast_access_ratio, s.promoted_pages, s.demoted_pages
    );
    out
}
