"""``TuningSession``: ask / observe / tell / resume, and every driver running through it."""

from __future__ import annotations

import pytest

from replay import ReplayMeasurer

from release.measure.measure import ErrorKind, MeasureResult
from release.measure.records import Record
from release.session import TuningSession
from release.tuners.simple import GridSearchTuner, RandomTuner


class SessionSpy:
    """Counts the session calls of every :class:`TuningSession` (wraps the real methods)."""

    def __init__(self, monkeypatch):
        self.counts = {"ask": 0, "tell": 0, "resume": 0, "run": 0}
        self.sessions = set()
        for name in self.counts:
            orig = getattr(TuningSession, name)

            def wrapper(session, *a, _orig=orig, _name=name, **kw):
                self.counts[_name] += 1
                self.sessions.add(id(session))
                return _orig(session, *a, **kw)

            monkeypatch.setattr(TuningSession, name, wrapper)


def test_ask_gives_canonical_distinct_unvisited_configs(matmul_task):
    tuner = GridSearchTuner(matmul_task)
    s = tuner.session
    first = s.ask(4)
    sp = matmul_task.config_space
    assert first == [sp.canonical(sp.get(i)) for i in range(4)]
    assert len(set(first)) == 4 and not (set(first) & s.visited)
    # told: visited, trials, best; an invalid result marks visited but is not a trial
    res = [MeasureResult(config=c, costs=[1e-4 * (i + 1)]) for i, c in enumerate(first[:3])]
    res.append(MeasureResult(config=first[3], error_kind=ErrorKind.INVALID, error_msg="not a program"))
    s.tell(first, res)
    assert s.trials == 3 and s.visited == set(first)
    assert [n for n, _ in s.rejections.values()] == [1] and s.rejected_in_a_row == 1
    assert s.best_config == first[0] and s.best_cost == pytest.approx(1e-4)
    assert s.best_flops == pytest.approx(matmul_task.flop / 1e-4)
    assert tuner.trials == s.trials and tuner.best_config == s.best_config  # the tuner reads the session
    searched = s.time_search
    nxt = s.ask(4)
    assert nxt == [sp.canonical(sp.get(i)) for i in range(4, 8)]  # the grid goes on where it stopped
    # each result of an asked config carries its round and its share of the ask's search time
    r = MeasureResult(config=nxt[0], costs=[1e-3])
    s.observe(r)
    assert r.round == 0 and r.search_s == pytest.approx((s.time_search - searched) / 4)
    assert s.trials == 4 and s.best_config == first[0]  # slower than the best: the best stays


def test_resume_is_tell_over_records_and_continues_the_rounds(matmul_task):
    sp = matmul_task.config_space
    configs = [sp.canonical(sp.get(i)) for i in range(5)]
    recs = [Record(task=matmul_task.key, name=matmul_task.name, target=matmul_task.target_json, config=list(c),
                   costs=[2e-4], round=3) for c in configs]
    recs.append(Record(task="other/abc", name="other", target="{}", config=[0] * sp.n_knobs, costs=[1e-9]))
    tuner = RandomTuner(matmul_task, seed=0)
    assert tuner.session.resume(recs) == 5
    assert tuner.trials == 5 and tuner.session.round_base == 3 and tuner.session.round == 3
    assert tuner.session.time_measure == 0  # stored measuring time is not this session's
    assert tuner.session.resume(recs) == 0  # nothing twice


def test_tune_runs_through_the_session(matmul_task, monkeypatch):
    spy = SessionSpy(monkeypatch)
    tuner = RandomTuner(matmul_task, seed=0)
    meas = ReplayMeasurer(matmul_task, batch_size=2)
    tuner.tune(6, meas)
    assert spy.counts["run"] == 1 and spy.counts["ask"] == 3 and spy.counts["tell"] == 3
    assert spy.sessions == {id(tuner.session)}
    measured = [c for batch in meas.calls for c in batch]
    assert [len(b) for b in meas.calls] == [2, 2, 2] and tuner.trials == 6
    assert len(set(measured)) == 6 and set(measured) == tuner.visited  # each asked config measured once


def test_ray_worker_runs_through_the_session(matmul_task, tmp_path, monkeypatch):
    """The body of the Ray task (``_tune_one``), run in this process: one session, real measurements."""
    import tvm

    from release.distributed.ray_tune import _tune_one
    from release.measure import load_records

    spy = SessionSpy(monkeypatch)
    shard = str(tmp_path / "shard.jsonl")
    out = _tune_one(tvm.ir.save_json(matmul_task.mod), matmul_task.target_json, matmul_task.name, 1,
                    matmul_task.key, 2, "random", 0, dict(number=1, repeat=1, n_parallel=1), shard, [], 1, {})
    assert out["trials"] == 2 and len(load_records(shard)) == 2
    assert spy.counts["run"] == 1 and spy.counts["ask"] >= 1 and spy.counts["tell"] == spy.counts["ask"]
    assert len(spy.sessions) == 1


# ---------------------------------------------------------------------- the log is read once
N_BIG = 20_000


def _big_log(task, path) -> list[tuple]:
    """A log of ``N_BIG`` records of distinct canonical configs of ``task`` (synthetic costs, written
    as ``log_to_file`` writes them); returns the configs."""
    sp = task.config_space
    configs, seen = [], set()
    i = 0
    while len(configs) < N_BIG:
        c = sp.canonical(sp.get(i))
        i += 1
        if c not in seen:
            seen.add(c)
            configs.append(c)
    with open(path, "w") as f:
        for k, c in enumerate(configs):
            rec = Record(task=task.key, name=task.name, target=task.target_json, config=list(c),
                         costs=[1e-4 + 1e-9 * k], tuner="random", flop=task.flop, round=0)
            f.write(rec.to_json() + "\n")
    return configs


class ReadCounter:
    """Counts whole-log reads (``load_records``) and record parses (``Record.from_json``)."""

    def __init__(self, monkeypatch):
        from release.measure import records

        self.reads = 0
        self.parses = 0
        load, parse = records.load_records, records.Record.from_json.__func__

        def counting_load(*a, **kw):
            self.reads += 1
            return load(*a, **kw)

        def counting_parse(cls, line):
            self.parses += 1
            return parse(cls, line)

        monkeypatch.setattr(records, "load_records", counting_load)
        monkeypatch.setattr(records.Record, "from_json", classmethod(counting_parse))


def test_resuming_a_20000_record_log_reads_it_once(matmul_task, tmp_path, monkeypatch):
    from release.measure.records import log_to_file

    log = tmp_path / "big.jsonl"
    _big_log(matmul_task, log)
    meas = ReplayMeasurer(matmul_task)  # reads its own fixture log first
    count = ReadCounter(monkeypatch)
    tuner = RandomTuner(matmul_task, seed=0)
    tuner.tune(N_BIG + 4, meas, callbacks=[log_to_file(str(log))])
    assert tuner.trials == N_BIG + 4
    assert count.reads == 1 and count.parses == N_BIG


def test_a_20_chunk_model_run_over_a_20000_record_log_reads_it_once(matmul_task, fast_measure, tmp_path,
                                                                    monkeypatch):
    from release.measure import load_records
    from release.relax import tune_model

    log = tmp_path / "big.jsonl"
    _big_log(matmul_task, log)
    count = ReadCounter(monkeypatch)
    spy = SessionSpy(monkeypatch)
    res = tune_model([matmul_task], N_BIG + 20, str(log), tuner="random", scheduler="round-robin",
                     measure_option=fast_measure, chunk=1, progress=False)
    assert res.tuners[matmul_task.key].trials == N_BIG + 20
    assert spy.counts["run"] == 20 and len(spy.sessions) == 1  # 20 chunks, one session
    assert count.reads == 1 and count.parses == N_BIG
    monkeypatch.undo()
    assert len(load_records(log)) == N_BIG + 20
