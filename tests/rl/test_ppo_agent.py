"""The Chameleon PPO agent and RLOptimizer on real knob spaces with synthetic rewards."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from release.errors import TunerError
from release.rl import PPOAgent, PPOConfig, RLOptimizer

# PPO on one torch thread, per test (tests/conftest.py), not set at import
pytestmark = pytest.mark.usefixtures("one_torch_thread")


class Quadratic:
    """A synthetic cost model: score = 1 - 3 * mean((config / dims - target)^2), best at ``target``."""

    def __init__(self, space, seed=0):
        self.dims = space.dims
        self.target = np.random.default_rng(seed).uniform(0.1, 0.9, size=len(space.dims))
        self.calls = 0

    def best(self):
        return np.rint(self.target * self.dims).astype(np.int64).clip(0, self.dims - 1)

    def predict(self, xs):
        self.calls += 1
        xs = np.asarray(xs)
        return 1.0 - 3.0 * np.mean((xs / self.dims - self.target) ** 2, axis=1)


def test_mean_episode_reward_rises_over_rounds(conv_task):
    space = conv_task.config_space
    model = Quadratic(space, seed=1)
    agent = PPOAgent(space.dims, seed=0)
    rng = np.random.default_rng(0)
    stats = [agent.run_round(model.predict, space.sample(128, rng)) for _ in range(12)]
    rewards = np.array([s.mean_episode_reward for s in stats])
    # round 1 is a random walk from random starts (~0.55 here); by rounds 10-12 the agent walks towards the
    # optimum (score 1) and stays there longer (measured: +0.07 to +0.12 for seeds 0 and 1)
    assert rewards[-3:].mean() > rewards[0] + 0.04
    assert stats[-1].mean_length > 2 * stats[0].mean_length
    for s in stats:  # diagnostics are reported and sane
        assert s.transitions == s.mean_length * 128
        assert 0 <= s.clip_fraction <= 1 and np.isfinite(s.approx_kl) and s.entropy > 0
        assert s.extra["gradient_steps"] == 3 * int(np.ceil(s.transitions / 32))


def test_episode_mechanics(matmul_task):
    space = matmul_task.config_space
    cfg = PPOConfig(max_steps=7, n_episodes=16)
    agent = PPOAgent(space.dims, cfg, seed=0)
    seen = []
    s = agent.run_round(lambda c: np.zeros(len(c)), space.sample(16, np.random.default_rng(0)),
                        on_step=lambda c, r: seen.append(c.copy()), update=False)
    assert s.mean_length <= 7 and s.transitions <= 16 * 7
    for c in seen:  # every reached config is inside the knob ranges (moves are clamped)
        assert (c >= 0).all() and (c < space.dims).all()
    for a, b in zip(seen[1:], seen[2:]):  # each step moves each knob by at most one
        if len(a) == len(b):
            assert np.abs(a - b).max() <= 1
    moved = PPOAgent([3, 84, 84, 7, 4]).move(np.array([[0, 0, 83, 6, 3]]), np.array([[0, 2, 2, 1, 0]]))
    assert moved.tolist() == [[0, 1, 83, 6, 2]]


def test_seed_determinism(matmul_task):
    space = matmul_task.config_space
    outs = []
    for _ in range(2):
        opt = RLOptimizer(space, PPOConfig(n_episodes=32, max_steps=50), seed=7)
        outs.append([opt.find_maximums(Quadratic(space), 16, set()) for _ in range(2)])
    assert outs[0] == outs[1]


def test_rl_optimizer_returns_best_unvisited(conv_task):
    space = conv_task.config_space
    model = Quadratic(space, seed=2)
    opt = RLOptimizer(space, seed=0)
    for _ in range(3):
        top = opt.find_maximums(model, 64, set())
    assert len(top) == 64 == len(set(top))
    scores = model.predict(np.array(top))
    assert np.all(np.diff(scores) <= 1e-12)  # best first
    excl = set(top[:10])
    again = opt.find_maximums(model, 64, excl)
    assert not set(again) & excl and len(again) == 64
    assert all(c == space.canonical(c) for c in again)
    # better than the top decile of random configs under the same model (with the paper's settings the
    # plan is about as good as the top 64 of as many random queries: see docs/design/search-and-cost-model.md)
    rand = model.predict(space.sample(1000, np.random.default_rng(0)))
    assert model.predict(np.array(again)).mean() > np.quantile(rand, 0.9)
    st = opt.last_stats
    assert st.extra["distinct"] <= st.extra["queries"] <= 128 * 501


def test_start_from_measured(conv_task):
    space = conv_task.config_space
    model = Quadratic(space, seed=3)
    opt = RLOptimizer(space, PPOConfig(n_episodes=16, max_steps=1), seed=0, start_from_measured=0.5)
    best = tuple(int(x) for x in model.best())
    other = space.random_config(np.random.default_rng(1))
    failed = space.random_config(np.random.default_rng(2))
    opt.observe([other, best, failed], [1.0, 5.0, 0.0])
    starts = [tuple(int(x) for x in s) for s in opt._starts()]
    # half of the 16 episodes start at the measured configs that ran (failed ones never), the rest at random
    assert starts[:8] == [best, other] * 4
    assert failed not in starts[8:] and best not in starts[8:]


def test_bad_configuration():
    with pytest.raises(TunerError, match="no knobs"):
        PPOAgent([], seed=0)
    with pytest.raises(TunerError, match="PPOConfig.gamma=1.5"):
        PPOAgent([3, 4], PPOConfig(gamma=1.5))
    with pytest.raises(TunerError, match="reward='delta'"):
        PPOConfig(reward="delta").check()


def test_our_variants_pushed_boundary_and_query_budget(conv_task):
    space = conv_task.config_space
    model = Quadratic(space, seed=4)
    starts = space.sample(64, np.random.default_rng(0))
    paper = PPOAgent(space.dims, PPOConfig(n_episodes=64), seed=0).run_round(model.predict, starts, update=False)
    pushed = PPOAgent(space.dims, PPOConfig(n_episodes=64, boundary="pushed"), seed=0).run_round(
        model.predict, starts, update=False)
    # the paper's rule counts every knob sitting at an end (a 2-choice knob always does): episodes of a
    # random policy end after a few steps; counting only clamped moves makes them longer
    assert pushed.mean_length > 1.5 * paper.mean_length
    opt = RLOptimizer(space, PPOConfig(n_episodes=32, max_steps=20, max_minibatches=4), seed=0, min_queries=3000)
    opt.find_maximums(model, 8, set())
    st = opt.last_stats
    assert st.extra["queries"] >= 3000 and st.extra["rounds"] >= 2
    assert st.extra["gradient_steps"] == 4
    with pytest.raises(TunerError, match="boundary='edge'"):
        PPOConfig(boundary="edge").check()
    with pytest.raises(TunerError, match="min_queries=-1"):
        RLOptimizer(space, min_queries=-1)
