"""Chameleon's four-way ablation (SA, RL, SA+AS, RL+AS) plus our variant, on resnet18 conv2d layers.

Usage (the full run the issue asks for; many hours on a 2-core machine)::

    python benchmarks/ablation/run.py --tasks resnet18.conv2d.2 resnet18.conv2d.6 resnet18.conv2d.9 \
        --seeds 0 1 2 --n-trial 512 --out benchmarks/ablation/results

Variants (all AutoTVM's loop, XGBoost cost model with ``itervar`` features, plan size 64):

=========  ===================================================  ===================
name       tuner                                                 paper's label
=========  ===================================================  ===================
sa         ``XGBTuner(task)``                                    AutoTVM (SA)
rl         ``ReleaseTuner(task, sampler=None)``                  RL
sa-as      ``XGBTuner(task, sampler="adaptive")``                SA+AS
release    ``ReleaseTuner(task)``                                RL+AS (Chameleon)
release+   ``ReleasePlusTuner(task)`` = ``ReleaseTuner(task,     ours: half of the episodes start at
           start_from_measured=0.5, min_queries=16000,           the best measured configs; episodes
           ppo_config=PPOConfig(boundary="pushed",               end on stays/clamped moves only; at
           max_minibatches=64))``                                least 16k reward queries per call;
                                                                 at most 64 gradient steps per update
=========  ===================================================  ===================

Resumable: each (task, variant, seed) writes a JSON-lines tuning log under ``OUT/logs``; a run
whose log holds ``n_trial`` records is skipped, a shorter log is resumed (the tuner reloads the
measured configs and refits; the agent's weights are not saved, so a resumed RL run restarts its
agent). ``--report-only`` rebuilds the report from the logs.

Report (per task): measurements and wall time each variant needs to reach the SA baseline's best
at ``n_trial`` (same seed), best GFLOPS at ``n_trial``, and the wall-time split (search, fit,
measurement) from the per-record ``search_s``, ``fit_s``, ``measure_s``. Written as
``OUT/summary.json``, ``OUT/results.md`` and ``OUT/<task>.png``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time

import numpy as np

# ablation variant -> registered tuner name (release.tuners.TUNERS)
VARIANTS = {"sa": "xgb", "rl": "rl", "sa-as": "sa-as", "release": "release", "release+": "release+"}

logger = logging.getLogger("ablation")


def make_tuner(variant: str, task, seed: int, plan_size: int):
    from release.tuners import get_tuner

    return get_tuner(VARIANTS[variant], task, seed=seed, plan_size=plan_size)


def log_path(out: str, task: str, variant: str, seed: int) -> str:
    return os.path.join(out, "logs", f"{task}.{variant}.s{seed}.jsonl")


def run_one(args, task_name: str, variant: str, seed: int) -> None:
    from release.measure import LocalBuilder, LocalRunner, load_records, log_to_file, measure_option
    from release.task import create_task

    path = log_path(args.out, task_name, variant, seed)
    done = len(load_records(path)) if os.path.exists(path) else 0
    if done >= args.n_trial:
        logger.info("skip %s %s seed %d: %d records already", task_name, variant, seed, done)
        return
    task = create_task(task_name, args.target)
    tuner = make_tuner(variant, task, seed, args.plan_size)
    opt = measure_option(LocalBuilder(n_parallel=args.n_parallel, timeout=args.build_timeout),
                         LocalRunner(number=args.number, repeat=args.repeat, min_repeat_ms=args.min_repeat_ms,
                                     timeout=10.0))
    t0 = time.time()
    logger.info("run %s %s seed %d (%d records on disk)", task_name, variant, seed, done)
    tuner.tune(args.n_trial, opt, callbacks=[log_to_file(path)])
    logger.info("done %s %s seed %d: best %.2f GFLOPS, %d trials, %.0f s (search %.0f, fit %.0f, measure %.0f)",
                task_name, variant, seed, tuner.best_gflops, tuner.trials, time.time() - t0, tuner.time_search,
                tuner.time_fit, tuner.time_measure)


# ---------------------------------------------------------------------- report
def curves(path: str, n_trial: int) -> dict:
    """Best-so-far GFLOPS and cumulative wall seconds per measured trial of one log."""
    from release.measure import load_records

    recs = [r for r in load_records(path) if r.error_kind != "invalid"][:n_trial]
    g = np.array([r.gflops if r.ok else 0.0 for r in recs])
    search = np.array([r.search_s for r in recs])
    fit = np.array([r.fit_s for r in recs])
    meas = np.array([r.measure_s for r in recs])
    return {
        "trials": len(recs),
        "best": np.maximum.accumulate(g).tolist() if len(g) else [],
        "wall": np.cumsum(search + fit + meas).tolist(),
        "search_s": float(search.sum()), "fit_s": float(fit.sum()), "measure_s": float(meas.sum()),
        "failed": int(sum(not r.ok for r in recs)),
    }


def reach(curve: dict, target: float):
    """(measurements, wall seconds) at which ``curve`` first reaches ``target``, or (None, None)."""
    best = np.asarray(curve["best"])
    hit = np.flatnonzero(best >= target * (1 - 1e-9))
    if not len(hit):
        return None, None
    i = int(hit[0])
    return i + 1, float(curve["wall"][i])


def _fmt(values, unit=""):
    vals = [v for v in values if v is not None]
    if not vals:
        return "not reached"
    s = f"{np.mean(vals):.0f}{unit}" if np.mean(vals) >= 10 else f"{np.mean(vals):.1f}{unit}"
    if len(vals) < len(values):
        s += f" ({len(vals)}/{len(values)} reached)"
    return s


def report(args, quiet: bool = False) -> dict:
    summary = {"config": {k: v for k, v in vars(args).items() if k != "func"}, "tasks": {}}
    lines = [f"# Ablation: {args.n_trial} trials, seeds {args.seeds}, plan size {args.plan_size}", ""]
    for task in args.tasks:
        runs = {}
        for v in args.variants:
            for s in args.seeds:
                p = log_path(args.out, task, v, s)
                if os.path.exists(p):
                    c = curves(p, args.n_trial)
                    if c["trials"]:
                        runs[(v, s)] = c
        if not runs:
            continue
        rows = {}
        for v in args.variants:
            seeds = [s for s in args.seeds if (v, s) in runs]
            if not seeds:
                continue
            row = {"seeds": seeds, "trials": [runs[(v, s)]["trials"] for s in seeds],
                   "best_gflops": [runs[(v, s)]["best"][-1] for s in seeds],
                   "search_s": [runs[(v, s)]["search_s"] for s in seeds],
                   "fit_s": [runs[(v, s)]["fit_s"] for s in seeds],
                   "measure_s": [runs[(v, s)]["measure_s"] for s in seeds],
                   "to_sa_best_trials": [], "to_sa_best_wall_s": []}
            for s in seeds:
                if ("sa", s) in runs:
                    target = runs[("sa", s)]["best"][-1]
                    n, w = reach(runs[(v, s)], target)
                    row["to_sa_best_trials"].append(n)
                    row["to_sa_best_wall_s"].append(w)
            rows[v] = row
        summary["tasks"][task] = {"variants": rows,
                                  "curves": {f"{v}/s{s}": c for (v, s), c in runs.items()}}
        rem = {}
        rem_path = os.path.join(args.out, "remeasure.json")
        if os.path.exists(rem_path):
            with open(rem_path) as f:
                rem = json.load(f)["gflops"].get(task, {})
        lines += [f"## {task}", "",
                  "| variant | trials | best GFLOPS at end (mean of seeds) | re-measured best, interleaved | "
                  "measurements to SA's best | wall time to SA's best | wall time: search / fit / measure (s) |",
                  "|---|---|---|---|---|---|---|"]
        for v, r in rows.items():
            bg = r["best_gflops"]
            best = f"{np.mean(bg):.2f}" + (f" ± {np.std(bg):.2f}" if len(bg) > 1 else "")
            rg = [rem[f"{v}/s{s}"] for s in r["seeds"] if f"{v}/s{s}" in rem]
            r["remeasured_gflops"] = rg
            rbest = f"{np.mean(rg):.2f}" if rg else "-"
            lines.append(
                f"| {v} | {min(r['trials'])} | {best} | {rbest} | {_fmt(r['to_sa_best_trials'])} | "
                f"{_fmt(r['to_sa_best_wall_s'], ' s')} | {np.mean(r['search_s']):.0f} / {np.mean(r['fit_s']):.0f} / "
                f"{np.mean(r['measure_s']):.0f} |")
        lines.append("")
        _plot(args, task, runs)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    if not quiet:
        print("\n".join(lines))
    return summary


def remeasure(args, top: int = 3, rounds: int = 3) -> dict:
    """Re-measure each run's ``top`` logged configs, all runs interleaved in a shuffled order, ``rounds``
    times, so that every variant's best kernel is timed under the same machine load.

    Returns ``{task: {"variant/sSEED": best GFLOPS (median over rounds, best of its configs)}}`` and
    writes ``OUT/remeasure.json``.
    """
    from release.measure import LocalBuilder, LocalRunner, load_records, measure_option
    from release.measure.measure import Measurer
    from release.task import create_task

    rng = np.random.default_rng(0)
    out = {}
    for task_name in args.tasks:
        task = create_task(task_name, args.target)
        space = task.config_space
        items = []
        for v in args.variants:
            for s in args.seeds:
                p = log_path(args.out, task_name, v, s)
                if not os.path.exists(p):
                    continue
                recs = sorted((r for r in load_records(p)[: args.n_trial] if r.ok), key=lambda r: -r.gflops)
                for r in recs[:top]:
                    items.append((f"{v}/s{s}", space.canonical(r.config)))
        if not items:
            continue
        opt = measure_option(LocalBuilder(n_parallel=args.n_parallel, timeout=args.build_timeout),
                             LocalRunner(number=args.number, repeat=args.repeat, min_repeat_ms=args.min_repeat_ms))
        measurer = Measurer(task, opt)
        costs: dict = {}
        try:
            for _ in range(rounds):
                order = rng.permutation(len(items))
                configs = list(dict.fromkeys(items[i][1] for i in order))
                for res in measurer.measure(configs):
                    if res.ok:
                        costs.setdefault(res.config, []).append(res.mean_cost)
        finally:
            measurer.close()
        best: dict = {}
        for run, c in items:
            if c in costs:
                g = task.flop / float(np.median(costs[c])) / 1e9
                best[run] = max(best.get(run, 0.0), g)
        out[task_name] = best
    with open(os.path.join(args.out, "remeasure.json"), "w") as f:
        json.dump({"top": top, "rounds": rounds, "gflops": out}, f, indent=1)
    return out


def _plot(args, task: str, runs: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for v in args.variants:
        for s in args.seeds:
            if (v, s) not in runs:
                continue
            c = runs[(v, s)]
            color = f"C{list(VARIANTS).index(v)}"
            label = v if s == min(x for (vv, x) in runs if vv == v) else None
            axes[0].plot(np.arange(1, c["trials"] + 1), c["best"], color=color, label=label, alpha=0.8)
            axes[1].plot(c["wall"], c["best"], color=color, label=label, alpha=0.8)
    axes[0].set_xlabel("measurements")
    axes[1].set_xlabel("wall time (s): search + fit + measurement")
    for ax in axes:
        ax.set_ylabel("best GFLOPS so far")
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle(f"{task}: seeds {args.seeds}")
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, f"{task}.png"), dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--tasks", nargs="+", default=["resnet18.conv2d.2", "resnet18.conv2d.6", "resnet18.conv2d.9"])
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--n-trial", type=int, default=512)
    p.add_argument("--plan-size", type=int, default=64)
    p.add_argument("--target", default="llvm")
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    p.add_argument("--n-parallel", type=int, default=None, help="build workers (default: cores)")
    p.add_argument("--build-timeout", type=float, default=60.0)
    p.add_argument("--number", type=int, default=4)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--min-repeat-ms", type=int, default=50)
    p.add_argument("--report-only", action="store_true")
    p.add_argument("--remeasure", action="store_true",
                   help="re-measure every run's top-3 configs interleaved (same load for all), then report")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("release").setLevel(logging.WARNING)
    os.makedirs(os.path.join(args.out, "logs"), exist_ok=True)
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass
    if args.remeasure:
        remeasure(args)
    elif not args.report_only:
        # seed-major order: every variant of seed 0 first, so a partial run already compares them
        for seed in args.seeds:
            for task in args.tasks:
                for v in args.variants:
                    run_one(args, task, v, seed)
                    report(args, quiet=True)
    report(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
