"""Import computation graphs from Relax IRModules and from PyTorch models (through TVM's Relax frontend).

Each operator call bound in the ``main`` function (any ``relax.*`` op, or a ``call_tir`` in an already
lowered module) becomes a node, in binding order: that order is the *given order*, the one TVM runs.
Tuple construction, tuple indexing and variable aliases are not nodes; they forward their producers.
Function parameters and constants are not nodes (weights live outside the schedule).

* output bytes: product of the static shape times the dtype size, summed over tuple fields;
* compute cost (microseconds), unless measured latencies are given: a roofline over TVM's own estimates,
  ``max(flops / rate, bytes / bandwidth) + overhead``, where ``flops`` is
  :func:`tvm.s_tir.analysis.estimate_tir_flops` of the op's PrimFunc after
  :func:`tvm.relax.transform.LegalizeOps`, ``bytes`` the op's input plus output tensor bytes. Defaults
  (:class:`CostConfig`): 50 GFLOP/s, 20 GB/s, 2 us per op, a 2-core Zen3 CPU order of magnitude
  (reference/tvm-0.27.md: tuned conv2d layers ran at 31-46 GFLOPS here);
* measured latencies (``latencies=``): a dict or JSON file mapping a node name (binding variable, e.g.
  ``"lv3"``) or the name of its legalized PrimFunc (e.g. ``"conv2d"``, ``"add1"``) to microseconds; a
  ``.jsonl`` tuning log of records ``{"name"|"func"|"task": str, "latency_us": float}``,
  ``{..., "run_secs": [s, ...]}`` or this project's tuning log (:mod:`release.measure.records`: ``name``,
  ``task``, ``costs`` in seconds, ``error_kind``); means of the run times, failed records skipped, the best
  record per name wins. With ``fused=True`` imports, MetaSchedule task names equal the fused PrimFunc names.
  Nodes not in the log fall back to the roofline estimate.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import GraphError
from .graph import ComputationGraph

logger = logging.getLogger(__name__)


@dataclass
class CostConfig:
    """The roofline used to turn TVM's FLOP estimate into a compute cost (ours; stated assumptions)."""

    gflops: float = 50.0
    """Assumed compute rate, GFLOP/s (1 GFLOP/s = 1e3 FLOP per microsecond)."""
    bandwidth_gbs: float = 20.0
    """Assumed memory bandwidth, GB/s, for the bytes an op reads and writes."""
    overhead_us: float = 2.0
    """Fixed per-op cost (launch, loop set-up), microseconds."""

    def cost_us(self, flops: float, nbytes: float) -> float:
        """Cost in microseconds of an op with ``flops`` FLOPs touching ``nbytes`` bytes."""
        return max(flops / (self.gflops * 1e3), nbytes / (self.bandwidth_gbs * 1e3)) + self.overhead_us


def _dtype_bytes(dtype) -> float:
    import tvm

    dt = tvm.runtime.DataType(str(dtype))
    return dt.bits * dt.lanes / 8.0


def _type_bytes(ty, where: str) -> float:
    """Bytes of a Relax TensorType / TupleType with static shapes."""
    fields = getattr(ty, "fields", None)
    if fields is not None:
        return float(sum(_type_bytes(f, where) for f in fields))
    shape = getattr(ty, "shape", None)
    if shape is None or not hasattr(shape, "values"):
        if type(ty).__name__ in ("ShapeType", "ObjectType", "PrimType"):
            return 0.0
        raise GraphError(
            f"{where} has no static shape ({ty}); import the model with static input shapes"
        )
    n = 1
    for v in shape.values:
        try:
            n *= int(v)
        except (TypeError, ValueError):
            raise GraphError(f"{where} has a symbolic shape ({ty}); import the model with static input shapes") from None
    return float(n) * _dtype_bytes(ty.dtype)


def _collect_vars(expr, out: list) -> None:
    """Relax Vars referenced by an argument expression (through tuples)."""
    from tvm import relax

    if isinstance(expr, relax.Var):
        out.append(expr)
    elif isinstance(expr, relax.Tuple):
        for f in expr.fields:
            _collect_vars(f, out)


def _is_node(value) -> bool:
    """Whether a binding's value is an operator call (a graph node)."""
    import tvm
    from tvm import relax

    return isinstance(value, relax.Call) and isinstance(value.op, (tvm.ir.Op, tvm.ir.GlobalVar))


def load_latencies(path: str | Path) -> dict[str, float]:
    """Read measured latencies (microseconds) keyed by node or PrimFunc name.

    Accepts a JSON object ``{name: us}`` or a JSON-lines tuning log (see the module docstring).

    Raises
    ------
    GraphError
        When the file is missing or holds no usable record.
    """
    p = Path(path)
    if not p.is_file():
        raise GraphError(f"latency log {str(path)!r} does not exist; give a JSON or JSON-lines file")
    text = p.read_text()
    out: dict[str, float] = {}
    try:
        obj = json.loads(text)
        if isinstance(obj, dict):
            return {str(k): float(v) for k, v in obj.items()}
    except json.JSONDecodeError:
        pass
    except (TypeError, ValueError) as err:
        raise GraphError(f"latency file {str(path)!r}: values must be microseconds ({err})") from None
    for line_no, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            raise GraphError(f"latency log {str(path)!r} line {line_no} is not JSON") from None
        if not isinstance(rec, dict) or rec.get("error_kind"):
            continue  # failed measurement
        names = [rec.get(k) for k in ("name", "func", "task") if rec.get(k)]
        if not names:
            continue
        if "latency_us" in rec:
            lat = float(rec["latency_us"])
        elif rec.get("run_secs"):
            lat = float(np.mean(rec["run_secs"])) * 1e6
        elif rec.get("costs"):  # release.measure.records.Record: costs in seconds
            lat = float(np.mean(rec["costs"])) * 1e6
        else:
            continue
        for name in names:
            out[str(name)] = min(lat, out.get(str(name), np.inf))
    if not out:
        raise GraphError(
            f"latency log {str(path)!r} has no record with a name and 'latency_us' or 'run_secs'"
        )
    return out


def from_relax(
    mod,
    name: str = "relax",
    cost: CostConfig | None = None,
    latencies: dict[str, float] | str | Path | None = None,
    function: str = "main",
) -> ComputationGraph:
    """Build a :class:`ComputationGraph` from a Relax IRModule.

    Parameters
    ----------
    mod : tvm.IRModule
        A Relax module (for example from :func:`tvm.relax.frontend.torch.from_exported_program`), raw or
        legalized.
    name : str
        Graph name.
    cost : CostConfig, optional
        Roofline parameters (default :class:`CostConfig`).
    latencies : dict or path, optional
        Measured latencies in microseconds (see the module docstring); they replace the estimate per node.
    function : str, default "main"

    Returns
    -------
    ComputationGraph
        Node ``i`` = the i-th operator call of ``function``; ``ops`` holds the Relax op names.

    Raises
    ------
    GraphError
        When ``function`` is missing, a tensor shape is symbolic, or the function has no operator call.
    """
    import tvm
    from tvm import relax
    from tvm.s_tir.analysis import estimate_tir_flops

    cost = cost or CostConfig()
    if isinstance(latencies, (str, Path)):
        latencies = load_latencies(latencies)
    latencies = latencies or {}
    names = [gv.name_hint for gv in mod.get_global_vars()]
    if function not in names:
        raise GraphError(f"module has no function {function!r} (functions: {', '.join(sorted(names))})")
    legal = relax.transform.LegalizeOps()(mod)

    def callee_list(fn) -> list:
        """Per binding (in order): the PrimFunc GlobalVar it calls after legalization, or None."""
        out = []
        for block in fn.body.blocks:
            for b in block.bindings:
                v = b.value
                is_tir = isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.Op) and v.op.name == "relax.call_tir"
                out.append(v.args[0] if is_tir else None)
        return out

    legal_callee = callee_list(legal[function])
    n_bindings = sum(len(block.bindings) for block in mod[function].body.blocks)
    if len(legal_callee) != n_bindings:  # LegalizeOps maps bindings one to one; anything else: no FLOPs
        logger.warning("LegalizeOps changed the number of bindings of %s; FLOP estimates skipped", function)
        legal_callee = [None] * n_bindings
    flops_cache: dict[str, float] = {}

    def flops_of(position: int, gv_module) -> tuple[float, str]:
        gv = legal_callee[position]
        if gv is None:
            return 0.0, ""
        key = gv.name_hint
        if key not in flops_cache:
            try:
                flops_cache[key] = float(estimate_tir_flops(tvm.IRModule({"main": gv_module[gv]})))
            except Exception as err:  # TVM raises TVMError for ops it cannot count
                logger.debug("no FLOP estimate for %s: %s", key, err)
                flops_cache[key] = 0.0
        return flops_cache[key], key

    fn = mod[function]
    producers: dict[object, list[int]] = {}
    node_names, node_ops, costs, sizes, edges = [], [], [], [], []
    measured = 0
    position = -1
    taken: set[str] = set()
    for block in fn.body.blocks:
        for b in block.bindings:
            position += 1
            var, val = b.var, b.value
            if _is_node(val):
                i = len(node_names)
                op_name = val.op.name if isinstance(val.op, tvm.ir.Op) else val.op.name_hint
                args = list(val.args)
                if op_name == "relax.call_tir":
                    op_name = f"call_tir:{args[0].name_hint}"
                used: list = []
                for a in args:
                    _collect_vars(a, used)
                in_bytes = 0.0
                seen_p = set()
                for u in used:
                    for p in producers.get(u, []):
                        if p not in seen_p:
                            edges.append((p, i))
                            seen_p.add(p)
                    try:
                        in_bytes += _type_bytes(u.ty, f"input {u.name}")
                    except GraphError:
                        pass
                out_b = _type_bytes(var.ty, f"binding {var.name} ({op_name})")
                fl, func_name = flops_of(position, legal)
                if op_name.startswith("call_tir:"):
                    try:
                        fl = float(estimate_tir_flops(tvm.IRModule({"main": mod[args[0]]})))
                    except Exception:  # pragma: no cover
                        fl = 0.0
                    func_name = args[0].name_hint
                if var.name in latencies:
                    c = float(latencies[var.name])
                    measured += 1
                elif func_name and func_name in latencies:
                    c = float(latencies[func_name])
                    measured += 1
                else:
                    c = cost.cost_us(fl, in_bytes + out_b)
                # binding names need not be unique (FuseOps reuses "lv"): make node names unique
                nm = var.name if var.name not in taken else f"{var.name}#{i}"
                taken.add(nm)
                node_names.append(nm)
                node_ops.append(op_name)
                costs.append(c)
                sizes.append(out_b)
                producers[var] = [i]
            elif isinstance(val, relax.TupleGetItem):
                src = producers.get(val.tuple_value, [])
                producers[var] = list(src)
            elif isinstance(val, relax.Tuple):
                used = []
                _collect_vars(val, used)
                producers[var] = sorted({p for u in used for p in producers.get(u, [])})
            elif isinstance(val, relax.Var):
                producers[var] = list(producers.get(val, []))
    if not node_names:
        raise GraphError(f"function {function!r} has no operator call; nothing to schedule")
    if latencies:
        logger.info("%s: %d of %d node costs from measured latencies", name, measured, len(node_names))
    return ComputationGraph(np.array(costs), np.array(sizes), sorted(set(edges)), [], node_names, node_ops, name)


def fuse_like_tvm(mod, target=None):
    """Apply the graph-level passes ``tvm.compile`` runs on a CPU target before lowering (TVM 0.27's
    ``relax.backend.cpu_generic.pipeline``: library dispatch, then LegalizeOps, AnnotateTIROpPattern,
    FoldConstant, FuseOps, FuseTIR). Each fused ``call_tir`` then becomes one node: what the VM actually runs
    (intermediates inside a fused kernel are not materialized).

    The passes are applied until the number of bindings of ``main`` stops falling (at most 4 rounds): FuseOps is
    not idempotent (a second run can merge, e.g., a ``max_pool2d`` kernel into the ``add`` that reads it), and
    ``tvm.compile`` runs these passes once more on the module it is given, so only a fixed point has as nodes
    exactly the kernels the compiled VM runs (and the kernels :class:`~release.graph.tvm_plan.TVMPlanModel`
    plans)."""
    import tvm
    from tvm.relax.backend.cpu_generic import pipeline as cpu

    t = target or tvm.target.Target({"kind": "llvm"})

    def bindings(m) -> int:
        fn = m["main"] if "main" in [gv.name_hint for gv in m.get_global_vars()] else None
        return -1 if fn is None else sum(len(b.bindings) for b in fn.body.blocks)

    with t:
        seq = tvm.transform.Sequential(cpu.library_dispatch_passes(t) + cpu.legalize_passes(t))
        out = seq(mod)
        for _ in range(3):
            nxt = seq(out)
            if bindings(nxt) >= bindings(out):
                break
            out = nxt
        return out


def bound_module(model):
    """The Relax module of a :class:`release.relax.Model` with its weights bound as constants
    (``BindParams``, as ``compile_relax`` does): what :func:`from_relax` and TVM's memory plan read."""
    from tvm import relax

    mod = model.mod
    if model.params:
        mod = relax.transform.BindParams("main", model.params)(mod)
    return mod


def export_torch(model, example_inputs: tuple, name: str = "torch"):
    """Import a PyTorch model through the project's one PyTorch-to-Relax importer
    (:func:`release.relax.from_pytorch`: ``torch.export`` + TVM's ``from_exported_program``), with the weights
    bound back into the module as constants (``BindParams``), as ``compile_relax`` does.

    Parameters
    ----------
    model : torch.nn.Module
        Put in eval mode before export.
    example_inputs : tuple of torch.Tensor
        Static-shape example inputs.

    Raises
    ------
    ModelError
        When ``torch.export`` or TVM's frontend fails (from :func:`release.relax.from_pytorch`).
    """
    from ..relax import from_pytorch

    return bound_module(from_pytorch(model, example_inputs, name=name))


def from_torch(model, example_inputs: tuple, name: str = "torch", fused: bool = False, **kw) -> ComputationGraph:
    """Import a PyTorch model as a :class:`ComputationGraph` through TVM's Relax frontend
    (:func:`export_torch`, i.e. :func:`release.relax.from_pytorch`).

    With ``fused=True`` the module first goes through :func:`fuse_like_tvm` (one node per fused kernel).
    ``kw`` goes to :func:`from_relax` (``cost``, ``latencies``).
    """
    mod = export_torch(model, example_inputs, name=name)
    if fused:
        mod = fuse_like_tvm(mod)
    return from_relax(mod, name=name, **kw)


def reorder_bindings(mod, graph: ComputationGraph, order, function: str = "main"):
    """Return a copy of ``mod`` whose ``function`` runs its operator calls in ``order``.

    This hands a schedule found on the performance model back to TVM: the binding order of a dataflow block
    is the order TVM's VM executes, and what ``StaticPlanBlockMemory`` plans storage reuse for.

    Parameters
    ----------
    mod : tvm.IRModule
        The module ``graph`` was imported from (node names are its binding variable names).
    graph : ComputationGraph
    order : array_like of int, shape (n,)
        A topological order of ``graph`` (for example ``Solution.order``).
    function : str, default "main"

    Returns
    -------
    tvm.IRModule
        Same functions; the bindings of each block of ``function`` permuted (non-operator bindings such as
        tuple indexing follow as soon as their inputs exist).

    Raises
    ------
    GraphError
        When ``order`` is not a topological order of ``graph`` or ``graph`` was not imported from ``mod``.
    """
    import tvm
    from tvm import relax

    if not graph.is_topological(order):
        raise GraphError("order is not a topological order of the graph; use a decoded Solution.order")
    fn = mod[function]
    rank_of = np.empty(graph.n, dtype=np.int64)
    rank_of[np.asarray(order, dtype=np.int64)] = np.arange(graph.n)
    blocks = []
    node = 0
    for block in fn.body.blocks:
        bindings = list(block.bindings)
        defined_here = {id(b.var): b for b in bindings}
        keyed = []
        others = []
        for b in bindings:
            if _is_node(b.value):
                if node >= graph.n:
                    raise GraphError(f"{function!r} has more operator calls than the graph's {graph.n} nodes; "
                                     "reorder the module the graph was imported from")
                keyed.append((int(rank_of[node]), b))
                node += 1
            else:
                others.append(b)
        nodes = [b for _, b in sorted(keyed, key=lambda t: t[0])]
        emitted: set = set()
        out = []
        defined_vars = {b.var for b in bindings}

        def ready(b):
            return all(v in emitted or v not in defined_vars for v in relax.analysis.free_vars(b.value))

        def flush():
            progress = True
            while progress:
                progress = False
                for b in list(others):
                    if ready(b):
                        out.append(b)
                        emitted.add(b.var)
                        others.remove(b)
                        progress = True

        flush()
        for b in nodes:
            if not ready(b):
                raise GraphError(f"binding {b.var.name} would run before its inputs; was the graph imported "
                                 "from this module?")
            out.append(b)
            emitted.add(b.var)
            flush()
        if others:
            raise GraphError(f"bindings {[b.var.name for b in others]} could not be placed; graph and module differ")
        cls = relax.DataflowBlock if isinstance(block, relax.DataflowBlock) else relax.BindingBlock
        blocks.append(cls(out, block.span))
    if node != graph.n:
        raise GraphError(f"graph has {graph.n} nodes but {function!r} has {node} operator calls; "
                         "reorder the module the graph was imported from")
    new_fn = relax.Function(fn.params, relax.SeqExpr(blocks, fn.body.body, fn.body.span), fn.ret_ty, fn.is_pure,
                            fn.attrs, fn.span)
    new_mod = mod.clone()
    new_mod[function] = new_fn
    return new_mod
