"""``autotvm.record``: read, pick and write tuning logs with AutoTVM's function names.

A log is ReLeASE's JSON-lines log (one :class:`release.measure.Record` a line, ``log_to_file``).
AutoTVM's functions map onto it:

- :func:`load_from_file` / :func:`load_from_buffer`: ``(MeasureInput, MeasureResult)`` pairs;
- :func:`decode` / :func:`encode`: one line to a pair and back (``protocol="json"`` only);
- :func:`pick_best`: the best record of every task into another log (for ``apply_history_best``).

A line of an AutoTVM log (``{"input": ..., "config": ..., "result": ...}``) raises
:class:`release.errors.RecordError`: its configs index AutoTVM's template knobs, which TVM 0.27
no longer has; the knob spaces here come from MetaSchedule's design spaces, so those records
cannot be carried over (tune again). The ``pickle`` protocol raises :class:`release.errors.AliasError`.
Everything else of :mod:`release.measure.records` is here too (``load_records``, ``best_records``,
``log_to_file``, ...).
"""

from __future__ import annotations

import json
import os
from typing import IO, Iterator

from ..errors import AliasError, RecordError
from ..measure.records import (ApplyHistoryBest, Record, add_to_database, best_records,  # noqa: F401  (re-exported)
                               check_log_for_task, load_records, log_to_database, log_to_file)
from ..measure.result import MeasureResult
from ..tuners.tuner import MeasureInput
from .history import apply_history_best  # noqa: F401  (AutoTVM had it here too)


class LoggedTask:
    """What a log line says of its task: ``name``, ``key`` (:attr:`release.task.Task.key`) and
    ``target`` (canonical JSON), the ``task`` of the :class:`MeasureInput` that :func:`decode` gives."""

    __slots__ = ("name", "key", "target")

    def __init__(self, name: str, key: str, target: str):
        self.name, self.key, self.target = name, key, target

    def __repr__(self) -> str:
        return f"LoggedTask({self.name!r}, target={self.target})"


def _check_protocol(protocol: str) -> None:
    if protocol == "pickle":
        raise AliasError("protocol='pickle' pickled AutoTVM's Relay-era objects, which TVM 0.27 no longer has; "
                         "ReLeASE's logs are JSON lines (protocol='json')")
    if protocol != "json":
        raise RecordError(f"unknown protocol {protocol!r}; ReLeASE's logs are JSON lines (protocol='json')")


def decode(row: str, protocol: str = "json"):
    """One log line to ``(MeasureInput, MeasureResult)``; None for a line that is no record.

    Parameters
    ----------
    row : str
        A line of a JSON-lines log.
    protocol : str
        ``"json"`` (the only one).

    Returns
    -------
    tuple of (release.tuners.MeasureInput, release.measure.MeasureResult) or None
        The input's ``task`` is a :class:`LoggedTask` (the log holds no program); the result is the
        whole record (``costs`` in seconds, ``error_kind``, ``timestamp``, ``trace``, ...).

    Raises
    ------
    RecordError
        ``row`` is a line of an AutoTVM log (see the module docstring), or the protocol is unknown.
    AliasError
        ``protocol="pickle"``.
    """
    _check_protocol(protocol)
    try:
        rec = Record.from_json(row)
    except (ValueError, TypeError):
        try:
            d = json.loads(row)
        except ValueError:
            return None
        if isinstance(d, dict) and "input" in d and "result" in d:
            raise RecordError("this is a line of an AutoTVM log: its configs index AutoTVM's template knobs, "
                              "which TVM 0.27 no longer has (ReLeASE's knobs come from MetaSchedule's design "
                              "spaces), so it cannot be carried over; tune the task again") from None
        return None
    return MeasureInput(LoggedTask(rec.name, rec.task, rec.target), rec.config), rec


def encode(inp, result: MeasureResult, protocol: str = "json") -> str:
    """``(MeasureInput, MeasureResult)`` to one log line (no newline); the inverse of :func:`decode`.

    A result not yet stamped with its task takes it from ``inp.task`` (a :class:`release.task.Task`).

    Raises
    ------
    RecordError
        The protocol is unknown, or neither the result nor the input names a task.
    AliasError
        ``protocol="pickle"``.
    """
    _check_protocol(protocol)
    if not result.task:
        if not hasattr(inp.task, "flop"):
            raise RecordError("the result names no task and the input's task is no release.task.Task")
        result = Record.from_result(inp.task, result)
    return result.to_json()


def load_from_buffer(file: IO[str]) -> Iterator[tuple]:
    """``(MeasureInput, MeasureResult)`` of every record line of an open text file, in order
    (lines that are no record are skipped; an AutoTVM log's line raises, see :func:`decode`)."""
    for row in file:
        if row.strip():
            pair = decode(row)
            if pair is not None:
                yield pair


def load_from_file(filename: str | os.PathLike) -> Iterator[tuple]:
    """``(MeasureInput, MeasureResult)`` of every record of a log, in file order (an iterator).

    Raises
    ------
    RecordError
        At the call: the file does not exist or is a folder. While iterating: it is an AutoTVM
        log (see :func:`decode`).
    """
    filename = os.fspath(filename)
    if not os.path.exists(filename):
        raise RecordError(f"log {filename} does not exist")
    if os.path.isdir(filename):
        raise RecordError(f"log path {filename} is a folder; give a JSON-lines log file")
    return _read(filename)


def _read(filename: str) -> Iterator[tuple]:
    with open(filename, encoding="utf-8", errors="replace") as f:
        yield from load_from_buffer(f)


def pick_best(in_file: str | os.PathLike, out_file: str | os.PathLike) -> int:
    """Write the best successful record of every task of ``in_file`` to ``out_file`` (replaced).

    Returns
    -------
    int
        How many records were written (one per task with a successful record).

    Raises
    ------
    RecordError
        ``in_file`` does not exist or is not a tuning log.
    """
    in_file = os.fspath(in_file)
    if not os.path.exists(in_file):
        raise RecordError(f"log {in_file} does not exist")
    best = best_records(load_records(in_file))
    with open(out_file, "w", encoding="utf-8") as f:
        for rec in best.values():
            f.write(rec.to_json() + "\n")
    return len(best)


__all__ = ["LoggedTask", "decode", "encode", "load_from_buffer", "load_from_file", "pick_best", "apply_history_best",
           "load_records", "best_records", "log_to_file", "log_to_database", "Record"]
