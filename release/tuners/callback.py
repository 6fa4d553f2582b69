"""Tuner callbacks (AutoTVM's ``autotvm.callback``): ``log_to_file``, ``log_to_database``,
``progress_bar``. A callback is ``callback(tuner, inputs, results)``; optional ``load(task)``
(resume), ``start(tuner, n_trial)`` and ``finish(tuner)`` hooks are called by ``Tuner.tune``."""

from __future__ import annotations

import sys
import time

from ..measure.records import log_to_database, log_to_file


class progress_bar:
    """A tqdm progress bar: trials done, best GFLOPS, current GFLOPS, elapsed time.

    Parameters
    ----------
    total : int, optional
        Bar length (default: the ``n_trial`` given to ``tune``).
    prefix : str
        Text before the bar (default: the task name).
    file : stream
        Where to draw (default ``sys.stderr``).
    """

    def __init__(self, total: int | None = None, prefix: str | None = None, si_prefix: str = "G", file=None,
                 disable: bool | None = None):
        self.total, self.prefix, self.file, self.disable = total, prefix, file, disable
        self.bar = None

    def start(self, tuner, n_trial: int) -> None:
        from tqdm.auto import tqdm

        self.t0 = time.time()
        self.bar = tqdm(total=self.total or n_trial, initial=min(tuner.trials, self.total or n_trial),
                        desc=self.prefix or tuner.task.name, unit="trial", file=self.file or sys.stderr,
                        disable=self.disable, dynamic_ncols=True)
        self.bar.set_postfix_str(f"best {tuner.best_gflops:.2f} GFLOPS")

    def __call__(self, tuner, inputs, results) -> None:
        if self.bar is None:
            self.start(tuner, self.total or 0)
        self.bar.update(len(results))
        cur = results[-1]
        now = tuner.task.flop / cur.mean_cost / 1e9 if cur.ok else 0.0
        self.bar.set_postfix_str(f"best {tuner.best_gflops:.2f} GFLOPS, cur {now:.2f}")

    def finish(self, tuner) -> None:
        if self.bar is not None:
            self.bar.close()


__all__ = ["log_to_file", "log_to_database", "progress_bar"]
