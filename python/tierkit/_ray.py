"""The Ray executor of :func:`tierkit.compare`: each run of the matrix is one task.

A task re-plans the matrix on its worker (planning is deterministic and cheap), runs
its one run with the same library code a local comparison uses, and returns the
run's files; the driver writes them under ``OUT/runs/<id>/`` (``config.toml``, the
mark of a finished run, last). Results are then derived from those files exactly as
after a local run, so ``results.csv`` is byte-identical. Runs already finished in
``OUT`` are not sent again (resume). A task that fails is retried by Ray; one that
still fails is reported by run id, and the others' results are kept.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Tuple

from . import _native

# Fault injection for the package's own tests: "ID:N:DIR" makes the first N attempts
# of run ID fail (attempts are counted with files in DIR, which every worker of a
# loopback cluster sees).
_FAIL_ENV = "TIERKIT_RAY_TEST_FAIL"


def _maybe_fail(run_id: str) -> None:
    spec = os.environ.get(_FAIL_ENV)
    if not spec:
        return
    rid, n, d = spec.split(":", 2)
    if rid != run_id:
        return
    os.makedirs(d, exist_ok=True)
    attempt = len(os.listdir(d)) + 1
    open(os.path.join(d, f"attempt-{attempt}"), "w").close()
    if attempt <= int(n):
        raise RuntimeError(f"injected failure {attempt} of {n} for run {run_id}")


def _run_one(run_id: str, pieces: Dict[str, Any]) -> List[Tuple[str, bytes]]:
    _maybe_fail(run_id)
    return _native.run_one(run_id, pieces)


def _write_run(out: str, run_id: str, files: List[Tuple[str, bytes]]) -> None:
    d = os.path.join(out, "runs", run_id)
    os.makedirs(d, exist_ok=True)
    for name, data in files:  # config.toml comes last
        tmp = os.path.join(d, f".{name}.part")
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, os.path.join(d, name))


def run_matrix(
    out: str,
    pieces: Dict[str, Any],
    *,
    address: Optional[str],
    retries: int,
    force: bool,
) -> Dict[str, str]:
    """Run every unfinished run of the matrix on Ray, writing each into ``out``.
    Returns the runs that failed after their retries, with their errors."""
    try:
        import ray
    except ImportError:
        raise ValueError(
            "executor 'ray' needs the ray package: pip install 'ray[default]'"
        ) from None
    runs = json.loads(_native.plan_matrix(out, pieces))
    # The output directory is checked (and claimed) before any task is sent, as a
    # local comparison checks it before any run.
    _native.prepare_out_dir(out, force)
    todo = [r["id"] for r in runs if not r["finished"]]
    if not ray.is_initialized():
        env = {_FAIL_ENV: os.environ[_FAIL_ENV]} if _FAIL_ENV in os.environ else {}
        ray.init(address=address, runtime_env={"env_vars": env} if env else None,
                 log_to_driver=False)
    task = ray.remote(num_cpus=1, max_retries=retries, retry_exceptions=True)(_run_one)
    pending = {task.remote(rid, pieces): rid for rid in todo}
    failed: Dict[str, str] = {}
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        rid = pending.pop(done[0])
        try:
            _write_run(out, rid, ray.get(done[0]))
        except Exception as e:  # a task's error, after Ray's retries
            failed[rid] = str(e).strip().splitlines()[-1] if str(e).strip() else repr(e)
    return failed
