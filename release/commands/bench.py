"""``release bench``: tuners x workloads x seeds (operator tiers, :mod:`release.bench`) or whole models
(model tiers, :mod:`release.bench.model_tier`), from resumable logs.

:class:`BenchCommandConfig` (every flag, validated once) -> :func:`run_bench` (runs, re-times,
reports; returns a :class:`BenchCommandResult`) -> :func:`print_bench` (the command's lines).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

from ..errors import TunerError
from ..zoo import MODEL_NAMES as ZOO_MODELS


def add_parser(subparsers) -> None:
    """Add ``release bench`` to the top-level CLI."""
    p = subparsers.add_parser("bench", help="benchmark tuners x workloads x seeds against AutoTVM's XGBTuner",
                              formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--tier", default="quick",
                   help="operator tiers quick | baselines | ablation | paper | smoke; whole-model tiers model "
                        "(resnet18, mobilenet_v2, bert-base-layer: release+, xgb, ms; hours) | model-smoke "
                        "(tiny-cnn, a minute) (sets the defaults below)")
    p.add_argument("--models", nargs="*", default=None,
                   help=f"model tiers: built-in models to tune end to end ({', '.join(ZOO_MODELS)}; None: the tier's)")
    p.add_argument("--checkpoints", type=int, default=None,
                   help="model tiers: points of the latency-vs-wall-time curve, one every 1/N of the budget "
                        "(None: the tier's, 4 for model)")
    p.add_argument("--references", nargs="*", default=None,
                   help="model tiers: reference lines among eager, torch.compile, onnxruntime, openvino (None: the tier's)")
    p.add_argument("--retime", action="store_true",
                   help="model tiers: compile and time the checkpoints again instead of reading checkpoints.json")
    p.add_argument("--knowledge", default=None, metavar="DIR",
                   help="model tiers: the knowledge base that runs of a tuner named TUNER:warm start from (e.g. "
                        "--tuners release+ release+:warm); each warm run reads its own copy")
    p.add_argument("--workloads", nargs="*", default=None, help="registered workloads (None: the tier's)")
    p.add_argument("--tuners", nargs="*", default=None, help="tuner names as in `release tune` (None: the tier's)")
    p.add_argument("--seeds", nargs="*", type=int, default=None, help="one run per seed (None: the tier's)")
    p.add_argument("--n-trial", type=trials_arg, default=None,
                   help="measurements per run (None: the tier's); model tiers: per model, N or MODEL=N[,MODEL=N]")
    p.add_argument("--target", default=None, help="TVM target: a kind, a tag or a JSON dict (None: llvm; model "
                                                  "tiers: llvm with num-cores = the usable cores)")
    p.add_argument("--out", default=None, help="results folder (None: runs/bench/<tier>, git-ignored; the committed "
                   "results are refreshed only with --out benchmarks/results/<tier> --logs benchmarks/results/logs)")
    p.add_argument("--logs", default=None, help="per-run logs, shared by tiers (None: runs/bench/logs, "
                   "or OUT/logs when --out is given)")
    p.add_argument("--baseline", default=None, help="the tuner every metric is relative to (None: xgb, or the "
                   "tier's)")
    p.add_argument("--against", nargs="*", default=None,
                   help="further comparators, each with its own table (None: ms-evolutionary when it runs)")
    p.add_argument("--layout", default=None, help="conv2d layout of the tasks: NCHW (the operator tiers' default), "
                                                  "NCHWc or e.g. NCHW16c; give a separate --out for another layout. "
                                                  "Model tiers: the layout inside the models (model: NCHWc, "
                                                  "model-smoke: NCHW), for every tuner and MetaSchedule")
    p.add_argument("--prepack", action="store_true", default=None,
                   help="layout-free (pre-packed) weights; the committed tiers ran without")
    p.add_argument("--report-only", action="store_true", help="recompute metrics and plots from the logs")
    p.add_argument("--remeasure", action="store_true",
                   help="after the runs, re-time every run's 3 best configs, all tuners interleaved (the same "
                        "machine load for all), and report those GFLOPS too")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_bench)


def trials_arg(text: str):
    """``--n-trial``: an integer, or MODEL=N[,MODEL=N] (model tiers); argparse turns the error into one line."""
    from ..bench import parse_trials

    try:
        return parse_trials(text)
    except TunerError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def bench_command() -> str:
    """The command that reproduces the results (runs, resumes or skips, then reports), from ``sys.argv``."""
    argv = [a for a in sys.argv[1:] if a not in ("--report-only", "--no-progress")]
    return "release " + " ".join(argv) if sys.argv and sys.argv[0].endswith("release") else \
        "release bench " + " ".join(argv[1:])


@dataclass(frozen=True)
class BenchCommandConfig:
    """Everything ``release bench`` was asked for, validated once by :meth:`from_args`."""

    bench: Any
    """:class:`release.bench.BenchConfig` (operator tiers) or :class:`release.bench.ModelBenchConfig`."""
    model_tier: bool
    """``--tier`` is a whole-model tier (:data:`release.bench.MODEL_TIERS`)."""
    command: str
    """The command that reproduces the results (:func:`bench_command`), written into the report."""
    report_only: bool
    remeasure: bool
    """Operator tiers: re-time every run's best configs after the runs."""
    retime: bool
    """Model tiers: compile and time the checkpoints again."""
    progress: bool

    @classmethod
    def from_args(cls, args) -> "BenchCommandConfig":
        """Validate every flag of ``release bench`` against its tier and build the tier's configuration.

        Raises
        ------
        TunerError
            Options of the other kind of tier, per-model budgets on an operator tier, and whatever
            :meth:`release.bench.BenchConfig.from_tier` / :meth:`release.bench.ModelBenchConfig.from_tier`
            refuse (unknown tier, tuners, workloads, models, a bad ``--n-trial``).
        """
        from ..bench import MODEL_TIERS

        if args.tier in MODEL_TIERS:
            from ..bench import model_tier

            ignored = [f"--{k.replace('_', '-')}" for k in ("workloads", "logs", "baseline", "against", "prepack")
                       if getattr(args, k) not in (None, False)] + (["--remeasure"] if args.remeasure else [])
            if ignored:
                raise TunerError(f"{' '.join(ignored)}: operator-tier options; the model tiers take --models, "
                                 "--tuners, --seeds, --n-trial, --checkpoints, --references, --target, --layout, "
                                 "--knowledge, --out, --retime")
            cfg = model_tier.ModelBenchConfig.from_tier(args.tier, models=args.models, tuners=args.tuners,
                                                         seeds=args.seeds, n_trial=args.n_trial,
                                                         checkpoints=args.checkpoints, references=args.references,
                                                         target=args.target, out=args.out, layout=args.layout,
                                                         knowledge=args.knowledge)
        else:
            from .. import bench

            if isinstance(args.n_trial, dict):
                raise TunerError(f"--n-trial {args.n_trial}: per-model budgets are for the model tiers; give an "
                                 "integer")
            bad = [f"--{k}" for k in ("models", "checkpoints", "references", "knowledge")
                   if getattr(args, k) is not None] + (["--retime"] if args.retime else [])
            if bad:
                raise TunerError(f"{' '.join(bad)}: options of the model tiers ({', '.join(MODEL_TIERS)}), not of "
                                 f"{args.tier!r}")
            cfg = bench.BenchConfig.from_tier(args.tier, workloads=args.workloads, tuners=args.tuners,
                                              seeds=args.seeds, n_trial=args.n_trial, target=args.target or "llvm",
                                              out=args.out, logs=args.logs, baseline=args.baseline,
                                              against=args.against, layout=args.layout, prepack=args.prepack)
        return cls(bench=cfg, model_tier=args.tier in MODEL_TIERS, command=bench_command(),
                   report_only=args.report_only, remeasure=args.remeasure, retime=args.retime,
                   progress=not args.no_progress)


@dataclass(frozen=True)
class BenchCommandResult:
    """What one ``release bench`` run produced: the tier's report (``report(...)`` of
    :mod:`release.bench` or :mod:`release.bench.model_tier`) for its configuration."""

    config: BenchCommandConfig
    report: Any


def run_bench(config: BenchCommandConfig) -> BenchCommandResult:
    """Run (or resume, or skip with ``report_only``) every run of the tier, re-time with ``remeasure``
    (operator tiers), and compute the report. Progress bars show when ``config.progress``.

    Raises
    ------
    ReleaseError
        A run that cannot start (see :func:`release.bench.run`, :func:`release.bench.model_tier.run`); no
        logs to report from.
    """
    cfg = config.bench
    if config.model_tier:
        from ..bench import model_tier

        if not config.report_only:
            model_tier.run(cfg, progress=config.progress)
        res = model_tier.report(cfg, command=config.command, retime=config.retime, progress=config.progress)
        return BenchCommandResult(config, res)
    from .. import bench

    if not config.report_only:
        bench.run(cfg, progress=config.progress)
    if config.remeasure:
        bench.remeasure(cfg)
    return BenchCommandResult(config, bench.report(cfg, command=config.command))


def print_bench(result: BenchCommandResult) -> int:
    """The report as a markdown table and where the results went; returns the exit status 0."""
    cfg = result.config.bench
    if result.config.model_tier:
        from ..bench import model_tier

        print(model_tier.markdown(result.report))
        print(f"results in {cfg.out}/ (results.json, table.md, curves.png, checkpoints.json; logs in {cfg.logs}/)")
    else:
        from .. import bench

        print(bench.markdown(result.report))
        print(f"results in {cfg.out}/ (results.json, table.md, curves.png, speedups.png)")
    return 0


def cmd_bench(args) -> int:
    """``release bench``: :class:`BenchCommandConfig` -> :func:`run_bench` -> :func:`print_bench`. What TVM and
    the model frontends print while a model tier imports, extracts and compiles goes to ``<out>/warnings.log``,
    counted in one closing line (:func:`release.stderr_capture.quiet`), as ``tune-model`` does."""
    import os

    from ..stderr_capture import tvm_output_to

    config = BenchCommandConfig.from_args(args)
    with tvm_output_to(os.path.join(config.bench.out, "warnings.log")) as tvm_output:
        rc = print_bench(run_bench(config))
    if tvm_output.warnings or tvm_output.total.other:
        print(f"warnings TVM's and the frontends' stderr while importing, extracting and compiling: "
              f"{tvm_output.summary()}")
    return rc

