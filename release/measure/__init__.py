"""Measurement (builders, runners, measure_option) and tuning records."""

from .measure import (ErrorKind, LocalBuilder, LocalRunner, MeasureResult, Measurer, RPCRunner, check_tracker,
                      measure_defaults, measure_option)
from .records import (ApplyHistoryBest, Record, add_to_database, apply_history_best, best_records,
                      check_log_cache_flush, check_log_for_task, load_records, log_to_database,
                      log_to_file)

__all__ = [
    "ErrorKind", "LocalBuilder", "LocalRunner", "MeasureResult", "Measurer", "RPCRunner", "check_tracker",
    "measure_defaults", "measure_option", "ApplyHistoryBest", "Record", "add_to_database", "apply_history_best", "best_records",
    "check_log_cache_flush", "check_log_for_task", "load_records", "log_to_database", "log_to_file",
]
