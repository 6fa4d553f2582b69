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
