"""Issue 17, item 5: tuning held-out ResNet-18 layers warm from a knowledge base of the other layers.

Phase 1 (sources): every source layer is tuned cold (``--no-knowledge``) with one tuner for a few trials on
this machine, and the logs are imported into a fresh knowledge base (``release knowledge add``). Logs of
earlier runs on this host can be added with ``--extra-source-logs``. No held-out layer is ever a source.
The rows "..., across networks" read a second base (``kb-cross``) filled the same way from every conv2d
layer of ``--cross-networks`` only (default VGG-16 and AlexNet: no layer of the held-out network). The rows
"ms cold" / "ms seeds" are MetaSchedule's evolutionary search (``--tuner ms-evolutionary``), cold and given
the same seeds through its database (MetaSchedule reads only the tuned workload's records from a database,
so the seeds are how the same knowledge reaches it).

A held-out layer may also be a source (``--holdout 3 --sources 1 2 3 ...``): its base then leaves it out
(leave-one-out, ``kb-sources-no3``), so every layer can be held out in turn against the others. The row
"release+ seeds, sources tuned longer" reads a base of the same sources tuned ``--long-source-trials`` (512)
trials each instead of ``--source-trials`` (96): the knowledge of a user who tuned those layers fully
(``logs/sources-512/``, fresh runs; ``--extra-source-logs`` are not added to it).

Phase 2 (held out): for each held-out layer and seed, cold XGBTuner (AutoTVM's, ``--no-knowledge``) and the
warm rows (each on its own copy of the source base, so no warm run sees another's records), interleaved per
layer so that the machine's load falls on cold and warm runs alike. The driver books each run's wall time
from just before the ``release tune`` process starts (knowledge loading and the cost model's distillation
count) to each logged measurement.

Phase 3 re-times every run's 3 best configs side by side (all runs of a layer interleaved).

Phase 4 (table): per layer and seed, cold xgb's best GFLOPS at ``--n-trial`` is the target; for every row the
measurements and wall seconds to reach it, and the best GFLOPS at equal measurements (64, 128, 256, n).
Ratios are cold xgb's figure over the row's (higher is better for the row). A second table counts the
measurements on each log's curve scaled to the re-time (its drift factor), for rows measured in other
sessions than their cold run. Written to
``OUT/holdout.{md,json}`` and a plot ``OUT/holdout.png``.

Every command is resumable: a log that already holds ``--n-trial`` records is not run again (``release tune``
resumes a shorter one).

Usage (the figures in benchmarks/results/knowledge/holdout/ came from this)::

    RELEASE_TIMING_PRIORITY=realtime .venv/bin/python benchmarks/knowledge/holdout.py \\
        --holdout 4 8 12 --seeds 0 --n-trial 512 --source-trials 96 \\
        --out benchmarks/results/knowledge/holdout
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RELEASE = [str(Path(sys.executable).with_name("release"))]

ROWS = {
    # row name: (tuner, log tag)
    "xgb cold": ("xgb", "cold"),
    "xgb warm": ("xgb", "warm"),
    "release+ warm": ("release+", "warm"),
    "release+ cold": ("release+", "cold"),
    # transfer-tuning seeds (--knowledge-use seeds): the sources' best configs carried into the layer's
    # space are the first round's first half; the cost model is the task's own
    "xgb seeds": ("xgb", "seeds"),
    "release+ seeds": ("release+", "seeds"),
    # the same seeds from a base of other networks only (--cross-networks; the second row)
    "xgb seeds, across networks": ("xgb", "seeds-xnet"),
    "release+ seeds, across networks": ("release+", "seeds-xnet"),
    # MetaSchedule's evolutionary search, cold and given the same seeds through its database (the fair comparison)
    "ms cold": ("ms-evolutionary", "cold"),
    "ms seeds": ("ms-evolutionary", "seeds"),
    # the same seeds from a base of the same source layers tuned longer (--long-source-trials, default 512):
    # knowledge as a user who tuned those layers fully before would have it
    "release+ seeds, sources tuned longer": ("release+", "seeds-long"),
}
#: rows reported when their logs exist, never run by this version: warm runs of the code before the first
#: warm round was made half random and the transfer weighted by its ranking of own data (commit 7f865fe)
REPORT_ONLY = {
    "xgb warm, before the fixes (model-only first round, fully trusted transfer)": ("xgb", "warm-noexplore"),
    "release+ warm, before the fixes": ("release+", "warm-noexplore"),
}


#: the second, looser target: this share of cold xgb's best GFLOPS
NEAR = 0.95


def _rel(network, layer, row, seed):
    tuner, tag = {**ROWS, **REPORT_ONLY}[row]
    return f"logs/{network}.conv2d.{layer}.{tuner}.{tag}.s{seed}.jsonl"


def _n_records(log: Path) -> int:
    if not log.exists():
        return 0
    with open(log) as f:
        return sum(1 for line in f if line.strip())


def _tune(workload: str, tuner: str, n_trial: int, seed: int, log: Path, knowledge: Path | None,
          use: str | None = None, early_termination: float | None = None) -> float | None:
    """Run ``release tune`` unless ``log`` is complete; return the wall-clock start (time.time()) or None."""
    if _n_records(log) >= n_trial:
        return None
    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = RELEASE + ["tune", "--workload", workload, "--tuner", tuner, "--n-trial", str(n_trial),
                     "--seed", str(seed), "--log", str(log), "--no-progress"]
    cmd += ["--knowledge", str(knowledge)] if knowledge else ["--no-knowledge"]
    cmd += ["--knowledge-use", use] if knowledge and use else []
    cmd += ["--early-termination", str(early_termination)] if early_termination is not None else []
    print("$ release", " ".join(cmd[1:]), flush=True)
    start = time.time()
    subprocess.run(cmd, check=True, cwd=ROOT)
    return start


def _log_workload(path) -> str:
    """The registered workload name of a log (its first record's task name, without a layout suffix)."""
    with open(path) as f:
        for line in f:
            if line.strip():
                return json.loads(line)["task"].split("/")[0].split("-")[0]
    return ""


def base_sources(layer: int, sources: list, extra_logs=(), network: str = "resnet18"):
    """The source layers and extra logs of held-out ``layer``'s knowledge base, and the base's suffix.

    Leave-one-out: a held-out layer is never a source of its own base. A layer outside ``sources`` reads
    the base of every source (suffix ""); a layer among them reads a base of the others (suffix
    ``"-no<layer>"``), without the extra logs of that layer either.
    """
    own = f"{network}.conv2d.{layer}"
    if layer not in sources:
        return list(sources), list(extra_logs), ""
    return ([i for i in sources if i != layer], [p for p in extra_logs if _log_workload(p) != own],
            f"-no{layer}")


def _fill_base(args, base: Path, workloads: list, extra_logs=(), trials: int | None = None,
               folder: str = "sources") -> None:
    """Tune each source workload cold (``--source-tuner``, ``trials`` (default ``--source-trials``), seed 0;
    resumable: ``logs/<folder>/``), import the logs (and ``extra_logs``) into the knowledge base ``base``
    unless it exists, and show it. Runs of another length are fresh runs, not the shorter ones resumed: a
    log resumed in another session would rank records of two days of this VM's speed side by side (it moves
    by 10-20 % between sessions), and the seeds are each workload's best logged records."""
    trials = trials or args.source_trials
    logs = []
    for name in workloads:
        log = args.out / "logs" / folder / f"{name}.{args.source_tuner}.s0.jsonl"
        _tune(name, args.source_tuner, trials, 0, log, None)
        logs.append(log)
    if not base.exists():
        subprocess.run(RELEASE + ["knowledge", "add", "--dir", str(base)] + [str(p) for p in logs] + list(extra_logs),
                       check=True, cwd=ROOT)
    subprocess.run(RELEASE + ["knowledge", "show", "--dir", str(base)], check=True, cwd=ROOT)


def _curve(log: Path, start: float | None):
    """[(measurements, wall seconds since start, best GFLOPS so far)] of one log."""
    from release.measure import load_records

    recs = load_records(str(log))
    t0 = start if start is not None else recs[0].timestamp - (recs[0].measure_s or 0.0)
    best, out = 0.0, []
    for i, r in enumerate(recs):
        if r.ok:
            best = max(best, r.gflops)
        out.append((i + 1, r.timestamp - t0, best))
    return out


def _reach(curve, target):
    for n, s, b in curve:
        if b >= target:
            return n, s
    return None, None


def retime_best(task, logs: list, top: int = 3, rounds: int = 3, seed: int = 0) -> tuple[dict, list]:
    """Re-time the ``top`` best logged configs of each log of one task side by side.

    Every config of every log is measured in one runner, in a shuffled order, ``rounds`` times (as
    ``release bench --remeasure``), with ``release tune``'s runner defaults on the task's threads, at the
    priority RELEASE_TIMING_PRIORITY asks for.

    Parameters
    ----------
    task : release.task.Task
    logs : list of (str, Path)
        ``(label, log path)`` of the runs to compare.

    Returns
    -------
    (dict, list)
        ``{label: fastest re-timed GFLOPS of its configs}`` and, per config, ``{"log", "config", "costs"}``
        (every re-timed cost in seconds, for a reader who wants the spread behind a figure).
    """
    import numpy as np

    from release.measure import LocalBuilder, LocalRunner, load_records, measure_option
    from release.measure.measure import Measurer
    from release.threads import thread_count, timing_priority, use_threads

    rng = np.random.default_rng(seed)
    use_threads(thread_count(task.target))
    timing_priority()
    space = task.config_space
    items = []
    for label, path in logs:
        recs = sorted((r for r in load_records(str(path)) if r.ok), key=lambda r: -r.gflops)
        items += [(label, space.canonical(r.config)) for r in recs[:top]]
    if not items:
        return {}, []
    opt = measure_option(LocalBuilder(), LocalRunner(number=4, repeat=3, min_repeat_ms=50))
    costs: dict = {}
    try:
        m = Measurer(task, opt)
        for _ in range(rounds):
            order = rng.permutation(len(items))
            for r in m.measure(list(dict.fromkeys(items[i][1] for i in order))):
                if r.ok:
                    costs.setdefault(tuple(r.config), []).extend(r.costs)
    finally:
        opt["builder"].close()
        opt["runner"].close()
    res: dict = {}
    for label, c in items:
        if tuple(c) in costs:
            res[label] = max(res.get(label, 0.0), task.flop / float(np.min(costs[tuple(c)])) / 1e9)
    return res, [{"log": label, "config": list(c), "costs": costs.get(tuple(c), [])} for label, c in items]


def _retime(args, out: Path, top: int = 3, rounds: int = 3) -> dict:
    """Per log: the fastest re-timed GFLOPS of its ``top`` best logged configs (:func:`retime_best`),
    every log of a layer interleaved."""
    from release.task import create_task

    res: dict = {}
    for layer in args.holdout:
        task = create_task(f"{args.network}.conv2d.{layer}", "llvm")
        logs = [(str(p.relative_to(out)), p)
                for p in sorted((out / "logs").glob(f"{args.network}.conv2d.{layer}.*.jsonl"))  # every run, any seed
                if not p.name.endswith(".rejections.jsonl")]
        got, detail_rows = retime_best(task, logs, top, rounds)
        if not got:
            continue
        res.update(got)
        detail_file = out / "retimed-configs.json"
        detail = json.loads(detail_file.read_text()) if detail_file.exists() else {}
        detail[f"conv2d.{layer}"] = detail_rows
        detail_file.write_text(json.dumps(detail, indent=1))
        print(f"re-timed conv2d.{layer}: " + ", ".join(f"{k.split('/')[-1]} {v:.1f}" for k, v in res.items()
                                                        if f".conv2d.{layer}." in k), flush=True)
    return res


def _drift_factors(out: Path) -> dict:
    """Per log: the median over its re-timed configs of logged mean cost / re-timed fastest cost.

    Logged GFLOPS carry the machine's speed when the run happened (runs of one table ran in different
    sessions, hours or days apart, and this VM's speed moves by 10-20 % between them); the re-time measures
    every log's best configs side by side. Multiplying a log's curve by its factor puts every run on the
    re-time's scale, so measurements to a target compare runs made at different times (the bias of fastest
    against mean is common to all logs and cancels in the ratios)."""
    import numpy as np

    from release.measure import load_records

    detail_file = out / "retimed-configs.json"
    if not detail_file.exists():
        return {}
    ratios: dict = {}
    logged: dict = {}
    for items in json.loads(detail_file.read_text()).values():
        for it in items:
            rel = it["log"]
            if rel not in logged:
                path = out / rel
                logged[rel] = {tuple(r.config): r.mean_cost for r in load_records(str(path)) if r.ok} \
                    if path.exists() else {}
            c = tuple(it["config"])
            if it["costs"] and c in logged[rel]:
                ratios.setdefault(rel, []).append(logged[rel][c] / float(np.min(it["costs"])))
    return {rel: float(np.median(v)) for rel, v in ratios.items()}


def _best_at(curve, n):
    return max((b for m, _, b in curve if m <= n), default=0.0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--network", default="resnet18")
    ap.add_argument("--layers", type=int, default=12, help="conv2d layers of the network (1..N)")
    ap.add_argument("--holdout", type=int, nargs="+", default=[4, 8, 12])
    ap.add_argument("--sources", type=int, nargs="+", default=None,
                    help="source layers (None: every layer not held out); a held-out layer among them is left "
                         "out of its own base (leave-one-out: base kb-sources-no<layer>)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--n-trial", type=int, default=512)
    ap.add_argument("--rows", nargs="+", default=["xgb cold", "xgb warm", "release+ warm"], choices=list(ROWS))
    ap.add_argument("--source-tuner", default="xgb")
    ap.add_argument("--source-trials", type=int, default=96)
    ap.add_argument("--long-source-trials", type=int, default=512,
                    help="trials of each source in the base of the row 'release+ seeds, sources tuned longer' "
                         "(kb-sources<N>; fresh runs in logs/sources-<N>/)")
    ap.add_argument("--extra-source-logs", nargs="*", default=[],
                    help="earlier logs of source layers on this host to add to the base")
    ap.add_argument("--cross-networks", nargs="*", default=["vgg16", "alexnet"],
                    help="networks whose every conv2d layer fills the second base (kb-cross), read by the "
                         "'..., across networks' rows; never the held-out network")
    ap.add_argument("--out", type=Path, default=Path("runs/knowledge/holdout"),
                    help="results folder (default git-ignored; committed: benchmarks/results/knowledge/holdout)")
    ap.add_argument("--early-termination", type=float, default=None,
                    help="passed to release tune (None: its default; 0 matches the rows measured before the "
                         "early termination existed)")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--no-retime", action="store_true", help="skip re-timing the runs' best kernels side by side")
    args = ap.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    starts_file = out / "starts.json"
    starts = json.loads(starts_file.read_text()) if starts_file.exists() else {}

    sources = args.sources or [i for i in range(1, args.layers + 1) if i not in args.holdout]
    kb_cross = out / "kb-cross"
    bases: dict = {}

    def base_of(layer: int, tag: str) -> Path:
        """Held-out ``layer``'s knowledge base for a row of ``tag`` (made once, phase 1 of that base)."""
        if tag == "seeds-xnet":
            return kb_cross
        names, extra, suffix = base_sources(layer, sources, args.extra_source_logs, args.network)
        long = tag == "seeds-long"
        path = out / (f"kb-sources{args.long_source_trials if long else ''}{suffix}")
        if path not in bases:
            # the longer base holds only its fresh runs (one day of this VM's speed), no --extra-source-logs
            _fill_base(args, path, [f"{args.network}.conv2d.{i}" for i in names], [] if long else extra,
                       trials=args.long_source_trials if long else None,
                       folder=f"sources-{args.long_source_trials}" if long else "sources")
            bases[path] = True
        return path

    if not args.report_only:
        # Phase 1: the sources, cold, then one base per held-out layer and kind of row (made when first needed).
        for layer in args.holdout:
            base_of(layer, "seeds")
        if any(ROWS[r][1] == "seeds-xnet" for r in args.rows):
            # the second base: other networks' layers only, tuned as the sources above
            from release.workloads import list_workloads

            if args.network in args.cross_networks:
                ap.error(f"--cross-networks holds {args.network}, the held-out network")
            names = [w.name for w in list_workloads()
                     if w.name.split(".")[0] in args.cross_networks and w.name.split(".")[1] == "conv2d"]
            if not names:
                ap.error(f"--cross-networks {args.cross_networks}: no conv2d workload of these networks")
            _fill_base(args, kb_cross, names)
        # Phase 2: held-out layers, rows interleaved.
        for layer in args.holdout:
            for seed in args.seeds:
                for row in args.rows:
                    tuner, tag = ROWS[row]
                    warm = tag == "warm" or tag.startswith("seeds")
                    use = "seeds" if tag.startswith("seeds") else None
                    log = out / _rel(args.network, layer, row, seed)
                    kb_copy = None
                    if warm:
                        kb_copy = out / "kb-runs" / f"conv2d.{layer}.{tuner}.{tag}.s{seed}"
                        if not kb_copy.exists():
                            shutil.copytree(base_of(layer, tag), kb_copy)
                    start = _tune(f"{args.network}.conv2d.{layer}", tuner, args.n_trial, seed, log, kb_copy,
                                  use, args.early_termination)
                    if start is not None and _n_records(log) == args.n_trial:
                        starts[str(log.relative_to(out))] = start  # a resumed run keeps no start
                        starts_file.write_text(json.dumps(starts, indent=1))

    # Phase 3: every run's best kernels re-timed side by side (logged GFLOPS carry the machine's drift).
    retime_file = out / "retimed.json"
    retimed = json.loads(retime_file.read_text()) if retime_file.exists() else {}
    if not args.report_only and not args.no_retime:
        retimed = {**retimed, **_retime(args, out)}  # layers re-timed by an earlier invocation stay
        retime_file.write_text(json.dumps(retimed, indent=1))

    # Phase 4: the table.
    rows, table = [], {}
    checkpoints = [c for c in (64, 128, 256) if c < args.n_trial] + [args.n_trial]
    drift = _drift_factors(out)
    for layer in args.holdout:
        for seed in args.seeds:
            curves = {}
            for row in [*args.rows, *REPORT_ONLY]:
                rel = _rel(args.network, layer, row, seed)
                if (out / rel).exists():
                    curves[row] = _curve(out / rel, starts.get(rel))
            if "xgb cold" not in curves:
                continue
            target = curves["xgb cold"][-1][2]
            n_cold, s_cold = _reach(curves["xgb cold"], target)
            n95_cold, _ = _reach(curves["xgb cold"], NEAR * target)
            f_cold = drift.get(_rel(args.network, layer, "xgb cold", seed))
            for row, c in curves.items():
                rel = _rel(args.network, layer, row, seed)
                n, s = _reach(c, target)
                n95, s95 = _reach(c, NEAR * target)
                f = drift.get(rel)
                corrected = {}
                if f and f_cold:  # on the re-time's scale: the row's curve x its factor, the target x cold's
                    cc = [(m, t, b * f) for m, t, b in c]
                    nc, _ = _reach(cc, target * f_cold)
                    nc95, _ = _reach(cc, NEAR * target * f_cold)
                    corrected = {"drift_factor": f, "measurements_to_target": nc, "measurements_to_near": nc95,
                                 "fewer_measurements": (n_cold / nc) if nc else None,
                                 "fewer_measurements_to_near": (n95_cold / nc95) if nc95 else None}
                entry = {
                    "layer": layer, "seed": seed, "row": row, "trials": len(c), "target_gflops": target,
                    "measurements_to_target": n, "wall_s_to_target": s, "wall_s_total": c[-1][1],
                    "fewer_measurements": (n_cold / n) if n else None,
                    "less_wall": (s_cold / s) if s else None,
                    "measurements_to_near": n95, "wall_s_to_near": s95,
                    "fewer_measurements_to_near": (n95_cold / n95) if n95 else None,
                    "best_at": {str(k): _best_at(c, k) for k in checkpoints},
                    "timed_from_start": rel in starts,
                    "retimed_gflops": retimed.get(rel),
                    "drift_corrected": corrected,
                }
                rows.append(entry)
                table.setdefault(row, []).append(entry)
    (out / "holdout.json").write_text(json.dumps(rows, indent=1))

    def fmt(v, spec=".2f", none="never"):
        return none if v is None else format(v, spec)

    lines = [f"# Held-out {args.network} layers, warm from the other layers' records",
             "",
             f"Command: `RELEASE_TIMING_PRIORITY=realtime .venv/bin/python benchmarks/knowledge/holdout.py "
             f"--holdout {' '.join(map(str, args.holdout))} --seeds {' '.join(map(str, args.seeds))} "
             f"--n-trial {args.n_trial} --source-trials {args.source_trials}"
             + (" --extra-source-logs ..." if args.extra_source_logs else "") + f" --out {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}`",
             "",
             f"Sources: conv2d.{{{','.join(map(str, sources))}}}, {args.source_tuner}, {args.source_trials} trials each"
             + (f", plus {len(args.extra_source_logs)} earlier logs" if args.extra_source_logs else "") + ".",
             f"A held-out layer among the sources reads a base of the other sources only (leave-one-out). "
             f"Row 'release+ seeds, sources tuned longer': a base of the same sources tuned {args.long_source_trials} "
             f"trials each ({args.source_tuner}, fresh runs: logs/sources-{args.long_source_trials}/, no extra logs).",
             f"Rows '..., across networks': a second base of every conv2d layer of {', '.join(args.cross_networks)} "
             f"only ({args.source_tuner}, {args.source_trials} trials each; no {args.network} layer).",
             f"Target per layer and seed: cold xgb's best GFLOPS at {args.n_trial} trials. 'x fewer' = cold xgb's "
             "measurements (or wall seconds) to that best over the row's; 'never' = not reached.",
             "",
             f"'to {NEAR:.0%}': measurements to {NEAR:.0%} of that best (logged GFLOPS of one config move by a few % "
             "between timings, so the last percent of the exact target is partly noise).",
             "",
             "| layer | seed | row | target GFLOPS | measurements to target | x fewer | wall s to target | x less wall | "
             f"to {NEAR:.0%} | x fewer to {NEAR:.0%} | "
             + " | ".join(f"best@{k}" for k in checkpoints) + " | best re-timed |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|" + "---:|" * (len(checkpoints) + 1)]
    for e in rows:
        lines.append(f"| conv2d.{e['layer']} | {e['seed']} | {e['row']} | {e['target_gflops']:.1f} | "
                     f"{fmt(e['measurements_to_target'], 'd')} | {fmt(e['fewer_measurements'])} | "
                     f"{fmt(e['wall_s_to_target'], '.0f')} | {fmt(e['less_wall'])} | "
                     f"{fmt(e['measurements_to_near'], 'd')} | {fmt(e['fewer_measurements_to_near'])} | "
                     + " | ".join(f"{e['best_at'][str(k)]:.1f}" for k in checkpoints)
                     + f" | {fmt(e['retimed_gflops'], '.1f', 'n/a')} |")
    lines += ["", "Geometric means over layers and seeds (a run that never reached the target counts as reaching "
              f"it at trial {args.n_trial}: its ratio is then an upper bound):", ""]
    import math

    def gm(xs):
        return math.exp(sum(map(math.log, xs)) / len(xs))

    cold_of = {(x["layer"], x["seed"]): x for x in rows if x["row"] == "xgb cold"}  # each row's baseline
    for row, es in table.items():
        cold = [cold_of[(e["layer"], e["seed"])] for e in es]
        fm = [e["fewer_measurements"] or c["measurements_to_target"] / args.n_trial for e, c in zip(es, cold)]
        fm95 = [e["fewer_measurements_to_near"] or c["measurements_to_near"] / args.n_trial for e, c in zip(es, cold)]
        fb = [e["best_at"][str(args.n_trial)] / e["target_gflops"] for e in es]
        fr = [e["retimed_gflops"] / c["retimed_gflops"] for e, c in zip(es, cold)
              if e["retimed_gflops"] and c["retimed_gflops"]]
        # wall: a run that never reached the target counts its whole run (an upper bound on its ratio)
        fw = [c["wall_s_to_target"] / (e["wall_s_to_target"] or e["wall_s_total"]) for e, c in zip(es, cold)]
        fw95 = [c["wall_s_to_near"] / (e["wall_s_to_near"] or e["wall_s_total"]) for e, c in zip(es, cold)]
        lines.append(f"- {row}: {gm(fm):.2f}x fewer measurements ({gm(fm95):.2f}x to {NEAR:.0%}), "
                     f"{gm(fw):.2f}x less wall time ({gm(fw95):.2f}x to {NEAR:.0%}); best at "
                     f"{args.n_trial} / cold xgb's: logged {gm(fb):.3f}"
                     + (f", re-timed side by side {gm(fr):.3f}" if fr else "")
                     + f" (n={len(es)})")
    corr = [e for e in rows if e["drift_corrected"]]
    if corr:
        lines += ["", "Drift-corrected: each log's curve multiplied by its drift factor (median over its re-timed configs "
                  "of logged mean cost / re-timed fastest cost), the target by cold xgb's, so runs made hours or days "
                  "apart compare on the re-time's scale:", "",
                  "| layer | seed | row | drift factor | measurements to target | x fewer | to 95% | x fewer to 95% |",
                  "|---|---|---|---:|---:|---:|---:|---:|"]
        for e in corr:
            d = e["drift_corrected"]
            lines.append(f"| conv2d.{e['layer']} | {e['seed']} | {e['row']} | {d['drift_factor']:.3f} | "
                         f"{fmt(d['measurements_to_target'], 'd')} | {fmt(d['fewer_measurements'])} | "
                         f"{fmt(d['measurements_to_near'], 'd')} | {fmt(d['fewer_measurements_to_near'])} |")
        lines += ["", "Geometric means, drift-corrected (never reached: counted at the last trial, an upper bound):", ""]
        for row in table:
            es = [e for e in corr if e["row"] == row]
            if not es:
                continue
            fm = [e["drift_corrected"]["fewer_measurements"]
                  or cold_of[(e["layer"], e["seed"])]["measurements_to_target"] / args.n_trial for e in es]
            fm95 = [e["drift_corrected"]["fewer_measurements_to_near"]
                    or cold_of[(e["layer"], e["seed"])]["measurements_to_near"] / args.n_trial for e in es]
            lines.append(f"- {row}: {gm(fm):.2f}x fewer measurements to cold xgb's best ({gm(fm95):.2f}x to "
                         f"{NEAR:.0%}) (n={len(es)})")
    (out / "holdout.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        cells = sorted({(e["layer"], e["seed"]) for e in rows})
        if not cells:
            return 0  # no layer has its cold xgb run among --rows: nothing to compare or plot
        # one row of panels per layer, one column per seed; one colour per table row in every panel; the
        # measurement axis is logarithmic (a warm start's first few measurements are where it differs)
        layers = list(dict.fromkeys(layer for layer, _ in cells))
        seeds = sorted({seed for _, seed in cells})
        names = [r for r in [*args.rows, *REPORT_ONLY] if r in table]
        colour = {r: plt.get_cmap("tab20")(i % 20) for i, r in enumerate(names)}
        fig, axes = plt.subplots(len(layers), len(seeds), figsize=(4.2 * len(seeds), 3.0 * len(layers) + 1.2),
                                 squeeze=False, layout="constrained")
        for (i, layer), (j, seed) in ((a, b) for a in enumerate(layers) for b in enumerate(seeds)):
            ax = axes[i][j]
            if (layer, seed) not in cells:
                ax.set_axis_off()
                continue
            for row in names:
                rel = _rel(args.network, layer, row, seed)
                if (out / rel).exists():
                    c = _curve(out / rel, starts.get(rel))
                    ax.plot([m for m, _, _ in c], [b for _, _, b in c], color=colour[row], label=row,
                            lw=2.0 if row == "xgb cold" else 1.2)
            target = next((e["target_gflops"] for e in rows if e["row"] == "xgb cold" and e["layer"] == layer
                           and e["seed"] == seed), None)
            if target:
                ax.axhline(target, color="grey", ls=":", lw=1)
            ax.set_xscale("log")
            ax.set_title(f"{args.network}.conv2d.{layer}, seed {seed}", fontsize=10)
            ax.set_xlabel("measurements (log)", fontsize=8)
            ax.set_ylabel("best GFLOPS (logged)", fontsize=8)
        handles = {h.get_label(): h for ax in axes.flat for h in ax.get_lines() if not h.get_label().startswith("_")}
        fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=3, fontsize=8,
                   title="dotted: cold xgb's best at the last trial (the target)")
        fig.savefig(out / "holdout.png", dpi=110)
    except ImportError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
