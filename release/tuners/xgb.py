"""AutoTVM's ``XGBTuner``: simulated annealing over an XGBoost cost model, in AutoTVM's loop.

``XGBTuner(task)`` = :class:`release.tuners.model_based.ModelBasedTuner` +
:class:`release.cost_model.XGBoostCostModel` + :class:`release.tuners.sa.SimulatedAnnealingOptimizer`,
with AutoTVM's defaults (``plan_size=64, feature_type="itervar", loss_type="reg", optimizer="sa"``).
"""

from __future__ import annotations

import logging

from .model_based import ModelBasedTuner
from .presets import OPTIMIZERS, preset

logger = logging.getLogger(__name__)


def resolve_sampler(sampler):
    """``None``, a :class:`release.sampling.Sampler`, or ``"adaptive"`` (Chameleon's adaptive
    sampling, :class:`release.sampling.AdaptiveSampler` with the default seed 0).

    Raises
    ------
    TunerError
        Unknown string, or an object that is not a :class:`release.sampling.Sampler`.
    """
    from ..errors import TunerError
    from ..sampling import AdaptiveSampler, Sampler

    if sampler is None or isinstance(sampler, Sampler):
        return sampler
    if sampler == "adaptive":
        return AdaptiveSampler()
    raise TunerError(f"unknown sampler {sampler!r}; choose 'adaptive', None (measure the whole plan) "
                     "or pass a release.sampling.Sampler")


class XGBTuner(ModelBasedTuner):
    """AutoTVM's ``XGBTuner`` on a MetaSchedule knob space: the ``xgb`` preset of
    :mod:`release.tuners.presets`.

    Each round (``plan_size`` measurements): refit the XGBoost cost model on every measured
    config (failed ones as 0), run simulated annealing for the ``plan_size`` unvisited configs
    with the highest predicted score, measure them (the last 5% replaced by random configs).
    The first round measures random configs (no model yet).

    Parameters
    ----------
    task : release.task.Task
    plan_size : int
        Configs per round and ``n`` of the cost model's ``recall@n`` early stopping (default 64).
    feature_type : str
        ``"itervar"`` (default; scheduled-program features used to re-rank the annealing's top
        configs, knob features inside the annealing, see :mod:`release.cost_model.xgb`) or
        ``"knob"``.
    loss_type : str
        ``"reg"`` (default) or ``"rank"``.
    optimizer : str or ModelOptimizer
        ``"sa"`` (default, :class:`release.optimizers.SimulatedAnnealingOptimizer` with AutoTVM's
        defaults), ``"ppo"``, or a :class:`release.optimizers.ModelOptimizer`.
    diversity_filter_ratio : float, optional
        Ask for ``plan_size * ratio`` candidates and keep a diverse ``plan_size`` (AutoTVM).
    sampler : None, "adaptive" or Sampler
        What to measure from the plan (None: all of it; ``"adaptive"``: Chameleon's adaptive
        sampling, seeded from ``seed`` as in ``sa-as``).
    num_threads : int, optional
        XGBoost threads (default None: :func:`release.threads.search_threads`, 1 unless
        ``RELEASE_SEARCH_THREADS`` is set; AutoTVM used all cores).
    seed : int, optional
        Seed of the random configs; the parts' seeds derive from it
        (:func:`release.tuners.presets.child_seed`).
    knowledge : str, KnowledgeBase or list of Record, optional
        Start warm from a knowledge base's records of this target, as ``knowledge_use`` says
        (default: transfer-tuning seeds measured first). None (default): AutoTVM's cold start.
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

    Raises
    ------
    TunerError
        Unknown feature type, loss type, optimizer or sampler; ``plan_size < 1``;
        ``diversity_filter_ratio < 1``.
    """

    name = "xgb"
    preset = "xgb"

    def __init__(self, task, plan_size: int = 64, feature_type: str = "itervar", loss_type: str = "reg",
                 optimizer="sa", diversity_filter_ratio: float | None = None, sampler=None,
                 num_threads: int | None = None, seed: int | None = None, log_interval: int = 50,
                 knowledge=None, local_search=False, knowledge_use: str = "seeds",
                 seed_explore: float = 0.25, warm_explore: float = 0.5):
        cfg = preset(self.preset, plan_size=plan_size, feature_type=feature_type, loss_type=loss_type,
                     optimizer=optimizer, sampler=sampler, diversity_filter_ratio=diversity_filter_ratio,
                     num_threads=num_threads, knowledge=knowledge, local_search=local_search,
                     knowledge_use=knowledge_use, seed_explore=seed_explore, warm_explore=warm_explore)
        self._build(task, cfg, seed)
        self.feature_type, self.loss_type = feature_type, loss_type
        self.log_interval = log_interval  # kept for AutoTVM compatibility (logging is through `logging`)


__all__ = ["XGBTuner", "resolve_sampler", "OPTIMIZERS"]
