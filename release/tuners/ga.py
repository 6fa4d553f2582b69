"""AutoTVM's genetic-algorithm tuner (``autotvm.tuner.GATuner``) on a knob space.

Matches AutoTVM v0.6-v0.19 ``ga_tuner.py``: a population of ``pop_size`` genes (configs), every
gene measured; when a generation is measured, the ``elite_num`` best of genes + previous elites
are kept, ``pop_size`` children are made by one-point crossover of two parents drawn without
replacement with probability proportional to normalized throughput, each knob of a child mutates
to a uniform random value with ``mutation_prob``, and a child that was already visited has random
knobs re-drawn until it is new. Failed and invalid measurements score 0.

Differences: genes are canonical configs (knobs of an unselected design space are 0), so a
crossover between design spaces yields a legal config; invalid configs are not counted as trials
by the tuner loop (AutoTVM counted them).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..errors import TunerError
from ..measure.measure import MeasureResult
from .tuner import Tuner

logger = logging.getLogger(__name__)


@dataclass
class GAParams:
    """AutoTVM's ``GATuner`` defaults."""

    pop_size: int = 100
    """Genes per generation (capped at the space size)."""
    elite_num: int = 3
    """Best genes carried into the next selection (capped at ``pop_size``)."""
    mutation_prob: float = 0.1
    """Probability that each knob of a child is re-drawn uniformly."""


class GATuner(Tuner):
    """Genetic algorithm over configs (AutoTVM ``GATuner``).

    Parameters
    ----------
    task : release.task.Task
    pop_size : int
        Population size (default 100).
    elite_num : int
        Elites kept per generation (default 3).
    mutation_prob : float
        Per-knob mutation probability in [0, 1] (default 0.1).
    seed : int, optional
    plan_size : None
        Not used by GA; given (``release tune --plan-size``) it raises :class:`TunerError`.

    Raises
    ------
    TunerError
        ``plan_size`` given, ``pop_size < 1``, ``elite_num < 0`` or ``mutation_prob`` outside [0, 1].
    """

    name = "ga"

    def __init__(self, task, pop_size: int = 100, elite_num: int = 3, mutation_prob: float = 0.1,
                 seed: int | None = None, plan_size: int | None = None):
        super().__init__(task, seed=seed)
        if plan_size is not None:
            raise TunerError(f"plan_size={plan_size!r} does not apply to the ga tuner: a generation is "
                             f"pop_size={pop_size} configs, all measured; drop --plan-size")
        if not isinstance(pop_size, (int, np.integer)) or pop_size < 1:
            raise TunerError(f"pop_size={pop_size!r} must be an integer >= 1 (AutoTVM's default is 100)")
        if not isinstance(elite_num, (int, np.integer)) or elite_num < 0:
            raise TunerError(f"elite_num={elite_num!r} must be an integer >= 0 (AutoTVM's default is 3)")
        if not 0.0 <= float(mutation_prob) <= 1.0:
            raise TunerError(f"mutation_prob={mutation_prob!r} must be in [0, 1] (AutoTVM's default is 0.1)")
        size = self.space.size
        self.params = GAParams(int(min(pop_size, size)), int(min(elite_num, pop_size, size)), float(mutation_prob))
        self.dims = np.asarray(self.space.dims, dtype=np.int64)
        self.scores: dict[tuple, float] = {}  # measured config -> throughput (FLOP/s), 0 on failure
        self.scheduled: set[tuple] = set()    # genes ever put in a generation
        self.genes: list[tuple] = []
        self.elites: list[tuple] = []
        self.elite_scores: list[float] = []
        self.generation = 0
        self.trial_pt = 0

    # ------------------------------------------------------------------ helpers
    def _taken(self, c: tuple) -> bool:
        return c in self.visited or c in self.scheduled

    def _n_taken(self) -> int:
        """Configs visited or scheduled, each counted once (a measured gene is in both sets)."""
        return len(self.visited) + sum(1 for g in self.scheduled if g not in self.visited)

    def _random_population(self) -> None:
        genes = []
        tries = 0
        while len(genes) < self.params.pop_size and self._n_taken() < self.space.size:
            c = self.space.canonical(self.space.sample(1, self.rng)[0])
            tries += 1
            if not self._taken(c):
                genes.append(c)
                self.scheduled.add(c)
            elif tries > 1000 * self.params.pop_size:
                break
        self.genes, self.trial_pt = genes, 0

    def _next_generation(self) -> None:
        p = self.params
        genes = self.genes + self.elites
        scores = np.array([self.scores.get(g, 0.0) for g in self.genes] + self.elite_scores, dtype=np.float64)
        # keep elites
        k = min(p.elite_num, len(genes))
        elite_idx = np.argpartition(scores, -k)[-k:] if k else []
        self.elites = [genes[i] for i in elite_idx]
        self.elite_scores = [float(scores[i]) for i in elite_idx]
        # crossover: two parents without replacement, probability ~ normalized score
        scores = scores + 1e-8
        scores /= scores.max()
        probs = scores / scores.sum()
        n_knobs = len(self.dims)
        children = []
        for _ in range(p.pop_size):
            if len(genes) >= 2:
                i1, i2 = self.rng.choice(len(genes), size=2, replace=False, p=probs)
            else:
                i1 = i2 = 0
            point = int(self.rng.integers(n_knobs))
            children.append(list(genes[i1][:point]) + list(genes[i2][point:]))
        # mutation; re-draw random knobs until the child is new
        next_genes: list[tuple] = []
        for child in children:
            if self._n_taken() >= self.space.size:
                break
            for j in range(n_knobs):
                if self.rng.random() < p.mutation_prob:
                    child[j] = int(self.rng.integers(self.dims[j]))
            c = self.space.canonical(child)
            tries = 0
            while self._taken(c) and tries < 10000:
                j = int(self.rng.integers(n_knobs))
                child[j] = int(self.rng.integers(self.dims[j]))
                c = self.space.canonical(child)
                tries += 1
            if self._taken(c):
                continue
            next_genes.append(c)
            self.scheduled.add(c)
        self.genes, self.trial_pt = next_genes, 0
        self.generation += 1
        logger.debug("%s: GA generation %d, %d genes, best elite %.3g GFLOPS", self.task.name, self.generation,
                     len(next_genes), max(self.elite_scores, default=0) / 1e9)

    # ------------------------------------------------------------------ Tuner hooks
    def next_batch(self, batch_size: int) -> list[tuple]:
        if not self.genes:
            self._random_population()
        out = []
        while len(out) < batch_size and self.trial_pt < len(self.genes):
            g = self.genes[self.trial_pt]
            self.trial_pt += 1
            if g not in self.visited:
                out.append(g)
        return out

    def update(self, configs: Sequence[tuple], results: Sequence[MeasureResult]) -> None:
        for res in results:
            self.scores[tuple(res.config)] = self.task.flop / res.mean_cost if res.ok and res.mean_cost > 0 else 0.0
        if self.genes and self.trial_pt >= len(self.genes) and all(g in self.visited for g in self.genes):
            self._next_generation()
