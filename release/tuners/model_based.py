"""AutoTVM's model-based tuning loop (``ModelBasedTuner``), with a sampler hook for Chameleon.

One round (AutoTVM ``ModelBasedTuner``, Chameleon's adaptive sampling as an option):

1. ``update``: every measured config joins the training set (failed ones with throughput 0).
   When the training set reaches ``next_update`` and something ran, ``cost_model.fit(xs, ys)``.
2. ``model_optimizer.find_maximums(cost_model, plan_size, visited)`` proposes the *plan*: the
   ``plan_size`` unvisited configs with the highest predicted score (optionally
   ``plan_size * diversity_filter_ratio`` candidates thinned by a submodular diversity pick).
3. ``sampler`` (:class:`release.sampling.PassThroughSampler`: the plan as is; Chameleon:
   k-means + sample synthesis) picks what to measure. ``next_update`` then grows by the number of configs picked (AutoTVM:
   ``plan_size``; Chameleon: the ``k`` of the round).
4. ``next_batch`` makes the plan (booked as search time, the fit as fitting time) and hands out
   the picked configs in order; the last ``int(0.05 * plan_size)`` picks of each round (with a
   sampler: 5% of the configs it picked) are random unvisited configs (AutoTVM's epsilon-greedy
   rule).

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

Local exploitation (``local_search=True``): once ``patience`` trials passed without a
new best, a Droplet-style coordinate search around the best measured config
(:class:`release.tuners.local.DropletSearch`) proposes the configs; when it has no move left the
model's plans resume. :attr:`ModelBasedTuner.flattened` tells a task scheduler that the task
stopped improving (see :mod:`release.scheduler`).
"""

from __future__ import annotations

import logging
import os
from typing import Sequence

import numpy as np

from ..cost_model.base import CostModel, as_cost_model
from ..errors import TunerError, check_plan_size
from ..measure.measure import MeasureResult
from ..optimizers.base import ModelOptimizer
from ..sampling.base import PassThroughSampler, Sampler
from .simple import RandomTuner

logger = logging.getLogger(__name__)


class ModelBasedTuner(RandomTuner):
    """The model-based tuner (AutoTVM ``ModelBasedTuner``), composed of its parts.

    Every cost-model-guided tuner is this class with other parts: ``xgb``, ``sa-as``, ``rl``,
    ``release`` and ``release+`` are recipes of :mod:`release.tuners.presets`.

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
    random_picks : int
        Random configs handed out (the warm-up round before the first fit, and the
        epsilon-greedy share of every plan).
    warm_explore : float
        Share of random configs in the first round of a warm start (default 0.5; 0: the round is
        the transferred model's plan plus the epsilon share).
    local : DropletSearch or None
        The local phase's state once it started.
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
        super().__init__(task, seed=seed)
        check_plan_size(plan_size)
        for what, share in (("seed_explore", seed_explore), ("warm_explore", warm_explore)):
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
        self.cost_model: CostModel = as_cost_model(cost_model)
        self.model_optimizer = model_optimizer
        self.plan_size = int(plan_size)
        self.diversity_filter_ratio = diversity_filter_ratio
        self.sampler = sampler
        self.xs: list[tuple] = []
        self.ys: list[float] = []
        self.flops_max = 0.0
        self.trials_plan: list[tuple] = []
        self.trial_pt = 0
        self.train_ct = 0
        self.next_update = self.plan_size
        self.eps = int(0.05 * self.plan_size)
        self.eps_round = self.eps
        self._plan_pending = False
        self.agent_checkpoint: str | None = None
        self.random_picks = 0
        self._warm_done = False
        self.warm_explore = float(warm_explore)
        self._warm_first_plan = False
        from .local import LocalSearchConfig

        if local_search is True:
            local_search = LocalSearchConfig()
        if local_search not in (False, None) and not isinstance(local_search, LocalSearchConfig):
            raise TunerError(f"local_search={local_search!r}: give True, False or a release.tuners.local.LocalSearchConfig")
        self.local_config = local_search or None
        if self.local_config is not None:
            pat = self.local_config.patience
            if pat is not None and (not isinstance(pat, (int, np.integer)) or pat < 1):
                raise TunerError(f"local search patience={pat!r} must be a positive number of trials or None")
        self.patience = int((self.local_config.patience if self.local_config else None) or self.plan_size)
        self.local = None
        self.local_started_at: int | None = None
        self._costs: dict[tuple, list] = {}  # successful config -> repeat costs (the local phase's t-test)
        self.seed_explore = float(seed_explore)
        self.anchored_rounds = 0
        self.seeds = [self.space.check(c) for c in seeds]
        if self.seeds:  # measured first, then random configs until the first fit (no epsilon share among them)
            self.trials_plan, self.eps_round = list(self.seeds), 0

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
        ``name`` (a preset's) names the tuner in logs; the recipe is :attr:`config`, what it read from a
        knowledge base :attr:`knowledge_read`.

        Raises
        ------
        TunerError
            A bad recipe (see :meth:`release.tuners.presets.ModelBasedConfig.check`).
        """
        tuner = cls.__new__(cls)
        tuner._build(task, config, seed)
        if name is not None:
            from . import TUNERS, tuner_class

            tuner.name = name
            if name in TUNERS:
                tuner.warm_by_default = tuner_class(name).warm_by_default
        return tuner

    def _build(self, task, config, seed: int | None) -> None:
        """Initialize from a recipe: the parts from :func:`release.tuners.presets.build_components`,
        then :meth:`__init__` with them; :attr:`config` and :attr:`knowledge_read` set (the presets'
        classes and :meth:`from_config` all build this way)."""
        from .presets import build_components

        cost_model, optimizer, sampler, seeds, read = build_components(task, config, seed)
        ModelBasedTuner.__init__(self, task, cost_model, optimizer, plan_size=config.plan_size,
                                 diversity_filter_ratio=config.diversity_filter_ratio, sampler=sampler, seed=seed,
                                 local_search=config.local_search, seeds=seeds, seed_explore=config.seed_explore,
                                 warm_explore=config.warm_explore)
        self.config, self.knowledge_read = config, read

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
        from ..optimizers.ppo import agent_checkpoint_path

        ckpt = agent_checkpoint_path(path, self.task.key)
        if ckpt == self.agent_checkpoint:
            return  # tune() called again on the same log (tune-model's chunks): the agent is already current
        self.agent_checkpoint = ckpt
        older = agent_checkpoint_path(path, f"{self.task.name}/{self.task.legacy_digest()}")
        if not os.path.exists(ckpt) and os.path.exists(older):  # named by an older release's key: migrated
            ckpt = older  # read from there; saved under the current name from now on
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
        if self.best_config is None or self.trials - self.best_iter < self.patience:
            return False
        return self.local is None or self.local.exhausted

    @property
    def in_local_phase(self) -> bool:
        """Whether the Droplet-style local phase proposes the configs now."""
        return self.local is not None and not self.local.exhausted

    def next_batch(self, batch_size: int) -> list[tuple]:
        if self.in_local_phase:
            out = self.local.next(batch_size, self.visited)
            if out:
                return out
            logger.info("%s: local search has no move left after %d moves (%d accepted); the model's plans resume",
                        self.task.name, self.local.moves, self.local.accepted)
            self._refit_and_plan()
        if not self._warm_done and self.train_ct == 0 and self.cost_model.warm:
            self._warm_done = True  # fit on the knowledge (and any resumed records) before the first round
            self._warm_first_plan = len(self.xs) < self.plan_size  # little own data: explore beside the knowledge
            self._refit_and_plan()
            if not self.cost_model.fitted:
                self._plan_pending, self.next_update = False, self.plan_size
        if self._plan_pending:  # planning is search: booked as search_s by the session
            self._plan_pending = False
            self._make_plan()
        out: list[tuple] = []
        eps = self.eps_round
        while len(out) < batch_size and len(self.visited) + len(out) < self.space.size:
            while self.trial_pt < len(self.trials_plan) and (
                self.trials_plan[self.trial_pt] in self.visited or self.trials_plan[self.trial_pt] in out
            ):
                self.trial_pt += 1
            if self.trial_pt >= len(self.trials_plan) - eps:
                # no plan yet, or the epsilon-greedy tail of the plan: a random unvisited config
                got = [c for c in super().next_batch(1) if c not in out]
                self.random_picks += len(got)
                out.extend(got)
                if self.trial_pt < len(self.trials_plan):
                    self.trial_pt += 1
            else:
                out.append(self.trials_plan[self.trial_pt])
                self.trial_pt += 1
        return out

    def update(self, configs: Sequence[tuple], results: Sequence[MeasureResult]) -> None:
        """AutoTVM's update (refit when due), then tell the optimizer the measured configs."""
        for res in results:
            flops = self.task.flop / res.mean_cost if res.ok and res.mean_cost > 0 else 0.0
            self.xs.append(tuple(res.config))
            self.ys.append(flops)
            self.flops_max = max(self.flops_max, flops)
            if res.ok and res.costs:
                self._costs[tuple(res.config)] = list(res.costs)
        if self.local_config is not None:
            self._update_local(results)
        if self.in_local_phase:
            pass  # the local phase proposes; the model is refitted when it ends
        elif len(self.xs) >= self.next_update and self.flops_max > 1e-6:
            self._refit_and_plan()
        if self.xs:
            self.model_optimizer.observe(self.xs, self.ys)

    def _update_local(self, results) -> None:
        """Start the local phase after ``patience`` trials without a new best; feed it results."""
        if self.in_local_phase:
            if self.local.observe(results, self.visited):
                logger.info("%s: local search moved to %s (%.4g s)", self.task.name, self.local.center,
                            float(np.mean(self.local.center_costs)))
            return
        if self.best_config is None or self.trials - self.best_iter < self.patience:
            return
        if self.local is not None and self.local.exhausted and self.local.center == self.best_config:
            return  # this best's neighbourhood is used up
        from .local import DropletSearch

        costs = self._costs.get(tuple(self.best_config), [self.best_cost])
        self.local = DropletSearch(self.space, self.local_config,
                                   score=self.cost_model.predict if self.train_ct else None)
        self.local.start(self.best_config, costs, self.visited)
        self.local_started_at = self.trials
        logger.info("%s: best unchanged for %d trials: local search from %s", self.task.name,
                    self.trials - self.best_iter, self.best_config)

    def _refit_and_plan(self) -> None:
        """Fit the cost model (booked as fit_s); the plan is made at the next ``next_batch``."""
        xs = np.asarray(self.xs, dtype=np.int64)
        ys = np.asarray(self.ys, dtype=np.float64)
        self.cost_model.fit(xs, ys, self.plan_size)
        self.train_ct += 1
        self._plan_pending = True
        self.next_update = float("inf")  # set when the plan is made

    def _anchored(self) -> bool:
        """Whether the best measured config is a seed or one knob away from one (the search has not
        yet found anything better outside the seeds' neighbourhood)."""
        best = self.best_config
        if best is None:
            return True
        return any(sum(a != b for a, b in zip(best, s)) <= 1 for s in self.seeds)

    def _make_plan(self) -> None:
        """Ask the optimizer for the plan, thin it (diversity filter) and sample it (sampler)."""
        if self.diversity_filter_ratio:
            cands = self.model_optimizer.find_maximums(
                self.cost_model, int(self.plan_size * self.diversity_filter_ratio), self.visited)
            plan = submodular_pick(cands, self.plan_size)
        else:
            plan = self.model_optimizer.find_maximums(self.cost_model, self.plan_size, self.visited)
        plan = [tuple(c) for c in plan]
        plan = list(self.sampler.sample(plan, self.space, self.visited, self.plan_size))
        # epsilon-greedy share (AutoTVM: 5% of a 64-config plan = 3; with a sampler: 5% of its picks)
        self.eps_round = self.sampler.epsilon_count(len(plan), self.plan_size)
        if self.seeds and self.seed_explore and self._anchored():  # the best is still a seed's: explore beside it
            self.eps_round = max(self.eps_round, int(round(self.seed_explore * len(plan))))
            self.anchored_rounds += 1
        if self._warm_first_plan:  # the first warm round: part random, so the own model sees the whole space
            self._warm_first_plan = False
            self.eps_round = max(self.eps_round, int(round(self.warm_explore * len(plan))))
        self.trials_plan = plan
        self.trial_pt = 0
        self.next_update = len(self.xs) + max(1, len(plan))
        if self.agent_checkpoint is not None:
            self.model_optimizer.save(self.agent_checkpoint)
        stats = self.model_optimizer.stats
        logger.debug("%s: refit %d on %d samples, plan of %d", self.task.name, self.train_ct, len(self.xs), len(plan))
        if "mean_reward" in stats:
            logger.info("%s round %d: agent reward/step %.4f, %d queries (%d distinct), plan %d, k=%s",
                        self.task.name, self.train_ct, stats["mean_reward"], stats.get("queries", 0),
                        stats.get("distinct", 0), len(self.trials_plan), self.sampler.last_k)


def submodular_pick(candidates: Sequence[tuple], num: int, knob_weight: float = 1.0) -> list[tuple]:
    """AutoTVM's diversity filter with zero scores: greedily pick configs that add the most
    unseen knob values (``submodular_pick(0 * scores, knobs, num, knob_weight=1)``), keeping
    candidate order among ties."""
    cands = [tuple(c) for c in candidates]
    if len(cands) <= num:
        return cands
    chosen: list[int] = []
    seen: list[set] = [set() for _ in range(len(cands[0]))]
    remaining = list(range(len(cands)))
    for _ in range(num):
        best_i, best_gain = remaining[0], -1.0
        for i in remaining:
            gain = knob_weight * sum(1 for j, v in enumerate(cands[i]) if v not in seen[j])
            if gain > best_gain:
                best_i, best_gain = i, gain
        chosen.append(best_i)
        remaining.remove(best_i)
        for j, v in enumerate(cands[best_i]):
            seen[j].add(v)
    return [cands[i] for i in chosen]
