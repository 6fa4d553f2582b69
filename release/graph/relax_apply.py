"""Apply a single-device schedule found on the performance model to a Relax module, and check it with TVM.

:func:`apply_schedule` reorders the bindings of the module's dataflow block to the schedule's op order
(:func:`release.graph.relax_import.reorder_bindings`), compiles and runs both modules with TVM's Relax VM on
the same random inputs to check that the outputs are identical, and compares the memory TVM plans for each
(:func:`planned_memory`: ``relax.analysis.estimate_memory_usage`` after TVM's own passes LegalizeOps, ToNonDataflow,
RemovePurityChecking, CallTIRRewrite and StaticPlanBlockMemory; the "with memory planning" total).

TVM's planned total is the size of the storage tokens ``StaticPlanBlockMemory`` allocates, which reuses a
freed token for a later tensor of a fitting size; it is not the peak of live bytes the performance model
minimizes, so the two need not move together (see notes/issue-7.md, RandWire).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

import numpy as np

from ..errors import GraphError

logger = logging.getLogger(__name__)


def planned_memory(mod, function: str = "main") -> float:
    """Total bytes of the storage TVM's static memory planner allocates for ``mod`` (all functions).

    Raises
    ------
    GraphError
        When TVM's report cannot be parsed (an unexpected TVM version).
    """
    import tvm
    from tvm import relax

    plan = tvm.transform.Sequential([
        relax.transform.LegalizeOps(), relax.transform.ToNonDataflow(), relax.transform.RemovePurityChecking(), relax.transform.CallTIRRewrite(),
        relax.transform.StaticPlanBlockMemory(),
    ])
    text = relax.analysis.estimate_memory_usage(plan(mod))
    m = re.search(r"With memory planning.*?total size ([0-9.e+-]+) GB", text, re.S)
    if m is None:
        raise GraphError(f"could not read TVM's memory estimate from: {text[:200]!r}")
    return float(m.group(1)) * 1e9


def random_inputs(mod, function: str = "main", seed: int = 0) -> list[np.ndarray]:
    """Random inputs (standard normal floats, small integers) matching ``function``'s static parameter shapes.

    Raises
    ------
    GraphError
        For a parameter without a static tensor shape.
    """
    rng = np.random.default_rng(seed)
    out = []
    for p in mod[function].params:
        ty = p.ty
        shape = getattr(ty, "shape", None)
        try:
            dims = [int(d) for d in shape.values]
        except Exception:
            raise GraphError(f"parameter {p.name} has no static tensor shape; give inputs explicitly") from None
        dtype = str(ty.dtype)
        if dtype.startswith("float"):
            out.append(rng.standard_normal(dims).astype(dtype))
        else:
            out.append(rng.integers(0, 4, size=dims).astype(dtype))
    return out


def run_module(mod, inputs, function: str = "main") -> list[np.ndarray]:
    """Compile ``mod`` for the CPU (llvm) and run ``function`` on ``inputs``; outputs as a flat list of arrays."""
    import tvm
    from tvm import relax

    ex = tvm.compile(mod, target=tvm.target.Target({"kind": "llvm"}))
    vm = relax.VirtualMachine(ex, tvm.cpu())
    res = vm[function](*[tvm.runtime.tensor(x) for x in inputs])
    flat = []

    def walk(r):
        if hasattr(r, "numpy"):
            flat.append(r.numpy())
        else:
            for x in r:
                walk(x)

    walk(res)
    return flat


@dataclass
class ScheduleReport:
    """Outcome of :func:`apply_schedule`.

    Attributes
    ----------
    module : tvm.IRModule
        The reordered module.
    planned_before, planned_after : float
        TVM's planned memory (bytes) for the given and the reordered module.
    model_peak_before, model_peak_after : float
        The performance model's peak live bytes of the given order and of ``order``.
    outputs_identical : bool or None
        Whether every output is bitwise identical (None when not checked).
    max_abs_diff : float or None
        Largest absolute output difference (None when not checked).
    """

    module: object
    planned_before: float
    planned_after: float
    model_peak_before: float
    model_peak_after: float
    outputs_identical: bool | None = None
    max_abs_diff: float | None = None


def apply_schedule(mod, graph, order, check: bool = True, inputs=None, seed: int = 0,
                   function: str = "main") -> ScheduleReport:
    """Reorder ``mod``'s bindings to ``order`` and report outputs and TVM's memory plan before and after.

    Parameters
    ----------
    mod : tvm.IRModule
        The module ``graph`` was imported from (:func:`release.graph.relax_import.from_relax`).
    graph : ComputationGraph
    order : array_like of int, shape (n,)
        A topological order of ``graph`` (e.g. ``Solution.order`` from one device).
    check : bool, default True
        Compile and run both modules on the same inputs and compare outputs.
    inputs : list of ndarray, optional
        Inputs for the check (default :func:`random_inputs` with ``seed``).

    Raises
    ------
    GraphError
        When ``order`` is not a topological order of ``graph`` or the graph does not match ``mod``.
    """
    from .perf_model import PerformanceModel
    from .relax_import import reorder_bindings

    new = reorder_bindings(mod, graph, order, function)
    pm = PerformanceModel(graph, 1, "peak-memory")
    before = pm.decode(pm.given_order_chromosome()).peak_memory
    after = pm.decode(pm.chromosome(order)).peak_memory
    rep = ScheduleReport(new, planned_memory(mod, function), planned_memory(new, function), before, after)
    if check:
        xs = inputs if inputs is not None else random_inputs(mod, function, seed)
        a = run_module(mod, xs, function)
        b = run_module(new, xs, function)
        if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b)):
            rep.outputs_identical = False
            rep.max_abs_diff = float("inf")
        else:
            rep.outputs_identical = all(np.array_equal(x, y) for x, y in zip(a, b))
            rep.max_abs_diff = max((float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64))))
                                    for x, y in zip(a, b) if x.size), default=0.0)
        logger.info("apply_schedule: outputs identical %s (max diff %.3g)", rep.outputs_identical, rep.max_abs_diff)
    return rep
