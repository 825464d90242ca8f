//! `tierkit claims --seeds`: whether a claim's verdict survives another draw.
//!
//! A seed draws each workload's stream and, in a sampled run, which 2 MiB regions are
//! simulated, so a verdict judged on one seed can rest on a difference of a per cent
//! that another draw undoes (docs/compare.md, "Seeds"). The claims are judged once per
//! seed, each seed a whole `tierkit claims` directory in `OUT/seed-N` (resumable on its
//! own), and `OUT/claims-seeds.md` / `claims-seeds.json` give per claim its verdict and
//! gain in every seed and the cells whose direction moves with the seed.

use super::{prepare_out, run, select, ClaimFile, ClaimsArgs, Judged, Verdict, OUT_MARKER};
use crate::compare::seeds::{check_seeds, min_max};
use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::fmt::Write as _;

/// One seed's judgement of a claim.
#[derive(Debug, Clone, Serialize)]
pub struct SeedVerdict {
    /// The seed of every run.
    pub seed: u64,
    /// The verdict on that seed.
    pub verdict: Verdict,
    /// The aggregate gain on that seed (geometric mean of the cells).
    pub gain: Option<f64>,
}

/// One cell of a claim over the seeds.
#[derive(Debug, Clone, Serialize)]
pub struct CellOverSeeds {
    /// Workload label, machine and fast-tier size.
    pub cell: String,
    /// Seeds the cell was judged on.
    pub seeds: usize,
    /// Smallest gain over the seeds.
    pub gain_min: f64,
    /// Largest gain.
    pub gain_max: f64,
    /// On how many seeds the claim's direction holds in the cell.
    pub holds_in: usize,
}

/// A claim judged on every seed.
#[derive(Debug, Clone, Serialize)]
pub struct SeedJudged {
    /// Paper.
    pub paper: String,
    /// Claim id.
    pub id: String,
    /// A headline comparison.
    pub headline: bool,
    /// Each seed's verdict, in the order the seeds were given.
    pub by_seed: Vec<SeedVerdict>,
    /// Every cell judged on some seed, in the order the first seed judged them.
    pub cells: Vec<CellOverSeeds>,
}

impl SeedJudged {
    /// Whether every seed gave the same verdict.
    pub fn stable(&self) -> bool {
        self.by_seed
            .windows(2)
            .all(|w| w[0].verdict == w[1].verdict)
    }

    /// On how many seeds the direction holds (reproduced or partly).
    fn in_direction(&self) -> usize {
        self.by_seed
            .iter()
            .filter(|s| matches!(s.verdict, Verdict::Reproduced | Verdict::Partly))
            .count()
    }
}

/// Combine each seed's judged claims, claim by claim (`per_seed` in seed order, each
/// judging the same claims).
pub fn combine(per_seed: &[(u64, Vec<Judged>)]) -> Vec<SeedJudged> {
    let Some((_, first)) = per_seed.first() else {
        return Vec::new();
    };
    first
        .iter()
        .map(|j| {
            let mine: Vec<(u64, &Judged)> = per_seed
                .iter()
                .filter_map(|(seed, all)| {
                    all.iter()
                        .find(|o| o.paper == j.paper && o.id == j.id)
                        .map(|o| (*seed, o))
                })
                .collect();
            let mut cells: Vec<CellOverSeeds> = Vec::new();
            for (_, o) in &mine {
                for c in &o.cells {
                    let i = match cells.iter().position(|x| x.cell == c.cell) {
                        Some(i) => i,
                        None => {
                            cells.push(CellOverSeeds {
                                cell: c.cell.clone(),
                                seeds: 0,
                                gain_min: f64::INFINITY,
                                gain_max: f64::NEG_INFINITY,
                                holds_in: 0,
                            });
                            cells.len() - 1
                        }
                    };
                    let x = &mut cells[i];
                    x.seeds += 1;
                    x.gain_min = x.gain_min.min(c.gain);
                    x.gain_max = x.gain_max.max(c.gain);
                    x.holds_in += usize::from(c.holds);
                }
            }
            SeedJudged {
                paper: j.paper.clone(),
                id: j.id.clone(),
                headline: j.headline,
                by_seed: mine
                    .iter()
                    .map(|(seed, o)| SeedVerdict {
                        seed: *seed,
                        verdict: o.verdict,
                        gain: o.gain,
                    })
                    .collect(),
                cells,
            }
        })
        .collect()
}

fn gain_range(lo: f64, hi: f64) -> String {
    if (hi - lo).abs() < 0.0005 {
        super::fmt_gain(lo)
    } else {
        format!("{}–{}", super::fmt_gain(lo), super::fmt_gain(hi))
    }
}

/// The claims over the seeds as Markdown: a summary per paper, then a table per paper
/// with each claim's verdict and gain by seed and the cells whose direction moves.
pub fn markdown(files: &[ClaimFile], judged: &[SeedJudged], seeds: &[u64], smoke: bool) -> String {
    let list = seeds
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let n = seeds.len();
    let mut s = format!(
        "# Paper claims over seeds\n\nGenerated by `tierkit claims --seeds`. Seeds {list}: a seed draws each \
         workload's stream and, in a sampled run, which regions are simulated. Each seed's runs, \
         claims.md and claims.json are in seed-N/. A verdict that moves with the seed rests on a \
         difference one draw can undo; a cell \"moves\" when the claim's direction holds there on \
         some seeds and not on others.\n\n"
    );
    if smoke {
        s.push_str("**Smoke run** (`--smoke`): runs cut to a few hundred thousand accesses; the verdicts below test the pipeline, not the papers.\n\n");
    }
    s.push_str("| paper | claims judged | same verdict on every seed | headline comparisons in direction on every seed | on some seeds only | on none |\n|---|---:|---:|---:|---:|---:|\n");
    for f in files {
        let mine: Vec<&SeedJudged> = judged.iter().filter(|j| j.paper == f.paper).collect();
        if mine.is_empty() {
            continue;
        }
        let heads: Vec<&&SeedJudged> = mine
            .iter()
            .filter(|j| {
                j.headline
                    && !j
                        .by_seed
                        .iter()
                        .all(|v| v.verdict == Verdict::CannotBeTested)
            })
            .collect();
        let every = heads.iter().filter(|j| j.in_direction() == n).count();
        let none = heads.iter().filter(|j| j.in_direction() == 0).count();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} of {} | {} | {} |",
            f.title,
            mine.len(),
            mine.iter().filter(|j| j.stable()).count(),
            every,
            heads.len(),
            heads.len() - every - none,
            none
        );
    }
    for f in files {
        let mine: Vec<&SeedJudged> = judged.iter().filter(|j| j.paper == f.paper).collect();
        if mine.is_empty() {
            continue;
        }
        let _ = write!(
            s,
            "\n## {}\n\n| claim | verdict by seed | gain by seed | cells whose direction moves with the seed |\n|---|---|---|---|\n",
            f.title
        );
        for j in mine {
            let verdicts = if j.stable() {
                format!(
                    "{} on all {n}",
                    j.by_seed.first().map_or("—", |v| v.verdict.text())
                )
            } else {
                j.by_seed
                    .iter()
                    .map(|v| format!("{}: {}", v.seed, v.verdict.text()))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let gains: Vec<f64> = j.by_seed.iter().filter_map(|v| v.gain).collect();
            let gain = if gains.is_empty() {
                "—".to_string()
            } else {
                let (lo, hi) = min_max(gains.iter().copied());
                gain_range(lo, hi)
            };
            let moving: Vec<String> = j
                .cells
                .iter()
                .filter(|c| c.holds_in > 0 && c.holds_in < c.seeds)
                .map(|c| {
                    format!(
                        "{} {} (holds on {} of {})",
                        c.cell,
                        gain_range(c.gain_min, c.gain_max),
                        c.holds_in,
                        c.seeds
                    )
                })
                .collect();
            let moving = if moving.is_empty() {
                if j.cells.is_empty() {
                    "—".to_string()
                } else {
                    format!("none of {}", j.cells.len())
                }
            } else {
                moving.join("; ")
            };
            let _ = writeln!(
                s,
                "| **{}**{} | {verdicts} | {gain} | {moving} |",
                j.id,
                if j.headline { " (headline)" } else { "" }
            );
        }
    }
    s
}

/// Judge the claims of `args` once per seed of `args.seeds`, each in `OUT/seed-N`;
/// write `claims-seeds.md` and `claims-seeds.json` in `OUT` and return the claims over
/// the seeds and the Markdown.
pub fn run_seeds(args: &ClaimsArgs) -> Result<(Vec<SeedJudged>, String)> {
    check_seeds(&args.seeds)?;
    if args.write_docs.is_some() {
        bail!("--seeds writes its tables into --out (claims-seeds.md); the docs' tables are one seed's: drop --write-docs");
    }
    let files = super::builtin()?;
    // Bad papers or claim ids fail before any directory is made.
    select(args, &files)?;
    prepare_out(
        &args.out,
        args.force || crate::output::only_seed_dirs(&args.out, OUT_MARKER),
    )?;
    let mut per_seed = Vec::with_capacity(args.seeds.len());
    for &seed in &args.seeds {
        let one = ClaimsArgs {
            seeds: Vec::new(),
            seed: Some(seed),
            out: args.out.join(format!("seed-{seed}")),
            write_docs: None,
            ..args.clone()
        };
        eprintln!("claims: seed {seed} in {}", one.out.display());
        let (judged, _) = run(&one).with_context(|| format!("seed {seed}"))?;
        per_seed.push((seed, judged));
    }
    let judged = combine(&per_seed);
    let md = markdown(&files, &judged, &args.seeds, args.smoke);
    std::fs::write(args.out.join("claims-seeds.md"), &md)?;
    std::fs::write(
        args.out.join("claims-seeds.json"),
        serde_json::to_string_pretty(&judged)? + "\n",
    )?;
    Ok((judged, md))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claims::Cell;

    fn judged(id: &str, verdict: Verdict, gains: &[(&str, f64, bool)]) -> Judged {
        Judged {
            paper: "freqtier".into(),
            id: id.into(),
            statement: String::new(),
            source: String::new(),
            headline: true,
            verdict,
            cells: gains
                .iter()
                .map(|&(cell, gain, holds)| Cell {
                    cell: cell.into(),
                    policy_value: 1.0,
                    baseline_value: gain,
                    gain,
                    machine_seconds: 300.0,
                    holds,
                })
                .collect(),
            gain: gains.first().map(|g| g.1),
            measured: String::new(),
            paper_gain: None,
            reason: None,
            direction_on_long_runs: None,
        }
    }

    #[test]
    fn verdicts_and_cells_are_gathered_per_claim_over_the_seeds() {
        let per_seed = vec![
            (
                42,
                vec![
                    judged(
                        "a",
                        Verdict::NotReproduced,
                        &[("x cxl 1:32", 1.002, false), ("x cxl 1:8", 0.95, false)],
                    ),
                    judged("b", Verdict::Reproduced, &[("y cxl 1:8", 1.2, true)]),
                ],
            ),
            (
                43,
                vec![
                    judged(
                        "a",
                        Verdict::Partly,
                        &[("x cxl 1:32", 1.04, true), ("x cxl 1:8", 0.97, false)],
                    ),
                    judged("b", Verdict::Reproduced, &[("y cxl 1:8", 1.25, true)]),
                ],
            ),
        ];
        let all = combine(&per_seed);
        assert_eq!(all.len(), 2);
        let a = &all[0];
        assert!(!a.stable());
        assert_eq!(a.in_direction(), 1);
        assert_eq!(a.cells.len(), 2);
        assert_eq!(a.cells[0].cell, "x cxl 1:32");
        assert_eq!((a.cells[0].gain_min, a.cells[0].gain_max), (1.002, 1.04));
        assert_eq!((a.cells[0].holds_in, a.cells[0].seeds), (1, 2));
        assert_eq!(a.cells[1].holds_in, 0);
        assert!(all[1].stable());

        let files = vec![ClaimFile {
            paper: "freqtier".into(),
            title: "FreqTier".into(),
            matrices: Default::default(),
            claims: Vec::new(),
        }];
        let md = markdown(&files, &all, &[42, 43], false);
        assert!(
            md.contains("| FreqTier | 2 | 1 | 1 of 2 | 1 | 0 |"),
            "one headline holds on both seeds, one on one: {md}"
        );
        assert!(
            md.contains("| **a** (headline) | 42: not reproduced, 43: partly |"),
            "{md}"
        );
        assert!(
            md.contains("x cxl 1:32 1.002×–1.040× (holds on 1 of 2) |"),
            "only the cell whose direction moved is listed: {md}"
        );
        assert!(
            md.contains("| **b** (headline) | reproduced on all 2 | 1.200×–1.250× | none of 1 |"),
            "{md}"
        );
    }
}
