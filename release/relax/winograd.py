"""Winograd convolutions inside models: a variant of each blocked 3x3 stride-1 convolution, tuned beside the
direct one, chosen per layer by measurement.

A model tuned in the layout ``"NCHWc-winograd4"`` (``tune-model --layout NCHWc-winograd4``; ``-winograd2`` for
F(2x2, 3x3)) is the blocked ``"NCHWc"`` model whose *eligible* convolutions (blocked, groups 1, 3x3, stride 1,
dilation 1, a constant weight) also have a Winograd form:

- extraction (:func:`release.relax.extract.extract_tasks`) gives the tasks of both forms: the direct model's and
  the all-Winograd model's (its fused Winograd kernels: input transform, batched GEMM, inverse transform and the
  layer's fused epilogue, :func:`release.workloads.conv2d_nchwc_winograd_compute`); every other task is the same
  in both and is tuned once;
- the weight transform ``U = G g G^T`` is done at compile time, in float64 NumPy from the bound weight (the
  transformed weight is a constant of the build, as pre-packed weights are);
- the compile (:func:`release.relax.compile.compile_model`) with a database chooses per layer
  (:func:`choose`): the Winograd form where its fused kernel's best record is faster than the direct one's,
  the direct form otherwise (also where either has no record); each layer's two costs and the choice are in
  the returned :class:`WinogradChoice`.

Layers are told apart by their weights (a SHA-1 of the blocked direct weight's bytes), which both forms'
fused kernels take as a constant argument, so a layer's two kernels pair up however fusion names them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from ..errors import ModelError


@dataclass(frozen=True)
class WinogradPlan:
    """Which eligible convolutions a build computes by Winograd.

    Attributes
    ----------
    tile : int
        m of F(m x m, 3 x 3) (:data:`release.workloads.WINOGRAD_TILES`).
    layers : frozenset of str or None
        Layer keys (:func:`layer_key`) computed by Winograd; None: every eligible one (the variant's extraction).
    """

    tile: int
    layers: frozenset | None = None


@dataclass
class WinogradLayer:
    """One eligible convolution: its two fused kernels' best times (seconds, None: no record) and the choice."""

    key: str
    shape: str
    direct_s: float | None
    winograd_s: float | None

    @property
    def winograd(self) -> bool:
        """Whether the Winograd form is chosen: both forms measured and Winograd faster."""
        return self.direct_s is not None and self.winograd_s is not None and self.winograd_s < self.direct_s


@dataclass
class WinogradChoice:
    """The per-layer choice of a build (:func:`choose`)."""

    tile: int
    layers: list = field(default_factory=list)

    @property
    def plan(self) -> WinogradPlan:
        """The :class:`WinogradPlan` that builds this choice."""
        return WinogradPlan(self.tile, frozenset(x.key for x in self.layers if x.winograd))

    def lines(self) -> list[str]:
        """One summary line, then one line per eligible layer: shape, direct and Winograd best (ms), winner."""
        won = sum(x.winograd for x in self.layers)
        out = [f"{won} of {len(self.layers)} eligible 3x3 stride-1 conv2d layers computed by Winograd "
               f"F({self.tile}x{self.tile}, 3x3) (each form's best kernel, measured)"]
        for x in self.layers:
            def ms(v):
                return "n/a" if v is None else f"{v * 1e3:.3f} ms"
            ratio = f" ({x.direct_s / x.winograd_s:.2f}x)" if x.direct_s and x.winograd_s else ""
            out.append(f"  {x.shape}: direct {ms(x.direct_s)}, winograd {ms(x.winograd_s)} -> "
                       f"{'winograd' if x.winograd else 'direct'}{ratio}")
        return out


def split_layout(layout: str | None) -> tuple[str | None, int | None]:
    """``"NCHWc-winograd4"`` -> ``("NCHWc", 4)``; a layout without the suffix -> ``(layout, None)``.

    Raises
    ------
    ModelError
        A suffix that is not ``-winograd{m}`` with m in :data:`release.workloads.WINOGRAD_TILES`, or the suffix
        on an unblocked layout.
    """
    from ..errors import WorkloadError
    from ..workloads import WINOGRAD_TILES, split_winograd

    try:
        base, tile = split_winograd(layout)
    except WorkloadError as err:
        raise ModelError(str(err)) from None
    if tile is not None and tile not in WINOGRAD_TILES:
        raise ModelError(f"layout {layout!r}: Winograd tile size {tile} is not offered; use "
                         f"{' or '.join(f'{base}-winograd{m}' for m in WINOGRAD_TILES)} (docs/design/winograd.md)")
    return base, tile


def eligible(call) -> bool:
    """Whether a blocked Relax ``nn.conv2d`` call (``NCHW{cb}c`` / ``OIHW{cb}i{kb}o``, groups 1) has a Winograd
    form: a constant 3x3 weight, stride 1, dilation 1."""
    import tvm

    a = call.attrs
    weight = call.args[1]
    if not isinstance(weight, tvm.ir.Constant) or int(a.groups) != 1:
        return False
    shape = [int(x) for x in weight.value.shape]
    return (len(shape) == 6 and shape[2:4] == [3, 3] and [int(x) for x in a.strides] == [1, 1]
            and [int(x) for x in a.dilation] == [1, 1])


def layer_key(weight: np.ndarray) -> str:
    """A layer's key: SHA-1 (16 hex digits) of its blocked direct weight's bytes and shape."""
    return hashlib.sha1(repr(weight.shape).encode() + np.ascontiguousarray(weight).tobytes()).hexdigest()[:16]


def transform_weight(weight: np.ndarray, tile: int) -> np.ndarray:
    """``U = G g G^T`` of a blocked weight (K/kb, C/cb, 3, 3, cb, kb) -> (alpha, alpha, K/kb, C/cb, cb, kb), computed
    in float64 and returned in the weight's dtype (:func:`release.workloads.winograd_matrices`)."""
    from ..workloads import winograd_matrices

    _, _, g = winograd_matrices(tile)
    return np.einsum("ea,okabic,fb->efokic", g, weight.astype(np.float64), g).astype(weight.dtype)


def legalize(bb, call, plan: WinogradPlan, pairs: dict, out_dtype: str | None):
    """Legalize one eligible blocked conv2d call to :func:`release.workloads.conv2d_nchwc_winograd_compute` when
    ``plan`` takes its layer; returns None to leave it to the direct legalization. ``pairs`` gets
    ``layer key of U -> layer key`` (the Winograd kernel's constant is U, not the weight); ``out_dtype`` as
    :func:`release.relax.layout.dtype_attr` reads the call's."""
    from tvm import relax

    from ..workloads import conv2d_nchwc_winograd_compute

    weight = call.args[1].value.numpy()
    key = layer_key(weight)
    if plan.layers is not None and key not in plan.layers:
        return None
    u = transform_weight(weight, plan.tile)
    pairs[layer_key(u)] = key
    return bb.call_te(conv2d_nchwc_winograd_compute, call.args[0], relax.const(u),
                      [int(x) for x in call.attrs.padding], out_dtype,
                      primfunc_name_hint="conv2d_NCHWc_winograd")


def _fused_calls(mod) -> list:
    """``(fused PrimFunc, [layer keys of its constant arguments], [argument shapes])`` for each ``call_tir`` of
    ``mod``'s ``main`` that takes a 6-D constant."""
    import tvm
    from tvm import relax

    from .frontend import struct_info

    def static_shape(expr):
        try:
            return [int(x) for x in struct_info(expr).shape]
        except (AttributeError, TypeError, ValueError):  # a tuple, an unknown rank or a symbolic dimension
            return None

    out = []
    func = mod["main"]

    def visit(expr):
        if isinstance(expr, relax.Call) and getattr(expr.op, "name", None) == "relax.call_tir":
            gv, args = expr.args[0], expr.args[1]
            consts = [a for a in (args.fields if isinstance(args, relax.Tuple) else [args])
                      if isinstance(a, tvm.ir.Constant)]
            keys = [layer_key(c.value.numpy()) for c in consts if len(c.value.shape) == 6]
            if keys:
                shapes = [s for s in (static_shape(a) for a in
                                      (args.fields if isinstance(args, relax.Tuple) else [args])) if s]
                out.append((mod[gv], keys, shapes))

    relax.analysis.post_order_visit(func, visit)
    return out


def _best_seconds(db, func, target, defaults: dict) -> float | None:
    """The mean run time (s) of ``func``'s record in the MetaSchedule database ``db``; without one, its
    default schedule's time in ``defaults`` (structural hash of the task's module -> s); else None."""
    import tvm
    import tvm_ffi

    mod = tvm.IRModule({"main": func.with_attr("global_symbol", "main")})
    rec = db.query_tuning_record(mod, target, "main")
    if rec is None or not rec.run_secs:
        return defaults.get(str(tvm_ffi.structural_hash(mod))) if defaults else None
    return float(np.mean([float(s) for s in rec.run_secs]))


def choose(mod, target, database, tile: int, fuse, defaults: dict | None = None) -> WinogradChoice:
    """Choose per eligible layer between the direct and the Winograd form by their fused kernels' records.

    Parameters
    ----------
    mod : IRModule
        The model with its weights bound (before any pass).
    target : tvm.target.Target
    database : MetaSchedule Database
        The tuned records (``apply_history_best(log).database(tasks)``).
    tile : int
        m of F(m x m, 3 x 3).
    fuse : callable
        ``WinogradPlan or None -> fused IRModule`` (the passes the compile runs before applying a database).
    defaults : dict, optional
        ``str(structural hash of a task's module) -> seconds`` of TVM's default schedule, for the kernels that
        keep it (no record in ``database``: :meth:`release.measure.ApplyHistoryBest.keeps_default`).

    Returns
    -------
    WinogradChoice
        One :class:`WinogradLayer` per eligible layer, in the model's order; ``.plan`` builds it.
    """
    pairs: dict = {}
    direct = fuse(None)
    every = fuse(WinogradPlan(tile), pairs)
    direct_s: dict = {}
    for func, keys, _ in _fused_calls(direct):
        for k in keys:
            if k not in direct_s:
                direct_s[k] = _best_seconds(database, func, target, defaults)
    layers = []
    seen = set()
    for func, keys, shapes in _fused_calls(every):
        for u in keys:
            key = pairs.get(u)
            if key is None or key in seen:
                continue
            seen.add(key)
            layers.append(WinogradLayer(key, _conv_shape(shapes), direct_s.get(key),
                                        _best_seconds(database, func, target, defaults)))
    return WinogradChoice(tile, layers)


def _conv_shape(shapes: list) -> str:
    """``C->K, HxW`` of the Winograd convolution of a fused call, from its argument shapes."""
    data = next((s for s in shapes if len(s) == 5), None)
    weight = next((s for s in shapes if len(s) == 6), None)
    if data is None or weight is None:
        return "?"
    return f"{weight[3] * weight[4]}->{weight[2] * weight[5]}, {data[2]}x{data[3]}"
