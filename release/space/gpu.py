"""GPU limits of a knob space, checked on knob indices before any replay.

On CUDA most configs of MetaSchedule's design spaces break a limit of the GPU: MetaSchedule's
``VerifyGPUCode`` postprocessor refuses ~95% of uniformly random ones (resnet18.conv2d.6, sm_90),
and each refusal costs a replay plus the postprocessors' lowering (20-45 ms). The limits it checks
depend on the tile sizes only through products and sums of the sampled factors, so they can be
evaluated on the config vectors, vectorized, in microseconds:

- **threads per block**: ``VerifyGPUCode`` first runs a thread-extent check: a block annotated
  ``meta_schedule.thread_extent_low_inclusive`` / ``..._high_inclusive`` (MultiLevelTiling puts the
  warp size and ``max_threads_per_block`` there) must sit under ``threadIdx`` loops whose extents
  multiply to a value in that range; TVM's ``VerifyGPUCode`` analysis then refuses more than the
  target's ``max_threads_per_block`` threads;
- **shared memory per block**: the ``shared`` buffers of ``cache_read`` blocks computed at a loop
  hold the region their consumer reads under that loop (an affine index ``sum_v a_v v + c`` over
  tiles ``t_v`` spans ``sum_v |a_v| (t_v - 1) + 1``), times the versions a software pipeline keeps
  (``max(stage) - min(stage) + 1``), and must fit ``max_shared_memory_per_block``.

The rules are read off each design space's trace by following its instructions symbolically
(``GetSBlock``, ``GetLoops``, ``SamplePerfectTile``, ``SampleCategorical``, ``Split``, ``Fuse``,
``Reorder``, ``Bind``, ``Annotate``, ``CacheRead``, ``ComputeAt``): a loop's extent is a product of
sampled factors, so each rule becomes a product or polynomial of per-knob value tables. A trace
the reading does not understand (another instruction on a tracked loop, a non-affine index) loses
that rule only; the postprocessors stay the final check. What they still refuse is counted by the
session (``TuningSession.rejections``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

logger = logging.getLogger(__name__)

#: sizes of the element types shared buffers hold (bytes); others count 4
_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int8": 1, "uint8": 1,
                "int32": 4, "int64": 8, "int16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1}


@dataclass(frozen=True)
class GPULimits:
    """The limits a CUDA target declares (``tvm.target.Target`` attributes; ``release.target``'s
    ``cuda`` alias: 1024 threads, 48 KiB of shared memory, warps of 32, as MetaSchedule reads them).

    Attributes
    ----------
    max_threads_per_block : int
    max_shared_memory_per_block : int
        Bytes.
    thread_warp_size : int
    """

    max_threads_per_block: int
    max_shared_memory_per_block: int
    thread_warp_size: int = 32

    @classmethod
    def of(cls, target) -> "GPULimits | None":
        """The limits of ``target``, or None when it is not a GPU target that declares them."""
        if target is None or target.kind.name not in ("cuda", "rocm", "vulkan", "metal", "opencl"):
            return None
        attrs = target.attrs
        try:
            threads = int(attrs["max_threads_per_block"]) if "max_threads_per_block" in attrs else \
                int(attrs["max_num_threads"])
            shared = int(attrs["max_shared_memory_per_block"])
        except (KeyError, TypeError, ValueError):
            return None
        warp = int(attrs["thread_warp_size"]) if "thread_warp_size" in attrs else 32
        return cls(threads, shared, warp)


# ---------------------------------------------------------------------------- symbolic values
# A factor is ("const", v) | ("knob", p, j) (the j-th value of knob p's choice) | ("infer", extent, [factors])
# (a None split factor: the loop's extent over the product of the others). A loop is its list of
# (iter var index, factor) parts, outermost first, and the block that owns it.

@dataclass
class _Loop:
    block: object  # the block RV whose loop nest this loop belongs to
    parts: list  # [(iter_var_index, factor)]


@dataclass
class _Rule:
    """One limit of one design space: ``low <= value(config) <= high``."""

    name: str
    what: str  # "threads" | "shared"
    low: int
    high: int
    terms: list = field(default_factory=list)  # threads: [factor]; shared: [(bytes, versions, [(coefs, extent)])]


class GPUConstraints:
    """The GPU limits of a :class:`release.space.KnobSpace`'s design spaces, on config vectors.

    Parameters
    ----------
    space : release.space.KnobSpace
        A knob space of a GPU task (its design spaces, knobs and slots are read).
    limits : GPULimits
        The target's limits.

    Attributes
    ----------
    rules : dict[int, list]
        Design-space index -> its rules (threads in range; shared memory within the limit).
    skipped : list[str]
        What could not be read into a rule (the postprocessors still check it), one line each.
    """

    def __init__(self, space, limits: GPULimits):
        self.space = space
        self.limits = limits
        self.skipped: list[str] = []
        self.rules: dict[int, list[_Rule]] = {}
        self._tables: dict[int, np.ndarray] = {}
        for p, k in enumerate(space.knobs):
            if k.kind == "tile":
                self._tables[p] = np.asarray(k.choices, dtype=np.int64)
        for sp in space.spaces:
            try:
                self.rules[sp.index] = self._read_space(sp)
            except Exception as err:  # noqa: BLE001 - a trace we cannot read keeps no rule; the verifier checks it
                self.skipped.append(f"design space {sp.index}: {type(err).__name__}: {err}")
                self.rules[sp.index] = []

    # ------------------------------------------------------------------ reading a trace
    def _slot_values(self, sp):
        """inst -> (knob position or None, choices or the fixed decision) for sampling instructions."""
        out = {}
        for inst, p, choices in self.space._slots[sp.index]:
            if p is None:
                dec = choices[0] if len(choices) == 1 else sp.defaults[inst]
                out[inst] = (None, dec)
            else:
                out[inst] = (p, choices)
        return out

    def _read_space(self, sp) -> list[_Rule]:
        import tvm
        from tvm.s_tir import Schedule

        slots = self._slot_values(sp)

        def H(x):  # an RV's identity (Python wrappers of one RV are distinct objects)
            return x.__chandle__()

        rv: dict = {}  # RV handle -> ("block", name) | ("loop", _Loop) | ("factor", factor) | ("opaque",)
        nests: dict = {}  # block handle -> [loop handles], outermost first
        iters: dict[str, tuple] = {}  # block name -> (iter vars, reads, iter var of each loop, extents)
        bound: list = []  # (loop handle, thread tag)
        annotated: list = []  # [block handle, low, high]
        caches: list = []  # (cache block handle, consumer block handle, read index)
        at: dict = {}  # cache block handle -> (loop handle, the consumer's nest then)
        versions = 1  # buffer versions of a software pipeline
        mod_sch = Schedule(self.space.task.mod, debug_mask=0, error_render_level="none")

        def block_info(name: str):
            if name not in iters:
                b = mod_sch.get_sblock(name)
                blk = mod_sch.get(b)
                loops = [mod_sch.get(lp) for lp in mod_sch.get_loops(b)]
                realize = loops[-1].body if loops else None
                ivars = [iv.var for iv in blk.iter_vars]
                index_of_loop = None
                if realize is not None and hasattr(realize, "iter_values"):
                    vals = list(realize.iter_values)
                    index_of_loop = []
                    for lp in loops:  # the iter var each loop drives (None: none, or not a plain binding)
                        hit = [i for i, v in enumerate(vals) if v.same_as(lp.loop_var)]
                        index_of_loop.append(hit[0] if len(hit) == 1 else None)
                iters[name] = (ivars, list(blk.reads), index_of_loop, [int(lp.extent) for lp in loops])
            return iters[name]

        def factor_of(x):
            if x is None:
                return None
            if isinstance(x, (int, np.integer)):
                return ("const", int(x))
            if type(x).__name__ == "IntImm":
                return ("const", int(x.value))
            got = rv.get(H(x))
            if got is None or got[0] != "factor":
                raise ValueError(f"split factor {x} is neither sampled nor constant")
            return got[1]

        def loop(x):
            got = rv.get(H(x))
            return got[1] if got is not None and got[0] == "loop" else None

        def opaque(outs):
            for o in outs:
                rv[H(o)] = ("opaque",)

        for inst in sp.insts:
            kind = inst.kind.name
            ins, outs, attrs = list(inst.inputs), list(inst.outputs), list(inst.attrs)
            if kind == "EnterPostproc":
                break
            if kind == "GetSBlock":
                rv[H(outs[0])] = ("block", str(attrs[0]))
            elif kind == "GetLoops":
                b = rv.get(H(ins[0]))
                if b is None or b[0] != "block" or H(ins[0]) in nests:
                    opaque(outs)
                    continue
                _, _, index_of_loop, extents = block_info(b[1])
                if index_of_loop is None or len(index_of_loop) != len(outs):
                    opaque(outs)
                    continue
                nests[H(ins[0])] = [H(o) for o in outs]
                for o, iv, ext in zip(outs, index_of_loop, extents):
                    rv[H(o)] = ("loop", _Loop(H(ins[0]), [(iv, ("const", ext))]))
            elif kind == "SamplePerfectTile":
                p, choices = slots.get(inst, (None, sp.defaults.get(inst)))
                for j, o in enumerate(outs):
                    rv[H(o)] = ("factor", ("knob", p, j) if p is not None else ("const", int(choices[j])))
            elif kind == "SampleCategorical":
                cands = [int(c) for c in attrs[0]]
                p, choices = slots.get(inst, (None, sp.defaults.get(inst)))
                if p is None:
                    rv[H(outs[0])] = ("factor", ("const", cands[int(choices)]))
                else:
                    self._tables[("cat", p)] = np.asarray([[cands[int(c)]] for c in choices], dtype=np.int64)
                    rv[H(outs[0])] = ("factor", ("cat", p, 0))
            elif kind == "Split":
                lp = loop(ins[0])
                if lp is None or len(lp.parts) != 1:
                    opaque(outs)
                    continue
                iv, ext = lp.parts[0]
                factors = [factor_of(f) for f in ins[1:]]
                known = [f for f in factors if f is not None]
                factors = [f if f is not None else ("infer", ext, known) for f in factors]
                for o, f in zip(outs, factors):
                    rv[H(o)] = ("loop", _Loop(lp.block, [(iv, f)]))
                nest = nests.get(lp.block)
                if nest is not None and H(ins[0]) in nest:
                    i = nest.index(H(ins[0]))
                    nest[i:i + 1] = [H(o) for o in outs]
            elif kind == "Reorder":
                lps = [loop(x) for x in ins]
                if any(lp is None for lp in lps) or len({lp.block for lp in lps}) != 1:
                    continue
                nest = nests.get(lps[0].block)
                hs = [H(x) for x in ins]
                if nest is None or not all(h in nest for h in hs):
                    continue
                for i, h in zip(sorted(nest.index(h) for h in hs), hs):
                    nest[i] = h
            elif kind == "Fuse":
                lps = [loop(x) for x in ins]
                if any(lp is None for lp in lps):
                    opaque(outs)
                    continue
                rv[H(outs[0])] = ("loop", _Loop(lps[0].block, [part for lp in lps for part in lp.parts]))
                nest = nests.get(lps[0].block)
                hs = [H(x) for x in ins]
                if nest is not None and all(h in nest for h in hs):
                    i = min(nest.index(h) for h in hs)
                    nest[:] = [h for h in nest if h not in hs]
                    nest.insert(i, H(outs[0]))
            elif kind == "Bind":
                bound.append((H(ins[0]), str(attrs[0])))
            elif kind == "Annotate":
                ann, val = str(attrs[0]), ins[1]
                if ann == "meta_schedule.thread_extent_low_inclusive":
                    annotated.append([H(ins[0]), int(val), None])
                elif ann == "meta_schedule.thread_extent_high_inclusive":
                    for a in annotated:
                        if a[0] == H(ins[0]) and a[2] is None:
                            a[2] = int(val)
                elif ann == "software_pipeline_stage":
                    stages = [int(x) for x in val]
                    versions = max(versions, max(stages) - min(stages) + 1)
            elif kind == "CacheRead":
                if str(attrs[1]) == "shared":
                    caches.append((H(outs[0]), H(ins[0]), int(attrs[0])))
                rv[H(outs[0])] = ("cache",)
            elif kind == "ComputeAt":
                lp = loop(ins[1])
                nest = nests.get(lp.block) if lp is not None else None
                at[H(ins[0])] = (H(ins[1]), list(nest) if nest is not None else None)
            elif kind in ("GetChildBlocks", "GetProducers", "GetConsumers", "GetOutputBlocks"):
                opaque(outs)

        rules: list[_Rule] = []
        lim = self.limits

        def thread_terms(owner=None):
            terms = []
            for h, tag in bound:
                got = rv.get(h)
                if tag.startswith("threadIdx") and got is not None and got[0] == "loop" and (
                        owner is None or got[1].block == owner):
                    terms.extend(f for _, f in got[1].parts)
            return terms

        for blk, low, high in annotated:  # the thread-extent check of VerifyGPUCode
            high = lim.max_threads_per_block if high is None else min(high, lim.max_threads_per_block)
            terms = thread_terms(blk)
            if terms:
                rules.append(_Rule("threads", "threads", int(low), int(high), terms))
        if not annotated:  # no kernel may exceed max_threads_per_block (per bound loop: its own kernel)
            for h, tag in bound:
                got = rv.get(h)
                if tag.startswith("threadIdx") and got is not None and got[0] == "loop":
                    rules.append(_Rule("threads", "threads", 1, lim.max_threads_per_block,
                                       [f for _, f in got[1].parts]))
        try:
            shared_terms = self._shared_terms(sp, caches, at, rv, block_info, dict(bound))
        except Exception as err:  # noqa: BLE001 - the shared-memory rule is lost, the others stay
            self.skipped.append(f"design space {sp.index}: shared memory not read ({type(err).__name__}: {err})")
            shared_terms = []
        if shared_terms:
            rules.append(_Rule("shared memory", "shared", 0, lim.max_shared_memory_per_block,
                               [(n, versions, d, t) for n, d, t in shared_terms]))
        return rules

    def _shared_terms(self, sp, caches, at, rv, block_info, tags) -> list:
        """``(bytes per element, index (coefficients, extent) per dimension, tile factors per iter var)``
        of each shared cache_read computed at a loop of its consumer; [] when one cannot be read.

        The tile of an iter var is what its loops cover in one thread block: the loops inside the
        compute-at loop and the ``threadIdx`` / ``vthread`` loops around it (a shared buffer is
        relaxed over the threads that fill it cooperatively, as TVM's region analysis does)."""
        import tvm

        shared_terms = []
        for cache, consumer, idx in caches:
            where = at.get(cache)
            b = rv.get(consumer)
            if where is None or where[1] is None or b is None or b[0] != "block":
                self.skipped.append(f"design space {sp.index}: shared read {idx} is not computed at a loop of its "
                                    "consumer's nest")
                return []
            loop_h, nest = where
            if loop_h not in nest:
                self.skipped.append(f"design space {sp.index}: the compute-at loop of shared read {idx} is not "
                                    "in its consumer's nest")
                return []
            ivars, reads, _, _ = block_info(b[1])
            region = reads[idx]
            dims = []
            for r in region.region:
                coefs = tvm.sym.pattern.detect_linear_equation(r.min, ivars)
                if len(coefs) != len(ivars) + 1 or not all(type(c).__name__ == "IntImm" for c in coefs[:-1]) \
                        or type(r.extent).__name__ != "IntImm":
                    self.skipped.append(f"design space {sp.index}: shared read {idx} has a non-affine index")
                    return []
                dims.append(([abs(int(c.value)) for c in coefs[:-1]], int(r.extent.value)))
            tile: dict[int, list] = {}  # iter var -> its factors under the compute-at loop
            pos = nest.index(loop_h)
            covered = [h for h in nest[:pos] if tags.get(h, "").startswith(("threadIdx", "vthread"))]
            for h in covered + nest[pos + 1:]:
                got = rv.get(h)
                if got is None or got[0] != "loop":
                    continue
                for iv, f in got[1].parts:
                    if iv is not None:
                        tile.setdefault(iv, []).append(f)
            buf = region.buffer if hasattr(region, "buffer") else region.source
            nbytes = _DTYPE_BYTES.get(str(buf.dtype), 4)
            shared_terms.append((nbytes, dims, tile))
        return shared_terms

    # ------------------------------------------------------------------ evaluation
    def _factor(self, f, configs: np.ndarray) -> np.ndarray:
        kind = f[0]
        if kind == "const":
            return np.full(len(configs), f[1], dtype=np.int64)
        if kind == "knob":
            return self._tables[f[1]][configs[:, f[1]], f[2]]
        if kind == "cat":
            return self._tables[("cat", f[1])][configs[:, f[1]], 0]
        if kind == "infer":  # a None split factor: ceil(extent / product of the others)
            prod = np.ones(len(configs), dtype=np.int64)
            for g in f[2]:
                prod = prod * self._factor(g, configs)
            return -(-self._factor(f[1], configs) // np.maximum(prod, 1))
        raise ValueError(kind)

    def values(self, configs: np.ndarray, space_index: int) -> dict[str, np.ndarray]:
        """Each rule's value (threads, shared bytes) for ``configs`` of design space ``space_index``."""
        out = {}
        for rule in self.rules.get(space_index, []):
            out[rule.name] = self._value(rule, configs)
        return out

    def _value(self, rule: _Rule, configs: np.ndarray) -> np.ndarray:
        if rule.what == "threads":
            v = np.ones(len(configs), dtype=np.int64)
            for f in rule.terms:
                v = v * self._factor(f, configs)
            return v
        total = np.zeros(len(configs), dtype=np.int64)
        for nbytes, versions, dims, tile in rule.terms:
            t = {iv: np.prod([self._factor(f, configs) for f in fs], axis=0) for iv, fs in tile.items()}
            elems = np.ones(len(configs), dtype=np.int64)
            for coefs, extent in dims:
                span = np.full(len(configs), extent, dtype=np.int64)
                for iv, a in enumerate(coefs):
                    if a and iv in t:
                        span = span + a * (t[iv] - 1)
                elems = elems * span
            total = total + elems * nbytes * versions
        return total

    def feasible(self, configs) -> np.ndarray:
        """Whether each config keeps every rule of its design space; ``configs`` shape (n, n_knobs),
        result shape (n,) bool."""
        configs = np.atleast_2d(np.asarray(configs, dtype=np.int64))
        ok = np.ones(len(configs), dtype=bool)
        if len(configs) == 0:
            return ok
        sp_of = configs[:, self.space._space_pos] if self.space._space_pos is not None else \
            np.zeros(len(configs), dtype=np.int64)
        for s, rules in self.rules.items():
            rows = np.flatnonzero(sp_of == s)
            if not len(rows) or not rules:
                continue
            sub = configs[rows]
            good = np.ones(len(rows), dtype=bool)
            for rule in rules:
                v = self._value(rule, sub)
                good &= (v >= rule.low) & (v <= rule.high)
            ok[rows] = good
        return ok

    def excess(self, configs) -> np.ndarray:
        """How far each config is outside its limits: the sum over rules of ``log(value / high)`` above
        and ``log(low / value)`` below (0 for a config within every limit); shape (n,)."""
        configs = np.atleast_2d(np.asarray(configs, dtype=np.int64))
        out = np.zeros(len(configs), dtype=np.float64)
        sp_of = configs[:, self.space._space_pos] if self.space._space_pos is not None else \
            np.zeros(len(configs), dtype=np.int64)
        for s, rules in self.rules.items():
            rows = np.flatnonzero(sp_of == s)
            if not len(rows):
                continue
            for rule in rules:
                v = np.maximum(self._value(rule, configs[rows]).astype(np.float64), 1.0)
                out[rows] += np.maximum(0.0, np.log(v / max(rule.high, 1))) + np.maximum(0.0, np.log(max(rule.low, 1) / v))
        return out

    def reason(self, config) -> str:
        """Why ``config`` breaks a limit (one line), or "" when it keeps them all."""
        c = np.asarray([config], dtype=np.int64)
        s = self.space.space_of(config)
        for rule in self.rules.get(s, []):
            v = int(self._value(rule, c)[0])
            if not rule.low <= v <= rule.high:
                unit = " bytes" if rule.what == "shared" else ""
                return (f"GPU limit: {rule.name} {v}{unit} outside [{rule.low}, {rule.high}] "
                        f"(checked on the knobs before replay)")
        return ""

    def describe(self) -> list[str]:
        """One line per design space: its rules (for logs and docs)."""
        return [f"design space {s}: " + (", ".join(f"{r.name} in [{r.low}, {r.high}]" for r in rules) or "no rule")
                for s, rules in sorted(self.rules.items())]
