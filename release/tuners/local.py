"""Local exploitation once a task's best stops improving: a Droplet-style coordinate search.

Droplet search (Canesche et al., "Drop-Loop/Droplet search", ACM TACO 2021; AutoTVM's
``DropletTuner``, TVM 0.13-0.19, ``python/tvm/autotvm/tuner/droplet_turner.py``) walks from the
best measured config: it measures the neighbours, moves to a neighbour whose costs are lower by a
statistical test on the repeats (AutoTVM: ``scipy.stats.ttest_ind(...).pvalue <= 0.05``), and
when no neighbour wins it widens the step and tries again, until the step exceeds the largest
knob. What :class:`DropletSearch` does the same and what differs:

- same: start at the best measured config; accept a move only when its mean cost is lower *and*
  a t-test on the two configs' repeat costs (``MeasureResult.costs``) gives ``p <= pvalue``
  (0.05); with one cost on either side the lower mean decides (AutoTVM's rule); after an
  accepted move the step goes back to 1; no accepted move in a whole neighbourhood: step + 1.
- differs: moves are *coordinate* moves (one active knob of the config's design space moved by
  ``+-step`` indices, clipped to the knob's range), not AutoTVM's moves of every subset of knobs
  at once (``2 ** n_knobs`` directions: 2 ** 9 = 512 configs per step for a conv2d, more than a
  whole budget here); the test is Welch's (``equal_var=False``: two configs' timing noise need
  not have equal variance); the best accepted neighbour of a batch wins (AutoTVM: the last one
  better than the running best); moves are ordered by the tuner's cost model, best first, when
  one is given.

:class:`release.tuners.model_based.ModelBasedTuner` runs it with ``local_search=True`` as its local
phase (:class:`LocalPhase`) after ``patience`` trials without a new best
(default: ``plan_size``, one round of the model's plan).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Sequence

import numpy as np

logger = logging.getLogger(__name__)


@dataclass
class LocalSearchConfig:
    """Settings of the local phase (Droplet search; defaults AutoTVM's ``DropletTuner`` where it has one)."""

    patience: int | None = None
    """Trials without a new best before the local phase starts (None: the tuner's ``plan_size``)."""
    pvalue: float = 0.05
    """Significance of the t-test that accepts a move (AutoTVM's ``DropletTuner`` default)."""
    max_step: int | None = None
    """Largest step in knob indices (None: the largest knob's size, AutoTVM's ``max(dims)``)."""


def significantly_faster(new: Sequence[float], old: Sequence[float], pvalue: float = 0.05) -> bool:
    """Whether costs ``new`` (seconds, repeats of one config) beat ``old``: lower mean and Welch's
    t-test ``p <= pvalue`` (two-sided, as AutoTVM's ``DropletTuner.p_value``); with at most one
    cost on either side, the lower mean alone decides (AutoTVM's rule)."""
    new, old = np.asarray(new, dtype=np.float64), np.asarray(old, dtype=np.float64)
    if len(new) == 0:
        return False
    if len(old) == 0:
        return True
    if new.mean() >= old.mean():
        return False
    if len(new) <= 1 or len(old) <= 1:
        return True
    if np.ptp(new) == 0 and np.ptp(old) == 0:  # no spread at all: the means differ exactly
        return True
    from scipy import stats

    p = stats.ttest_ind(new, old, equal_var=False).pvalue
    return bool(np.isfinite(p) and p <= pvalue)


class DropletSearch:
    """Droplet-style coordinate search around a center config (see the module docstring).

    Parameters
    ----------
    space : release.space.KnobSpace
    config : LocalSearchConfig, optional
    score : callable, optional
        ``score(xs (n, n_knobs)) -> (n,)`` (the cost model's ``predict``): moves are tried best first.

    Attributes
    ----------
    center, center_costs
        The current center and its repeat costs (s).
    step : int
        Current move size in knob indices.
    moves, accepted : int
        Configs proposed, moves accepted.
    exhausted : bool
        No unvisited move is left at any step up to ``max_step``.
    centers : list of tuple
        Every center so far (the start, then each accepted move).
    """

    def __init__(self, space, config: LocalSearchConfig | None = None, score=None):
        self.space = space
        self.config = config or LocalSearchConfig()
        self.score = score
        self.max_step = int(self.config.max_step or max(int(d) for d in space.dims))
        self.center: tuple | None = None
        self.center_costs: list[float] = []
        self.step = 1
        self.queue: list[tuple] = []
        self.moves = 0
        self.accepted = 0
        self.exhausted = False
        self.centers: list[tuple] = []

    def start(self, center: Sequence[int], costs: Sequence[float], visited: set) -> None:
        """Begin at ``center`` (its measured ``costs``) with step 1."""
        self.center, self.center_costs = tuple(center), list(costs)
        self.step, self.exhausted = 1, False
        self.centers.append(self.center)
        self.queue = self._neighbourhood(visited)

    def _neighbourhood(self, visited: set) -> list[tuple]:
        c = list(self.space.canonical(self.center))
        s = self.space.space_of(c)
        active = self.space._active[s]
        out: dict[tuple, None] = {}
        for p, knob in enumerate(self.space.knobs):
            if not active[p] or knob.size < 2:
                continue
            for d in (-self.step, self.step):
                v = min(max(c[p] + d, 0), knob.size - 1)
                if v == c[p]:
                    continue
                n = c.copy()
                n[p] = v
                n = self.space.canonical(n)
                if n not in visited:
                    out[n] = None
        moves = list(out)
        if self.space.constrained and moves:  # a GPU target: only moves within its limits (checked on the knobs)
            moves = [m for m, ok in zip(moves, self.space.feasible(moves)) if ok]
        if self.score is not None and len(moves) > 1:
            scores = np.asarray(self.score(np.asarray(moves, dtype=np.int64)), dtype=np.float64)
            moves = [moves[i] for i in np.argsort(-scores, kind="stable")]
        return moves

    def next(self, n: int, visited: set) -> list[tuple]:
        """Up to ``n`` unvisited moves; widens the step when the neighbourhood is used up.
        Empty (and :attr:`exhausted`) once no step up to ``max_step`` has an unvisited move."""
        out: list[tuple] = []
        while len(out) < n and not self.exhausted:
            self.queue = [c for c in self.queue if c not in visited and c not in out]
            if not self.queue:
                if self.step >= self.max_step:
                    self.exhausted = True
                    break
                self.step += 1
                self.queue = self._neighbourhood(visited)
                continue
            out.append(self.queue.pop(0))
        self.moves += len(out)
        return out

    def observe(self, results, visited: set) -> bool:
        """Move to the best of ``results`` (MeasureResult) significantly faster than the center.

        Returns
        -------
        bool
            Whether the center moved (the step is then 1 again and the queue the new neighbourhood).
        """
        best = None
        for r in results:
            if not r.ok or not r.costs:
                continue
            if significantly_faster(r.costs, self.center_costs, self.config.pvalue):
                if best is None or np.mean(r.costs) < np.mean(best.costs):
                    best = r
        if best is None:
            return False
        self.center, self.center_costs = tuple(best.config), list(best.costs)
        self.step = 1
        self.accepted += 1
        self.centers.append(self.center)
        self.queue = self._neighbourhood(visited)
        return True


class LocalPhase:
    """The Droplet-style local phase (:class:`DropletSearch`) and when it starts: a phase of
    :mod:`release.tuners.phases` (``propose``, ``exhausted``, ``observe``; ``state`` is the tuner).

    Parameters
    ----------
    config : release.tuners.local.LocalSearchConfig
    patience : int
        Trials without a new best before it starts.

    Attributes
    ----------
    search : DropletSearch or None
        The search once it started (a new one each time it starts again from another best).
    started_at : int or None
        Trial count when it last started.
    costs : dict
        Successful config -> its repeat costs (s), for the search's t-test.
    """

    name = "local"

    def __init__(self, config: LocalSearchConfig, patience: int):
        self.config = config
        self.patience = int(patience)
        self.search: DropletSearch | None = None
        self.started_at: int | None = None
        self.costs: dict[tuple, list] = {}

    @property
    def running(self) -> bool:
        """Whether it started and has moves left."""
        return self.search is not None and not self.search.exhausted

    @property
    def exhausted(self) -> bool:
        return not self.running

    def propose(self, n: int, state, taken: Sequence[tuple] = ()) -> list[tuple]:
        return self.search.next(n, state.visited)

    def observe(self, configs: Sequence[tuple], results: Sequence, state) -> None:
        """Keep each result's repeat costs; while running, move the search to a significantly faster
        result."""
        for res in results:
            if res.ok and res.costs:
                self.costs[tuple(res.config)] = list(res.costs)
        if self.running and self.search.observe(results, state.visited):
            logger.info("%s: local search moved to %s (%.4g s)", state.task.name, self.search.center,
                        float(np.mean(self.search.center_costs)))

    def should_start(self, state) -> bool:
        """``patience`` trials without a new best, and not the neighbourhood of a best already used up."""
        if self.running or state.best_config is None or state.trials - state.best_iter < self.patience:
            return False
        return not (self.search is not None and self.search.center == state.best_config)

    def start(self, state, score=None) -> None:
        """A new search from the best measured config (moves ordered by ``score`` when given)."""
        costs = self.costs.get(tuple(state.best_config), [state.best_cost])
        self.search = DropletSearch(state.space, self.config, score=score)
        self.search.start(state.best_config, costs, state.visited)
        self.started_at = state.trials
        logger.info("%s: best unchanged for %d trials: local search from %s", state.task.name,
                    state.trials - state.best_iter, state.best_config)


__all__ = ["DropletSearch", "LocalPhase", "LocalSearchConfig", "significantly_faster"]
