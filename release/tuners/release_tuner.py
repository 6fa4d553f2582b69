"""``ReleaseTuner``: Chameleon (PPO agent + adaptive sampling) as a drop-in AutoTVM tuner.

The four variants of the paper's ablation (Ahn et al., ICLR 2020, section 6) are one class each:

============================================  =========  ==========================
class                                         ``tune``   search / sampling
============================================  =========  ==========================
``XGBTuner(task)``                            ``xgb``    SA, measure the whole plan
``RLTuner(task)`` = ``ReleaseTuner(task, sampler=None)``  ``rl``  PPO, whole plan
``SAASTuner(task)`` = ``XGBTuner(task, sampler="adaptive")``  ``sa-as``  SA + adaptive sampling
``ReleaseTuner(task)``                        ``release``  PPO + adaptive sampling (Chameleon)
============================================  =========  ==========================

All share AutoTVM's loop (:class:`release.tuners.model_based.ModelBasedTuner` via
:class:`release.tuners.xgb.XGBTuner`): XGBoost cost model, ``plan_size`` candidates per round,
epsilon-greedy random picks. With adaptive sampling the model is refit after each round's
``k`` measurements (8-64) instead of after a fixed ``plan_size``.
"""

from __future__ import annotations

import logging
import os
from typing import Sequence

import numpy as np

from ..errors import TunerError
from ..measure.measure import MeasureResult
from .xgb import XGBTuner

logger = logging.getLogger(__name__)

OPTIMIZERS = ("ppo", "sa")
SAMPLERS = ("adaptive", None)


def _seeds(seed: int | None, n: int) -> list[int | None]:
    if seed is None:
        return [None] * n
    return [int(s.generate_state(1)[0]) for s in np.random.SeedSequence([seed, 4]).spawn(n)]


class ReleaseTuner(XGBTuner):
    """Chameleon / ReLeASE: a PPO agent explores the knob space on the cost model's predictions,
    adaptive sampling picks what to measure.

    Parameters
    ----------
    task : release.task.Task
        The task; its knob space must have at least one knob.
    plan_size : int
        Candidates the optimizer proposes per round, and the largest k of adaptive sampling
        (default 64, the paper's).
    optimizer : str or ModelOptimizer
        ``"ppo"`` (default: :class:`release.rl.RLOptimizer`), ``"sa"`` (AutoTVM's simulated
        annealing) or an object with ``find_maximums(model, num, exclusive)``.
    sampler : str, None or Sampler
        ``"adaptive"`` (default: :class:`release.sampling.AdaptiveSampler`), None (measure the
        whole plan) or an object with ``sample(candidates, space, visited, plan_size)``.
    feature_type, loss_type : str
        Cost model (see :class:`release.cost_model.XGBoostCostModel`); defaults as ``XGBTuner``
        (``"itervar"``, ``"reg"``) so the ablation compares search methods on the same model.
    ppo_config : release.rl.PPOConfig, optional
        Agent hyperparameters (default: the authors').
    start_from_measured : float
        Fraction of the agent's episodes started at the best measured configs (default 0, the
        paper; our variant ``release+`` in benchmarks/ablation: 0.5).
    min_queries : int
        Agent rounds per search call continue until this many reward queries (default 0: one
        round, the paper; ``release+``: 16,000). See :class:`release.rl.RLOptimizer`.
    diversity_filter_ratio : float, optional
        As ``XGBTuner``.
    num_threads : int, optional
        XGBoost threads (default 1).
    seed : int, optional
        Seed of every random choice (random configs, cost model, agent, k-means).
    warm_start : str, path or dict, optional
        Start the agent from another task's agent (a ``*.agent.pt`` checkpoint or a
        ``PPOAgent.state_dict()``): networks only, the task must have as many knobs (same operator
        and schedule rule). Ignored when this task's own checkpoint is resumed (below). Measured on
        resnet18.conv2d.2 -> .6 (release+, 3 seeds, 256 trials) it did not help: 0.88x the fresh agent's
        best GFLOPS (``benchmarks/warm_start/``), so it is off by default.

    Notes
    -----
    Agent checkpoints: when :meth:`tune` runs with a log (``log_to_file``), the agent is saved after
    every search call to ``<log without .jsonl>.<task hash>.agent.pt`` (see
    :func:`release.rl.agent_checkpoint_path`) and reloaded from there when the run is resumed, so a
    killed or extended run continues with the agent it had, not a fresh one (the records alone
    rebuild the cost model, not the agent). A checkpoint that does not fit is ignored with a warning.

    Raises
    ------
    TunerError
        Unknown optimizer or sampler (the message lists the choices), bad plan size, feature or
        loss type; a ``warm_start`` that is missing, unreadable or for a space with another knob
        count, or given without the PPO optimizer.
    SpaceError
        The task's space has no knob to tune.

    Examples
    --------
    >>> tuner = ReleaseTuner(task)                                  # doctest: +SKIP
    >>> tuner.tune(512, measure_option(), callbacks=[log_to_file("t.jsonl")])  # doctest: +SKIP
    """

    name = "release"

    def __init__(self, task, plan_size: int = 64, optimizer="ppo", sampler="adaptive",
                 feature_type: str = "itervar", loss_type: str = "reg", ppo_config=None,
                 start_from_measured: float = 0.0, min_queries: int = 0,
                 diversity_filter_ratio: float | None = None,
                 num_threads: int | None = None, seed: int | None = None, log_interval: int = 50,
                 warm_start=None):
        space = task.config_space  # raises SpaceError for a space without knobs
        rl_seed, as_seed = _seeds(seed, 2)
        if isinstance(optimizer, str) or optimizer is None:
            if optimizer == "ppo":
                from ..rl import RLOptimizer

                optimizer = RLOptimizer(space, ppo_config, seed=rl_seed, start_from_measured=start_from_measured,
                                        min_queries=min_queries)
            elif optimizer != "sa":
                raise TunerError(f"unknown optimizer {optimizer!r}; choose one of: {', '.join(OPTIMIZERS)} "
                                 "or pass an object with find_maximums(model, num, exclusive)")
        if isinstance(sampler, str):
            if sampler != "adaptive":
                raise TunerError(f"unknown sampler {sampler!r}; choose 'adaptive', None (measure the whole plan) "
                                 "or pass an object with sample(candidates, space, visited, plan_size)")
            from ..sampling import AdaptiveSampler

            sampler = AdaptiveSampler(seed=as_seed if as_seed is not None else 0)
        super().__init__(task, plan_size=plan_size, feature_type=feature_type, loss_type=loss_type,
                         optimizer=optimizer, diversity_filter_ratio=diversity_filter_ratio, sampler=sampler,
                         num_threads=num_threads, seed=seed, log_interval=log_interval)
        self.agent_checkpoint: str | None = None
        if warm_start is not None:
            if not hasattr(self.model_optimizer, "load"):
                raise TunerError("warm_start needs the PPO agent (optimizer='ppo'); this tuner has no agent")
            self.model_optimizer.load(warm_start, same_space=False)
            logger.info("%s: agent warm-started from %s", task.name,
                        warm_start if not isinstance(warm_start, dict) else "a state dict")

    def attach_log(self, path: str) -> None:
        """Keep the agent beside the log ``path``; resume it from there if a checkpoint exists."""
        if not hasattr(self.model_optimizer, "save"):
            return
        from ..rl import agent_checkpoint_path

        ckpt = agent_checkpoint_path(path, self.task.key)
        if ckpt == self.agent_checkpoint:
            return  # tune() called again on the same log (tune-model's chunks): the agent is already current
        self.agent_checkpoint = ckpt
        if os.path.exists(ckpt):
            try:
                self.model_optimizer.load(self.agent_checkpoint, same_space=True)
            except TunerError as e:
                logger.warning("%s: agent checkpoint ignored, the agent starts fresh: %s", self.task.name, e)
            else:
                logger.info("%s: agent resumed from %s (%d rounds)", self.task.name, self.agent_checkpoint,
                            self.model_optimizer.agent.rounds)

    def update(self, configs: Sequence[tuple], results: Sequence[MeasureResult]) -> None:
        """AutoTVM's update (refit when due), then tell the optimizer the measured configs."""
        super().update(configs, results)
        if hasattr(self.model_optimizer, "observe") and self.xs:
            self.model_optimizer.observe(self.xs, self.ys)

    def _make_plan(self) -> None:
        super()._make_plan()
        if self.agent_checkpoint is not None:
            self.model_optimizer.save(self.agent_checkpoint)
        stats = getattr(self.model_optimizer, "last_stats", None)
        k = getattr(self.sampler, "last_k", None)
        if hasattr(stats, "mean_reward"):
            logger.info("%s round %d: agent reward/step %.4f, %d queries (%d distinct), plan %d, k=%s",
                        self.task.name, self.train_ct, stats.mean_reward, stats.extra.get("queries", 0),
                        stats.extra.get("distinct", 0), len(self.trials_plan), k)


class RLTuner(ReleaseTuner):
    """The PPO agent without adaptive sampling (the paper's "RL" ablation): ``ReleaseTuner(task, sampler=None)``."""

    name = "rl"

    def __init__(self, task, sampler=None, **kwargs):
        super().__init__(task, sampler=sampler, **kwargs)


class ReleasePlusTuner(ReleaseTuner):
    """ReleaseTuner with our search improvements (``release tune --tuner release+``).

    ``ReleaseTuner(task, start_from_measured=0.5, min_queries=16000,
    ppo_config=PPOConfig(boundary="pushed", max_minibatches=64))``: half of the agent's episodes
    start at the best measured configs; an episode's knob counts as settled only when it stays or
    its move is clamped (the paper also counts a knob resting at a boundary, which ends episodes
    after 5-8 steps); the agent keeps running rounds until at least 16,000 cost-model queries per
    search call (simulated annealing spends up to 64,000); at most 64 gradient steps per PPO update.
    Motivation and figures: benchmarks/ablation/search_quality.py and benchmarks/ablation/README.

    Any of the four settings can still be overridden by keyword; other arguments as ReleaseTuner.
    """

    name = "release+"

    def __init__(self, task, start_from_measured: float = 0.5, min_queries: int = 16000, ppo_config=None,
                 **kwargs):
        if ppo_config is None:
            from ..rl import PPOConfig

            ppo_config = PPOConfig(boundary="pushed", max_minibatches=64)
        super().__init__(task, start_from_measured=start_from_measured, min_queries=min_queries,
                         ppo_config=ppo_config, **kwargs)


class SAASTuner(XGBTuner):
    """Simulated annealing with adaptive sampling (the paper's "SA+AS"): ``XGBTuner(task, sampler="adaptive")``
    with the sampler seeded from ``seed``."""

    name = "sa-as"

    def __init__(self, task, sampler="adaptive", seed: int | None = None, **kwargs):
        if sampler == "adaptive":
            from ..sampling import AdaptiveSampler

            sampler = AdaptiveSampler(seed=_seeds(seed, 2)[1] if seed is not None else 0)
        super().__init__(task, sampler=sampler, seed=seed, **kwargs)
