"""Typed results of measurement: what a builder, a runner and the measurer hand on.

- :class:`BuildResult` (builder -> measurer): artifact path or None, seconds, error.
- :class:`RunResult` (runner -> measurer): run times in seconds, seconds spent, error.
- :class:`MeasureResult` (measurer -> session, callbacks, logs): everything about one config; it
  is also the record a log stores (``release.measure.records.Record`` is the same class).

``BuildResult`` and ``RunResult`` are named tuples, so code that unpacked the plain tuples of
earlier versions keeps working.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import asdict, dataclass, field, fields, replace
from typing import NamedTuple


class ErrorKind:
    """Error kinds of a :class:`MeasureResult` (strings, stored in records)."""

    NONE = ""
    INVALID = "invalid"  # the config is not a legal program (never built, never counted as a trial)
    BUILD_ERROR = "build_error"
    BUILD_TIMEOUT = "build_timeout"
    RUN_ERROR = "run_error"
    RUN_TIMEOUT = "run_timeout"
    WRONG_OUTPUT = "wrong_output"  # ran, but its output differs from the reference: never a best


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


#: format version of a record's JSON line (the ``version`` field)
RECORD_VERSION = 1


def to_py(obj):
    """Convert TVM FFI containers (Array, Map, String, IntImm, FloatImm) to plain Python."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if hasattr(obj, "items"):
        return {str(k): to_py(v) for k, v in obj.items()}
    if hasattr(obj, "value") and not isinstance(obj, (list, tuple)):
        return obj.value
    if isinstance(obj, (list, tuple)) or hasattr(obj, "__len__"):
        return [to_py(x) for x in obj]
    return str(obj)


@functools.lru_cache(maxsize=None)
def provenance() -> tuple[str, str]:
    """``(package version, git revision)`` of the code running now, stamped on every record.

    The revision is ``git rev-parse --short=12 HEAD`` of the checkout the package is imported
    from (asked once per process, 5 s at most); "" when it is not a git checkout or git is missing.
    """
    import subprocess

    from .. import __version__

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    rev = ""
    try:
        out = subprocess.run(["git", "-C", root, "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, timeout=5)
        if out.returncode == 0:
            rev = out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return __version__, rev


@dataclass(kw_only=True)
class MeasureResult:
    """One measured config: what the measurer hands on, and the record a log stores (one type).

    The measurer makes it (:meth:`stamp` names the task), the session adds the tuner's times and
    round, callbacks add the tuner's name and write it (:meth:`to_json`, one JSON line);
    :meth:`from_json` reads it back. ``release.measure.records.Record`` is the same class (the
    name logs and the README use). Fields are keyword-only; the JSON keeps the field order below
    (a line starts with ``{"task":``), so logs of earlier versions load unchanged (unknown keys are
    ignored, missing ones take the defaults).

    Attributes
    ----------
    task, name, target : str
        Task key (``<name>/<16 hex>``), task name and canonical target JSON ("" until stamped).
    config : tuple[int, ...]
        The config measured (canonical form); a JSON list on disk.
    trace : list or None
        The MetaSchedule trace JSON (``Trace.as_json(remove_postproc=False)``, plain Python) of
        the scheduled program, or None (invalid config, or not kept).
    costs : list[float]
        Run times in seconds, one per ``repeat`` (empty on error).
    error_kind : str
        One of :class:`ErrorKind` (``""`` = success).
    error_msg : str
        Reason of the error, or ``""``.
    timestamp : float
        Unix time at which the result completed.
    build_s, run_s : float
        Seconds spent building (in the worker) and running this config.
    measure_s : float
        Wall seconds of measurement attributed to this config: the time from the previous
        result's completion (or the batch start) to this one's, so the ``measure_s`` of a batch
        add up to its wall time (replay, parallel builds, runs, dispatch).
    search_s, fit_s : float
        Set by the session: the tuner's search and cost-model fitting time attributed to this config.
    tuner : str
        Name of the tuner that proposed it ("" until a callback stamps it).
    flop : float
        Floating-point operations of one run of the task.
    round : int
        Set by the session: cost-model refits done before this config was proposed (AutoTVM's
        rounds; 0 for tuners without a model).
    threads : int
        Threads the kernel was timed with (the target's ``num-cores``; 0 = not run, or a record
        written before the count was set explicitly, when TVM's runtime defaulted to half the cores).
    layout_rewrite : bool
        The schedule rewrites a layout-free weight's layout (MetaSchedule's RewriteLayout fired:
        the kernel was timed on the pre-packed weight).
    cut_short : bool
        Its timing was cut short (AdaTune-style early termination, ``LocalRunner(early_termination=)``):
        its first repeat was over ``early_termination`` times the task's best mean so far, so ``costs``
        holds that one repeat instead of ``repeat``. Its ``mean_cost`` is a valid cost (an upper
        bound on its speed), never a best. False in logs written before the field existed.
    cache_flush : bool
        The CPU caches of the kernel's arguments but the first were flushed before every repeat
        (``LocalRunner(enable_cpu_cache_flush=True)``, ``--cache-flush``): costs of a log taken with and
        without it are not comparable, so a resumed run must keep the setting
        (:func:`release.measure.records.check_log_cache_flush`). False in logs written before the field existed.
    default : bool
        The kernel measured is TVM's default schedule of the task's program (the unscheduled
        function as the untuned build lowers it: ``config`` is ``()``, ``trace`` None), measured
        once per task and machine as a candidate beside the tuned configs
        (:func:`release.measure.measurer.measure_defaults`). Never a config of the knob space:
        :func:`release.measure.records.load_records` leaves it out unless asked, tuners, cost
        models and knowledge bases never see it; :class:`release.measure.records.ApplyHistoryBest`
        keeps the default schedule where it is faster than the best tuned record of the same machine.
    machine : str
        CPU model name of the machine that timed it (``/proc/cpuinfo``'s ``model name``) when the
        target was this host's CPU, else "" (remote devices, GPUs, older logs); with the target's
        ``mcpu`` and ``num-cores`` it names the exact machine (:func:`release.target.machine_of`).
        Provenance only: records match tasks by program and ISA class (``Task.owns``).
    release_version, revision : str
        Version of the release package and git revision (12 hex digits) of the code that measured
        it ("" outside a git checkout, or in older logs); see :func:`provenance`.
    version : int
        Format version of the record (:data:`RECORD_VERSION`).
    """

    task: str = ""
    name: str = ""
    target: str = ""
    config: tuple = ()
    trace: object = None
    costs: list = field(default_factory=list)
    error_kind: str = ErrorKind.NONE
    error_msg: str = ""
    timestamp: float = 0.0
    build_s: float = 0.0
    run_s: float = 0.0
    measure_s: float = 0.0
    search_s: float = 0.0
    fit_s: float = 0.0
    tuner: str = ""
    flop: float = 0.0
    round: int = 0
    threads: int = 0
    layout_rewrite: bool = False
    cut_short: bool = False
    cache_flush: bool = False
    default: bool = False
    machine: str = ""
    release_version: str = ""
    revision: str = ""
    version: int = RECORD_VERSION

    def __post_init__(self) -> None:
        self.config = tuple(int(x) for x in self.config)
        if self.trace is not None and not isinstance(self.trace, (list, dict)):
            self.set_trace(self.trace)

    @property
    def ok(self) -> bool:
        return self.error_kind == ErrorKind.NONE and bool(self.costs)

    @property
    def mean_cost(self) -> float:
        """Mean run time in seconds (``inf`` on error)."""
        return sum(self.costs) / len(self.costs) if self.ok else float("inf")

    @property
    def gflops(self) -> float:
        """Throughput in GFLOPS (0 for a failed measurement or an unstamped ``flop``)."""
        return self.flop / self.mean_cost / 1e9 if self.ok and self.mean_cost > 0 else 0.0

    def set_trace(self, trace) -> None:
        """Keep a MetaSchedule ``Trace`` as its JSON (postprocessing included) and note whether it
        rewrites a weight's layout (a ``TransformLayout`` instruction)."""
        self.trace = to_py(trace.as_json(remove_postproc=False))
        self.layout_rewrite = any(i.kind.name == "TransformLayout" for i in trace.insts)

    def stamp(self, task=None, tuner: str = "") -> "MeasureResult":
        """Fill the fields that say where this result comes from, where still empty: the task's
        key, name, canonical target, flop and machine (``task``: a :class:`release.task.Task`), the tuner's
        name, and :func:`provenance`. Returns ``self``."""
        if task is not None and not self.task:
            self.task, self.name, self.target, self.flop = task.key, task.name, task.target_json, task.flop
            self.machine = getattr(task, "machine", "")
        if tuner and not self.tuner:
            self.tuner = tuner
        if not self.release_version and not self.revision:
            self.release_version, self.revision = provenance()
        return self

    def to_json(self) -> str:
        """One JSON line (no newline), fields in declaration order."""
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, line: str) -> "MeasureResult":
        """Parse one log line; unknown keys are ignored, missing ones take the defaults.

        Raises
        ------
        ValueError
            Not JSON, or not a record (no ``task`` or ``config``).
        TypeError
            A field of the wrong type (a config that is not a list of integers).
        """
        d = json.loads(line)
        if not isinstance(d, dict) or "task" not in d or "config" not in d:
            raise ValueError("not a release record")
        known = {k: v for k, v in d.items() if k in _FIELDS}
        return cls(**known)

    @classmethod
    def from_result(cls, task, result: "MeasureResult", tuner: str = "") -> "MeasureResult":
        """A copy of ``result`` stamped for ``task`` and ``tuner`` (the conversion of the two-type
        days, kept so code that called ``Record.from_result`` keeps working)."""
        return replace(result, task="", tuner="").stamp(task, tuner)


_FIELDS = frozenset(f.name for f in fields(MeasureResult))
