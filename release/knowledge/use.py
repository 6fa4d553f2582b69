"""How tuning uses the knowledge base: read a task's prior records, add every new measurement.

- :func:`knowledge_records` turns what a caller passes as ``knowledge=`` (a folder, a
  :class:`KnowledgeBase`, a list of records, or None/False for none) into the records of the
  task's target class (other targets are left out with one warning line by
  :meth:`KnowledgeBase.records`).
- :class:`log_to_knowledge` is a tuner callback that appends each measurement's record to a base
  (append-only shard per writer, fsynced per batch: nothing measured is lost; concurrent
  ``release tune`` processes are safe, see :mod:`release.knowledge.base`).
"""

from __future__ import annotations

import logging
import os

from ..callback import Callback
from ..measure.records import Record
from .base import KnowledgeBase

logger = logging.getLogger(__name__)


def knowledge_records(knowledge, task) -> list[Record]:
    """The knowledge records a tuner of ``task`` may learn from.

    Parameters
    ----------
    knowledge : str, PathLike, KnowledgeBase, list of Record, None or False
        A knowledge base folder (a missing folder holds nothing), a base, or records already
        read. None or False: none.
    task : release.task.Task
        Records are filtered to its target class (kind, ``mcpu``, ``mtriple``, ``arch``, ``mattr``).

    Returns
    -------
    list of Record
        Deduplicated records of the task's target class, all workloads (this task's earlier runs
        included).

    Raises
    ------
    KnowledgeError
        The folder is a file, or holds a shard of an unreadable format version.
    """
    if knowledge is None or knowledge is False:
        return []
    if isinstance(knowledge, (list, tuple)):
        from .base import _target_matcher

        match = _target_matcher(task.target_json)
        return [r for r in knowledge if match(r.target)]
    if isinstance(knowledge, (str, os.PathLike)):
        if not os.path.isdir(knowledge):
            if os.path.exists(knowledge):
                KnowledgeBase(knowledge)  # raises the one-line error for a file
            return []
        knowledge = KnowledgeBase(knowledge)
    return knowledge.records(target_kind=task.target_json)


def knowledge_programs(knowledge):
    """The stored-program lookup of ``knowledge`` (``key -> Task or None``), or None for records.

    A folder or :class:`KnowledgeBase` gives :meth:`KnowledgeBase.program` (programs of workloads
    that no registered name rebuilds: model tasks, blocked layouts, users' programs); a list of
    records, None or False give None (only registered workloads are rebuilt).
    """
    if isinstance(knowledge, KnowledgeBase):
        return knowledge.program
    if isinstance(knowledge, (str, os.PathLike)) and os.path.isdir(knowledge):
        return KnowledgeBase(knowledge).program
    return None


class log_to_knowledge(Callback):  # noqa: N801 - AutoTVM's callback naming (log_to_file)
    """Append each measured record to a knowledge base (``release tune`` does so unless ``--no-knowledge``).

    Parameters
    ----------
    base : str, PathLike or KnowledgeBase
        The base (a folder is created on the first record).

    Notes
    -----
    The task's program is stored once (:meth:`KnowledgeBase.add_program`), so the transfer cost
    model can rebuild it later even when no registered workload name makes it (model tasks).
    One :meth:`KnowledgeBase.add` per completed measurement (one ``os.write`` + ``fsync``);
    a record the base already holds (same workload, target, trace) is not added twice. The shard
    stays open across ``tune`` calls (``tune_model`` calls ``tune`` once per chunk: one shard, not
    one per chunk); ``base.close()`` closes it.
    """

    def __init__(self, base):
        self.base = base if isinstance(base, KnowledgeBase) else KnowledgeBase(base)
        self.added = 0
        self._stored: set[str] = set()

    def on_result(self, tuner, inputs, results) -> None:
        recs = [Record.from_result(tuner.task, r, tuner=tuner.name) for r in results]
        self.added += self.base.add(recs)
        if recs and tuner.task.key not in self._stored:  # the program once, so any later task can learn from it
            self.base.add_program(tuner.task)
            self._stored.add(tuner.task.key)

    def __repr__(self) -> str:
        return f"log_to_knowledge({self.base.path})"


__all__ = ["knowledge_records", "knowledge_programs", "log_to_knowledge"]
