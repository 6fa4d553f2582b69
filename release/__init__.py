"""ReLeASE: fast schedule tuning for Apache TVM.

Operator level (Chameleon / ReLeASE, ICLR 2020): knob spaces derived from MetaSchedule design
spaces, AutoTVM-style tuners (random, grid, XGBoost + simulated annealing, GA) and the PPO +
adaptive-sampling ``ReleaseTuner``. Graph level (REGAL, ICLR 2020): computation graphs, a
performance model and BRKGA in :mod:`release.graph`.

Heavy modules (TVM, PyTorch) are imported lazily: ``import release`` is cheap.
"""

__version__ = "0.1.0"

_LAZY = {
    "Task": "release.task",
    "create_task": "release.task",
    "get_workload": "release.workloads",
    "list_workloads": "release.workloads",
    "KnobSpace": "release.space",
    "measure_option": "release.measure",
    "apply_history_best": "release.measure.records",
    "ReleaseError": "release.errors",
    "ReleaseTuner": "release.tuners.release_tuner",
    "RLTuner": "release.tuners.release_tuner",
    "ReleasePlusTuner": "release.tuners.release_tuner",
    "SAASTuner": "release.tuners.release_tuner",
    "XGBTuner": "release.tuners.xgb",
    "GATuner": "release.tuners.ga",
    "RandomTuner": "release.tuners.simple",
    "GridSearchTuner": "release.tuners.simple",
    "ReleaseSearchStrategy": "release.strategy",
    "TuningSession": "release.session",
    "TaskScheduler": "release.scheduler",
    "load_model": "release.relax.frontend",
    "tune_model": "release.relax.tune",
}


def __getattr__(name):
    if name == "autotvm":
        import importlib

        return importlib.import_module("release.autotvm")
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'release' has no attribute {name!r}")
