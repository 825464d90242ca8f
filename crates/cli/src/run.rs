//! Run one simulation: build the workload, policy and machine from a [`RunConfig`],
//! run it with a progress bar on a terminal, print a table, write the outputs.

use crate::run_config::RunConfig;
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tierkit_core::future::FutureTape;
use tierkit_core::Workload;
use tierkit_sim::future::FutureView;
use tierkit_sim::{RunLabels, RunOutput, Simulation};
use tierkit_workloads::recorded::Recording;

/// Run `cfg`. `show_progress` enables the progress bar (drawn only on a terminal and
/// only once a run has taken more than two seconds).
pub fn simulate(cfg: &RunConfig, show_progress: bool) -> Result<RunOutput> {
    simulate_with(cfg, show_progress, None)
}

/// The (sampled) streams `cfg`'s workload produces, recorded once so that many runs
/// can replay them ([`simulate_with`]). Every run whose workload config, seed and
/// sample rate equal `cfg`'s may replay the recording. `None` if the encoded streams
/// would take more than `max_bytes` (the runs then generate the workload each).
pub fn record_workload(cfg: &RunConfig, max_bytes: u64) -> Option<Arc<Recording>> {
    let (mut w, sampler) =
        tierkit_sim::sampling::sampled_workload(cfg.workload.build(cfg.seed), &cfg.sim, cfg.seed);
    Recording::record_within(
        &mut *w,
        (!sampler.keeps_all()).then_some(sampler),
        max_bytes,
    )
    .map(Arc::new)
}

/// A recording and the futures its clairvoyant references share: for each view of
/// the stream that more than one of its runs reads (a machine's LLC and the runs'
/// length: `oracle` and `oracle-static`, at each ratio of a machine), one
/// [`FutureTape`], read by the first run that needs it. A tape is kept only if it
/// takes no more memory than the recording (4 bytes per memory access): held
/// recordings stay within the recording budget, so their tapes within as much again.
/// Only how long a comparison takes depends on any of this, never its results.
pub struct RecordedStreams {
    recording: Arc<Recording>,
    futures: Vec<(FutureView, OnceLock<Option<Arc<FutureTape>>>)>,
}

impl RecordedStreams {
    /// `recording`, with a shared future for each of `shared_views`.
    pub fn new(recording: Arc<Recording>, shared_views: Vec<FutureView>) -> RecordedStreams {
        RecordedStreams {
            recording,
            futures: shared_views
                .into_iter()
                .map(|v| (v, OnceLock::new()))
                .collect(),
        }
    }

    /// Bytes the recording takes.
    pub fn encoded_bytes(&self) -> u64 {
        self.recording.encoded_bytes()
    }

    /// The tape of `view`, read now if no run has read it yet; `None` if the view is
    /// not shared or its tape would outgrow the recording.
    fn shared_future(&self, view: &FutureView) -> Option<Arc<FutureTape>> {
        let (_, tape) = self.futures.iter().find(|(v, _)| v == view)?;
        tape.get_or_init(|| {
            let max_bytes = self.recording.encoded_bytes();
            FutureTape::read_within(view.of(Box::new(self.recording.replay())), max_bytes)
                .map(Arc::new)
        })
        .clone()
    }
}

/// How many bytes a recording may take on this host: `TIERKIT_RECORDING_BUDGET_MIB`
/// if set, else a third of the memory available now (the runs that replay it need the
/// rest), or 2 GiB where that is unknown. Only the time a comparison takes depends on
/// it, never its results.
pub fn default_recording_budget() -> Result<u64> {
    const VAR: &str = "TIERKIT_RECORDING_BUDGET_MIB";
    if let Ok(v) = std::env::var(VAR) {
        return v.trim().parse::<u64>().map(|mib| mib << 20).map_err(|_| {
            anyhow::anyhow!(
                "{VAR} must be a whole number of MiB (0 turns recording off), got {v:?}"
            )
        });
    }
    Ok(std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemAvailable:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(2 << 30, |kib| kib * 1024 / 3))
}

/// Like [`simulate`], replaying `streams` (recorded by [`record_workload`] for a run
/// with the same workload, seed and sample rate) instead of generating the workload,
/// and reading a clairvoyant reference's future from the tape it shares, if any.
/// The results are byte-identical either way.
pub fn simulate_with(
    cfg: &RunConfig,
    show_progress: bool,
    streams: Option<&Arc<RecordedStreams>>,
) -> Result<RunOutput> {
    let stream: Box<dyn Fn() -> Box<dyn Workload>> = match streams {
        Some(s) => {
            let rec = Arc::clone(&s.recording);
            Box::new(move || Box::new(rec.replay()) as Box<dyn Workload>)
        }
        None => {
            let wcfg = cfg.workload.clone();
            let seed = cfg.seed;
            let sim_cfg = cfg.sim.clone();
            // The stream the machine will run: the sampled one when the run is sampled.
            Box::new(move || {
                tierkit_sim::sampling::sampled_workload(wcfg.build(seed), &sim_cfg, seed).0
            })
        }
    };
    let workload = stream();
    // A clairvoyant policy reads the future of that stream as the run will consume
    // it: up to where the run stops, as memory will see it.
    let view = FutureView::new(&cfg.machine, &cfg.sim)?;
    let shared_future: Option<Box<dyn Fn() -> Option<Arc<FutureTape>>>> = match streams {
        Some(s) if s.futures.iter().any(|(v, _)| *v == view) => {
            let s = Arc::clone(s);
            Some(Box::new(move || s.shared_future(&view)))
        }
        _ => None,
    };
    let fresh: Box<dyn Fn() -> Box<dyn Workload>> = Box::new(move || view.of(stream()));
    // Only a progress bar needs the length: for some workloads (a graph kernel's
    // replayed trials) the count is a whole pass of the program.
    let expected = if show_progress {
        workload.expected_accesses()
    } else {
        None
    };
    let ctx = tierkit_core::BuildContext {
        space_scale: cfg.sim.sample_rate.scale(),
        fresh_workload: Some(fresh),
        shared_future,
    };
    let policy = cfg.policy.try_build(&ctx).map_err(|e| anyhow::anyhow!(e))?;
    let labels = RunLabels {
        policy: cfg.policy.name().into(),
        workload: cfg.workload.name().into(),
        seed: cfg.seed,
    };
    let sim = Simulation::new(&cfg.machine, &cfg.sim, policy, workload, labels)?;
    let start = Instant::now();
    let bar = ProgressBar::with_draw_target(expected, ProgressDrawTarget::hidden());
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} {bar:40} {human_pos}/{human_len} accesses ({per_sec}, eta {eta})",
        )
        .expect("static template"),
    );
    let mut shown = false;
    let out = sim.run(&mut |n| {
        if show_progress && !shown && start.elapsed() > Duration::from_secs(2) {
            bar.set_draw_target(ProgressDrawTarget::stderr());
            shown = true;
        }
        bar.set_position(n);
    })?;
    bar.finish_and_clear();
    Ok(out)
}

/// The human table for stdout.
pub fn table(out: &RunOutput, wall: Duration) -> String {
    let s = &out.summary;
    let mut t = String::new();
    let row = |t: &mut String, k: &str, v: String| t.push_str(&format!("  {k:<28} {v}\n"));
    t.push_str(&format!(
        "tierkit sim: {} on {} ({} machine, fast {}), seed {}\n",
        s.policy, s.workload, s.machine, s.fast, s.seed
    ));
    row(
        &mut t,
        "simulated runtime",
        format!("{:.3} s", s.sim_seconds),
    );
    if s.sample_rate != "1" {
        row(
            &mut t,
            "sample rate",
            format!(
                "{}{}",
                match s.sample_strata.as_deref() {
                    Some(strata) => format!(
                        "{} of each mapping simulated (strata by {strata}); counts are for the full machine",
                        s.sample_rate
                    ),
                    None => format!(
                        "{} of 2 MiB regions simulated; counts are for the full machine",
                        s.sample_rate
                    ),
                },
                match s.sampled_compute {
                    Some(c) => format!("; the dropped accesses' compute {}", c.name()),
                    None => String::new(),
                }
            ),
        );
    }
    if let Some(c) = &s.coarse_sampling {
        row(&mut t, "sampling warning", coarse_sampling_text(c));
    }
    if s.policy_time_scale != 1.0 {
        row(
            &mut t,
            "policy time scale",
            format!(
                "{} (policy periods shortened {}x: not the papers' time constants)",
                s.policy_time_scale, s.policy_time_scale
            ),
        );
    }
    row(
        &mut t,
        "accesses",
        format!("{} ({} reached memory)", s.accesses, s.mem_accesses),
    );
    row(
        &mut t,
        "fast access ratio",
        format!("{:.2}%", s.fast_access_ratio * 100.0),
    );
    row(
        &mut t,
        "promoted / demoted pages",
        format!("{} / {}", s.promoted_pages, s.demoted_pages),
    );
    row(
        &mut t,
        "migration traffic",
        format!(
            "{:.1} MiB ({:.2}% of memory traffic)",
            s.migrated_bytes as f64 / (1 << 20) as f64,
            s.migration_traffic_share * 100.0
        ),
    );
    row(
        &mut t,
        "placement vs epoch hot set",
        format!(
            "precision {:.2}, recall {:.2}, F1 {:.2}",
            s.placement_precision, s.placement_recall, s.placement_f1
        ),
    );
    row(
        &mut t,
        "hinting faults / samples",
        format!("{} / {}", s.hint_faults, s.samples),
    );
    row(
        &mut t,
        "tiering CPU",
        format!(
            "{:.3} s (application stall {:.3} s)",
            s.tiering_cpu_seconds, s.app_tiering_stall_seconds
        ),
    );
    for tier in &s.tiers {
        row(
            &mut t,
            &format!("tier {} used / capacity", tier.name),
            format!("{} / {} pages", tier.used_pages, tier.capacity_pages),
        );
    }
    for (k, v) in &s.policy_stats {
        row(&mut t, k, format!("{v}"));
    }
    if let Some(why) = why_nothing_was_promoted(s) {
        row(&mut t, "why no promotion", why);
    }
    row(
        &mut t,
        "wall time",
        format!(
            "{:.2} s ({:.1} M accesses/s)",
            wall.as_secs_f64(),
            s.accesses as f64 / wall.as_secs_f64().max(1e-9) / 1e6
        ),
    );
    t
}

/// What a run's mappings smaller than one sampling stratum mean for its results.
pub fn coarse_sampling_text(c: &tierkit_sim::metrics::CoarseSampling) -> String {
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    format!(
        "{} mapping(s), {:.1} MiB in all, smaller than one sampling stratum ({:.0} MiB): \
         each is simulated through one region standing for the whole stratum, or not at \
         all, so results that depend on them can be far off; run exactly or at a rate \
         whose stratum they fill (docs/sampling.md, \"Limits\")",
        c.mappings,
        mib(c.bytes),
        mib(c.stratum_bytes)
    )
}

/// A run that tried to promote and never could: say why, as far as the summary can
/// tell (a full fast tier that the policy never made room in).
fn why_nothing_was_promoted(s: &tierkit_sim::metrics::Summary) -> Option<String> {
    if s.promoted_pages > 0 {
        return None;
    }
    let failed: f64 = s
        .policy_stats
        .iter()
        .filter(|(k, _)| k.contains("failed"))
        .map(|(_, v)| *v)
        .sum::<f64>()
        + s.failed_migrations as f64;
    let fast = s.tiers.first()?;
    // Full but for the free reserve the watermarks keep (a few percent at most).
    let full = fast.used_pages as f64 >= 0.95 * fast.capacity_pages as f64;
    (failed > 0.0 && full).then(|| {
        format!(
            "the fast tier ended full ({} / {} pages, the rest its watermark reserve) and {} freed no room in it: its {failed} failed promotions found no free fast page ({})",
            fast.used_pages,
            fast.capacity_pages,
            s.policy,
            if s.demoted_pages == 0 { "it demoted nothing" } else { "its demotions did not keep up" }
        )
    })
}

/// The files a run writes into `--out`.
pub const OUTPUT_FILES: &[&str] = &[
    "summary.json",
    "timeseries.csv",
    "epochs.csv",
    "heatmap.csv",
    "config.toml",
];

/// Refuse to overwrite earlier results unless `force`.
pub fn check_out_dir(dir: &Path, force: bool) -> Result<()> {
    if force {
        return Ok(());
    }
    for f in OUTPUT_FILES {
        let p = dir.join(f);
        if p.exists() {
            bail!(
                "{} already exists; choose another --out or pass --force to overwrite",
                p.display()
            );
        }
    }
    Ok(())
}

/// Write summary.json, timeseries.csv, epochs.csv (placement quality per epoch),
/// heatmap.csv (memory accesses per address bin per epoch) and the resolved
/// config.toml into `dir`.
pub fn write_files(dir: &Path, cfg: &RunConfig, out: &RunOutput) -> Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create output directory {}", dir.display()))?;
    let json = serde_json::to_string_pretty(&out.summary)? + "\n";
    for (name, text) in [
        ("summary.json", json),
        ("timeseries.csv", out.series.to_csv()),
        ("epochs.csv", out.placement.epochs_csv()),
        ("heatmap.csv", out.placement.heat_csv()),
        ("config.toml", cfg.to_toml()),
    ] {
        let p = dir.join(name);
        std::fs::write(&p, text).with_context(|| format!("cannot write {}", p.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run_config::{build, RunArgs};

    fn cfg(policy: &str, sample_rate: &str) -> RunConfig {
        build(&RunArgs {
            workload: Some("gups".into()),
            policy: Some(policy.into()),
            sets: vec![
                "workload.footprint_mib=64".into(),
                "workload.nr_updates=300000".into(),
                "workload.nr_threads=2".into(),
                "machine.llc_size_mib=2".into(),
                format!("sim.sample_rate=\"{sample_rate}\""),
            ],
            ..Default::default()
        })
        .unwrap()
    }

    /// Issue 16: a run whose promotions all failed says why. autonuma on a small GUPS
    /// whose first touches fill the fast tier never demotes, so nothing is promoted; a
    /// run that promoted gets no such line.
    #[test]
    fn a_run_that_promoted_nothing_says_why() {
        let mut c = cfg("autonuma", "1");
        c.policy = tierkit_policies::PolicyConfig::Autonuma(tierkit_policies::AutonumaConfig {
            scan: tierkit_policies::numa_scan::NumaScanConfig {
                scan_delay_ms: 1,
                scan_period_min_ms: 10,
                ..Default::default()
            },
        });
        let s = simulate(&c, false).unwrap().summary;
        assert_eq!(s.promoted_pages, 0);
        let why = why_nothing_was_promoted(&s).unwrap_or_else(|| {
            panic!(
                "no reason: {:?} {:?} {}",
                s.policy_stats, s.tiers, s.failed_migrations
            )
        });
        assert!(
            why.contains("autonuma freed no room") && why.contains("demoted nothing"),
            "{why}"
        );
        let promoted = tierkit_sim::metrics::Summary {
            promoted_pages: 1,
            ..s
        };
        assert_eq!(why_nothing_was_promoted(&promoted), None);
    }

    /// Generate once, replay many (issue 15): a run replaying a recording gives the
    /// same outputs, byte for byte, as a run generating its workload — exact and
    /// sampled, and for a clairvoyant policy that reads the future from the replay or
    /// from the tape its references share.
    #[test]
    fn replayed_runs_equal_generated_runs() {
        for rate in ["1", "1/8"] {
            let first = cfg("first-touch", rate);
            let rec = record_workload(&first, u64::MAX).unwrap();
            let view = FutureView::new(&first.machine, &first.sim).unwrap();
            let alone = Arc::new(RecordedStreams::new(Arc::clone(&rec), Vec::new()));
            let shared = Arc::new(RecordedStreams::new(rec, vec![view]));
            for policy in ["first-touch", "oracle", "oracle-static", "linux-tiering"] {
                let c = cfg(policy, rate);
                let a = simulate(&c, false).unwrap();
                let b = simulate_with(&c, false, Some(&alone)).unwrap();
                let t = simulate_with(&c, false, Some(&shared)).unwrap();
                assert_eq!(
                    serde_json::to_string(&a.summary).unwrap(),
                    serde_json::to_string(&t.summary).unwrap(),
                    "{policy} at {rate}, the future shared"
                );
                assert_eq!(a.series.to_csv(), t.series.to_csv(), "{policy} at {rate}");
                assert_eq!(
                    serde_json::to_string(&a.summary).unwrap(),
                    serde_json::to_string(&b.summary).unwrap(),
                    "{policy} at {rate}"
                );
                assert_eq!(a.series.to_csv(), b.series.to_csv(), "{policy} at {rate}");
            }
            // The references read the tape, not a stream each: the test covers the
            // shared path only if the tape fits beside its recording.
            let tape = shared.futures[0]
                .1
                .get()
                .expect("a reference read the tape");
            assert!(tape.is_some(), "at {rate}: the tape outgrew the recording");
        }
    }
}
