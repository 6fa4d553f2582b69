"""Baseline tuners on ResNet-18 conv2d tasks: best GFLOPS against measurements and wall time.

Full specification (issue 3): tasks resnet18.conv2d.2, .6, .9; tuners random, xgb, ga,
ms-evolutionary; seeds 0, 1, 2; 256 trials each (~3-4 h on a shared 2-core machine)::

    .venv/bin/python benchmarks/baselines/run.py

Reduced run (state what was run!)::

    .venv/bin/python benchmarks/baselines/run.py --tasks resnet18.conv2d.2 --seeds 0 --n-trial 128

Resumable: every (task, tuner, seed) writes a JSON-lines tuning log under ``<out>/logs``; a run
whose log already holds ``n_trial`` measurements is not tuned again, a partial one resumes.
``--report-only`` rebuilds the results from the logs without tuning.

Outputs in ``<out>`` (default ``benchmarks/baselines/results``):

- ``<task>.<tuner>.s<seed>.json``: per measurement, GFLOPS, best-so-far GFLOPS and cumulative
  wall seconds (search + fit + measure, from the records), plus the run's time split;
- ``summary.json`` and ``table.md``: median best GFLOPS per task and tuner over seeds, and the
  share of wall time spent in search, in cost-model fitting and in measurement;
- ``curves.png``: median best GFLOPS against measurements and against wall time, per task.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TASKS = ["resnet18.conv2d.2", "resnet18.conv2d.6", "resnet18.conv2d.9"]
TUNERS = ["random", "xgb", "ga", "ms-evolutionary"]

logger = logging.getLogger("baselines")


def log_path(out: str, task: str, tuner: str, seed: int) -> str:
    return os.path.join(out, "logs", f"{task}.{tuner}.s{seed}.jsonl")


def tune_one(task_name: str, tuner_name: str, seed: int, args) -> None:
    """Tune one (task, tuner, seed) to ``args.n_trial`` measurements, resuming its log."""
    from release.measure import LocalBuilder, LocalRunner, load_records, log_to_file, measure_option
    from release.task import create_task
    from release.tuners import get_tuner

    path = log_path(args.out, task_name, tuner_name, seed)
    task = create_task(task_name, "llvm")
    done = [r for r in load_records(path, task) if r.error_kind != "invalid"]
    if len(done) >= args.n_trial:
        logger.info("%s %s seed %d: %d records, done", task_name, tuner_name, seed, len(done))
        return
    kwargs = {}
    if tuner_name in ("xgb", "ms-evolutionary") and args.plan_size:
        kwargs["plan_size"] = args.plan_size
    tuner = get_tuner(tuner_name, task, seed=seed, **kwargs)
    option = measure_option(LocalBuilder(n_parallel=args.n_parallel, timeout=60),
                            LocalRunner(number=args.number, repeat=args.repeat, min_repeat_ms=args.min_repeat_ms))
    t0 = time.time()
    logger.info("%s %s seed %d: tuning to %d trials (resuming %d)", task_name, tuner_name, seed, args.n_trial, len(done))
    tuner.tune(args.n_trial, option, callbacks=[log_to_file(path)])
    logger.info("%s %s seed %d: best %.2f GFLOPS after %d trials, %.0f s (search %.0f s, fit %.0f s, measure %.0f s)",
                task_name, tuner_name, seed, tuner.best_gflops, tuner.trials, time.time() - t0, tuner.time_search,
                tuner.time_fit, tuner.time_measure)


def curve(task_name: str, tuner_name: str, seed: int, args) -> dict | None:
    """Per-measurement curve of one run from its log (None if no log)."""
    from release.measure import load_records

    path = log_path(args.out, task_name, tuner_name, seed)
    recs = [r for r in load_records(path) if r.name == task_name and r.error_kind != "invalid"][: args.n_trial]
    if not recs:
        return None
    gflops = np.array([r.gflops for r in recs])
    search = np.array([r.search_s for r in recs])
    fit = np.array([r.fit_s for r in recs])
    meas = np.array([r.measure_s for r in recs])
    wall = np.cumsum(search + fit + meas)
    total = float(wall[-1])
    return dict(task=task_name, tuner=tuner_name, seed=seed, n=len(recs), gflops=gflops.round(4).tolist(),
                best=np.maximum.accumulate(gflops).round(4).tolist(), wall_s=wall.round(3).tolist(),
                best_gflops=float(gflops.max()), failed=int(sum(1 for r in recs if not r.ok)),
                search_s=float(search.sum()), fit_s=float(fit.sum()), measure_s=float(meas.sum()), total_s=total)


def report(args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = []
    for task in args.tasks:
        for tuner in args.tuners:
            for seed in args.seeds:
                c = curve(task, tuner, seed, args)
                if c is None:
                    continue
                runs.append(c)
                with open(os.path.join(args.out, f"{task}.{tuner}.s{seed}.json"), "w") as f:
                    json.dump(c, f)
    rows = []
    for task in args.tasks:
        for tuner in args.tuners:
            rs = [r for r in runs if r["task"] == task and r["tuner"] == tuner]
            if not rs:
                continue
            tot = sum(r["total_s"] for r in rs)
            rows.append(dict(task=task, tuner=tuner, seeds=[r["seed"] for r in rs], trials=[r["n"] for r in rs],
                             median_best_gflops=float(np.median([r["best_gflops"] for r in rs])),
                             best_gflops=[round(r["best_gflops"], 2) for r in rs],
                             wall_s=float(np.median([r["total_s"] for r in rs])),
                             search_share=sum(r["search_s"] for r in rs) / tot,
                             fit_share=sum(r["fit_s"] for r in rs) / tot,
                             measure_share=sum(r["measure_s"] for r in rs) / tot))
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(dict(config=dict(tasks=args.tasks, tuners=args.tuners, seeds=args.seeds, n_trial=args.n_trial,
                                   plan_size=args.plan_size, number=args.number, repeat=args.repeat,
                                   min_repeat_ms=args.min_repeat_ms), rows=rows), f, indent=1)
    lines = ["| task | tuner | seeds | trials | median best GFLOPS | best per seed | median wall s | search | fit | measure |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['task']} | {r['tuner']} | {','.join(map(str, r['seeds']))} | "
                     f"{','.join(map(str, r['trials']))} | {r['median_best_gflops']:.2f} | "
                     f"{', '.join(map(str, r['best_gflops']))} | {r['wall_s']:.0f} | {100 * r['search_share']:.1f}% | "
                     f"{100 * r['fit_share']:.1f}% | {100 * r['measure_share']:.1f}% |")
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    tasks = [t for t in args.tasks if any(r["task"] == t for r in runs)]
    if not tasks:
        return
    fig, axes = plt.subplots(2, len(tasks), figsize=(5.5 * len(tasks), 8), squeeze=False)
    for j, task in enumerate(tasks):
        for tuner in args.tuners:
            rs = [r for r in runs if r["task"] == task and r["tuner"] == tuner]
            if not rs:
                continue
            n = min(r["n"] for r in rs)
            best = np.median(np.array([r["best"][:n] for r in rs]), axis=0)
            wall = np.median(np.array([r["wall_s"][:n] for r in rs]), axis=0)
            axes[0, j].plot(np.arange(1, n + 1), best, label=tuner)
            axes[1, j].plot(wall, best, label=tuner)
        axes[0, j].set_title(task)
        axes[0, j].set_xlabel("measurements")
        axes[1, j].set_xlabel("wall time (s): search + fit + measure")
        for i in range(2):
            axes[i, j].set_ylabel("best GFLOPS (median over seeds)")
            axes[i, j].grid(alpha=0.3)
            axes[i, j].legend()
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "curves.png"), dpi=110)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", default=",".join(TASKS))
    p.add_argument("--tuners", default=",".join(TUNERS))
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--n-trial", type=int, default=256)
    p.add_argument("--plan-size", type=int, default=None, help="xgb plan size / ms-evolutionary trials per iteration")
    p.add_argument("--n-parallel", type=int, default=None, help="build workers (default: cores)")
    p.add_argument("--number", type=int, default=4)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--min-repeat-ms", type=int, default=50)
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    p.add_argument("--report-only", action="store_true")
    args = p.parse_args(argv)
    args.tasks = [t for t in args.tasks.split(",") if t]
    args.tuners = [t for t in args.tuners.split(",") if t]
    args.seeds = [int(s) for s in args.seeds.split(",") if s]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stdout)
    for noisy in ("tvm", "tvm.s_tir.meta_schedule"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    os.makedirs(os.path.join(args.out, "logs"), exist_ok=True)
    if not args.report_only:
        for seed in args.seeds:
            for task in args.tasks:
                for tuner in args.tuners:
                    tune_one(task, tuner, seed, args)
                    report(args)
    report(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
