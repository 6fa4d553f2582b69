"""Each tuned kernel's time inside the compiled model against its time alone.

    .venv/bin/python benchmarks/profile/in_model_vs_alone.py --model mobilenet_v2 \\
        --log LOG.best.jsonl --out runs/in-model [--layout NCHWc] [--runs 30]

For each task of the model, the best record of ``--log`` is timed alone with ``release tune``'s runner
(``number=4, repeat=5, min_repeat_ms=50``, the kernel's inputs and weights hot in cache between
repeats), and again with TVM's CPU cache flush before every repeat (``enable_cpu_cache_flush``:
weights and outputs cold). The model is compiled from the same records and profiled with the Relax
VM's instrument hook (:func:`release.profile.profile_tvm`, median of ``--runs`` inferences per
call). A kernel's in-model time over its time alone says what running it between its neighbours
costs (the cache state it finds, the thread pool's wake-up, the profiler's own hook), separately
from the schedule; the logged cost says what the schedule did where it was tuned (another machine
when the log comes from one).

Writes ``<out>/in_model_vs_alone.json`` and ``<out>/in_model_vs_alone.md``; prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import defaultdict


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="mobilenet_v2")
    ap.add_argument("--log", required=True, help="tuning log (e.g. a model tier's <model>...best.jsonl)")
    ap.add_argument("--layout", default="NCHWc")
    ap.add_argument("--runs", type=int, default=30, help="profiled inferences (default 30)")
    ap.add_argument("--target", default="llvm", help="TVM target (default llvm: this CPU, its usable cores); "
                    "'{\"kind\": \"llvm\", \"num-cores\": 1}' times every kernel on one thread")
    ap.add_argument("--out", default=os.path.join("runs", "in-model"))
    args = ap.parse_args(argv)
    if not os.path.isfile(args.log):
        raise SystemExit(f"--log {args.log}: no such file")

    import numpy as np

    from release import relax as M
    from release.measure import LocalBuilder, LocalRunner, apply_history_best, load_records, measure_option
    from release.measure.measure import Measurer
    from release.measure.result import provenance
    from release.profile import profile_tvm
    from release.target import host_machine, machine_of, resolve_target, target_to_json
    from release.threads import thread_count, timing_priority, use_threads

    target = resolve_target(args.target)
    threads = thread_count(target)
    use_threads(threads)
    model = M.load_model(args.model)
    tasks = M.extract_tasks(model, target, layout=args.layout)
    hist = apply_history_best(args.log)
    db = hist.database(tasks)
    ex = M.compile_model(model, target, db, layout=args.layout)
    timing_priority()
    prof = profile_tvm(ex, model.inputs, args.runs)
    in_model = defaultdict(list)
    for c in prof["calls"]:
        in_model[re.sub(r"_prepacked$", "", c["symbol"])].append(c["ms"])
    records = load_records(args.log)
    alone: dict = {}
    for flush in (False, True):
        opt = measure_option(LocalBuilder(), LocalRunner(number=4, repeat=5, min_repeat_ms=50,
                                                         enable_cpu_cache_flush=flush))
        try:
            for t in tasks:
                best = hist.best(t)
                if best is None:
                    continue
                (r,) = Measurer(t, opt).measure([t.config_space.canonical(best.config)])
                row = alone.setdefault(t.key, {"task": t.name, "weight": t.weight, "logged_ms": best.mean_cost * 1e3,
                                               "logged_on": machine_of(best.target, best.machine)})
                row["flush" if flush else "hot"] = float(np.min(r.costs)) * 1e3 if r.ok else None
                print(f"{t.name}: alone {'cold' if flush else 'hot'} {row['flush' if flush else 'hot']}", file=sys.stderr)
        finally:
            opt["builder"].close()
            opt["runner"].close()
    rows = []
    for key, a in alone.items():
        sym = a["task"].split(".", 1)[1]
        calls = in_model.get(sym)
        if not calls or not a.get("hot"):
            continue
        w = a["weight"]
        rows.append({**a, "calls": len(calls), "in_model_ms": sum(calls), "alone_hot_ms": a["hot"] * w,
                     "alone_cold_ms": (a.get("flush") or float("nan")) * w, "logged_total_ms": a["logged_ms"] * w})
    rows.sort(key=lambda r: -r["in_model_ms"])
    tot = {k: float(sum(r[k] for r in rows)) for k in ("in_model_ms", "alone_hot_ms", "alone_cold_ms", "logged_total_ms")}
    tj = target_to_json(target)
    version, rev = provenance()
    head = (f"Machine {machine_of(tj, host_machine(tj))}, {time.strftime('%Y-%m-%d')}, release-tvm {version} revision "
            f"{rev or '?'}, {threads} threads. Command: `python {' '.join(sys.argv)}`\n\n")
    lines = ["| kernel | calls | in model ms | alone, hot ms | alone, cache flushed ms | logged ms (where) | "
             "in model / alone hot |", "|---|---:|---:|---:|---:|---|---:|"]
    for r in rows:
        lines.append(f"| {r['task'].split('.', 1)[1]} | {r['calls']} | {r['in_model_ms']:.3f} | {r['alone_hot_ms']:.3f} | "
                     f"{r['alone_cold_ms']:.3f} | {r['logged_total_ms']:.3f} ({r['logged_on']}) | "
                     f"{r['in_model_ms'] / r['alone_hot_ms']:.2f} |")
    lines.append(f"| **all** | | **{tot['in_model_ms']:.3f}** | **{tot['alone_hot_ms']:.3f}** | "
                 f"**{tot['alone_cold_ms']:.3f}** | **{tot['logged_total_ms']:.3f}** | "
                 f"**{tot['in_model_ms'] / tot['alone_hot_ms']:.2f}** |")
    out = {"model": args.model, "log": args.log, "layout": args.layout, "threads": threads,
           "machine": machine_of(tj, host_machine(tj)), "date": time.strftime("%Y-%m-%d"), "revision": rev or "",
           "end_to_end_kernels_ms": prof["total_ms"], "rows": rows, "totals": tot}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "in_model_vs_alone.json"), "w") as f:
        json.dump(out, f, indent=1)
    md = head + "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "in_model_vs_alone.md"), "w") as f:
        f.write(f"# {args.model}: each kernel in the model and alone\n\n" + md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
