"""Knob spaces over MetaSchedule design spaces (the modern replacement of AutoTVM's ConfigSpace).

MetaSchedule's ``PostOrderApply`` space generator turns a task into one or more *design spaces*:
schedules whose traces hold sampling instructions. Each sampling instruction is a *knob* whose
legal decisions are enumerated and ordered here:

- ``SamplePerfectTile(n, max_innermost)``: every ordered factorization of the loop extent into
  ``n`` factors with innermost factor ``<= max_innermost``, sorted lexicographically (AutoTVM's
  ``define_split(policy="factors")`` enumeration);
- ``SampleCategorical(candidates, probs)``: the candidate indices ``0..len-1``;
- ``SampleComputeLocation``: ``-2`` (inline), ``-1`` (root) and the loop indices TVM accepts,
  found by probing replays (the legal set depends on other knobs; TVM silently *snaps* an
  illegal location to a legal one, so a config whose location snaps is reported invalid).

Knobs with a single legal decision are fixed and left out of the vector. Design spaces whose
sampling instructions match one-to-one (same kinds, attributes and choices) share knobs; the
config then starts with a ``space`` knob picking the design space. Spaces that differ get knobs
of their own, canonicalized to index 0 while their space is not selected.

A *config* is a tuple of knob indices (``len(space.knobs)`` ints), exactly the shape of an
AutoTVM ``ConfigEntity`` index vector and of the Chameleon agent's state.
"""

from __future__ import annotations

import functools

import itertools
import logging
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np

from ..errors import InvalidConfigError, SpaceError, error_line

logger = logging.getLogger(__name__)

Config = tuple  # tuple[int, ...]

#: random tile settings probed for legal compute locations (see KnobSpace._probe_locations)
LOCATION_PROBES = 6


@dataclass(frozen=True)
class Knob:
    """One tunable decision.

    Attributes
    ----------
    name : str
        ``space``, ``tile.<i>``, ``categorical.<i>`` or ``compute_location.<i>``, numbered per kind
        in trace order (with a ``g<j>.`` prefix when design spaces have separate knob groups).
    kind : str
        ``space`` | ``tile`` | ``categorical`` | ``compute_location``.
    choices : tuple
        The legal decisions, in order; a config holds an index into this tuple.
    spaces : tuple[int, ...]
        Design-space indices where this knob is active.
    """

    name: str
    kind: str
    choices: tuple
    spaces: tuple

    @property
    def size(self) -> int:
        """Number of legal decisions."""
        return len(self.choices)

    def __repr__(self) -> str:
        return f"Knob({self.name}, {self.kind}, {self.size} choices)"


@lru_cache(maxsize=4096)
def factorizations(extent: int, n: int, max_innermost: int) -> tuple:
    """All ordered ``n``-tuples of positive ints with product ``extent`` and last ``<= max_innermost``.

    ``max_innermost <= 0`` means no limit. Sorted lexicographically. ``factorizations(256, 4, 64)``
    has 161 entries (shared/reference/tvm-0.27.md).
    """
    divisors = [d for d in range(1, extent + 1) if extent % d == 0]

    def rec(rest: int, k: int):
        if k == 1:
            yield (rest,)
            return
        for d in divisors:
            if d > rest:
                break
            if rest % d == 0:
                for tail in rec(rest // d, k - 1):
                    yield (d,) + tail

    limit = max_innermost if max_innermost > 0 else extent
    return tuple(t for t in rec(extent, n) if t[-1] <= limit)


class _Space:
    """One design space: its trace, sampling instructions and default decisions."""

    def __init__(self, index: int, sch):
        self.index = index
        self.trace = sch.trace
        self.insts = list(self.trace.insts)
        self.defaults = {inst: self.trace.get_decision(inst) for inst in self.insts
                         if self.trace.get_decision(inst) is not None}
        self.sample_insts = [i for i in self.insts if i.kind.name.startswith("Sample") and i in self.defaults]
        self.structure = _structure(self.insts)
        self._simplified = None
        self._json_head = None

    def json_head(self) -> list:
        """The design-space trace's instructions up to postprocessing, as trace JSON (no decisions)."""
        if self._json_head is None:
            from ..measure.result import to_py

            insts = to_py(self.trace.as_json(remove_postproc=True))[0]
            self._json_head = [inst[:4] for inst in insts]
        return self._json_head

    def simplified_structure(self) -> str:
        """Structure of the design-space trace after ``Trace.simplified`` (dead code removed)."""
        if self._simplified is None:
            self._simplified = _structure(list(self.trace.simplified(remove_postproc=True).insts))
        return self._simplified


def _structure(insts) -> str:
    """Structural signature of a trace: its Python rendering up to postprocessing, without decisions
    (instruction kinds, attributes and the data flow between random variables)."""
    from tvm.s_tir.schedule import Trace

    kept = []
    for inst in insts:
        if inst.kind.name == "EnterPostproc":
            break
        kept.append(inst)
    return str(Trace(kept, {}))


class KnobSpace:
    """The knob space of a task.

    Parameters
    ----------
    task : release.task.Task
        The task; its design spaces come from MetaSchedule's default schedule rules for
        ``task.target`` (``PostOrderApply``).
    probe_seed : int
        Seed of the random decisions used to probe legal compute locations (default 0).

    Attributes
    ----------
    knobs : list[Knob]
        The tunable knobs, in config-vector order.
    dims : np.ndarray, shape (n_knobs,)
        Number of choices of each knob.

    Raises
    ------
    SpaceError
        If MetaSchedule yields no design space, or the space has no knob to tune.

    Notes
    -----
    Cost: building takes 0.1-2 s (design-space generation plus compute-location probing);
    :meth:`apply` replays a trace and runs the postprocessors, 4-15 ms per config.
    """

    probe_on_prefix = True
    """Probe compute locations on the replayed trace prefix (False: replay the whole trace per probe,
    the slower way kept as a fallback and as the reference the tests compare against)."""

    def __init__(self, task, probe_seed: int = 0):
        from tvm.s_tir import meta_schedule as ms

        from .winograd import register

        register()  # the Winograd stages' schedule rules (release.space.winograd)
        self.task = task  # its creation registered the target's tensor intrinsics (Task.__init__)
        ctx = ms.TuneContext(
            mod=task.mod, target=task.target, space_generator="post-order-apply",
            search_strategy="replay-trace", rand_state=max(1, probe_seed + 1), num_threads=1,
        )
        schs = ctx.generate_design_space()
        if not schs:
            raise SpaceError(f"MetaSchedule generated no design space for {task.name} on {task.target_json}")
        self._ctx = ctx
        self.postprocs = list(ctx.space_generator.postprocs)
        self.spaces = [_Space(i, s) for i, s in enumerate(schs)]
        self._rng = np.random.default_rng(probe_seed)
        self._build_knobs()
        if not self.knobs:
            raise SpaceError(
                f"task {task.name} has no knob to tune on {task.target_json}: its design space has "
                "no sampling decision with more than one legal choice"
            )
        self.dims = np.array([k.size for k in self.knobs], dtype=np.int64)
        self._cache: dict = {}
        from .gpu import GPUConstraints, GPULimits

        limits = GPULimits.of(task.target)
        self.gpu: GPUConstraints | None = GPUConstraints(self, limits) if limits is not None else None
        for line in (self.gpu.skipped if self.gpu is not None else ()):
            logger.info("%s: GPU limit not read from the trace (the postprocessors still check it): %s",
                        task.name, line)
        self.prechecked = 0  # configs refused by the GPU limits before any replay (apply)

    # ------------------------------------------------------------------ construction
    def _inst_choices(self, space: _Space, inst, pos: int) -> tuple[str, tuple]:
        kind = inst.kind.name
        default = space.defaults[inst]
        if kind == "SamplePerfectTile":
            n, max_inner = int(inst.attrs[0]), int(inst.attrs[1])
            extent = int(np.prod([int(x) for x in default]))
            return "tile", factorizations(extent, n, max_inner)
        if kind == "SampleCategorical":
            return "categorical", tuple(range(len(inst.attrs[0])))
        if kind == "SampleComputeLocation":
            return "compute_location", self._probe_locations(space, inst)
        logger.warning("sampling instruction %s is not tunable here; kept at its design-space decision", kind)
        return "fixed", (default,)

    def _replay(self, space: _Space, decisions: dict, postproc: bool):
        from tvm.s_tir import Schedule
        from tvm.s_tir.schedule import Trace

        trace = Trace(space.insts, decisions)
        sch = Schedule(self.task.mod, debug_mask=0, error_render_level="none")
        trace.apply_to_schedule(sch, remove_postproc=True)
        if postproc:
            sch.enter_postproc()
            for p in self.postprocs:
                if not p.apply(sch):
                    raise InvalidConfigError(f"postprocessor {type(p).__name__} rejected the schedule")
        return sch

    def _probe_locations(self, space: _Space, inst) -> tuple:
        """Legal compute locations of ``inst``, found by replays.

        TVM snaps an illegal location to the closest legal one below it, so probing ``v`` from
        an upper bound downwards (next probe: realized - 1) finds one legal value per probe. A
        probe samples the location on the schedule replayed up to ``inst`` (:meth:`_prefix`), which
        realizes the same value as replaying the whole trace (later instructions cannot change it).
        The legal set depends on the tile sizes (unit loops are skipped), so the design space's
        decisions, a setting that splits every loop into non-unit factors where the extent allows,
        and :data:`LOCATION_PROBES` random tile settings are probed, and the union is kept. More probes find more of the legal set (resnet18.conv2d.2: 3 settings
        found 11 locations, 14 found 14, 25 found 17); a location never found is unreachable.
        """
        which = [i for i in space.sample_insts if i.kind.name == "SampleComputeLocation"].index(inst)
        sch = self._replay(space, dict(space.defaults), postproc=False)
        bound = 0  # the most loops any block sits under
        stack = [sch.get_sblock("root")]
        while stack:
            blk = stack.pop()
            children = sch.get_child_blocks(blk)
            stack.extend(children)
            bound = max(bound, len(sch.get_loops(blk)))
        probes = [dict(space.defaults), self._split_everything(space)]
        for _ in range(LOCATION_PROBES):
            d = dict(space.defaults)
            for other in space.sample_insts:
                if other.kind.name == "SamplePerfectTile":
                    n, mi = int(other.attrs[0]), int(other.attrs[1])
                    ext = int(np.prod([int(x) for x in space.defaults[other]]))
                    opts = factorizations(ext, n, mi)
                    d[other] = list(opts[self._rng.integers(len(opts))])
            probes.append(d)

        def realize_by_replay(base: dict, v: int):
            dec = dict(base)
            dec[inst] = v
            try:
                s = self._replay(space, dec, postproc=False)
            except Exception:  # noqa: BLE001 - a probe whose replay fails tells nothing
                return None
            got = [s.trace.get_decision(i) for i in s.trace.insts if i.kind.name == "SampleComputeLocation"]
            return int(got[which]) if which < len(got) else None

        legal = {int(space.defaults[inst])}
        for base in probes:
            prefix = self._prefix(space, base, inst) if self.probe_on_prefix else None
            if prefix is not None:  # sample from the schedule just before ``inst`` (one replay per probe base)
                realize = functools.partial(self._sample_location, *prefix)
            else:
                realize = functools.partial(realize_by_replay, base)
            v = bound
            while v >= 0:
                r = realize(v)
                if r is None:
                    break
                legal.add(r)
                if r < 0:
                    break
                v = min(v, r) - 1
            for v in (-1, -2):
                r = realize(v)
                if r is not None:
                    legal.add(r)
        return tuple(sorted(legal))

    def _prefix(self, space: _Space, decisions: dict, inst):
        """``(schedule, block RV)``: the instructions before ``inst`` replayed with ``decisions``, and
        the block ``inst`` samples a location for, as a random variable of that schedule; None when
        the replay fails or its trace does not line up with the design space's.

        Probing a location then costs one ``sample_compute_location`` on a copy of this schedule
        instead of a replay of the whole trace: on a conv2d_transpose (three blocks computed at,
        each ComputeAt 30-150 ms) that was 95% of building the space.
        """
        from tvm.s_tir import Schedule
        from tvm.s_tir.schedule import Trace

        pos = space.insts.index(inst)
        insts = space.insts[:pos]
        try:
            sch = Schedule(self.task.mod, debug_mask=0, error_render_level="none")
            Trace(insts, {i: d for i, d in decisions.items() if i in set(insts)}).apply_to_schedule(
                sch, remove_postproc=True)
        except Exception:  # noqa: BLE001 - a probe whose replay fails tells nothing
            return None
        replayed = list(sch.trace.insts)
        if len(replayed) != len(insts):
            return None
        block = inst.inputs[0]
        for src, got in zip(insts, replayed):
            for out_src, out_got in zip(src.outputs, got.outputs):
                if out_src.same_as(block):
                    return sch, out_got
        return None

    @staticmethod
    def _sample_location(sch, block, v: int):
        """The location TVM realizes for decision ``v`` (it snaps an illegal one to the legal one
        below), sampled on a copy of ``sch``; None if sampling fails."""
        s = sch.copy()
        try:
            s.sample_compute_location(block, decision=v)
        except Exception:  # noqa: BLE001 - tells nothing, as a failed replay
            return None
        return int(s.trace.get_decision(s.trace.insts[-1]))

    def _split_everything(self, space: _Space) -> dict:
        """Decisions with every tile as evenly split as its extent allows (fewest unit factors)."""
        d = dict(space.defaults)
        for inst in space.sample_insts:
            if inst.kind.name == "SamplePerfectTile":
                n, mi = int(inst.attrs[0]), int(inst.attrs[1])
                ext = int(np.prod([int(x) for x in space.defaults[inst]]))
                opts = factorizations(ext, n, mi)
                d[inst] = list(max(opts, key=lambda t: (sum(f > 1 for f in t), -max(t))))
        return d

    def _build_knobs(self) -> None:
        # per space: list of (inst, kind, choices)
        per_space = []
        for sp in self.spaces:
            rows = []
            for pos, inst in enumerate(sp.sample_insts):
                kind, choices = self._inst_choices(sp, inst, pos)
                rows.append((inst, kind, choices))
            per_space.append(rows)
        # Group spaces whose sampling instructions match (kinds and choices). Compute-location
        # knobs match whatever their legal sets: the group's knob offers the union, and a
        # location a member space does not accept is reported invalid by apply().
        groups: dict[tuple, list[int]] = {}
        for sp, rows in zip(self.spaces, per_space):
            sig = tuple((kind, None if kind == "compute_location" else choices) for _, kind, choices in rows)
            groups.setdefault(sig, []).append(sp.index)
        self.knobs: list[Knob] = []
        self._slots: dict[int, list] = {sp.index: [] for sp in self.spaces}  # space -> [(inst, knob pos | None, choices)]
        multi_group = len(groups) > 1
        if len(self.spaces) > 1:
            self.knobs.append(Knob("space", "space", tuple(range(len(self.spaces))), tuple(range(len(self.spaces)))))
        for g, (sig, members) in enumerate(groups.items()):
            counters: dict[str, int] = {}
            positions, merged = [], []
            for j, (kind, _) in enumerate(sig):
                choices = tuple(sorted(set().union(*(per_space[s][j][2] for s in members))))
                if kind != "compute_location":
                    choices = per_space[members[0]][j][2]
                merged.append(choices)
                if len(choices) <= 1 or kind == "fixed":
                    positions.append(None)
                    continue
                i = counters.get(kind, 0)
                counters[kind] = i + 1
                name = (f"g{g}." if multi_group else "") + f"{kind}.{i}"
                positions.append(len(self.knobs))
                self.knobs.append(Knob(name, kind, choices, tuple(members)))
            for s in members:
                self._slots[s] = [(inst, p, choices) for (inst, _, _), p, choices in zip(per_space[s], positions, merged)]
        self._space_pos = 0 if len(self.spaces) > 1 else None
        self._active = np.zeros((len(self.spaces), len(self.knobs)), dtype=bool)
        for s in range(len(self.spaces)):
            for _, p, _ in self._slots[s]:
                if p is not None:
                    self._active[s, p] = True
            if self._space_pos is not None:
                self._active[s, self._space_pos] = True

    # ------------------------------------------------------------------ basic facts
    def __len__(self) -> int:
        return self.size

    @property
    def size(self) -> int:
        """Number of distinct configs (a Python int; may be astronomically large)."""
        total = 0
        for s in range(len(self.spaces)):
            total += math.prod(int(k.size) for k, a in zip(self.knobs, self._active[s])
                               if a and k.kind != "space")
        return total

    @property
    def n_knobs(self) -> int:
        return len(self.knobs)

    def __repr__(self) -> str:
        return f"KnobSpace({self.task.name}, {len(self.spaces)} design spaces, {self.n_knobs} knobs, size {self.size:.3g})"

    def space_of(self, config: Sequence[int]) -> int:
        """Design-space index selected by ``config``."""
        return int(config[self._space_pos]) if self._space_pos is not None else 0

    def canonical(self, config: Sequence[int]) -> Config:
        """``config`` with the knobs of unselected design spaces set to 0 (one vector per program)."""
        c = np.asarray(config, dtype=np.int64)
        return tuple(int(x) for x in np.where(self._active[self.space_of(c)], c, 0))

    def canonicalize(self, configs: np.ndarray) -> np.ndarray:
        """Vectorized :meth:`canonical` over an ``(n, n_knobs)`` int array."""
        configs = np.asarray(configs, dtype=np.int64)
        if len(self.spaces) == 1:
            return configs
        act = self._active[configs[:, self._space_pos]]
        return np.where(act, configs, 0)

    def check(self, config: Sequence[int]) -> Config:
        """Validate the shape and ranges of ``config``; return it canonicalized.

        Raises
        ------
        InvalidConfigError
            Wrong length or an index outside ``[0, knob.size)``.
        """
        if len(config) != self.n_knobs:
            raise InvalidConfigError(f"config has {len(config)} entries, the space has {self.n_knobs} knobs")
        for k, v in zip(self.knobs, config):
            if not 0 <= int(v) < k.size:
                raise InvalidConfigError(f"knob {k.name} index {v} is outside [0, {k.size})")
        return self.canonical(config)

    # ------------------------------------------------------------------ sampling and moves
    @property
    def constrained(self) -> bool:
        """Whether the space has limits checked on the knobs (a GPU target: :attr:`gpu`)."""
        return self.gpu is not None and any(self.gpu.rules.values())

    def feasible(self, configs) -> np.ndarray:
        """Whether each config keeps the target's limits that are checked on the knobs, before any
        replay (:class:`release.space.gpu.GPUConstraints`: threads and shared memory per block on GPU
        targets; every config on others).

        Parameters
        ----------
        configs : array-like, int, shape (n, n_knobs) or (n_knobs,)

        Returns
        -------
        np.ndarray, bool, shape (n,)
        """
        configs = np.atleast_2d(np.asarray(configs, dtype=np.int64))
        if self.gpu is None:
            return np.ones(len(configs), dtype=bool)
        return self.gpu.feasible(configs)

    #: most uniform draws per config :meth:`sample` makes to find configs within the limits
    SAMPLE_DRAWS = 256

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` random configs, shape ``(n, n_knobs)``; uniform over each knob, then canonicalized.

        On a space with limits (:attr:`constrained`, GPU targets) the draws are filtered by
        :meth:`feasible`, so the configs are uniform over those within the limits: at most
        ``SAMPLE_DRAWS * n`` draws (vectorized, ~1 us each); if fewer than ``n`` are found, the found
        ones repeat, and if none is, the unfiltered draws are returned (the postprocessors refuse them).
        """
        if not self.constrained or n <= 0:
            out = (rng.random((n, self.n_knobs)) * self.dims).astype(np.int64)
            return self.canonicalize(out)
        found, drawn, first = [], 0, None
        chunk = max(256, 8 * n)
        while sum(len(f) for f in found) < n and drawn < self.SAMPLE_DRAWS * n:
            raw = self.canonicalize((rng.random((chunk, self.n_knobs)) * self.dims).astype(np.int64))
            drawn += chunk
            if first is None:
                first = raw[:n]
            found.append(raw[self.feasible(raw)])
        got = np.concatenate(found) if found else np.zeros((0, self.n_knobs), dtype=np.int64)
        if len(got) >= n:
            return got[:n]
        if len(got) == 0:
            logger.debug("%s: no config within the GPU limits in %d draws", self.task.name, drawn)
            return first
        return got[np.arange(n) % len(got)]

    def random_config(self, rng: np.random.Generator) -> Config:
        """One random config (uniform per knob; within the limits on a :attr:`constrained` space)."""
        return tuple(int(x) for x in self.sample(1, rng)[0])

    def nearest_feasible(self, config: Sequence[int], max_steps: int = 8) -> Config | None:
        """``config`` if it keeps the limits (:meth:`feasible`), else the nearest config that does,
        found by greedy repair: each step tries every one-knob change (all choices of every active
        knob, vectorized) and takes the one within the limits that changes the factors least
        (``sum |log f - log g|`` over tile factors, plus one per changed knob); if none is, it moves
        to the change that breaks the limits least and tries again, at most ``max_steps`` steps.

        Returns
        -------
        tuple of int or None
            A canonical config within the limits, or None when ``max_steps`` steps found none.
        """
        c = np.asarray(self.canonical(config), dtype=np.int64)
        if self.feasible(c)[0]:
            return tuple(int(x) for x in c)
        origin = c.copy()
        for _ in range(max_steps):
            s = self.space_of(c)
            rows = []
            for p, k in enumerate(self.knobs):
                if not self._active[s, p] or k.kind == "space":
                    continue
                block = np.repeat(c[None, :], k.size, axis=0)
                block[:, p] = np.arange(k.size)
                rows.append(block)
            if not rows:
                return None
            cands = self.canonicalize(np.concatenate(rows))
            ok = self.feasible(cands)
            dist = self._factor_distance(cands, origin)
            if ok.any():
                best = np.flatnonzero(ok)[np.argmin(dist[ok])]
                return tuple(int(x) for x in cands[best])
            excess = self.gpu.excess(cands)
            c = cands[np.lexsort((dist, excess))[0]]
        return None

    def _factor_distance(self, configs: np.ndarray, origin: np.ndarray) -> np.ndarray:
        """How far each config's decisions are from ``origin``'s: ``sum |log f - log g|`` over the tile
        factors of changed tile knobs, plus one per changed knob."""
        d = (configs != origin[None, :]).sum(axis=1).astype(np.float64)
        for p, k in enumerate(self.knobs):
            if k.kind != "tile":
                continue
            tab = np.log(np.asarray(k.choices, dtype=np.float64))
            d += np.abs(tab[configs[:, p]] - tab[origin[p]]).sum(axis=1)
        return d

    def neighbors(self, config: Sequence[int]) -> list[Config]:
        """Configs one step away: one active knob moved by -1 or +1 (the Chameleon agent's moves); on a
        :attr:`constrained` space only those within the limits (:meth:`feasible`)."""
        c = list(self.canonical(config))
        s = self.space_of(c)
        out = []
        for p, k in enumerate(self.knobs):
            if not self._active[s, p]:
                continue
            for step in (-1, 1):
                v = c[p] + step
                if 0 <= v < k.size:
                    n = c.copy()
                    n[p] = v
                    out.append(self.canonical(n))
        if self.constrained and out:
            ok = self.feasible(out)
            out = [c for c, good in zip(out, ok) if good]
        return out

    # ------------------------------------------------------------------ index <-> config (grid order)
    def _space_sizes(self) -> list[int]:
        return [math.prod(int(k.size) for k, a in zip(self.knobs, self._active[s]) if a and k.kind != "space")
                for s in range(len(self.spaces))]

    def get(self, index: int) -> Config:
        """Config number ``index`` in grid order (design space major, then mixed radix, last knob fastest)."""
        index = int(index)
        if not 0 <= index < self.size:
            raise InvalidConfigError(f"config index {index} is outside [0, {self.size})")
        for s, n in enumerate(self._space_sizes()):
            if index < n:
                c = [0] * self.n_knobs
                if self._space_pos is not None:
                    c[self._space_pos] = s
                for p in reversed(range(self.n_knobs)):
                    if self._active[s, p] and self.knobs[p].kind != "space":
                        index, c[p] = divmod(index, self.knobs[p].size)
                return tuple(c)
            index -= n
        raise AssertionError("unreachable")

    def index_of(self, config: Sequence[int]) -> int:
        """Inverse of :meth:`get`."""
        c = self.canonical(config)
        s = self.space_of(c)
        base = sum(self._space_sizes()[:s])
        idx = 0
        for p in range(self.n_knobs):
            if self._active[s, p] and self.knobs[p].kind != "space":
                idx = idx * self.knobs[p].size + c[p]
        return base + idx

    # ------------------------------------------------------------------ configs <-> programs
    def decisions(self, config: Sequence[int]) -> dict:
        """MetaSchedule decisions (instruction -> value) of ``config``'s design space."""
        c = self.check(config)
        s = self.space_of(c)
        sp = self.spaces[s]
        dec = dict(sp.defaults)
        for inst, p, choices in self._slots[s]:
            if p is None:
                dec[inst] = choices[0] if len(choices) == 1 else sp.defaults[inst]
            else:
                value = choices[c[p]]
                dec[inst] = list(value) if isinstance(value, tuple) else value
        return dec

    def trace(self, config: Sequence[int]):
        """The MetaSchedule ``Trace`` (without postprocessing) that ``config`` stands for."""
        from tvm.s_tir.schedule import Trace

        c = self.check(config)
        return Trace(self.spaces[self.space_of(c)].insts, self.decisions(c))

    def apply(self, config: Sequence[int], precheck: bool = True):
        """Replay ``config`` on its design space and run the postprocessors.

        On a :attr:`constrained` space (a GPU target) a config that breaks a limit checked on the
        knobs (:meth:`feasible`) is refused first, without a replay (``precheck=False``: the
        postprocessors alone decide, as MetaSchedule does); :attr:`prechecked` counts those.

        Returns
        -------
        tvm.s_tir.Schedule
            The scheduled program (``sch.mod``) with ``sch.trace`` including postprocessing.

        Raises
        ------
        InvalidConfigError
            With the reason: a compute location TVM would snap elsewhere, a postprocessor that
            rejects the program (e.g. a GPU thread limit), or a replay error.
        """
        c = self.check(config)
        if self.constrained and precheck and not self.gpu.feasible([c])[0]:
            self.prechecked += 1
            raise InvalidConfigError(self.gpu.reason(c))
        s = self.space_of(c)
        sp = self.spaces[s]
        dec = self.decisions(c)
        try:
            sch = self._replay(sp, dec, postproc=False)
        except InvalidConfigError:
            raise
        except Exception as err:  # noqa: BLE001 - TVM raises plain errors on illegal schedules
            raise InvalidConfigError(f"replay failed: {error_line(err)}") from None
        # TVM repairs illegal compute locations silently: detect it
        got = {}
        for inst in sch.trace.insts:
            if inst.kind.name == "SampleComputeLocation":
                got.setdefault("loc", []).append(int(sch.trace.get_decision(inst)))
        want = [int(dec[i]) for i in sp.sample_insts if i.kind.name == "SampleComputeLocation"]
        if got.get("loc", []) != want:
            raise InvalidConfigError(
                f"compute location {want} is not legal with these tile sizes (TVM would use {got.get('loc')})"
            )
        try:
            sch.enter_postproc()
            for p in self.postprocs:
                if not p.apply(sch):
                    raise InvalidConfigError(f"postprocessor {_postproc_name(p)} rejected the schedule")
        except InvalidConfigError:
            raise
        except Exception as err:  # noqa: BLE001
            raise InvalidConfigError(f"postprocessing failed: {error_line(err)}") from None
        return sch

    def is_valid(self, config: Sequence[int], precheck: bool = True) -> tuple[bool, str]:
        """``(True, "")`` or ``(False, reason)``; never raises for a well-shaped config.
        ``precheck=False``: MetaSchedule's replay and postprocessors alone decide (see :meth:`apply`)."""
        try:
            self.apply(config, precheck=precheck)
            return True, ""
        except InvalidConfigError as err:
            return False, err.reason

    def from_trace(self, trace) -> Config:
        """The config of a MetaSchedule trace derived from one of this task's design spaces.

        Raises
        ------
        InvalidConfigError
            If the trace's structure matches no design space or a decision is not a legal choice.
        """
        insts = list(trace.insts)
        sig = _structure(insts)
        if not any(sp.structure == sig for sp in self.spaces):
            # MetaSchedule's search strategies hand out *simplified* traces (dead instructions such
            # as an unused get_consumers removed): match those against each space's simplified trace
            # and carry the sampling decisions, in order, over to the full design-space trace.
            from tvm.s_tir.schedule import Trace

            got = [i for i in insts if i.kind.name.startswith("Sample") and trace.get_decision(i) is not None]
            for sp in self.spaces:
                if sp.simplified_structure() == sig and len(got) == len(sp.sample_insts):
                    decisions = dict(sp.defaults)
                    for inst, g in zip(sp.sample_insts, got):
                        decisions[inst] = trace.get_decision(g)
                    return self.from_trace(Trace(sp.insts, decisions))
        for sp in self.spaces:
            if sp.structure != sig:
                continue
            samples = [i for i in insts if i.kind.name.startswith("Sample") and trace.get_decision(i) is not None]
            c = [0] * self.n_knobs
            if self._space_pos is not None:
                c[self._space_pos] = sp.index
            for (inst, p, choices), got in zip(self._slots[sp.index], samples):
                if p is None:
                    continue
                value = trace.get_decision(got)
                value = tuple(int(x) for x in value) if inst.kind.name == "SamplePerfectTile" else int(value)
                try:
                    c[p] = choices.index(value)
                except ValueError:
                    raise InvalidConfigError(f"decision {value} of knob {self.knobs[p].name} is not a legal choice") from None
            return tuple(c)
        raise InvalidConfigError("the trace does not come from any design space of this task")

    def from_trace_json(self, trace_json) -> Config:
        """The config of a trace stored as JSON in a record (see :meth:`from_trace`).

        Lets a log written with another knob layout (for example by an older release) resume.
        """
        from tvm.s_tir import Schedule
        from tvm.s_tir.schedule import Trace

        sch = Schedule(self.task.mod, debug_mask=0, error_render_level="none")
        try:
            Trace.apply_json_to_schedule(trace_json, sch)
        except Exception as err:  # noqa: BLE001
            raise InvalidConfigError(f"the stored trace does not replay on this task: {error_line(err)}") from None
        return self.from_trace(sch.trace)

    def config_of_record(self, config: Sequence[int], trace_json=None) -> Config:
        """Canonical config of a stored record: its ``config`` if it fits this space, else the
        config recovered from its trace.

        Raises
        ------
        InvalidConfigError
            Neither the config nor the trace fits this space.
        """
        try:
            return self.check(config)
        except InvalidConfigError:
            if trace_json is None:
                raise
            return self.canonical(self.from_trace_json(trace_json))

    def transplant(self, trace_json) -> Config:
        """The config of this space closest to a trace of *another* task with the same schedule structure.

        Transfer-tuning (Gibson and Cano, PACT 2022: reuse the auto-schedules of other kernels of the
        same class): a trace measured on another workload (another conv2d shape, another matmul) is
        carried over decision by decision. The trace's sampling instructions must match one of this
        task's design spaces one to one (same kinds in order, same tile depth ``n``); then

        - ``SamplePerfectTile``: the factorization of this loop's extent nearest to the source's,
          by ``sum_i 2**i * |log f_i - log g_i|`` (``i = 0`` outermost: inner factors, which decide
          vectorization and register blocking, weigh most; the outer ones absorb the extent change);
        - ``SampleCategorical``: the candidate nearest in value (unroll steps ``0, 16, 64, 512``),
          the same index when the candidates are not numbers;
        - ``SampleComputeLocation``: the same loop index when this space accepts it, else the
          nearest one it accepts (inline and root stay what they are).

        Parameters
        ----------
        trace_json : list or str
            A MetaSchedule trace as JSON (``[instructions, decisions]``; a record's ``trace``).

        Returns
        -------
        tuple of int
            A canonical config of this space; it may still fail :meth:`is_valid` (postprocessing).

        Raises
        ------
        InvalidConfigError
            The trace is not MetaSchedule trace JSON, or its sampling instructions match none of
            this task's design spaces (another operator kind, another schedule rule).
        """
        import json

        try:
            tj = json.loads(trace_json) if isinstance(trace_json, str) else trace_json
            insts, decisions = tj[0], {int(i): v for i, v in tj[1]}
            kinds, samples = [], []
            for i, inst in enumerate(insts):
                if inst[0] == "EnterPostproc":
                    break
                kinds.append(inst[0])
                if inst[0].startswith("Sample") and i in decisions:
                    samples.append((inst[0], inst[2], decisions[i]))
        except (TypeError, ValueError, IndexError, KeyError) as err:
            raise InvalidConfigError(f"not a MetaSchedule trace in JSON: {err}") from None

        def sig(kind, attrs):
            return (kind, int(attrs[0]) if kind == "SamplePerfectTile" else None)

        want = [sig(k, a) for k, a, _ in samples]
        head = [inst[:4] for inst in insts[:len(kinds)]]
        match = None
        for sp in self.spaces:
            if [sig(i.kind.name, i.attrs) for i in sp.sample_insts] != want:
                continue
            if sp.json_head() == head:
                match = sp  # the same instructions, attributes and data flow: the same design space
                break
            match = match or sp
        if match is None:
            raise InvalidConfigError(f"the trace's {len(samples)} sampling decisions match no design space of "
                                     f"{self.task.name} (another operator or schedule structure)")
        c = [0] * self.n_knobs
        if self._space_pos is not None:
            c[self._space_pos] = match.index
        for (inst, p, choices), (kind, attrs, value) in zip(self._slots[match.index], samples):
            if p is None:
                continue
            if kind == "SamplePerfectTile":
                got = np.log(np.maximum(np.asarray(choices, dtype=np.float64), 1.0))
                src = np.log(np.maximum(np.asarray(value, dtype=np.float64), 1.0))
                w = 2.0 ** np.arange(got.shape[1])
                c[p] = int(np.argmin((np.abs(got - src) * w).sum(axis=1)))
            elif kind == "SampleCategorical":
                try:
                    v = float(attrs[0][int(value)])
                    cands = np.asarray([float(x) for x in inst.attrs[0]])
                    c[p] = int(np.argmin(np.abs(np.log1p(np.maximum(cands, 0)) - np.log1p(max(v, 0)))))
                except (TypeError, ValueError, IndexError):
                    c[p] = min(int(value), len(choices) - 1)
            else:  # compute location: the same loop, else the nearest legal one of the same kind (loop / root / inline)
                v = int(value)
                same = [j for j, x in enumerate(choices) if (x >= 0) == (v >= 0)] or range(len(choices))
                c[p] = min(same, key=lambda j: (abs(int(choices[j]) - v), -int(choices[j])))
        return self.canonical(c)

    def describe(self, config: Sequence[int]) -> dict:
        """``{knob name: decision}`` for active knobs, for humans and logs."""
        c = self.canonical(config)
        s = self.space_of(c)
        return {k.name: (list(k.choices[v]) if isinstance(k.choices[v], tuple) else k.choices[v])
                for k, v, a in zip(self.knobs, c, self._active[s]) if a}


def _postproc_name(p) -> str:
    return str(type(p).__name__)

