"""Several tuning logs of one model, compiled and timed side by side with ONNX Runtime, in interleaved rounds.

    .venv/bin/python benchmarks/profile/logs_side_by_side.py --model mobilenet_v2 \\
        --logs hot=HOT.jsonl flush=FLUSH.jsonl [--layout auto] [--rounds 7] [--out runs/side-by-side]

On a shared VM two ``release profile`` invocations minutes apart differ by up to 1.7x in ONNX Runtime's own
latency, so builds timed in separate invocations compare nothing. This compiles each log's best records
(``NAME=LOG``: each task's best record, as ``release profile`` and ``tune-model`` apply them; the first log is the
baseline) and times every build and ONNX Runtime once per round, in an order rotated each round: TVM's builds
with :func:`release.bench.time_model` (fastest of 7 means of 10 runs, output checked against the reference),
ONNX Runtime as ``release profile`` times it (fastest of 5 means of 10 runs, without its profiler), all on the
target's threads at timing priority. Reported per build: the fastest and the median over rounds, and the median
(and range) of its per-round ratio to the first build and to ONNX Runtime. Rounds in which a TVM timing was
flagged unreliable (fastest and median of its repeats far apart) are counted, not dropped.

Writes ``<out>/side_by_side.json`` and ``<out>/side_by_side.md``; prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="mobilenet_v2", help="built-in model name or an .onnx file")
    ap.add_argument("--logs", nargs="+", required=True, help="NAME=LOG, the first is the baseline")
    ap.add_argument("--layout", default="auto", help="conv2d layout the logs were tuned with (auto: tune-model's)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--target", default="llvm")
    ap.add_argument("--out", default=os.path.join("runs", "side-by-side"))
    args = ap.parse_args(argv)
    logs = []
    for spec in args.logs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise SystemExit(f"--logs {spec!r}: give NAME=LOG, e.g. hot=runs/mnv2.jsonl")
        if not os.path.isfile(path):
            raise SystemExit(f"--logs {spec!r}: {path} does not exist")
        logs.append((name, path))
    if len({n for n, _ in logs}) != len(logs):
        raise SystemExit("--logs: give each log its own NAME")
    if args.rounds < 1:
        raise SystemExit(f"--rounds {args.rounds}: give at least 1")

    import numpy as np

    from release import relax as M
    from release.bench import time_model
    from release.measure import apply_history_best
    from release.measure.result import provenance
    from release.profile import _onnx_file, _ort_latency_ms
    from release.target import host_machine, resolve_target, target_to_json
    from release.threads import thread_count, timing_priority, use_threads

    target = resolve_target(args.target)
    threads = thread_count(target)
    use_threads(threads)
    model = M.load_model(args.model)
    layout = M.default_layout(target) if args.layout == M.AUTO_LAYOUT else args.layout
    tasks = M.extract_tasks(model, target, layout=layout)
    exes = {}
    for name, path in logs:
        db = apply_history_best(path).database(tasks)
        exes[name] = M.compile_model(model, target, db, layout=layout)
        print(f"{name}: compiled from {path}", file=sys.stderr, flush=True)
    names = [n for n, _ in logs] + ["onnxruntime"]
    timings: dict = {n: [] for n in names}
    reliable: dict = {n: [] for n in names}
    inputs = [np.asarray(x) for x in model.inputs]
    timing_priority()
    with tempfile.TemporaryDirectory() as tmp:
        onnx_path = _onnx_file(model, tmp)
        for r in range(args.rounds):
            order = names[r % len(names):] + names[: r % len(names)]
            for n in order:
                if n == "onnxruntime":
                    timings[n].append(_ort_latency_ms(onnx_path, inputs, threads))
                    reliable[n].append(True)
                else:
                    t = time_model(model, exes[n], threads)
                    timings[n].append(t["latency_ms"])
                    reliable[n].append(bool(t["reliable"]))
            print(f"round {r + 1}/{args.rounds}: " + ", ".join(f"{n} {timings[n][-1]:.3f} ms" for n in names),
                  flush=True)
    base = names[0]

    def ratios(a, b):
        return [x / y for x, y in zip(timings[a], timings[b])]

    rows = {}
    for n in names:
        over_base, over_ort = ratios(n, base), ratios(n, "onnxruntime")
        rows[n] = {"fastest_ms": min(timings[n]), "median_ms": statistics.median(timings[n]),
                   "per_round_ms": timings[n], "over_first_median": statistics.median(over_base),
                   "over_first_range": [min(over_base), max(over_base)],
                   "over_ort_median": statistics.median(over_ort), "over_ort_range": [min(over_ort), max(over_ort)],
                   "unreliable_rounds": sum(not x for x in reliable[n])}
    machine = host_machine(target_to_json(target))
    command = "python benchmarks/profile/logs_side_by_side.py " + " ".join(argv if argv is not None else sys.argv[1:])
    result = {"command": command, "model": model.name, "layout": layout, "rounds": args.rounds, "threads": threads,
              "machine": machine, "release": provenance(), "logs": dict(logs), "builds": rows}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "side_by_side.json"), "w") as f:
        json.dump(result, f, indent=1)
    lines = [f"# {model.name}: tuning logs side by side with ONNX Runtime", "",
             f"Machine {machine}, release {' '.join(provenance())}, {threads} threads, conv2d layout {layout}.",
             f"Command: `{command}`", "",
             f"{args.rounds} interleaved rounds (order rotated each round); TVM: fastest of 7 means of 10 runs, "
             "ONNX Runtime: fastest of 5 means of 10 runs.", "",
             f"| build | fastest ms | median ms | / {base} (median of rounds) | range | / ONNX Runtime (median) | range "
             "| unreliable rounds |", "|---|---:|---:|---:|---|---:|---|---:|"]
    for n, r in rows.items():
        lines.append(f"| {n} | {r['fastest_ms']:.3f} | {r['median_ms']:.3f} | {r['over_first_median']:.3f} | "
                     f"{r['over_first_range'][0]:.3f}-{r['over_first_range'][1]:.3f} | {r['over_ort_median']:.3f} | "
                     f"{r['over_ort_range'][0]:.3f}-{r['over_ort_range'][1]:.3f} | {r['unreliable_rounds']} |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "side_by_side.md"), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
