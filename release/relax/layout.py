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

    from .winograd import split_layout

    layout, _ = split_layout(layout)  # "NCHWc-winograd4": the blocked layout plus Winograd variants
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


def blocked_conv2d_legalize(bb, call, winograd=None, pairs: dict | None = None):
    """Legalize a Relax ``nn.conv2d`` in ``NCHW{cb}c`` / ``OIHW{cb}i{kb}o`` -> ``NCHW{kb}c`` to the
    TE compute operator tasks tune (:func:`release.workloads.conv2d_nchwc_compute`: reductions over
    channel blocks, kernel taps and the inner channel kept apart); any other conv2d goes to TVM's
    registered legalization (which refuses channel-blocked layouts in 0.27,
    ``relax/transform/legalize_ops/nn.py``). For ``LegalizeOps(customize_legalize_map=...)``.

    With a :class:`release.relax.winograd.WinogradPlan` (``winograd``), the eligible convolutions it takes
    are legalized to their Winograd form instead (:func:`release.relax.winograd.legalize`; ``pairs`` gets
    each transformed weight's layer)."""
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
    if winograd is not None:
        from . import winograd as W

        weight = call.args[1]
        if isinstance(weight, tvm.relax.Var):  # a weight bound in the dataflow block: its constant
            bound = bb.lookup_binding(weight)
            call = tvm.relax.Call(call.op, [call.args[0], bound], call.attrs) if bound is not None else call
        if W.eligible(call):
            out = W.legalize(bb, call, winograd, pairs if pairs is not None else {}, dtype_attr(a.out_dtype))
            if out is not None:
                return out
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
    ops, which follow the blocked layout), every convolution's channels padded to whole blocks
    (:func:`release.relax.pad.pad_conv_channels`: 147 output channels become 160 with 16 lanes, the
    padded weights zero), ``ConvertLayout`` with :func:`conv2d_blocked_layouts` per convolution
    (elementwise ops, ``add``, ``relu``, pooling, spatial reductions and ``concat`` take the layout of
    their input, so the activation layout transforms stay at the blocked region's boundaries), one
    transform per tensor (``EliminateCommonSubexpr``), resizes and their concats moved into the blocked
    layout (:func:`_resize_blocked`), then ``FoldConstant``: the weights are bound constants, so their
    ``layout_transform`` to ``OIHW{cb}i{kb}o`` is done at compile time. The compiled model still takes
    NCHW inputs and gives NCHW outputs. Every activation a convolution produces is in the one block
    ``NCHW{lanes}c`` (the model's input keeps a block that divides its channels: 3 for RGB), which is
    what TVM 0.27's concat layout inference needs ("Invalid layout axis 16b" on inputs blocked apart).
    Kept NCHW, each named by :func:`layout_summary`: grouped convolutions other than depthwise ones,
    depthwise ones with a channel multiplier, convolutions whose weight is a runtime input and whose
    channels do not divide a block.

    Raises
    ------
    ModelError
        Bad ``layout`` (:func:`model_layout`).
    """
    return _layout_passes(target, layout, {})


def _layout_passes(target, layout: str | None, state: dict) -> list:
    """:func:`layout_passes`; ``state`` gets ``"kept"`` (weights of the convolutions kept NCHW beside a
    concat) and ``"failed"`` (TVM's error when ``ConvertLayout`` failed on the model), per module."""
    from tvm import relax

    from ..task import vector_lanes

    lanes = model_layout(layout)
    if lanes is None:
        return []
    lanes = lanes or vector_lanes(target)
    kept: list = []  # weights of the convolutions kept NCHW, set per module by _convert_layout_or_keep
    state["kept"], state["lanes"] = kept, lanes

    def per_call(call):
        # a conv kept as it is names its own layouts: without them 0.27's conv2d (and conv2d_transpose:
        # a U-Net's upsampling) layout inference fails on a blocked input ("Layouts must have the same size")
        keep = [str(call.attrs.data_layout), str(call.attrs.kernel_layout), str(call.attrs.out_layout or "")] \
            if call.op.name in ("relax.nn.conv2d", "relax.nn.conv2d_transpose") else None
        if call.op.name == "relax.nn.conv2d_transpose":
            return {call.op.name: [keep[0], keep[1], keep[2] or keep[0]]}
        if call.op.name != "relax.nn.conv2d":
            return {}
        want = None if any(call.args[1].same_as(w) for w in kept) else conv2d_blocked_layouts(call, lanes)
        return {"relax.nn.conv2d": want or [keep[0], keep[1], keep[2] or keep[0]]}

    return [relax.transform.FoldBatchnormToConv2D(), relax.transform.FoldConstant(),
            relax.transform.DecomposeOpsForInference(), relax.transform.FoldConstant(),
            _convert_layout_or_keep(per_call, lanes, kept, state), relax.transform.FoldConstant()]


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


def _convs_into_concat(mod, lanes: int) -> list:
    """The weights (``args[1]``) of the ``nn.conv2d`` calls whose output channels are not whole blocks
    of ``lanes`` and whose output reaches a ``concat`` through ops other than ``nn.conv2d`` (a bias add,
    a relu, a pooling: the ops ``ConvertLayout`` carries a blocked layout through), in ``mod``'s Relax
    functions: blocked, they would give the concat inputs in different blocks."""
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
            out = _static_shape(var)
            if out is not None and len(out) == 4 and out[1] % lanes == 0:
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


def _conv_calls(mod) -> list:
    """The ``nn.conv2d`` calls of ``mod``'s Relax functions, in post order."""
    from tvm import relax

    calls: list = []

    def visit(expr):
        if _op_name(expr) == "relax.nn.conv2d":
            calls.append(expr)

    for _, func in mod.functions.items():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func, visit)
    return calls


def _blocked_convs(mod, lanes: int, kept: list = ()) -> int:
    """How many ``nn.conv2d`` calls of ``mod``'s Relax functions :func:`conv2d_blocked_layouts` would
    block (those whose weight is in ``kept`` excepted)."""
    return sum(conv2d_blocked_layouts(c, lanes) is not None for c in _conv_calls(mod)
               if not any(c.args[1].same_as(w) for w in kept))


def _convert_layout_or_keep(per_call, lanes: int, kept: list, state: dict | None = None):
    """Relax ``ConvertLayout`` with ``per_call``, run only where a conv2d gets blocked, and the model
    kept as it is when TVM's pass fails (one warning).

    First every convolution's channels are padded to whole blocks of ``lanes``
    (:func:`release.relax.pad.pad_conv_channels`), so every activation a convolution produces is in
    the one block ``NCHW{lanes}c`` and a ``concat`` of them stays blocked (TVM 0.27's concat layout
    inference takes its first input's layout for all of them and fails on inputs blocked differently:
    "Invalid layout axis 16b"). ``kept`` (read by ``per_call``) is then set to the convolutions whose
    output still reaches a ``concat`` in another block (:func:`_convs_into_concat`: a weight that is not
    a constant cannot be padded), which keep NCHW.

    TVM 0.27's ``ConvertLayout`` dies with ``std::bad_alloc`` on the BERT-base encoder layer (no
    conv2d at all; found running the model tier with NCHWc): a model with nothing to block is not
    given to it, and any other failure falls back to the imported layout for the whole model, as the
    issue asks of a layout rewrite that fails. The pass is deterministic, so task extraction and
    :func:`~release.relax.compile.compile_model` fall back alike and the database's keys still match."""
    import tvm
    from tvm import relax

    from .pad import pad_conv_channels

    @tvm.transform.module_pass(opt_level=0, name="release.ConvertLayoutOrKeep")
    def convert(mod, ctx):
        if not _conv_calls(mod):
            return mod
        original = mod
        mod = _elementwise_with_layout(mod)
        mod = pad_conv_channels(lanes)(mod)
        kept[:] = _convs_into_concat(mod, lanes)
        n = _blocked_convs(mod, lanes, kept)
        if n == 0:
            return original
        try:
            mod = relax.transform.ConvertLayout({}, per_call)(mod)
            # one transform per tensor and layout: ConvertLayout transforms an input once per consumer
            mod = relax.transform.EliminateCommonSubexpr()(mod)
        except Exception as err:  # noqa: BLE001 - TVM's errors (InternalError, ...) come as several classes
            why = (str(err).strip().splitlines() or [""])[-1][:200]
            if state is not None:
                state["failed"] = f"{type(err).__name__}: {why}"
            from ..notes import warn_once  # extraction and the compile run this pass alike: said once

            warn_once(logger, "blocked layout: TVM's ConvertLayout failed on this model (%s: %s); its %d conv2d "
                      "keep the imported NCHW layout", type(err).__name__, why, n)
            return original
        try:
            return _resize_blocked(mod)
        except Exception as err:  # noqa: BLE001 - an optimization: the converted model is right without it
            logger.debug("resize kept in NCHW: %s", err)
            return mod

    return convert


def _maps_as(index_map, shape: list, want) -> bool:
    """True when ``index_map`` sends a few points of ``shape`` where ``want`` (a Python function) does."""
    import tvm

    points = [[0] * len(shape), [d - 1 for d in shape], [min(1, d - 1) for d in shape],
              [d // 2 for d in shape]]
    try:
        for p in points:
            got = [int(e) for e in index_map.map_indices([tvm.tirx.IntImm("int64", v) for v in p])]  # folded
            if got != list(want(*p)):
                return False
    except Exception:  # noqa: BLE001 - a map TVM cannot apply to constants (TVMError, TypeError): not this one
        return False
    return True


def _resize_blocked(mod):
    """``image.resize2d`` run in the channel-blocked layout: TVM 0.27's ``ConvertLayout`` keeps a resize in
    NCHW (a layout transform out of ``NCHW{b}c`` before it and one back after it), though its
    legalization (``topi.image.resize2d``) takes ``NCHW{b}c`` as is. Each resize whose input is such a
    transform is rewritten to resize the blocked tensor, and a transform back into the same block after it
    takes the blocked result: a U-Net's upsamplings stay blocked. Exact: the same operator per channel."""
    import tvm
    from tvm import relax

    @relax.expr_functor.mutator
    class Rewrite(relax.PyExprMutator):
        def __init__(self, mod):
            super().__init__(mod)
            self.unblocked = {}  # NCHW var -> (its NCHW{b}c source, b, the unblocking map)
            self.resized = {}  # NCHW resize var -> (the blocked resize var, b)

        def visit_var_binding_(self, binding):
            v, var = binding.value, binding.var
            name = _op_name(v)
            if name == "relax.layout_transform" and isinstance(var, relax.DataflowVar):
                src, imap = v.args[0], v.attrs.index_map
                s_in, s_out = _static_shape(src), _static_shape(var)
                if s_in and s_out and len(s_in) == 5 and len(s_out) == 4:
                    b = s_in[4]
                    if _maps_as(imap, s_in, lambda n, c, h, w, cb: (n, c * b + cb, h, w)):
                        self.unblocked[var] = (src, b, imap)
                elif s_in and s_out and len(s_in) == 4 and len(s_out) == 5 and src in self.resized:
                    r5, b = self.resized[src]
                    if b == s_out[4] and _maps_as(imap, s_in, lambda n, c, h, w: (n, c // b, h, w, c % b)):
                        self.set_var_remap(var, r5)
                        return None
            if name == "relax.concat" and isinstance(var, relax.DataflowVar) and isinstance(v.args[0], relax.Tuple) \
                    and v.attrs.axis is not None and int(v.attrs.axis) == 1 and len(_static_shape(var) or []) == 4:
                blocked = [self.resized.get(f) or (self.unblocked[f][::2][0], self.unblocked[f][1])
                           if f in self.resized or f in self.unblocked else None for f in v.args[0].fields]
                imaps = [self.unblocked[f][2] for f in v.args[0].fields if f in self.unblocked]
                if all(blocked) and imaps and len({b for _, b in blocked}) == 1:
                    # a concat of tensors that were blocked in one block (a resize's output among them):
                    # concatenated blocked, along the channel blocks
                    c5 = self.builder_.emit(relax.op.concat([self.visit_expr(x) for x, _ in blocked], axis=1))
                    self.resized[var] = (c5, blocked[0][1])
                    self.unblocked[var] = (c5, blocked[0][1], imaps[0])
                    self.set_var_remap(var, self.builder_.emit(relax.op.layout_transform(c5, imaps[0])))
                    return None
            if name == "relax.image.resize2d" and isinstance(var, relax.DataflowVar) and \
                    str(v.attrs.layout) == "NCHW" and v.args[0] in self.unblocked:
                src, b, imap = self.unblocked[v.args[0]]
                a = v.attrs
                r5 = self.builder_.emit(relax.op.image.resize2d(
                    self.visit_expr(src), self.visit_expr(v.args[1]), roi=[float(x) for x in a.roi],
                    layout=f"NCHW{b}c", method=str(a.method),
                    coordinate_transformation_mode=str(a.coordinate_transformation_mode),
                    rounding_method=str(a.rounding_method), cubic_alpha=float(a.cubic_alpha),
                    cubic_exclude=int(a.cubic_exclude), extrapolation_value=float(a.extrapolation_value),
                    out_dtype=dtype_attr(a.out_dtype)))
                self.resized[var] = (r5, b)
                self.unblocked[var] = (r5, b, imap)
                self.set_var_remap(var, self.builder_.emit(relax.op.layout_transform(r5, imap)))
                return None
            return super().visit_var_binding_(binding)

    changed = False
    for gv, func in list(mod.functions.items()):
        if isinstance(func, relax.Function):
            new = Rewrite(mod).visit_expr(func)
            if not new.same_as(func):
                mod = mod.clone() if not changed else mod
                mod[gv] = new
                changed = True
    return relax.transform.DeadCodeElimination()(mod) if changed else mod


def _fuse_passes(target, prepack: bool, layout: str | None = None, pad: bool = False, winograd=None,
                 pairs: dict | None = None) -> list:
    """The passes ``compile_relax`` runs before applying a database, plus TVM's pre-tuning layout
    rewrite (``AttachAttrLayoutFreeBuffers``: the bound weights of every fused function become its
    ``layout_free_buffers``) when ``prepack``, after :func:`layout_passes` for a blocked ``layout``.
    Legalization writes GELU, erf, exp, sigmoid and softmax in TVM's vectorizable fast forms
    (:func:`release.relax.fast_math.fast_math_legalize`). With ``pad`` (off by default) on a CPU target,
    matmul-like loops whose extents do not tile (ViT's 197 tokens) are padded to a multiple of the
    vector lanes after fusion (:func:`release.relax.pad.pad_untileable`). ``winograd``: a
    :class:`release.relax.winograd.WinogradPlan` (None: every convolution direct; a ``-winograd{m}`` suffix of
    ``layout`` alone changes nothing here: the callers choose the plan)."""
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
        import functools

        custom["relax.nn.conv2d"] = functools.partial(blocked_conv2d_legalize, winograd=winograd, pairs=pairs) \
            if winograd is not None else blocked_conv2d_legalize
    legalize = relax.transform.LegalizeOps(customize_legalize_map=custom)
    from ..task import vector_lanes
    from .pad import pad_untileable

    # CPU only: measured there (docs/design/where-the-time-goes.md); GPU schedules keep the model's extents
    padding = [pad_untileable(vector_lanes(target))] if pad and target.kind.name == "llvm" else []
    return [*blocked, *dispatch, legalize, relax.transform.AnnotateTIROpPattern(),
            relax.transform.FoldConstant(), relax.transform.FuseOps(), relax.transform.FuseTIR(), *padding,
            *([relax.transform.AttachAttrLayoutFreeBuffers()] if prepack else [])]


def conv2d_unblocked_reason(call, lanes: int) -> str:
    """Why :func:`conv2d_blocked_layouts` keeps one Relax ``nn.conv2d`` call in its layout, in a few words.

    Read on the model after :func:`release.relax.pad.pad_conv_channels` (whose channel padding makes
    every static NCHW convolution with a constant weight blockable, depthwise ones included)."""
    a = call.attrs
    if str(a.data_layout) != "NCHW" or str(a.kernel_layout) != "OIHW" or str(a.out_layout) not in ("", "NCHW"):
        return f"layouts {a.data_layout}/{a.kernel_layout} are not NCHW/OIHW"
    data, weight = _static_shape(call.args[0]), _static_shape(call.args[1])
    if data is None or weight is None or len(data) != 4 or len(weight) != 4:
        return "a symbolic or unknown shape"
    groups = int(a.groups)
    if groups != 1 and not (groups == data[1] == weight[0] and weight[1] == 1):
        kind = (f"depthwise with channel multiplier {weight[0] // groups}" if groups == data[1]
                else f"grouped ({groups} groups of {weight[1]} -> {weight[0] // groups} channels)")
        return f"{kind}: no blocked compute for it"
    import tvm

    if not isinstance(call.args[1], tvm.ir.Constant):
        return f"its weight is a runtime input, so its channels cannot be padded to blocks of {lanes}"
    return f"no channel block above 1 divides {weight[0]} output channels"


def _describe_conv(call) -> str:
    a = call.attrs
    data, weight = _static_shape(call.args[0]), _static_shape(call.args[1])
    if data is None or weight is None or len(weight) != 4:
        return "conv2d"
    stride = "x".join(str(int(x)) for x in a.strides)
    groups = f", groups {int(a.groups)}" if int(a.groups) != 1 else ""
    return (f"conv2d {weight[2]}x{weight[3]} stride {stride}{groups}: {data[1]} -> {weight[0]} channels "
            f"on {'x'.join(map(str, data))}")


class LayoutSummary:
    """How a model's convolutions come out of :func:`layout_passes`: ``convs`` conv2d calls, ``blocked``
    of them channel-blocked, ``transforms`` activation layout transforms in the model's functions (those
    of constant weights excepted: they run at compile time), ``unblocked`` one ``(conv, reason)`` per
    convolution kept in its layout. :meth:`lines` is what ``release tune-model`` prints."""

    def __init__(self, layout: str, convs: int, blocked: int, transforms: int, unblocked: list):
        self.layout, self.convs, self.blocked, self.transforms = layout, convs, blocked, transforms
        self.unblocked = list(unblocked)

    def lines(self) -> list[str]:
        """One line of counts, then one line per unblocked convolution with its reason."""
        head = (f"{self.blocked} of {self.convs} conv2d blocked ({self.layout}); "
                f"{self.transforms} activation layout transform{'s' if self.transforms != 1 else ''}")
        if model_layout(self.layout) is None:
            return [head]  # NCHW asked: nothing to explain per convolution
        return [head] + [f"{conv} stays NCHW: {why}" for conv, why in self.unblocked]

    def __repr__(self):
        return f"LayoutSummary({'; '.join(self.lines())})"


def layout_summary(model: Model, target, layout: str | None) -> LayoutSummary:
    """How many of ``model``'s convolutions :func:`layout_passes` blocks, how many activation layout
    transforms it leaves, and why each other convolution keeps its layout.

    Runs the layout passes alone (the weights bound; no legalization, fusion or code generation): a
    second or two on an Inception-sized model.

    Parameters
    ----------
    model : Model
    target : tvm.target.Target, str or dict
    layout : str or None
        As :func:`model_layout` takes it.

    Returns
    -------
    LayoutSummary
        For NCHW, every convolution unblocked with the reason "layout NCHW asked".

    Raises
    ------
    ModelError
        Bad ``layout``.
    """
    import tvm
    from tvm import relax

    from ..target import resolve_target

    target = resolve_target(target)
    mod = model.mod
    if model.params:
        mod = relax.transform.BindParams("main", model.params)(mod)
    state: dict = {}
    passes = _layout_passes(target, layout, state)
    if not passes:
        convs = _conv_calls(mod)
        return LayoutSummary(layout or "NCHW", len(convs), 0, 0, [(_describe_conv(c), "layout NCHW asked")
                                                                   for c in convs])
    with target:
        mod = tvm.transform.Sequential(passes[:-1])(mod)  # the weights' transforms left unfolded
    convs = _conv_calls(mod)
    blocked = [c for c in convs if str(c.attrs.data_layout) != "NCHW"]
    unblocked = []
    for c in convs:
        if str(c.attrs.data_layout) != "NCHW":
            continue
        if state.get("failed"):
            why = f"TVM's ConvertLayout failed on this model ({state['failed'][:120]})"
        elif any(c.args[1].same_as(w) for w in state.get("kept", ())):
            why = "its output reaches a concat in another channel block (its weight cannot be padded)"
        else:
            why = conv2d_unblocked_reason(c, state["lanes"])
        unblocked.append((_describe_conv(c), why))
    return LayoutSummary(layout, len(convs), len(blocked), _activation_transforms(mod), unblocked)


def _activation_transforms(mod) -> int:
    """``layout_transform`` calls (Relax operators or ``call_tir`` of a ``layout_transform`` PrimFunc) in
    ``mod``'s Relax functions whose input is not a constant."""
    import tvm
    from tvm import relax

    count = [0]
    call_tir = tvm.ir.Op.get("relax.call_tir")

    def visit(expr):
        name = _op_name(expr)
        if name == "relax.layout_transform" and not isinstance(expr.args[0], tvm.ir.Constant):
            count[0] += 1
        elif name == "relax.call_tir" and expr.op.same_as(call_tir) and "layout_transform" in expr.args[0].name_hint:
            args = expr.args[1].fields if isinstance(expr.args[1], relax.Tuple) else []
            count[0] += not (args and isinstance(args[0], tvm.ir.Constant))

    for _, func in mod.functions.items():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func, visit)
    return count[0]
