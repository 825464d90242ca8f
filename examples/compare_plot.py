"""A notebook-style walk through tierkit from Python: run a small comparison, then
plot slowdown per policy and the fast-tier access ratio over time.

    python examples/compare_plot.py [OUT_DIR]      # default: tierkit-example/

Needs the tierkit package (pip install .) and matplotlib. Writes OUT_DIR/slowdown.png,
OUT_DIR/fast_access_ratio.png and the comparison's own outputs under OUT_DIR/compare/.
About a minute on two cores.
"""

import pathlib
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display needed
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

import tierkit  # noqa: E402

out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "tierkit-example")
out.mkdir(parents=True, exist_ok=True)

# A small matrix: five policies on GUPS (4 GiB) and a key-value store (4 GiB) at 1:8
# on a DRAM + CXL machine, ~10 s of machine time each at the papers' time
# constants, sampled at 1/32 (docs/sampling.md).
matrix = out / "matrix.toml"
matrix.write_text("""
policies = ["first-touch", "autonuma", "tpp", "memtis", "multiclock"]
ratios = ["1:8"]
machines = ["cxl"]
seed = 1
set = ['sim.sample_rate="1/32"', "sim.interval_ms=250"]

[[workloads]]
name = "gups"
set = ["workload.nr_updates=500000000"]

[[workloads]]
name = "zipf-kv"
set = ["workload.scale=0.125", "workload.nr_ops=400000000"]
""")
df = tierkit.compare(matrix, out=out / "compare", force=True)
print(df.attrs["leaderboard"])

# 1. Slowdown against all-fast, per policy and workload (the references included).
slow = df.pivot_table(index="policy", columns="workload", values="slowdown")
slow = slow.sort_values(by=list(slow.columns)[0])
ax = slow.plot.barh(figsize=(7, 4.5))
ax.set_xlabel("slowdown vs all-fast (lower is better)")
ax.set_title("tierkit: slowdown per policy, 1:8 on cxl")
plt.tight_layout()
plt.savefig(out / "slowdown.png", dpi=110)
plt.close()

# 2. The fast-tier access ratio over time on GUPS, from each run's time series.
fig, ax = plt.subplots(figsize=(7, 4))
for _, row in df[(df.workload == "gups") & (df.policy != "all-fast")].iterrows():
    ts = pd.read_csv(out / "compare" / "runs" / row["id"] / "timeseries.csv")
    ax.plot(ts["time_s"], ts["fast_access_ratio"], label=row["policy"])
ax.set_xlabel("machine time (s)")
ax.set_ylabel("fast-tier access ratio")
ax.set_title("GUPS 4 GiB, 1:8 on cxl")
ax.legend(fontsize=8)
plt.tight_layout()
plt.savefig(out / "fast_access_ratio.png", dpi=110)
plt.close()
print(f"figures: {out / 'slowdown.png'}, {out / 'fast_access_ratio.png'}")
