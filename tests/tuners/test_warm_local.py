"""Tuning that starts warm and ends local, on replayed measurements.

Measurements come from :mod:`replay` (real TVM replays of every config; run times from the committed
log of ``tiny.matmul.1`` or a fixed synthetic function), so every count below is deterministic. The
knowledge base lives in a temporary folder, never the user's cache.
"""

from __future__ import annotations

import pytest

from replay import ReplayMeasurer

from release.errors import TunerError
from release.knowledge import KnowledgeBase
from release.knowledge.use import log_to_knowledge
from release.measure.measure import MeasureResult
from release.tuners.local import DropletSearch, LocalSearchConfig, significantly_faster


def _small_agent():
    from release.rl import PPOConfig

    return PPOConfig(n_episodes=64, max_steps=100)


def _tuner(name, task, **kw):
    from release.tuners import get_tuner

    if name in ("release", "rl"):
        kw.setdefault("ppo_config", _small_agent())
    if "knowledge" in kw:
        kw.setdefault("knowledge_use", "model")  # these tests are about the transferred cost model
    return get_tuner(name, task, **kw)


@pytest.mark.parametrize("name", ["xgb", "release"])
def test_second_run_with_knowledge_measures_fewer_random_configs(name, matmul_task, tmp_path, one_torch_thread):
    """The issue's Done-when: run 1 (cold, empty base) measures plan_size random configs before its model
    guides it and adds its records to the base; run 2 of the same task (another seed, a fresh log) starts
    from the transferred model and measures only the epsilon-greedy share at random. Simulated annealing
    (xgb) and the PPO agent (release) both search against it."""
    plan, n_trial = 20, 60  # eps = int(0.05 * 20) = 1 random pick per plan of 20
    kdir = str(tmp_path / "kb")
    cold = _tuner(name, matmul_task, plan_size=plan, seed=0, knowledge=kdir)
    assert cold.knowledge_used == (0, 0) and not cold.cost_model.warm
    cb = log_to_knowledge(kdir)
    cold.tune(n_trial, ReplayMeasurer(matmul_task), callbacks=[cb])
    assert cb.added == n_trial == len(KnowledgeBase(kdir).records(target_kind=matmul_task.target_json))
    # the warm-up round (plan_size random configs), then the epsilon share of each later plan: 5% of the
    # plan of 20 for xgb's pass-through sampler, 5% of fewer than 20 picks (none) for release's adaptive one
    eps = int(0.05 * plan) if name == "xgb" else 0
    assert cold.random_picks == plan + (cold.rounds - 1) * eps

    warm = _tuner(name, matmul_task, plan_size=plan, seed=1, knowledge=kdir)
    assert warm.cost_model.warm and warm.knowledge_used == (n_trial, 1)
    warm.tune(n_trial, ReplayMeasurer(matmul_task))
    assert warm.trials == n_trial
    assert warm.rounds >= 3  # fitted before its first round, then after each plan
    if name == "xgb":  # plans of 20 whatever the model says: fits before trial 1 and after 20, 40, 60
        assert warm.rounds == 4 and cold.rounds == 3
        assert warm.random_picks == round(warm.warm_explore * plan) + (warm.rounds - 2) * eps
    assert warm.random_picks < cold.random_picks
    # half of the first warm round (warm_explore 0.5), then the epsilon-greedy share: at most one random
    # pick per plan (AutoTVM's 5%, kept)
    assert warm.random_picks <= round(warm.warm_explore * plan) + warm.rounds * max(1, int(0.05 * plan))
    assert warm.cost_model.own_weight > 0  # its own data entered the model


@pytest.mark.parametrize("share, random_first_round", [(0.5, 10), (0.0, 1), (1.0, 20)])
def test_first_warm_round_is_part_random(share, random_first_round, matmul_task, tmp_path):
    """A round planned by the transferred model alone gives the own model data of one region only
    (measured: xgb warm stayed at 193 GFLOPS on a held-out conv2d, cold reached 295), so the first warm
    round takes warm_explore of its configs at random; later rounds keep AutoTVM's epsilon share."""
    kdir = str(tmp_path / "kb")
    _tuner("xgb", matmul_task, plan_size=20, seed=0).tune(40, ReplayMeasurer(matmul_task),
                                                            callbacks=[log_to_knowledge(kdir)])
    warm = _tuner("xgb", matmul_task, plan_size=20, seed=1, knowledge=kdir, warm_explore=share)
    warm.tune(20, ReplayMeasurer(matmul_task))
    assert warm.cost_model.warm and warm.random_picks == random_first_round
    warm.tune(40, ReplayMeasurer(matmul_task))
    assert warm.random_picks == random_first_round + 1  # the second round: int(0.05 * 20) = 1


def test_warm_explore_out_of_range_is_refused(matmul_task, tmp_path):
    from release.errors import TunerError

    kdir = str(tmp_path / "kb")
    _tuner("xgb", matmul_task, plan_size=20, seed=0).tune(20, ReplayMeasurer(matmul_task),
                                                            callbacks=[log_to_knowledge(kdir)])
    for bad in (1.5, -0.1, "half"):  # refused when the tuner is made, before any measurement
        with pytest.raises(TunerError, match=f"warm_explore={bad!r} must be a share between 0 and 1"):
            _tuner("xgb", matmul_task, plan_size=20, seed=1, knowledge=kdir, warm_explore=bad)
    with pytest.raises(TunerError, match="seed_explore=2 must be a share"):
        _tuner("xgb", matmul_task, plan_size=20, seed=1, seed_explore=2)


def test_knowledge_too_small_starts_cold(matmul_task, tmp_path):
    """Fewer usable records than TransferConfig.min_records (16): AutoTVM's cold start."""
    from release.measure.records import load_records, log_to_file

    log = str(tmp_path / "first.jsonl")
    _tuner("xgb", matmul_task, plan_size=8, seed=0).tune(8, ReplayMeasurer(matmul_task), callbacks=[log_to_file(log)])
    tuner = _tuner("xgb", matmul_task, plan_size=8, seed=0, knowledge=load_records(log))
    assert tuner.knowledge_used == (8, 1) and not tuner.cost_model.warm
    tuner.tune(8, ReplayMeasurer(matmul_task))
    assert tuner.random_picks == 8


# ---------------------------------------------------------------------------------------------- local phase
def test_welch_test_accepts_only_a_clear_win():
    assert significantly_faster([1.0, 1.01, 0.99], [2.0, 2.02, 1.98])
    assert not significantly_faster([1.0, 1.5, 0.5], [1.1, 1.6, 0.6])  # lower mean, but noise: p = 0.82
    assert not significantly_faster([2.0, 2.1], [1.0, 1.1])  # slower
    assert significantly_faster([1.0], [1.1])  # one cost on a side: the mean decides (AutoTVM's rule)
    assert not significantly_faster([], [1.0]) and significantly_faster([1.0], [])


def _res(config, costs):
    return MeasureResult(config=tuple(config), costs=list(costs))


def test_droplet_moves_one_knob_at_a_time_and_widens_the_step(matmul_task):
    space = matmul_task.config_space
    center = space.canonical([1, 1, 1, 1, 1])
    d = DropletSearch(space, LocalSearchConfig(max_step=3))
    d.start(center, [1e-3, 1.02e-3], set())
    first = d.next(len(d.queue), set())  # the whole step-1 neighbourhood
    assert first and all(sum(a != b for a, b in zip(c, center)) == 1 for c in first)
    assert all(max(abs(a - b) for a, b in zip(c, center)) == 1 for c in first)
    visited = set(first) | {center}
    wider = d.next(4, visited)
    assert d.step == 2 and all(max(abs(a - b) for a, b in zip(c, center)) <= 2 for c in wider)
    # a significantly faster neighbour becomes the center, the step goes back to 1
    assert d.observe([_res(wider[0], [5e-4, 5.1e-4])], visited | set(wider))
    assert d.center == wider[0] and d.step == 1 and d.accepted == 1
    # a neighbour that is faster only within noise does not
    assert not d.observe([_res(first[0], [4e-4, 6e-4])], visited)


def test_local_phase_starts_after_patience_and_uses_its_budget(matmul_task):
    """Replayed run: once the best is unchanged for `patience` trials, every proposal is a coordinate move
    (one knob) from a center of the Droplet search, and the first center is the best measured config."""
    meas = ReplayMeasurer(matmul_task)
    tuner = _tuner("xgb", matmul_task, plan_size=8, seed=3, local_search=LocalSearchConfig(patience=8))
    assert tuner.patience == 8
    tuner.tune(64, meas)
    assert tuner.trials == 64
    d = tuner.local
    assert d is not None and tuner.local_started_at is not None, "the best stopped improving in this replay"
    measured = [c for batch in meas.calls for c in batch]
    before, after = measured[:tuner.local_started_at], measured[tuner.local_started_at:]
    assert d.centers[0] in before and after and d.moves >= len(after) - 8  # the local phase spent the rest
    local = after[: d.moves]
    assert all(any(sum(a != b for a, b in zip(c, z)) == 1 for z in d.centers) for c in local)
    if not d.exhausted:
        assert tuner.in_local_phase and not tuner.flattened


def test_local_search_off_by_default_and_bad_values_refused(matmul_task):
    tuner = _tuner("xgb", matmul_task, plan_size=8, seed=0)
    assert tuner.local_config is None and tuner.patience == 8
    with pytest.raises(TunerError, match="patience"):
        _tuner("xgb", matmul_task, plan_size=8, local_search=LocalSearchConfig(patience=0))
    with pytest.raises(TunerError, match="local_search"):
        _tuner("xgb", matmul_task, plan_size=8, local_search="yes")


def test_gradient_scheduler_hands_a_flattened_task_budget_to_improving_ones():
    from release.scheduler import GradientBased

    class T:
        weight = 1

    class Tu:
        def __init__(self, cost, flattened):
            self.trials, self.best_cost, self.best_config, self.flattened = 8, cost, (0,), flattened

    sched = GradientBased([T(), T()], eps=0.0, seed=0)
    sched.warm = 2
    assert sched.next_task([Tu(5e-2, False), Tu(1e-3, False)], [0, 1]) == 0  # the slow task gains most
    assert sched.next_task([Tu(5e-2, True), Tu(1e-3, False)], [0, 1]) == 1  # ... unless it has flattened
    assert sched.next_task([Tu(5e-2, True), Tu(1e-3, True)], [0, 1]) == 0  # all flattened: all compete
