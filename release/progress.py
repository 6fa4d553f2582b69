"""Progress of long loops: a tqdm bar on a terminal, plain lines where there is none.

tqdm draws with carriage returns, which a log file (a CI job, ``nohup``, ``make run > log``) shows
as one endless line, or not at all (tqdm turns itself off when its stream is not a terminal). So
:func:`progress` gives a tqdm bar when the stream is a terminal and a :class:`PlainProgress`
otherwise: one line every ``every_n`` steps or ``every_s`` seconds, whichever comes first, and one
at the end::

    tune tiny.matmul.1: 8/64 trials, best 41.20 GFLOPS, elapsed 0:12, ETA 1:24

Each line also goes to the ``logging`` logger ``release.progress`` (level INFO), so a program that
collects its logs gets them; it is written to the stream only when no handler of that logger
already writes to the same stream (no line twice).

Both objects take the same calls: ``update(n)``, ``set_postfix_str(text)``, ``close()``, ``n``,
``total``.
"""

from __future__ import annotations

import logging
import math
import sys
import time

logger = logging.getLogger("release.progress")

#: Seconds between two plain lines when the steps come slowly (``every_s``'s default).
EVERY_S = 30.0


def _clock(seconds: float) -> str:
    """``m:ss`` or ``h:mm:ss``."""
    if not math.isfinite(seconds):
        return "?"
    s = int(round(max(0.0, seconds)))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def is_terminal(stream) -> bool:
    """Whether ``stream`` is an interactive terminal (False for files, pipes and closed streams)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


class PlainProgress:
    """Plain progress lines: every ``every_n`` steps or ``every_s`` seconds, and at :meth:`close`.

    Parameters
    ----------
    total : int
        Steps in all (the line says ``done/total`` and an ETA from the rate so far).
    desc : str
        What progresses (the start of every line).
    unit : str
        The step's name (``trial``; an ``s`` is added to it).
    initial : int
        Steps already done (a resumed run); the rate counts only the steps of this run.
    file : stream, optional
        Where to write (default ``sys.stderr``).
    every_n : int, optional
        Steps between lines (default: a tenth of ``total``, at least 1).
    every_s : float
        Seconds between lines while steps come (default :data:`EVERY_S`).
    """

    def __init__(self, total: int, desc: str = "", unit: str = "trial", initial: int = 0, file=None,
                 every_n: int | None = None, every_s: float = EVERY_S):
        self.total, self.desc, self.unit = int(total or 0), desc, unit
        self.n = self._start = int(initial)
        self.file = file if file is not None else sys.stderr
        self.every_n = int(every_n) if every_n else max(1, self.total // 10)
        self.every_s = float(every_s)
        self.postfix = ""
        self.t0 = self._last_t = time.time()
        self._last_n = self.n
        self.closed = False

    def line(self) -> str:
        """The current progress as one line (no newline)."""
        elapsed = time.time() - self.t0
        done = self.n - self._start
        left = max(0, self.total - self.n)
        eta = elapsed / done * left if done > 0 else math.inf
        head = f"{self.desc}: " if self.desc else ""
        count = f"{self.n}/{self.total}" if self.total else f"{self.n}"
        post = f", {self.postfix}" if self.postfix else ""
        return f"{head}{count} {self.unit}s{post}, elapsed {_clock(elapsed)}, ETA {_clock(eta if left else 0)}"

    def emit(self) -> None:
        """Write :meth:`line` now (to the stream, and to the ``release.progress`` logger)."""
        text = self.line()
        self._last_n, self._last_t = self.n, time.time()
        if logger.isEnabledFor(logging.INFO):
            logger.info(text)
        if not _logged_to(self.file):
            try:
                print(text, file=self.file, flush=True)
            except (ValueError, OSError):  # a closed stream: progress is not worth an error
                pass

    def _maybe_emit(self) -> None:
        if self.n - self._last_n >= self.every_n or time.time() - self._last_t >= self.every_s:
            self.emit()

    def update(self, n: int = 1) -> None:
        """``n`` more steps done; a line when ``every_n`` steps or ``every_s`` seconds passed since the last."""
        self.n += int(n)
        self._maybe_emit()

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:  # noqa: ARG002  (tqdm's signature)
        """The text after the count (the best so far, the current task)."""
        self.postfix = text

    def close(self) -> None:
        """The last line (when anything happened since the one before); idempotent."""
        if self.closed:
            return
        self.closed = True
        if self.n != self._last_n or self.n == self._start:
            self.emit()


def _logged_to(stream) -> bool:
    """Whether a handler that ``release.progress`` records reach, at INFO, writes to ``stream``."""
    if not logger.isEnabledFor(logging.INFO):
        return False
    lg = logger
    while lg is not None:
        for h in lg.handlers:
            if isinstance(h, logging.StreamHandler) and getattr(h, "stream", None) is stream \
                    and h.level <= logging.INFO:
                return True
        lg = lg.parent if lg.propagate else None
    return False


def progress(total: int, desc: str = "", unit: str = "trial", initial: int = 0, file=None,
             disable: bool | None = False, every_n: int | None = None, every_s: float = EVERY_S):
    """A tqdm bar when ``file`` (default ``sys.stderr``) is a terminal, else a :class:`PlainProgress`.

    Parameters
    ----------
    total, desc, unit, initial, file, every_n, every_s
        As :class:`PlainProgress` (tqdm takes the first five).
    disable : bool or None
        True: None is returned (no progress at all). False or None: progress on a terminal and
        plain lines elsewhere.

    Returns
    -------
    tqdm.tqdm, PlainProgress or None
    """
    if disable:
        return None
    file = file if file is not None else sys.stderr
    if is_terminal(file):
        from tqdm.auto import tqdm

        return tqdm(total=total, initial=initial, desc=desc, unit=unit, file=file, dynamic_ncols=True)
    return PlainProgress(total, desc=desc, unit=unit, initial=initial, file=file, every_n=every_n, every_s=every_s)


def track(items, desc: str = "", unit: str = "item", file=None, disable: bool | None = False):
    """Iterate over ``items`` with :func:`progress` advanced after each (a bar, or plain lines at the end
    and every :data:`EVERY_S` seconds: short loops say one line, not one per item)."""
    items = list(items)
    bar = progress(len(items), desc=desc, unit=unit, file=file, disable=disable, every_n=len(items) or 1)
    try:
        for item in items:
            yield item
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
