"""Seeds that do not anchor: while the best is still a seed's, a share of every round is random."""

from __future__ import annotations

import numpy as np
import pytest

from release.cost_model import CostModel
from release.errors import TunerError
from release.measure import MeasureResult
from release.optimizers import SimulatedAnnealingOptimizer
from release.tuners.model_based import ModelBasedTuner


class Bowl(CostModel):
    """A fixed score: configs near the middle of every knob score highest."""

    def __init__(self, dims):
        self.dims = np.asarray(dims)

    def fit(self, xs, ys, plan_size=64):
        pass

    def predict(self, xs):
        return -((np.asarray(xs) - self.dims / 2) ** 2).sum(axis=1)


def _two_rounds(task, explore, seed_cost=1e-5):
    space = task.config_space
    seeds = [space.get(0), space.get(space.size - 1)]
    tuner = ModelBasedTuner(task, Bowl(space.dims), SimulatedAnnealingOptimizer(task, n_iter=20, seed=0), plan_size=8,
                            seed=0, seeds=seeds, seed_explore=explore)
    s = tuner.session
    first = s.ask(8)
    assert first[:2] == seeds  # the seeds are measured first
    s.tell(first, [MeasureResult(config=c, costs=[seed_cost if c in seeds else 1e-3]) for c in first])
    before = tuner.random_picks
    second = s.ask(8)
    return tuner, tuner.random_picks - before, second


def test_a_share_of_the_round_stays_random_while_the_best_is_a_seed(matmul_task):
    tuner, randoms, second = _two_rounds(matmul_task, 0.25)
    assert tuner.anchored_rounds == 1 and randoms == 2 and len(second) == 8  # 25% of a plan of 8
    tuner, randoms, _ = _two_rounds(matmul_task, 0.0)
    assert tuner.anchored_rounds == 0 and randoms == 0  # AutoTVM's 5% of 8 rounds down to none
    # a best found away from the seeds: the round is the model's again
    tuner, randoms, _ = _two_rounds(matmul_task, 0.25, seed_cost=1e-2)
    assert tuner.anchored_rounds == 0 and randoms == 0


def test_seed_explore_outside_zero_one_is_refused(matmul_task):
    with pytest.raises(TunerError, match="seed_explore=1.5 must be a share between 0 and 1"):
        _two_rounds(matmul_task, 1.5)
