"""AutoTVM's model-based tuning loop (``ModelBasedTuner``), with a sampler hook for Chameleon.

The tuner proposes through explicit phases (:mod:`release.tuners.phases`), one proposer each, and
one :class:`release.tuners.phases.PhasePolicy` that says which proposes next from its declared
rules (:data:`release.tuners.phases.PhasePolicy.RULES`):

1. ``seeds``: transfer-tuning seeds (:attr:`ModelBasedTuner.seeds`) are measured first, then
2. ``random``: random configs up to ``plan_size`` measured (AutoTVM's warm-up; no model yet).
3. ``model``: once ``next_update`` configs were measured and something ran, ``cost_model.fit(xs,
   ys)`` (every measured config joins the training set, failed ones with throughput 0); at the
   next batch ``model_optimizer.find_maximums(cost_model, plan_size, visited)`` proposes the
   *plan* (optionally ``plan_size * diversity_filter_ratio`` candidates thinned by a submodular
   diversity pick) and the ``sampler`` (:class:`release.sampling.PassThroughSampler`: the plan as
   is; Chameleon: k-means + sample synthesis) picks what to measure; ``next_update`` grows by the
   number picked (AutoTVM: ``plan_size``; Chameleon: the ``k`` of the round). The picks are handed
   out in order; the last ``int(0.05 * plan_size)`` of each round (with a sampler: 5% of the configs
   it picked) are random unvisited configs (AutoTVM's epsilon-greedy rule), and a batch that
   outlasts the plan is filled at random. Planning is booked as search time, the fit as fitting time.
4. ``local`` (``local_search=True``): once ``patience`` trials passed without a new best, a
   Droplet-style coordinate search around the best measured config
   (:class:`release.tuners.local.DropletSearch`) proposes alone; when it has no move left the
   model is refitted and its plans resume. :attr:`ModelBasedTuner.flattened` tells a task
   scheduler that the task stopped improving (see :mod:`release.scheduler`).

Warm start: a cost model whose ``warm`` attribute is true (a
:class:`release.cost_model.transfer.TransferCostModel` holding usable knowledge) is fitted before
the first round, so the first plan comes from the model instead of ``plan_size`` random configs;
the epsilon-greedy share of random picks stays. That first warm round is half model, half random
(:attr:`ModelBasedTuner.warm_explore`, 0.5): a round planned by the transferred model alone gives
the task's own model data from the region the knowledge favours only, and the search stays there
(measured, resnet18.conv2d.4 held out, xgb, 512 trials: 193 GFLOPS warm against 295 cold, both
re-timed side by side; ``docs/design/knowledge-base.md``). :attr:`ModelBasedTuner.random_picks` counts the
random configs handed out. The other warm start, transfer-tuning *seeds*
(:attr:`ModelBasedTuner.seeds`), leaves the cost model cold: the first round measures the seeds,
then random configs up to ``plan_size``, and the task's own model takes over from the first fit.
So that the seeds do not anchor the search (xgb with seeds ended 9% below cold on
held-out layers), every round planned while the best is still a seed's (the seed or one knob from it)
keeps :attr:`ModelBasedTuner.seed_explore` (25%) of its picks random.
"""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from typing import Sequence

import numpy as np

from ..cost_model.base import as_cost_model
from ..errors import TunerError, check_plan_size
from ..measure.measure import MeasureResult
from ..optimizers.base import ModelOptimizer
from ..sampling.base import PassThroughSampler, Sampler
from .local import LocalSearchConfig
from .phases import LocalPhase, ModelPhase, PhasePolicy, RandomPhase, SeedPhase, submodular_pick
from .presets import ModelBasedConfig
from .simple import RandomTuner

logger = logging.getLogger(__name__)


class ModelBasedTuner(RandomTuner):
    """The model-based tuner (AutoTVM ``ModelBasedTuner``), composed of its parts and its phases.

    Every cost-model-guided tuner is this class with other parts: ``xgb``, ``sa-as``, ``rl``,
    ``release`` and ``release+`` are recipes of :mod:`release.tuners.presets`. Its settings are one
    :class:`release.tuners.presets.ModelBasedConfig` (:attr:`config`); what it proposes comes from
    the phases of :mod:`release.tuners.phases` (life cycle in the module docstring), chosen by
    :attr:`policy`.

    Parameters
    ----------
    task : Task
    cost_model : release.cost_model.CostModel
        Scores configs (any object with ``fit`` and ``predict`` is used without re-ranking).
    model_optimizer : release.optimizers.ModelOptimizer
        Proposes the plan on the cost model's scores.
    plan_size : int
        Configs proposed per round (default 64, AutoTVM's).
    diversity_filter_ratio : float, optional
        If set, ask the optimizer for ``plan_size * ratio`` candidates and keep a diverse
        ``plan_size`` of them (AutoTVM's ``submodular_pick``).
    sampler : release.sampling.Sampler, optional
        Picks what to measure from the plan (None: :class:`release.sampling.PassThroughSampler`,
        the whole plan).
    seed : int, optional
        Seed of the random configs (the parts have their own, see
        :func:`release.tuners.presets.child_seed`).
    local_search : bool or LocalSearchConfig, optional
        Run the Droplet-style local phase once the best stops improving (default False; True:
        :class:`release.tuners.local.LocalSearchConfig` defaults, ``patience = plan_size``).
    seeds : sequence of tuple
        Configs measured first, before the warm-up's random ones (transfer-tuning seeds from a
        knowledge base, :func:`release.knowledge.use.knowledge_seeds`; default none). Visited
        ones (a resumed log) are skipped.
    seed_explore : float
        :attr:`seed_explore` (default 0.25).
    warm_explore : float
        :attr:`warm_explore` (default 0.5).

    Attributes
    ----------
    config : release.tuners.presets.ModelBasedConfig
        The settings (the recipe for tuners made from one; else the arguments above).
    policy : release.tuners.phases.PhasePolicy
        The phases and the rules that pick the one that proposes next.
    random_picks : int
        Random configs handed out (the warm-up round before the first fit, and the
        epsilon-greedy share of every plan).
    warm_explore : float
        Share of random configs in the first round of a warm start (default 0.5; 0: the round is
        the transferred model's plan plus the epsilon share).
    local : DropletSearch or None
        The local phase's search once it started.
    seed_explore : float
        With seeds: share of random unvisited configs in every round planned while the best measured
        config is still a seed or one knob from one (default 0.25; 0: AutoTVM's 5% only). Seeds are
        good early and pull the task's own cost model towards their neighbourhood; the random share
        keeps the model seeing the rest of the space until the search finds better elsewhere.
        :attr:`anchored_rounds` counts the rounds it applied to.

    Raises
    ------
    TunerError
        ``plan_size < 1``, ``diversity_filter_ratio < 1``, ``seed_explore`` or ``warm_explore``
        outside [0, 1], or an optimizer or sampler that is not one (the message names the base class
        to subclass).
    """

    name = "model-based"
    knowledge_uses = ("seeds", "model")

    def __init__(self, task, cost_model, model_optimizer, plan_size: int = 64,
                 diversity_filter_ratio: float | None = None, sampler=None, seed: int | None = None,
                 local_search=False, seeds=(), seed_explore: float = 0.25, warm_explore: float = 0.5):
        config = ModelBasedConfig(optimizer=model_optimizer, sampler=sampler, plan_size=plan_size,
                                  diversity_filter_ratio=diversity_filter_ratio, local_search=local_search,
                                  seed_explore=seed_explore, warm_explore=warm_explore)
        self._compose(task, config, cost_model, model_optimizer, sampler, seeds, seed)

    def _compose(self, task, config: ModelBasedConfig, cost_model, model_optimizer, sampler, seeds,
                 seed: int | None, read=None) -> None:
        """Validate ``config`` and build the phases and their policy (every constructor ends here).

        Raises
        ------
        TunerError
            As the class says.
        """
        super().__init__(task, seed=seed)
        plan_size, diversity_filter_ratio = config.plan_size, config.diversity_filter_ratio
        check_plan_size(plan_size)
        for what, share in (("seed_explore", config.seed_explore), ("warm_explore", config.warm_explore)):
            if not isinstance(share, (int, float, np.integer, np.floating)) or not 0.0 <= share <= 1.0:
                raise TunerError(f"{what}={share!r} must be a share between 0 and 1")
        if diversity_filter_ratio is not None and diversity_filter_ratio < 1:
            raise TunerError(f"diversity_filter_ratio={diversity_filter_ratio!r} must be >= 1 or None")
        if not isinstance(model_optimizer, ModelOptimizer):
            raise TunerError(f"optimizer {model_optimizer!r} is not a model optimizer: subclass "
                             "release.optimizers.ModelOptimizer and implement find_maximums(model, num, exclusive)")
        if sampler is None:
            sampler = PassThroughSampler()
        elif not isinstance(sampler, Sampler):
            raise TunerError(f"sampler={sampler!r} is not a sampler: give None, 'adaptive' or a subclass of "
                             "release.sampling.Sampler implementing sample(candidates, space, visited, plan_size)")
        cost_model = as_cost_model(cost_model)
        local_search = config.local_search
        if local_search is True:
            local_search = LocalSearchConfig()
        if local_search not in (False, None) and not isinstance(local_search, LocalSearchConfig):
            raise TunerError(f"local_search={local_search!r}: give True, False or a "
                             "release.tuners.local.LocalSearchConfig")
        local_config = local_search or None
        if local_config is not None:
            pat = local_config.patience
            if pat is not None and (not isinstance(pat, (int, np.integer)) or pat < 1):
                raise TunerError(f"local search patience={pat!r} must be a positive number of trials or None")
        patience = int((local_config.patience if local_config else None) or plan_size)
        seeds = [self.space.check(c) for c in seeds]
        random = RandomPhase(lambda k: RandomTuner.next_batch(self, k))
        self.config = config
        if read is not None:
            self.knowledge_read = read
        if config.name is not None:
            from . import TUNERS, tuner_class

            self.name = config.name
            if config.name in TUNERS:
                self.warm_by_default = tuner_class(config.name).warm_by_default
        self.policy = PhasePolicy(
            ModelPhase(random, cost_model, model_optimizer, sampler, plan_size, diversity_filter_ratio), random,
            seeds=SeedPhase(random, seeds) if seeds else None,
            local=LocalPhase(local_config, patience) if local_config is not None else None,
            patience=patience, seed_explore=config.seed_explore, warm_explore=config.warm_explore)

    @classmethod
    def from_preset(cls, name: str, task, seed: int | None = None, **overrides) -> "ModelBasedTuner":
        """The model-based tuner of preset ``name`` (``xgb``, ``sa-as``, ``rl``, ``release``, ``release+``:
        :data:`release.tuners.presets.PRESETS`) for ``task``, with ``overrides`` of its recipe.

        The same parts, seeds and so the same measurements as the preset's named class
        (``XGBTuner(task, seed=s)`` and ``ModelBasedTuner.from_preset("xgb", task, seed=s)`` measure the
        same configs in the same order); what a preset's class declares (``warm_by_default``) is read
        off that class.

        Parameters
        ----------
        name : str
            The preset.
        task : release.task.Task
        seed : int, optional
            The tuner's seed; its parts' seeds derive from it (:func:`release.tuners.presets.child_seed`).
        **overrides
            Fields of :class:`release.tuners.presets.ModelBasedConfig` (``plan_size``, ``knowledge``,
            ``knowledge_use``, ``local_search``, ``ppo``, ``seed_explore``, ...).

        Raises
        ------
        TunerError
            Unknown preset or field, or a bad value.
        """
        from .presets import preset

        return cls.from_config(task, preset(name, **overrides), seed=seed, name=name)

    @classmethod
    def from_config(cls, task, config, seed: int | None = None, name: str | None = None) -> "ModelBasedTuner":
        """A tuner built from a recipe (:class:`release.tuners.presets.ModelBasedConfig`): its cost model,
        model optimizer, sampler and knowledge seeds from :func:`release.tuners.presets.build_components`.
        ``name`` (a preset's; default ``config.name``) names the tuner in logs and, for a named tuner,
        what its class declares (``warm_by_default``) is read off that class; the recipe is
        :attr:`config`, what it read from a knowledge base :attr:`knowledge_read`.

        Raises
        ------
        TunerError
            A bad recipe (see :meth:`release.tuners.presets.ModelBasedConfig.check`).
        """
        tuner = cls.__new__(cls)
        tuner._build(task, config if name is None else replace(config, name=name), seed)
        return tuner

    def _build(self, task, config, seed: int | None) -> None:
        """Initialize from a recipe: the parts from :func:`release.tuners.presets.build_components`,
        then the phases; :attr:`config` and :attr:`knowledge_read` set (the presets' classes and
        :meth:`from_config` all build this way)."""
        from .presets import build_components

        cost_model, optimizer, sampler, seeds, read = build_components(task, config, seed)
        self._compose(task, config, cost_model, optimizer, sampler, seeds, seed, read=read)

    # ------------------------------------------------------------------ the parts and phases' state
    cost_model = property(lambda self: self.policy.model.cost_model, doc="The cost model (a CostModel).")
    model_optimizer = property(lambda self: self.policy.model.model_optimizer, doc="The model optimizer.")
    sampler = property(lambda self: self.policy.model.sampler, doc="The sampler (a Sampler).")
    plan_size = property(lambda self: self.policy.model.plan_size, doc="Configs proposed per round.")
    diversity_filter_ratio = property(lambda self: self.policy.model.diversity_filter_ratio,
                                      doc="Candidates asked per plan config (None: no diversity filter).")
    xs = property(lambda self: self.policy.model.xs, doc="Training set: measured configs.")
    ys = property(lambda self: self.policy.model.ys, doc="Training set: their throughput (FLOP/s; 0: failed).")
    train_ct = property(lambda self: self.policy.model.fits, doc="Cost-model fits so far.")
    next_update = property(lambda self: self.policy.model.next_update,
                           doc="Training-set size at which the next fit is due.")
    trials_plan = property(lambda self: self.policy.plan_phase.configs,
                           doc="The list in hand: the seeds until the first plan, then the model's plan.")
    eps = property(lambda self: int(0.05 * self.plan_size),
                   doc="AutoTVM's random picks per plan of ``plan_size`` (5%).")
    random_picks = property(lambda self: self.policy.random.picks, doc="Random configs handed out.")
    seeds = property(lambda self: self.policy.seeds.configs if self.policy.seeds is not None else [],
                     doc="Transfer-tuning seeds, measured first.")
    seed_explore = property(lambda self: self.policy.seed_explore, doc="See the class docstring.")
    warm_explore = property(lambda self: self.policy.warm_explore, doc="See the class docstring.")
    anchored_rounds = property(lambda self: self.policy.anchored_rounds,
                               doc="Plans whose random share ``seed_explore`` raised.")
    patience = property(lambda self: self.policy.patience,
                        doc="Trials without a new best before the task is flattened (and the local phase starts).")
    local_config = property(lambda self: self.policy.local.config if self.policy.local is not None else None,
                            doc="The local phase's settings (None: no local phase).")
    local = property(lambda self: self.policy.local.search if self.policy.local is not None else None,
                     doc="The local phase's search once it started (DropletSearch), else None.")
    local_started_at = property(lambda self: self.policy.local.started_at if self.policy.local is not None else None,
                                doc="Trial count when the local phase last started (None: never).")
    agent_checkpoint = property(lambda self: self.policy.model.checkpoint,
                                doc="Where the optimizer's state is saved after every plan (None: nowhere).")

    @property
    def phase(self) -> str:
        """The phase that proposes next: ``"local"``, ``"seeds"``, ``"model"`` or ``"random"``."""
        return self.policy.current

    @property
    def rounds(self) -> int:
        """Cost-model refits so far."""
        return self.train_ct

    # ------------------------------------------------------------------ optimizer state beside the log
    def attach_log(self, path: str) -> None:
        """Keep an optimizer with state (:attr:`ModelOptimizer.keeps_state`: the PPO agent) beside
        the log ``path``; resume it from there if a checkpoint exists. Others: nothing."""
        if not self.model_optimizer.keeps_state:
            return
        from ..optimizers.ppo import agent_checkpoint_path, legacy_agent_checkpoint_path

        ckpt = agent_checkpoint_path(path, self.task.key)
        if ckpt == self.agent_checkpoint:
            return  # tune() called again on the same log (tune-model's chunks): the agent is already current
        self.policy.model.checkpoint = ckpt
        # written by an older release: beside the log (moved into the log's .agents folder), or named by
        # an older task key (read from there; saved under the current name from now on)
        beside = legacy_agent_checkpoint_path(path, self.task.key)
        if not os.path.exists(ckpt) and os.path.exists(beside):
            os.makedirs(os.path.dirname(ckpt), exist_ok=True)
            os.replace(beside, ckpt)
        older_key = f"{self.task.name}/{self.task.legacy_digest()}"
        for older in (agent_checkpoint_path(path, older_key), legacy_agent_checkpoint_path(path, older_key)):
            if not os.path.exists(ckpt) and os.path.exists(older):
                ckpt = older
        if os.path.exists(ckpt):
            try:
                self.model_optimizer.load(ckpt, same_space=True)
            except TunerError as e:
                logger.warning("%s: agent checkpoint ignored, the agent starts fresh: %s", self.task.name, e)
            else:
                logger.info("%s: agent resumed from %s (%d rounds)", self.task.name, ckpt,
                            self.model_optimizer.state_dict().get("rounds", 0))

    # ------------------------------------------------------------------ the proposer hooks
    @property
    def flattened(self) -> bool:
        """Whether this task stopped improving: ``patience`` trials without a new best and no
        local phase running (it never started, or it has no move left). Task schedulers hand the
        budget of a flattened task to tasks still improving."""
        return self.policy.flattened(self)

    @property
    def in_local_phase(self) -> bool:
        """Whether the Droplet-style local phase proposes the configs now."""
        return self.policy.applies("local")

    def next_batch(self, batch_size: int) -> list[tuple]:
        """Up to ``batch_size`` unvisited configs from the phases (:meth:`PhasePolicy.propose`)."""
        return self.policy.propose(batch_size, self)

    def update(self, configs: Sequence[tuple], results: Sequence[MeasureResult]) -> None:
        """AutoTVM's update (refit when due), the local phase's step, then tell the optimizer the
        measured configs (:meth:`PhasePolicy.observe`)."""
        self.policy.observe(configs, results, self)


__all__ = ["ModelBasedTuner", "submodular_pick"]
