"""The Python package against the CLI it wraps: same inputs, same outputs.

The CLI binary is found through $TIERKIT_CLI, else target/{release,debug}/tierkit of
this repository (`cargo build` makes it); tests that compare with it skip, saying
so, when neither exists.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

import tierkit

REPO = Path(__file__).resolve().parents[2]

SMALL = {
    "workload.footprint_mib": 64,
    "workload.nr_updates": 400_000,
    "machine.llc_size_mib": 2,
    "sim.interval_ms": 5,
}

TINY_MATRIX = """
policies = ["first-touch", "autonuma"]
ratios = ["1:8"]
machines = ["cxl"]
seed = 3
set = ["machine.llc_size_mib=1", "sim.policy_time_scale=20", "sim.interval_ms=5", "sim.epoch_ms=20"]

[[workloads]]
name = "gups"
set = ["workload.footprint_mib=32", "workload.nr_updates=300000"]
"""


def cli() -> str:
    env = os.environ.get("TIERKIT_CLI")
    if env:
        return env
    for profile in ("release", "debug"):
        p = REPO / "target" / profile / "tierkit"
        if p.exists():
            return str(p)
    pytest.skip("no tierkit CLI binary: set TIERKIT_CLI or run `cargo build`")


def cli_sets() -> list:
    return [a for k, v in SMALL.items() for a in ("--set", f"{k}={v}")]


def test_sim_gives_the_clis_files(tmp_path: Path) -> None:
    r = tierkit.sim(policy="autonuma", workload="gups", seed=5, set=SMALL)
    out = tmp_path / "cli"
    subprocess.run(
        [cli(), "sim", "--policy", "autonuma", "--workload", "gups", "--seed", "5",
         *cli_sets(), "--out", str(out)],
        check=True, capture_output=True,
    )
    assert r.summary == json.loads((out / "summary.json").read_text())
    assert r.config == (out / "config.toml").read_text()
    for name, df in [("timeseries", r.timeseries), ("epochs", r.epochs), ("heatmap", r.heatmap)]:
        expected = pd.read_csv(out / f"{name}.csv")
        pd.testing.assert_frame_equal(df, expected, check_exact=True)
    assert len(r.timeseries) > 1 and r.timeseries["time_s"].is_monotonic_increasing
    assert r.summary["policy"] == "autonuma" and r.summary["accesses"] > 0


def test_sim_writes_out_and_refuses_to_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "run"
    tierkit.sim(policy="first-touch", workload="gups", set=SMALL, out=out)
    assert sorted(p.name for p in out.iterdir()) == [
        "config.toml", "epochs.csv", "heatmap.csv", "summary.json", "timeseries.csv"]
    before = (out / "summary.json").read_text()
    with pytest.raises(ValueError, match="already exists.*--force"):
        tierkit.sim(policy="memtis", workload="gups", set=SMALL, out=out)
    assert (out / "summary.json").read_text() == before, "nothing a user gave is lost"
    tierkit.sim(policy="memtis", workload="gups", set=SMALL, out=out, force=True)
    assert json.loads((out / "summary.json").read_text())["policy"] == "memtis"


def test_config_errors_are_value_errors_with_the_clis_message() -> None:
    with pytest.raises(ValueError, match="unknown policy `nope`.*memtis"):
        tierkit.sim(policy="nope")
    with pytest.raises(ValueError, match="unknown field `no_such_key`.* in `policy`"):
        tierkit.sim(policy="memtis", set={"policy.no_such_key": 1})
    with pytest.raises(ValueError, match="not a finite number"):
        tierkit.sim(set={"sim.seed": float("nan")})
    with pytest.raises(ValueError, match="executor .dask. is not available"):
        tierkit.compare("quick", executor="dask")
    with pytest.raises(ValueError, match="suite"):
        tierkit.compare("no-such-suite")


def test_catalogs_list_what_is_registered_with_defaults() -> None:
    names = [p["name"] for p in tierkit.policies()]
    for n in ["chrono", "memtis", "freqtier", "multiclock", "pet", "first-touch"]:
        assert n in names
    memtis = next(p for p in tierkit.policies() if p["name"] == "memtis")
    assert memtis["description"] and memtis["defaults"]
    gups = next(w for w in tierkit.workloads() if w["name"] == "gups")
    assert gups["defaults"]["footprint_mib"] > 0
    cxl = next(m for m in tierkit.machines() if m["name"] == "cxl")
    assert cxl["machine_defaults"]["llc_ways"] == 16
    assert "quick" in [s["name"] for s in tierkit.suites()]


def test_compare_returns_the_rows_of_the_clis_results_csv(tmp_path: Path) -> None:
    matrix = tmp_path / "tiny.toml"
    matrix.write_text(TINY_MATRIX)
    py_out = tmp_path / "py"
    df = tierkit.compare(matrix, out=py_out, jobs=2)
    cli_out = tmp_path / "cli"
    subprocess.run([cli(), "compare", "--config", str(matrix), "--jobs", "1",
                    "--out", str(cli_out)], check=True, capture_output=True)
    assert (py_out / "results.csv").read_bytes() == (cli_out / "results.csv").read_bytes()
    pd.testing.assert_frame_equal(df, pd.read_csv(cli_out / "results.csv"))
    assert set(df["policy"]) >= {"first-touch", "autonuma"}
    assert df.attrs["report"] and Path(df.attrs["report"]).exists()
    assert "first-touch" in df.attrs["leaderboard"]
    # Without `out` nothing is left behind.
    df2 = tierkit.compare(matrix, jobs=1)
    pd.testing.assert_frame_equal(df, df2)
    assert df2.attrs["out"] is None and df2.attrs["report"] is None


def test_the_simulation_runs_without_the_gil() -> None:
    done = threading.Event()

    def run() -> None:
        tierkit.sim(policy="autonuma", workload="gups",
                    set={**SMALL, "workload.nr_updates": 3_000_000})
        done.set()

    t = threading.Thread(target=run)
    start = time.monotonic()
    t.start()
    ticks = 0
    while not done.is_set():
        ticks += 1
        time.sleep(0.001)
    t.join()
    elapsed = time.monotonic() - start
    # Holding the GIL for the whole run would leave this thread ~1 tick; free, it
    # ticks about once a millisecond.
    assert elapsed > 0.05, "the run is long enough to tell"
    assert ticks > 20, f"{ticks} ticks in {elapsed:.2f} s"


# --- the Ray executor, on a real cluster started on loopback ----------------------

RAY_MATRIX = TINY_MATRIX.replace('ratios = ["1:8"]', 'ratios = ["1:8", "1:4"]')


@pytest.fixture(scope="module")
def ray_cluster():
    """A head node and one worker node on loopback (`ray start`), stopped after."""
    ray = pytest.importorskip("ray", reason="the ray package is not installed")
    import shutil as _sh
    import sys

    bin_dir = Path(sys.executable).parent
    ray_cli = str(bin_dir / "ray") if (bin_dir / "ray").exists() else _sh.which("ray")
    if ray_cli is None:
        pytest.skip("no `ray` command")
    port = 6000 + os.getpid() % 3000
    common = ["--num-cpus=1", "--object-store-memory=200000000", "--disable-usage-stats"]
    subprocess.run([ray_cli, "start", "--head", f"--port={port}",
                    "--include-dashboard=false", *common], check=True, capture_output=True)
    try:
        subprocess.run([ray_cli, "start", f"--address=127.0.0.1:{port}", *common],
                       check=True, capture_output=True)
        yield f"127.0.0.1:{port}"
    finally:
        if ray.is_initialized():
            ray.shutdown()
        subprocess.run([ray_cli, "stop", "--force"], capture_output=True)


def _ray_compare(matrix: Path, out: Path, address: str, **kw):
    import ray

    try:
        return tierkit.compare(matrix, out=out, executor="ray", address=address, **kw)
    finally:
        ray.shutdown()


def _run_ids(matrix: Path, out: Path) -> list:
    pieces = tierkit._pieces(matrix)
    return [r["id"] for r in json.loads(tierkit._native.plan_matrix(str(out), pieces))]


def test_ray_gives_byte_identical_results_and_resumes(ray_cluster, tmp_path, monkeypatch):
    matrix = tmp_path / "m.toml"
    matrix.write_text(RAY_MATRIX)
    local = tmp_path / "local"
    df_local = tierkit.compare(matrix, out=local, jobs=2)
    on_ray = tmp_path / "ray"
    df_ray = _ray_compare(matrix, on_ray, ray_cluster)
    for f in ["results.csv", "results.json"]:
        assert (on_ray / f).read_bytes() == (local / f).read_bytes(), f
    for rid in _run_ids(matrix, local):
        for f in sorted(p.name for p in (local / "runs" / rid).iterdir()):
            assert (on_ray / "runs" / rid / f).read_bytes() == \
                (local / "runs" / rid / f).read_bytes(), (rid, f)
    pd.testing.assert_frame_equal(df_ray, df_local)
    # Resume: every run is finished, so no task is sent; a task for any run would
    # fail here.
    monkeypatch.setenv("TIERKIT_RAY_TEST_FAIL", f"{_run_ids(matrix, local)[0]}:99:{tmp_path / 'a'}")
    df_again = _ray_compare(matrix, on_ray, ray_cluster, retries=0)
    pd.testing.assert_frame_equal(df_again, df_local)
    assert not (tmp_path / "a").exists(), "no task ran"


def test_ray_retries_a_failed_task_then_reports_it_by_run_id(ray_cluster, tmp_path, monkeypatch):
    matrix = tmp_path / "m.toml"
    matrix.write_text(RAY_MATRIX)
    ids = _run_ids(matrix, tmp_path / "x")
    flaky, broken = ids[-1], ids[-2]
    # Fails once: retried, and the comparison completes.
    monkeypatch.setenv("TIERKIT_RAY_TEST_FAIL", f"{flaky}:1:{tmp_path / 'flaky'}")
    df = _ray_compare(matrix, tmp_path / "once", ray_cluster, retries=2)
    assert len(os.listdir(tmp_path / "flaky")) == 2, "one failure, one retry"
    assert len(df) == len(ids)
    # Fails every time: reported by id after its retries; the other runs are kept.
    monkeypatch.setenv("TIERKIT_RAY_TEST_FAIL", f"{broken}:99:{tmp_path / 'broken'}")
    with pytest.raises(tierkit.CompareFailed) as e:
        _ray_compare(matrix, tmp_path / "always", ray_cluster, retries=1)
    assert set(e.value.failed) == {broken}
    assert broken in str(e.value) and "injected failure" in str(e.value)
    assert len(os.listdir(tmp_path / "broken")) == 2, "tried, retried once"
    kept = tmp_path / "always" / "runs"
    assert sorted(p.name for p in kept.iterdir()) == sorted(i for i in ids if i != broken)
    assert len(e.value.results) > 0


def test_the_cli_hands_executor_ray_to_the_package(ray_cluster, tmp_path):
    import sys

    matrix = tmp_path / "m.toml"
    matrix.write_text(RAY_MATRIX)
    local = tmp_path / "local"
    tierkit.compare(matrix, out=local, jobs=2)
    out = tmp_path / "cli-ray"
    env = {**os.environ, "TIERKIT_PYTHON": sys.executable}
    p = subprocess.run([cli(), "compare", "--config", str(matrix), "--executor", "ray",
                        "--address", ray_cluster, "--out", str(out)],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    assert "report:" in p.stdout
    assert (out / "results.csv").read_bytes() == (local / "results.csv").read_bytes()
    # A Python without the package: one clear line, not a traceback.
    env["TIERKIT_PYTHON"] = "/nonexistent/python3"
    p = subprocess.run([cli(), "compare", "--config", str(matrix), "--executor", "ray",
                        "--out", str(tmp_path / "nope")], capture_output=True, text=True, env=env)
    assert p.returncode != 0 and "TIERKIT_PYTHON" in p.stderr, p.stderr


def test_traces_record_read_import_and_replay(tmp_path: Path) -> None:
    import numpy as np

    t = tmp_path / "gups.tktrace"
    st = tierkit.trace.record("gups", t, set={"workload.footprint_mib": 16,
                                              "workload.nr_updates": 50_000,
                                              "workload.nr_threads": 2}, seed=4)
    assert st["accesses"] > 0 and t.stat().st_size == st["file_bytes"]
    with pytest.raises(ValueError, match="exists"):
        tierkit.trace.record("gups", t)
    chunks = list(tierkit.trace.read(t, chunk=7_000))
    assert all(len(c) <= 7_000 for c in chunks)
    a = tierkit.trace.read_all(t)
    assert a.dtype == tierkit.trace.ACCESS_DTYPE
    assert len(a) == st["accesses"] == sum(len(c) for c in chunks)
    assert set(np.unique(a["thread"])) == {0, 1}
    assert a["write"].any() and (~a["write"]).any()
    # The recorded trace replays as many accesses as the workload it came from.
    direct = tierkit.sim(policy="first-touch", workload="gups", seed=4,
                         set={"workload.footprint_mib": 16, "workload.nr_updates": 50_000,
                              "workload.nr_threads": 2})
    replay = tierkit.sim(policy="first-touch", workload=f"trace:{t}", seed=4)
    assert replay.summary["accesses"] == direct.summary["accesses"]
    # Import: a text trace of three accesses.
    txt = tmp_path / "t.txt"
    txt.write_text("R 0x10000000\nW 0x10000040 5\nR 0x10001000\n")
    imp = tierkit.trace.import_("text", txt, tmp_path / "t.tktrace")
    assert imp["accesses"] == 3
    b = tierkit.trace.read_all(tmp_path / "t.tktrace")
    assert list(b["addr"]) == [0x10000000, 0x10000040, 0x10001000]
    assert list(b["write"]) == [False, True, False]
    with pytest.raises(ValueError, match="lackey"):
        tierkit.trace.import_("nope", txt, tmp_path / "u.tktrace")
