"""A tuned model is never slower than what it replaces: TVM's default schedule of every task is
measured once as a candidate and recorded as such, applying the log keeps it where it is faster, and
``tune-model`` exports the untuned build when the tuned one is slower end to end.

Decisions are checked on committed or constructed timings and on the timings a run printed, never on
how fast anything ran here (a loaded machine must pass)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from release import relax as M
from release.commands import tuned_or_untuned
from release.measure import apply_history_best, load_records


@pytest.fixture(scope="module")
def tuned_tiny(tiny_cnn_run):
    """The documented command on a model of tiny operators with a handful of trials (conftest's
    ``tiny_cnn_run``: ``release tune-model --model tiny-cnn``, NCHWc, 16 random trials); its model, tasks,
    log and output."""
    from release.target import resolve_target

    log, p = tiny_cnn_run
    target = resolve_target("llvm")
    model = M.load_model("tiny-cnn")
    tasks = M.extract_tasks(model, target, layout="NCHWc")
    return model, target, tasks, log, p.stdout


def test_each_task_default_is_measured_once_marked_and_never_a_trial(tuned_tiny, fast_measure):
    model, target, tasks, log, out = tuned_tiny
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    dflt = [r for r in rows if r["default"]]
    assert sorted(r["task"] for r in dflt) == sorted(t.key for t in tasks)  # one per task, tuned or not
    assert all(r["config"] == [] and r["trace"] is None for r in dflt)
    assert all(r["config"] for r in rows if not r["default"])
    # readers that tune or learn never see them; apply_history_best does
    assert len(load_records(log)) == 16 == len(rows) - len(tasks)
    assert len(load_records(log, defaults=True)) == len(rows)
    ok = {r["task"]: 1e3 * np.mean(r["costs"]) for r in dflt if r["costs"] and not r["error_kind"]}
    assert M.default_ms(tasks, str(log)) == pytest.approx(ok)  # milliseconds, as the table prints them
    for t in tasks:  # the table's "default ms" column
        row = next(ln for ln in out.splitlines() if ln.startswith(t.name[:48]))
        assert float(row.split()[-1]) == pytest.approx(ok[t.key], abs=1e-4), row
    # a resumed run neither re-measures a default nor counts one as a trial
    again = M.tune_model(tasks, 17, str(log), tuner="random", scheduler="round-robin", measure_option=fast_measure,
                         chunk=1, progress=False)
    rows2 = [json.loads(line) for line in log.read_text().splitlines()]
    assert sum(r["default"] for r in rows2) == len(tasks) and len(rows2) == len(rows) + 1
    assert sum(r["trials"] for r in again.table()) == 17 and again.default_ms == pytest.approx(ok)


def _with_default_cost(log, out, seconds: float, machine: str | None = None):
    """A copy of ``log`` whose default records cost ``seconds`` (and, with ``machine``, were timed there)."""
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    for r in rows:
        if r["default"]:
            r["costs"], r["error_kind"] = [seconds, seconds], ""
            if machine is not None:
                r["machine"] = machine
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


def test_applying_the_log_keeps_the_default_where_it_is_faster(tuned_tiny, tmp_path):
    model, target, tasks, log, _ = tuned_tiny
    fast = apply_history_best(str(_with_default_cost(log, tmp_path / "fast.jsonl", 1e-12)))
    db = fast.database(tasks)
    assert fast.defaulted == tasks and not fast.matched and not fast.unmatched
    assert f"{len(tasks)} of {len(tasks)} tasks keep TVM's default schedule" in fast.report()
    assert all(fast.keeps_default(t) for t in tasks)
    out = M.evaluate(model, M.compile_model(model, target, db, layout="NCHWc"), number=1, repeat=1)
    assert out["max_abs_err"] < 1e-4  # the build with the default kernels is the model

    slow = apply_history_best(str(_with_default_cost(log, tmp_path / "slow.jsonl", 1e3)))
    slow.database(tasks)
    tuned = [t for t in tasks if slow.best(t) is not None]
    assert tuned and slow.matched == tuned  # a task with no tuned record keeps its default
    assert slow.defaulted == [t for t in tasks if t not in tuned]
    assert ("default schedule" in slow.report()) == bool(slow.defaulted)
    # a default timed on another machine is not compared with this machine's tuned kernels
    other = apply_history_best(str(_with_default_cost(log, tmp_path / "other.jsonl", 1e-12, machine="Other CPU 9")))
    other.database(tasks)
    assert not other.defaulted and all(other.default_record(t) is None for t in tasks)


def test_the_exported_build_is_the_faster_by_fastest_and_median_of_repeats():
    """The decision rule of tune-model's export: the untuned build replaces the tuned one only when it is
    faster in both the fastest and the median of its repeats."""
    def timing(fastest, median):
        return {"fastest_ms": fastest, "latency_ms": median}

    keep, why = tuned_or_untuned(timing(2.0, 2.2), timing(1.0, 1.1))
    assert keep == "untuned" and "slower than the untuned one (2.000 vs 1.000 ms fastest" in why
    keep, why = tuned_or_untuned(timing(1.0, 1.1), timing(2.0, 2.2))
    assert keep == "tuned" and "2.00x faster than the untuned one" in why
    keep, why = tuned_or_untuned(timing(1.1, 1.0), timing(1.0, 1.2))  # faster only in the fastest: noise
    assert keep == "tuned" and "within the timing noise" in why
    keep, why = tuned_or_untuned(timing(0.00712, 0.0074), timing(0.00695, 0.0071))  # a tiny model: microseconds
    assert keep == "untuned" and "(0.00712 vs 0.00695 ms fastest, 0.00740 vs 0.00710 ms median)" in why


def test_tune_model_exports_the_faster_build_and_says_which(tuned_tiny):
    """The untuned build is timed though not asked for, the verdict follows the printed timings (fastest
    and median of repeats), the exported library runs and gives the model's output."""
    import tvm

    model, _, _, log, out = tuned_tiny
    tuned = re.search(r"^tuned +([0-9.]+) ms .*median ([0-9.]+)\)", out, re.M)
    untuned = re.search(r"^untuned +([0-9.]+) ms .*median ([0-9.]+);", out, re.M)
    assert tuned and untuned, out
    t = {"fastest_ms": float(tuned.group(1)), "latency_ms": float(tuned.group(2))}
    u = {"fastest_ms": float(untuned.group(1)), "latency_ms": float(untuned.group(2))}
    verdict = next(ln for ln in out.splitlines() if ln.startswith("verdict  "))
    if t["fastest_ms"] != u["fastest_ms"] and t["latency_ms"] != u["latency_ms"]:  # not a tie as printed
        keep, _ = tuned_or_untuned(t, u)
        assert ("the untuned build is exported instead" in verdict) == (keep == "untuned"), (verdict, t, u)
    lib = log.with_suffix(".so")  # the exported library, whichever build it is, is the model
    assert M.evaluate(model, tvm.runtime.load_module(str(lib)), number=1, repeat=1)["max_abs_err"] < 1e-4
