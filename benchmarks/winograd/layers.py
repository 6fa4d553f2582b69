"""Direct against Winograd, layer by layer: each 3x3 stride-1 convolution of ResNet-18 and ResNet-50 (the two
share them: 64, 128, 256 and 512 channels at 56, 28, 14 and 7 pixels) tuned as an operator task in the blocked
layout (``NCHWc``) and as Winograd F(2x2, 3x3) and F(4x4, 3x3) (``NCHWc-winograd2``, ``-winograd4``), each with
``release+``, the same trials and seed, no knowledge base (the shipped pack holds direct records only: a warm
start would favour the direct form); then each form's best config re-timed in interleaved rounds
(:func:`release.reference.time_callable` on the scheduled kernel with its arguments in the pre-packed layout, as
the runner times it, a fresh process per form and round), and each compiled kernel's FP32 error against a float64
PyTorch convolution on seeded data.

Writes ``<out>/results.json`` and ``<out>/table.md`` (machine, date, revision, command). Usage::

    .venv/bin/python benchmarks/winograd/layers.py --trials 64 --out /tmp/release-winograd-layers
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

LAYERS = ("resnet18.conv2d.2", "resnet18.conv2d.6", "resnet18.conv2d.9", "resnet18.conv2d.12")
FORMS = ("NCHWc", "NCHWc-winograd2", "NCHWc-winograd4")


def tune(workload: str, form: str, trials: int, seed: int, out: str) -> str:
    log = os.path.join(out, f"{workload}.{form}.jsonl")
    with open(os.path.join(out, "tune.log"), "a") as f:
        args = [sys.executable, "-m", "release.cli", "tune", "--workload", workload, "--layout", form, "--tuner",
                "release+", "--n-trial", str(trials), "--seed", str(seed), "--log", log, "--no-knowledge",
                "--no-progress"]
        f.write("$ " + " ".join(args[1:]) + "\n")
        f.flush()
        subprocess.run(args, stdout=f, stderr=subprocess.STDOUT, check=False)
    return log


def _time_child(workload: str, form: str, log: str) -> None:
    """In a fresh process: the log's best config compiled and timed (fastest of 7 means of 10 calls)."""
    import tvm

    from release.check import compile_config
    from release.measure import apply_history_best
    from release.reference import time_callable
    from release.task import create_task
    from release.threads import thread_count, use_threads

    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    task = create_task(workload, "llvm", layout=form)
    threads = thread_count(task.target)
    use_threads(threads)
    best = apply_history_best(log).best(task)
    lib = compile_config(task, tuple(best.config))  # packs the weight inside: for the error only
    # timed as the runner times it: the scheduled program on arguments in its rewritten (pre-packed) layout
    sch = task.config_space.apply(tuple(best.config))
    fn = tvm.compile(sch.mod, target=task.target)["main"]
    rng = np.random.default_rng(0)
    args = [tvm.runtime.tensor(rng.uniform(-1, 1, [int(d) for d in a.shape]).astype(str(a.dtype)))
            for a in ArgInfo.from_entry_func(sch.mod, remove_preproc=True)]
    t = time_callable(lambda: fn(*args), threads)
    print(json.dumps({"ms": t.seconds * 1e3, "reliable": t.reliable, "tuned_ms": best.mean_cost * 1e3,
                      "fp32_error": fp32_error(task, workload, form, lib)}))


def retime(workload: str, form: str, log: str) -> dict:
    p = subprocess.run([sys.executable, __file__, "--time", workload, form, log], capture_output=True, text=True,
                       timeout=900)
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def fp32_error(task, workload: str, form: str, lib) -> float:
    """max |out - float64 PyTorch| / max |float64 PyTorch| of the compiled kernel on seeded data (weights scaled
    as He-initialised ones; Winograd's weight transformed in float64 as models do)."""
    import torch
    import tvm

    from release.relax.winograd import transform_weight
    from release.workloads import get_workload, parse_blocked_layout, split_winograd

    p = get_workload(workload).params
    base, tile = split_winograd(task.name.split("-", 1)[1])
    cb, kb = parse_blocked_layout(base)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, p["c"], p["h"], p["w"])).astype("float32")
    w = (rng.standard_normal((p["k"], p["c"], 3, 3)) * np.sqrt(2 / (9 * p["c"]))).astype("float32")
    ref = torch.nn.functional.conv2d(torch.from_numpy(x).double(), torch.from_numpy(w).double(),
                                     padding=p["pad"]).numpy()
    xb = np.ascontiguousarray(x.reshape(1, p["c"] // cb, cb, p["h"], p["w"]).transpose(0, 1, 3, 4, 2))
    wb = np.ascontiguousarray(w.reshape(p["k"] // kb, kb, p["c"] // cb, cb, 3, 3).transpose(0, 2, 4, 5, 3, 1))
    weight = wb if tile is None else transform_weight(wb, tile)
    shape, dtype = task.output_shape()
    out = tvm.runtime.empty(shape, dtype, tvm.cpu())
    lib["main"](tvm.runtime.tensor(xb), tvm.runtime.tensor(weight), out)
    r = ref.reshape(1, p["k"] // kb, kb, *ref.shape[2:]).transpose(0, 1, 3, 4, 2)
    return float(np.abs(out.numpy() - r).max() / np.abs(r).max())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--layers", default=",".join(LAYERS))
    ap.add_argument("--out", default="/tmp/release-winograd-layers")
    ap.add_argument("--time", nargs=3, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.time:
        _time_child(*args.time)
        return
    from release.measure.result import provenance
    from release.target import host_machine, machine_of, resolve_target, target_to_json

    os.makedirs(args.out, exist_ok=True)
    tj = target_to_json(resolve_target("llvm"))
    version, rev = provenance()
    command = " ".join([os.path.relpath(sys.argv[0]), *sys.argv[1:]])
    head = {"machine": machine_of(tj, host_machine(tj)), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "version": version, "revision": rev, "command": command, "trials": args.trials, "seed": args.seed}
    results = {}
    for w in args.layers.split(","):
        logs = {f: tune(w, f, args.trials, args.seed, args.out) for f in FORMS}
        print(f"{w}: tuned {', '.join(FORMS)}; re-timing {args.rounds} rounds", flush=True)
        rounds = [{f: retime(w, f, logs[f]) for f in FORMS} for _ in range(args.rounds)]
        errors = {f: next((x[f]["fp32_error"] for x in rounds if "fp32_error" in x[f]), float("nan")) for f in FORMS}
        results[w] = {"rounds": rounds, "fp32_error": errors}
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump({**head, "layers": results}, f, indent=1)
    from release.workloads import get_workload

    lines = [f"# Direct against Winograd per layer ({args.trials} trials of release+ per form, seed {args.seed})", "",
             f"Machine {head['machine']}; {head['date']}; release-tvm {version} revision {rev or '?'}. "
             f"Command: `{command}`", "",
             f"Kernel time (ms): median over {args.rounds} rounds of the best config re-timed in a fresh process "
             "(fastest of 7 means of 10 calls, weights pre-packed as the runner times them); in brackets the tuning "
             "run's own best; FP32 error: max |out - float64 PyTorch| / max |float64 PyTorch|.", "",
             "| layer | shape | direct ms | F(2x2) ms | F(4x4) ms | direct / best | error direct | F(2x2) | F(4x4) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for w, r in results.items():
        med = {f: float(np.median([x[f]["ms"] for x in r["rounds"] if "ms" in x[f]])) if any(
            "ms" in x[f] for x in r["rounds"]) else None for f in FORMS}
        d = med["NCHWc"]
        best = min(v for v in med.values() if v is not None)
        e = r["fp32_error"]
        tuned = {f: next((x[f]["tuned_ms"] for x in r["rounds"] if "tuned_ms" in x[f]), None) for f in FORMS}
        cells = " | ".join("n/a" if med[f] is None else f"{med[f]:.3f} ({tuned[f]:.3f})" for f in FORMS)
        lines.append(f"| {w} | {get_workload(w).description} | {cells} | "
                     f"{(d / best) if d else float('nan'):.2f}x | " + " | ".join(f"{e[f]:.1e}" for f in FORMS) + " |")
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
