"""Exact optima on small graphs, to measure how far each search method is from optimal.

* :func:`exact_peak_memory` -- single-device peak memory, dynamic programming over *frontiers* (the sets of
  already scheduled nodes, which are exactly the down-closed sets of the graph), as in SERENITY (Ahn et al.,
  MLSys 2020). The peak of an order is the max over its steps of the live bytes; the live bytes after a set
  ``S`` has run depend only on ``S``, so ``best[S] = min over last node v of max(best[S - v],
  resident(S - v) + out_bytes[v])``. Exponential in the graph's width; ``max_states`` bounds the work.
* :func:`exact_makespan` -- makespan with device placement, OR-Tools CP-SAT: optional intervals per
  (node, device), no-overlap per device, precedence ``start[c] >= end[p] + transfer`` when producer and
  consumer are on different devices. Times are scaled to integers (``time_scale`` units per microsecond);
  the returned objective is the performance model's value of the CP-SAT schedule.

Both return a :class:`ExactResult` whose ``chromosome`` decodes (with
:class:`~release.graph.perf_model.PerformanceModel`) to the optimal schedule.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from ..errors import GraphError
from .graph import ComputationGraph
from .perf_model import PerformanceModel

logger = logging.getLogger(__name__)


@dataclass
class ExactResult:
    """Result of an exact solver.

    Attributes
    ----------
    objective : float or None
        Objective of the best schedule found (us or bytes); None when the search gave up.
    optimal : bool
        Whether optimality is proven.
    chromosome : ndarray or None
        Random keys that decode to that schedule.
    bound : float or None
        Best proven lower bound (equals ``objective`` when optimal).
    states : int
        DP states explored (DP) or 0 (CP-SAT).
    status : str
        "optimal", "feasible", "too-large" or "timeout".
    """

    objective: float | None
    optimal: bool
    chromosome: np.ndarray | None
    bound: float | None = None
    states: int = 0
    status: str = ""


def peak_memory_lower_bound(graph: ComputationGraph, devices: int = 1) -> float:
    """A lower bound on the peak memory (bytes) of every schedule, cheap to compute.

    While node ``v`` runs, its inputs (data predecessors) and its output are live on its device, so the peak of
    any schedule is at least ``max_v (out_bytes[v] + sum of its inputs' bytes)``. On one device graph outputs
    stay live to the end, so the peak is also at least the sum of all graph outputs' bytes.

    Parameters
    ----------
    graph : ComputationGraph
    devices : int, default 1

    Returns
    -------
    float
        Bytes (the performance model's peak memory is never below it).
    """
    size = graph.out_bytes
    need = size.copy()
    for v, ps in enumerate(graph.data_pred):
        if ps:
            need[v] += float(size[list(set(ps))].sum())
    lb = float(need.max())
    if devices == 1:
        has = np.zeros(graph.n, dtype=bool)
        if len(graph.data_edges):
            has[graph.data_edges[:, 0]] = True
        lb = max(lb, float(size[~has].sum()))
    return lb


def exact_peak_memory(graph: ComputationGraph, max_states: int = 2_000_000,
                      time_limit: float | None = None) -> ExactResult:
    """Minimum single-device peak memory over all topological orders (dynamic programming over frontiers).

    Parameters
    ----------
    graph : ComputationGraph
    max_states : int, default 2,000,000
        Give up (``status="too-large"``) when more frontier sets than this have been generated.
    time_limit : float, optional
        Give up (``status="timeout"``) after this many seconds of wall time (checked every 2,048 states);
        None = no time limit (only the state cap).

    Returns
    -------
    ExactResult
        ``objective`` in bytes, matching :class:`PerformanceModel` with one device and
        ``objective="peak-memory"``.
    """
    n = graph.n
    size = graph.out_bytes.tolist()
    pred_mask = [0] * n
    for u, v in graph.all_edges.tolist():
        pred_mask[v] |= 1 << u
    cons_mask = [0] * n
    for u, v in graph.data_edges.tolist():
        cons_mask[u] |= 1 << v
    # data predecessors whose tensor may be freed once v has run
    dpred = graph.data_pred
    full = (1 << n) - 1
    # layer k: dict mask -> (peak, resident)
    layer = {0: (0.0, 0.0)}
    parents: list[dict] = []  # per layer: mask -> (prev_mask, v)
    import time

    deadline = None if time_limit is None else time.perf_counter() + float(time_limit)
    tick = 0
    states = 1
    for _ in range(n):
        nxt: dict[int, tuple[float, float]] = {}
        par: dict[int, tuple[int, int]] = {}
        for S, (peak, res) in layer.items():
            rem = full & ~S
            while rem:
                low = rem & -rem
                v = low.bit_length() - 1
                rem ^= low
                if pred_mask[v] & ~S:
                    continue
                tick += 1
                if deadline is not None and not tick & 2047 and time.perf_counter() > deadline:
                    logger.info("exact_peak_memory: %s: time limit %.1f s reached", graph.name, time_limit)
                    return ExactResult(None, False, None, peak_memory_lower_bound(graph), states, "timeout")
                during = res + size[v]
                p = peak if peak >= during else during
                S2 = S | low
                # tensors freed after v: v was the last consumer of u
                freed = 0.0
                for u in dpred[v]:
                    if cons_mask[u] & ~S2 == 0:
                        freed += size[u]
                res2 = during - freed
                old = nxt.get(S2)
                if old is None or p < old[0]:
                    nxt[S2] = (p, res2)
                    par[S2] = (S, v)
        states += len(nxt)
        if states > max_states:
            logger.info("exact_peak_memory: %s exceeds %d frontier states", graph.name, max_states)
            return ExactResult(None, False, None, peak_memory_lower_bound(graph), states, "too-large")
        parents.append(par)
        layer = nxt
    peak = layer[full][0]
    order = []
    S = full
    for par in reversed(parents):
        S, v = par[S]
        order.append(v)
    order.reverse()
    model = PerformanceModel(graph, 1, "peak-memory")
    x = model.chromosome(order)
    return ExactResult(float(peak), True, x, float(peak), states, "optimal")


def exact_makespan(
    graph: ComputationGraph,
    devices: int = 1,
    latency_us=5.0,
    bandwidth=1e4,
    time_limit_s: float = 10.0,
    time_scale: float = 1000.0,
    seed: int = 0,
    workers: int = 1,
) -> ExactResult:
    """Minimum makespan with device placement, by OR-Tools CP-SAT.

    Parameters
    ----------
    graph : ComputationGraph
    devices : int, default 1
    latency_us, bandwidth : float or ndarray (d, d)
        Link model, as in :class:`PerformanceModel` (us; bytes/us).
    time_limit_s : float, default 10
        CP-SAT wall-time limit in seconds; when reached the result is ``status="feasible"`` (not proven).
    time_scale : float, default 1000
        Integer time units per microsecond (1000 = nanoseconds). Durations are rounded to these units, so
        the optimum is exact for data on that grid (hand-made integer graphs are exact).
    seed, workers : int
        CP-SAT random seed and worker count (1 keeps it deterministic and light).

    Returns
    -------
    ExactResult
        ``objective``: the performance model's makespan (us) of the CP-SAT schedule; ``bound``: CP-SAT's
        lower bound converted back to us.
    """
    from ortools.sat.python import cp_model

    model = PerformanceModel(graph, devices, "runtime", latency_us, bandwidth)
    n, d = graph.n, model.d
    if d == 1:
        order = graph.topological_order()
        x = model.chromosome(order)
        total = float(graph.cost.sum())
        return ExactResult(total, True, x, total, 0, "optimal")
    dur = np.rint(graph.cost * time_scale).astype(np.int64)
    comm = np.rint((model.latency[None, :, :] + graph.out_bytes[:, None, None] / model.bandwidth[None, :, :])
                   * time_scale).astype(np.int64)  # (n, d, d)
    horizon = int(dur.sum() + comm.max(axis=(1, 2)).sum() + 1)
    m = cp_model.CpModel()
    start = [m.NewIntVar(0, horizon, f"s{v}") for v in range(n)]
    end = [m.NewIntVar(0, horizon, f"e{v}") for v in range(n)]
    x = [[m.NewBoolVar(f"x{v}_{k}") for k in range(d)] for v in range(n)]
    per_dev: list[list] = [[] for _ in range(d)]
    for v in range(n):
        m.AddExactlyOne(x[v])
        m.Add(end[v] == start[v] + int(dur[v]))
        for k in range(d):
            per_dev[k].append(m.NewOptionalIntervalVar(start[v], int(dur[v]), end[v], x[v][k], f"i{v}_{k}"))
    for k in range(d):
        m.AddNoOverlap(per_dev[k])
    for p, c in graph.control_edges.tolist():
        m.Add(start[c] >= end[p])
    for p, c in graph.data_edges.tolist():
        m.Add(start[c] >= end[p])
        for k1 in range(d):
            for k2 in range(d):
                if k1 != k2 and comm[p, k1, k2] > 0:
                    m.Add(start[c] >= end[p] + int(comm[p, k1, k2])).OnlyEnforceIf([x[p][k1], x[c][k2]])
    # symmetry: identical devices and links -> the first node goes to device 0
    off = ~np.eye(d, dtype=bool)
    if np.ptp(model.latency[off]) == 0 and np.ptp(model.bandwidth[off]) == 0:
        m.Add(x[int(graph.topological_order()[0])][0] == 1)
    mk = m.NewIntVar(0, horizon, "makespan")
    m.AddMaxEquality(mk, end)
    m.Minimize(mk)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit_s)
    solver.parameters.num_workers = int(workers)
    solver.parameters.random_seed = int(seed)
    status = solver.Solve(m)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return ExactResult(None, False, None, None, 0, "timeout")
    st = np.array([solver.Value(s) for s in start])
    dev = np.array([next(k for k in range(d) if solver.Value(x[v][k])) for v in range(n)])
    topo_pos = np.empty(n, dtype=np.int64)
    topo_pos[graph.topological_order()] = np.arange(n)
    order = np.lexsort((topo_pos, st))
    chrom = model.chromosome(order, dev)
    sol = model.decode(chrom)
    optimal = status == cp_model.OPTIMAL
    bound = solver.BestObjectiveBound() / time_scale
    return ExactResult(sol.makespan, optimal, chrom, float(bound), 0, "optimal" if optimal else "feasible")


def exact_peak_memory_cpsat(graph: ComputationGraph, time_limit: float = 30.0, hint_order=None, seed: int = 0,
                            workers: int = 1) -> ExactResult:
    """Single-device peak memory as a CP-SAT order model (for graphs of a few hundred nodes, where the frontier DP
    runs out of states).

    Variables: the position ``p[v]`` of every node (all different; ``p[u] < p[v]`` along every edge). The output
    of ``u`` occupies the interval ``[p[u], e[u])`` with ``e[u] = max over its data consumers c of p[c] + 1``
    (graph outputs: ``n``), and a cumulative constraint with capacity ``peak`` over these intervals (demand =
    bytes) makes ``peak`` at least the live bytes at every position, exactly the performance model's single-device
    peak (:class:`PerformanceModel`). Minimize ``peak``. Integer-programming order models of this kind are the
    MODeL line of work (Steiner et al., ICML 2023), which also places tensors in memory.

    Parameters
    ----------
    graph : ComputationGraph
    time_limit : float, default 30
        CP-SAT wall-time limit, seconds.
    hint_order : sequence of int, optional
        A topological order used as the incumbent (e.g. the best order a search found): CP-SAT then searches
        for strictly better orders only, and proves the incumbent optimal when there is none.
    seed, workers : int
        CP-SAT random seed and search workers.

    Returns
    -------
    ExactResult
        ``status`` "optimal" (proven), "feasible" (best found, ``bound`` = CP-SAT's proven lower bound, at least
        :func:`peak_memory_lower_bound`) or "timeout" (nothing found).

    Raises
    ------
    GraphError
        For output sizes that are not whole bytes.
    """
    from ortools.sat.python import cp_model

    n = graph.n
    size = graph.out_bytes
    if not np.all(size == np.round(size)):
        raise GraphError("the CP-SAT order model needs whole-byte output sizes")
    sizes = [int(s) for s in size]
    m = cp_model.CpModel()
    p = [m.NewIntVar(0, n - 1, f"p{v}") for v in range(n)]
    m.AddAllDifferent(p)
    for u, v in graph.all_edges.tolist():
        m.Add(p[u] < p[v])
    total = int(sum(sizes))
    lb = int(np.ceil(peak_memory_lower_bound(graph)))
    peak = m.NewIntVar(min(lb, total), total, "peak")
    intervals, demands = [], []
    hints = {}
    pos = None
    if hint_order is not None:
        pos = np.empty(n, dtype=np.int64)
        pos[np.asarray(hint_order, dtype=np.int64)] = np.arange(n)
    for u in range(n):
        if sizes[u] == 0:
            continue
        cons = sorted(set(graph.data_succ[u]))
        if cons:
            e = m.NewIntVar(1, n, f"e{u}")
            m.AddMaxEquality(e, [p[c] + 1 for c in cons])
            if pos is not None:
                hints[e] = int(max(pos[c] for c in cons)) + 1
        else:
            e = n
        length = m.NewIntVar(1, n, f"len{u}")
        m.Add(length == e - p[u])
        if pos is not None:
            hints[length] = (hints[e] if cons else n) - int(pos[u])
        intervals.append(m.NewIntervalVar(p[u], length, e, f"live{u}"))
        demands.append(sizes[u])
    if intervals:
        m.AddCumulative(intervals, demands, peak)
    m.Minimize(peak)
    model = PerformanceModel(graph, 1, "peak-memory")
    incumbent = None
    if hint_order is not None:
        # the hinted order is an incumbent: ask CP-SAT only for strictly better orders (CP-SAT with one worker
        # rarely finds a first solution of a few-hundred-node order model by itself, even with a complete hint)
        for k, v in enumerate(hint_order):
            m.AddHint(p[int(v)], k)
        for var, val in hints.items():
            m.AddHint(var, val)
        x0 = model.chromosome(list(hint_order))
        incumbent = (float(model.decode(x0).peak_memory), x0)
        m.Add(peak <= int(incumbent[0]) - 1)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit)
    solver.parameters.num_search_workers = int(workers)
    solver.parameters.random_seed = int(seed)
    st = solver.Solve(m)
    if st == cp_model.INFEASIBLE and incumbent is not None:  # nothing beats the hinted order: it is optimal
        return ExactResult(incumbent[0], True, incumbent[1], incumbent[0], 0, "optimal")
    bound = float(max(lb, solver.BestObjectiveBound())) if st != cp_model.INFEASIBLE else float(lb)
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        if incumbent is not None:
            return ExactResult(incumbent[0], False, incumbent[1], min(bound, incumbent[0]), 0, "feasible")
        return ExactResult(None, False, None, bound, 0, "timeout")
    order = sorted(range(n), key=lambda v: solver.Value(p[v]))
    x = model.chromosome(order)
    obj = float(model.decode(x).peak_memory)
    optimal = st == cp_model.OPTIMAL
    return ExactResult(obj, optimal, x, obj if optimal else bound, 0, "optimal" if optimal else "feasible")
