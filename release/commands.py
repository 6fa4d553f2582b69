"""Operator-level CLI commands: ``release workloads`` and ``release tune``."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time

from .errors import ReleaseError, TunerError, check_n_trial
from .zoo import MODEL_NAMES as ZOO_MODELS

logger = logging.getLogger(__name__)


def _add_measure_args(p) -> None:
    """Where and how kernels are built and timed: the options ``tune`` and ``tune-model`` share
    (read by :meth:`release.measure.config.MeasureConfig.from_args`)."""
    p.add_argument("--runner", choices=["local", "rpc"], default="local", help="where kernels run")
    p.add_argument("--rpc-key", default=None, help="device key at the RPC tracker (needed with --runner rpc)")
    p.add_argument("--rpc-host", default="127.0.0.1", help="RPC tracker host")
    p.add_argument("--rpc-port", type=int, default=9190, help="RPC tracker port")
    p.add_argument("--n-parallel", type=int, default=None, help="build workers (None: one per usable core)")
    p.add_argument("--number", type=int, default=4, help="runs averaged into one cost")
    p.add_argument("--repeat", type=int, default=3, help="costs per config")
    p.add_argument("--min-repeat-ms", type=int, default=50, help="raise number until one cost takes this long")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds per run")
    p.add_argument("--build-timeout", type=float, default=30.0, help="seconds per build")
    p.add_argument("--early-termination", type=float, default=2.0, metavar="RATIO",
                   help="no more repeats for a config whose first repeat is over RATIO x the task's best mean so far "
                        "(AdaTune-style early termination; default 2; 0: every config gets --repeat costs)")


def register(subparsers) -> None:
    """Add ``workloads`` and ``tune`` to the top-level CLI."""
    p = subparsers.add_parser("workloads", help="list registered workloads (name, shape, GFLOP)")
    p.add_argument("--space", action="store_true",
                   help="also build each knob space for --target and show design spaces, knobs and size (~1-5 s each)")
    p.add_argument("--target", default="llvm", help="target for --space")
    p.add_argument("--filter", default="", help="only workloads whose name contains this text")
    p.set_defaults(func=cmd_workloads)

    p = subparsers.add_parser("tune", help="tune one operator workload",
                              formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--workload", default="resnet18.conv2d.2", help="registered workload (see `release workloads`)")
    p.add_argument("--target", default="llvm", help="'llvm' (this CPU), 'cuda', a TVM tag, or a JSON dict")
    p.add_argument("--tuner", default="random", help="random | grid | xgb | ga | ms-evolutionary | release | release+ | sa-as | rl")
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
                        "8 with AVX2) or e.g. NCHW16c; the blocked layouts reach PyTorch's oneDNN speed")
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
    _add_knowledge_args(p)
    p.add_argument("--local-search", action="store_true",
                   help="model-based tuners: a Droplet-style local phase once the best stops improving for "
                        "plan-size trials")
    _add_measure_args(p)
    p.add_argument("--no-check", action="store_true", help="skip checking the best kernel against the reference")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_tune)

    p = subparsers.add_parser("tune-model", help="tune every task of a model and compile it",
                              formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", default="resnet18",
                   help=f"built-in model ({', '.join(ZOO_MODELS)}) or an .onnx file")
    p.add_argument("--target", default="llvm", help="'llvm' (this CPU) or a JSON dict")
    p.add_argument("--tuner", default="random", help="tuner for every task (see `release tune --help`)")
    p.add_argument("--n-trial", type=int, default=2000, help="measured configs over all tasks")
    p.add_argument("--scheduler", default="gradient", choices=["gradient", "round-robin"], help="task scheduler")
    p.add_argument("--plan-size", type=int, default=None,
                   help="plan size of model-based tuners, per task (None: the tuner's own, 64 for xgb)")
    p.add_argument("--log", default=None, help="JSON-lines log shared by all tasks, resumed if it exists "
                                               "(None: runs/MODEL.TUNER.jsonl; runs/MODEL.TUNER.LAYOUT.jsonl "
                                               "for a blocked --layout)")
    p.add_argument("--seed", type=int, default=0, help="seed of every random choice")
    p.add_argument("--layout", default="auto",
                   help="conv2d layout inside the model: auto (NCHWc on a CPU target, NCHW otherwise), NCHW (as "
                        "imported), NCHWc (channel blocks = the target's vector lanes: 8 with AVX2, 16 with AVX-512; "
                        "smaller where channels do not divide) or NCHW8c; inputs and outputs stay NCHW, weights are "
                        "transformed at compile time")
    _add_knowledge_args(p)
    p.add_argument("--compare", default="untuned,torch",
                   help="comma list of baselines to time: untuned, torch, ms (MetaSchedule tune_relax, same budget)")
    p.add_argument("--memory-order", choices=["brkga", "regal"], default=None,
                   help="reorder the exported model's kernel calls so TVM's memory planner plans fewer bytes "
                        "(BRKGA on a replay of TVM's planner; regal: biased by REGAL's policy); prints planned and "
                        "measured peak memory before and after; kept only when TVM plans it smaller and the "
                        "outputs are identical; without it, TVM's order")
    p.add_argument("--memory-budget", default="2000",
                   help="with --memory-order: objective evaluations of the search")
    _add_measure_args(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--ray", metavar="ADDRESS", default=None,
                   help="tune the tasks in parallel on a Ray cluster: 'local' (this machine), 'auto', HOST:PORT or "
                        "ray://HOST:PORT (None: no Ray, tasks share this machine's workers)")
    p.add_argument("--ray-cpus", type=int, default=None,
                   help="CPUs of a --ray local cluster = tasks tuned at once (None: Ray's own count)")
    p.add_argument("--split", choices=["equal", "flop"], default="equal",
                   help="with --ray: trial budget per task, equal or proportional to weight*flop")
    p.set_defaults(func=cmd_tune_model)

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
                   help="model tiers: reference lines among eager, torch.compile, onnxruntime (None: the tier's)")
    p.add_argument("--retime", action="store_true",
                   help="model tiers: compile and time the checkpoints again instead of reading checkpoints.json")
    p.add_argument("--knowledge", default=None, metavar="DIR",
                   help="model tiers: the knowledge base that runs of a tuner named TUNER:warm start from (e.g. "
                        "--tuners release+ release+:warm); each warm run reads its own copy")
    p.add_argument("--workloads", nargs="*", default=None, help="registered workloads (None: the tier's)")
    p.add_argument("--tuners", nargs="*", default=None, help="tuner names as in `release tune` (None: the tier's)")
    p.add_argument("--seeds", nargs="*", type=int, default=None, help="one run per seed (None: the tier's)")
    p.add_argument("--n-trial", type=_trials_arg, default=None,
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


def cmd_workloads(args) -> int:
    from .workloads import list_workloads

    rows = [w for w in list_workloads() if args.filter in w.name]
    width = max([len(w.name) for w in rows] + [4])
    opw = max([len(w.op) for w in rows] + [7])
    head = f"{'name':<{width}}  {'op':<{opw}} {'GFLOP':>8}  {'shape':<32}"
    print(head + ("  spaces knobs       size" if args.space else ""))
    for w in rows:
        line = f"{w.name:<{width}}  {w.op:<{opw}} {_gflop(w):8.3f}  {w.description:<32}"
        if args.space:
            from .task import create_task

            sp = create_task(w.name, args.target).config_space
            line += f"  {len(sp.spaces):>6} {sp.n_knobs:>5} {sp.size:>10.3g}"
        print(line, flush=True)
    return 0


def _gflop(w) -> float:
    """FLOPs from TVM's estimator on the TE program (no target needed)."""
    from tvm import te
    from tvm.s_tir.analysis import estimate_tir_flops
    import tvm

    f = te.create_prim_func(w.build_te())
    return float(estimate_tir_flops(tvm.IRModule({"main": f}))) / 1e9


def make_measure_option(args):
    """Build ``measure_option`` from CLI arguments (shared by tune commands): one
    :class:`release.measure.MeasureConfig`, validated once."""
    from .measure.config import MeasureConfig

    return MeasureConfig.from_args(args).make_option()


def cmd_tune(args) -> int:
    from .measure import check_log_for_task, log_to_database, log_to_file
    from .measure.records import check_log_path
    from .task import create_task
    from .threads import thread_count, use_threads
    from .tuners import TUNERS, get_tuner
    from .tuners.callback import progress_bar

    check_n_trial(args.n_trial, label=f"--n-trial {args.n_trial}")
    if args.tuner not in TUNERS:
        raise TunerError(f"unknown tuner {args.tuner!r}; choose one of: {', '.join(TUNERS)}")
    if args.warm_start is not None and args.tuner not in ("release", "release+", "rl"):
        raise TunerError(f"--warm-start applies to the PPO tuners (release, release+, rl), not {args.tuner!r}")
    if args.early_stopping is not None and args.early_stopping < 1:
        raise TunerError(f"--early-stopping {args.early_stopping} must be a positive number of trials without a new "
                         "best; leave it out to run all --n-trial")
    if args.log:
        check_log_path(args.log)  # a --log that cannot be written fails before any work
    t_start = time.time()
    task = create_task(args.workload, args.target, layout=args.layout, prepack=False if args.no_prepack else None)
    threads = use_threads(thread_count(task.target))  # before any worker starts: they inherit TVM_NUM_THREADS
    log = args.log or os.path.join("runs", f"{task.name}.{args.tuner}.jsonl")
    previous = check_log_for_task(log, task)
    option = make_measure_option(args)
    option["runner"].check_device(task.target)  # before the (slow on CUDA) knob space is built
    kwargs = {k: v for k, v in (("plan_size", args.plan_size), ("feature_type", args.feature_type),
                                 ("loss_type", args.loss_type), ("warm_start", args.warm_start)) if v is not None}
    from .tuners.model_based import ModelBasedTuner

    kdir_new = _kdir_is_new(args)
    kdir, warm = _knowledge_for(args)
    from .tuners import tuner_class

    uses = tuner_class(args.tuner).knowledge_uses  # declared on the class
    model_based = "model" in uses
    seeded = uses == ("seeds",)
    if seeded and warm and args.knowledge_use not in (None, "seeds"):
        raise TunerError(f"--knowledge-use {args.knowledge_use}: {args.tuner} uses a knowledge base only as "
                         "seeds in its database; drop --knowledge-use or give seeds")
    if (model_based or seeded) and warm:
        from .knowledge import KnowledgeBase

        kwargs["knowledge"] = KnowledgeBase(kdir, read_once=True)  # read once, by the tuner's cost model; its stored programs too
        if args.knowledge_use and model_based:
            kwargs["knowledge_use"] = args.knowledge_use
    if args.local_search:
        if not model_based:
            raise TunerError(f"--local-search applies to model-based tuners (xgb, sa-as, rl, release, release+), "
                             f"not {args.tuner!r}")
        kwargs["local_search"] = True
    tuner = get_tuner(args.tuner, task, seed=args.seed, **kwargs)
    space = task.config_space
    print(f"task     {task.name}: {task.flop / 1e9:.3f} GFLOP, target {task.target_json}, kernels timed on "
          f"{threads} threads" + (", weight pre-packed (layout-free)" if task.layout_free else ""))
    print(f"space    {len(space.spaces)} design spaces, {space.n_knobs} knobs, {space.size:.3g} configs")
    print(f"tuner    {args.tuner}, {args.n_trial} trials, seed {args.seed}, log {log}"
          + _resuming(task, previous))
    if kdir is None:
        print(_knowledge_off_line(args))
    else:
        read = tuner.knowledge_read if (model_based or seeded) and warm else None
        n_rec, n_wl = (read.records, read.workloads) if read is not None else (None, None)
        origin = read.origin if read is not None else ""
        from_pack = read is not None and read.source == "pack"
        on = (f"of {task.isa_class} (the shipped pack: this base holds none of the class)" if from_pack
              else f"of {task.isa_class}")
        if not (model_based or seeded):
            what = f"not used by {args.tuner}"
        elif not warm:
            what = (f"not read by {args.tuner}, a baseline: it starts cold as its own tuner does (--knowledge "
                    "to start it warm)")
        elif not n_rec:
            what = f"no records of {task.isa_class} yet, and no shipped pack of it (cold start)"
        elif tuner.seeds:
            k = read.seed_workloads
            what = (f"{len(tuner.seeds)} seed configs carried over from the best records of {_n(k, 'workload')} "
                    f"({_n(n_rec, 'record')} of {_n(n_wl, 'workload')} {on}), to be measured first")
        elif seeded or tuner.config.knowledge_use == "seeds":
            what = (f"{n_rec} records of {n_wl} workloads {on}, none with this task's schedule "
                    "structure (cold start)")
        elif tuner.cost_model.warm:
            what = f"starting warm from {n_rec} records of {n_wl} workloads {on}"
        else:
            what = (f"{n_rec} records of {n_wl} workloads {on}, too few successful ones to start "
                    f"warm (cold start)")
        print(f"knowledge {kdir}{' (a new folder)' if kdir_new else ''}: {what}; this run's records are added to it")
        if origin:
            print(f"          records from {origin.split(' from ', 1)[1]} (their timings stay theirs: seeds are "
                  "measured here)")
    if isinstance(tuner, ModelBasedTuner) and args.n_trial <= tuner.plan_size and not tuner.seeds and not \
            tuner.cost_model.warm:
        print(f"note     {args.tuner} measures {tuner.plan_size} random configs before its cost model guides a trial "
              f"(AutoTVM's warm-up): with --n-trial {args.n_trial} this run is random search; raise --n-trial "
              f"above {tuner.plan_size} or lower --plan-size")
    callbacks = [log_to_file(log)]
    if kdir is not None:
        from .knowledge.use import log_to_knowledge

        callbacks.append(log_to_knowledge(kwargs.get("knowledge") or kdir))  # the tuner's base object when it reads one
    if args.database:
        callbacks.append(log_to_database(args.database))
    if not args.no_progress:
        callbacks.append(progress_bar(total=args.n_trial))
    try:
        from .measure.measurer import measure_missing_defaults

        tuner.tune(args.n_trial, option, early_stopping=args.early_stopping, callbacks=callbacks)
        # then TVM's default schedule of the task (untuned), once per machine and log: the kernel to beat
        measure_missing_defaults([task], option, callbacks[0])
    finally:  # the worker pools end with the command (also when it runs in a caller's process)
        option["builder"].close()
        option["runner"].close()
    wall = time.time() - t_start
    session = tuner.session
    if session.rejections:
        n = sum(c for c, _ in session.rejections.values())
        print(f"rejected {_n(n, 'invalid config')} (not built, not trials; summary appended to "
              f"{tuner.rejections_path or 'the log'}):")
        for line in session.rejection_summary()[:5]:
            print(f"         {line}")
    if tuner.best_config is None:
        if session.wrong:
            print(f"no config gave the reference's output in {tuner.trials} trials ({len(session.wrong)} ran but were "
                  f"wrong: error_kind wrong_output in {log})", file=sys.stderr)
        else:
            print(f"no config ran successfully in {tuner.trials} trials; see error_msg in {log}", file=sys.stderr)
        return 1
    print(f"best     {tuner.best_cost * 1e3:.4f} ms, {tuner.best_gflops:.2f} GFLOPS after {tuner.trials} trials "
          f"({wall:.1f} s wall: search {tuner.time_search:.1f} s, fit {tuner.time_fit:.1f} s, "
          f"measure {tuner.time_measure:.1f} s)")
    print(f"config   {json.dumps(space.describe(tuner.best_config))}")
    _print_default(task, tuner, callbacks[0])
    from .cost_model.transfer import TransferCostModel

    ks = tuner.cost_model.knowledge if model_based and isinstance(tuner.cost_model, TransferCostModel) else None
    if ks is not None:  # what the transfer model was trained on (subsampled, unusable workloads skipped)
        print(f"knowledge used {len(ks)} records of {len(set(ks.workloads))} workloads ({ks.seconds:.1f} s to "
              f"featurize)" + (f"; {len(ks.skipped)} workloads skipped, e.g. {next(iter(ks.skipped.items()))[0]}: "
                 f"{next(iter(ks.skipped.values()))}" if ks.skipped else ""))
    rc = 0 if args.no_check or task.target.kind.name != "llvm" else _check_best(task, log)
    _print_usage(args, task, log)
    return rc


def _print_default(task, tuner, log) -> None:
    """``release tune``'s line on TVM's default schedule of the task (measured once into the log):
    how much faster the best tuned kernel is, or that it is slower."""
    from .model import default_ms

    ms = default_ms([task], log).get(task.key)
    if ms is None:
        if task.target.kind.name == "llvm":
            print("default  TVM's default schedule did not run here (see the log's default record)")
        return
    best = tuner.best_cost * 1e3
    if best <= ms:
        print(f"default  {ms:.4f} ms with TVM's default schedule (untuned): the best tuned kernel is "
              f"{ms / best:.2f}x faster")
    else:
        print(f"default  {ms:.4f} ms with TVM's default schedule (untuned) is FASTER than the best tuned kernel "
              f"({best:.4f} ms, {best / ms:.2f}x slower): deploy the untuned kernel, or tune longer (--n-trial)")


def _knowledge_for(args):
    """``(folder, warm)`` of ``--knowledge [DIR]`` / ``--no-knowledge`` (``tune`` and ``tune-model``):
    the knowledge base this run adds its records to (``--knowledge DIR``, else the default folder; None
    when disabled: ``--no-knowledge`` or ``RELEASE_KNOWLEDGE=off``), and whether the tuner starts warm
    from it: ours (``Tuner.warm_by_default``: rl, release, release+) always, a baseline (xgb, sa-as,
    ms-evolutionary) only when ``--knowledge`` or ``--knowledge-use`` asks (AutoTVM's and MetaSchedule's
    tuners start cold).

    Raises
    ------
    TunerError
        Both flags given; ``--knowledge-use`` with a tuner that reads no base, or with no base read; a
        folder that cannot be made or written.
    KnowledgeError
        ``--knowledge`` (or ``$RELEASE_KNOWLEDGE``) names a file.
    """
    from .knowledge import KnowledgeBase, knowledge_dir
    from .tuners import TUNERS, tuner_class

    use = getattr(args, "knowledge_use", None)
    cls = tuner_class(args.tuner)
    if use and not cls.knowledge_uses:
        readers = [n for n in TUNERS if tuner_class(n).knowledge_uses]
        raise TunerError(f"--knowledge-use {use} applies to tuners that start warm from a knowledge base "
                         f"({', '.join(readers)}), not {args.tuner!r}")
    if args.no_knowledge:
        if args.knowledge is not None:
            raise TunerError(f"--knowledge{' ' + args.knowledge if args.knowledge else ''} and --no-knowledge "
                             "contradict each other; give one")
        if use:
            raise TunerError(f"--knowledge-use {use} says how to use a knowledge base, but --no-knowledge reads "
                             "none; drop one of them")
        return None, False
    kdir = knowledge_dir(args.knowledge or None)
    if kdir is None:
        if args.knowledge is not None or use:
            raise TunerError(f"{'--knowledge' if args.knowledge is not None else f'--knowledge-use {use}'} was given "
                             f"but knowledge is disabled (RELEASE_KNOWLEDGE={os.environ.get('RELEASE_KNOWLEDGE')}); "
                             "pass a folder, --knowledge DIR")
        return None, False
    KnowledgeBase(args.knowledge or None)  # a file given as the folder: its one-line error now, before any work
    try:  # a folder that cannot be made or written: one line now, not a traceback at the first record
        os.makedirs(kdir, exist_ok=True)
        if not os.access(kdir, os.W_OK | os.X_OK):
            raise PermissionError(13, "not writable")
    except OSError as err:
        raise TunerError(f"knowledge base {kdir} cannot be written ({err.strerror or err}); pass a folder you can "
                         "write (--knowledge DIR or $RELEASE_KNOWLEDGE), or --no-knowledge") from None
    return kdir, args.knowledge is not None or bool(use) or cls.warm_by_default


def _check_library_name(log: str) -> None:
    """Refuse a log whose exported model (``<log without .jsonl>.so``) Python would import in place of
    an installed module: ``ray.jsonl`` exports ``ray.so``, and in that folder ``import ray`` loads it.

    Raises
    ------
    ReleaseError
        The library's name is an importable top-level module's.
    """
    import importlib.util

    stem = os.path.basename(os.path.splitext(log)[0])
    if not stem.isidentifier():
        return
    try:
        found = importlib.util.find_spec(stem) is not None
    except (ImportError, ValueError):
        found = False
    if found:
        raise ReleaseError(f"--log {log}: the tuned model would be exported as {stem}.so beside it, which Python "
                           f"imports in place of the module '{stem}' when run from that folder; name the log "
                           f"otherwise, e.g. --log {os.path.join(os.path.dirname(log), stem + '-model.jsonl')}")


def _kdir_is_new(args) -> bool:
    """Whether the knowledge folder this run would use does not exist yet (a typo'd ``--knowledge DIR``
    shows up as "a new folder" on the knowledge line)."""
    from .knowledge import knowledge_dir

    if args.no_knowledge:
        return False
    kdir = knowledge_dir(args.knowledge or None)
    return kdir is not None and not os.path.exists(kdir)


def _knowledge_off_line(args) -> str:
    """The knowledge line of a run that neither reads nor writes a base (``tune`` and ``tune-model``)."""
    why = "--no-knowledge" if args.no_knowledge else f"RELEASE_KNOWLEDGE={os.environ.get('RELEASE_KNOWLEDGE')}"
    return f"knowledge off ({why}): none read, this run's records not added"


def _n(count, noun: str) -> str:
    """``1 workload``, ``2 workloads``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _resuming(task, previous) -> str:
    """`` (resuming N records)`` of a log; records of another machine of the ISA class are said to be
    seeds (measured here first), not trials."""
    if not previous:
        return ""
    here = sum(task.tier(r) == "machine" for r in previous)
    there = len(previous) - here
    if not there:
        return f" (resuming {here} records)"
    from .target import machine_of

    machines = sorted({machine_of(r.target, r.machine) for r in previous if task.tier(r) != "machine"})
    return (f" (resuming {here} records of this machine; {there} of {', '.join(machines[:3])} are another machine's: "
            "their best configs are measured here first, not counted as trials)")


def _print_usage(args, task, log) -> None:
    """Where the results went and how to use them: Python lines that compile the best
    kernel and run it on the target's threads (TVM's runtime otherwise picks its own count)."""
    from .threads import thread_count

    layout = "" if args.layout == "NCHW" else f", layout={args.layout!r}"
    prepack = ", prepack=False" if args.no_prepack else ""
    print(f"log      {log} (the same command resumes it)" + (f"; MetaSchedule database {args.database}"
                                                             if args.database else ""))
    threads = thread_count(task.target)
    print(f"use      import os; os.environ.setdefault('TVM_NUM_THREADS', '{threads}')  # the {threads} threads the "
          "kernel was tuned on, set before tvm starts its thread pool")
    print(f"         import tvm; from release import autotvm; task = autotvm.task.create({args.workload!r}, target={args.target!r}"
          f"{layout}{prepack}); db = autotvm.apply_history_best({log!r}).database([task])")
    print("         sch = tvm.s_tir.meta_schedule.tir_integration.compile_tir(db, task.mod, task.target); "
          "lib = tvm.compile(task.mod if sch is None else sch.mod, target=task.target)  # None: the log keeps TVM's "
          "default schedule, measured faster")


def _check_best(task, log) -> int:
    """Compile the best tuned record through a MetaSchedule database (TVM's compile_tir) and compare
    (the tuned kernel, also where the log keeps TVM's default schedule as the faster one)."""
    import tvm
    from tvm.s_tir.meta_schedule.database import MemoryDatabase
    from tvm.s_tir.meta_schedule.tir_integration import compile_tir

    from .measure import add_to_database, apply_history_best

    db = MemoryDatabase()
    best = apply_history_best(log).best(task)
    if best is not None:
        add_to_database(db, [best], task)
    sch = compile_tir(db, task.mod, task.target)
    if sch is None:
        print("check    no record in the database to compile", file=sys.stderr)
        return 1
    lib = tvm.compile(sch.mod, target=task.target)
    try:
        err = task.check(lib)
    except ReleaseError as e:
        print(f"check    FAILED: {e}", file=sys.stderr)
        return 1
    print(f"check    best kernel (compile_tir from the log) matches the reference: max abs error {err:.2e}")
    return 0


def _add_knowledge_args(p) -> None:
    """``--knowledge [DIR]`` / ``--no-knowledge``, shared by ``tune`` and ``tune-model``."""
    p.add_argument("--knowledge", nargs="?", const="", default=None, metavar="DIR",
                   help="the knowledge base this run adds its records and programs to and starts warm from (without "
                        "this option, or with no DIR: $RELEASE_KNOWLEDGE, else ~/.cache/release-tvm/knowledge). Our tuners (rl, "
                        "release, release+) always start warm from it; the baselines (xgb, sa-as, and, in release "
                        "tune, ms-evolutionary as seeds in its database) only when --knowledge or --knowledge-use is "
                        "given. An empty base, or one with no records of this target, is a cold start (AutoTVM's). "
                        "RELEASE_KNOWLEDGE=off disables it as --no-knowledge does")
    p.add_argument("--no-knowledge", action="store_true",
                   help="neither read nor write a knowledge base: a cold start, as AutoTVM's tuners")
    p.add_argument("--knowledge-use", choices=["model", "seeds"], default=None,
                   help="how the knowledge base starts the run warm: 'seeds' (used when this is not given) measures the best configs of the knowledge's "
                        "workloads, carried into this task's space, in the first round and keeps AutoTVM's own "
                        "cost model (transfer-tuning); 'model' trains a cost model on the knowledge's program "
                        "features (measured worse than seeds on held-out layers: benchmarks/results/knowledge/holdout/)")


def check_model_arg(spec: str, option: str = "--model") -> None:
    """Refuse, before TVM or PyTorch is imported, a model that is neither built in nor an existing .onnx file.

    Raises
    ------
    ModelError
        ``spec`` ends in ``.onnx`` and is no file (missing, or a folder), or names no built-in model
        (:data:`release.zoo.MODEL_NAMES`).
    """
    from .errors import ModelError

    if spec.endswith(".onnx"):
        if os.path.isdir(spec):
            raise ModelError(f"{option} {spec} is a folder; give an .onnx file")
        if not os.path.exists(spec):
            raise ModelError(f"ONNX file {spec} does not exist")
    elif spec not in ZOO_MODELS:
        raise ModelError(f"unknown model {spec!r}; built-in models: {', '.join(ZOO_MODELS)} (or an .onnx file)")


def cmd_tune_model(args) -> int:
    check_model_arg(args.model)  # a missing file or an unknown name: one line before any import
    from . import model as M
    from .measure import apply_history_best
    from .target import resolve_target
    from .threads import thread_count, timing_priority, use_threads
    from .tuners import TUNERS

    check_n_trial(args.n_trial, label=f"--n-trial {args.n_trial}")
    if args.tuner not in TUNERS:
        raise TunerError(f"unknown tuner {args.tuner!r}; choose one of: {', '.join(TUNERS)}")
    compare = [c for c in args.compare.split(",") if c]
    bad = [c for c in compare if c not in ("untuned", "torch", "ms")]
    if bad:
        raise TunerError(f"unknown --compare entries {bad}; use untuned, torch, ms")
    if args.layout != M.AUTO_LAYOUT:
        M.model_layout(args.layout)  # a bad --layout fails before the model is imported
    memory_budget = _memory_budget(args.memory_budget)
    kdir_new = _kdir_is_new(args)
    kdir, warm = _knowledge_for(args)  # so do contradicting knowledge flags
    from .tuners import MODEL_BASED

    if args.knowledge_use and args.tuner not in MODEL_BASED:
        raise TunerError(f"--knowledge-use {args.knowledge_use}: tune-model starts only model-based tuners "
                         f"({', '.join(MODEL_BASED)}) from a knowledge base, not {args.tuner!r} (release tune "
                         "--tuner ms-evolutionary --knowledge seeds one task)")

    if args.log:
        from .measure.records import check_log_path

        check_log_path(args.log)  # a --log that cannot be written fails before the model is imported
        _check_library_name(args.log)
    target = resolve_target(args.target)
    if args.layout == M.AUTO_LAYOUT:  # the blocked layout on a CPU: the space that beats PyTorch
        args.layout = M.default_layout(target)
    threads = thread_count(target)
    use_threads(threads)  # before any worker starts: they inherit TVM_NUM_THREADS
    option = make_measure_option(args)
    option["runner"].check_device(target)
    t0 = time.time()
    print(f"model    importing {args.model} and extracting its tasks (building each knob space)...", flush=True)
    model = M.load_model(args.model)
    tasks = M.extract_tasks(model, target, progress=not args.no_progress, layout=args.layout)
    total = sum(t.flop * t.weight for t in tasks) or 1.0
    print(f"model    {model.name}: {len(tasks)} tunable tasks, {total / 1e9:.2f} GFLOP per inference "
          f"({time.time() - t0:.1f} s to extract); weights "
          + ("pre-packed (layout-free)" if any(t.layout_free for t in tasks) else "as written")
          + (f"; conv2d layout {args.layout} ({_n(sum('conv2d_NCHWc' in t.name for t in tasks), 'blocked conv2d task')})"
             if args.layout != "NCHW" else ""))
    suffix = "" if args.layout == "NCHW" else f".{args.layout}"  # another layout, another .so beside its log
    log = args.log or os.path.join("runs", f"{os.path.basename(args.model)}.{args.tuner}{suffix}.jsonl")
    print(f"log      {log}" + (" (resuming)" if os.path.exists(log) and os.path.getsize(log) else ""))
    chunk = M.default_chunk(option["builder"].n_parallel)
    covered = min(len(tasks), -(-args.n_trial // chunk))  # a last, partial chunk still reaches its task
    if covered < len(tasks):  # tasks come heaviest first: the lightest ones get nothing
        left = tasks[covered:]
        print(f"budget   {args.n_trial} trials cover one round ({chunk} trials) of {covered} of {len(tasks)} tasks; "
              f"{len(left)} tasks ({100 * sum(t.flop * t.weight for t in left) / total:.0f}% of the FLOPs) get no "
              f"trial and keep TVM's default schedule; --n-trial {chunk * len(tasks)} covers every task once")
    kwargs = {"plan_size": args.plan_size} if args.plan_size is not None else {}
    warm = warm and args.tuner in MODEL_BASED
    if warm and args.knowledge_use:
        kwargs["knowledge_use"] = args.knowledge_use
    if kdir is None:
        print(_knowledge_off_line(args))
    else:
        print(f"knowledge {kdir}{' (a new folder)' if kdir_new else ''}: "
              + (f"{args.tuner} starts each task from its records of this target ({args.knowledge_use or 'seeds'}; "
                 "a task with none of its kind starts cold); " if warm
                 else f"not used by {args.tuner} in tune-model; " if args.tuner not in MODEL_BASED
                 else f"not read by {args.tuner}, a baseline: it starts cold as its own tuner does (--knowledge to "
                      "start it warm); ")
              + ("this run's records are added to it" if not args.ray else
                 ("read by each Ray worker, " if warm else "") + "this run's records are not added (--ray)"))
    from .knowledge.use import log_to_knowledge

    print("default  TVM's default schedule of each task is measured once (not a trial) and kept where it beats the "
          "best tuned kernel", flush=True)
    if args.ray:
        if warm:
            kwargs["knowledge"] = kdir
        from .distributed.ray_tune import measure_args_from_cli, tune_model_ray

        from .measure.measurer import measure_missing_defaults

        measure_missing_defaults(tasks, option, log)  # here, on the driver's machine: the one compiling
        option["builder"].close()
        res = tune_model_ray(tasks, args.n_trial, log, tuner=args.tuner, measure_args=measure_args_from_cli(args),
                             address=args.ray, split=args.split, seed=args.seed, num_cpus=args.ray_cpus,
                             progress=not args.no_progress, scheduler=args.scheduler, tuner_kwargs=kwargs)
        res.default_ms = M.default_ms(tasks, log)
    else:
        res = M.tune_model(tasks, args.n_trial, log, tuner=args.tuner, scheduler=args.scheduler,
                           measure_option=option, seed=args.seed, progress=not args.no_progress, tuner_kwargs=kwargs,
                           knowledge=kdir if warm else None,
                           callbacks=[log_to_knowledge(kdir)] if kdir is not None and not warm else None)
        option["builder"].close()
    # tasks in tuning order (largest share of the end-to-end latency first); "latency %" = weight x measured
    # best latency over the sum (tasks without a measurement estimated from their FLOPs: model.latency_shares)
    # "default ms": TVM's default schedule of the task (untuned), measured once as a candidate
    print(f"{'task':<48} {'weight':>6} {'FLOP %':>6} {'latency %':>9} {'trials':>6} {'best ms':>9} {'GFLOPS':>8} "
          f"{'default ms':>10}")
    for row in res.table():
        print(f"{row['task'][:48]:<48} {row['weight']:>6} {100 * row['flop_share']:>6.1f} "
              f"{100 * row['latency_share']:>9.1f} {row['trials']:>6} {row['best_ms']:>9.4f} {row['gflops']:>8.2f} "
              f"{row['default_ms']:>10.4f}")
    lost = res.lost_to_default()
    if lost:
        print(f"default  {_n(len(lost), 'task')} of {len(tasks)} keep TVM's default schedule, faster than their best "
              f"tuned kernel: {', '.join(lost[:6])}{' ...' if len(lost) > 6 else ''}")
    untuned = sum(1 for row in res.table() if row["trials"] == 0)
    if untuned:
        print(f"budget   {untuned} of {len(tasks)} tasks got no trial (TVM's default schedule); "
              f"--n-trial {chunk * len(tasks)} or more covers every task once")
    print("compile  the tuned model (compile_relax with the log's best records)...", flush=True)
    hist = apply_history_best(log)
    db = hist.database(tasks)
    note = hist.report(retune=f"release tune-model --model {args.model} --log NEW.jsonl")
    if note:
        print(f"note     {note}")
    ex = M.compile_model(model, target, db, progress=not args.no_progress, layout=args.layout)
    lib = os.path.splitext(log)[0] + ".so"
    # the final timings and comparisons at the priority RELEASE_TIMING_PRIORITY asks for (the run
    # workers time at it already; on a shared machine TVM's pool stalls at normal priority)
    timing_priority()
    tuned = M.evaluate(model, ex, threads=threads)
    # fastest of the repeats, the statistic of the PyTorch reference (release.reference.time_torch)
    print(f"tuned    {tuned['fastest_ms']:.3f} ms end to end on {tuned['threads']} threads (fastest of "
          f"repeats; median {tuned['latency_ms']:.3f}) (ReLeASE {args.tuner}, {args.n_trial} trials, "
          f"{res.wall_s:.0f} s tuning); output matches the reference (max abs error {tuned['max_abs_err']:.1e})")
    prog = not args.no_progress
    # the untuned build, timed even when not asked for (fewer runs then): the tuned build is exported
    # only if it is not slower; with --compare untuned its line is the comparison's
    unex = M.compile_model(model, target, progress=prog)
    un = M.evaluate(model, unex, check=False, threads=threads,
                    max_seconds=30.0 if "untuned" in compare else 10.0)
    print(f"untuned  {un['fastest_ms']:.3f} ms on {un['threads']} threads (fastest of repeats; median "
          f"{un['latency_ms']:.3f}; TVM default schedules)", flush=True)
    keep, why = tuned_or_untuned(tuned, un)
    if keep == "untuned":
        ex = unex
        print(f"verdict  {why}: the untuned build is exported instead"
              + (f"; tasks whose tuned kernel lost to TVM's default: {', '.join(lost[:6])}" if lost else "")
              + f"; more trials (--n-trial) may find faster kernels", flush=True)
    else:
        print(f"verdict  {why}", flush=True)
    if args.memory_order:
        ex = _memory_order(args, model, target, db if keep == "tuned" else None,
                           args.layout if keep == "tuned" else None, ex, memory_budget, prog)
    ex.export_library(lib)
    steps = [c for c in ("ms", "torch") if c in compare]
    if steps:  # the comparisons: a bar over them (elapsed, estimated time left), and each long one its own
        print(f"compare  {', '.join(steps)}" + (f" (ms: MetaSchedule tunes {args.n_trial} trials, as long as the "
                                              f"tuning above took, {res.wall_s:.0f} s, or longer)"
                                              if "ms" in steps else ""), flush=True)
    bar = None
    if prog and steps:
        from .progress import progress as make_progress  # a bar on a terminal, plain lines elsewhere

        bar = make_progress(len(steps), desc="compare", unit="step", every_n=1)
    if "ms" in compare:
        import tempfile

        work = tempfile.mkdtemp(prefix="release-ms-")
        timing_priority("normal")  # MetaSchedule's search runs here; its run workers take the priority asked for
        msdb, ms_wall = M.tune_with_metaschedule(model, target, args.n_trial, work, number=args.number,
                                                 repeat=args.repeat, min_repeat_ms=args.min_repeat_ms,
                                                 n_parallel=args.n_parallel, seed=args.seed, progress=prog,
                                                 layout=args.layout)
        msex = M.compile_model(model, target, msdb, progress=prog, layout=args.layout)
        timing_priority()
        msr = M.evaluate(model, msex, check=False, threads=threads)
        print(f"ms       {msr['fastest_ms']:.3f} ms on {msr['threads']} threads (fastest of repeats; MetaSchedule tune_relax, "
              f"{args.n_trial} trials, {ms_wall:.0f} s tuning)", flush=True)
        if bar is not None:
            bar.update(1)
    if "torch" in compare:
        ref = M.torch_reference(model, threads=threads)
        print(f"torch    {ref.describe() if ref else 'n/a (no PyTorch module)'} (PyTorch eager, same CPU)")
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    # a model whose weights are runtime inputs (an ONNX file exported without them) takes them at run time
    packed = "weights packed in" if model.params else "weights not packed in: main takes them as inputs after the data"
    print(f"deploy   {lib} ({packed}), on the {threads} threads it was tuned on: import os; "
          f"os.environ.setdefault('TVM_NUM_THREADS', '{threads}'); import tvm; from tvm import relax; "
          f"vm = relax.VirtualMachine(tvm.runtime.load_module({lib!r}), tvm.cpu()); out = vm['main'](*inputs)")
    print(f"         the log {log} resumes with the same command")
    return 0


def _memory_budget(text) -> int:
    """``--memory-budget``: a positive integer (one line otherwise, before any work)."""
    try:
        n = int(text)
    except (TypeError, ValueError):
        n = 0
    if n < 1:
        raise TunerError(f"--memory-budget {text}: give a positive number of evaluations, e.g. 2000")
    return n


def _memory_order(args, model, target, db, layout, ex, budget: int, progress: bool):
    """``tune-model --memory-order``: the chosen build compiled again with its kernel calls reordered for
    TVM's memory planner (:func:`release.graph.relax_apply.reorder_for_memory`); planned bytes before and
    after, outputs compared bitwise, the VM's peak measured in child processes (median of 3 each). Returns
    the build to export: the reordered one only when TVM plans it smaller and its outputs are identical."""
    import tempfile

    import numpy as np

    from . import model as M
    from .graph.relax_apply import measure_vm_peak, measured_change, memory_order_pass, run_module

    reports: list = []
    mex = M.compile_model(model, target, db, progress=progress, layout=layout,
                          before_lowering=memory_order_pass(args.memory_order, budget, reports))
    rep = reports[0]
    print(f"memory   {rep.line()}", flush=True)
    if not rep.improved:
        return ex
    inputs = [np.asarray(x) for x in model.inputs]
    a = run_module(None, inputs, executable=ex)
    b = run_module(None, inputs, executable=mex)
    same = len(a) == len(b) and all(x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a, b))
    if not same:
        print("memory   the reordered build's outputs differ from the given order's: the given order is exported "
              "(please report this)", flush=True)
        return ex
    with tempfile.TemporaryDirectory() as tmp:
        paths = [os.path.join(tmp, "given.so"), os.path.join(tmp, "reordered.so")]
        ex.export_library(paths[0])
        mex.export_library(paths[1])
        peaks: list = [[], []]
        for _ in range(3):  # alternately, each run in a fresh process
            for i in (0, 1):
                peaks[i].append(measure_vm_peak(paths[i], inputs))
    print(f"memory   VM peak measured (child process, median of 3 runs each): given {int(np.median(peaks[0])):,} "
          f"bytes, reordered {int(np.median(peaks[1])):,} bytes ({measured_change(peaks[0], peaks[1])}); outputs "
          "identical; the reordered build is exported", flush=True)
    return mex


def tuned_or_untuned(tuned: dict, untuned: dict) -> tuple[str, str]:
    """Which build ``tune-model`` exports: ``("tuned" | "untuned", why)``.

    ``tuned`` and ``untuned`` are :func:`release.model.evaluate` results of the two builds, timed in
    one invocation on the same threads. The untuned build wins only when it is faster both in the
    fastest and in the median of its repeats (a single timing decides nothing: within the noise of
    repeated timings the tuned build is kept).
    """
    t_fast, t_med = tuned["fastest_ms"], tuned["latency_ms"]
    u_fast, u_med = untuned["fastest_ms"], untuned["latency_ms"]
    if u_fast < t_fast and u_med < t_med:
        return "untuned", (f"the tuned build is slower than the untuned one ({t_fast:.3f} vs {u_fast:.3f} ms fastest, "
                           f"{t_med:.3f} vs {u_med:.3f} ms median)")
    ratio = u_fast / t_fast if t_fast > 0 else float("inf")
    if ratio >= 1.0:
        return "tuned", f"the tuned build is {ratio:.2f}x faster than the untuned one (fastest of repeats); it is exported"
    return "tuned", (f"the tuned build is {1 / ratio:.2f}x slower than the untuned one in the fastest of repeats but not "
                     "in the median (within the timing noise); it is exported")


def _trials_arg(text: str):
    """``--n-trial``: an integer, or MODEL=N[,MODEL=N] (model tiers); argparse turns the error into one line."""
    from .bench_model import parse_trials

    try:
        return parse_trials(text)
    except TunerError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _bench_command() -> str:
    """The command that reproduces the results (runs, resumes or skips, then reports)."""
    argv = [a for a in sys.argv[1:] if a not in ("--report-only", "--no-progress")]
    return "release " + " ".join(argv) if sys.argv and sys.argv[0].endswith("release") else \
        "release bench " + " ".join(argv[1:])


def cmd_bench_model(args) -> int:
    """``release bench --tier model | model-smoke``: whole models (:mod:`release.bench_model`)."""
    from . import bench_model

    ignored = [f"--{k.replace('_', '-')}" for k in ("workloads", "logs", "baseline", "against", "prepack")
               if getattr(args, k) not in (None, False)] + (["--remeasure"] if args.remeasure else [])
    if ignored:
        raise TunerError(f"{' '.join(ignored)}: operator-tier options; the model tiers take --models, --tuners, "
                         "--seeds, --n-trial, --checkpoints, --references, --target, --layout, --knowledge, --out, --retime")
    cfg = bench_model.ModelBenchConfig.from_tier(args.tier, models=args.models, tuners=args.tuners, seeds=args.seeds,
                                                 n_trial=args.n_trial, checkpoints=args.checkpoints,
                                                 references=args.references, target=args.target, out=args.out,
                                                 layout=args.layout, knowledge=args.knowledge)
    command = _bench_command()
    if not args.report_only:
        bench_model.run(cfg, progress=not args.no_progress)
    res = bench_model.report(cfg, command=command, retime=args.retime, progress=not args.no_progress)
    print(bench_model.markdown(res))
    print(f"results in {cfg.out}/ (results.json, table.md, curves.png, checkpoints.json; logs in {cfg.logs}/)")
    return 0


def cmd_bench(args) -> int:
    from . import bench
    from .bench_model import MODEL_TIERS

    if args.tier in MODEL_TIERS:
        return cmd_bench_model(args)
    if isinstance(args.n_trial, dict):
        raise TunerError(f"--n-trial {args.n_trial}: per-model budgets are for the model tiers; give an integer")
    bad = [f"--{k}" for k in ("models", "checkpoints", "references", "knowledge") if getattr(args, k) is not None] + \
        (["--retime"] if args.retime else [])
    if bad:
        raise TunerError(f"{' '.join(bad)}: options of the model tiers ({', '.join(MODEL_TIERS)}), not of {args.tier!r}")
    cfg = bench.BenchConfig.from_tier(args.tier, workloads=args.workloads, tuners=args.tuners, seeds=args.seeds,
                                      n_trial=args.n_trial, target=args.target or "llvm", out=args.out,
                                      logs=args.logs, baseline=args.baseline, against=args.against,
                                      layout=args.layout, prepack=args.prepack)
    command = _bench_command()
    if not args.report_only:
        bench.run(cfg, progress=not args.no_progress)
    if args.remeasure:
        bench.remeasure(cfg)
    res = bench.report(cfg, command=command)
    print(bench.markdown(res))
    print(f"results in {cfg.out}/ (results.json, table.md, curves.png, speedups.png)")
    return 0
