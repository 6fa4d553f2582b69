"""The phases of :class:`release.tuners.model_based.ModelBasedTuner`: one proposer per phase and the
policy that says which one proposes next.

A phase is a :class:`Phase`: ``propose(n, state, taken)`` gives up to ``n`` configs, ``exhausted``
says it has nothing left, ``observe(configs, results, state)`` lets it learn. ``state`` is the
session's state as the tuner reads it (any object with ``task``, ``space``, ``visited``, ``trials``,
``best_config``, ``best_cost`` and ``best_iter``: the tuner itself, :class:`release.tuners.Tuner`).

The phases, in the order of :data:`PhasePolicy.RULES` (the first whose rule applies proposes; a
batch it leaves short is filled by the next ones, except the local phase's):

``local`` (:class:`release.tuners.local.LocalPhase`, with ``local_search``)
    Droplet-style coordinate moves around the best measured config
    (:class:`release.tuners.local.DropletSearch`). Starts after ``patience`` trials without a new
    best; while it has moves it alone proposes, and the cost model is not refitted; when it has no
    move left the model is refitted and its plans resume.
``seeds`` (:class:`SeedPhase`, with knowledge seeds)
    Transfer-tuning seeds measured first, in order (visited ones skipped), until the first plan
    replaces them.
``model`` (:class:`ModelPhase`)
    The cost model's plan: ``model_optimizer.find_maximums(cost_model, plan_size, visited)`` (the
    cost model's ``rerank`` inside the optimizer), the optional diversity filter, then the sampler's
    picks, handed out in order; the last ``eps`` picks are random unvisited configs (AutoTVM's
    epsilon-greedy rule). Its training set grows with every result; it is refitted when due.
``random`` (:class:`RandomPhase`)
    Random unvisited configs: the random start (AutoTVM's warm-up of ``plan_size`` random configs
    before the first fit) and the fill of a batch once a plan's configs ran out.

Life cycle, per batch (:meth:`PhasePolicy.propose`): the local phase proposes if it runs (an empty
answer ends it: refit); a warm cost model (:attr:`release.cost_model.CostModel.warm`) is fitted
before the first round; a pending plan is made (booked as search time); then the chain of
:meth:`PhasePolicy.chain` fills the batch. Per measured batch (:meth:`PhasePolicy.observe`): the
training set grows; the local phase observes (or starts, after ``patience`` trials without a new
best); outside the local phase the model is refitted when ``next_update`` configs were measured;
the model optimizer observes the training set.

Explore rules of a plan (:meth:`PhasePolicy.make_plan`): the epsilon share is raised to
``seed_explore`` of the plan while the best is still a seed's (a seed or one knob from one), and to
``warm_explore`` in the first plan of a warm start made on little own data.
"""

from __future__ import annotations

import logging
from typing import Callable, Sequence

import numpy as np

from .local import LocalPhase

logger = logging.getLogger(__name__)


class Phase:
    """One phase of a model-based tuner: a proposer of configs (life cycle in the module docstring)."""

    #: the phase's name in :data:`PhasePolicy.RULES`
    name = "phase"

    def propose(self, n: int, state, taken: Sequence[tuple] = ()) -> list[tuple]:
        """Up to ``n`` unvisited configs, none of ``taken`` (configs already in this batch), in order.

        Parameters
        ----------
        n : int
            Most configs to return.
        state : release.tuners.Tuner
            The session's state (``visited``, ``space``, ``best_config``, ...).
        taken : sequence of tuple
            Configs earlier phases put in the same batch.
        """
        raise NotImplementedError

    @property
    def exhausted(self) -> bool:
        """Whether the phase has nothing left to propose (default False)."""
        return False

    def observe(self, configs: Sequence[tuple], results: Sequence, state) -> None:
        """Learn from measured ``results`` of ``configs`` (same order). Default: nothing."""


class RandomPhase(Phase):
    """Random unvisited configs, one draw at a time (the random start and the fill after a plan).

    Parameters
    ----------
    draw : callable
        ``draw(1) -> [config]``: one random unvisited config (``RandomTuner.next_batch`` of the tuner,
        on its ``rng``), ``[]`` when none is left.

    Attributes
    ----------
    picks : int
        Random configs handed out (here and in plans' epsilon tails).
    """

    name = "random"

    def __init__(self, draw: Callable[[int], list]):
        self.draw = draw
        self.picks = 0
        self.dry = False  # the last draw found no config (a space with limits has none left within them)

    def pick(self, taken: Sequence[tuple]) -> list[tuple]:
        """One draw: ``[config]``, or ``[]`` when the drawn config is in ``taken`` (a draw is spent) or
        the draw found none (:attr:`dry`: on a space with limits, none left within them in its bounded draws)."""
        drawn = self.draw(1)
        self.dry = not drawn
        got = [c for c in drawn if c not in taken]
        self.picks += len(got)
        return got

    def propose(self, n: int, state, taken: Sequence[tuple] = ()) -> list[tuple]:
        taken = list(taken)
        out: list[tuple] = []
        while len(out) < n and len(state.visited) + len(taken) + len(out) < state.space.size:
            out.extend(self.pick(taken + out))
            if self.dry:  # the draws found nothing: a short batch, never an endless loop
                break
        return out


class PlanPhase(Phase):
    """A list of configs handed out in order, its last ``eps`` slots random (epsilon-greedy).

    Visited configs of the list and configs already in the batch are skipped (a skipped slot of the
    random tail is not replaced). :attr:`exhausted` once every slot was used.

    Parameters
    ----------
    random : RandomPhase
        Draws the random slots.
    configs : sequence of tuple
        The list.
    eps : int
        Random slots at the end of the list.
    """

    name = "plan"

    def __init__(self, random: RandomPhase, configs: Sequence[tuple] = (), eps: int = 0):
        self.random = random
        PlanPhase.load(self, configs, eps)

    def load(self, configs: Sequence[tuple], eps: int) -> None:
        """Hand out ``configs`` from the first, the last ``eps`` slots random."""
        self.configs: list[tuple] = list(configs)
        self.pt = 0
        self.eps = int(eps)

    @property
    def exhausted(self) -> bool:
        return self.pt >= len(self.configs)

    def propose(self, n: int, state, taken: Sequence[tuple] = ()) -> list[tuple]:
        taken = list(taken)
        out: list[tuple] = []
        plan = self.configs
        while len(out) < n and len(state.visited) + len(taken) + len(out) < state.space.size:
            while self.pt < len(plan) and (plan[self.pt] in state.visited or plan[self.pt] in out
                                           or plan[self.pt] in taken):
                self.pt += 1
            if self.pt >= len(plan):
                break
            if self.pt >= len(plan) - self.eps:  # the epsilon-greedy tail: a random unvisited config
                out.extend(self.random.pick(taken + out))
            else:
                out.append(plan[self.pt])
            self.pt += 1
        return out


class SeedPhase(PlanPhase):
    """Transfer-tuning seeds (:func:`release.knowledge.use.knowledge_seeds`), measured first, no random
    slot; ``configs`` are the seeds."""

    name = "seeds"

    def __init__(self, random: RandomPhase, seeds: Sequence[tuple]):
        super().__init__(random, seeds, eps=0)

    def anchors(self, config: Sequence[int] | None) -> bool:
        """Whether ``config`` (the best measured) is a seed or one knob away from one; True for None."""
        if config is None:
            return True
        return any(sum(a != b for a, b in zip(config, s)) <= 1 for s in self.configs)


class ModelPhase(PlanPhase):
    """Model-guided plans (AutoTVM's ``ModelBasedTuner`` round), and the cost model's training set.

    Parameters
    ----------
    random : RandomPhase
    cost_model : release.cost_model.CostModel
    model_optimizer : release.optimizers.ModelOptimizer
    sampler : release.sampling.Sampler
    plan_size : int
        Configs the optimizer proposes per round; the first fit waits for this many measurements.
    diversity_filter_ratio : float, optional
        Ask for ``plan_size * ratio`` candidates and keep a diverse ``plan_size``
        (:func:`submodular_pick`).

    Attributes
    ----------
    xs, ys : list
        Training set: measured configs and their throughput (FLOP/s; 0 for failures).
    fits : int
        Cost-model fits so far (the tuner's ``rounds``).
    next_update : float
        Training-set size at which the next fit is due (``inf`` while a plan is pending).
    pending : bool
        A fit happened; the plan is made at the next batch.
    checkpoint : str or None
        Where the optimizer's state is saved after every plan (the PPO agent beside the log).
    """

    name = "model"

    def __init__(self, random: RandomPhase, cost_model, model_optimizer, sampler, plan_size: int,
                 diversity_filter_ratio: float | None = None):
        super().__init__(random, (), eps=int(0.05 * plan_size))
        self.cost_model = cost_model
        self.model_optimizer = model_optimizer
        self.sampler = sampler
        self.plan_size = int(plan_size)
        self.diversity_filter_ratio = diversity_filter_ratio
        self.xs: list[tuple] = []
        self.ys: list[float] = []
        self.flops_max = 0.0
        self.fits = 0
        self.next_update: float = self.plan_size
        self.pending = False
        self.checkpoint: str | None = None

    def observe(self, configs: Sequence[tuple], results: Sequence, state) -> None:
        """Every result joins the training set (failed ones with throughput 0)."""
        for res in results:
            flops = state.task.flop / res.mean_cost if res.ok and res.mean_cost > 0 else 0.0
            self.xs.append(tuple(res.config))
            self.ys.append(flops)
            self.flops_max = max(self.flops_max, flops)

    @property
    def due(self) -> bool:
        """Whether a fit is due: ``next_update`` configs measured and something ran."""
        return len(self.xs) >= self.next_update and self.flops_max > 1e-6

    def refit(self) -> None:
        """Fit the cost model on the training set (booked as fit time); the plan is made next batch."""
        self.cost_model.fit(np.asarray(self.xs, dtype=np.int64), np.asarray(self.ys, dtype=np.float64),
                            self.plan_size)
        self.fits += 1
        self.pending = True
        self.next_update = float("inf")  # set when the plan is made

    def search(self, state) -> list[tuple]:
        """The round's picks: the optimizer's plan, thinned (diversity filter), sampled (sampler)."""
        if self.diversity_filter_ratio:
            cands = self.model_optimizer.find_maximums(
                self.cost_model, int(self.plan_size * self.diversity_filter_ratio), state.visited)
            plan = submodular_pick(cands, self.plan_size)
        else:
            plan = self.model_optimizer.find_maximums(self.cost_model, self.plan_size, state.visited)
        plan = [tuple(c) for c in plan]
        return list(self.sampler.sample(plan, state.space, state.visited, self.plan_size))

    def load(self, configs: Sequence[tuple], eps: int) -> None:
        """Hand out plan ``configs`` (the last ``eps`` random); the next fit is due after them."""
        super().load(configs, eps)
        self.next_update = len(self.xs) + max(1, len(self.configs))

    def tell_optimizer(self) -> None:
        """The model optimizer observes the training set (once it holds anything)."""
        if self.xs:
            self.model_optimizer.observe(self.xs, self.ys)


class PhasePolicy:
    """Which phase of a model-based tuner proposes next, and when phases start and end.

    Parameters
    ----------
    model : ModelPhase
    random : RandomPhase
    seeds : SeedPhase, optional
    local : LocalPhase, optional
    patience : int
        Trials without a new best before the task counts as flattened (and the local phase starts).
    seed_explore, warm_explore : float
        Explore shares of a plan (module docstring), in [0, 1].

    Attributes
    ----------
    anchored_rounds : int
        Plans whose random share ``seed_explore`` raised.
    """

    #: (phase, when it proposes), first that applies; a short batch is filled by the later ones,
    #: except the local phase's (it proposes alone)
    RULES: tuple[tuple[str, str], ...] = (
        ("local", "the local phase started and has moves left"),
        ("seeds", "seeds were given and no plan was made yet (they propose until used up)"),
        ("model", "a plan was made (it proposes until its configs are used up)"),
        ("random", "always: the random start before the first plan, the fill after a plan"),
    )

    def __init__(self, model: ModelPhase, random: RandomPhase, seeds: SeedPhase | None = None,
                 local: LocalPhase | None = None, patience: int = 64, seed_explore: float = 0.25,
                 warm_explore: float = 0.5):
        self.model, self.random, self.seeds, self.local = model, random, seeds, local
        self.patience = int(patience)
        self.seed_explore = float(seed_explore)
        self.warm_explore = float(warm_explore)
        self.anchored_rounds = 0
        self.plans = 0
        self._warm_done = False
        self._warm_first_plan = False

    def applies(self, name: str) -> bool:
        """Whether the rule of phase ``name`` (:data:`RULES`) applies now."""
        if name == "local":
            return self.local is not None and self.local.running
        if name == "seeds":
            return self.seeds is not None and self.plans == 0
        if name == "model":
            return self.plans > 0
        return name == "random"

    def phase(self, name: str) -> Phase | None:
        """The phase called ``name``, None when this tuner has none."""
        return {"local": self.local, "seeds": self.seeds, "model": self.model, "random": self.random}[name]

    def chain(self) -> list[Phase]:
        """The phases that fill the next batch, in order (the local phase alone while it runs)."""
        if self.applies("local"):
            return [self.local]
        return [self.phase(name) for name, _ in self.RULES if name != "local" and self.applies(name)]

    @property
    def current(self) -> str:
        """The name of the phase that proposes next (the first of :meth:`chain` not exhausted)."""
        return next((p.name for p in self.chain() if not p.exhausted), "random")

    @property
    def plan_phase(self) -> PlanPhase:
        """The list in hand: the seeds until the first plan, then the model's plan."""
        return self.seeds if self.applies("seeds") else self.model

    # ------------------------------------------------------------------ per batch
    def propose(self, n: int, state) -> list[tuple]:
        """Up to ``n`` configs for the next batch (module docstring: the life cycle)."""
        if self.applies("local"):
            out = self.local.propose(n, state)
            if out:
                return out
            logger.info("%s: local search has no move left after %d moves (%d accepted); the model's plans resume",
                        state.task.name, self.local.search.moves, self.local.search.accepted)
            self.model.refit()
        model = self.model
        if not self._warm_done and model.fits == 0 and model.cost_model.warm:
            self._warm_done = True  # fit on the knowledge (and any resumed records) before the first round
            self._warm_first_plan = len(model.xs) < model.plan_size  # little own data: explore beside it
            model.refit()
            if not model.cost_model.fitted:
                model.pending, model.next_update = False, model.plan_size
        if model.pending:  # planning is search: booked as search time by the session
            model.pending = False
            self.make_plan(state)
        out: list[tuple] = []
        for phase in self.chain():
            if len(out) >= n or len(state.visited) + len(out) >= state.space.size:
                break
            out.extend(phase.propose(n - len(out), state, out))
        return out

    def make_plan(self, state) -> None:
        """The model's plan with its random share (the sampler's epsilon count, raised by the explore
        rules); saves the optimizer's state where :attr:`ModelPhase.checkpoint` says."""
        model = self.model
        plan = model.search(state)
        # epsilon-greedy share (AutoTVM: 5% of a 64-config plan = 3; with a sampler: 5% of its picks)
        eps = model.sampler.epsilon_count(len(plan), model.plan_size)
        seeds = self.seeds
        if seeds is not None and seeds.configs and self.seed_explore and seeds.anchors(state.best_config):
            eps = max(eps, int(round(self.seed_explore * len(plan))))  # the best is still a seed's
            self.anchored_rounds += 1
        if self._warm_first_plan:  # the first warm round: part random, so the own model sees the whole space
            self._warm_first_plan = False
            eps = max(eps, int(round(self.warm_explore * len(plan))))
        model.load(plan, eps)
        self.plans += 1
        if model.checkpoint is not None:
            model.model_optimizer.save(model.checkpoint)
        stats = model.model_optimizer.stats
        logger.debug("%s: refit %d on %d samples, plan of %d", state.task.name, model.fits, len(model.xs), len(plan))
        if "mean_reward" in stats:
            logger.info("%s round %d: agent reward/step %.4f, %d queries (%d distinct), plan %d, k=%s",
                        state.task.name, model.fits, stats["mean_reward"], stats.get("queries", 0),
                        stats.get("distinct", 0), len(plan), model.sampler.last_k)

    # ------------------------------------------------------------------ per measured batch
    def observe(self, configs: Sequence[tuple], results: Sequence, state) -> None:
        """Learn from a measured batch (module docstring: the life cycle)."""
        self.model.observe(configs, results, state)
        if self.local is not None:
            running = self.local.running
            self.local.observe(configs, results, state)
            if not running and self.local.should_start(state):
                self.local.start(state, score=self.model.cost_model.predict if self.model.fits else None)
        if not self.applies("local") and self.model.due:  # while the local phase runs, no refit
            self.model.refit()
        self.model.tell_optimizer()

    def flattened(self, state) -> bool:
        """Whether the task stopped improving: ``patience`` trials without a new best and no local
        phase running (it never started, or it has no move left)."""
        if state.best_config is None or state.trials - state.best_iter < self.patience:
            return False
        return not self.applies("local")


def submodular_pick(candidates: Sequence[tuple], num: int, knob_weight: float = 1.0) -> list[tuple]:
    """AutoTVM's diversity filter with zero scores: greedily pick configs that add the most
    unseen knob values (``submodular_pick(0 * scores, knobs, num, knob_weight=1)``), keeping
    candidate order among ties."""
    cands = [tuple(c) for c in candidates]
    if len(cands) <= num:
        return cands
    chosen: list[int] = []
    seen: list[set] = [set() for _ in range(len(cands[0]))]
    remaining = list(range(len(cands)))
    for _ in range(num):
        best_i, best_gain = remaining[0], -1.0
        for i in remaining:
            gain = knob_weight * sum(1 for j, v in enumerate(cands[i]) if v not in seen[j])
            if gain > best_gain:
                best_i, best_gain = i, gain
        chosen.append(best_i)
        remaining.remove(best_i)
        for j, v in enumerate(cands[best_i]):
            seen[j].add(v)
    return [cands[i] for i in chosen]


__all__ = ["Phase", "RandomPhase", "PlanPhase", "SeedPhase", "ModelPhase", "LocalPhase", "PhasePolicy",
           "submodular_pick"]
