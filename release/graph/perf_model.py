"""The REGAL performance model: a random-key decoder plus a simulator for makespan and peak memory.

A *chromosome* holds random keys in [0, 1] (REGAL, Paliwal et al. ICLR 2020, section 3; decoder as in
reference/regal.md, "[unverified, consistent with the paper]"). Gene layout, for ``n`` nodes and ``d``
devices::

    genes[0:n]                      scheduling-priority key of node v at genes[v]
    genes[n + v*d : n + (v+1)*d]    device-affinity keys of node v (present only when d > 1)

so ``n_genes = n`` for one device and ``n * (d + 1)`` otherwise.

Decoding (serial schedule generation, non-preemptive):

* device of node v = argmax of its affinity keys (ties: lowest device index);
* repeatedly take, among the *ready* nodes (all data and control predecessors scheduled), the one with the
  highest priority key (ties: lowest node index), and append it to its device: it starts at
  ``max(device free time, max over predecessors p of finish[p] + transfer(p))`` where ``transfer(p) =
  latency + out_bytes[p] / bandwidth`` on the (device[p], device[v]) link for a cross-device *data* edge and
  0 otherwise (control edges cost nothing). One copy of a tensor is sent per receiving device; links have
  no contention. For a fixed placement, every device order consistent with the edges can be produced this
  way, so the decoder's image contains a makespan-optimal schedule.

Objectives:

* running time = makespan = the largest finish time (microseconds);
* peak memory = max over devices and time of live tensor bytes. The output of node p is live on its device
  from p's start until the end of its last consumer on that device (or, when it only has consumers on other
  devices, until its last transfer arrives); a graph output (no data consumer) stays live to the end. A
  transferred copy is live on the receiving device from the producer's finish until the end of its last
  consumer there. Events at the same instant are ordered by the decoder's scheduling index, so that a
  zero-cost node still holds its inputs and its output at once.
* On one device the makespan is the sum of costs (any order) and the peak memory depends only on the op
  order: the decoder reduces to choosing a topological order, and the live set while the k-th op runs is
  every tensor produced at a position <= k whose last consumer is at a position >= k.
* With a per-device memory limit a solution whose peak on some device exceeds that device's limit is
  *infeasible*: its ``violation`` (bytes over the limits, summed over devices) is positive and it ranks below
  every feasible solution (:func:`rank_key`).
"""

from __future__ import annotations

import heapq
import logging
import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import GraphError
from .graph import ComputationGraph

logger = logging.getLogger(__name__)

OBJECTIVES = ("runtime", "peak-memory")


@dataclass
class Solution:
    """A decoded solution: device placement and schedule, with its simulated objectives.

    Attributes
    ----------
    order : ndarray of int, shape (n,)
        Global scheduling order (the decoder's order; per device, ops run in this order).
    device : ndarray of int, shape (n,)
        Device of every node.
    start, finish : ndarray of float, shape (n,)
        Start and finish time of every node in microseconds.
    makespan : float
        Running time in microseconds.
    peak_memory : float
        Peak live bytes, maximum over devices.
    device_peak : ndarray of float, shape (d,)
        Peak live bytes per device.
    violation : float
        Bytes above the memory limits summed over devices (0 when feasible or without limits).
    """

    order: np.ndarray
    device: np.ndarray
    start: np.ndarray
    finish: np.ndarray
    makespan: float
    peak_memory: float
    device_peak: np.ndarray
    violation: float = 0.0

    @property
    def feasible(self) -> bool:
        """Whether every device's peak memory fits its limit."""
        return self.violation <= 0

    def objective(self, objective: str) -> float:
        """``makespan`` (us) for ``"runtime"``, ``peak_memory`` (bytes) for ``"peak-memory"``."""
        return self.makespan if objective == "runtime" else self.peak_memory

    def to_dict(self, graph: ComputationGraph | None = None) -> dict:
        """JSON-ready dict: order, device per node, times and objectives."""
        d = {
            "order": self.order.tolist(),
            "device": self.device.tolist(),
            "start_us": [round(x, 6) for x in self.start.tolist()],
            "finish_us": [round(x, 6) for x in self.finish.tolist()],
            "makespan_us": float(self.makespan),
            "peak_memory_bytes": float(self.peak_memory),
            "device_peak_bytes": self.device_peak.tolist(),
            "feasible": bool(self.feasible),
        }
        if graph is not None:
            d["order_names"] = [graph.names[i] for i in self.order.tolist()]
        return d


def rank_key(objective: np.ndarray, violation: np.ndarray) -> np.ndarray:
    """Indices that sort solutions best first: feasible by objective, then infeasible by violation.

    Parameters
    ----------
    objective, violation : ndarray of float, shape (P,)

    Returns
    -------
    ndarray of int, shape (P,)
        A stable ranking (ties keep the input order).
    """
    return np.lexsort((np.arange(len(objective)), objective, violation))


def better(obj_a: float, vio_a: float, obj_b: float, vio_b: float) -> bool:
    """Whether solution a is strictly better than solution b under :func:`rank_key`'s order."""
    if vio_a != vio_b:
        return vio_a < vio_b
    return obj_a < obj_b


#: Most devices a performance model accepts (the chromosome has ``n * (d + 1)`` genes); also at most
#: ``max(n, 16)``: more devices than nodes only adds genes that cannot change the schedule.
MAX_DEVICES = 1024


def _per_device(value, shape: tuple, name: str, hint: str) -> np.ndarray:
    """``value`` broadcast to ``shape`` as float64, or a :class:`GraphError` naming a wrong length or type."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise GraphError(f"{name} must be numeric, got {value!r}") from None
    try:
        return np.broadcast_to(arr, shape).copy()
    except ValueError:
        raise GraphError(f"{name} has {arr.size} value(s) for {shape[0]} device(s); give {hint}") from None


class PerformanceModel:
    """Decoder and simulator for one graph, device count and objective.

    Parameters
    ----------
    graph : ComputationGraph
    devices : int, default 1
        Number of identical devices (>= 1).
    objective : {"runtime", "peak-memory"}, default "runtime"
        What :meth:`evaluate_population` returns as the objective (makespan in us or peak bytes).
    latency_us : float or ndarray (d, d), default 5.0
        Fixed cost of a cross-device transfer, microseconds [ours: a PCIe-like link].
    bandwidth : float or ndarray (d, d), default 1e4
        Link bandwidth in bytes per microsecond (1e4 B/us = 10 GB/s) [ours].
    memory_limit : float or sequence of float or None, default None
        Per-device memory limit in bytes (one value for all devices, or one per device); None = no limit.
    memory_plan : TVMPlanModel, optional
        One device only: "peak memory" is then the bytes TVM's ``StaticPlanBlockMemory`` plans for the order
        (:class:`release.graph.tvm_plan.TVMPlanModel`) instead of the ideal peak of live bytes.

    Raises
    ------
    GraphError
        For zero or negative devices, an unknown objective, a non-positive bandwidth, a negative latency or a
        non-positive memory limit.

    Attributes
    ----------
    evaluations : int
        Number of chromosomes evaluated so far (:meth:`evaluate_population` and :meth:`evaluate`).
    eval_seconds : float
        Wall time spent in evaluations (for :meth:`evals_per_second`).
    """

    def __init__(
        self,
        graph: ComputationGraph,
        devices: int = 1,
        objective: str = "runtime",
        latency_us=5.0,
        bandwidth=1e4,
        memory_limit=None,
        memory_plan=None,
    ) -> None:
        if not isinstance(devices, (int, np.integer)) or isinstance(devices, bool) or devices < 1:
            raise GraphError(f"devices must be a positive integer, got {devices!r}; use --devices 1 or more")
        most = min(max(graph.n, 16), MAX_DEVICES)
        if devices > most:
            raise GraphError(f"{devices} devices for a graph of {graph.n} nodes: more devices than nodes (beyond 16) "
                             f"cannot help and at most {MAX_DEVICES} are supported; use --devices {most} or fewer")
        if objective not in OBJECTIVES:
            raise GraphError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
        self.graph = graph
        self.d = int(devices)
        self.objective = objective
        d = self.d
        lat = _per_device(latency_us, (d, d), "link latency (--latency-us)", "one value or a d x d matrix")
        bw = _per_device(bandwidth, (d, d), "link bandwidth (--bandwidth)", "one value or a d x d matrix")
        if np.any(lat < 0) or not np.all(np.isfinite(lat)):
            raise GraphError(f"link latency must be finite and >= 0 us, got {latency_us!r}; use e.g. --latency-us 5")
        if not np.all(np.isfinite(bw)) or np.any(bw <= 0):
            raise GraphError(f"link bandwidth must be finite and > 0 bytes/us, got {bandwidth!r}; "
                             "use e.g. --bandwidth 1e4 (10 GB/s)")
        self.latency = lat
        self.bandwidth = bw
        if memory_limit is None:
            self.memory_limit = None
        else:
            lim = _per_device(memory_limit, (d,), "memory limit (--memory-limit)", "one value or one per device")
            if not np.all(np.isfinite(lim)) or np.any(lim <= 0):
                raise GraphError(f"memory limit must be finite and > 0 bytes per device, got {memory_limit!r}; "
                                 "use e.g. --memory-limit 1e6, or drop it for no limit")
            self.memory_limit = lim
        if memory_plan is not None:
            if d != 1:
                raise GraphError(f"TVM's memory plan (--memory tvm) is a single-device objective, got --devices {d}; "
                                 "use --devices 1 or --memory ideal")
            if getattr(memory_plan, "n", None) != graph.n:
                raise GraphError("the memory plan model was built for another graph; build it from this graph's module")
        self.memory_plan = memory_plan
        self.n = graph.n
        self.n_genes = self.n if d == 1 else self.n * (d + 1)
        self.evaluations = 0
        self.eval_seconds = 0.0
        self._prepare()

    # ------------------------------------------------------------------ precomputation
    def _prepare(self) -> None:
        g = self.graph
        n = self.n
        self._succ = g.succ
        self._indeg0 = g.indegree.tolist()
        self._sources = [v for v in range(n) if self._indeg0[v] == 0]
        self._cost = g.cost.tolist()
        self._size = g.out_bytes.tolist()
        data = set(map(tuple, g.data_edges.tolist()))
        # predecessor lists with a data flag, for the multi-device simulation
        self._pred_flag = [[(p, (p, v) in data) for p in g.pred[v]] for v in range(n)]
        self._data_succ = g.data_succ
        # single-device vectorized memory: data edges grouped by producer
        e = g.data_edges
        order = np.lexsort((e[:, 1], e[:, 0])) if len(e) else np.zeros(0, dtype=np.int64)
        self._e_src = e[order, 0] if len(e) else np.zeros(0, dtype=np.int64)
        self._e_dst = e[order, 1] if len(e) else np.zeros(0, dtype=np.int64)
        has = np.zeros(n, dtype=bool)
        has[self._e_src] = True
        self._producers = np.flatnonzero(has)  # nodes with at least one data consumer
        self._outputs = np.flatnonzero(~has)  # graph outputs: live to the end
        starts = np.searchsorted(self._e_src, self._producers) if len(e) else np.zeros(0, dtype=np.int64)
        self._seg_starts = starts
        self._total_cost = float(g.cost.sum())

    # ------------------------------------------------------------------ decoding
    def devices_of(self, pop: np.ndarray) -> np.ndarray:
        """Device of every node for a population (shape (P, n_genes) -> (P, n))."""
        P = pop.shape[0]
        if self.d == 1:
            return np.zeros((P, self.n), dtype=np.int64)
        return pop[:, self.n:].reshape(P, self.n, self.d).argmax(-1)

    def decode_order(self, priority) -> list[int]:
        """Topological order taking the ready node with the highest priority key first.

        Parameters
        ----------
        priority : sequence of float, shape (n,)

        Returns
        -------
        list of int, length n
        """
        prio = np.asarray(priority, dtype=np.float64).reshape(1, -1)
        by_rank, rank = self._ranks(prio)
        return self._decode_ranked(rank[0].tolist(), by_rank[0].tolist())

    @staticmethod
    def _ranks(prio: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rank nodes by priority for a batch (shape (P, n)): ``by_rank[k]`` = node with the k-th highest key
        (ties: lower index first), ``rank[v]`` = its position. Integer heaps are faster than tuple heaps."""
        by_rank = np.argsort(-prio, axis=1, kind="stable")
        rank = np.empty_like(by_rank)
        np.put_along_axis(rank, by_rank, np.arange(prio.shape[1])[None, :], axis=1)
        return by_rank, rank

    def _decode_ranked(self, rank: list[int], by_rank: list[int]) -> list[int]:
        indeg = self._indeg0.copy()
        succ = self._succ
        heap = [rank[v] for v in self._sources]
        heapq.heapify(heap)
        order = []
        push, pop, append = heapq.heappush, heapq.heappop, order.append
        while heap:
            v = by_rank[pop(heap)]
            append(v)
            for s in succ[v]:
                indeg[s] -= 1
                if indeg[s] == 0:
                    push(heap, rank[s])
        return order

    def _peak_single(self, orders: np.ndarray) -> np.ndarray:
        """Peak bytes for a batch of single-device orders (shape (P, n) -> (P,)): the ideal peak of live bytes
        (vectorized), or the bytes TVM plans when the model has a ``memory_plan``."""
        if self.memory_plan is not None:
            plan = self.memory_plan
            return np.array([float(plan.plan_bytes(o)) for o in orders.tolist()], dtype=np.float64)
        P, n = orders.shape
        rows = np.arange(P)[:, None]
        pos = np.empty_like(orders)
        pos[rows, orders] = np.arange(n)[None, :]
        size = self.graph.out_bytes
        last = np.full((P, n), n - 1, dtype=np.int64)  # outputs stay live to the end
        if len(self._producers):
            last[:, self._producers] = np.maximum.reduceat(pos[:, self._e_dst], self._seg_starts, axis=1)
        alloc = np.empty((P, n), dtype=np.float64)
        alloc[rows, pos] = size[None, :]
        free = np.bincount(
            (np.arange(P)[:, None] * (n + 1) + last + 1).ravel(),
            weights=np.broadcast_to(size, (P, n)).ravel(),
            minlength=P * (n + 1),
        ).reshape(P, n + 1)[:, :n]
        # live while position k runs: allocated at positions <= k minus last used at positions < k
        live = np.cumsum(alloc, axis=1) - np.cumsum(free, axis=1)
        return live.max(axis=1)

    def _simulate(self, prio, dev: list[int], need_mem: bool = True, ranks=None):
        """Serial schedule generation for d > 1; returns (order, start, finish, device_peak).

        ``device_peak`` is all zeros when ``need_mem`` is False (runtime objective without memory limits).
        """
        n, d = self.n, self.d
        indeg = self._indeg0.copy()
        succ, pred_flag, cost, size = self._succ, self._pred_flag, self._cost, self._size
        lat, bw = self.latency.tolist(), self.bandwidth.tolist()
        if ranks is None:
            b, r = self._ranks(np.asarray(prio, dtype=np.float64).reshape(1, -1))
            ranks = (r[0].tolist(), b[0].tolist())
        rank, by_rank = ranks
        heap = [rank[v] for v in self._sources]
        heapq.heapify(heap)
        free_at = [0.0] * d
        start = [0.0] * n
        finish = [0.0] * n
        order = []
        while heap:
            v = by_rank[heapq.heappop(heap)]
            dv = dev[v]
            t = free_at[dv]
            for p, is_data in pred_flag[v]:
                f = finish[p]
                if is_data and dev[p] != dv:
                    dp = dev[p]
                    f += lat[dp][dv] + size[p] / bw[dp][dv]
                if f > t:
                    t = f
            start[v] = t
            finish[v] = t + cost[v]
            free_at[dv] = finish[v]
            order.append(v)
            for s in succ[v]:
                indeg[s] -= 1
                if indeg[s] == 0:
                    heapq.heappush(heap, rank[s])
        peaks = np.zeros(d)
        if not need_mem:
            return order, start, finish, peaks
        peaks = self._device_peaks(order, start, finish, dev)
        return order, start, finish, peaks

    def _device_peaks_reference(self, order, start, finish, dev) -> np.ndarray:
        """Per-device peak bytes of a simulated schedule, event by event in Python (reference for tests)."""
        n, d = self.n, self.d
        size = self._size
        lat, bw = self.latency.tolist(), self.bandwidth.tolist()
        idx = [0] * n
        for k, v in enumerate(order):
            idx[v] = k
        peaks = np.zeros(d)
        # memory events per device: (time, scheduling index, phase, delta)
        events: list[list[tuple]] = [[] for _ in range(d)]
        dsucc = self._data_succ
        for p in range(n):
            dp = dev[p]
            s = size[p]
            if s == 0:
                continue
            events[dp].append((start[p], idx[p], 0, s))
            cons = dsucc[p]
            if not cons:
                continue  # graph output: live to the end
            local_end = None
            remote: dict[int, tuple] = {}
            for c in cons:
                key = (finish[c], idx[c], 1)
                dc = dev[c]
                if dc == dp:
                    if local_end is None or key > local_end:
                        local_end = key
                elif dc not in remote or key > remote[dc]:
                    remote[dc] = key
            for dc, key in remote.items():
                events[dc].append((finish[p], idx[p], 1, s))
                events[dc].append(key + (-s,))
                arrival = (finish[p] + lat[dp][dc] + s / bw[dp][dc], idx[p], 1)
                if local_end is None or arrival > local_end:
                    local_end = arrival
            events[dp].append(local_end + (-s,))
        for j in range(d):
            ev = events[j]
            if not ev:
                continue
            ev.sort(key=lambda e: (e[0], e[1], e[2]))
            run = 0.0
            best = 0.0
            for e in ev:
                run += e[3]
                if run > best:
                    best = run
            peaks[j] = best
        return peaks

    def _device_peaks(self, order, start, finish, dev) -> np.ndarray:
        """Per-device peak bytes of a simulated schedule (vectorized; same events as the reference).

        On one device finish times grow with the scheduling index, so "the last consumer on a device" is the
        consumer with the largest index there.
        """
        n, d = self.n, self.d
        order = np.asarray(order, dtype=np.int64)
        start = np.asarray(start)
        finish = np.asarray(finish)
        dev = np.asarray(dev, dtype=np.int64)
        size = self.graph.out_bytes
        idx = np.empty(n, dtype=np.int64)
        idx[order] = np.arange(n)
        src, dst = self._e_src, self._e_dst
        ds, dd = dev[src], dev[dst]
        local = ds == dd
        loc_last = np.full(n, -1, dtype=np.int64)
        np.maximum.at(loc_last, src[local], idx[dst[local]])
        rem = ~local
        rem_last = np.full(n * d, -1, dtype=np.int64)
        np.maximum.at(rem_last, src[rem] * d + dd[rem], idx[dst[rem]])
        pairs = np.flatnonzero(rem_last >= 0)
        rp, rr = pairs // d, pairs % d
        rc = order[rem_last[pairs]]
        # sender: free at the later of the last local consumer's end and the last arrival
        has_cons = np.zeros(n, dtype=bool)
        has_cons[src] = True
        arrival = np.full(n, -np.inf)
        if len(pairs):
            arr_t = finish[rp] + self.latency[dev[rp], rr] + size[rp] / self.bandwidth[dev[rp], rr]
            np.maximum.at(arrival, rp, arr_t)
        lc = order[np.maximum(loc_last, 0)]
        loc_t = np.where(loc_last >= 0, finish[lc], -np.inf)
        use_arr = (arrival > loc_t) | ((arrival == loc_t) & (idx > loc_last))
        f_time = np.where(use_arr, arrival, loc_t)
        f_idx = np.where(use_arr, idx, loc_last)
        nz = size > 0
        prod = np.flatnonzero(nz)
        fr = np.flatnonzero(nz & has_cons)
        rk = np.flatnonzero(size[rp] > 0)
        rp, rr, rc = rp[rk], rr[rk], rc[rk]
        ev_dev = np.concatenate([dev[prod], dev[fr], rr, rr])
        ev_t = np.concatenate([start[prod], f_time[fr], finish[rp], finish[rc]])
        ev_i = np.concatenate([idx[prod], f_idx[fr], idx[rp], idx[rc]])
        ev_ph = np.concatenate([np.zeros(len(prod)), np.ones(len(fr) + 2 * len(rp))])
        ev_dl = np.concatenate([size[prod], -size[fr], size[rp], -size[rp]])
        if not len(ev_dev):
            return np.zeros(d)
        o = np.lexsort((ev_ph, ev_i, ev_t, ev_dev))
        ev_dev, ev_dl = ev_dev[o], ev_dl[o]
        cs = np.cumsum(ev_dl)
        starts = np.flatnonzero(np.r_[True, ev_dev[1:] != ev_dev[:-1]])
        base = np.r_[0.0, cs][starts]
        seg = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(cs)]))
        peaks = np.zeros(d)
        peaks[ev_dev[starts]] = np.maximum.reduceat(cs - base[seg], starts)
        return np.maximum(peaks, 0.0)

    # ------------------------------------------------------------------ evaluation
    def _violation(self, device_peak: np.ndarray) -> np.ndarray:
        if self.memory_limit is None:
            return np.zeros(device_peak.shape[:-1])
        return np.maximum(device_peak - self.memory_limit, 0.0).sum(-1)

    def evaluate_population(self, pop: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Objective and memory-limit violation of every chromosome.

        Parameters
        ----------
        pop : ndarray of float, shape (P, n_genes)
            Random keys.

        Returns
        -------
        objective : ndarray of float, shape (P,)
            Makespan (us) or peak memory (bytes), per ``self.objective``.
        violation : ndarray of float, shape (P,)
            Bytes over the memory limits (0 = feasible).
        """
        pop = np.asarray(pop, dtype=np.float64)
        if pop.ndim != 2 or pop.shape[1] != self.n_genes:
            raise GraphError(f"population must have shape (P, {self.n_genes}), got {pop.shape}")
        t0 = time.perf_counter()
        P = pop.shape[0]
        need_mem = self.objective == "peak-memory" or self.memory_limit is not None
        if self.d == 1:
            if need_mem:
                by_rank, rank = self._ranks(pop[:, : self.n])
                dec = self._decode_ranked
                orders = np.array([dec(r, b) for r, b in zip(rank.tolist(), by_rank.tolist())], dtype=np.int64)
                peak = self._peak_single(orders)
                dpeak = peak[:, None]
            else:
                # one device, no memory objective or limit: every order runs for the sum of costs
                peak = np.zeros(P)
                dpeak = peak[:, None]
            mk = np.full(P, self._total_cost)
        else:
            devs = self.devices_of(pop).tolist()
            by_rank, rank = self._ranks(pop[:, : self.n])
            rank, by_rank = rank.tolist(), by_rank.tolist()
            mk = np.empty(P)
            dpeak = np.empty((P, self.d))
            for i in range(P):
                _, _, finish, peaks = self._simulate(None, devs[i], need_mem, (rank[i], by_rank[i]))
                mk[i] = max(finish)
                dpeak[i] = peaks
            peak = dpeak.max(1)
        vio = self._violation(dpeak)
        self.evaluations += P
        self.eval_seconds += time.perf_counter() - t0
        obj = mk if self.objective == "runtime" else peak
        return obj, vio

    def decode(self, chromosome) -> Solution:
        """Decode one chromosome into a full :class:`Solution` (counts as one evaluation).

        Parameters
        ----------
        chromosome : array_like of float, shape (n_genes,)
        """
        x = np.asarray(chromosome, dtype=np.float64).reshape(-1)
        if x.shape[0] != self.n_genes:
            raise GraphError(f"chromosome must have {self.n_genes} genes, got {x.shape[0]}")
        t0 = time.perf_counter()
        dev = self.devices_of(x[None, :])[0]
        if self.d == 1:
            order = self.decode_order(x[: self.n])
            cost = self.graph.cost[order]
            finish_o = np.cumsum(cost)
            start = np.empty(self.n)
            finish = np.empty(self.n)
            start[order] = finish_o - cost
            finish[order] = finish_o
            dpeak = self._peak_single(np.array([order], dtype=np.int64))
        else:
            order, start, finish, dpeak = self._simulate(x[: self.n].tolist(), dev.tolist())
            start, finish = np.array(start), np.array(finish)
        self.evaluations += 1
        self.eval_seconds += time.perf_counter() - t0
        return Solution(
            order=np.asarray(order, dtype=np.int64),
            device=np.asarray(dev, dtype=np.int64),
            start=start,
            finish=finish,
            makespan=float(finish.max()),
            peak_memory=float(np.max(dpeak)),
            device_peak=np.asarray(dpeak, dtype=np.float64).reshape(-1),
            violation=float(self._violation(np.asarray(dpeak).reshape(1, -1))[0]),
        )

    def evaluate(self, chromosome) -> Solution:
        """Alias of :meth:`decode`."""
        return self.decode(chromosome)

    def chromosome(self, order, device=None) -> np.ndarray:
        """Random keys that decode to the given schedule.

        Parameters
        ----------
        order : array_like of int, shape (n,)
            A topological order (over data and control edges).
        device : array_like of int, shape (n,), optional
            Device per node (default all on device 0).

        Returns
        -------
        ndarray of float, shape (n_genes,)
            Priority keys decreasing along ``order``, affinity key 1 for the chosen device and 0 elsewhere.

        Raises
        ------
        GraphError
            When ``order`` is not a topological order or a device index is out of range.
        """
        order = np.asarray(order, dtype=np.int64)
        if not self.graph.is_topological(order):
            raise GraphError("order is not a topological order of the graph; every edge must go forward")
        x = np.zeros(self.n_genes)
        x[order] = 1.0 - (np.arange(self.n) + 0.5) / self.n
        if self.d > 1:
            dev = np.zeros(self.n, dtype=np.int64) if device is None else np.asarray(device, dtype=np.int64)
            if dev.min() < 0 or dev.max() >= self.d:
                raise GraphError(f"device indices must be in 0..{self.d - 1}, got {dev.min()}..{dev.max()}")
            aff = np.zeros((self.n, self.d))
            aff[np.arange(self.n), dev] = 1.0
            x[self.n:] = aff.ravel()
        return x

    def evals_per_second(self) -> float:
        """Evaluations per second of wall time measured so far (0 before any evaluation)."""
        return self.evaluations / self.eval_seconds if self.eval_seconds > 0 else 0.0

    def given_order_chromosome(self) -> np.ndarray:
        """The graph's given order (node index order, i.e. TVM's binding order) on device 0."""
        return self.chromosome(self.graph.topological_order(), np.zeros(self.n, dtype=np.int64))


def measure_evals_per_second(model: PerformanceModel, n_evals: int = 1000, batch: int = 100, seed: int = 0) -> float:
    """Time ``n_evals`` evaluations of uniform random chromosomes in batches; return evaluations/second."""
    rng = np.random.default_rng(seed)
    done = 0
    t0 = time.perf_counter()
    while done < n_evals:
        k = min(batch, n_evals - done)
        model.evaluate_population(rng.random((k, model.n_genes)))
        done += k
    return n_evals / (time.perf_counter() - t0)
