"""``autotvm.measure``: builders, runners and ``measure_option`` with AutoTVM's signatures.

The classes are :mod:`release.measure`'s, taking AutoTVM's arguments in AutoTVM's order
(``LocalRunner(timeout, number, repeat, min_repeat_ms, cooldown_interval, enable_cpu_cache_flush,
module_loader)``), so ``autotvm.LocalRunner(number=5, repeat=3, min_repeat_ms=100, timeout=4)``
means what it meant. Arguments that named AutoTVM's Relay-era build machinery (a custom
``build_func`` such as ``"ndk"``, ``build_kwargs``, ``runtime``, ``module_loader``) raise
:class:`release.errors.AliasError` unless left at their defaults: kernels are built and loaded by
MetaSchedule's builder and runner (:mod:`release.measure`), which take none of them.
"""

from __future__ import annotations

from ..errors import AliasError
from ..measure import LocalBuilder as _LocalBuilder
from ..measure import LocalRunner as _LocalRunner
from ..measure import MeasureResult, measure_option  # noqa: F401  (AutoTVM's names)
from ..measure import RPCRunner as _RPCRunner
from ..tuners.tuner import MeasureInput  # noqa: F401


def _refuse(cls: str, **given) -> None:
    """Raise :class:`AliasError` naming the first AutoTVM-only argument given a value."""
    for name, value in given.items():
        if value is not None:
            raise AliasError(f"autotvm.{cls}({name}=...): AutoTVM's {name} drove its Relay-era build, which TVM "
                             f"0.27 no longer has; ReLeASE builds and loads kernels with MetaSchedule's builder and "
                             f"runner, so leave {name} out (release.measure.{cls} lists what it takes)")


class LocalBuilder(_LocalBuilder):
    """AutoTVM's ``LocalBuilder(timeout=10, n_parallel=None, build_kwargs=None, build_func="default",
    do_fork=False, runtime=None)`` on :class:`release.measure.LocalBuilder`.

    Parameters
    ----------
    timeout : float, optional
        Seconds per build (default None: ReLeASE's 30, which a loaded machine needs).
    n_parallel : int, optional
        Parallel builds (default: the usable cores).
    build_func : str
        ``"default"`` only (another raises :class:`AliasError`).
    do_fork : bool
        Ignored: builds always run in a pool of worker processes.
    build_kwargs, runtime : None
        AutoTVM-only (anything else raises :class:`AliasError`).
    """

    def __init__(self, timeout: float | None = None, n_parallel: int | None = None, build_kwargs=None,
                 build_func: str = "default", do_fork: bool = False, runtime=None):
        _refuse("LocalBuilder", build_kwargs=build_kwargs, runtime=runtime,
                build_func=None if build_func == "default" else build_func)
        super().__init__(n_parallel=n_parallel, **({} if timeout is None else {"timeout": timeout}))


class LocalRunner(_LocalRunner):
    """AutoTVM's ``LocalRunner(timeout=10, number=4, repeat=3, min_repeat_ms=0, cooldown_interval=0.1,
    enable_cpu_cache_flush=False, module_loader=None)`` on :class:`release.measure.LocalRunner`
    (``module_loader`` must stay None: :class:`AliasError` otherwise)."""

    def __init__(self, timeout: float = 10, number: int = 4, repeat: int = 3, min_repeat_ms: int = 0,
                 cooldown_interval: float = 0.1, enable_cpu_cache_flush: bool = False, module_loader=None):
        _refuse("LocalRunner", module_loader=module_loader)
        super().__init__(number=number, repeat=repeat, min_repeat_ms=min_repeat_ms, timeout=timeout,
                         cooldown_interval=cooldown_interval, enable_cpu_cache_flush=enable_cpu_cache_flush)


class RPCRunner(_RPCRunner):
    """AutoTVM's ``RPCRunner(key, host, port, priority=1, timeout=10, n_parallel=None, number=4, repeat=3,
    min_repeat_ms=0, cooldown_interval=0.1, enable_cpu_cache_flush=False, module_loader=None)`` on
    :class:`release.measure.RPCRunner` (``n_parallel`` None: 1; ``module_loader`` must stay None)."""

    def __init__(self, key: str, host: str, port: int, priority: int = 1, timeout: float = 10,
                 n_parallel: int | None = None, number: int = 4, repeat: int = 3, min_repeat_ms: int = 0,
                 cooldown_interval: float = 0.1, enable_cpu_cache_flush: bool = False, module_loader=None):
        _refuse("RPCRunner", module_loader=module_loader)
        super().__init__(key, host=host, port=port, n_parallel=n_parallel or 1, number=number, repeat=repeat,
                         min_repeat_ms=min_repeat_ms, timeout=timeout, cooldown_interval=cooldown_interval,
                         enable_cpu_cache_flush=enable_cpu_cache_flush, priority=priority)


__all__ = ["LocalBuilder", "LocalRunner", "RPCRunner", "MeasureInput", "MeasureResult", "measure_option"]
