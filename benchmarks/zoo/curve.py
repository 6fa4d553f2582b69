"""Minutes of tuning each zoo model needed to pass ONNX Runtime and OpenVINO, from a finished
``benchmarks/zoo/run.py`` folder, as a curve per model.

The curve is an estimate, not a series of builds: at each point of the run's wall time, each task's best kernel so
far in the log (its TVM default schedule included: the build keeps it where it is faster) times the task's calls per
inference (the ``weight`` column ``tune-model`` printed), summed: the scheduler's objective (Ansor's and
MetaSchedule's ``sum weight x best latency``). The kernels run slower inside the model than alone (cold caches,
the neighbours' data: docs/design/in-model-ranking.md), so the curve is scaled by one factor per model: the exported
build's measured latency over the estimate at the end of tuning. Where it crosses a runtime's measured latency is
the "minutes to pass" of the table; "not within N min" when it never does.

Writes ``<out>/curve.md`` and ``<out>/curve.png``. Usage::

    .venv/bin/python benchmarks/zoo/curve.py --out /tmp/release-zoo-bench
"""

from __future__ import annotations

import argparse
import json
import os
import re

import numpy as np

RUNTIMES = ("onnxruntime", "openvino")


def task_weights(export_log: str) -> dict[str, int]:
    """Task name prefix (as ``tune-model``'s table prints it, cut at 40 characters) -> calls per inference."""
    weights = {}
    with open(export_log) as f:
        lines = f.read().splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith("task ") and "weight" in ln), None)
    for ln in lines[start + 1:] if start is not None else []:
        m = re.match(r"(\S+)\s+(\d+)\s+[\d.]+\s+[\d.]+\s+\d+\s", ln)
        if not m:
            break
        weights[m.group(1)] = int(m.group(2))
    return weights


def estimate(log: str, weights: dict[str, int], points: np.ndarray) -> tuple[np.ndarray, float]:
    """``sum weight x best so far`` (s) at each of ``points`` (s since the log's first record); also the log's span (s)."""
    recs = [json.loads(ln) for ln in open(log) if ln.strip()]
    recs = [r for r in recs if not r.get("error_kind") and r.get("costs")]
    recs.sort(key=lambda r: r["timestamp"])
    t0 = recs[0]["timestamp"]

    def weight(name):
        return next((w for prefix, w in weights.items() if name.startswith(prefix)), 1)

    names = sorted({r["name"] for r in recs})
    best = {n: np.inf for n in names}
    out, i = [], 0
    for p in points:
        while i < len(recs) and recs[i]["timestamp"] - t0 <= p:
            r = recs[i]
            best[r["name"]] = min(best[r["name"]], float(np.mean(r["costs"])))
            i += 1
        out.append(sum(weight(n) * b for n, b in best.items()) if all(np.isfinite(b) for b in best.values())
                   else np.nan)
    return np.array(out), recs[-1]["timestamp"] - t0


def _median(rounds: list, who: str):
    vals = [r[who]["latency_ms"] for r in rounds if who in r and "latency_ms" in r[who]]
    return float(np.median(vals)) if vals else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="/tmp/release-zoo-bench", help="a finished benchmarks/zoo/run.py folder")
    args = ap.parse_args()
    res = json.load(open(os.path.join(args.out, "results.json")))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(res["models"])
    fig, axes = plt.subplots((len(models) + 2) // 3, 3, figsize=(13, 3.4 * ((len(models) + 2) // 3)), squeeze=False)
    lines = [f"# Minutes of tuning to pass each runtime ({res['machine']}, {res['date']}, revision "
             f"{res.get('revision') or '?'})", "",
             "Estimated from each log (the sum of calls x best kernel so far, scaled to the exported build's measured "
             "latency at the end of tuning; see benchmarks/zoo/curve.py). Latencies in ms.", "",
             "| model | tuned for | build at end | ONNX Runtime | passed after | OpenVINO | passed after |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for ax, m in zip(axes.flat, models):
        r = res["models"][m]
        rounds = r["retimed"][-1]["rounds"] if r.get("retimed") else r["rounds"]
        folder = os.path.join(args.out, m)
        log, export_log = r["tuned"]["log"], os.path.join(folder, "export.log")
        built = _median(rounds, "build")
        if not (os.path.exists(log) and os.path.exists(export_log) and built):
            lines.append(f"| {m} | n/a (no log or build) | | | | | |")
            continue
        span = r["tuned"]["tuning_s"]
        points = np.linspace(0, span, 121)
        est, _ = estimate(log, task_weights(export_log), points)
        scale = built / (est[-1] * 1e3)
        curve = est * 1e3 * scale
        ax.plot(points / 60, curve, label="tuned (estimate)")
        cells = []
        for rt, style in zip(RUNTIMES, ("--", ":")):
            ref = _median(rounds, rt)
            if ref is None:
                cells += ["n/a", ""]
                continue
            ax.axhline(ref, linestyle=style, color="gray", label=rt)
            passed = np.flatnonzero(curve <= ref)
            cells += [f"{ref:.3f}", f"{points[passed[0]] / 60:.1f} min" if passed.size else
                      f"not within {span / 60:.0f} min"]
        ax.set_title(m)
        ax.set_xlabel("tuning (min)")
        ax.set_ylabel("latency (ms)")
        ax.set_ylim(0, 3 * max(built, *(x for x in (_median(rounds, rt) for rt in RUNTIMES) if x)))
        ax.legend(fontsize=7)
        lines.append(f"| {m} | {span / 60:.1f} min | {built:.3f} | " + " | ".join(cells) + " |")
    for ax in list(axes.flat)[len(models):]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "curve.png"), dpi=90)
    with open(os.path.join(args.out, "curve.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
