"""The zoo benchmark: each model tuned with the defaults a user gets for a bounded time, then the exported build,
ONNX Runtime and OpenVINO timed side by side.

Per model (the user-like zoo, :data:`release.zoo.USER_MODELS`, and the model tier's, by default):

1. the model written as ONNX (:func:`release.zoo.export_onnx`) under ``<out>/<model>/``;
2. ``release tune-model --model <model>.onnx --log <model>.jsonl --n-trial 100000 --compare ''`` (the defaults:
   ``release+``, the blocked layout, the shipped knowledge pack, a fresh knowledge base of its own under
   ``<out>/<model>/kb`` as a new user has) stopped with SIGINT after ``--minutes`` (the log survives an
   interrupt), then the same command with ``--n-trial`` = the trials the log holds: nothing is tuned again,
   the log's best records are compiled, checked against the reference, timed and exported
   (``<model>.so``); its printed lines are kept in ``tune.log`` / ``export.log``;
3. ``--rounds`` rounds (default 3), each timing the exported build, ONNX Runtime and OpenVINO one after
   another, each in a fresh process of its own (docs/design/reference-runtimes.md), on the target's threads,
   by the same protocol (:func:`release.reference.time_callable`: 3 warm-up calls, fastest of 7 means of 10
   calls, a second method); ONNX Runtime's and OpenVINO's outputs are checked against PyTorch's
   (:func:`release.reference.time_onnx_runtime`). A runtime missing or failing is ``n/a (why)``.

Writes ``<out>/results.json`` and ``<out>/table.md`` (machine, date, revision, the command; per model the
median over rounds of each, the build's ratio to the faster runtime). Output goes outside the checkout
unless ``--out`` names a folder in it.

Usage (quick check: one model, 3 minutes of tuning)::

    .venv/bin/python benchmarks/zoo/run.py --models squeezenet-mini --minutes 3 --out /tmp/release-zoo-bench

Winograd (``--layout NCHWc-winograd4``: every 3x3 stride-1 layer tuned in both forms, built in the faster; the
direct-only build of the same log is exported and timed in each round too)::

    .venv/bin/python benchmarks/zoo/run.py --models resnet18,resnet50 --layout NCHWc-winograd4 --minutes 15 --out /tmp/release-winograd-bench

The issue's benchmark (every zoo and tier model, 15 minutes each; hours)::

    .venv/bin/python benchmarks/zoo/run.py --minutes 15 --out /tmp/release-zoo-bench
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np

TIER_MODELS = ("resnet18", "mobilenet_v2", "bert-base-layer")
RUNTIMES = ("onnxruntime", "openvino")


def _release(args: list, env: dict, log_path: str, timeout_s: float | None = None) -> tuple[int, str]:
    """``release ARGS`` in a child process, its output appended to ``log_path``; SIGINT after ``timeout_s``
    (SIGKILL 300 s later if it has not ended). Returns ``(exit status, "finished" | "interrupted" | "killed")``."""
    with open(log_path, "a") as f:
        f.write(f"$ release {' '.join(args)}\n")
        f.flush()
        p = subprocess.Popen([sys.executable, "-m", "release.cli", *args], stdout=f, stderr=subprocess.STDOUT, env=env)
        try:
            return p.wait(timeout=timeout_s), "finished"
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGINT)  # tune-model ends its workers, the log keeps every trial measured
            try:
                return p.wait(timeout=300), "interrupted"
            except subprocess.TimeoutExpired:
                p.kill()
                return p.wait(), "killed"


def tune(model: str, folder: str, minutes: float, small: bool, layout: str | None = None) -> dict:
    """Steps 1 and 2 of the module docstring; returns ``{"onnx", "log", "library", "trials", "tuning_s"}``
    (``"direct"``: the direct-only build's library with a ``-winograd{m}`` ``layout``)."""
    from release import zoo
    from release.measure import load_records

    os.makedirs(folder, exist_ok=True)
    onnx_path = zoo.export_onnx(model, os.path.join(folder, f"{model}.onnx"), small=small)
    log = os.path.join(folder, f"{model}.jsonl")
    env = {**os.environ, "RELEASE_KNOWLEDGE": os.path.join(folder, "kb")}
    common = ["tune-model", "--model", onnx_path, "--log", log, "--compare", "", "--no-progress",
              *(["--layout", layout] if layout else [])]
    t0 = time.time()
    _, stopped = _release(common + ["--n-trial", "100000"], env, os.path.join(folder, "tune.log"),
                          timeout_s=60 * minutes)
    tuning_s = min(time.time() - t0, 60 * minutes)  # the bound; the interrupt's own time is not tuning
    trials = len(load_records(log)) if os.path.exists(log) else 0
    rc, _ = _release(common + ["--n-trial", str(max(1, trials))], env, os.path.join(folder, "export.log"))
    lib = os.path.join(folder, f"{model}.so")
    out = {"onnx": onnx_path, "log": log, "library": lib if rc == 0 and os.path.exists(lib) else None,
           "trials": trials, "tuning_s": tuning_s, "stopped": stopped, "export_rc": rc}
    if layout and "-winograd" in layout and out["library"]:
        out["direct"] = export_direct(onnx_path, log, layout, os.path.join(folder, f"{model}.direct.so"))
    return out


def export_direct(onnx_path: str, log: str, layout: str, lib: str) -> str | None:
    """The direct-only build of a ``-winograd{m}`` run: the same log's best records, every layer direct
    (:class:`release.relax.WinogradPlan` with no layer), exported to ``lib``; None when it fails."""
    from release import relax as M
    from release.measure import apply_history_best
    from release.target import resolve_target

    try:
        target = resolve_target("llvm")
        model = M.load_model(onnx_path)
        tasks = M.extract_tasks(model, target, layout=layout)
        db = apply_history_best(log).database(tasks)
        ex = M.compile_model(model, target, db, layout=layout,
                             winograd=M.WinogradPlan(M.split_layout(layout)[1], frozenset()))
        ex.export_library(lib)
        return lib
    except Exception as err:  # noqa: BLE001 - one line in the table, not the end of the benchmark
        print(f"direct-only build failed: {type(err).__name__}: {err}", flush=True)
        return None


def time_build(lib: str, inputs: list, threads: int) -> dict:
    """The exported build timed in a fresh process (:func:`_build_child`), as the runtimes are."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        np.savez(os.path.join(tmp, "in.npz"), *inputs)
        p = subprocess.run([sys.executable, __file__, "--time-build", lib, "--inputs", os.path.join(tmp, "in.npz"),
                            "--threads", str(threads)], capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
        return {"error": f"the build failed: {lines[-1] if lines else p.returncode}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def _build_child(lib: str, inputs_path: str, threads: int) -> None:
    os.environ["TVM_NUM_THREADS"] = str(threads)
    import tvm
    from tvm import relax

    from release.reference import time_callable

    with np.load(inputs_path) as z:
        xs = [tvm.runtime.tensor(z[f"arr_{i}"], tvm.cpu()) for i in range(len(z.files))]
    vm = relax.VirtualMachine(tvm.runtime.load_module(lib), tvm.cpu())
    fn = vm["main"]
    t = time_callable(lambda: fn(*xs), threads)
    print(json.dumps({"latency_ms": t.seconds * 1e3, "median_ms": t.median * 1e3, "second_ms": t.second * 1e3,
                      "reliable": t.reliable, "note": t.note, "threads": threads}))


def side_by_side(model: str, tuned: dict, rounds: int, threads: int, small: bool) -> list:
    """Step 3: ``rounds`` rounds of ``{"build": ..., "onnxruntime": ..., "openvino": ...}``."""
    from release import zoo
    from release.reference import time_onnx_runtime

    module, (x,) = zoo.build(model, small=small)
    import torch

    with torch.no_grad():
        out = module(x)
    expected = [o.numpy() for o in (out if isinstance(out, (list, tuple)) else (out,))]
    inputs = [x.numpy()]
    res = []
    for _ in range(rounds):
        r = {"build": time_build(tuned["library"], inputs, threads) if tuned["library"] else
             {"error": "tune-model exported no build (see export.log)"}}
        if "direct" in tuned:
            r["direct"] = time_build(tuned["direct"], inputs, threads) if tuned["direct"] else \
                {"error": "the direct-only build failed (see the benchmark's output)"}
        for rt in RUNTIMES:
            r[rt] = time_onnx_runtime(rt, tuned["onnx"], inputs, threads, expected=expected, one_thread=False)
        res.append(r)
    return res


def _median(rounds: list, who: str):
    vals = [r[who]["latency_ms"] for r in rounds if "latency_ms" in r[who]]
    return float(np.median(vals)) if vals else None


def _cell(rounds: list, who: str) -> str:
    m = _median(rounds, who)
    if m is None:
        return f"n/a ({next(r[who]['error'] for r in rounds if 'error' in r[who])})"
    flagged = sum(not r[who].get("reliable", True) for r in rounds if "latency_ms" in r[who])
    return f"{m:.3f}" + (f" ({flagged} of {len(rounds)} flagged busy)" if flagged else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=None, help="comma list (default: the user-like zoo and the tier's models)")
    ap.add_argument("--minutes", type=float, default=15.0, help="tuning wall time per model")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--small", action="store_true", help="the zoo models' small variants (a check of the script)")
    ap.add_argument("--out", default="/tmp/release-zoo-bench")
    ap.add_argument("--layout", default=None,
                    help="tune-model's --layout (default: its own, auto); with -winograd{m} the direct-only build of "
                         "the same log is timed too")
    ap.add_argument("--retime", default=None,
                    help="comma list of models in --out's results to time again (their exported builds, no tuning): "
                         "the table then shows the latest rounds and the first timing beside them")
    ap.add_argument("--time-build", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--inputs", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.time_build:
        _build_child(args.time_build, args.inputs, args.threads)
        return
    from release import zoo
    from release.measure.result import provenance
    from release.target import host_machine, machine_of, resolve_target, target_to_json
    from release.threads import thread_count

    models = args.models.split(",") if args.models else list(zoo.USER_MODELS) + list(TIER_MODELS)
    target = resolve_target("llvm")
    threads = thread_count(target)
    os.makedirs(args.out, exist_ok=True)
    command = " ".join([os.path.relpath(sys.argv[0]) if os.path.exists(sys.argv[0]) else sys.argv[0], *sys.argv[1:]])
    results = {}
    path = os.path.join(args.out, "results.json")
    earlier = json.load(open(path)) if os.path.exists(path) else {}
    results = earlier.get("models", {})
    tj = target_to_json(target)
    version, rev = provenance()
    head = {"machine": machine_of(tj, host_machine(tj)), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "version": version, "revision": rev, "command": command, "threads": threads, "minutes": args.minutes,
            "rounds": args.rounds, "layout": args.layout or "auto"}
    if earlier:  # a resumed or re-timed folder keeps the run's own provenance; this invocation's is kept beside it
        head = {**{k: v for k, v in earlier.items() if k != "models"},
                "later": earlier.get("later", []) + [{"command": command, "date": head["date"], "revision": rev}]}
    for m in (args.retime.split(",") if args.retime else []):  # the exported builds timed again, not re-tuned
        if m not in results:
            raise SystemExit(f"--retime {m}: no tuned build of it in {path}")
        print(f"{m}: re-timing its exported build side by side, {args.rounds} rounds", flush=True)
        results[m].setdefault("retimed", []).append(
            {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "command": command,
             "rounds": side_by_side(m, results[m]["tuned"], args.rounds, threads, args.small)})
        with open(path, "w") as f:
            json.dump({**head, "models": results}, f, indent=1)
    for m in models:
        if m in results:
            continue
        folder = os.path.join(args.out, m)
        print(f"{m}: tuning for {args.minutes:g} min with the defaults...", flush=True)
        tuned = tune(m, folder, args.minutes, args.small, args.layout)
        print(f"{m}: {tuned['trials']} trials in {tuned['tuning_s']:.0f} s; timing side by side, {args.rounds} rounds",
              flush=True)
        rounds = side_by_side(m, tuned, args.rounds, threads, args.small)
        results[m] = {"tuned": tuned, "rounds": rounds}
        with open(path, "w") as f:
            json.dump({**head, "models": results}, f, indent=1)
    direct = any("direct" in r["rounds"][0] for r in results.values() if r["rounds"])
    retimed: list = []
    lines = [f"# Zoo benchmark: tuned with the defaults for {head['minutes']:g} min, then timed beside ONNX Runtime "
             "and OpenVINO", "", f"Machine {head['machine']}, {threads} threads; {head['date']}; release-tvm "
             f"{head['version']} revision {head['revision'] or '?'}. Command: `{head['command']}`", "",
             f"Latency (ms): median over {head['rounds']} rounds of each one's fastest of 7 means of 10 calls; each round "
             "times the exported build, ONNX Runtime and OpenVINO one after another, each in a fresh process of its "
             "own; the runtimes' outputs checked against PyTorch's. A shared machine makes every figure noisy.", "",
             f"Layout: {head.get('layout', 'auto')}.", "",
             "| model | trials | tuning s | exported build | ONNX Runtime | OpenVINO | build / faster runtime |"
             + (" direct-only build | build / direct-only |" if direct else ""),
             "|---|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if direct else "")]
    for m, r in results.items():
        first = r["rounds"]
        if r.get("retimed"):  # the latest timing; the first one in a note below the table
            r = {**r, "rounds": r["retimed"][-1]["rounds"]}
            retimed_command = r["retimed"][-1].get("command", "")
            retimed.append(f"{m}: re-timed {r['retimed'][-1]['date']}; first timing: build "
                           f"{_cell(first, 'build')}, ONNX Runtime {_cell(first, 'onnxruntime')}, OpenVINO "
                           f"{_cell(first, 'openvino')} ms")
        b = _median(r["rounds"], "build")
        refs = [v for v in (_median(r["rounds"], rt) for rt in RUNTIMES) if v is not None]
        ratio = f"{b / min(refs):.2f}x" if b and refs else "n/a"
        row = (f"| {m} | {r['tuned']['trials']} | {r['tuned']['tuning_s']:.0f} | {_cell(r['rounds'], 'build')} | "
               f"{_cell(r['rounds'], 'onnxruntime')} | {_cell(r['rounds'], 'openvino')} | {ratio} |")
        if direct:
            d = _median(r["rounds"], "direct") if "direct" in r["rounds"][0] else None
            row += (f" {_cell(r['rounds'], 'direct')} | {b / d:.2f}x |" if d and b else " n/a | n/a |")
        lines.append(row)
    if retimed:
        lines += ["", "Re-timed (the exported builds timed again, not re-tuned; every timing kept in results.json; "
                  f"`{retimed_command}`):", ""]
        lines += [f"- {x}" for x in retimed]
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
