"""``RLOptimizer``: the PPO agent as a model optimizer (the drop-in for simulated annealing).

Same interface as AutoTVM's ``SimulatedAnnealingOptimizer``: ``find_maximums(model, num,
exclusive)`` returns up to ``num`` configs not in ``exclusive`` with the highest predicted score.
One call = one agent round (Chameleon, authors' code): ``n_episodes`` episodes of up to
``max_steps`` steps, rewarded by the cost model's prediction of every config reached; the answer
is the top ``num`` unvisited configs by predicted score among *all* points the episodes visited.

Cost arithmetic (shared with simulated annealing, 128 walkers x 500 steps): a round asks for up to
64,000 scores. Predictions are therefore made per step in one ``model.predict`` call on the
distinct configs not yet scored this round (a per-round cache; the model does not change within
a round), so repeated visits, which grow as the policy settles, cost nothing. The model's own
feature cost is the cost model's business (knob features: the config itself).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import time

import numpy as np

from ..cost_model.base import as_cost_model
from ..errors import TunerError
from ..rl.ppo import PPOAgent, PPOConfig, RoundStats
from .base import ModelOptimizer

logger = logging.getLogger(__name__)


class _RoundScores:
    """Per-round prediction cache and the record of every visited point (canonical configs).

    On a space with limits (GPU targets, ``KnobSpace.feasible``) a config outside them scores below
    every other config of its step (the agent learns to stay within them) and is never returned by
    :meth:`top`, so the plan holds only configs within the limits."""

    def __init__(self, model, space):
        self.model, self.space = model, space
        self.cache: dict[bytes, float] = {}
        self.outside: set[bytes] = set()  # configs outside the target's limits (GPU): never in the plan
        self.queries = 0
        self.predict_s = 0.0

    def __call__(self, configs: np.ndarray) -> np.ndarray:
        canon = np.ascontiguousarray(self.space.canonicalize(configs), dtype=np.int64)
        self.queries += len(canon)
        uniq, inverse = np.unique(canon, axis=0, return_inverse=True)
        keys = [row.tobytes() for row in uniq]
        missing = [i for i, k in enumerate(keys) if k not in self.cache]
        if missing:
            t0 = time.perf_counter()
            pred = np.asarray(self.model.predict(uniq[missing]), dtype=np.float64).reshape(-1)
            self.predict_s += time.perf_counter() - t0
            for i, p in zip(missing, pred):
                self.cache[keys[i]] = float(p)
        scores = np.array([self.cache[k] for k in keys], dtype=np.float64)
        if self.space.constrained:  # outside the limits: the lowest score of the step, so the agent learns
            ok = self.space.feasible(uniq)  # to stay within them; such configs never enter the plan
            if not ok.all():
                self.outside.update(k for k, good in zip(keys, ok) if not good)
                scores = np.where(ok, scores, scores.min() - (np.ptp(scores) if len(scores) > 1 else 0.0) - 1e-9)
        return scores[np.asarray(inverse).reshape(-1)]

    def top(self, num: int, exclusive: set) -> list[tuple]:
        """Up to ``num`` visited configs not in ``exclusive``, best predicted first."""
        K = self.space.n_knobs
        items = sorted(self.cache.items(), key=lambda kv: -kv[1])
        out = []
        for key, _ in items:
            if key in self.outside:
                continue
            c = tuple(int(x) for x in np.frombuffer(key, dtype=np.int64, count=K))
            if c not in exclusive:
                out.append(c)
                if len(out) >= num:
                    break
        return out


def agent_checkpoint_path(log_path: str | os.PathLike, task_key: str) -> str:
    """Where a tuning log keeps the agent of one task: in one folder named after the log,
    ``<log without .jsonl>.agents/<task name>.<sha1(task key)[:10]>.agent.pt`` (one log may hold many
    tasks, as ``release tune-model`` writes); resumed with the log, removed with it."""
    base = agents_folder(log_path)
    name = re.sub(r"[^A-Za-z0-9_.+-]+", "_", task_key.rpartition("/")[0] or "task")[:80]
    return os.path.join(base, f"{name}.{hashlib.sha1(task_key.encode()).hexdigest()[:10]}.agent.pt")


def agents_folder(log_path: str | os.PathLike) -> str:
    """``<log without .jsonl>.agents``: the folder of a log's PPO agent checkpoints."""
    base = os.fspath(log_path)
    base = base[: -len(".jsonl")] if base.endswith(".jsonl") else base
    return base + ".agents"


def legacy_agent_checkpoint_path(log_path: str | os.PathLike, task_key: str) -> str:
    """Where releases before the ``.agents`` folder kept a task's agent: beside the log,
    ``<log without .jsonl>.<sha1(task key)[:10]>.agent.pt`` (moved into the folder on resume)."""
    base = os.fspath(log_path)
    base = base[: -len(".jsonl")] if base.endswith(".jsonl") else base
    return f"{base}.{hashlib.sha1(task_key.encode()).hexdigest()[:10]}.agent.pt"


class RLOptimizer(ModelOptimizer):
    """Model optimizer driven by the Chameleon PPO agent (persists across calls within a task).

    Parameters
    ----------
    space : release.space.KnobSpace
        The task's knob space.
    config : PPOConfig, optional
        Agent hyperparameters (default: the authors').
    seed : int, optional
        Seeds the agent and the episode starts.
    start_from_measured : float
        Fraction of the episodes that start at the best measured configs (set by
        :meth:`observe`) instead of uniformly random configs. 0 = the paper (default);
        our variant in benchmarks/ablation uses 0.5.
    min_queries : int
        Run further rounds (each a batch of episodes and a PPO update) within one call until
        this many reward queries were made (default 0: one round per call, the paper). Our
        variant uses 16,000, a quarter of simulated annealing's 64,000 per call.
    rerank_ratio : float
        With a re-ranking model (:attr:`release.cost_model.CostModel.reranks`, e.g.
        ``XGBoostCostModel(feature_type="itervar")``): keep ``ratio * num`` configs by the fast
        ``predict`` and let the model's ``rerank`` re-order them (dropping illegal programs), exactly
        as :class:`release.optimizers.sa.SimulatedAnnealingOptimizer` does (default 2.0, its default).

    Attributes
    ----------
    agent : PPOAgent
    last_stats : RoundStats or None
        Diagnostics of the latest round (``extra`` adds ``queries``, ``distinct``, ``predict_s``).

    Raises
    ------
    TunerError
        ``start_from_measured`` outside [0, 1], or a bad ``config``.
    """

    def __init__(self, space, config: PPOConfig | None = None, seed: int | None = None,
                 start_from_measured: float = 0.0, min_queries: int = 0, rerank_ratio: float = 2.0):
        if not isinstance(min_queries, (int, np.integer)) or min_queries < 0:
            raise TunerError(f"min_queries={min_queries!r} must be an integer >= 0")
        self.min_queries = int(min_queries)
        if not rerank_ratio >= 1:
            raise TunerError(f"rerank_ratio={rerank_ratio!r} must be >= 1")
        self.rerank_ratio = float(rerank_ratio)
        if not 0.0 <= start_from_measured <= 1.0:
            raise TunerError(f"start_from_measured={start_from_measured!r} must lie in [0, 1]")
        self.space = space
        self.rng = np.random.default_rng(seed)
        self.agent = PPOAgent(space.dims, config, seed=int(self.rng.integers(2**31)))
        self.start_from_measured = float(start_from_measured)
        self._measured: np.ndarray | None = None
        self.last_stats: RoundStats | None = None

    keeps_state = True  # the agent is checkpointed beside the log: records alone do not rebuild it

    @property
    def stats(self) -> dict:
        """Diagnostics of the last call: the :class:`RoundStats` fields plus ``extra`` (``queries``,
        ``distinct``, ``rounds``, ``predict_s``, ``rerank_s``); empty before the first call."""
        if self.last_stats is None:
            return {}
        from dataclasses import asdict

        d = asdict(self.last_stats)
        d.update(d.pop("extra", {}))
        return d

    def state_dict(self) -> dict:
        """The agent's :meth:`PPOAgent.state_dict` (networks, optimizer state, round count)."""
        return self.agent.state_dict()

    def load_state_dict(self, state: dict, same_space: bool = True) -> None:
        """Load an agent state (see :meth:`PPOAgent.load_state_dict`)."""
        self.agent.load_state_dict(state, same_space=same_space)

    def save(self, path: str | os.PathLike) -> None:
        """Write the agent (:meth:`PPOAgent.state_dict`) to ``path`` atomically (a temporary file, then
        ``os.replace``), so a run killed while saving keeps the previous checkpoint."""
        import torch

        path = os.fspath(path)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        tmp = f"{path}.tmp{os.getpid()}"
        torch.save(self.agent.state_dict(), tmp)
        os.replace(tmp, path)

    def load(self, source, same_space: bool = True) -> None:
        """Load the agent from a checkpoint file (``torch.load(weights_only=True)``) or a state dict.

        ``same_space=True``: resume this task's agent (knob dims must match; optimizer state and round
        count restored). ``False``: warm start from another task with as many knobs (see
        :meth:`PPOAgent.load_state_dict`).

        Raises
        ------
        TunerError
            The file is missing or unreadable, or the checkpoint does not fit this space.
        """
        state = source
        if not isinstance(source, dict):
            import torch

            path = os.fspath(source)
            if not os.path.isfile(path):
                raise TunerError(f"agent checkpoint {path} does not exist; give a file written by a PPO tuner "
                                 "(<log>.agents/<task>.<hash>.agent.pt beside its tuning log)")
            try:
                state = torch.load(path, map_location="cpu", weights_only=True)
            except Exception as e:  # torch raises several kinds for a damaged or foreign file
                raise TunerError(f"agent checkpoint {path} is not readable ({type(e).__name__}: "
                                 f"{str(e).splitlines()[0] if str(e) else ''}); delete it to start a fresh agent") from None
        self.load_state_dict(state, same_space=same_space)

    def observe(self, xs, ys) -> None:
        """Tell the optimizer the measured configs ``xs`` (n, n_knobs) and throughputs ``ys`` (n,)."""
        xs = np.asarray(xs, dtype=np.int64).reshape(-1, self.space.n_knobs)
        ys = np.asarray(ys, dtype=np.float64).reshape(-1)
        order = np.argsort(-ys, kind="stable")
        self._measured = xs[order][ys[order] > 0]

    def _starts(self) -> np.ndarray:
        n = self.agent.cfg.n_episodes
        starts = self.space.sample(n, self.rng)
        if self.start_from_measured > 0 and self._measured is not None and len(self._measured):
            m = int(round(self.start_from_measured * n))
            best = self._measured[: max(1, min(len(self._measured), n // 8))]
            starts[:m] = best[np.arange(m) % len(best)]
        return starts

    def find_maximums(self, model, num: int, exclusive: set) -> list[tuple]:
        """Run one agent round on ``model.predict`` and return the best unvisited points.

        Parameters
        ----------
        model : CostModel
            ``model.predict(xs int (n, n_knobs)) -> scores (n,)``, higher = faster.
        num : int
            How many configs to return at most (``plan_size``).
        exclusive : set of tuple
            Configs not to return (measured or known invalid), canonical form.

        Returns
        -------
        list of tuple
            Up to ``num`` distinct canonical configs, highest predicted score first (by
            ``predict_program`` when re-ranked).

        ``num`` (>= 1) is the tuner's plan size, validated where the user gave it
        (:func:`release.errors.check_plan_size`), not again here.
        """
        from ..threads import torch_search_threads

        with torch_search_threads():  # the one search-thread setting of every tuner
            return self._find_maximums(model, num, exclusive)

    def _find_maximums(self, model, num: int, exclusive: set) -> list[tuple]:
        model = as_cost_model(model)
        keep = model.rerank_keep(int(num), self.rerank_ratio)
        scores = _RoundScores(model, self.space)
        stats = self.agent.run_round(scores, self._starts())
        rounds = 1
        while scores.queries < self.min_queries:
            stats = self.agent.run_round(scores, self._starts())
            rounds += 1
        out = scores.top(keep, exclusive)
        rerank_s = 0.0
        if model.reranks and out:
            r0 = time.perf_counter()
            out = model.rerank(out)
            rerank_s = time.perf_counter() - r0
        out = out[: int(num)]
        stats.extra.update(rounds=rounds, queries=scores.queries, distinct=len(scores.cache), predict_s=scores.predict_s,
                           rerank_s=rerank_s)
        self.last_stats = stats
        logger.debug("rl optimizer: %d reward queries, %d distinct configs, predict %.2f s, returned %d",
                     scores.queries, len(scores.cache), scores.predict_s, len(out))
        return out
