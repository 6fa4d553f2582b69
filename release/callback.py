"""The callback role: what :meth:`release.tuners.Tuner.tune` tells the outside world, and when.

Life cycle of one ``tune`` call:

1. :attr:`Callback.log_path`: the first callback that names a log tells the tuner where its
   state beyond the records lives (the PPO agent is checkpointed beside it).
2. :meth:`Callback.records` ``(task)``: stored records of the task to resume from (the log's;
   default: none). They are told to the tuning session before the first round.
3. :meth:`Callback.on_start` ``(tuner, n_trial)``: before the first round (progress bars).
4. :meth:`Callback.on_result` ``(tuner, inputs, results)``: after each measurement completes,
   with lists of one :class:`release.tuners.MeasureInput` and one
   :class:`release.measure.MeasureResult` (invalid configs are not reported). Logs append here.
5. :meth:`Callback.on_finish` ``(tuner)``: when ``tune`` returns or raises.

Every hook is a documented no-op by default. A plain function ``f(tuner, inputs, results)``
(AutoTVM's callback form) is accepted wherever a callback is: :func:`as_callback` wraps it.
Adding a callback is one subclass overriding the hooks it needs.
"""

from __future__ import annotations


class Callback:
    """Base class of tuner callbacks; calling one is :meth:`on_result` (AutoTVM's form)."""

    #: path of the log this callback writes, or None (see the module docstring)
    log_path: str | None = None

    def records(self, task) -> list:
        """Stored records of ``task`` to resume from (default: none)."""
        return []

    def on_start(self, tuner, n_trial: int) -> None:
        """Before the first round of ``tune(n_trial, ...)``. Default: nothing."""

    def on_result(self, tuner, inputs, results) -> None:
        """After each completed measurement (lists of one input and one result). Default: nothing."""

    def on_finish(self, tuner) -> None:
        """When ``tune`` returns or raises. Default: nothing."""

    def __call__(self, tuner, inputs, results) -> None:
        self.on_result(tuner, inputs, results)


class FunctionCallback(Callback):
    """A plain function ``fn(tuner, inputs, results)`` as a :class:`Callback`."""

    def __init__(self, fn):
        self.fn = fn

    def on_result(self, tuner, inputs, results) -> None:
        self.fn(tuner, inputs, results)

    def __repr__(self) -> str:
        return f"FunctionCallback({self.fn!r})"


def as_callback(cb) -> Callback:
    """``cb`` if it is a :class:`Callback`, else ``cb`` (a callable) wrapped in :class:`FunctionCallback`.

    Raises
    ------
    TunerError
        ``cb`` is neither a callback nor callable.
    """
    from .errors import TunerError

    if isinstance(cb, Callback):
        return cb
    if not callable(cb):
        raise TunerError(f"callback {cb!r} is neither a release.callback.Callback nor a function "
                        "f(tuner, inputs, results)")
    hooks = [h for h in HOOK_LIKE if callable(getattr(type(cb), h, None))]
    if hooks:  # an object with its own hooks: wrapped as a function they would never be called
        raise TunerError(f"callback {type(cb).__name__} defines {', '.join(hooks)} but is not a "
                         "release.callback.Callback, so Tuner.tune would only call it after each "
                         "measurement and never its hooks; subclass release.callback.Callback and name "
                         "them on_start(tuner, n_trial) / on_result / on_finish(tuner) / records(task)")
    return FunctionCallback(cb)


#: method names that mean "a hook" on a callable callback object that is not a :class:`Callback`
#: (the hooks themselves, and the names a hook is easily misnamed as)
HOOK_LIKE = ("on_start", "on_finish", "records", "start", "finish", "begin", "end")
