"""AutoTVM's ``XGBTuner``: simulated annealing over an XGBoost cost model, in AutoTVM's loop.

``XGBTuner(task)`` = :class:`release.tuners.model_based.ModelBasedTuner` +
:class:`release.cost_model.XGBoostCostModel` + :class:`release.tuners.sa.SimulatedAnnealingOptimizer`,
with AutoTVM's defaults (``plan_size=64, feature_type="itervar", loss_type="reg", optimizer="sa"``).
"""

from __future__ import annotations

import logging

import numpy as np

from ..cost_model import XGBoostCostModel, check_feature_type, check_loss_type
from ..errors import TunerError
from .model_based import ModelBasedTuner
from .sa import SimulatedAnnealingOptimizer

logger = logging.getLogger(__name__)

OPTIMIZERS = ("sa",)


def resolve_sampler(sampler):
    """``None``, an object with ``sample(candidates, space, visited, plan_size)``, or ``"adaptive"``
    (Chameleon's adaptive sampling, ``release.sampling.AdaptiveSampler``, imported on demand).

    Raises
    ------
    TunerError
        Unknown string, an object without ``sample``, or adaptive sampling not installed.
    """
    if sampler is None or hasattr(sampler, "sample"):
        return sampler
    if sampler == "adaptive":
        try:
            from ..sampling import AdaptiveSampler
        except ImportError as err:
            raise TunerError(f"adaptive sampling is not available in this installation ({err}); "
                             "use sampler=None") from None
        return AdaptiveSampler()
    raise TunerError(f"sampler={sampler!r} is not a sampler: give None, 'adaptive' or an object with a "
                     "sample(candidates, space, visited, plan_size) method")


class XGBTuner(ModelBasedTuner):
    """AutoTVM's ``XGBTuner`` on a MetaSchedule knob space.

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
        ``"sa"`` (default, :class:`SimulatedAnnealingOptimizer` with AutoTVM's defaults) or an
        object with ``find_maximums(model, num, exclusive)``.
    diversity_filter_ratio : float, optional
        Ask for ``plan_size * ratio`` candidates and keep a diverse ``plan_size`` (AutoTVM).
    sampler : None, "adaptive" or Sampler
        What to measure from the plan (None: all of it; ``"adaptive"``: Chameleon's adaptive
        sampling from ``release.sampling``).
    num_threads : int, optional
        XGBoost threads (default 1).
    seed : int, optional
        Seed of the random configs, the annealing and the cost model.

    Raises
    ------
    TunerError
        Unknown feature type, loss type, optimizer or sampler; ``plan_size < 1``;
        ``diversity_filter_ratio < 1``.
    """

    name = "xgb"

    def __init__(self, task, plan_size: int = 64, feature_type: str = "itervar", loss_type: str = "reg",
                 optimizer="sa", diversity_filter_ratio: float | None = None, sampler=None,
                 num_threads: int | None = None, seed: int | None = None, log_interval: int = 50):
        check_feature_type(feature_type)
        check_loss_type(loss_type)
        if not isinstance(plan_size, (int, np.integer)) or isinstance(plan_size, bool) or plan_size < 1:
            raise TunerError(f"plan_size={plan_size!r} must be an integer >= 1 (AutoTVM's default is 64)")
        sub = np.random.SeedSequence(seed).spawn(2) if seed is not None else [None, None]
        model_seed = int(sub[0].generate_state(1)[0]) if seed is not None else None
        sa_seed = int(sub[1].generate_state(1)[0]) if seed is not None else None
        cost_model = XGBoostCostModel(task, feature_type=feature_type, loss_type=loss_type,
                                      num_threads=num_threads, seed=model_seed)
        if isinstance(optimizer, str):
            if optimizer not in OPTIMIZERS:
                raise TunerError(f"unknown optimizer {optimizer!r}; choose one of: {', '.join(OPTIMIZERS)} "
                                 "or pass an object with find_maximums(model, num, exclusive)")
            optimizer = SimulatedAnnealingOptimizer(task, seed=sa_seed)
        elif not hasattr(optimizer, "find_maximums"):
            raise TunerError(f"optimizer {optimizer!r} has no find_maximums(model, num, exclusive) method")
        super().__init__(task, cost_model, optimizer, plan_size=int(plan_size),
                         diversity_filter_ratio=diversity_filter_ratio, sampler=resolve_sampler(sampler), seed=seed)
        self.feature_type, self.loss_type = feature_type, loss_type
        self.log_interval = log_interval  # kept for AutoTVM compatibility (logging is through `logging`)
