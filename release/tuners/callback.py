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
    """Progress of ``tune``: trials done, best GFLOPS so far, current GFLOPS, elapsed time and ETA.

    A tqdm bar when ``file`` is a terminal; elsewhere (a log file, a pipe, a CI job) a plain line
    every ``every_n`` trials or ``every_s`` seconds and one at the end, also logged to the
    ``release.progress`` logger (:mod:`release.progress`).

    Parameters
    ----------
    total : int, optional
        Trials in all (default: the ``n_trial`` given to ``tune``).
    prefix : str
        Text before the bar (default: the task name).
    si_prefix : str
        AutoTVM's unit prefix; GFLOPS are shown whatever it is.
    file : stream
        Where to draw (default ``sys.stderr``).
    disable : bool, optional
        True: no progress at all.
    every_n : int, optional
        Plain lines: trials between two (default: a tenth of the total, at least 1).
    every_s : float
        Plain lines: seconds between two while trials come (default 30).
    """

    def __init__(self, total: int | None = None, prefix: str | None = None, si_prefix: str = "G", file=None,
                 disable: bool | None = None, every_n: int | None = None, every_s: float | None = None):
        self.total, self.prefix, self.file, self.disable = total, prefix, file, disable
        self.every_n, self.every_s = every_n, every_s
        self.bar = None

    def on_start(self, tuner, n_trial: int) -> None:
        """Open the bar at the trials already done (resumed)."""
        from ..progress import EVERY_S, progress

        self.t0 = time.time()
        total = self.total or n_trial
        self.bar = progress(total, desc=self.prefix or tuner.task.name, unit="trial",
                            initial=min(tuner.trials, total), file=self.file or sys.stderr, disable=self.disable,
                            every_n=self.every_n, every_s=EVERY_S if self.every_s is None else self.every_s)
        if self.bar is not None:
            self.bar.set_postfix_str(f"best {tuner.best_gflops:.2f} GFLOPS")

    def on_result(self, tuner, inputs, results) -> None:
        """Advance the bar and show the best and current GFLOPS."""
        if self.bar is None:
            if self.disable:
                return
            self.on_start(tuner, self.total or 0)
        cur = results[-1]
        now = tuner.task.flop / cur.mean_cost / 1e9 if cur.ok else 0.0
        self.bar.set_postfix_str(f"best {tuner.best_gflops:.2f} GFLOPS, cur {now:.2f}")
        self.bar.update(sum(r.error_kind != ErrorKind.WRONG_OUTPUT for r in results))  # a re-check is no trial

    def on_finish(self, tuner) -> None:
        """Close the bar."""
        if self.bar is not None:
            self.bar.close()

    start, finish = on_start, on_finish  # the earlier names


__all__ = ["Callback", "FunctionCallback", "as_callback", "log_to_file", "log_to_database", "progress_bar"]
