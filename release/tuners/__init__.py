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
#: the tuners with a cost model (:class:`release.tuners.model_based.ModelBasedTuner`): they take
#: ``plan_size``, ``knowledge``, ``local_search`` and start warm from a knowledge base
MODEL_BASED = ("xgb", "sa-as", "rl", "release", "release+")
#: tuners without a cost model of ours that take a knowledge base as transfer-tuning seeds only
#: (MetaSchedule's search: through its database)
SEEDED_ONLY = ("ms-evolutionary",)
#: tuners that ``release tune`` / ``tune-model`` start warm from the knowledge base without being asked: ours
#: (release+ measured on held-out layers: benchmarks/results/knowledge/holdout/; release and rl share its agent
#: and seeds). The baselines (xgb, sa-as, ms-evolutionary) start cold as AutoTVM's and MetaSchedule's own
#: tuners do, unless ``--knowledge`` is given (xgb with seeds ended 9% below cold xgb, n=3).
WARM_BY_DEFAULT = ("rl", "release", "release+")


def get_tuner(name: str, task, seed: int | None = None, **kwargs) -> Tuner:
    """Make the tuner called ``name`` (``release tune --tuner NAME``) for ``task``.

    Raises
    ------
    TunerError
        Unknown name; the message lists the known ones.
    """
    import importlib

    if name not in TUNERS:
        raise TunerError(f"unknown tuner {name!r}; choose one of: {', '.join(TUNERS)}")
    import inspect

    mod, cls = TUNERS[name].split(":")
    klass = getattr(importlib.import_module(mod), cls)
    accepted = inspect.signature(klass.__init__).parameters
    if not any(p.kind == p.VAR_KEYWORD for p in accepted.values()):
        bad = [k for k in kwargs if k not in accepted]
        if bad:
            raise TunerError(f"tuner {name!r} takes no {', '.join(bad)} (it applies to model-based tuners: "
                             f"{', '.join(MODEL_BASED)})")
    return klass(task, seed=seed, **kwargs)


__all__ = ["Tuner", "MeasureInput", "RandomTuner", "GridSearchTuner", "TUNERS", "MODEL_BASED", "SEEDED_ONLY", "get_tuner"]
