"""``autotvm.apply_history_best``: a log's best configs, as an object and as a context manager.

AutoTVM's ``apply_history_best(log)`` was a dispatch context: inside ``with``, the templates that
TVM's build called looked their best config up in it. TVM 0.27 has no templates; a tuned kernel is
built from a MetaSchedule database (``compile_tir``, Relax's ``MetaScheduleApplyDatabase``). So
``with autotvm.apply_history_best(log):`` makes the log's best records TVM's *current* MetaSchedule
database (``tvm.s_tir.meta_schedule.Database.current()``) for the block::

    with autotvm.apply_history_best("matmul.jsonl"):
        with tvm.target.Target("llvm"):
            sch = ms.tir_integration.compile_tir(ms.Database.current(), task.mod, task.target)
            func = tvm.build(sch.mod, target=task.target)

The database answers for any program the logs hold a record of, whatever built the program again
(the same TE compute, PrimFunc or registered workload): a program is matched by its structure and
its target's ISA class, as :attr:`release.task.Task.key` is. As an object it keeps the
:class:`release.measure.ApplyHistoryBest` methods (``best(task)``, ``database(tasks)``) and adds
AutoTVM's ``query(target, workload)`` and :meth:`ApplyHistoryBest.build`.
"""

from __future__ import annotations

import os

from ..errors import RecordError, ReleaseError
from ..measure import records as _records

_ACTIVE: list = []  # the entered contexts, innermost last


class ApplyHistoryBest(_records.ApplyHistoryBest):
    """The best record of every task in some logs; a context manager (see the module docstring).

    Parameters
    ----------
    records : list of release.measure.Record
        Every record of the logs (failed ones included; only successful ones can be a best).

    Notes
    -----
    Entering makes a :func:`history_database` over these records MetaSchedule's current database;
    leaving restores the one before. Contexts nest (the innermost answers).
    """

    def __init__(self, records):
        super().__init__(records)
        self._entered: list = []

    def __enter__(self) -> "ApplyHistoryBest":
        db = history_database(self)
        db.__enter__()
        self._entered.append(db)
        _ACTIVE.append(self)
        return self

    def __exit__(self, *exc) -> None:
        db = self._entered.pop()
        _ACTIVE.pop()  # contexts leave in the reverse order of entering
        db.__exit__(*exc)

    @staticmethod
    def current() -> "ApplyHistoryBest | None":
        """The innermost entered ``apply_history_best`` context, or None outside any."""
        return _ACTIVE[-1] if _ACTIVE else None

    def query(self, target, workload):
        """AutoTVM's ``query(target, workload)``: the best config of a task, or None.

        Parameters
        ----------
        target : str, dict or tvm.target.Target
            The target the program runs on (used when ``workload`` is a program).
        workload : Task, str, list of te.Tensor, PrimFunc or IRModule
            A task (``autotvm.task.create``'s), a task key, or the program itself.

        Returns
        -------
        tuple of int or None
            The best record's config (knob indices, ``task.config_space`` order).
        """
        task = workload if isinstance(workload, str) or hasattr(workload, "key") else self._task_for(workload, target)
        rec = self.best(task) if task is not None else None
        return tuple(rec.config) if rec is not None else None

    def build(self, task, target=None):
        """Compile ``task``'s best record through ``compile_tir`` and ``tvm.compile``.

        Parameters
        ----------
        task : Task, list of te.Tensor, PrimFunc or IRModule
            What to build; a program is matched to the logs' records as the context's database does.
        target : optional
            The target of a program (default: the current ``tvm.target.Target``, else ``llvm``).

        Returns
        -------
        tvm.runtime.Module
            The tuned kernel (``func(*arrays)``, output last).

        Raises
        ------
        RecordError
            The logs hold no successful record of it.
        """
        import tvm
        from tvm.s_tir.meta_schedule.tir_integration import compile_tir

        if not hasattr(task, "key"):
            found = self._task_for(task, target)
            if found is None:
                raise RecordError("the logs hold no successful record of this program on this target; tune it "
                                  "first (or give the log it was tuned into)")
            task = found
        if self.best(task) is None:
            raise RecordError(f"the logs hold no successful record of {task.name} on {task.target_json}; tune it "
                              "first (or give the log it was tuned into)")
        sch = compile_tir(self.database([task]), task.mod, task.target)
        return tvm.compile(sch.mod, target=task.target)

    def _task_for(self, program, target):
        """A :class:`release.task.Task` of ``program`` named as the logs' record of the same program
        on the same ISA class, or None when the logs hold none (or it is no tunable program)."""
        import tvm

        from ..task import Task

        if target is None:
            target = tvm.target.Target.current(allow_none=True) or "llvm"
        program = _as_program(program)
        try:
            probe = Task(program, target)
        except ReleaseError:
            return None
        digest = probe.key.rsplit("/", 1)[-1]
        names = {r.name for r in self.records if r.ok and r.task.rsplit("/", 1)[-1] == digest}
        if not names:
            return None
        return Task(program, target, name=sorted(names)[0])


def _as_program(program):
    """TE tensors become a PrimFunc (``te.create_prim_func``); anything else is passed on."""
    if isinstance(program, (list, tuple)):
        from tvm import te

        return te.create_prim_func(list(program))
    return program


_DB_CLASS: list = []  # the database class, defined on first use (TVM is imported lazily)


def history_database(history: ApplyHistoryBest):
    """A MetaSchedule database answering from ``history``'s records.

    A query for a program (``query_tuning_record``, ``query_schedule``, ``query_ir_module``, each
    with a target) first loads the logs' best record of that program, when there is one, into an
    in-memory database, which then answers; commits go to the in-memory database.

    Returns
    -------
    tvm.s_tir.meta_schedule.database.Database
    """
    if not _DB_CLASS:
        _DB_CLASS.append(_history_database_class())
    return _DB_CLASS[0](history)


def _history_database_class():
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.database import MemoryDatabase, PyDatabase

    @derived_object
    class HistoryDatabase(PyDatabase):
        """See :func:`history_database`."""

        def __init__(self, history: ApplyHistoryBest):
            super().__init__()
            self.history = history
            self.memory = MemoryDatabase()
            self.loaded: set = set()

        def _load(self, mod, target) -> None:
            import tvm_ffi

            seen = (str(tvm_ffi.structural_hash(mod)), str(target))
            if seen in self.loaded:
                return
            self.loaded.add(seen)
            task = self.history._task_for(mod, target)
            rec = self.history.best(task) if task is not None else None
            if rec is not None:
                _records.add_to_database(self.memory, [rec], task)

        def has_workload(self, mod) -> bool:
            return self.memory.has_workload(mod)

        def commit_workload(self, mod):
            return self.memory.commit_workload(mod)

        def commit_tuning_record(self, record) -> None:
            self.memory.commit_tuning_record(record)

        def get_top_k(self, workload, top_k: int):
            return self.memory.get_top_k(workload, top_k)

        def get_all_tuning_records(self):
            return self.memory.get_all_tuning_records()

        def query_tuning_record(self, mod, target, workload_name=None):
            self._load(mod, target)
            return self.memory.query_tuning_record(mod, target, workload_name)

        def query_schedule(self, mod, target, workload_name=None):
            self._load(mod, target)
            return self.memory.query_schedule(mod, target, workload_name)

        def query_ir_module(self, mod, target, workload_name=None):
            self._load(mod, target)
            return self.memory.query_ir_module(mod, target, workload_name)

        def __len__(self) -> int:
            return len(self.memory)

    return HistoryDatabase


def apply_history_best(logs) -> ApplyHistoryBest:
    """Load one log path or several; the best record of every task, as an object or a ``with`` context.

    Parameters
    ----------
    logs : str, os.PathLike or list of them
        JSON-lines logs of ``log_to_file`` (``release tune --log``).

    Returns
    -------
    ApplyHistoryBest

    Raises
    ------
    RecordError
        A log path that does not exist, or a file that is not a tuning log.
    """
    paths = [logs] if isinstance(logs, (str, os.PathLike)) else list(logs)
    recs = []
    for p in paths:
        if not os.path.exists(p):
            raise RecordError(f"log {p} does not exist")
        recs.extend(_records.load_records(p, defaults=True))
    return ApplyHistoryBest(recs)
