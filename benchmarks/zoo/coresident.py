"""What co-resident runtimes cost each other: ONNX Runtime, OpenVINO and a tuned TVM build timed each alone in
a fresh process against all three loaded in one process, on the same threads, for a few rounds.

Why: a reference line is worth printing only if it is the runtime's own speed. In one process, each
runtime's worker threads outlive its call (ONNX Runtime's intra-op pool spins, OpenVINO's TBB workers
and TVM's pool spin before they sleep), and on 2 cores a spinning thread takes a core from the next
runtime timed. Quoted in docs/design/reference-runtimes.md.

Protocol (every figure: 3 warm-up calls, fastest of 7 means of 10 calls, the same Python-level timer
for the three: :func:`release.reference.time_callable`):

- ``alone``: per runtime, a fresh process that loads only that runtime;
- ``together``: one process loads all three (each compiled and warmed up) and times them in turn,
  TVM, ONNX Runtime, OpenVINO, each right after the previous one ran (as an in-process reference
  table is timed).

Each round runs the three ``alone`` processes and one ``together`` process; ``--rounds`` rounds. The
``alone`` processes also measure what each runtime's idle threads burn right after a call returns
(:func:`idle_cpu_ms`: process CPU time while the main thread sleeps 100 ms; CPU time, so a measure of
the mechanism that holds on a busy machine, where the latencies do not).

Usage (about 3 minutes with mobilenet_v2 on 2 cores)::

    .venv/bin/python benchmarks/zoo/coresident.py --model mobilenet_v2 \
        --log benchmarks/results/model-mobilenet-epyc/logs/mobilenet_v2.release+.s0.NCHWc.best.jsonl \
        --rounds 3 --out /tmp/coresident

Writes ``<out>/coresident.json`` and prints one Markdown table (median over rounds of each mode, and
the together/alone ratio per runtime).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

RUNTIMES = ("tvm", "onnxruntime", "openvino")


def prepare(args) -> dict:
    """The ONNX file, the TVM build (``--log``'s best records; else TVM's default schedules) and the inputs."""
    import torch

    from release import relax as M
    from release import zoo
    from release.reference import onnx_exportable
    from release.target import resolve_target
    from release.threads import thread_count

    os.makedirs(args.out, exist_ok=True)
    target = resolve_target(args.target)
    module, (x,) = zoo.build(args.model)
    onnx_path = os.path.join(args.out, f"{args.model}.onnx")
    with torch.no_grad():
        torch.onnx.export(onnx_exportable(module), (x,), onnx_path, dynamo=False)
    model = M.load_model(args.model)
    db, layout = None, None
    if args.log:
        from release.measure import apply_history_best

        layout = M.default_layout(target)
        tasks = M.extract_tasks(model, target, layout=layout)
        db = apply_history_best(args.log).database(tasks)
    ex = M.compile_model(model, target, db, layout=layout if db is not None else None)
    lib = os.path.join(args.out, f"{args.model}.so")
    ex.export_library(lib)
    np.save(os.path.join(args.out, "input.npy"), x.numpy())
    return {"onnx": onnx_path, "lib": lib, "input": os.path.join(args.out, "input.npy"),
            "threads": thread_count(target)}


def worker(which: list, job: dict) -> dict:
    """Load the runtimes of ``which`` in this process, then time each in turn: ``{runtime: ms}``."""
    from release.reference import onnx_runner, time_callable

    x = np.load(job["input"])
    threads = int(job["threads"])
    runs = {}
    for rt in which:
        if rt == "tvm":
            os.environ["TVM_NUM_THREADS"] = str(threads)
            import tvm
            from tvm import relax

            vm = relax.VirtualMachine(tvm.runtime.load_module(job["lib"]), tvm.cpu())
            arg = tvm.runtime.tensor(x, tvm.cpu())
            runs[rt] = lambda vm=vm, arg=arg: vm["main"](arg)
        else:
            runs[rt], _ = onnx_runner(rt, job["onnx"], [x], threads)
        runs[rt]()  # loaded and run once: its threads exist
    out = {}
    for rt in which:
        t = time_callable(runs[rt], threads)
        out[rt] = {"ms": t.seconds * 1e3, "median_ms": t.median * 1e3}
    if len(which) == 1:  # alone: what its idle threads burn right after a call returns
        out[which[0]]["idle_cpu_ms"] = idle_cpu_ms(runs[which[0]])
    return out


def idle_cpu_ms(run, idle_s: float = 0.1, trials: int = 10) -> float:
    """CPU milliseconds the process burns in the ``idle_s`` seconds after ``run()`` returns while its main thread
    sleeps (median of ``trials``): the runtime's worker threads spinning before they sleep. CPU time, not
    wall time: it does not depend on what else the machine runs (a spinning thread that is not scheduled burns
    nothing, so on a busy machine this is a lower bound)."""
    vals = []
    for _ in range(trials):
        run()
        c0 = time.process_time()
        time.sleep(idle_s)
        vals.append((time.process_time() - c0) * 1e3)
    return float(np.median(vals))


def _child(which: list, job_path: str) -> dict:
    p = subprocess.run([sys.executable, __file__, "--worker", ",".join(which), "--job", job_path],
                       capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-2000:])
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="mobilenet_v2")
    ap.add_argument("--log", default=None, help="tuning log whose best records build the TVM side")
    ap.add_argument("--target", default="llvm")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="/tmp/coresident")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--job", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        with open(args.job) as f:
            job = json.load(f)
        print(json.dumps(worker(args.worker.split(","), job)))
        return
    job = prepare(args)
    job_path = os.path.join(args.out, "job.json")
    with open(job_path, "w") as f:
        json.dump(job, f)
    rounds = []
    for r in range(args.rounds):
        alone = {rt: _child([rt], job_path)[rt] for rt in RUNTIMES}
        together = _child(list(RUNTIMES), job_path)
        rounds.append({"alone": alone, "together": together})
        print(f"round {r}: " + "; ".join(f"{rt} alone {alone[rt]['ms']:.3f} together {together[rt]['ms']:.3f} ms"
                                         for rt in RUNTIMES), flush=True)
    with open(os.path.join(args.out, "coresident.json"), "w") as f:
        json.dump({"model": args.model, "log": args.log, "threads": job["threads"], "rounds": rounds}, f, indent=1)
    print(f"\n{args.model}, {job['threads']} threads, {args.rounds} rounds (median over rounds of each figure)\n")
    print("| runtime | alone ms | together ms | together / alone | CPU ms burnt in the 100 ms after a call |\n"
          "|---|---:|---:|---:|---:|")
    for rt in RUNTIMES:
        a = float(np.median([x["alone"][rt]["ms"] for x in rounds]))
        t = float(np.median([x["together"][rt]["ms"] for x in rounds]))
        idle = float(np.median([x["alone"][rt]["idle_cpu_ms"] for x in rounds]))
        print(f"| {rt} | {a:.3f} | {t:.3f} | {t / a:.3f} | {idle:.1f} |")


if __name__ == "__main__":
    main()
