//! `mix`: several workloads run together as separate processes competing for the
//! fast tier — PET's multi-programmed runs (PET §5.2.1: SPEC and GAPBS as five to ten
//! processes with an aggregate working set of 1.5× the fast tier; spec §4.2–§4.3).
//!
//! `members` is a list of ordinary workload configurations, written as they would be
//! on their own:
//!
//! ```toml
//! [workload]
//! name = "mix"
//! members = [{ name = "gups", scale = 0.5 }, { name = "pmbench", scale = 0.5 }]
//! ```
//!
//! Member `k`'s processes follow member `k − 1`'s: if member 0 has 1 process and
//! member 1 has 50, the mix has processes 0 (member 0's) and 1…50 (member 1's
//! processes 0…49). Every call for one of those processes — its prologue and its
//! threads' `fill` — is handed to the member with the process id made local again.
//! Each process keeps its own address space, so members need no address
//! coordination. The footprint and `expected_accesses` are the members' sums.
//!
//! **Seeds.** Member `k` is built with seed `seed + k` (wrapping), so member 0 is
//! exactly the workload run alone with the mix's seed, and member `k` exactly the
//! workload run alone with `--seed` `seed + k`: the same op streams, op for op. Two
//! identical members therefore still draw different streams.
//!
//! **Scale.** The mix's `scale` multiplies every member's own `scale`; the default
//! mix (four members at 0.25) is ≈ 4 GiB in all.
//!
//! Process names are prefixed with the member index (`0:gups`, `1:pmbench`), so
//! reports keep members apart even when two run the same workload.

use serde::{Deserialize, Serialize};
use tierkit_core::{ConfigError, Op, ProcessShape, RegionSampler, Workload, WorkloadShape};

use crate::common;
use crate::WorkloadConfig;

const NAME: &str = "mix";

/// Configuration of [`Mix`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MixConfig {
    /// The workloads to run side by side, each as in its own run description (a
    /// `name` plus its fields), in [1, 64] members. Default: `gups`, `pmbench`,
    /// `zipf-kv` and `cachelib`, each at `scale` 0.25 (≈ 1 GiB each): a hot-set
    /// updater, a Gaussian page walker, a zipfian key-value store and a cache.
    pub members: Vec<WorkloadConfig>,
    /// Multiplies every member's `scale`. Default 1.0.
    pub scale: f64,
}

impl Default for MixConfig {
    fn default() -> Self {
        let quarter = |name: &str| {
            let mut c = WorkloadConfig::default_for(name).expect("a registered workload");
            set_scale(&mut c, 0.25).expect("every workload has a scale");
            c
        };
        MixConfig {
            members: ["gups", "pmbench", "zipf-kv", "cachelib"]
                .into_iter()
                .map(quarter)
                .collect(),
            scale: 1.0,
        }
    }
}

/// The member `scale` field through the member's serialised form: every workload
/// config has a top-level `scale` (the crate's convention), and this way the mix
/// needs no list of the workloads.
fn scale_of(c: &WorkloadConfig) -> Option<f64> {
    serde_json::to_value(c).ok()?.get("scale")?.as_f64()
}

/// Set a member's `scale` (see [`scale_of`]).
fn set_scale(c: &mut WorkloadConfig, scale: f64) -> Result<(), ConfigError> {
    let mut v = serde_json::to_value(&*c).map_err(|e| e.to_string())?;
    match v.get_mut("scale") {
        Some(s) => *s = serde_json::json!(scale),
        None => return Err(format!("workload {} has no scale field", c.name()).into()),
    }
    *c = serde_json::from_value(v).map_err(|e| e.to_string())?;
    Ok(())
}

impl MixConfig {
    /// Check every field and every member; the error names the field
    /// (`mix.members[k]: …` for a member's own error).
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=64).contains(&self.members.len()) {
            return Err(format!(
                "{NAME}.members must have 1 to 64 workloads, got {}",
                self.members.len()
            )
            .into());
        }
        if !(self.scale > 0.0 && self.scale <= common::MAX_SCALE) {
            return Err(format!(
                "{NAME}.scale must be in (0, {}], got {}",
                common::MAX_SCALE,
                self.scale
            )
            .into());
        }
        for (k, m) in self.members.iter().enumerate() {
            let member = self
                .scaled_member(k)
                .map_err(|e| format!("{NAME}.members[{k}]: {e}"))?;
            member
                .validate()
                .map_err(|e| format!("{NAME}.members[{k}]: {e}"))?;
            debug_assert_eq!(m.name(), member.name());
        }
        Ok(())
    }

    /// Member `k` with the mix's `scale` applied.
    pub fn scaled_member(&self, k: usize) -> Result<WorkloadConfig, ConfigError> {
        let mut m = self.members[k].clone();
        if self.scale != 1.0 {
            let s =
                scale_of(&m).ok_or_else(|| format!("workload {} has no scale field", m.name()))?;
            set_scale(&mut m, s * self.scale)?;
        }
        Ok(m)
    }
}

/// The seed member `k` of a mix seeded with `seed` is built with (module docs).
pub fn member_seed(seed: u64, k: usize) -> u64 {
    seed.wrapping_add(k as u64)
}

/// A multi-programmed mix (see the module docs).
pub struct Mix {
    members: Vec<Box<dyn Workload>>,
    /// Per mix process: (member, the member's own process id).
    owner: Vec<(usize, usize)>,
    shape: WorkloadShape,
}

impl Mix {
    /// Build the generator for `cfg` with `seed`.
    ///
    /// # Panics
    /// If `cfg` does not pass [`MixConfig::validate`].
    pub fn new(cfg: &MixConfig, seed: u64) -> Self {
        if let Err(e) = cfg.validate() {
            panic!("invalid mix config: {e}");
        }
        let members: Vec<Box<dyn Workload>> = (0..cfg.members.len())
            .map(|k| {
                cfg.scaled_member(k)
                    .expect("validated")
                    .build(member_seed(seed, k))
            })
            .collect();
        let mut owner = Vec::new();
        let mut processes = Vec::new();
        let mut footprint_bytes = 0;
        for (k, m) in members.iter().enumerate() {
            let s = m.shape();
            footprint_bytes += s.footprint_bytes;
            for (p, ps) in s.processes.into_iter().enumerate() {
                owner.push((k, p));
                processes.push(ProcessShape {
                    name: format!("{k}:{}", ps.name),
                    ..ps
                });
            }
        }
        Mix {
            members,
            owner,
            shape: WorkloadShape {
                processes,
                footprint_bytes,
            },
        }
    }

    /// The first mix process id of member `k`.
    pub fn first_process(&self, k: usize) -> usize {
        self.owner
            .iter()
            .position(|&(m, _)| m == k)
            .unwrap_or(self.owner.len())
    }
}

impl Workload for Mix {
    fn shape(&self) -> WorkloadShape {
        self.shape.clone()
    }

    fn prologue(&mut self, process: usize, out: &mut Vec<Op>) {
        if let Some(&(k, p)) = self.owner.get(process) {
            self.members[k].prologue(p, out);
        }
    }

    fn fill(&mut self, process: usize, thread: usize, out: &mut Vec<Op>) {
        if let Some(&(k, p)) = self.owner.get(process) {
            self.members[k].fill(p, thread, out);
        }
    }

    /// Each member restricts itself to the regions the run keeps for its processes;
    /// the mix is restricted only if every member could (otherwise the run filters
    /// the whole stream, which leaves the restricted members' accesses as they are).
    fn restrict_to(&mut self, sampler: &RegionSampler) -> bool {
        let mut all = true;
        for k in 0..self.members.len() {
            let first = self.first_process(k) as u32;
            all &= self.members[k].restrict_to(&sampler.for_processes_from(first));
        }
        all
    }

    fn expected_accesses(&self) -> Option<u64> {
        self.members.iter().map(|m| m.expected_accesses()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::drain;
    use crate::{GupsConfig, PmbenchConfig};

    fn two() -> MixConfig {
        MixConfig {
            members: vec![
                WorkloadConfig::Gups(GupsConfig {
                    footprint_mib: 8,
                    nr_updates: 20_000,
                    nr_threads: 2,
                    ..GupsConfig::default()
                }),
                WorkloadConfig::PmbenchLadder(crate::PmbenchLadderConfig {
                    nr_processes: 3,
                    process_footprint_mib: 2,
                    nr_accesses: 30_000,
                    ..Default::default()
                }),
                WorkloadConfig::Pmbench(PmbenchConfig {
                    footprint_mib: 4,
                    nr_accesses: 10_000,
                    ..PmbenchConfig::default()
                }),
            ],
            scale: 1.0,
        }
    }

    #[test]
    fn processes_footprints_and_accesses_add_up() {
        let cfg = two();
        let mut mix = Mix::new(&cfg, 3);
        let alone: Vec<_> = (0..3)
            .map(|k| cfg.members[k].build(member_seed(3, k)))
            .collect();
        let s = mix.shape();
        assert_eq!(s.processes.len(), 1 + 3 + 1);
        assert_eq!(
            s.footprint_bytes,
            alone.iter().map(|w| w.shape().footprint_bytes).sum::<u64>()
        );
        assert_eq!(s.footprint_bytes, (8 + 3 * 2 + 4) << 20);
        let names: Vec<_> = s.processes.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "0:gups",
                "1:pmbench-delay-0",
                "1:pmbench-delay-19",
                "1:pmbench-delay-38",
                "2:pmbench"
            ]
        );
        assert_eq!(s.processes[0].nr_threads, 2);
        assert_eq!((mix.first_process(1), mix.first_process(2)), (1, 4));
        let expected: u64 = alone.iter().map(|w| w.expected_accesses().unwrap()).sum();
        assert_eq!(mix.expected_accesses(), Some(expected));
        let d = drain(&mut mix);
        let n: usize = d
            .streams
            .iter()
            .flatten()
            .flatten()
            .filter(|op| matches!(op, Op::Access { .. }))
            .count();
        assert_eq!(n as u64, expected);
        assert_eq!(d.mappings.len(), 1 + 3 + 1);
    }

    #[test]
    fn each_member_stream_is_identical_to_running_it_alone() {
        let cfg = two();
        let mixed = drain(&mut Mix::new(&cfg, 11));
        let mut p = 0;
        for k in 0..3 {
            let alone = drain(cfg.members[k].build(member_seed(11, k)).as_mut());
            for (q, threads) in alone.streams.iter().enumerate() {
                assert_eq!(&mixed.streams[p + q], threads, "member {k} process {q}");
            }
            p += alone.streams.len();
        }
        assert_eq!(p, mixed.streams.len());
        // Member 0 is the workload run alone with the mix's own seed.
        let gups_alone = drain(cfg.members[0].build(11).as_mut());
        assert_eq!(mixed.streams[0], gups_alone.streams[0]);
    }

    #[test]
    fn identical_members_draw_different_streams() {
        let g = WorkloadConfig::Gups(GupsConfig {
            footprint_mib: 4,
            nr_updates: 5_000,
            ..GupsConfig::default()
        });
        let cfg = MixConfig {
            members: vec![g.clone(), g],
            scale: 1.0,
        };
        let d = drain(&mut Mix::new(&cfg, 1));
        assert_ne!(d.streams[0], d.streams[1]);
    }

    #[test]
    fn scale_multiplies_every_member_scale() {
        let mut cfg = MixConfig::default();
        let full: u64 = Mix::new(&cfg, 0).shape().footprint_bytes;
        assert!(
            (4u64 << 30..(4u64 << 30) + (256 << 20)).contains(&full),
            "{full}"
        );
        cfg.scale = 0.5;
        let half = Mix::new(&cfg, 0).shape().footprint_bytes as f64;
        assert!((half / full as f64 - 0.5).abs() < 0.01);
        assert_eq!(scale_of(&cfg.scaled_member(1).unwrap()), Some(0.125));
    }

    #[test]
    fn parses_nested_members_and_validate_names_the_field() {
        let cfg: WorkloadConfig = serde_json::from_str(
            r#"{"name": "mix", "members": [{"name": "gups", "footprint_mib": 64}, {"name": "pmbench"}]}"#,
        )
        .unwrap();
        cfg.validate().unwrap();
        let e = serde_json::from_str::<WorkloadConfig>(
            r#"{"name": "mix", "members": [{"name": "gups", "typo": 1}]}"#,
        );
        assert!(e.is_err());
        let bad = |f: &dyn Fn(&mut MixConfig), field: &str| {
            let mut c = MixConfig::default();
            f(&mut c);
            let e = c.validate().unwrap_err();
            assert!(e.to_string().contains(field), "{e:?} should name {field}");
        };
        bad(&|c| c.members.clear(), "mix.members");
        bad(&|c| c.scale = 0.0, "mix.scale");
        bad(
            &|c| {
                if let WorkloadConfig::Gups(g) = &mut c.members[0] {
                    g.hot_fraction = 2.0;
                }
            },
            "mix.members[0]: gups.hot_fraction",
        );
        bad(&|c| c.scale = 100_000.0, "mix.scale");
        MixConfig::default().validate().unwrap();
    }

    /// A mix restricts itself when every member can, each member keeping exactly the
    /// regions the run keeps for its own (shifted) process ids, with the law of the
    /// filtered stream, a member of several processes included; one member that
    /// cannot makes the mix decline, so the run filters it.
    #[test]
    fn members_restrict_themselves_with_their_process_ids() {
        let gups = |footprint_mib: u64| {
            WorkloadConfig::Gups(GupsConfig {
                footprint_mib,
                nr_updates: 400_000,
                ..GupsConfig::default()
            })
        };
        let cfg = MixConfig {
            members: vec![
                gups(64),
                WorkloadConfig::Pmbench(PmbenchConfig {
                    footprint_mib: 64,
                    nr_accesses: 800_000,
                    ..PmbenchConfig::default()
                }),
                gups(96),
            ],
            scale: 1.0,
        };
        let sampler = RegionSampler::new(tierkit_core::SpaceScale::new(0.25), 9);
        crate::testutil::check_restricted(&|| Box::new(Mix::new(&cfg, 5)), &sampler, 0.03);
        // A member of several processes (the ladder, since 2026-11-28) keeps the
        // regions of each of its processes, shifted by the mix.
        let with_ladder = MixConfig {
            members: vec![
                gups(64),
                WorkloadConfig::PmbenchLadder(crate::PmbenchLadderConfig {
                    nr_processes: 3,
                    process_footprint_mib: 32,
                    nr_accesses: 1_200_000,
                    ..Default::default()
                }),
            ],
            scale: 1.0,
        };
        crate::testutil::check_restricted(&|| Box::new(Mix::new(&with_ladder, 5)), &sampler, 0.03);
        // A member that generates every access (XSBench) makes the mix decline.
        let mut declining = two();
        declining.members[1] = WorkloadConfig::Xsbench(crate::xsbench::XsbenchConfig {
            n_gridpoints: 2,
            nr_lookups: 10,
            ..Default::default()
        });
        assert!(!Mix::new(&declining, 5).restrict_to(&sampler));
        declining.members.remove(1);
        assert!(Mix::new(&declining, 5).restrict_to(&sampler));
    }
}
