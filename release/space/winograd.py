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


def _transform(sch, block, outer: tuple, tile: tuple):
    """Both transforms' loop nests: seven loops, two of them ``outer`` spatial axes (fused, parallel), two ``tile``
    axes (alpha x alpha or m x m: unrolled), the vector axis (index 4: vectorized, innermost) and two reductions
    over alpha (indices 5, 6: unrolled)."""
    _inline_constants(sch, block)
    loops = sch.get_loops(block)
    if len(loops) != 7:
        return [sch]  # not the compute this rule is for: leave it unscheduled (still correct)
    o1, o2 = (loops[i] for i in outer)
    t1, t2 = (loops[i] for i in tile)
    vec, r1, r2 = loops[4], loops[5], loops[6]
    sch.reorder(o1, o2, t1, t2, r1, r2, vec)
    sch.parallel(sch.fuse(o1, o2))
    for loop in (t1, t2, r1, r2):
        sch.unroll(loop)
    sch.vectorize(vec)
    return [sch]


def _data_rule(sch, block):
    return _transform(sch, block, outer=(2, 3), tile=(0, 1))  # (eps, nu, c, p, cb, ra, rb)


def _inverse_rule(sch, block):
    return _transform(sch, block, outer=(0, 1), tile=(2, 3))  # (k, p, vh, vw, kb, sa, sb)


def register() -> None:
    """Register both rules for CPU targets (``cpu`` target key); idempotent."""
    import tvm_ffi

    for name, fn in ((DATA_RULE, _data_rule), (INVERSE_RULE, _inverse_rule)):
        tvm_ffi.register_global_func(f"s_tir.meta_schedule.cpu.{name}", fn, override=True)
