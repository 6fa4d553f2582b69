"""``release tune``: one operator workload tuned into a log, its best kernel checked.

:class:`TuneConfig` (every flag, validated once) -> :func:`run_tune` (the work; returns a
:class:`TuneResult`, prints nothing) -> :class:`TunePrinter` (the lines the command prints).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from typing import Any

from ..errors import ReleaseError, TunerError, check_n_trial
from .common import KnowledgeChoice, add_knowledge_args, add_measure_args, check_tuner_name, plural

PPO_TUNERS = ("release", "release+", "rl")
#: the tuner ``release tune``, ``release tune-model`` and :func:`release.relax.tune.tune_model` run when none is named
DEFAULT_TUNER = "release+"


def tuner_why(name: str) -> str:
    """What the ``tuner`` line adds after the name of the tuner that runs: for ``release+`` (the default)
    why it is the default and how to run the paper's tuner instead; for ``release`` that it is the paper's;
    empty for the others."""
    if name == DEFAULT_TUNER:
        return (" (the default: the paper's ReleaseTuner, PPO search on an XGBoost cost model with adaptive "
                "sampling, plus this project's search improvements; --tuner release for the paper's own)")
    if name == "release":
        return " (the paper's ReleaseTuner: Chameleon's PPO search and adaptive sampling)"
    return ""


def add_parser(subparsers) -> None:
    """Add ``release tune`` to the top-level CLI."""
    p = subparsers.add_parser("tune", help="tune one operator workload",
                              formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--workload", default="resnet18.conv2d.2", help="registered workload (see `release workloads`)")
    p.add_argument("--target", default="llvm", help="'llvm' (this CPU), 'cuda', a TVM tag, or a JSON dict")
    p.add_argument("--tuner", default=DEFAULT_TUNER,
                   help="release+ | release | rl | sa-as | xgb | ga | ms-evolutionary | random | grid (release+: the "
                        "paper's ReleaseTuner with this project's search improvements; release: the paper's own)")
    p.add_argument("--n-trial", type=int, default=64, help="measured configs in total (resumed ones count)")
    p.add_argument("--early-stopping", type=int, default=None,
                   help="stop after this many trials without a new best (None: run all --n-trial)")
    p.add_argument("--log", default=None,
                   help="JSON-lines tuning log; an existing log is resumed (None: runs/WORKLOAD.TUNER.jsonl)")
    p.add_argument("--database", default=None,
                   help="also write a MetaSchedule JSONDatabase in this folder (None: none)")
    p.add_argument("--seed", type=int, default=0, help="seed of every random choice")
    p.add_argument("--layout", default="NCHW",
                   help="conv2d data layout: NCHW, NCHWc (channel blocks = the target's vector lanes: 16 with AVX-512, "
                        "8 with AVX2) or e.g. NCHW16c; the blocked layouts reach PyTorch's oneDNN speed. A 3x3 "
                        "stride-1 conv2d also takes NCHWc-winograd4 (or -winograd2): Winograd F(4x4, 3x3) on a "
                        "transformed weight")
    p.add_argument("--no-prepack", action="store_true",
                   help="keep the weight layout as written (without it, on CPU: conv2d/dense weights are layout-free, "
                        "pre-packed into the order the schedule reads, as TVM's cpu_weight_prepack)")
    p.add_argument("--plan-size", type=int, default=None,
                   help="configs per round for model-based tuners (None: the tuner's own, 64 for xgb)")
    p.add_argument("--feature-type", default=None,
                   help="cost-model features of model-based tuners: itervar | knob (None: the tuner's own)")
    p.add_argument("--loss-type", default=None,
                   help="cost-model loss of model-based tuners: reg | rank (None: the tuner's own)")
    p.add_argument("--warm-start", default=None, metavar="AGENT_PT",
                   help="PPO tuners (release, release+, rl): start the agent from another task's *.agent.pt "
                        "(written beside every tuning log; same operator, as many knobs; None: a fresh agent)")
    add_knowledge_args(p)
    p.add_argument("--local-search", action="store_true",
                   help="model-based tuners: a Droplet-style local phase once the best stops improving for "
                        "plan-size trials")
    add_measure_args(p)
    p.add_argument("--no-check", action="store_true", help="skip checking the best kernel against the reference")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_tune)


@dataclass(frozen=True)
class TuneConfig:
    """Everything ``release tune`` was asked for, validated once by :meth:`from_args`."""

    workload: str
    """Registered workload name (``release workloads``)."""
    target_spec: str
    """``--target`` as given (the printed usage lines repeat it)."""
    target: Any
    """The resolved ``tvm.target.Target`` (:func:`release.target.resolve_target`, once)."""
    tuner: str
    n_trial: int
    early_stopping: int | None
    log: str | None
    """``--log`` as given; None: ``runs/<task name>.<tuner>.jsonl`` (:attr:`TuneResult.log`)."""
    database: str | None
    seed: int
    layout: str
    prepack: bool | None
    """False with ``--no-prepack``; None: the task's default (on for CPU targets)."""
    tuner_options: tuple
    """``(name, value)`` pairs given to :func:`release.tuners.get_tuner`: plan_size, feature_type,
    loss_type, warm_start, local_search where given."""
    knowledge: KnowledgeChoice
    knowledge_use: str | None
    model_based: bool
    """The tuner's class reads a knowledge base into its cost model (``"model" in knowledge_uses``)."""
    seeded: bool
    """The tuner's class reads a knowledge base only as seeds (``knowledge_uses == ("seeds",)``)."""
    measure: Any
    """:class:`release.measure.config.MeasureConfig` of the measure flags."""
    check: bool
    progress: bool

    @classmethod
    def from_args(cls, args) -> "TuneConfig":
        """Validate every flag of ``release tune`` and resolve the target, before any work.

        Raises
        ------
        TunerError
            A bad ``--n-trial``, an unknown ``--tuner``, ``--warm-start`` with a tuner that is not PPO,
            ``--early-stopping`` < 1, contradicting knowledge flags, ``--knowledge-use`` the tuner
            cannot take, ``--local-search`` with a tuner that is not model-based, bad measure flags.
        ReleaseError
            A ``--log`` that cannot be written (:func:`release.measure.records.check_log_path`), a bad
            ``--target`` (:class:`release.errors.TargetError`), a knowledge folder that is a file.
        """
        from ..measure.config import MeasureConfig
        from ..measure.records import check_log_path
        from ..target import resolve_target
        from ..tuners import tuner_class

        check_n_trial(args.n_trial, label=f"--n-trial {args.n_trial}")
        check_tuner_name(args.tuner)
        if args.warm_start is not None and args.tuner not in PPO_TUNERS:
            raise TunerError(f"--warm-start applies to the PPO tuners (release, release+, rl), not {args.tuner!r}")
        if args.early_stopping is not None and args.early_stopping < 1:
            raise TunerError(f"--early-stopping {args.early_stopping} must be a positive number of trials without "
                             "a new best; leave it out to run all --n-trial")
        if args.log:
            check_log_path(args.log)  # a --log that cannot be written fails before any work
        target = resolve_target(args.target)
        measure = MeasureConfig.from_args(args)
        knowledge = KnowledgeChoice.from_args(args)
        uses = tuner_class(args.tuner).knowledge_uses  # declared on the class
        model_based = "model" in uses
        seeded = uses == ("seeds",)
        if seeded and knowledge.warm and args.knowledge_use not in (None, "seeds"):
            raise TunerError(f"--knowledge-use {args.knowledge_use}: {args.tuner} uses a knowledge base only as "
                             "seeds in its database; drop --knowledge-use or give seeds")
        if args.local_search and not model_based:
            raise TunerError(f"--local-search applies to model-based tuners (xgb, sa-as, rl, release, release+), "
                             f"not {args.tuner!r}")
        options = tuple((k, v) for k, v in (("plan_size", args.plan_size), ("feature_type", args.feature_type),
                                             ("loss_type", args.loss_type), ("warm_start", args.warm_start))
                        if v is not None) + ((("local_search", True),) if args.local_search else ())
        return cls(workload=args.workload, target_spec=args.target, target=target, tuner=args.tuner,
                   n_trial=args.n_trial, early_stopping=args.early_stopping, log=args.log, database=args.database,
                   seed=args.seed, layout=args.layout, prepack=False if args.no_prepack else None,
                   tuner_options=options, knowledge=knowledge, knowledge_use=args.knowledge_use,
                   model_based=model_based, seeded=seeded, measure=measure, check=not args.no_check,
                   progress=not args.no_progress)

    @property
    def reads_knowledge(self) -> bool:
        """Whether the tuner is given the knowledge base to start warm from."""
        return (self.model_based or self.seeded) and self.knowledge.warm


@dataclass(frozen=True)
class TuneStart:
    """What :func:`run_tune` has set up when tuning starts (given to :meth:`TuneRenderer.started`)."""

    task: Any
    tuner: Any
    threads: int
    log: str
    previous: list
    """Records the log held before this run (resumed)."""


@dataclass(frozen=True)
class CheckOutcome:
    """The best tuned kernel compiled from the log (``compile_tir``) and compared with the reference:
    ``max_abs_err`` when it matches, else ``error`` (one line)."""

    max_abs_err: float | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """The kernel gave the reference's output."""
        return self.error is None


@dataclass(frozen=True)
class TuneResult:
    """What one ``release tune`` run did (:func:`run_tune`)."""

    config: TuneConfig
    task: Any
    tuner: Any
    """The tuner after the run: ``best_config``, ``best_cost`` (s), ``trials``, ``session``, times (s)."""
    log: str
    wall_s: float
    default_ms: float | None
    """TVM's default schedule of the task (untuned), ms, from the log; None when it did not run."""
    transfer: Any
    """The transfer cost model's training set (``TransferCostModel.knowledge``) or None."""
    check: CheckOutcome | None
    """None when not checked (``--no-check``, a non-CPU target, or no config ran)."""

    @property
    def rc(self) -> int:
        """The command's exit status: 1 when no config ran correctly or the check failed, else 0."""
        if self.tuner.best_config is None or (self.check is not None and not self.check.ok):
            return 1
        return 0


class TuneRenderer:
    """Receives what :func:`run_tune` reports while it runs; this base class shows nothing."""

    def started(self, start: TuneStart, config: TuneConfig) -> None:
        """The task, tuner and log are ready; tuning starts next."""


def run_tune(config: TuneConfig, renderer: TuneRenderer | None = None) -> TuneResult:
    """Tune ``config.workload`` on ``config.target`` into its log (resumed), measure TVM's default
    schedule once, and check the best kernel against the reference (CPU targets, unless
    ``config.check`` is False).

    The build and run workers end with the call. A progress bar (``release.progress``) shows while
    tuning when ``config.progress``; ``renderer.started`` is called once before tuning.

    Raises
    ------
    ReleaseError
        An unknown workload or layout, a log of another task or that is not a log, no device or RPC
        tracker, bad tuner options (:func:`release.tuners.get_tuner`).
    """
    from ..measure import check_log_cache_flush, check_log_for_task, log_to_database, log_to_file
    from ..measure.measurer import measure_missing_defaults
    from ..relax import default_ms
    from ..task import create_task
    from ..threads import thread_count, use_threads
    from ..tuners import get_tuner
    from ..tuners.callback import progress_bar

    renderer = renderer or TuneRenderer()
    t_start = time.time()
    task = create_task(config.workload, config.target, layout=config.layout, prepack=config.prepack)
    threads = use_threads(thread_count(task.target))  # before any worker starts: they inherit TVM_NUM_THREADS
    log = config.log or os.path.join("runs", f"{task.name}.{config.tuner}.jsonl")
    previous = check_log_for_task(log, task)
    check_log_cache_flush(previous, config.measure.cache_flush, log)
    option = config.measure.make_option()
    option["runner"].check_device(task.target)  # before the (slow on CUDA) knob space is built
    kwargs = dict(config.tuner_options)
    kdir = config.knowledge.folder
    if config.reads_knowledge:
        from ..knowledge import KnowledgeBase

        kwargs["knowledge"] = KnowledgeBase(kdir, read_once=True)  # read once, by the tuner's cost model; its stored programs too
        if config.knowledge_use and config.model_based:
            kwargs["knowledge_use"] = config.knowledge_use
    tuner = get_tuner(config.tuner, task, seed=config.seed, **kwargs)
    renderer.started(TuneStart(task, tuner, threads, log, previous), config)
    callbacks = [log_to_file(log)]
    if kdir is not None:
        from ..knowledge.use import log_to_knowledge

        callbacks.append(log_to_knowledge(kwargs.get("knowledge") or kdir))  # the tuner's base object when it reads one
    if config.database:
        callbacks.append(log_to_database(config.database))
    if config.progress:
        callbacks.append(progress_bar(total=config.n_trial))
    try:
        tuner.tune(config.n_trial, option, early_stopping=config.early_stopping, callbacks=callbacks)
        # then TVM's default schedule of the task (untuned), once per machine and log: the kernel to beat
        measure_missing_defaults([task], option, callbacks[0])
    finally:  # the worker pools end with the command (also when it runs in a caller's process)
        option["builder"].close()
        option["runner"].close()
    wall = time.time() - t_start
    if tuner.best_config is None:
        return TuneResult(config, task, tuner, log, wall, None, None, None)
    dflt = default_ms([task], callbacks[0]).get(task.key)
    from ..cost_model.transfer import TransferCostModel

    transfer = tuner.cost_model.knowledge if config.model_based and isinstance(tuner.cost_model, TransferCostModel) \
        else None
    check = check_best(task, log) if config.check and task.target.kind.name == "llvm" else None
    return TuneResult(config, task, tuner, log, wall, dflt, transfer, check)


def check_best(task, log) -> CheckOutcome:
    """Compile the best tuned record through a MetaSchedule database (TVM's ``compile_tir``) and compare
    with the task's reference (the tuned kernel, also where the log keeps TVM's default schedule as the
    faster one)."""
    import tvm
    from tvm.s_tir.meta_schedule.database import MemoryDatabase
    from tvm.s_tir.meta_schedule.tir_integration import compile_tir

    from ..measure import add_to_database, apply_history_best

    db = MemoryDatabase()
    best = apply_history_best(log).best(task)
    if best is not None:
        add_to_database(db, [best], task)
    sch = compile_tir(db, task.mod, task.target)
    if sch is None:
        return CheckOutcome(error="no record in the database to compile")
    lib = tvm.compile(sch.mod, target=task.target)
    try:
        return CheckOutcome(max_abs_err=task.check(lib))
    except ReleaseError as e:
        return CheckOutcome(error=f"FAILED: {e}")


class TunePrinter(TuneRenderer):
    """``release tune``'s lines: the run's setup when tuning starts, then :meth:`finished` for the result."""

    def started(self, start: TuneStart, config: TuneConfig) -> None:
        """Task, space, tuner and knowledge lines (and the warm-up note of a short model-based run)."""
        from ..tuners.model_based import ModelBasedTuner

        task, tuner = start.task, start.tuner
        space = task.config_space
        print(f"task     {task.name}: {task.flop / 1e9:.3f} GFLOP, target {task.target_json}, kernels timed on "
              f"{start.threads} threads" + (", weight pre-packed (layout-free)" if task.layout_free else ""))
        print(f"space    {len(space.spaces)} design spaces, {space.n_knobs} knobs, {space.size:.3g} configs")
        print(f"tuner    {config.tuner}{tuner_why(config.tuner)}, {config.n_trial} trials, seed {config.seed}, "
              f"log {start.log}"
              + _resuming(task, start.previous))
        if config.knowledge.folder is None:
            print(config.knowledge.off_line())
        else:
            self._knowledge(start, config)
        if isinstance(tuner, ModelBasedTuner) and config.n_trial <= tuner.plan_size and not tuner.seeds and not \
                tuner.cost_model.warm:
            print(f"note     {config.tuner} measures {tuner.plan_size} random configs before its cost model guides a "
                  f"trial (AutoTVM's warm-up): with --n-trial {config.n_trial} this run is random search; raise "
                  f"--n-trial above {tuner.plan_size} or lower --plan-size")

    @staticmethod
    def _knowledge(start: TuneStart, config: TuneConfig) -> None:
        task, tuner, kc = start.task, start.tuner, config.knowledge
        read = tuner.knowledge_read if config.reads_knowledge else None
        n_rec, n_wl = (read.records, read.workloads) if read is not None else (None, None)
        origin = read.origin if read is not None else ""
        from_pack = read is not None and read.source == "pack"
        on = (f"of {task.isa_class} (the shipped pack: this base holds none of the class)" if from_pack
              else f"of {task.isa_class}")
        if not (config.model_based or config.seeded):
            what = f"not used by {config.tuner}"
        elif not kc.warm:
            what = (f"not read by {config.tuner}, a baseline: it starts cold as its own tuner does (--knowledge "
                    "to start it warm)")
        elif not n_rec:
            what = f"no records of {task.isa_class} yet, and no shipped pack of it (cold start)"
        elif tuner.seeds:
            k = read.seed_workloads
            what = (f"{len(tuner.seeds)} seed configs carried over from the best records of {plural(k, 'workload')} "
                    f"({plural(n_rec, 'record')} of {plural(n_wl, 'workload')} {on}), to be measured first")
        elif config.seeded or tuner.config.knowledge_use == "seeds":
            what = (f"{n_rec} records of {n_wl} workloads {on}, none with this task's schedule "
                    "structure (cold start)")
        elif tuner.cost_model.warm:
            what = f"starting warm from {n_rec} records of {n_wl} workloads {on}"
        else:
            what = (f"{n_rec} records of {n_wl} workloads {on}, too few successful ones to start "
                    f"warm (cold start)")
        print(f"knowledge {kc.folder}{' (a new folder)' if kc.new else ''}: {what}; this run's records are added to it")
        if origin:
            print(f"          records from {origin.split(' from ', 1)[1]} (their timings stay theirs: seeds are "
                  "measured here)")

    def finished(self, result: TuneResult) -> int:
        """Rejections, best, config, default, knowledge used, check and usage lines; returns the exit status."""
        tuner, task, log = result.tuner, result.task, result.log
        session = tuner.session
        if session.rejections:
            n = sum(c for c, _ in session.rejections.values())
            print(f"rejected {plural(n, 'invalid config')} (not built, not trials; summary appended to "
                  f"{tuner.rejections_path or 'the log'}):")
            for line in session.rejection_summary()[:5]:
                print(f"         {line}")
        if tuner.best_config is None:
            if session.wrong:
                print(f"no config gave the reference's output in {tuner.trials} trials ({len(session.wrong)} ran but "
                      f"were wrong: error_kind wrong_output in {log})", file=sys.stderr)
            else:
                print(f"no config ran successfully in {tuner.trials} trials; see error_msg in {log}", file=sys.stderr)
            return result.rc
        print(f"best     {tuner.best_cost * 1e3:.4f} ms, {tuner.best_gflops:.2f} GFLOPS after {tuner.trials} trials "
              f"({result.wall_s:.1f} s wall: search {tuner.time_search:.1f} s, fit {tuner.time_fit:.1f} s, "
              f"measure {tuner.time_measure:.1f} s)")
        print(f"config   {json.dumps(task.config_space.describe(tuner.best_config))}")
        self._default(result)
        ks = result.transfer
        if ks is not None:  # what the transfer model was trained on (subsampled, unusable workloads skipped)
            print(f"knowledge used {len(ks)} records of {len(set(ks.workloads))} workloads ({ks.seconds:.1f} s to "
                  f"featurize)" + (f"; {len(ks.skipped)} workloads skipped, e.g. {next(iter(ks.skipped.items()))[0]}: "
                     f"{next(iter(ks.skipped.values()))}" if ks.skipped else ""))
        if result.check is not None:
            if result.check.ok:
                print(f"check    best kernel (compile_tir from the log) matches the reference: max abs error "
                      f"{result.check.max_abs_err:.2e}")
            else:
                print(f"check    {result.check.error}", file=sys.stderr)
        self._usage(result)
        return result.rc

    @staticmethod
    def _default(result: TuneResult) -> None:
        """The line on TVM's default schedule of the task (measured once into the log): how much faster
        the best tuned kernel is, or that it is slower."""
        ms = result.default_ms
        if ms is None:
            if result.task.target.kind.name == "llvm":
                print("default  TVM's default schedule did not run here (see the log's default record)")
            return
        best = result.tuner.best_cost * 1e3
        if best <= ms:
            print(f"default  {ms:.4f} ms with TVM's default schedule (untuned): the best tuned kernel is "
                  f"{ms / best:.2f}x faster")
        else:
            print(f"default  {ms:.4f} ms with TVM's default schedule (untuned) is FASTER than the best tuned kernel "
                  f"({best:.4f} ms, {best / ms:.2f}x slower): deploy the untuned kernel, or tune longer (--n-trial)")

    @staticmethod
    def _usage(result: TuneResult) -> None:
        """Where the results went and how to use them: Python lines that compile the best kernel and run
        it on the target's threads (TVM's runtime otherwise picks its own count), on random inputs of the
        task's argument shapes (``task.random_inputs()``: the user's data goes in their place), checked
        against the task's reference."""
        from ..threads import thread_count

        cfg, log = result.config, result.log
        layout = "" if cfg.layout == "NCHW" else f", layout={cfg.layout!r}"
        prepack = ", prepack=False" if cfg.prepack is False else ""
        print(f"log      {log} (the same command resumes it)" + (f"; MetaSchedule database {cfg.database}"
                                                                 if cfg.database else ""))
        from ..optimizers.ppo import agent_checkpoint_path

        agent = agent_checkpoint_path(log, result.task.key)
        if os.path.exists(agent):  # a PPO tuner's agent, in the folder named after the log
            print(f"agent    {agent} (the PPO agent, resumed with the log; --warm-start starts another task's agent "
                  "from it; remove its folder with the log)")
        threads = thread_count(result.task.target)
        print(f"use      import os; os.environ.setdefault('TVM_NUM_THREADS', '{threads}')  # the {threads} threads the "
              "kernel was tuned on, set before tvm starts its thread pool")
        print(f"         import tvm; from release import autotvm; task = autotvm.task.create({cfg.workload!r}, "
              f"target={cfg.target_spec!r}{layout}{prepack}); db = autotvm.apply_history_best({log!r}).database([task])")
        print("         sch = tvm.s_tir.meta_schedule.tir_integration.compile_tir(db, task.mod, task.target); "
              "lib = tvm.compile(task.mod if sch is None else sch.mod, target=task.target)  # None: the log keeps TVM's "
              "default schedule, measured faster")
        if result.task.target.kind.name == "llvm":  # a kernel of another device runs there, not here
            print("         xs = task.random_inputs(); out = tvm.runtime.empty(*task.output_shape())  # your arrays in "
                  "xs' place: shapes and dtypes task.arg_info()")
            print("         lib['main'](*[tvm.runtime.tensor(x) for x in xs], out); "
                  "print('max abs error', abs(out.numpy() - task.reference(xs)).max())")


def _resuming(task, previous) -> str:
    """`` (resuming N records)`` of a log; records of another machine of the ISA class are said to be
    seeds (measured here first), not trials."""
    if not previous:
        return ""
    here = sum(task.tier(r) == "machine" for r in previous)
    there = len(previous) - here
    if not there:
        return f" (resuming {here} records)"
    from ..target import machine_of

    machines = sorted({machine_of(r.target, r.machine) for r in previous if task.tier(r) != "machine"})
    return (f" (resuming {here} records of this machine; {there} of {', '.join(machines[:3])} are another machine's: "
            "their best configs are measured here first, not counted as trials)")


def cmd_tune(args) -> int:
    """``release tune``: :class:`TuneConfig` -> :func:`run_tune` -> :class:`TunePrinter`; the exit status."""
    printer = TunePrinter()
    return printer.finished(run_tune(TuneConfig.from_args(args), printer))
