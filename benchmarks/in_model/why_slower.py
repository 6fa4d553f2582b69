"""Why a tuned kernel runs slower inside its compiled model than alone: each candidate cause measured.

    .venv/bin/python benchmarks/in_model/why_slower.py --model /tmp/inception147.onnx --log LOG.jsonl \\
        --top 6 --rounds 7 --out /tmp/why

The model is compiled from the log's best records (as ``tune-model`` exports it). One inference's kernel calls
are captured with the Relax VM's instrument hook (each call's function and the very argument tensors the memory
planner gave it). Then, for the ``--top`` hottest calls, in ``--rounds`` rounds whose variant order is shuffled
(a loaded 2-core machine drifts; ratios within a round are what is reported), each call is timed:

- ``model``: inside the model (the hook's timestamps around the call, median of ``--infer`` inferences);
- ``hot``: alone, the same function on the same tensors, back to back (the tuner's condition: everything hot);
- ``own buffers``: alone on fresh, persistent copies of its tensors (the planner's placement and aliasing);
- ``fresh output``: alone, each call writing a new, never-touched output (first-touch page faults);
- ``flushed``: alone, a 96 MiB buffer (3x this L3) written before each call (weights and input cold);
- ``after producer``: alone, right after the 3 calls that precede it in the model (the neighbours' data, written
  by both cores, in cache as the model leaves it);
- ``pool idle``: alone, after a 5 ms sleep (TVM's runtime threads parked: the pool's wake-up);
- ``runner``: the task's best record re-timed by ``tune-model``'s runner in its own process (the tuning-time
  cost, its mean of repeats), once per round.

Every alone variant is the median of ``--calls`` timed calls (Python's ``perf_counter_ns`` around the call, as
the hook times it in the model). Minor page faults per call and per inference come from ``getrusage``.
Writes ``<out>/why_slower.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import random
import re
import resource
import sys
import time
from collections import defaultdict


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--layout", default="NCHWc")
    ap.add_argument("--target", default="llvm")
    ap.add_argument("--top", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=15)
    ap.add_argument("--infer", type=int, default=7)
    ap.add_argument("--no-runner", action="store_true", help="skip the tuning-time runner's re-timing")
    ap.add_argument("--tuned-only", action="store_true", help="only calls of tasks the log has a record for (the "
                    "others run TVM's untuned default)")
    ap.add_argument("--out", default="/tmp/why")
    args = ap.parse_args(argv)

    import numpy as np
    import tvm
    from tvm import relax

    from release import relax as M
    from release.measure import LocalBuilder, LocalRunner, apply_history_best, measure_option
    from release.measure.measure import Measurer
    from release.measure.result import provenance
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
    dev = tvm.cpu(0)
    vm = relax.VirtualMachine(ex, dev)
    inputs = [tvm.runtime.tensor(x, dev) for x in model.inputs]
    state = {"mode": None, "seq": [], "t": [], "t0": 0}

    def hook(func, symbol, before, ret, *call_args):
        mode = state["mode"]
        if mode == "capture" and before:
            state["seq"].append((symbol, func, list(call_args)))
        elif mode == "time":
            if before:
                state["t0"] = time.perf_counter_ns()
            else:
                state["t"][-1].append((time.perf_counter_ns() - state["t0"]) / 1e6)
        return 0

    vm.set_instrument(hook)
    for _ in range(3):
        vm["main"](*inputs)
    state["mode"] = "capture"
    vm["main"](*inputs)
    state["mode"] = None
    seq = state["seq"]
    f0 = _faults()
    for _ in range(5):
        vm["main"](*inputs)
    faults_per_inference = (_faults() - f0) / 5

    def in_model() -> list:
        state["mode"], state["t"] = "time", []
        for _ in range(args.infer):
            state["t"].append([])
            vm["main"](*inputs)
        state["mode"] = None
        n = min(len(t) for t in state["t"])
        return list(np.median(np.asarray([t[:n] for t in state["t"]]), axis=0))

    first = in_model()
    kernels = [i for i, (s, _, _) in enumerate(seq) if s.startswith("fused_") or "conv" in s or "matmul" in s]
    task_of = {t.name[len(model.name) + 1:]: t for t in tasks}
    if args.tuned_only:
        tuned = {t.key for t in hist.matched}
        kernels = [i for i in kernels if getattr(task_of.get(re.sub(r"_prepacked$", "", seq[i][0])), "key", None)
                   in tuned]
    hot_ix = sorted(kernels, key=lambda i: -first[i])[: args.top]
    flush = np.ones(96 << 20 >> 3)

    def timed(sym, func, a, before=None, fresh=False) -> tuple:
        ts, faults, keep = [], 0, []
        func(*a)
        for _ in range(args.calls):
            call = a
            if fresh:
                out = a[-1]
                nbytes = int(np.prod(out.shape)) * np.dtype(str(out.dtype)).itemsize
                m = mmap.mmap(-1, max(nbytes, 1))
                arr = np.frombuffer(m, dtype=str(out.dtype), count=int(np.prod(out.shape))).reshape(out.shape)
                call = a[:-1] + [tvm.runtime.from_dlpack(arr)]
                keep.append((m, arr, call[-1]))
            if before is not None:
                before()
            f = _faults()
            t0 = time.perf_counter_ns()
            func(*call)
            ts.append((time.perf_counter_ns() - t0) / 1e6)
            faults += _faults() - f
        del call
        for m, arr, t in keep:
            del t, arr
        keep = [k[0] for k in keep]
        return float(np.median(ts)), faults / args.calls

    def copies(a):
        out = []
        for x in a:
            if hasattr(x, "shape") and hasattr(x, "numpy"):
                y = tvm.runtime.empty(x.shape, str(x.dtype), dev)
                y.copyfrom(x.numpy())
                out.append(y)
            else:
                out.append(x)
        return out

    own = {i: copies(seq[i][2]) for i in hot_ix}

    def producer(i):
        prev = seq[max(0, i - 3):i]
        return lambda: [f(*a) for _, f, a in prev]

    def touch():
        flush[::8] += 1.0  # one write per 64-byte line

    variants = {
        "hot": lambda i: timed(seq[i][0], seq[i][1], seq[i][2]),
        "own buffers": lambda i: timed(seq[i][0], seq[i][1], own[i]),
        "fresh output": lambda i: timed(seq[i][0], seq[i][1], seq[i][2], fresh=True),
        "flushed": lambda i: timed(seq[i][0], seq[i][1], seq[i][2], before=touch),
        "after producer": lambda i: timed(seq[i][0], seq[i][1], seq[i][2], before=producer(i)),
        "pool idle": lambda i: timed(seq[i][0], seq[i][1], seq[i][2], before=lambda: time.sleep(0.005)),
    }
    runner_opt = None
    if not args.no_runner:
        runner_opt = measure_option(LocalBuilder(), LocalRunner(number=4, repeat=3, min_repeat_ms=50))
    res = defaultdict(lambda: defaultdict(list))  # call index -> variant -> per-round ms
    faults = defaultdict(lambda: defaultdict(list))
    rng = random.Random(0)
    try:
        for rnd in range(args.rounds):
            jobs = [("model", None)] + [(v, i) for v in variants for i in hot_ix] + (
                [("runner", i) for i in hot_ix] if runner_opt else [])
            rng.shuffle(jobs)
            for v, i in jobs:
                if v == "model":
                    times = in_model()
                    for j in hot_ix:
                        res[j]["model"].append(times[j])
                elif v == "runner":
                    t = task_of.get(re.sub(r"_prepacked$", "", seq[i][0]))
                    best = hist.best(t) if t is not None else None
                    if best is None:
                        continue
                    (r,) = Measurer(t, runner_opt).measure([t.config_space.canonical(best.config)])
                    if r.ok:
                        res[i]["runner"].append(float(np.mean(r.costs)) * 1e3)
                else:
                    ms, fl = variants[v](i)
                    res[i][v].append(ms)
                    faults[i][v].append(fl)
            print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    finally:
        if runner_opt:
            runner_opt["builder"].close()
            runner_opt["runner"].close()

    names = ["model", "hot", "runner", "own buffers", "fresh output", "flushed", "after producer", "pool idle"]
    rows = []
    for i in hot_ix:
        r = res[i]
        row = {"call": i, "symbol": seq[i][0], "ms": {}, "ratio_to_hot": {}, "faults_per_call": {}}
        for v in names:
            if not r.get(v):
                continue
            row["ms"][v] = float(np.median(r[v]))
            k = min(len(r[v]), len(r["hot"]))
            per = [a / b for a, b in zip(r[v][:k], r["hot"][:k])]
            row["ratio_to_hot"][v] = {"median": float(np.median(per)), "min": float(np.min(per)),
                                      "max": float(np.max(per))}
            if faults[i].get(v):
                row["faults_per_call"][v] = float(np.mean(faults[i][v]))
        rows.append(row)
    tj = target_to_json(target)
    version, rev = provenance()
    out = {"model": args.model, "log": args.log, "threads": threads, "rounds": args.rounds, "calls": args.calls,
           "machine": machine_of(tj, host_machine(tj)), "date": time.strftime("%Y-%m-%d %H:%M"),
           "revision": rev or "", "faults_per_inference": faults_per_inference,
           "kernel_calls": len(seq), "in_model_sum_ms": float(sum(first[i] for i in kernels)), "rows": rows,
           "load": os.getloadavg()}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "why_slower.json"), "w") as f:
        json.dump(out, f, indent=1)
    head = (f"Machine {out['machine']}, {out['date']}, revision {out['revision']}, {threads} threads, load "
            f"{out['load'][0]:.1f}. Command: `python {' '.join(sys.argv)}`. {args.rounds} rounds, variants "
            f"shuffled per round; cell = median over rounds of the per-round median (ms), and in brackets the "
            f"median [min-max] over rounds of the ratio to `hot` in the same round. Minor page faults per "
            f"inference (no hook): {faults_per_inference:.0f}.\n\n")
    lines = ["| call | kernel | " + " | ".join(names) + " |", "|---:|---|" + "---:|" * len(names)]
    for row in rows:
        cells = []
        for v in names:
            if v not in row["ms"]:
                cells.append("-")
                continue
            q = row["ratio_to_hot"][v]
            fl = row["faults_per_call"].get(v)
            cells.append(f"{row['ms'][v]:.3f} ({q['median']:.2f} [{q['min']:.2f}-{q['max']:.2f}])"
                         + (f" {fl:.0f} pf" if fl else ""))
        lines.append(f"| {row['call']} | {row['symbol']} | " + " | ".join(cells) + " |")
    md = head + "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "why_slower.md"), "w") as f:
        f.write(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
