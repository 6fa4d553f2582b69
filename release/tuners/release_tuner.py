"""``ReleaseTuner``: Chameleon (PPO agent + adaptive sampling) as a drop-in AutoTVM tuner.

The four variants of the paper's ablation (Ahn et al., ICLR 2020, section 6) and our ``release+``
are presets of one composed tuner (:class:`release.tuners.model_based.ModelBasedTuner`; recipes in
:mod:`release.tuners.presets`); the classes below only pick the recipe and keep the public names:

=====================  ============  ==========================
class                  ``tune``      search / sampling
=====================  ============  ==========================
``XGBTuner``           ``xgb``       SA, measure the whole plan
``RLTuner``            ``rl``        PPO, whole plan
``SAASTuner``          ``sa-as``     SA + adaptive sampling
``ReleaseTuner``       ``release``   PPO + adaptive sampling (Chameleon)
``ReleasePlusTuner``   ``release+``  PPO (our settings) + adaptive sampling
=====================  ============  ==========================

All share AutoTVM's loop: XGBoost cost model, ``plan_size`` candidates per round,
epsilon-greedy random picks. With adaptive sampling the model is refit after each round's
``k`` measurements (8-64) instead of after a fixed ``plan_size``.
"""

from __future__ import annotations

import logging

from ..errors import TunerError
from .model_based import ModelBasedTuner
from .presets import OPTIMIZERS, preset
from .xgb import XGBTuner

logger = logging.getLogger(__name__)

SAMPLERS = ("adaptive", None)


class ReleaseTuner(ModelBasedTuner):
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
        ``"ppo"`` (default: :class:`release.optimizers.RLOptimizer`), ``"sa"`` (AutoTVM's simulated
        annealing) or a :class:`release.optimizers.ModelOptimizer`.
    sampler : str, None or Sampler
        ``"adaptive"`` (default: :class:`release.sampling.AdaptiveSampler`), None (measure the
        whole plan) or a :class:`release.sampling.Sampler`.
    feature_type, loss_type : str
        Cost model (see :class:`release.cost_model.XGBoostCostModel`); defaults as ``XGBTuner``
        (``"itervar"``, ``"reg"``) so the ablation compares search methods on the same model.
    ppo_config : release.rl.PPOConfig, optional
        Agent hyperparameters (default: the authors').
    start_from_measured : float, optional
        Fraction of the agent's episodes started at the best measured configs (default: the
        preset's; 0 for ``release``, the paper; 0.5 for ``release+``).
    min_queries : int, optional
        Agent rounds per search call continue until this many reward queries (default: the
        preset's; 0 for ``release``, one round as in the paper; 16,000 for ``release+``). See
        :class:`release.optimizers.RLOptimizer`.
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
    knowledge : str, KnowledgeBase or list of Record, optional
        Start warm from a knowledge base's records of this target, as ``knowledge_use`` says
        (default: transfer-tuning seeds measured first). None (default): cold.
    knowledge_use : str
        How ``knowledge`` is used (:data:`release.tuners.presets.KNOWLEDGE_USES`): ``"seeds"``
        (default) the best configs of the knowledge's workloads carried into this space are
        measured first (transfer-tuning), with the task's own cost model
        (:func:`release.knowledge.use.knowledge_seeds`); ``"model"`` the transferred cost model.
    local_search : bool or LocalSearchConfig
        Droplet-style local phase once the best stops improving (:mod:`release.tuners.local`;
        default False).
    seed_explore, warm_explore : float
        Random shares beside transfer-tuning seeds and in the first warm round (defaults 0.25 and
        0.5; :class:`release.tuners.model_based.ModelBasedTuner`).

    Notes
    -----
    Agent checkpoints: when :meth:`tune` runs with a log (``log_to_file``), the agent is saved after
    every search call to ``<log without .jsonl>.agents/<task>.<hash>.agent.pt`` (see
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
    preset = "release"
    #: ours start warm from the default knowledge base (release+ measured on held-out layers:
    #: benchmarks/results/knowledge/holdout/; release and rl share its agent and seeds)
    warm_by_default = True

    def __init__(self, task, plan_size: int = 64, optimizer="ppo", sampler="adaptive",
                 feature_type: str = "itervar", loss_type: str = "reg", ppo_config=None,
                 start_from_measured: float | None = None, min_queries: int | None = None,
                 diversity_filter_ratio: float | None = None,
                 num_threads: int | None = None, seed: int | None = None, log_interval: int = 50,
                 warm_start=None, knowledge=None, local_search=False, knowledge_use: str = "seeds",
                 seed_explore: float = 0.25, warm_explore: float = 0.5):
        task.config_space  # noqa: B018 - raises SpaceError for a space without knobs
        over = dict(plan_size=plan_size, optimizer=optimizer, sampler=sampler, feature_type=feature_type,
                    loss_type=loss_type, ppo=ppo_config, diversity_filter_ratio=diversity_filter_ratio,
                    num_threads=num_threads, knowledge=knowledge, local_search=local_search,
                    knowledge_use=knowledge_use, seed_explore=seed_explore, warm_explore=warm_explore)
        if start_from_measured is not None:
            over["start_from_measured"] = start_from_measured
        if min_queries is not None:
            over["min_queries"] = min_queries
        cfg = preset(self.preset, **over)
        self._build(task, cfg, seed)
        self.feature_type, self.loss_type = feature_type, loss_type
        self.log_interval = log_interval
        if warm_start is not None:
            if not self.model_optimizer.keeps_state:
                raise TunerError("warm_start needs the PPO agent (optimizer='ppo'); this tuner has no agent")
            self.model_optimizer.load(warm_start, same_space=False)
            logger.info("%s: agent warm-started from %s", task.name,
                        warm_start if not isinstance(warm_start, dict) else "a state dict")


class RLTuner(ReleaseTuner):
    """The PPO agent without adaptive sampling (the paper's "RL" ablation): the ``rl`` preset,
    ``ReleaseTuner(task, sampler=None)``."""

    name = "rl"
    preset = "rl"

    def __init__(self, task, sampler=None, **kwargs):
        super().__init__(task, sampler=sampler, **kwargs)


class ReleasePlusTuner(ReleaseTuner):
    """ReleaseTuner with our search improvements (``release tune --tuner release+``): the
    ``release+`` preset.

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
    preset = "release+"


class SAASTuner(XGBTuner):
    """Simulated annealing with adaptive sampling (the paper's "SA+AS"): the ``sa-as`` preset,
    ``XGBTuner(task, sampler="adaptive")``."""

    name = "sa-as"
    preset = "sa-as"

    def __init__(self, task, sampler="adaptive", **kwargs):
        super().__init__(task, sampler=sampler, **kwargs)
