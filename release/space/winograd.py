"""Schedule rules for the Winograd stages of :func:`release.workloads.conv2d_nchwc_winograd_compute` on CPUs.

MetaSchedule applies a block's ``schedule_rule`` annotation through its ``ApplyCustomRule`` rule, which looks
the rule up as ``s_tir.meta_schedule.<target key>.<name>`` (TVM registers such rules for its own NCHW and NHWC
Winograd computes; their loop nests are not the blocked ones). The input transform (``winograd_data``) and the
inverse transform (``winograd_inverse``) are small reductions over alpha x alpha constant matrices: left to the
default rules they get multi-level tiling and random compute locations, a space of 1e17 configs whose random
samples run 20x slower than the direct convolution. These rules give them the schedule TVM's Winograd rules
give (``src/s_tir/meta_schedule/schedule_rule/winograd.cc``): the constant matrices inlined, tiles in parallel,
the transform's loops unrolled (the matrices' zeros and ones fold away), and here the channel block vectorized.
The batched GEMM between them keeps MetaSchedule's multi-level tiling: it is where the knobs are.
"""

from __future__ import annotations

DATA_RULE = "release_winograd_data"
INVERSE_RULE = "release_winograd_inverse"


def _inline_constants(sch, block) -> None:
    """Inline the constant-matrix producers (``topi.nn.winograd_util.const_matrix``) and the padding."""
    for producer in sch.get_producers(block):
        name = sch.get(producer).name_hint
        annotations = sch.get(producer).annotations
        if "const_matrix" in annotations or name.startswith("pad_temp"):
            sch.compute_inline(producer)


def _transform(sch, block):
    """Loops ``(a, b, c, d, vec, r1, r2)`` -> ``c*d`` parallel, ``a, b, r1, r2`` unrolled, ``vec`` vectorized:
    the order both transforms' loop nests share (spatial alpha/alpha or tile/tile, two outer spatial axes,
    the channel block, two reductions)."""
    loops = sch.get_loops(block)
    if len(loops) != 7:
        return [sch]  # not the compute this rule is for: leave it unscheduled (still correct)
    a, b, c, d, vec, r1, r2 = loops
    sch.reorder(c, d, a, b, r1, r2, vec)
    sch.parallel(sch.fuse(c, d))
    for loop in (a, b, r1, r2):
        sch.unroll(loop)
    sch.vectorize(vec)
    return [sch]


def _data_rule(sch, block):
    _inline_constants(sch, block)
    return _transform(sch, block)


def _inverse_rule(sch, block):
    _inline_constants(sch, block)
    loops = sch.get_loops(block)  # (k, p, vh, vw, co, sa, sb) -> (k, p) parallel, the rest as the data rule's
    if len(loops) == 7:
        k, p, vh, vw, co, sa, sb = loops
        sch.reorder(k, p, vh, vw, sa, sb, co)
        sch.parallel(sch.fuse(k, p))
        for loop in (vh, vw, sa, sb):
            sch.unroll(loop)
        sch.vectorize(co)
    return [sch]


def register() -> None:
    """Register both rules for CPU targets (``cpu`` target key); idempotent."""
    import tvm_ffi

    for name, fn in ((DATA_RULE, _data_rule), (INVERSE_RULE, _inverse_rule)):
        tvm_ffi.register_global_func(f"s_tir.meta_schedule.cpu.{name}", fn, override=True)
