"""AutoTVM's XGBoost cost model (``autotvm.tuner.xgboost_cost_model.XGBoostCostModel``) over knob configs.

What is matched (AutoTVM v0.6-v0.19, ``xgboost_cost_model.py``):

- booster parameters ``max_depth 3, gamma 1e-4, min_child_weight 1, subsample 1.0, eta 0.3,
  lambda 1, alpha 0``; objective ``reg:squarederror`` (loss ``reg``, AutoTVM's ``reg:linear``)
  or ``rank:pairwise`` (loss ``rank``);
- targets: throughput divided by the best throughput seen (``y / max(y)``); failed or invalid
  measurements enter as 0; training rows shuffled with the model's seed;
- up to 8000 boosting rounds, early stopping after 20 rounds without improvement of
  ``tr-a-recall@plan_size`` (AutoTVM's ``xgb_average_recalln_curve_score``: the mean of the recall
  curve over the first ``plan_size`` predictions, evaluated on the training set itself), keeping
  the best iteration.

Two-level scoring for the ``itervar`` feature type (our design; AutoTVM computed itervar features
for every SA step, which a MetaSchedule replay makes unaffordable: 128 chains x 500 steps = 64,000
queries per round against 8-40 ms per scheduled program here):

- :meth:`XGBoostCostModel.predict` always scores **knob features** with a booster trained on the
  same data (~10 us per config in batches of 128), so simulated annealing and the PPO agent can
  query it at every step;
- :meth:`XGBoostCostModel.predict_program` scores **program (itervar) features** with a second
  booster; features are computed once per config and cached, invalid configs score ``-inf``.
  :meth:`XGBoostCostModel.rerank` uses it to re-rank the top ``rerank_ratio * num`` configs of
  a model optimizer's search (simulated annealing or the PPO agent) before the plan is returned.

With ``feature_type="knob"`` both methods are the knob booster.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass

import numpy as np

from ..errors import TunerError
from .base import CostModel
from .features import KnobFeaturizer, ProgramFeatureCache, check_feature_type

logger = logging.getLogger(__name__)

LOSS_TYPES = ("reg", "rank")


@dataclass
class XGBParams:
    """AutoTVM's XGBoost hyperparameters (``XGBoostCostModel.__init__``)."""

    max_depth: int = 3
    """Maximum tree depth."""
    gamma: float = 1e-4
    """Minimum loss reduction to split a leaf."""
    min_child_weight: float = 1.0
    """Minimum sum of instance weight in a child."""
    subsample: float = 1.0
    """Row subsampling ratio per tree."""
    eta: float = 0.3
    """Learning rate."""
    reg_lambda: float = 1.0
    """L2 regularization (xgboost ``lambda``)."""
    alpha: float = 0.0
    """L1 regularization."""
    num_boost_round: int = 8000
    """Maximum boosting rounds per fit."""
    early_stopping_rounds: int = 20
    """Stop after this many rounds without a better ``tr-a-recall@plan_size``."""

    def booster_params(self, loss_type: str, nthread: int, seed: int) -> dict:
        """The ``params`` dict for ``xgboost.train``."""
        d = asdict(self)
        d["lambda"] = d.pop("reg_lambda")
        d.pop("num_boost_round")
        d.pop("early_stopping_rounds")
        d["objective"] = "reg:squarederror" if loss_type == "reg" else "rank:pairwise"
        d.update(nthread=nthread, seed=seed, disable_default_eval_metric=1, verbosity=0)
        return d


def check_loss_type(loss_type: str) -> str:
    """Return ``loss_type`` if known.

    Raises
    ------
    TunerError
        Unknown loss type; the message lists the known ones.
    """
    if loss_type not in LOSS_TYPES:
        raise TunerError(f"unknown loss type {loss_type!r}; choose one of: {', '.join(LOSS_TYPES)}")
    return loss_type


def average_recall(preds: np.ndarray, labels: np.ndarray, n: int) -> float:
    """AutoTVM's ``tr-a-recall@n``: mean of the recall curve over the first ``n`` predictions.

    ``ranks[i]`` is the true rank (0 = best label) of the ``i``-th best prediction; the recall
    curve is ``curve[i] = #{j < i : ranks[j] <= i} / (i + 1)`` (AutoTVM's ``recall_curve``,
    including its ``j < i`` bound); the score is ``sum(curve[:n]) / n``.

    Parameters
    ----------
    preds, labels : np.ndarray, shape (m,)
    n : int
        The plan size.
    """
    preds = np.asarray(preds, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.float64)
    m = len(preds)
    if m == 0 or n < 1:
        return 0.0
    trials = np.argsort(preds, kind="stable")[::-1]
    vals = labels[trials]
    order = np.argsort(-vals, kind="stable")
    ranks = np.empty(m, dtype=np.int64)
    ranks[order] = np.arange(m)
    k = min(n, m)
    i = np.arange(k)
    # hits[i, j] = (j < i) & (ranks[j] <= i)
    hits = (np.arange(k)[None, :] < i[:, None]) & (ranks[None, :k] <= i[:, None])
    curve = hits.sum(axis=1) / (i + 1)
    return float(curve.sum() / n)


def recall_at_k(pred_scores: np.ndarray, true_values: np.ndarray, k: int) -> float:
    """Share of the true top-``k`` (by ``true_values``) among the predicted top-``k``.

    The expectation for random scores is ``k / m`` (``m`` = number of configs).
    """
    pred_scores = np.asarray(pred_scores, dtype=np.float64)
    true_values = np.asarray(true_values, dtype=np.float64)
    k = min(k, len(pred_scores))
    if k < 1:
        return 0.0
    top_pred = set(np.argsort(-pred_scores, kind="stable")[:k].tolist())
    top_true = set(np.argsort(-true_values, kind="stable")[:k].tolist())
    return len(top_pred & top_true) / k


class XGBoostCostModel(CostModel):
    """XGBoost cost model over the configs of one task (AutoTVM ``XGBoostCostModel``).

    Parameters
    ----------
    task : release.task.Task | release.space.KnobSpace
        The task (or its knob space) whose configs are scored.
    feature_type : str
        ``"knob"`` (knob indices and log2 split factors) or ``"itervar"`` (MetaSchedule
        per-store features of the scheduled program, plus a knob booster for fast queries:
        see the module docstring). Default ``"knob"``.
    loss_type : str
        ``"reg"`` (squared error on normalized throughput, default) or ``"rank"``
        (``rank:pairwise``).
    num_threads : int, optional
        XGBoost threads (default None: :func:`release.threads.search_threads`, 1 unless
        ``RELEASE_SEARCH_THREADS`` is set, the one setting of every tuner's search; AutoTVM used all
        cores). On a loaded machine OpenMP threads spin on each other:
        measured here with 4 processes on 2 cores, a 30-round fit took 0.02 s with 1 thread
        and 10.9 s with 2, a 64-row predict 0.5 ms vs 48 ms.
    seed : int, optional
        Seed of row shuffling and of XGBoost (None: 0).
    params : XGBParams, optional
        Hyperparameters (default: AutoTVM's).

    Attributes
    ----------
    fitted : bool
        Whether a model exists (before the first fit, ``predict`` returns zeros).
    fit_count : int
        Number of fits so far.
    last_fit : dict
        ``{"n", "rounds", "seconds", "feature_seconds", "recall"}`` of the last fit.
    program_features : ProgramFeatureCache or None
        The cache of program features (``itervar`` only).

    Raises
    ------
    TunerError
        Unknown ``feature_type`` or ``loss_type``.
    """

    def __init__(self, task, feature_type: str = "knob", loss_type: str = "reg",
                 num_threads: int | None = None, seed: int | None = None, params: XGBParams | None = None):
        self.feature_type = check_feature_type(feature_type)
        self.loss_type = check_loss_type(loss_type)
        self.space = _knob_space(task)
        if num_threads is None:
            from ..threads import search_threads

            num_threads = search_threads()
        self.num_threads = int(num_threads)
        if self.num_threads < 1:
            raise TunerError(f"num_threads={num_threads!r} must be a positive integer or None")
        self.seed = 0 if seed is None else int(seed)
        self.rng = np.random.default_rng(self.seed)
        self.params = params or XGBParams()
        self.knob_features = KnobFeaturizer(self.space)
        self.program_features = ProgramFeatureCache(self.space) if self.feature_type == "itervar" else None
        self._knob_booster = None
        self._program_booster = None
        self.fit_count = 0
        self.last_fit: dict = {}

    # ------------------------------------------------------------------ training
    @property
    def fitted(self) -> bool:
        return self._knob_booster is not None

    def fit(self, xs: np.ndarray, ys: np.ndarray, plan_size: int = 64) -> None:
        """Train on measured configs (AutoTVM ``XGBoostCostModel.fit``).

        Parameters
        ----------
        xs : np.ndarray, int, shape (n, n_knobs)
            Measured configs.
        ys : np.ndarray, float, shape (n,)
            Their throughputs in FLOP/s (0 for failed or invalid measurements); normalized here
            by ``max(ys)``.
        plan_size : int
            ``n`` of the early-stopping metric ``tr-a-recall@n`` (default 64).

        Raises
        ------
        TunerError
            Shapes that do not match. (``plan_size`` is the tuner's, validated where the user gave it:
            :func:`release.errors.check_plan_size`.)

        Notes
        -----
        If no measurement succeeded (``max(ys) <= 0``) the previous model is kept. For
        ``itervar``, program features of new configs are computed here (cached; counted in
        ``last_fit["feature_seconds"]``).
        """
        xs = np.asarray(xs, dtype=np.int64)
        ys = np.asarray(ys, dtype=np.float64).reshape(-1)
        if xs.ndim != 2 or xs.shape[1] != self.space.n_knobs or len(xs) != len(ys):
            raise TunerError(f"fit got configs of shape {xs.shape} and {len(ys)} throughputs; expected "
                             f"(n, {self.space.n_knobs}) and n")
        y_max = float(ys.max()) if len(ys) else 0.0
        if len(ys) < 2 or y_max <= 0:
            logger.info("cost model: not fitting on %d samples with best throughput %g", len(ys), y_max)
            return
        t0 = time.perf_counter()
        perm = self.rng.permutation(len(xs))
        xs, ys = xs[perm], ys[perm] / max(y_max, 1e-8)
        self._knob_booster, rounds, recall = self._train(self.knob_features.transform(xs), ys, plan_size)
        feat_s = 0.0
        if self.program_features is not None:
            f0 = time.perf_counter()
            feats = self.program_features.transform(xs)
            feat_s = time.perf_counter() - f0
            ok = ~np.isnan(feats).any(axis=1)
            if ok.sum() >= 2:
                self._program_booster, rounds, recall = self._train(feats[ok], ys[ok], plan_size)
        self.fit_count += 1
        self.last_fit = dict(n=len(xs), rounds=rounds, seconds=time.perf_counter() - t0,
                             feature_seconds=feat_s, recall=recall)
        logger.debug("cost model fit %d: %s", self.fit_count, self.last_fit)

    def _train(self, feats: np.ndarray, ys: np.ndarray, plan_size: int):
        import xgboost as xgb

        dtrain = xgb.DMatrix(feats, label=ys, nthread=self.num_threads)
        name = f"a-recall@{plan_size}"

        def metric(preds, dmat):
            return name, average_recall(preds, dmat.get_label(), plan_size)

        stop = xgb.callback.EarlyStopping(rounds=self.params.early_stopping_rounds, metric_name=name,
                                          data_name="tr", maximize=True, save_best=True)
        bst = xgb.train(self.params.booster_params(self.loss_type, self.num_threads, self.seed), dtrain,
                        num_boost_round=self.params.num_boost_round, evals=[(dtrain, "tr")],
                        custom_metric=metric, callbacks=[stop], verbose_eval=False)
        rounds = bst.num_boosted_rounds()
        recall = float(bst.attr("best_score") or 0.0)
        return bst, rounds, recall

    # ------------------------------------------------------------------ scoring
    def predict(self, xs: np.ndarray) -> np.ndarray:
        """Fast scores of configs (knob features): higher = predicted faster.

        Parameters
        ----------
        xs : np.ndarray, int, shape (n, n_knobs)

        Returns
        -------
        np.ndarray, float64, shape (n,)
            Normalized predicted throughput (loss ``reg``) or a ranking score (``rank``); zeros
            before the first fit.
        """
        xs = np.asarray(xs, dtype=np.int64).reshape(-1, self.space.n_knobs)
        if self._knob_booster is None or len(xs) == 0:
            return np.zeros(len(xs))
        return self._knob_booster.inplace_predict(self.knob_features.transform(xs)).astype(np.float64)

    def predict_program(self, xs: np.ndarray) -> np.ndarray:
        """Scores from scheduled-program features (``itervar``; slow, cached per config).

        For ``feature_type="knob"`` this is :meth:`predict`.

        Parameters
        ----------
        xs : np.ndarray, int, shape (n, n_knobs)

        Returns
        -------
        np.ndarray, float64, shape (n,)
            ``-inf`` for configs that are not legal programs.
        """
        xs = np.asarray(xs, dtype=np.int64).reshape(-1, self.space.n_knobs)
        if self.program_features is None:
            return self.predict(xs)
        feats = self.program_features.transform(xs)
        bad = np.isnan(feats).any(axis=1)
        if self._program_booster is None:
            out = self.predict(xs)
        else:
            out = self._program_booster.inplace_predict(np.where(bad[:, None], 0, feats)).astype(np.float64)
        out[bad] = -np.inf
        return out

    @property
    def reranks(self) -> bool:
        """True for ``itervar``: :meth:`rerank` re-orders by program features."""
        return self.feature_type != "knob"

    def rerank(self, configs) -> list:
        """Re-order ``configs`` by :meth:`predict_program` (see :func:`rerank_by_program`) when
        :attr:`reranks`, else unchanged. The one place the program-feature re-rank lives."""
        configs = [tuple(c) for c in configs]
        return rerank_by_program(self, configs) if self.reranks else configs

    def __repr__(self) -> str:
        return (f"XGBoostCostModel({self.space.task.name}, feature_type={self.feature_type!r}, "
                f"loss_type={self.loss_type!r}, fits={self.fit_count})")


def _knob_space(task_or_space):
    """The knob space of a :class:`release.task.Task`, or the space itself."""
    from ..space import KnobSpace

    return task_or_space if isinstance(task_or_space, KnobSpace) else task_or_space.config_space


def rerank_by_program(model, configs: list) -> list:
    """Re-order ``configs`` (best first) by ``model.predict_program`` and drop the ones it scores
    ``-inf`` (invalid programs); stable for ties. The second level of the two-level scoring that
    simulated annealing and the PPO optimizer share."""
    if not configs:
        return configs
    exact = np.asarray(model.predict_program(np.asarray(configs, dtype=np.int64)), dtype=np.float64)
    order = np.argsort(-exact, kind="stable")
    return [configs[i] for i in order if np.isfinite(exact[i])]
