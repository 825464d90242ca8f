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

/// A comparison matrix as `tierkit compare`'s flags give it, handed over from Python
/// as one dict (`tierkit._pieces`). A TOML matrix comes as its name and text
/// (`config`), so a worker on another machine needs no file.
#[derive(FromPyObject, Clone)]
#[pyo3(from_item_all)]
struct Matrix {
    suite: Option<String>,
    config: Option<(String, String)>,
    policies: Option<Vec<String>>,
    workloads: Option<Vec<String>>,
    ratios: Option<Vec<String>>,
    machines: Option<Vec<String>>,
    seed: Option<u64>,
    sets: Vec<String>,
}

impl Matrix {
    /// The library's arguments for this matrix written to `out`.
    fn args(
        self,
        out: PathBuf,
        jobs: Option<usize>,
        force: bool,
        only_finished: bool,
    ) -> CompareArgs {
        CompareArgs {
            suite: self.suite,
            config: self.config,
            policies: self.policies,
            workloads: self.workloads,
            ratios: self.ratios,
            machines: self.machines,
            seed: self.seed,
            sets: self.sets,
            jobs: jobs
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
            out,
            force,
            progress: false,
            only_finished,
            recording_budget: None,
        }
    }
}

/// A comparison matrix written to `out` as `tierkit compare` writes it. Returns
/// (results.csv path, report path, leaderboard). With `only_finished`, nothing is
/// executed: results are derived from the runs another executor left in
/// `out/runs/`, and any other run is reported failed.
#[pyfunction]
#[pyo3(signature = (out, matrix, jobs=None, force=false, only_finished=false))]
fn compare(
    py: Python<'_>,
    out: PathBuf,
    matrix: Matrix,
    jobs: Option<usize>,
    force: bool,
    only_finished: bool,
) -> PyResult<(String, String, String)> {
    let args = matrix.args(out.clone(), jobs, force, only_finished);
    // Everything a user can get wrong is checked before any run, as a ValueError.
    matrix::planned_runs(&args).map_err(value_error)?;
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

/// The runs of a matrix as JSON: `[{"id": ..., "finished": bool}]`, finished meaning
/// a complete run of the same configuration is already in `out/runs/<id>/`.
#[pyfunction]
fn plan_matrix(out: PathBuf, matrix: Matrix) -> PyResult<String> {
    let runs = matrix::planned_runs(&matrix.args(out, None, false, false)).map_err(value_error)?;
    let list: Vec<serde_json::Value> = runs
        .iter()
        .map(|(r, done)| serde_json::json!({"id": r.id, "finished": done}))
        .collect();
    Ok(serde_json::Value::Array(list).to_string())
}

/// Run one run of a matrix in a scratch directory, as the local runner would, and
/// return its files as (name, bytes) in the order to write them (`config.toml`, the
/// mark of a finished run, last). What a Ray task executes on a worker.
#[pyfunction]
fn run_one(py: Python<'_>, id: String, matrix: Matrix) -> PyResult<Vec<(String, Vec<u8>)>> {
    let scratch = std::env::temp_dir().join(format!(
        "tierkit-run-{}-{}",
        std::process::id(),
        id.replace(['/', '\\'], "_")
    ));
    let args = matrix.args(scratch.clone(), Some(1), true, false);
    let result = py.allow_threads(|| -> anyhow::Result<Vec<(String, Vec<u8>)>> {
        let dir = matrix::execute_one(&args, &id, &scratch)?;
        let mut files = Vec::new();
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            files.push((name, std::fs::read(entry.path())?));
        }
        files.sort_by_key(|(n, _)| (n == "config.toml", n.clone()));
        Ok(files)
    });
    let _ = std::fs::remove_dir_all(&scratch);
    result.map_err(runtime_error)
}

/// Check that `out` may receive a comparison's outputs (refused when it holds files
/// tierkit did not write, unless `force`) and mark it as tierkit's.
#[pyfunction]
fn prepare_out_dir(out: PathBuf, force: bool) -> PyResult<()> {
    matrix::prepare_out_dir(&out, force).map_err(value_error)
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

/// Record workload `workload` (with `sets` and `seed`) into the trace file `out`, as
/// `tierkit trace record` does (refused if `out` exists, unless `force`). Returns
/// (accesses, records, chunks, file bytes).
#[pyfunction]
#[pyo3(signature = (workload, out, sets=Vec::new(), seed=None, force=false))]
fn trace_record(
    py: Python<'_>,
    workload: String,
    out: PathBuf,
    sets: Vec<String>,
    seed: Option<u64>,
    force: bool,
) -> PyResult<(u64, u64, u64, u64)> {
    tierkit::output::check_target(&out, &[], force).map_err(value_error)?;
    // A bad workload name or setting is the user's, not the run's.
    run_config::build(&RunArgs {
        workload: Some(workload.clone()),
        seed,
        sets: sets.clone(),
        ..RunArgs::default()
    })
    .map_err(value_error)?;
    let st = py
        .allow_threads(|| tierkit::trace_cmd::record(&workload, &sets, seed, &out))
        .map_err(runtime_error)?;
    Ok((st.accesses, st.ops, st.chunks, st.file_bytes))
}

/// Import `input` (`format`: lackey, perf, damo or text) into the trace file `out`,
/// as `tierkit trace import` does. Returns the import's counts as JSON.
#[pyfunction]
#[pyo3(signature = (format, input, out, mlp=None, ns_per_instruction=None, keep_l1_hits=false, force=false))]
#[allow(clippy::too_many_arguments)]
fn trace_import(
    py: Python<'_>,
    format: String,
    input: PathBuf,
    out: PathBuf,
    mlp: Option<f64>,
    ns_per_instruction: Option<f64>,
    keep_l1_hits: bool,
    force: bool,
) -> PyResult<String> {
    use tierkit_workloads::trace::import::{ImportFormat, ImportOptions};
    tierkit::output::check_target(&out, &[&input], force).map_err(value_error)?;
    let fmt: ImportFormat = format.parse().map_err(PyValueError::new_err)?;
    let mut opts = ImportOptions::default();
    if let Some(m) = mlp {
        opts.mlp = m;
    }
    if let Some(n) = ns_per_instruction {
        opts.ns_per_instruction = n;
    }
    opts.l1_filter = !keep_l1_hits;
    opts.description = format!("imported from {} file {}", fmt.name(), input.display());
    let st = py
        .allow_threads(|| tierkit::trace_cmd::import_file(fmt, &input, &out, &opts))
        .map_err(value_error)?;
    Ok(serde_json::json!({
        "lines": st.lines,
        "accesses": st.trace.accesses,
        "records": st.trace.ops,
        "file_bytes": st.trace.file_bytes,
        "processes": st.processes,
        "threads": st.threads,
        "skipped": st.skipped,
    })
    .to_string())
}

/// Reads a trace thread by thread, in chunks of accesses: each `next()` gives
/// (process, thread, addresses as little-endian u64 bytes, writes as u8 bytes, gaps
/// in ns as little-endian u32 bytes), which NumPy views without copying per access.
/// Mappings and unmappings are not accesses and are left out.
#[pyclass(unsendable)]
struct TraceReader {
    workload: Box<dyn tierkit_core::Workload>,
    threads: Vec<(usize, usize)>,
    next_thread: usize,
    chunk: usize,
    buf: Vec<tierkit_core::Op>,
    pos: usize,
}

#[pymethods]
impl TraceReader {
    #[new]
    #[pyo3(signature = (path, chunk=1 << 20))]
    fn new(path: PathBuf, chunk: usize) -> PyResult<Self> {
        let w = tierkit_workloads::trace::TraceWorkload::open(&path, 1.0)
            .map_err(|e| PyValueError::new_err(format!("{}: {e}", path.display())))?;
        let shape = tierkit_core::Workload::shape(&w);
        let threads = shape
            .processes
            .iter()
            .enumerate()
            .flat_map(|(p, s)| (0..s.nr_threads as usize).map(move |t| (p, t)))
            .collect();
        Ok(TraceReader {
            workload: Box::new(w),
            threads,
            next_thread: 0,
            chunk: chunk.max(1),
            buf: Vec::new(),
            pos: 0,
        })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[allow(clippy::type_complexity)]
    fn __next__(&mut self) -> Option<(usize, usize, Vec<u8>, Vec<u8>, Vec<u8>)> {
        loop {
            let &(p, t) = self.threads.get(self.next_thread)?;
            let (mut addrs, mut writes, mut gaps) = (Vec::new(), Vec::new(), Vec::new());
            while writes.len() < self.chunk {
                if self.pos == self.buf.len() {
                    self.buf.clear();
                    self.pos = 0;
                    self.workload.fill(p, t, &mut self.buf);
                    if self.buf.is_empty() {
                        break;
                    }
                }
                if let tierkit_core::Op::Access {
                    addr,
                    write,
                    gap_ns,
                } = self.buf[self.pos]
                {
                    addrs.extend_from_slice(&addr.to_le_bytes());
                    writes.push(write as u8);
                    gaps.extend_from_slice(&gap_ns.to_le_bytes());
                }
                self.pos += 1;
            }
            if writes.len() < self.chunk {
                // This thread is done; the next call starts the next one.
                self.next_thread += 1;
            }
            if !writes.is_empty() {
                return Some((p, t, addrs, writes, gaps));
            }
        }
    }
}

/// The native module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(sim, m)?)?;
    m.add_function(wrap_pyfunction!(compare, m)?)?;
    m.add_function(wrap_pyfunction!(plan_matrix, m)?)?;
    m.add_function(wrap_pyfunction!(run_one, m)?)?;
    m.add_function(wrap_pyfunction!(prepare_out_dir, m)?)?;
    m.add_function(wrap_pyfunction!(trace_record, m)?)?;
    m.add_function(wrap_pyfunction!(trace_import, m)?)?;
    m.add_class::<TraceReader>()?;
    m.add_function(wrap_pyfunction!(catalog, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
