"""AutoTVM-compatible import paths: an AutoTVM script ports by changing its imports.

    from release import autotvm
    task = autotvm.task.create("resnet18.conv2d.2", target="llvm")
    tuner = autotvm.tuner.XGBTuner(task)        # or RandomTuner, GridSearchTuner, GATuner, ReleaseTuner
    tuner.tune(n_trial=64, measure_option=autotvm.measure_option(
                   builder=autotvm.LocalBuilder(), runner=autotvm.LocalRunner(number=4)),
               callbacks=[autotvm.callback.progress_bar(), autotvm.callback.log_to_file("t.jsonl")])
    best = autotvm.apply_history_best("t.jsonl").best(task)
"""

from ..measure import LocalBuilder, LocalRunner, MeasureResult, RPCRunner, apply_history_best, measure_option
from ..measure.records import load_records
from . import callback, task, tuner
from .tuner import MeasureInput

__all__ = ["LocalBuilder", "LocalRunner", "RPCRunner", "MeasureInput", "MeasureResult", "apply_history_best",
           "measure_option", "load_records", "callback", "task", "tuner"]
