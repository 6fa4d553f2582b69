"""Opt-in alias: ``tvm.autotvm`` resolves to :mod:`release.autotvm`.

TVM removed AutoTVM (and Relay) in 0.20; TVM 0.27 has no ``tvm.autotvm``. Importing this module
installs an alias, in the spirit of setuptools' ``distutils`` shim, so scripts written against
AutoTVM's import paths find ReLeASE's tuners there::

    import release.tvm_autotvm  # noqa: F401  (installs the alias)
    from tvm import autotvm
    from tvm.autotvm.tuner import ReleaseTuner

    task = autotvm.task.create("resnet18.conv2d.2", target="llvm")
    ReleaseTuner(task).tune(64, autotvm.measure_option(), callbacks=[autotvm.callback.log_to_file("r.jsonl")])

The drop-in is at the tuner level: tasks, tuners, ``measure_option``, builders and runners (AutoTVM's
signatures), callbacks, ``record`` (``load_from_file``, ``pick_best``, ``decode``, ``encode``) and
``apply_history_best`` (an object, and a ``with`` context in which the log's best records are
MetaSchedule's current database). AutoTVM names that cannot exist without Relay and its
templates (``autotvm.template``, ``autotvm.task.extract_from_program``, ``register_topi_compute``,
dispatch contexts, the graph tuner, ...) raise :class:`release.errors.AliasError` naming what to
use instead (tasks come from workloads, TE, PrimFuncs or a Relax model's
``release.relax.extract_tasks``).

Aliased modules: ``tvm.autotvm`` -> ``release.autotvm``, and ``tvm.autotvm.tuner``, ``.task``,
``.callback``, ``.measure``, ``.record`` -> the same submodules of ``release.autotvm``.

Raises
------
release.errors.AliasError
    On import, when the installed TVM has its own ``tvm.autotvm`` (TVM before 0.20): use it, or
    ``from release import autotvm``. Also an ``ImportError``, so ``import`` reports it as one.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types

from .errors import AliasError

# alias module name -> module it resolves to
ALIASES = {
    "tvm.autotvm": "release.autotvm",
    "tvm.autotvm.tuner": "release.autotvm.tuner",
    "tvm.autotvm.task": "release.autotvm.task",
    "tvm.autotvm.callback": "release.autotvm.callback",
    "tvm.autotvm.measure": "release.autotvm.measure",
    "tvm.autotvm.record": "release.autotvm.record",
}

# AutoTVM names (apache/tvm v0.19 python/tvm/autotvm) that need Relay or AutoTVM's templates.
RELAY_ONLY = {
    "template", "register", "register_customized_task", "register_topi_compute", "register_topi_schedule",
    "get_config", "extract_from_program", "extract_from_multiple_program", "TaskExtractEnv",
    "DispatchContext", "FallbackContext", "ApplyConfig", "ApplyFixedConfig", "ApplyGraphBest", "apply_graph_best",
    "FallbackConfigEntity", "graph_tuner", "relay_integration", "topi_integration", "GLOBAL_SCOPE",
}

_ADVICE = ("ReLeASE's drop-in is at the tuner level: make a task with autotvm.task.create(workload name, TE "
           "tensors, PrimFunc or IRModule, target=...) or take a Relax model's tasks from "
           "release.relax.extract_tasks, then tune it with autotvm.tuner.ReleaseTuner(task) or XGBTuner(task)")


class _Alias(types.ModuleType):
    """A module object named ``tvm.autotvm...`` whose attributes are those of a ``release`` module."""

    def __init__(self, name: str, target: str):
        super().__init__(name, f"Alias of {target} installed by release.tvm_autotvm")
        self.__dict__["_release_target"] = target
        self.__dict__["__path__"] = []  # a package, so `import tvm.autotvm.tuner` resolves through sys.modules
        self.__dict__["__file__"] = __file__

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        sub = f"{self.__name__}.{attr}"
        if sub in sys.modules and isinstance(sys.modules[sub], _Alias):
            return sys.modules[sub]
        if attr in RELAY_ONLY:
            raise AliasError(
                f"{self.__name__}.{attr} is AutoTVM's Relay/template API, which TVM removed in 0.20 and "
                f"release.tvm_autotvm cannot provide; {_ADVICE}"
            )
        target = importlib.import_module(self.__dict__["_release_target"])
        try:
            return getattr(target, attr)
        except AttributeError:
            raise AttributeError(f"module {self.__name__!r} (alias of {target.__name__}) has no attribute "
                                 f"{attr!r}") from None

    def __dir__(self):
        return sorted(set(dir(importlib.import_module(self.__dict__["_release_target"]))))


class _RelayOnlyFinder:
    """Meta-path finder: ``import tvm.autotvm.graph_tuner`` (a Relay-only module) raises AliasError."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if fullname.startswith("tvm.autotvm.") and fullname.rsplit(".", 1)[1] in RELAY_ONLY:
            raise AliasError(f"{fullname} is AutoTVM's Relay/template API, which TVM removed in 0.20 and "
                             f"release.tvm_autotvm cannot provide; {_ADVICE}")
        return None


def _tvm_has_own_autotvm() -> bool:
    mod = sys.modules.get("tvm.autotvm")
    if mod is not None:
        return not isinstance(mod, _Alias)
    import tvm

    if isinstance(getattr(tvm, "autotvm", None), types.ModuleType):
        return not isinstance(tvm.autotvm, _Alias)
    return importlib.util.find_spec("tvm.autotvm") is not None


def install() -> None:
    """Install the alias (done on import; idempotent).

    Raises
    ------
    AliasError
        The installed TVM has its own ``tvm.autotvm``.
    """
    import tvm

    if _tvm_has_own_autotvm():
        raise AliasError(
            f"TVM {getattr(tvm, '__version__', '?')} has its own tvm.autotvm, so release.tvm_autotvm does not "
            "replace it; use TVM's AutoTVM, or ReLeASE's through `from release import autotvm`"
        )
    if not any(isinstance(f, type) and f.__name__ == "_RelayOnlyFinder" for f in sys.meta_path):
        sys.meta_path.insert(0, _RelayOnlyFinder)
    for name in sorted(ALIASES):  # parents first
        if not isinstance(sys.modules.get(name), _Alias):
            sys.modules[name] = _Alias(name, ALIASES[name])
        parent, _, child = name.rpartition(".")
        setattr(sys.modules[parent], child, sys.modules[name])


def uninstall() -> None:
    """Remove the alias (``tvm.autotvm`` is gone again)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not (isinstance(f, type) and f.__name__ == "_RelayOnlyFinder")]
    for name in sorted(ALIASES, reverse=True):
        mod = sys.modules.get(name)
        if isinstance(mod, _Alias):
            del sys.modules[name]
            parent, _, child = name.rpartition(".")
            if parent in sys.modules and sys.modules[parent].__dict__.get(child) is mod:
                delattr(sys.modules[parent], child)


install()
