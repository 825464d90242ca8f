//! Built-in suites: named comparison matrices, written in the same TOML form a user
//! gives with `tierkit compare --config FILE`.
//!
//! Every name a suite gives must be a registered policy or workload: a suite that
//! names an unknown one fails (tested), it is never skipped.

/// A built-in suite: its name, what it is for, and its matrix as TOML.
pub struct Suite {
    /// Name for `--suite`.
    pub name: &'static str,
    /// One line.
    pub description: &'static str,
    /// The matrix (see [`super::MatrixSpec`]).
    pub toml: &'static str,
}

/// Every built-in suite.
pub const SUITES: &[Suite] = &[
    Suite {
        name: "quick",
        description: "a few minutes: GUPS, a zipfian key-value store and pmbench at 32 GiB, 1:8 on cxl, every registered policy, 5 minutes of machine time each at the papers' time constants (sampled)",
        toml: r#"
policies = ["*"]
ratios = ["1:8"]
machines = ["cxl"]
# Faithful time (issue 15): every policy at its paper's time constants
# (sim.policy_time_scale = 1, the default) for about 5 minutes of machine time, so the
# longest periods (Chrono's and NUMA balancing's 60 s scans) pass at least 5 times.
# Made affordable by sampled simulation at the rate docs/sampling.md validates for
# each workload at this size; the run lengths below give all-fast ~300 s.
set = []

[[workloads]]
name = "gups"
set = ["workload.footprint_mib=32768", "workload.nr_updates=12600000000", "sim.sample_rate=\"1/256\""]

[[workloads]]
name = "zipf-kv"
set = ["workload.nr_records=33554432", "workload.nr_ops=2440000000", "sim.sample_rate=\"1/64\""]

[[workloads]]
name = "pmbench"
set = ["workload.footprint_mib=32768", "workload.nr_accesses=3700000000", "sim.sample_rate=\"1/256\""]
"#,
    },
    Suite {
        name: "default",
        description: "the main workloads of each paper at 1:8 on cxl, every registered policy, at the papers' time constants: the key-value, cache and microbenchmark workloads and BFS for 5 minutes of machine time or more (sampled), PageRank, B+ tree and HPC workloads at their default length (exact, shorter)",
        toml: r#"
policies = ["*"]
ratios = ["1:8"]
machines = ["cxl"]
# Faithful time constants everywhere (sim.policy_time_scale = 1, the default).
set = []

# ~5 minutes of machine time each (all-fast), sampled at the rates docs/sampling.md
# validates for 32 GiB footprints.
[[workloads]]
name = "gups"
set = ["workload.footprint_mib=32768", "workload.nr_updates=12600000000", "sim.sample_rate=\"1/256\""]

[[workloads]]
name = "pmbench"
set = ["workload.footprint_mib=32768", "workload.nr_accesses=3700000000", "sim.sample_rate=\"1/256\""]

[[workloads]]
name = "zipf-kv"
set = ["workload.nr_records=33554432", "workload.nr_ops=2440000000", "sim.sample_rate=\"1/64\""]

[[workloads]]
name = "ycsb"
set = ["workload.nr_records=33554432", "workload.nr_ops=930000000", "sim.sample_rate=\"1/64\""]

# CacheLib at the paper's pace, as the `freqtier` suite runs it (64 GiB, 4 threads,
# 18 us of compute per request, five minutes of machine time), sampled at 1/8:
# validated on this suite's machine with every policy (docs/sampling.md, "CacheLib
# in the default suite").
[[workloads]]
name = "cachelib"
set = ["workload.cache_mib=65536", "workload.nr_objects=64000000", "workload.nr_threads=4", "workload.gap_ns=18000", "workload.nr_accesses=620000000", "sim.sample_rate=\"1/8\""]

# BFS at faithful time, as the `chrono`, `pet` and `freqtier` suites run it: a 2^25-vertex
# Kronecker graph (4.3 GiB), 400 searches from 16 computed sources (~8 minutes of
# machine time all-fast), sampled at 1/64 with strata by mapping (validated by proxy
# on optane 1:3 and on this machine at 1:32, docs/sampling.md "Strata by mapping: BFS
# passes" and "GAP at the freqtier suite's ratios", and for the policies those proxies
# did not run, docs/sampling-matrix-graph-default.toml). HeMem on its paper's 2 MiB
# regions is left out: the sampled fast tier holds about four of them, and the proxy
# measured it 14.5% off (FreqTier's 4 KiB HeMem passes).
[[workloads]]
name = "graph-bfs"
set = ["workload.scale=8", "workload.nr_trials=400", "workload.computed_trials=16", "sim.sample_rate=\"1/64\"", "sim.sample_strata=\"mapping\""]
skip_policies = ["hemem"]

# Exact and at their default length (0.7-10 s of machine time). The paper suites run
# PageRank and Btree at faithful time, sampled (docs/compare.md, "Faithful time"), but
# each such run costs 30-80 s of CPU, so 22 policies of one more such workload would
# take this suite past its 20 minutes (docs/performance.md).
# XSBench has no faithful-time form yet.
[[workloads]]
name = "graph-pr"

[[workloads]]
name = "xsbench"

[[workloads]]
name = "btree"
"#,
    },
    Suite {
        name: "chrono",
        description: "Chrono (EuroSys'25): pmbench (50 tasks x 5 GiB, stride 2), the 50-process ladder (50 x 5 GiB), Graph500-like BFS (5 to 8 minutes of machine time each at all-fast speed, sampled), YCSB at 25% fast on optane; Linux-NB as v5.18 (linux-nb) beside v6.x linux-tiering; MEMTIS with THP but on BFS",
        toml: r#"
# Chrono compares with Linux v5.18's NUMA-balancing tiering (§5, "Linux-NB"):
# linux-nb. linux-tiering, the v6.x mode with hot-page selection, runs beside it.
policies = ["chrono", "chrono-semiauto", "autonuma", "linux-nb", "linux-tiering", "tpp", "autotiering", "multiclock", "memtis"]
ratios = ["1:3"]
machines = ["optane"]
set = []

# pmbench as Chrono ran it (§5.1.1): 50 tasks with 5 GB private working sets,
# normal_ih, stride 2 (every other 4 KiB page accessed), here 50 threads with private
# 5 GiB shares of one 250 GiB mapping. 84 G accesses: ~190 s of machine time all-fast,
# so a policy with the paper's 77% fast accesses runs about five of Chrono's 60 s scans
# (docs/policies/chrono.md, "Comparison"). MEMTIS runs with THP "always", the setting
# the paper kept for it (§5), here and on YCSB; the others on base pages.
[[workloads]]
name = "pmbench"
set = ["workload.footprint_mib=256000", "workload.nr_threads=50", "workload.private_maps=true", "workload.page_stride=2", "workload.nr_accesses=84000000000", "sim.sample_rate=\"1/256\""]
policy_set = { memtis = ["machine.thp=\"always\""] }

# The ladder (§5.1.3, Fig. 9): 50 processes, process i delayed i x 50 cycles per
# access, each with a 5 GiB working set as the tasks of §5.1.1 (the section does not
# give one). Every process runs for the same time, as pmbench's do: the generator
# shares 72 G accesses by each class's rate and the run stops at half of them, before
# any process ends (~270 s all-fast, ~390 s at first touch's 25% fast). Sampled at
# 1/256: ten 2 MiB regions of each process (docs/policies/chrono.md, "The 50-process
# ladder"). MEMTIS with THP as everywhere but BFS. The clairvoyant references read
# the 50 processes' future one batch each in turn, not at their rates, so they would
# rank every process alike (docs/policies/oracle.md, "Limits"): left out here.
[[workloads]]
name = "pmbench-ladder"
set = ["workload.process_footprint_mib=5120", "workload.nr_accesses=72000000000", "sim.max_accesses=36000000000", "sim.sample_rate=\"1/256\""]
policy_set = { memtis = ["machine.thp=\"always\""] }
skip_policies = ["oracle", "oracle-static"]

# BFS at faithful time: a 2^25-vertex Kronecker graph (4.3 GiB), 400 searches from
# 16 computed sources (502 s of machine time all-fast; docs/workloads.md, "Trials,
# computed and replayed"), sampled at 1/64 with strata by mapping (validated by proxy,
# docs/sampling.md "Strata by mapping: BFS passes").
[[workloads]]
name = "graph-bfs"
set = ["workload.scale=8", "workload.nr_trials=400", "workload.computed_trials=16", "sim.sample_rate=\"1/64\"", "sim.sample_strata=\"mapping\""]

[[workloads]]
name = "ycsb"
set = ["workload.nr_records=33554432", "workload.nr_ops=930000000", "sim.sample_rate=\"1/64\"", "workload.mix=\"a\""]
policy_set = { memtis = ["machine.thp=\"always\""] }
"#,
    },
    Suite {
        name: "memtis",
        description: "MEMTIS (SOSP'23): PageRank, XSBench, Btree, Silo-like YCSB-C, liblinear at 1:2, 1:8, 1:16 on optane and cxl, THP always, tiering threads on the application's cores; Btree (16 GiB) and YCSB-C minutes long and sampled, the others exact and short",
        toml: r#"
policies = ["memtis", "hemem", "tpp", "autonuma", "autotiering", "linux-tiering"]
ratios = ["1:2", "1:8", "1:16"]
machines = ["optane", "cxl"]
# MEMTIS §6.1: "We ran all these benchmarks with 20 threads, stressing all CPU cores,
# to account for any CPU overheads from sampling and migration": every tiering thread
# runs on the application's 20 cores, HeMem's busy-polling sampler included
# (docs/policies/hemem.md).
set = ["machine.thp=\"always\"", "machine.tiering_cpus=\"shared\""]
policy_set = { hemem = ["policy.busy_poll_shared_cores=20"] }

[[workloads]]
name = "graph-pr"
set = ["workload.scale=0.5"]

[[workloads]]
name = "xsbench"
set = ["workload.scale=0.5"]

# Btree at faithful time: 108 M keys (~16 GiB with THP) and 32 M lookups, minutes of
# machine time per run, sampled at 1/4 (docs/sampling.md, "Btree at faithful time":
# validated at 1:16, the smallest sampled fast tier; with compute carried every run
# within 4.1% of its exact length, all-fast's error, and every slowdown but the
# oracle's within 3.4%).
[[workloads]]
name = "btree"
set = ["workload.scale=4", "workload.nr_lookups=8000000", "sim.sample_rate=\"1/4\""]

# Silo-like YCSB-C, 32 GiB, ~3 minutes of machine time, sampled at 1/16. With THP,
# 1/64 is not safe for TPP and Linux tiering (docs/sampling.md, "YCSB-C with THP": at
# an eighth of the size, the sampled machine of 1/64 puts their fast-access ratios
# 0.13-0.17 low); that of 1/16 keeps every policy within 1.7% of its exact slowdown.
[[workloads]]
name = "ycsb"
set = ["workload.nr_records=33554432", "workload.nr_ops=930000000", "sim.sample_rate=\"1/16\"", "workload.mix=\"c\""]

[[workloads]]
name = "liblinear"
set = ["workload.scale=0.5"]
"#,
    },
    Suite {
        name: "freqtier",
        description: "FreqTier: CacheLib (64 GiB, 4 threads, 5 minutes of machine time, sampled) at 1:32, 1:16, 1:8 on cxl and at 1:8 on cxl-lowbw; GAP BFS and BC (2^25 vertices, 8 and 7 minutes all-fast, sampled) on cxl; XGBoost (24 Mi rows, 37 rounds, ~5 minutes, sampled); GAP CC (2^25 vertices, ~5 minutes, sampled page by page with its hottest pages in time) on cxl; HeMem on 4 KiB pages as FreqTier's; tiering threads on the app's CPUs",
        toml: r#"
policies = ["freqtier", "linux-tiering-mglru", "autonuma", "tpp", "hemem", "linux-tiering"]
ratios = ["1:32", "1:16", "1:8"]
machines = ["cxl", "cxl-lowbw"]
# The paper's low-bandwidth CXL-2 (§VII-B) had 8 GB of DRAM to 64 GB of CXL memory,
# every workload scaled down to fit: one DRAM size, 1:8. At three ratios its cells
# cost 5 min more of CPU and took the suite a minute past its 30 (docs/performance.md).
machine_ratios = { cxl-lowbw = ["1:8"] }
set = ["machine.tiering_cpus=\"shared\""]
# FreqTier §VI: "All workloads use 16 threads mapped to 16 physical cores. The runtime
# of all tiering systems shares the same 16 physical cores with the application", so
# HeMem's busy-polling sampler takes its share of those 16 cores
# (docs/policies/hemem.md). FreqTier's HeMem was its own re-implementation for CXL on
# 4 KiB pages (§VI, §VII-C: 168 bytes of metadata per page), so `page_kib = 4`.
policy_set = { hemem = ["policy.busy_poll_shared_cores=16", "policy.page_kib=4"] }

# CacheLib at the paper's pace: its 16 threads served 0.84 M requests a second from a
# 256 GB cache, ~19 us per request and thread. Here 4 threads at 18 us of compute per
# request (plus their memory time) on a 64 GiB cache: the same requests per second
# per GiB, so a page is as hot in absolute time as in the paper, which is what the
# policies' thresholds (Linux's 1 s hint-fault latency, FreqTier's counts per
# minute) judge. Five minutes of machine time (five of FreqTier's one-minute windows),
# sampled at 1/8 (docs/sampling.md: every policy within 0.9%, the oracle 2.6%; 1/16 is
# not safe here).
[[workloads]]
name = "cachelib"
set = ["workload.cache_mib=65536", "workload.nr_objects=64000000", "workload.nr_threads=4", "workload.gap_ns=18000", "workload.nr_accesses=620000000", "sim.sample_rate=\"1/8\""]

# GAP as FreqTier ran it (§VI, Table IV: BC, BFS and CC; PageRank is not among its
# kernels). BFS and BC at faithful time: a 2^25-vertex Kronecker graph (4.3 GiB; the
# paper's has 2^31 vertices, 335 GB), 502 s and 406 s of machine time all-fast (BFS
# 400 searches from 16 computed sources, BC 13 trials from 4 computed), sampled at
# 1/64 by mapping (validated by proxy at 1:32, whose sampled fast tier is the
# smallest: docs/sampling.md, "GAP at the freqtier suite's ratios"). On `cxl` only:
# the paper's low-bandwidth CXL-2 ran FreqTier against AutoNUMA alone, and even at
# its one ratio the same kernels' 30 five-minute runs on `cxl-lowbw` would cost ~14
# min more of CPU, taking the suite past its 30 minutes (docs/performance.md).
[[workloads]]
name = "graph-bfs"
machines = ["cxl"]
set = ["workload.scale=8", "workload.nr_trials=400", "workload.computed_trials=16", "sim.sample_rate=\"1/64\"", "sim.sample_strata=\"mapping\""]

[[workloads]]
name = "graph-bc"
machines = ["cxl"]
set = ["workload.scale=16", "workload.nr_trials=13", "workload.computed_trials=4", "sim.sample_rate=\"1/64\"", "sim.sample_strata=\"mapping\""]

# CC at faithful time since 2026-11-29, as the `multiclock` suite runs it: 2^25
# vertices, 53 Afforest runs replaying two computed (~5 minutes of machine time
# all-fast), sampled at 1/64 page by page with the pages that would weigh 3.2% or more
# of the sample sampled in time (by region, its proxy's all-fast run was 34% short:
# docs/sampling.md, "PageRank and CC by mapping"). Validated by proxy on this suite's
# machine and policies at 1:32 (docs/sampling.md, "Pages sampled in time": every policy
# within 0.65% but TPP, 3.06%). On `cxl` only, as BFS and BC.
[[workloads]]
name = "graph-cc"
machines = ["cxl"]
set = ["workload.scale=8", "workload.nr_trials=53", "workload.computed_trials=2", "sim.sample_rate=\"1/64\"", "sim.sample_strata=\"page\"", "sim.time_sampled_weight=0.032"]

# XGBoost at faithful time (§VI: 400 rounds on Criteo, ~9 s each): 8× the default
# rows (24 Mi rows × 256 features, a 6 GiB quantized matrix; the paper's is 248 GB),
# 37 boosting rounds of which 2 computed on the host (~8 s each, 299 s all-fast),
# sampled at 1/128 by mapping (validated by proxy at 1:32: docs/sampling.md, "XGBoost
# at faithful time"). One thread, as before (the paper's 16 threads are not modelled).
[[workloads]]
name = "xgboost"
set = ["workload.scale=8", "workload.nr_rounds=37", "workload.computed_rounds=2", "sim.sample_rate=\"1/128\"", "sim.sample_strata=\"mapping\""]
"#,
    },
    Suite {
        name: "multiclock",
        description: "MULTI-CLOCK (HPCA'22): YCSB A-F and GAP BFS, PageRank and CC (5 to 8 minutes of machine time each at all-fast speed, sampled) on optane, against static tiering, Nimble and AutoTiering",
        toml: r#"
policies = ["multiclock", "nimble", "first-touch", "autotiering", "autotiering-cpm"]
ratios = ["1:3"]
machines = ["optane"]
set = []

[[workloads]]
name = "ycsb"
set = ["workload.nr_records=33554432", "workload.nr_ops=930000000", "sim.sample_rate=\"1/64\"", "workload.mix=\"a\""]

[[workloads]]
name = "ycsb"
set = ["workload.nr_records=33554432", "workload.nr_ops=930000000", "sim.sample_rate=\"1/64\"", "workload.mix=\"b\""]

[[workloads]]
name = "ycsb"
set = ["workload.nr_records=33554432", "workload.nr_ops=930000000", "sim.sample_rate=\"1/64\"", "workload.mix=\"c\""]

[[workloads]]
name = "ycsb"
set = ["workload.nr_records=33554432", "workload.nr_ops=930000000", "sim.sample_rate=\"1/64\"", "workload.mix=\"d\""]

[[workloads]]
name = "ycsb"
set = ["workload.nr_records=33554432", "workload.nr_ops=930000000", "sim.sample_rate=\"1/64\"", "workload.mix=\"f\""]

# BFS at faithful time: a 2^25-vertex Kronecker graph (4.3 GiB), 400 searches from
# 16 computed sources (502 s of machine time all-fast; docs/workloads.md, "Trials,
# computed and replayed"), sampled at 1/64 with strata by mapping (validated by proxy,
# docs/sampling.md "Strata by mapping: BFS passes").
[[workloads]]
name = "graph-bfs"
set = ["workload.scale=8", "workload.nr_trials=400", "workload.computed_trials=16", "sim.sample_rate=\"1/64\"", "sim.sample_strata=\"mapping\""]

# PageRank at faithful time as well, on a graph of the same scale at the same rate: 25
# trials of two iterations (~5 minutes of machine time at all-fast speed) replaying
# one computed trial (every PageRank trial makes the same accesses), sampled page by
# page: by mapping a kept 2 MiB region is first touched in one burst that MULTI-CLOCK's
# paced reclaim cannot follow (docs/sampling.md, "PageRank by page"; validated by
# proxy there).
[[workloads]]
name = "graph-pr"
set = ["workload.scale=16", "workload.nr_trials=25", "workload.computed_trials=1", "sim.sample_rate=\"1/64\"", "sim.sample_strata=\"page\""]

# CC at faithful time: 2^25 vertices, 53 Afforest runs replaying two computed (~5
# minutes of machine time at all-fast speed), sampled at 1/64 page by page with the
# pages that would weigh 3.2% or more of the sample (the giant component's root label
# and its neighbours, 29 pages) sampled in time, validated by proxy (docs/sampling.md,
# "Pages sampled in time").
[[workloads]]
name = "graph-cc"
set = ["workload.scale=8", "workload.nr_trials=53", "workload.computed_trials=2", "sim.sample_rate=\"1/64\"", "sim.sample_strata=\"page\"", "sim.time_sampled_weight=0.032"]
"#,
    },
    Suite {
        name: "pet",
        description: "PET (EuroSys'25): a mix of five processes (80 GiB, 5 minutes of machine time, sampled), a memory-bound hot-set shift (60 s per position, 30 min of machine time, sampled), BFS (8 minutes all-fast, sampled), on optane, with the working set fitting in fast memory and 1.5x oversubscribed",
        toml: r#"
policies = ["pet", "linux-tiering", "tpp", "autotiering", "damon-tiering", "memtis", "mglru-pd", "thermostat"]
# The paper's two setups (§5.2): the working set fits (~45 GB in 64 GB of DRAM: a fast
# tier 1.42 times the footprint) and 1.5x oversubscribed (a working set 1.5 times the
# fast tier: fast:slow 2:1).
ratios = ["1.42x", "2:1"]
machines = ["optane"]

# PET's multi-programmed runs (§5.2.1: SPEC and GAPBS as five to ten processes
# competing for fast memory, an aggregate 80-100 GB) as five processes of 16 GiB each
# (80 GiB), every one about five minutes of machine time alone at all-fast speed with
# 200 ns of compute per access: a hot-set updater (gups), a Gaussian and a uniform page
# walker (pmbench), a zipfian key-value store (zipf-kv) and one hot-set shift of 20 s
# per position (hot-shift), whose positions go idle one after another as an
# application's phases leave their allocations behind. Sampled at 1/64 by mapping
# (validated by a proxy a fifth as long: docs/sampling.md, "The mix at faithful
# time"); the default mix's cache (cachelib) is left out, its 16 MiB hash table, which
# carries each request's compute time, being under one 128 MiB stratum. `oracle` is
# left out: it reads the future one batch per thread in turn, wrong for processes at
# unequal rates (docs/policies/oracle.md, "Limits").
[[workloads]]
name = "mix"
label = "mix-5min"
set = ['workload.members=[{name="gups", footprint_mib=16384, nr_updates=1300000000, gap_ns=200}, {name="pmbench", footprint_mib=16384, nr_accesses=1070000000, delay_ns=200}, {name="pmbench", pattern="uniform", footprint_mib=16384, nr_accesses=1060000000, delay_ns=200}, {name="zipf-kv", nr_records=16777216, nr_ops=880000000, gap_ns=200}, {name="hot-shift", footprint_mib=16384, nr_threads=1, gap_ns=200, interval_accesses=90000000, nr_cycles=1}]', "sim.sample_rate=\"1/64\"", "sim.sample_strata=\"mapping\""]
skip_policies = ["oracle"]

# PET's hot-set shift at its own pace: each of 15 positions stays hot for 60 s of
# machine time, two cycles: 30 min of machine time. 4 threads, each hot set 256 MiB
# (15 GiB in all), 200 ns of compute per access, so placement shows in the runtime
# (PET's benchmark is a bare loop; 200 ns keeps the run at 33 G accesses), sampled at
# 1/64 by mapping: every position is two whole blocks of 64 regions (docs/sampling.md,
# "Memory-bound hot-shift", validated by a proxy with 6 s positions).
[[workloads]]
name = "hot-shift"
label = "hot-shift-60s"
set = ["workload.footprint_mib=15360", "workload.nr_threads=4", "workload.gap_ns=200", "workload.interval_accesses=272000000", "sim.sample_rate=\"1/64\"", "sim.sample_strata=\"mapping\""]

# BFS at faithful time: a 2^25-vertex Kronecker graph (4.3 GiB), 400 searches from
# 16 computed sources (502 s of machine time all-fast; docs/workloads.md, "Trials,
# computed and replayed"), sampled at 1/64 with strata by mapping (validated by proxy,
# docs/sampling.md "Strata by mapping: BFS passes").
[[workloads]]
name = "graph-bfs"
set = ["workload.scale=8", "workload.nr_trials=400", "workload.computed_trials=16", "sim.sample_rate=\"1/64\"", "sim.sample_strata=\"mapping\""]
"#,
    },
];

/// The suite called `name`.
pub fn find(name: &str) -> Option<&'static Suite> {
    SUITES.iter().find(|s| s.name == name)
}

/// All suite names.
pub fn names() -> Vec<&'static str> {
    SUITES.iter().map(|s| s.name).collect()
}
