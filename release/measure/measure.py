"""Measurement, split into roles: kept as the import path of earlier versions.

- :mod:`release.measure.result`: ``ErrorKind``, ``MeasureResult``, ``BuildResult``, ``RunResult``;
- :mod:`release.measure.builder`: ``Builder``, ``LocalBuilder``, ``MetaScheduleBuilder``;
- :mod:`release.measure.runner`: ``Runner``, ``LocalRunner``, ``RPCRunner``, ``RetryingRPCRunner``,
  ``MetaScheduleRunner``, ``check_tracker``;
- :mod:`release.measure.measurer`: ``Measurer``, ``measure_option``;
- :mod:`release.measure.config`: ``MeasureConfig`` (one set of defaults);
- :mod:`release.measure.records`: ``Record`` and logs.
"""

from ._pool import (STARTUP_TIMEOUT, keep_interrupts, set_job_timeout, stop_workers,  # noqa: F401
                    without_interrupts)
from .builder import Builder, LocalBuilder, MetaScheduleBuilder  # noqa: F401
from .measurer import Measurer, measure_defaults, measure_option  # noqa: F401
from .result import BuildResult, ErrorKind, MeasureResult, RunResult  # noqa: F401
from .runner import (LocalRunner, MetaScheduleRunner, RetryingRPCRunner, RPCRunner, Runner,  # noqa: F401
                     _evaluator, _runner_result, check_tracker, lost_device, make_rpc_runner)
