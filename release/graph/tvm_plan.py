"""The memory TVM really plans for a Relax module, read exactly, and a model that predicts it for any op order.

TVM's Relax VM allocates intermediate tensors as its ``StaticPlanBlockMemory`` pass decides
(``src/relax/transform/static_plan_block_memory.cc``, TVM 0.27). After the passes ``tvm.compile`` runs before it
on a CPU target (``relax.backend.cpu_generic.pipeline``: library dispatch, LegalizeOps, AnnotateTIROpPattern,
FoldConstant, FuseOps, FuseTIR, RewriteDataflowReshape, ToNonDataflow, RemovePurityChecking, CallTIRRewrite)
every kernel output is a ``R.builtin.alloc_tensor``. The pass then

1. gives each such allocation a *storage token* (bytes = product of the static shape x dtype bytes, dtype, storage
   scope) whose reference count is the number of times the tensor (or an in-place alias of it made by
   ``R.reshape``, ``R.memory.view`` or ``R.memory.ensure_zero_offset``) is an argument of a PrimFunc or extern
   call, the producing call included; a token that reaches the function's return value, or is an argument of
   any other call, is *discarded* (not planned: allocated on its own);
2. walks the bindings in order. At an allocation it looks in the pool of released tokens of the same scope and
   dtype for the smallest token of at least the requested size, up to 16x larger (among equal sizes the one
   released first); failing that, the largest smaller token down to 1/16 of the size (among equal sizes the one
   released last), which is enlarged to the requested size; failing that, a new token. At a call it
   decrements the count of every token its arguments use and releases those that reach zero, in argument
   order;
3. emits one ``R.memory.alloc_storage`` per token with the token's final (possibly enlarged) size.

So what TVM plans for a binding order is the sum of the final token sizes (plus the unplanned allocations,
whose total does not depend on the order), and it differs from the ideal peak of live bytes (per-tensor
liveness, :class:`~release.graph.perf_model.PerformanceModel`): a token enlarged once stays large, and a freed
token is reused only within a size window.

* :func:`planned_memory_exact` reads the plan TVM produces: it runs those passes and sums the
  ``alloc_storage`` sizes and the remaining (unplanned) ``alloc_tensor`` sizes of the planned function, in bytes.
* :class:`TVMPlanModel` replays step 2 in Python for any topological order of a graph imported from the module
  (:func:`release.graph.relax_import.from_relax`, fused graphs: one node per kernel the VM runs), so a search
  can evaluate thousands of orders per second on the objective TVM has. Its prediction is checked against
  :func:`planned_memory_exact` on reordered modules (tests and ``benchmarks/regal/tvm_plan_model.py``).
"""

from __future__ import annotations

import bisect
import logging
from dataclasses import dataclass, field

import numpy as np

from ..errors import GraphError

logger = logging.getLogger(__name__)

#: TVM's search window for reuse (``TokenAllocator1D::match_range_``).
MATCH_RANGE = 16
_INPLACE_OPS = ("relax.reshape", "relax.memory.view", "relax.memory.ensure_zero_offset")


def planning_passes(target=None) -> list:
    """The passes ``tvm.compile`` runs on a CPU target before ``StaticPlanBlockMemory`` (TVM 0.27's
    ``relax.backend.cpu_generic.pipeline``: library dispatch, legalize, dataflow lowering)."""
    from tvm.relax.backend.cpu_generic import pipeline as cpu

    t = _target(target)
    return cpu.library_dispatch_passes(t) + cpu.legalize_passes(t) + cpu.dataflow_lower_passes(t)


def _target(target=None):
    import tvm

    if target is None:
        return tvm.target.Target({"kind": "llvm"})
    return target if isinstance(target, tvm.target.Target) else tvm.target.Target(target)


def lower_for_planning(mod, target=None):
    """``mod`` after the passes ``tvm.compile`` runs before memory planning (allocations explicit)."""
    import tvm

    t = _target(target)
    with t:
        return tvm.transform.Sequential(planning_passes(t))(mod)


@dataclass
class PlannedMemory:
    """TVM's memory plan of one function, read from the planned IR.

    Attributes
    ----------
    storage_bytes : list of int
        Size of every ``R.memory.alloc_storage`` (the planned, shared storage), bytes.
    unplanned_bytes : list of int
        Size of every ``R.builtin.alloc_tensor`` left unplanned (function outputs and tensors TVM cannot plan).
    """

    storage_bytes: list = field(default_factory=list)
    unplanned_bytes: list = field(default_factory=list)

    @property
    def planned(self) -> int:
        """Bytes of planned storage (what a binding order changes)."""
        return int(sum(self.storage_bytes))

    @property
    def total(self) -> int:
        """All intermediate and output allocation bytes, planned and unplanned."""
        return int(sum(self.storage_bytes) + sum(self.unplanned_bytes))


def _shape_ints(shape_expr) -> list[int] | None:
    try:
        return [int(v) for v in shape_expr.values]
    except (TypeError, AttributeError):
        return None


def _dtype_bytes(dtype) -> int:
    import tvm

    dt = tvm.DataType(str(dtype))
    return ((dt.bits * dt.lanes) + 7) // 8


def _op_name(op) -> str:
    import tvm

    return op.name if isinstance(op, tvm.ir.Op) else ""


def _function_bindings(fn):
    from tvm import relax

    if not isinstance(fn.body, relax.SeqExpr):
        raise GraphError("the function body is not a sequence of bindings; give a Relax function from an importer")
    for block in fn.body.blocks:
        for b in block.bindings:
            if not isinstance(b, relax.VarBinding):
                raise GraphError(f"binding {b.var.name_hint} is a match_cast; only plain bindings can be planned")
            yield b


def planned_memory_exact(mod, function: str = "main", target=None, lowered: bool = False) -> PlannedMemory:
    """The storage TVM's ``StaticPlanBlockMemory`` plans for ``function``, in exact bytes.

    Parameters
    ----------
    mod : tvm.IRModule
        A Relax module (raw, legalized or fused); ``lowered=True`` when it already went through
        :func:`lower_for_planning`.
    function : str, default "main"
    target : tvm.target.Target or str, optional
        Default llvm (CPU).

    Returns
    -------
    PlannedMemory
        Sizes read from the planned IR: every ``alloc_storage`` and every unplanned ``alloc_tensor``.

    Raises
    ------
    GraphError
        When ``function`` is missing or an allocation has a symbolic size.
    """
    from tvm import relax

    low = mod if lowered else lower_for_planning(mod, target)
    with _target(target):
        planned = relax.transform.StaticPlanBlockMemory()(low)
    names = [gv.name_hint for gv in planned.get_global_vars()]
    if function not in names:
        raise GraphError(f"module has no function {function!r} (functions: {', '.join(sorted(names))})")
    out = PlannedMemory()
    for b in _function_bindings(planned[function]):
        v = b.value
        if not isinstance(v, relax.Call):
            continue
        name = _op_name(v.op)
        if name == "relax.memory.alloc_storage":
            dims = _shape_ints(v.args[0])
            if dims is None:
                raise GraphError(f"storage {b.var.name_hint} has a symbolic size; only static shapes are planned")
            out.storage_bytes.append(int(np.prod(dims, dtype=np.int64)))
        elif name == "relax.builtin.alloc_tensor":
            dims = _shape_ints(v.args[0])
            if dims is None:
                raise GraphError(f"tensor {b.var.name_hint} has a symbolic shape; only static shapes are planned")
            out.unplanned_bytes.append(int(np.prod(dims, dtype=np.int64)) * _dtype_bytes(v.args[1].value))
    return out


@dataclass
class _Site:
    bytes: int
    pool: tuple
    refs: int = 0
    planned: bool = True


class TVMPlanModel:
    """Predicts, for any op order of a graph, the bytes TVM's ``StaticPlanBlockMemory`` plans.

    Built once from the module (lowered as ``tvm.compile`` lowers it); :meth:`plan_bytes` then replays TVM's
    token allocator for an order in pure Python (no TVM call), bit-for-bit the decisions of
    ``TokenAllocator1D`` (see the module docstring).

    Parameters
    ----------
    mod : tvm.IRModule
        The module the graph was imported from, in its given binding order. For graphs whose nodes are
        the kernels the VM runs, import the fused module (``from_relax(fuse_like_tvm(mod))``, ``--fused``);
        ``tvm.compile`` fuses an unfused module itself, so its kernels are not the unfused graph's nodes.
    graph : ComputationGraph
        ``from_relax(mod)``: node ``i`` is the ``i``-th kernel call of ``function``.
    function : str, default "main"
    target : optional
        Default llvm.

    Raises
    ------
    GraphError
        When the lowered function's kernel calls do not match the graph's nodes one to one, or a shape is
        symbolic.

    Attributes
    ----------
    unplanned_bytes : int
        Bytes of allocations TVM does not plan (order-independent; included in :meth:`plan_bytes`).
    """

    def __init__(self, mod, graph, function: str = "main", target=None) -> None:
        from tvm import relax

        low = lower_for_planning(mod, target)
        self.graph = graph
        sites: list[_Site] = []
        tokens: dict = {}  # relax.Var -> nested token structure (int site, list, or None)
        groups: list[list[tuple]] = []
        cur: list[tuple] = []

        def tok(expr):
            if isinstance(expr, relax.Var):
                return tokens.get(expr)
            if isinstance(expr, relax.Tuple):
                return [tok(f) for f in expr.fields]
            if isinstance(expr, relax.TupleGetItem):
                t = tok(expr.tuple_value)
                return t[expr.index] if isinstance(t, list) else None
            return None

        def leaves(t, acc):
            if isinstance(t, int):
                acc.append(t)
            elif isinstance(t, list):
                for x in t:
                    leaves(x, acc)
            return acc

        mod_funcs = {gv.name_hint: low[gv] for gv in low.get_global_vars()}
        import tvm
        from tvm import tirx

        def is_kernel(op) -> bool:
            if isinstance(op, relax.ExternFunc):
                return True
            if isinstance(op, tvm.ir.GlobalVar):
                return isinstance(mod_funcs.get(op.name_hint), tirx.PrimFunc)
            return _op_name(op) == "relax.vm.call_tir_dyn"

        if function not in mod_funcs:
            raise GraphError(f"module has no function {function!r}")
        for b in _function_bindings(low[function]):
            v = b.value
            if isinstance(v, relax.Call):
                name = _op_name(v.op)
                if name == "relax.builtin.alloc_tensor":
                    dims = _shape_ints(v.args[0])
                    if dims is None:
                        raise GraphError(f"tensor {b.var.name_hint} has a symbolic shape; only static shapes "
                                         "can be planned")
                    dtype = str(v.args[1].value)
                    nbytes = int(np.prod(dims, dtype=np.int64)) * _dtype_bytes(dtype)
                    sites.append(_Site(nbytes, (str(v.args[3].value), dtype)))
                    tokens[b.var] = len(sites) - 1
                    cur.append(("alloc", len(sites) - 1))
                    continue
                if name in _INPLACE_OPS:
                    tokens[b.var] = tok(v.args[0])
                    cur.append(("inplace",))
                    groups.append(cur)
                    cur = []
                    continue
                uses = []  # as TVM does, every argument (a call_tir_dyn's tuple of arguments included)
                if is_kernel(v.op):
                    for a in v.args:
                        for s in leaves(tok(a), []):
                            sites[s].refs += 1
                            uses.append(s)
                    cur.append(("call", tuple(uses)))
                else:
                    for a in v.args:
                        for s in leaves(tok(a), []):
                            sites[s].planned = False
                    cur.append(("call", ()))
                tokens[b.var] = None
                groups.append(cur)
                cur = []
            else:
                tokens[b.var] = tok(v)
                # aliases, tuples and tuple items belong to the node just emitted
        fn = low[function]
        for s in leaves(tok(fn.body.body), []):
            sites[s].planned = False
        if cur:  # trailing allocations without a kernel (not expected)
            if groups:
                groups[-1].extend(cur)
            else:
                groups.append(cur)
        if len(groups) != graph.n:
            raise GraphError(f"the lowered {function!r} runs {len(groups)} kernels but the graph has {graph.n} nodes; "
                             "build TVMPlanModel from the (fused) module the graph was imported from")
        self._sites = sites
        self._groups = [[ev if ev[0] != "call" else ("call", tuple(s for s in ev[1] if sites[s].planned))
                         for ev in grp if ev[0] != "alloc" or sites[ev[1]].planned] for grp in groups]
        self.unplanned_bytes = int(sum(s.bytes for s in sites if not s.planned))
        self.n = graph.n
        self.evaluations = 0

    def plan(self, order) -> list[int]:
        """Final sizes of the storage tokens TVM plans for ``order`` (a topological order of the graph), bytes.

        Parameters
        ----------
        order : sequence of int, shape (n,)

        Returns
        -------
        list of int
            One entry per ``alloc_storage``, in allocation order.
        """
        sites = self._sites
        pools: dict = {}
        storage: list[int] = []  # bytes per storage token
        ref: list[int] = []
        site_storage: dict = {}
        seq = 0
        for v in order:
            for ev in self._groups[v]:
                kind = ev[0]
                if kind == "alloc":
                    s = sites[ev[1]]
                    size = s.bytes
                    pool = pools.setdefault(s.pool, [])
                    st = -1
                    if s.refs > 0 and pool:
                        mid = bisect.bisect_left(pool, (size, -1, -1))
                        end = bisect.bisect_right(pool, (size * MATCH_RANGE, float("inf"), 0))
                        if mid < end:
                            st = pool.pop(mid)[2]
                        else:
                            begin = bisect.bisect_left(pool, (size // MATCH_RANGE, -1, -1))
                            if mid > begin:
                                st = pool.pop(mid - 1)[2]
                                storage[st] = size
                    if st < 0:
                        st = len(storage)
                        storage.append(size)
                        ref.append(0)
                    ref[st] = s.refs
                    site_storage[ev[1]] = st
                elif kind == "call":
                    for si in ev[1]:
                        st = site_storage[si]
                        ref[st] -= 1
                        if ref[st] == 0:
                            seq += 1
                            bisect.insort(pools[sites[si].pool], (storage[st], seq, st))
        return storage

    def plan_bytes(self, order) -> int:
        """Bytes TVM allocates for ``order``: planned storage plus the (order-independent) unplanned tensors."""
        self.evaluations += 1
        return int(sum(self.plan(order))) + self.unplanned_bytes

    def lower_bound_bytes(self) -> int:
        """A lower bound on :meth:`plan_bytes` over every order: the unplanned bytes plus, for the kernel call
        that uses the most planned bytes, the bytes of the distinct planned tensors it reads and writes.

        Why it holds: while a kernel runs, every tensor it uses has a reference count above zero, so each sits in
        its own storage token, of at least its size (a token is reused only when it is at least as large, or is
        enlarged to the size asked for), and tokens never shrink; the plan is the sum of the final token sizes.
        Evaluates nothing.

        Returns
        -------
        int
            Bytes.
        """
        best = 0
        for grp in self._groups:
            for ev in grp:
                if ev[0] == "call":
                    best = max(best, sum(self._sites[s].bytes for s in set(ev[1])))
        return int(best) + self.unplanned_bytes

    def given_order_bytes(self) -> int:
        """:meth:`plan_bytes` of the module's own binding order."""
        return self.plan_bytes(range(self.n))
