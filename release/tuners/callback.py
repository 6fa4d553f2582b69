"""Tuner callbacks (AutoTVM's ``autotvm.callback``): ``log_to_file``, ``log_to_database``,
``progress_bar``. A callback is a :class:`release.callback.Callback` (hooks ``records``,
``on_start``, ``on_result``, ``on_finish``, called by ``Tuner.tune``) or a plain function
``callback(tuner, inputs, results)``."""

from __future__ import annotations

import sys
import time

from ..callback import Callback, FunctionCallback, as_callback
from ..measure.records import log_to_database, log_to_file
from ..measure.result import ErrorKind


class progress_bar(Callback):
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

    def on_start(self, tuner, n_trial: int) -> None:
        """Open the bar at the trials already done (resumed)."""
        from tqdm.auto import tqdm

        self.t0 = time.time()
        self.bar = tqdm(total=self.total or n_trial, initial=min(tuner.trials, self.total or n_trial),
                        desc=self.prefix or tuner.task.name, unit="trial", file=self.file or sys.stderr,
                        disable=self.disable, dynamic_ncols=True)
        self.bar.set_postfix_str(f"best {tuner.best_gflops:.2f} GFLOPS")

    def on_result(self, tuner, inputs, results) -> None:
        """Advance the bar and show the best and current GFLOPS."""
        if self.bar is None:
            self.on_start(tuner, self.total or 0)
        self.bar.update(sum(r.error_kind != ErrorKind.WRONG_OUTPUT for r in results))  # a re-check is no trial
        cur = results[-1]
        now = tuner.task.flop / cur.mean_cost / 1e9 if cur.ok else 0.0
        self.bar.set_postfix_str(f"best {tuner.best_gflops:.2f} GFLOPS, cur {now:.2f}")

    def on_finish(self, tuner) -> None:
        """Close the bar."""
        if self.bar is not None:
            self.bar.close()

    start, finish = on_start, on_finish  # the names before issue 15


__all__ = ["Callback", "FunctionCallback", "as_callback", "log_to_file", "log_to_database", "progress_bar"]
