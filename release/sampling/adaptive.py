"""Chameleon's adaptive sampling: k-means over the candidates, then sample synthesis.

Source: Ahn et al., ICLR 2020, section 5 ("Adaptive sampling", "Sample synthesis") and the
authors' code (shared/reference/chameleon.md). Deviations, each deliberate:

- the knee test picks the *last* k before the loss stopped falling 2.5x (the k where the
  curve bends), see :meth:`AdaptiveSampler.choose_k`;
- synthesis takes the non-clustered knobs' mode over the cluster's *members* (the paper's
  text; the authors' code draws from all candidates, which looks like a bug);
- a synthesized config that is invalid, already measured or a duplicate is replaced by the
  nearest valid, unvisited, not yet chosen member of its cluster (the code measures it anyway
  or drops it).
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..errors import TunerError
from .base import Sampler

logger = logging.getLogger(__name__)


@dataclass
class AdaptiveSamplingConfig:
    """Hyperparameters of adaptive sampling; defaults are the authors'."""

    n_cluster_knobs: int = 2
    """Cluster on this many knobs, those with the most choices."""
    k_min: int = 8
    """Smallest number of clusters tried."""
    k_step: int = 8
    """Step between numbers of clusters tried (up to ``plan_size``)."""
    knee_ratio: float = 2.5
    """Stop once the within-cluster loss falls by less than this factor from the previous k."""
    n_init: int = 3
    """k-means restarts per k (scikit-learn ``n_init``)."""

    def check(self) -> "AdaptiveSamplingConfig":
        """Validate; raise :class:`TunerError` naming the bad field."""
        for name in ("n_cluster_knobs", "k_min", "k_step", "n_init"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or v < 1:
                raise TunerError(f"AdaptiveSamplingConfig.{name}={v!r} must be a positive integer")
        if not self.knee_ratio > 1:
            raise TunerError(f"AdaptiveSamplingConfig.knee_ratio={self.knee_ratio!r} must be > 1")
        return self


class AdaptiveSampler(Sampler):
    """Chameleon's adaptive sampler (the ``Sampler`` protocol of ``ModelBasedTuner``).

    Parameters
    ----------
    config : AdaptiveSamplingConfig, optional
        Hyperparameters (default: the authors').
    seed : int, optional
        Seeds k-means (default 0, so ``XGBTuner(sampler="adaptive")`` is deterministic; None =
        nondeterministic).
    check_valid : bool
        Check every picked config with ``space.is_valid`` (a replay, 4-45 ms each; default True). On a
        space with limits (GPU targets) a synthesized config outside them is replaced without a replay
        (``KnobSpace.feasible``), whatever ``check_valid`` says.

    Attributes
    ----------
    last_k : int or None
        The number of clusters chosen in the latest call.
    last_losses : dict[int, float]
        Within-cluster loss (k-means inertia) of each k tried in the latest call.
    """

    def __init__(self, config: AdaptiveSamplingConfig | None = None, seed: int | None = 0,
                 check_valid: bool = True):
        self.cfg = (config or AdaptiveSamplingConfig()).check()
        self.rng = np.random.default_rng(seed)
        self.check_valid = bool(check_valid)
        self.last_k: int | None = None
        self.last_losses: dict[int, float] = {}
        self._valid_cache: dict[tuple, bool] = {}

    # ------------------------------------------------------------------ clustering
    def cluster_knobs(self, dims: np.ndarray) -> np.ndarray:
        """Indices of the ``n_cluster_knobs`` knobs with the most choices (ties: earlier knob first)."""
        dims = np.asarray(dims)
        order = np.argsort(-dims, kind="stable")
        return np.sort(order[: min(self.cfg.n_cluster_knobs, len(dims))])

    def _kmeans(self, X: np.ndarray, k: int):
        from sklearn.cluster import KMeans

        km = KMeans(n_clusters=k, n_init=self.cfg.n_init, random_state=int(self.rng.integers(2**31)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ConvergenceWarning on duplicate points
            km.fit(X)
        return km

    def choose_k(self, X: np.ndarray, plan_size: int):
        """Number of clusters by the ratio knee test, and its fitted k-means.

        Tries ``k = k_min, k_min + k_step, ...`` up to ``min(plan_size, distinct points)``; stops at
        the first k whose loss fell by less than ``knee_ratio`` from the previous k and returns the
        previous k. A loss of 0 (every point its own centroid) ends the search at that k.

        Returns
        -------
        (int, sklearn.cluster.KMeans)
        """
        n_distinct = len(np.unique(X, axis=0))
        k_max = max(1, min(plan_size, n_distinct))
        ks = list(range(self.cfg.k_min, k_max + 1, self.cfg.k_step)) or [k_max]
        self.last_losses = {}
        prev_k, prev_km = None, None
        for k in ks:
            km = self._kmeans(X, k)
            loss = float(km.inertia_)
            self.last_losses[k] = loss
            if prev_km is not None and self.last_losses[prev_k] < self.cfg.knee_ratio * loss:
                return prev_k, prev_km
            if loss <= 1e-9:
                return k, km
            prev_k, prev_km = k, km
        return prev_k, prev_km

    # ------------------------------------------------------------------ the Sampler protocol
    def _valid(self, space, c: tuple) -> bool:
        if getattr(space, "constrained", False) and not space.feasible([c])[0]:
            return False  # outside the target's limits (GPU): known on the knobs, no replay
        if not self.check_valid:
            return True
        if c not in self._valid_cache:
            self._valid_cache[c] = bool(space.is_valid(c)[0])
        return self._valid_cache[c]

    def sample(self, candidates: Sequence[tuple], space, visited: set, plan_size: int) -> list[tuple]:
        """Pick representative configs of ``candidates`` to measure.

        Parameters
        ----------
        candidates : sequence of config tuples
            The optimizer's plan, best first.
        space : release.space.KnobSpace
        visited : set of tuple
            Measured (or known invalid) configs, canonical form.
        plan_size : int
            Upper bound on the number of configs returned and on k.

        Returns
        -------
        list of tuple
            At most ``plan_size`` distinct canonical configs, none in ``visited`` and (with
            ``check_valid``) none invalid; one per cluster, in the order of each cluster's best candidate.

        Notes
        -----
        ``plan_size`` (>= 1) is the tuner's, validated where the user gave it
        (:func:`release.errors.check_plan_size`), not again here.
        """
        cands = list(dict.fromkeys(space.canonical(c) for c in candidates))
        cands = [c for c in cands if c not in visited]
        if not cands:
            self.last_k = 0
            return []
        C = np.asarray(cands, dtype=np.int64)
        knobs = self.cluster_knobs(space.dims)
        X = C[:, knobs].astype(np.float64)
        if len(C) <= self.cfg.k_min:
            self.last_k = len(C)
            out = [c for c in cands if self._valid(space, c)][:plan_size]
            return out
        k, km = self.choose_k(X, plan_size)
        self.last_k = k
        labels = km.labels_
        centers = km.cluster_centers_
        chosen: list[tuple] = []
        taken = set()
        first_rank = {j: int(np.flatnonzero(labels == j)[0]) for j in range(k) if (labels == j).any()}
        for j in sorted(first_rank, key=first_rank.get):
            members = C[labels == j]
            synth = np.empty(space.n_knobs, dtype=np.int64)
            for p in range(space.n_knobs):  # mode of the members; ties: the smallest index
                synth[p] = int(np.bincount(members[:, p]).argmax())
            synth[knobs] = np.clip(np.rint(centers[j]), 0, space.dims[knobs] - 1).astype(np.int64)
            pick = space.canonical(synth)
            if pick in visited or pick in taken or not self._valid(space, pick):
                d = np.linalg.norm(members[:, knobs] - centers[j], axis=1)
                pick = None
                for i in np.argsort(d, kind="stable"):
                    c = tuple(int(x) for x in members[i])
                    if c not in visited and c not in taken and self._valid(space, c):
                        pick = c
                        break
            if pick is None:
                continue
            chosen.append(pick)
            taken.add(pick)
            if len(chosen) >= plan_size:
                break
        logger.debug("adaptive sampling: %d candidates -> k=%d (losses %s) -> %d configs", len(C), k,
                     {kk: round(v, 2) for kk, v in self.last_losses.items()}, len(chosen))
        return chosen
