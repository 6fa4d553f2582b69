"""``autotvm.tuner``: every tuner class, under AutoTVM's names."""

from ..tuners import TUNERS as _TUNERS
from ..tuners.simple import GridSearchTuner, RandomTuner
from ..tuners.tuner import MeasureInput, Tuner

__all__ = ["Tuner", "MeasureInput", "RandomTuner", "GridSearchTuner", "XGBTuner", "GATuner", "ReleaseTuner",
           "RLTuner", "ReleasePlusTuner", "SAASTuner", "MSEvolutionaryTuner"]


def __getattr__(name):
    # Tuners that live in optional modules (XGBTuner, GATuner, ReleaseTuner) are resolved lazily.
    import importlib

    for path in _TUNERS.values():
        mod, cls = path.split(":")
        if cls == name:
            return getattr(importlib.import_module(mod), cls)
    raise AttributeError(f"module 'release.autotvm.tuner' has no attribute {name!r}")
