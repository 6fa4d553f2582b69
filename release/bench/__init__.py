"""Benchmark harnesses: ``release bench --tier NAME``.

The map:

- :mod:`~release.bench.config`: the tier tables (:data:`TIERS`: operator tiers; :data:`MODEL_TIERS`:
  model tiers) and what a benchmark runs (:class:`BenchConfig`, :class:`ModelBenchConfig`; each with
  ``from_tier`` and ``log_path``);
- :mod:`~release.bench.tier`: :class:`Tier`, the base class of both kinds of tier: ``run`` (resumable
  from the logs), ``report`` (a result dict, written as ``results.json``, ``table.md`` and plots),
  ``markdown(result)``, ``plot(result, out)``; the result's and the table's head, the threads and
  provenance lines and the writing of the results are implemented there once;
- :mod:`~release.bench.operator_tier`: :class:`OperatorTier` (tuners x workloads x seeds, the metrics of
  the Chameleon paper against a baseline, ``remeasure``: best kernels re-timed side by side, PyTorch's
  operator as the reference);
- :mod:`~release.bench.model_tier`: :class:`ModelTier` (whole models tuned end to end, latency against
  tuning wall time at checkpoints, ratio tables), with :mod:`~release.bench.model_timing` (a compiled
  model and its reference lines timed);
- :mod:`~release.bench.metrics`: curves, comparisons, geometric means with bootstrap intervals,
  checkpoints, time to reach, ratio tables (pure functions);
- :mod:`~release.bench.reporting`: machine facts, code labels, the provenance and threads lines, the
  table formatting both tiers share, :func:`write_results`.

The names below are those of the operator tiers' module functions (``run``, ``report``, ``markdown``,
``plot``, ``log_path``, ``remeasure``) and of everything both tiers share; the model tiers' functions of
the same names are in :mod:`release.bench.model_tier`.
"""

from .config import (BASELINE, DEFAULT_OUT, MODEL_TIERS, MS, REFERENCES, TIERS, WARM, BenchConfig,
                     ModelBenchConfig, parse_trials, split_tuner)
from .metrics import (Curve, bootstrap_geomean, checkpoint_trials, compare, continued_rounds, geomean, ratio_table,
                      summarize, time_to_reach)
from .model_tier import ModelTier, WallClock
from .model_timing import time_model
from .operator_tier import (OperatorTier, _measure_option, _ref_cell, _summary_table, log_path, markdown, plot,
                            remeasure, report, run, torch_reference, torch_reference_gflops)
from .reporting import (_nan_json, code_label, fmt, machine, machine_line, provenance_line, reference_cell,
                        threads_line, write_results)
from .tier import Tier

# the helpers' names before they were shared by both tiers
_summary = summarize
_fmt = fmt
_provenance_line = provenance_line
_threads_line = threads_line

__all__ = [
    "BASELINE", "DEFAULT_OUT", "MODEL_TIERS", "MS", "REFERENCES", "TIERS", "WARM", "BenchConfig", "ModelBenchConfig",
    "parse_trials", "split_tuner", "Curve", "bootstrap_geomean", "checkpoint_trials", "compare", "continued_rounds",
    "geomean", "ratio_table", "summarize", "time_to_reach", "ModelTier", "WallClock", "time_model", "OperatorTier",
    "log_path", "markdown", "plot", "remeasure", "report", "run", "torch_reference", "torch_reference_gflops",
    "code_label", "fmt", "machine", "machine_line", "provenance_line", "reference_cell", "threads_line",
    "write_results", "Tier",
]
