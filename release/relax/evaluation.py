"""Evaluation: a compiled model's outputs checked against its source and timed, and PyTorch's time.

:func:`evaluate` runs the Relax VM executable (TVM's ``time_evaluator``); :func:`torch_reference` and
:func:`torch_latency_ms` time the PyTorch module as carefully (:func:`release.reference.time_torch`).
"""

from __future__ import annotations

import time

import numpy as np

from ..errors import ReleaseError
from .frontend import Model


def evaluate(model: Model, executable, number: int = 10, repeat: int = 5, check: bool = True,
             rtol: float = 1e-3, atol: float = 1e-3, threads: int | None = None,
             max_seconds: float | None = 30.0) -> dict:
    """Run ``executable`` on the model's inputs: compare with the reference and time it (CPU).

    Parameters
    ----------
    number, repeat : int
        ``repeat`` means of ``number`` runs each (TVM's ``time_evaluator``), after the first call
        (the warm-up, which also gives the output checked).
    threads : int, optional
        Threads TVM's runtime runs the model with (:func:`release.threads.use_threads`); give the
        target's ``num-cores`` (:func:`release.threads.thread_count`). Default None: the pool as it
        is (TVM's own default is half the cores).
    max_seconds : float or None
        Bound on the timing's seconds, estimated from the first call: a slow executable (an untuned
        VGG-16 here: ~10 s a run, 8 min at ``number=10, repeat=5``) gets fewer runs, ``number``
        first (down to 1), then ``repeat`` (down to 3). Default 30; None: no bound.

    Returns
    -------
    dict
        ``latency_ms`` (median of ``repeat`` means of ``number`` runs), ``fastest_ms`` (the fastest
        of them, the statistic of :func:`release.reference.time_torch`), ``max_abs_err``,
        ``threads`` (TVM's runtime thread count during the timing), ``number`` and ``repeat``
        (those used).

    Raises
    ------
    ReleaseError
        Outputs differ from the reference beyond ``rtol``/``atol``.
    """
    import tvm
    from tvm import relax

    from ..threads import runtime_threads, use_threads

    if threads is not None:
        use_threads(threads)
    dev = tvm.cpu(0)
    vm = relax.VirtualMachine(executable, dev)
    args = [tvm.runtime.tensor(x, dev) for x in model.inputs]
    t0 = time.perf_counter()
    out = vm["main"](*args)
    outs = _flatten(out)
    first_s = time.perf_counter() - t0
    if max_seconds is not None and first_s * number * repeat > max_seconds:
        number = max(1, int(max_seconds / (first_s * repeat)))
        if first_s * number * repeat > max_seconds:
            repeat = min(repeat, max(3, int(max_seconds / first_s)))
    err = 0.0
    if check:
        ref = model.reference()
        if len(ref) != len(outs):
            raise ReleaseError(f"{model.name}: {len(outs)} outputs, reference has {len(ref)}")
        for o, r in zip(outs, ref):
            err = max(err, float(np.max(np.abs(o - r))) if o.size else 0.0)
            if not np.allclose(o, r, rtol=rtol, atol=atol):
                raise ReleaseError(f"{model.name}: compiled output differs from the reference (max abs error {err:.3g})")
    timer = vm.time_evaluator("main", dev, number=number, repeat=repeat)
    res = timer(*args)
    return {"latency_ms": float(np.median(res.results)) * 1e3, "fastest_ms": float(np.min(res.results)) * 1e3,
            "max_abs_err": err, "threads": runtime_threads(), "number": number, "repeat": repeat}


def torch_latency_ms(model: Model, number: int = 10, repeat: int = 7, threads: int | None = None) -> float:
    """Latency (ms) of the PyTorch module in eager mode on this CPU: :func:`torch_reference`'s
    figure (``nan`` without a PyTorch module)."""
    ref = torch_reference(model, number=number, repeat=repeat, threads=threads)
    return ref.seconds * 1e3 if ref is not None else float("nan")


def torch_reference(model: Model, number: int = 10, repeat: int = 7, threads: int | None = None):
    """The PyTorch module timed as carefully as our kernels (:func:`release.reference.time_torch`:
    warm-up, ``threads`` intra-op threads, fastest of ``repeat`` means of ``number`` runs, checked
    against ``torch.utils.benchmark``; flagged ``reliable=False`` on a busy machine). Give
    ``threads`` = the target's ``num-cores`` so TVM and PyTorch run on equal threads.

    Returns
    -------
    release.reference.ReferenceTiming or None
        None when the model has no PyTorch module (an ONNX file).
    """
    import torch

    from ..reference import time_torch

    if model.torch_module is None:
        return None
    xs = [torch.from_numpy(x) for x in model.inputs]
    return time_torch(lambda: model.torch_module(*xs), threads=threads, number=number, repeat=repeat)


def _flatten(out) -> list[np.ndarray]:
    if hasattr(out, "numpy"):
        return [out.numpy()]
    res = []
    for o in out:
        res.extend(_flatten(o))
    return res
