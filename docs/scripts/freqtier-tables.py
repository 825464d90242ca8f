"""Tables of docs/policies/freqtier.md ("Measured", "The paper's claims") from the
results.csv of `tierkit compare --suite freqtier --out DIR`:

    python3 docs/scripts/freqtier-tables.py DIR/results.csv
"""
import csv, math, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def get(w, m, r, p, f):
    for x in rows:
        if x['workload']==w and x['machine']==m and x['ratio']==r and x['policy']==p:
            return float(x[f]) if f!='promoted_pages' else int(x[f])
    return None
wls = ['cachelib','graph-bfs','graph-bc','graph-cc','xgboost']
pols = ['freqtier','linux-tiering-mglru','autonuma','tpp','hemem','linux-tiering','first-touch']
# The paper's AutoNUMA is Linux 6.2 tiering with MGLRU demotion (§VI).
AN = 'linux-tiering-mglru'
print("| workload | machine | ratio | sim s | " + " | ".join(pols) + " | freqtier promoted |")
print("|---|---|---|---:|" + "---:|"*len(pols) + "---:|")
for w in wls:
    for m in ['cxl','cxl-lowbw']:
        for r in ['1:32','1:16','1:8']:
            s = get(w,m,r,'freqtier','sim_seconds')
            if s is None:  # a workload the suite runs on one machine only
                continue
            cells = [f"{get(w,m,r,p,'slowdown'):.3f}" for p in pols]
            print(f"| {w} | {m} | {r} | {s:.2f} | " + " | ".join(cells) + f" | {get(w,m,r,'freqtier','promoted_pages')} |")

def sd(w,m,r,p): return get(w,m,r,p,'slowdown')
# Figures the "why" column quotes, from the same runs.
cl = [(m,r) for m in ['cxl','cxl-lowbw'] for r in ['1:32','1:16','1:8'] if get('cachelib',m,r,'freqtier','sim_seconds') is not None]
ft_over = max(sd('cachelib',m,r,'first-touch') for m,r in cl) - 1
moves = [get('cachelib','cxl',r,'freqtier','promoted_pages') + get('cachelib','cxl',r,'freqtier','demoted_pages') for r in ['1:32','1:16','1:8']]
static_lead = sd('xgboost','cxl','1:32','first-touch') / sd('xgboost','cxl','1:32','oracle-static') - 1
print()
print("| claim | paper | tierkit (freqtier suite) | reproduced? | why |")
print("|---|---|---|---|---|")
# 1 CacheLib beats all baselines at every ratio (CXL-1)
lost = [f"{r} vs {p} ({sd('cachelib','cxl',r,'freqtier'):.3f} vs {sd('cachelib','cxl',r,p):.3f})"
        for r in ['1:32','1:16','1:8'] for p in [AN,'tpp','hemem'] if sd('cachelib','cxl',r,'freqtier') >= sd('cachelib','cxl',r,p)]
beat = "beats AutoNUMA and TPP at every ratio" if not any(AN in l or 'tpp' in l for l in lost) else "does not beat AutoNUMA/TPP everywhere"
print(f"| CacheLib: beats all baselines at every ratio | §VII-A, Fig. 8 | {beat}; loses to {'; '.join(l for l in lost) or 'none'} | {'yes' if not lost else 'no'} | 5-minute runs of a 64 GiB cache at 18 µs per request (sampled at 1/8): first-touch is within {ft_over*100:.1f}% of all-fast, so the tiering CPU on the application's cores decides the order; FreqTier's {min(moves)/1e6:.1f}–{max(moves)/1e6:.1f} M migrations (demotions while the cache fills) cost less than HeMem's busy-polling sampler, which takes 1/17 of the application's 16 cores (charged since 2026-11-27; before, with the poller not charged, HeMem ran as fast as first-touch and FreqTier lost to it) |")
# 2 GAP at 1:32 over AutoNUMA
g = {k: sd(k,'cxl','1:32',AN)/sd(k,'cxl','1:32','freqtier')-1 for k in ['graph-bc','graph-bfs','graph-cc']}
ok = all(v>0 for v in g.values())
print(f"| GAP over AutoNUMA at 1:32 (BC / BFS / CC) | +3.8% / +17.3% / +18.2% (§VII-A) | {g['graph-bc']*100:+.1f}% / {g['graph-bfs']*100:+.1f}% / {g['graph-cc']*100:+.1f}% | {'yes' if ok else 'no'} | BFS, BC and CC at faithful time (2^25 vertices, ~5 min all-fast, 1/64; BFS and BC by mapping, CC page by page with its hottest pages sampled in time); FreqTier's lead grows with the fast tier on BFS and BC and holds on CC, where the paper's shrinks (gone at 1:8): Linux tiering with MGLRU promotes millions of pages a search touches once and runs behind first-touch on BFS (docs/policies/freqtier.md) |")
# 3 GAP at 1:8 ≈ AutoNUMA
g8 = {k: sd(k,'cxl','1:8',AN)/sd(k,'cxl','1:8','freqtier')-1 for k in ['graph-bc','graph-bfs','graph-cc']}
close = all(abs(v)<0.03 for v in g8.values())
print(f"| GAP at 1:8: FreqTier ≈ AutoNUMA | §VII-A | {g8['graph-bc']*100:+.1f}% / {g8['graph-bfs']*100:+.1f}% / {g8['graph-cc']*100:+.1f}% (BC / BFS / CC, over AutoNUMA) | {'yes' if close else 'no'} | within 3% counts as ≈ |")
# 4 XGBoost 1:32 %all-local vs AutoNUMA
xf, xa = 1/sd('xgboost','cxl','1:32','freqtier'), 1/sd('xgboost','cxl','1:32',AN)
print(f"| XGBoost 1:32: FreqTier 95.9% of all-local, 7.6 points above AutoNUMA | §VII-A | FreqTier {xf*100:.1f}%, AutoNUMA {xa*100:.1f}% of all-local ({(xf-xa)*100:+.1f} points) | {'partly' if xf>xa else 'no'} | our XGBoost-like workload is not the paper's: every level streams the matrix from the slow tier (5-minute runs, sampled at 1/128 by mapping; the static oracle is only {static_lead*100:.0f}% faster than first-touch at 1:32) |")
# 5 CXL-2 low bandwidth: the paper's one DRAM size, 8 GB to 64 GB of CXL (1:8)
lw = [w for w in wls if sd(w,'cxl-lowbw','1:8','freqtier') is not None]
rat = [sd(w,'cxl-lowbw','1:8',AN)/sd(w,'cxl-lowbw','1:8','freqtier') for w in lw]
gm = math.exp(sum(map(math.log,rat))/len(rat))
wins = sum(r>1 for r in rat)
print(f"| Low-bandwidth CXL (CXL-2): FreqTier > AutoNUMA on every workload, 1.14× on average | §VII-B, Fig. 10 | 1:8 on `cxl-lowbw` (the paper's 8 GB of DRAM to 64 GB of CXL): ahead on {wins} of {len(rat)} workloads, geomean {gm:.3f}× | {'yes' if wins==len(rat) and gm>1 else ('partly' if gm>1 else 'no')} | the GAP kernels run on `cxl` only; CacheLib and XGBoost, both at faithful time, on both machines |")
# 6 CDN: FreqTier 1:32 beats AutoNUMA 1:16
f32, a16 = sd('cachelib','cxl','1:32','freqtier'), sd('cachelib','cxl','1:16',AN)
print(f"| CacheLib: 2× less local DRAM than AutoNUMA (FreqTier 1:32 beats AutoNUMA 1:16) | §VII-A | FreqTier 1:32 {f32:.3f}× vs AutoNUMA 1:16 {a16:.3f}× | {'partly' if f32<a16 else 'no'} | the ordering holds, but by AutoNUMA's tiering CPU on the application's cores (it promotes and demotes the cache's fill), not by its hit ratio: first-touch is within {ft_over*100:.1f}% of all-fast |")
