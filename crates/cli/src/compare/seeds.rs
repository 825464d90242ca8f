//! `tierkit compare --seeds`: how much a result moves with the seed alone.
//!
//! A seed draws a workload's stream and, in a sampled run, which 2 MiB regions are
//! simulated (the sampler is salted by it), so one seed is one draw of both. A few per
//! cent between two policies in one cell can be the draw, not the policies: the matrix
//! runs once per seed, each in `OUT/seed-N` (so each resumes on its own and is a full
//! compare directory), and per cell and policy the table gives the slowdown's mean,
//! standard deviation, range and relative spread (max − min over the mean), the
//! fast-access ratio's range and the range of the policy's rank in its cell. The same
//! numbers go to `OUT/seeds.csv` and, as Markdown, to `OUT/seeds.md`.

use super::validate::{csv_num, median, pct};
use super::{run_matrix, CompareArgs, ResultRow, CLAIRVOYANT};
use anyhow::{bail, Result};
use std::collections::BTreeMap;

/// A cell of the matrix: workload, machine, fast-tier size.
type Cell = (String, String, String);

/// One seed's run of a policy in a cell, with its rank there (`None`: a reference).
type SeedRun<'a> = (&'a ResultRow, Option<usize>);

/// One policy in one cell, over every seed.
#[derive(Debug, Clone, PartialEq)]
pub struct SeedSpread {
    /// Workload label.
    pub workload: String,
    /// Machine preset.
    pub machine: String,
    /// Fast-tier size.
    pub ratio: String,
    /// Policy.
    pub policy: String,
    /// `all-fast` or a clairvoyant reference (`oracle`, `oracle-static`): its spread
    /// is shown but it has no rank, which orders the policies under comparison.
    pub reference: bool,
    /// Seeds the policy ran with in this cell.
    pub seeds: usize,
    /// Mean slowdown.
    pub slowdown_mean: f64,
    /// Sample standard deviation of the slowdown (0 with one seed).
    pub slowdown_sd: f64,
    /// Smallest slowdown.
    pub slowdown_min: f64,
    /// Largest slowdown.
    pub slowdown_max: f64,
    /// (max − min) / mean of the slowdown.
    pub slowdown_spread: f64,
    /// Smallest fast-access ratio.
    pub far_min: f64,
    /// Largest fast-access ratio.
    pub far_max: f64,
    /// Best rank in the cell over the seeds (1 = fastest non-reference policy);
    /// `None` for a reference.
    pub rank_min: Option<usize>,
    /// Worst rank.
    pub rank_max: Option<usize>,
}

/// Whether `policy` is a yardstick rather than a policy under comparison (a matrix
/// may name the references itself, so `ResultRow::reference`, "added by compare",
/// does not tell).
fn is_reference(policy: &str) -> bool {
    policy == "all-fast" || CLAIRVOYANT.contains(&policy)
}

/// Rank of each row of one cell and seed that is not a reference: 1 + how many of
/// them were strictly faster (ties share a rank).
fn ranks(rows: &[&ResultRow]) -> BTreeMap<String, usize> {
    let ranked: Vec<&&ResultRow> = rows.iter().filter(|r| !is_reference(&r.policy)).collect();
    ranked
        .iter()
        .map(|r| {
            let faster = ranked.iter().filter(|o| o.slowdown < r.slowdown).count();
            (r.policy.clone(), faster + 1)
        })
        .collect()
}

/// Spread of each (cell, policy) over `runs` (one result set per seed), in cell order
/// and, within a cell, by mean slowdown.
pub fn spreads(runs: &[Vec<ResultRow>]) -> Vec<SeedSpread> {
    let mut by_key: BTreeMap<(Cell, String), Vec<SeedRun>> = BTreeMap::new();
    for rows in runs {
        let mut cells: BTreeMap<Cell, Vec<&ResultRow>> = BTreeMap::new();
        for r in rows {
            let cell = (r.workload.clone(), r.machine.clone(), r.ratio.clone());
            cells.entry(cell).or_default().push(r);
        }
        for (cell, rows) in cells {
            let rank = ranks(&rows);
            for r in rows {
                by_key
                    .entry((cell.clone(), r.policy.clone()))
                    .or_default()
                    .push((r, rank.get(&r.policy).copied()));
            }
        }
    }
    let mut out: Vec<SeedSpread> = by_key
        .into_iter()
        .map(|(((workload, machine, ratio), policy), runs)| {
            let s: Vec<f64> = runs.iter().map(|(r, _)| r.slowdown).collect();
            let n = s.len() as f64;
            let mean = s.iter().sum::<f64>() / n;
            let sd = if s.len() > 1 {
                (s.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
            } else {
                0.0
            };
            let (lo, hi) = min_max(s.iter().copied());
            let (far_min, far_max) = min_max(runs.iter().map(|(r, _)| r.fast_access_ratio));
            let rank: Vec<usize> = runs.iter().filter_map(|(_, k)| *k).collect();
            let reference = is_reference(&policy);
            SeedSpread {
                workload,
                machine,
                ratio,
                policy,
                reference,
                seeds: s.len(),
                slowdown_mean: mean,
                slowdown_sd: sd,
                slowdown_min: lo,
                slowdown_max: hi,
                slowdown_spread: if mean > 0.0 {
                    (hi - lo) / mean
                } else {
                    f64::NAN
                },
                far_min,
                far_max,
                rank_min: rank.iter().min().copied(),
                rank_max: rank.iter().max().copied(),
            }
        })
        .collect();
    out.sort_by(|a, b| {
        (&a.workload, &a.machine, &a.ratio)
            .cmp(&(&b.workload, &b.machine, &b.ratio))
            .then(a.slowdown_mean.total_cmp(&b.slowdown_mean))
            .then(a.policy.cmp(&b.policy))
    });
    out
}

/// The smallest and largest of `v` (infinities when empty), for a spread over seeds.
pub(crate) fn min_max(v: impl Iterator<Item = f64>) -> (f64, f64) {
    v.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
        (lo.min(x), hi.max(x))
    })
}

fn rank_range(s: &SeedSpread) -> String {
    match (s.rank_min, s.rank_max) {
        (Some(a), Some(b)) if a == b => a.to_string(),
        (Some(a), Some(b)) => format!("{a}–{b}"),
        _ => "—".into(),
    }
}

/// Per policy over the matrix: the median and largest spread of its slowdown, the
/// cell of the largest, and in how many cells its rank moved with the seed.
pub fn markdown_by_policy(spreads: &[SeedSpread]) -> String {
    let mut by_policy: BTreeMap<&str, Vec<&SeedSpread>> = BTreeMap::new();
    for s in spreads.iter().filter(|s| s.policy != "all-fast") {
        by_policy.entry(&s.policy).or_default().push(s);
    }
    let mut md = String::from(
        "| policy | cells | median spread of slowdown | largest spread | in cell | cells where its rank moves |\n|---|---:|---:|---:|---|---:|\n",
    );
    for (policy, cells) in by_policy {
        let n = cells.len();
        let median = median(cells.iter().map(|s| s.slowdown_spread).collect());
        let widest = cells
            .iter()
            .max_by(|a, b| a.slowdown_spread.total_cmp(&b.slowdown_spread))
            .expect("a policy has a cell");
        let moved = cells.iter().filter(|s| s.rank_min != s.rank_max).count();
        md.push_str(&format!(
            "| {policy} | {n} | {} | {} | {} {} {} | {} |\n",
            pct(median),
            pct(widest.slowdown_spread),
            widest.workload,
            widest.machine,
            widest.ratio,
            if cells[0].reference {
                "—".to_string()
            } else {
                moved.to_string()
            }
        ));
    }
    md
}

/// One table per cell: every policy's slowdown over the seeds, by mean.
pub fn markdown_by_cell(spreads: &[SeedSpread]) -> String {
    let mut md = String::new();
    let mut cell: Option<Cell> = None;
    for s in spreads {
        let this = (s.workload.clone(), s.machine.clone(), s.ratio.clone());
        if cell.as_ref() != Some(&this) {
            md.push_str(&format!(
                "\n{}, {} {}:\n\n| policy | seeds | slowdown mean | sd | min | max | spread | fast-access ratio | rank |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
                s.workload, s.machine, s.ratio
            ));
            cell = Some(this);
        }
        md.push_str(&format!(
            "| {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {} | {:.3}–{:.3} | {} |\n",
            s.policy,
            s.seeds,
            s.slowdown_mean,
            s.slowdown_sd,
            s.slowdown_min,
            s.slowdown_max,
            pct(s.slowdown_spread),
            s.far_min,
            s.far_max,
            rank_range(s)
        ));
    }
    md
}

fn csv(spreads: &[SeedSpread]) -> String {
    let mut s = String::from(
        "workload,machine,ratio,policy,reference,seeds,slowdown_mean,slowdown_sd,slowdown_min,slowdown_max,slowdown_spread,far_min,far_max,rank_min,rank_max\n",
    );
    let f = csv_num;
    let k = |x: Option<usize>| x.map_or("NA".to_string(), |v| v.to_string());
    for p in spreads {
        s.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
            p.workload,
            p.machine,
            p.ratio,
            p.policy,
            p.reference,
            p.seeds,
            f(p.slowdown_mean),
            f(p.slowdown_sd),
            f(p.slowdown_min),
            f(p.slowdown_max),
            f(p.slowdown_spread),
            f(p.far_min),
            f(p.far_max),
            k(p.rank_min),
            k(p.rank_max)
        ));
    }
    s
}

/// Check `seeds`: at least two, no repeats.
pub fn check_seeds(seeds: &[u64]) -> Result<()> {
    if seeds.len() < 2 {
        bail!(
            "--seeds needs at least two seeds to show a spread (e.g. --seeds 42,43,44); got {}",
            seeds.len()
        );
    }
    let mut seen = std::collections::BTreeSet::new();
    for s in seeds {
        if !seen.insert(s) {
            bail!("--seeds: seed {s} is given twice; give distinct seeds (e.g. --seeds 42,43,44)");
        }
    }
    Ok(())
}

/// Run the matrix of `args` once per seed; write `seeds.csv` and `seeds.md` in
/// `args.out` and return the spreads and the per-policy Markdown table.
pub fn sweep_seeds(args: &CompareArgs, seeds: &[u64]) -> Result<(Vec<SeedSpread>, String)> {
    check_seeds(seeds)?;
    if args.seed.is_some() {
        bail!("--seeds runs one matrix per seed; drop --seed");
    }
    // An OUT holding only seed-N compare directories copied in (to reuse a suite's
    // run as one seed) is the sweep's own.
    super::prepare_out_dir(
        &args.out,
        args.force || crate::output::only_seed_dirs(&args.out, super::OUT_MARKER),
    )?;
    let mut runs = Vec::with_capacity(seeds.len());
    for &seed in seeds {
        let mut a = args.clone();
        a.seed = Some(seed);
        a.out = args.out.join(format!("seed-{seed}"));
        eprintln!("seeds: running the matrix with seed {seed}");
        runs.push(run_matrix(&a)?.0);
    }
    let all = spreads(&runs);
    let list = seeds
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let by_policy = markdown_by_policy(&all);
    let md = format!(
        "Seeds {list}: each cell's slowdown over the seeds (spread = (max − min) / mean; rank 1 = the cell's fastest policy that is not a reference). Each seed's runs are in seed-N/.\n\n{by_policy}{}",
        markdown_by_cell(&all)
    );
    std::fs::write(args.out.join("seeds.csv"), csv(&all))?;
    std::fs::write(args.out.join("seeds.md"), &md)?;
    Ok((all, by_policy))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(policy: &str, slowdown: f64, far: f64) -> ResultRow {
        ResultRow {
            workload: "gups".into(),
            machine: "cxl".into(),
            ratio: "1:8".into(),
            policy: policy.into(),
            slowdown,
            fast_access_ratio: far,
            ..Default::default()
        }
    }

    #[test]
    fn spread_is_the_range_over_the_mean_and_ranks_follow_each_seed() {
        let runs = vec![
            vec![
                row("all-fast", 1.0, 1.0),
                row("oracle", 1.5, 0.8),
                row("tpp", 2.0, 0.5),
                row("pet", 2.2, 0.4),
            ],
            vec![
                row("all-fast", 1.0, 1.0),
                row("oracle", 1.5, 0.8),
                row("tpp", 2.4, 0.45),
                row("pet", 2.2, 0.4),
            ],
        ];
        let s = spreads(&runs);
        let get = |p: &str| s.iter().find(|x| x.policy == p).unwrap();
        let tpp = get("tpp");
        assert_eq!(tpp.seeds, 2);
        assert!((tpp.slowdown_mean - 2.2).abs() < 1e-12);
        assert!((tpp.slowdown_spread - 0.4 / 2.2).abs() < 1e-12);
        assert!((tpp.slowdown_sd - 0.08f64.sqrt()).abs() < 1e-12);
        assert_eq!((tpp.far_min, tpp.far_max), (0.45, 0.5));
        assert_eq!((tpp.rank_min, tpp.rank_max), (Some(1), Some(2)));
        let pet = get("pet");
        assert_eq!(pet.slowdown_spread, 0.0);
        assert_eq!((pet.rank_min, pet.rank_max), (Some(1), Some(2)));
        assert_eq!(get("all-fast").rank_min, None, "a reference has no rank");
        assert_eq!(get("oracle").rank_max, None, "nor has a clairvoyant one");
        let md = markdown_by_cell(&s);
        assert!(
            md.contains("| tpp | 2 | 2.200 | 0.283 | 2.000 | 2.400 | 18.18% | 0.450–0.500 | 1–2 |"),
            "{md}"
        );
        let by_policy = markdown_by_policy(&s);
        assert!(
            by_policy.contains("| tpp | 1 | 18.18% | 18.18% | gups cxl 1:8 | 1 |"),
            "{by_policy}"
        );
        assert!(
            !by_policy.contains("| all-fast |"),
            "all-fast is the reference"
        );
        assert!(
            by_policy.contains("| oracle | 1 | 0.00% | 0.00% | gups cxl 1:8 | — |"),
            "{by_policy}"
        );
    }

    #[test]
    fn tied_policies_share_a_rank() {
        let runs = vec![vec![
            row("a", 1.5, 0.5),
            row("b", 1.5, 0.5),
            row("c", 2.0, 0.3),
        ]];
        let s = spreads(&runs);
        let rank = |p: &str| s.iter().find(|x| x.policy == p).unwrap().rank_min;
        assert_eq!(
            (rank("a"), rank("b"), rank("c")),
            (Some(1), Some(1), Some(3))
        );
    }

    #[test]
    fn seeds_must_be_two_or_more_and_distinct() {
        assert!(check_seeds(&[42])
            .unwrap_err()
            .to_string()
            .contains("at least two"));
        assert!(check_seeds(&[42, 43, 42])
            .unwrap_err()
            .to_string()
            .contains("given twice"));
        assert!(check_seeds(&[42, 43]).is_ok());
    }
}
