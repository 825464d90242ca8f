//! `tierkit._native`: the Rust side of the `tierkit` Python package.
//!
//! Thin on purpose: each function builds the same configuration the CLI builds from
//! the same pieces, runs the same library code with the GIL released, and hands back
//! the CLI's own texts (summary JSON, CSV tables, file paths). The Python side
//! (`python/tierkit/__init__.py`) turns them into dicts and DataFrames, so the two
//! front ends cannot drift apart. A configuration error becomes a `ValueError` with
//! the CLI's one-line message; a failure while running, a `RuntimeError`.

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use std::path::PathBuf;
use tierkit::compare::{self as matrix, CompareArgs};
use tierkit::list::{self, Section};
use tierkit::run;
use tierkit::run_config::{self, RunArgs};

fn value_error(e: anyhow::Error) -> PyErr {
    PyValueError::new_err(format!("{e:#}"))
}

fn runtime_error(e: anyhow::Error) -> PyErr {
    PyRuntimeError::new_err(format!("{e:#}"))
}

/// One simulation. Returns (summary JSON, timeseries CSV, epochs CSV, heatmap CSV,
/// resolved config TOML); with `out`, also writes them there as `tierkit sim --out`.
#[pyfunction]
#[pyo3(signature = (policy=None, workload=None, machine=None, ratio=None, seed=None, sets=Vec::new(), config=None, out=None, force=false))]
#[allow(clippy::too_many_arguments)]
fn sim(
    py: Python<'_>,
    policy: Option<String>,
    workload: Option<String>,
    machine: Option<String>,
    ratio: Option<String>,
    seed: Option<u64>,
    sets: Vec<String>,
    config: Option<PathBuf>,
    out: Option<PathBuf>,
    force: bool,
) -> PyResult<(String, String, String, String, String)> {
    let config_file = match &config {
        Some(p) => Some((
            p.display().to_string(),
            std::fs::read_to_string(p).map_err(|e| {
                PyValueError::new_err(format!("cannot read config {}: {e}", p.display()))
            })?,
        )),
        None => None,
    };
    let cfg = run_config::build(&RunArgs {
        config_file,
        workload,
        policy,
        machine,
        fast: ratio,
        seed,
        sets,
    })
    .map_err(value_error)?;
    if let Some(dir) = &out {
        run::check_out_dir(dir, force).map_err(value_error)?;
    }
    let result = py
        .allow_threads(|| run::simulate(&cfg, false))
        .map_err(runtime_error)?;
    if let Some(dir) = &out {
        run::write_files(dir, &cfg, &result).map_err(runtime_error)?;
    }
    let summary = serde_json::to_string(&result.summary)
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    Ok((
        summary,
        result.series.to_csv(),
        result.placement.epochs_csv(),
        result.placement.heat_csv(),
        cfg.to_toml(),
    ))
}

/// A comparison matrix (a suite, a TOML matrix file, or flags), written to `out` as
/// `tierkit compare` writes it. Returns (results.csv path, report path, leaderboard).
#[pyfunction]
#[pyo3(signature = (out, suite=None, config=None, policies=None, workloads=None, ratios=None, machines=None, seed=None, sets=Vec::new(), jobs=None, force=false))]
#[allow(clippy::too_many_arguments)]
fn compare(
    py: Python<'_>,
    out: PathBuf,
    suite: Option<String>,
    config: Option<PathBuf>,
    policies: Option<Vec<String>>,
    workloads: Option<Vec<String>>,
    ratios: Option<Vec<String>>,
    machines: Option<Vec<String>>,
    seed: Option<u64>,
    sets: Vec<String>,
    jobs: Option<usize>,
    force: bool,
) -> PyResult<(String, String, String)> {
    let config = match &config {
        Some(p) => Some((
            p.display().to_string(),
            std::fs::read_to_string(p).map_err(|e| {
                PyValueError::new_err(format!("cannot read compare config {}: {e}", p.display()))
            })?,
        )),
        None => None,
    };
    let args = CompareArgs {
        suite,
        config,
        policies,
        workloads,
        ratios,
        machines,
        seed,
        sets,
        jobs: jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        out: out.clone(),
        force,
        progress: false,
    };
    // Everything a user can get wrong is checked before any run, as a ValueError.
    let (spec, lenient, _) = matrix::resolve_spec(&args).map_err(value_error)?;
    let mut notices = Vec::new();
    matrix::plan(&spec, lenient, &mut notices).map_err(value_error)?;
    matrix::prepare_out_dir(&args.out, args.force).map_err(value_error)?;
    let (_, board, report) = py
        .allow_threads(|| matrix::run_matrix(&args))
        .map_err(runtime_error)?;
    Ok((
        out.join("results.csv").display().to_string(),
        report.display().to_string(),
        board,
    ))
}

/// The registered policies, workloads, machines or suites with their defaults, as
/// JSON (`tierkit list SECTION` as data).
#[pyfunction]
fn catalog(section: &str) -> PyResult<String> {
    let which = match section {
        "policies" => Section::Policies,
        "workloads" => Section::Workloads,
        "machines" => Section::Machines,
        "suites" => Section::Suites,
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown section `{other}`; valid: policies, workloads, machines, suites"
            )))
        }
    };
    Ok(list::catalog(which).to_string())
}

/// The native module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(sim, m)?)?;
    m.add_function(wrap_pyfunction!(compare, m)?)?;
    m.add_function(wrap_pyfunction!(catalog, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
