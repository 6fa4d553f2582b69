"""User input is validated once, at each public boundary: a bad ``n_trial`` or
``plan_size`` given to any public entry point or constructor, or to the CLI, is refused with the
project's one-line error before anything is built, measured or written."""

from __future__ import annotations

import pytest

from release.errors import ReleaseError, TunerError

BAD_N_TRIAL = [0, -3, 2.5, "8", None]
BAD_PLAN_SIZE = [0, -1, True, 2.5, "64"]


def _one_line(err) -> str:
    msg = str(err.value)
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize("bad", BAD_N_TRIAL)
def test_tuner_tune_refuses_a_bad_n_trial(matmul_task, bad, tmp_path):
    from release.measure import log_to_file
    from release.tuners import RandomTuner

    tuner = RandomTuner(matmul_task, seed=0)
    log = tmp_path / "t.jsonl"
    with pytest.raises(TunerError) as err:
        tuner.tune(bad, callbacks=[log_to_file(log)])
    assert _one_line(err) == f"n_trial={bad!r} must be a positive integer"
    assert tuner.trials == 0 and not log.exists()


@pytest.mark.parametrize("bad", BAD_N_TRIAL)
def test_tune_model_refuses_a_bad_n_trial(matmul_task, bad, tmp_path):
    from release.relax import tune_model

    log = tmp_path / "m.jsonl"
    with pytest.raises(TunerError) as err:
        tune_model([matmul_task], bad, str(log), progress=False)
    assert _one_line(err) == f"n_trial={bad!r} must be a positive integer"
    assert not log.exists()


@pytest.mark.parametrize("bad", BAD_N_TRIAL)
def test_tune_model_ray_refuses_a_bad_n_trial(matmul_task, bad, tmp_path):
    from release.distributed.ray_tune import tune_model_ray

    with pytest.raises(TunerError) as err:  # before Ray is imported or a cluster is asked for
        tune_model_ray([matmul_task], bad, str(tmp_path / "r.jsonl"), address="ray://nowhere:1", progress=False)
    assert _one_line(err) == f"n_trial={bad!r} must be a positive integer"


@pytest.mark.parametrize("bad", [0, -3, 2.5, "8"])  # None means "the tier's default" there
def test_bench_config_refuses_a_bad_n_trial(bad):
    from release.bench import BenchConfig

    with pytest.raises(TunerError) as err:
        BenchConfig.from_tier("smoke", n_trial=bad)
    assert _one_line(err) == f"n_trial={bad!r} must be a positive integer"


@pytest.mark.parametrize("argv,line", [
    (["tune", "--workload", "tiny.matmul.1", "--n-trial", "0"], "release: error: --n-trial 0 must be a positive integer"),
    (["tune-model", "--model", "tiny-cnn", "--n-trial", "-2"],
     "release: error: --n-trial -2 must be a positive integer"),
    (["bench", "--tier", "smoke", "--n-trial", "0"], "release: error: n_trial=0 must be a positive integer"),
    (["tune", "--workload", "tiny.matmul.1", "--tuner", "xgb", "--n-trial", "8", "--plan-size", "0"],
     "release: error: plan_size=0 must be an integer >= 1 (AutoTVM's default is 64)"),
    (["tune-model", "--model", "tiny-cnn", "--ray", "local", "--ray-cpus", "-2"],
     "release: error: --ray-cpus -2: give the CPUs of the local Ray cluster, at least 1 (leave it out for Ray's "
     "own count)"),
    (["tune-model", "--model", "tiny-cnn", "--split", "equal"],
     "release: error: --split applies to a Ray run: add --ray local (or --ray HOST:PORT), or drop --split"),
], ids=["tune", "tune-model", "bench", "tune-plan-size", "ray-cpus", "split-without-ray"])
def test_the_cli_gives_one_line_and_exit_2(argv, line, tmp_path, capsys):
    from release.cli import main

    log = tmp_path / "cli.jsonl"
    extra = ["--log", str(log)] if argv[0] in ("tune", "tune-model") else ["--out", str(tmp_path / "b")]
    assert main(argv + extra) == 2
    assert capsys.readouterr().err.strip().splitlines() == [line]
    assert not log.exists()


@pytest.mark.parametrize("name", ["xgb", "sa-as", "rl", "release", "release+"])
@pytest.mark.parametrize("bad", BAD_PLAN_SIZE)
def test_model_based_tuners_refuse_a_bad_plan_size(matmul_task, name, bad):
    from release.tuners import get_tuner

    with pytest.raises(TunerError) as err:
        get_tuner(name, matmul_task, plan_size=bad)
    assert _one_line(err) == f"plan_size={bad!r} must be an integer >= 1 (AutoTVM's default is 64)"


@pytest.mark.parametrize("bad", BAD_PLAN_SIZE)
def test_public_constructors_refuse_a_bad_plan_size(matmul_task, bad):
    from release.cost_model import XGBoostCostModel
    from release.optimizers import SimulatedAnnealingOptimizer
    from release.strategy import ReleaseSearchStrategy
    from release.tuners.xgb import XGBTuner
    from release.tuners.release_tuner import ReleaseTuner
    from release.tuners.model_based import ModelBasedTuner
    from release.tuners.presets import preset

    want = f"plan_size={bad!r} must be an integer >= 1 (AutoTVM's default is 64)"
    makers = [
        lambda: XGBTuner(matmul_task, plan_size=bad),
        lambda: ReleaseTuner(matmul_task, plan_size=bad),
        lambda: ModelBasedTuner(matmul_task, XGBoostCostModel(matmul_task), SimulatedAnnealingOptimizer(matmul_task),
                                plan_size=bad),
        lambda: preset("release", plan_size=bad).check(),
        lambda: ReleaseSearchStrategy(plan_size=bad),
    ]
    for make in makers:
        with pytest.raises(TunerError) as err:
            make()
        assert _one_line(err) == want


def test_tuners_without_a_plan_refuse_one(matmul_task):
    from release.tuners import get_tuner

    for name in ("ga",):
        with pytest.raises(ReleaseError, match="does not apply"):
            get_tuner(name, matmul_task, plan_size=8)


def test_good_values_pass_every_check():
    from release.errors import check_n_trial, check_plan_size

    import numpy as np

    for v in (1, 64, np.int64(3)):
        check_n_trial(v)
        check_plan_size(v)


def test_tune_model_refuses_a_log_of_something_else(tmp_path, capsys):
    """An operator's log given to tune-model: one line, exit 2, the log untouched (as `release tune` refuses
    a log of another task)."""
    from release.cli import main

    log = tmp_path / "matmul.jsonl"
    assert main(["tune", "--workload", "tiny.matmul.1", "--n-trial", "2", "--log", str(log), "--no-progress",
                 "--no-check", "--no-knowledge", "--number", "1", "--repeat", "1", "--min-repeat-ms", "0"]) == 0
    before = log.read_bytes()
    capsys.readouterr()
    assert main(["tune-model", "--model", "tiny-cnn", "--n-trial", "2", "--log", str(log), "--no-progress",
                 "--no-knowledge"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"release: error: --log {log} holds ")
    assert "none of tiny-cnn's 2 tasks (they are of tiny.matmul.1); give a new --log for this model" in err[0]
    assert log.read_bytes() == before and not (tmp_path / "matmul.so").exists()
