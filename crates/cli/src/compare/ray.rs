//! `tierkit compare --executor ray`: the matrix runs on a Ray cluster through the
//! Python package (`python/tierkit/_ray.py`), which this hands the command line to.
//! Results, resume and failures behave as in `tierkit.compare(executor="ray")`.

use anyhow::{bail, Context, Result};
use std::process::Command;

/// The Python interpreter to use: `$TIERKIT_PYTHON`, else `python3`.
fn python() -> String {
    std::env::var("TIERKIT_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Run `python -m tierkit compare-json KWARGS` with this process's stdio and return
/// its exit status. Fails with one line when that Python lacks the package or Ray.
pub fn delegate(kwargs: &serde_json::Value) -> Result<i32> {
    let py = python();
    let probe = Command::new(&py)
        .args(["-c", "import tierkit, ray"])
        .output()
        .with_context(|| format!("--executor ray runs through Python, and `{py}` could not be started (set TIERKIT_PYTHON)"))?;
    if !probe.status.success() {
        bail!(
            "--executor ray needs the tierkit Python package and ray in `{py}` (pip install . 'ray[default]' in the repository; TIERKIT_PYTHON chooses the interpreter)"
        );
    }
    let status = Command::new(&py)
        .args(["-m", "tierkit", "compare-json", &kwargs.to_string()])
        .status()
        .with_context(|| format!("cannot run `{py} -m tierkit`"))?;
    Ok(status.code().unwrap_or(1))
}
