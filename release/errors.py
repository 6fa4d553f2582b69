"""Project exceptions.

Every error a user can cause (bad workload name, malformed target, bad trial count, unreadable
log, unreachable RPC tracker, ...) raises a :class:`ReleaseError` subclass whose message names
the bad value and the fix. The CLI turns these into one line on stderr and exit status 2.
Internal invariants use ``assert``.
"""


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
