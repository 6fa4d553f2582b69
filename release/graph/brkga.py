"""Biased random-key genetic algorithm (BRKGA), vectorized over the population in NumPy.

Plain BRKGA follows Goncalves & Resende (2011, J. Heuristics 17): each generation keeps the elite
chromosomes, adds fresh *mutants*, and fills the rest with *crossover* offspring of one elite and one
non-elite parent, each gene taken from the elite parent with probability rho. REGAL (Paliwal et al.,
ICLR 2020, section 3) makes two parts per-gene: mutant genes are drawn from Beta(alpha_i, beta_i) and gene i
is inherited from the elite parent with probability rho_i. With ``alpha = beta = 1`` everywhere and one rho
this is plain BRKGA, and :func:`brkga` then returns exactly the same result for the same seed: random
numbers are drawn the same way whatever the per-gene parameters (a uniform draw per mutant gene, mapped
through the Beta inverse CDF only where ``(alpha_i, beta_i) != (1, 1)``), which also gives common random
numbers when a policy compares parameter settings.

The *evaluation budget* is hard: the search never evaluates more chromosomes than ``budget`` (the last
generation is truncated); elites are not re-evaluated.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from ..errors import GraphError
from .perf_model import PerformanceModel, rank_key

logger = logging.getLogger(__name__)


@dataclass
class BRKGAConfig:
    """Hyperparameters of BRKGA (defaults: plain BRKGA with Goncalves & Resende's recommended ranges)."""

    population: int = 100
    """Chromosomes per generation (capped at the evaluation budget)."""
    elite_fraction: float = 0.2
    """Fraction of the population kept unchanged as elites (G&R: 0.10-0.25)."""
    mutant_fraction: float = 0.2
    """Fraction of the population replaced by fresh mutants each generation (G&R: 0.10-0.30)."""
    rho: float = 0.7
    """Probability that a crossover child takes a gene from its elite parent (G&R: 0.5-0.8, often 0.7)."""

    def validate(self) -> None:
        """Raise :class:`GraphError` naming a bad field."""
        if self.population < 2:
            raise GraphError(f"BRKGA population must be >= 2, got {self.population}")
        if not 0 < self.elite_fraction < 1:
            raise GraphError(f"BRKGA elite_fraction must be in (0, 1), got {self.elite_fraction}")
        if not 0 <= self.mutant_fraction < 1 or self.elite_fraction + self.mutant_fraction >= 1:
            raise GraphError(
                f"BRKGA mutant_fraction must be in [0, 1) with elite + mutant < 1, got "
                f"elite {self.elite_fraction}, mutant {self.mutant_fraction}"
            )
        if not 0 <= self.rho <= 1:
            raise GraphError(f"BRKGA rho must be in [0, 1], got {self.rho}")


@dataclass
class SearchResult:
    """Outcome of one search method on one performance model.

    Attributes
    ----------
    best_chromosome : ndarray of float, shape (n_genes,)
    best_objective : float
        Objective of the best solution (us or bytes).
    best_violation : float
        Its memory-limit violation in bytes (0 = feasible).
    evaluations : int
        Objective evaluations used (<= budget).
    curve : ndarray of float, shape (K, 2)
        ``(evaluations so far, best objective so far)`` after each batch of evaluations.
    method : str
    """

    best_chromosome: np.ndarray
    best_objective: float
    best_violation: float
    evaluations: int
    curve: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))
    method: str = ""


def _per_gene(value, n_genes: int, name: str, lo: float, hi: float | None) -> np.ndarray:
    arr = np.broadcast_to(np.asarray(value, dtype=np.float64), (n_genes,)).copy()
    if not np.all(np.isfinite(arr)) or np.any(arr < lo) or (hi is not None and np.any(arr > hi)):
        rng = f"[{lo}, {hi}]" if hi is not None else f"> {lo}"
        raise GraphError(f"per-gene {name} must be finite and in {rng}, got values in [{arr.min()}, {arr.max()}]")
    return arr


class MutantSampler:
    """Draws mutant genes: U(0, 1) mapped through the Beta(alpha_i, beta_i) inverse CDF per gene.

    Parameters
    ----------
    alpha, beta : float or ndarray, shape (n_genes,)
        Beta parameters (> 0); genes with ``alpha = beta = 1`` stay uniform without any transform.
    """

    def __init__(self, alpha, beta, n_genes: int) -> None:
        a = _per_gene(alpha, n_genes, "alpha", 1e-6, None)
        b = _per_gene(beta, n_genes, "beta", 1e-6, None)
        if np.any(a <= 0) or np.any(b <= 0):
            raise GraphError("Beta parameters alpha and beta must be > 0")
        self.mask = ~((a == 1.0) & (b == 1.0))
        self.a = a[self.mask]
        self.b = b[self.mask]

    def __call__(self, rng: np.random.Generator, k: int, n_genes: int, fraction: float = 1.0) -> np.ndarray:
        """``k`` mutants; the first ``round(fraction * k)`` are mapped through the Beta inverse CDF, the rest stay
        uniform (the same uniform draws either way: common random numbers)."""
        u = rng.random((k, n_genes))
        m = int(round(fraction * k))
        if self.mask.any() and m:
            from scipy.special import betaincinv

            u[:m, self.mask] = betaincinv(self.a[None, :], self.b[None, :], u[:m, self.mask])
        return u


def policy_fraction_schedule(budget: int, reference_budget: int = 1000, cutoff: float = 4.0,
                             table=None) -> float:
    """Share of the population REGAL's policy biases at ``budget`` evaluations (ours): 1 up to the budget
    the policy was trained at, then ``reference_budget / budget``, and 0 (plain BRKGA, exactly) from
    ``cutoff * reference_budget`` on.

    With ``table`` (a checkpoint's ``policy_fraction``: ``[[budget, share], ...]`` chosen on a development split,
    see ``benchmarks/regal/budget_robustness.py --choose-shares``) the share is that of the largest tabulated
    budget <= ``budget`` (the smallest tabulated budget's share below it), and the default rule is not used.

    Why: on held-out graphs the shipped policies gained nothing measurable at 5,000-20,000 evaluations (ratios
    within BRKGA's own seed-to-seed noise, at times worse), so beyond four times its training budget REGAL
    defers to plain BRKGA (benchmarks/regal/results/budget-*.md).

    Returns
    -------
    float in [0, 1]
    """
    b = max(int(budget), 1)
    if table:
        rows = sorted((int(k), float(v)) for k, v in table)
        share = rows[0][1]
        for k, v in rows:
            if k <= b:
                share = v
        return float(min(1.0, max(0.0, share)))
    if b >= cutoff * reference_budget:
        return 0.0
    return float(min(1.0, reference_budget / b))


def brkga(
    model: PerformanceModel,
    budget: int,
    config: BRKGAConfig | None = None,
    seed: int = 0,
    alpha=1.0,
    beta=1.0,
    rho=None,
    initial: np.ndarray | None = None,
    policy_fraction: float = 1.0,
) -> SearchResult:
    """Run BRKGA on ``model`` for at most ``budget`` objective evaluations.

    Parameters
    ----------
    model : PerformanceModel
        Decoder and objective; its ``evaluations`` counter grows by exactly the evaluations used.
    budget : int
        Hard limit on objective evaluations (> 0).
    config : BRKGAConfig, optional
        Population and fractions (default :class:`BRKGAConfig()`). The population is capped at ``budget``.
    seed : int, default 0
        Seeds every random choice (initial population, parents, crossover masks, mutants).
    alpha, beta : float or ndarray of shape (model.n_genes,), default 1.0
        Per-gene Beta parameters of the mutant (and initial-population) distribution (REGAL).
    rho : float or ndarray of shape (model.n_genes,), optional
        Per-gene elite-inheritance probabilities (REGAL); default ``config.rho`` for every gene.
    initial : ndarray of shape (k, model.n_genes), optional
        Chromosomes placed first in the initial population (the rest are mutants), e.g. the given order and the
        greedy solution (:func:`release.graph.baselines.seed_chromosomes`), so the result is never worse than
        either.
    policy_fraction : float in [0, 1], default 1
        Share of each generation's mutants (and of the initial population) drawn from the per-gene Beta
        distributions; the rest are uniform. Per-gene rho is blended the same way:
        ``fraction * rho + (1 - fraction) * config.rho``. 0 gives plain BRKGA exactly (same random draws).

    Returns
    -------
    SearchResult
        Best chromosome (feasible first, then lowest objective), its objective, the evaluations used and the
        best-so-far curve per generation.

    Raises
    ------
    GraphError
        For a non-positive budget or bad hyperparameters.
    """
    config = config or BRKGAConfig()
    config.validate()
    if not isinstance(budget, (int, np.integer)) or budget <= 0:
        raise GraphError(f"evaluation budget must be a positive integer, got {budget!r}; use --budget 1 or more")
    G = model.n_genes
    f = float(policy_fraction)
    if not 0.0 <= f <= 1.0:
        raise GraphError(f"policy_fraction must be in [0, 1], got {policy_fraction!r}")
    rho_g = _per_gene(config.rho if rho is None else rho, G, "rho", 0.0, 1.0)
    if f < 1.0:
        rho_g = f * rho_g + (1.0 - f) * config.rho
    sample = MutantSampler(alpha, beta, G)
    rng = np.random.default_rng(seed)

    P = int(min(config.population, budget))
    n_elite = max(1, int(round(config.elite_fraction * P)))
    n_mut = int(round(config.mutant_fraction * P))
    n_elite = min(n_elite, P - 1) if P > 1 else 1
    n_mut = min(n_mut, P - n_elite)
    n_cross = P - n_elite - n_mut

    pop = sample(rng, P, G, f)
    if initial is not None:
        init = np.asarray(initial, dtype=np.float64).reshape(-1, G)[:P]
        pop[: len(init)] = init
    obj, vio = model.evaluate_population(pop)
    used = P
    curve = []

    order = rank_key(obj, vio)
    pop, obj, vio = pop[order], obj[order], vio[order]
    curve.append((used, obj[0] if vio[0] <= 0 else np.inf))
    while used < budget:
        k = min(n_mut + n_cross, budget - used)
        # offspring first: crossover children, then mutants (random draws in a fixed order)
        if P - n_elite > 0:
            ea = rng.integers(0, n_elite, size=n_cross)
            na = rng.integers(n_elite, P, size=n_cross)
        else:  # pragma: no cover - P >= 2 guarantees non-elites
            ea = na = np.zeros(n_cross, dtype=np.int64)
        mask = rng.random((n_cross, G)) < rho_g[None, :]
        children = np.where(mask, pop[ea], pop[na])
        mutants = sample(rng, n_mut, G, f)
        off = np.concatenate([mutants, children])[:k]
        o_obj, o_vio = model.evaluate_population(off)
        used += len(off)
        pop = np.concatenate([pop[:n_elite], off])
        obj = np.concatenate([obj[:n_elite], o_obj])
        vio = np.concatenate([vio[:n_elite], o_vio])
        order = rank_key(obj, vio)
        pop, obj, vio = pop[order], obj[order], vio[order]
        if len(pop) < P:  # truncated last generation
            break
        curve.append((used, obj[0] if vio[0] <= 0 else np.inf))
    curve.append((used, obj[0] if vio[0] <= 0 else np.inf))
    logger.debug("brkga: %d evaluations, best %.6g (violation %.3g)", used, obj[0], vio[0])
    return SearchResult(pop[0].copy(), float(obj[0]), float(vio[0]), used, np.array(curve, dtype=np.float64), "brkga")
