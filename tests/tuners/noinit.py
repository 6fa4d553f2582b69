"""A TIR matmul whose reduction has no init statement (the shape of apache/tvm#12907).

``C[i, j] = C[i, j] + A[i, k] * B[k, j]`` with no ``T.init()``: the untuned build accumulates into
the output buffer (correct on a zeroed output), while ~99.5% of its knob space is rejected by the
postprocessors and every remaining schedule (a cache write) reads an uninitialised buffer, so
each valid config runs, is timed, and computes a wrong output (errors up to 1e26, or NaN).
"""

from __future__ import annotations

from tvm.script import tirx as T


@T.prim_func(s_tir=True)
def matmul_no_init(A: T.Buffer((32, 32), "float32"), B: T.Buffer((32, 32), "float32"),
                   C: T.Buffer((32, 32), "float32")):
    for i, j, k in T.grid(32, 32, 32):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


def noinit_task():
    """The program as a task on this CPU (``noinit.matmul``)."""
    from release.task import Task

    return Task(matmul_no_init, "llvm", name="noinit.matmul")
