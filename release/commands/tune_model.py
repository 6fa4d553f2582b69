"""``release tune-model``: every task of a model tuned into one log, the model compiled, timed, exported.

:class:`TuneModelConfig` (every flag, validated once; the target and layout resolved) ->
:func:`run_tune_model` (the work; returns a :class:`TuneModelResult` and reports its steps to a
:class:`TuneModelRenderer` while it runs) -> :class:`TuneModelPrinter` (the lines the command prints).
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass
from typing import Any

from ..errors import ReleaseError, TunerError, check_n_trial
from ..zoo import MODEL_NAMES as ZOO_MODELS
from .common import KnowledgeChoice, add_knowledge_args, add_measure_args, check_model_arg, check_tuner_name
from .tune import DEFAULT_TUNER
from .tune_model_render import TuneModelPrinter, TuneModelRenderer

COMPARISONS = ("untuned", "torch", "ms", "onnxruntime", "openvino")

__all__ = ["TuneModelConfig", "TuneModelRenderer", "TuneModelPrinter", "TuneModelResult", "run_tune_model",
           "cmd_tune_model", "tuned_or_untuned", "export_library", "check_library_name", "memory_budget_arg"]


def add_parser(subparsers) -> None:
    """Add ``release tune-model`` to the top-level CLI."""
    p = subparsers.add_parser("tune-model", help="tune every task of a model and compile it",
                              formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", default="resnet18",
                   help=f"built-in model ({', '.join(ZOO_MODELS)}) or an .onnx file")
    p.add_argument("--target", default="llvm", help="'llvm' (this CPU) or a JSON dict")
    p.add_argument("--tuner", default=DEFAULT_TUNER,
                   help="tuner for every task (see `release tune --help`; release+: the paper's ReleaseTuner with this "
                        "project's search improvements; release: the paper's own)")
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
                        "transformed at compile time. A blocked layout with -winograd4 (or -winograd2), e.g. "
                        "NCHWc-winograd4: every 3x3 stride-1 conv2d also tuned as Winograd F(4x4, 3x3) and built in "
                        "the form measured faster, per layer")
    add_knowledge_args(p)
    p.add_argument("--compare", default="untuned,torch",
                   help="comma list of baselines to time: untuned, torch, ms (MetaSchedule tune_relax, same budget), "
                        "onnxruntime, openvino (the model as ONNX, each runtime on the same threads in a process of "
                        "its own, its output checked; a runtime missing or failing is one line)")
    p.add_argument("--memory-order", choices=["brkga", "regal"], default=None,
                   help="reorder the exported model's kernel calls so TVM's memory planner plans fewer bytes "
                        "(BRKGA on a replay of TVM's planner; regal: biased by REGAL's policy); prints planned and "
                        "measured peak memory before and after; kept only when TVM plans it smaller and the "
                        "outputs are identical; without it, TVM's order")
    p.add_argument("--memory-budget", default="2000",
                   help="with --memory-order: objective evaluations of the search")
    add_measure_args(p)
    p.add_argument("--in-model-rank", type=int, default=0, metavar="TASKS",
                   help="after tuning, time the 4 fastest configs of the TASKS hottest tasks inside the compiled "
                        "model and keep the fastest there (release.relax.finish; logged beside --log as "
                        "<stem>.in-model.jsonl, resumable; costs one model compile and a build per candidate); "
                        "0: off")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--ray", metavar="ADDRESS", default=None,
                   help="tune the tasks in parallel on a Ray cluster: 'local' (this machine), 'auto', HOST:PORT or "
                        "ray://HOST:PORT (None: no Ray, tasks share this machine's workers)")
    p.add_argument("--ray-cpus", type=int, default=None,
                   help="CPUs of a --ray local cluster = tasks tuned at once (None: Ray's own count)")
    p.add_argument("--split", choices=["equal", "flop"], default=None,
                   help="with --ray: fix each task's trial budget up front (equal, or proportional to weight*flop) "
                        "instead of handing chunks by --scheduler")
    p.set_defaults(func=cmd_tune_model)


@dataclass(frozen=True)
class TuneModelConfig:
    """Everything ``release tune-model`` was asked for, validated once by :meth:`from_args`."""

    model: str
    """A built-in model's name (:data:`release.zoo.MODEL_NAMES`) or an existing .onnx file."""
    target: Any
    """The resolved ``tvm.target.Target`` (:func:`release.target.resolve_target`, once)."""
    tuner: str
    n_trial: int
    scheduler: str
    plan_size: int | None
    log: str
    """``--log``, or ``runs/MODEL.TUNER.jsonl`` (``runs/MODEL.TUNER.LAYOUT.jsonl`` for a blocked layout)."""
    seed: int
    layout: str
    """The conv2d layout inside the model, ``--layout auto`` resolved (:func:`release.relax.default_layout`)."""
    knowledge: KnowledgeChoice
    knowledge_use: str | None
    warm: bool
    """Each task's tuner starts warm from the knowledge base (a model-based tuner and a warm choice)."""
    compare: tuple
    """Baselines to time, among :data:`COMPARISONS`."""
    memory_order: str | None
    memory_budget: int
    measure: Any
    """:class:`release.measure.config.MeasureConfig` of the measure flags."""
    progress: bool
    ray: str | None
    ray_cpus: int | None
    split: str | None
    in_model_rank: int = 0
    """Tasks the in-model ranking times after tuning (``--in-model-rank``; 0: none, :mod:`release.relax.finish`)."""

    @classmethod
    def from_args(cls, args) -> "TuneModelConfig":
        """Validate every flag of ``release tune-model`` (the model first, before TVM or PyTorch is
        imported), resolve the target and the layout, and name the log.

        Raises
        ------
        ModelError
            An unknown model or a missing .onnx file.
        TunerError
            A bad ``--n-trial``, an unknown ``--tuner`` or ``--compare`` entry, a bad ``--memory-budget``,
            ``--ray-cpus`` below 1, ``--split`` or ``--ray-cpus`` without ``--ray``, contradicting knowledge flags, ``--knowledge-use`` with a tuner that is not model-based, bad
            measure flags.
        ReleaseError
            A bad ``--layout`` or ``--target``, a ``--log`` that cannot be written or whose exported
            library Python would import in place of a module (:func:`check_library_name`).
        """
        check_model_arg(args.model)  # a missing file or an unknown name: one line before any import
        from .. import relax as M
        from ..measure.config import MeasureConfig
        from ..target import resolve_target
        from ..tuners import MODEL_BASED

        check_n_trial(args.n_trial, label=f"--n-trial {args.n_trial}")
        check_tuner_name(args.tuner)
        compare = tuple(c for c in args.compare.split(",") if c)
        bad = [c for c in compare if c not in COMPARISONS]
        if bad:
            raise TunerError(f"unknown --compare entries {bad}; use {', '.join(COMPARISONS)}")
        if args.layout != M.AUTO_LAYOUT:
            M.model_layout(args.layout)  # a bad --layout fails before the model is imported
        budget = memory_budget_arg(args.memory_budget)
        if args.ray_cpus is not None and args.ray_cpus < 1:
            raise TunerError(f"--ray-cpus {args.ray_cpus}: give the CPUs of the local Ray cluster, at least 1 "
                             "(leave it out for Ray's own count)")
        if not args.ray and (args.split is not None or args.ray_cpus is not None):
            flag = "--split" if args.split is not None else "--ray-cpus"
            raise TunerError(f"{flag} applies to a Ray run: add --ray local (or --ray HOST:PORT), or drop {flag}")
        in_model_rank = int(getattr(args, "in_model_rank", 0) or 0)
        if in_model_rank < 0:
            raise TunerError(f"--in-model-rank {in_model_rank}: give how many of the hottest tasks to rank inside "
                             "the model, e.g. 3 (0: off)")
        knowledge = KnowledgeChoice.from_args(args)  # so do contradicting knowledge flags
        if args.knowledge_use and args.tuner not in MODEL_BASED:
            raise TunerError(f"--knowledge-use {args.knowledge_use}: tune-model starts only model-based tuners "
                             f"({', '.join(MODEL_BASED)}) from a knowledge base, not {args.tuner!r} (release tune "
                             "--tuner ms-evolutionary --knowledge seeds one task)")
        if args.log:
            from ..measure.records import check_log_path

            check_log_path(args.log)  # a --log that cannot be written fails before the model is imported
            check_library_name(args.log)
        measure = MeasureConfig.from_args(args)
        target = resolve_target(args.target)
        # --layout auto: the blocked layout on a CPU, the space that beats PyTorch
        layout = M.default_layout(target) if args.layout == M.AUTO_LAYOUT else args.layout
        suffix = "" if layout == "NCHW" else f".{layout}"  # another layout, another .so beside its log
        log = args.log or os.path.join("runs", f"{os.path.basename(args.model)}.{args.tuner}{suffix}.jsonl")
        return cls(model=args.model, target=target, tuner=args.tuner, n_trial=args.n_trial, scheduler=args.scheduler,
                   plan_size=args.plan_size, log=log, seed=args.seed, layout=layout, knowledge=knowledge,
                   knowledge_use=args.knowledge_use, warm=knowledge.warm and args.tuner in MODEL_BASED,
                   compare=compare, memory_order=args.memory_order, memory_budget=budget, measure=measure,
                   progress=not args.no_progress, ray=args.ray, ray_cpus=args.ray_cpus, split=args.split,
                   in_model_rank=in_model_rank)


def check_log_for_model(log: str, tasks, model: str) -> list:
    """Refuse a ``--log`` that holds records but none of the model's tasks (another model's or an
    operator's log): resuming it would measure everything again into a file of something else, as
    ``release tune`` refuses a log of another task.

    Raises
    ------
    TunerError
        The log holds records and none of them belongs to a task of ``tasks`` (:meth:`release.task.Task.owns`)
        or bears one's name (records of the model from a machine of another ISA class are kept).

    Returns
    -------
    list of Record
        The log's records, TVM's default-schedule ones included (empty for a missing or empty log).
    """
    if not os.path.exists(log) or not os.path.getsize(log):
        return []
    from ..measure.records import load_records

    recs = load_records(log, defaults=True)
    names = sorted({rec.task.split("/")[0] for rec in recs})
    if recs and not set(names) & {t.name for t in tasks} and not any(t.owns(rec) for rec in recs for t in tasks):
        # (a log of this model from a machine of another ISA class has its task names: not refused)
        raise TunerError(f"--log {log} holds {len(recs)} records, none of {model}'s {len(tasks)} tasks (they are of "
                         f"{', '.join(names[:3])}{', ...' if len(names) > 3 else ''}); give a new --log for this model")
    return recs


def memory_budget_arg(text) -> int:
    """``--memory-budget``: a positive integer (one line otherwise, before any work).

    Raises
    ------
    TunerError
        ``text`` is not an integer >= 1.
    """
    try:
        n = int(text)
    except (TypeError, ValueError):
        n = 0
    if n < 1:
        raise TunerError(f"--memory-budget {text}: give a positive number of evaluations, e.g. 2000")
    return n


def check_library_name(log: str) -> None:
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


@dataclass(frozen=True)
class TuneModelResult:
    """What one ``release tune-model`` run did (:func:`run_tune_model`)."""

    model: Any
    """The imported :class:`release.relax.Model`."""
    tasks: list
    """Its tasks, in tuning order (largest share of the end-to-end latency first)."""
    log: str
    library: str
    """The exported library (``<log without .jsonl>.so``)."""
    threads: int
    """The threads the kernels were tuned and timed on."""
    tuning: Any
    """The tuning result of :func:`release.relax.tune_model` (or of the Ray run)."""
    lost: list
    """Names of the tasks that keep TVM's default schedule, faster than their best tuned kernel."""
    tuned: dict
    """:func:`release.relax.evaluate` of the tuned build (``fastest_ms``, ``latency_ms`` in ms)."""
    untuned: dict
    """:func:`release.relax.evaluate` of the untuned build."""
    exported: str
    """``"tuned"`` or ``"untuned"``: the build exported (:func:`tuned_or_untuned`)."""
    ms: dict | None
    """With ``--compare ms``: ``{"result": evaluate() of MetaSchedule's build, "wall_s": its tuning seconds}``."""
    torch: Any
    """With ``--compare torch``: :func:`release.relax.torch_reference` (None: no PyTorch module)."""
    export_stderr: Any = None
    """What TVM printed while the library was exported (:func:`export_library`), or None."""
    runtimes: dict | None = None
    """With ``--compare onnxruntime`` / ``openvino``: ``{runtime: result}`` of
    :func:`release.reference.time_onnx_runtime` (``{"error": why}`` for one missing or failing)."""


def tuned_or_untuned(tuned: dict, untuned: dict) -> tuple[str, str]:
    """Which build ``tune-model`` exports: ``("tuned" | "untuned", why)``.

    ``tuned`` and ``untuned`` are :func:`release.relax.evaluate` results of the two builds, timed in
    one invocation on the same threads. The untuned build wins only when it is faster both in the
    fastest and in the median of its repeats (a single timing decides nothing: within the noise of
    repeated timings the tuned build is kept).
    """
    t_fast, t_med = tuned["fastest_ms"], tuned["latency_ms"]
    u_fast, u_med = untuned["fastest_ms"], untuned["latency_ms"]
    if u_fast < t_fast and u_med < t_med:
        nd = 3 if min(u_fast, u_med) >= 0.1 else 5  # a tiny model's microseconds stay visible
        return "untuned", (f"the tuned build is slower than the untuned one ({t_fast:.{nd}f} vs {u_fast:.{nd}f} ms "
                           f"fastest, {t_med:.{nd}f} vs {u_med:.{nd}f} ms median)")
    ratio = u_fast / t_fast if t_fast > 0 else float("inf")
    if ratio >= 1.0:
        return "tuned", f"the tuned build is {ratio:.2f}x faster than the untuned one (fastest of repeats); it is exported"
    return "tuned", (f"the tuned build is {1 / ratio:.2f}x slower than the untuned one in the fastest of repeats but not "
                     "in the median (within the timing noise); it is exported")


def export_library(ex, lib: str, keep_warnings: bool = True):
    """``ex.export_library(lib)`` with what TVM prints to stderr meanwhile kept out of the terminal.

    TVM 0.27's runtime logs one ``executable.cc: Warning: Scope Saving: <function>`` line per Relax
    function to file descriptor 2 when an executable is exported (82 lines for MobileNetV2), which buried
    ``tune-model``'s result lines. They go to ``<lib>.export.log`` (``keep_warnings``; else a temporary
    file, deleted) and come back counted (:func:`release.stderr_capture.capture_stderr`).

    Returns
    -------
    release.stderr_capture.CapturedStderr
        What was captured (``.summary()``: one line; ``.warnings``: the count).

    Raises
    ------
    Exception
        Whatever ``export_library`` raises (a failed compile or link), after fd 2 is restored; with
        ``keep_warnings`` the captured text stays in the file.
    """
    from ..stderr_capture import capture_stderr

    with capture_stderr(f"{lib}.export.log" if keep_warnings else None) as captured:
        ex.export_library(lib)
    return captured


def memory_order(config: TuneModelConfig, model, db, layout, ex, renderer: TuneModelRenderer):
    """``tune-model --memory-order``: the chosen build compiled again with its kernel calls reordered for
    TVM's memory planner (:func:`release.graph.relax_apply.reorder_for_memory`); planned bytes before and
    after, outputs compared bitwise, the VM's peak measured in child processes (median of 3 each), each
    reported to ``renderer``. Returns the build to export: the reordered one only when TVM plans it
    smaller and its outputs are identical."""
    import tempfile

    import numpy as np

    from .. import relax as M
    from ..graph.relax_apply import measure_vm_peak, measured_change, memory_order_pass, run_module

    reports: list = []
    mex = M.compile_model(model, config.target, db, progress=config.progress, layout=layout,
                          before_lowering=memory_order_pass(config.memory_order, config.memory_budget, reports))
    rep = reports[0]
    renderer.memory_planned(rep)
    if not rep.improved:
        return ex
    inputs = [np.asarray(x) for x in model.inputs]
    a = run_module(None, inputs, executable=ex)
    b = run_module(None, inputs, executable=mex)
    same = len(a) == len(b) and all(x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a, b))
    if not same:
        renderer.memory_outputs_differ()
        return ex
    with tempfile.TemporaryDirectory() as tmp:
        paths = [os.path.join(tmp, "given.so"), os.path.join(tmp, "reordered.so")]
        for built, path in zip((ex, mex), paths):  # temporary libraries: their export warnings are dropped
            export_library(built, path, keep_warnings=False)
        peaks: list = [[], []]
        for _ in range(3):  # alternately, each run in a fresh process
            for i in (0, 1):
                peaks[i].append(measure_vm_peak(paths[i], inputs))
    renderer.memory_peaks(int(np.median(peaks[0])), int(np.median(peaks[1])), measured_change(peaks[0], peaks[1]))
    return mex


def compare_baselines(config: TuneModelConfig, model, threads: int, wall_s: float,
                      renderer: TuneModelRenderer) -> tuple:
    """The baselines of ``--compare`` beyond the untuned build: MetaSchedule's ``tune_relax`` with the
    same budget (``ms``), PyTorch eager (``torch``), ONNX Runtime and OpenVINO (``onnxruntime``, ``openvino``:
    :func:`release.reference.onnx_references`, each in a process of its own), each reported to ``renderer``
    when timed. Returns ``(ms, torch, runtimes)`` as :class:`TuneModelResult` holds them."""
    from .. import relax as M
    from ..threads import timing_priority

    steps = [c for c in ("ms", "torch", "onnxruntime", "openvino") if c in config.compare]
    if steps:
        renderer.comparing(steps, config.n_trial, wall_s)
    ms = ref = None
    if "ms" in steps:
        import tempfile

        work = tempfile.mkdtemp(prefix="release-ms-")
        timing_priority("normal")  # MetaSchedule's search runs here; its run workers take the priority asked for
        m = config.measure
        from ..stderr_capture import quiet

        with quiet("metaschedule"):  # tune_relax's C++ log lines go to the run's warnings file, counted
            msdb, ms_wall = M.tune_with_metaschedule(model, config.target, config.n_trial, work, number=m.number,
                                                     repeat=m.repeat, min_repeat_ms=m.min_repeat_ms,
                                                     n_parallel=m.n_parallel, seed=config.seed,
                                                     progress=config.progress, layout=config.layout)
        msex = M.compile_model(model, config.target, msdb, progress=config.progress, layout=config.layout)
        timing_priority()
        ms = {"result": M.evaluate(model, msex, check=False, threads=threads), "wall_s": ms_wall}
        renderer.compared_ms(ms["result"], config.n_trial, ms_wall)
    if "torch" in steps:
        ref = M.torch_reference(model, threads=threads)
        renderer.compared_torch(ref)
    runtimes = None
    wanted = [c for c in ("onnxruntime", "openvino") if c in steps]
    if wanted:
        import tempfile

        from ..reference import onnx_references

        with tempfile.TemporaryDirectory(prefix="release-onnx-") as tmp:  # each runtime in a process of its own
            runtimes = onnx_references(model, tmp, threads, wanted)
        for rt in wanted:
            renderer.compared_runtime(rt, runtimes[rt])
    if steps:
        renderer.compared()
    return ms, ref, runtimes


def run_tune_model(config: TuneModelConfig, renderer: TuneModelRenderer | None = None) -> TuneModelResult:
    """Import the model, extract its tasks, tune them into ``config.log`` (on this machine, or on Ray
    with ``config.ray``), compile the tuned and the untuned builds, time both, export the faster
    (:func:`tuned_or_untuned`; reordered for memory with ``config.memory_order``) beside the log, and
    time the baselines of ``config.compare``.

    Every step is reported to ``renderer`` as it happens (the base class shows nothing); progress
    bars show when ``config.progress``.

    Raises
    ------
    ReleaseError
        No device or RPC tracker; a model that fails to import or compile; a tuned build whose output
        differs from the reference.
    """
    from .. import relax as M
    from ..measure import apply_history_best
    from ..threads import thread_count, timing_priority, use_threads

    r = renderer or TuneModelRenderer()
    target = config.target
    threads = thread_count(target)
    use_threads(threads)  # before any worker starts: they inherit TVM_NUM_THREADS
    option = config.measure.make_option()
    option["runner"].check_device(target)
    t0 = time.time()
    r.extracting(config.model)
    model = M.load_model(config.model)
    tasks = M.extract_tasks(model, target, progress=config.progress, layout=config.layout)
    r.extracted(model, tasks, time.time() - t0, config.layout)
    if M.model_layout(config.layout) is not None:  # blocked: convolutions blocked, layout transforms, the rest named
        from ..relax.layout import layout_summary

        r.layout(layout_summary(model, target, config.layout))
    log = config.log
    from ..measure import check_log_cache_flush

    check_log_cache_flush(check_log_for_model(log, tasks, config.model), config.measure.cache_flush, log)
    r.tuner(config.tuner, config.n_trial)
    r.log_file(log, os.path.exists(log) and bool(os.path.getsize(log)))
    chunk = M.default_chunk(option["builder"].n_parallel)
    covered = min(len(tasks), -(-config.n_trial // chunk))  # a last, partial chunk still reaches its task
    if covered < len(tasks):  # tasks come heaviest first: the lightest ones get nothing
        r.budget_short(config.n_trial, chunk, tasks, covered)
    kwargs = {"plan_size": config.plan_size} if config.plan_size is not None else {}
    kdir = config.knowledge.folder
    if config.warm and config.knowledge_use:
        kwargs["knowledge_use"] = config.knowledge_use
    r.knowledge(config)
    r.defaults()
    from ..knowledge.use import log_to_knowledge

    if config.ray:
        if config.warm:
            kwargs["knowledge"] = kdir
        from ..distributed.ray_tune import tune_model_ray
        from ..measure.measurer import measure_missing_defaults

        measure_missing_defaults(tasks, option, log)  # here, on the driver's machine: the one compiling
        option["builder"].close()
        res = tune_model_ray(tasks, config.n_trial, log, tuner=config.tuner, measure_args=config.measure.to_dict(),
                             address=config.ray, split=config.split or "equal", seed=config.seed,
                             num_cpus=config.ray_cpus,
                             progress=config.progress, scheduler=None if config.split else config.scheduler,
                             tuner_kwargs=kwargs)
        res.default_ms = M.default_ms(tasks, log)
    else:
        res = M.tune_model(tasks, config.n_trial, log, tuner=config.tuner, scheduler=config.scheduler,
                           measure_option=option, seed=config.seed, progress=config.progress, tuner_kwargs=kwargs,
                           knowledge=kdir if config.warm else None,
                           callbacks=[log_to_knowledge(kdir)] if kdir is not None and not config.warm else None)
        option["builder"].close()
    lost = res.lost_to_default()
    r.tuned_tasks(res, tasks, lost, chunk)
    if config.in_model_rank:  # the hottest tasks' top candidates timed inside the model; logged beside the log
        from ..relax.finish import finish_model

        r.in_model_ranked(finish_model(model, tasks, log, target=target, layout=config.layout,
                                       n_tasks=config.in_model_rank, seed=config.seed))
    hist = apply_history_best(log)
    db = hist.database(tasks)
    r.compiling(hist.report(retune=f"release tune-model --model {config.model} --log NEW.jsonl"))
    plan = None
    if M.split_layout(config.layout)[1] is not None:  # each eligible layer direct or Winograd, by measurement
        choice = M.winograd_choice(model, target, db, config.layout, history=hist, tasks=tasks)
        r.winograd(choice)
        plan = choice.plan
    ex = M.compile_model(model, target, db, progress=config.progress, layout=config.layout, winograd=plan)
    lib = os.path.splitext(log)[0] + ".so"
    # the final timings and comparisons at the priority RELEASE_TIMING_PRIORITY asks for (the run
    # workers time at it already; on a shared machine TVM's pool stalls at normal priority)
    timing_priority()
    tuned = M.evaluate(model, ex, threads=threads)
    r.tuned_build(tuned, config, res)
    # the untuned build, timed even when not asked for (fewer runs then): the tuned build is exported
    # only if it is not slower; with --compare untuned its line is the comparison's
    unex = M.compile_model(model, target, progress=config.progress)
    un = M.evaluate(model, unex, check=False, threads=threads,
                    max_seconds=30.0 if "untuned" in config.compare else 10.0)
    r.untuned_build(un)
    keep, why = tuned_or_untuned(tuned, un)
    if keep == "untuned":
        ex = unex
    r.verdict(keep, why, lost)
    if config.memory_order:
        ex = memory_order(config, model, db if keep == "tuned" else None,
                          config.layout if keep == "tuned" else None, ex, r)
    exported = export_library(ex, lib)
    ms, torch, runtimes = compare_baselines(config, model, threads, res.wall_s, r)
    return TuneModelResult(model=model, tasks=tasks, log=log, library=lib, threads=threads, tuning=res, lost=lost,
                           tuned=tuned, untuned=un, exported=keep, ms=ms, torch=torch, export_stderr=exported,
                           runtimes=runtimes)


def cmd_tune_model(args) -> int:
    """``release tune-model``: :class:`TuneModelConfig` -> :func:`run_tune_model` -> :class:`TuneModelPrinter`.
    What TVM and the model frontends print while the model is imported, extracted and compiled goes to
    ``<log without .jsonl>.warnings.log``, counted in one closing line (:func:`release.stderr_capture.quiet`)."""
    from ..stderr_capture import tvm_output_to
    from .tune_model_render import tvm_output_path

    config = TuneModelConfig.from_args(args)
    printer = TuneModelPrinter(progress=config.progress)
    with tvm_output_to(tvm_output_path(config.log)) as tvm_output:
        result = run_tune_model(config, printer)
    return printer.finished(result, tvm_output)
