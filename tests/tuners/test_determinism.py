"""Today's tuner behaviour, fixed: with the same seed every tuner measures the same configs in the
same order (the guard for behaviour-preserving refactors).

Measurements are replayed from a committed log of real ones (``replay.py``; configs the log does
not hold get a fixed synthetic cost), so the sequence depends only on the tuner. The golden file
``tests/fixtures/tuners/determinism_golden.json`` was recorded from the code *before* the
refactor (commit message names it); regenerate it only for an intended change of behaviour:
``RELEASE_REGEN_GOLDEN=1 pytest tests/tuners/test_determinism.py``.
"""

from __future__ import annotations

import json
import os

import pytest

from replay import ReplayMeasurer

GOLDEN = os.path.join(os.path.dirname(__file__), os.pardir, "fixtures", "tuners", "determinism_golden.json")
SEED = 12345  # the seed of the replayed log: random first rounds measure the log's configs


def _small_agent(**kw):
    from release.rl import PPOConfig

    return PPOConfig(n_episodes=64, max_steps=100, **kw)


#: tuner name -> (n_trial, keyword arguments): small plans so that every model-based tuner fits its
#: cost model and plans at least twice within the budget
CASES = {
    "random": (24, {}),
    "grid": (24, {}),
    "ga": (36, dict(pop_size=12)),
    "xgb": (48, dict(plan_size=16)),
    "sa-as": (48, dict(plan_size=16)),
    "rl": (40, dict(plan_size=16, ppo_config=_small_agent())),
    "release": (48, dict(plan_size=16, ppo_config=_small_agent())),
    "release+": (48, dict(plan_size=16, ppo_config=_small_agent(boundary="pushed", max_minibatches=64),
                          min_queries=12000)),
}


@pytest.fixture(scope="module")
def replay_task():
    """``tiny.matmul.1`` on the target the replayed log was measured on (its records' ``target``), not
    on this host's CPU: the log matches the task by key (program + target), and nothing here runs a
    kernel, so the test holds on any host (on a host other than the log's, ``"llvm"`` gave another
    key, no replayed measurement, and another knob space)."""
    import json as _json

    from replay import FIXTURE

    from release.task import create_task

    with open(FIXTURE) as f:
        target = _json.loads(_json.loads(f.readline())["target"])
    task = create_task("tiny.matmul.1", target)
    task.config_space  # noqa: B018 - build once
    return task


# one_torch_thread (tests/conftest.py): PPO's float reductions depend on the thread count


def run_replayed(name: str, task, n_trial: int, kwargs: dict, monkeypatch=None):
    """Tune ``task`` with tuner ``name`` (seed :data:`SEED`) on replayed measurements.

    Returns
    -------
    (ReplayMeasurer, Tuner)
        The measurer's ``calls`` hold every measured batch in order.
    """
    from release.tuners import get_tuner

    meas = ReplayMeasurer(task)
    tuner = get_tuner(name, task, seed=SEED, **kwargs)
    monkeypatch.setattr("release.tuners.tuner.Measurer", lambda task, option: meas)
    tuner.tune(n_trial, {})
    return meas, tuner


def _summary(meas, tuner) -> dict:
    return {
        "calls": [[list(c) for c in batch] for batch in meas.calls],
        "trials": int(tuner.trials),
        "best_config": list(tuner.best_config) if tuner.best_config is not None else None,
    }


@pytest.mark.parametrize("name", list(CASES))
def test_same_seed_measures_the_same_configs_in_the_same_order(name, replay_task, one_torch_thread, monkeypatch):
    n_trial, kwargs = CASES[name]
    meas, tuner = run_replayed(name, replay_task, n_trial, kwargs, monkeypatch)
    got = _summary(meas, tuner)
    assert got["trials"] == n_trial
    assert meas.hits > 0 or name in ("grid", "ga")  # the replayed log is used, not only the synthetic costs
    if os.environ.get("RELEASE_REGEN_GOLDEN"):
        golden = json.load(open(GOLDEN)) if os.path.exists(GOLDEN) else {}
        golden[name] = got
        with open(GOLDEN, "w") as f:
            json.dump(golden, f, indent=None, separators=(",", ":"))
            f.write("\n")
        pytest.skip("golden sequence rewritten")
    golden = json.load(open(GOLDEN))[name]
    assert got["calls"] == golden["calls"]
    assert got["best_config"] == golden["best_config"]
    assert got["trials"] == golden["trials"]


@pytest.mark.parametrize("name", ["xgb", "sa-as", "release+"])
def test_from_preset_measures_what_the_presets_class_measures(name, replay_task, one_torch_thread, monkeypatch):
    """``ModelBasedTuner.from_preset(name)`` is the preset's class: the golden sequence of its class."""
    from release.tuners.model_based import ModelBasedTuner

    n_trial, kwargs = CASES[name]
    over = {("ppo" if k == "ppo_config" else k): v for k, v in kwargs.items()}
    meas = ReplayMeasurer(replay_task)
    tuner = ModelBasedTuner.from_preset(name, replay_task, seed=SEED, **over)
    assert type(tuner) is ModelBasedTuner and tuner.name == name
    assert tuner.warm_by_default == (name == "release+") and tuner.config.plan_size == 16
    monkeypatch.setattr("release.tuners.tuner.Measurer", lambda task, option: meas)
    tuner.tune(n_trial, {})
    golden = json.load(open(GOLDEN))[name]
    assert _summary(meas, tuner) == golden
