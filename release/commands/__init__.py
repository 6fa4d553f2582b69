"""The operator and benchmark commands of the CLI: ``release workloads``, ``tune``, ``tune-model``, ``bench``.

One module per command (:mod:`.workloads`, :mod:`.tune`, :mod:`.tune_model`, :mod:`.bench`; shared
argument groups and checks in :mod:`.common`). Each command is the same four steps: the parsed
arguments become one frozen config (``TuneConfig.from_args(args)``, ...: every flag validated, the
target resolved once), one library call takes it and returns a result object without printing
(``run_tune(config, renderer)``, ...; steps of long work go to the renderer passed in, whose base
class shows nothing, so the call serves Python callers as well), and a printer renders the lines.
"""

from __future__ import annotations

from . import bench, tune, tune_model, workloads
from .bench import BenchCommandConfig, BenchCommandResult, cmd_bench, print_bench, run_bench
from .common import check_model_arg, knowledge_for, make_measure_option
from .tune import TuneConfig, TunePrinter, TuneRenderer, TuneResult, cmd_tune, run_tune
from .tune_model import (TuneModelConfig, TuneModelPrinter, TuneModelRenderer, TuneModelResult, cmd_tune_model,
                         run_tune_model, tuned_or_untuned)
from .workloads import WorkloadsConfig, WorkloadsPrinter, WorkloadsResult, cmd_workloads, run_workloads

_knowledge_for = knowledge_for  # the name the knowledge tests and older callers use

__all__ = ["register", "check_model_arg", "make_measure_option", "tuned_or_untuned", "knowledge_for",
           "TuneConfig", "TuneResult", "TuneRenderer", "TunePrinter", "run_tune", "cmd_tune",
           "TuneModelConfig", "TuneModelResult", "TuneModelRenderer", "TuneModelPrinter", "run_tune_model",
           "cmd_tune_model", "BenchCommandConfig", "BenchCommandResult", "run_bench", "print_bench", "cmd_bench",
           "WorkloadsConfig", "WorkloadsResult", "WorkloadsPrinter", "run_workloads", "cmd_workloads"]


def register(subparsers) -> None:
    """Add ``workloads``, ``tune``, ``tune-model`` and ``bench`` to the top-level CLI."""
    workloads.add_parser(subparsers)
    tune.add_parser(subparsers)
    tune_model.add_parser(subparsers)
    bench.add_parser(subparsers)
