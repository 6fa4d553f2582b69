"""REGAL's policy: a graph neural network that picks per-node BRKGA parameters (Paliwal et al., ICLR 2020).

The policy reads a :class:`~release.graph.graph.ComputationGraph` and outputs, for every node, a categorical
distribution over a small grid of Beta(alpha, beta) parameters for each *key type* of that node (the
scheduling-priority key and, with ``d > 1`` devices, the affinity key of each device) and over a grid of
elite-inheritance probabilities rho (one per node, used for all of that node's genes). The choices become the
per-gene ``alpha``, ``beta`` and ``rho`` arrays of :func:`release.graph.brkga.brkga`.

Index 0 of every grid is plain BRKGA: Beta(1, 1) and rho = ``BRKGAConfig.rho`` (0.7). All-zero choices
therefore reproduce plain BRKGA exactly (same seed, same result), because :func:`brkga` draws its random
numbers independently of the per-gene parameters.

Network [ours; REGAL's architecture is described only as a graph-nets style message-passing network with
forward and backward edges treated separately, reference/regal.md]: node features (:func:`node_features`) ->
MLP encoder -> ``layers`` rounds of message passing; each round mixes a node's state with the mean of its
predecessors' states (forward edges) and of its successors' states (backward edges), through separate
weights, plus a residual connection; a graph-level mean is appended before the heads. Message passing is
``index_add_`` over the edge list in plain PyTorch (no PyTorch Geometric here).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from torch import nn

from ..errors import GraphError
from .graph import ComputationGraph

logger = logging.getLogger(__name__)

#: Beta(alpha, beta) grid of mutant distributions; index 0 = uniform (plain BRKGA).
BETA_GRID: tuple = ((1.0, 1.0), (0.5, 0.5), (2.0, 2.0), (1.0, 3.0), (3.0, 1.0), (0.5, 2.0), (2.0, 0.5))
#: Elite-inheritance probabilities; index 0 = BRKGAConfig.rho default (plain BRKGA).
RHO_GRID: tuple = (0.7, 0.5, 0.6, 0.8, 0.9)

N_FEATURES = 16


def node_features(graph: ComputationGraph) -> np.ndarray:
    """Size-independent node features of a computation graph.

    Parameters
    ----------
    graph : ComputationGraph

    Returns
    -------
    ndarray of float32, shape (n, 16)
        Per node: log1p(cost / mean cost), log1p(out bytes / mean bytes), log1p(input bytes / mean bytes),
        log1p of data in/out-degree and of control in/out-degree, depth / max depth, reverse depth / max depth,
        top level (longest cost path from a source up to and including the node) / critical path, bottom level
        (from the node to a sink) / critical path, on-critical-path indicator (slack < 1e-9), source and sink
        indicators, log1p of the mean data out-degree of the node's consumers, log(n) / 5 (graph size).
        The binding order is deliberately not a feature (it is not stable across importers).
    """
    n = graph.n
    cost = graph.cost
    size = graph.out_bytes
    mc = max(cost.mean(), 1e-12)
    ms = max(size.mean(), 1e-12)
    din = np.array([len(p) for p in graph.data_pred], dtype=np.float64)
    dout = np.array([len(s) for s in graph.data_succ], dtype=np.float64)
    ain = np.array([len(p) for p in graph.pred], dtype=np.float64)
    aout = np.array([len(s) for s in graph.succ], dtype=np.float64)
    inbytes = np.array([size[p].sum() if p else 0.0 for p in graph.data_pred])
    topo = graph.topological_order().tolist()
    depth = np.zeros(n)
    top = np.zeros(n)
    for v in topo:
        top[v] += cost[v]
        for s in graph.succ[v]:
            depth[s] = max(depth[s], depth[v] + 1)
            top[s] = max(top[s], top[v])
    rdepth = np.zeros(n)
    bottom = np.zeros(n)
    for v in reversed(topo):
        bottom[v] += cost[v]
        for p in graph.pred[v]:
            rdepth[p] = max(rdepth[p], rdepth[v] + 1)
            bottom[p] = max(bottom[p], bottom[v])
    cp = max(top.max(), 1e-12)
    md = max(depth.max(), 1.0)
    slack = cp - (top + bottom - cost)
    fan = np.array([np.mean([dout[s] for s in graph.data_succ[v]]) if graph.data_succ[v] else 0.0 for v in range(n)])
    f = np.stack([
        np.log1p(cost / mc), np.log1p(size / ms), np.log1p(inbytes / ms),
        np.log1p(din), np.log1p(dout), np.log1p(ain - din), np.log1p(aout - dout),
        depth / md, rdepth / md, top / cp, bottom / cp, (slack < 1e-9 * cp).astype(float),
        (ain == 0).astype(float), (aout == 0).astype(float), np.log1p(fan), np.full(n, np.log(n) / 5.0),
    ], axis=1)
    return f.astype(np.float32)


@dataclass
class PolicyConfig:
    """Architecture of :class:`RegalPolicy` and the choice grids it outputs over."""

    devices: int = 1
    """Devices of the performance model the policy is trained for (1 = priority keys only)."""
    hidden: int = 32
    """Width of node states."""
    layers: int = 3
    """Rounds of message passing (forward and backward edges)."""
    beta_grid: list = field(default_factory=lambda: [list(p) for p in BETA_GRID])
    """Beta(alpha, beta) choices per key type; entry 0 must be (1, 1)."""
    rho_grid: list = field(default_factory=lambda: list(RHO_GRID))
    """Elite-inheritance choices per node; entry 0 is plain BRKGA's rho."""
    plain_prob: float = 0.5
    """Initial probability of choice 0 (plain BRKGA) in every head; the other choices share the rest equally
    (head weights start at 1/10 of torch's default scale, so the start is close to this everywhere)."""
    budget_input: bool = False
    """Condition the heads on the evaluation budget: :func:`budget_feature` of the budget BRKGA will run with is
    appended to every node's head input, so one policy can choose differently at 500 and at 5,000 evaluations.
    False (the shipped checkpoints) keeps the heads' input ``2 * hidden`` wide."""

    @property
    def key_types(self) -> int:
        """Priority key plus one affinity key per device when ``devices > 1``."""
        return 1 if self.devices == 1 else 1 + self.devices

    def validate(self) -> None:
        """Raise :class:`GraphError` naming a bad field."""
        if self.devices < 1:
            raise GraphError(f"policy devices must be >= 1, got {self.devices}")
        if self.hidden < 1 or self.layers < 0:
            raise GraphError(f"policy hidden must be >= 1 and layers >= 0, got {self.hidden}, {self.layers}")
        if not self.beta_grid or tuple(self.beta_grid[0]) != (1.0, 1.0):
            raise GraphError(f"beta_grid[0] must be (1, 1) (plain BRKGA), got {self.beta_grid[:1]}")
        if any(a <= 0 or b <= 0 for a, b in self.beta_grid):
            raise GraphError(f"beta_grid entries must have alpha, beta > 0, got {self.beta_grid}")
        if not 0 < self.plain_prob < 1:
            raise GraphError(f"plain_prob must be in (0, 1), got {self.plain_prob}")
        if not self.rho_grid or any(not 0 <= r <= 1 for r in self.rho_grid):
            raise GraphError(f"rho_grid entries must be in [0, 1], got {self.rho_grid}")


def budget_feature(budget: int) -> float:
    """The budget input of a budget-conditioned policy: ``log10(budget) / 4`` (0.75 at 1,000, 1.0 at 10,000).

    Raises
    ------
    GraphError
        For a budget that is not a positive integer.
    """
    if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) or budget < 1:
        raise GraphError(f"evaluation budget must be a positive integer, got {budget!r}; use --budget 1 or more")
    return float(np.log10(int(budget)) / 4.0)


def _mlp(i: int, h: int, o: int):
    return nn.Sequential(nn.Linear(i, h), nn.ReLU(), nn.Linear(h, o))


def graph_tensors(graph: ComputationGraph):
    """Tensors the policy reads: features (n, 16) float32 and the edge list (E, 2) int64 (data + control)."""
    x = torch.from_numpy(node_features(graph))
    e = torch.from_numpy(np.asarray(graph.all_edges, dtype=np.int64).reshape(-1, 2))
    return x, e


class RegalPolicy(nn.Module):
    """The policy network (a ``torch.nn.Module``).

    Parameters
    ----------
    cfg : PolicyConfig, optional
        Sizes and grids (default ``PolicyConfig()``); validated here.

    Notes
    -----
    ``policy(x, edges)`` with ``x`` of shape (n, 16) float32 (:func:`node_features`) and ``edges``
    of shape (E, 2) int64 returns ``key_logits`` of shape (n, key_types, len(beta_grid)) and
    ``rho_logits`` of shape (n, len(rho_grid)). Weights are initialised from torch's global RNG:
    call ``torch.manual_seed(seed)`` first. The heads start near plain BRKGA: small weights and a
    bias giving index 0 (Beta(1, 1), rho 0.7) the probability ``cfg.plain_prob``.

    Raises
    ------
    GraphError
        On a bad ``cfg`` (:meth:`PolicyConfig.validate`).
    """

    def __init__(self, cfg: PolicyConfig | None = None):
        super().__init__()
        cfg = cfg or PolicyConfig()
        cfg.validate()
        self.cfg = cfg
        h = cfg.hidden
        self.enc = _mlp(N_FEATURES, h, h)
        self.fwd = nn.ModuleList([nn.Linear(h, h) for _ in range(cfg.layers)])
        self.bwd = nn.ModuleList([nn.Linear(h, h) for _ in range(cfg.layers)])
        self.upd = nn.ModuleList([_mlp(3 * h, h, h) for _ in range(cfg.layers)])
        z = 2 * h + (1 if cfg.budget_input else 0)
        self.key_head = nn.Linear(z, cfg.key_types * len(cfg.beta_grid))
        self.rho_head = nn.Linear(z, len(cfg.rho_grid))
        with torch.no_grad():
            for head, k in ((self.key_head, len(cfg.beta_grid)), (self.rho_head, len(cfg.rho_grid))):
                head.weight.mul_(0.1)
                head.bias.zero_()
                if k > 1:
                    head.bias.view(-1, k)[:, 0] = float(np.log(cfg.plain_prob * (k - 1) / (1 - cfg.plain_prob)))

    def forward(self, x, edges, budget: int | None = None):
        """``(key_logits, rho_logits)`` of one graph; shapes in the class docstring.

        ``budget`` (the evaluations BRKGA will run) is required by a policy with ``cfg.budget_input`` and ignored
        by one without; :class:`GraphError` when it is required and missing.
        """
        n = x.shape[0]
        h = self.enc(x)
        src, dst = edges[:, 0], edges[:, 1]
        ones = torch.ones(len(src), dtype=h.dtype)
        indeg = torch.zeros(n, dtype=h.dtype).index_add_(0, dst, ones).clamp(min=1.0)[:, None]
        outdeg = torch.zeros(n, dtype=h.dtype).index_add_(0, src, ones).clamp(min=1.0)[:, None]
        for f, b, u in zip(self.fwd, self.bwd, self.upd):
            mf = torch.zeros_like(h).index_add_(0, dst, f(h)[src]) / indeg  # from predecessors
            mb = torch.zeros_like(h).index_add_(0, src, b(h)[dst]) / outdeg  # from successors
            h = h + u(torch.cat([h, mf, mb], dim=1))
        parts = [h, h.mean(0, keepdim=True).expand(n, -1)]
        if self.cfg.budget_input:
            if budget is None:
                raise GraphError("this REGAL policy is conditioned on the evaluation budget; pass the budget BRKGA "
                                 "will run with")
            parts.append(torch.full((n, 1), budget_feature(budget), dtype=h.dtype))
        z = torch.cat(parts, dim=1)
        key = self.key_head(z).view(n, self.cfg.key_types, len(self.cfg.beta_grid))
        return key, self.rho_head(z)


@dataclass
class Action:
    """Per-node choices of a policy and the per-gene BRKGA parameters they give.

    Attributes
    ----------
    key_choice : ndarray of int, shape (n, key_types)
        Index into the Beta grid per node and key type.
    rho_choice : ndarray of int, shape (n,)
        Index into the rho grid per node.
    """

    key_choice: np.ndarray
    rho_choice: np.ndarray

    def brkga_params(self, cfg: PolicyConfig, devices: int) -> dict:
        """``alpha``, ``beta``, ``rho`` arrays of shape (n_genes,) for :func:`brkga` on ``devices`` devices.

        Gene layout as in :mod:`release.graph.perf_model`: priorities first, then ``d`` affinity keys per node.

        Raises
        ------
        GraphError
            When ``devices`` > 1 does not match the devices the policy was made for.
        """
        n = self.key_choice.shape[0]
        grid = np.asarray(cfg.beta_grid, dtype=np.float64)
        rho_n = np.asarray(cfg.rho_grid, dtype=np.float64)[self.rho_choice]
        pri = grid[self.key_choice[:, 0]]  # (n, 2)
        if devices == 1:
            return {"alpha": pri[:, 0].copy(), "beta": pri[:, 1].copy(), "rho": rho_n}
        if devices != cfg.devices:
            use = "--devices 1" if cfg.devices == 1 else f"--devices {cfg.devices} or 1"
            raise GraphError(f"this policy was trained for {cfg.devices} device(s) and cannot set affinity keys for "
                             f"{devices}; use {use}, or train a policy with `release regal train --devices {devices}`")
        aff = grid[self.key_choice[:, 1:]]  # (n, d, 2)
        alpha = np.concatenate([pri[:, 0], aff[..., 0].reshape(-1)])
        beta = np.concatenate([pri[:, 1], aff[..., 1].reshape(-1)])
        rho = np.concatenate([rho_n, np.repeat(rho_n, devices)])
        return {"alpha": alpha, "beta": beta, "rho": rho}

    @classmethod
    def uniform(cls, n: int, cfg: PolicyConfig) -> "Action":
        """All choices 0: plain BRKGA."""
        return cls(np.zeros((n, cfg.key_types), dtype=np.int64), np.zeros(n, dtype=np.int64))


def distributions(policy, x, edges, budget: int | None = None):
    """Categorical distributions (key, rho) of ``policy`` on one graph's tensors (``budget``: see
    :meth:`RegalPolicy.forward`)."""
    key_logits, rho_logits = policy(x, edges, budget)
    return torch.distributions.Categorical(logits=key_logits), torch.distributions.Categorical(logits=rho_logits)


def sample_action(policy, x, edges, generator=None, greedy: bool = False, budget: int | None = None):
    """Sample (or, with ``greedy``, take the most likely) per-node choices (``budget``: the evaluations BRKGA will
    run, required by a budget-conditioned policy, see :meth:`RegalPolicy.forward`).

    Returns
    -------
    action : Action
    log_prob : torch scalar
        Sum over nodes and key types of the log-probability of the choices (differentiable).
    entropy : torch scalar
        Mean per-node entropy (key types and rho summed), differentiable.
    """
    dk, dr = distributions(policy, x, edges, budget)
    if greedy:
        k, r = dk.probs.argmax(-1), dr.probs.argmax(-1)
    elif generator is not None:
        k = torch.multinomial(dk.probs.reshape(-1, dk.probs.shape[-1]), 1, generator=generator).view(dk.probs.shape[:-1])
        r = torch.multinomial(dr.probs, 1, generator=generator).view(-1)
    else:
        k, r = dk.sample(), dr.sample()
    logp = dk.log_prob(k).sum() + dr.log_prob(r).sum()
    ent = (dk.entropy().sum(-1) + dr.entropy()).mean()
    return Action(k.detach().numpy().astype(np.int64), r.detach().numpy().astype(np.int64)), logp, ent


def policy_action(policy, graph: ComputationGraph, greedy: bool = True, seed: int = 0,
                  budget: int | None = None) -> Action:
    """The policy's choices for ``graph`` (most likely choices by default; ``greedy=False`` samples with ``seed``).

    ``budget``: the evaluations BRKGA will run; a budget-conditioned policy (``cfg.budget_input``) needs it,
    others ignore it. Raises :class:`GraphError` when it is needed and missing.
    """
    x, e = graph_tensors(graph)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        a, _, _ = sample_action(policy, x, e, generator=gen, greedy=greedy, budget=budget)
    return a


def policy_share(policy, meta, budget: int) -> float:
    """Share of BRKGA's population ``policy`` biases at ``budget`` evaluations, as ``release regal optimize`` uses it.

    A budget-conditioned policy (``cfg.budget_input``) chose its distributions for this budget: 1 (all of it).
    Any other policy: :func:`release.graph.brkga.policy_fraction_schedule` with its checkpoint's ``policy_fraction``
    table (``meta``, as :func:`load_policy` returns it), else the default rule.
    """
    from .brkga import policy_fraction_schedule

    if policy.cfg.budget_input:
        return 1.0
    return policy_fraction_schedule(int(budget), table=meta.get("policy_fraction") if isinstance(meta, dict) else None)


def save_policy(policy, path, meta: dict | None = None, extra: dict | None = None) -> None:
    """Save weights and config (``torch.save``) to ``path``; ``meta`` is stored too (e.g. training command)."""
    d = {"config": asdict(policy.cfg), "state_dict": policy.state_dict(), "meta": meta or {}}
    d.update(extra or {})
    torch.save(d, str(path))


def load_checkpoint_file(path) -> dict:
    """Read a REGAL checkpoint with ``torch.load(weights_only=True)`` (a checkpoint is a file a user hands in:
    it is never unpickled beyond tensors and plain Python values).

    Returns
    -------
    dict
        With at least ``config`` and ``state_dict``.

    Raises
    ------
    GraphError
        When the file is not a torch file, holds anything but weights and plain values, or lacks
        ``config``/``state_dict``.
    """
    from pathlib import Path

    p = Path(path)
    if not p.is_file():
        raise GraphError(f"policy checkpoint {str(p)!r} not found; train one with `release regal train` or pass "
                         "--checkpoint PATH")
    try:
        d = torch.load(str(p), map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises RuntimeError, UnpicklingError, EOFError, ... for a foreign file
        raise GraphError(f"{str(p)!r} is not a torch checkpoint holding only weights (torch.load(weights_only=True) "
                         f"failed: {type(err).__name__}); pass a .pt file written by `release regal train`") from None
    if not isinstance(d, dict) or "config" not in d or "state_dict" not in d:
        raise GraphError(f"{str(p)!r} is not a REGAL policy checkpoint (no config/state_dict); pass a .pt file "
                         "written by `release regal train`")
    return d


def load_policy(path):
    """Load a policy saved by :func:`save_policy` (or a training checkpoint); returns ``(policy, meta)``.

    Raises
    ------
    GraphError
        When the file does not exist or is not a REGAL policy checkpoint.
    """
    from pathlib import Path

    p = Path(path)
    if not p.exists():
        raise GraphError(f"policy checkpoint {str(p)!r} not found; train one with `release regal train` or pass "
                         "--checkpoint PATH")
    d = load_checkpoint_file(p)
    try:
        cfg = PolicyConfig(**d["config"])
        pol = RegalPolicy(cfg)
        pol.load_state_dict(d["state_dict"])
    except (TypeError, KeyError, RuntimeError, ValueError) as err:
        raise GraphError(f"{str(p)!r} is not a usable REGAL policy checkpoint ({type(err).__name__}: "
                         f"{str(err).splitlines()[0][:200] if str(err) else ''}); pass a file written by "
                         "`release regal train`") from None
    pol.eval()
    return pol, d.get("meta", {})


def shipped_checkpoint(objective: str, memory: str = "ideal"):
    """Path of the checkpoint shipped with the package for ``objective`` ("runtime" or "peak-memory").

    ``memory="tvm"`` (peak memory only) gives the policy trained on the bytes TVM's ``StaticPlanBlockMemory``
    plans (``regal-peak-memory-tvm.pt``, trained on :mod:`release.graph.synthetic_relax` networks); "ideal" the one
    trained on ideal liveness.
    """
    from pathlib import Path

    if objective not in ("runtime", "peak-memory"):
        raise GraphError(f"unknown objective {objective!r}; choose runtime or peak-memory")
    if memory not in ("ideal", "tvm"):
        raise GraphError(f"unknown memory objective {memory!r}; choose ideal or tvm")
    if memory == "tvm" and objective != "peak-memory":
        raise GraphError("--memory tvm applies to --objective peak-memory; add --objective peak-memory")
    suffix = "-tvm" if memory == "tvm" else ""
    return Path(__file__).resolve().parent / "checkpoints" / f"regal-{objective}{suffix}.pt"
