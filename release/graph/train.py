"""Training REGAL's policy with REINFORCE as a contextual bandit (Paliwal et al., ICLR 2020, section 4).

One step: pick ``batch_graphs`` training graphs; for each, sample ``samples`` sets of per-node choices from the
policy (:func:`release.graph.policy.sample_action`), run BRKGA with each at a fixed ``budget`` and a fixed seed
(common random numbers: plain BRKGA with the same seed is the reference), and score

    reward = (plain objective - policy objective) / plain objective

(relative improvement over plain BRKGA on the same graph, budget and seed; an infeasible result under a memory
limit scores -1). The baseline is the mean reward of the *other* samples of the same graph and seed
(leave-one-out, so it does not depend on the sample it scores); advantages are divided by their standard
deviation over the step. Loss = -mean(advantage x log-prob) - ``entropy`` x mean per-node entropy; Adam.
With ``per_node_logp`` the log-probability is divided by the node count (without it, the sum over ~40 nodes x
heads outweighs the entropy bonus and the peak-memory policy collapsed to one deterministic choice within 170
steps; docs/design/regal.md).

BRKGA runs go to a ``concurrent.futures.ProcessPoolExecutor`` with ``workers`` processes (each with
``torch.set_num_threads(1)``), or run inline with ``workers <= 1``. Ray is not used (not installed here).
A checkpoint (policy, optimizer, step, history, cached plain-BRKGA results) is written every
``checkpoint_every`` steps and at the end; training resumes from it.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ..errors import GraphError
from .graph import ComputationGraph

logger = logging.getLogger(__name__)


@dataclass
class TrainConfig:
    """Hyperparameters of REINFORCE training (one ``seed`` drives graphs, initial weights and sampling)."""

    objective: str = "peak-memory"
    """Objective of the performance model: "runtime" or "peak-memory" (one policy per objective)."""
    devices: int = 1
    """Devices of the performance model (peak memory: 1; running time: 2 in the shipped checkpoint)."""
    budget: int = 1000
    """BRKGA objective evaluations per run (policy and plain alike)."""
    steps: int = 100
    """Policy-gradient steps."""
    batch_graphs: int = 4
    """Training graphs per step."""
    samples: int = 4
    """Sampled choice sets per graph and step (>= 2 for the leave-one-out baseline)."""
    seeds_per_graph: int = 2
    """Distinct BRKGA seeds per graph (cycled over steps; plain-BRKGA results are cached per seed)."""
    lr: float = 3e-3
    """Adam learning rate."""
    entropy: float = 0.01
    """Weight of the entropy bonus."""
    per_node_logp: bool = False
    """Divide each sample's log-probability (a sum over nodes and heads) by its node count, so the entropy
    bonus (a per-node mean) keeps its weight on large graphs."""
    hidden: int = 32
    """Policy width (PolicyConfig.hidden)."""
    layers: int = 3
    """Message-passing rounds (PolicyConfig.layers)."""
    workers: int = 1
    """Processes running BRKGA (<= 1: inline)."""
    seed: int = 0
    """Seeds initial weights, graph batches and action sampling."""
    checkpoint_every: int = 10
    """Write the checkpoint every this many steps (and at the end)."""
    brkga: dict | None = None
    """BRKGA config fields (``population``, ``elite_fraction``, ``mutant_fraction``, ``rho``) for the policy's and
    the reference runs alike; None = :class:`BRKGAConfig` defaults (plain BRKGA)."""
    latency_us: float = 5.0
    """Cross-device transfer latency of the performance model, us."""
    bandwidth: float = 1e4
    """Cross-device bandwidth, bytes per us."""
    budgets: list | None = None
    """Budgets to train at (each step draws one for all its runs); the policy is then conditioned on the budget
    (``PolicyConfig.budget_input``) and ``budget`` is unused. None: every run at ``budget``, unconditioned."""
    seeded: bool = False
    """Start every BRKGA run (the policy's and plain alike) from the given order and the greedy solution
    (:func:`release.graph.baselines.seed_chromosomes`), as ``release regal optimize`` runs it."""
    memory: str = "ideal"
    """Peak-memory objective: "ideal" (per-tensor liveness) or "tvm" (the bytes TVM's StaticPlanBlockMemory
    plans; :func:`train` then needs one :class:`~release.graph.tvm_plan.TVMPlanModel` per graph)."""

    def validate(self) -> None:
        """Raise :class:`GraphError` naming a bad field."""
        if self.objective not in ("runtime", "peak-memory"):
            raise GraphError(f"unknown objective {self.objective!r}; choose runtime or peak-memory")
        for name in ("devices", "budget", "steps", "batch_graphs", "seeds_per_graph", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise GraphError(f"training {name} must be >= 1, got {getattr(self, name)}")
        if self.budgets is not None and (not self.budgets or any(
                isinstance(b, bool) or not isinstance(b, (int, np.integer)) or b < 1 for b in self.budgets)):
            raise GraphError(f"training budgets must be positive integers, got {self.budgets}")
        if self.samples < 2:
            raise GraphError(f"training samples must be >= 2 (leave-one-out baseline), got {self.samples}")
        if self.brkga is not None:
            from .brkga import BRKGAConfig

            try:
                BRKGAConfig(**self.brkga).validate()
            except TypeError:
                raise GraphError(f"unknown BRKGA config field in {self.brkga}; use population, elite_fraction, "
                                 "mutant_fraction, rho") from None
        if self.memory not in ("ideal", "tvm"):
            raise GraphError(f"unknown memory objective {self.memory!r}; choose ideal or tvm")
        if self.memory == "tvm" and (self.objective != "peak-memory" or self.devices != 1):
            raise GraphError("memory 'tvm' (TVM's plan) is a one-device peak-memory objective; use objective "
                             "peak-memory and devices 1")
        if self.lr <= 0 or self.entropy < 0:
            raise GraphError(f"lr must be > 0 and entropy >= 0, got {self.lr}, {self.entropy}")


# ---------------------------------------------------------------------- BRKGA runs (in workers)
def _init_worker() -> None:
    """Pool initializer: one torch thread per BRKGA worker process (the pool is the parallelism)."""
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:  # pragma: no cover
        pass


class BRKGAJob:
    """One BRKGA run per task on fixed graphs: the picklable callable a :class:`BRKGARunner` maps.

    It holds its graphs (as :meth:`ComputationGraph.to_dict` dicts) and performance-model
    arguments itself, so no module state is shared between runners or processes: a worker
    receives it with each chunk of tasks and rebuilds a graph's :class:`PerformanceModel` once per
    chunk (kept on the instance).

    Parameters
    ----------
    graph_dicts : list of dict
    model_kw : dict
        ``devices``, ``objective`` and further :class:`PerformanceModel` arguments; ``memory_plans`` (a list with
        one :class:`~release.graph.tvm_plan.TVMPlanModel` per graph, pure Python and picklable) makes graph
        ``gi``'s model use ``memory_plan=memory_plans[gi]``.
    seeded : bool, default False
        Start every run from :func:`~release.graph.baselines.seed_chromosomes` (given order, greedy solution).
    """

    def __init__(self, graph_dicts, model_kw, seeded: bool = False) -> None:
        self.graph_dicts = list(graph_dicts)
        self.model_kw = dict(model_kw)
        self.seeded = bool(seeded)
        self._models: dict = {}
        self._initial: dict = {}

    def __getstate__(self) -> dict:
        return {"graph_dicts": self.graph_dicts, "model_kw": self.model_kw, "seeded": self.seeded}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["graph_dicts"], state["model_kw"], state.get("seeded", False))

    def initial(self, gi: int):
        """The chromosomes graph ``gi``'s runs start from (None unless ``seeded``)."""
        if not self.seeded:
            return None
        if gi not in self._initial:
            from .baselines import seed_chromosomes

            self._initial[gi] = seed_chromosomes(self.model(gi))
        return self._initial[gi]

    def model(self, gi: int):
        """The :class:`PerformanceModel` of graph ``gi`` (built on first use)."""
        from .perf_model import PerformanceModel

        if gi not in self._models:
            kw = dict(self.model_kw)
            devices, objective = kw.pop("devices"), kw.pop("objective")
            plans = kw.pop("memory_plans", None)
            if plans is not None:
                kw["memory_plan"] = plans[gi]
            self._models[gi] = PerformanceModel(ComputationGraph.from_dict(self.graph_dicts[gi]), devices, objective,
                                                **kw)
        return self._models[gi]

    def __call__(self, task) -> tuple[float, float]:
        """``(graph index, budget, seed, params or None[, BRKGA config dict])`` -> ``(best objective, violation)``."""
        from .brkga import BRKGAConfig, brkga

        gi, budget, seed, params = task[:4]
        config = BRKGAConfig(**task[4]) if len(task) > 4 and task[4] else None
        params = dict(params or {})
        if config is not None and params.get("rho") is None:
            params.pop("rho", None)
        r = brkga(self.model(gi), budget, config, seed=seed, initial=self.initial(gi), **params)
        return r.best_objective, r.best_violation


class BRKGARunner:
    """Runs batches of BRKGA tasks on fixed graphs, in worker processes or inline.

    Parameters
    ----------
    graphs : list of ComputationGraph
    objective : str
    devices : int
    workers : int
        Processes (<= 1: inline, in this process).
    seeded : bool, default False
        Start every run from the given order and the greedy solution (:class:`BRKGAJob`).
    **model_kw
        Further :class:`PerformanceModel` arguments (latency_us, bandwidth, memory_limit), or ``memory_plans``
        (one TVMPlanModel per graph).
    """

    def __init__(self, graphs, objective: str, devices: int, workers: int = 1, seeded: bool = False,
                 **model_kw) -> None:
        self.job = BRKGAJob([g.to_dict() for g in graphs], dict(objective=objective, devices=devices, **model_kw),
                            seeded)
        self.pool = None
        if workers > 1:
            self.pool = ProcessPoolExecutor(workers, initializer=_init_worker)

    def run(self, tasks: list) -> list[tuple[float, float]]:
        """Run ``(graph index, budget, seed, params[, brkga config dict])`` tasks; returns ``(objective, violation)`` in task order."""
        if self.pool is None:
            return [self.job(t) for t in tasks]
        return list(self.pool.map(self.job, tasks, chunksize=max(1, len(tasks) // 16)))

    def close(self) -> None:
        """Shut the worker pool down."""
        if self.pool is not None:
            self.pool.shutdown()
            self.pool = None


def train_seed(graph_index: int, k: int) -> int:
    """BRKGA seed ``k`` (0 <= k < seeds_per_graph) of training graph ``graph_index``."""
    return int(graph_index * 7919 + k)


def _plain_key(text: str) -> tuple:
    """A cached plain-BRKGA result's key from its checkpoint form: ``"graph,seed,budget"``; a checkpoint written
    before budgets were keyed holds ``"graph,seed"`` (budget -1: never matched, so it is run again)."""
    k = tuple(map(int, text.split(",")))
    return k if len(k) == 3 else (k[0], k[1], -1)


def reward(plain: tuple[float, float], ours: tuple[float, float]) -> float:
    """Relative improvement of ``ours`` over ``plain`` (each ``(objective, violation)``); infeasible ours = -1."""
    if ours[1] > 0 and plain[1] <= 0:
        return -1.0
    if plain[0] <= 0:
        return 0.0
    return (plain[0] - ours[0]) / plain[0]


@dataclass
class TrainState:
    """What a checkpoint holds besides the weights."""

    step: int = 0
    history: list = field(default_factory=list)
    plain: dict = field(default_factory=dict)
    seconds: float = 0.0


def train(
    graphs: list[ComputationGraph],
    config: TrainConfig | None = None,
    checkpoint: str | Path | None = None,
    resume: bool = True,
    progress=None,
    meta: dict | None = None,
    memory_plans: list | None = None,
):
    """Train a policy on ``graphs`` with REINFORCE; returns ``(policy, state)``.

    Parameters
    ----------
    graphs : list of ComputationGraph
        Training graphs (never the evaluation graphs).
    config : TrainConfig, optional
    checkpoint : path, optional
        Where to write the checkpoint; with ``resume`` an existing one is continued (its config is kept for
        the architecture; ``steps`` from ``config`` is the new total).
    progress : callable, optional
        Called as ``progress(step, steps, record)`` after each step (``record``: mean reward, entropy, seconds).
    meta : dict, optional
        Stored in the checkpoint (e.g. the command that trained it).
    memory_plans : list of TVMPlanModel, optional
        With ``config.memory == "tvm"``: one per graph (same order); peak memory is then TVM's planned bytes
        (:mod:`release.graph.tvm_plan`), e.g. from :func:`release.graph.synthetic_relax.make_relax_graphs`.

    Returns
    -------
    policy : torch.nn.Module
    state : TrainState
        ``history`` has one dict per step: ``step``, ``reward`` (mean sampled reward), ``reward_max``,
        ``entropy``, ``seconds``.

    Raises
    ------
    GraphError
        For no graphs, a bad config, or memory plans missing, extra or of the wrong length.
    """
    import torch

    from .policy import PolicyConfig, RegalPolicy, graph_tensors, sample_action

    cfg = config or TrainConfig()
    cfg.validate()
    if not graphs:
        raise GraphError("training needs at least one graph; pass --graphs N or a list of graphs")
    if (cfg.memory == "tvm") != (memory_plans is not None):
        raise GraphError("memory 'tvm' needs one TVMPlanModel per graph (memory_plans=), and memory plans need "
                         "memory 'tvm'")
    if memory_plans is not None and len(memory_plans) != len(graphs):
        raise GraphError(f"{len(memory_plans)} memory plans for {len(graphs)} graphs; give one per graph")
    torch.manual_seed(cfg.seed)
    pcfg = PolicyConfig(devices=cfg.devices, hidden=cfg.hidden, layers=cfg.layers,
                        budget_input=cfg.budgets is not None)
    policy = RegalPolicy(pcfg)
    opt = torch.optim.Adam(policy.parameters(), lr=cfg.lr)
    state = TrainState()
    ck = Path(checkpoint) if checkpoint else None
    if ck is not None and resume and ck.exists():
        from .policy import load_checkpoint_file

        d = load_checkpoint_file(ck)
        policy = RegalPolicy(PolicyConfig(**d["config"]))
        policy.load_state_dict(d["state_dict"])
        opt = torch.optim.Adam(policy.parameters(), lr=cfg.lr)
        if "optimizer" in d:
            opt.load_state_dict(d["optimizer"])
        st = d.get("train_state", {})
        state = TrainState(st.get("step", 0), st.get("history", []),
                           {_plain_key(k): tuple(v) for k, v in st.get("plain", {}).items()},
                           st.get("seconds", 0.0))
        logger.info("resumed from %s at step %d", ck, state.step)
    tensors = [graph_tensors(g) for g in graphs]
    extra_kw = {"memory_plans": list(memory_plans)} if memory_plans is not None else {}
    runner = BRKGARunner(graphs, cfg.objective, cfg.devices, cfg.workers, seeded=cfg.seeded,
                         latency_us=cfg.latency_us, bandwidth=cfg.bandwidth, **extra_kw)

    def save():
        if ck is None:
            return
        from .policy import save_policy

        ck.parent.mkdir(parents=True, exist_ok=True)
        tmp = ck.with_suffix(ck.suffix + ".tmp")
        save_policy(policy, tmp, meta={**(meta or {}), "train_config": asdict(cfg)}, extra={
            "optimizer": opt.state_dict(),
            "train_state": {"step": state.step, "history": state.history, "seconds": state.seconds,
                            "plain": {",".join(map(str, k)): list(v) for k, v in state.plain.items()}},
        })
        tmp.replace(ck)

    try:
        while state.step < cfg.steps:
            t0 = time.perf_counter()
            rng = np.random.default_rng([cfg.seed, state.step])
            gen = torch.Generator().manual_seed(int(rng.integers(2**31)))
            batch = rng.choice(len(graphs), size=min(cfg.batch_graphs, len(graphs)), replace=False).tolist()
            seeds = [train_seed(gi, state.step % cfg.seeds_per_graph) for gi in batch]
            budget = int(rng.choice(cfg.budgets)) if cfg.budgets is not None else cfg.budget
            cond = budget if cfg.budgets is not None else None
            logps, ents, tasks = [], [], []
            for gi, s in zip(batch, seeds):
                x, e = tensors[gi]
                for _ in range(cfg.samples):
                    a, lp, ent = sample_action(policy, x, e, generator=gen, budget=cond)
                    logps.append(lp / x.shape[0] if cfg.per_node_logp else lp)
                    ents.append(ent)
                    tasks.append((gi, budget, s, a.brkga_params(policy.cfg, cfg.devices), cfg.brkga))
            need = sorted({(gi, s, budget) for gi, s in zip(batch, seeds) if (gi, s, budget) not in state.plain})
            res = runner.run([(gi, b, s, None, cfg.brkga) for gi, s, b in need] + tasks)
            for k, r in zip(need, res[: len(need)]):
                state.plain[k] = r
            res = res[len(need):]
            R = np.array([reward(state.plain[(batch[i // cfg.samples], seeds[i // cfg.samples], budget)], r)
                          for i, r in enumerate(res)]).reshape(len(batch), cfg.samples)
            base = (R.sum(1, keepdims=True) - R) / (cfg.samples - 1)
            adv = R - base
            adv = adv / (adv.std() + 1e-8)
            adv_t = torch.as_tensor(adv.reshape(-1), dtype=torch.float32)
            loss = -(adv_t * torch.stack(logps)).mean() - cfg.entropy * torch.stack(ents).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            secs = time.perf_counter() - t0
            state.seconds += secs
            state.step += 1
            rec = {"step": state.step, "budget": budget, "reward": float(R.mean()), "reward_max": float(R.max()),
                   "entropy": float(torch.stack(ents).mean().detach()), "seconds": secs}
            state.history.append(rec)
            logger.info("step %d/%d reward %.4f entropy %.3f (%.1f s)", state.step, cfg.steps, rec["reward"],
                        rec["entropy"], secs)
            if progress is not None:
                progress(state.step, cfg.steps, rec)
            if state.step % cfg.checkpoint_every == 0:
                save()
        save()
    finally:
        runner.close()
    policy.eval()
    return policy, state


def expected_reward(policy, graphs, objective: str, devices: int, budget: int, seeds=None, samples: int = 4,
                    sample_seed: int = 0, workers: int = 1, seeds_per_graph: int = 1, **model_kw) -> float:
    """Mean reward of ``samples`` sampled choice sets per graph and seed (fixed sampling seed), for comparing
    a policy before and after training on the same graphs.

    ``seeds`` (a list of BRKGA seeds used for every graph) defaults to the training seeds of each graph
    (:func:`train_seed` ``(i, k)`` for ``k < seeds_per_graph``), i.e. the bandit the policy was trained on.

    Returns
    -------
    float
        Mean of :func:`reward` over graphs x seeds x samples.
    """
    import torch

    from .policy import graph_tensors, sample_action

    gen = torch.Generator().manual_seed(sample_seed)
    tasks, plain = [], []
    with torch.no_grad():
        for gi, g in enumerate(graphs):
            x, e = graph_tensors(g)
            for s in (seeds if seeds is not None else [train_seed(gi, k) for k in range(seeds_per_graph)]):
                plain.append((gi, budget, s, None))
                for _ in range(samples):
                    a, _, _ = sample_action(policy, x, e, generator=gen,
                                            budget=budget if policy.cfg.budget_input else None)
                    tasks.append((gi, budget, s, a.brkga_params(policy.cfg, devices)))
    runner = BRKGARunner(graphs, objective, devices, workers, **model_kw)
    try:
        base = runner.run(plain)
        res = runner.run(tasks)
    finally:
        runner.close()
    R = [reward(base[i // samples], r) for i, r in enumerate(res)]
    return float(np.mean(R))
