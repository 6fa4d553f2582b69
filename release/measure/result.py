"""Typed results of measurement: what a builder, a runner and the measurer hand on.

- :class:`BuildResult` (builder -> measurer): artifact path or None, seconds, error.
- :class:`RunResult` (runner -> measurer): run times in seconds, seconds spent, error.
- :class:`MeasureResult` (measurer -> session, callbacks, records): everything about one config.

``BuildResult`` and ``RunResult`` are named tuples, so code that unpacked the plain tuples of
earlier versions keeps working.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple


class ErrorKind:
    """Error kinds of a :class:`MeasureResult` (strings, stored in records)."""

    NONE = ""
    INVALID = "invalid"  # the config is not a legal program (never built, never counted as a trial)
    BUILD_ERROR = "build_error"
    BUILD_TIMEOUT = "build_timeout"
    RUN_ERROR = "run_error"
    RUN_TIMEOUT = "run_timeout"
    WRONG_OUTPUT = "wrong_output"  # ran, but its output differs from the reference: never a best (issue 19 item 18)


class BuildResult(NamedTuple):
    """Outcome of building one scheduled program."""

    artifact: str | None
    """Path of the exported module, or None on error."""
    seconds: float
    """Seconds spent building it (in the worker)."""
    error_kind: str = ""
    """:class:`ErrorKind` (``""`` = built)."""
    error_msg: str = ""
    """One line saying why it failed, or ``""``."""


class RunResult(NamedTuple):
    """Outcome of running one built artifact."""

    costs: list
    """Run times in seconds, one per ``repeat`` (empty on error)."""
    seconds: float
    """Seconds spent running it (its share of a batch for batched runners)."""
    error_kind: str = ""
    """:class:`ErrorKind` (``""`` = ran)."""
    error_msg: str = ""
    """One line saying why it failed, or ``""``."""


@dataclass
class MeasureResult:
    """Outcome of measuring one config.

    Attributes
    ----------
    config : tuple[int, ...]
        The config measured (canonical form).
    costs : list[float]
        Run times in seconds, one per ``repeat`` (empty on error).
    error_kind : str
        One of :class:`ErrorKind` (``""`` = success).
    error_msg : str
        Reason of the error, or ``""``.
    build_s, run_s : float
        Seconds spent building (in the worker) and running this config.
    measure_s : float
        Wall seconds of measurement attributed to this config: the time from the previous
        result's completion (or the batch start) to this one's, so the ``measure_s`` of a batch
        add up to its wall time (replay, parallel builds, runs, dispatch).
    timestamp : float
        Unix time at which the result completed.
    trace : object
        The MetaSchedule trace (with postprocessing) of the scheduled program, or None.
    search_s, fit_s : float
        Set by the tuner: its search and cost-model fitting time attributed to this config.
    round : int
        Set by the tuner: cost-model refits done before this config was proposed (AutoTVM's
        rounds; 0 for tuners without a model).
    threads : int
        Threads the kernel was timed with (the target's ``num-cores``; 0 = not run).
    """

    config: tuple
    costs: list = field(default_factory=list)
    error_kind: str = ErrorKind.NONE
    error_msg: str = ""
    build_s: float = 0.0
    run_s: float = 0.0
    measure_s: float = 0.0
    timestamp: float = 0.0
    trace: object = None
    search_s: float = 0.0
    fit_s: float = 0.0
    round: int = 0
    threads: int = 0

    @property
    def ok(self) -> bool:
        return self.error_kind == ErrorKind.NONE and bool(self.costs)

    @property
    def mean_cost(self) -> float:
        """Mean run time in seconds (``inf`` on error)."""
        return sum(self.costs) / len(self.costs) if self.ok else float("inf")
