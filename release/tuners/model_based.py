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

    Raises
    ------
    TunerError
        ``plan_size < 1``, ``diversity_filter_ratio < 1``, or an optimizer or sampler that is not
        one (the message names the base class to subclass).
    """

    name = "model-based"

    def __init__(self, task, cost_model, model_optimizer, plan_size: int = 64,
                 diversity_filter_ratio: float | None = None, sampler=None, seed: int | None = None):
        super().__init__(task, seed=seed)
        check_plan_size(plan_size)
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
        if os.path.exists(ckpt):
            try:
                self.model_optimizer.load(self.agent_checkpoint, same_space=True)
            except TunerError as e:
                logger.warning("%s: agent checkpoint ignored, the agent starts fresh: %s", self.task.name, e)
            else:
                logger.info("%s: agent resumed from %s (%d rounds)", self.task.name, self.agent_checkpoint,
                            self.model_optimizer.state_dict().get("rounds", 0))

    # ------------------------------------------------------------------ the proposer hooks
    def next_batch(self, batch_size: int) -> list[tuple]:
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
                out.extend(c for c in super().next_batch(1) if c not in out)
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
        if len(self.xs) >= self.next_update and self.flops_max > 1e-6:
            self._refit_and_plan()
        if self.xs:
            self.model_optimizer.observe(self.xs, self.ys)

    def _refit_and_plan(self) -> None:
        """Fit the cost model (booked as fit_s); the plan is made at the next ``next_batch``."""
        xs = np.asarray(self.xs, dtype=np.int64)
        ys = np.asarray(self.ys, dtype=np.float64)
        self.cost_model.fit(xs, ys, self.plan_size)
        self.train_ct += 1
        self._plan_pending = True
        self.next_update = float("inf")  # set when the plan is made

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
