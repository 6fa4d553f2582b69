"""Computation graphs for REGAL: nodes with a compute cost and an output size, data and control edges.

A :class:`ComputationGraph` is the input of every REGAL component (performance model, BRKGA,
baselines, exact solvers). It matches the cost graphs of the REGAL paper (Paliwal et al., ICLR 2020,
section 2): per node a compute cost in microseconds and an output tensor size in bytes; *data edges*
carry a tensor from producer to consumer (the tensor must stay alive until its consumers have run, and
crosses a device link when producer and consumer sit on different devices); *control edges* only order
two nodes (no tensor, no memory, no transfer).

Node ``i`` is identified by its index ``0 <= i < n``; the index order is the graph's *given order*
(for an imported Relax model: the binding order of the main function, i.e. what TVM would run).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import GraphError

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1


#: Largest node id accepted in an edge list (ids must index a node; this only guards the integer conversion).
_MAX_ID = 2**62


def _as_edges(edges, name: str) -> np.ndarray:
    """Edge list -> int64 array of shape (E, 2); every id must be a whole number (no strings, no fractions).

    Raises
    ------
    GraphError
        For a ragged list, a non-numeric (string, object, bool) id, a fractional id or an id too large for
        a node index, naming the first bad entry.
    """
    if edges is None:
        return np.zeros((0, 2), dtype=np.int64)
    if isinstance(edges, np.ndarray) and edges.dtype.kind in "iu":
        arr = edges.astype(np.int64, copy=False)
        if arr.size == 0:
            return np.zeros((0, 2), dtype=np.int64)
    else:
        rows = edges.tolist() if isinstance(edges, np.ndarray) else edges
        if not isinstance(rows, (list, tuple)):
            raise GraphError(f"{name} must be a list of [producer, consumer] pairs, got {type(edges).__name__}")
        out = []
        for k, e in enumerate(rows):
            if not isinstance(e, (list, tuple)) or len(e) != 2:
                raise GraphError(f"{name}[{k}] = {e!r} is not a [producer, consumer] pair of node ids; "
                                 "give every edge as two integers")
            pair = []
            for x in e:
                if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating)):
                    raise GraphError(f"{name}[{k}] = {list(e)!r}: node id {x!r} is not an integer; "
                                     "node ids are whole numbers 0..n-1")
                if isinstance(x, (float, np.floating)) and (not np.isfinite(x) or x != int(x)):
                    raise GraphError(f"{name}[{k}] = {list(e)!r}: node id {x!r} is not a whole number; "
                                     "node ids are whole numbers 0..n-1 (fractions are not truncated)")
                if abs(int(x)) >= _MAX_ID:
                    raise GraphError(f"{name}[{k}] = {list(e)!r}: node id {int(x)} is far beyond any node; "
                                     "node ids are whole numbers 0..n-1")
                pair.append(int(x))
            out.append(pair)
        arr = np.asarray(out, dtype=np.int64).reshape(-1, 2)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise GraphError(f"{name} must be a list of (producer, consumer) pairs, got an array of shape {arr.shape}")
    return arr


@dataclass
class ComputationGraph:
    """A computation (cost) graph.

    Parameters
    ----------
    cost : array_like of float, shape (n,)
        Compute cost of each node in microseconds; must be finite and >= 0.
    out_bytes : array_like of int, shape (n,)
        Size in bytes of each node's output tensor (a tuple output counts the sum); must be >= 0.
    data_edges : array_like of int, shape (E, 2)
        ``(producer, consumer)`` pairs; the consumer reads the producer's output. Duplicates are merged.
    control_edges : array_like of int, shape (C, 2), default empty
        ``(before, after)`` pairs: ordering only, no tensor. Duplicates and pairs that are also data
        edges are merged.
    names : list of str, optional
        One name per node (defaults to ``"n{i}"``).
    ops : list of str, optional
        Operator kind per node (for example ``"relax.nn.conv2d"``; defaults to ``"op"``).
    name : str, default "graph"
        Name of the graph (used in reports).

    Raises
    ------
    GraphError
        On a cycle, a negative or non-finite cost, a negative size, an edge to a node that does not
        exist (dangling edge), a self-loop, or mismatched array lengths. :meth:`validate` runs at
        construction.
    """

    cost: np.ndarray
    out_bytes: np.ndarray
    data_edges: np.ndarray
    control_edges: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), dtype=np.int64))
    names: list[str] | None = None
    ops: list[str] | None = None
    name: str = "graph"

    def __post_init__(self) -> None:
        self.cost = np.asarray(self.cost, dtype=np.float64).reshape(-1)
        self.out_bytes = np.asarray(self.out_bytes, dtype=np.float64).reshape(-1)
        self.data_edges = _as_edges(self.data_edges, "data_edges")
        self.control_edges = _as_edges(self.control_edges, "control_edges")
        n = self.cost.shape[0]
        if self.names is None:
            self.names = [f"n{i}" for i in range(n)]
        if self.ops is None:
            self.ops = ["op"] * n
        self.names = list(self.names)
        self.ops = list(self.ops)
        self.validate()
        # Canonical, de-duplicated edge lists (sorted by producer, then consumer).
        self.data_edges = np.unique(self.data_edges, axis=0) if len(self.data_edges) else self.data_edges
        if len(self.control_edges):
            ctrl = np.unique(self.control_edges, axis=0)
            if len(self.data_edges):
                key_d = set(map(tuple, self.data_edges.tolist()))
                ctrl = np.array([e for e in ctrl.tolist() if tuple(e) not in key_d], dtype=np.int64).reshape(-1, 2)
            self.control_edges = ctrl
        self._build_adjacency()

    # ------------------------------------------------------------------ validation
    @property
    def n(self) -> int:
        """Number of nodes."""
        return int(self.cost.shape[0])

    def validate(self) -> None:
        """Check the graph; raise :class:`GraphError` naming the first problem and its fix."""
        n = self.cost.shape[0]
        if n == 0:
            raise GraphError(f"graph {self.name!r} has no nodes; give at least one node")
        if self.out_bytes.shape[0] != n:
            raise GraphError(
                f"graph {self.name!r}: {n} costs but {self.out_bytes.shape[0]} output sizes; give one of each per node"
            )
        if len(self.names) != n or len(self.ops) != n:
            raise GraphError(f"graph {self.name!r}: names/ops must have one entry per node ({n})")
        bad = np.flatnonzero(~np.isfinite(self.cost) | (self.cost < 0))
        if bad.size:
            i = int(bad[0])
            raise GraphError(
                f"graph {self.name!r}: node {i} ({self.names[i]}) has compute cost {float(self.cost[i])} us; "
                "costs must be finite and >= 0"
            )
        bad = np.flatnonzero(~np.isfinite(self.out_bytes) | (self.out_bytes < 0))
        if bad.size:
            i = int(bad[0])
            raise GraphError(
                f"graph {self.name!r}: node {i} ({self.names[i]}) has output size {float(self.out_bytes[i])} bytes; "
                "sizes must be finite and >= 0"
            )
        for kind, edges in (("data", self.data_edges), ("control", self.control_edges)):
            if not len(edges):
                continue
            out = np.flatnonzero((edges < 0).any(1) | (edges >= n).any(1))
            if out.size:
                u, v = edges[out[0]].tolist()
                raise GraphError(
                    f"graph {self.name!r}: dangling {kind} edge ({u}, {v}): nodes are numbered 0..{n - 1}; "
                    "remove the edge or add the missing node"
                )
            loop = np.flatnonzero(edges[:, 0] == edges[:, 1])
            if loop.size:
                u = int(edges[loop[0], 0])
                raise GraphError(f"graph {self.name!r}: {kind} edge ({u}, {u}) is a self-loop; remove it")
        cyc = _find_cycle(n, np.concatenate([self.data_edges, self.control_edges]))
        if cyc is not None:
            path = " -> ".join(str(v) for v in cyc)
            raise GraphError(
                f"graph {self.name!r} has a cycle ({path}); a computation graph must be acyclic, remove one of these edges"
            )

    # ------------------------------------------------------------------ structure
    def _build_adjacency(self) -> None:
        n = self.n
        all_edges = np.concatenate([self.data_edges, self.control_edges]).astype(np.int64)
        self.all_edges = all_edges
        self.succ: list[list[int]] = [[] for _ in range(n)]
        self.pred: list[list[int]] = [[] for _ in range(n)]
        for u, v in all_edges.tolist():
            self.succ[u].append(v)
            self.pred[v].append(u)
        self.data_succ: list[list[int]] = [[] for _ in range(n)]
        self.data_pred: list[list[int]] = [[] for _ in range(n)]
        for u, v in self.data_edges.tolist():
            self.data_succ[u].append(v)
            self.data_pred[v].append(u)
        self.indegree = np.array([len(p) for p in self.pred], dtype=np.int64)

    def topological_order(self) -> np.ndarray:
        """A topological order over data and control edges, preferring the lowest index (shape (n,))."""
        import heapq

        indeg = self.indegree.tolist()
        heap = [v for v in range(self.n) if indeg[v] == 0]
        heapq.heapify(heap)
        order = []
        while heap:
            v = heapq.heappop(heap)
            order.append(v)
            for s in self.succ[v]:
                indeg[s] -= 1
                if indeg[s] == 0:
                    heapq.heappush(heap, s)
        return np.array(order, dtype=np.int64)

    def is_topological(self, order) -> bool:
        """Whether ``order`` (a permutation of the nodes) respects every data and control edge."""
        order = np.asarray(order)
        if sorted(order.tolist()) != list(range(self.n)):
            return False
        pos = np.empty(self.n, dtype=np.int64)
        pos[order] = np.arange(self.n)
        e = self.all_edges
        return bool(np.all(pos[e[:, 0]] < pos[e[:, 1]])) if len(e) else True

    def levels(self) -> np.ndarray:
        """Longest-path depth of every node from the sources (shape (n,), sources at 0)."""
        lvl = np.zeros(self.n, dtype=np.int64)
        for v in self.topological_order().tolist():
            for s in self.succ[v]:
                if lvl[v] + 1 > lvl[s]:
                    lvl[s] = lvl[v] + 1
        return lvl

    def topology_hash(self) -> str:
        """A hash of the edge structure that is invariant to node renumbering (Weisfeiler-Lehman, 3 rounds).

        Two graphs with the same hash almost surely have the same topology; different hashes prove
        different topologies. Used to keep synthetic splits disjoint.
        """
        import hashlib

        labels = [f"{len(self.data_pred[v])}/{len(self.data_succ[v])}/{len(self.pred[v])}/{len(self.succ[v])}"
                  for v in range(self.n)]
        for _ in range(3):
            labels = [
                hashlib.blake2b(
                    (labels[v] + "|" + ",".join(sorted(labels[p] for p in self.pred[v]))
                     + "|" + ",".join(sorted(labels[s] for s in self.succ[v]))).encode(), digest_size=8
                ).hexdigest()
                for v in range(self.n)
            ]
        return hashlib.blake2b(",".join(sorted(labels)).encode(), digest_size=16).hexdigest()

    def summary(self) -> str:
        """One line: name, nodes, edges, total cost (us) and total output size (bytes)."""
        return (
            f"{self.name}: {self.n} nodes, {len(self.data_edges)} data + {len(self.control_edges)} control edges, "
            f"cost {self.cost.sum():.1f} us, outputs {self.out_bytes.sum() / 1e6:.3f} MB"
        )

    # ------------------------------------------------------------------ I/O
    def to_dict(self) -> dict:
        """JSON-ready dict (see :meth:`from_dict` for the format)."""
        return {
            "format": "release.graph",
            "version": FORMAT_VERSION,
            "name": self.name,
            "nodes": [
                {"name": self.names[i], "op": self.ops[i], "cost_us": float(self.cost[i]),
                 "out_bytes": float(self.out_bytes[i])}
                for i in range(self.n)
            ],
            "data_edges": self.data_edges.tolist(),
            "control_edges": self.control_edges.tolist(),
        }

    @classmethod
    def from_dict(cls, d: dict) -> "ComputationGraph":
        """Build a graph from ``{"nodes": [{"cost_us", "out_bytes", "name"?, "op"?}], "data_edges",
        "control_edges"?, "name"?}``.

        Raises
        ------
        GraphError
            When a key is missing or a value is malformed (besides everything :meth:`validate` checks).
        """
        if not isinstance(d, dict) or "nodes" not in d:
            raise GraphError("graph JSON must be an object with a 'nodes' list and a 'data_edges' list")
        try:
            nodes = d["nodes"]
            cost = [float(nd["cost_us"]) for nd in nodes]
            size = [float(nd["out_bytes"]) for nd in nodes]
            names = [str(nd.get("name", f"n{i}")) for i, nd in enumerate(nodes)]
            ops = [str(nd.get("op", "op")) for nd in nodes]
        except (KeyError, TypeError, ValueError) as err:
            raise GraphError(
                f"graph JSON node entries need numeric 'cost_us' and 'out_bytes' ({type(err).__name__}: {err})"
            ) from None
        return cls(cost, size, d.get("data_edges", []), d.get("control_edges", []), names, ops,
                   str(d.get("name", "graph")))

    def save(self, path: str | Path) -> None:
        """Write the graph as JSON to ``path``."""
        Path(path).write_text(json.dumps(self.to_dict()))

    @classmethod
    def load(cls, path: str | Path) -> "ComputationGraph":
        """Read a graph written by :meth:`save`.

        Raises
        ------
        GraphError
            When the file does not exist or is not valid graph JSON.
        """
        p = Path(path)
        if not p.is_file():
            raise GraphError(f"graph file {str(path)!r} does not exist; give a JSON file written by ComputationGraph.save")
        try:
            d = json.loads(p.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise GraphError(f"graph file {str(path)!r} is not valid JSON ({err})") from None
        if isinstance(d, dict) and "name" not in d:
            d["name"] = p.stem
        return cls.from_dict(d)


def _find_cycle(n: int, edges: np.ndarray) -> list[int] | None:
    """Return one cycle as a node list ``[v0, ..., v0]`` or None (iterative DFS)."""
    succ: list[list[int]] = [[] for _ in range(n)]
    for u, v in edges.tolist():
        succ[u].append(v)
    color = [0] * n  # 0 new, 1 on stack, 2 done
    parent = [-1] * n
    for root in range(n):
        if color[root]:
            continue
        stack = [(root, 0)]
        color[root] = 1
        while stack:
            v, i = stack[-1]
            if i < len(succ[v]):
                stack[-1] = (v, i + 1)
                w = succ[v][i]
                if color[w] == 0:
                    color[w] = 1
                    parent[w] = v
                    stack.append((w, 0))
                elif color[w] == 1:
                    cyc = [w]
                    x = v
                    while x != w:
                        cyc.append(x)
                        x = parent[x]
                    cyc.append(w)
                    return cyc[::-1]
            else:
                color[v] = 2
                stack.pop()
    return None
