"""Simulated annealing (AutoTVM's defaults, vectorized) on real knob spaces with synthetic costs."""

from __future__ import annotations


import numpy as np
import pytest

from release.errors import TunerError
from release.optimizers import SimulatedAnnealingOptimizer


class Peak:
    """Synthetic cost over a knob space: 1 at ``target``, falling with the normalized L1 distance.

    The optimum is unique (on canonical configs of ``target``'s design space)."""

    def __init__(self, space, target):
        self.space = space
        self.target = np.asarray(space.canonical(target))
        self.calls = 0

    def predict(self, xs):
        self.calls += len(xs)
        xs = self.space.canonicalize(np.asarray(xs))
        return 1.0 - (np.abs(xs - self.target) / self.space.dims).sum(axis=1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sa_finds_the_optimum_of_a_synthetic_cost(matmul_task, seed):
    space = matmul_task.config_space  # tiny.matmul.1: 5 knobs, 592,704 configs
    target = space.random_config(np.random.default_rng(100 + seed))
    model = Peak(space, target)
    sa = SimulatedAnnealingOptimizer(matmul_task, seed=seed)  # AutoTVM defaults: 500 steps, 128 chains
    plan = sa.find_maximums(model, 64, set())
    assert plan[0] == tuple(space.canonical(target)), "the best config returned is the optimum"
    assert len(plan) == 64 == len(set(plan))
    scores = model.predict(np.array(plan))
    assert np.all(np.diff(scores) <= 1e-12), "best first"
    # within its budget: at most 128 x 501 queries, ~11% of the space
    assert sa.last_stats["queries"] <= 128 * 501 < space.size / 9
    assert model.calls == sa.last_stats["queries"] + 64  # the work of one round, bounded above: not its seconds


def test_sa_beats_random_search_with_the_same_budget(conv_task):
    space = conv_task.config_space  # resnet18.conv2d.2: 9 knobs, ~2e9 configs
    target = space.random_config(np.random.default_rng(42))
    model = Peak(space, target)
    sa = SimulatedAnnealingOptimizer(conv_task, seed=0)
    plan = sa.find_maximums(model, 64, set())
    best_sa = model.predict(np.array(plan[:1]))[0]
    budget = sa.last_stats["queries"]
    best_random = model.predict(space.sample(budget, np.random.default_rng(0))).max()
    assert best_sa > best_random + 0.05
    assert best_sa > 0.95  # a few index steps from the optimum


def test_sa_excludes_visited_and_persists_chains(conv_task):
    space = conv_task.config_space
    target = space.random_config(np.random.default_rng(1))
    model = Peak(space, target)
    sa = SimulatedAnnealingOptimizer(space, n_iter=200, seed=1)
    first = sa.find_maximums(model, 16, set())
    chains = sa.points.copy()
    second = sa.find_maximums(model, 16, set(first))
    assert not set(first) & set(second)
    assert tuple(space.canonical(target)) in first and tuple(space.canonical(target)) not in second
    assert chains.shape == (128, space.n_knobs)
    # deterministic under a seed
    again = SimulatedAnnealingOptimizer(space, n_iter=200, seed=1).find_maximums(Peak(space, target), 16, set())
    assert again == first


def test_random_walk_changes_exactly_one_active_knob(conv_task):
    space = conv_task.config_space
    sa = SimulatedAnnealingOptimizer(space, seed=0)
    pts = space.sample(2000, np.random.default_rng(0))
    new = sa.random_walk(pts)
    diff = (new != pts).sum(axis=1)
    assert np.all(diff == 1)
    assert np.all(new < space.dims) and np.all(new >= 0)
    assert np.array_equal(space.canonicalize(new), new)


def test_rerank_uses_program_scores(conv_task):
    from release.cost_model import CostModel
    from release.cost_model.xgb import rerank_by_program

    space = conv_task.config_space

    class TwoLevel(Peak, CostModel):
        reranks = True

        def predict_program(self, xs):
            # reverse the fast order, and call every other config illegal
            s = -self.predict(xs)
            s[1::2] = -np.inf
            return s

        def rerank(self, configs):
            return rerank_by_program(self, list(configs))

    model = TwoLevel(space, space.random_config(np.random.default_rng(5)))
    sa = SimulatedAnnealingOptimizer(space, n_iter=100, seed=0)
    plan = sa.find_maximums(model, 10, set())
    assert len(plan) == 10
    fast = model.predict(np.array(plan))
    assert np.all(np.diff(fast) >= -1e-12), "ordered by the program scores (reverse of the fast ones)"
    assert len(set(plan)) == 10 and all(space.canonical(c) == c for c in plan)
    assert 0 < sa.last_stats["rerank_seconds"] <= sa.last_stats["seconds"]  # the rerank ran, inside the call


@pytest.mark.parametrize("kw,fragment", [(dict(n_iter=0), "n_iter=0"), (dict(parallel_size=-1), "parallel_size=-1"),
                                         (dict(early_stop=0), "early_stop=0"), (dict(rerank_ratio=0.5), "rerank_ratio")])
def test_bad_sa_arguments(matmul_task, kw, fragment):
    with pytest.raises(TunerError, match=fragment):
        SimulatedAnnealingOptimizer(matmul_task, **kw)
