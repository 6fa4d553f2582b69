"""AdaTune-style early termination: a candidate whose first repeat is far slower
than the task's best so far gets no more repeats; the best is always timed with all of them.

Real builds and runs of ``tiny.matmul.1``; the tests assert on the number of costs recorded and on
the flags, never on how fast a kernel is.
"""

import json

import numpy as np
import pytest

from release.errors import TunerError
from release.measure import LocalBuilder, LocalRunner, Measurer, load_records, log_to_file, measure_option
from release.measure.config import MeasureConfig
from release.measure.result import MeasureResult

REPEAT = 3


@pytest.fixture(scope="module")
def cut_measure():
    """2 build workers; a runner of 3 repeats that cuts at 2x the best mean."""
    opt = measure_option(LocalBuilder(n_parallel=2, timeout=60),
                         LocalRunner(number=1, repeat=REPEAT, min_repeat_ms=0, cooldown_interval=0.0,
                                     early_termination=2.0))
    yield opt
    opt["builder"].close()
    opt["runner"].close()


def _configs(task, n, seed):
    return [tuple(c) for c in task.config_space.sample(n, np.random.default_rng(seed))]


def test_a_candidate_far_slower_than_the_best_is_cut_after_its_first_repeat(matmul_task, cut_measure):
    # a best of 1 ps: every real kernel is more than 2x slower, so each is cut after one repeat
    m = Measurer(matmul_task, cut_measure, best_cost=1e-12)
    results = m.measure(_configs(matmul_task, 3, 5))
    ok = [r for r in results if r.ok]
    assert ok, [r.error_msg for r in results]
    for r in ok:
        assert len(r.costs) == 1 and r.cut_short
    assert m.stats["cut_short"] == len(ok)
    assert m.best_cost == 1e-12  # a cut result never lowers the best


def test_with_no_best_yet_or_early_termination_off_every_config_gets_all_repeats(matmul_task, cut_measure):
    fresh = Measurer(matmul_task, cut_measure)  # no best yet: the first result cannot be cut
    (first,) = fresh.measure(_configs(matmul_task, 1, 6))
    assert first.ok and len(first.costs) == REPEAT and not first.cut_short
    assert fresh.best_cost == pytest.approx(first.mean_cost)

    off = measure_option(cut_measure["builder"], LocalRunner(number=1, repeat=REPEAT, min_repeat_ms=0,
                                                             cooldown_interval=0.0))
    try:
        m = Measurer(matmul_task, off, best_cost=1e-12)  # early_termination=0 (the default): nothing is cut
        for r in m.measure(_configs(matmul_task, 2, 7)):
            assert r.ok and len(r.costs) == REPEAT and not r.cut_short
        assert m.stats["cut_short"] == 0
    finally:
        off["runner"].close()


def test_the_best_config_is_timed_with_full_repeats_and_cut_ones_are_never_best(matmul_task, cut_measure, tmp_path):
    from release.tuners.simple import RandomTuner

    log = str(tmp_path / "cut.jsonl")
    tuner = RandomTuner(matmul_task, seed=11).tune(12, cut_measure, callbacks=[log_to_file(log)])
    recs = [r for r in load_records(log) if r.ok]
    assert len(recs) >= 8
    best = min(recs, key=lambda r: r.mean_cost)
    assert tuple(best.config) == tuple(tuner.best_config)
    assert len(best.costs) == REPEAT and not best.cut_short
    for r in recs:
        # a record is either fully timed or cut after exactly one repeat, and says which
        assert len(r.costs) == (1 if r.cut_short else REPEAT)
        if r.cut_short:
            assert r.mean_cost > 2.0 * best.mean_cost
    assert tuner.measure_stats["cut_short"] == sum(r.cut_short for r in recs)


def test_a_resumed_run_starts_cutting_from_the_records_best(matmul_task, cut_measure, tmp_path):
    """The tuner hands the resumed records' best to the measurer, so a resumed run's first new
    candidates can already be cut (a stored best of 1 ps: every new one is)."""
    from release.tuners.simple import RandomTuner

    log = str(tmp_path / "resume.jsonl")
    c0 = matmul_task.config_space.canonical(_configs(matmul_task, 1, 8)[0])
    stored = MeasureResult(config=c0, costs=[1e-12] * REPEAT).stamp(matmul_task, "random")
    with open(log, "w", encoding="utf-8") as f:
        f.write(stored.to_json() + "\n")
    tuner = RandomTuner(matmul_task, seed=12).tune(4, cut_measure, callbacks=[log_to_file(log)], resume=True)
    new = [r for r in load_records(log)[1:] if r.ok]
    assert new and all(r.cut_short and len(r.costs) == 1 for r in new)
    assert tuner.best_config == c0


def test_the_flag_round_trips_and_old_logs_load_as_not_cut():
    r = MeasureResult(config=(1, 2), costs=[2e-3], cut_short=True)
    again = MeasureResult.from_json(r.to_json())
    assert again.cut_short is True and again.costs == [2e-3] and again.mean_cost == pytest.approx(2e-3)
    old = json.loads(r.to_json())
    del old["cut_short"]  # a line written before the field existed
    assert MeasureResult.from_json(json.dumps(old)).cut_short is False


@pytest.mark.parametrize("bad", [0.5, 1.0, -2.0, "x"])
def test_a_bad_ratio_is_refused_with_its_value_and_the_fix(bad):
    with pytest.raises(TunerError, match="early_termination=") as e:
        LocalRunner(early_termination=bad)
    assert "above 1" in str(e.value)
    with pytest.raises(TunerError, match="early_termination"):
        MeasureConfig(early_termination=bad).check()


def test_the_ratio_reaches_the_runner_from_measure_config_and_the_cli():
    from release.cli import build_parser

    assert MeasureConfig().early_termination == 2.0  # on by default (benchmarks/results/early_termination)
    args = build_parser().parse_args(["tune", "--workload", "tiny.matmul.1", "--early-termination", "0"])
    assert MeasureConfig.from_args(args).early_termination == 0.0
    opt = MeasureConfig(early_termination=2.5, n_parallel=1).make_option()
    try:
        assert opt["runner"].early_termination == 2.5 and opt["runner"].enable_cpu_cache_flush is False
    finally:
        opt["builder"].close()
        opt["runner"].close()
    args = build_parser().parse_args(["tune-model", "--model", "tiny-cnn", "--cache-flush"])
    opt = MeasureConfig.from_args(args).make_option()
    try:  # --cache-flush reaches the runner's evaluator (TVM's cache_flush_cpu_non_first_arg)
        assert opt["runner"].enable_cpu_cache_flush is True
    finally:
        opt["builder"].close()
        opt["runner"].close()


@pytest.mark.slow  # starts a tracker and a server (~30 s)
def test_the_rpc_runner_cuts_a_batch_at_the_best_known_before_it(matmul_task, tmp_path):
    import importlib.util
    import os

    spec = importlib.util.spec_from_file_location(
        "rpc_conftest", os.path.join(os.path.dirname(__file__), os.pardir, "distributed", "conftest.py"))
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    from release.measure import RPCRunner

    cluster = conf.RPCCluster(str(tmp_path), n=1)
    opt = None
    try:
        runner = RPCRunner(cluster.key, cluster.host, cluster.port, number=1, repeat=REPEAT, min_repeat_ms=0,
                           cooldown_interval=0.0, early_termination=2.0)
        opt = measure_option(LocalBuilder(n_parallel=1, timeout=60), runner)
        configs = _configs(matmul_task, 4, 9)
        fresh = Measurer(matmul_task, opt)  # no best before the batch: nothing is cut
        assert all(len(r.costs) == REPEAT and not r.cut_short for r in fresh.measure(configs[:2]) if r.ok)
        m = Measurer(matmul_task, opt, best_cost=1e-12)
        ok = [r for r in m.measure(configs[2:]) if r.ok]
        assert ok and all(len(r.costs) == 1 and r.cut_short for r in ok)
    finally:
        if opt is not None:
            opt["builder"].close()
            opt["runner"].close()
        cluster.close()


def test_workers_stay_warm_across_batches_and_their_start_up_is_counted_once(matmul_task):
    """The build pool and the run worker start once for a whole run (three batches here): the same
    run worker process times every batch, and ``starts`` / ``startup_s`` say what start-up cost."""
    from release.measure import _worker

    opt = measure_option(LocalBuilder(n_parallel=1, timeout=60),
                         LocalRunner(number=1, repeat=1, min_repeat_ms=0, cooldown_interval=0.0))
    try:
        m = Measurer(matmul_task, opt)
        pids = set()
        for seed in (21, 22, 23):
            m.measure(_configs(matmul_task, 2, seed))
            pids.add(opt["runner"]._runner.pool.submit(_worker.ping).result())
        assert m.stats["batches"] == 3
        assert opt["builder"].starts == 1 and opt["runner"].starts == 1 and len(pids) == 1
        assert opt["builder"].startup_s > 0 and opt["runner"].startup_s > 0
    finally:
        opt["builder"].close()
        opt["runner"].close()


def test_the_fidelity_replay_counts_cuts_and_a_lost_best():
    """``benchmarks/early_termination_fidelity.py`` (the evidence for the default) replays the cut
    as the measurer does: running best of fully timed means, first cost against ratio x best."""
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "benchmarks", "early_termination_fidelity.py")
    spec = importlib.util.spec_from_file_location("early_termination_fidelity", path)
    fid = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fid)
    costs = [[1.0] * 3, [3.0] * 3, [0.5] * 3, [1.2, 0.1, 0.1]]  # B cut; D cut although its mean is a new best
    recs = [{"config": (i,), "costs": c, "run_s": 1.0} for i, c in enumerate(costs)]
    out = fid.replay(recs, 2.0)
    assert (out["cut"], out["saved"], out["repeats"], out["lost"]) == (2, 4, 12, 1)
    assert out["best_changed"] and out["best_ratio"] == pytest.approx(0.5 / (1.4 / 3))
    assert out["run_saved"] == pytest.approx(2 * 2 / 3)
    assert fid.replay(recs, 3.0)["cut"] == 0  # 3.0 is not over 3 x 1.0, 1.2 not over 1.5


def test_records_say_whether_the_cache_was_flushed_and_a_resume_keeps_the_setting(tmp_path, capsys):
    """--cache-flush is stored in each record; resuming a log with the other setting is refused in one line
    (exit 2, nothing appended), with the same setting it resumes; the check counts only kernels that ran."""
    from release.cli import main
    from release.errors import RecordError
    from release.measure import check_log_cache_flush, load_records

    log = tmp_path / "m.jsonl"
    base = ["tune", "--workload", "tiny.matmul.1", "--tuner", "random", "--no-knowledge", "--log", str(log),
            "--no-progress", "--repeat", "1", "--min-repeat-ms", "1"]
    assert main(base + ["--n-trial", "2", "--cache-flush"]) == 0
    recs = load_records(log)
    assert len(recs) == 2 and all(r.cache_flush for r in recs if r.ok) and any(r.ok for r in recs)
    capsys.readouterr()
    assert main(base + ["--n-trial", "3"]) == 2
    err = capsys.readouterr().err
    assert "measured with the CPU cache flushed" in err and "add --cache-flush, or give a new --log" in err
    assert len(load_records(log)) == 2  # nothing appended
    assert main(base + ["--n-trial", "3", "--cache-flush"]) == 0
    assert len(load_records(log)) == 3
    # an old line without the field reads as not flushed; failed and default-schedule records do not count
    hot = MeasureResult(config=(1,), costs=[1e-3])
    failed = MeasureResult(config=(2,), error_kind="run_error", error_msg="x")
    default = MeasureResult(config=(), costs=[1e-3], default=True)
    old = json.loads(hot.to_json())
    del old["cache_flush"]
    assert MeasureResult.from_json(json.dumps(old)).cache_flush is False
    check_log_cache_flush([failed, default], True, "x.jsonl")
    with pytest.raises(RecordError, match="measured without the CPU cache flushed.*drop --cache-flush"):
        check_log_cache_flush([hot, failed], True, "x.jsonl")
