"""How tuning uses the knowledge base: read a task's prior records, add every new measurement.

- :func:`knowledge_records` turns what a caller passes as ``knowledge=`` (a folder, a
  :class:`KnowledgeBase`, a list of records, or None/False for none) into the records of the
  task's target class (other targets are left out with one warning line by
  :meth:`KnowledgeBase.records`).
- :class:`log_to_knowledge` is a tuner callback that appends each measurement's record to a base
  (append-only shard per writer, fsynced per batch: nothing measured is lost; concurrent
  ``release tune`` processes are safe, see :mod:`release.knowledge.store`).
"""

from __future__ import annotations

import logging
import os

from ..callback import Callback
from ..measure.records import Record
from .store import KnowledgeBase

logger = logging.getLogger(__name__)


def knowledge_records(knowledge, task, best: int | None = None) -> list[Record]:
    """The knowledge records a tuner of ``task`` may learn from.

    Parameters
    ----------
    knowledge : str, PathLike, KnowledgeBase, list of Record, None or False
        A knowledge base folder (a missing folder holds nothing), a base, or records already
        read. None or False: none.
    task : release.task.Task
        Records are filtered to its ISA class (:func:`release.target.isa_class`): every CPU model
        of the class, so a base written on a Xeon serves a Zen 4 with AVX-512.
    best : int, optional
        Only each workload's fastest successful records per machine (at most ``best``, fewer when
        the base holds many workloads: about ``4 * best`` in all), read from a base through its
        shard index (:meth:`KnowledgeBase.best_records`: seconds for a base of 64,764
        records instead of a parse of all of them); what seeds need. Default None: every record
        (the transferred cost model learns from all). Lists and the pack are returned whole.

    Returns
    -------
    KnowledgeRecords
        A list of the deduplicated records of the task's ISA class, all workloads; when the base
        holds none of the class, the shipped pack's (:func:`release.knowledge.pack.pack_records`;
        ``source`` says which) (this task's earlier runs
        included).

    Raises
    ------
    KnowledgeError
        The folder is a file, or holds a shard of an unreadable format version.
    """
    if knowledge is None or knowledge is False:
        return KnowledgeRecords()
    if isinstance(knowledge, (list, tuple)):
        from .targets import _target_matcher

        match = _target_matcher(task.target_json)
        return KnowledgeRecords([r for r in knowledge if match(r.target)], "records")
    where = "base"
    if isinstance(knowledge, (str, os.PathLike)):
        if not os.path.isdir(knowledge):
            if os.path.exists(knowledge):
                KnowledgeBase(knowledge)  # raises the one-line error for a file
            knowledge = None
        else:
            knowledge = KnowledgeBase(knowledge)
    held = None
    if knowledge is None:
        got = []
    elif best is not None:
        n = max(1, int(best))  # seeds take workloads round-robin: ~4n records in all suffice (knowledge_seeds' tries)
        got, held = knowledge.best_records(target_kind=task.target_json, per=n, budget=4 * n)
    else:
        got = knowledge.records(target_kind=task.target_json)
    if not got:  # nothing of this ISA class in the user's base: the pack shipped with the package
        from .pack import pack_records

        got, where = pack_records(task.target_json), "pack"
        if got:
            logger.info("knowledge: no records of %s in the base; using the shipped pack (%s)", task.isa_class,
                        KnowledgeRecords(got, where).origin())
        held = None
    return KnowledgeRecords(got, where, held)


class KnowledgeRecords(list):
    """A list of knowledge records that says where they came from.

    Attributes
    ----------
    source : str
        ``"base"`` (the user's knowledge base), ``"pack"`` (the pack shipped with the package,
        :mod:`release.knowledge.pack`), ``"records"`` (a list given by the caller) or ``""`` (none).
    held : dict or None
        When the list holds only each workload's best records (:meth:`KnowledgeBase.best_records`):
        what the base holds of the class, ``{"records", "workloads", "machines"}``; None when the
        list is every record.
    """

    def __init__(self, records=(), source: str = "", held: dict | None = None):
        super().__init__(records)
        self.source = source
        self.held = held

    @property
    def total(self) -> int:
        """Records of the class the source holds (all of them, also when only the best were read)."""
        return self.held["records"] if self.held else len(self)

    @property
    def workloads(self) -> int:
        """Workloads of the class the source holds."""
        return self.held["workloads"] if self.held else len({r.task for r in self})

    def machines(self) -> dict:
        """Records per machine (:func:`release.target.machine_of`), most first."""
        if self.held:
            return dict(self.held["machines"])
        from collections import Counter

        from ..target import machine_of

        return dict(Counter(machine_of(r.target, r.machine) for r in self).most_common())

    def origin(self) -> str:
        """One phrase: ``"N records of M workloads from <machine> (n), ..."``."""
        per = self.machines()
        shown = ", ".join(f"{m} {n}" for m, n in list(per.items())[:4]) + (" ..." if len(per) > 4 else "")
        return (f"{self.total} record{'s' if self.total != 1 else ''} of {self.workloads} workloads "
                f"from {len(per)} machine{'s' if len(per) != 1 else ''}: {shown}")


def knowledge_seeds(task, records, n: int, seed: int = 0, sources: list | None = None) -> list[tuple]:
    """Transfer-tuning seeds: the best configs of the knowledge's workloads, carried into ``task``'s space.

    Transfer-tuning (Gibson and Cano, PACT 2022) reuses the best schedules of other kernels of the
    same class on a new one. Here each knowledge workload's successful records are ranked by GFLOPS
    and their traces carried over decision by decision (:meth:`release.space.KnobSpace.transplant`);
    the workloads take turns, nearest first (by the loop extents their tile decisions split,
    ``sum |log e_source - log e_task|``), so ``n`` seeds cover the best of many workloads rather than
    many of one. Records of ``task`` itself (an earlier run) come first, as they are. On a GPU target a
    carried config outside the task's limits (threads, shared memory per block: tiles sized for another
    shape) is moved to the nearest config within them (:meth:`release.space.KnobSpace.nearest_feasible`,
    on the knobs, no replay). Seeds that do not replay on ``task`` (postprocessing rejects them) are
    dropped; duplicates are kept once.

    Parameters
    ----------
    task : release.task.Task
    records : list of Record
        Knowledge records of ``task``'s target class (:func:`knowledge_records`).
    n : int
        At most this many seeds (a tuner's first round holds ``plan_size // 2``).
    seed : int
        Order of the records among equal GFLOPS (ties), for reproducibility.
    sources : list, optional
        When given, each seed's source workload (its record's ``task`` key) is appended to it, in the
        seeds' order (so ``len(set(sources))`` is how many workloads the seeds came from).

    Returns
    -------
    list of tuple
        Up to ``n`` distinct valid configs of ``task.config_space``, in the order to measure them.
        Empty when no record's trace has ``task``'s schedule structure (another operator kind).
    """
    import numpy as np

    from ..errors import InvalidConfigError

    space = task.config_space
    by_wl: dict[str, list] = {}
    for r in records:
        task.owns(r)  # older releases' keys of this task's program migrate to task.key
        if r.ok and (r.trace is not None or r.task == task.key):  # another task's config means nothing here
            by_wl.setdefault(r.task, []).append(r)
    rng = np.random.default_rng(seed)
    ranked = {}
    for wl, recs in by_wl.items():
        order = rng.permutation(len(recs))
        ranked[wl] = sorted((recs[i] for i in order), key=lambda r: -r.gflops)

    def extents(trace):
        try:
            insts, dec = trace[0], {int(i): v for i, v in trace[1]}
            return [float(np.prod(dec[i])) for i, inst in enumerate(insts)
                    if inst[0] == "SamplePerfectTile" and i in dec]
        except (TypeError, ValueError, IndexError, KeyError):
            return None

    sp = space.spaces[0]
    mine = [float(np.prod([int(x) for x in sp.defaults[i]])) for i in sp.sample_insts
            if i.kind.name == "SamplePerfectTile"]

    def distance(wl):
        if wl == task.key:
            return -1.0  # this task's own earlier records first
        ext = extents(ranked[wl][0].trace)
        if ext is None or len(ext) != len(mine):
            return float("inf")
        return float(np.abs(np.log(np.maximum(ext, 1)) - np.log(np.maximum(mine, 1))).sum())

    dist = {wl: distance(wl) for wl in ranked}
    order = sorted((wl for wl in ranked if dist[wl] != float("inf")), key=lambda wl: (dist[wl], wl))
    out: list[tuple] = []
    seen: set = set()
    depth, tries = 0, 0
    while len(out) < n and order and tries < 4 * n:  # replays are checked: at most 4n of them
        alive = []
        for wl in order:
            if depth >= len(ranked[wl]):
                continue
            alive.append(wl)
            rec = ranked[wl][depth]
            try:
                c = space.config_of_record(rec.config, rec.trace) if wl == task.key else space.transplant(rec.trace)
            except InvalidConfigError:
                continue
            if getattr(space, "constrained", False):  # a GPU target: carried into its limits before any replay
                c = space.nearest_feasible(c)
                if c is None:
                    continue
            if c in seen:
                continue
            seen.add(c)
            tries += 1
            if space.is_valid(c)[0]:
                out.append(c)
                if sources is not None:
                    sources.append(wl)
                if len(out) >= n:
                    break
        order, depth = alive, depth + 1
    return out


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


__all__ = ["KnowledgeRecords", "knowledge_records", "knowledge_seeds", "knowledge_programs", "log_to_knowledge"]
