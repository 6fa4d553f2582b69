"""Benchmark metrics: pure functions of curves and checkpoint points (no TVM, no timing).

Operator tiers (:mod:`release.bench.operator_tier`): a run's best-so-far :class:`Curve` from its
records, :func:`compare` of a run against the baseline's run of the same task and seed,
:func:`geomean`, :func:`bootstrap_geomean` (95% interval over seeds) and :func:`summarize` (per tuner,
over tasks). Model tiers (:mod:`release.bench.model_tier`): :func:`checkpoint_trials` (where the curve
is timed), :func:`time_to_reach` and :func:`ratio_table` (time to reach another run's final latency).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# ---------------------------------------------------------------------------------------- metrics
def continued_rounds(rounds) -> np.ndarray:
    """Round numbers (cost-model refits before each measurement) made non-decreasing across resumes.

    Logs written before the round fix (``Tuner.round_base``, 2026-11-30) restart their rounds at 1
    when a run is resumed, e.g. ``0 0 1 1 2 | 1 1 2``; the resumed segment is shifted to continue after the
    last round, ``0 0 1 1 2 | 3 3 4``, which is what the fixed tuner logs. Logs that never decrease are
    returned unchanged. Shape ``(n,)`` int."""
    out = np.array(rounds, dtype=int)
    offset = 0
    for i in range(1, len(out)):
        raw_prev, raw = rounds[i - 1], rounds[i]
        if raw < raw_prev:  # a resume of a pre-fix log: continue after the last round
            offset = out[i - 1] - raw + 1
        out[i] = raw + offset
    return out


@dataclass
class Curve:
    """Best-so-far curve of one run. Arrays have one entry per measurement, in order."""

    gflops: np.ndarray  # best GFLOPS so far
    wall: np.ndarray  # cumulative seconds (search + fit + measure)
    search: np.ndarray  # cumulative seconds in search + fit
    rounds: np.ndarray  # cost-model refits before each measurement

    @classmethod
    def from_records(cls, recs) -> "Curve":
        """The curve of a run's records, in log order (their ``gflops``, ``search_s``, ``fit_s``,
        ``measure_s``, ``round``)."""
        g = np.maximum.accumulate(np.array([r.gflops for r in recs], dtype=float)) if recs else np.zeros(0)
        wall = np.cumsum([r.search_s + r.fit_s + r.measure_s for r in recs]) if recs else np.zeros(0)
        search = np.cumsum([r.search_s + r.fit_s for r in recs]) if recs else np.zeros(0)
        rounds = continued_rounds([r.round for r in recs])
        return cls(g, np.asarray(wall, float), np.asarray(search, float), rounds)

    @property
    def best(self) -> float:
        """The run's final best GFLOPS (0 for an empty run)."""
        return float(self.gflops[-1]) if len(self.gflops) else 0.0

    def reach(self, target: float) -> tuple[int, float] | None:
        """``(measurements, wall seconds)`` at which the curve first reaches ``target`` GFLOPS."""
        idx = np.nonzero(self.gflops >= target * (1 - 1e-9))[0]
        if not len(idx):
            return None
        i = int(idx[0])
        return i + 1, float(self.wall[i])

    def at(self, n: int) -> float:
        """Best GFLOPS after ``n`` measurements."""
        return float(self.gflops[min(n, len(self.gflops)) - 1]) if n >= 1 and len(self.gflops) else 0.0

    def wall_at_rounds(self, rounds: int) -> float | None:
        """Wall seconds of the first ``rounds`` rounds (records of rounds 0 .. rounds-1; a last round
        cut short by the trial budget counts as done). None if the run never got to round
        ``rounds - 1``."""
        if not len(self.rounds) or self.rounds.max() < rounds - 1:
            return None
        return float(self.wall[int(np.nonzero(self.rounds <= rounds - 1)[0][-1])])


def compare(base: Curve, other: Curve, rounds: int = 16) -> dict:
    """Metrics of ``other`` against the baseline ``base`` (same task, same seed).

    Keys: ``time_speedup``, ``measure_ratio`` (to ``base``'s final best; upper bounds when
    ``reached`` is False, see :mod:`release.bench.operator_tier`), ``equal_n``, ``best_at_equal_n`` (GFLOPS),
    ``best_ratio_at_equal_n``, ``round_speedup``, ``search_share`` (0-1)."""
    out = {}
    target = base.best
    rb, ro = base.reach(target), other.reach(target)
    out["reached"] = ro is not None
    out["reach_n"], out["reach_s"] = ro if ro else (None, None)  # measurements and wall seconds to base's best
    if ro is None and len(other.gflops):  # censored: it would have needed more than its whole run
        ro = (len(other.gflops), float(other.wall[-1]))
    out["time_speedup"] = rb[1] / ro[1] if rb and ro and ro[1] > 0 else float("nan")
    out["measure_ratio"] = rb[0] / ro[0] if rb and ro else float("nan")
    n = min(len(base.gflops), len(other.gflops))
    out["equal_n"] = n
    out["best_at_equal_n"] = other.at(n)
    out["best_ratio_at_equal_n"] = other.at(n) / base.at(n) if base.at(n) > 0 else float("nan")
    wb, wo = base.wall_at_rounds(rounds), other.wall_at_rounds(rounds)
    if other.rounds.max(initial=0) == 0 and wb is not None:  # model-free tuner: the baseline's measurements
        k = int(np.count_nonzero(base.rounds <= rounds - 1))
        wo = float(other.wall[k - 1]) if 0 < k <= len(other.wall) else None
    out["round_speedup"] = wb / wo if wb and wo else float("nan")
    out["search_share"] = float(other.search[-1] / other.wall[-1]) if len(other.wall) and other.wall[-1] > 0 else 0.0
    return out


def geomean(values) -> float:
    """Geometric mean of the finite positive values (``nan`` if none)."""
    v = np.array([x for x in values if x is not None and np.isfinite(x) and x > 0], dtype=float)
    return float(np.exp(np.mean(np.log(v)))) if len(v) else float("nan")


def bootstrap_geomean(per_task_seed: dict[str, list[float]], n_boot: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Geometric mean over tasks of each task's geometric mean over seeds, with a 95% bootstrap
    interval from resampling seeds within each task. Returns ``(estimate, low, high)``."""
    tasks = {k: [x for x in v if np.isfinite(x) and x > 0] for k, v in per_task_seed.items()}
    tasks = {k: v for k, v in tasks.items() if v}
    if not tasks:
        return float("nan"), float("nan"), float("nan")
    est = geomean([geomean(v) for v in tasks.values()])
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(n_boot):
        boots.append(geomean([geomean(rng.choice(v, size=len(v), replace=True)) for v in tasks.values()]))
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return est, float(lo), float(hi)


def summarize(cfg, per_task: dict, metrics_of) -> dict:
    """Per tuner: geometric mean over tasks (95% bootstrap interval over seeds) of each metric of
    ``metrics_of(row)``, how many runs reached the comparator's best, and the mean search share.

    Parameters
    ----------
    cfg : BenchConfig
        Its ``tuners``, ``workloads`` and ``seeds`` (the runs expected).
    per_task : dict
        ``{workload: {tuner: [row per seed]}}`` (rows of :func:`compare`'s keys).
    metrics_of : callable
        ``row -> dict`` of the metrics (the row itself, or its comparison against another tuner).

    Returns
    -------
    dict
        ``{tuner: {metric: {"geomean", "ci95", "runs": [used, expected], "excluded"}, "reached": [k, n],
        "search_share_mean"}}``.
    """
    summary = {}
    for t in cfg.tuners:
        rows = [metrics_of(r) for w in cfg.workloads for r in per_task[w].get(t, [])]
        entry = {}
        expected = len(cfg.workloads) * len(cfg.seeds)
        for metric in ("time_speedup", "round_speedup", "measure_ratio", "best_ratio_at_equal_n"):
            data = {w: [metrics_of(r).get(metric, float("nan")) for r in per_task[w].get(t, [])]
                    for w in cfg.workloads}
            est, lo, hi = bootstrap_geomean(data)
            # every run is counted: those without a usable value are excluded from the mean, with a reason
            values = [v for vs in data.values() for v in vs]
            used = sum(1 for v in values if v is not None and np.isfinite(v) and v > 0)
            reasons = []
            if len(values) < expected:
                reasons.append(f"{expected - len(values)} without records")
            if len(values) > used:
                reasons.append(f"{len(values) - used} "
                               + ("without a value (no baseline run of that seed, or nothing measured)" if metric != "round_speedup"
                                  else "shorter than the rounds compared"))
            entry[metric] = {"geomean": est, "ci95": [lo, hi], "runs": [used, expected], "excluded": "; ".join(reasons)}
        entry["reached"] = [sum(bool(m.get("reached")) for m in rows), sum("reached" in m for m in rows)]
        shares = [m.get("search_share", 0.0) for m in rows if m]
        entry["search_share_mean"] = float(np.mean(shares)) if shares else float("nan")
        summary[t] = entry
    return summary


def checkpoint_trials(n_trial: int, checkpoints: int) -> list[int]:
    """Trial counts of the curve's points: ``n_trial * k / checkpoints``, k = 1..checkpoints
    (rounded, distinct, the last = ``n_trial``)."""
    return sorted({max(1, int(round(n_trial * k / checkpoints))) for k in range(1, checkpoints + 1)})


def time_to_reach(points: list, latency_ms: float) -> float:
    """Wall seconds of the first checkpoint at or below ``latency_ms`` (``nan`` if none): an upper
    bound on the time the run needed (the curve is known at its checkpoints only)."""
    for p in points:
        if p["latency_ms"] <= latency_ms:
            return float(p["wall_s"])
    return float("nan")


def ratio_table(runs: dict) -> dict:
    """For every ordered pair (a, b) of runs of one model: the time a needs to reach b's final
    latency and b's whole tuning time over it (> 1: a got there faster than b finished).

    Parameters
    ----------
    runs : dict
        ``{tuner: [checkpoint points, in trial order]}``.

    Returns
    -------
    dict
        ``{a: {b: {"reach_s", "b_wall_s", "speedup", "reached"}}}``; ``reach_s`` and ``speedup``
        are ``nan`` when a never got to b's latency.
    """
    out: dict = {}
    for a, pa in runs.items():
        for b, pb in runs.items():
            if a == b or not pa or not pb:
                continue
            reach = time_to_reach(pa, pb[-1]["latency_ms"])
            bw = float(pb[-1]["wall_s"])
            out.setdefault(a, {})[b] = {"reach_s": reach, "b_wall_s": bw, "reached": math.isfinite(reach),
                                        "speedup": bw / reach if math.isfinite(reach) and reach > 0 else float("nan")}
    return out
