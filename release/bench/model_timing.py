"""Timing a compiled model and its reference lines, for the model tiers (:mod:`release.bench.model_tier`).

:func:`time_model`: a compiled model checked against its reference and timed on the target's threads
(fastest of repeats, flagged when the median disagrees). :func:`references`: the same model in
PyTorch eager and ``torch.compile`` (through :func:`release.reference.time_torch`: warm-up, fastest of
repeats, a second method, and a one-thread run that flags an oversubscribed machine), in ONNX Runtime
and OpenVINO (the model exported once with ``torch.onnx.export``; each runtime timed by
:func:`release.reference.time_onnx_runtime` with the same protocol, in a process of its own, its output
checked against PyTorch's) and TVM's untuned build. A reference that fails is ``{"error": why}``, never
an exception.
"""

from __future__ import annotations

import os
import time

import numpy as np

from ..reference import ONNX_RUNTIMES, onnx_references
from .config import ModelBenchConfig


def time_model(model, executable, threads: int, number: int = 10, repeat: int = 7) -> dict:
    """Check ``executable`` against the reference and time it (fastest of ``repeat`` means of
    ``number`` runs, after :func:`release.relax.evaluate`'s first call as warm-up; fewer runs for a
    slow executable, bounded to ~30 s and said in ``note``)."""
    from .. import relax as M

    from ..reference import RELIABLE_SPREAD

    res = M.evaluate(model, executable, number=number, repeat=repeat, threads=threads)
    out = {"latency_ms": res["fastest_ms"], "median_ms": res["latency_ms"], "max_abs_err": res["max_abs_err"],
           "threads": res["threads"], "reliable": True, "note": ""}
    if (res["number"], res["repeat"]) != (number, repeat):  # a slow executable: the timing was bounded
        out["note"] = f"slow: {res['repeat']} means of {res['number']} run(s)"
    if res["latency_ms"] > RELIABLE_SPREAD * res["fastest_ms"]:  # the same test as the references'
        busy = f"median of repeats {res['latency_ms'] / res['fastest_ms']:.1f}x the fastest; the machine looks busy"
        out.update(reliable=False, note="; ".join(x for x in (out["note"], busy) if x))
    return out


def references(cfg: ModelBenchConfig, model_name: str, progress: bool = True) -> dict:
    """The model's reference lines on the target's threads: ``{name: {"latency_ms", "median_ms",
    "reliable", "note", "threads"}}`` or ``{name: {"error": why}}``; ``untuned`` is TVM's build with
    default schedules."""
    from .. import relax as M
    from ..reference import RELIABLE_SPREAD, time_torch
    from ..target import resolve_target
    from ..threads import thread_count

    import torch

    target = resolve_target(cfg.target)
    threads = thread_count(target)
    model = M.load_model(model_name)
    xs = [torch.from_numpy(x) for x in model.inputs]
    out: dict = {}

    def timed(fn, one_thread_fn=None) -> dict:
        """``fn`` timed on the target's threads; ``one_thread_fn`` (default ``fn`` with PyTorch on
        one thread) the same work on one thread, for the oversubscription check."""
        r = time_torch(fn, threads=threads)
        res = {"latency_ms": r.seconds * 1e3, "median_ms": r.median * 1e3, "second_ms": r.second * 1e3,
               "reliable": r.reliable, "note": r.note, "threads": r.threads}
        if threads > 1:  # more threads slower than one: an oversubscribed machine, not the library's speed
            one = time_torch(one_thread_fn or fn, threads=1, repeat=5)
            res["one_thread_ms"] = one.seconds * 1e3
            if r.seconds > RELIABLE_SPREAD * one.seconds:
                res["reliable"] = False
                res["note"] = "; ".join(x for x in (res["note"], f"{threads} threads {r.seconds / one.seconds:.1f}x "
                                                    f"slower than 1 thread ({one.seconds * 1e3:.3f} ms): the "
                                                    "machine looks busy") if x)
            torch.set_num_threads(threads)
        return res

    # PyTorch first: TVM's thread pool spins a while after each run and would compete with PyTorch's threads
    if "eager" in cfg.references:
        out["eager"] = timed(lambda: model.torch_module(*xs))
    if "torch.compile" in cfg.references:
        try:
            t0 = time.time()
            compiled = torch.compile(model.torch_module)
            with torch.no_grad():
                compiled(*xs)  # the compile itself (inductor), outside the timing
            out["torch.compile"] = {**timed(lambda: compiled(*xs)), "compile_s": time.time() - t0}
        except Exception as err:  # noqa: BLE001 - report why it does not work on this CPU
            from ..errors import error_line

            out["torch.compile"] = {"error": f"torch.compile failed: {error_line(err, first=True)}"}
    runtimes = [r for r in ONNX_RUNTIMES if r in cfg.references]
    if runtimes:
        out.update(onnx_references(model, cfg.logs, threads, runtimes))  # each in a process of its own
    out["untuned"] = time_model(model, M.compile_model(model, target), threads)  # TVM's defaults, as imported
    return out
