"""The best config's output is checked against a reference before it is reported."""

from __future__ import annotations

import pytest
from noinit import noinit_task

from release.check import OutputChecker, compile_config
from release.measure import apply_history_best, load_records, log_to_file
from release.measure.measure import ErrorKind, MeasureResult
from release.measure.records import Record, best_records
from release.tuners import get_tuner


def test_the_no_init_matmul_never_yields_a_best_with_a_wrong_output(fast_measure, tmp_path):
    """Real builds and runs: every valid config of this program reads an uninitialised buffer."""
    task = noinit_task()
    log = str(tmp_path / "noinit.jsonl")
    first = get_tuner("random", task, seed=0)
    first.tune(3, fast_measure, callbacks=[log_to_file(log)])
    recs = load_records(log)
    wrong = {tuple(r.config) for r in recs if r.error_kind == ErrorKind.WRONG_OUTPUT}
    measured = {tuple(r.config) for r in recs if r.ok}
    assert len(measured) == 3 and wrong, "the program's kernels are wrong; some must have been caught"
    assert first.best_config not in wrong
    checker = OutputChecker(task)
    if first.best_config is not None:  # a config that is right after all must pass an independent check
        assert checker(first.best_config) == ""
    assert all(checker(c) != "" for c in wrong)
    best = apply_history_best(log).best(task)
    # the log's best is the tuner's verified best (wrong outputs are no successful records)
    assert (None if best is None else tuple(best.config)) == first.best_config
    # a resumed run keeps them out: wrong configs are no new trials and never the best
    second = get_tuner("random", task, seed=1)
    second.tune(5, fast_measure, callbacks=[log_to_file(log)])
    recs = load_records(log)
    wrong = {tuple(r.config) for r in recs if r.error_kind == ErrorKind.WRONG_OUTPUT}
    assert second.trials == 5 and second.best_config not in wrong
    assert len({tuple(r.config) for r in recs if r.ok}) == 5


def test_a_right_best_is_verified_and_kept(matmul_task, fast_measure):
    tuner = get_tuner("random", matmul_task, seed=0)
    tuner.tune(2, fast_measure)
    assert tuner.best_config is not None and tuner.session.verified is True and not tuner.session.wrong


def test_verify_best_demotes_a_wrong_best_and_checks_the_next(matmul_task):
    """Session bookkeeping on told results; the checker here is a rule on configs."""
    sp = matmul_task.config_space
    tuner = get_tuner("grid", matmul_task)
    s = tuner.session
    configs = s.ask(3)
    s.tell(configs, [MeasureResult(config=c, costs=[1e-4 * (i + 1)]) for i, c in enumerate(configs)])
    assert s.best_config == configs[0]
    logged = []
    wrong = s.verify_best(lambda c: "wrong" if c in configs[:2] else "", on_result=logged.append)
    assert [r.config for r in wrong] == configs[:2] == [r.config for r in logged]
    assert all(r.error_kind == ErrorKind.WRONG_OUTPUT for r in wrong)
    assert s.best_config == configs[2] and s.best_cost == pytest.approx(3e-4) and s.verified
    assert s.trials == 3, "a re-check of a measured config is no new trial"
    # resumed from the records (measurements, then the wrong_output ones): same best
    recs = [Record.from_result(matmul_task, r) for r in
            [MeasureResult(config=c, costs=[1e-4 * (i + 1)]) for i, c in enumerate(configs)] + wrong]
    again = get_tuner("grid", matmul_task).session
    again.resume(recs)
    assert again.best_config == configs[2] and again.trials == 3
    assert tuple(best_records(recs)[matmul_task.key].config) == tuple(configs[2])
    assert sp.canonical(configs[2]) == configs[2]


def test_compile_config_builds_what_compile_tir_gives(matmul_task):
    config = matmul_task.config_space.canonical(matmul_task.config_space.get(0))
    lib = compile_config(matmul_task, config)
    assert matmul_task.check(lib) < 1e-3
