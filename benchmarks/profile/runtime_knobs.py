"""What the runtime around the kernels costs: one tuned build run under TVM's runtime knobs, against ONNX Runtime.

    .venv/bin/python benchmarks/profile/runtime_knobs.py --model resnet18 --log LOG.jsonl --out runs/knobs \\
        [--layout NCHWc] [--rounds 3]

The model is compiled once from ``--log``'s best records in each of ``relax.build``'s execution modes
(``bytecode``, the VM interpreting the model's function, and ``compiled``, the function generated as TIR) and
exported. Then, per round, every configuration runs in its own process (TVM's pool reads its environment once):

* ``bytecode`` / ``compiled``: TVM's defaults;
* ``spin-0``: ``TVM_THREAD_POOL_SPIN_COUNT=0`` (workers sleep as soon as a kernel ends);
* ``spin-long``: ``TVM_THREAD_POOL_SPIN_COUNT=100000000`` (workers spin between kernels);
* ``no-bind``: ``TVM_BIND_THREADS=0`` (workers not pinned to cores);
* ``exclude-w0``: ``TVM_EXCLUDE_WORKER0=0``.

Each process checks the output against the model's reference, then times TVM (fastest of 7 means of 10 runs,
as ``release.relax.evaluate``) and ONNX Runtime on the same threads (the statistic of ``release profile``)
alternately, three times each, and keeps each one's fastest. The ratio TVM / ONNX Runtime is taken within a
process, so load that changes between processes moves both. Writes ``<out>/runtime_knobs.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

CONFIGS = {
    "bytecode": ("bytecode", {}),
    "compiled": ("compiled", {}),
    "spin-0": ("bytecode", {"TVM_THREAD_POOL_SPIN_COUNT": "0"}),
    "spin-long": ("bytecode", {"TVM_THREAD_POOL_SPIN_COUNT": "100000000"}),
    "no-bind": ("bytecode", {"TVM_BIND_THREADS": "0"}),
    "exclude-w0": ("bytecode", {"TVM_EXCLUDE_WORKER0": "0"}),
}


def build(args) -> dict:
    """Compile both execution modes, export them and the ONNX file and the reference; returns their paths."""
    import numpy as np

    from release import relax as M
    from release.measure import apply_history_best
    from release.profile import _onnx_file
    from release.target import resolve_target

    target = resolve_target(args.target)
    model = M.load_model(args.model)
    db, layout = None, None  # no --log: TVM's default schedules
    if args.log:
        tasks = M.extract_tasks(model, target, layout=args.layout)
        db, layout = apply_history_best(args.log).database(tasks), args.layout
    paths = {}
    for mode in ("bytecode", "compiled"):
        ex = M.compile_model(model, target, db, layout=layout, exec_mode=mode)
        paths[mode] = os.path.abspath(os.path.join(args.out, f"{args.model}.{mode}.so"))
        ex.export_library(paths[mode])
    paths["onnx"] = os.path.abspath(_onnx_file(model, args.out))
    np.savez(os.path.join(args.out, "io.npz"), *[np.asarray(x) for x in model.inputs])
    np.savez(os.path.join(args.out, "ref.npz"), *model.reference())
    return paths


def child(args) -> int:
    """One configuration in this process: print one JSON line."""
    import numpy as np
    import tvm
    from tvm import relax

    from release.profile import _ort_latency_ms
    from release.relax.evaluation import _flatten
    from release.threads import thread_count, timing_priority, use_threads
    from release.target import resolve_target

    threads = thread_count(resolve_target(args.target))
    use_threads(threads)
    timing_priority()
    io = np.load(os.path.join(args.out, "io.npz"))
    ref = np.load(os.path.join(args.out, "ref.npz"))
    inputs = [io[k] for k in sorted(io.files, key=lambda k: int(k.split("_")[1]))]
    dev = tvm.cpu(0)
    vm = relax.VirtualMachine(tvm.runtime.load_module(args.lib), dev)
    xs = [tvm.runtime.tensor(x, dev) for x in inputs]
    outs = _flatten(vm["main"](*xs))
    refs = [ref[f"arr_{i}"] for i in range(len(ref.files))]
    err = max(float(np.max(np.abs(o - r))) for o, r in zip(outs, refs))
    if len(outs) != len(refs) or not all(np.allclose(o, r, rtol=1e-3, atol=1e-3) for o, r in zip(outs, refs)):
        raise SystemExit(f"output differs from the reference (max abs error {err:.3g})")
    timer = vm.time_evaluator("main", dev, number=10, repeat=7)
    tvm_ms, ort_ms = [], []
    for _ in range(3):
        tvm_ms.append(float(np.min(timer(*xs).results)) * 1e3)
        ort_ms.append(_ort_latency_ms(args.onnx, inputs, threads, number=10, repeat=7))
    print(json.dumps({"tvm_ms": min(tvm_ms), "ort_ms": min(ort_ms), "tvm_all": tvm_ms, "ort_all": ort_ms,
                      "max_abs_err": err, "threads": threads}))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--log", help="tune-model log whose best records compile the model (none: TVM's defaults)")
    ap.add_argument("--layout", default="NCHWc")
    ap.add_argument("--target", default="llvm")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated, of " + ", ".join(CONFIGS))
    ap.add_argument("--out", default=os.path.join("runs", "runtime-knobs"))
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--lib", help=argparse.SUPPRESS)
    ap.add_argument("--onnx", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args)
    if args.log and not os.path.isfile(args.log):
        raise SystemExit(f"--log {args.log}: no such file; give the tune-model log of --model")
    names = [c.strip() for c in args.configs.split(",")]
    bad = [c for c in names if c not in CONFIGS]
    if bad:
        raise SystemExit(f"--configs: unknown {bad[0]!r}; choose from {', '.join(CONFIGS)}")
    os.makedirs(args.out, exist_ok=True)
    from release.measure.result import provenance
    from release.target import host_machine, machine_of, resolve_target, target_to_json

    t0 = time.time()
    paths = build(args)
    tj = target_to_json(resolve_target(args.target))
    version, rev = provenance()
    doc = {"command": " ".join(["benchmarks/profile/runtime_knobs.py"] + (argv or sys.argv[1:])),
           "machine": machine_of(tj, host_machine(tj)), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "revision": rev, "model": args.model, "log": args.log, "layout": args.layout, "rounds": []}
    for r in range(args.rounds):
        row = {}
        for name in names:
            mode, env = CONFIGS[name]
            cmd = [sys.executable, __file__, "--child", "--out", args.out, "--lib", paths[mode], "--onnx",
                   paths["onnx"], "--target", args.target]
            p = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True)
            line = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
            row[name] = json.loads(line[-1]) if p.returncode == 0 and line else {
                "error": (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]}
            res = row[name]
            print(f"round {r + 1} {name:11s} " + (f"TVM {res['tvm_ms']:.3f} ms  ONNX Runtime {res['ort_ms']:.3f} ms  "
                  f"ratio {res['tvm_ms'] / res['ort_ms']:.3f}" if "error" not in res else f"failed: {res['error']}"),
                  flush=True)
        doc["rounds"].append(row)
        with open(os.path.join(args.out, "runtime_knobs.json"), "w") as f:
            json.dump(doc, f, indent=1)
    doc["seconds"] = time.time() - t0
    with open(os.path.join(args.out, "runtime_knobs.json"), "w") as f:
        json.dump(doc, f, indent=1)
    lines = [f"# Runtime knobs: {args.model}, TVM / ONNX Runtime per process", "",
             f"Machine {doc['machine']}, {doc['date']}, revision {rev or '?'}; log `{args.log}`, layout {args.layout}. "
             f"Command: `{doc['command']}`", "",
             "| config | " + " | ".join(f"round {i + 1} TVM ms | ORT ms | ratio" for i in range(len(doc["rounds"])))
             + " |", "|---|" + "---:|---:|---:|" * len(doc["rounds"])]
    for name in names:
        cells = []
        for row in doc["rounds"]:
            x = row[name]
            cells.append("failed | | " if "error" in x else
                         f"{x['tvm_ms']:.3f} | {x['ort_ms']:.3f} | {x['tvm_ms'] / x['ort_ms']:.3f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    with open(os.path.join(args.out, "runtime_knobs.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
