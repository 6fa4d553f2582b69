"""Synthetic Relax modules for training REGAL on the memory TVM plans.

REGAL's policy is trained on many generated graphs (Paliwal et al., ICLR 2020, section 5.1). The cost graphs of
:mod:`release.graph.synthetic` carry only node costs and output bytes: they have no Relax module, so TVM's memory
plan (:class:`release.graph.tvm_plan.TVMPlanModel`, built from a lowered module) cannot be computed for them.
This module generates the missing kind of graph [ours]: small random PyTorch networks whose dataflow is a random
multi-branch DAG, imported through the project's one PyTorch-to-Relax importer
(:func:`release.graph.relax_import.export_torch`, i.e. :func:`release.relax.from_pytorch`) and fused as
``tvm.compile`` fuses them (:func:`release.graph.relax_import.fuse_like_tvm`), so each graph node is a kernel the
VM runs and TVM's planner sees exactly the module the search reorders.

The DAG (:func:`random_dag_spec`):

* topology: :func:`release.graph.synthetic.random_layered_graph` (layered random DAG, ``blocks`` nodes, layer
  width ``1..width``, extra skip edges with ``edge_density``);
* each block ``i`` has a *stage* (its spatial size is ``spatial / 2**stage``; the stage never decreases along an
  edge, it grows with the layer index) and a channel count drawn from ``channels``;
* a block reads the stem when it has no predecessor; an input from an earlier stage is downsampled by max
  pooling (one kernel per stage step); several inputs are joined by ``add`` (each projected to the block's
  channels by a 1x1 convolution when their channels differ) or by ``concat`` on channels (drawn per block with
  ``concat_prob``);
* the block's operator is drawn from ``ops``: ``conv3x3`` (3x3 convolution + ReLU), ``conv1x1`` (1x1
  convolution + ReLU), ``dwconv`` (depthwise 3x3 + pointwise 1x1 + ReLU), ``pool`` (3x3 average pooling,
  stride 1, then a 1x1 convolution to the block's channels) or ``matmul`` (a token-mixing matrix multiply over
  the flattened spatial positions, then ReLU);
* blocks without successors are reduced by global average pooling and concatenated: the module's one output.

All sizes are static (batch 1 by default); weights are random (seeded). Only ``float32`` is generated: TVM's
CPU legalization of ``float16`` convolutions works, but PyTorch's CPU ``float16`` convolution, which
``torch.export`` traces through, is not available in every build, and the dtype enters TVM's plan only as a
separate storage pool (one pool per (scope, dtype)).

:func:`split_graphs` returns :class:`RelaxGraph` items (module, fused graph, TVM-plan model) for a
split's seeds, keeping only graphs where the binding order changes TVM's plan (``min_spread``), the analogue of
REGAL's "room for improvement" filter.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from ..errors import GraphError

logger = logging.getLogger(__name__)

OPS = ("conv3x3", "conv1x1", "dwconv", "pool", "matmul")


@dataclass
class RelaxDAGConfig:
    """Parameters of the random multi-branch network generator (ours)."""

    blocks: tuple = (8, 20)
    """Range (inclusive) of DAG blocks per network; each block is 1-4 fused kernels."""
    width: int = 4
    """Largest layer of the block DAG (layer sizes are uniform in 1..width)."""
    edge_density: float = 0.3
    """Probability of each extra skip edge from a block up to ``max_skip`` layers back."""
    max_skip: int = 3
    """How many layers back a skip edge may reach."""
    channels: tuple = (8, 16, 24, 32, 48, 64, 96)
    """Channel counts a block draws from."""
    spatial: tuple = (16, 32)
    """Input spatial sizes (square) a network draws from."""
    stages: int = 3
    """Number of spatial stages (each halves the size)."""
    concat_prob: float = 0.5
    """Probability that a block with several inputs concatenates them (else adds them)."""
    ops: tuple = OPS
    """Block operators drawn uniformly."""
    in_channels: int = 3
    """Channels of the network input."""
    batch: int = 1
    """Batch size."""

    def validate(self) -> None:
        """Raise :class:`GraphError` naming a bad field."""
        lo, hi = self.blocks
        if not 1 <= lo <= hi:
            raise GraphError(f"blocks must be a range (lo, hi) with 1 <= lo <= hi, got {self.blocks}")
        bad = [o for o in self.ops if o not in OPS]
        if bad or not self.ops:
            raise GraphError(f"unknown block operator(s) {bad or self.ops}; choose from {', '.join(OPS)}")
        if self.stages < 1 or min(self.spatial) < 2 ** (self.stages - 1):
            raise GraphError(f"stages {self.stages} halve spatial sizes {self.spatial} below 1 pixel; use fewer stages")
        if not self.channels or min(self.channels) < 1 or self.batch < 1 or self.width < 1:
            raise GraphError("channels, batch and width must be positive")


@dataclass
class BlockSpec:
    """One block of the network: its inputs (block ids; empty = the stem), stage, channels, operator, join."""

    preds: list
    stage: int
    channels: int
    op: str
    join: str


def random_dag_spec(config: RelaxDAGConfig | None = None, seed: int = 0) -> tuple[list[BlockSpec], int]:
    """The blocks of one random network and its input size, fully determined by ``config`` and ``seed``.

    Returns
    -------
    blocks : list of BlockSpec
        In a topological order (predecessors have smaller ids).
    spatial : int
        Input height and width.
    """
    from .synthetic import SyntheticConfig, random_layered_graph

    cfg = config or RelaxDAGConfig()
    cfg.validate()
    rng = np.random.default_rng([seed, 18])
    n = int(rng.integers(cfg.blocks[0], cfg.blocks[1] + 1))
    g = random_layered_graph(SyntheticConfig(n_nodes=n, width=cfg.width, edge_density=cfg.edge_density,
                                             max_skip=cfg.max_skip, control_density=0.0), seed=int(rng.integers(2**31)))
    preds = [sorted(int(p) for p in g.pred[v]) for v in range(n)]
    depth = np.zeros(n, dtype=np.int64)
    for v in range(n):
        depth[v] = 1 + max((depth[p] for p in preds[v]), default=-1)
    top = max(int(depth.max()), 1)
    blocks = []
    for v in range(n):
        stage = min(cfg.stages - 1, int(depth[v] * cfg.stages // (top + 1)))
        stage = max([stage] + [blocks[p].stage for p in preds[v]])
        blocks.append(BlockSpec(preds[v], stage, int(rng.choice(cfg.channels)), str(rng.choice(cfg.ops)),
                                "concat" if rng.random() < cfg.concat_prob else "add"))
    return blocks, int(rng.choice(cfg.spatial))


def build_torch_dag(blocks: list[BlockSpec], spatial: int, config: RelaxDAGConfig | None = None, seed: int = 0):
    """The PyTorch module and example input of a network from :func:`random_dag_spec` (eval mode, seeded)."""
    import torch
    from torch import nn

    cfg = config or RelaxDAGConfig()
    torch.manual_seed(seed)
    stem_c = int(cfg.channels[len(cfg.channels) // 2])
    out_c = [b.channels for b in blocks]
    has_succ = {p for b in blocks for p in b.preds}
    outputs = [i for i in range(len(blocks)) if i not in has_succ]

    class Block(nn.Module):
        def __init__(self, i: int, b: BlockSpec):
            super().__init__()
            self.b = b
            ins = [(stem_c, 0)] if not b.preds else [(out_c[p], blocks[p].stage) for p in b.preds]
            self.down = [b.stage - s for _, s in ins]
            self.proj = nn.ModuleList()
            if b.join == "add" and len(ins) > 1:
                for c, _ in ins:
                    self.proj.append(nn.Identity() if c == b.channels else nn.Conv2d(c, b.channels, 1))
                cin = b.channels
            else:
                cin = sum(c for c, _ in ins)
            c = b.channels
            if b.op == "conv3x3":
                self.body = nn.Sequential(nn.Conv2d(cin, c, 3, padding=1), nn.ReLU())
            elif b.op == "conv1x1":
                self.body = nn.Sequential(nn.Conv2d(cin, c, 1), nn.ReLU())
            elif b.op == "dwconv":
                self.body = nn.Sequential(nn.Conv2d(cin, cin, 3, padding=1, groups=cin), nn.Conv2d(cin, c, 1),
                                          nn.ReLU())
            elif b.op == "pool":
                self.body = nn.Sequential(nn.AvgPool2d(3, 1, 1), nn.Conv2d(cin, c, 1))
            else:  # matmul: mix spatial positions with a learned (hw x hw) matrix, then project channels
                hw = (spatial // 2 ** b.stage) ** 2
                self.mix = nn.Parameter(torch.randn(hw, hw) / hw ** 0.5)
                self.body = nn.Sequential(nn.Conv2d(cin, c, 1), nn.ReLU())

        def forward(self, xs):
            xs = [x if d == 0 else nn.functional.max_pool2d(x, 2 ** d) for x, d in zip(xs, self.down)]
            if len(xs) == 1:
                h = xs[0]
            elif self.b.join == "add":
                h = self.proj[0](xs[0])
                for p, x in zip(self.proj[1:], xs[1:]):
                    h = h + p(x)
            else:
                h = torch.cat(xs, 1)
            if self.b.op == "matmul":
                n_, c_, hh, ww = h.shape
                h = torch.relu(torch.matmul(h.reshape(n_, c_, hh * ww), self.mix)).reshape(n_, c_, hh, ww)
            return self.body(h)

    class DAGNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(cfg.in_channels, stem_c, 3, padding=1), nn.ReLU())
            self.blocks = nn.ModuleList(Block(i, b) for i, b in enumerate(blocks))

        def forward(self, x):
            x = self.stem(x)
            outs = []
            for b, m in zip(blocks, self.blocks):
                outs.append(m([x] if not b.preds else [outs[p] for p in b.preds]))
            return torch.cat([outs[i].mean((2, 3)) for i in outputs], 1)

    return DAGNet().eval(), (torch.randn(cfg.batch, cfg.in_channels, spatial, spatial),)


@dataclass
class RelaxGraph:
    """One generated network: its fused Relax module, the fused graph and TVM's plan model.

    Attributes
    ----------
    seed : int
    mod : tvm.IRModule
        Fused as ``tvm.compile`` fuses it (:func:`fuse_like_tvm`); node ``i`` of ``graph`` is its ``i``-th kernel.
    graph : ComputationGraph
    plan : TVMPlanModel
    spread : float
        (max - min) / min of TVM's planned bytes over the random orders sampled by the filter.
    """

    seed: int
    mod: object
    graph: object
    plan: object
    spread: float = 0.0
    info: dict = field(default_factory=dict)


def relax_dag_module(config: RelaxDAGConfig | None = None, seed: int = 0):
    """The fused Relax module of random network ``seed`` (imported through the project's importer)."""
    from .relax_import import export_torch, fuse_like_tvm

    blocks, spatial = random_dag_spec(config, seed)
    model, inputs = build_torch_dag(blocks, spatial, config, seed)
    return fuse_like_tvm(export_torch(model, inputs, name=f"relax-dag-{seed}"))


def random_topological_orders(graph, count: int, seed: int = 0) -> list[list[int]]:
    """``count`` topological orders of ``graph`` from uniform random priority keys (the decoder's orders)."""
    from .perf_model import PerformanceModel

    m = PerformanceModel(graph, 1, "peak-memory")
    rng = np.random.default_rng(seed)
    return [m.decode_order(rng.random(graph.n)) for _ in range(count)]


def make_relax_graph(seed: int, config: RelaxDAGConfig | None = None, orders: int = 64) -> RelaxGraph:
    """Generate network ``seed``, fuse and import it, build its :class:`TVMPlanModel` and measure how much the
    binding order changes TVM's plan over ``orders`` random orders (``spread``)."""
    from .relax_import import from_relax
    from .tvm_plan import TVMPlanModel

    mod = relax_dag_module(config, seed)
    g = from_relax(mod, name=f"relax-dag-{seed}")
    plan = TVMPlanModel(mod, g)
    b = [plan.plan_bytes(o) for o in random_topological_orders(g, orders, seed)] + [plan.given_order_bytes()]
    plan.evaluations = 0
    return RelaxGraph(seed, mod, g, plan, (max(b) - min(b)) / min(b), {"kernels": g.n, "given": b[-1],
                                                                       "min": min(b), "max": max(b)})


#: Seed ranges of the splits used to train and evaluate the shipped TVM-plan policy (disjoint).
SPLITS = {"train": range(0, 1000), "dev": range(100_000, 101_000), "test": range(200_000, 201_000)}


def split_graphs(split: str, count: int, config: RelaxDAGConfig | None = None, min_spread: float = 0.02,
                 max_tries: int | None = None) -> list[RelaxGraph]:
    """The first ``count`` kept networks of split ``split`` ("train", "dev" or "test"; :data:`SPLITS`).

    Raises
    ------
    GraphError
        For an unknown split, or when ``max_tries`` (default 4 x ``count``) seeds do not give ``count`` graphs.
    """
    if split not in SPLITS:
        raise GraphError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
    seeds = SPLITS[split]
    max_tries = max_tries or 4 * count
    out: list[RelaxGraph] = []
    seen: set = set()
    for k, s in enumerate(seeds):
        if len(out) >= count:
            break
        if k >= max_tries:
            raise GraphError(f"only {len(out)} of {count} {split} networks in {max_tries} seeds have TVM plans that "
                             f"vary by >= {min_spread:.0%}; lower min_spread or widen the generator")
        rg = make_relax_graph(int(s), config)
        h = rg.graph.topology_hash()
        if rg.spread < min_spread or h in seen:
            continue
        seen.add(h)
        out.append(rg)
    return out
