"""``ReleaseSearchStrategy``: Chameleon's search (PPO agent + adaptive sampling) as a MetaSchedule
search strategy, so ``tune_tir`` / ``tune_relax`` users swap ``strategy="evolutionary"`` for it.

::

    from tvm.s_tir import meta_schedule as ms
    from release.strategy import ReleaseSearchStrategy, fast_builder

    db = ms.tune_tir(mod, target, work_dir, max_trials_global=512, num_trials_per_iter=64,
                     strategy=ReleaseSearchStrategy(), builder=fast_builder(target), cost_model="random")
    sch = ms.tir_integration.compile_tir(db, mod, target)

How it maps MetaSchedule's life cycle onto the AutoTVM-style :class:`release.tuners.release_tuner.ReleaseTuner`
(one instance per tuning context, built in ``pre_tuning``):

- ``pre_tuning``: a :class:`release.task.Task` from the context's module and target, its knob
  space (the same ``post-order-apply`` design spaces MetaSchedule generated), and a fresh tuner;
  records of this workload already in the database are loaded as measured (resume);
- ``generate_measure_candidates``: the tuner's session asks (:meth:`release.session.TuningSession.ask`,
  random configs until the first fit, then the agent's plan filtered by adaptive sampling), each
  replayed to a schedule with ``KnobSpace.apply`` (an invalid one is observed as such and asked
  again); ``None`` once ``max_trials`` were measured or nothing new is left;
- ``notify_runner_results``: run times become :class:`release.measure.MeasureResult` s and are told
  to the session (:meth:`release.session.TuningSession.tell`: bookkeeping, then the XGBoost model
  refits after each round's k measurements).

The MetaSchedule cost model handed to ``pre_tuning`` is not used: the agent needs ~64,000 scores
per round, which only a model over knob configs can give (see :mod:`release.cost_model.xgb`).
Pass ``cost_model="random"`` to ``tune_tir`` to skip MetaSchedule's own XGBoost updates.
"""

from __future__ import annotations

import functools
import logging

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.search_strategy import PySearchStrategy

from .errors import InvalidConfigError

logger = logging.getLogger(__name__)


from .measure._worker import ms_build as fast_build  # noqa: E402  (MetaSchedule f_build without the 45 s import)


def fast_builder(target, max_workers: int = 1, timeout_sec: float = 120.0):
    """A MetaSchedule ``LocalBuilder`` using :func:`fast_build`, with workers that register only the
    tensor intrinsics ``target`` needs (``release.target.ensure_tensor_intrinsics``)."""
    from tvm.s_tir import meta_schedule as ms

    from .measure import _worker
    from .target import ensure_tensor_intrinsics, resolve_target, target_to_json

    tgt = resolve_target(target)
    ensure_tensor_intrinsics(tgt)
    return ms.builder.LocalBuilder(f_build=fast_build, max_workers=max_workers, timeout_sec=timeout_sec,
                                   initializer=functools.partial(_worker.init_worker, target_to_json(tgt)))


@derived_object
class ReleaseSearchStrategy(PySearchStrategy):
    """Chameleon's search as a MetaSchedule ``SearchStrategy``.

    Parameters
    ----------
    plan_size : int
        Candidates per agent round and largest k of adaptive sampling (default 64).
    optimizer : str
        ``"ppo"`` (default) or ``"sa"``.
    sampler : str or None
        ``"adaptive"`` (default) or None.
    feature_type : str
        Cost model features, ``"knob"`` (default here: no replay per scored config) or ``"itervar"``.
    seed : int, optional
        Seed of every random choice.
    **tuner_kwargs
        Passed to :class:`release.tuners.release_tuner.ReleaseTuner` (``ppo_config``,
        ``start_from_measured``, ``loss_type``, ...).

    Raises
    ------
    TunerError
        Unknown optimizer, sampler or feature type, bad plan size (at construction).
    SpaceError
        In ``pre_tuning``: the workload has no knob to tune (inside ``tune_tir`` it reaches the
        caller as a ``RuntimeError`` carrying the same message).
    """

    def __init__(self, plan_size: int = 64, optimizer: str = "ppo", sampler: str | None = "adaptive",
                 feature_type: str = "knob", seed: int | None = None, **tuner_kwargs):
        from .tuners.presets import preset

        # check here, in Python: inside tune_tir an exception reaches the caller as a RuntimeError
        preset("release", plan_size=plan_size, optimizer=optimizer, sampler=sampler, feature_type=feature_type).check()
        self.kwargs = dict(plan_size=plan_size, optimizer=optimizer, sampler=sampler, feature_type=feature_type,
                           seed=seed, **tuner_kwargs)
        self.context = None
        self.tuner = None
        self.task = None
        self.max_trials = 0
        self.num_trials_per_iter = 0
        self._pending: list[tuple] = []

    # ------------------------------------------------------------------ MetaSchedule hooks
    def _initialize_with_tune_context(self, context) -> None:
        """Keep the tuning context (its module and target define the task)."""
        self.context = context

    def pre_tuning(self, max_trials: int, num_trials_per_iter: int, design_spaces, database=None,
                   cost_model=None) -> None:
        """Build the task, knob space and tuner; load this workload's records from ``database``."""
        from .task import Task
        from .tuners.release_tuner import ReleaseTuner

        ctx = self.context
        name = str(ctx.task_name) if ctx.task_name else None
        self.task = Task(ctx.mod, ctx.target, name=name)
        self.tuner = ReleaseTuner(self.task, **self.kwargs)
        self.max_trials, self.num_trials_per_iter = int(max_trials), int(num_trials_per_iter)
        self._pending = []
        if database is not None:
            self._resume(database)
        logger.info("%s: %s, %d knobs, %d trials at most, %d per iteration", self.task.name, type(self).__name__,
                    self.task.config_space.n_knobs, self.max_trials, self.num_trials_per_iter)

    def _resume(self, database) -> None:
        """Tell the session the records of this workload already in ``database``."""
        from .measure.measure import MeasureResult

        if not database.has_workload(self.context.mod):
            return
        wl = database.commit_workload(self.context.mod)
        session = self.tuner.session
        results = []
        for rec in database.get_top_k(wl, 100_000):
            try:
                c = self.task.config_space.from_trace(rec.trace)
            except InvalidConfigError:
                continue
            c = self.task.config_space.canonical(c)
            if c in session.visited:
                continue
            costs = [float(x) for x in rec.run_secs] if rec.run_secs is not None else []
            ok = costs and min(costs) < 1e9
            r = MeasureResult(config=c, costs=costs if ok else [], error_kind="" if ok else "run_error")
            session.observe(r)
            results.append(r)
        if results:
            session.tell([r.config for r in results], results, observed=True)
            logger.info("%s: resumed %d records from the database", self.task.name, len(results))

    def generate_measure_candidates(self):
        """The next batch of schedules to measure (the session's ``ask``), or None when done."""
        from tvm.s_tir.meta_schedule.arg_info import ArgInfo
        from tvm.s_tir.meta_schedule.search_strategy import MeasureCandidate

        from .measure.measure import ErrorKind, MeasureResult

        session, space = self.tuner.session, self.task.config_space
        want = min(self.num_trials_per_iter, self.max_trials - session.trials)
        if want <= 0 or not session.has_next():
            return None
        candidates, configs = [], []
        for _ in range(20):  # invalid configs are skipped (never measured); ask again for the rest
            batch = [c for c in session.ask(want - len(configs)) if c not in configs]
            if not batch:
                break
            for c in batch:
                try:
                    sch = space.apply(c)
                except InvalidConfigError as err:
                    session.observe(MeasureResult(config=c, error_kind=ErrorKind.INVALID, error_msg=err.reason))
                    continue
                configs.append(c)
                candidates.append(MeasureCandidate(sch, ArgInfo.from_entry_func(sch.mod, remove_preproc=True)))
            if len(configs) >= want:
                break
        if not candidates:
            return None
        self._pending = configs
        return candidates

    def notify_runner_results(self, measure_candidates, results) -> None:
        """Tell the session the run times of the last batch (the tuner refits its model when due)."""
        from .measure.measure import ErrorKind, MeasureResult

        out = []
        for c, res in zip(self._pending, results):
            if res.error_msg is None and res.run_secs is not None and len(res.run_secs):
                r = MeasureResult(config=c, costs=[float(x) for x in res.run_secs])
            else:
                r = MeasureResult(config=c, error_kind=ErrorKind.RUN_ERROR,
                                  error_msg=str(res.error_msg or "no result")[:500])
            out.append(r)
        self._pending = []
        self.tuner.session.tell([r.config for r in out], out)

    def post_tuning(self) -> None:
        """Log the best config found."""
        if self.tuner is not None and self.tuner.best_config is not None:
            logger.info("%s: best %.2f GFLOPS after %d trials", self.task.name, self.tuner.best_gflops,
                        self.tuner.trials)

    def clone(self) -> "ReleaseSearchStrategy":
        """A fresh strategy with the same arguments (``tune_tir`` clones one per task)."""
        return ReleaseSearchStrategy(**self.kwargs)
