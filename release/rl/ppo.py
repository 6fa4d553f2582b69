"""Chameleon's PPO agent over a knob space, with the 128 episodes of a round run as one batch.

Source: Ahn et al., "Chameleon: Adaptive Code Optimization for Expedited Deep Neural Network
Compilation", ICLR 2020, section 4 and the authors' code (shared/reference/chameleon.md).

The agent walks the knob space:

- **state**: the current config's knob indices, each divided by its number of choices,
  shape ``(n_knobs,)`` in ``[0, 1)``;
- **action**: one 3-way choice per knob, 0 = decrement, 1 = stay, 2 = increment, clamped at
  the ends (every knob moves at every step);
- **reward**: a score of the config reached (the cost model's prediction, see
  :class:`release.rl.optimizer.RLOptimizer`);
- **episode**: from a start config, up to ``max_steps`` steps; it ends early once at least
  ``stop_fraction`` of the knobs chose "stay" or sit at a boundary.

Unlike the authors' code (a Python loop over 128 episodes, one PPO update after each), a round
steps all ``n_episodes`` episodes together as ``(n_episodes, n_knobs)`` arrays and then makes
one PPO update over every transition of the round, with the same number of minibatch gradient
steps per transition (``epochs * transitions / minibatch_size``). Layout follows CleanRL's
``ppo.py``: rollout, GAE, clipped surrogate; the loss terms are named and the diagnostics
(approximate KL, clip fraction, explained variance) are logged after every update.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np

from ..errors import TunerError

logger = logging.getLogger(__name__)


@dataclass
class PPOConfig:
    """Hyperparameters of the Chameleon PPO agent; defaults are the authors' (ICLR 2020 code)."""

    hidden: int = 20
    """Width of the actor's shared trunk (2 tanh layers) and of the critic's 3 tanh layers."""
    temperature: float = 0.1
    """Each knob head's tanh outputs are divided by this before the softmax."""
    learning_rate: float = 1e-3
    """Adam learning rate (actor and critic, one optimizer)."""
    adam_eps: float = 1e-5
    """Adam epsilon."""
    epochs: int = 3
    """Passes over a round's transitions per PPO update."""
    minibatch_size: int = 32
    """Transitions per gradient step."""
    gamma: float = 0.9
    """Discount factor."""
    gae_lambda: float = 0.99
    """GAE lambda."""
    clip_coef: float = 0.2
    """PPO surrogate clipping range (ReLeASE's first version: 0.3)."""
    vf_coef: float = 1.0
    """Weight of the value loss."""
    ent_coef: float = 0.3
    """Weight of the entropy bonus (ReLeASE's first version: 0.1)."""
    norm_adv: bool = True
    """Normalize advantages within each minibatch."""
    max_grad_norm: float | None = 0.5
    """Gradient-norm clip (not stated by the authors; CleanRL's default); None = no clipping."""
    n_episodes: int = 128
    """Episodes per round (start configs per optimizer call)."""
    max_steps: int = 500
    """Steps per episode at most."""
    stop_fraction: float = 0.75
    """An episode ends once this fraction of knobs chose "stay" or sit at a boundary."""
    boundary: str = "sits"
    """Which knobs count as settled at a boundary: ``"sits"`` (the paper: any knob at either end,
    so a 2-choice knob always counts) or ``"pushed"`` (ours: only a knob whose move was clamped)."""
    max_minibatches: int | None = None
    """Cap on gradient steps per update (None: ``epochs * transitions / minibatch_size``, the authors')."""
    reward: str = "score"
    """``"score"``: the predicted score of the config reached (paper); ``"improvement"``: that score
    minus the score of the episode's start config (our variant, benchmarks/ablation)."""

    def check(self) -> "PPOConfig":
        """Validate; raise :class:`TunerError` naming the bad field."""
        positive_int = ("hidden", "epochs", "minibatch_size", "n_episodes", "max_steps")
        for name in positive_int:
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or v < 1:
                raise TunerError(f"PPOConfig.{name}={v!r} must be a positive integer")
        for name in ("temperature", "learning_rate", "adam_eps"):
            if not getattr(self, name) > 0:
                raise TunerError(f"PPOConfig.{name}={getattr(self, name)!r} must be positive")
        for name in ("gamma", "gae_lambda", "stop_fraction"):
            if not 0 <= getattr(self, name) <= 1:
                raise TunerError(f"PPOConfig.{name}={getattr(self, name)!r} must lie in [0, 1]")
        if self.boundary not in ("sits", "pushed"):
            raise TunerError(f"PPOConfig.boundary={self.boundary!r}: use 'sits' or 'pushed'")
        if self.reward not in ("score", "improvement"):
            raise TunerError(f"PPOConfig.reward={self.reward!r}: use 'score' or 'improvement'")
        return self


@dataclass
class RoundStats:
    """What one round (rollout + PPO update) did; logged at INFO level.

    Attributes
    ----------
    mean_reward : float
        Mean reward per step over all transitions of the round.
    mean_episode_reward : float
        Mean over episodes of each episode's mean reward per step.
    mean_length : float
        Mean episode length (steps).
    transitions : int
        Transitions collected (the reward queries of the round).
    policy_loss, value_loss, entropy : float
        Loss terms averaged over the update's gradient steps (entropy: nats per knob).
    approx_kl, clip_fraction, explained_variance : float
        PPO diagnostics of the update (CleanRL's definitions).
    rollout_s, update_s : float
        Wall seconds of the rollout (including reward queries) and of the update.
    """

    mean_reward: float = 0.0
    mean_episode_reward: float = 0.0
    mean_length: float = 0.0
    transitions: int = 0
    policy_loss: float = 0.0
    value_loss: float = 0.0
    entropy: float = 0.0
    approx_kl: float = 0.0
    clip_fraction: float = 0.0
    explained_variance: float = 0.0
    rollout_s: float = 0.0
    update_s: float = 0.0
    extra: dict = field(default_factory=dict)


def _torch():
    import torch

    return torch


def _make_networks(n_knobs: int, cfg: PPOConfig, generator):
    """Actor and critic as in the authors' code (shapes in the docstring of :class:`PPOAgent`)."""
    torch = _torch()
    nn = torch.nn

    class Actor(nn.Module):
        def __init__(self):
            super().__init__()
            h = cfg.hidden
            self.trunk = nn.Sequential(nn.Linear(n_knobs, h), nn.Tanh(), nn.Linear(h, h), nn.Tanh())
            # per-knob heads Dense(3, tanh) -> Dense(3, tanh), stored as stacked weights (one einsum per layer)
            self.w1 = nn.Parameter(torch.empty(n_knobs, h, 3))
            self.b1 = nn.Parameter(torch.zeros(n_knobs, 3))
            self.w2 = nn.Parameter(torch.empty(n_knobs, 3, 3))
            self.b2 = nn.Parameter(torch.zeros(n_knobs, 3))
            for lin in self.trunk:
                if isinstance(lin, nn.Linear):
                    nn.init.orthogonal_(lin.weight, gain=np.sqrt(2), generator=generator)
                    nn.init.zeros_(lin.bias)
            for w in (self.w1, self.w2):
                for k in range(n_knobs):
                    nn.init.orthogonal_(w.data[k], gain=0.01 if w is self.w2 else 1.0, generator=generator)

        def forward(self, obs):
            """obs (B, n_knobs) -> logits (B, n_knobs, 3)."""
            z = self.trunk(obs)
            z = torch.tanh(torch.einsum("bh,khc->bkc", z, self.w1) + self.b1)
            z = torch.tanh(torch.einsum("bkh,khc->bkc", z, self.w2) + self.b2)
            return z / cfg.temperature

    critic = nn.Sequential(
        nn.Linear(n_knobs, cfg.hidden), nn.Tanh(), nn.Linear(cfg.hidden, cfg.hidden), nn.Tanh(),
        nn.Linear(cfg.hidden, cfg.hidden), nn.Tanh(), nn.Linear(cfg.hidden, 1),
    )
    for i, lin in enumerate(m for m in critic if isinstance(m, nn.Linear)):
        nn.init.orthogonal_(lin.weight, gain=1.0 if i == 3 else np.sqrt(2), generator=generator)
        nn.init.zeros_(lin.bias)
    return Actor(), critic


class PPOAgent:
    """The Chameleon PPO agent for one knob space.

    Networks (authors' code): actor = shared ``Dense(hidden, tanh) -> Dense(hidden, tanh)``, then per
    knob ``Dense(3, tanh) -> Dense(3, tanh) -> / temperature -> softmax(3)``; critic (separate) =
    ``3 x Dense(hidden, tanh) -> Dense(1)``.

    Parameters
    ----------
    dims : array-like of int, shape (n_knobs,)
        Number of choices of each knob (``KnobSpace.dims``).
    config : PPOConfig, optional
        Hyperparameters (default: the authors').
    seed : int, optional
        Seeds the network initialization, action sampling and minibatch shuffling.

    Raises
    ------
    TunerError
        Empty ``dims``, a knob with no choice, or a bad ``config`` field.
    """

    def __init__(self, dims, config: PPOConfig | None = None, seed: int | None = None):
        torch = _torch()
        self.dims = np.asarray(dims, dtype=np.int64)
        if self.dims.ndim != 1 or self.dims.size == 0:
            raise TunerError(f"the agent needs at least one knob, got dims={list(self.dims)}; "
                             "a task whose space has no knobs cannot be tuned")
        if (self.dims < 1).any():
            raise TunerError(f"every knob needs at least one choice, got dims={list(self.dims)}")
        self.cfg = (config or PPOConfig()).check()
        self.n_knobs = int(self.dims.size)
        self.rng = np.random.default_rng(seed)
        gen = torch.Generator().manual_seed(int(self.rng.integers(2**31)))
        self.actor, self.critic = _make_networks(self.n_knobs, self.cfg, gen)
        self.optimizer = torch.optim.Adam(list(self.actor.parameters()) + list(self.critic.parameters()),
                                          lr=self.cfg.learning_rate, eps=self.cfg.adam_eps)
        self.rounds = 0
        self.history: list[RoundStats] = []

    # ------------------------------------------------------------------ helpers
    def observe(self, configs: np.ndarray) -> np.ndarray:
        """State of ``configs`` (int, shape (B, n_knobs)): indices / number of choices, float32."""
        return (np.asarray(configs, dtype=np.float32) / self.dims.astype(np.float32)).astype(np.float32)

    def act(self, configs: np.ndarray, greedy: bool = False) -> np.ndarray:
        """Actions (B, n_knobs) in {0, 1, 2} for ``configs``, sampled (Gumbel-max on the seeded rng)."""
        torch = _torch()
        with torch.no_grad():
            logits = self.actor(torch.from_numpy(self.observe(configs))).numpy()
        if greedy:
            return logits.argmax(-1)
        gumbel = -np.log(-np.log(self.rng.random(logits.shape).clip(1e-12, 1 - 1e-12)))
        return (logits + gumbel).argmax(-1)

    def move(self, configs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """Apply ``actions`` (0 = -1, 1 = stay, 2 = +1) to ``configs``, clamped to each knob's range."""
        return np.clip(configs + actions - 1, 0, self.dims - 1)

    # ------------------------------------------------------------------ one round
    def run_round(self, reward_fn: Callable[[np.ndarray], np.ndarray], starts: np.ndarray,
                  on_step: Callable[[np.ndarray, np.ndarray], None] | None = None,
                  update: bool = True) -> RoundStats:
        """Run one batch of episodes from ``starts`` and (by default) make one PPO update.

        Parameters
        ----------
        reward_fn : callable
            ``reward_fn(configs int (B, n_knobs)) -> scores float (B,)``; called once per step on
            the configs reached by the episodes still running (and once on ``starts``).
        starts : np.ndarray, shape (n_episodes, n_knobs)
            Start configs.
        on_step : callable, optional
            ``on_step(configs, scores)`` after every reward query (the optimizer records visited points).
        update : bool
            Make the PPO update (default True).

        Returns
        -------
        RoundStats
        """
        torch = _torch()
        cfg = self.cfg
        t0 = time.perf_counter()
        c = np.array(starts, dtype=np.int64, copy=True)
        E, K = c.shape
        if K != self.n_knobs:
            raise TunerError(f"start configs have {K} knobs, the agent was built for {self.n_knobs}")
        c = np.clip(c, 0, self.dims - 1)
        start_score = np.asarray(reward_fn(c), dtype=np.float64)
        if on_step is not None:
            on_step(c, start_score)
        T = cfg.max_steps
        obs = np.zeros((T, E, K), np.float32)
        act = np.zeros((T, E, K), np.int64)
        rew = np.zeros((T, E), np.float32)
        done = np.zeros((T, E), bool)
        valid = np.zeros((T, E), bool)
        alive = np.ones(E, bool)
        t_end = 0
        for t in range(T):
            idx = np.flatnonzero(alive)
            cur = c[idx]
            a = self.act(cur)
            new = self.move(cur, a)
            score = np.asarray(reward_fn(new), dtype=np.float64)
            if on_step is not None:
                on_step(new, score)
            r = score - start_score[idx] if cfg.reward == "improvement" else score
            if cfg.boundary == "sits":
                settled = (a == 1) | (new == 0) | (new == self.dims - 1)
            else:  # a move that the clamp turned into "stay"
                settled = (new == cur)
            stop = settled.mean(axis=1) >= cfg.stop_fraction
            obs[t, idx] = self.observe(cur)
            act[t, idx] = a
            rew[t, idx] = r
            valid[t, idx] = True
            done[t, idx] = stop | (t == T - 1)
            c[idx] = new
            alive[idx[stop]] = False
            t_end = t + 1
            if not alive.any():
                break
        obs, act, rew, done, valid = obs[:t_end], act[:t_end], rew[:t_end], done[:t_end], valid[:t_end]
        stats = RoundStats()
        lengths = valid.sum(0)
        stats.transitions = int(valid.sum())
        stats.mean_reward = float(rew[valid].mean())
        stats.mean_episode_reward = float(np.mean(rew.sum(0) / np.maximum(lengths, 1)))
        stats.mean_length = float(lengths.mean())
        stats.rollout_s = time.perf_counter() - t0
        if update:
            self._update(obs, act, rew, done, valid, stats)
        self.rounds += 1
        self.history.append(stats)
        logger.info(
            "ppo round %d: %d transitions, reward/step %.4f, episode length %.1f, policy loss %.4f, value loss "
            "%.4f, entropy %.3f, approx KL %.4f, clip fraction %.3f, explained variance %.3f, rollout %.2f s, "
            "update %.2f s", self.rounds, stats.transitions, stats.mean_reward, stats.mean_length,
            stats.policy_loss, stats.value_loss, stats.entropy, stats.approx_kl, stats.clip_fraction,
            stats.explained_variance, stats.rollout_s, stats.update_s)
        return stats

    # ------------------------------------------------------------------ PPO update
    def _update(self, obs, act, rew, done, valid, stats: RoundStats) -> None:
        torch = _torch()
        cfg = self.cfg
        t0 = time.perf_counter()
        T, E, K = obs.shape
        with torch.no_grad():
            flat_obs = torch.from_numpy(obs.reshape(T * E, K))
            values = self.critic(flat_obs).reshape(T, E).numpy()
            logits = self.actor(flat_obs)
            logp_all = torch.log_softmax(logits, -1)
            old_logp = logp_all.gather(-1, torch.from_numpy(act.reshape(T * E, K, 1))).squeeze(-1).sum(-1)
            old_logp = old_logp.reshape(T, E).numpy()
        # GAE over time, vectorized over episodes (CleanRL); values after an episode's end are masked out
        adv = np.zeros((T, E), np.float32)
        last = np.zeros(E, np.float32)
        for t in reversed(range(T)):
            nonterminal = 1.0 - done[t].astype(np.float32)
            next_value = values[t + 1] if t + 1 < T else np.zeros(E, np.float32)
            delta = rew[t] + cfg.gamma * next_value * nonterminal - values[t]
            last = delta + cfg.gamma * cfg.gae_lambda * nonterminal * last
            last = np.where(valid[t], last, 0.0).astype(np.float32)
            adv[t] = last
        returns = adv + values
        m = valid.reshape(-1)
        b_obs = torch.from_numpy(obs.reshape(T * E, K)[m])
        b_act = torch.from_numpy(act.reshape(T * E, K)[m])
        b_logp = torch.from_numpy(old_logp.reshape(-1)[m].astype(np.float32))
        b_adv = torch.from_numpy(adv.reshape(-1)[m].astype(np.float32))
        b_ret = torch.from_numpy(returns.reshape(-1)[m].astype(np.float32))
        b_val = values.reshape(-1)[m]
        n = int(m.sum())
        mb = cfg.minibatch_size
        sums = dict(policy=0.0, value=0.0, entropy=0.0, kl=0.0, clip=0.0)
        steps = 0
        budget = cfg.max_minibatches
        for _ in range(cfg.epochs):
            perm = self.rng.permutation(n)
            for start in range(0, n, mb):
                if budget is not None and steps >= budget:
                    break
                i = torch.from_numpy(perm[start:start + mb])
                logits = self.actor(b_obs[i])
                logp_all = torch.log_softmax(logits, -1)
                new_logp = logp_all.gather(-1, b_act[i].unsqueeze(-1)).squeeze(-1).sum(-1)
                entropy = -(logp_all.exp() * logp_all).sum(-1).mean()
                logratio = new_logp - b_logp[i]
                ratio = logratio.exp()
                with torch.no_grad():
                    approx_kl = ((ratio - 1) - logratio).mean()
                    clipped = ((ratio - 1.0).abs() > cfg.clip_coef).float().mean()
                a = b_adv[i]
                if cfg.norm_adv and len(i) > 1:
                    a = (a - a.mean()) / (a.std() + 1e-8)
                policy_loss = torch.max(-a * ratio, -a * ratio.clamp(1 - cfg.clip_coef, 1 + cfg.clip_coef)).mean()
                value_loss = 0.5 * ((self.critic(b_obs[i]).squeeze(-1) - b_ret[i]) ** 2).mean()
                loss = policy_loss - cfg.ent_coef * entropy + cfg.vf_coef * value_loss
                self.optimizer.zero_grad()
                loss.backward()
                if cfg.max_grad_norm is not None:
                    torch.nn.utils.clip_grad_norm_(
                        list(self.actor.parameters()) + list(self.critic.parameters()), cfg.max_grad_norm)
                self.optimizer.step()
                sums["policy"] += policy_loss.item()
                sums["value"] += value_loss.item()
                sums["entropy"] += entropy.item()
                sums["kl"] += float(approx_kl)
                sums["clip"] += float(clipped)
                steps += 1
        steps = max(steps, 1)
        stats.policy_loss, stats.value_loss = sums["policy"] / steps, sums["value"] / steps
        stats.entropy, stats.approx_kl, stats.clip_fraction = sums["entropy"] / steps, sums["kl"] / steps, sums["clip"] / steps
        y = b_ret.numpy()
        var_y = float(np.var(y))
        stats.explained_variance = float("nan") if var_y == 0 else 1.0 - float(np.var(y - b_val)) / var_y
        stats.extra["gradient_steps"] = steps
        stats.update_s = time.perf_counter() - t0

    def state_dict(self) -> dict:
        """Network and optimizer weights, the config, the knob dims and the rounds run (a plain dict of
        tensors and Python values: ``torch.save`` / ``torch.load(weights_only=True)`` handle it)."""
        return {"actor": self.actor.state_dict(), "critic": self.critic.state_dict(),
                "optimizer": self.optimizer.state_dict(), "config": asdict(self.cfg), "dims": self.dims.tolist(),
                "rounds": int(self.rounds)}

    def load_state_dict(self, state: dict, same_space: bool = True) -> None:
        """Take the weights of ``state`` (from :meth:`state_dict`).

        Parameters
        ----------
        state : dict
            An agent's :meth:`state_dict`.
        same_space : bool
            True (resuming this task): the knob dims must be equal, and the Adam state and round
            count are restored too. False (warm start from another task of the same operator): only
            the knob count must match (the state is indices / choices and the heads are 3-way per
            knob, so the networks fit any space with as many knobs); the networks are copied and
            the optimizer and round count start fresh.

        Raises
        ------
        TunerError
            ``state`` is not an agent's state dict, its knobs differ (the message gives both), or its
            networks have another shape (another ``hidden`` size).
        """
        if not isinstance(state, dict) or not {"actor", "critic", "dims"} <= set(state):
            raise TunerError("not a PPO agent checkpoint (expected a dict with actor, critic and dims, "
                             "as PPOAgent.state_dict() returns)")
        dims = [int(d) for d in state["dims"]]
        if same_space and dims != self.dims.tolist():
            raise TunerError(f"agent checkpoint is for knob dims {dims}, this space has {self.dims.tolist()}; "
                             "it belongs to another task (use it as a warm start only for the same operator)")
        if len(dims) != self.n_knobs:
            raise TunerError(f"agent checkpoint has {len(dims)} knobs, this space has {self.n_knobs}; "
                             "warm-start only from a task of the same operator and schedule rule")
        try:
            self.actor.load_state_dict(state["actor"])
            self.critic.load_state_dict(state["critic"])
            if same_space and "optimizer" in state:
                self.optimizer.load_state_dict(state["optimizer"])
        except (RuntimeError, ValueError, KeyError) as e:
            raise TunerError(f"agent checkpoint does not fit this agent's networks ({str(e).splitlines()[0]}); "
                             f"it was saved with config {state.get('config')}") from None
        if same_space:
            self.rounds = int(state.get("rounds", 0))
