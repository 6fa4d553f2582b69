"""A transferable cost model: program features learned across tasks, then the current task's own data.

Why program features: a knob index means a different tile in another task's space (the PPO warm
start across tasks lost, 0.88x best GFLOPS, ``benchmarks/warm_start``), while MetaSchedule's
per-store features (loop extents, vector and parallel annotations, buffer-access strides and reuse,
arithmetic counts; :class:`release.cost_model.features.ProgramFeatureCache`, pooled into 329
numbers) describe any scheduled program the same way. This is TenSet's / TLP's setting: a model
trained offline on many tasks' measured programs ranks the programs of a task it never saw.

Training (:class:`TransferCostModel`, lazily at the first :meth:`~TransferCostModel.fit`):

1. *Knowledge set*: the knowledge base's records of the task's target class (kind, ``mcpu``,
   ``mtriple``, ``arch``, ``mattr``; other targets are left out with one warning line by
   :meth:`release.knowledge.KnowledgeBase.records`), grouped by workload (task key). Each group's
   program is rebuilt by its registered name (:func:`rebuild_task`: the default program, or the
   plain one without pre-packed weights, whichever has the record's key); a group whose program
   cannot be rebuilt is skipped (one log line). At most ``max_records_per_workload`` records per
   group (the best half and a seeded random rest), each config replayed once to get its features.
2. *Transfer booster*: XGBoost ``rank:pairwise`` with one query group per workload, thread count
   and machine (``qid``; records written before thread counts were logged have 0; the machine is
   :func:`release.target.machine_of`: ``mcpu``, cores, CPU model): the loss compares only configs
   of the same task timed on the same machine, so absolute speeds of different operators, or of
   one operator on an Intel Xeon and an AMD EPYC of the ISA class, never have to agree. Labels are
   throughput over the group's best (per-task normalisation; failed measurements 0, AutoTVM's rule).
3. *Distillation*: the model optimizers (simulated annealing, the PPO agent) query ``predict`` on
   knob features ~64,000 times a round, far too often for program features (4-40 ms a config).
   ``distill_samples`` random configs of the current task are scored by the transfer booster on
   their program features and a knob-feature booster is trained on those scores (squared error),
   so both optimizers search against the transferred knowledge from the first round.

Online update (every fit): the parent :class:`release.cost_model.XGBoostCostModel` trains its own
knob and program boosters on the current task's measurements (AutoTVM's recipe). Scores are
blended per level, ``w * z_own + (1 - w) * z_transfer`` with ``w = 1 - (1 - n / (n + own_half)) * trust``
(``n`` successful own measurements, ``own_half`` 64 by default: equal weight after one AutoTVM round,
89% own after 512, when the transfer is trusted fully). ``trust`` is the transfer booster's
Spearman rank correlation with the task's own measurements, clipped to [0, 1], once there are
``trust_min`` (16) of them (1 before): a transfer that misranks this task loses its weight as soon
as the task's data show it (RGPE, Feurer et al. 2018, weights each prior model by how well it ranks
the target task's observations; ours is the point estimate, not RGPE's bootstrap). Measured why:
held-out resnet18.conv2d.4, the transferred booster ranked the configs the warm run measured at
Spearman 0.11 and kept xgb at 193 GFLOPS through 512 trials, cold xgb reached 295. ``z`` standardises each booster's output by its mean and standard deviation
over the distillation sample of this task, so the two scales meet without a rank transform (which
would be batch-dependent and flat at the top). Chosen over continued training of one booster
because the own model stays exactly AutoTVM's once ``w`` is near 1, and a transfer booster that
misleads on a new operator is outweighed by the task's own data as it grows rather than baked into
it.

Source: TenSet (Zheng et al., NeurIPS 2021 datasets track, section 5: a cost model pre-trained on
other tasks' records, then fine-tuned) and AutoTVM's transfer learning (Chen et al., NeurIPS
2018, section 4: a global model over context-related features plus a local model over the
current task); the ranking loss with one query per task is AutoTVM's ``rank`` loss applied per
task.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass

import numpy as np

from ..errors import ReleaseError, TunerError
from .features import ProgramFeatureCache
from .xgb import XGBoostCostModel

logger = logging.getLogger(__name__)


@dataclass
class TransferConfig:
    """Settings of :class:`TransferCostModel` (our choices: there is no paper default to match)."""

    max_records_per_workload: int = 256
    """Records of one knowledge workload used for training (best half + seeded random rest)."""
    min_records: int = 16
    """Fewer successful knowledge records than this: no transfer (the model is AutoTVM's)."""
    distill_samples: int = 256
    """Random configs of the current task scored by the transfer booster to train its knob booster."""
    own_half: int = 64
    """Own successful measurements at which own and transferred scores weigh equally (full trust)."""
    trust_min: int = 16
    """Own successful measurements before the transfer booster's rank correlation with them scales its weight."""
    num_boost_round: int = 300
    """Boosting rounds of the transfer booster (no early stopping: no held-out task to stop on)."""
    max_depth: int = 6
    """Tree depth of the transfer booster (deeper than AutoTVM's 3: many tasks, 329 features)."""
    eta: float = 0.1
    """Learning rate of the transfer booster."""


def rebuild_task(name: str, key: str, target, programs=None):
    """The :class:`release.task.Task` of a knowledge record's workload, rebuilt by its registered name.

    Parameters
    ----------
    name : str
        Registered workload name (``release workloads``), e.g. ``resnet18.conv2d.6``.
    key : str
        The record's task key (``name/16-hex``): the program must match it.
    target : str or dict
        The record's target (JSON text or dict).
    programs : callable, optional
        ``programs(key) -> Task or None``: stored programs (:meth:`release.knowledge.KnowledgeBase.program`),
        tried when the name does not rebuild ``key`` (model tasks, blocked layouts, users' programs).

    Returns
    -------
    Task or None
        The default program (``create_task(name, target)``), or the plain one without pre-packed
        weights, whichever has ``key``; else the stored program of ``key``; None when none matches
        (the workload's definition changed since the record was measured, or it was never stored).
    """
    from ..measure.records import Record
    from ..target import canonical_target_json
    from ..task import create_task

    tgt = json.loads(target) if isinstance(target, str) else target
    for prepack in (None, False):
        try:
            task = create_task(name, tgt, prepack=prepack)
        except ReleaseError:
            break
        if task.key == key or task.owns(Record(task=key, target=canonical_target_json(tgt))):  # older keys too
            return task
    return programs(key) if programs is not None else None


class KnowledgeSet:
    """Program features and per-task labels of a knowledge base's records (one target class).

    Parameters
    ----------
    records : list of release.measure.Record
        Records of one target class (:meth:`release.knowledge.KnowledgeBase.records` with the
        task's target).
    config : TransferConfig, optional
    seed : int
        Seed of the per-workload record subsample.
    tasks : dict, optional
        ``{task key: Task}`` already built (the current task, test fixtures); others are rebuilt
        with :func:`rebuild_task`.
    programs : callable, optional
        ``programs(key) -> Task or None``, passed to :func:`rebuild_task` (a base's stored programs).

    Attributes
    ----------
    features : np.ndarray, float32, shape (n, 329)
    labels : np.ndarray, float32, shape (n,)
        Throughput over the best of its workload (0 for failed measurements).
    qid : np.ndarray, int, shape (n,)
        Workload index of each row (sorted, as XGBoost's ``qid`` needs).
    workloads : list of str
        Task keys, index = ``qid`` (a key appears more than once when its records were timed on
        different thread counts or machines: one query group per workload, thread count and
        machine, so timings on 1 and on 2 threads, or on two CPU models, are never compared).
    skipped : dict
        ``{task key: reason}`` of the workloads that could not be used.
    seconds : float
        Time spent rebuilding programs and computing features.
    """

    def __init__(self, records, config: TransferConfig | None = None, seed: int = 0, tasks: dict | None = None,
                 programs=None):
        cfg = config or TransferConfig()
        t0 = time.perf_counter()
        from ..target import machine_of

        groups: dict[tuple, list] = {}
        for rec in records:  # one query group per (workload, machine, threads): timings of two CPU models, or on
            # 1 and on 2 threads, are never compared (a Zen 4's record and a Xeon's of one program rank apart)
            groups.setdefault((rec.task, int(rec.threads or 0), machine_of(rec.target, rec.machine)), []).append(rec)
        rng = np.random.default_rng(seed)
        feats, labels, qid = [], [], []
        self.workloads: list[str] = []
        self.skipped: dict[str, str] = {}
        tasks = dict(tasks or {})
        for key, threads, machine in sorted(groups):
            recs = groups[(key, threads, machine)]
            best = max((r.gflops for r in recs if r.ok), default=0.0)
            if best <= 0:
                self.skipped[key] = "no successful measurement"
                continue
            task = tasks.get(key) or rebuild_task(recs[0].name, key, recs[0].target, programs)
            if task is not None:
                tasks[key] = task  # built once for all its thread counts and machines
            if task is None:
                self.skipped[key] = (f"workload {recs[0].name!r} cannot be rebuilt with this key (no registered "
                                     f"name makes it and the base stores no program of it)")
                continue
            recs = _subsample(recs, cfg.max_records_per_workload, rng)
            space = task.config_space
            cfgs, ys = [], []
            for r in recs:
                try:
                    cfgs.append(space.config_of_record(r.config, r.trace))
                except ReleaseError:
                    continue
                ys.append(r.gflops / best)
            if len(cfgs) < 2:
                self.skipped[key] = "fewer than 2 records fit its knob space"
                continue
            f = ProgramFeatureCache(space).transform(np.asarray(cfgs, dtype=np.int64))
            ok = ~np.isnan(f).any(axis=1)
            if ok.sum() < 2:
                self.skipped[key] = "fewer than 2 legal programs"
                continue
            feats.append(f[ok])
            labels.append(np.asarray(ys, dtype=np.float32)[ok])
            qid.append(np.full(int(ok.sum()), len(self.workloads), dtype=np.int64))
            self.workloads.append(key)
        w = 2 * 164 + 1
        self.features = np.concatenate(feats) if feats else np.zeros((0, w), dtype=np.float32)
        self.labels = np.concatenate(labels) if labels else np.zeros(0, dtype=np.float32)
        self.qid = np.concatenate(qid) if qid else np.zeros(0, dtype=np.int64)
        self.seconds = time.perf_counter() - t0
        for key, why in self.skipped.items():
            logger.info("knowledge: workload %s not used: %s", key, why)

    def __len__(self) -> int:
        return len(self.labels)

    def train(self, config: TransferConfig | None = None, seed: int = 0, num_threads: int = 1):
        """An XGBoost ``rank:pairwise`` booster over program features, one query group per workload.

        Returns
        -------
        xgboost.Booster or None
            None when fewer than 2 rows.
        """
        import xgboost as xgb

        cfg = config or TransferConfig()
        if len(self) < 2:
            return None
        dtrain = xgb.DMatrix(self.features, label=self.labels, qid=self.qid, nthread=num_threads)
        params = dict(objective="rank:pairwise", max_depth=cfg.max_depth, eta=cfg.eta, min_child_weight=1.0,
                      gamma=1e-4, subsample=1.0, nthread=num_threads, seed=seed, verbosity=0,
                      disable_default_eval_metric=1)
        return xgb.train(params, dtrain, num_boost_round=cfg.num_boost_round)


def _subsample(recs: list, n: int, rng: np.random.Generator) -> list:
    """At most ``n`` records: the fastest ``n // 2`` and a random rest (stable, seeded)."""
    if len(recs) <= n:
        return recs
    order = sorted(range(len(recs)), key=lambda i: -recs[i].gflops)
    top = order[: n // 2]
    rest = order[n // 2:]
    pick = rng.choice(len(rest), size=n - len(top), replace=False)
    keep = sorted(top + [rest[i] for i in pick])
    return [recs[i] for i in keep]


class TransferCostModel(XGBoostCostModel):
    """AutoTVM's XGBoost cost model plus a booster transferred from a knowledge base (see module docstring).

    Parameters
    ----------
    task : release.task.Task
    records : list of release.measure.Record
        Knowledge records of the task's target class (other tasks, earlier runs of this one).
    config : TransferConfig, optional
    feature_type, loss_type, num_threads, seed, params
        As :class:`release.cost_model.XGBoostCostModel` (its own-data part).
    tasks : dict, optional
        ``{task key: Task}`` of knowledge workloads already built (skips :func:`rebuild_task`).
    programs : callable, optional
        ``programs(key) -> Task or None``: the knowledge base's stored programs, for workloads no
        registered name rebuilds (:meth:`release.knowledge.KnowledgeBase.program`).

    Attributes
    ----------
    warm : bool
        True while the knowledge set may give a model before any own measurement (the tuner then
        fits before its first round instead of measuring random configs). False once the
        knowledge set was built and turned out unusable.
    knowledge : KnowledgeSet or None
        Built at the first fit.
    own_weight : float
        ``w`` of the blend at the last fit (0 before any own success).
    transfer_trust : float
        Spearman correlation of the transfer booster's scores with the task's own measured
        throughputs at the last fit, clipped to [0, 1] (1 until ``trust_min`` own successes).
    """

    def __init__(self, task, records, config: TransferConfig | None = None, feature_type: str = "itervar",
                 loss_type: str = "reg", num_threads: int | None = None, seed: int | None = None, params=None,
                 tasks: dict | None = None, programs=None):
        super().__init__(task, feature_type=feature_type, loss_type=loss_type, num_threads=num_threads, seed=seed,
                         params=params)
        self.tconfig = config or TransferConfig()
        if self.tconfig.own_half < 1 or self.tconfig.distill_samples < 8:
            raise TunerError(f"TransferConfig own_half={self.tconfig.own_half} must be >= 1 and distill_samples="
                             f"{self.tconfig.distill_samples} >= 8")
        self._records = list(records)
        self._tasks = dict(tasks or {})
        self._tasks.setdefault(self.space.task.key, self.space.task)
        self._programs = programs
        n_ok = sum(1 for r in self._records if r.ok)
        self.warm = n_ok >= self.tconfig.min_records
        self.knowledge: KnowledgeSet | None = None
        self._transfer = None
        self._distilled = None
        self._sample_program = None  # program features of the distillation sample
        self._sample_knob = None
        self._z: dict[str, tuple[float, float]] = {}
        self.own_weight = 0.0
        self.transfer_trust = 1.0
        if self.program_features is None:  # knob-only own model: the transfer still needs program features
            self.program_features = ProgramFeatureCache(self.space)

    @property
    def reranks(self) -> bool:
        """True: the plan is re-ranked by program features (transferred and own)."""
        return True

    @property
    def fitted(self) -> bool:
        return self._knob_booster is not None or self._distilled is not None

    # ------------------------------------------------------------------ training
    def _prepare(self) -> None:
        """Build the knowledge set, the transfer booster and its distillation (once)."""
        if self.knowledge is not None:
            return
        t0 = time.perf_counter()
        self.knowledge = KnowledgeSet(self._records, self.tconfig, seed=self.seed, tasks=self._tasks,
                                      programs=self._programs)
        self._records = []  # the features are kept; the records are no longer needed
        if len(self.knowledge.workloads) == 0 or len(self.knowledge) < self.tconfig.min_records:
            self.warm = False
            logger.info("knowledge: %d usable record(s); tuning starts cold", len(self.knowledge))
            return
        self._transfer = self.knowledge.train(self.tconfig, seed=self.seed, num_threads=self.num_threads)
        rng = np.random.default_rng(self.seed + 1)
        xs = self.space.sample(self.tconfig.distill_samples, rng)
        feats = self.program_features.transform(xs)
        ok = ~np.isnan(feats).any(axis=1)
        if ok.sum() < 8 or self._transfer is None:
            self.warm = False
            logger.info("knowledge: too few legal sample programs of %s to distill; tuning starts cold",
                        self.space.task.name)
            return
        xs, feats = xs[ok], feats[ok]
        self._sample_program = feats
        self._sample_knob = self.knob_features.transform(xs)
        t = self._transfer.inplace_predict(feats).astype(np.float64)
        self._z["transfer"] = _mean_std(t)
        t = (t - self._z["transfer"][0]) / self._z["transfer"][1]
        self._distilled, _, _ = self._train_reg(self._sample_knob, t)
        self._z["distilled"] = _mean_std(self._distilled.inplace_predict(self._sample_knob))
        logger.info("knowledge: transfer model on %d records of %d workloads (%.1f s), distilled on %d configs "
                    "of %s", len(self.knowledge), len(self.knowledge.workloads), time.perf_counter() - t0,
                    int(ok.sum()), self.space.task.name)

    def _train_reg(self, feats, ys):
        import xgboost as xgb

        params = self.params.booster_params("reg", self.num_threads, self.seed)
        bst = xgb.train(params, xgb.DMatrix(feats, label=ys, nthread=self.num_threads), num_boost_round=100)
        return bst, 100, 0.0

    def fit(self, xs: np.ndarray, ys: np.ndarray, plan_size: int = 64) -> None:
        """Build the transfer part (first call), then fit the own boosters (AutoTVM's fit).

        Parameters
        ----------
        xs : np.ndarray, int, shape (n, n_knobs)
            Measured configs of the current task; may be empty (the warm first fit).
        ys : np.ndarray, float, shape (n,)
            Their throughputs (FLOP/s; 0 for failures).
        plan_size : int

        Notes
        -----
        The blend weight becomes ``w = 1 - (1 - n_ok / (n_ok + own_half)) * trust`` (``n_ok``: own
        measurements with a positive throughput; ``trust``: :attr:`transfer_trust`), 0 while the
        own boosters do not exist.
        """
        self._prepare()
        xs = np.asarray(xs, dtype=np.int64).reshape(-1, self.space.n_knobs)
        ys = np.asarray(ys, dtype=np.float64).reshape(-1)
        if len(xs):
            super().fit(xs, ys, plan_size)
        n_ok = int((ys > 0).sum())
        self.transfer_trust = self._trust(xs, ys) if n_ok >= self.tconfig.trust_min else 1.0
        if self._knob_booster is not None:
            self.own_weight = 1.0 - (1.0 - n_ok / (n_ok + self.tconfig.own_half)) * self.transfer_trust
        else:
            self.own_weight = 0.0
        if self._distilled is None:
            self.own_weight = 1.0
        if self._knob_booster is not None and self._sample_knob is not None:
            self._z["knob"] = _mean_std(self._knob_booster.inplace_predict(self._sample_knob))
        if self._program_booster is not None and self._sample_program is not None:
            self._z["program"] = _mean_std(self._program_booster.inplace_predict(self._sample_program))
        if self._distilled is not None and self.fit_count == 0:
            self.fit_count = 1
            self.last_fit = dict(n=0, rounds=0, seconds=0.0, feature_seconds=self.program_features.seconds,
                                 recall=0.0)

    def _trust(self, xs: np.ndarray, ys: np.ndarray) -> float:
        """Spearman correlation of the transfer booster with the own successful measurements, in [0, 1]."""
        from scipy.stats import spearmanr

        if self._transfer is None:
            return 0.0
        ok = ys > 0
        feats = self.program_features.transform(xs[ok])
        legal = ~np.isnan(feats).any(axis=1)
        if legal.sum() < self.tconfig.trust_min:
            return 1.0
        pred = self._transfer.inplace_predict(feats[legal])
        rho = spearmanr(pred, ys[ok][legal])[0]
        return float(np.clip(rho, 0.0, 1.0)) if np.isfinite(rho) else 0.0

    # ------------------------------------------------------------------ scoring
    def _blend(self, own, own_key: str, transfer, transfer_key: str) -> np.ndarray:
        w = self.own_weight
        if transfer is None or w >= 1.0:
            return own
        zt = _standardize(transfer, self._z[transfer_key])
        if own is None or w <= 0.0 or own_key not in self._z:
            return zt
        return w * _standardize(own, self._z[own_key]) + (1 - w) * zt

    def predict(self, xs: np.ndarray) -> np.ndarray:
        """Fast scores on knob features: the blend of the own knob booster and the distilled one.

        Parameters
        ----------
        xs : np.ndarray, int, shape (n, n_knobs)

        Returns
        -------
        np.ndarray, float64, shape (n,)
            Higher = predicted faster; zeros before any model exists.
        """
        xs = np.asarray(xs, dtype=np.int64).reshape(-1, self.space.n_knobs)
        if len(xs) == 0 or not self.fitted:
            return np.zeros(len(xs))
        kf = self.knob_features.transform(xs)
        own = self._knob_booster.inplace_predict(kf).astype(np.float64) if self._knob_booster is not None else None
        dist = self._distilled.inplace_predict(kf).astype(np.float64) if self._distilled is not None else None
        return self._blend(own, "knob", dist, "distilled")

    def predict_program(self, xs: np.ndarray) -> np.ndarray:
        """Scores on program features: the blend of the own program booster and the transfer booster.

        Returns
        -------
        np.ndarray, float64, shape (n,)
            ``-inf`` for configs that are not legal programs.
        """
        xs = np.asarray(xs, dtype=np.int64).reshape(-1, self.space.n_knobs)
        feats = self.program_features.transform(xs)
        bad = np.isnan(feats).any(axis=1)
        clean = np.where(bad[:, None], 0, feats)
        own = None
        if self._program_booster is not None:
            own = self._program_booster.inplace_predict(clean).astype(np.float64)
        elif self._knob_booster is not None:
            own = super().predict(xs)
        tr = self._transfer.inplace_predict(clean).astype(np.float64) if self._transfer is not None else None
        if own is None and tr is None:
            out = np.zeros(len(xs))
        else:
            own_key = "program" if self._program_booster is not None else "knob"
            out = self._blend(own, own_key, tr, "transfer") if tr is not None else own
        out = np.asarray(out, dtype=np.float64).copy()
        out[bad] = -np.inf
        return out

    def rerank(self, configs) -> list:
        """Re-order by :meth:`predict_program`, dropping illegal programs."""
        from .xgb import rerank_by_program

        return rerank_by_program(self, [tuple(c) for c in configs])

    def __repr__(self) -> str:
        n = len(self.knowledge) if self.knowledge is not None else len(self._records)
        return (f"TransferCostModel({self.space.task.name}, knowledge records={n}, own_weight={self.own_weight:.2f}, "
                f"trust={self.transfer_trust:.2f}, fits={self.fit_count})")


def _mean_std(v) -> tuple[float, float]:
    v = np.asarray(v, dtype=np.float64)
    s = float(v.std())
    return float(v.mean()), s if s > 1e-12 else 1.0


def _standardize(v, ms: tuple[float, float]) -> np.ndarray:
    return (np.asarray(v, dtype=np.float64) - ms[0]) / ms[1]


__all__ = ["TransferCostModel", "TransferConfig", "KnowledgeSet", "rebuild_task"]
