"""Where a model's time goes: TVM's kernels, ONNX Runtime's and OpenVINO's nodes, per operator kind, side by side.

``release profile --model M [--log LOG]`` compiles the model as ``tune-model`` exports it (with the log's best
records; without a log, TVM's default schedules), times every kernel call of one inference with the Relax VM's
instrument hook (:meth:`tvm.runtime.vm.VirtualMachine.set_instrument`: a timestamp before and after each call
instruction; the median over ``runs`` inferences per call), and profiles the same model in ONNX Runtime with its
own profiler (``SessionOptions.enable_profiling``: per-node kernel times) and in OpenVINO with its own
(``PERF_COUNT``: each executed node's time, :func:`profile_openvino`). All are grouped by operator kind
(:data:`KINDS`) and the table gives each kind's milliseconds per inference and its share of the gap between
TVM's and ONNX Runtime's end-to-end latencies. The runtimes' end-to-end latencies are timed without their
profilers, each in a process of its own, their outputs checked (:func:`release.reference.time_onnx_runtime`).

Kinds are read from what each call computes, not from the model: a convolution's kernel size and groups come
from its weight's shape (``OIHW`` or the blocked ``OIHW{i}i{o}o``) against its input and output channels, and
for a weight pre-packed into a layout of the schedule's own from its element count (``numel(w) / (C_out * C_in)``
is ``KH * KW`` for a dense convolution and below 1 for a depthwise one); ONNX Runtime's nodes by their operator
type and input shapes.

TVM 0.27's Relax VM has no per-operator profiler (``VirtualMachine.profile`` of earlier releases is gone); the
instrument hook is its documented replacement. Its cost (a Python call before and after each instruction, a few
microseconds) is counted in the ``runtime (alloc, shape checks)`` kind with the VM's own builtins.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from collections import defaultdict

import numpy as np

#: operator kinds of the table, in its order
KINDS = ("conv2d 3x3", "conv2d 1x1", "conv2d other kernel", "conv2d depthwise", "conv2d grouped",
         "dense/matmul", "attention (batch matmul)", "attention (fused)", "softmax/layernorm/GELU", "pooling",
         "layout transforms", "copies/reshape", "elementwise", "runtime (alloc, shape checks)")

_NORM = re.compile(r"softmax|layer_?norm|gelu|erf|tanh|rms_?norm", re.I)
_COPY = re.compile(r"transpose|reshape|concat|split|strided_slice|take|squeeze|expand|copy|flatten|gather|slice",
                   re.I)


def _conv_kind(data, weight, out) -> str:
    """Kind of a convolution from its data, weight and output shapes (any layout: NCHW or blocked NCHWc).

    A weight in ``OIHW`` (4-D) or ``OIHW{i}i{o}o`` (6-D, NCHWc) gives the input channels per group and the
    kernel size directly; a weight pre-packed into a layout of the schedule's own is read by its element
    count, ``C_out * C_in / groups * KH * KW``, taken as a dense convolution unless it is smaller than
    ``C_out * C_in`` (then depthwise when the kernel is square, else grouped)."""
    def channels(shape):
        return int(shape[1]) * (int(shape[4]) if len(shape) == 5 else 1)

    def named(k_h, k_w) -> str:
        return {(1, 1): "conv2d 1x1", (3, 3): "conv2d 3x3"}.get((int(k_h), int(k_w)), "conv2d other kernel")

    try:
        c_in, c_out, numel = channels(data), channels(out), int(np.prod(weight))
    except (IndexError, TypeError, ValueError):
        return "conv2d other kernel"
    w = [int(d) for d in weight]
    per_group = None
    if len(w) == 4 and w[0] == c_out:
        per_group, kh, kw = w[1], w[2], w[3]
    elif len(w) == 6 and w[0] * w[5] == c_out and w[1] * w[4] in (c_in, 1):  # else a 6-D layout of the schedule's
        per_group, kh, kw = w[1] * w[4], w[2], w[3]
    if per_group is not None:
        if per_group == c_in:
            return named(kh, kw)
        return "conv2d depthwise" if per_group == 1 else "conv2d grouped"
    per_out = numel / max(c_out, 1)  # C_in / groups * KH * KW
    dense = per_out / max(c_in, 1)  # KH * KW for a dense convolution
    if dense >= 1:
        k = int(round(dense ** 0.5))
        return named(k, k) if k * k == round(dense) else "conv2d other kernel"
    return "conv2d depthwise" if round(per_out) in (1, 4, 9, 16, 25, 49) and c_in == c_out else "conv2d grouped"


def _weight(shapes: list):
    """The weight among a fused convolution's arguments ``[data, ..., out]``: the largest argument that is
    not an activation (a residual input of the output's shape is left out), else the second."""
    data, out = tuple(shapes[0]), tuple(shapes[-1])
    inner = [t for t in shapes[1:-1] if tuple(t) not in (data, out)] or list(shapes[1:-1]) or [()]
    return max(inner, key=lambda t: int(np.prod(t)) if t else 0)


def tvm_kind(symbol: str, shapes: list) -> str:
    """Operator kind of one TVM kernel call (:data:`KINDS`) from its function name and argument shapes."""
    s = symbol.lower()
    if s.startswith("vm.") or s.startswith("__"):
        return "runtime (alloc, shape checks)"
    if "conv" in s and len(shapes) >= 3:
        return _conv_kind(shapes[0], _weight(shapes), shapes[-1])
    if "matmul" in s or "dense" in s:
        operands = shapes[:2]
        if len(operands) == 2 and all(len(t) >= 3 and int(np.prod(t[:-2])) > 1 for t in operands):
            return "attention (batch matmul)"
        return "dense/matmul"
    if "layout_transform" in s:
        return "layout transforms"
    if _NORM.search(s):
        return "softmax/layernorm/GELU"
    if "pool" in s:
        return "pooling"
    if _COPY.search(s):
        return "copies/reshape"
    return "elementwise"


def ort_kind(op: str, shapes: list) -> str:
    """Operator kind of one ONNX Runtime node (:data:`KINDS`) from its operator type and input shapes."""
    if op in ("Conv", "FusedConv", "NhwcConv", "ConvTranspose") and len(shapes) >= 2:
        w = shapes[1]
        if len(w) == 4:
            if int(w[1]) == 1 and int(w[0]) > 1:
                return "conv2d depthwise"
            return {(1, 1): "conv2d 1x1", (3, 3): "conv2d 3x3"}.get((int(w[2]), int(w[3])), "conv2d other kernel")
        return "conv2d other kernel"
    if op in ("Attention", "MultiHeadAttention", "GroupQueryAttention"):
        return "attention (fused)"
    if op in ("MatMul", "Gemm", "FusedMatMul", "FusedGemm", "MatMulNBits", "MatMulInteger"):
        if len(shapes) >= 2 and all(len(t) >= 3 and int(np.prod(t[:-2])) > 1 for t in shapes[:2]):
            return "attention (batch matmul)"
        return "dense/matmul"
    if op in ("ReorderInput", "ReorderOutput", "ReorderWeight"):
        return "layout transforms"
    if _NORM.search(op) or op in ("Erf", "BiasGelu", "FastGelu", "SkipLayerNormalization"):
        return "softmax/layernorm/GELU"
    if "Pool" in op:
        return "pooling"
    if _COPY.search(op) or op in ("Unsqueeze", "Identity", "Shape"):
        return "copies/reshape"
    return "elementwise"


def call_flop(kind: str, shapes: list) -> float:
    """FLOPs of one convolution or matmul call from its shapes (multiply-adds x 2; 0 for other kinds):
    a convolution ``2 * numel(out) * numel(weight) / C_out``, a matmul ``2 * numel(out) * K``."""
    try:
        if kind.startswith("conv2d") and len(shapes) >= 3:
            out = shapes[-1]
            c_out = int(out[1]) * (int(out[4]) if len(out) == 5 else 1)
            return 2.0 * float(np.prod(out)) * float(np.prod(_weight(shapes))) / max(c_out, 1)
        if kind in ("dense/matmul", "attention (batch matmul)") and len(shapes) >= 3:
            return 2.0 * float(np.prod(shapes[-1])) * int(shapes[0][-1])
    except (IndexError, TypeError, ValueError):
        pass
    return 0.0


def profile_tvm(executable, inputs, runs: int = 10) -> dict:
    """Per-call times of one inference of ``executable`` (the Relax VM's instrument hook).

    Parameters
    ----------
    executable : tvm.runtime.Executable
        A compiled model (``release.relax.compile_model``).
    inputs : list of ndarray
        ``main``'s arguments.
    runs : int
        Inferences timed after one warm-up (default 10); each call's time is its median over them.

    Returns
    -------
    dict
        ``calls``: ``[{"symbol", "kind", "shapes", "ms", "gflop"}]`` in execution order (``gflop``: of a
        convolution or matmul, :func:`call_flop`; 0 for the rest); ``kinds``: ``{kind: ms per
        inference}``; ``total_ms`` (their sum); ``runs``.
    """
    import tvm
    from tvm import relax

    vm = relax.VirtualMachine(executable, tvm.cpu())
    args = [tvm.runtime.tensor(x) for x in inputs]
    vm["main"](*args)  # warm-up: the thread pool, first-touch of storage
    seen: list = []
    times: list = []
    stack: list = []
    record = [True]  # argument shapes of the first timed inference only

    def instrument(func, symbol, before, ret, *call_args):
        if before:
            stack.append(time.perf_counter_ns())
            if record[0]:
                seen.append((symbol, [tuple(int(d) for d in a.shape) for a in call_args if hasattr(a, "shape")]))
        else:
            times[-1].append((time.perf_counter_ns() - stack.pop()) / 1e6)
        return 0

    vm.set_instrument(instrument)
    for r in range(max(1, int(runs))):
        times.append([])
        vm["main"](*args)
        record[0] = False
    n = min(len(t) for t in times)
    med = np.median(np.asarray([t[:n] for t in times]), axis=0)
    calls = []
    for (sym, sh), m in zip(seen, med):
        kind = tvm_kind(sym, sh)
        calls.append({"symbol": sym, "kind": kind, "shapes": sh, "ms": float(m), "gflop": call_flop(kind, sh) / 1e9})
    kinds: dict = defaultdict(float)
    for c in calls:
        kinds[c["kind"]] += c["ms"]
    return {"calls": calls, "kinds": dict(kinds), "total_ms": float(sum(kinds.values())), "runs": int(runs)}


def profile_ort(onnx_path: str, inputs, threads: int, runs: int = 10) -> dict:
    """Per-node kernel times of ONNX Runtime on ``onnx_path`` (its own profiler), per inference.

    Parameters
    ----------
    onnx_path : str
    inputs : list of ndarray
        The graph's inputs, in order.
    threads : int
        ``intra_op_num_threads`` (the target's threads, as TVM's); ``inter_op_num_threads`` 1.
    runs : int
        Profiled inferences after one warm-up (default 10); per node the median.

    Returns
    -------
    dict
        ``nodes``: ``[{"name", "op", "kind", "shapes", "ms"}]``; ``kinds``; ``total_ms``; ``version``.

    Raises
    ------
    ImportError
        onnxruntime is not installed (``pip install 'release-tvm[bench]'``).
    """
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as tmp:
        so = ort.SessionOptions()
        so.intra_op_num_threads = int(threads)
        so.inter_op_num_threads = 1
        so.enable_profiling = True
        so.profile_file_prefix = os.path.join(tmp, "ort")
        sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
        feed = {i.name: x for i, x in zip(sess.get_inputs(), inputs)}
        sess.run(None, feed)  # warm-up (its events are dropped below: the first run's)
        for _ in range(max(1, int(runs))):
            sess.run(None, feed)
        path = sess.end_profiling()
        with open(path) as f:
            events = json.load(f)
    per: dict = defaultdict(list)
    info: dict = {}
    for e in events:
        if e.get("cat") != "Node" or not str(e.get("name", "")).endswith("_kernel_time"):
            continue
        args = e.get("args", {})
        name = e["name"][: -len("_kernel_time")]
        per[name].append(float(e.get("dur", 0)) / 1e3)
        if name not in info:
            shapes = []
            for d in args.get("input_type_shape", []):
                shapes.extend(tuple(int(x) for x in v) for v in d.values())
            info[name] = (args.get("op_name", "?"), shapes)
    nodes = []
    for name, ts in per.items():
        ts = ts[1:] if len(ts) > runs else ts  # drop the warm-up's
        op, shapes = info[name]
        nodes.append({"name": name, "op": op, "kind": ort_kind(op, shapes), "shapes": shapes,
                      "ms": float(np.median(ts))})
    kinds: dict = defaultdict(float)
    for nd in nodes:
        kinds[nd["kind"]] += nd["ms"]
    return {"nodes": nodes, "kinds": dict(kinds), "total_ms": float(sum(kinds.values())), "version": ort.__version__}


def ov_kind(node_type: str, shapes: list) -> str:
    """Operator kind of one OpenVINO executed node (:data:`KINDS`) from its layer type (the runtime model's
    ``layerType``: ``Convolution``, ``GroupConvolution``, ``FullyConnected``, ``Reorder``, ...) and input shapes
    (a convolution's weight is its second input: ``[O, I, KH, KW]``, grouped ``[G, O/G, I/G, KH, KW]``)."""
    t = node_type
    if t in ("Convolution", "GroupConvolution", "Deconvolution", "GroupDeconvolution") and len(shapes) >= 2:
        w = [int(d) for d in shapes[1]]
        if t == "GroupConvolution" and len(w) == 5:
            return "conv2d depthwise" if w[1] == 1 and w[2] == 1 else "conv2d grouped"
        if t == "Convolution" and len(w) == 4:
            return {(1, 1): "conv2d 1x1", (3, 3): "conv2d 3x3"}.get((w[2], w[3]), "conv2d other kernel")
        return "conv2d other kernel"
    if t in ("FullyConnected", "MatMul", "Gemm"):
        if len(shapes) >= 2 and all(len(x) >= 3 and int(np.prod(x[:-2])) > 1 for x in shapes[:2]):
            return "attention (batch matmul)"
        return "dense/matmul"
    if t in ("ScaledDotProductAttention", "MHA"):
        return "attention (fused)"
    if t == "Reorder":
        return "layout transforms"
    if _NORM.search(t) or t in ("MVN", "Gelu", "Erf"):
        return "softmax/layernorm/GELU"
    if "Pool" in t:
        return "pooling"
    if _COPY.search(t) or t in ("Concatenation", "Transpose", "Interpolate"):
        return "copies/reshape"
    return "elementwise"


def profile_openvino(onnx_path: str, inputs, threads: int, runs: int = 10) -> dict:
    """Per-node times of OpenVINO on ``onnx_path`` (its own profiler, ``PERF_COUNT``), per inference.

    The model is compiled as :func:`release.reference.onnx_runner` compiles it (CPU, ``threads``
    ``INFERENCE_NUM_THREADS``, ``LATENCY``, f32), with ``PERF_COUNT`` on; each executed node's ``real_time``
    is read after every inference (the request's counters are those of its last inference) and its input
    shapes come from the runtime model (:meth:`openvino.CompiledModel.get_runtime_model`). Nodes OpenVINO
    fused into another (status ``NOT_RUN``) are left out.

    Parameters
    ----------
    onnx_path : str
    inputs : list of ndarray
        The graph's inputs, in order.
    threads : int
        ``INFERENCE_NUM_THREADS`` (the target's threads, as TVM's).
    runs : int
        Profiled inferences after one warm-up (default 10); per node the median.

    Returns
    -------
    dict
        ``nodes``: ``[{"name", "op", "exec", "kind", "shapes", "ms"}]``; ``kinds``; ``total_ms``; ``version``.

    Raises
    ------
    ImportError
        openvino is not installed (``pip install 'release-tvm[bench]'``).
    """
    import openvino as ov

    core = ov.Core()
    compiled = core.compile_model(onnx_path, "CPU", {"INFERENCE_NUM_THREADS": int(threads),
                                                      "PERFORMANCE_HINT": "LATENCY",
                                                      "INFERENCE_PRECISION_HINT": "f32", "PERF_COUNT": True})
    request = compiled.create_infer_request()
    for i, x in enumerate(inputs):
        request.set_input_tensor(i, ov.Tensor(np.ascontiguousarray(x)))
    request.infer()  # warm-up
    per: dict = defaultdict(list)
    info: dict = {}
    for _ in range(max(1, int(runs))):
        request.infer()
        for p in request.get_profiling_info():
            if str(p.status).endswith("EXECUTED"):
                per[p.node_name].append(p.real_time.total_seconds() * 1e3)
                info.setdefault(p.node_name, (p.node_type, p.exec_type))
    ops = {op.get_friendly_name(): op for op in compiled.get_runtime_model().get_ordered_ops()}

    def shapes_of(name):
        op = ops.get(name)
        if op is None:
            return []
        return [tuple(int(d) for d in i.get_partial_shape().to_shape()) for i in op.inputs()
                if i.get_partial_shape().is_static]

    nodes = []
    for name, ts in per.items():
        op, exec_type = info[name]
        if op in ("Parameter", "Result", "Constant"):
            continue
        shapes = shapes_of(name)
        nodes.append({"name": name, "op": op, "exec": exec_type, "kind": ov_kind(op, shapes), "shapes": shapes,
                      "ms": float(np.median(ts))})
    kinds: dict = defaultdict(float)
    for nd in nodes:
        kinds[nd["kind"]] += nd["ms"]
    return {"nodes": nodes, "kinds": dict(kinds), "total_ms": float(sum(kinds.values())),
            "version": ov.__version__.split("-")[0]}


def gap_table(tvm_kinds: dict, ort_kinds: dict, ov_kinds: dict | None = None) -> list[dict]:
    """Rows per kind: ``tvm_ms``, ``ort_ms``, ``gap_ms`` (TVM - ORT) and ``share`` of the total gap (None when
    TVM is not behind in total), and ``ov_ms`` (OpenVINO's) when ``ov_kinds`` is given; kinds none has are left
    out, the order is :data:`KINDS`."""
    total_gap = sum(tvm_kinds.values()) - sum(ort_kinds.values())
    rows = []
    for k in KINDS:
        a, b = tvm_kinds.get(k, 0.0), ort_kinds.get(k, 0.0)
        c = (ov_kinds or {}).get(k, 0.0)
        if not a and not b and not c:
            continue
        row = {"kind": k, "tvm_ms": a, "ort_ms": b, "gap_ms": a - b,
               "share": (a - b) / total_gap if total_gap > 0 else None}
        if ov_kinds is not None:
            row["ov_ms"] = c
        rows.append(row)
    return rows


def markdown(rows: list, tvm_total: float, ort_total: float, title: str = "", ov_total: float | None = None) -> str:
    """The table as Markdown: per kind TVM ms, ONNX Runtime ms, OpenVINO ms (with ``ov_total``: rows from
    :func:`gap_table` given ``ov_kinds``), the gap to ONNX Runtime and its share."""
    ov = ov_total is not None
    lines = ([f"### {title}", ""] if title else []) + [
        "| operator kind | TVM ms | ONNX Runtime ms | " + ("OpenVINO ms | " if ov else "")
        + "gap ms (TVM - ORT) | share of the gap |", "|---|---:|---:|" + ("---:|" if ov else "") + "---:|---:|"]
    for r in rows:
        share = "-" if r["share"] is None else f"{100 * r['share']:.0f}%"
        mid = f" {r.get('ov_ms', 0.0):.3f} |" if ov else ""
        lines.append(f"| {r['kind']} | {r['tvm_ms']:.3f} | {r['ort_ms']:.3f} |{mid} {r['gap_ms']:+.3f} | {share} |")
    mid = f" **{ov_total:.3f}** |" if ov else ""
    lines.append(f"| **all kernels** | **{tvm_total:.3f}** | **{ort_total:.3f}** |{mid} **{tvm_total - ort_total:+.3f}** | |")
    return "\n".join(lines) + "\n"


#: a side whose per-call (per-node) times sum to more than this multiple of its end-to-end latency is flagged
BUSY_SUM_RATIO = 1.3


def sum_flag(who: str, sum_ms: float, e2e_ms: float, limit: float = BUSY_SUM_RATIO) -> str | None:
    """A line flagging a profile whose kernel times cannot be trusted, or None.

    One inference's kernel calls run one after another, so their times sum to at most about its
    end-to-end latency (TVM's are summed without the runtime kind, where the instrument hook's cost
    lands). A sum above ``limit`` (default :data:`BUSY_SUM_RATIO`, 1.3) times the fastest end-to-end
    latency means the profiled inferences ran slower than the timed ones, in practice that another
    process took the cores while they ran; that side's per-kind figures, and the gap's shares computed
    from them, are then wrong by up to that factor. Seen on a shared 2-core VM: ONNX Runtime's nodes summing to 74.0 ms
    beside its 42.2 ms end to end, the run before 41.9 beside 41.5.

    Parameters
    ----------
    who : str
        The side's name, as the line says it (``TVM``, ``ONNX Runtime``).
    sum_ms, e2e_ms : float
        Its kernel (node) times summed over one inference, and its fastest end-to-end latency, in ms.
    """
    if not (e2e_ms > 0) or not (sum_ms > limit * e2e_ms):
        return None
    return (f"{who}'s kernel times sum to {sum_ms:.3f} ms, {sum_ms / e2e_ms:.2f}x its {e2e_ms:.3f} ms end to end: "
            "the profiled inferences ran slower than the timed ones (the machine was busy), so its per-kind "
            "figures are not to be trusted; run the profile again on a quiet machine")


__all__ = ["KINDS", "tvm_kind", "ort_kind", "ov_kind", "profile_tvm", "profile_ort", "profile_openvino", "gap_table",
           "markdown", "sum_flag"]


def _ort_latency_ms(onnx_path: str, inputs, threads: int, number: int = 10, repeat: int = 5) -> float:
    """ONNX Runtime's end-to-end latency without its profiler: the fastest of ``repeat`` means of ``number``
    runs after a warm-up (the statistic of :func:`release.relax.evaluate`'s ``fastest_ms``)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = int(threads)
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
    feed = {i.name: x for i, x in zip(sess.get_inputs(), inputs)}
    sess.run(None, feed)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            sess.run(None, feed)
        best = min(best, (time.perf_counter() - t0) / number)
    return best * 1e3


def _onnx_file(model, folder: str) -> str:
    """The model as an ONNX file: its own for an ONNX import, else its PyTorch module exported
    (:func:`release.reference.onnx_exportable`, the TorchScript exporter)."""
    if getattr(model, "onnx_path", None):
        return model.onnx_path
    import torch

    from .errors import ModelError
    from .reference import onnx_exportable

    if getattr(model, "torch_module", None) is None:
        raise ModelError(f"{model.name}: no PyTorch module or ONNX file to give ONNX Runtime")
    path = os.path.join(folder, f"{model.name}.onnx")
    with torch.no_grad():
        torch.onnx.export(onnx_exportable(model.torch_module), tuple(torch.from_numpy(np.asarray(x))
                                                                   for x in model.inputs), path, dynamo=False)
    return path


def cmd_profile(args) -> int:
    """``release profile``: see the module docstring. What TVM and the model frontends print while the model is
    imported, extracted and compiled goes to ``<--out without .json>.warnings.log`` (without ``--out``: a file
    in the system's temporary folder), counted in one closing line, as ``tune-model`` does."""
    from .stderr_capture import tvm_output_to

    stem = os.path.splitext(args.out)[0] if args.out else os.path.join(tempfile.gettempdir(),
                                                                       f"release-profile-{os.getpid()}")
    with tvm_output_to(stem + ".warnings.log") as tvm_output:
        rc = _cmd_profile(args)
    if tvm_output.warnings or tvm_output.total.other:
        print(f"warnings TVM's and the frontends' stderr while importing, extracting and compiling: "
              f"{tvm_output.summary()}")
    return rc


def _cmd_profile(args) -> int:
    from . import relax as M
    from .commands import check_model_arg
    from .errors import ReleaseError
    from .target import resolve_target
    from .threads import thread_count, timing_priority, use_threads

    check_model_arg(args.model)
    try:
        runs = int(args.runs)
    except ValueError:
        runs = 0
    if runs < 1:
        raise ReleaseError(f"--runs {args.runs}: give a positive number of profiled inferences, e.g. 10")
    if args.log and not os.path.isfile(args.log):
        raise ReleaseError(f"--log {args.log} does not exist; give the log tune-model wrote (or no --log: TVM's "
                           "default schedules)")
    target = resolve_target(args.target)
    threads = thread_count(target)
    use_threads(threads)
    model = M.load_model(args.model)
    layout = M.default_layout(target) if args.layout == M.AUTO_LAYOUT else args.layout
    db, what = None, "TVM's default schedules (no --log)"
    if args.log:
        from .measure import apply_history_best

        tasks = M.extract_tasks(model, target, layout=layout)
        hist = apply_history_best(args.log)
        db = hist.database(tasks)
        what = f"{len(tasks)} tasks' best records of {args.log}, conv2d layout {layout}"
        note = hist.report(retune=f"release tune-model --model {args.model} --log NEW.jsonl")
        if note:
            print(f"note     {note}")
    ex = M.compile_model(model, target, db, layout=layout if db is not None else None)
    timing_priority()
    e2e = M.evaluate(model, ex, threads=threads)
    tvm_prof = profile_tvm(ex, model.inputs, runs)
    print(f"model    {model.name} on {threads} threads: {what}")
    print(f"tvm      {e2e['fastest_ms']:.3f} ms end to end (fastest of repeats, output checked); its kernel calls "
          f"sum to {tvm_prof['total_ms']:.3f} ms (median of {runs} inferences per call, instrument hook)")
    out: dict = {"model": model.name, "threads": threads, "log": args.log, "layout": layout,
                 "tvm": {"fastest_ms": e2e["fastest_ms"], **tvm_prof}}
    from .reference import reference_line, time_onnx_runtime

    ort_total, ov_kinds, ov_total, ov_flag = 0.0, None, None, None
    with tempfile.TemporaryDirectory() as tmp:
        try:
            path = _onnx_file(model, tmp)
            inputs = [np.asarray(x) for x in model.inputs]
            expected = model.reference()
        except Exception as err:  # noqa: BLE001 - the references are optional; say why they are missing
            from .errors import error_line

            path, why = None, f"the model does not export to ONNX: {error_line(err, first=True)}"
            print(f"ort      onnxruntime n/a ({why}): TVM's kinds only")
            print(f"openvino openvino n/a ({why})")
        if path is not None:
            # end to end: each runtime without its profiler, in a process of its own, its output checked
            e2e_ref = {rt: time_onnx_runtime(rt, path, inputs, threads, expected=expected, one_thread=False)
                       for rt in ("onnxruntime", "openvino")}
            try:
                if "error" in e2e_ref["onnxruntime"]:
                    raise RuntimeError(e2e_ref["onnxruntime"]["error"])
                ort_prof = profile_ort(path, inputs, threads, runs)
                ort_ms = e2e_ref["onnxruntime"]["latency_ms"]
                print(f"ort      {ort_ms:.3f} ms end to end (onnxruntime {ort_prof['version']}, fastest of repeats, "
                      f"its own process, output checked); its nodes sum to {ort_prof['total_ms']:.3f} ms (its "
                      f"profiler, median of {runs} inferences per node)")
                out["onnxruntime"] = {"fastest_ms": ort_ms, **ort_prof}
                ort_total = ort_prof["total_ms"]
            except Exception as err:  # noqa: BLE001 - missing (ImportError) or failing: one line
                from .errors import error_line

                why = e2e_ref["onnxruntime"].get("error") or error_line(err, first=True)
                print(f"ort      onnxruntime n/a ({why}): TVM's kinds only")
            try:
                if "error" in e2e_ref["openvino"]:
                    raise RuntimeError(e2e_ref["openvino"]["error"])
                ov_prof = profile_openvino(path, inputs, threads, runs)
                ov_ms = e2e_ref["openvino"]["latency_ms"]
                ov_kinds, ov_total = ov_prof["kinds"], ov_prof["total_ms"]
                ov_flag = sum_flag("OpenVINO", ov_total, ov_ms)
                print(f"openvino {ov_ms:.3f} ms end to end (openvino {ov_prof['version']}, fastest of repeats, its own "
                      f"process, output checked); its nodes sum to {ov_total:.3f} ms (its profiler, PERF_COUNT, "
                      f"median of {runs} inferences per node)" + (f" (flagged: {ov_flag})" if ov_flag else ""))
                out["openvino"] = {"fastest_ms": ov_ms, **ov_prof, "flag": ov_flag}
            except Exception as err:  # noqa: BLE001 - missing or failing: one line
                from .errors import error_line

                print(f"openvino {reference_line('openvino', {'error': e2e_ref['openvino'].get('error') or error_line(err, first=True)})}")
    rows = gap_table(tvm_prof["kinds"], out.get("onnxruntime", {}).get("kinds", {}), ov_kinds)
    out["rows"] = rows
    kernels_ms = sum(v for k, v in tvm_prof["kinds"].items() if k != KINDS[-1])  # the hook's cost is in KINDS[-1]
    flags = [f for f in (sum_flag("TVM", kernels_ms, e2e["fastest_ms"]),
                         sum_flag("ONNX Runtime", ort_total, out.get("onnxruntime", {}).get("fastest_ms", 0.0)))
             if f]
    out["flags"] = flags
    table = markdown(rows, tvm_prof["total_ms"], ort_total, ov_total=ov_total)
    print()
    print(table)
    for f in flags:
        print(f"FLAG     {f}")
    from .target import fma_peak

    peak = fma_peak(target)
    out["peak"] = peak
    gflop = sum(c["gflop"] for c in tvm_prof["calls"])
    if peak["gflops"]:
        model_gflops = gflop / (e2e["fastest_ms"] * 1e-3)
        print(f"peak     the CPU's FMA peak: {peak['note']} = {peak['gflops']:.0f} GFLOPS; the model's convolutions "
              f"and matmuls ({gflop:.3f} GFLOP an inference) run at {model_gflops:.1f} GFLOPS end to end, "
              f"{100 * model_gflops / peak['gflops']:.0f}% of it")
        out["model_gflops"] = model_gflops
    top = sorted(tvm_prof["calls"], key=lambda c: -c["ms"])[:5]

    def rate(c) -> str:
        if not c["gflop"] or not c["ms"]:
            return ""
        g = c["gflop"] / (c["ms"] * 1e-3)
        share = f", {100 * g / peak['gflops']:.0f}% of peak" if peak["gflops"] else ""
        return f", {g:.0f} GFLOPS{share}"

    print("hottest  " + "; ".join(f"{c['symbol']} ({c['kind']}) {c['ms']:.3f} ms{rate(c)}" for c in top))
    if peak["gflops"] and any(c["gflop"] and c["ms"] and c["gflop"] / (c["ms"] * 1e-3) > peak["gflops"]
                              for c in tvm_prof["calls"]):
        print("note     a kernel runs above the computed peak: the CPU runs faster than the clock it reports "
              "(boost clock), so the percentages are upper bounds")
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
        import sys

        from .measure.result import provenance
        from .target import host_machine, machine_of, target_to_json

        tj = target_to_json(target)
        version, rev = provenance()
        e2e_line = (f"End to end (fastest of repeats): TVM {e2e['fastest_ms']:.3f} ms"
                    + (f", ONNX Runtime {out['onnxruntime']['fastest_ms']:.3f} ms" if "onnxruntime" in out else "")
                    + (f", OpenVINO {out['openvino']['fastest_ms']:.3f} ms" if "openvino" in out else ""))
        with open(os.path.splitext(args.out)[0] + ".md", "w") as f:
            f.write(f"# Profile of {model.name} ({threads} threads; {what})\n\n"
                    f"Machine {machine_of(tj, host_machine(tj))}, {time.strftime('%Y-%m-%d')}, release-tvm {version} "
                    f"revision {rev or '?'}. Command: `release {' '.join(sys.argv[1:])}`\n\n{e2e_line}. "
                    f"Per kind, ms per inference (TVM: median of {runs} inferences per kernel call; ONNX Runtime: its "
                    f"profiler, median per node; OpenVINO: its PERF_COUNT counters, median per node):\n\n{table}"
                    + "".join(f"\n**Flagged:** {f}.\n" for f in flags)
                    + (f"\nOpenVINO flagged: {ov_flag}.\n" if ov_flag else ""))
        print(f"wrote    {args.out} and {os.path.splitext(args.out)[0]}.md")
    return 0


def register(subparsers) -> None:
    """Add ``release profile`` to the top-level CLI."""
    p = subparsers.add_parser("profile", help="per-operator-kind time of a (tuned) model against ONNX Runtime's and "
                              "OpenVINO's")
    p.add_argument("--model", default="resnet18", help="built-in model name or an .onnx file")
    p.add_argument("--log", default=None, help="the tune-model log whose best records compile the model "
                   "(without it: TVM's default schedules)")
    p.add_argument("--target", default="llvm", help="'llvm' (this CPU) or a JSON dict")
    p.add_argument("--layout", default="auto", help="conv2d layout the log's tasks were extracted with (auto: "
                   "as tune-model's default)")
    p.add_argument("--runs", default="10", help="profiled inferences; each call's time is the median")
    p.add_argument("--out", default=None, help="write the profile as JSON here (and the table beside it as .md)")
    p.set_defaults(func=cmd_profile)
