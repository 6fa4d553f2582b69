"""Whole-model tuning: PyTorch or ONNX in, tasks extracted, tuned across tasks, a compiled model out.

Pipeline (each step is TVM's own machinery):

1. :func:`load_model`: ``torch.export`` + ``tvm.relax.frontend.torch.from_exported_program``, or
   ``tvm.relax.frontend.onnx.from_onnx``; weights detached as ``params``.
2. :func:`extract_tasks`: the module is prepared as ``compile_relax`` prepares it (library
   dispatch, ``LegalizeOps``, ``AnnotateTIROpPattern``, ``FoldConstant``, ``FuseOps``,
   ``FuseTIR``), then MetaSchedule's ``extract_tasks`` gives the fused TIR functions with their
   weights (how many times each runs); each becomes a :class:`release.task.Task`.
3. :func:`tune_model`: a task scheduler (:mod:`release.scheduler`) splits the trial budget; each
   task has its own tuner; all records go to one log (resumable).
4. :func:`compile_model`: MetaSchedule's ``compile_relax`` with a database of each task's best
   record; :func:`evaluate` checks outputs against PyTorch and times the VM.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .callback import Callback
from .errors import ModelError, ReleaseError, check_n_trial, error_line

logger = logging.getLogger(__name__)


@dataclass
class Model:
    """A Relax model with detached weights.

    Attributes
    ----------
    name : str
    mod : tvm.IRModule
        Relax module; ``main`` takes the inputs then the weights (``attrs["num_input"]``).
    params : dict[str, tvm.runtime.Tensor]
        Weights by parameter name (for ``BindParams`` / ``compile_relax``).
    inputs : list[np.ndarray]
        Example inputs.
    torch_module : torch.nn.Module or None
        The source module (for reference outputs and PyTorch timing).
    """

    name: str
    mod: Any
    params: dict
    inputs: list
    torch_module: Any = None
    onnx_path: str | None = None

    def reference(self) -> list[np.ndarray]:
        """Outputs of the source model on :attr:`inputs` (PyTorch, or onnx's reference evaluator)."""
        if self.torch_module is not None:
            import torch

            with torch.no_grad():
                out = self.torch_module(*[torch.from_numpy(x) for x in self.inputs])
            outs = out if isinstance(out, (list, tuple)) else [out]
            return [o.detach().numpy() for o in outs]
        if self.onnx_path is not None:
            from onnx.reference import ReferenceEvaluator

            import onnx

            sess = ReferenceEvaluator(onnx.load(self.onnx_path))
            names = [i.name for i in sess.proto_.graph.input]
            return list(sess.run(None, dict(zip(names, self.inputs))))
        raise ModelError(f"model {self.name} has no reference implementation")


def _detach(mod, name: str) -> tuple[Any, dict]:
    from tvm import relax

    mod, params = relax.frontend.detach_params(mod)
    func = mod["main"]
    n_in = int(func.attrs["num_input"]) if func.attrs and "num_input" in func.attrs else 0
    weights = params.get("main", [])
    names = [v.name for v in func.params[n_in:]]
    if len(names) != len(weights):
        raise ModelError(f"model {name}: {len(weights)} weights for {len(names)} weight parameters")
    return mod, dict(zip(names, weights))


def from_pytorch(module, example_inputs: Sequence, name: str = "model") -> Model:
    """Import a PyTorch ``nn.Module`` through ``torch.export`` and TVM's Relax frontend.

    Raises
    ------
    ModelError
        ``torch.export`` fails, or TVM's frontend has no converter for an operator (named).
    """
    import torch
    from tvm.relax.frontend.torch import from_exported_program

    module = module.eval()
    inputs = tuple(example_inputs)
    try:
        with torch.no_grad():
            ep = torch.export.export(module, inputs)
    except Exception as err:  # noqa: BLE001 - torch raises many kinds
        raise ModelError(f"model {name} does not export with torch.export: {error_line(err, first=True)}") from None
    try:
        mod = from_exported_program(ep, keep_params_as_input=True)
    except Exception as err:  # noqa: BLE001
        msg = error_line(err)
        raise ModelError(f"model {name} uses an operator TVM's Relax frontend does not support: {msg}") from None
    mod, params = _detach(mod, name)
    return Model(name, mod, params, [x.detach().numpy() for x in inputs], torch_module=module)


def from_onnx(path: str, input_shapes: dict[str, Sequence[int]] | None = None, seed: int = 0) -> Model:
    """Import an ONNX file through ``tvm.relax.frontend.onnx``; inputs are random (seeded).

    Raises
    ------
    ModelError
        Missing file, a file that does not parse as ONNX, or an unsupported operator.
    """
    if not os.path.exists(path):
        raise ModelError(f"ONNX file {path} does not exist")
    try:
        import onnx
    except ImportError:  # pragma: no cover - onnx is a dependency
        raise ModelError("the onnx package is not installed: pip install onnx") from None
    try:
        proto = onnx.load(path)
        onnx.checker.check_model(proto)
    except Exception as err:  # noqa: BLE001
        raise ModelError(f"ONNX file {path} does not parse: {error_line(err)}") from None
    from tvm.relax.frontend.onnx import from_onnx as tvm_from_onnx

    shapes = dict(input_shapes or {})
    init = {i.name for i in proto.graph.initializer}
    rng = np.random.default_rng(seed)
    inputs = []
    for inp in proto.graph.input:
        if inp.name in init:
            continue
        dims = shapes.get(inp.name) or [d.dim_value for d in inp.type.tensor_type.shape.dim]
        if not dims or any(int(d) <= 0 for d in dims):
            raise ModelError(f"ONNX input {inp.name} has a dynamic shape; give input_shapes={{'{inp.name}': [...]}}")
        shapes[inp.name] = [int(d) for d in dims]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(inp.type.tensor_type.elem_type)
        inputs.append(rng.standard_normal(shapes[inp.name]).astype(dtype))
    try:
        mod = tvm_from_onnx(proto, shape_dict=shapes, keep_params_in_input=True)
    except Exception as err:  # noqa: BLE001
        raise ModelError(f"ONNX file {path} uses an operator TVM's Relax frontend does not support: {error_line(err)}") from None
    mod, params = _detach(mod, os.path.basename(path))
    return Model(os.path.basename(path), mod, params, inputs, onnx_path=path)


def load_model(spec, example_inputs: Sequence | None = None) -> Model:
    """A built-in model name (:mod:`release.zoo`), an ``.onnx`` path, or a PyTorch module + inputs."""
    if isinstance(spec, str):
        if spec.endswith(".onnx"):
            return from_onnx(spec)
        from . import zoo

        module, inputs = zoo.build(spec)
        return from_pytorch(module, inputs, name=spec)
    if example_inputs is None:
        raise ModelError("a PyTorch module needs example_inputs")
    return from_pytorch(spec, example_inputs, name=type(spec).__name__)


def default_prepack(model: Model, target) -> bool:
    """Pre-pack weights by default on CPU (llvm) targets when the model's weights are constants
    (TVM's ``static_shape_tuning_pipeline`` docstring: "cpu_weight_prepack is expected to be True
    when running on CPU"). A model whose weights are runtime inputs is tuned without it; a
    one-line note says so, once however many steps ask (:func:`release.notes.warn_once`)."""
    from .target import resolve_target

    if resolve_target(target).kind.name != "llvm":
        return False
    if not model.params:
        from .notes import warn_once  # extraction, the compile and the comparisons each ask: said once

        warn_once(logger, "%s: its weights are runtime inputs, not constants: tuned without weight pre-packing",
                  model.name)
        return False
    return True


def model_layout(layout: str | None) -> int | None:
    """Parse the conv2d layout a model is tuned in.

    Parameters
    ----------
    layout : str or None
        ``"NCHW"`` (or None: as imported), ``"NCHWc"`` (channel blocks sized to the target's vector
        lanes, :func:`release.task.vector_lanes`) or ``"NCHW{n}c"`` (blocks of at most ``n``).

    Returns
    -------
    int or None
        None for NCHW, 0 for ``"NCHWc"`` (the target's lanes), else ``n``.

    Raises
    ------
    ModelError
        Any other string (the message gives the accepted forms).
    """
    import re

    if layout in (None, "NCHW"):
        return None
    if layout == "NCHWc":
        return 0
    m = re.fullmatch(r"NCHW(\d+)c", str(layout))
    if not m or int(m.group(1)) < 1:
        raise ModelError(f"model layout {layout!r} is not NCHW, NCHWc (channel blocks = the target's vector lanes) "
                         "or NCHW{n}c with n >= 1 (e.g. NCHW8c)")
    return int(m.group(1))


#: ``--layout`` of ``tune-model``: the layout :func:`default_layout` picks for the target
AUTO_LAYOUT = "auto"


def default_layout(target) -> str:
    """The conv2d layout a model is tuned in when the user names none (``tune-model --layout auto``).

    ``"NCHWc"`` for a CPU (``llvm``) target: the blocked space is the one where tuned ResNet-18
    beats PyTorch eager on this CPU (9.94 ms against 17.84 ms at 2,000 trials, NCHW 21.57 ms at 576;
    ``benchmarks/results/layout/README.md``), AutoTVM's x86 conv2d templates were NCHWc for the
    same reason. ``"NCHW"`` (the model as imported) for every other target kind (CUDA: MetaSchedule's
    GPU rules tile NCHW directly).

    Parameters
    ----------
    target : tvm.target.Target, str or dict
        Anything :func:`release.target.resolve_target` takes.
    """
    from .target import resolve_target

    return "NCHWc" if resolve_target(target).kind.name == "llvm" else "NCHW"


def _static_shape(expr) -> list[int] | None:
    shape = getattr(_sinfo(expr), "shape", None)
    try:
        return [int(x) for x in shape]
    except (TypeError, ValueError):  # unknown rank or a symbolic dimension
        return None


def conv2d_blocked_layouts(call, lanes: int) -> list[str] | None:
    """The blocked layouts ``[data, kernel, output]`` for one Relax ``nn.conv2d`` call, or None
    to keep it as it is.

    Blocks are :func:`release.workloads.block_sizes` (the largest divisor of the input and of the
    output channels up to ``lanes``: 8 and 8 for 64 -> 64 with AVX2, 3 and 8 for an RGB input), so
    the vector dimension is the output-channel block (AutoTVM's x86 NCHWc, oneDNN's ``nChw8c``).
    A depthwise convolution (groups = input = output channels, channel multiplier 1) takes one block
    ``b`` for data and output and the weight ``OIHW1i{b}o`` (AutoTVM's x86 ``depthwise_conv2d_NCHWc``).
    Kept in NCHW: grouped convolutions and depthwise ones with a channel multiplier, layouts other than
    NCHW/OIHW, symbolic shapes and convolutions whose output-channel block would be 1 (no vector to fill).
    """
    from .workloads import block_sizes

    a = call.attrs
    if str(a.data_layout) != "NCHW" or str(a.kernel_layout) != "OIHW" or str(a.out_layout) not in ("", "NCHW"):
        return None
    data, weight = _static_shape(call.args[0]), _static_shape(call.args[1])
    if data is None or weight is None or len(data) != 4 or len(weight) != 4:
        return None
    groups = int(a.groups)
    if groups != 1:
        if not groups == data[1] == weight[0] or weight[1] != 1:  # grouped, or a channel multiplier above 1
            return None
        _, b = block_sizes(data[1], weight[0], lanes)
        return None if b == 1 else [f"NCHW{b}c", f"OIHW1i{b}o", f"NCHW{b}c"]
    cb, kb = block_sizes(data[1], weight[0], lanes)
    if kb == 1:
        return None
    return [f"NCHW{cb}c", f"OIHW{cb}i{kb}o", f"NCHW{kb}c"]


def blocked_conv2d_legalize(bb, call):
    """Legalize a Relax ``nn.conv2d`` in ``NCHW{cb}c`` / ``OIHW{cb}i{kb}o`` -> ``NCHW{kb}c`` to the
    TE compute operator tasks tune (:func:`release.workloads.conv2d_nchwc_compute`: reductions over
    channel blocks, kernel taps and the inner channel kept apart); any other conv2d goes to TVM's
    registered legalization (which refuses channel-blocked layouts in 0.27,
    ``relax/transform/legalize_ops/nn.py``). For ``LegalizeOps(customize_legalize_map=...)``."""
    import re

    import tvm

    from .workloads import conv2d_nchwc_compute, depthwise_conv2d_nchwc_compute

    a = call.attrs
    dl, kl = str(a.data_layout), str(a.kernel_layout)
    ol = str(a.out_layout) or dl
    md, mk, mo = (re.fullmatch(r"NCHW(\d+)c", dl), re.fullmatch(r"OIHW(\d+)i(\d+)o", kl),
                  re.fullmatch(r"NCHW(\d+)c", ol))
    data = _static_shape(call.args[0])
    if md and mk and mo and int(a.groups) != 1 and data is not None and mk.group(1) == "1" and \
            md.group(1) == mk.group(2) == mo.group(1) and int(a.groups) == data[1] * data[4]:
        return bb.call_te(depthwise_conv2d_nchwc_compute, call.args[0], call.args[1], [int(x) for x in a.strides],
                          [int(x) for x in a.padding], [int(x) for x in a.dilation], dtype_attr(a.out_dtype),
                          primfunc_name_hint="depthwise_conv2d_NCHWc")
    if not (md and mk and mo) or int(a.groups) != 1 or md.group(1) != mk.group(1) or mk.group(2) != mo.group(1):
        return tvm.ir.Op.get("relax.nn.conv2d").get_attr("FLegalize")(bb, call)
    return bb.call_te(conv2d_nchwc_compute, call.args[0], call.args[1], [int(x) for x in a.strides],
                      [int(x) for x in a.padding], [int(x) for x in a.dilation], dtype_attr(a.out_dtype),
                      primfunc_name_hint="conv2d_NCHWc")


def dtype_attr(value) -> str | None:
    """The dtype a Relax operator attribute names, or None when it names none.

    An operator attribute such as ``nn.conv2d``'s ``out_dtype`` is "unset" in more than one
    spelling, depending on who built the call: ``None`` (TVM 0.27's ONNX frontend builds its
    convolutions without one), ``""`` or ``"void"`` (the op constructors' default). Each means "the
    data's dtype" (Relax's own conv2d legalization falls back the same way); read such attributes
    through this function, never through ``str(...)``, which turns ``None`` into the dtype ``"None"``.

    Parameters
    ----------
    value : tvm dtype, str or None
        The attribute as read from ``call.attrs``.

    Returns
    -------
    str or None
        ``"float32"`` and the like, or None for an unset attribute.
    """
    if value is None:
        return None
    text = str(value)
    return None if text in ("", "void", "None") else text


def layout_passes(target, layout: str | None) -> list:
    """Relax passes that put a model's conv2d in a channel-blocked layout (empty for NCHW).

    ``FoldBatchnormToConv2D`` + ``FoldConstant`` (a batch norm after a conv2d becomes the conv's
    weights and a bias add), ``DecomposeOpsForInference`` (any other batch norm becomes elementwise
    ops, which follow the blocked layout), ``ConvertLayout`` with :func:`conv2d_blocked_layouts` per convolution (elementwise
    ops, ``add``, ``relu`` and pooling take the layout of their input, so the activation layout
    transforms stay at the blocked region's boundaries), then ``FoldConstant``: the weights are
    bound constants, so their ``layout_transform`` to ``OIHW{cb}i{kb}o`` is done at compile time.
    The compiled model still takes NCHW inputs and gives NCHW outputs. A convolution whose output
    reaches a ``concat`` (:func:`_convs_into_concat`) keeps NCHW: TVM 0.27's concat layout
    inference fails on any channel-blocked input ("Invalid layout axis 16b"), which would otherwise
    keep the whole model NCHW.

    Raises
    ------
    ModelError
        Bad ``layout`` (:func:`model_layout`).
    """
    from tvm import relax

    from .task import vector_lanes

    lanes = model_layout(layout)
    if lanes is None:
        return []
    lanes = lanes or vector_lanes(target)
    kept: list = []  # weights of the convolutions kept NCHW, set per module by _convert_layout_or_keep

    def per_call(call):
        if call.op.name != "relax.nn.conv2d":
            return {}
        # a conv kept as it is names its own layouts: without them 0.27's conv2d layout inference
        # fails on a blocked input ("Layouts must have the same size")
        want = None if any(call.args[1].same_as(w) for w in kept) else conv2d_blocked_layouts(call, lanes)
        keep = [str(call.attrs.data_layout), str(call.attrs.kernel_layout), str(call.attrs.out_layout or "")]
        return {"relax.nn.conv2d": want or [keep[0], keep[1], keep[2] or keep[0]]}

    return [relax.transform.FoldBatchnormToConv2D(), relax.transform.FoldConstant(),
            relax.transform.DecomposeOpsForInference(), _convert_layout_or_keep(per_call, lanes, kept),
            relax.transform.FoldConstant()]


def _elementwise_with_layout(mod):
    """``mod`` with the elementwise operators that TVM 0.27's ``ConvertLayout`` cannot carry a blocked
    layout through (no ``FRelaxInferLayout``) written as ones it can: ``clip(x, lo, hi)`` (ReLU6,
    hard-sigmoid) as ``minimum(maximum(x, lo), hi)`` and ``nn.leakyrelu(x, a)`` (``0 <= a <= 1``) as
    ``maximum(x, a * x)``; TVM's ONNX import of Clip (``call_tir`` of ``topi.maximum``/``minimum``
    PrimFuncs with a scalar constant bound) back as the Relax ``maximum``/``minimum``. Without this each of them is left NCHW between two layout transforms and
    stays out of the convolution's fused epilogue (MobileNetV2's ReLU6s: a fifth of its run time).
    The results are identical (``maximum``/``minimum`` are what ``topi.clip`` computes)."""
    import re

    import tvm
    from tvm import relax

    clip, leaky = tvm.ir.Op.get("relax.clip"), tvm.ir.Op.get("relax.nn.leakyrelu")
    call_tir = tvm.ir.Op.get("relax.call_tir")

    def scalar(value, dtype):
        return relax.const(float(value), dtype)

    @relax.expr_functor.mutator
    class Rewrite(relax.PyExprMutator):
        def visit_call_(self, call):
            call = super().visit_call_(call)
            x = call.args[0] if call.args else None
            dtype = str(getattr(_sinfo(x), "dtype", ""))
            if not dtype.startswith("float") and not call.op.same_as(call_tir):
                return call
            bounds = list(call.args[1:])  # TIR immediates (``FloatImm``/``IntImm``) for constant bounds
            if call.op.same_as(clip) and all(isinstance(b, (tvm.tirx.FloatImm, tvm.tirx.IntImm)) for b in bounds):
                lo, hi = (b.value for b in bounds)
                return relax.op.minimum(relax.op.maximum(x, scalar(lo, dtype)), scalar(hi, dtype))
            if call.op.same_as(leaky) and 0.0 <= float(call.attrs.alpha) <= 1.0:
                return relax.op.maximum(x, relax.op.multiply(x, scalar(call.attrs.alpha, dtype)))
            if call.op.same_as(call_tir) and isinstance(call.args[0], relax.GlobalVar) and \
                    re.fullmatch(r"(maximum|minimum)\d*", call.args[0].name_hint):
                # TVM's ONNX frontend imports Clip as topi.maximum/minimum PrimFuncs (``emit_te``),
                # with the bounds as scalar tensors (constants once FoldConstant ran)
                args = call.args[1].fields if isinstance(call.args[1], relax.Tuple) else []
                bound = args[1] if len(args) == 2 else None
                if isinstance(bound, tvm.ir.Constant) and tuple(bound.value.shape) == () and \
                        str(bound.value.dtype) == str(getattr(_sinfo(args[0]), "dtype", "")):
                    op = relax.op.maximum if call.args[0].name_hint.startswith("max") else relax.op.minimum
                    return op(args[0], bound)
            return call

    for gv, func in list(mod.functions.items()):
        if isinstance(func, relax.Function):
            mod[gv] = Rewrite(mod).visit_expr(func)
    return relax.transform.DeadCodeElimination()(mod)  # the PrimFuncs no call reaches any more


def _sinfo(expr):
    """A Relax expression's struct info (``.ty`` in TVM 0.27, ``.struct_info`` before)."""
    return getattr(expr, "struct_info", None) or getattr(expr, "ty", None)


def _op_name(expr) -> str | None:
    import tvm
    from tvm import relax

    return expr.op.name if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op) else None


def _convs_into_concat(mod) -> list:
    """The weights (``args[1]``) of the ``nn.conv2d`` calls whose output reaches a ``concat`` through
    ops other than ``nn.conv2d`` (a bias add, a relu, a pooling: the ops ``ConvertLayout`` carries a
    blocked layout through), in ``mod``'s Relax functions."""
    from tvm import relax

    weights = []
    for _, func in mod.functions.items():
        if not isinstance(func, relax.Function) or not isinstance(func.body, relax.SeqExpr):
            continue
        users: dict = {}
        values: dict = {}
        for block in func.body.blocks:
            for b in block.bindings:
                if isinstance(b, relax.VarBinding):
                    values[b.var] = b.value
                    for v in relax.analysis.free_vars(b.value):
                        users.setdefault(v, []).append(b.var)
        for var, value in values.items():
            if _op_name(value) != "relax.nn.conv2d":
                continue
            seen, todo = set(), [var]
            while todo:
                nxt = [u for u in users.get(todo.pop(), []) if u not in seen]
                seen.update(nxt)
                if any(_op_name(values[u]) == "relax.concat" for u in nxt):
                    weights.append(value.args[1])
                    break
                todo += [u for u in nxt if _op_name(values[u]) != "relax.nn.conv2d"]
    return weights


def _blocked_convs(mod, lanes: int, kept: list = ()) -> int:
    """How many ``nn.conv2d`` calls of ``mod``'s Relax functions :func:`conv2d_blocked_layouts` would
    block (those whose weight is in ``kept`` excepted)."""
    from tvm import relax

    count = [0]

    def visit(expr):
        if _op_name(expr) == "relax.nn.conv2d" and not any(expr.args[1].same_as(w) for w in kept):
            count[0] += conv2d_blocked_layouts(expr, lanes) is not None

    for _, func in mod.functions.items():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func, visit)
    return count[0]


def _convert_layout_or_keep(per_call, lanes: int, kept: list):
    """Relax ``ConvertLayout`` with ``per_call``, run only where a conv2d gets blocked, and the model
    kept as it is when TVM's pass fails (one warning). ``kept`` (read by ``per_call``) is set to the
    module's :func:`_convs_into_concat` first.

    TVM 0.27's ``ConvertLayout`` dies with ``std::bad_alloc`` on the BERT-base encoder layer (no
    conv2d at all; found running the model tier with NCHWc): a model with nothing to block is not
    given to it, and any other failure falls back to the imported layout for the whole model, as the
    issue asks of a layout rewrite that fails. The pass is deterministic, so task extraction and
    :func:`compile_model` fall back alike and the database's keys still match."""
    import tvm
    from tvm import relax

    @tvm.transform.module_pass(opt_level=0, name="release.ConvertLayoutOrKeep")
    def convert(mod, ctx):
        kept[:] = _convs_into_concat(mod)
        n = _blocked_convs(mod, lanes, kept)
        if n == 0:
            return mod
        mod = _elementwise_with_layout(mod)
        try:
            return relax.transform.ConvertLayout({}, per_call)(mod)
        except Exception as err:  # noqa: BLE001 - TVM's errors (InternalError, ...) come as several classes
            why = (str(err).strip().splitlines() or [""])[-1][:200]
            from .notes import warn_once  # extraction and the compile run this pass alike: said once

            warn_once(logger, "blocked layout: TVM's ConvertLayout failed on this model (%s: %s); its %d conv2d "
                      "keep the imported NCHW layout", type(err).__name__, why, n)
            return mod

    return convert


def _fuse_passes(target, prepack: bool, layout: str | None = None) -> list:
    """The passes ``compile_relax`` runs before applying a database, plus TVM's pre-tuning layout
    rewrite (``AttachAttrLayoutFreeBuffers``: the bound weights of every fused function become its
    ``layout_free_buffers``) when ``prepack``, after :func:`layout_passes` for a blocked ``layout``."""
    from tvm import relax
    from tvm.relax import pipeline as relax_pipeline

    try:
        dispatch = relax_pipeline.library_dispatch_passes(target)
    except (ValueError, AttributeError):
        dispatch = []
    blocked = layout_passes(target, layout)
    legalize = relax.transform.LegalizeOps(customize_legalize_map={"relax.nn.conv2d": blocked_conv2d_legalize}) \
        if blocked else relax.transform.LegalizeOps()
    return [*blocked, *dispatch, legalize, relax.transform.AnnotateTIROpPattern(),
            relax.transform.FoldConstant(), relax.transform.FuseOps(), relax.transform.FuseTIR(),
            *([relax.transform.AttachAttrLayoutFreeBuffers()] if prepack else [])]


def prepare(mod, params: dict, target, prepack: bool = False, layout: str | None = None):
    """Bind weights and lower as ``compile_relax`` does before applying a database; with
    ``prepack``, mark the weights layout-free as TVM's ``cpu_weight_prepack`` pipeline does; with a
    blocked ``layout`` (``"NCHWc"``), convert conv2d to it first (:func:`layout_passes`)."""
    import tvm
    from tvm import relax

    from .target import ensure_tensor_intrinsics

    ensure_tensor_intrinsics(target)
    if params:
        mod = relax.transform.BindParams("main", params)(mod)
    with target:
        return tvm.transform.Sequential(_fuse_passes(target, prepack, layout))(mod)


def extract_tasks(model: Model, target, prepack: bool | None = None, progress: bool = False,
                  layout: str | None = None) -> list:
    """Tuning tasks of ``model`` (MetaSchedule's Relax task extraction), heaviest first.

    Parameters
    ----------
    prepack : bool, optional
        Weights layout-free (pre-packed by the tuned schedules); default :func:`default_prepack`.
        Compile with the same value (:func:`compile_model`).
    progress : bool
        A tqdm bar over the extracted tasks while their knob spaces are built (the slow part:
        seconds per task), with its estimate of the remaining time. Default False.
    layout : str, optional
        conv2d layout: ``"NCHW"`` (default: as imported), ``"NCHWc"`` (channel blocks = the
        target's vector lanes, 8 with AVX2, 16 with AVX-512; a smaller block where the channels do
        not divide, e.g. 3 for an RGB input) or ``"NCHW{n}c"``. Blocked tasks are named
        ``...conv2d_NCHWc...`` and tuned like any other (their knob space is MetaSchedule's design
        space). Compile with the same value. See :func:`layout_passes`.

    Returns
    -------
    list[release.task.Task]
        ``task.weight`` = how many times it runs per inference; ``task.flop`` per run. Tasks
        whose knob space has no knob (reshapes and the like) are dropped.

    Raises
    ------
    ModelError
        Bad ``layout``.
    """
    from tvm.s_tir import meta_schedule as ms

    from .errors import SpaceError
    from .target import resolve_target
    from .task import Task

    target = resolve_target(target)
    model_layout(layout)  # a bad layout fails here, in one line
    prepack = default_prepack(model, target) if prepack is None else bool(prepack)
    mod = prepare(model.mod, model.params, target, prepack=prepack, layout=layout)
    tasks = []
    extracted = list(ms.relax_integration.extract_tasks(mod, target))
    if progress:
        from .progress import track  # a bar on a terminal, a plain line elsewhere

        extracted = track(extracted, desc="extract", unit="task")
    for et in extracted:
        t = Task(et.dispatched[0], target, name=f"{model.name}.{et.task_name}", weight=int(et.weight))
        try:
            t.config_space  # noqa: B018 - builds the space; drops knob-less tasks
        except SpaceError:
            logger.info("task %s has no knob to tune; left to TVM's default schedule", t.name)
            continue
        tasks.append(t)
    tasks.sort(key=lambda t: -t.flop * t.weight)
    return tasks


def latency_shares(tasks: list, tuners: dict | None = None) -> np.ndarray:
    """Each task's share of the end-to-end latency, ``weight x latency`` over the sum.

    A task with a measured best uses it (``tuners[task.key].best_cost``); a task without one is
    estimated as ``flop / r``, where ``r`` is the throughput (FLOP/s, weighted) the measured tasks
    reach; with nothing measured this is the FLOP share ``weight x flop`` (the estimate before
    tuning). This is the objective of Ansor / MetaSchedule's gradient task scheduler
    (``sum_i weight_i * best_latency_i``), split per task.

    Parameters
    ----------
    tasks : list[Task]
        ``weight`` (runs per inference) and ``flop`` (per run).
    tuners : dict, optional
        ``task.key -> tuner`` (``best_config``, ``best_cost`` in seconds); default none measured.

    Returns
    -------
    np.ndarray
        Shape ``(len(tasks),)``, in [0, 1], summing to 1 (all zeros for tasks of no FLOPs and no
        measurement).
    """
    tuners = tuners or {}
    w = np.array([float(t.weight) for t in tasks])
    flop = np.array([float(t.flop) for t in tasks])
    lat = np.full(len(tasks), np.nan)
    for i, t in enumerate(tasks):
        tu = tuners.get(t.key)
        if tu is not None and tu.best_config is not None and np.isfinite(tu.best_cost) and tu.best_cost > 0:
            lat[i] = tu.best_cost
    have = np.isfinite(lat)
    if have.any() and (w[have] * lat[have]).sum() > 0 and (w[have] * flop[have]).sum() > 0:
        rate = (w[have] * flop[have]).sum() / (w[have] * lat[have]).sum()
        est = np.where(have, lat, flop / rate)
    else:
        est = flop
    cost = w * np.nan_to_num(est)
    total = cost.sum()
    return cost / total if total > 0 else np.zeros(len(tasks))


@dataclass
class TuneModelResult:
    """Outcome of :func:`tune_model`: per-task best records and time split."""

    tasks: list
    tuners: dict = field(default_factory=dict)
    wall_s: float = 0.0
    #: task key -> milliseconds of TVM's default schedule on this machine (``Record.default``;
    #: absent where it was not measured or did not run)
    default_ms: dict = field(default_factory=dict)

    def table(self) -> list[dict]:
        """One row per task, in tuning order: ``task``, ``weight``, ``gflop``, ``flop_share`` and
        ``latency_share`` (fractions, :func:`latency_shares`), ``trials``, ``best_ms``, ``gflops``,
        ``default_ms`` (TVM's default schedule, NaN where not measured)."""
        rows = []
        flop_share = latency_shares(self.tasks)
        lat_share = latency_shares(self.tasks, self.tuners)
        for t, fs, ls in zip(self.tasks, flop_share, lat_share):
            tu = self.tuners.get(t.key)
            rows.append(dict(task=t.name, weight=t.weight, gflop=t.flop / 1e9, flop_share=float(fs),
                             latency_share=float(ls), trials=tu.trials if tu else 0,
                             best_ms=(tu.best_cost * 1e3 if tu and tu.best_config else float("nan")),
                             gflops=(tu.best_gflops if tu else 0.0),
                             default_ms=self.default_ms.get(t.key, float("nan"))))
        return rows

    def lost_to_default(self) -> list[str]:
        """Names of the tasks that were tuned (a trial or more) and whose best tuned kernel is slower
        than TVM's default schedule, or never ran: they keep the default in the compiled model."""
        return [r["task"] for r in self.table()
                if r["trials"] and r["default_ms"] == r["default_ms"] and not r["best_ms"] <= r["default_ms"]]


def default_chunk(n_parallel: int) -> int:
    """Trials a task gets per scheduling step of :func:`tune_model`: 4 batches of the builder's
    ``n_parallel`` workers, at least 8. One round over every task costs ``len(tasks) * chunk``."""
    return max(8, int(n_parallel) * 4)


def tune_model(tasks: list, n_trial: int, log: str, tuner: str = "random", scheduler: str = "gradient",
               measure_option: dict | None = None, chunk: int | None = None, seed: int = 0,
               progress: bool = True, tuner_kwargs: dict | None = None,
               callbacks: list | None = None, knowledge=None, defaults: bool = True) -> TuneModelResult:
    """Tune ``tasks`` with a total budget of ``n_trial`` measurements, resumable from ``log``.

    Parameters
    ----------
    tasks : list[Task]
        From :func:`extract_tasks`.
    n_trial : int
        Total measured configs over all tasks (resumed records count).
    log : str
        JSON-lines log shared by all tasks, read once at start (records already there resume each
        task's session) and appended to after every measurement.
    tuner : str
        Tuner name (``release.tuners.TUNERS``) used for every task.
    scheduler : str
        ``"round-robin"`` or ``"gradient"`` (Ansor / MetaSchedule's gradient-based scheduler).
    chunk : int, optional
        Trials given to a task per scheduling step (default: the builder's ``n_parallel`` x 4, at least 8).
    progress : bool
        A tqdm bar over the whole budget (trials done, elapsed, estimated time left; the task
        tuned now, its best and its latency share). Default True.
    callbacks : list, optional
        Further tuner callbacks (:class:`release.callback.Callback`), given every task's results
        after the log's.
    knowledge : str, PathLike or KnowledgeBase, optional
        A knowledge base (:mod:`release.knowledge`): read once for all tasks; model-based tuners
        start warm from it (:mod:`release.cost_model.transfer`), and every measurement and each
        task's program are added to it, so a task tuned later in the run learns from the ones
        tuned before it, and a later model from this one. Default None: cold, nothing written
        (AutoTVM's behaviour; the CLI's ``tune-model`` uses the default base unless
        ``--no-knowledge``).
    defaults : bool
        Measure each task's default schedule (TVM's untuned kernel) once, before tuning, as the
        candidate every tuned config must beat (:func:`release.measure.measurer.measure_defaults`);
        recorded in the log (``Record.default``), never re-measured on resume, not counted in
        ``n_trial``. Applying the log keeps the default where it is faster
        (:class:`release.measure.records.ApplyHistoryBest`). Default True.

    Notes
    -----
    The loop is :class:`release.scheduler.TaskScheduler` over the tasks' tuning sessions
    (:class:`release.session.TuningSession`, one per task) that share one measure option (worker
    pools) and one log: each step gives ``chunk`` trials to the task the policy (``scheduler``)
    picks and runs that task's session (ask -> measure -> tell) with the task's measurer, made
    once. Callbacks' ``on_start``/``on_finish``, the output check of each task's best config and its
    rejection summary run once per task, after its last chunk.

    Tasks are tuned in the order of their share of the end-to-end latency
    (:func:`latency_shares`): the measured ``weight x best latency`` of the tasks the log already
    has records of, the FLOP share (``weight x flop``) standing in for the others. The scheduler's
    first round follows that order, so a budget short of one round per task reaches the tasks that
    cost the model most; the returned result lists the tasks in that order.
    """
    from .errors import TunerError
    from .measure import measure_option as make_option
    from .measure.measurer import measure_missing_defaults
    from .measure.records import log_to_file
    from .scheduler import TaskScheduler
    from .tuners import get_tuner

    check_n_trial(n_trial)
    if not tasks:
        raise TunerError("the model has no tunable task")
    own = measure_option is None
    opt = measure_option or make_option()
    chunk = chunk or default_chunk(opt["builder"].n_parallel)
    t0 = time.time()
    logcb = log_to_file(log)  # the one read of the shared log
    kwargs = dict(tuner_kwargs or {})
    extra = list(callbacks or [])
    if knowledge is not None and knowledge is not False:
        from .knowledge import KnowledgeBase, log_to_knowledge
        from .tuners import tuner_class

        base = knowledge if isinstance(knowledge, KnowledgeBase) else KnowledgeBase(knowledge, read_once=True)
        if "model" in tuner_class(tuner).knowledge_uses:  # the model-based tuners (declared on the class)
            kwargs["knowledge"] = base  # one object: read once, then kept current by the callback below
        extra.append(log_to_knowledge(base))
    if defaults:  # the untuned kernel of each task, once per machine (a resumed run has it in the log)
        measure_missing_defaults(tasks, opt, logcb)
    tuners = {t.key: get_tuner(tuner, t, seed=seed, **kwargs) for t in tasks}
    for t in tasks:  # resume every task's session from the records read above
        tuners[t.key].load_history(logcb.records(t))
    # heaviest share of the end-to-end latency first (measured where the log has data, FLOPs elsewhere)
    shares = latency_shares(tasks, tuners)
    order = sorted(range(len(tasks)), key=lambda i: -shares[i])
    tasks = [tasks[i] for i in order]
    share_of = {t.key: float(shares[i]) for t, i in zip(tasks, order)}
    used = sum(tu.trials for tu in tuners.values())
    bar = None
    if progress:
        from .progress import progress as make_progress  # a bar on a terminal, plain lines elsewhere

        bar = make_progress(n_trial, desc="model", unit="trial", initial=min(used, n_trial))
    per_trial = [_TrialProgress(bar, share_of)] if bar is not None else []  # a chunk can take minutes

    def on_chunk(tu, gained: int) -> None:
        if bar is not None:  # the trials the callback did not see (none, unless a tuner reports fewer)
            bar.set_postfix_str(_TrialProgress.postfix(tu, share_of))
            bar.update(max(0, gained - per_trial[0].take()))

    sched = TaskScheduler(tasks, tuners, scheduler, opt, [logcb, *extra, *per_trial], chunk=chunk, seed=seed,
                          on_chunk=on_chunk)
    try:
        sched.run(n_trial)
    finally:
        if bar is not None:
            bar.close()
        if own:
            opt["builder"].close()
            opt["runner"].close()
    return TuneModelResult(tasks, tuners, time.time() - t0, default_ms=default_ms(tasks, logcb))


def default_ms(tasks: list, log) -> dict:
    """Task key -> milliseconds of the fastest successful default-schedule record of this machine
    (``Record.default``) in ``log`` (a :class:`release.measure.records.log_to_file` or a path)."""
    from .measure.records import log_to_file

    log = log if isinstance(log, log_to_file) else log_to_file(log)
    out = {}
    for t in tasks:
        here = [r.mean_cost for r in log.defaults(t) if r.ok and t.tier(r) == "machine"]
        if here:
            out[t.key] = min(here) * 1e3
    return out


class _TrialProgress(Callback):
    """A tuner callback advancing :func:`tune_model`'s progress once per measured trial (plain lines
    every N trials or T seconds where there is no terminal, :mod:`release.progress`)."""

    def __init__(self, bar, share_of: dict):
        self.bar, self.share_of, self.seen = bar, share_of, 0

    @staticmethod
    def postfix(tu, share_of: dict) -> str:
        """The current task, its trials and best so far, its weight and share of the latency."""
        task = tu.task
        return (f"{task.name}: {tu.trials} trials, best {tu.best_cost * 1e3:.3f} ms ({tu.best_gflops:.2f} GFLOPS), "
                f"weight {task.weight}, {100 * share_of[task.key]:.0f}% of the latency")

    def take(self) -> int:
        """Trials counted since the last call."""
        n, self.seen = self.seen, 0
        return n

    def on_result(self, tuner, inputs, results) -> None:
        """Advance by the results that are trials (a re-check of the best is none)."""
        from .measure.result import ErrorKind

        n = sum(r.error_kind != ErrorKind.WRONG_OUTPUT for r in results)
        self.seen += n
        self.bar.set_postfix_str(self.postfix(tuner, self.share_of))
        self.bar.update(n)


def schedule_knobless(mod, target):
    """Schedule every unscheduled function of ``mod`` whose MetaSchedule design space has no decision to tune.

    MetaSchedule's ``tune_relax`` measures the single candidate of such a function (its
    ``ParallelizeVectorizeUnroll`` rule samples nothing for a purely spatial function) and its
    database then schedules it; tuners that skip knob-less tasks would leave them as TVM lowers
    unscheduled TIR: one thread, no vector code (the BERT-base layer's 13 reshape/transpose/GELU/add
    functions). This pass applies that same candidate without measuring it: the design space of
    ``PostOrderApply`` with the target's default rules, postprocessed, marked ``tir.is_scheduled``.

    Skipped: functions already scheduled (``tir.is_scheduled``: applied from the database), pure
    reshapes (``relax.analysis.has_reshape_pattern``: later lowered to a view, no kernel at all),
    functions whose space has a sampling decision (tunable: left as they are when untuned), and
    any whose space generation or postprocessing fails (kept unscheduled, logged at debug level).

    Parameters
    ----------
    mod : tvm.IRModule
        A Relax module after fusion and ``MetaScheduleApplyDatabase``.
    target : tvm.target.Target

    Returns
    -------
    tvm.IRModule
        ``mod`` with those functions replaced.
    """
    import tvm
    from tvm import relax, tirx
    from tvm.s_tir import meta_schedule as ms

    out = mod.clone()
    for gv, func in mod.functions_items():
        if not isinstance(func, tirx.PrimFunc) or (func.attrs is not None and func.attrs.get("tir.is_scheduled")):
            continue
        try:
            if relax.analysis.has_reshape_pattern(func):
                continue
            ctx = ms.TuneContext(mod=tvm.IRModule({"main": func.with_attr("global_symbol", "main")}), target=target,
                                 space_generator="post-order-apply", search_strategy="replay-trace", num_threads=1)
            schs = ctx.generate_design_space()
            if len(schs) != 1 or any(schs[0].trace.get_decision(i) is not None for i in schs[0].trace.insts
                                     if i.kind.name.startswith("Sample")):
                continue
            sch = schs[0]
            sch.enter_postproc()
            if not all(p.apply(sch) for p in ctx.space_generator.postprocs):
                continue
        except Exception as err:  # noqa: BLE001 - a function we cannot schedule keeps TVM's default
            logger.debug("%s: kept unscheduled (%s)", gv.name_hint, err)
            continue
        new = sch.mod["main"].with_attr("tir.is_scheduled", True)
        sym = func.attrs.get("global_symbol") if func.attrs is not None else None
        new = new.with_attr("global_symbol", sym) if sym is not None else new.without_attr("global_symbol")
        out.update_func(gv, new)
    return out


def compile_model(model: Model, target, database=None, prepack: bool | None = None, progress: bool = False,
                  layout: str | None = None, before_lowering=None):
    """Compile ``model`` with the tuned functions of ``database``; ``database=None`` gives the untuned build.

    With a database, functions that have no knob to tune (elementwise ops, transposes, layout
    transforms: :func:`extract_tasks` drops them) get MetaSchedule's design-space schedule
    (:func:`schedule_knobless`: parallel and vectorized), as ``tune_relax`` gives them by measuring
    their one candidate; functions with knobs but no record keep TVM's default (unscheduled) code.

    The pipeline is MetaSchedule's ``compile_relax`` (fuse, ``MetaScheduleApplyDatabase``, lower,
    finalize) with TVM's post-tuning layout rewrite when ``prepack``
    (``static_shape_tuning_pipeline(cpu_weight_prepack=True)``): ``SplitLayoutRewritePreproc``
    splits each tuned kernel's weight packing into its own function, ``LiftTransformParams`` +
    ``FoldConstant`` run it on the bound weights at compile time, so the compiled model takes
    exactly the inputs it took before and never re-packs a weight per call.

    Parameters
    ----------
    prepack : bool, optional
        As the tasks were extracted (:func:`extract_tasks`); default :func:`default_prepack`.
        A database written without pre-packing applies with ``prepack=False``.
    progress : bool
        A tqdm bar over the compile's stages (fuse, apply the database, layout rewrite, lower,
        code generation), with the time spent and tqdm's estimate of the time left. Default False.
    layout : str, optional
        As the tasks were extracted (default NCHW). The blocked model keeps NCHW inputs and outputs;
        only the boundaries of its blocked region transform activations, the weights are transformed
        at compile time (:func:`layout_passes`).
    before_lowering : callable, optional
        ``IRModule -> IRModule``, run on the fused module with the database applied (and weights
        pre-packed), right before lowering: e.g. a kernel-call order for TVM's memory planner
        (``tune-model --memory-order``: :func:`release.graph.relax_apply.reorder_for_memory`).

    Raises
    ------
    ModelError
        Bad ``layout``.
    """
    import tvm
    from tvm import relax
    from tvm.relax import pipeline as relax_pipeline
    from tvm.relax.transform import MetaScheduleApplyDatabase
    from tvm.s_tir import meta_schedule as ms

    from .target import ensure_tensor_intrinsics, resolve_target

    target = resolve_target(target)
    ensure_tensor_intrinsics(target)
    model_layout(layout)  # a bad layout fails here, in one line
    prepack = default_prepack(model, target) if prepack is None else bool(prepack)
    db = database if database is not None else ms.database.MemoryDatabase()
    post = [relax.transform.SplitLayoutRewritePreproc(), relax.transform.LiftTransformParams(),
            relax.transform.FoldConstant()] if prepack else []

    try:
        lower = relax_pipeline.dataflow_lower_passes(target) + relax_pipeline.finalize_passes(target)
    except (ValueError, AttributeError):  # as compile_relax: targets without a registered backend pipeline
        lower = [relax.transform.RewriteDataflowReshape(), relax.transform.ToNonDataflow(),
                 relax.transform.RemovePurityChecking(), relax.transform.CallTIRRewrite(),
                 relax.transform.StaticPlanBlockMemory(), relax.transform.LowerAllocTensor(),
                 relax.transform.KillAfterLastUse(), relax.transform.LowerRuntimeBuiltin(),
                 relax.transform.ComputePrimValue(), relax.transform.VMShapeLower(),
                 relax.transform.AttachGlobalSymbol()]

    bar = None
    if progress:
        from .progress import progress as make_progress  # a bar on a terminal, a plain line elsewhere

        stages = 5 if prepack else 4
        bar = make_progress(stages, desc="compile", unit="stage", every_n=stages)

    def _stage(name: str) -> None:
        if bar is not None:
            bar.set_postfix_str(name)
            bar.update(1)

    @tvm.transform.module_pass(opt_level=3)
    def _pipeline(mod, _ctx):
        mod = tvm.transform.Sequential(_fuse_passes(target, prepack, layout))(mod)
        _stage("fused")
        mod = MetaScheduleApplyDatabase()(mod)
        if database is not None:
            mod = schedule_knobless(mod, target)
        _stage("database applied")
        if post:
            mod = tvm.transform.Sequential(post)(mod)
            _stage("weights pre-packed")
        if before_lowering is not None:
            mod = before_lowering(mod)
        mod = tvm.transform.Sequential(lower)(mod)
        _stage("lowered; generating code")
        return mod

    mod = model.mod
    if model.params:
        mod = relax.transform.BindParams("main", model.params)(mod)
    try:
        with target, db, tvm.transform.PassContext(opt_level=3):
            ex = relax.build(mod, target=target, relax_pipeline=_pipeline)
        _stage("built")
        return ex
    finally:
        if bar is not None:
            bar.close()


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

    from .threads import runtime_threads, use_threads

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

    from .reference import time_torch

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






def tune_with_metaschedule(model: Model, target, n_trial: int, work_dir: str, number: int = 4, repeat: int = 3,
                           min_repeat_ms: int = 50, n_parallel: int | None = None, seed: int = 0,
                           prepack: bool | None = None, progress: bool = False, trial_log: str | None = None,
                           num_trials_per_iter: int | None = None, layout: str | None = None):
    """MetaSchedule's own ``tune_relax`` (evolutionary search, XGBoost model, gradient scheduler)
    with the same total budget, the fast build function and the same evaluator settings, on the
    target's threads, with weights pre-packed as TVM recommends for a CPU (``prepack``, default
    :func:`default_prepack`; compile its database with the same value).

    Parameters
    ----------
    progress : bool
        A tqdm bar over the ``n_trial`` budget (trials measured, elapsed, estimated time left),
        advanced by a measure callback after each of MetaSchedule's batches. Default False.
    trial_log : str, optional
        JSON-lines file appended (and flushed) after each batch: ``elapsed_s`` since tuning
        started, ``trials`` measured so far, ``records`` in the database (its
        ``database_tuning_record.json`` lines), ``task_id``. The model benchmark tier reads it to
        place the database's first records on the wall-time axis. Default none.
    num_trials_per_iter : int, optional
        Candidates per MetaSchedule iteration. Default None: ``n_trial / (4 x tasks)`` clipped to
        [8, 64], so a small budget still reaches every task; give 64 for ``tune_relax``'s own default.
    layout : str, optional
        conv2d layout (:func:`extract_tasks`): MetaSchedule tunes the same converted model as our
        tuners; compile its database with the same ``layout``. Default None: as imported (NCHW).

    The callbacks are MetaSchedule's defaults (``MeasureCallback.create("default")``) followed by
    the bookkeeping one above, and the database is the ``JSONDatabase`` in ``work_dir`` that
    ``tune_relax`` would make itself: the search is MetaSchedule's default.

    Returns
    -------
    (database, wall_seconds)
    """
    from tvm.s_tir import meta_schedule as ms

    import functools

    from .measure._worker import init_runner
    from .target import ensure_tensor_intrinsics, host_cores, resolve_target
    from .threads import thread_count

    target = resolve_target(target)
    ensure_tensor_intrinsics(target)
    prepack = default_prepack(model, target) if prepack is None else bool(prepack)
    mod = prepare(model.mod, model.params, target, prepack=prepack, layout=layout)  # TVM's CPU recipe: cpu_weight_prepack
    for name in ("tvm.s_tir.meta_schedule", "tvm.meta_schedule"):
        logging.getLogger(name).setLevel(logging.WARNING)  # its per-iteration XGBoost DEBUG lines
    from .strategy import fast_builder

    builder = fast_builder(target, max_workers=n_parallel or host_cores(), timeout_sec=120)
    runner = ms.runner.LocalRunner(evaluator_config=ms.runner.EvaluatorConfig(
        number=number, repeat=repeat, min_repeat_ms=min_repeat_ms, enable_cpu_cache_flush=False),
        initializer=functools.partial(init_runner, thread_count(target)))  # the target's threads, as ours
    n_tasks = max(1, len(ms.relax_integration.extract_tasks(mod, target)))
    per_iter = int(num_trials_per_iter or min(64, max(8, n_trial // (4 * n_tasks))))  # small budgets reach every task
    os.makedirs(work_dir, exist_ok=True)
    database = ms.database.JSONDatabase(work_dir=work_dir, module_equality="structural")  # tune_relax's "json"
    bar = None
    if progress:
        from .progress import progress as make_progress

        bar = make_progress(n_trial, desc="ms", unit="trial")
    t0 = time.time()
    callbacks = list(ms.measure_callback.MeasureCallback.create("default"))
    callbacks.append(_trial_callback(t0, database, bar, trial_log))
    try:
        db = ms.relax_integration.tune_relax(mod, None, target, work_dir, max_trials_global=n_trial,
                                             num_trials_per_iter=per_iter, builder=builder, runner=runner,
                                             database=database, measure_callbacks=callbacks, seed=seed)
    finally:
        if bar is not None:
            bar.close()
    return db, time.time() - t0


def _trial_callback(t0: float, database, bar, trial_log: str | None):
    """A MetaSchedule measure callback: advance ``bar`` and append one line to ``trial_log`` per
    measured batch (see :func:`tune_with_metaschedule`)."""
    import json

    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

    @derived_object
    class _Trials(PyMeasureCallback):
        def __init__(self):
            self.trials = 0

        def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):
            n = len(measure_candidates)
            self.trials += n
            if bar is not None:
                bar.update(n)
            if trial_log:
                with open(trial_log, "a", encoding="utf-8") as f:
                    f.write(json.dumps({"elapsed_s": time.time() - t0, "trials": self.trials,
                                        "records": int(len(database)), "task_id": int(task_id)}) + "\n")
                    f.flush()

    return _Trials()

