"""The in-model ranking on a tuned model: per hot task in the model against alone, before and after, and the
model's latency before and after, timed side by side.

    cp LOG.jsonl /tmp/rank/m.jsonl   # the pass writes m.in-model.jsonl beside the log it is given
    .venv/bin/python benchmarks/in_model/rank.py --model /tmp/inception147.onnx --log /tmp/rank/m.jsonl \\
        --tasks 4 --top-k 4 --rounds 9 --time-rounds 7 --out /tmp/rank

1. ``before``: the model compiled from the log's fastest records alone (``ApplyHistoryBest.alone_best``).
2. :func:`release.relax.finish.finish_model` ranks the top candidates of the hottest tasks inside the model.
3. ``after``: the model compiled as ``apply_history_best`` now gives it (the in-model choices).
4. Both builds timed in ``--time-rounds`` rounds, shuffled order each round (TVM's ``time_evaluator``: the fastest
   of 5 means of 10 runs per build and round); reported: the median and range over rounds of after / before.

Writes ``<out>/rank.json`` and ``<out>/rank.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--layout", default="auto")
    ap.add_argument("--target", default="llvm")
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--top-k", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--time-rounds", type=int, default=7)
    ap.add_argument("--out", default="/tmp/rank")
    args = ap.parse_args(argv)

    import numpy as np
    import tvm
    from tvm import relax
    from tvm.s_tir.meta_schedule.database import MemoryDatabase

    from release import relax as M
    from release.measure import apply_history_best
    from release.measure.records import add_to_database
    from release.measure.result import provenance
    from release.relax.finish import finish_model
    from release.target import host_machine, machine_of, resolve_target, target_to_json
    from release.threads import thread_count, timing_priority, use_threads

    target = resolve_target(args.target)
    threads = thread_count(target)
    use_threads(threads)
    model = M.load_model(args.model)
    layout = M.default_layout(target) if args.layout == "auto" else args.layout
    tasks = M.extract_tasks(model, target, layout=layout)
    hist = apply_history_best(args.log)
    hist.database(tasks)  # fills the default-schedule lists
    before_db = MemoryDatabase()
    for t in tasks:
        rec = hist.alone_best(t)
        if rec is not None and not hist.keeps_default(t):
            add_to_database(before_db, [rec], t)
    t0 = time.time()
    before = M.compile_model(model, target, before_db, layout=layout)
    compile_s = time.time() - t0
    timing_priority()
    res = finish_model(model, tasks, args.log, target=target, layout=layout, n_tasks=args.tasks, top_k=args.top_k,
                       rounds=args.rounds, on_task=lambda n, rows: print(n, [(r["rank"], round(r["alone_ms"], 3),
                                                                              round(r["in_model_ms"], 3), r["chosen"])
                                                                             for r in rows], file=sys.stderr,
                                                                     flush=True))
    after = M.compile_model(model, target, apply_history_best(args.log).database(tasks), layout=layout)
    M.evaluate(model, after, number=1, repeat=1)  # the output check (raises when it differs)
    dev = tvm.cpu(0)
    xs = [tvm.runtime.tensor(x, dev) for x in model.inputs]
    timers = {}
    for name, ex in (("before", before), ("after", after)):
        vm = relax.VirtualMachine(ex, dev)
        vm["main"](*xs)
        timers[name] = vm.time_evaluator("main", dev, number=10, repeat=5)
    per = {"before": [], "after": []}
    rng = random.Random(0)
    for _ in range(args.time_rounds):
        order = list(per)
        rng.shuffle(order)
        for name in order:
            per[name].append(float(np.min(timers[name](*xs).results)) * 1e3)
    ratios = [a / b for a, b in zip(per["after"], per["before"])]
    tj = target_to_json(target)
    version, rev = provenance()
    out = {"model": args.model, "log": args.log, "layout": layout, "threads": threads,
           "machine": machine_of(tj, host_machine(tj)), "date": time.strftime("%Y-%m-%d %H:%M"), "revision": rev,
           "load": os.getloadavg(), "pass_wall_s": res.wall_s, "compile_s": compile_s, "rows": res.rows,
           "changed": res.changed, "resumed": res.resumed, "skipped": res.skipped, "in_model_ms": res.in_model_ms,
           "before_ms": per["before"], "after_ms": per["after"], "after_over_before": ratios}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "rank.json"), "w") as f:
        json.dump(out, f, indent=1)
    lines = [f"Machine {out['machine']}, {out['date']}, revision {rev}, {threads} threads, load "
             f"{out['load'][0]:.1f}. Command: `python {' '.join(sys.argv)}`. The pass took {res.wall_s:.0f} s "
             f"(one model compile: {compile_s:.0f} s).", "",
             "| task | calls | candidate (rank alone) | logged alone ms | alone now ms | in the model ms [min-max] | "
             "in model / alone now | chosen |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in res.rows:
        lines.append(f"| {r['task'].split('.')[-1]} | {r['calls']} | {r['rank']} | {r['alone_ms']:.3f} | "
                     f"{r['alone_now_ms']:.3f} | {r['in_model_ms']:.3f} [{r['spread'][0]:.3f}-{r['spread'][1]:.3f}] | "
                     f"{r['ratio_now']:.2f} | "
                     f"{'**yes**' if r['chosen'] else ''}{' wrong output' if r['wrong'] else ''} |")
    lines += ["", f"Model end to end ({args.time_rounds} interleaved rounds, fastest of 5 means of 10 runs per round): "
              f"before {np.median(per['before']):.3f} ms, after {np.median(per['after']):.3f} ms; after / before "
              f"median {np.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f})."]
    md = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "rank.md"), "w") as f:
        f.write(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
