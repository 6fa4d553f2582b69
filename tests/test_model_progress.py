"""Whole-model tuning a user can trust: progress and an estimate of the time left
in every long phase, tasks ordered by their share of the end-to-end latency."""

import re
from types import SimpleNamespace

import numpy as np
import pytest

from release import relax as M


def task(key, weight, flop):
    return SimpleNamespace(key=key, name=key, weight=weight, flop=flop)


def tuner(best_s):
    return SimpleNamespace(best_config=[0] if best_s is not None else None,
                           best_cost=best_s if best_s is not None else float("inf"))


def test_latency_share_uses_measured_latency_and_estimates_the_rest():
    tasks = [task("a", 1, 4e9), task("b", 2, 1e9), task("c", 1, 1e9)]
    # nothing measured: the FLOP share (weight x flop) = 4 : 2 : 1
    np.testing.assert_allclose(M.latency_shares(tasks), [4 / 7, 2 / 7, 1 / 7])
    # a measured at 1 ms (4e12 FLOP/s), b at 2 ms per run (0.5e12 FLOP/s, a slow kernel): measured
    # weight x latency = 1 ms and 4 ms; c (unmeasured) estimated at the measured throughput
    # (4e9 + 2e9) FLOP / 5 ms: 1e9 / 1.2e12 s = 0.833 ms
    shares = M.latency_shares(tasks, {"a": tuner(1e-3), "b": tuner(2e-3), "c": tuner(None)})
    cost = np.array([1e-3, 4e-3, 1e9 / 1.2e12])
    np.testing.assert_allclose(shares, cost / cost.sum())
    assert shares.argmax() == 1  # the slow kernel now costs the model most, not the FLOP-heaviest task


def test_tune_model_prints_progress_and_time_left_in_every_phase(tiny_cnn_run):
    """`release tune-model` on tiny-cnn with progress on and stderr a pipe (a log file, CI; the run is
    conftest's ``tiny_cnn_run``): plain progress lines (done/total, elapsed and the time left) for extraction,
    tuning, the compile and the comparisons; the table has the latency share, and the tasks come in the order
    of that share."""
    _, p = tiny_cnn_run
    err = p.stderr.replace("\r", "\n")
    assert "%|" not in err and "it/s" not in err  # no tqdm bar drawn into a pipe
    for phase, unit in (("extract", "task"), ("model", "trial"), ("compile", "stage"), ("compare", "step")):
        lines = [l for l in err.splitlines() if re.match(rf"{phase}: \d+/\d+ {unit}s, .*elapsed \d+:\d\d, "
                                                         rf"ETA \d+:\d\d$", l)]
        assert lines, f"no {phase} progress line in:\n{err[-3000:]}"
        done, total = map(int, re.match(rf"{phase}: (\d+)/(\d+)", lines[-1]).groups())
        assert done == total > 0, lines[-1]  # the last line of each phase says it finished
    assert "% of the latency" in err  # the tuning bar names the task's latency share
    out = p.stdout
    assert "compare  torch" in out  # the untuned build is timed before the comparisons, always
    assert re.search(r"^untuned  [0-9.]+ ms on \d+ threads", out, re.M) and re.search(r"^verdict  the tuned build", out, re.M)
    head = next(l for l in out.splitlines() if l.startswith("task "))
    assert "latency %" in head and "FLOP %" in head
    rows = out.split(head, 1)[1].strip().splitlines()[:2]
    shares = [float(r.split()[3]) for r in rows]
    assert shares == sorted(shares, reverse=True) and sum(shares) == pytest.approx(100, abs=0.2)
