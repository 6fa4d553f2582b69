"""Model-based tuners as named presets: one composed tuner, a table of recipes, one seed helper.

Every model-based tuner is :class:`release.tuners.model_based.ModelBasedTuner` composed of a cost
model, a model optimizer, a sampler, a plan size and a seed. What differs between the paper's
ablation variants (Ahn et al., ICLR 2020, section 6) is only the recipe:

============  =========  ==========  ===============================================
preset        optimizer  sampler     other settings
============  =========  ==========  ===============================================
``xgb``       ``sa``     whole plan  AutoTVM's ``XGBTuner``
``sa-as``     ``sa``     adaptive    the paper's "SA+AS"
``rl``        ``ppo``    whole plan  the paper's "RL"
``release``   ``ppo``    adaptive    Chameleon (the paper's method)
``release+``  ``ppo``    adaptive    half of the episodes start at the best measured
                                     configs, >= 16,000 queries per search, PPO with
                                     ``boundary="pushed"``, at most 64 gradient steps
============  =========  ==========  ===============================================

All use the XGBoost cost model with ``itervar`` features and ``reg`` loss and a 64-config plan.
With ``knowledge`` (a knowledge base folder, a :class:`release.knowledge.KnowledgeBase` or records)
holding records of the task's target class, the cost model is
:class:`release.cost_model.transfer.TransferCostModel` (the same, plus a booster transferred from
the knowledge) and tuning starts warm; with ``knowledge_use="seeds"`` the cost model stays AutoTVM's
and the first round measures the knowledge's best configs carried into the task's space
(transfer-tuning) beside random ones; ``local_search`` adds the Droplet-style local phase
(:mod:`release.tuners.local`). Both are off in every preset unless asked for: the presets stay the
paper's and AutoTVM's recipes, so benchmarks compare cold runs unless told otherwise.
:func:`build_components` makes the parts of a recipe; :func:`child_seed` derives every part's seed
from the tuner's.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace

import numpy as np

from ..errors import TunerError, check_plan_size

OPTIMIZERS = ("ppo", "sa")
#: ways a tuner starts warm from a knowledge base (:attr:`ModelBasedConfig.knowledge_use`)
KNOWLEDGE_USES = ("model", "seeds")

#: role -> (extra entropy, child index): how :func:`child_seed` derives each part's seed. The
#: values reproduce the seeds of the code before the parts were composed (two spawn trees), so runs and their
#: logs stay reproducible.
_SEED_TREE = {"cost_model": (None, 0), "sa": (None, 1), "ppo": (4, 0), "sampler": (4, 1)}


def child_seed(seed: int | None, role: str) -> int | None:
    """The seed of one part of a tuner, derived from the tuner's ``seed`` (NumPy ``SeedSequence``).

    Parameters
    ----------
    seed : int or None
        The tuner's seed; None gives None (nondeterministic parts).
    role : str
        ``"cost_model"``, ``"sa"`` (simulated annealing), ``"ppo"`` (the agent) or ``"sampler"``.

    Returns
    -------
    int or None
        A 32-bit seed, the same for the same ``(seed, role)`` on every machine.
    """
    if seed is None:
        return None
    extra, index = _SEED_TREE[role]
    ss = np.random.SeedSequence(seed if extra is None else [seed, extra])
    return int(ss.spawn(2)[index].generate_state(1)[0])


def _ppo_config(**kw):
    from ..rl.ppo import PPOConfig

    return PPOConfig(**kw)


@dataclass
class ModelBasedConfig:
    """The recipe of a model-based tuner (nests the PPO and adaptive-sampling configs)."""

    optimizer: str = "sa"
    """Model optimizer: ``"sa"`` (AutoTVM's simulated annealing) or ``"ppo"`` (Chameleon's agent)."""
    sampler: str | None = None
    """``None`` (measure the whole plan) or ``"adaptive"`` (Chameleon's k-means + synthesis)."""
    plan_size: int = 64
    """Configs the optimizer proposes per round (and the largest k of adaptive sampling)."""
    feature_type: str = "itervar"
    """Cost-model features: ``"itervar"`` (program features re-rank the plan) or ``"knob"``."""
    loss_type: str = "reg"
    """Cost-model loss: ``"reg"`` or ``"rank"``."""
    diversity_filter_ratio: float | None = None
    """Ask for ``plan_size * ratio`` candidates and keep a diverse ``plan_size`` (AutoTVM)."""
    num_threads: int | None = None
    """XGBoost threads (None: 1)."""
    ppo: object = None
    """:class:`release.rl.PPOConfig` of the agent (None: the authors' defaults)."""
    sampling: object = None
    """:class:`release.sampling.AdaptiveSamplingConfig` (None: the authors' defaults)."""
    start_from_measured: float = 0.0
    """Share of the agent's episodes started at the best measured configs (paper: 0)."""
    min_queries: int = 0
    """Agent rounds per search continue until this many cost-model queries (paper: 0, one round)."""
    knowledge: object = None
    """Knowledge to start warm from: a folder, a KnowledgeBase or records (None: cold, AutoTVM's start)."""
    transfer: object = None
    """:class:`release.cost_model.transfer.TransferConfig` of the transferred model (None: defaults)."""
    knowledge_use: str = "seeds"
    """How ``knowledge`` starts the tuner warm (:data:`KNOWLEDGE_USES`): ``"seeds"`` (default), the
    first round measures the best configs of the knowledge's workloads carried into this space
    (transfer-tuning) beside random ones, and the cost model is the task's own (AutoTVM's);
    ``"model"``, the transferred cost model plans the first round. Seeds are the default because, on
    held-out ResNet-18 layers (``benchmarks/results/knowledge/holdout/``, best kernels re-timed side by
    side, one seed), they ended above the transferred model on conv2d.4 and .8 (xgb and release+) and
    within 1.2% of it on conv2d.12, and reach 95% of a cold run's best far sooner."""
    local_search: object = False
    """Droplet-style local phase after the best stops improving: False, True or a LocalSearchConfig."""
    seed_explore: float = 0.25
    """With seeds: share of random configs in every round planned while the best is still a seed's
    (:attr:`release.tuners.model_based.ModelBasedTuner.seed_explore`)."""
    warm_explore: float = 0.5
    """Share of random configs in the first round of a warm start (transferred model)."""
    name: str | None = None
    """The tuner's name in logs (a preset's, which also says whose class's ``warm_by_default`` the
    tuner has: :meth:`release.tuners.model_based.ModelBasedTuner.from_preset` sets it); None: the
    tuner class's own."""

    def check(self) -> "ModelBasedConfig":
        """Validate the names and the plan size (the other numbers are checked by the parts that use them).

        Raises
        ------
        TunerError
            Unknown optimizer, sampler, feature type or loss type (the message lists the choices);
            ``plan_size`` not an integer >= 1.
        """
        from ..cost_model import check_feature_type, check_loss_type

        check_plan_size(self.plan_size)
        check_feature_type(self.feature_type)
        check_loss_type(self.loss_type)
        if isinstance(self.optimizer, str) and self.optimizer not in OPTIMIZERS:
            raise TunerError(f"unknown optimizer {self.optimizer!r}; choose one of: {', '.join(OPTIMIZERS)} "
                             "or pass a release.optimizers.ModelOptimizer")
        if self.knowledge_use not in KNOWLEDGE_USES:
            raise TunerError(f"knowledge_use={self.knowledge_use!r}; choose one of: {', '.join(KNOWLEDGE_USES)}")
        if isinstance(self.sampler, str) and self.sampler != "adaptive":
            raise TunerError(f"unknown sampler {self.sampler!r}; choose 'adaptive', None (measure the whole plan) "
                             "or pass a release.sampling.Sampler")
        return self


#: name -> recipe of every model-based tuner of ``release tune --tuner NAME``
PRESETS: dict[str, ModelBasedConfig] = {
    "xgb": ModelBasedConfig(),
    "sa-as": ModelBasedConfig(sampler="adaptive"),
    "rl": ModelBasedConfig(optimizer="ppo"),
    "release": ModelBasedConfig(optimizer="ppo", sampler="adaptive"),
    "release+": ModelBasedConfig(optimizer="ppo", sampler="adaptive", start_from_measured=0.5, min_queries=16000),
}

#: nested settings a preset makes when the caller gives none (made fresh for every tuner)
_PRESET_PPO = {"release+": dict(boundary="pushed", max_minibatches=64)}


def preset(name: str, **overrides) -> ModelBasedConfig:
    """A fresh copy of preset ``name`` with ``overrides`` (fields of :class:`ModelBasedConfig`).

    Raises
    ------
    TunerError
        Unknown preset or field name, or a bad value (see :meth:`ModelBasedConfig.check`).
    """
    if name not in PRESETS:
        raise TunerError(f"unknown model-based preset {name!r}; choose one of: {', '.join(PRESETS)}")
    cfg = copy.deepcopy(PRESETS[name])
    if name in _PRESET_PPO and overrides.get("ppo") is None:
        overrides["ppo"] = _ppo_config(**_PRESET_PPO[name])
    bad = [k for k in overrides if k not in ModelBasedConfig.__dataclass_fields__]
    if bad:
        raise TunerError(f"preset {name!r} has no setting {', '.join(bad)}")
    return replace(cfg, **overrides)


def build_components(task, cfg: ModelBasedConfig, seed: int | None = None):
    """The cost model, model optimizer and sampler of recipe ``cfg`` for ``task``.

    Each part gets its seed from :func:`child_seed`. ``cfg.optimizer`` / ``cfg.sampler`` may
    already be objects (a :class:`release.optimizers.ModelOptimizer` / a
    :class:`release.sampling.Sampler`); they are used as given.

    Returns
    -------
    (XGBoostCostModel, ModelOptimizer, Sampler or None, list of tuple, KnowledgeRead)
        ``None`` for the sampler means the whole plan (the tuner uses a pass-through sampler).
        The cost model is a :class:`release.cost_model.transfer.TransferCostModel` when
        ``cfg.knowledge`` holds records of the task's target class and ``cfg.knowledge_use`` is
        ``"model"``. Then the seeds to measure first (``knowledge_use="seeds"``:
        :func:`release.knowledge.use.knowledge_seeds`, at most ``plan_size // 2``; else empty), and
        what was read (:class:`release.tuners.tuner.KnowledgeRead`: records and workloads, ``(0, 0)``
        when cold; the workloads the seeds came from), the tuner's ``knowledge_read``.

    Raises
    ------
    TunerError
        Unknown names (see :meth:`ModelBasedConfig.check`) or bad PPO settings.
    """
    from ..cost_model import XGBoostCostModel

    cfg.check()
    from ..knowledge.use import KnowledgeRecords

    records, programs = KnowledgeRecords(), None
    if cfg.knowledge is not None and cfg.knowledge is not False:
        from ..knowledge.use import knowledge_programs, knowledge_records

        seeds_only = cfg.knowledge_use == "seeds"  # the best of each workload: the base's index, not a full read
        records = knowledge_records(cfg.knowledge, task, best=max(1, cfg.plan_size // 2) if seeds_only else None)
        programs = None if seeds_only else knowledge_programs(cfg.knowledge)
    seeds: list = []
    seed_sources: list = []  # each seed's source workload
    if records and cfg.knowledge_use == "seeds":
        from ..knowledge.use import knowledge_seeds

        seeds = knowledge_seeds(task, records, max(1, cfg.plan_size // 2), seed=seed or 0, sources=seed_sources)
    if records and cfg.knowledge_use == "model":
        from ..cost_model.transfer import TransferCostModel

        cost_model = TransferCostModel(task, records, config=cfg.transfer, feature_type=cfg.feature_type,
                                       loss_type=cfg.loss_type, num_threads=cfg.num_threads,
                                       seed=child_seed(seed, "cost_model"), programs=programs)
    else:
        cost_model = XGBoostCostModel(task, feature_type=cfg.feature_type, loss_type=cfg.loss_type,
                                      num_threads=cfg.num_threads, seed=child_seed(seed, "cost_model"))
    optimizer = cfg.optimizer
    if optimizer == "sa":
        from ..optimizers.sa import SimulatedAnnealingOptimizer

        optimizer = SimulatedAnnealingOptimizer(task, seed=child_seed(seed, "sa"))
    elif optimizer == "ppo":
        from ..optimizers.ppo import RLOptimizer

        optimizer = RLOptimizer(task.config_space, cfg.ppo, seed=child_seed(seed, "ppo"),
                                start_from_measured=cfg.start_from_measured, min_queries=cfg.min_queries)
    sampler = cfg.sampler
    if sampler == "adaptive":
        from ..sampling import AdaptiveSampler

        s = child_seed(seed, "sampler")
        sampler = AdaptiveSampler(cfg.sampling, seed=s if s is not None else 0)
    from .tuner import KnowledgeRead

    return cost_model, optimizer, sampler, seeds, KnowledgeRead.of(records, seed_sources)


__all__ = ["ModelBasedConfig", "PRESETS", "OPTIMIZERS", "KNOWLEDGE_USES", "preset", "build_components", "child_seed"]
