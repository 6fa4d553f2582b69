"""Real model graphs for REGAL, defined in PyTorch and imported through TVM's Relax frontend.

Registry (``MODELS``; used by ``--graph model:NAME``):

* ``resnet18`` -- ResNet-18 (He et al. 2016), written here (torchvision does not import beside this torch),
  input 1x3x64x64: a chain with short residual branches, little room to reorder.
* ``transformer`` -- one transformer encoder layer (post-norm, as ``torch.nn.TransformerEncoderLayer``),
  hand-written so the Q/K/V projections are separate ops: d_model 64, 4 heads, FFN 256, sequence 32.
* ``inception`` -- an Inception-v1-style block (Szegedy et al. 2015): four branches (1x1; 1x1-3x3;
  1x1-3x3-3x3; maxpool-1x1) concatenated, on 1x64x28x28.
* ``randwire`` -- a randomly wired network (Xie et al. 2019): a Watts-Strogatz graph (``n`` nodes, ``k``
  neighbours, rewiring probability ``p``, seeded, generated with NumPy), edges oriented from lower to higher
  index; every graph node sums its inputs and applies ReLU - depthwise 3x3 conv - pointwise 1x1 conv - BN;
  graph nodes without predecessors read the stem, nodes without successors are averaged. This is the
  irregular-graph benchmark of the memory-aware scheduling literature (SERENITY, MLSys 2020).
* ``tiny`` -- a 2-branch conv block for fast tests.

All weights are random (seeded): REGAL needs shapes and costs, not trained weights.
"""

from __future__ import annotations

import logging
from typing import Callable

import numpy as np

from ..errors import GraphError

logger = logging.getLogger(__name__)


def watts_strogatz_dag(n: int = 24, k: int = 4, p: float = 0.75, seed: int = 0) -> list[tuple[int, int]]:
    """Edges ``(u, v)`` with ``u < v`` of a Watts-Strogatz small-world graph (ring lattice of ``n`` nodes,
    each joined to its ``k`` nearest neighbours, every edge rewired with probability ``p``), oriented by index.

    Raises
    ------
    GraphError
        When ``k`` is odd, ``k >= n`` or ``p`` is outside [0, 1].
    """
    if k % 2 or k >= n or not 0 <= p <= 1:
        raise GraphError(f"Watts-Strogatz needs even k < n and p in [0, 1], got n={n}, k={k}, p={p}")
    rng = np.random.default_rng(seed)
    adj = set()
    for i in range(n):
        for j in range(1, k // 2 + 1):
            adj.add(frozenset((i, (i + j) % n)))
    for j in range(1, k // 2 + 1):  # rewire as in Watts & Strogatz (1998)
        for i in range(n):
            e = frozenset((i, (i + j) % n))
            if e in adj and rng.random() < p:
                choices = [w for w in range(n) if w != i and frozenset((i, w)) not in adj]
                if choices:
                    adj.remove(e)
                    adj.add(frozenset((i, int(choices[rng.integers(len(choices))]))))
    return sorted(tuple(sorted(e)) for e in adj)


def _torch_models() -> dict[str, Callable]:
    import torch
    from torch import nn

    from ..zoo import _defs as zoo_defs

    ResNet18 = zoo_defs()["resnet18"][0]  # the operator-level zoo's ResNet-18 (torchvision's layers)

    class EncoderLayer(nn.Module):
        def __init__(self, d=64, heads=4, ffn=256):
            super().__init__()
            self.h, self.dk = heads, d // heads
            self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.f1, self.f2 = nn.Linear(d, ffn), nn.Linear(ffn, d)

        def forward(self, x):
            b, s, d = x.shape

            def heads(t):
                return t.reshape(b, s, self.h, self.dk).transpose(1, 2)

            q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
            att = torch.softmax(q @ k.transpose(-2, -1) / (self.dk ** 0.5), dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, s, d)
            x = self.ln1(x + self.o(y))
            return self.ln2(x + self.f2(torch.relu(self.f1(x))))

    def cbr(cin, cout, k):
        return nn.Sequential(nn.Conv2d(cin, cout, k, padding=k // 2, bias=False), nn.BatchNorm2d(cout), nn.ReLU())

    class Inception(nn.Module):
        def __init__(self, cin=64):
            super().__init__()
            self.b1 = cbr(cin, 64, 1)
            self.b2 = nn.Sequential(cbr(cin, 48, 1), cbr(48, 64, 3))
            self.b3 = nn.Sequential(cbr(cin, 64, 1), cbr(64, 96, 3), cbr(96, 96, 3))
            self.b4 = nn.Sequential(nn.MaxPool2d(3, 1, 1), cbr(cin, 32, 1))

        def forward(self, x):
            return torch.cat([self.b1(x), self.b2(x), self.b3(x), self.b4(x)], 1)

    class RandWireNode(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.dw = nn.Conv2d(c, c, 3, 1, 1, groups=c, bias=False)
            self.pw = nn.Conv2d(c, c, 1, bias=False)
            self.bn = nn.BatchNorm2d(c)

        def forward(self, x):
            return self.bn(self.pw(self.dw(torch.relu(x))))

    class RandWire(nn.Module):
        def __init__(self, n=24, k=4, p=0.75, seed=0, c=32):
            super().__init__()
            self.edges = watts_strogatz_dag(n, k, p, seed)
            self.n = n
            self.preds = [[u for u, v in self.edges if v == i] for i in range(n)]
            has_succ = {u for u, _ in self.edges}
            self.outs = [i for i in range(n) if i not in has_succ]
            self.stem = nn.Sequential(nn.Conv2d(3, c, 3, 2, 1, bias=False), nn.BatchNorm2d(c))
            self.nodes = nn.ModuleList(RandWireNode(c) for _ in range(n))

        def forward(self, x):
            x = self.stem(x)
            out = []
            for i in range(self.n):
                ins = [out[u] for u in self.preds[i]]
                h = x if not ins else (ins[0] if len(ins) == 1 else torch.stack(ins).sum(0))
                out.append(self.nodes[i](h))
            return torch.stack([out[i] for i in self.outs]).mean(0)

    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Conv2d(3, 8, 3, padding=1)
            self.b = nn.Conv2d(3, 8, 1)
            self.c = nn.Conv2d(16, 4, 1)

        def forward(self, x):
            return self.c(torch.cat([torch.relu(self.a(x)), torch.relu(self.b(x))], 1))

    def make(cls, shape, **kw):
        def build(batch=None):
            torch.manual_seed(0)
            shp = tuple(shape) if batch is None else (int(batch),) + tuple(shape[1:])
            return cls(**kw).eval(), (torch.randn(*shp),)

        return build

    class InceptionStack(nn.Module):
        """Inception-v3's three 35x35 blocks (Mixed_5b/5c/5d: 1x1; 1x1-5x5; 1x1-3x3-3x3; pool-1x1) at full size."""

        def __init__(self):
            super().__init__()

            def block(cin, pool_c):
                class Mixed(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.b1 = cbr(cin, 64, 1)
                        self.b5 = nn.Sequential(cbr(cin, 48, 1), cbr(48, 64, 5))
                        self.b3 = nn.Sequential(cbr(cin, 64, 1), cbr(64, 96, 3), cbr(96, 96, 3))
                        self.bp = nn.Sequential(nn.AvgPool2d(3, 1, 1), cbr(cin, pool_c, 1))

                    def forward(self, x):
                        return torch.cat([self.b1(x), self.b5(x), self.b3(x), self.bp(x)], 1)

                return Mixed()

            self.blocks = nn.Sequential(block(192, 32), block(256, 64), block(288, 64))

        def forward(self, x):
            return self.blocks(x)

    def zoo(name):
        from ..zoo import _defs as zoo_defs

        factory, shape = zoo_defs()[name]
        return factory, shape

    def make_zoo(name):
        factory, shape = zoo(name)
        return make(factory, shape)

    def randwire_n(n):
        return make(RandWire, (1, 3, 32, 32), n=n)

    return {
        # full-size graphs: the operator-level zoo's models through the same importer
        "resnet18-224": make_zoo("resnet18"),
        "mobilenet_v2": make_zoo("mobilenet_v2"),
        "bert-base-layer": make_zoo("bert-base-layer"),
        "inception-v3-35": make(InceptionStack, (1, 192, 35, 35)),
        "randwire-60": randwire_n(60),
        "randwire-200": randwire_n(200),
        "resnet18": make(ResNet18, (1, 3, 64, 64)),
        "transformer": make(EncoderLayer, (1, 32, 64)),
        "inception": make(Inception, (1, 64, 28, 28)),
        "randwire": make(RandWire, (1, 3, 32, 32)),
        "tiny": make(Tiny, (1, 3, 8, 8)),
    }


MODEL_NAMES = ("resnet18", "transformer", "inception", "randwire", "tiny")
#: Full-size models: ResNet-18, MobileNetV2 (224x224), one BERT-base encoder layer (seq 128), Inception-v3's
#: three 35x35 blocks, RandWire with 60 and 200 Watts-Strogatz nodes (about 300 and 1,000 fused kernels).
FULL_SIZE_NAMES = ("resnet18-224", "mobilenet_v2", "bert-base-layer", "inception-v3-35", "randwire-60", "randwire-200")


def parse_model_spec(spec: str) -> tuple[str, int | None]:
    """``NAME`` or ``NAME@BATCH`` -> (name, batch or None).

    Raises
    ------
    GraphError
        For an unknown name or a batch that is not a positive integer.
    """
    name, _, b = spec.partition("@")
    if name not in MODEL_NAMES + FULL_SIZE_NAMES:
        raise GraphError(f"unknown model {name!r}; choose one of {', '.join(MODEL_NAMES + FULL_SIZE_NAMES)} "
                         "(optionally NAME@BATCH)")
    if not b:
        return name, None
    try:
        batch = int(b)
    except ValueError:
        batch = 0
    if batch <= 0 or batch > 4096:
        raise GraphError(f"bad batch {b!r} in model:{spec}; use NAME@N with 1 <= N <= 4096, e.g. {name}@8")
    return name, batch


def build_model(name: str, batch: int | None = None):
    """The PyTorch module and example inputs of registered model ``name`` (``NAME@BATCH`` accepted).

    Raises
    ------
    GraphError
        For an unknown model name.
    """
    base, b = parse_model_spec(name)
    return _torch_models()[base](batch if batch is not None else b)


def model_graph(name: str, fused: bool = False, **kw):
    """Import registered model ``name`` as a :class:`~release.graph.graph.ComputationGraph`.

    ``fused=True`` imports after TVM's fusion passes (one node per fused kernel); ``kw`` goes to
    :func:`release.graph.relax_import.from_relax` (``cost``, ``latencies``).

    Raises
    ------
    GraphError
        For an unknown model name.
    """
    from .relax_import import from_torch

    model, inputs = build_model(name)
    return from_torch(model, inputs, name=name + ("-fused" if fused else ""), fused=fused, **kw)


def model_module(name: str, fused: bool = True):
    """The Relax module of registered model ``name`` (``NAME@BATCH``), through the project's importer
    (:func:`release.graph.relax_import.export_torch`), fused as ``tvm.compile`` fuses it when ``fused``."""
    from .relax_import import export_torch, fuse_like_tvm

    mod = export_torch(*build_model(name), name=name)
    return fuse_like_tvm(mod) if fused else mod
