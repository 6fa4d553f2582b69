"""Synthetic computation graphs: seeded layered random DAGs with train/valid/test splits.

REGAL trains on 10,000 synthetic graphs and tests on 1,000 unseen ones, with no repeated topology within a
split and only graphs where BRKGA shows "room for improvement" (Paliwal et al., ICLR 2020, section 5.1;
reference/regal.md). The original dataset is not reachable here, so graphs are generated locally [ours]:

* layers: layer sizes are drawn uniformly from ``1..width`` until ``n_nodes`` nodes are placed;
* data edges: every node after the first layer gets one producer from the previous layer, plus each node of
  the ``max_skip`` previous layers with probability ``edge_density``;
* control edges: each data-unconnected forward pair between consecutive layers with probability
  ``control_density``;
* compute cost (us): log-normal(``cost_log_mean``, ``cost_log_sigma``), rounded to a whole microsecond,
  at least 1; output size (bytes): log-normal(``size_log_mean``, ``size_log_sigma``) rounded to a multiple of
  1,024 bytes, at least 1,024.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from ..errors import GraphError
from .graph import ComputationGraph

logger = logging.getLogger(__name__)


@dataclass
class SyntheticConfig:
    """Parameters of the layered random DAG generator (ours; REGAL's generator is not published)."""

    n_nodes: int = 30
    """Nodes per graph."""
    width: int = 4
    """Largest layer size (layer sizes are uniform in 1..width)."""
    edge_density: float = 0.25
    """Probability of each extra data edge from a node in one of the ``max_skip`` previous layers."""
    max_skip: int = 3
    """How many layers back an extra data edge may reach."""
    control_density: float = 0.02
    """Probability of a control edge between a non-connected pair of consecutive-layer nodes."""
    cost_log_mean: float = 3.0
    """Mean of log(compute cost in us): e^3 ~ 20 us."""
    cost_log_sigma: float = 1.0
    """Standard deviation of log(compute cost)."""
    size_log_mean: float = 12.5
    """Mean of log(output bytes): e^12.5 ~ 270 kB."""
    size_log_sigma: float = 1.0
    """Standard deviation of log(output bytes)."""

    def validate(self) -> None:
        """Raise :class:`GraphError` naming a bad field."""
        if self.n_nodes < 1:
            raise GraphError(f"synthetic n_nodes must be >= 1, got {self.n_nodes}")
        if self.width < 1:
            raise GraphError(f"synthetic width must be >= 1, got {self.width}")
        if not 0 <= self.edge_density <= 1 or not 0 <= self.control_density <= 1:
            raise GraphError("synthetic edge_density and control_density must be in [0, 1]")
        if self.max_skip < 1:
            raise GraphError(f"synthetic max_skip must be >= 1, got {self.max_skip}")


def random_layered_graph(config: SyntheticConfig | None = None, seed: int = 0, name: str | None = None) -> ComputationGraph:
    """One layered random DAG (see the module docstring), fully determined by ``config`` and ``seed``."""
    cfg = config or SyntheticConfig()
    cfg.validate()
    rng = np.random.default_rng(seed)
    sizes = []
    while sum(sizes) < cfg.n_nodes:
        sizes.append(int(min(rng.integers(1, cfg.width + 1), cfg.n_nodes - sum(sizes))))
    layers = []
    nid = 0
    for s in sizes:
        layers.append(list(range(nid, nid + s)))
        nid += s
    edges = set()
    for li in range(1, len(layers)):
        prev = layers[li - 1]
        for v in layers[li]:
            edges.add((prev[int(rng.integers(len(prev)))], v))
            for lj in range(max(0, li - cfg.max_skip), li):
                for u in layers[lj]:
                    if rng.random() < cfg.edge_density:
                        edges.add((u, v))
    ctrl = set()
    if cfg.control_density > 0:
        for li in range(1, len(layers)):
            for u in layers[li - 1]:
                for v in layers[li]:
                    if (u, v) not in edges and rng.random() < cfg.control_density:
                        ctrl.add((u, v))
    n = cfg.n_nodes
    cost = np.maximum(1.0, np.rint(rng.lognormal(cfg.cost_log_mean, cfg.cost_log_sigma, n)))
    size = np.maximum(1024.0, np.rint(rng.lognormal(cfg.size_log_mean, cfg.size_log_sigma, n) / 1024.0) * 1024.0)
    return ComputationGraph(
        cost, size, sorted(edges), sorted(ctrl), ops=["synthetic"] * n, name=name or f"synthetic-{seed}"
    )


@dataclass
class RoomFilter:
    """REGAL's "room for improvement" filter: keep a graph only when a high-budget BRKGA beats a low-budget one
    by at least ``threshold`` (relative), on ``objective`` with ``devices`` devices."""

    objective: str = "runtime"
    """Objective the filter measures."""
    devices: int = 2
    """Devices of the performance model."""
    low_budget: int = 500
    """Evaluations of the low-budget BRKGA."""
    high_budget: int = 5000
    """Evaluations of the high-budget BRKGA."""
    threshold: float = 0.2
    """Minimum relative improvement (REGAL: 20% in running time)."""

    def keep(self, graph: ComputationGraph, seed: int = 0) -> bool:
        """Whether ``graph`` has room for improvement."""
        from .brkga import brkga
        from .perf_model import PerformanceModel

        lo = brkga(PerformanceModel(graph, self.devices, self.objective), self.low_budget, seed=seed).best_objective
        hi = brkga(PerformanceModel(graph, self.devices, self.objective), self.high_budget, seed=seed).best_objective
        return lo > 0 and (lo - hi) / lo >= self.threshold


@dataclass
class SyntheticDataset:
    """Train/valid/test graph lists with disjoint topologies, plus the settings that made them."""

    train: list[ComputationGraph] = field(default_factory=list)
    valid: list[ComputationGraph] = field(default_factory=list)
    test: list[ComputationGraph] = field(default_factory=list)
    seed: int = 0
    rejected_duplicates: int = 0
    rejected_room: int = 0


def make_splits(
    n_train: int,
    n_valid: int,
    n_test: int,
    config: SyntheticConfig | None = None,
    seed: int = 0,
    room_filter: RoomFilter | None = None,
    max_tries: int | None = None,
) -> SyntheticDataset:
    """Generate train/valid/test splits; no topology appears twice, within or across splits.

    Graph ``k`` is generated with seed ``seed * 1_000_003 + k`` (test first, then valid, then train, so a
    larger training set never changes the test set). A graph whose :meth:`ComputationGraph.topology_hash`
    was already seen is skipped; with ``room_filter`` a graph without room for improvement is skipped too.

    Raises
    ------
    GraphError
        When ``max_tries`` (default 20 x the graphs requested) candidates do not give enough graphs.
    """
    cfg = config or SyntheticConfig()
    total = n_train + n_valid + n_test
    max_tries = max_tries or 20 * max(total, 1)
    seen: set[str] = set()
    ds = SyntheticDataset(seed=seed)
    k = 0
    for split, count in (("test", n_test), ("valid", n_valid), ("train", n_train)):
        out = getattr(ds, split)
        while len(out) < count:
            if k >= max_tries:
                raise GraphError(
                    f"only {len(out)} of {count} {split} graphs after {k} candidates; relax the room filter or "
                    "widen the generator (more nodes or width)"
                )
            gseed = seed * 1_000_003 + k
            k += 1
            g = random_layered_graph(cfg, gseed, name=f"{split}-{len(out)}-s{gseed}")
            h = g.topology_hash()
            if h in seen:
                ds.rejected_duplicates += 1
                continue
            seen.add(h)
            if room_filter is not None and not room_filter.keep(g, seed=gseed):
                ds.rejected_room += 1
                continue
            out.append(g)
    return ds
