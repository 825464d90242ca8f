"""tierkit from Python: simulate tiered-memory placement policies and compare them.

The simulation runs in Rust (the same library code as the ``tierkit`` command line,
with the GIL released); this package hands you its results as dicts and pandas
DataFrames::

    import tierkit
    r = tierkit.sim(policy="memtis", workload="gups", set={"sim.max_accesses": 2_000_000})
    r.summary["fast_access_ratio"]
    r.timeseries.plot(x="time_s", y="fast_access_ratio")

    df = tierkit.compare("quick", out="results/quick")   # the rows of results.csv

A configuration error raises ``ValueError`` with the same one-line message the CLI
prints; a failure while running raises ``RuntimeError``.
"""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import pandas as pd

from . import _native

__all__ = [
    "trace",
    "CompareFailed",
    "SimResult",
    "sim",
    "compare",
    "policies",
    "workloads",
    "machines",
    "suites",
    "__version__",
]

__version__: str = _native.__version__

PathLike = Union[str, "os.PathLike[str]"]


class _RawToml(str):
    """A ``--set`` value already written as TOML (from the command line), passed on
    unchanged."""


def _toml_value(v: Any) -> str:
    """One ``--set`` value as TOML: strings quoted, booleans lower-case."""
    if isinstance(v, _RawToml):
        return str(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"--set value {v!r} is not a finite number")
        return repr(v)
    if isinstance(v, str):
        # A JSON string is a valid TOML basic string.
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise ValueError(
        f"--set value {v!r} has type {type(v).__name__}; "
        "valid: str, int, float, bool, or a list of them"
    )


def _sets(set: Optional[Mapping[str, Any]]) -> List[str]:
    """``{"policy.hot_threshold": 4}`` → ``["policy.hot_threshold=4"]``, in order."""
    if set is None:
        return []
    if not isinstance(set, Mapping):
        raise ValueError("set must be a mapping of KEY to VALUE, e.g. {'sim.seed': 7}")
    return [f"{k}={_toml_value(v)}" for k, v in set.items()]


def _csv(text: str) -> pd.DataFrame:
    return pd.read_csv(io.StringIO(text)) if text.strip() else pd.DataFrame()


@dataclass
class SimResult:
    """The outputs of one simulation, as ``tierkit sim --out`` writes them."""

    summary: Dict[str, Any]
    """``summary.json``: the run's summary (slowdown inputs, fast-access ratio,
    migrations, per-tier counts, policy statistics...)."""
    config: str
    """``config.toml``: the resolved configuration, enough to rerun it exactly."""
    _timeseries_csv: str = field(repr=False)
    _epochs_csv: str = field(repr=False)
    _heatmap_csv: str = field(repr=False)

    @property
    def timeseries(self) -> pd.DataFrame:
        """``timeseries.csv``: one row per interval (``time_s`` first)."""
        return _csv(self._timeseries_csv)

    @property
    def epochs(self) -> pd.DataFrame:
        """``epochs.csv``: placement quality (precision, recall, F1) per epoch."""
        return _csv(self._epochs_csv)

    @property
    def heatmap(self) -> pd.DataFrame:
        """``heatmap.csv``: memory accesses per address bin, one row per epoch."""
        return _csv(self._heatmap_csv)


def sim(
    policy: Optional[str] = None,
    workload: Optional[str] = None,
    machine: Optional[str] = None,
    ratio: Optional[str] = None,
    seed: Optional[int] = None,
    set: Optional[Mapping[str, Any]] = None,
    config: Optional[PathLike] = None,
    out: Optional[PathLike] = None,
    force: bool = False,
) -> SimResult:
    """Run one simulation, as ``tierkit sim`` does with the same arguments.

    ``ratio`` is a fast:slow ratio (``"1:8"``) or a fast-tier size (``"2GiB"``);
    ``set`` maps ``KEY`` to ``VALUE`` as ``--set KEY=VALUE`` does (``workload.*``,
    ``policy.*``, ``machine.*``, ``sim.*``); ``config`` is a TOML run file. With
    ``out``, the CLI's files are also written there (refused if it already holds
    results, unless ``force``).
    """
    summary, ts, ep, hm, cfg = _native.sim(
        policy=policy,
        workload=workload,
        machine=machine,
        ratio=ratio,
        seed=seed,
        sets=_sets(set),
        config=None if config is None else os.fspath(config),
        out=None if out is None else os.fspath(out),
        force=force,
    )
    return SimResult(json.loads(summary), cfg, ts, ep, hm)


class CompareFailed(RuntimeError):
    """Some runs of a comparison failed. The others' results were written and are
    in ``results`` (the rows of ``results.csv``); ``failed`` names the failed runs
    with their errors."""

    def __init__(self, message: str, results: pd.DataFrame, failed: Dict[str, str]):
        super().__init__(message)
        self.results = results
        self.failed = failed


def _matrix(matrix: Optional[Union[str, PathLike]]) -> Dict[str, Any]:
    """A suite name or a TOML matrix file as the native functions take them."""
    if matrix is None:
        return {"suite": None, "config": None}
    m = os.fspath(matrix)
    if m.endswith(".toml") or os.path.sep in m or os.path.exists(m):
        try:
            with open(m, encoding="utf-8") as f:
                return {"suite": None, "config": (m, f.read())}
        except OSError as e:
            raise ValueError(f"cannot read compare config {m}: {e.strerror}") from None
    return {"suite": m, "config": None}


def _pieces(
    matrix: Optional[Union[str, PathLike]],
    policies: Optional[Sequence[str]] = None,
    workloads: Optional[Sequence[str]] = None,
    ratios: Optional[Sequence[str]] = None,
    machines: Optional[Sequence[str]] = None,
    seed: Optional[int] = None,
    set: Optional[Mapping[str, Any]] = None,
) -> Dict[str, Any]:
    """A matrix as the native functions take it: one dict of every piece."""
    return dict(
        **_matrix(matrix),
        policies=None if policies is None else list(policies),
        workloads=None if workloads is None else list(workloads),
        ratios=None if ratios is None else list(ratios),
        machines=None if machines is None else list(machines),
        seed=seed,
        sets=_sets(set),
    )


def compare(
    matrix: Optional[Union[str, PathLike]] = None,
    *,
    policies: Optional[Sequence[str]] = None,
    workloads: Optional[Sequence[str]] = None,
    ratios: Optional[Sequence[str]] = None,
    machines: Optional[Sequence[str]] = None,
    seed: Optional[int] = None,
    set: Optional[Mapping[str, Any]] = None,
    jobs: Optional[int] = None,
    out: Optional[PathLike] = None,
    force: bool = False,
    executor: str = "local",
    address: Optional[str] = None,
    retries: int = 2,
) -> pd.DataFrame:
    """Run a comparison matrix, as ``tierkit compare`` does, and return the rows of
    its ``results.csv``.

    ``matrix`` is a suite name (``"quick"``, ``"chrono"``... see :func:`suites`) or
    the path of a TOML matrix file; the keyword arguments narrow or extend it as the
    CLI's flags do. With ``out`` the whole output directory (runs, results.csv, the
    HTML report) is kept there, and runs already finished in it are reused; without
    it, it is written to a temporary directory that is removed once the rows are
    read. The DataFrame's ``attrs`` hold ``leaderboard`` (the text the CLI prints),
    ``out`` and ``report`` (paths, or None when nothing was kept).

    ``executor``: ``"local"`` runs on this machine's cores, ``jobs`` at a time;
    ``"ray"`` sends each run to a Ray cluster (``address``, or the one
    ``ray.init()`` finds) as one task, retried ``retries`` times if it fails, and
    writes the same files as a local run, byte for byte. If runs still fail,
    :class:`CompareFailed` is raised after the others' results are written.
    """
    if executor not in ("local", "ray"):
        raise ValueError(f"executor {executor!r} is not available; valid: 'local', 'ray'")
    pieces = _pieces(matrix, policies, workloads, ratios, machines, seed, set)
    keep = out is not None
    out_dir = os.fspath(out) if keep else tempfile.mkdtemp(prefix="tierkit-compare-")
    failed: Dict[str, str] = {}
    try:
        if executor == "ray":
            from . import _ray

            failed = _ray.run_matrix(out_dir, pieces, address=address, retries=retries,
                                     force=force or not keep)
        try:
            results, report, board = _native.compare(
                out_dir, pieces, jobs=jobs, force=force or not keep,
                only_finished=executor != "local",
            )
        except RuntimeError as e:
            results_csv = os.path.join(out_dir, "results.csv")
            if failed and os.path.exists(results_csv):
                raise CompareFailed(
                    f"{len(failed)} run(s) failed on {executor}: "
                    + "; ".join(f"{k}: {v}" for k, v in sorted(failed.items())),
                    pd.read_csv(results_csv),
                    failed,
                ) from e
            raise
        df = pd.read_csv(results)
    finally:
        if not keep:
            shutil.rmtree(out_dir, ignore_errors=True)
    df.attrs["leaderboard"] = board
    df.attrs["out"] = out_dir if keep else None
    df.attrs["report"] = report if keep else None
    return df


def _catalog(section: str) -> List[Dict[str, Any]]:
    return json.loads(_native.catalog(section))


def policies() -> List[Dict[str, Any]]:
    """Every registered policy: ``name``, ``description`` and ``defaults`` (its
    parameters and their default values)."""
    return _catalog("policies")


def workloads() -> List[Dict[str, Any]]:
    """Every registered workload: ``name``, ``description`` and ``defaults``."""
    return _catalog("workloads")


def machines() -> List[Dict[str, Any]]:
    """Every machine preset: ``name``, ``description``, and the machine and
    simulator settings with their defaults (``machine_defaults``, ``sim_defaults``)."""
    return _catalog("machines")


def suites() -> List[Dict[str, Any]]:
    """The built-in comparison suites: ``name``, ``description`` and ``toml`` (the
    matrix)."""
    return _catalog("suites")


from . import trace  # noqa: E402  (its helpers come from this module)
