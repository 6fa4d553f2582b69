"""Task extraction: a model's fused TIR functions as tuning tasks, and their share of the latency.

:func:`prepare` binds the weights and runs the passes ``compile_relax`` runs before applying a database
(:mod:`release.relax.layout`); :func:`extract_tasks` gives MetaSchedule's extracted functions as
:class:`release.task.Task` (weight: runs per inference), heaviest first; :func:`latency_shares` is each
task's share of the end-to-end latency (the objective of the gradient task scheduler).
"""

from __future__ import annotations

import logging

import numpy as np

from .frontend import Model
from .layout import _fuse_passes, default_prepack, model_layout

logger = logging.getLogger(__name__)


def prepare(mod, params: dict, target, prepack: bool = False, layout: str | None = None, pad: bool = False,
            winograd=None, pairs: dict | None = None):
    """Bind weights and lower as ``compile_relax`` does before applying a database; with
    ``prepack``, mark the weights layout-free as TVM's ``cpu_weight_prepack`` pipeline does; with a
    blocked ``layout`` (``"NCHWc"``), convert conv2d to it first (:func:`~release.relax.layout.layout_passes`);
    with ``pad``, pad matmul-like loops that do not tile (:mod:`release.relax.pad`); with ``winograd`` (a
    :class:`release.relax.winograd.WinogradPlan`), the layers it takes in their Winograd form."""
    import tvm
    from tvm import relax

    from ..target import ensure_tensor_intrinsics

    ensure_tensor_intrinsics(target)
    if params:
        mod = relax.transform.BindParams("main", params)(mod)
    with target:
        return tvm.transform.Sequential(_fuse_passes(target, prepack, layout, pad, winograd, pairs))(mod)


def extract_tasks(model: Model, target, prepack: bool | None = None, progress: bool = False,
                  layout: str | None = None, pad: bool = False) -> list:
    """Tuning tasks of ``model`` (MetaSchedule's Relax task extraction), heaviest first.

    Parameters
    ----------
    prepack : bool, optional
        Weights layout-free (pre-packed by the tuned schedules); default :func:`~release.relax.layout.default_prepack`.
        Compile with the same value (:func:`~release.relax.compile.compile_model`).
    progress : bool
        A tqdm bar over the extracted tasks while their knob spaces are built (the slow part:
        seconds per task), with its estimate of the remaining time. Default False.
    layout : str, optional
        conv2d layout: ``"NCHW"`` (default: as imported), ``"NCHWc"`` (channel blocks = the
        target's vector lanes, 8 with AVX2, 16 with AVX-512; a smaller block where the channels do
        not divide, e.g. 3 for an RGB input) or ``"NCHW{n}c"``. Blocked tasks are named
        ``...conv2d_NCHWc...`` and tuned like any other (their knob space is MetaSchedule's design
        space). Compile with the same value. See :func:`~release.relax.layout.layout_passes`.
        ``"NCHWc-winograd4"`` (or ``-winograd2``): also the Winograd form of every blocked 3x3 stride-1
        convolution, as tasks of their own (:mod:`release.relax.winograd`).
    pad : bool
        Pad matmul-like loops whose extents do not tile (ViT's 197 tokens) to a multiple of the
        vector lanes (:mod:`release.relax.pad`). Default False (no end-to-end gain measured on ViT-B/16); compile with the same value.

    Returns
    -------
    list[release.task.Task]
        ``task.weight`` = how many times it runs per inference; ``task.flop`` per run. Tasks
        whose knob space has no knob (reshapes and the like) are dropped.

    Raises
    ------
    ModelError
        Bad ``layout``.
    """
    from ..stderr_capture import quiet

    with quiet("extract"):  # inside `release tune-model`: TVM's warnings ("Unknown schedule rule ...") go to its file
        return _extract_tasks(model, target, prepack, progress, layout, pad)


def _extract_tasks(model: Model, target, prepack, progress: bool, layout, pad: bool) -> list:
    import tvm_ffi
    from tvm.s_tir import meta_schedule as ms

    from ..errors import SpaceError
    from ..target import resolve_target
    from ..task import Task

    target = resolve_target(target)
    model_layout(layout)  # a bad layout fails here, in one line
    prepack = default_prepack(model, target) if prepack is None else bool(prepack)
    from .winograd import WinogradPlan, split_layout

    _, tile = split_layout(layout)
    mod = prepare(model.mod, model.params, target, prepack=prepack, layout=layout, pad=pad)
    tasks = []
    extracted = list(ms.relax_integration.extract_tasks(mod, target))
    if tile is not None:  # the Winograd form of every eligible layer too: the tasks the other form lacks
        every = prepare(model.mod, model.params, target, prepack=prepack, layout=layout, pad=pad,
                        winograd=WinogradPlan(tile))
        known = {tvm_ffi.structural_hash(et.dispatched[0]) for et in extracted}
        extracted += [et for et in ms.relax_integration.extract_tasks(every, target)
                      if tvm_ffi.structural_hash(et.dispatched[0]) not in known]
    if progress:
        from ..progress import track  # a bar on a terminal, a plain line elsewhere

        extracted = track(extracted, desc="extract", unit="task")
    for et in extracted:
        t = Task(et.dispatched[0], target, name=f"{model.name}.{et.task_name}", weight=int(et.weight))
        try:
            t.config_space  # noqa: B018 - builds the space; drops knob-less tasks
        except SpaceError:
            logger.info("task %s has no knob to tune; left to TVM's default schedule", t.name)
            continue
        tasks.append(t)
    tasks.sort(key=lambda t: -t.flop * t.weight)
    return tasks


def latency_shares(tasks: list, tuners: dict | None = None) -> np.ndarray:
    """Each task's share of the end-to-end latency, ``weight x latency`` over the sum.

    A task with a measured best uses it (``tuners[task.key].best_cost``); a task without one is
    estimated as ``flop / r``, where ``r`` is the throughput (FLOP/s, weighted) the measured tasks
    reach; with nothing measured this is the FLOP share ``weight x flop`` (the estimate before
    tuning). This is the objective of Ansor / MetaSchedule's gradient task scheduler
    (``sum_i weight_i * best_latency_i``), split per task.

    Parameters
    ----------
    tasks : list[Task]
        ``weight`` (runs per inference) and ``flop`` (per run).
    tuners : dict, optional
        ``task.key -> tuner`` (``best_config``, ``best_cost`` in seconds); default none measured.

    Returns
    -------
    np.ndarray
        Shape ``(len(tasks),)``, in [0, 1], summing to 1 (all zeros for tasks of no FLOPs and no
        measurement).
    """
    tuners = tuners or {}
    w = np.array([float(t.weight) for t in tasks])
    flop = np.array([float(t.flop) for t in tasks])
    lat = np.full(len(tasks), np.nan)
    for i, t in enumerate(tasks):
        tu = tuners.get(t.key)
        if tu is not None and tu.best_config is not None and np.isfinite(tu.best_cost) and tu.best_cost > 0:
            lat[i] = tu.best_cost
    have = np.isfinite(lat)
    if have.any() and (w[have] * lat[have]).sum() > 0 and (w[have] * flop[have]).sum() > 0:
        rate = (w[have] * flop[have]).sum() / (w[have] * lat[have]).sum()
        est = np.where(have, lat, flop / rate)
    else:
        est = flop
    cost = w * np.nan_to_num(est)
    total = cost.sum()
    return cost / total if total > 0 else np.zeros(len(tasks))
