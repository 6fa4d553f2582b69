"""Project exceptions.

Every error a user can cause (bad workload name, malformed target, bad trial count, unreadable
log, unreachable RPC tracker, ...) raises a :class:`ReleaseError` subclass whose message names
the bad value and the fix. The CLI turns these into one line on stderr and exit status 2.
Internal invariants use ``assert``.

User input is validated once, where it enters: the CLI commands and the public entry points and
constructors (``Tuner.tune``, ``tune_model``, ``tune_model_ray``, ``BenchConfig``, the tuners'
constructors, ``ModelBasedConfig.check``). A value checked by more than one of them is checked
by one function here (:func:`check_n_trial`, :func:`check_plan_size`), so the rule and the
message are written once; the internal parts (cost model, model optimizers, samplers, the
session) trust what they are handed.
"""

import numbers


def error_line(err: BaseException, first: bool = False, limit: int = 400) -> str:
    """One line of an exception's text for a user-facing message: the last non-empty line (TVM and
    torch put the reason there; ``first=True`` for errors that lead with it), at most ``limit``
    characters; the exception's type name if it has no text."""
    lines = [l.strip() for l in str(err).strip().splitlines() if l.strip()]
    if not lines:
        return type(err).__name__
    return (lines[0] if first else lines[-1])[:limit]


class ReleaseError(Exception):
    """Base class of all user-facing errors of the ``release`` package."""


class WorkloadError(ReleaseError):
    """Unknown workload name or a workload that cannot be turned into a task."""


class TargetError(ReleaseError):
    """Malformed or unavailable target."""


class SpaceError(ReleaseError):
    """A knob space cannot be built (for example a task whose design space has no knobs)."""


class InvalidConfigError(ReleaseError):
    """A config that is not a legal point of its knob space; ``reason`` says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class MeasureError(ReleaseError):
    """Measurement infrastructure cannot be set up (for example an unreachable RPC tracker)."""


class RecordError(ReleaseError):
    """A tuning log that cannot be used (for example written for another task)."""


class TunerError(ReleaseError):
    """Bad tuner arguments (unknown tuner name, feature type, loss type, plan size below 1, ...)."""


class GraphError(ReleaseError):
    """Bad computation graph or graph-optimization input (REGAL): cycle, negative cost, dangling edge, ..."""


class ModelError(ReleaseError):
    """A model that cannot be imported: export failure, unsupported operator, bad ONNX file."""


class AliasError(ReleaseError, ImportError):
    """The ``tvm.autotvm`` alias (``release.tvm_autotvm``) cannot be installed, or a name asked of it
    needs Relay or AutoTVM's templates, which TVM removed in 0.20."""


def check_n_trial(n_trial, label: str | None = None) -> None:
    """Raise :class:`TunerError` unless ``n_trial`` (a trial budget) is an integer >= 1.

    Parameters
    ----------
    n_trial : object
        The value given (Python or NumPy integer expected).
    label : str, optional
        How the message names the value (default ``"n_trial=<repr>"``; the CLI passes
        ``"--n-trial <value>"``).

    Raises
    ------
    TunerError
        ``"<label> must be a positive integer"``.
    """
    if not isinstance(n_trial, numbers.Integral) or n_trial < 1:
        raise TunerError(f"{label or f'n_trial={n_trial!r}'} must be a positive integer")


def check_plan_size(plan_size) -> None:
    """Raise :class:`TunerError` unless ``plan_size`` (configs per round) is an integer >= 1.

    A bool is refused (``plan_size=True`` is a mistake, not 1). AutoTVM's default is 64.

    Raises
    ------
    TunerError
        ``"plan_size=<repr> must be an integer >= 1 (AutoTVM's default is 64)"``.
    """
    if not isinstance(plan_size, numbers.Integral) or isinstance(plan_size, bool) or plan_size < 1:
        raise TunerError(f"plan_size={plan_size!r} must be an integer >= 1 (AutoTVM's default is 64)")
