"""Why a run stops short of ``n_trial``: an exhausted space is said for every
tuner, GATuner visits the whole of a small space, invalid configs are counted by reason and capped,
symbolic shapes are refused up front."""

from __future__ import annotations

import json
import logging

import pytest
from replay import ReplayMeasurer
from tvm import te, topi

from release.errors import TunerError, WorkloadError
from release.measure import log_to_file
from release.task import Task
from release.tuners import TUNERS, get_tuner
from release.tuners.tuner import rejections_path
from noinit import noinit_task

# ms-evolutionary: a population of 32 (MetaSchedule's default is 512) for a space of 28 configs, as quick as the others
SMALL = {"ga": dict(pop_size=8), "xgb": dict(plan_size=8), "ms-evolutionary": dict(plan_size=8, population_size=32),
         "release": dict(plan_size=8), "release+": dict(plan_size=8), "rl": dict(plan_size=8),
         "sa-as": dict(plan_size=8)}


@pytest.fixture(scope="module")
def small_task():
    """A 1x1x4 matmul: 28 configs in its knob space, so a tuner can visit all of them."""
    a, b = te.placeholder((1, 4), name="A"), te.placeholder((4, 1), name="B")
    k = te.reduce_axis((0, 4), name="k")
    c = te.compute((1, 1), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    task = Task([a, b, c], "llvm", name="small.matmul")
    assert task.config_space.size == 28
    return task


@pytest.mark.parametrize("name", list(TUNERS))
def test_every_tuner_says_when_the_space_is_exhausted(name, small_task, caplog, one_torch_thread):
    tuner = get_tuner(name, small_task, seed=0, **SMALL.get(name, {}))
    with caplog.at_level(logging.WARNING, logger="release.session"):
        tuner.tune(40, ReplayMeasurer(small_task, batch_size=4), check_output=False)
    said = [r.getMessage() for r in caplog.records if "of 40 trials" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in caplog.records]
    if tuner.session.stop_reason == "exhausted":
        assert "exhausted" in said[0] and len(tuner.visited) == 28
    else:  # a search that cannot reach the last configs says so as well
        assert tuner.session.stop_reason == "no_new_config" and "proposed no new config" in said[0]
    rejected = sum(n for n, _ in tuner.session.rejections.values())
    assert tuner.trials < 40 and tuner.trials + rejected == len(tuner.visited) <= 28  # each config once
    assert all(len(c) == small_task.config_space.n_knobs for c in tuner.visited)


def test_ga_visits_every_config_of_a_small_space(small_task):
    """GATuner counted measured genes twice (visited and scheduled) and stopped at 16 of 28 configs."""
    tuner = get_tuner("ga", small_task, seed=0, pop_size=8)
    tuner.tune(40, ReplayMeasurer(small_task, batch_size=4), check_output=False)
    assert len(tuner.visited) == 28
    assert tuner.session.stop_reason == "exhausted"
    assert tuner.trials + sum(n for n, _ in tuner.session.rejections.values()) == 28


def test_rejections_are_counted_by_kind_and_written_beside_the_log(tmp_path):
    """The no-init matmul: most configs are rejected by a postprocessor; the count and the first
    message of each kind reach the session and ``<log stem>.rejections.jsonl``."""
    task = noinit_task()
    log = str(tmp_path / "t.jsonl")
    tuner = get_tuner("random", task, seed=0)
    tuner.tune(2, ReplayMeasurer(task, batch_size=2), callbacks=[log_to_file(log)], check_output=False)
    rej = tuner.session.rejections
    n = sum(c for c, _ in rej.values())
    assert tuner.trials == 2 and n == len(tuner.visited) - 2 and n > 0
    assert "postprocessor RewriteParallelVectorizeUnroll rejected the schedule" in rej
    lines = [json.loads(x) for x in open(rejections_path(log))]
    assert len(lines) == 1 and lines[0]["task"] == task.key and lines[0]["rejected"] == n
    assert sum(k["count"] for k in lines[0]["kinds"]) == n and all(k["first"] for k in lines[0]["kinds"])
    assert str(tmp_path / "t.rejections.jsonl") == rejections_path(log)


def test_a_space_without_valid_configs_within_the_bound_stops_with_one_error():
    """The cap on replays per trial: 20 invalid configs in a row before any trial -> TunerError."""
    task = noinit_task()
    tuner = get_tuner("grid", task)  # grid order starts with rejected configs here
    with pytest.raises(TunerError, match="no valid config in 20 replays in a row") as err:
        tuner.tune(4, ReplayMeasurer(task, batch_size=4), max_rejected=20, check_output=False)
    assert "rejected: 20 x postprocessor" in str(err.value) and "\n" not in str(err.value)
    assert tuner.trials == 0


def test_a_run_with_trials_stops_at_the_bound_with_a_warning(caplog):
    task = noinit_task()
    tuner = get_tuner("random", task, seed=0)
    with caplog.at_level(logging.WARNING, logger="release.session"):
        tuner.tune(10**6, ReplayMeasurer(task, batch_size=4), max_rejected=150, check_output=False)
    rejected = sum(n for n, _ in tuner.session.rejections.values())
    assert tuner.session.stop_reason == "rejections" and tuner.trials >= 1
    assert tuner.trials + rejected == len(tuner.visited)  # every config replayed once: a trial or a rejection
    # checked between batches of 4: the run stops within one batch of the bound
    assert 150 <= tuner.session.rejected_in_a_row <= 153
    assert any("150 configs in a row were invalid" in r.getMessage() for r in caplog.records)


def test_symbolic_shapes_are_refused_up_front():
    n = te.var("n")
    a, w = te.placeholder((n, 64), name="A"), te.placeholder((32, 64), name="W")
    with pytest.raises(WorkloadError, match=r"argument A of dense has symbolic shape \['n', '64'\]") as err:
        Task([a, w, topi.nn.dense(a, w)], "llvm", name="dense")
    assert "\n" not in str(err.value) and "static shapes" in str(err.value)
