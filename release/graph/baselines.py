"""Baselines for REGAL, all on the same performance model and evaluation budget.

Methods (``METHODS``; each ``f(model, budget, seed, **kw) -> SearchResult``):

* ``brkga`` -- plain BRKGA (:func:`release.graph.brkga.brkga`, default :class:`BRKGAConfig`).
* ``tuned-brkga`` -- BRKGA with hyperparameters from :func:`tune_brkga` (grid search on training graphs;
  REGAL's "tuned BRKGA"); pass ``config=``.
* ``random`` -- random search: ``budget`` uniform chromosomes, keep the best.
* ``local`` -- local search: first-improvement hill climbing on random keys (resample a few genes),
  sideways moves allowed, restart after a stall.
* ``greedy`` -- one deterministic heuristic schedule (1 evaluation): for running time, critical-path list
  scheduling (priority = upward rank, device = earliest finish time; HEFT, Topcuoglu et al. 2002, without
  insertion); for peak memory, a memory-greedy order (run the ready op that adds the fewest live bytes)
  with devices balanced by allocated bytes.
* ``given`` -- the graph's given order on device 0 (what TVM runs: the binding order of the main function).

Exact optima live in :mod:`release.graph.exact`.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from dataclasses import dataclass, field

import numpy as np

from ..errors import GraphError
from .brkga import BRKGAConfig, SearchResult, brkga
from .graph import ComputationGraph
from .perf_model import PerformanceModel, better

logger = logging.getLogger(__name__)


def _check_budget(budget) -> int:
    if not isinstance(budget, (int, np.integer)) or budget <= 0:
        raise GraphError(f"evaluation budget must be a positive integer, got {budget!r}; use --budget 1 or more")
    return int(budget)


def seed_chromosomes(model: PerformanceModel) -> np.ndarray:
    """The given order (on device 0) and the objective's greedy solution as chromosomes, shape (2, n_genes).

    Every search method starts from these (``initial=``), so ``optimize`` never returns a schedule worse than
    either. Computing them evaluates nothing.
    """
    if model.objective == "runtime":
        order, dev = critical_path_schedule(model)
    else:
        order, dev = memory_greedy_schedule(model)
    return np.stack([model.given_order_chromosome(), model.chromosome(order, dev)])


def _initial(initial, G: int) -> np.ndarray:
    return np.zeros((0, G)) if initial is None else np.asarray(initial, dtype=np.float64).reshape(-1, G)


def random_search(model: PerformanceModel, budget: int, seed: int = 0, batch: int = 100,
                  initial: np.ndarray | None = None) -> SearchResult:
    """Evaluate ``budget`` chromosomes: ``initial`` ones first (optional), then uniform random ones (in batches
    of ``batch``); return the best."""
    budget = _check_budget(budget)
    rng = np.random.default_rng(seed)
    init = _initial(initial, model.n_genes)
    best = None
    used = 0
    curve = []
    while used < budget:
        k = min(batch, budget - used)
        pop = rng.random((k, model.n_genes))
        if used == 0 and len(init):
            pop[: min(k, len(init))] = init[:k]
        obj, vio = model.evaluate_population(pop)
        used += k
        i = int(np.lexsort((obj, vio))[0])
        if best is None or better(obj[i], vio[i], best[1], best[2]):
            best = (pop[i].copy(), float(obj[i]), float(vio[i]))
        curve.append((used, best[1] if best[2] <= 0 else np.inf))
    return SearchResult(best[0], best[1], best[2], used, np.array(curve), "random")


@dataclass
class LocalSearchConfig:
    """Hyperparameters of the random-key local search (ours)."""

    neighbors: int = 16
    """Neighbors evaluated per step (one batch)."""
    genes_per_move: int = 3
    """Genes resampled uniformly in one move."""
    patience: int = 50
    """Steps without strict improvement before a restart from a fresh random chromosome."""


def local_search(
    model: PerformanceModel, budget: int, seed: int = 0, config: LocalSearchConfig | None = None,
    initial: np.ndarray | None = None,
) -> SearchResult:
    """Hill climbing on random keys: move to the best of ``neighbors`` perturbed copies when not worse.

    Each neighbor resamples ``genes_per_move`` random genes of the current chromosome. Equal moves are accepted
    (peak-memory landscapes have plateaus); after ``patience`` steps without strict improvement the search
    restarts from a random chromosome. Stops at exactly ``budget`` evaluations.
    """
    budget = _check_budget(budget)
    cfg = config or LocalSearchConfig()
    rng = np.random.default_rng(seed)
    G = model.n_genes
    cur = rng.random((1, G))
    init = _initial(initial, G)[: budget]
    if len(init):  # start from the best of the given chromosomes
        o, v = model.evaluate_population(init)
        i = int(np.lexsort((o, v))[0])
        cur, used = init[i: i + 1].copy(), len(init)
        o, v = o[i: i + 1], v[i: i + 1]
    else:
        o, v = model.evaluate_population(cur)
        used = 1
    cur_o, cur_v = float(o[0]), float(v[0])
    best = (cur[0].copy(), cur_o, cur_v)
    stall = 0
    curve = [(used, cur_o if cur_v <= 0 else np.inf)]
    m = max(1, min(cfg.genes_per_move, G))
    while used < budget:
        k = min(cfg.neighbors, budget - used)
        nb = np.repeat(cur, k, axis=0)
        idx = np.argsort(rng.random((k, G)), axis=1)[:, :m]
        nb[np.arange(k)[:, None], idx] = rng.random((k, m))
        o, v = model.evaluate_population(nb)
        used += k
        i = int(np.lexsort((o, v))[0])
        if better(o[i], v[i], cur_o, cur_v):
            stall = 0
        else:
            stall += 1
        if not better(cur_o, cur_v, o[i], v[i]):  # not worse: move (sideways allowed)
            cur, cur_o, cur_v = nb[i: i + 1].copy(), float(o[i]), float(v[i])
        if better(cur_o, cur_v, best[1], best[2]):
            best = (cur[0].copy(), cur_o, cur_v)
        if stall >= cfg.patience and used < budget:
            cur = rng.random((1, G))
            o, v = model.evaluate_population(cur)
            used += 1
            cur_o, cur_v = float(o[0]), float(v[0])
            if better(cur_o, cur_v, best[1], best[2]):
                best = (cur[0].copy(), cur_o, cur_v)
            stall = 0
        curve.append((used, best[1] if best[2] <= 0 else np.inf))
    return SearchResult(best[0], best[1], best[2], used, np.array(curve), "local")


# ---------------------------------------------------------------------- greedy heuristics
def critical_path_schedule(model: PerformanceModel) -> tuple[np.ndarray, np.ndarray]:
    """HEFT without insertion: order by upward rank (critical path to a sink including mean transfer
    time), device = the one giving the earliest finish time.

    Returns
    -------
    order, device : ndarray of int, shape (n,)
    """
    g = model.graph
    n, d = g.n, model.d
    off = ~np.eye(d, dtype=bool)
    mean_lat = float(model.latency[off].mean()) if d > 1 else 0.0
    mean_inv_bw = float((1.0 / model.bandwidth[off]).mean()) if d > 1 else 0.0
    frac = (d - 1) / d
    data = set(map(tuple, g.data_edges.tolist()))
    rank = np.zeros(n)
    for v in g.topological_order()[::-1].tolist():
        best = 0.0
        for s in g.succ[v]:
            c = frac * (mean_lat + g.out_bytes[v] * mean_inv_bw) if (v, s) in data else 0.0
            best = max(best, c + rank[s])
        rank[v] = g.cost[v] + best
    indeg = g.indegree.tolist()
    heap = [(-rank[v], v) for v in range(n) if indeg[v] == 0]
    heapq.heapify(heap)
    free_at = [0.0] * d
    finish = [0.0] * n
    dev = [0] * n
    order = []
    lat, bw = model.latency, model.bandwidth
    while heap:
        v = heapq.heappop(heap)[1]
        best_k, best_f = 0, np.inf
        for k in range(d):
            t = free_at[k]
            for p in g.pred[v]:
                f = finish[p]
                if (p, v) in data and dev[p] != k:
                    f += lat[dev[p], k] + g.out_bytes[p] / bw[dev[p], k]
                t = max(t, f)
            if t + g.cost[v] < best_f:
                best_k, best_f = k, t + g.cost[v]
        dev[v] = best_k
        finish[v] = best_f
        free_at[best_k] = best_f
        order.append(v)
        for s in g.succ[v]:
            indeg[s] -= 1
            if indeg[s] == 0:
                heapq.heappush(heap, (-rank[s], s))
    return np.array(order), np.array(dev)


def memory_greedy_schedule(model: PerformanceModel) -> tuple[np.ndarray, np.ndarray]:
    """Memory-greedy order: run the ready op with the smallest change of live bytes (its output minus the
    inputs it is the last consumer of; ties: more bytes freed, then lower index). Devices: the device with
    the fewest bytes allocated so far.

    Returns
    -------
    order, device : ndarray of int, shape (n,)
    """
    g = model.graph
    n, d = g.n, model.d
    size = g.out_bytes
    remaining = [len(g.data_succ[u]) for u in range(n)]
    indeg = g.indegree.tolist()
    ready = {v for v in range(n) if indeg[v] == 0}
    order, dev = [], np.zeros(n, dtype=np.int64)
    alloc = np.zeros(d)
    while ready:
        best = None
        for v in ready:
            freed = sum(size[u] for u in set(g.data_pred[v]) if remaining[u] == 1)
            key = (size[v] - freed, -freed, v)
            if best is None or key < best[0]:
                best = (key, v)
        v = best[1]
        ready.remove(v)
        order.append(v)
        k = int(np.argmin(alloc))
        dev[v] = k
        alloc[k] += size[v]
        for u in set(g.data_pred[v]):
            remaining[u] -= 1
        for s in g.succ[v]:
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.add(s)
    return np.array(order), dev


def _single(model: PerformanceModel, chrom: np.ndarray, name: str) -> SearchResult:
    o, v = model.evaluate_population(chrom[None, :])
    return SearchResult(chrom, float(o[0]), float(v[0]), 1, np.array([(1, o[0] if v[0] <= 0 else np.inf)]), name)


def greedy(model: PerformanceModel, budget: int = 1, seed: int = 0) -> SearchResult:
    """The objective's greedy heuristic (1 evaluation): critical path for runtime, memory-greedy for memory."""
    _check_budget(budget)
    if model.objective == "runtime":
        order, dev = critical_path_schedule(model)
    else:
        order, dev = memory_greedy_schedule(model)
    return _single(model, model.chromosome(order, dev), "greedy")


def given_order(model: PerformanceModel, budget: int = 1, seed: int = 0) -> SearchResult:
    """The graph's given order on device 0 (what TVM runs), 1 evaluation."""
    _check_budget(budget)
    return _single(model, model.given_order_chromosome(), "given")


def plain_brkga(model: PerformanceModel, budget: int, seed: int = 0, config: BRKGAConfig | None = None,
                initial: np.ndarray | None = None) -> SearchResult:
    """Plain BRKGA with :class:`BRKGAConfig` defaults (or ``config``), seeded with ``initial`` chromosomes."""
    r = brkga(model, budget, config or BRKGAConfig(), seed, initial=initial)
    r.method = "brkga"
    return r


def tuned_brkga(model: PerformanceModel, budget: int, seed: int = 0, config: BRKGAConfig | None = None,
                initial: np.ndarray | None = None) -> SearchResult:
    """BRKGA with a tuned config (from :func:`tune_brkga`; default config if none is given)."""
    r = brkga(model, budget, config or BRKGAConfig(), seed, initial=initial)
    r.method = "tuned-brkga"
    return r


METHODS = {
    "brkga": plain_brkga,
    "tuned-brkga": tuned_brkga,
    "random": random_search,
    "local": local_search,
    "greedy": greedy,
    "given": given_order,
}


def run_method(name: str, model: PerformanceModel, budget: int, seed: int = 0, **kw) -> SearchResult:
    """Run method ``name`` (a key of :data:`METHODS`).

    Raises
    ------
    GraphError
        For an unknown method name.
    """
    if name not in METHODS:
        raise GraphError(f"unknown method {name!r}; choose one of {', '.join(METHODS)} (or 'exact')")
    return METHODS[name](model, budget, seed, **kw)


#: Methods that search (and take ``initial=`` seed chromosomes).
SEARCH_METHODS = ("brkga", "tuned-brkga", "random", "local")


# ---------------------------------------------------------------------- tuned BRKGA
@dataclass
class TuningGrid:
    """The hyperparameter grid searched for "tuned BRKGA" (REGAL section 5; values within G&R's ranges)."""

    population: tuple = (50, 100, 200)
    """Population sizes."""
    elite_fraction: tuple = (0.1, 0.25)
    """Elite fractions."""
    mutant_fraction: tuple = (0.1, 0.3)
    """Mutant fractions."""
    rho: tuple = (0.6, 0.8)
    """Elite-inheritance probabilities."""

    def configs(self) -> list[BRKGAConfig]:
        """Every combination, in a fixed order."""
        return [BRKGAConfig(p, e, m, r) for p, e, m, r in
                itertools.product(self.population, self.elite_fraction, self.mutant_fraction, self.rho)]


@dataclass
class TuningResult:
    """Outcome of :func:`tune_brkga`: best config and the mean score of every config tried."""

    best: BRKGAConfig
    scores: list[tuple[BRKGAConfig, float]] = field(default_factory=list)
    evaluations: int = 0
    """Objective evaluations the grid search spent (reference runs plus every config on every graph)."""


def tune_brkga(
    graphs: list[ComputationGraph],
    objective: str,
    devices: int,
    budget: int,
    grid: TuningGrid | None = None,
    seed: int = 0,
    model_kw: dict | None = None,
) -> TuningResult:
    """Grid-search BRKGA hyperparameters on training graphs.

    Score of a config = mean over ``graphs`` of (its best objective / plain BRKGA's best objective) at the same
    budget and seed; lower is better; infeasible results count as 2. Ties keep the earlier config.

    Parameters
    ----------
    graphs : list of ComputationGraph
        Training graphs (never the test graphs).
    objective, devices, budget :
        As for :class:`PerformanceModel` and :func:`brkga`.
    grid : TuningGrid, optional
    seed : int
    model_kw : dict, optional
        Extra :class:`PerformanceModel` arguments (latency, bandwidth, memory_limit).
    """
    _check_budget(budget)
    if not graphs:
        raise GraphError("tune_brkga needs at least one training graph")
    grid = grid or TuningGrid()
    model_kw = model_kw or {}
    base = []
    spent = 0
    for i, g in enumerate(graphs):
        r = brkga(PerformanceModel(g, devices, objective, **model_kw), budget, BRKGAConfig(), seed + i)
        spent += r.evaluations
        base.append(r.best_objective if r.best_violation <= 0 else np.nan)
    scores = []
    for cfg in grid.configs():
        rel = []
        for i, g in enumerate(graphs):
            r = brkga(PerformanceModel(g, devices, objective, **model_kw), budget, cfg, seed + i)
            spent += r.evaluations
            if r.best_violation > 0 or not np.isfinite(base[i]) or base[i] <= 0:
                rel.append(2.0 if r.best_violation > 0 else 1.0)
            else:
                rel.append(r.best_objective / base[i])
        scores.append((cfg, float(np.mean(rel))))
        logger.info("tune_brkga %s: %.4f", cfg, scores[-1][1])
    best = min(scores, key=lambda t: t[1])[0]
    return TuningResult(best, scores, spent)
