"""Tuning records: a JSON-lines log (one record per measurement) and MetaSchedule databases.

Every measurement is appended to the log and flushed (``os.fsync``) the moment it completes, so
a killed run loses nothing it finished; a tuner given the same log resumes without measuring any
config twice. Lines that do not parse are skipped with a warning, never deleted. Records convert
to MetaSchedule ``TuningRecord``s, so TVM's own ``compile_tir`` / ``compile_relax`` apply them.

A record is a :class:`release.measure.result.MeasureResult` (``Record`` is the same class): the
measurer's result, stamped with its task, tuner and provenance, is what a log stores. Fields, in
JSON order: ``task (key), name, target (JSON), config, trace (MetaSchedule trace JSON), costs (s),
error_kind, error_msg, timestamp (unix s), build_s, run_s, measure_s, search_s, fit_s, tuner,
flop, round, threads`` (threads the kernel ran on), ``layout_rewrite`` (the weight was
pre-packed), ``release_version, revision`` (the code that measured it), ``version``.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Iterable

from ..callback import Callback
from ..errors import RecordError
from .result import RECORD_VERSION, ErrorKind, MeasureResult, provenance, to_py  # noqa: F401  (re-exported)

logger = logging.getLogger(__name__)

#: One record type: a log line is a :class:`MeasureResult` (fields and JSON layout there). ``Record``
#: is kept as its name here, for the README's API, for code that imports it and for old logs.
Record = MeasureResult


def _check_path(path) -> None:
    """Raise :class:`RecordError` when ``path`` cannot be a log file: it names a folder, or its
    folder cannot be created or written (an ancestor is a file, is missing on a read-only
    filesystem, is not writable, or refuses a new file, as ``/proc`` does). Nothing is left behind."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise RecordError(f"log path {path} is a folder; give a file path such as {os.path.join(path, 'tune.jsonl')}")
    folder = os.path.dirname(os.path.abspath(path))
    probe = folder
    while not os.path.exists(probe):  # the first ancestor that exists decides
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if not os.path.isdir(probe):
        raise RecordError(f"log path {path}: {probe} is a file, not a folder; give a path such as "
                          f"{os.path.join(os.path.dirname(probe) or '.', 'tune.jsonl')}")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise RecordError(f"log path {path}: the folder {probe} is not writable; give a path in a writable folder")
    if probe == folder:  # access() says yes to root on a pseudo filesystem (/proc, /sys): try it
        import tempfile

        try:
            if os.path.exists(path):
                open(path, "a", encoding="utf-8").close()  # noqa: SIM115 - opened for append, nothing written
            else:
                tempfile.TemporaryFile(dir=folder).close()  # gone when closed
        except OSError as e:
            raise RecordError(f"log path {path}: cannot write a file in {folder} ({e.strerror or e}); give a path "
                              "in a writable folder") from None


def check_log_path(path) -> None:
    """Refuse, before any work, a ``--log`` path that cannot be a log file (see :func:`_check_path`).

    Raises
    ------
    RecordError
        The path names a folder, or its folder cannot be created or written.
    """
    _check_path(path)


# A record's JSON starts with its first field; a line cut by a crash mid-write still starts so.
_RECORD_PREFIX = '{"task":'


def load_records(path: str | os.PathLike, task=None, defaults: bool = False) -> list[Record]:
    """Read a log; corrupt lines are skipped with one warning (the file is never modified).

    Parameters
    ----------
    path : str
        JSON-lines log. A missing or empty file gives ``[]``.
    task : Task or str, optional
        Keep only records of this task: a :class:`Task` (its program on any machine of its ISA
        class, older logs' keys migrated: :meth:`release.task.Task.owns`) or a key.
    defaults : bool
        Also the records of TVM's default schedules (``Record.default``: measured once per task
        beside the tuned configs, not a config of the knob space). Default False: a tuner resuming
        from the log, a cost model or a benchmark sees only the configs it can propose.

    Returns
    -------
    list of Record
        In file order.

    Raises
    ------
    RecordError
        ``path`` is a folder, or a non-empty file none of whose lines is a record (not a tuning log,
        e.g. a config file passed by mistake); the file is left untouched. A line cut by a crash
        mid-write (it starts as a record does) counts as part of a log.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        return []
    _check_path(path)
    key = getattr(task, "key", task)
    owns = getattr(task, "owns", None)
    out, bad = [], []
    n_records = n_fragments = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                rec = Record.from_json(line)
            except (ValueError, TypeError):
                bad.append(n)
                n_fragments += line.lstrip().startswith(_RECORD_PREFIX)
                continue
            n_records += 1
            if rec.default and not defaults:
                continue
            if key is None or rec.task == key or (owns is not None and owns(rec)):
                out.append(rec)
    if bad and not n_records and not n_fragments:
        raise RecordError(f"{path} is not a tuning log (none of its {len(bad)} line(s) is a record); "
                          "pass a new --log path or an existing JSON-lines log of release")
    if bad:
        shown = ", ".join(map(str, bad[:5])) + (" ..." if len(bad) > 5 else "")
        logger.warning("%s: skipped %d unreadable line(s) (line %s); they are left in the file", path, len(bad), shown)
    return out


def check_log_for_task(path: str | os.PathLike, task) -> list[Record]:
    """Records of ``task`` in ``path``; raise if the log was written only for other tasks.

    Raises
    ------
    RecordError
        The log holds records, none of them of ``task`` (another workload, shape or target).
    """
    all_recs = load_records(path)
    mine = [r for r in all_recs if task.owns(r)]
    if all_recs and not mine:
        others = sorted({f"{r.name} on {r.target}" for r in all_recs})
        shown = "; ".join(others[:3]) + (" ..." if len(others) > 3 else "")
        raise RecordError(
            f"log {path} was written for another task ({shown}), not for {task.name} on {task.target_json}: "
            "pass a new --log path to start afresh, or the workload and target it was written for"
        )
    return mine


def check_log_cache_flush(records, cache_flush: bool, log: str) -> None:
    """Refuse to resume ``records`` (of the log at ``log``) with another cache-flush setting than they were
    measured with: a kernel timed with its weights flushed and one timed hot are not comparable, so one log keeps
    one setting (:attr:`MeasureResult.cache_flush`, ``--cache-flush``). Records that were not run (errors, TVM's
    default schedule) are not counted.

    Raises
    ------
    RecordError
        Successful records of the log were measured with the other setting.
    """
    other = [r for r in records if r.ok and not r.default and bool(r.cache_flush) != bool(cache_flush)]
    if other:
        was = "with" if other[0].cache_flush else "without"
        now = "with" if cache_flush else "without"
        fix = "add --cache-flush" if other[0].cache_flush else "drop --cache-flush"
        raise RecordError(f"log {log} holds {len(other)} records measured {was} the CPU cache flushed, and this run "
                          f"measures {now}: their costs are not comparable; {fix}, or give a new --log")


class log_to_file(Callback):
    """Tuner callback (AutoTVM's ``autotvm.callback.log_to_file``): append every record, flushed.

    Parameters
    ----------
    path : str
        JSON-lines file; created (with its folder) if missing, appended to otherwise. A tuner that
        gets this callback resumes from the records of its task already in the file.
    fsync : bool
        ``os.fsync`` after each record so a killed machine loses nothing (default True).
    """

    def __init__(self, path: str | os.PathLike, fsync: bool = True):
        self.path = os.fspath(path)
        self.fsync = fsync
        _check_path(self.path)
        folder = os.path.dirname(os.path.abspath(self.path))
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as err:
            raise RecordError(f"log path {self.path}: cannot create its folder ({err.strerror}); "
                              "give a path in a writable folder") from err
        # read once: refuses a file that is not a tuning log before anything is appended, and is
        # kept (with every record this callback appends) so resuming never re-reads the file
        self._records = load_records(self.path, defaults=True)

    @property
    def log_path(self) -> str:
        """The log's path (a tuner keeps its optimizer's state beside it)."""
        return self.path

    def records(self, task) -> list[Record]:
        """Records of ``task`` (a Task: :meth:`release.task.Task.owns`, any machine of its ISA class;
        or its key) in the file when this callback was made, plus those it appended since; the
        file is not read again. TVM's default-schedule records (``Record.default``) are not among
        them: :meth:`defaults` gives those."""
        return [r for r in self._all(task) if not r.default]

    def defaults(self, task) -> list[Record]:
        """The records of ``task``'s default schedule (``Record.default``) in the file or appended since."""
        return [r for r in self._all(task) if r.default]

    def _all(self, task) -> list[Record]:
        if hasattr(task, "owns"):
            return [r for r in self._records if task.owns(r)]
        return [r for r in self._records if r.task == task]

    def load(self, task) -> list[Record]:
        """Same as :meth:`records` (the earlier name)."""
        return self.records(task)

    def on_result(self, tuner, inputs, results) -> None:
        """Append each result's record and flush it (``os.fsync`` unless ``fsync=False``)."""
        for res in results:
            res.stamp(tuner.task, tuner.name)  # the result is the record
        self.append(results)

    def append(self, records: Iterable[Record]) -> None:
        """Append stamped records (one line each), flushed and (``fsync``) synced one by one."""
        with open(self.path, "a", encoding="utf-8") as f:
            if _ends_mid_line(self.path):  # a crash cut the last line: start a new one, lose no record
                f.write("\n")
            for res in records:
                f.write(res.to_json() + "\n")
                self._records.append(res)
                f.flush()
                if self.fsync:
                    os.fsync(f.fileno())


def _ends_mid_line(path: str) -> bool:
    """True when the file is non-empty and its last byte is not a newline (a line cut mid-write)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() == 0:
                return False
            f.seek(-1, os.SEEK_END)
            return f.read(1) != b"\n"
    except OSError:
        return False


def best_records(records: Iterable[Record]) -> dict[str, Record]:
    """The fastest successful record per task key, skipping configs that also have a
    ``wrong_output`` record (their output failed the reference check) and the
    records of TVM's default schedules (``Record.default``: no config to apply)."""
    records = [r for r in records if not r.default]
    wrong = {(r.task, tuple(r.config)) for r in records if r.error_kind == ErrorKind.WRONG_OUTPUT}
    best: dict[str, Record] = {}
    for r in records:
        if (r.task, tuple(r.config)) in wrong:
            continue
        if r.ok and (r.task not in best or r.mean_cost < best[r.task].mean_cost):
            best[r.task] = r
    return best


def _tuning_record(rec: Record, mod, ms_db):
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo
    from tvm.s_tir.meta_schedule.database import TuningRecord

    from ..target import resolve_target

    workload = ms_db.commit_workload(mod)
    target = resolve_target(json.loads(rec.target))
    args = [a.as_json() for a in ArgInfo.from_entry_func(mod, remove_preproc=True)]
    return TuningRecord.from_json([rec.trace, rec.costs, target.export(), args], workload)


def add_to_database(ms_db, records: Iterable[Record], task) -> int:
    """Commit ``task``'s successful records to a MetaSchedule database; returns how many."""
    n = 0
    for rec in records:
        if rec.ok and rec.trace is not None and task.owns(rec):
            ms_db.commit_tuning_record(_tuning_record(rec, task.mod, ms_db))
            n += 1
    return n


class log_to_database(Callback):
    """Tuner callback: commit a task's successful measurements to a MetaSchedule ``JSONDatabase``.

    MetaSchedule's database cannot take a record back, so the records are committed when the task's
    tuning ends (``on_finish``: after :meth:`release.tuners.tuner.Tuner.tune` checked the best
    config's output), and a config found wrong (a ``wrong_output`` result) never reaches the database:
    its best is :func:`best_records`'. The tuning log (:class:`log_to_file`) is the record of every
    measurement the moment it completes; a run killed before ``on_finish`` leaves its records there
    only (``apply_history_best(log).database(tasks)`` gives a database from it).

    Parameters
    ----------
    work_dir : str
        Folder of ``database_workload.json`` and ``database_tuning_record.json`` (MetaSchedule's
        layout; ``ms.database.JSONDatabase(work_dir=...)`` and ``compile_tir`` read it).
    """

    def __init__(self, work_dir: str | os.PathLike):
        from tvm.s_tir.meta_schedule.database import JSONDatabase

        self.work_dir = os.fspath(work_dir)
        os.makedirs(self.work_dir, exist_ok=True)
        self.database = JSONDatabase(work_dir=self.work_dir)
        self._pending: dict[str, list] = {}  # task key -> successful records not yet committed
        self._wrong: set = set()  # (task key, config) whose output was found wrong

    def on_result(self, tuner, inputs, results) -> None:
        """Keep the successful results; note the configs found wrong."""
        for r in results:
            r.stamp(tuner.task, tuner.name)
            if r.error_kind == ErrorKind.WRONG_OUTPUT:
                self._wrong.add((r.task, tuple(r.config)))
            elif r.ok:
                self._pending.setdefault(r.task, []).append(r)

    def on_finish(self, tuner) -> None:
        """Commit the task's kept results but those whose config was found wrong."""
        recs = [r for r in self._pending.pop(tuner.task.key, []) if (r.task, tuple(r.config)) not in self._wrong]
        add_to_database(self.database, recs, tuner.task)


class ApplyHistoryBest:
    """Best records per task from logs (AutoTVM's ``apply_history_best``).

    Use ``best(task)`` for the best :class:`Record`, ``database(tasks)`` for a MetaSchedule
    database holding each task's best record (for ``compile_tir`` / ``compile_relax``), or
    ``with apply_history_best(log).database(tasks):`` around TVM's Relax build.

    A task whose default schedule (TVM's untuned kernel, a ``Record.default`` of the logs) was
    measured faster on this machine than its best tuned record of this machine gets no record in
    the database, so the build keeps that default kernel (:meth:`keeps_default`): tuning never
    puts a slower kernel into a model than it would have had untuned.
    """

    def __init__(self, records: list[Record], in_model: list[Record] | None = None):
        self.records = records
        #: records of the in-model ranking (:func:`in_model_path`; ``tuner`` ``"in-model"``)
        self.in_model = list(in_model or [])
        self.best_by_task = best_records(records)
        self.matched: list = []
        self.elsewhere: list = []
        self.unmatched: list = []
        self.defaulted: list = []

    def best(self, task) -> Record | None:
        """Best successful record of ``task``, or None.

        Parameters
        ----------
        task : Task or str
            A :class:`release.task.Task`: its records from any machine of its ISA class
            (:meth:`release.task.Task.owns`, older logs migrated); the fastest of this machine's
            records wins, and only when the logs hold none of this machine the fastest of another
            machine's (its schedule is valid here; its timing was taken there). Where the in-model
            ranking (:mod:`release.relax.finish`) timed the task's candidates inside the model and its
            pass still covers that fastest config, its choice (:func:`in_model_choice`: an in-model
            record, ``costs`` in-model seconds) wins instead. A key: that key's best.
        """
        alone = self.alone_best(task)
        if self.in_model and hasattr(task, "owns"):
            pick = in_model_choice(self.in_model, task, alone)
            if pick is not None:
                return pick
        return alone

    def alone_best(self, task) -> Record | None:
        """:meth:`best` without the in-model ranking: the fastest record timed alone."""
        if not hasattr(task, "owns"):
            return self.best_by_task.get(task)
        mine = [r for r in self.records if task.owns(r)]
        here = [r for r in mine if task.tier(r) == "machine"]
        got = best_records(here).get(task.key) if here else None
        return got if got is not None else best_records(mine).get(task.key)

    def default_record(self, task) -> Record | None:
        """The fastest successful record of ``task``'s default schedule timed on this machine
        (``Record.default``, :meth:`release.task.Task.tier` ``"machine"``), or None."""
        if not hasattr(task, "owns"):
            return None
        here = [r for r in self.records if r.default and r.ok and task.owns(r) and task.tier(r) == "machine"]
        return min(here, key=lambda r: r.mean_cost) if here else None

    def keeps_default(self, task) -> bool:
        """Whether ``task`` should keep TVM's default schedule: its default record of this machine
        is faster than its best tuned record, or it has a default record and no tuned one. A best
        tuned record timed on another machine is not compared (timings of two machines): the tuned
        schedule is kept."""
        return self._default_wins(task, self.alone_best(task))

    def _default_wins(self, task, best: Record | None) -> bool:
        """:meth:`keeps_default` given ``task``'s best tuned record (None: none)."""
        dflt = self.default_record(task)
        if dflt is None:
            return False
        if best is None:
            return True
        return task.tier(best) == "machine" and dflt.mean_cost < best.mean_cost

    def database(self, tasks) -> object:
        """A MetaSchedule ``MemoryDatabase`` with the best record of each of ``tasks``.

        After the call, :attr:`matched` lists the tasks that got a record, :attr:`elsewhere` those
        whose record was measured on another machine of their ISA class (:meth:`release.task.Task.tier`),
        :attr:`defaulted` those whose default schedule was faster than their best tuned record
        (:meth:`keeps_default`: no record, TVM's default kernel), :attr:`unmatched` those that got
        no record at all (they build with TVM's default schedules);
        :meth:`report` says it in one line. A log that matches none of ``tasks`` logs a warning
        naming what it holds (never a silent default build); schedules tuned elsewhere, one
        warning line (:meth:`report`).
        """
        from tvm.s_tir.meta_schedule.database import MemoryDatabase

        db = MemoryDatabase()
        self.matched, self.elsewhere, self.unmatched, self.defaulted = [], [], [], []
        for t in tasks:
            rec = self.best(t)
            if self._default_wins(t, self.alone_best(t)):  # the default was timed alone: compare alone
                self.defaulted.append(t)
                continue
            if rec is None:
                self.unmatched.append(t)
                continue
            add_to_database(db, [rec], t)
            self.matched.append(t)
            if t.tier(rec) != "machine":
                self.elsewhere.append(t)
        if self.records and tasks and not self.matched and not self.defaulted:
            from ..target import isa_class

            held = sorted({f"{r.name} on {isa_class(r.target)}" for r in self.records if r.ok})
            logger.warning("the log matches none of the %d tasks (it holds records of %s); the build uses TVM's "
                           "default schedules: tune these tasks (release tune-model) or give the log written for "
                           "this model, layout and ISA class (%s)", len(tasks),
                           "; ".join(held[:3]) + (" ..." if len(held) > 3 else ""), isa_class(tasks[0].target_json))
        elif self.elsewhere:
            logger.warning("%s", self.report())
        return db

    def report(self, retune: str = "") -> str:
        """One line on the last :meth:`database`: tasks matched, tasks whose schedules were tuned on
        another machine (with ``retune``, the command that re-tunes them here), tasks that keep TVM's
        default schedule (faster than their best tuned kernel), tasks matched by nothing. "" when
        every task matched records of this machine."""
        n = len(self.matched) + len(self.unmatched) + len(self.defaulted)
        parts = []
        if self.defaulted:
            names = [t.name for t in self.defaulted]
            parts.append(f"{len(self.defaulted)} of {n} tasks keep TVM's default schedule, measured faster here than "
                         f"their best tuned kernel ({', '.join(names[:4])}{' ...' if len(names) > 4 else ''})")
        if self.elsewhere:
            machines = sorted({_machine_label(self.best(t)) for t in self.elsewhere})
            parts.append(f"{len(self.elsewhere)} of {n} tasks use schedules tuned on another machine of the same ISA "
                         f"class ({', '.join(machines[:3])}{' ...' if len(machines) > 3 else ''}); valid here, "
                         "timed there" + (f"; re-tune them here with: {retune}" if retune else ""))
        if self.unmatched:
            parts.append(f"{len(self.unmatched)} of {n} tasks have no record in the log and build with TVM's "
                         "default schedules")
        return "; ".join(parts)

    def __len__(self) -> int:
        return len(self.best_by_task)


def _machine_label(rec) -> str:
    from ..target import machine_of

    return machine_of(rec.target, rec.machine) if rec is not None else "?"


def apply_history_best(logs) -> ApplyHistoryBest:
    """Load one log path or several and keep the best record of every task.

    Raises
    ------
    RecordError
        A log path that does not exist.
    """
    paths = [logs] if isinstance(logs, (str, os.PathLike)) else list(logs)
    recs, in_model = [], []
    for p in paths:
        if not os.path.exists(p):
            raise RecordError(f"log {p} does not exist")
        recs.extend(load_records(p, defaults=True))
        side = in_model_path(p)
        if os.path.exists(side):  # the in-model ranking's choices (release.relax.finish), beside the log
            in_model.extend(load_records(side))
    return ApplyHistoryBest(recs, in_model)


#: ``Record.tuner`` of the records of the in-model ranking (:mod:`release.relax.finish`)
IN_MODEL_TUNER = "in-model"


def in_model_path(log: str | os.PathLike) -> str:
    """The in-model ranking's log beside a tuning log: ``<log stem>.in-model.jsonl``
    (:mod:`release.relax.finish` appends to it; :func:`apply_history_best` reads it with the log)."""
    return os.path.splitext(os.fspath(log))[0] + ".in-model.jsonl"


def in_model_pass(records: Iterable[Record], task) -> list[Record]:
    """The records of ``task``'s latest in-model ranking pass timed on this machine (one ``timestamp``
    per task and pass; :meth:`release.task.Task.tier` ``"machine"``), or ``[]``."""
    mine = [r for r in records if r.tuner == IN_MODEL_TUNER and task.owns(r) and task.tier(r) == "machine"]
    if not mine:
        return []
    last = max(r.timestamp for r in mine)
    return [r for r in mine if r.timestamp == last]


def in_model_choice(records: Iterable[Record], task, alone_best: Record | None) -> Record | None:
    """The config the in-model ranking keeps for ``task``: of its latest pass (:func:`in_model_pass`), the
    successful record with the fastest in-model round (the smallest of its ``costs``: interference from other
    work only slows a round down, the statistic of ``release.relax.evaluate``'s ``fastest_ms``); None when
    there is no pass, or when the pass
    does not cover ``alone_best`` (the fastest config alone: tuning found a new best after the pass, whose
    choice is then stale until the pass runs again)."""
    group = in_model_pass(records, task)
    if not group or alone_best is None or tuple(alone_best.config) not in {tuple(r.config) for r in group}:
        return None
    ok = [r for r in group if r.ok]
    return min(ok, key=lambda r: min(r.costs)) if ok else None
