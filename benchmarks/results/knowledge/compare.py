import sys, json
import numpy as np
from release.measure import load_records
def curve(p):
    rs = load_records(p)
    t0 = rs[0].timestamp - (rs[0].measure_s or 0)
    best = 0; out = []
    for i, r in enumerate(rs):
        if r.ok:
            best = max(best, r.gflops)
        out.append((i + 1, r.timestamp - t0, best))
    return out
res = {}
for t in ("xgb", "release+"):
    cold = curve(f"benchmarks/results/layout/nchw/logs/resnet18.conv2d.6-prepack.{t}.s0.jsonl")
    try:
        warm = curve(f"benchmarks/results/knowledge/logs/resnet18.conv2d.6-prepack.{t}.warm-from-conv2d.2.s0.jsonl")
    except Exception as e:
        print(t, "no warm", e); continue
    cold_xgb = curve("benchmarks/results/layout/nchw/logs/resnet18.conv2d.6-prepack.xgb.s0.jsonl")
    target = cold_xgb[-1][2]
    def reach(c):
        for n, s, b in c:
            if b >= target: return n, s
        return None, None
    res[t] = {"cold_best": cold[-1][2], "warm_best": warm[-1][2], "cold_xgb_final": target,
              "cold_n_s_to_xgb_final": reach(cold), "warm_n_s_to_xgb_final": reach(warm),
              "cold_wall_s": cold[-1][1], "warm_wall_s": warm[-1][1], "n": [len(cold), len(warm)]}
print(json.dumps(res, indent=1))
