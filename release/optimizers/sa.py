"""AutoTVM's simulated-annealing model optimizer, vectorized over parallel chains with NumPy.

Matches ``autotvm.tuner.sa_model_optimizer.SimulatedAnnealingOptimizer`` (TVM v0.6-v0.19):
``parallel_size`` chains start from random configs (or, ``persistent``, from where the last call
left them); each step moves every chain by changing **one random knob to a random other value**,
accepts with probability ``exp(min((new - old) / (t + 1e-5), 1))`` under a temperature cooled
linearly from ``temp[0]`` to ``temp[1]`` over ``n_iter + 1`` steps, and offers every proposed
config (accepted or not) to a top-``num`` heap that excludes visited configs. The search stops
after ``n_iter`` steps or once the heap has not changed for ``early_stop`` steps.

Design for program (``itervar``) features: a step's 128 proposals are scored with the cost
model's fast :meth:`predict` (knob features, ~10 us per config); scheduled-program features cost
8-40 ms per config here (replay, postprocessors, extraction), i.e. up to 40 minutes for the
64,000 queries of one round, so they are never computed in the loop. If the model re-ranks
(:attr:`release.cost_model.CostModel.reranks`, e.g. ``XGBoostCostModel(feature_type="itervar")``),
the heap keeps ``rerank_ratio * num`` configs, which the model's ``rerank`` then re-orders by
program features (configs that are not legal programs drop out), and the best ``num`` are
returned: 128 program evaluations per round for ``num=64``, ~1-5 s here, cached by the model.
"""

from __future__ import annotations

import heapq
import logging
import time
from dataclasses import dataclass

import numpy as np

from ..cost_model.base import as_cost_model
from ..errors import TunerError
from .base import ModelOptimizer

logger = logging.getLogger(__name__)


@dataclass
class SAParams:
    """AutoTVM's simulated-annealing defaults (``SimulatedAnnealingOptimizer.__init__``)."""

    n_iter: int = 500
    """Maximum annealing steps per call."""
    temp: tuple = (1.0, 0.0)
    """Start and end temperature (linear cooling), or one number for a constant temperature."""
    persistent: bool = True
    """Start each call from the chains' last points instead of fresh random configs."""
    parallel_size: int = 128
    """Number of parallel chains."""
    early_stop: int = 50
    """Stop once the top-``num`` heap is unchanged for this many steps."""
    rerank_ratio: float = 2.0
    """With a re-ranking model: keep ``ratio * num`` configs and let the model re-rank them (ours)."""


class SimulatedAnnealingOptimizer(ModelOptimizer):
    """Simulated annealing over a knob space (AutoTVM ``SimulatedAnnealingOptimizer``).

    Parameters
    ----------
    task_or_space : release.task.Task | release.space.KnobSpace
    n_iter, temp, persistent, parallel_size, early_stop, rerank_ratio
        See :class:`SAParams` (AutoTVM's defaults: 500, (1, 0), True, 128, 50).
    seed : int, optional
        Seed of start points, moves and acceptance (None: nondeterministic).

    Attributes
    ----------
    points : np.ndarray, int, shape (parallel_size, n_knobs) or None
        The chains' current configs (kept between calls when ``persistent``).
    last_stats : dict
        ``{"steps", "queries", "seconds", "rerank_seconds"}`` of the last call.

    Raises
    ------
    TunerError
        ``n_iter``, ``parallel_size`` or ``early_stop`` below 1, or ``rerank_ratio < 1``.
    """

    def __init__(self, task_or_space, n_iter: int = 500, temp=(1.0, 0.0), persistent: bool = True,
                 parallel_size: int = 128, early_stop: int = 50, seed: int | None = None,
                 rerank_ratio: float = 2.0):
        from ..space import KnobSpace

        space = task_or_space if isinstance(task_or_space, KnobSpace) else task_or_space.config_space
        for name, v in (("n_iter", n_iter), ("parallel_size", parallel_size), ("early_stop", early_stop)):
            if not isinstance(v, (int, np.integer)) or v < 1:
                raise TunerError(f"simulated annealing {name}={v!r} must be an integer >= 1")
        if rerank_ratio < 1:
            raise TunerError(f"simulated annealing rerank_ratio={rerank_ratio!r} must be >= 1")
        self.space = space
        self.params = SAParams(int(n_iter), temp, bool(persistent), int(parallel_size), int(early_stop),
                               float(rerank_ratio))
        self.rng = np.random.default_rng(seed)
        self.points: np.ndarray | None = None
        self.last_stats: dict = {}
        dims = np.asarray(space.dims, dtype=np.int64)
        self.dims = dims
        # knobs a move may change, per design space (a knob of an unselected space is a no-op)
        n_sp = len(space.spaces)
        self._space_pos = next((p for p, k in enumerate(space.knobs) if k.kind == "space"), None)
        self._movable = np.zeros((n_sp, space.n_knobs), dtype=bool)
        for p, k in enumerate(space.knobs):
            for s in k.spaces:
                self._movable[s, p] = k.size > 1

    # ------------------------------------------------------------------ role hooks
    @property
    def stats(self) -> dict:
        """``{"steps", "queries", "seconds", "rerank_seconds"}`` of the last call (``last_stats``)."""
        return dict(self.last_stats)

    def state_dict(self) -> dict:
        """The chains' points (persistent annealing) and the random state."""
        return {"points": None if self.points is None else self.points.copy(),
                "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict, same_space: bool = True) -> None:
        """Restore :meth:`state_dict` output (``same_space`` is ignored: points are per space)."""
        self.points = None if state.get("points") is None else np.asarray(state["points"], dtype=np.int64)
        if "rng" in state:
            self.rng.bit_generator.state = state["rng"]

    # ------------------------------------------------------------------ moves
    def random_walk(self, points: np.ndarray) -> np.ndarray:
        """One move per row: one random movable knob set to a random *different* value
        (AutoTVM ``random_walk``), then canonicalized. On a space with limits (GPU targets:
        ``KnobSpace.feasible``) a move outside them is redrawn up to :attr:`WALK_TRIES` times, then the
        chain stays where it is, so the chains (started by ``KnobSpace.sample`` within the limits) and
        every config they offer keep the limits.

        Parameters
        ----------
        points : np.ndarray, int, shape (n, n_knobs)

        Returns
        -------
        np.ndarray, int, shape (n, n_knobs)
        """
        out = self._walk(points)
        if self.space.constrained:  # a move outside the target's limits is redrawn, then refused (the chain stays)
            bad = ~self.space.feasible(out)
            for _ in range(self.WALK_TRIES - 1):
                if not bad.any():
                    break
                out[bad] = self._walk(points[bad])
                bad[bad] = ~self.space.feasible(out[bad])
            out[bad] = points[bad]
        return out

    #: moves tried per chain and step on a space with limits (GPU targets) before the chain stays put
    WALK_TRIES = 4

    def _walk(self, points: np.ndarray) -> np.ndarray:
        n = len(points)
        spaces = points[:, self._space_pos] if self._space_pos is not None else np.zeros(n, dtype=np.int64)
        mask = self._movable[spaces]
        knob = np.argmax(np.where(mask, self.rng.random(mask.shape), -1.0), axis=1)
        cur = points[np.arange(n), knob]
        new = self.rng.integers(0, self.dims[knob] - 1)
        new = new + (new >= cur)
        out = points.copy()
        out[np.arange(n), knob] = new
        return self.space.canonicalize(out)

    # ------------------------------------------------------------------ search
    def find_maximums(self, model, num: int, exclusive) -> list[tuple]:
        """Up to ``num`` configs outside ``exclusive`` with the highest predicted score.

        Parameters
        ----------
        model : release.cost_model.CostModel
            ``model.predict(xs (n, n_knobs)) -> (n,)``; a re-ranking model's ``rerank`` orders
            the result (see the module docstring). Any object with ``predict`` works too.
        num : int
            Plan size.
        exclusive : set[tuple]
            Canonical configs never to return (the visited ones).

        Returns
        -------
        list[tuple]
            Canonical configs, best first (by the model's ``rerank`` if it re-ranks, else ``predict``).

        ``num`` (>= 1) is the tuner's plan size, validated where the user gave it
        (:func:`release.errors.check_plan_size`), not again here.
        """
        p = self.params
        t_start = time.perf_counter()
        model = as_cost_model(model)
        keep = model.rerank_keep(num, p.rerank_ratio)
        if p.persistent and self.points is not None:
            points = self.points
        else:
            points = self.space.sample(p.parallel_size, self.rng)
        scores = np.asarray(model.predict(points), dtype=np.float64)
        queries = len(points)

        heap: list = [(float("-inf"), (-1 - i,)) for i in range(keep)]
        in_heap = set(map(tuple, exclusive))
        in_heap.update(x[1] for x in heap)

        def offer(cands: np.ndarray, cand_scores: np.ndarray) -> bool:
            changed = False
            if self.space.constrained:  # only configs within the target's limits enter the plan
                cand_scores = np.where(self.space.feasible(cands), cand_scores, -np.inf)
            for i in np.flatnonzero(cand_scores > heap[0][0]):
                s = float(cand_scores[i])
                if s <= heap[0][0]:
                    continue
                c = tuple(int(v) for v in cands[i])
                if c in in_heap:
                    continue
                popped = heapq.heapreplace(heap, (s, c))
                in_heap.discard(popped[1])
                in_heap.add(c)
                changed = True
            return changed

        offer(points, scores)
        if isinstance(p.temp, (tuple, list, np.ndarray)):
            t = float(p.temp[0])
            cool = (float(p.temp[0]) - float(p.temp[1])) / (p.n_iter + 1)
        else:
            t, cool = float(p.temp), 0.0
        k = k_last_modify = 0
        while k < p.n_iter and k < k_last_modify + p.early_stop:
            new_points = self.random_walk(points)
            new_scores = np.asarray(model.predict(new_points), dtype=np.float64)
            queries += len(new_points)
            with np.errstate(over="ignore"):
                ac_prob = np.exp(np.minimum((new_scores - scores) / (t + 1e-5), 1))
            accept = self.rng.random(len(ac_prob)) < ac_prob
            points = np.where(accept[:, None], new_points, points)
            scores = np.where(accept, new_scores, scores)
            if offer(new_points, new_scores):
                k_last_modify = k
            k += 1
            t -= cool
        if p.persistent:
            self.points = points
        found = sorted((x for x in heap if x[1][0] >= 0), key=lambda x: -x[0])
        configs = [c for _, c in found]
        t_search = time.perf_counter() - t_start
        t_rerank = 0.0
        if model.reranks and configs:
            r0 = time.perf_counter()
            configs = model.rerank(configs)
            t_rerank = time.perf_counter() - r0
        configs = configs[:num]
        self.last_stats = dict(steps=k, queries=queries, seconds=t_search + t_rerank, rerank_seconds=t_rerank)
        logger.debug("SA: %d steps, %d queries, %.2f s search, %.2f s re-rank, %d configs",
                     k, queries, t_search, t_rerank, len(configs))
        return configs
