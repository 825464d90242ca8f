//! Paper claims as rerunnable experiments (`tierkit claims`).
//!
//! Each paper has one claim file (`crates/cli/claims/<paper>.toml`, built into the
//! binary): the matrices to run (a built-in suite or an inline `compare` matrix) and
//! its claims, each naming the matrix, the policy and the baseline it compares, the
//! metric, what the paper reports and what counts as reproduced. Claims of one paper
//! share its matrices, as a paper's figures share its runs, so each run is done once.
//!
//! `tierkit claims` runs the matrices through `compare` (parallel, resumable: a rerun
//! into the same `--out` reuses finished runs), judges every claim from the results
//! and writes `claims.md` (the summary, per paper) and `claims.json`; `--write-docs`
//! puts the tables into `docs/claims.md` and each policy page, between the markers
//! `<!-- claims:begin -->` and `<!-- claims:end -->`, so no claims table is typed by
//! hand.

use crate::compare::{self, CompareArgs, ResultRow};
use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::ops::Range;
use std::path::{Path, PathBuf};

pub mod seeds;

/// The built-in claim files, one per paper, in the order reports list them.
pub const FILES: &[(&str, &str)] = &[
    ("chrono", include_str!("../../claims/chrono.toml")),
    ("memtis", include_str!("../../claims/memtis.toml")),
    ("freqtier", include_str!("../../claims/freqtier.toml")),
    ("multiclock", include_str!("../../claims/multiclock.toml")),
    ("pet", include_str!("../../claims/pet.toml")),
];

/// Extra settings of `--smoke` for every run: exact (a tiny sampled run would hold
/// too few regions) and stopped after this many accesses.
pub const SMOKE_SETS: &[&str] = &["sim.sample_rate=\"1\"", "sim.max_accesses=200000"];

/// `--smoke` shrinks every workload that has a `scale` setting by this factor, so
/// building it (a graph, a key-value store) and the clairvoyant references' reading
/// of its whole stream take moments.
pub const SMOKE_SCALE: f64 = 1.0 / 64.0;

/// One paper's claim file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClaimFile {
    /// The paper's short name (the policy page's file stem under `docs/policies/`).
    pub paper: String,
    /// The paper as cited.
    pub title: String,
    /// The matrices its claims run, by name.
    #[serde(default)]
    pub matrices: BTreeMap<String, ClaimMatrix>,
    /// The claims.
    #[serde(default)]
    pub claims: Vec<Claim>,
}

/// A matrix: a built-in suite or an inline `compare` matrix (TOML), plus settings
/// applied to every run after the matrix's own.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClaimMatrix {
    /// A built-in suite (`tierkit list suites`).
    #[serde(default)]
    pub suite: Option<String>,
    /// An inline matrix in `tierkit compare --config` syntax.
    #[serde(default)]
    pub toml: Option<String>,
    /// `--set` overrides for every run of the matrix.
    #[serde(default)]
    pub set: Vec<String>,
    /// Policies only (replacing the suite's), to run a suite's cells for fewer systems.
    #[serde(default)]
    pub policies: Option<Vec<String>>,
}

/// Which way a metric is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Better {
    /// Smaller is better (runtime, slowdown, migrations).
    Lower,
    /// Larger is better (fast-access ratio, F1, saving).
    Higher,
}

/// What the paper says the policy does against the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Expect {
    /// The policy is better (gain above 1).
    Better,
    /// Neither is clearly better: the gain is within `tie_within` of 1.
    Tie,
    /// The policy is worse (the paper reports a loss).
    Worse,
}

/// How the cells of a claim are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Aggregate {
    /// Every cell must hold ("on every workload").
    Each,
    /// The geometric mean of the cells' gains ("on average").
    Geomean,
}

/// One claim of a paper.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claim {
    /// Short id, unique within the paper.
    pub id: String,
    /// The claim as the paper makes it.
    pub statement: String,
    /// Where: section and figure.
    pub source: String,
    /// A headline comparison (who beats whom on the paper's main workloads).
    #[serde(default)]
    pub headline: bool,
    /// Why the claim cannot be tested in tierkit; then nothing else is needed.
    #[serde(default)]
    pub untestable: Option<String>,
    /// The matrix it runs on.
    #[serde(default)]
    pub matrix: Option<String>,
    /// The policy the claim is about.
    #[serde(default)]
    pub policy: Option<String>,
    /// What it is compared with.
    #[serde(default)]
    pub baseline: Option<String>,
    /// Workload labels to judge (default: every workload of the matrix).
    #[serde(default)]
    pub workloads: Vec<String>,
    /// Fast-tier sizes to judge (default: all).
    #[serde(default)]
    pub ratios: Vec<String>,
    /// Machines to judge (default: all).
    #[serde(default)]
    pub machines: Vec<String>,
    /// A `results.csv` column, one of [`SUMMARY_METRICS`], or `stat:NAME` for a policy
    /// statistic of the runs' summaries. Default `sim_seconds`.
    #[serde(default = "default_metric")]
    pub metric: String,
    /// Which way the metric is better; default lower.
    #[serde(default = "default_better")]
    pub better: Better,
    /// What the paper reports; default better.
    #[serde(default = "default_expect")]
    pub expect: Expect,
    /// How cells combine; default each.
    #[serde(default = "default_aggregate")]
    pub aggregate: Aggregate,
    /// The paper's gain (baseline over policy for a lower-is-better metric, policy
    /// over baseline otherwise) as `[low, high]`: the magnitude counted as reproduced.
    #[serde(default)]
    pub paper_gain: Option<[f64; 2]>,
    /// For `expect = "tie"`: the largest |gain − 1| that is still a tie (default 0.05).
    #[serde(default)]
    pub tie_within: Option<f64>,
    /// What a rerun showed about a miss and how it was checked (written after the
    /// investigation; shown beside the verdict).
    #[serde(default)]
    pub reason: Option<String>,
}

fn default_metric() -> String {
    "sim_seconds".into()
}
fn default_better() -> Better {
    Better::Lower
}
fn default_expect() -> Expect {
    Expect::Better
}
fn default_aggregate() -> Aggregate {
    Aggregate::Each
}

/// A claim's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Direction and magnitude as the paper says.
    Reproduced,
    /// The direction holds (or holds in some cells) but not the magnitude.
    Partly,
    /// The direction does not hold.
    NotReproduced,
    /// tierkit cannot test it; the claim says why.
    CannotBeTested,
    /// The runs it needs did not finish.
    NoData,
}

impl Verdict {
    fn text(self) -> &'static str {
        match self {
            Verdict::Reproduced => "reproduced",
            Verdict::Partly => "partly",
            Verdict::NotReproduced => "not reproduced",
            Verdict::CannotBeTested => "cannot be tested",
            Verdict::NoData => "no data",
        }
    }
}

/// One judged cell.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// Workload label, machine and fast-tier size.
    pub cell: String,
    /// The policy's metric.
    pub policy_value: f64,
    /// The baseline's.
    pub baseline_value: f64,
    /// The gain (above 1: the policy is better).
    pub gain: f64,
    /// The policy run's simulated runtime, s (how long the policy had to act).
    pub machine_seconds: f64,
    /// Whether the claim's direction holds in this cell (a win, a loss or a tie, as
    /// the paper reports).
    pub holds: bool,
}

/// A judged claim.
#[derive(Debug, Clone, Serialize)]
pub struct Judged {
    /// Paper.
    pub paper: String,
    /// Claim id.
    pub id: String,
    /// The claim.
    pub statement: String,
    /// Section and figure.
    pub source: String,
    /// Headline comparison.
    pub headline: bool,
    /// Verdict.
    pub verdict: Verdict,
    /// The measured cells.
    pub cells: Vec<Cell>,
    /// The aggregate gain (geometric mean of the cells).
    pub gain: Option<f64>,
    /// What was measured, in words, and why the verdict.
    pub measured: String,
    /// The paper's gain range.
    pub paper_gain: Option<[f64; 2]>,
    /// The claim file's reason.
    pub reason: Option<String>,
    /// Whether the direction holds on the cells whose policy run lasted at least
    /// [`LONG_RUN_S`] alone (None: no such cell).
    pub direction_on_long_runs: Option<bool>,
}

/// Parse one claim file and check it: ids unique, every testable claim complete,
/// its matrix declared, its policies in the matrix, its metric known.
pub fn parse(name: &str, text: &str) -> Result<ClaimFile> {
    let f: ClaimFile = toml::from_str(text).map_err(|e| {
        anyhow!(
            "claim file {name}: {}",
            e.to_string()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        )
    })?;
    let mut seen = std::collections::BTreeSet::new();
    for c in &f.claims {
        let at = format!("claim file {name}, claim `{}`", c.id);
        if !seen.insert(c.id.clone()) {
            bail!("{at}: the id is used twice");
        }
        if c.untestable.is_some() {
            continue;
        }
        let m = c
            .matrix
            .as_ref()
            .ok_or_else(|| anyhow!("{at}: give `matrix` (or `untestable` with a reason)"))?;
        if !f.matrices.contains_key(m) {
            bail!(
                "{at}: matrix `{m}` is not declared; declared: {}",
                f.matrices.keys().cloned().collect::<Vec<_>>().join(", ")
            );
        }
        if c.policy.is_none() || c.baseline.is_none() {
            bail!("{at}: give `policy` and `baseline`");
        }
        if !c.metric.starts_with("stat:")
            && !ROW_METRICS.contains(&c.metric.as_str())
            && !SUMMARY_METRICS.contains(&c.metric.as_str())
        {
            bail!(
                "{at}: unknown metric `{}`; valid: {}, {}, or stat:NAME",
                c.metric,
                ROW_METRICS.join(", "),
                SUMMARY_METRICS.join(", ")
            );
        }
        if let Some([lo, hi]) = c.paper_gain {
            if !(lo > 0.0 && lo <= hi) {
                bail!("{at}: paper_gain must be [low, high] with 0 < low <= high");
            }
        }
    }
    Ok(f)
}

/// A gain within this of 1 is a tie: it shows no direction (a deterministic run has
/// no noise, but a 0.1% difference says nothing about who is better).
pub const NEGLIGIBLE: f64 = 0.01;

/// Machine time a policy's run must last for a cell to count as long enough for its
/// policies to act, s: the longest period of most policies here (Chrono's and NUMA
/// balancing's 60 s scans, FreqTier's one-minute windows). The summary counts the
/// headline comparisons whose direction holds on such cells alone.
pub const LONG_RUN_S: f64 = 60.0;

/// Numeric columns of `results.csv` a claim may judge.
pub const ROW_METRICS: &[&str] = &[
    "sim_seconds",
    "slowdown",
    "fast_access_ratio",
    "precision",
    "recall",
    "f1",
    "promoted_pages",
    "demoted_pages",
    "migrated_bytes",
    "migration_traffic_share",
    "pingpong_pages",
    "hint_faults",
    "samples",
    "tiering_cpu_seconds",
    "policy_metadata_bytes",
    "fast_mean_used_pages",
    "fast_saving_vs_first_touch",
];

/// Metrics computed from a run's `summary.json` rather than read from a column.
/// `first_tenth_fast_share`: the mean, over the first tenth of the workload's
/// processes (at least one), of each one's fast-tier share of its resident pages at
/// the end (`processes`; in `pmbench-ladder` the hottest delay classes, 0–4 of 50).
pub const SUMMARY_METRICS: &[&str] = &["first_tenth_fast_share"];

/// `first_tenth_fast_share` of a summary (see [`SUMMARY_METRICS`]); `None` for a run of
/// one process, which lists none.
fn first_tenth_fast_share(summary: &serde_json::Value) -> Option<f64> {
    let procs = summary["processes"].as_array()?;
    let n = procs.len().div_ceil(10);
    if n == 0 {
        return None;
    }
    let share = |p: &serde_json::Value| {
        let resident = p["resident_pages"].as_f64()?;
        Some(p["fast_pages"].as_f64()? / resident.max(1.0))
    };
    let shares: Option<Vec<f64>> = procs[..n].iter().map(share).collect();
    Some(shares?.iter().sum::<f64>() / n as f64)
}

/// Every built-in claim file, parsed.
pub fn builtin() -> Result<Vec<ClaimFile>> {
    FILES.iter().map(|(n, t)| parse(n, t)).collect()
}

/// The compare arguments that run matrix `m` into `out`.
pub fn matrix_args(m: &ClaimMatrix, out: PathBuf, smoke: bool, jobs: usize) -> Result<CompareArgs> {
    let mut sets = m.set.clone();
    let mut args = CompareArgs {
        suite: m.suite.clone(),
        config: m
            .toml
            .as_ref()
            .map(|t| (format!("claims matrix in {}", out.display()), t.clone())),
        policies: m.policies.clone(),
        jobs,
        out,
        force: false,
        progress: false,
        ..CompareArgs::default()
    };
    if smoke {
        sets.extend(SMOKE_SETS.iter().map(|s| s.to_string()));
        // The matrix with each scalable workload shrunk, handed on as a config.
        let (mut spec, title) = compare::resolve_spec(&args)?;
        shrink_for_smoke(&mut spec);
        let text = toml::to_string(&spec).context("a matrix serializes")?;
        args.suite = None;
        args.config = Some((format!("{title} (smoke)"), text));
        args.policies = None;
    }
    args.sets = sets;
    Ok(args)
}

/// Shrink every workload of `spec` that has a `scale` setting by [`SMOKE_SCALE`] (of
/// its own scale, where the matrix sets one).
pub(crate) fn shrink_for_smoke(spec: &mut compare::MatrixSpec) {
    for w in &mut spec.workloads {
        let scalable = tierkit_workloads::WorkloadConfig::default_for(&w.name)
            .and_then(|c| toml::Value::try_from(c).ok())
            .is_some_and(|v| v.get("scale").is_some());
        if scalable {
            let own = w
                .set
                .iter()
                .find_map(|s| s.strip_prefix("workload.scale="))
                .and_then(|v| v.trim().parse::<f64>().ok())
                .unwrap_or(1.0);
            w.set.push(format!("workload.scale={}", own * SMOKE_SCALE));
        }
    }
}

/// Check that every matrix of `f` plans (names registered, settings valid) and that
/// every claim's policies and workloads are in its matrix. `smoke` plans the matrices
/// as `--smoke` runs them: planning builds each workload for its footprint, and a
/// faithful BFS cell's 2^25-vertex graph takes a minute and 6.5 GB to build.
pub fn validate(f: &ClaimFile, smoke: bool) -> Result<()> {
    validate_claims(f, smoke, &[])
}

/// [`validate`] for the claims `only` names (all when empty): only the matrices they
/// read, narrowed as [`run`] narrows them, are planned.
fn validate_claims(f: &ClaimFile, smoke: bool, only: &[String]) -> Result<()> {
    for (name, m) in &f.matrices {
        let readers = readers(f, name, only);
        if !only.is_empty() && readers.is_empty() {
            continue;
        }
        let mut args = matrix_args(m, PathBuf::from("unused"), smoke, 1)?;
        if !only.is_empty() {
            narrow_to(&mut args, &readers);
        }
        let (spec, _) = compare::resolve_spec(&args)
            .with_context(|| format!("claims {}: matrix `{name}`", f.paper))?;
        let runs =
            compare::plan(&spec).with_context(|| format!("claims {}: matrix `{name}`", f.paper))?;
        for c in readers {
            for p in [&c.policy, &c.baseline].into_iter().flatten() {
                if !runs.iter().any(|r| &r.policy == p) {
                    bail!(
                        "claims {}: claim `{}` compares `{p}`, which matrix `{name}` does not run",
                        f.paper,
                        c.id
                    );
                }
            }
            for w in &c.workloads {
                if !runs.iter().any(|r| &r.workload == w) {
                    bail!(
                        "claims {}: claim `{}` judges workload `{w}`, which matrix `{name}` does not run; it runs: {}",
                        f.paper,
                        c.id,
                        labels(&runs)
                    );
                }
            }
        }
    }
    Ok(())
}

/// The claims of `f` that read matrix `name`, of those `only` names (all when empty).
fn readers<'a>(f: &'a ClaimFile, name: &str, only: &[String]) -> Vec<&'a Claim> {
    f.claims
        .iter()
        .filter(|c| c.matrix.as_deref() == Some(name) && asked(only, c))
        .collect()
}

/// Whether claim `c` is among the ids of `--claim` (every claim when none is given).
fn asked(only: &[String], c: &Claim) -> bool {
    only.is_empty() || only.contains(&c.id)
}

fn labels(runs: &[compare::PlannedRun]) -> String {
    let mut l: Vec<&str> = runs.iter().map(|r| r.workload.as_str()).collect();
    l.dedup();
    l.join(", ")
}

/// What `tierkit claims` was asked.
#[derive(Debug, Clone, Default)]
pub struct ClaimsArgs {
    /// Papers to run (all when empty).
    pub papers: Vec<String>,
    /// Claim ids to judge (all when empty). Only the matrices these claims read run,
    /// narrowed to the workloads, fast-tier sizes, machines and policies they compare.
    pub claims: Vec<String>,
    /// Output directory.
    pub out: PathBuf,
    /// Tiny runs: check the pipeline, not the claims.
    pub smoke: bool,
    /// Runs at once.
    pub jobs: usize,
    /// Write `claims.md` into this docs directory and the tables into its policy pages
    /// (with some papers left out, only the run papers' parts of `claims.md`).
    pub write_docs: Option<PathBuf>,
    /// Write into an `--out` that holds files `tierkit claims` did not write.
    pub force: bool,
    /// Judge the claims once per seed ([`seeds::run_seeds`]); empty: once.
    pub seeds: Vec<u64>,
    /// The seed of every run (`None`: each matrix's own).
    pub seed: Option<u64>,
}

impl ClaimsArgs {
    /// Whether claim `c` is one of those asked for.
    fn wants(&self, c: &Claim) -> bool {
        asked(&self.claims, c)
    }
}

/// The claim files `args` asks for, in report order: the named papers (all when none
/// is named), and of them only those holding a claim of `--claim`. Unknown papers and
/// claim ids are errors naming the valid ones.
pub fn select<'a>(args: &ClaimsArgs, files: &'a [ClaimFile]) -> Result<Vec<&'a ClaimFile>> {
    let valid: Vec<&str> = files.iter().map(|f| f.paper.as_str()).collect();
    for p in &args.papers {
        if !valid.contains(&p.as_str()) {
            bail!("unknown paper `{p}`; valid: {}", valid.join(", "));
        }
    }
    let by_paper: Vec<&ClaimFile> = files
        .iter()
        .filter(|f| args.papers.is_empty() || args.papers.contains(&f.paper))
        .collect();
    for id in &args.claims {
        if !by_paper
            .iter()
            .any(|f| f.claims.iter().any(|c| &c.id == id))
        {
            let ids: Vec<String> = by_paper
                .iter()
                .flat_map(|f| f.claims.iter().map(|c| format!("{}:{}", f.paper, c.id)))
                .collect();
            bail!(
                "unknown claim `{id}`{}; valid (paper:claim): {}",
                if args.papers.is_empty() {
                    String::new()
                } else {
                    format!(" in {}", args.papers.join(", "))
                },
                ids.join(", ")
            );
        }
    }
    Ok(by_paper
        .into_iter()
        .filter(|f| f.claims.iter().any(|c| args.wants(c)))
        .collect())
}

/// Narrow `cargs` to what `claims` (all reading its matrix) compare: their policies
/// and baselines (the references run anyway), and their workloads, fast-tier sizes
/// and machines where every claim names some. A claim judged on a narrowed matrix
/// reads the same runs (a run's id is its configuration's hash) as on the whole one.
fn narrow_to(cargs: &mut CompareArgs, claims: &[&Claim]) {
    fn union<'a>(lists: impl Iterator<Item = &'a Vec<String>>) -> Option<Vec<String>> {
        let mut all: Vec<String> = Vec::new();
        for l in lists {
            if l.is_empty() {
                return None;
            }
            for x in l {
                if !all.contains(x) {
                    all.push(x.clone());
                }
            }
        }
        Some(all)
    }
    let mut policies: Vec<String> = Vec::new();
    for p in claims
        .iter()
        .flat_map(|c| [&c.policy, &c.baseline])
        .flatten()
    {
        if !policies.contains(p) {
            policies.push(p.clone());
        }
    }
    if !policies.is_empty() {
        cargs.policies = Some(policies);
    }
    cargs.workloads = union(claims.iter().map(|c| &c.workloads));
    cargs.ratios = union(claims.iter().map(|c| &c.ratios));
    cargs.machines = union(claims.iter().map(|c| &c.machines));
}

/// Run the claims; returns every judged claim and the summary text.
pub fn run(args: &ClaimsArgs) -> Result<(Vec<Judged>, String)> {
    let files = builtin()?;
    let chosen = select(args, &files)?;
    if args.smoke && args.write_docs.is_some() {
        bail!("--smoke runs are too short to judge claims; drop --write-docs");
    }
    if !args.claims.is_empty() && args.write_docs.is_some() {
        bail!("--claim judges some claims only and the docs' tables hold every claim; drop --claim or --write-docs");
    }
    // claims.md summarises every paper: from a subset, only the subset's rows and
    // sections are replaced in it (`splice_summary`).
    let some_papers_left_out = chosen.len() < files.len();
    // Checked before any run: a docs directory it cannot splice into fails now.
    let old_claims_md = match &args.write_docs {
        Some(docs) if some_papers_left_out => {
            let path = docs.join("claims.md");
            let text = std::fs::read_to_string(&path).map_err(|e| {
                anyhow!(
                    "--write-docs with --paper replaces those papers' parts of {}, which cannot be read ({e}); drop --paper to write it whole",
                    path.display()
                )
            })?;
            for f in &chosen {
                paper_spans(&text, f)?;
            }
            Some(text)
        }
        _ => None,
    };
    for f in &chosen {
        validate_claims(f, args.smoke, &args.claims)?;
    }
    prepare_out(&args.out, args.force)?;
    let mut judged = Vec::new();
    let mut failed = Vec::new();
    for f in &chosen {
        let mut results: BTreeMap<String, (Vec<ResultRow>, PathBuf)> = BTreeMap::new();
        for (name, m) in &f.matrices {
            let readers = readers(f, name, &args.claims);
            if readers.is_empty() {
                continue;
            }
            let dir = args.out.join(&f.paper).join(name);
            eprintln!("claims {}: matrix `{name}` in {}", f.paper, dir.display());
            let mut cargs = matrix_args(m, dir.clone(), args.smoke, args.jobs)?;
            cargs.seed = args.seed;
            if !args.claims.is_empty() {
                narrow_to(&mut cargs, &readers);
            }
            // A matrix whose runs partly fail still judges the claims it can.
            let rows = match compare::run_matrix(&cargs) {
                Ok((rows, _, _)) => rows,
                Err(e) => {
                    eprintln!("claims {}: matrix `{name}`: {e:#}", f.paper);
                    failed.push(format!("{}/{name}", f.paper));
                    read_rows(&dir).unwrap_or_default()
                }
            };
            results.insert(name.clone(), (rows, dir));
        }
        for c in f.claims.iter().filter(|c| args.wants(c)) {
            judged.push(judge(f, c, &results));
        }
    }
    let mut summary = summary_md(&files, &judged, args.smoke);
    if !args.claims.is_empty() {
        let at = summary.find("\n\n").map_or(0, |i| i + 2);
        summary.insert_str(
            at,
            &format!(
                "Only the claims asked for (`--claim {}`).\n\n",
                args.claims.join(",")
            ),
        );
    }
    if let Some(seed) = args.seed {
        let at = summary.find("\n\n").map_or(0, |i| i + 2);
        summary.insert_str(at, &format!("Every run with seed {seed}.\n\n"));
    }
    std::fs::write(args.out.join("claims.md"), &summary)?;
    std::fs::write(
        args.out.join("claims.json"),
        serde_json::to_string_pretty(&judged)? + "\n",
    )?;
    if !failed.is_empty() {
        // The tables are written; the exit status still says runs are missing.
        print!("{summary}");
        bail!(
            "runs of {} failed (claims judged from what finished, in {}); rerun to retry them",
            failed.join(", "),
            args.out.join("claims.md").display()
        );
    }
    if let Some(docs) = &args.write_docs {
        let claims_md = match &old_claims_md {
            Some(old) => splice_summary(old, &chosen, &judged)?,
            None => summary.clone(),
        };
        write_docs(docs, &files, &judged, &claims_md)?;
    }
    Ok((judged, summary))
}

/// Marks a directory `tierkit claims` writes into.
const OUT_MARKER: &str = ".tierkit-claims";

/// Create `dir`, or accept it when it is empty or `tierkit claims` wrote it; anything
/// else needs `force` (nothing a user keeps there is overwritten silently).
fn prepare_out(dir: &Path, force: bool) -> Result<()> {
    crate::output::prepare_owned_dir(
        dir,
        force,
        dir.join(OUT_MARKER).exists(),
        "tierkit claims did not write",
        OUT_MARKER,
        "written by tierkit claims: a rerun into this directory reuses finished runs\n",
    )
}

/// The rows a matrix's `results.json` holds (what a partly failed matrix finished).
fn read_rows(dir: &Path) -> Result<Vec<ResultRow>> {
    let text = std::fs::read_to_string(dir.join("results.json"))?;
    Ok(serde_json::from_str(&text)?)
}

/// The value of `metric` in `row` (a run of `dir`).
fn metric_of(row: &ResultRow, metric: &str, dir: &Path) -> Option<f64> {
    let summary = || -> Option<serde_json::Value> {
        let text =
            std::fs::read_to_string(dir.join("runs").join(&row.id).join("summary.json")).ok()?;
        serde_json::from_str(&text).ok()
    };
    if metric == "first_tenth_fast_share" {
        return first_tenth_fast_share(&summary()?);
    }
    if let Some(stat) = metric.strip_prefix("stat:") {
        let v = summary()?;
        return v["policy_stats"]
            .as_array()?
            .iter()
            .find(|p| p[0].as_str() == Some(stat))
            .and_then(|p| p[1].as_f64());
    }
    serde_json::to_value(row).ok()?.get(metric)?.as_f64()
}

/// How much better `p` is than `b` on a metric that is better `better`.
fn gain_of(p: f64, b: f64, better: Better) -> f64 {
    let (num, den) = match better {
        Better::Lower => (b, p),
        Better::Higher => (p, b),
    };
    if num == 0.0 && den == 0.0 {
        1.0
    } else if den == 0.0 {
        f64::INFINITY
    } else {
        num / den
    }
}

fn geomean(xs: &[f64]) -> f64 {
    if xs.iter().any(|x| x.is_infinite()) {
        return f64::INFINITY;
    }
    if xs.contains(&0.0) {
        return 0.0;
    }
    (xs.iter().map(|x| x.ln()).sum::<f64>() / xs.len() as f64).exp()
}

/// Judge one claim from its matrix's results.
pub fn judge(
    f: &ClaimFile,
    c: &Claim,
    results: &BTreeMap<String, (Vec<ResultRow>, PathBuf)>,
) -> Judged {
    let mut j = Judged {
        paper: f.paper.clone(),
        id: c.id.clone(),
        statement: c.statement.clone(),
        source: c.source.clone(),
        headline: c.headline,
        verdict: Verdict::NoData,
        cells: Vec::new(),
        gain: None,
        measured: String::new(),
        paper_gain: c.paper_gain,
        reason: c.reason.clone(),
        direction_on_long_runs: None,
    };
    if let Some(why) = &c.untestable {
        j.verdict = Verdict::CannotBeTested;
        j.measured = why.clone();
        return j;
    }
    let (Some(m), Some(p), Some(b)) = (&c.matrix, &c.policy, &c.baseline) else {
        return j;
    };
    let Some((rows, dir)) = results.get(m) else {
        j.measured = "the matrix was not run".into();
        return j;
    };
    let keep = |r: &ResultRow| {
        (c.workloads.is_empty() || c.workloads.contains(&r.workload))
            && (c.ratios.is_empty() || c.ratios.contains(&r.ratio))
            && (c.machines.is_empty() || c.machines.contains(&r.machine))
    };
    for pr in rows.iter().filter(|r| &r.policy == p && keep(r)) {
        let Some(br) = rows.iter().find(|r| {
            &r.policy == b
                && r.workload == pr.workload
                && r.machine == pr.machine
                && r.ratio == pr.ratio
        }) else {
            continue;
        };
        let (Some(pv), Some(bv)) = (metric_of(pr, &c.metric, dir), metric_of(br, &c.metric, dir))
        else {
            continue;
        };
        j.cells.push(Cell {
            cell: format!("{} {} {}", pr.workload, pr.machine, pr.ratio),
            policy_value: pv,
            baseline_value: bv,
            gain: gain_of(pv, bv, c.better),
            machine_seconds: pr.sim_seconds,
            holds: false,
        });
    }
    if j.cells.is_empty() {
        j.measured = format!("no finished {p}/{b} pair of runs");
        return j;
    }
    let gains: Vec<f64> = j.cells.iter().map(|x| x.gain).collect();
    let g = geomean(&gains);
    j.gain = Some(g);
    let in_range = |x: f64| c.paper_gain.is_none_or(|[lo, hi]| x >= lo && x <= hi);
    let tie = c.tie_within.unwrap_or(0.05);
    let holds = |x: f64| match c.expect {
        Expect::Better => x > 1.0 + NEGLIGIBLE,
        Expect::Worse => x < 1.0 - NEGLIGIBLE,
        Expect::Tie => (x - 1.0).abs() <= tie,
    };
    for x in &mut j.cells {
        x.holds = holds(x.gain);
    }
    let (dir_all, dir_some, mag) = match c.aggregate {
        Aggregate::Each => (
            gains.iter().all(|&x| holds(x)),
            gains.iter().any(|&x| holds(x)),
            gains.iter().all(|&x| in_range(x)),
        ),
        Aggregate::Geomean => (holds(g), holds(g), in_range(g)),
    };
    let long: Vec<f64> = j
        .cells
        .iter()
        .filter(|x| x.machine_seconds >= LONG_RUN_S)
        .map(|x| x.gain)
        .collect();
    // As the verdict reads direction: a tie must hold in every cell (a tie in some
    // cells is no direction), a win or a loss in some, a geomean on the geomean.
    j.direction_on_long_runs = (!long.is_empty()).then(|| match c.aggregate {
        Aggregate::Each if c.expect == Expect::Tie => long.iter().all(|&x| holds(x)),
        Aggregate::Each => long.iter().any(|&x| holds(x)),
        Aggregate::Geomean => holds(geomean(&long)),
    });
    j.verdict = if dir_all && mag {
        Verdict::Reproduced
    } else if dir_some && c.expect != Expect::Tie {
        Verdict::Partly
    } else {
        Verdict::NotReproduced
    };
    let n_hold = gains.iter().filter(|&&x| holds(x)).count();
    let what = match c.expect {
        Expect::Better => format!("{p} better than {b}"),
        Expect::Worse => format!("{p} worse than {b}"),
        Expect::Tie => format!("{p} within {:.0}% of {b}", tie * 100.0),
    };
    let secs = j.cells.iter().map(|x| x.machine_seconds);
    let (lo, hi) = (
        secs.clone().fold(f64::INFINITY, f64::min),
        secs.fold(0.0, f64::max),
    );
    let machine_time = if (hi - lo).abs() < 0.05 * hi {
        format!("{} of machine time", fmt_secs(hi))
    } else {
        format!("{}–{} of machine time", fmt_secs(lo), fmt_secs(hi))
    };
    j.measured = format!(
        "{} gain {}; {what} in {n_hold} of {} cells{}; runs of {machine_time}",
        match c.aggregate {
            Aggregate::Each => "cells' geomean",
            Aggregate::Geomean => "geomean",
        },
        fmt_gain(g),
        gains.len(),
        match (c.paper_gain, mag) {
            (Some(_), true) => ", in the paper's range".to_string(),
            (Some([lo, hi]), false) =>
                format!(", outside the paper's {}–{}", fmt_gain(lo), fmt_gain(hi)),
            (None, _) => String::new(),
        }
    );
    j
}

fn fmt_secs(s: f64) -> String {
    if s >= 100.0 {
        format!("{s:.0} s")
    } else {
        format!("{s:.1} s")
    }
}

fn fmt_gain(g: f64) -> String {
    if g.is_infinite() {
        "∞".into()
    } else {
        format!("{g:.3}×")
    }
}

/// One paper's claims as a Markdown table.
pub fn paper_table(judged: &[Judged], paper: &str) -> String {
    let mut t = String::from(
        "| claim | source | paper | measured (gain per cell) | verdict |\n|---|---|---|---|---|\n",
    );
    for j in judged.iter().filter(|j| j.paper == paper) {
        let cells: Vec<String> = j
            .cells
            .iter()
            .map(|c| format!("{} {}", c.cell, fmt_gain(c.gain)))
            .collect();
        let paper_gain = j.paper_gain.map_or("—".to_string(), |[lo, hi]| {
            format!("{}–{}", fmt_gain(lo), fmt_gain(hi))
        });
        let mut measured = j.measured.clone();
        if !cells.is_empty() {
            let _ = write!(measured, " ({})", cells.join("; "));
        }
        if let Some(r) = &j.reason {
            let _ = write!(measured, ". Why: {r}");
        }
        let _ = writeln!(
            t,
            "| **{}**{}: {} | {} | {} | {} | {} |",
            j.id,
            if j.headline { " (headline)" } else { "" },
            j.statement.replace('|', "\\|"),
            j.source,
            paper_gain,
            measured.replace('|', "\\|"),
            j.verdict.text()
        );
    }
    t
}

/// The summary: per paper, the count of each verdict and the headline share, then
/// each paper's table.
pub fn summary_md(files: &[ClaimFile], judged: &[Judged], smoke: bool) -> String {
    let mut s = String::from("# Paper claims, rerun\n\n");
    s.push_str(
        "Generated by `tierkit claims --out DIR --write-docs docs` from the claim files in \
         `crates/cli/claims/`; do not edit by hand. A gain is how many times better the \
         policy is than the baseline on the claim's metric (baseline over policy for \
         runtime). Reproduced = direction and the paper's magnitude; partly = the \
         direction in some cells or without the magnitude. A gain within 1% of 1 is a \
         tie and shows no direction. Each row says how long the policy's runs lasted \
         in machine time: a policy whose periods are longer than its runs cannot act \
         (docs/compare.md). Every verdict is one seed's (the suites' 42); `tierkit \
         claims --seeds 42,43,44` judges the claims on each of several \
         (docs/compare.md, \"Claims over seeds\").\n\n",
    );
    if smoke {
        s.push_str("**Smoke run** (`--smoke`): runs cut to a few hundred thousand accesses; the verdicts below test the pipeline, not the papers.\n\n");
    }
    s.push_str("| paper | reproduced | partly | not reproduced | cannot be tested | no data | headline comparisons reproduced in direction | of them on runs of at least 60 s alone |\n|---|---|---|---|---|---|---|---|\n");
    let mut all_head = (0, 0, 0);
    for f in files {
        let Some((row, (ok, heads, long))) = summary_row(f, judged) else {
            continue;
        };
        all_head.0 += ok;
        all_head.1 += heads;
        all_head.2 += long;
        s.push_str(&row);
    }
    let _ = write!(s, "\n{}\n\n", headline_line(all_head));
    for f in files {
        if judged.iter().any(|j| j.paper == f.paper) {
            s.push_str(&paper_section(f, judged));
        }
    }
    s
}

/// A paper's row of the summary table (with its newline) and its headline counts:
/// (reproduced in direction, headlines testable, of them on long runs). None when
/// none of its claims was judged.
fn summary_row(f: &ClaimFile, judged: &[Judged]) -> Option<(String, (usize, usize, usize))> {
    let mine: Vec<&Judged> = judged.iter().filter(|j| j.paper == f.paper).collect();
    if mine.is_empty() {
        return None;
    }
    let count = |v: Verdict| mine.iter().filter(|j| j.verdict == v).count();
    let heads: Vec<&&Judged> = mine
        .iter()
        .filter(|j| j.headline && j.verdict != Verdict::CannotBeTested)
        .collect();
    let in_direction: Vec<&&Judged> = heads
        .iter()
        .copied()
        .filter(|j| matches!(j.verdict, Verdict::Reproduced | Verdict::Partly))
        .collect();
    let head_ok = in_direction.len();
    let head_long = in_direction
        .iter()
        .filter(|j| j.direction_on_long_runs == Some(true))
        .count();
    let row = format!(
        "| {} | {} | {} | {} | {} | {} | {} of {} | {} |\n",
        f.title,
        count(Verdict::Reproduced),
        count(Verdict::Partly),
        count(Verdict::NotReproduced),
        count(Verdict::CannotBeTested),
        count(Verdict::NoData),
        head_ok,
        heads.len(),
        head_long
    );
    Some((row, (head_ok, heads.len(), head_long)))
}

/// The sentence under the summary table: headlines (in direction, of, on long runs).
fn headline_line((ok, of, long): (usize, usize, usize)) -> String {
    format!(
        "{HEADLINE_LINE_START} {ok} of {of}; {long} of them also on the cells whose runs lasted \
         at least {LONG_RUN_S} s of machine time alone (the others rest on shorter runs, in \
         which many policies cannot pass one period)."
    )
}

const HEADLINE_LINE_START: &str =
    "Headline comparisons reproduced in direction (fully or in some cells):";

/// A paper's section of `claims.md`, up to the next section.
fn paper_section(f: &ClaimFile, judged: &[Judged]) -> String {
    format!("## {}\n\n{}\n", f.title, paper_table(judged, &f.paper))
}

/// What to do when `docs/claims.md` cannot take one paper's part.
const SPLICE_STALE: &str = "rerun `tierkit claims --write-docs docs` without --paper first";

/// Where `f`'s summary row (with its newline) and section (up to the next one) are in
/// a `claims.md`: what [`splice_summary`] replaces.
fn paper_spans(text: &str, f: &ClaimFile) -> Result<(Range<usize>, Range<usize>)> {
    let Some(row) = text.find(&format!("\n| {} |", f.title)).map(|i| i + 1) else {
        bail!(
            "docs/claims.md has no summary row for {}; {SPLICE_STALE}",
            f.title
        );
    };
    let row_end = text[row..].find('\n').map_or(text.len(), |i| row + i + 1);
    let Some(section) = text.find(&format!("\n## {}\n", f.title)).map(|i| i + 1) else {
        bail!(
            "docs/claims.md has no section for {}; {SPLICE_STALE}",
            f.title
        );
    };
    let section_end = text[section..]
        .find("\n## ")
        .map_or(text.len(), |i| section + i + 1);
    Ok((row..row_end, section..section_end))
}

/// `claims.md` as written by an earlier run of every paper, with the papers judged
/// now (`chosen`) replaced: their summary rows and sections, and the headline
/// sentence recomputed from every row. The other papers' text is kept as it was
/// generated, so a run of one paper updates the docs without rerunning the others.
fn splice_summary(old: &str, chosen: &[&ClaimFile], judged: &[Judged]) -> Result<String> {
    let mut text = old.to_string();
    for f in chosen {
        let Some((row, _)) = summary_row(f, judged) else {
            continue;
        };
        let (row_span, section_span) = paper_spans(&text, f)?;
        // The section lies after the summary table: replaced first, it leaves the
        // row's span in place.
        text.replace_range(section_span, &paper_section(f, judged));
        text.replace_range(row_span, &row);
    }
    // Every paper's counts, from the summary table's rows (columns 7 and 8).
    let mut all = (0usize, 0usize, 0usize);
    let rows = text
        .lines()
        .skip_while(|l| !l.starts_with("|---"))
        .skip(1)
        .take_while(|l| l.starts_with("| "));
    for l in rows {
        let cols: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
        let parsed: Option<(usize, usize, usize)> = (|| {
            let (ok, of) = cols.get(6)?.split_once(" of ")?;
            Some((
                ok.parse().ok()?,
                of.parse().ok()?,
                cols.get(7)?.parse().ok()?,
            ))
        })();
        let Some((ok, of, long)) = parsed else {
            bail!("docs/claims.md: cannot read the summary row `{l}`; {SPLICE_STALE}");
        };
        all = (all.0 + ok, all.1 + of, all.2 + long);
    }
    let Some(at) = text.find(HEADLINE_LINE_START) else {
        bail!("docs/claims.md has no headline sentence; {SPLICE_STALE}");
    };
    let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    text.replace_range(at..end, &headline_line(all));
    Ok(text)
}

const BEGIN: &str = "<!-- claims:begin -->";
const END: &str = "<!-- claims:end -->";

/// Write `claims.md` into `docs` and each judged paper's table into
/// `docs/policies/<paper>.md` between the markers.
fn write_docs(docs: &Path, files: &[ClaimFile], judged: &[Judged], summary: &str) -> Result<()> {
    std::fs::write(docs.join("claims.md"), summary)?;
    for f in files {
        if !judged.iter().any(|j| j.paper == f.paper) {
            continue;
        }
        let page = docs.join("policies").join(format!("{}.md", f.paper));
        let text = std::fs::read_to_string(&page)
            .with_context(|| format!("cannot read {}", page.display()))?;
        let (Some(b), Some(e)) = (text.find(BEGIN), text.find(END)) else {
            bail!(
                "{} has no `{BEGIN}` … `{END}` block to write the claims table into",
                page.display()
            );
        };
        let new = format!(
            "{}{BEGIN}\n<!-- generated by `tierkit claims --write-docs`; edit crates/cli/claims/{}.toml instead -->\n\n{}\n{}",
            &text[..b],
            f.paper,
            paper_table(judged, &f.paper),
            &text[e..]
        );
        std::fs::write(&page, new)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_claim_file_parses_and_its_matrices_plan() {
        let files = builtin().unwrap();
        assert_eq!(files.len(), FILES.len());
        for (f, (name, _)) in files.iter().zip(FILES) {
            assert_eq!(&f.paper, name);
            assert!(!f.claims.is_empty(), "{name} has claims");
            // At smoke scale: the names and matrices are what this checks.
            validate(f, true).unwrap();
            assert!(
                f.claims.iter().any(|c| c.headline),
                "{name} names its headline comparisons"
            );
        }
    }

    /// The generated tables carry each claim file's current words. The claim files are
    /// built into the binary, so a statement or reason edited without rebuilding and
    /// rerunning `--write-docs` left the docs stale once; this catches it.
    #[test]
    fn the_docs_carry_every_claims_current_statement_and_reason() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/claims.md");
        let docs = std::fs::read_to_string(path).unwrap();
        for f in builtin().unwrap() {
            for c in &f.claims {
                assert!(
                    docs.contains(&c.statement.replace('|', "\\|")),
                    "docs/claims.md lacks {}'s statement; rerun `tierkit claims --write-docs docs`",
                    c.id
                );
                if let Some(r) = &c.reason {
                    assert!(
                        docs.contains(&format!("Why: {}", r.replace('|', "\\|"))),
                        "docs/claims.md has a stale reason for {}; rerun `tierkit claims --write-docs docs`",
                        c.id
                    );
                }
            }
        }
    }

    #[test]
    fn a_bad_claim_is_a_clear_error() {
        let base = "paper = \"p\"\ntitle = \"P\"\n[matrices.m]\nsuite = \"chrono\"\n";
        let e = parse("p", &format!("{base}[[claims]]\nid = \"a\"\nstatement = \"s\"\nsource = \"§1\"\nmatrix = \"nope\"\npolicy = \"tpp\"\nbaseline = \"first-touch\"\n"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("matrix `nope` is not declared; declared: m"),
            "{e}"
        );
        let e = parse("p", &format!("{base}[[claims]]\nid = \"a\"\nstatement = \"s\"\nsource = \"§1\"\nmatrix = \"m\"\npolicy = \"tpp\"\nbaseline = \"first-touch\"\nmetric = \"speed\"\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown metric `speed`"), "{e}");
        let f = parse("p", &format!("{base}[[claims]]\nid = \"a\"\nstatement = \"s\"\nsource = \"§1\"\nmatrix = \"m\"\npolicy = \"hemem\"\nbaseline = \"first-touch\"\n")).unwrap();
        // At smoke scale: the same check, without building the chrono suite's
        // 2^25-vertex graph (a minute and 6.5 GB) for the footprint.
        let e = validate(&f, true).unwrap_err().to_string();
        assert!(
            e.contains("compares `hemem`, which matrix `m` does not run"),
            "{e}"
        );
    }

    /// A claim file with no claims, for judging hand-made claims.
    fn bare_file() -> ClaimFile {
        ClaimFile {
            paper: "p".into(),
            title: "P".into(),
            matrices: BTreeMap::new(),
            claims: vec![],
        }
    }

    /// `rows` as the results of matrix `m`, the one `claim` names.
    fn results(rows: Vec<ResultRow>) -> BTreeMap<String, (Vec<ResultRow>, PathBuf)> {
        BTreeMap::from([("m".to_string(), (rows, PathBuf::from("/nonexistent")))])
    }

    fn row(policy: &str, workload: &str, secs: f64) -> ResultRow {
        ResultRow {
            id: format!("{policy}-{workload}"),
            workload: workload.into(),
            machine: "cxl".into(),
            ratio: "1:8".into(),
            policy: policy.into(),
            sim_seconds: secs,
            ..ResultRow::default()
        }
    }

    fn claim(expect: Expect, aggregate: Aggregate, paper_gain: Option<[f64; 2]>) -> Claim {
        Claim {
            id: "c".into(),
            statement: "s".into(),
            source: "§1".into(),
            headline: true,
            untestable: None,
            matrix: Some("m".into()),
            policy: Some("a".into()),
            baseline: Some("b".into()),
            workloads: vec![],
            ratios: vec![],
            machines: vec![],
            metric: "sim_seconds".into(),
            better: Better::Lower,
            expect,
            aggregate,
            paper_gain,
            tie_within: None,
            reason: None,
        }
    }

    #[test]
    fn claims_narrow_their_matrix_to_what_they_compare() {
        let mut one = claim(Expect::Better, Aggregate::Each, None);
        one.workloads = vec!["xgboost".into()];
        one.machines = vec!["cxl".into()];
        let mut two = claim(Expect::Better, Aggregate::Each, None);
        two.baseline = Some("tpp".into());
        two.workloads = vec!["cachelib".into(), "xgboost".into()];
        two.machines = vec!["cxl".into()];
        two.ratios = vec!["1:8".into()];
        let mut args = CompareArgs::default();
        narrow_to(&mut args, &[&one, &two]);
        assert_eq!(
            args.policies,
            Some(vec!["a".into(), "b".into(), "tpp".into()])
        );
        assert_eq!(
            args.workloads,
            Some(vec!["xgboost".into(), "cachelib".into()])
        );
        assert_eq!(args.machines, Some(vec!["cxl".into()]));
        assert_eq!(
            args.ratios, None,
            "a claim judged at every ratio needs every ratio run"
        );
    }

    #[test]
    fn a_claim_id_picks_its_papers_and_an_unknown_one_lists_the_valid() {
        let files = builtin().unwrap();
        let args = ClaimsArgs {
            claims: vec!["xgboost-vs-hemem".into()],
            ..ClaimsArgs::default()
        };
        let chosen = select(&args, &files).unwrap();
        assert_eq!(
            chosen.iter().map(|f| f.paper.as_str()).collect::<Vec<_>>(),
            ["freqtier"]
        );
        let args = ClaimsArgs {
            papers: vec!["chrono".into()],
            claims: vec!["xgboost-vs-hemem".into()],
            ..ClaimsArgs::default()
        };
        let e = select(&args, &files).unwrap_err().to_string();
        assert!(
            e.starts_with("unknown claim `xgboost-vs-hemem` in chrono; valid (paper:claim): chrono:pmbench-vs-linux-nb,"),
            "{e}"
        );
    }

    #[test]
    fn verdicts_follow_direction_and_magnitude() {
        let f = bare_file();
        let res = results(vec![
            row("a", "w1", 1.0),
            row("b", "w1", 1.5),
            row("a", "w2", 1.0),
            row("b", "w2", 0.9),
        ]);
        let v = |c: Claim| judge(&f, &c, &res);
        // a wins w1 by 1.5x, loses w2 (gain 0.9): each → partly, geomean 1.16 → better.
        assert_eq!(
            v(claim(Expect::Better, Aggregate::Each, None)).verdict,
            Verdict::Partly
        );
        let g = v(claim(Expect::Better, Aggregate::Geomean, None));
        assert_eq!(g.verdict, Verdict::Reproduced);
        assert!((g.gain.unwrap() - (1.5f64 * 0.9).sqrt()).abs() < 1e-12);
        // The paper's range decides magnitude.
        assert_eq!(
            v(claim(Expect::Better, Aggregate::Geomean, Some([1.5, 3.0]))).verdict,
            Verdict::Partly
        );
        assert_eq!(
            v(claim(Expect::Better, Aggregate::Geomean, Some([1.1, 1.2]))).verdict,
            Verdict::Reproduced
        );
        // A tie within 5% holds for neither cell; a loss is a miss.
        assert_eq!(
            v(claim(Expect::Tie, Aggregate::Each, None)).verdict,
            Verdict::NotReproduced
        );
        let mut worse = claim(Expect::Worse, Aggregate::Each, None);
        worse.workloads = vec!["w1".into()];
        assert_eq!(v(worse).verdict, Verdict::NotReproduced);
        // Nothing to judge: no data, never a verdict.
        let mut none = claim(Expect::Better, Aggregate::Each, None);
        none.baseline = Some("c".into());
        assert_eq!(v(none).verdict, Verdict::NoData);
    }

    /// The direction on long runs alone is judged on the cells whose policy run lasted
    /// at least LONG_RUN_S, and the summary counts a headline only when it holds there.
    #[test]
    fn the_direction_on_long_runs_is_judged_on_long_cells_alone() {
        let f = bare_file();
        let better = claim(Expect::Better, Aggregate::Geomean, None);
        let judged = |c: &Claim, rows: Vec<ResultRow>| judge(&f, c, &results(rows));
        // Better on the long cell (1.5x), worse on the short one: holds on long runs.
        let long_win = judged(
            &better,
            vec![
                row("a", "w1", 100.0),
                row("b", "w1", 150.0),
                row("a", "w2", 1.0),
                row("b", "w2", 0.9),
            ],
        );
        assert_eq!(long_win.verdict, Verdict::Reproduced);
        assert_eq!(long_win.direction_on_long_runs, Some(true));
        // Worse on the long cell, far better on the short one: in direction overall,
        // not on long runs.
        let short_win = judged(
            &better,
            vec![
                row("a", "w1", 100.0),
                row("b", "w1", 90.0),
                row("a", "w2", 1.0),
                row("b", "w2", 2.0),
            ],
        );
        assert_eq!(short_win.verdict, Verdict::Reproduced);
        assert_eq!(short_win.direction_on_long_runs, Some(false));
        // No long cell: unknown.
        let short_only = judged(&better, vec![row("a", "w2", 1.0), row("b", "w2", 2.0)]);
        assert_eq!(short_only.direction_on_long_runs, None);
        // A tie holds on long runs only if it holds in every long cell.
        let tie = claim(Expect::Tie, Aggregate::Each, None);
        let level = judged(&tie, vec![row("a", "w1", 100.0), row("b", "w1", 101.0)]);
        assert_eq!(level.direction_on_long_runs, Some(true));
        let uneven = judged(
            &tie,
            vec![
                row("a", "w1", 100.0),
                row("b", "w1", 101.0),
                row("a", "w3", 100.0),
                row("b", "w3", 150.0),
            ],
        );
        assert_eq!(uneven.direction_on_long_runs, Some(false));
        let files = [f.clone()];
        let summary = summary_md(&files, &[long_win, short_win, short_only], false);
        assert!(summary.contains("| 3 of 3 | 1 |"), "{summary}");
        assert!(summary.contains("1 of them also on the cells"), "{summary}");
    }

    #[test]
    fn first_tenth_fast_share_averages_the_first_tenth_of_the_processes() {
        let procs = |shares: &[(u64, u64)]| {
            let list: Vec<_> = shares
                .iter()
                .map(|&(fast, resident)| {
                    serde_json::json!({"name": "p", "resident_pages": resident, "fast_pages": fast})
                })
                .collect();
            serde_json::json!({ "processes": list })
        };
        // 20 processes: the first two count, (1.0 + 0.5) / 2.
        let mut v = vec![(100, 100), (50, 100)];
        v.extend(std::iter::repeat_n((0, 100), 18));
        assert_eq!(first_tenth_fast_share(&procs(&v)), Some(0.75));
        // Fewer than ten: the first alone; an empty process counts as share 0.
        assert_eq!(
            first_tenth_fast_share(&procs(&[(3, 4), (4, 4)])),
            Some(0.75)
        );
        assert_eq!(first_tenth_fast_share(&procs(&[(0, 0)])), Some(0.0));
        // One process lists none: no value.
        assert_eq!(first_tenth_fast_share(&serde_json::json!({})), None);
        assert_eq!(first_tenth_fast_share(&procs(&[])), None);
    }

    /// Rerunning one paper and splicing its part into claims.md gives the file a run
    /// of every paper would write; a claims.md without the paper is refused.
    #[test]
    fn splicing_one_paper_equals_writing_every_paper() {
        let file = |p: &str, t: &str| ClaimFile {
            paper: p.into(),
            title: t.into(),
            matrices: BTreeMap::new(),
            claims: vec![],
        };
        let files = [file("p", "P"), file("q", "Q"), file("r", "R")];
        let judged = |f: &ClaimFile, verdict: Verdict, long: Option<bool>, words: &str| {
            let mut j = judge(
                f,
                &claim(Expect::Better, Aggregate::Each, None),
                &BTreeMap::new(),
            );
            j.verdict = verdict;
            j.direction_on_long_runs = long;
            j.measured = words.into();
            j
        };
        let old = vec![
            judged(&files[0], Verdict::Reproduced, Some(true), "p then"),
            judged(&files[1], Verdict::NotReproduced, None, "q then"),
            judged(&files[2], Verdict::Partly, Some(false), "r then"),
        ];
        let mut new = old.clone();
        new[1] = judged(&files[1], Verdict::Partly, Some(true), "q now");
        let spliced =
            splice_summary(&summary_md(&files, &old, false), &[&files[1]], &new[1..2]).unwrap();
        assert_eq!(spliced, summary_md(&files, &new, false));
        assert!(spliced.contains(&headline_line((3, 3, 2))), "{spliced}");
        let without_q = summary_md(&[file("p", "P")], &old, false);
        let e = splice_summary(&without_q, &[&files[1]], &new[1..2])
            .unwrap_err()
            .to_string();
        assert!(e.contains("no summary row for Q"), "{e}");
    }

    #[test]
    fn write_docs_replaces_only_the_marked_block() {
        let dir = std::env::temp_dir().join(format!("tierkit-claims-docs-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("policies")).unwrap();
        let page = dir.join("policies/p.md");
        std::fs::write(
            &page,
            format!("# P\nbefore\n{BEGIN}\nold table\n{END}\nafter\n"),
        )
        .unwrap();
        let f = ClaimFile {
            paper: "p".into(),
            title: "P".into(),
            matrices: BTreeMap::new(),
            claims: vec![],
        };
        let mut c = claim(Expect::Better, Aggregate::Each, None);
        c.untestable = Some("no such machine".into());
        let j = judge(&f, &c, &BTreeMap::new());
        assert_eq!(j.verdict, Verdict::CannotBeTested);
        write_docs(&dir, std::slice::from_ref(&f), &[j], "summary").unwrap();
        let text = std::fs::read_to_string(&page).unwrap();
        assert!(text.starts_with("# P\nbefore\n"), "{text}");
        assert!(text.ends_with(&format!("{END}\nafter\n")), "{text}");
        assert!(!text.contains("old table"));
        assert!(text.contains("cannot be tested"));
        assert_eq!(
            std::fs::read_to_string(dir.join("claims.md")).unwrap(),
            "summary"
        );
        // A page without the markers is an error naming them.
        std::fs::write(&page, "# P\n").unwrap();
        let e = write_docs(
            &dir,
            &[f],
            &[judge(
                &ClaimFile {
                    paper: "p".into(),
                    title: "P".into(),
                    matrices: BTreeMap::new(),
                    claims: vec![],
                },
                &c,
                &BTreeMap::new(),
            )],
            "s",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("claims:begin"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
