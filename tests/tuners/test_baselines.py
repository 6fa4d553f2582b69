"""Baseline tuners end to end on tiny.matmul.1: XGBTuner, GATuner, MetaSchedule's evolutionary search.

Slow tests (``make test-slow``, ~3 min on 2 cores): each tuner measures 32 trials for real (a
first run of 20, then a resumed run to 32 on the same log). Default run: shorter runs of each
tuner (refits, GA generations, an MS-evolutionary resume) and one-line errors for bad arguments.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import release_here
from release import autotvm
from release.errors import TunerError
from release.measure import load_records

TUNERS = {
    "xgb": dict(plan_size=8),               # 8 configs per round: 1 random round, then model-guided ones
    "ga": dict(pop_size=12),                # generations of 12
    "ms-evolutionary": dict(plan_size=10),  # MetaSchedule generations of 10 candidates (population 512)
}


def _make(name, task, seed):
    from release.tuners import get_tuner

    return get_tuner(name, task, seed=seed, **TUNERS[name])


@pytest.mark.slow
@pytest.mark.parametrize("name", list(TUNERS))
def test_tuner_runs_32_trials_and_resumes(name, matmul_task, fast_measure, tmp_path):
    log = str(tmp_path / f"{name}.jsonl")
    first = _make(name, matmul_task, seed=0)
    first.tune(20, fast_measure, callbacks=[autotvm.callback.log_to_file(log)])
    recs = load_records(log)
    assert len(recs) == 20 == first.trials
    second = _make(name, matmul_task, seed=0)
    second.tune(32, fast_measure, callbacks=[autotvm.callback.log_to_file(log)])
    recs = load_records(log)
    assert len(recs) == 32 == second.trials
    assert len({tuple(r.config) for r in recs}) == 32, "no config measured twice across the resume"
    assert all(r.tuner == name and r.task == matmul_task.key for r in recs)
    assert sum(r.ok for r in recs) >= 28
    assert second.best_gflops >= first.best_gflops > 0
    assert second.best_gflops == pytest.approx(max(r.gflops for r in recs))
    # every record splits its wall time; model-based tuners spend search/fit time in some rounds
    assert all(r.search_s >= 0 and r.fit_s >= 0 and r.measure_s > 0 for r in recs)
    if name != "ga":
        assert sum(r.search_s for r in recs) > 0 and sum(r.fit_s for r in recs) > 0


def test_xgb_tuner_refits_and_plans(matmul_task, fast_measure):
    tuner = autotvm.tuner.XGBTuner(matmul_task, plan_size=5, feature_type="knob", seed=3)
    tuner.tune(14, fast_measure)
    # fits once 5 configs are measured, at the end of a batch of 2 (after 6), then after the next plan's 6 (12)
    assert tuner.train_ct == 2 and tuner.cost_model.fit_count == tuner.train_ct
    assert len(tuner.xs) == 14 == len(set(tuner.xs)) and tuner.time_search > 0 and tuner.time_fit > 0
    # the last plan: 5 distinct configs ranked by the model, unvisited when it was made; the 2 trials
    # since (no random pick: 5% of 5 rounds down to 0) are its first 2, the rest is still unvisited
    plan = [c for c in tuner.trials_plan]
    assert len(plan) == 5 == len(set(plan))
    assert tuner.xs[-2:] == plan[:2] and not set(plan[2:]) & tuner.visited


def test_resumed_run_continues_the_round_count(matmul_task, fast_measure, tmp_path):
    """A resumed model-based run logs rounds that continue the interrupted run's (they restarted at
    1 before, which broke the benchmark's equal-rounds metric on every extended run)."""
    log = str(tmp_path / "xgb.jsonl")
    autotvm.tuner.XGBTuner(matmul_task, plan_size=5, feature_type="knob", seed=3).tune(
        12, fast_measure, callbacks=[autotvm.callback.log_to_file(log)])
    first = [r.round for r in load_records(log)]
    assert first == [0] * 6 + [1] * 6  # random configs until the first fit (after 6), then one plan of 6
    again = autotvm.tuner.XGBTuner(matmul_task, plan_size=5, feature_type="knob", seed=4)
    again.tune(22, fast_measure, callbacks=[autotvm.callback.log_to_file(log)])
    rounds = [r.round for r in load_records(log)]
    assert rounds[:12] == first and rounds == sorted(rounds)
    assert rounds[12:] == [2] * 6 + [3] * 4  # the resumed run fits at once and continues at round 2


def test_submodular_pick_prefers_unseen_knob_values():
    from release.tuners.model_based import submodular_pick

    # three near-copies of one config and two configs that differ in every knob
    cands = [(0, 0, 0), (0, 0, 1), (0, 1, 0), (1, 1, 1), (2, 2, 2)]
    assert submodular_pick(cands, 3) == [(0, 0, 0), (1, 1, 1), (2, 2, 2)]
    assert submodular_pick(cands, 10) == cands  # fewer candidates than asked: all, in order
    assert len(set(submodular_pick(cands, 4))) == 4


def test_xgb_tuner_with_diversity_filter(matmul_task, fast_measure):
    tuner = autotvm.tuner.XGBTuner(matmul_task, plan_size=6, feature_type="knob", diversity_filter_ratio=2, seed=0)
    tuner.tune(18, fast_measure)
    assert tuner.train_ct == 3 and len(set(map(tuple, tuner.xs))) == 18  # fits after 6, 12 and 18 trials
    # the plan is thinned from 12 candidates to 6 distinct, unvisited configs
    assert len(tuner.trials_plan) == 6 == len(set(tuner.trials_plan))
    with pytest.raises(TunerError, match="diversity_filter_ratio=0.5"):
        autotvm.tuner.XGBTuner(matmul_task, diversity_filter_ratio=0.5)


def test_ga_generation_follows_autotvm(matmul_task, fast_measure):
    tuner = autotvm.tuner.GATuner(matmul_task, pop_size=6, elite_num=2, seed=0)
    tuner.tune(12, fast_measure)
    assert tuner.generation == 2
    assert len(tuner.elites) == 2
    # elites are the best measured genes so far
    best = sorted(tuner.scores.values(), reverse=True)[:2]
    assert sorted(tuner.elite_scores, reverse=True) == pytest.approx(best)
    assert len(tuner.genes) == 6 and not set(tuner.genes) & tuner.visited


def test_ms_evolutionary_candidates_map_to_configs_of_the_same_program(matmul_task):
    from release.tuners.ms_evolutionary import MSEvolutionaryTuner

    tuner = MSEvolutionaryTuner(matmul_task, plan_size=8, population_size=48, seed=0)
    batch = tuner.next_batch(2)
    assert tuner.generations == 1 and tuner.unmapped == 0 and len(tuner._gen) == 8
    assert batch == [c for _, c in tuner._gen[:2]]
    import tvm_ffi

    for cand, config in tuner._gen:
        assert tvm_ffi.structural_equal(matmul_task.config_space.apply(config).mod, cand.sch.mod)


def _observe_generations(tuner):
    """Record what ``tuner`` does, whatever the timing: each generation's ``(candidate, config)`` pairs,
    the database's size when it was drawn, the candidates of each generation reported back, the
    configs handed out (in order)."""
    seen = dict(offered=[], in_db_at_start=[], reported=[], handed=[])
    new_generation, finish_generation, next_batch = (tuner._new_generation, tuner._finish_generation,
                                                     tuner.next_batch)

    def observed_new():
        new_generation()
        if tuner._gen:
            seen["in_db_at_start"].append(len(tuner.database.get_all_tuning_records()))
            seen["offered"].append(list(tuner._gen))

    def observed_finish():
        seen["reported"].append(len(tuner._gen))
        finish_generation()

    def observed_next(batch_size):
        out = next_batch(batch_size)
        seen["handed"].extend(out)
        return out

    tuner._new_generation, tuner._finish_generation, tuner.next_batch = observed_new, observed_finish, observed_next
    return seen


@pytest.mark.slow
def test_ms_evolutionary_measures_metaschedule_candidates_and_resumes(matmul_task, fast_measure, tmp_path):
    from release.tuners.ms_evolutionary import MSEvolutionaryTuner

    log = str(tmp_path / "mse.jsonl")
    # a small population keeps this test short; the search is MetaSchedule's all the same.
    # How many generations the trials take is not asserted: it depends on how many candidates repeat
    # a measured config, which MetaSchedule's search does not fix (its cost model draws random
    # scores from numpy's global state until it has 100 samples)
    first = MSEvolutionaryTuner(matmul_task, plan_size=6, population_size=48, seed=0)
    seen = _observe_generations(first)
    first.tune(6, fast_measure, callbacks=[autotvm.callback.log_to_file(log)])
    assert first.generations == len(seen["offered"]) >= 1 and first.unmapped == 0
    assert [len(gen) for gen in seen["offered"]] == [6] * first.generations
    assert seen["in_db_at_start"][0] == 0
    # the configs measured are the generations' candidates, the first generation's first, in order,
    # each once
    candidates = [c for gen in seen["offered"] for _, c in gen]
    assert seen["handed"] == list(dict.fromkeys(candidates))[:6]
    # the first generation (all of whose configs fit in 6 trials) was reported back, and every
    # generation reported is in MetaSchedule's database and cost model
    assert seen["reported"][:1] == [6] and len(seen["reported"]) in (first.generations - 1, first.generations)
    assert len(first.database.get_all_tuning_records()) == sum(seen["reported"]) == first.cost_model.data_size
    assert seen["in_db_at_start"] == [6 * i for i in range(first.generations)]
    first_configs = set(seen["handed"])

    second = MSEvolutionaryTuner(matmul_task, plan_size=6, population_size=48, seed=1)
    seen2 = _observe_generations(second)
    second.tune(10, fast_measure, callbacks=[autotvm.callback.log_to_file(log)])
    recs = load_records(log)
    assert len(recs) == 10 == len({tuple(r.config) for r in recs})
    assert all(r.tuner == "ms-evolutionary" and r.trace is not None for r in recs)
    assert {tuple(r.config) for r in recs} == first_configs | set(seen2["handed"])
    # the 6 resumed records went into the new database and cost model before the search started
    assert second.generations == len(seen2["offered"]) >= 1 and second.unmapped == 0
    assert seen2["in_db_at_start"][0] == 6
    # the 4 new configs are the generations' candidates not measured before, in order
    candidates2 = [c for gen in seen2["offered"] for _, c in gen]
    assert seen2["handed"] == [c for c in dict.fromkeys(candidates2) if c not in first_configs][:4]
    # a generation is reported only once all its configs are measured: one cut short at 10 trials is
    # not (with a single generation, its 4 new configs of 6 are: nothing was reported)
    assert len(second.database.get_all_tuning_records()) == 6 + sum(seen2["reported"]) \
        == second.cost_model.data_size
    assert len(seen2["reported"]) in (second.generations - 1, second.generations)
    for gen, n_reported in zip(seen2["offered"], seen2["reported"]):
        assert n_reported == len(gen) and {c for _, c in gen} <= first_configs | set(seen2["handed"])
    if second.generations == 1:
        assert seen2["reported"] == [] and len(second.database.get_all_tuning_records()) == 6
    # every candidate maps to a config whose replay is the candidate's program
    import tvm_ffi

    for cand, config in [pair for gen in seen["offered"] + seen2["offered"] for pair in gen]:
        assert tvm_ffi.structural_equal(matmul_task.config_space.apply(config).mod, cand.sch.mod)
    assert sum(r.search_s for r in recs) > 0


def test_autotvm_names_are_importable():
    from release.autotvm.tuner import GATuner, XGBTuner
    from release.tuners.ga import GATuner as G
    from release.tuners.xgb import XGBTuner as X

    assert XGBTuner is X and GATuner is G


@pytest.mark.parametrize("cls,kw,fragment", [
    ("XGBTuner", dict(feature_type="curve"), "unknown feature type 'curve'"),
    ("XGBTuner", dict(loss_type="hinge"), "unknown loss type 'hinge'"),
    ("XGBTuner", dict(plan_size=0), "plan_size=0 must be an integer >= 1"),
    ("XGBTuner", dict(optimizer="pso"), "unknown optimizer 'pso'"),
    ("XGBTuner", dict(sampler="kmeans"), "unknown sampler 'kmeans'"),
    ("XGBTuner", dict(sampler=5), "sampler=5 is not a sampler"),
    ("XGBTuner", dict(optimizer=object()), "is not a model optimizer"),
    ("GATuner", dict(pop_size=0), "pop_size=0"),
    ("GATuner", dict(mutation_prob=1.5), "mutation_prob=1.5"),
    ("GATuner", dict(plan_size=8), "does not apply to the ga tuner"),
    ("MSEvolutionaryTuner", dict(plan_size=0), "must be an integer >= 1"),
])
def test_bad_tuner_arguments(matmul_task, cls, kw, fragment):
    from release.tuners.ms_evolutionary import MSEvolutionaryTuner  # noqa: F401

    klass = MSEvolutionaryTuner if cls == "MSEvolutionaryTuner" else getattr(autotvm.tuner, cls)
    with pytest.raises(TunerError, match=fragment) as err:
        klass(matmul_task, **kw)
    assert "\n" not in str(err.value)


def _cli(*args):
    exe = os.path.join(os.path.dirname(sys.executable), "release")
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("args,fragment,here", [
    # through the installed `release` script (refused by its parser: no TVM work)
    (["--tuner", "xgboost"], "unknown tuner 'xgboost'; choose one of: random, grid, xgb, ga, ms-evolutionary", False),
    # in this process (refused once the task is built: a new interpreter's imports would take most of the test)
    (["--tuner", "xgb", "--plan-size", "0"], "plan_size=0 must be an integer >= 1", True),
])
def test_cli_bad_input_gets_one_line(tmp_path, args, fragment, here, capsys):
    cli = ["tune", "--workload", "tiny.matmul.1", "--n-trial", "2", "--log", str(tmp_path / "x.jsonl"), "--no-progress",
           *args]
    p = release_here(capsys, *cli) if here else _cli(*cli)
    assert p.returncode != 0
    lines = [l for l in p.stderr.strip().splitlines() if l.strip()]
    assert len(lines) == 1, p.stderr
    assert fragment in lines[0]
    assert not os.path.exists(tmp_path / "x.jsonl")
