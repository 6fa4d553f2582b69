"""Pad matmul-like loops whose extents do not tile: ViT's 197 tokens, odd sequence lengths.

MetaSchedule tiles a loop only by exact factors (``SamplePerfectTile``), so a prime extent such as
ViT-B/16's 197 tokens (196 patches + the class token) can only be split ``1 x 197`` or ``197 x 1``:
no register block covers that axis, while ONNX Runtime's MLAS packs an arbitrary M into fixed
panels. Measured on ViT-B/16, padding sped attention's batch matmuls (9-22%) but not the dense
layers nor the model end to end, which is why it is opt-in. This module pads
such loops the way TVM's own ``dlight`` matmul rules do for dynamic shapes: TensorIR's
``pad_einsum`` schedule primitive grows the contraction's iteration domain to a multiple of the
target's vector lanes, reading zeros beyond the edge (an extra producer block) and writing the
padded result back through a crop block. Zeros are exact for a sum of products, so the output is
unchanged; the padded rows cost ``padded / extent - 1`` more FLOPs (197 -> 208: 5.6%).

:func:`pad_untileable` runs in :func:`release.relax.layout._fuse_passes` after ``FuseTIR`` when
``extract_tasks`` and ``compile_model`` are given ``pad=True`` (off by default: on ViT-B/16 it sped
attention's batch matmuls but not the model end to end; ``docs/design/where-the-time-goes.md``), so
extraction and compilation see the same padded functions (a task's workload key is its padded
function's).
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)

TILE_RANGE = (8, 64)
"""An extent tiles well when one of its divisors lies in this range (inclusive)."""

MIN_EXTENT = 64
"""Extents below this are left alone: padding them costs up to a vector's worth of work each."""


def tiles(extent: int, lo: int = TILE_RANGE[0], hi: int = TILE_RANGE[1]) -> bool:
    """True when ``extent`` has a divisor in ``[lo, hi]`` (a register or cache tile of that size)."""
    return any(extent % d == 0 for d in range(lo, min(hi, extent) + 1))


def padded_extent(extent: int, lanes: int) -> int:
    """``extent`` padded to the next multiple of ``lanes`` when it is at least :data:`MIN_EXTENT` and
    does not tile (:func:`tiles`); otherwise ``extent``. 197 -> 208 with 16 lanes; 384 -> 384."""
    if extent < MIN_EXTENT or tiles(extent):
        return extent
    return -(-extent // lanes) * lanes


def _is_sum_of_products(block) -> bool:
    """``C[v] = C[v] + a * b`` (casts allowed around the product): zeros read beyond an edge add zero."""
    from tvm import ir, tirx

    body = block.body
    if not isinstance(body, tirx.BufferStore) or not isinstance(body.value, tirx.Add):
        return False
    a, b = body.value.a, body.value.b
    for acc, prod in ((a, b), (b, a)):
        if isinstance(acc, ir.TensorLoad) and acc.source.same_as(body.buffer):  # tirx.BufferLoad's node
            while isinstance(prod, tirx.Cast):
                prod = prod.value
            return isinstance(prod, tirx.Mul)
    return False


def pad_func(func, lanes: int):
    """``func`` with every sum-of-products reduction block's untileable loops padded to a multiple of
    ``lanes`` (:func:`padded_extent`), or None when no block needs it. A block TensorIR refuses to pad
    (not an einsum: composite indices) is left as it is. The padded function carries the unpadded
    FLOP count as its ``release.flop`` attribute (:attr:`release.task.Task.flop` reads it)."""
    import tvm
    from tvm import s_tir, tirx
    from tvm.s_tir.analysis import estimate_tir_flops

    sch = s_tir.Schedule(func)
    stack, blocks = [sch.get_sblock("root")], []
    while stack:
        children = list(sch.get_child_blocks(stack.pop()))
        stack.extend(children)
        blocks.extend(children)
    changed = False
    for rv in blocks:
        block = sch.get(rv)
        kinds = [int(iv.iter_type) for iv in block.iter_vars]
        if 2 not in kinds or not _is_sum_of_products(block):  # 2: a reduction (CommReduce) iterator
            continue
        factors = []
        for iv in block.iter_vars:
            ext = iv.dom.extent
            static = isinstance(ext, tirx.IntImm)
            factors.append(lanes if static and padded_extent(int(ext), lanes) != int(ext) else 1)
        if all(f == 1 for f in factors):
            continue
        try:
            sch.pad_einsum(rv, factors)
        except Exception as err:  # noqa: BLE001 - TensorIR's own check (einsum pattern, trivial binding)
            logger.debug("block %s not padded: %s", block.name_hint, err)
            continue
        changed = True
    if not changed:
        return None
    flop = float(estimate_tir_flops(tvm.IRModule({"main": func})))
    return sch.mod["main"].with_attr("release.flop", tvm.tirx.FloatImm("float64", flop))


def pad_untileable(lanes: int):
    """A module pass: every PrimFunc through :func:`pad_func` with the target's ``lanes`` (float32
    vector lanes: 16 with AVX-512, 8 with AVX2). Functions with nothing to pad are kept as they are,
    so their workload keys do not change."""
    import tvm
    from tvm import tirx

    @tvm.transform.module_pass(opt_level=0, name="ReleasePadUntileable")
    def _pass(mod, _ctx):
        updates = {}
        for gv, func in mod.functions.items():
            if isinstance(func, tirx.PrimFunc):
                new = pad_func(func, lanes)
                if new is not None:
                    updates[gv] = new  # the schedule keeps the function's attributes
        if not updates:
            return mod
        mod = mod.clone()
        for gv, func in updates.items():
            mod.update_func(gv, func)
        return mod

    return _pass


# --- channel padding for blocked convolutions -------------------------------------------------------

#: unary elementwise operators that keep a padded channel finite (zeros in, finite values out)
_CHANNEL_UNARY = frozenset(
    f"relax.{n}" for n in ("nn.relu", "sigmoid", "tanh", "nn.silu", "nn.gelu", "nn.gelu_tanh", "nn.leakyrelu", "clip",
                           "negative", "abs", "square", "erf"))
#: binary elementwise operators carried on padded channels (a constant operand holds zeros there, a divisor ones;
#: a divisor that is itself padded is not carried)
_CHANNEL_BINARY = frozenset(f"relax.{n}" for n in ("add", "subtract", "multiply", "divide", "maximum", "minimum"))
#: per-channel spatial operators: each output channel reads only its own input channel
_CHANNEL_SPATIAL = frozenset(f"relax.{n}" for n in ("nn.max_pool2d", "nn.avg_pool2d", "nn.adaptive_avg_pool2d",
                                                    "image.resize2d"))
_CHANNEL_REDUCE = frozenset(f"relax.{n}" for n in ("mean", "sum", "max", "min"))


def channel_pad(channels: int, block: int) -> int:
    """``channels`` rounded up to a multiple of ``block``: 147 -> 160 with 16; 64 -> 64."""
    return -(-channels // block) * block


def pad_conv_channels(block: int):
    """A Relax module pass: every NCHW convolution's channels padded to a multiple of ``block``, so a
    channel-blocked layout (``NCHW{block}c``) divides every activation the convolutions produce.

    Runs on a model whose weights are bound constants, before ``ConvertLayout``
    (:func:`release.relax.layout.layout_passes`). Each dense convolution (groups 1) whose output
    channels ``K`` do not divide gets a weight with ``ceil(K / block) * block`` output channels, the
    extra ones zero (oneDNN pads ``nChw16c`` tensors the same way); a depthwise convolution takes the
    padding of its input (its weight padded with zero taps), an unpadded input being zero-padded first
    with ``nn.pad``. The padded channels are carried, never sliced, through what keeps them finite and
    leaves the real channels alone: the elementwise operators (``add``, ``multiply``, ``relu``,
    ``sigmoid``, ...; a per-channel constant operand is padded with zeros), pooling, resize, reductions
    over the spatial axes and ``concat`` along the channels (whose output then holds each input's
    padding at its own place: a channel map); the next convolution's weight reads zeros at every padded
    input channel, so the padded values never reach a real output. Any other consumer (a reshape, a
    dense layer, the model's output) gets the real channels back (``strided_slice``, or ``take`` after a
    concat), in NCHW: the only place a layout transform is then needed.

    The result is exact: each real output channel sums the same products (the padded weights are
    zero). Convolutions whose weight is not a constant (runtime weights), or whose layouts, dtype or
    shapes are not static NCHW/OIHW, are left as they are.

    Parameters
    ----------
    block : int
        The channel block (the target's float32 vector lanes: 16 with AVX-512, 8 with AVX2), >= 1.
    """
    import numpy as np
    import tvm
    from tvm import relax, topi
    from tvm.relax.type import TensorType as TensorStructInfo

    from .frontend import struct_info as _sinfo

    def shape(expr):
        s = getattr(_sinfo(expr), "shape", None)
        try:
            return [int(x) for x in s]
        except (TypeError, ValueError):
            return None

    def op_name(expr):
        return expr.op.name if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op) else None

    def identity(c):
        return tuple(range(c))

    def padded_map(m):
        return tuple(m) + (-1,) * (channel_pad(len(m), block) - len(m))

    def logical(m):
        return sum(i >= 0 for i in m)

    @relax.expr_functor.mutator
    class Pad(relax.PyExprMutator):
        def __init__(self, mod):
            super().__init__(mod)
            self.padded = {}  # original var -> (physical var, channel map: logical channel or -1 per physical one)
            self.real = {}  # original var -> its real channels, once sliced back

        # -- helpers
        def emit(self, expr):
            return self.builder_.emit(expr)

        def arg(self, expr):
            """``expr`` (a var of the original function) as (physical expr, map or None)."""
            if isinstance(expr, relax.Var) and expr in self.padded:
                return self.padded[expr]
            return self.visit_expr(expr), None

        def unpad(self, var):
            if var not in self.real:
                phys, m = self.padded[var]
                # a TIR take (call_te), not Relax's strided_slice or take: TVM 0.27's ConvertLayout fails on
                # either over a blocked tensor ("Cannot broadcast from 5 to 4"); a call_tir is opaque to it,
                # so its input goes back to NCHW (one layout transform) and the take runs there
                idx = np.array([m.index(i) for i in range(logical(m))], dtype="int64")
                self.real[var] = self.builder_.emit_te(topi.take, phys, relax.const(idx), axis=1, mode="clip",
                                                       primfunc_name_hint="channels")
            return self.real[var]

        def pad_input(self, x, c):
            """An unpadded NCHW activation zero-padded to whole blocks."""
            cp = channel_pad(c, block)
            return self.emit(relax.op.nn.pad(x, [0, 0, 0, cp - c, 0, 0, 0, 0])), padded_map(identity(c))

        def scatter(self, const, m, axis, fill=0):
            """A constant's channel ``axis`` laid out as the map ``m`` (``fill`` at the padded channels; a
            constant of one channel is repeated to every channel)."""
            data = const.value.numpy()
            if data.shape[axis] == 1 and logical(m) != 1:
                return relax.const(np.repeat(data, len(m), axis=axis))
            shape_ = list(data.shape)
            shape_[axis] = len(m)
            out = np.full(shape_, fill, dtype=data.dtype)
            idx = [i for i, j in enumerate(m) if j >= 0]
            src = [j for j in m if j >= 0]
            np.put_along_axis(out, np.array(idx).reshape([-1 if a == axis else 1 for a in range(out.ndim)]),
                              np.take(data, src, axis=axis), axis=axis)
            return relax.const(out)

        # -- rules: each returns (value, map) for a padded result, or None to keep the binding as written
        def conv(self, call):
            a = call.attrs
            w, xs = call.args[1], shape(call.args[0])
            ws = shape(w)
            if (str(a.data_layout), str(a.kernel_layout)) != ("NCHW", "OIHW") or str(a.out_layout) not in ("", "NCHW") \
                    or not isinstance(w, tvm.ir.Constant) or xs is None or ws is None or len(xs) != 4 \
                    or not str(w.value.dtype).startswith("float"):
                return None
            x, m_in = self.arg(call.args[0])
            k, c = ws[0], xs[1]
            groups = int(a.groups)
            weight = w.value.numpy()
            if groups == 1:
                m_out = padded_map(identity(k))
                if m_in is None and len(m_out) == k:
                    return None
                m_in = m_in or identity(c)
                new = np.zeros((len(m_out), len(m_in)) + weight.shape[2:], dtype=weight.dtype)
                for j, i in enumerate(m_in):
                    if i >= 0:
                        new[:k, j] = weight[:, i]
            elif groups == c == k and ws[1] == 1:  # depthwise, channel multiplier 1
                if m_in is None:
                    if c % block == 0:
                        return None
                    x, m_in = self.pad_input(x, c)
                m_out = m_in
                new = np.zeros((len(m_in),) + weight.shape[1:], dtype=weight.dtype)
                for j, i in enumerate(m_in):
                    if i >= 0:
                        new[j] = weight[i]
                groups = len(m_in)
            else:
                return None
            out = relax.op.nn.conv2d(x, relax.const(new), strides=a.strides, padding=a.padding, dilation=a.dilation,
                                     groups=groups, data_layout="NCHW", kernel_layout="OIHW",
                                     out_layout=str(a.out_layout) or None, out_dtype=a.out_dtype)
            return out, m_out

        def elementwise(self, call, name):
            if name in _CHANNEL_UNARY:
                x, m = self.arg(call.args[0])
                if m is None or any(isinstance(_sinfo(v), TensorStructInfo) for v in call.args[1:]):
                    return None  # clip's bounds are PrimValues; a tensor operand (prelu's slopes) is not carried
                return relax.Call(call.op, [x, *[self.visit_expr(v) for v in call.args[1:]]], call.attrs), m
            ins = [self.arg(v) for v in call.args]
            maps = {m for _, m in ins if m is not None}
            if len(maps) != 1 or (name == "relax.divide" and ins[1][1] is not None):
                return None  # a padded divisor could divide by zero
            m = maps.pop()
            args = []
            ndim = len(shape(call) or [])
            for (v, mv), orig in zip(ins, call.args):
                if mv is not None:
                    args.append(v)
                    continue
                s = shape(orig)
                if s is None:
                    return None
                axis = len(s) - (ndim - 1)  # the channel axis (1 of the result), aligned right
                if axis < 0 or axis >= len(s):
                    args.append(v)  # fewer dimensions than the channel axis: the same for every channel
                elif isinstance(orig, tvm.ir.Constant) and s[axis] in (1, logical(m)):
                    # laid out per physical channel, so ConvertLayout can block it (a (1, 1, 1, 1) constant
                    # does not split into NCHW16c); a divisor holds 1 at the padded channels
                    args.append(self.scatter(orig, m, axis, 1 if name == "relax.divide" else 0))
                elif s[axis] == 1:
                    args.append(v)  # broadcast along the channels: the same for every channel
                else:
                    return None
            return relax.Call(call.op, args, call.attrs), m

        def spatial(self, call, name):
            x, m = self.arg(call.args[0])
            if m is None or any(isinstance(_sinfo(v), TensorStructInfo) for v in call.args[1:]):
                return None  # resize's size is a shape; a tensor operand is not carried
            layout = getattr(call.attrs, "layout", "NCHW")
            if str(layout) != "NCHW" or str(getattr(call.attrs, "out_layout", "") or "NCHW") != "NCHW":
                return None
            return relax.Call(call.op, [x, *[self.visit_expr(v) for v in call.args[1:]]], call.attrs), m

        def reduce(self, call):
            x, m = self.arg(call.args[0])
            axes = call.attrs.axis
            nd = len(shape(call.args[0]) or [])
            if m is None or axes is None or nd < 3:
                return None
            if not {int(a) % nd for a in axes} <= set(range(2, nd)):
                return None
            return relax.Call(call.op, [x], call.attrs), m

        def concat(self, call):
            t = call.args[0]
            if not isinstance(t, relax.Tuple) or call.attrs.axis is None:
                return None
            shapes = [shape(v) for v in t.fields]
            if any(s is None or len(s) != 4 for s in shapes) or int(call.attrs.axis) % 4 != 1:
                return None
            ins = [self.arg(v) for v in t.fields]
            if all(m is None for _, m in ins):
                return None
            fields, m_out, offset = [], [], 0
            for (v, m), s in zip(ins, shapes):
                if m is None:
                    m = identity(s[1])
                    if s[1] % block:
                        v, m = self.pad_input(v, s[1])
                fields.append(v)
                m_out += [i + offset if i >= 0 else -1 for i in m]
                offset += logical(m)
            return relax.op.concat(fields, axis=1), tuple(m_out)

        def rule(self, value):
            name = op_name(value)
            if name == "relax.nn.conv2d":
                return self.conv(value)
            if name in _CHANNEL_UNARY or name in _CHANNEL_BINARY:
                return self.elementwise(value, name)
            if name in _CHANNEL_SPATIAL:
                return self.spatial(value, name)
            if name in _CHANNEL_REDUCE:
                return self.reduce(value)
            if name == "relax.concat":
                return self.concat(value)
            return None

        # -- bindings
        def visit_var_binding_(self, binding):
            got = None
            sinfo = _sinfo(binding.var)
            if isinstance(sinfo, TensorStructInfo) and str(sinfo.dtype).startswith("float"):
                got = self.rule(binding.value)
            if got is None:
                self._unpad_uses(binding.value)
                return super().visit_var_binding_(binding)
            value, m = got
            var = self.emit(value)
            if m == identity(len(m)):  # nothing padded: the result is the binding's
                self.real[binding.var] = var
                self.set_var_remap(binding.var, var)
                return None
            self.padded[binding.var] = (var, m)
            if not isinstance(binding.var, relax.DataflowVar):  # a function output: its real channels now
                real = self.unpad(binding.var)
                out = self.builder_.emit_output(real) if self.builder_.current_block_is_dataflow() else real
                self.set_var_remap(binding.var, out)
            return None

        def visit_match_cast_(self, binding):
            self._unpad_uses(binding.value)
            return super().visit_match_cast_(binding)

        def _unpad_uses(self, value):
            for v in relax.analysis.free_vars(value):
                if v in self.padded and v not in self.real:
                    self.set_var_remap(v, self.unpad(v))

    @tvm.transform.module_pass(opt_level=0, name="release.PadConvChannels")
    def _pass(mod, _ctx):
        changed = False
        for gv, func in list(mod.functions.items()):
            if isinstance(func, relax.Function):
                pad = Pad(mod)
                new = pad.visit_expr(func)
                if not new.same_as(func):
                    mod = pad.builder_.get()  # with the PrimFuncs of the takes
                    mod[gv] = new
                    changed = True
        return relax.transform.DeadCodeElimination()(mod) if changed else mod

    return _pass
