"""AutoTVM's model-based tuning loop (``ModelBasedTuner``), with a sampler hook for Chameleon.

One round (AutoTVM ``ModelBasedTuner``, Chameleon's adaptive sampling as an option):

1. ``update``: every measured config joins the training set (failed ones with throughput 0).
   When the training set reaches ``next_update`` and something ran, ``cost_model.fit(xs, ys)``.
2. ``model_optimizer.find_maximums(cost_model, plan_size, visited)`` proposes the *plan*: the
   ``plan_size`` unvisited configs with the highest predicted score (optionally
   ``plan_size * diversity_filter_ratio`` candidates thinned by a submodular diversity pick).
3. ``sampler`` (None = measure the plan as is; Chameleon: k-means + sample synthesis) picks
   what to measure. ``next_update`` then grows by the number of configs picked (AutoTVM:
   ``plan_size``; Chameleon: the ``k`` of the round).
4. ``next_batch`` makes the plan (booked as search time, the fit as fitting time) and hands out
   the picked configs in order; the last ``int(0.05 * plan_size)`` picks of each round (with a
   sampler: 5% of the configs it picked) are random unvisited configs (AutoTVM's epsilon-greedy
   rule).
"""

from __future__ import annotations

import logging
from typing import Protocol, Sequence

import numpy as np

from ..errors import TunerError
from ..measure.measure import MeasureResult
from .simple import RandomTuner

logger = logging.getLogger(__name__)


class CostModel(Protocol):
    """What ``ModelBasedTuner`` needs of a cost model."""

    def fit(self, xs: np.ndarray, ys: np.ndarray, plan_size: int) -> None:
        """Train on configs ``xs`` (int, shape (n, n_knobs)) and throughputs ``ys`` (FLOP/s, shape (n,))."""

    def predict(self, xs: np.ndarray) -> np.ndarray:
        """Scores of configs ``xs`` (shape (n, n_knobs)) -> shape (n,), higher = faster."""


class ModelOptimizer(Protocol):
    """What ``ModelBasedTuner`` needs of a model optimizer (simulated annealing, PPO, ...)."""

    def find_maximums(self, model: CostModel, num: int, exclusive: set) -> list[tuple]:
        """Up to ``num`` configs not in ``exclusive`` with the highest ``model.predict``, best first."""


class Sampler(Protocol):
    """What ``ModelBasedTuner`` needs of a sampler (Chameleon's adaptive sampling)."""

    def sample(self, candidates: Sequence[tuple], space, visited: set, plan_size: int) -> list[tuple]:
        """Pick the configs to measure from ``candidates`` (the plan, best first): no visited,
        invalid or duplicate config, at most ``plan_size``."""


class ModelBasedTuner(RandomTuner):
    """Base of cost-model-guided tuners (AutoTVM ``ModelBasedTuner``).

    Parameters
    ----------
    task : Task
    cost_model : CostModel
    model_optimizer : ModelOptimizer
    plan_size : int
        Configs proposed per round (default 64, AutoTVM's).
    diversity_filter_ratio : float, optional
        If set, ask the optimizer for ``plan_size * ratio`` candidates and keep a diverse
        ``plan_size`` of them (AutoTVM's ``submodular_pick``).
    sampler : Sampler, optional
        Picks what to measure from the plan (None: the whole plan).
    seed : int, optional

    Raises
    ------
    TunerError
        ``plan_size < 1`` or ``diversity_filter_ratio < 1``.
    """

    name = "model-based"

    def __init__(self, task, cost_model, model_optimizer, plan_size: int = 64,
                 diversity_filter_ratio: float | None = None, sampler=None, seed: int | None = None):
        super().__init__(task, seed=seed)
        if not isinstance(plan_size, (int, np.integer)) or plan_size < 1:
            raise TunerError(f"plan_size={plan_size!r} must be an integer >= 1")
        if diversity_filter_ratio is not None and diversity_filter_ratio < 1:
            raise TunerError(f"diversity_filter_ratio={diversity_filter_ratio!r} must be >= 1 or None")
        self.cost_model = cost_model
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

    def next_batch(self, batch_size: int) -> list[tuple]:
        if self._plan_pending:  # planning is search: booked as search_s by the tuner loop
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
        for res in results:
            flops = self.task.flop / res.mean_cost if res.ok and res.mean_cost > 0 else 0.0
            self.xs.append(tuple(res.config))
            self.ys.append(flops)
            self.flops_max = max(self.flops_max, flops)
        if len(self.xs) >= self.next_update and self.flops_max > 1e-6:
            self._refit_and_plan()

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
        if self.sampler is not None:
            plan = list(self.sampler.sample(plan, self.space, self.visited, self.plan_size))
            # epsilon-greedy share of the picked configs (AutoTVM: 5% of a 64-config plan = 3)
            self.eps_round = int(0.05 * len(plan))
        else:
            self.eps_round = self.eps
        self.trials_plan = plan
        self.trial_pt = 0
        self.next_update = len(self.xs) + max(1, len(plan))
        logger.debug("%s: refit %d on %d samples, plan of %d", self.task.name, self.train_ct, len(self.xs), len(plan))


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
