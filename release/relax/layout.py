"""Layout decisions and the Relax passes that carry them out.

Decisions: weights pre-packed or not (:func:`default_prepack`), the conv2d layout a model is tuned in
(:func:`model_layout`, :func:`default_layout`, :data:`AUTO_LAYOUT`) and each convolution's blocked layouts
(:func:`conv2d_blocked_layouts`). Passes: :func:`layout_passes` (batch norms folded, ``ConvertLayout`` to
``NCHW{c}c`` where a conv2d gets blocked, the model kept NCHW where TVM's pass fails),
:func:`blocked_conv2d_legalize` (blocked convolutions legalized to the operator tasks' TE computes) and
``_fuse_passes``: the passes ``compile_relax`` runs before applying a database, shared by task extraction
(:mod:`release.relax.extract`) and the compile (:mod:`release.relax.compile`) so the database's keys match.
"""

from __future__ import annotations

import logging

from ..errors import ModelError
from .frontend import Model, struct_info as _sinfo

logger = logging.getLogger(__name__)


def default_prepack(model: Model, target) -> bool:
    """Pre-pack weights by default on CPU (llvm) targets when the model's weights are constants
    (TVM's ``static_shape_tuning_pipeline`` docstring: "cpu_weight_prepack is expected to be True
    when running on CPU"). A model whose weights are runtime inputs is tuned without it; a
    one-line note says so, once however many steps ask (:func:`release.notes.warn_once`)."""
    from ..target import resolve_target

    if resolve_target(target).kind.name != "llvm":
        return False
    if not model.params:
        from ..notes import warn_once  # extraction, the compile and the comparisons each ask: said once

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
    from ..target import resolve_target

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
    from ..workloads import block_sizes

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

    from ..workloads import conv2d_nchwc_compute, depthwise_conv2d_nchwc_compute

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

    from ..task import vector_lanes

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
    :func:`~release.relax.compile.compile_model` fall back alike and the database's keys still match."""
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
            from ..notes import warn_once  # extraction and the compile run this pass alike: said once

            warn_once(logger, "blocked layout: TVM's ConvertLayout failed on this model (%s: %s); its %d conv2d "
                      "keep the imported NCHW layout", type(err).__name__, why, n)
            return mod

    return convert


def _fuse_passes(target, prepack: bool, layout: str | None = None, pad: bool = False) -> list:
    """The passes ``compile_relax`` runs before applying a database, plus TVM's pre-tuning layout
    rewrite (``AttachAttrLayoutFreeBuffers``: the bound weights of every fused function become its
    ``layout_free_buffers``) when ``prepack``, after :func:`layout_passes` for a blocked ``layout``.
    Legalization writes GELU, erf, exp, sigmoid and softmax in TVM's vectorizable fast forms
    (:func:`release.relax.fast_math.fast_math_legalize`). With ``pad`` (off by default) on a CPU target,
    matmul-like loops whose extents do not tile (ViT's 197 tokens) are padded to a multiple of the
    vector lanes after fusion (:func:`release.relax.pad.pad_untileable`)."""
    from tvm import relax
    from tvm.relax import pipeline as relax_pipeline

    try:
        dispatch = relax_pipeline.library_dispatch_passes(target)
    except (ValueError, AttributeError):
        dispatch = []
    from .fast_math import fast_math_legalize

    blocked = layout_passes(target, layout)
    custom = fast_math_legalize()  # vectorizable exp/erf: GELU, softmax, sigmoid (release.relax.fast_math)
    if blocked:
        custom["relax.nn.conv2d"] = blocked_conv2d_legalize
    legalize = relax.transform.LegalizeOps(customize_legalize_map=custom)
    from ..task import vector_lanes
    from .pad import pad_untileable

    # CPU only: measured there (docs/design/where-the-time-goes.md); GPU schedules keep the model's extents
    padding = [pad_untileable(vector_lanes(target))] if pad and target.kind.name == "llvm" else []
    return [*blocked, *dispatch, legalize, relax.transform.AnnotateTIROpPattern(),
            relax.transform.FoldConstant(), relax.transform.FuseOps(), relax.transform.FuseTIR(), *padding,
            *([relax.transform.AttachAttrLayoutFreeBuffers()] if prepack else [])]
