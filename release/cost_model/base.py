"""The cost-model role: what a model-based tuner needs of a model that scores configs.

Life cycle inside :class:`release.tuners.model_based.ModelBasedTuner` (one round):

1. :meth:`CostModel.fit` ``(xs, ys, plan_size)`` when the training set reached the next update
   point: every measured config ``xs`` (int, shape ``(n, n_knobs)``) with its throughput ``ys``
   (FLOP/s, shape ``(n,)``; 0 for failed or invalid measurements).
2. :meth:`CostModel.predict` ``(xs)`` many times by the model optimizer (simulated annealing or
   the PPO agent: up to ~64,000 configs per round, in batches): must be fast.
3. :meth:`CostModel.rerank` ``(configs)`` once per round on the optimizer's best
   ``rerank_keep(num, ratio)`` configs: a slower, better second opinion (program features) that
   may reorder them and drop illegal ones. Optional: the default keeps ``num`` configs and
   returns them unchanged.

A model with prior knowledge (``warm`` true: :class:`release.cost_model.transfer.TransferCostModel`)
is fitted once before the first round, on no own measurement (``fit`` with empty arrays), so the
first plan comes from it instead of random configs; ``fitted`` then says whether that gave a model.

Adding a cost model is one subclass implementing :meth:`fit` and :meth:`predict`.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np


class CostModel:
    """Base class of cost models over knob configs (scikit-learn style ``fit`` / ``predict``)."""

    #: whether :meth:`rerank` does anything (the optimizer then keeps more candidates for it)
    reranks: bool = False
    #: whether the model can score configs before any own measurement (knowledge transferred)
    warm: bool = False
    #: whether a model exists (subclasses that can be unfitted override this)
    fitted: bool = True

    def fit(self, xs: np.ndarray, ys: np.ndarray, plan_size: int = 64) -> None:
        """Train on configs ``xs`` (int, shape (n, n_knobs)) and throughputs ``ys`` (FLOP/s, shape (n,)).

        ``plan_size`` is the number of configs a round proposes (a model may use it, e.g. for a
        recall@plan_size early-stopping metric). Called once per round, before the search.
        """
        raise NotImplementedError

    def predict(self, xs: np.ndarray) -> np.ndarray:
        """Scores of configs ``xs`` (int, shape (n, n_knobs)) -> float, shape (n,); higher = faster.

        Called many times per round by the model optimizer; before the first fit any constant is fine.
        """
        raise NotImplementedError

    def rerank_keep(self, num: int, ratio: float) -> int:
        """How many of its best configs an optimizer hands to :meth:`rerank` to end with ``num``:
        ``ceil(num * ratio)`` when the model re-ranks, else ``num``."""
        return int(math.ceil(num * ratio)) if self.reranks else int(num)

    def rerank(self, configs: Sequence[tuple]) -> list[tuple]:
        """Re-order the optimizer's best ``configs`` (best first) by a better estimate, dropping
        configs that are not legal programs. Default: unchanged (no-op)."""
        return list(configs)


class _PredictOnly(CostModel):
    """A plain object with ``predict(xs)`` used as a cost model that does not re-rank."""

    def __init__(self, model):
        self.model = model

    def fit(self, xs, ys, plan_size: int = 64) -> None:
        self.model.fit(xs, ys, plan_size)

    def predict(self, xs):
        return self.model.predict(xs)


def as_cost_model(model) -> CostModel:
    """``model`` if it is a :class:`CostModel`; otherwise a wrapper that uses its ``predict`` only
    (no re-rank), so synthetic scoring functions in tests and notebooks keep working."""
    return model if isinstance(model, CostModel) else _PredictOnly(model)
