"""The baselines' defaults, pinned to their sources.

Every speed claim of ReLeASE is a ratio against these baselines, so a change to any default here
silently moves every ratio. Each value below is written as its source writes it:

- AutoTVM: apache/tvm v0.19.0 (the last release with AutoTVM), python/tvm/autotvm/tuner/
  ``xgboost_tuner.py``, ``model_based_tuner.py``, ``sa_model_optimizer.py``, ``xgboost_cost_model.py``,
  ``ga_tuner.py``; also /work/shared/reference/chameleon.md, section "AutoTVM's API".
- MetaSchedule: TVM 0.27's own ``EvolutionarySearch.__init__`` and ``tune_tir`` signatures, read
  here from the installed TVM (so a TVM upgrade that moves them fails this test too).

Read-only: these tests build tuners and look at their settings; nothing is measured.
"""

from __future__ import annotations

import inspect

import pytest


@pytest.fixture(scope="module")
def tuners(matmul_task):
    from release.tuners import get_tuner

    return {name: get_tuner(name, matmul_task, seed=0) for name in ("xgb", "ga", "ms-evolutionary")}


def test_xgb_tuner_defaults(tuners):
    x = tuners["xgb"]
    # xgboost_tuner.py: XGBTuner(task, plan_size=64, feature_type="itervar", loss_type="reg", num_threads=None,
    #                            optimizer="sa", diversity_filter_ratio=None, log_interval=50)
    assert x.plan_size == 64
    assert x.feature_type == "itervar" and x.loss_type == "reg"
    assert x.diversity_filter_ratio is None
    assert type(x.model_optimizer).__name__ == "SimulatedAnnealingOptimizer"
    # model_based_tuner.py next_batch: the last int(0.05 * plan_size) picks of each plan are random
    assert x.eps == int(0.05 * 64) == 3


def test_simulated_annealing_defaults(tuners):
    p = tuners["xgb"].model_optimizer.params
    # sa_model_optimizer.py: SimulatedAnnealingOptimizer(task, n_iter=500, temp=(1, 0), persistent=True,
    #                                                    parallel_size=128, early_stop=50, log_interval=50)
    assert p.n_iter == 500
    assert tuple(p.temp) == (1, 0)
    assert p.persistent is True
    assert p.parallel_size == 128
    assert p.early_stop == 50


def test_xgboost_cost_model_defaults(tuners):
    m = tuners["xgb"].cost_model
    assert m.feature_type == "itervar" and m.loss_type == "reg"
    # xgboost_cost_model.py XGBoostCostModel.__init__: self.xgb_params = {"max_depth": 3, "gamma": 0.0001,
    #   "min_child_weight": 1, "subsample": 1.0, "eta": 0.3, "lambda": 1.00, "alpha": 0,
    #   "objective": "reg:squarederror"} ("rank:pairwise" for loss_type="rank")
    booster = m.params.booster_params("reg", nthread=1, seed=0)
    assert {k: booster[k] for k in ("max_depth", "gamma", "min_child_weight", "subsample", "eta", "lambda",
                                    "alpha", "objective")} == {
        "max_depth": 3, "gamma": 0.0001, "min_child_weight": 1, "subsample": 1.0, "eta": 0.3, "lambda": 1.0,
        "alpha": 0, "objective": "reg:squarederror"}
    assert m.params.booster_params("rank", nthread=1, seed=0)["objective"] == "rank:pairwise"
    # xgboost_cost_model.py fit: xgb.train(..., num_boost_round=8000, callbacks=[custom_callback(
    #   stopping_rounds=20, metric="tr-a-recall@%d" % plan_size, ...)])
    assert m.params.num_boost_round == 8000
    assert m.params.early_stopping_rounds == 20


def test_ga_tuner_defaults(tuners):
    # ga_tuner.py: GATuner(task, pop_size=100, elite_num=3, mutation_prob=0.1)
    p = tuners["ga"].params
    assert (p.pop_size, p.elite_num, p.mutation_prob) == (100, 3, 0.1)


def test_metaschedule_evolutionary_defaults_equal_tvms_own(tuners):
    from tvm.s_tir import meta_schedule as ms

    p = tuners["ms-evolutionary"].params
    tvm_defaults = {name: par.default for name, par in
                    inspect.signature(ms.search_strategy.EvolutionarySearch.__init__).parameters.items()
                    if par.default is not inspect.Parameter.empty}
    # TVM 0.27 EvolutionarySearch(population_size=512, init_measured_ratio=0.2, init_min_unmeasured=50,
    #   max_fail_count=5, genetic_num_iters=4, genetic_mutate_prob=0.85, genetic_max_fail_count=10, eps_greedy=0.05)
    assert tvm_defaults == {"population_size": 512, "init_measured_ratio": 0.2, "init_min_unmeasured": 50,
                            "max_fail_count": 5, "genetic_num_iters": 4, "genetic_mutate_prob": 0.85,
                            "genetic_max_fail_count": 10, "eps_greedy": 0.05}
    assert {k: getattr(p, k) for k in tvm_defaults} == tvm_defaults
    # TVM 0.27 tune_tir(..., num_trials_per_iter=64, ...)
    assert p.num_trials_per_iter == inspect.signature(ms.tune_tir).parameters["num_trials_per_iter"].default == 64


def test_one_search_thread_setting_for_every_tuner(matmul_task, monkeypatch):
    """Issue 19 item 13: our XGBoost, MetaSchedule's evolutionary search (and its XGBoost) and the
    PPO agent's PyTorch work take one count, ``release.threads.search_threads()`` (default 1;
    AutoTVM and MetaSchedule default to all cores)."""
    import torch

    from release.errors import TunerError
    from release.threads import search_threads, torch_search_threads
    from release.tuners import get_tuner

    monkeypatch.delenv("RELEASE_SEARCH_THREADS", raising=False)
    assert search_threads() == 1
    for n in (1, 3):
        monkeypatch.setenv("RELEASE_SEARCH_THREADS", str(n))
        assert get_tuner("xgb", matmul_task, seed=0).cost_model.num_threads == n
        assert get_tuner("release", matmul_task, seed=0).cost_model.num_threads == n
        assert get_tuner("ms-evolutionary", matmul_task, seed=0).num_threads == n
        before = torch.get_num_threads()
        with torch_search_threads():
            assert torch.get_num_threads() == n
        assert torch.get_num_threads() == before
    monkeypatch.setenv("RELEASE_SEARCH_THREADS", "0")
    with pytest.raises(TunerError, match="RELEASE_SEARCH_THREADS='0' must be a positive integer"):
        search_threads()
