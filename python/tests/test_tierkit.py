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
    with pytest.raises(ValueError, match="executor 'ray' is not available"):
        tierkit.compare("quick", executor="ray")
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
