"""Tuners: the AutoTVM-style base class, baselines and (where built) ReleaseTuner.

``get_tuner(name, task, **kw)`` maps CLI names to classes.
"""

from __future__ import annotations

from ..errors import TunerError
from .simple import GridSearchTuner, RandomTuner
from .tuner import MeasureInput, Tuner

# name -> "module:Class" (imported on demand so optional parts stay light)
TUNERS = {
    "random": "release.tuners.simple:RandomTuner",
    "grid": "release.tuners.simple:GridSearchTuner",
    "xgb": "release.tuners.xgb:XGBTuner",
    "ga": "release.tuners.ga:GATuner",
    "ms-evolutionary": "release.tuners.ms_evolutionary:MSEvolutionaryTuner",
    "release": "release.tuners.release_tuner:ReleaseTuner",
    "release+": "release.tuners.release_tuner:ReleasePlusTuner",
    "rl": "release.tuners.release_tuner:RLTuner",
    "sa-as": "release.tuners.release_tuner:SAASTuner",
}


def tuner_class(name: str) -> type:
    """The class ``release tune --tuner NAME`` makes (imported on demand).

    Raises
    ------
    TunerError
        Unknown name; the message lists the known ones.
    """
    import importlib

    if name not in TUNERS:
        raise TunerError(f"unknown tuner {name!r}; choose one of: {', '.join(TUNERS)}")
    mod, cls = TUNERS[name].split(":")
    return getattr(importlib.import_module(mod), cls)


def _names(keep) -> tuple:
    return tuple(n for n in TUNERS if keep(tuner_class(n)))


def __getattr__(name: str):
    """Name tuples read off the classes' declarations (``Tuner.knowledge_uses``, ``warm_by_default``):
    ``MODEL_BASED`` (a cost model of ours: they take ``plan_size``, ``knowledge``, ``local_search``),
    ``SEEDED_ONLY`` (a knowledge base as seeds only: MetaSchedule's search), ``WARM_BY_DEFAULT``
    (started warm by ``release tune`` / ``tune-model`` without being asked)."""
    from .model_based import ModelBasedTuner

    if name == "MODEL_BASED":
        return _names(lambda c: issubclass(c, ModelBasedTuner))
    if name == "SEEDED_ONLY":
        return _names(lambda c: c.knowledge_uses == ("seeds",))
    if name == "WARM_BY_DEFAULT":
        return _names(lambda c: c.warm_by_default)
    raise AttributeError(f"module 'release.tuners' has no attribute {name!r}")


def get_tuner(name: str, task, seed: int | None = None, **kwargs) -> Tuner:
    """Make the tuner called ``name`` (``release tune --tuner NAME``) for ``task``.

    Raises
    ------
    TunerError
        Unknown name; the message lists the known ones.
    """
    import inspect

    klass = tuner_class(name)
    accepted = inspect.signature(klass.__init__).parameters
    if not any(p.kind == p.VAR_KEYWORD for p in accepted.values()):
        bad = [k for k in kwargs if k not in accepted]
        if bad:
            raise TunerError(f"tuner {name!r} takes no {', '.join(bad)} (it applies to model-based tuners: "
                             f"{', '.join(__getattr__('MODEL_BASED'))})")
    return klass(task, seed=seed, **kwargs)


__all__ = ["Tuner", "MeasureInput", "RandomTuner", "GridSearchTuner", "TUNERS", "get_tuner", "tuner_class"]
