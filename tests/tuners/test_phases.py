"""The phases of ModelBasedTuner and the policy that picks the one that proposes next.

Real TVM knob spaces (``tiny.matmul.1``); measurements are told by hand (ask / tell with chosen run
times), so every step below is deterministic and nothing is built.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from release.cost_model import CostModel
from release.measure import MeasureResult
from release.optimizers import SimulatedAnnealingOptimizer
from release.tuners.local import LocalSearchConfig
from release.tuners.model_based import ModelBasedTuner
from release.tuners.phases import PhasePolicy, PlanPhase, RandomPhase, SeedPhase


class Bowl(CostModel):
    """A fixed score: configs near the middle of every knob score highest."""

    def __init__(self, dims):
        self.dims = np.asarray(dims)

    def fit(self, xs, ys, plan_size=64):
        pass

    def predict(self, xs):
        return -((np.asarray(xs) - self.dims / 2) ** 2).sum(axis=1)


def _tuner(task, plan_size=4, **kw):
    return ModelBasedTuner(task, Bowl(task.config_space.dims), SimulatedAnnealingOptimizer(task, n_iter=20, seed=0),
                           plan_size=plan_size, seed=0, **kw)


def _tell(tuner, configs, cost=lambda i, c: 1e-3):
    """Measure ``configs`` with run times ``cost(i, config)`` (s, two repeats each)."""
    tuner.session.tell(configs, [MeasureResult(config=c, costs=[cost(i, c)] * 2) for i, c in enumerate(configs)])


def test_rules_are_declared_in_order():
    assert [name for name, _ in PhasePolicy.RULES] == ["local", "seeds", "model", "random"]
    assert all(isinstance(why, str) and why for _, why in PhasePolicy.RULES)


def test_random_start_then_model_plans(matmul_task):
    """Cold: random configs until plan_size were measured, then the model's plans (random tail of eps)."""
    tuner = _tuner(matmul_task, plan_size=4)
    assert tuner.phase == "random" and tuner.policy.chain() == [tuner.policy.random]
    first = tuner.session.ask(4)
    assert len(first) == 4 and tuner.random_picks == 4 and tuner.rounds == 0
    _tell(tuner, first)
    assert tuner.rounds == 1 and tuner.policy.model.pending  # fitted; the plan is made at the next batch
    second = tuner.session.ask(4)
    assert tuner.phase in ("model", "random") and tuner.policy.plans == 1
    assert second == [c for c in tuner.trials_plan if c not in first][:4]  # eps = int(0.05 * 4) = 0


def test_seeds_first_and_the_batch_filled_at_random(matmul_task):
    space = matmul_task.config_space
    seeds = [space.get(0), space.get(space.size - 1)]
    tuner = _tuner(matmul_task, plan_size=4, seeds=seeds)
    assert tuner.phase == "seeds" and tuner.seeds == seeds
    batch = tuner.session.ask(4)
    assert batch[:2] == seeds and len(set(batch)) == 4 and tuner.random_picks == 2  # seeds, then the warm-up
    assert tuner.phase == "random"  # the seeds are used up; the random start goes on until the first fit


def test_plan_phase_hands_out_the_list_then_its_random_tail(matmul_task):
    space = matmul_task.config_space
    state = SimpleNamespace(space=space, visited={space.get(1)})
    draws = iter([space.get(i) for i in range(100, 110)])  # the random configs, in order
    random = RandomPhase(lambda k: [next(draws)])
    plan = PlanPhase(random, [space.get(i) for i in range(6)], eps=2)
    assert plan.propose(3, state) == [space.get(0), space.get(2), space.get(3)]  # the visited one skipped
    assert plan.propose(10, state) == [space.get(100), space.get(101)]  # the last 2 slots of 6 are random
    assert plan.exhausted and plan.propose(4, state) == [] and random.picks == 2
    # a visited config in the random tail uses its slot up: one random pick, not two
    tail = PlanPhase(random, [space.get(0), space.get(1)], eps=2)
    assert tail.propose(4, state) == [space.get(102)] and tail.exhausted and random.picks == 3


def test_seed_phase_anchors_the_best_within_one_knob(matmul_task):
    space = matmul_task.config_space
    seed = space.get(0)
    phase = SeedPhase(RandomPhase(lambda k: []), [seed])
    moved = list(seed)
    moved[0] = 1
    assert phase.anchors(seed) and phase.anchors(tuple(moved)) and phase.anchors(None)
    moved[1] = 1
    assert not phase.anchors(tuple(moved))


def test_local_phase_after_patience_proposes_alone(matmul_task):
    """The best unchanged for `patience` trials: the local phase's one-knob moves from the best, and the
    cost model is not refitted while it runs; the task is not flattened while it has moves."""
    tuner = _tuner(matmul_task, plan_size=4, local_search=LocalSearchConfig(patience=4))
    first = tuner.session.ask(4)
    _tell(tuner, first, cost=lambda i, c: 1e-4 if i == 0 else 1e-3)  # the first is the best
    best = tuner.best_config
    assert tuner.phase != "local"  # 3 trials since the best
    second = tuner.session.ask(4)
    _tell(tuner, second)
    assert tuner.in_local_phase and tuner.phase == "local" and tuner.local_started_at == 8
    assert tuner.local.centers == [best] and not tuner.flattened
    fits = tuner.rounds
    moves = tuner.session.ask(4)
    assert moves and all(sum(a != b for a, b in zip(c, best)) == 1 for c in moves)
    _tell(tuner, moves)
    assert tuner.rounds == fits  # no refit during the local phase


def test_every_setting_is_in_the_config_and_nothing_is_set_after(matmul_task):
    from release.tuners.xgb import XGBTuner

    tuner = _tuner(matmul_task, plan_size=4, seed_explore=0.5, local_search=True)
    cfg = tuner.config
    assert (cfg.plan_size, cfg.seed_explore, cfg.local_search, cfg.name) == (4, 0.5, True, None)
    assert tuner.name == "model-based" and tuner.patience == 4
    made = ModelBasedTuner.from_preset("release", matmul_task, seed=0, plan_size=4)
    assert made.config.name == "release" and made.name == "release" and made.warm_by_default
    assert XGBTuner(matmul_task, plan_size=4).config.name is None
    for attr in ("plan_size", "cost_model", "seed_explore", "local", "random_picks", "seeds"):
        with pytest.raises(AttributeError):
            setattr(tuner, attr, None)  # read off the phases: set through the config only
