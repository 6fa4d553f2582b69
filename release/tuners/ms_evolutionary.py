"""MetaSchedule's evolutionary search as a comparator tuner, on our measurement and log format.

``release tune --tuner ms-evolutionary`` drives TVM's own ``EvolutionarySearch`` (the search of
``tune_tir``) with its own ``XGBModel`` cost model (per-store features) and a ``MemoryDatabase``,
exactly as MetaSchedule's task scheduler does, except that candidates are measured by
:class:`release.measure.Measurer` (same builder, runner and JSON-lines records as every tuner):

1. ``next_batch``: if no generation is pending, ``generate_measure_candidates()`` gives one
   generation (``num_trials_per_iter`` schedules, default 64 as in ``tune_tir``); each
   candidate's trace maps to a config with ``KnobSpace.from_trace`` and is handed out in order.
2. ``update``: results are collected; once every candidate of the generation has one, the
   strategy gets ``notify_runner_results``, successful ones are committed to the database
   (failures as 1e10 s, MetaSchedule's ``AddToDatabase`` rule) and the cost model is updated
   (``XGBModel.update``), in the order of MetaSchedule's measure callbacks.

Faithful to MetaSchedule: population 512, init_measured_ratio 0.2, 4 genetic iterations,
mutation probability 0.85, eps-greedy 0.05; the XGBModel predicts random scores until it has
100 samples. One change keeps the search in the same knob space as the other tuners:
``MutateParallel`` (which rewrites the parallel-extent *instruction*, not a sampling decision) is
left out of the llvm mutators and the remaining probabilities are used as given (MetaSchedule
normalizes them). A candidate whose trace maps to no config is reported to the strategy as
failed and not measured: on resnet18.conv2d.2, 3 of 192 candidates chose a compute location the
knob space's probing had not enumerated (``KnobSpace`` finds legal locations by probing replays).

With ``knowledge=`` (a fair comparison: MetaSchedule given the same records through its
database) the tuner first measures the same transfer-tuning seeds the model-based tuners measure
(:func:`release.knowledge.use.knowledge_seeds`) and commits them to its database and cost model
before the search starts, so ``EvolutionarySearch`` takes them into its initial population
(``init_measured_ratio``: the best measured records of *this* workload). Records of other
workloads committed as they are would never be read: MetaSchedule's evolutionary search and
``tune_tasks`` draw only on the database's top records of the workload being tuned, and its
XGBModel is trained on the run's own measurements.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..errors import InvalidConfigError, TunerError
from ..measure.measure import ErrorKind, MeasureResult
from .tuner import KnowledgeRead, Tuner

logger = logging.getLogger(__name__)

FAILED_COST = 1e10  # seconds, what MetaSchedule's database stores for a failed measurement


@dataclass
class MSEvolutionaryParams:
    """``EvolutionarySearch`` defaults of TVM 0.27 and ``tune_tir``'s trials per iteration."""

    num_trials_per_iter: int = 64
    """Candidates per generation (``tune_tir``'s ``num_trials_per_iter``)."""
    population_size: int = 512
    """Population of the evolutionary search."""
    init_measured_ratio: float = 0.2
    """Share of the initial population taken from the best measured records."""
    init_min_unmeasured: int = 50
    """Minimum number of freshly sampled traces in the initial population."""
    max_fail_count: int = 5
    """Retries of initial sampling."""
    genetic_num_iters: int = 4
    """Evolution rounds per generation."""
    genetic_mutate_prob: float = 0.85
    """Probability of mutating a trace."""
    genetic_max_fail_count: int = 10
    """Retries of a failed mutation."""
    eps_greedy: float = 0.05
    """Share of random (not model-picked) candidates."""


class MSEvolutionaryTuner(Tuner):
    """MetaSchedule ``EvolutionarySearch`` + ``XGBModel`` behind the AutoTVM tuner API.

    Parameters
    ----------
    task : release.task.Task
    num_trials_per_iter : int
        Candidates per generation (default 64). ``plan_size`` is accepted as an alias (CLI
        ``--plan-size``).
    population_size, init_measured_ratio, genetic_num_iters, genetic_mutate_prob, eps_greedy
        See :class:`MSEvolutionaryParams` (MetaSchedule's defaults).
    num_threads : int, optional
        Threads of the search and of the XGBoost model (default None:
        :func:`release.threads.search_threads`, the one setting of every tuner's search, 1 unless
        ``RELEASE_SEARCH_THREADS`` is set; MetaSchedule's own default is all cores).
    seed : int, optional
        Seed of MetaSchedule's random state (``rand_state = seed + 1``; None: MetaSchedule's
        ``-1``, seeded from the clock).
    plan_size : int, optional
        Alias of ``num_trials_per_iter``.
    knowledge : str, PathLike, KnowledgeBase, list of Record or None
        A knowledge base (:func:`release.knowledge.use.knowledge_records`; default None: a cold
        start). Its transfer-tuning seeds are measured first and handed to the search through its
        database (see the module's docstring); :attr:`knowledge_read` says what was read (records,
        workloads, machines, the workloads the seeds came from).
    n_seeds : int, optional
        At most this many seeds (default ``num_trials_per_iter // 2``: 32, the model-based tuners'
        share of their first round).

    Raises
    ------
    TunerError
        ``num_trials_per_iter < 1`` or ``population_size < 1``.
    KnowledgeError
        ``knowledge`` names a file or a base of an unreadable format version.
    """

    name = "ms-evolutionary"
    knowledge_uses = ("seeds",)

    def __init__(self, task, num_trials_per_iter: int = 64, population_size: int = 512,
                 init_measured_ratio: float = 0.2, genetic_num_iters: int = 4, genetic_mutate_prob: float = 0.85,
                 eps_greedy: float = 0.05, num_threads: int | None = None, seed: int | None = None,
                 plan_size: int | None = None, knowledge=None, n_seeds: int | None = None):
        super().__init__(task, seed=seed)
        if plan_size is not None:
            num_trials_per_iter = plan_size
        if not isinstance(num_trials_per_iter, (int, np.integer)) or num_trials_per_iter < 1:
            raise TunerError(f"num_trials_per_iter (plan size) = {num_trials_per_iter!r} must be an integer >= 1")
        if not isinstance(population_size, (int, np.integer)) or population_size < 1:
            raise TunerError(f"population_size={population_size!r} must be an integer >= 1 (MetaSchedule: 512)")
        self.params = MSEvolutionaryParams(num_trials_per_iter=int(num_trials_per_iter),
                                           population_size=int(population_size),
                                           init_measured_ratio=float(init_measured_ratio),
                                           genetic_num_iters=int(genetic_num_iters),
                                           genetic_mutate_prob=float(genetic_mutate_prob), eps_greedy=float(eps_greedy))
        if num_threads is None:
            from ..threads import search_threads

            num_threads = search_threads()
        self.num_threads = int(num_threads)
        self.rand_state = int(seed) + 1 if seed is not None else -1
        self._ctx = None
        self.database = None
        self.cost_model = None
        self._done = False
        self._gen: list = []          # [(candidate, config or None)] of the pending generation
        self._gen_pt = 0
        self._outcome: dict[tuple, object] = {}  # config -> RunnerResult (every config measured or resumed)
        self._resumed: list = []      # (config, MeasureResult) learned before the strategy starts
        self.generations = 0
        self.unmapped = 0
        self.seeds: list[tuple] = []
        if knowledge is not None and knowledge is not False:
            from ..knowledge.use import knowledge_records, knowledge_seeds

            n = self.params.num_trials_per_iter // 2 if n_seeds is None else int(n_seeds)
            records = knowledge_records(knowledge, task, best=max(1, n))  # seeds: each workload's best only
            sources: list = []
            if records and n > 0:
                self.seeds = knowledge_seeds(task, records, n, seed=seed or 0, sources=sources)
            self.knowledge_read = KnowledgeRead.of(records, sources)
        self._seed_pt = 0

    # ------------------------------------------------------------------ MetaSchedule set-up
    def _setup(self) -> None:
        from tvm.s_tir import meta_schedule as ms

        # the task's creation registered the target's tensor intrinsics (Task.__init__)
        kind = "cuda" if self.task.target.kind.name == "cuda" else "llvm"
        probs = {m: p for m, p in ms.mutator.Mutator.create(kind).items()
                 if "MutateParallel" not in type(m).__name__}
        p = self.params
        strategy = ms.search_strategy.EvolutionarySearch(
            population_size=p.population_size, init_measured_ratio=p.init_measured_ratio,
            init_min_unmeasured=p.init_min_unmeasured, max_fail_count=p.max_fail_count,
            genetic_num_iters=p.genetic_num_iters, genetic_mutate_prob=p.genetic_mutate_prob,
            genetic_max_fail_count=p.genetic_max_fail_count, eps_greedy=p.eps_greedy)
        self._ctx = ms.TuneContext(
            mod=self.task.mod, target=self.task.target,
            space_generator=ms.space_generator.PostOrderApply(mutator_probs=probs),
            search_strategy=strategy, task_name=self.task.name, rand_state=self.rand_state,
            num_threads=self.num_threads)
        self.database = ms.database.MemoryDatabase()
        self._workload = self.database.commit_workload(self.task.mod)
        self.cost_model = ms.cost_model.XGBModel(num_tuning_cores=self.num_threads)
        self._ms_cost_model = self.cost_model  # keep the Python object (the strategy sees an FFI handle)
        if self._resumed:
            cands = []
            results = []
            for config, res in self._resumed:
                try:
                    sch = self.space.apply(config)
                except InvalidConfigError:
                    continue
                cands.append(self._candidate(sch))
                results.append(self._runner_result(res))
            self._commit(cands, results)
            if cands:
                self.cost_model.update(self._ctx, cands, results)
            logger.info("%s: ms-evolutionary committed %d measured records (resumed or seeds) to its database "
                        "and cost model", self.task.name, len(cands))
        self._ctx.pre_tuning(max_trials=2**30, num_trials_per_iter=p.num_trials_per_iter,
                             design_spaces=self._ctx.generate_design_space(), database=self.database,
                             cost_model=self.cost_model)

    @staticmethod
    def _candidate(sch):
        from tvm.s_tir import meta_schedule as ms
        from tvm.s_tir.meta_schedule.arg_info import ArgInfo

        return ms.MeasureCandidate(sch, ArgInfo.from_entry_func(sch.mod, remove_preproc=True))

    @staticmethod
    def _runner_result(res: MeasureResult):
        from tvm.s_tir.meta_schedule.runner import RunnerResult

        if res.ok:
            return RunnerResult(run_secs=[float(c) for c in res.costs], error_msg=None)
        return RunnerResult(run_secs=None, error_msg=res.error_msg or res.error_kind or "failed")

    def _commit(self, cands, results) -> None:
        from tvm.s_tir.meta_schedule.database import TuningRecord

        for cand, rr in zip(cands, results):
            secs = [float(s) for s in rr.run_secs] if rr.run_secs is not None else [FAILED_COST]
            self.database.commit_tuning_record(TuningRecord(
                cand.sch.trace, self._workload, secs, self.task.target, cand.args_info))

    # ------------------------------------------------------------------ one generation
    def _new_generation(self) -> None:
        if self._ctx is None:
            self._setup()
        cands = self._ctx.generate_measure_candidates()
        if cands is None:
            logger.info("%s: MetaSchedule's evolutionary search has no more candidates", self.task.name)
            self._done = True
            self._gen = []
            return
        gen = []
        for cand in cands:
            try:
                config = self._config_of(cand.sch.trace)
            except InvalidConfigError as err:
                self.unmapped += 1
                logger.warning("%s: a MetaSchedule candidate is not in the knob space (%s); reported as failed",
                               self.task.name, err.reason)
                config = None
            gen.append((cand, config))
        self._gen, self._gen_pt = gen, 0
        self.generations += 1

    def _config_of(self, trace) -> tuple:
        """Config of a MetaSchedule candidate's (simplified) trace: ``KnobSpace.from_trace``.

        Raises
        ------
        InvalidConfigError
            No design space matches, or a decision is not a legal choice.
        """
        return self.space.from_trace(trace)

    def _finish_generation(self) -> None:
        from tvm.s_tir.meta_schedule.runner import RunnerResult

        cands, results = [], []
        for cand, config in self._gen:
            rr = self._outcome.get(config) if config is not None else None
            if rr is None:
                rr = RunnerResult(run_secs=None, error_msg="not measured: not a config of the knob space")
            cands.append(cand)
            results.append(rr)
        self._ctx.notify_runner_results(cands, results)
        self._commit(cands, results)
        self.cost_model.update(self._ctx, cands, results)
        self._gen, self._gen_pt = [], 0

    def _pending(self) -> bool:
        return any(c is not None and c not in self._outcome for _, c in self._gen)

    # ------------------------------------------------------------------ Tuner hooks
    def has_next(self) -> bool:
        return not self._done and super().has_next()

    def next_batch(self, batch_size: int) -> list[tuple]:
        out: list[tuple] = []
        if self._ctx is None:  # transfer-tuning seeds first: their results reach the database at set-up
            while self._seed_pt < len(self.seeds) and len(out) < batch_size:
                config = self.seeds[self._seed_pt]
                self._seed_pt += 1
                if config not in self._outcome and config not in self.visited and config not in out:
                    out.append(config)
            if out:
                return out
        for _ in range(4):  # a generation whose configs were all measured before needs no batch
            if not self._gen:
                self._new_generation()
                if self._done:
                    return out
            while len(out) < batch_size and self._gen_pt < len(self._gen):
                _, config = self._gen[self._gen_pt]
                self._gen_pt += 1
                if config is not None and config not in self._outcome and config not in self.visited \
                        and config not in out:
                    out.append(config)
            if out:
                return out
            if not self._pending():
                self._finish_generation()
        return out

    def update(self, configs: Sequence[tuple], results: Sequence[MeasureResult]) -> None:
        for res in results:
            config = tuple(res.config)
            if self._ctx is None:
                self._resumed.append((config, res))
            self._outcome[config] = self._runner_result(res)
        if self._gen and self._gen_pt >= len(self._gen) and not self._pending():
            self._finish_generation()
