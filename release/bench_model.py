"""The model benchmark tiers under their earlier module name: a re-export of
:mod:`release.bench.model_tier` (with the configuration of :mod:`release.bench.config`, the metrics of
:mod:`release.bench.metrics` and the timings of :mod:`release.bench.model_timing`). New code imports
from :mod:`release.bench`."""

from .bench.config import MODEL_TIERS, MS, REFERENCES, WARM, ModelBenchConfig, parse_trials, split_tuner
from .bench.metrics import checkpoint_trials, ratio_table, time_to_reach
from .bench.model_tier import (ModelTier, WallClock, _ms_database, _ms_done, _our_database, _read_jsonl, _ref_text,
                               _wall_at, checkpoints, log_path, markdown, plot, references, report, run)
from .bench.model_timing import _onnxruntime, time_model
from .bench.reporting import fmt as _f

__all__ = ["MODEL_TIERS", "MS", "REFERENCES", "WARM", "ModelBenchConfig", "parse_trials", "split_tuner",
           "checkpoint_trials", "ratio_table", "time_to_reach", "ModelTier", "WallClock", "checkpoints", "log_path",
           "markdown", "plot", "references", "report", "run", "time_model"]
