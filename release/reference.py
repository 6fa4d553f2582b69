"""Reference timings (PyTorch, ONNX Runtime, OpenVINO) taken as carefully as our kernels, and flagged
when they look wrong.

A PyTorch figure printed beside a tuned kernel is only worth printing if it was measured on the
same threads, after warm-up, as the fastest of repeats (the least disturbed on a shared machine),
and if a second measurement agrees with it. On a busy 2-core machine PyTorch's intra-op threads
spin and a single protocol can be off by 100x (a 0.026 ms model once printed as 16 ms): such a
figure is reported with ``reliable=False`` and the reason, never as a plain fact.

The ONNX runtimes (:data:`ONNX_RUNTIMES`: ONNX Runtime and OpenVINO, the runtimes users deploy on a
CPU) are timed by :func:`time_onnx_runtime` with the same protocol on the same threads, each in a
process of its own by default (docs/design/reference-runtimes.md: what co-resident runtimes cost
each other on 2 cores), their outputs checked against the source model's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

#: a reference is flagged when its two methods, or its median and fastest repeat, differ by more
RELIABLE_SPREAD = 1.5


@dataclass
class ReferenceTiming:
    """One reference timing.

    Attributes
    ----------
    seconds : float
        Fastest of ``repeat`` means of ``number`` calls (s): the figure reported.
    median : float
        Median of the same repeats (s).
    second : float
        A second method (s): for PyTorch the median of ``torch.utils.benchmark.Timer.blocked_autorange``,
        PyTorch's own timer (its own warm-up and block sizes); for another runtime
        (:func:`time_callable`) the median of blocks of calls (the same shape, without PyTorch).
    threads : int
        Threads of the timed library during the timing (PyTorch's intra-op threads).
    reliable : bool
        False when the median is over ``RELIABLE_SPREAD`` x the fastest repeat, or the two methods
        disagree by more than that: the machine was busy; do not trust the figure.
    note : str
        Why it is unreliable ("" when reliable).
    """

    seconds: float
    median: float
    second: float
    threads: int
    reliable: bool
    note: str = ""

    def describe(self, unit_ms: bool = True) -> str:
        """``"0.031 ms on 2 threads"``, with ``" (UNRELIABLE: ...)"`` appended when flagged."""
        text = f"{self.seconds * 1e3:.3f} ms on {self.threads} threads"
        return text if self.reliable else f"{text} (UNRELIABLE: {self.note})"


def time_torch(fn: Callable[[], object], threads: int | None = None, number: int = 10, repeat: int = 7,
               warmup: int = 3) -> ReferenceTiming:
    """Time a PyTorch callable the way kernels are timed: warm-up, fixed threads, fastest repeat,
    checked against a second method.

    Parameters
    ----------
    fn : callable
        Runs the operator or model once (no arguments); called under ``torch.no_grad()``.
    threads : int, optional
        ``torch.set_num_threads`` for the timing (give the target's ``num-cores``, as TVM's kernels
        run with); default None keeps PyTorch's count.
    number, repeat : int
        ``repeat`` means of ``number`` calls each (defaults 10 and 7).
    warmup : int
        Calls before timing (default 3: oneDNN picks and caches its kernels on the first calls).

    Returns
    -------
    ReferenceTiming
    """
    import torch
    import torch.utils.benchmark as tb

    if threads is not None:
        torch.set_num_threads(int(threads))
    with torch.no_grad():
        means = _repeat_means(fn, number, repeat, warmup)
        second = float(tb.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
                       .blocked_autorange(min_run_time=0.2).median)
    return _judged(means, second, torch.get_num_threads(), "torch.utils.benchmark")


def _repeat_means(fn: Callable[[], object], number: int, repeat: int, warmup: int) -> list[float]:
    """``warmup`` calls, then ``repeat`` means of ``number`` calls each (s)."""
    for _ in range(max(0, warmup)):
        fn()
    means = []
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        for _ in range(max(1, number)):
            fn()
        means.append((time.perf_counter() - t0) / max(1, number))
    return means


def _blocked_median(fn: Callable[[], object], min_run_time: float = 0.2) -> float:
    """The second method without PyTorch: blocks of calls (as many as fill ~10 ms, at least one) until
    ``min_run_time`` seconds and three blocks have run; the median of the blocks' per-call means (s).
    The shape of ``torch.utils.benchmark.Timer.blocked_autorange``, for processes that do not load PyTorch."""
    t0 = time.perf_counter()
    fn()
    block = max(1, int(0.01 / max(time.perf_counter() - t0, 1e-9)))
    per, total = [], 0.0
    while total < min_run_time or len(per) < 3:
        t0 = time.perf_counter()
        for _ in range(block):
            fn()
        dt = time.perf_counter() - t0
        per.append(dt / block)
        total += dt
    return float(np.median(per))


def _judged(means: list, second: float, threads: int, second_name: str) -> ReferenceTiming:
    """:class:`ReferenceTiming` of ``means`` (s) with the reliability verdict of :data:`RELIABLE_SPREAD`."""
    fastest, median = float(np.min(means)), float(np.median(means))
    notes = []
    if median > RELIABLE_SPREAD * fastest:
        notes.append(f"median of repeats {median / fastest:.1f}x the fastest")
    ratio = max(second, fastest) / max(min(second, fastest), 1e-12)
    if ratio > RELIABLE_SPREAD:
        notes.append(f"{second_name} gives {second * 1e3:.3f} ms, {ratio:.1f}x apart")
    return ReferenceTiming(fastest, median, second, int(threads), not notes,
                           "; ".join(notes) + ("; the machine looks busy" if notes else ""))


def time_callable(fn: Callable[[], object], threads: int, number: int = 10, repeat: int = 7,
                  warmup: int = 3) -> ReferenceTiming:
    """:func:`time_torch`'s protocol for a callable that is not PyTorch's (an ONNX Runtime session, an
    OpenVINO infer request): ``warmup`` calls, the fastest of ``repeat`` means of ``number`` calls, a
    second method (:func:`_blocked_median`: blocks of calls for 0.2 s, their median) and the same
    :data:`RELIABLE_SPREAD` verdict. ``threads`` is only recorded: the runtime was given its threads
    when it was created. PyTorch is not imported."""
    means = _repeat_means(fn, number, repeat, warmup)
    return _judged(means, _blocked_median(fn), threads, "a second method (blocks of calls, median)")


#: the ONNX runtimes timed as reference lines, in the order they are timed
ONNX_RUNTIMES = ("onnxruntime", "openvino")

#: how each runtime names itself in a table
RUNTIME_LABELS = {"onnxruntime": "ONNX Runtime", "openvino": "OpenVINO"}

#: what to install when a runtime is missing
_INSTALL = "pip install 'release-tvm[bench]'"


def onnx_runner(runtime: str, onnx_path: str, inputs: list, threads: int):
    """One ONNX runtime ready to run ``onnx_path`` on ``inputs`` with ``threads`` threads.

    - ``onnxruntime``: an ``InferenceSession`` on the CPU execution provider, ``intra_op_num_threads`` =
      ``threads``, ``inter_op_num_threads`` 1, its default graph optimizations (all); each call is
      ``session.run(None, feed)``.
    - ``openvino``: ``openvino.Core().compile_model`` of the file on ``CPU`` with ``INFERENCE_NUM_THREADS``
      = ``threads``, ``PERFORMANCE_HINT`` ``LATENCY`` and ``INFERENCE_PRECISION_HINT`` ``f32`` (OpenVINO
      computes in bfloat16 by default on CPUs with bfloat16 instructions, AVX512_BF16 or AMX: not the
      same arithmetic as ours or ONNX Runtime's, and outside the output check's tolerance); one infer
      request, created once with the inputs set once and reused by every call (``request.infer()``).

    Parameters
    ----------
    runtime : str
        One of :data:`ONNX_RUNTIMES`.
    onnx_path : str
    inputs : list of ndarray
        The graph's inputs, in the order of its (non-initializer) inputs.
    threads : int
        The target's threads (as TVM's kernels run with).

    Returns
    -------
    (run, version)
        ``run()`` runs one inference and returns its outputs as a list of arrays; ``version`` is the
        runtime's version string.

    Raises
    ------
    ImportError
        The runtime is not installed.
    ValueError
        ``runtime`` is not one of :data:`ONNX_RUNTIMES`.
    Exception
        Whatever the runtime raises on a model it cannot load or run.
    """
    inputs = [np.ascontiguousarray(x) for x in inputs]
    if runtime == "onnxruntime":
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = int(threads)
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
        feed = {i.name: x for i, x in zip(sess.get_inputs(), inputs)}
        return (lambda: sess.run(None, feed)), ort.__version__
    if runtime == "openvino":
        import openvino as ov

        core = ov.Core()
        compiled = core.compile_model(onnx_path, "CPU", {"INFERENCE_NUM_THREADS": int(threads),
                                                          "PERFORMANCE_HINT": "LATENCY",
                                                          "INFERENCE_PRECISION_HINT": "f32"})
        request = compiled.create_infer_request()
        for i, x in enumerate(inputs):
            request.set_input_tensor(i, ov.Tensor(x))
        n_out = len(compiled.outputs)

        def run():
            request.infer()
            return [np.array(request.get_output_tensor(i).data) for i in range(n_out)]

        return run, ov.__version__.split("-")[0]
    raise ValueError(f"unknown ONNX runtime {runtime!r}; choose from {', '.join(ONNX_RUNTIMES)}")


def _time_runtime_here(runtime: str, onnx_path: str, inputs: list, threads: int, number: int, repeat: int,
                       warmup: int, one_thread: bool) -> tuple[dict, list]:
    """:func:`time_onnx_runtime`'s work in this process: ``(result dict without the output check, outputs)``."""
    run, version = onnx_runner(runtime, onnx_path, inputs, threads)
    outputs = [np.asarray(o) for o in run()]
    r = time_callable(run, threads, number=number, repeat=repeat, warmup=warmup)
    res = {"latency_ms": r.seconds * 1e3, "median_ms": r.median * 1e3, "second_ms": r.second * 1e3,
           "reliable": r.reliable, "note": r.note, "threads": int(threads), "version": version,
           "number": number, "repeat": repeat}
    if one_thread and threads > 1:  # more threads slower than one: an oversubscribed machine, not the runtime
        run1, _ = onnx_runner(runtime, onnx_path, inputs, 1)
        one = time_callable(run1, 1, number=number, repeat=5, warmup=warmup)
        res["one_thread_ms"] = one.seconds * 1e3
        if r.seconds > RELIABLE_SPREAD * one.seconds:
            res["reliable"] = False
            res["note"] = "; ".join(x for x in (res["note"], f"{threads} threads {r.seconds / one.seconds:.1f}x "
                                                f"slower than 1 thread ({one.seconds * 1e3:.3f} ms): the machine "
                                                "looks busy") if x)
    return res, outputs


def time_onnx_runtime(runtime: str, onnx_path: str, inputs: list, threads: int, expected: list | None = None,
                      number: int = 10, repeat: int = 7, warmup: int = 3, one_thread: bool = True,
                      isolate: bool = True, rtol: float = 1e-3, atol: float = 1e-3, timeout: float = 900.0) -> dict:
    """Time one ONNX runtime on a model file as carefully as our builds, its output checked.

    The protocol of the PyTorch references (:func:`time_torch`, through :func:`time_callable`): ``warmup``
    inferences, the fastest of ``repeat`` means of ``number`` inferences (defaults 10 and 7), a second
    method, and, on more than one thread, a one-thread run (5 repeats) that flags an oversubscribed
    machine. The runtime is created as :func:`onnx_runner` says (``threads`` intra-op threads, the
    inputs bound once).

    Parameters
    ----------
    runtime : str
        One of :data:`ONNX_RUNTIMES`.
    onnx_path : str
    inputs : list of ndarray
        The graph's inputs, in order.
    threads : int
        The target's threads.
    expected : list of ndarray, optional
        The source model's outputs (PyTorch's): the runtime's first outputs must match within
        ``rtol``/``atol`` (default 1e-3 each, :func:`release.relax.evaluate`'s), else the line is an error.
    isolate : bool
        Default True: in a fresh child process that loads only this runtime (no PyTorch, no TVM, no other
        runtime; docs/design/reference-runtimes.md measured what co-resident runtimes cost each other on
        2 cores). False: in this process.
    timeout : float
        Seconds the child may take (default 900).

    Returns
    -------
    dict
        ``latency_ms`` (fastest of repeats), ``median_ms``, ``second_ms``, ``reliable``, ``note``,
        ``threads``, ``version``, ``number``, ``repeat``, ``max_abs_err`` (with ``expected``),
        ``one_thread_ms``, ``isolated``; or ``{"error": why}`` (one line: the runtime missing, failing on
        the model, or its output differing). Never raises for the runtime's failures.
    """
    label = RUNTIME_LABELS.get(runtime, runtime)
    if runtime not in ONNX_RUNTIMES:
        return {"error": f"unknown ONNX runtime {runtime!r}; choose from {', '.join(ONNX_RUNTIMES)}"}
    if not _installed(runtime):
        return {"error": f"{runtime} is not installed ({_INSTALL})"}
    try:
        if isolate:
            res, outputs = _time_runtime_child(runtime, onnx_path, inputs, threads, number, repeat, warmup,
                                               one_thread, timeout)
        else:
            res, outputs = _time_runtime_here(runtime, onnx_path, inputs, threads, number, repeat, warmup, one_thread)
    except Exception as err:  # noqa: BLE001 - a reference line is optional; say why it is missing
        from .errors import error_line

        return {"error": f"{label} failed: {error_line(err, first=True)}"}
    res["isolated"] = bool(isolate)
    if expected is not None:
        if len(outputs) != len(expected):
            return {"error": f"{label} gives {len(outputs)} outputs, the source model {len(expected)}"}
        err = 0.0
        for got, ref in zip(outputs, expected):
            got, ref = np.asarray(got), np.asarray(ref)
            if got.shape != ref.shape:
                return {"error": f"{label}'s output has shape {got.shape}, the source model's {ref.shape}"}
            err = max(err, float(np.max(np.abs(got - ref))) if got.size else 0.0)
            if not np.allclose(got, ref, rtol=rtol, atol=atol):
                return {"error": f"{label}'s output differs from the source model's (max abs error {err:.3g})"}
        res["max_abs_err"] = err
    return res


def _installed(runtime: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(runtime) is not None


def _time_runtime_child(runtime, onnx_path, inputs, threads, number, repeat, warmup, one_thread, timeout):
    """:func:`_time_runtime_here` in a fresh Python process (this module's :func:`_child_main`)."""
    with tempfile.TemporaryDirectory(prefix="release-ref-") as tmp:
        np.savez(os.path.join(tmp, "inputs.npz"), *[np.asarray(x) for x in inputs])
        with open(os.path.join(tmp, "job.json"), "w") as f:
            json.dump({"runtime": runtime, "onnx_path": os.path.abspath(onnx_path), "threads": int(threads),
                       "number": int(number), "repeat": int(repeat), "warmup": int(warmup),
                       "one_thread": bool(one_thread), "n_inputs": len(inputs)}, f)
        p = subprocess.run([sys.executable, "-c", "import sys; from release.reference import _child_main; "
                            "_child_main(sys.argv[1])", tmp], capture_output=True, text=True, timeout=timeout)
        out_json = os.path.join(tmp, "result.json")
        if p.returncode != 0 or not os.path.exists(out_json):
            lines = [ln for ln in (p.stderr or p.stdout or "").strip().splitlines() if ln.strip()]
            raise RuntimeError(lines[-1] if lines else f"its process exited with status {p.returncode}")
        with open(out_json) as f:
            res = json.load(f)
        with np.load(os.path.join(tmp, "outputs.npz")) as z:
            outputs = [z[f"arr_{i}"] for i in range(len(z.files))]
    return res, outputs


def _child_main(folder: str) -> None:
    """Entry of the child process of :func:`time_onnx_runtime`: reads ``job.json`` and ``inputs.npz`` in
    ``folder``, writes ``result.json`` and ``outputs.npz`` there."""
    with open(os.path.join(folder, "job.json")) as f:
        job = json.load(f)
    with np.load(os.path.join(folder, "inputs.npz")) as z:
        inputs = [z[f"arr_{i}"] for i in range(job["n_inputs"])]
    res, outputs = _time_runtime_here(job["runtime"], job["onnx_path"], inputs, job["threads"], job["number"],
                                      job["repeat"], job["warmup"], job["one_thread"])
    np.savez(os.path.join(folder, "outputs.npz"), *outputs)
    with open(os.path.join(folder, "result.json"), "w") as f:
        json.dump(res, f)


def reference_line(runtime: str, res: dict) -> str:
    """One line of a table for a runtime's :func:`time_onnx_runtime` result: ``"openvino 10.712 ms on 2
    threads (2026.4.1)"``, flagged ``UNRELIABLE`` with why, or ``"openvino n/a (why)"``."""
    if "error" in res:
        return f"{runtime} n/a ({res['error']})"
    text = f"{runtime} {res['latency_ms']:.3f} ms on {res['threads']} threads ({res.get('version', '?')})"
    return text if res.get("reliable", True) else f"{text} (UNRELIABLE: {res.get('note', '')})"


def onnx_references(model, folder: str, threads: int, runtimes=None) -> dict:
    """ONNX Runtime and OpenVINO lines of ``model``: ``{runtime: result}`` (:func:`time_onnx_runtime`:
    its fastest of repeats and flags, the runtime's output checked against the source model's; each in a process
    of its own), or ``{runtime: {"error": why}}`` for a runtime missing or failing, one line each.

    Parameters
    ----------
    model : release.relax.Model
        A built-in or PyTorch model (exported to ``<folder>/<name>.onnx`` with the TorchScript exporter,
        transformer layers through :func:`onnx_exportable`), or an ONNX import (its file).
    folder : str
        Where the exported file is written.
    threads : int
        The target's threads.
    runtimes : sequence of str, optional
        Among :data:`release.reference.ONNX_RUNTIMES` (default: all, in that order).
    """
    from .errors import error_line

    runtimes = list(ONNX_RUNTIMES if runtimes is None else runtimes)
    try:
        path, exported = onnx_file(model, folder)
        expected = model.reference()
    except Exception as err:  # noqa: BLE001 - no file, no line: say why for each runtime
        return {r: {"error": f"the model does not export to ONNX: {error_line(err, first=True)}"} for r in runtimes}
    out = {}
    for rt in runtimes:
        res = time_onnx_runtime(rt, path, [np.asarray(x) for x in model.inputs], threads, expected=expected)
        if exported and "error" not in res:
            res["export"] = "transformer layers exported with explicit attention (release.reference.onnx_exportable)"
        out[rt] = res
    return out


def onnx_file(model, folder: str) -> tuple[str, bool]:
    """``(path, rewritten)``: the model's own ONNX file (an ONNX import), else its PyTorch module exported to
    ``<folder>/<name>.onnx`` (``rewritten``: transformer layers were written with explicit attention).

    Raises
    ------
    release.errors.ModelError
        Neither a PyTorch module nor an ONNX file.
    """
    if getattr(model, "onnx_path", None):
        return model.onnx_path, False
    import torch

    from .errors import ModelError

    if getattr(model, "torch_module", None) is None:
        raise ModelError(f"{model.name}: no PyTorch module or ONNX file to give the ONNX runtimes")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{model.name}.onnx")
    exported = onnx_exportable(model.torch_module)  # transformer layers with explicit attention: exportable
    with torch.no_grad():
        # the TorchScript exporter: the torch.export-based one needs onnxscript, not a dependency
        torch.onnx.export(exported, tuple(torch.from_numpy(np.asarray(x)) for x in model.inputs), path,
                          dynamo=False)
    return path, exported is not model.torch_module


def onnx_exportable(module):
    """``module`` in a form ONNX's TorchScript exporter accepts, computing the same function.

    PyTorch runs ``nn.TransformerEncoderLayer`` in eval mode through its fused fast path
    (``aten::_transformer_encoder_layer_fwd``), which no ONNX opset has; with the fast path off, the
    attention's ``is_causal`` becomes a tensor under tracing and ``scaled_dot_product_attention``
    refuses it. Here every such layer (with one packed in-projection, as BERT's) is replaced by the
    same layer written with ``nn.Linear``/``LayerNorm`` modules and explicit attention
    (``softmax(Q K^T / sqrt(d)) V`` per head: the form BERT's own ONNX exports have, which ONNX
    Runtime fuses into its ``Attention`` kernel). The weights are shared, not copied.

    Parameters
    ----------
    module : torch.nn.Module
        In eval mode (dropout is left out: the layer's dropout is a no-op there).

    Returns
    -------
    torch.nn.Module
        ``module`` itself when it holds no such layer; else a copy with the layers replaced.
    """
    import copy

    from torch import nn

    def convertible(m) -> bool:
        return isinstance(m, nn.TransformerEncoderLayer) and m.self_attn._qkv_same_embed_dim

    if convertible(module):
        return _ExplicitEncoderLayer(module)
    if not any(convertible(m) for m in module.modules()):
        return module
    out = copy.copy(module)
    out._modules = dict(module._modules)
    for name, child in module._modules.items():
        if child is not None:
            out._modules[name] = onnx_exportable(child)
    return out


def _explicit_encoder_layer_class():
    import math

    import torch
    from torch import nn

    class ExplicitEncoderLayer(nn.Module):
        """``nn.TransformerEncoderLayer`` (no masks, eval mode) written with explicit attention."""

        def __init__(self, layer):
            super().__init__()
            self.layer = layer

        def _attention(self, x):
            a = self.layer.self_attn
            b, s, e = x.shape
            h = a.num_heads
            d = e // h
            q, k, v = torch.nn.functional.linear(x, a.in_proj_weight, a.in_proj_bias).split(e, dim=-1)
            q, k, v = (t.reshape(b, s, h, d).transpose(1, 2) for t in (q, k, v))
            w = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d), dim=-1)
            return a.out_proj(torch.matmul(w, v).transpose(1, 2).reshape(b, s, e))

        def _feed_forward(self, x):
            lay = self.layer
            return lay.linear2(lay.activation(lay.linear1(x)))

        def forward(self, src):
            lay = self.layer
            x = src if lay.self_attn.batch_first else src.transpose(0, 1)
            if lay.norm_first:
                x = x + self._attention(lay.norm1(x))
                x = x + self._feed_forward(lay.norm2(x))
            else:
                x = lay.norm1(x + self._attention(x))
                x = lay.norm2(x + self._feed_forward(x))
            return x if lay.self_attn.batch_first else x.transpose(0, 1)

    return ExplicitEncoderLayer


def _ExplicitEncoderLayer(layer):  # noqa: N802 - a class made lazily (torch is imported only when used)
    return _explicit_encoder_layer_class()(layer)
