"""Warm start across tasks vs a fresh agent: release+ on conv2d.6, same seeds, first 256 trials.

Run `benchmarks/warm_start/run.sh` first (3 x 256 trials, ~10 min on 2 cores), then
`.venv/bin/python benchmarks/warm_start/report.py`. Needs the ablation tier's logs (`release bench --tier ablation`)."""
from release import bench
from release.measure.records import load_records
L = "benchmarks/results/logs/resnet18.conv2d.6.%s.s%d.jsonl"
rows = []
for s in (0, 1, 2):
    recs = load_records("benchmarks/results/warm_start/resnet18.conv2d.6.release+warm.s%d.jsonl" % s)
    if not recs:
        continue
    warm = bench.Curve.from_records(recs)
    n = len(warm.gflops)
    fresh = bench.Curve.from_records(load_records(L % ("release+", s))[:n])
    sa = bench.Curve.from_records(load_records(L % ("xgb", s))[:n])
    cmp = bench.compare(fresh, warm, rounds=2)
    line = [s, n] + [f"{c.at(k):.1f}" for c in (sa, fresh, warm) for k in (128, 192, n)]
    print(f"seed {s}, n={n}: best GFLOPS at 128/192/{n}: SA {line[2:5]}, fresh {line[5:8]}, warm {line[8:11]}; "
          f"warm vs fresh: time to fresh's best {cmp['time_speedup']:.2f}x (reached {cmp['reached']}), "
          f"measurements {cmp['measure_ratio']:.2f}x; wall s fresh {fresh.wall[-1]:.0f}, warm {warm.wall[-1]:.0f} "
          f"(search+fit {fresh.search[-1]:.0f} / {warm.search[-1]:.0f})")
    rows.append((warm.at(n) / fresh.at(n), cmp["time_speedup"]))
if rows:
    print("geomean warm/fresh best at n: %.3f; time speed-up to fresh's best: %.3f" %
          (bench.geomean([r[0] for r in rows]), bench.geomean([r[1] for r in rows])))
