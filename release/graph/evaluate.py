"""Evaluating a REGAL policy on held-out graphs against plain BRKGA, tuned BRKGA, local search and optima.

Per graph and seed (:func:`evaluate_graph`): the policy's most likely choices (inference timed) set per-gene
Beta and rho for BRKGA at ``budget``; plain BRKGA and tuned BRKGA run at the same budget and seed; plain BRKGA
also runs at ``match_factor`` x ``budget`` to find the evaluations it needs to match the policy's result
(first point of its best-so-far curve at or below it; ``inf`` when it never does); local search at the same
budget for reference; the exact optimum where one is computable (single-device peak memory: frontier DP).
:func:`summarize` turns the rows into the figures of the closing note.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass

import numpy as np

from .brkga import BRKGAConfig

logger = logging.getLogger(__name__)


@dataclass
class EvalConfig:
    """Settings of :func:`evaluate_policy`."""

    objective: str = "peak-memory"
    """Objective ("runtime" or "peak-memory")."""
    devices: int = 1
    """Devices of the performance model."""
    budget: int = 1000
    """Evaluations per search method."""
    match_factor: int = 8
    """Plain BRKGA's largest budget, as a multiple of ``budget``, when finding the budget that matches REGAL."""
    exact: bool = True
    """Compute the optimum where possible (single-device peak memory only)."""
    local: bool = True
    """Also run local search at the same budget."""
    workers: int = 1
    """Processes (one graph per task)."""


def _pct(ref: float, x: float) -> float:
    return 100.0 * (ref - x) / ref if ref > 0 else 0.0


def evaluate_graph(graph, params: dict, cfg: EvalConfig, seed: int, tuned: BRKGAConfig | None = None) -> dict:
    """All methods on one graph and seed; ``params`` are the policy's per-gene ``alpha``/``beta``/``rho``.

    Returns
    -------
    dict
        ``regal``, ``brkga``, ``tuned``, ``local``, ``exact`` objectives (us or bytes; None when not run),
        ``match_evals`` (plain-BRKGA evaluations to reach REGAL's objective, ``inf`` if not within
        ``match_factor`` x budget), ``n``.
    """
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:  # pragma: no cover
        pass
    from .baselines import local_search
    from .brkga import brkga
    from .exact import exact_peak_memory
    from .perf_model import PerformanceModel

    def model():
        return PerformanceModel(graph, cfg.devices, cfg.objective)

    row = {"graph": graph.name, "n": graph.n, "seed": seed}
    row["regal"] = brkga(model(), cfg.budget, seed=seed, **params).best_objective
    row["brkga"] = brkga(model(), cfg.budget, seed=seed).best_objective
    row["tuned"] = brkga(model(), cfg.budget, tuned, seed=seed).best_objective if tuned is not None else None
    big = brkga(model(), cfg.budget * cfg.match_factor, seed=seed)
    hit = np.flatnonzero(big.curve[:, 1] <= row["regal"] * (1 + 1e-12))
    row["match_evals"] = float(big.curve[hit[0], 0]) if hit.size else float("inf")
    row["brkga_big"] = big.best_objective
    row["local"] = local_search(model(), cfg.budget, seed).best_objective if cfg.local else None
    row["exact"] = None
    if cfg.exact and cfg.objective == "peak-memory" and cfg.devices == 1:
        ex = exact_peak_memory(graph)
        if ex.chromosome is not None and ex.status == "optimal":
            row["exact"] = ex.objective
    return row


def _task(args):
    g, params, cfg, seed, tuned = args
    return evaluate_graph(g, params, cfg, seed, tuned)


def evaluate_policy(policy, graphs, cfg: EvalConfig, seeds=None, tuned: BRKGAConfig | None = None) -> list[dict]:
    """Run :func:`evaluate_graph` on every graph (seed ``seeds[i]``, default ``10_000 + i``); adds the policy's
    inference time (``infer_s``: features + forward pass, seconds) to each row."""
    from .policy import policy_action

    seeds = seeds if seeds is not None else [10_000 + i for i in range(len(graphs))]
    tasks = []
    for g, s in zip(graphs, seeds):
        t0 = time.perf_counter()
        act = policy_action(policy, g, budget=cfg.budget)
        infer = time.perf_counter() - t0
        tasks.append(((g, act.brkga_params(policy.cfg, cfg.devices), cfg, s, tuned), infer))
    if cfg.workers > 1:
        with ProcessPoolExecutor(cfg.workers) as pool:
            rows = list(pool.map(_task, [t for t, _ in tasks]))
    else:
        rows = [_task(t) for t, _ in tasks]
    for r, (_, infer) in zip(rows, tasks):
        r["infer_s"] = infer
        logger.info("%s: regal %.6g brkga %.6g (%+.2f%%)", r["graph"], r["regal"], r["brkga"],
                    _pct(r["brkga"], r["regal"]))
    return rows


def summarize(rows: list[dict], budget: int) -> dict:
    """Figures over ``rows``: mean % improvement of REGAL over plain and tuned BRKGA (and local search), % of
    graphs improved / worsened vs plain, median and mean plain-BRKGA budget matching REGAL (as a multiple of
    ``budget``; graphs where plain never matched within the factor count as the factor and are counted),
    mean gap to the optimum per method where known, mean policy inference time."""
    if not rows:
        return {}
    R = np.array([r["regal"] for r in rows])
    B = np.array([r["brkga"] for r in rows])
    out = {"graphs": len(rows),
           "impr_vs_brkga_pct": float(np.mean([_pct(b, r) for b, r in zip(B, R)])),
           "improved_pct": float(100.0 * np.mean(R < B)), "worse_pct": float(100.0 * np.mean(R > B))}
    if rows[0].get("tuned") is not None:
        out["impr_vs_tuned_pct"] = float(np.mean([_pct(r["tuned"], r["regal"]) for r in rows]))
    if rows[0].get("local") is not None:
        out["impr_vs_local_pct"] = float(np.mean([_pct(r["local"], r["regal"]) for r in rows]))
    m = np.array([r["match_evals"] for r in rows]) / budget
    out["match_budget_median_x"] = float(np.median(m))
    out["match_not_reached"] = int(np.sum(~np.isfinite(m)))
    if all(r.get("exact") is not None for r in rows):
        for k in ("regal", "brkga", "tuned", "local"):
            if rows[0].get(k) is not None:
                out[f"gap_{k}_pct"] = float(np.mean([100.0 * (r[k] - r["exact"]) / r["exact"] for r in rows]))
                out[f"at_opt_{k}"] = int(sum(r[k] <= r["exact"] * (1 + 1e-9) for r in rows))
    out["infer_ms_mean"] = float(1e3 * np.mean([r["infer_s"] for r in rows]))
    return out


__all__ = ["EvalConfig", "evaluate_graph", "evaluate_policy", "summarize", "asdict"]
