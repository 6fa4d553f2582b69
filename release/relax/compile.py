"""Compilation: a model and a tuning database in, a Relax VM executable out.

:func:`compile_model` is MetaSchedule's ``compile_relax`` pipeline (the passes of task extraction,
``MetaScheduleApplyDatabase``, lowering) with TVM's post-tuning weight pre-packing;
:func:`schedule_knobless` gives the functions that have no knob MetaSchedule's one design-space candidate.
"""

from __future__ import annotations

import logging

from ..errors import ModelError
from .frontend import Model
from .layout import _fuse_passes, default_prepack, model_layout

logger = logging.getLogger(__name__)


def schedule_knobless(mod, target):
    """Schedule every unscheduled function of ``mod`` whose MetaSchedule design space has no decision to tune.

    MetaSchedule's ``tune_relax`` measures the single candidate of such a function (its
    ``ParallelizeVectorizeUnroll`` rule samples nothing for a purely spatial function) and its
    database then schedules it; tuners that skip knob-less tasks would leave them as TVM lowers
    unscheduled TIR: one thread, no vector code (the BERT-base layer's 13 reshape/transpose/GELU/add
    functions). This pass applies that same candidate without measuring it: the design space of
    ``PostOrderApply`` with the target's default rules, postprocessed, marked ``tir.is_scheduled``.

    Skipped: functions already scheduled (``tir.is_scheduled``: applied from the database), pure
    reshapes (``relax.analysis.has_reshape_pattern``: later lowered to a view, no kernel at all),
    functions whose space has a sampling decision (tunable: left as they are when untuned), and
    any whose space generation or postprocessing fails (kept unscheduled, logged at debug level).

    Parameters
    ----------
    mod : tvm.IRModule
        A Relax module after fusion and ``MetaScheduleApplyDatabase``.
    target : tvm.target.Target

    Returns
    -------
    tvm.IRModule
        ``mod`` with those functions replaced.
    """
    import tvm
    from tvm import relax, tirx
    from tvm.s_tir import meta_schedule as ms

    out = mod.clone()
    for gv, func in mod.functions_items():
        if not isinstance(func, tirx.PrimFunc) or (func.attrs is not None and func.attrs.get("tir.is_scheduled")):
            continue
        try:
            if relax.analysis.has_reshape_pattern(func):
                continue
            ctx = ms.TuneContext(mod=tvm.IRModule({"main": func.with_attr("global_symbol", "main")}), target=target,
                                 space_generator="post-order-apply", search_strategy="replay-trace", num_threads=1)
            schs = ctx.generate_design_space()
            if len(schs) != 1 or any(schs[0].trace.get_decision(i) is not None for i in schs[0].trace.insts
                                     if i.kind.name.startswith("Sample")):
                continue
            sch = schs[0]
            sch.enter_postproc()
            if not all(p.apply(sch) for p in ctx.space_generator.postprocs):
                continue
        except Exception as err:  # noqa: BLE001 - a function we cannot schedule keeps TVM's default
            logger.debug("%s: kept unscheduled (%s)", gv.name_hint, err)
            continue
        new = sch.mod["main"].with_attr("tir.is_scheduled", True)
        sym = func.attrs.get("global_symbol") if func.attrs is not None else None
        new = new.with_attr("global_symbol", sym) if sym is not None else new.without_attr("global_symbol")
        out.update_func(gv, new)
    return out


def compile_model(model: Model, target, database=None, prepack: bool | None = None, progress: bool = False,
                  layout: str | None = None, before_lowering=None, exec_mode: str = "bytecode", pad: bool = False,
                  winograd=None):
    """Compile ``model`` with the tuned functions of ``database``; ``database=None`` gives the untuned build.

    With a database, functions that have no knob to tune (elementwise ops, transposes, layout
    transforms: :func:`~release.relax.extract.extract_tasks` drops them) get MetaSchedule's design-space schedule
    (:func:`schedule_knobless`: parallel and vectorized), as ``tune_relax`` gives them by measuring
    their one candidate; functions with knobs but no record keep TVM's default (unscheduled) code.

    The pipeline is MetaSchedule's ``compile_relax`` (fuse, ``MetaScheduleApplyDatabase``, lower,
    finalize) with TVM's post-tuning layout rewrite when ``prepack``
    (``static_shape_tuning_pipeline(cpu_weight_prepack=True)``): ``SplitLayoutRewritePreproc``
    splits each tuned kernel's weight packing into its own function, ``LiftTransformParams`` +
    ``FoldConstant`` run it on the bound weights at compile time, so the compiled model takes
    exactly the inputs it took before and never re-packs a weight per call.

    Parameters
    ----------
    prepack : bool, optional
        As the tasks were extracted (:func:`~release.relax.extract.extract_tasks`); default
        :func:`~release.relax.layout.default_prepack`.
        A database written without pre-packing applies with ``prepack=False``.
    progress : bool
        A tqdm bar over the compile's stages (fuse, apply the database, layout rewrite, lower,
        code generation), with the time spent and tqdm's estimate of the time left. Default False.
    layout : str, optional
        As the tasks were extracted (default NCHW). The blocked model keeps NCHW inputs and outputs;
        only the boundaries of its blocked region transform activations, the weights are transformed
        at compile time (:func:`~release.relax.layout.layout_passes`).
    before_lowering : callable, optional
        ``IRModule -> IRModule``, run on the fused module with the database applied (and weights
        pre-packed), right before lowering: e.g. a kernel-call order for TVM's memory planner
        (``tune-model --memory-order``: :func:`release.graph.relax_apply.reorder_for_memory`).
    exec_mode : {"bytecode", "compiled"}
        ``relax.build``'s: "bytecode" (default) interprets the model's Relax function in the VM; "compiled"
        generates it as TIR into the library, so no bytecode is interpreted between kernel calls
        (``benchmarks/profile/runtime_knobs.py`` measures the difference).
    pad : bool
        As the tasks were extracted: pad matmul-like loops that do not tile (default False;
        :mod:`release.relax.pad`).
    winograd : WinogradPlan, optional
        With a ``-winograd{m}`` layout: the layers built in their Winograd form. Default: chosen from
        ``database`` per layer (:func:`release.relax.winograd.choose`; every layer direct without a database).

    Raises
    ------
    ModelError
        Bad ``layout`` or ``exec_mode``.
    """
    from ..stderr_capture import quiet

    with quiet("compile"):  # inside `release tune-model`: TVM's warnings go to its file
        return _compile_model(model, target, database, prepack, progress, layout, before_lowering, exec_mode, pad,
                              winograd)


def _compile_model(model: Model, target, database, prepack, progress: bool, layout, before_lowering, exec_mode: str,
                   pad: bool, winograd):
    import tvm
    from tvm import relax
    from tvm.relax import pipeline as relax_pipeline
    from tvm.relax.transform import MetaScheduleApplyDatabase
    from tvm.s_tir import meta_schedule as ms

    from ..target import ensure_tensor_intrinsics, resolve_target

    target = resolve_target(target)
    ensure_tensor_intrinsics(target)
    model_layout(layout)  # a bad layout fails here, in one line
    from .winograd import split_layout

    _, tile = split_layout(layout)

    def choose_winograd(mod):
        return _choose(mod, target, db, layout, prepack, pad)

    if exec_mode not in ("bytecode", "compiled"):
        raise ModelError(f"exec_mode {exec_mode!r}: use 'bytecode' (the default) or 'compiled'")
    prepack = default_prepack(model, target) if prepack is None else bool(prepack)
    db = database if database is not None else ms.database.MemoryDatabase()
    post = [relax.transform.SplitLayoutRewritePreproc(), relax.transform.LiftTransformParams(),
            relax.transform.FoldConstant()] if prepack else []

    try:
        lower = relax_pipeline.dataflow_lower_passes(target) + relax_pipeline.finalize_passes(target)
    except (ValueError, AttributeError):  # as compile_relax: targets without a registered backend pipeline
        lower = [relax.transform.RewriteDataflowReshape(), relax.transform.ToNonDataflow(),
                 relax.transform.RemovePurityChecking(), relax.transform.CallTIRRewrite(),
                 relax.transform.StaticPlanBlockMemory(), relax.transform.LowerAllocTensor(),
                 relax.transform.KillAfterLastUse(), relax.transform.LowerRuntimeBuiltin(),
                 relax.transform.ComputePrimValue(), relax.transform.VMShapeLower(),
                 relax.transform.AttachGlobalSymbol()]

    bar = None
    if progress:
        from ..progress import progress as make_progress  # a bar on a terminal, a plain line elsewhere

        stages = 5 if prepack else 4
        bar = make_progress(stages, desc="compile", unit="stage", every_n=stages)

    def _stage(name: str) -> None:
        if bar is not None:
            bar.set_postfix_str(name)
            bar.update(1)

    @tvm.transform.module_pass(opt_level=3)
    def _pipeline(mod, _ctx):
        plan = winograd
        if plan is None and tile is not None and database is not None:
            plan = choose_winograd(mod).plan
        mod = tvm.transform.Sequential(_fuse_passes(target, prepack, layout, pad, plan))(mod)
        _stage("fused")
        mod = MetaScheduleApplyDatabase()(mod)
        if database is not None:
            mod = schedule_knobless(mod, target)
        _stage("database applied")
        if post:
            mod = tvm.transform.Sequential(post)(mod)
            _stage("weights pre-packed")
        if before_lowering is not None:
            mod = before_lowering(mod)
        mod = tvm.transform.Sequential(lower)(mod)
        _stage("lowered; generating code")
        return mod

    mod = model.mod
    if model.params:
        mod = relax.transform.BindParams("main", model.params)(mod)
    try:
        with target, db, tvm.transform.PassContext(opt_level=3):
            ex = relax.build(mod, target=target, relax_pipeline=_pipeline, exec_mode=exec_mode)
        _stage("built")
        return ex
    finally:
        if bar is not None:
            bar.close()


def winograd_choice(model: Model, target, database, layout: str, prepack: bool | None = None, pad: bool = False,
                    history=None, tasks=None):
    """Which of ``model``'s eligible convolutions a build with ``database`` computes by Winograd, and why.

    Parameters
    ----------
    layout : str
        A ``-winograd{m}`` layout (``"NCHWc-winograd4"``), as the tasks were extracted.
    database : MetaSchedule Database
        The tuned records (``apply_history_best(log).database(tasks)``).
    prepack, pad : as :func:`compile_model`.
    history, tasks : optional
        The :class:`release.measure.ApplyHistoryBest` the database came from and its tasks: a kernel that keeps
        TVM's default schedule (no record in the database) is then compared at its default's measured time.

    Returns
    -------
    release.relax.winograd.WinogradChoice
        Per eligible layer the best time of each form's fused kernel (s) and the choice; ``.plan`` builds it
        (:func:`compile_model` chooses the same way when given no plan).

    Raises
    ------
    ModelError
        A layout without the ``-winograd{m}`` suffix, or a bad one.
    """
    from tvm import relax

    from ..target import resolve_target
    from .winograd import split_layout

    target = resolve_target(target)
    if split_layout(layout)[1] is None:
        raise ModelError(f"layout {layout!r} has no Winograd variant; give e.g. NCHWc-winograd4")
    prepack = default_prepack(model, target) if prepack is None else bool(prepack)
    mod = relax.transform.BindParams("main", model.params)(model.mod) if model.params else model.mod
    defaults = {}
    for t in tasks or ():
        rec = history.default_record(t) if history is not None else None
        if rec is not None:
            defaults[t.structural_hash] = rec.mean_cost
    return _choose(mod, target, database, layout, prepack, pad, defaults)


def _choose(mod, target, database, layout, prepack, pad, defaults=None):
    import tvm

    from .winograd import choose, split_layout

    def fuse(plan, pairs=None):
        with target:
            return tvm.transform.Sequential(_fuse_passes(target, prepack, layout, pad, plan, pairs))(mod)

    return choose(mod, target, database, split_layout(layout)[1], fuse, defaults)
