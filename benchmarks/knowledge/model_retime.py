"""Re-time chosen checkpoints of a model-tier run side by side, in interleaved rounds.

    .venv/bin/python benchmarks/knowledge/model_retime.py --out benchmarks/results/model-warm \\
        --points release+@2000 release+:warm@250 release+:warm@2000 [--rounds 5] [--model resnet18]

The model tier (``release bench --tier model``) compiles and times each checkpoint once, one after
another; a warm run and its cold run are then timed minutes apart, and a difference of a few percent
between them can be the machine's. This compiles the named checkpoints (``TUNER@TRIALS``: each task's
best record among the run's first TRIALS records, as the tier does) and times them in ``--rounds``
rounds, every point once per round in a rotated order, each timing the tier's own (fastest of 7 means
of 10 runs, output checked against PyTorch). Reported per point: the fastest and the median over the
rounds, and each point over the first's (per round, then the median of those ratios).

Writes ``<out>/retimed.json`` and ``<out>/retimed.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="the model tier's results folder (results.json, logs/)")
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--points", nargs="+", required=True, help="TUNER@TRIALS, the first is the baseline")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)

    from release import relax as M
    from release.bench import ModelBenchConfig, time_model
    from release.bench.model_tier import _our_database, log_path
    from release.target import resolve_target
    from release.threads import thread_count, use_threads

    res_path = os.path.join(args.out, "results.json")
    if not os.path.exists(res_path):
        raise SystemExit(f"{res_path}: not found; give the --out of a `release bench --tier model` run")
    cfg_d = dict(json.load(open(res_path))["config"])
    cfg_d["out"] = args.out  # the folder as given here (results.json keeps the path it ran with)
    cfg = ModelBenchConfig(**cfg_d)
    points = []
    for p in args.points:
        tuner, _, n = p.rpartition("@")
        if not tuner or not n.isdigit():
            raise SystemExit(f"point {p!r}: give TUNER@TRIALS, e.g. release+@2000")
        path = log_path(cfg, args.model, tuner, cfg.seeds[0])
        if not os.path.exists(path):
            raise SystemExit(f"{path}: no log of {tuner} for {args.model}")
        points.append((p, path, int(n)))
    target = resolve_target(cfg.target)
    threads = thread_count(target)
    use_threads(threads)
    model = M.load_model(args.model)
    tasks = M.extract_tasks(model, target, layout=cfg.layout)
    exes = {}
    for name, path, n in points:
        db, trials = _our_database(path, n, tasks)
        exes[name] = (M.compile_model(model, target, db, layout=cfg.layout), trials)
        print(f"{name}: compiled ({trials} records)", file=sys.stderr)
    names = [p[0] for p in points]
    timings = {nm: [] for nm in names}
    for r in range(args.rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for nm in order:
            timings[nm].append(time_model(model, exes[nm][0], threads))
        print(f"round {r + 1}/{args.rounds}: " + ", ".join(f"{nm} {timings[nm][-1]['latency_ms']:.3f} ms"
                                                          for nm in names), file=sys.stderr)
    base = names[0]
    rows = {}
    for nm in names:
        lat = [t["latency_ms"] for t in timings[nm]]
        ratio = [t["latency_ms"] / b["latency_ms"] for t, b in zip(timings[nm], timings[base])]
        rows[nm] = {"records": exes[nm][1], "fastest_ms": min(lat), "median_ms": statistics.median(lat),
                    "per_round_ms": lat, "over_first_median": statistics.median(ratio),
                    "over_first_range": [min(ratio), max(ratio)],
                    "unreliable_rounds": sum(not t["reliable"] for t in timings[nm])}
    result = {"command": "python benchmarks/knowledge/model_retime.py " + " ".join(argv if argv is not None else sys.argv[1:]),
              "model": args.model, "rounds": args.rounds, "threads": threads, "points": rows}
    with open(os.path.join(args.out, "retimed.json"), "w") as f:
        json.dump(result, f, indent=1)
    lines = [f"# {args.model}: checkpoints re-timed side by side", "", f"Command: `{result['command']}`", "",
             f"{args.rounds} interleaved rounds, each the tier's timing (fastest of 7 means of 10 runs, {threads} threads).",
             "", f"| point | records | fastest ms | median ms | / {base} (median of rounds) | range | unreliable rounds |",
             "|---|---:|---:|---:|---:|---|---:|"]
    for nm, r in rows.items():
        lo, hi = r["over_first_range"]
        lines.append(f"| {nm} | {r['records']} | {r['fastest_ms']:.3f} | {r['median_ms']:.3f} | "
                     f"{r['over_first_median']:.3f} | {lo:.3f}-{hi:.3f} | {r['unreliable_rounds']} |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "retimed.md"), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
