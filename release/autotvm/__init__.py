"""AutoTVM-compatible import paths: an AutoTVM script ports by changing its imports.

    from release import autotvm
    task = autotvm.task.create("resnet18.conv2d.2", target="llvm")
    tuner = autotvm.tuner.XGBTuner(task)        # or RandomTuner, GridSearchTuner, GATuner, ReleaseTuner
    tuner.tune(n_trial=64, measure_option=autotvm.measure_option(
                   builder=autotvm.LocalBuilder(), runner=autotvm.LocalRunner(number=4)),
               callbacks=[autotvm.callback.progress_bar(64), autotvm.callback.log_to_file("t.jsonl")])
    with autotvm.apply_history_best("t.jsonl") as best:   # MetaSchedule's current database in the block
        func = best.build(task)

Modules: ``task`` (``create``), ``tuner``, ``measure`` (builders and runners with AutoTVM's
signatures), ``callback``, ``record`` (``load_from_file``, ``pick_best``, ``decode``, ``encode``);
``apply_history_best`` is :func:`release.autotvm.history.apply_history_best`.
"""

from . import callback, measure, record, task, tuner
from .history import ApplyHistoryBest, apply_history_best
from .measure import LocalBuilder, LocalRunner, MeasureInput, MeasureResult, RPCRunner, measure_option
from .record import load_records

__all__ = ["LocalBuilder", "LocalRunner", "RPCRunner", "MeasureInput", "MeasureResult", "ApplyHistoryBest",
           "apply_history_best", "measure_option", "load_records", "callback", "measure", "record", "task", "tuner"]
