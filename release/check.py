"""Checking a config's output against a reference before it is reported as the best.

A config can build, run and be fast while computing garbage: a TIR program whose reduction has
no init statement (the shape of apache/tvm#12907) tunes, and every valid schedule with a cache
write reads an uninitialised buffer. :class:`OutputChecker` compiles a config the way a user gets
it (its trace through a MetaSchedule database and ``compile_tir``, as ``apply_history_best`` ->
``compile_tir`` does, so pre-packed weights are packed inside the kernel), runs it on random
inputs and compares with :meth:`release.task.Task.reference` (the workload's NumPy/PyTorch
reference, or TVM's untuned build of the same program for a user program).
:meth:`release.session.TuningSession.verify_best` calls it on the best config and, while it is
wrong, on the next best.
"""

from __future__ import annotations

import logging
from typing import Sequence

import numpy as np

from .errors import error_line

logger = logging.getLogger(__name__)


def compile_config(task, config: Sequence[int]):
    """Compile ``config`` of ``task`` through ``compile_tir`` (the user's path to a tuned kernel).

    Returns
    -------
    tvm.runtime.Module
        The built kernel (``lib["main"](*inputs, out)``).

    Raises
    ------
    release.errors.InvalidConfigError
        The config does not replay (``KnobSpace.apply``).
    """
    import tvm
    from tvm.s_tir.meta_schedule.database import MemoryDatabase
    from tvm.s_tir.meta_schedule.tir_integration import compile_tir

    from .measure.records import Record, add_to_database
    from .measure.result import MeasureResult

    sch = task.config_space.apply(config)
    rec = Record.from_result(task, MeasureResult(config=tuple(config), costs=[1.0], trace=sch.trace))
    db = MemoryDatabase()
    add_to_database(db, [rec], task)
    best = compile_tir(db, task.mod, task.target)
    return tvm.compile(best.mod, target=task.target)


class OutputChecker:
    """Compares configs' outputs with the task's reference on one set of random inputs.

    Parameters
    ----------
    task : release.task.Task
        A task on a CPU target (``kind`` ``llvm``): the kernel runs in this process.
    rtol, atol : float
        ``np.allclose`` tolerances (default 1e-3 each, as :meth:`Task.check`).
    seed : int
        Seed of the random inputs (uniform in [-1, 1); default 0).

    Notes
    -----
    The reference output is computed once, on first use. Calling the checker returns ``""`` when
    the output matches and otherwise one line saying why not (the ``error_msg`` of the
    ``wrong_output`` record). Errors of the reference itself (a user reference that raises)
    propagate: the caller reports the best as unchecked.
    """

    def __init__(self, task, rtol: float = 1e-3, atol: float = 1e-3, seed: int = 0):
        self.task, self.rtol, self.atol, self.seed = task, float(rtol), float(atol), int(seed)
        self._inputs = None
        self._want = None

    @staticmethod
    def applies(task) -> bool:
        """Whether configs of ``task`` can be checked here (CPU targets: the kernel runs in-process)."""
        return task.target.kind.name == "llvm"

    def __call__(self, config: Sequence[int]) -> str:
        import tvm

        from .task import run_module
        from .threads import thread_count, use_threads

        task = self.task
        if self._want is None:
            self._inputs = task.random_inputs(self.seed)
            self._want = np.asarray(task.reference(self._inputs))
        try:
            lib = compile_config(task, config)
        except Exception as err:  # noqa: BLE001 - any failure means the kernel cannot be the best
            return f"could not be compiled through compile_tir for the output check: {error_line(err)}"
        use_threads(thread_count(task.target))  # the target's num-cores, as the runner timed it
        got = run_module(lib, self._inputs, task.output_shape(), tvm.cpu(0))
        if got.shape != self._want.shape:
            return f"output shape {list(got.shape)} differs from the reference's {list(self._want.shape)}"
        if np.allclose(got, self._want, rtol=self.rtol, atol=self.atol):
            return ""
        n_bad = int(np.count_nonzero(~np.isclose(got, self._want, rtol=self.rtol, atol=self.atol)))
        finite = np.isfinite(got)
        err = float(np.max(np.abs(got[finite] - self._want[finite]))) if finite.any() else float("nan")
        nan = "" if finite.all() else f", {int((~finite).sum())} non-finite values"
        return (f"output differs from the reference in {n_bad} of {got.size} values: max abs error {err:.3g}{nan} "
                f"(rtol {self.rtol:g}, atol {self.atol:g}, random inputs seed {self.seed})")
