"""Ranking fidelity of AdaTune-style early termination, replayed on committed logs.

    .venv/bin/python benchmarks/early_termination_fidelity.py [--ratios 1.5 2 3] [--out benchmarks/results/early_termination]
                                                        [LOG_OR_DIR ...]   # default: benchmarks/results

Every committed tuning log keeps all ``repeat`` costs of each config, in the order they were
measured, so the cut can be replayed exactly: the first cost of a record is what the runner's first
repeat returned (``time_evaluator`` runs the repeats in order, after one warm-up run; the early
terminating runner times the same first repeat). For each log (one task) and each ratio, records
are taken in log order with a running best of fully timed means; a record whose first cost is over
``ratio x best`` is "cut" (its mean becomes that first cost, it does not update the best).

Per ratio, over all logs, reported:

- ``cut_share``: records cut / successful records; ``repeats_saved_share``: repeats not run / all
  repeats (what the run phase saves, to first order, when the timed repeats dominate it);
- ``lost_bests``: cut records whose full mean was below the running best (a new best missed), and
  ``final_best_changed``: logs whose final best config differs from the uncut one, with the worst
  ratio of the true means (1.0 = the same speed);
- ``kendall_tau``: rank agreement of the replayed means with the full means over every successful
  record of a log (median and minimum over logs), and ``top10_overlap`` (median, minimum);
- ``max_cut_error``: the largest |first cost / full mean - 1| among cut records.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys


def load_log(path: str) -> list[dict]:
    """Successful records with at least 2 costs, in file order, as ``{"config", "costs"}``."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if not isinstance(d, dict) or d.get("error_kind") or len(d.get("costs") or []) < 2:
                continue
            if d.get("cut_short"):
                continue  # already cut: nothing to replay
            out.append({"config": tuple(d.get("config") or ()), "costs": [float(c) for c in d["costs"]],
                        "target": d.get("target", ""), "task": d.get("task", ""),
                        "run_s": float(d.get("run_s") or 0.0)})
    return out


def kendall_tau(a: list[float], b: list[float]) -> float:
    from scipy.stats import kendalltau

    tau = kendalltau(a, b).statistic
    return float(tau) if tau == tau else 1.0


def replay(recs: list[dict], ratio: float) -> dict:
    """Replay the cut on one task's records (see the module docstring)."""
    best = float("inf")
    sim, true, lost, cut, saved, repeats = [], [], 0, 0, 0, 0
    errors, run_s, run_saved = [], 0.0, 0.0
    for r in recs:
        mean = sum(r["costs"]) / len(r["costs"])
        first = r["costs"][0]
        repeats += len(r["costs"])
        run_s += r["run_s"]
        if best < float("inf") and first > ratio * best:
            cut += 1
            saved += len(r["costs"]) - 1
            run_saved += r["run_s"] * (len(r["costs"]) - 1) / len(r["costs"])
            lost += mean < best
            errors.append(abs(first / mean - 1.0))
            sim.append(first)
        else:
            best = min(best, mean)
            sim.append(mean)
        true.append(mean)
    i_true = min(range(len(true)), key=true.__getitem__)
    i_sim = min(range(len(sim)), key=sim.__getitem__)
    top = lambda xs: set(sorted(range(len(xs)), key=xs.__getitem__)[:10])  # noqa: E731
    return {"n": len(recs), "cut": cut, "repeats": repeats, "saved": saved, "lost": lost,
            "run_s": run_s, "run_saved": run_saved,
            "best_changed": i_true != i_sim, "best_ratio": true[i_sim] / true[i_true],
            "tau": kendall_tau(sim, true), "top10": len(top(sim) & top(true)) / min(10, len(true)),
            "max_err": max(errors, default=0.0)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*", default=["benchmarks/results"])
    ap.add_argument("--ratios", type=float, nargs="+", default=[1.5, 2.0, 3.0])
    ap.add_argument("--min-records", type=int, default=16, help="skip logs with fewer successful records")
    ap.add_argument("--out", default=None, help="folder for fidelity.json (printed either way)")
    args = ap.parse_args()
    files = []
    for p in args.paths:
        files += sorted(glob.glob(os.path.join(p, "**", "*.jsonl"), recursive=True)) if os.path.isdir(p) else [p]
    files = [f for f in files if not f.endswith(".rejections.jsonl")]
    logs = {}
    for f in files:
        by_task: dict[str, list] = {}
        for r in load_log(f):
            by_task.setdefault(r["task"], []).append(r)
        for task, recs in by_task.items():
            if len(recs) >= args.min_records:
                logs[f"{os.path.relpath(f)}::{task}"] = recs
    targets: dict[str, int] = {}
    for recs in logs.values():
        try:
            mcpu = json.loads(recs[0]["target"]).get("mcpu", "") or "(none)"
        except ValueError:
            mcpu = "(unknown)"
        targets[mcpu] = targets.get(mcpu, 0) + len(recs)
    summary = {"logs": len(logs), "records": sum(len(v) for v in logs.values()), "records_by_mcpu": targets,
               "ratios": {}}
    for ratio in args.ratios:
        per = {k: replay(v, ratio) for k, v in logs.items()}
        vals = list(per.values())
        n = sum(v["n"] for v in vals)
        changed = [k for k, v in per.items() if v["best_changed"]]
        summary["ratios"][f"{ratio:g}"] = {
            "cut_share": sum(v["cut"] for v in vals) / n,
            "repeats_saved_share": sum(v["saved"] for v in vals) / sum(v["repeats"] for v in vals),
            "run_s_saved_share_est": sum(v["run_saved"] for v in vals) / max(1e-12, sum(v["run_s"] for v in vals)),
            "lost_bests": sum(v["lost"] for v in vals),
            "final_best_changed": len(changed),
            "final_best_changed_logs": changed,
            "worst_final_best_ratio": max(v["best_ratio"] for v in vals),
            "kendall_tau_median": statistics.median(v["tau"] for v in vals),
            "kendall_tau_min": min(v["tau"] for v in vals),
            "top10_overlap_median": statistics.median(v["top10"] for v in vals),
            "top10_overlap_min": min(v["top10"] for v in vals),
            "max_cut_error": max(v["max_err"] for v in vals),
        }
    text = json.dumps(summary, indent=2)
    print(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "fidelity.json"), "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
