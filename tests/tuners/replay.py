"""Replay of recorded measurements: a measurer that answers from a committed log of real runs.

``ReplayMeasurer`` has the interface the tuning loop uses of :class:`release.measure.Measurer`
(``batch_size``, ``measure(configs, on_result)``, ``stats``, ``close``) but measures nothing:

- a config is replayed for real (``KnobSpace.apply``, TVM's trace replay and postprocessors), so
  a config that is not a legal program comes back ``invalid`` exactly as in a live run;
- a legal config found in the log (``tests/fixtures/tuners/replay_matmul.jsonl``: 96 real
  measurements of ``tiny.matmul.1`` on the project's CPU, random tuner, seed 12345) gets the
  log's run times (or its error);
- any other legal config gets the synthetic run time :func:`synthetic_cost`, a fixed function of
  the config (a smooth bowl over the knob indices times a hash-derived factor in [1, 1.1)), so
  the same config always gets the same cost on every machine.

This is a replay of real measurements, not a mock of TVM: nothing about TVM is faked, only the
timings come from a file. It makes tuner behaviour deterministic (the same seed measures the
same configs in the same order), which ``test_determinism.py`` relies on.
"""

from __future__ import annotations

import hashlib
import os

from release.errors import InvalidConfigError
from release.measure.measure import ErrorKind, MeasureResult
from release.measure.records import load_records

FIXTURE = os.path.join(os.path.dirname(__file__), os.pardir, "fixtures", "tuners", "replay_matmul.jsonl")


def synthetic_cost(config, dims) -> float:
    """Run time (s) of a config that the log does not hold: ``2e-5 * (1 + bowl) * (1 + 0.1 * h)``.

    ``bowl = sum_j ((c_j + 1) / (d_j + 1) - 0.4) ** 2`` over knobs ``j`` (index ``c_j`` of a knob
    with ``d_j`` choices); ``h`` in [0, 1) from the SHA-1 of the config's decimal text. Between
    20 and ~130 microseconds for ``tiny.matmul.1``.
    """
    bowl = sum(((c + 1) / (d + 1) - 0.4) ** 2 for c, d in zip(config, dims))
    digest = hashlib.sha1(",".join(str(int(c)) for c in config).encode()).digest()
    h = int.from_bytes(digest[:4], "little") / 2**32
    return 2e-5 * (1.0 + bowl) * (1.0 + 0.1 * h)


class ReplayMeasurer:
    """Answers measurements from a log of real ones (see the module docstring).

    Parameters
    ----------
    task : release.task.Task
        The task tuned (``tiny.matmul.1`` for the committed log).
    log : str
        JSON-lines log of real measurements of ``task`` (default: the committed fixture).
    batch_size : int
        Configs per batch the tuner is asked for (default 2, the test builder's ``n_parallel``).

    Attributes
    ----------
    calls : list[list[tuple]]
        Every ``measure`` call's configs, in order (the sequence the determinism test compares).
    """

    def __init__(self, task, log: str = FIXTURE, batch_size: int = 2):
        self.task = task
        self.batch_size = int(batch_size)
        space = task.config_space
        self.table = {}
        # matched by workload, not by task key: the key holds the target's mcpu, and the committed
        # log was measured on another CPU (znver3) than the one the tests may run on; the lookup only
        # needs the same knob space
        for rec in load_records(log):
            if rec.name == task.name:
                self.table[space.canonical(tuple(rec.config))] = rec
        self.calls: list[list[tuple]] = []
        self.stats = {"replay": 0.0, "build": 0.0, "run": 0.0, "total": 0.0, "configs": 0, "measured": 0,
                      "batches": 0}
        self.hits = 0

    def measure(self, configs, on_result=None) -> list[MeasureResult]:
        """One :class:`MeasureResult` per config, in order; ``on_result`` called on each."""
        space = self.task.config_space
        out = []
        batch = []
        for c in configs:
            c = space.canonical(c)
            batch.append(c)
            r = MeasureResult(config=c)
            try:
                r.set_trace(space.apply(c).trace)  # as the real Measurer records it
            except InvalidConfigError as err:
                r.error_kind, r.error_msg = ErrorKind.INVALID, err.reason
            else:
                rec = self.table.get(c)
                if rec is not None:
                    self.hits += 1
                    r.costs, r.error_kind, r.error_msg = list(rec.costs), rec.error_kind, rec.error_msg
                else:
                    r.costs = [synthetic_cost(c, space.dims)]
                self.stats["measured"] += 1
            self.stats["configs"] += 1
            out.append(r)
            if on_result is not None:
                on_result(r)
        self.stats["batches"] += 1
        self.calls.append(batch)
        return out

    def close(self) -> None:
        """Nothing to release."""
