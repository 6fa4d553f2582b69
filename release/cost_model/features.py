"""Feature extraction for configs of a :class:`release.space.KnobSpace`.

Two feature types, named as in AutoTVM's ``XGBTuner(feature_type=...)``:

``knob``
    Per knob: the knob index, and for tile knobs also ``log2`` of every split factor (AutoTVM's
    ``ConfigEntity.get_flatten_feature`` gives the factors of a split, the index of other knobs).
    Computed by table look-up over an int array, vectorized: ~2 us per config.
``itervar``
    Loop-structure features of the scheduled program: MetaSchedule's ``PerStoreFeature``
    (164 features per buffer store) of the program ``space.apply(config)`` produces, pooled over
    stores into a fixed vector ``[sum (164), max (164), n_stores]``. AutoTVM's ``itervar``
    features were per-loop-variable features of the lowered loop nest; MetaSchedule's per-store
    features are their modern replacement (same family: loop extents, annotations, buffer
    access strides and reuse, arithmetic counts). Each config costs one replay plus
    postprocessors (4-21 ms here) and one extraction (1.3-21 ms): far too slow for a search's
    inner loop, so results are cached per canonical config (:class:`ProgramFeatureCache`).
"""

from __future__ import annotations

import logging
import math
import time
from typing import Sequence

import numpy as np

from ..errors import InvalidConfigError, TunerError

logger = logging.getLogger(__name__)

FEATURE_TYPES = ("itervar", "knob")

#: Width of one pooled MetaSchedule per-store feature vector (PerStoreFeature's default layout).
PER_STORE_WIDTH = 164


def check_feature_type(feature_type: str) -> str:
    """Return ``feature_type`` if known.

    Raises
    ------
    TunerError
        Unknown feature type; the message lists the known ones.
    """
    if feature_type not in FEATURE_TYPES:
        raise TunerError(
            f"unknown feature type {feature_type!r}; choose one of: {', '.join(FEATURE_TYPES)} "
            "(AutoTVM's 'curve' feature has no equivalent on MetaSchedule knob spaces)"
        )
    return feature_type


class KnobFeaturizer:
    """Vectorized ``knob`` features of configs.

    Parameters
    ----------
    space : release.space.KnobSpace

    Attributes
    ----------
    width : int
        Feature length: ``n_knobs`` indices plus one ``log2`` factor per split output of every
        tile knob.

    Notes
    -----
    Built from one look-up table per tile knob (shape ``(knob.size, n_factors)``), so
    ``transform`` of ``(n, n_knobs)`` configs is ``n_knobs`` gathers.
    """

    def __init__(self, space):
        self.space = space
        self._tables: list[tuple[int, np.ndarray]] = []
        for p, knob in enumerate(space.knobs):
            if knob.kind == "tile":
                table = np.log2(np.asarray(knob.choices, dtype=np.float64))
                self._tables.append((p, table.astype(np.float32)))
        self.width = space.n_knobs + sum(t.shape[1] for _, t in self._tables)

    def transform(self, xs: np.ndarray) -> np.ndarray:
        """Features of configs.

        Parameters
        ----------
        xs : np.ndarray, int, shape (n, n_knobs)
            Configs (any form; canonicalized here).

        Returns
        -------
        np.ndarray, float32, shape (n, width)
        """
        xs = self.space.canonicalize(np.asarray(xs, dtype=np.int64).reshape(-1, self.space.n_knobs))
        parts = [xs.astype(np.float32)]
        for p, table in self._tables:
            parts.append(table[xs[:, p]])
        return np.concatenate(parts, axis=1)


class ProgramFeatureCache:
    """``itervar`` features of configs: scheduled-program features, cached per canonical config.

    Parameters
    ----------
    space : release.space.KnobSpace
    max_size : int
        Entries kept (oldest dropped first; default 200,000, ~260 MB at 329 float32 each).

    Attributes
    ----------
    width : int
        ``2 * 164 + 1`` (sum- and max-pooled per-store features, store count).
    seconds : float
        Total seconds spent computing features (replay + postprocessors + extraction).
    computed : int
        Number of configs whose features were computed (cache misses).

    Notes
    -----
    An invalid config (``space.apply`` raises :class:`InvalidConfigError`) gets a row of NaN;
    callers treat it as "no program" (the cost model scores it ``-inf``).
    """

    def __init__(self, space, max_size: int = 200_000):
        self.space = space
        self.width = 2 * PER_STORE_WIDTH + 1
        self.max_size = int(max_size)
        self._cache: dict[tuple, np.ndarray] = {}
        self._extractor = None
        self._ctx = None
        self.seconds = 0.0
        self.computed = 0

    def _setup(self) -> None:
        if self._extractor is not None:
            return
        from tvm.s_tir import meta_schedule as ms

        # the task's creation registered the target's tensor intrinsics (Task.__init__)
        self._extractor = ms.feature_extractor.PerStoreFeature()
        self._ctx = ms.TuneContext(mod=self.space.task.mod, target=self.space.task.target, num_threads=1)

    def _compute(self, configs: Sequence[tuple]) -> list[np.ndarray]:
        from tvm.s_tir import meta_schedule as ms
        from tvm.s_tir.meta_schedule.arg_info import ArgInfo

        self._setup()
        rows: list[np.ndarray | None] = [None] * len(configs)
        cands, where = [], []
        for i, c in enumerate(configs):
            try:
                sch = self.space.apply(c)
            except InvalidConfigError:
                rows[i] = np.full(self.width, np.nan, dtype=np.float32)
                continue
            cands.append(ms.MeasureCandidate(sch, ArgInfo.from_entry_func(sch.mod, remove_preproc=True)))
            where.append(i)
        if cands:
            for i, feat in zip(where, self._extractor.extract_from(self._ctx, cands)):
                rows[i] = pool_per_store(feat.numpy())
        return rows  # type: ignore[return-value]

    def transform(self, xs: np.ndarray) -> np.ndarray:
        """Features of configs, computing the missing ones.

        Parameters
        ----------
        xs : np.ndarray, int, shape (n, n_knobs)

        Returns
        -------
        np.ndarray, float32, shape (n, width)
            NaN rows for invalid configs.
        """
        xs = self.space.canonicalize(np.asarray(xs, dtype=np.int64).reshape(-1, self.space.n_knobs))
        keys = [tuple(int(v) for v in row) for row in xs]
        missing = list(dict.fromkeys(k for k in keys if k not in self._cache))
        if missing:
            t0 = time.perf_counter()
            for k, row in zip(missing, self._compute(missing)):
                self._cache[k] = row
            dt = time.perf_counter() - t0
            self.seconds += dt
            self.computed += len(missing)
            logger.debug("program features of %d configs in %.2f s", len(missing), dt)
            while len(self._cache) > self.max_size:
                self._cache.pop(next(iter(self._cache)))
        if not keys:
            return np.zeros((0, self.width), dtype=np.float32)
        return np.stack([self._cache[k] for k in keys])

    def __contains__(self, config) -> bool:
        return tuple(self.space.canonical(config)) in self._cache

    def __len__(self) -> int:
        return len(self._cache)


def pool_per_store(feat: np.ndarray) -> np.ndarray:
    """Pool MetaSchedule per-store features ``(n_stores, 164)`` into ``[sum, max, n_stores]`` (329,)."""
    feat = np.asarray(feat, dtype=np.float32)
    if feat.ndim != 2 or feat.shape[0] == 0:
        out = np.zeros(2 * PER_STORE_WIDTH + 1, dtype=np.float32)
        return out
    w = min(feat.shape[1], PER_STORE_WIDTH)
    out = np.zeros(2 * PER_STORE_WIDTH + 1, dtype=np.float32)
    out[:w] = feat[:, :w].sum(axis=0)
    out[PER_STORE_WIDTH:PER_STORE_WIDTH + w] = feat[:, :w].max(axis=0)
    out[-1] = math.log2(1 + feat.shape[0])
    return out
