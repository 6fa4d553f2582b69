"""Apply a single-device schedule found on the performance model to a Relax module, and check it with TVM.

:func:`apply_schedule` reorders the bindings of the module's dataflow block to the schedule's op order
(:func:`release.graph.relax_import.reorder_bindings`), compiles and runs both modules with TVM's Relax VM on
the same random inputs to check that the outputs are identical, and compares the memory TVM plans for each
(:func:`planned_memory`: exact bytes of the planned IR after ``tvm.compile``'s CPU passes and
``StaticPlanBlockMemory``, :mod:`release.graph.tvm_plan`).

:func:`apply_order` is ``release regal apply``: it keeps an order only when TVM plans it strictly smaller than
the given order (otherwise the given order is returned and reported as no gain), writes the reordered module
(TVMScript) and the compiled libraries, checks outputs bitwise, and measures the peak memory the compiled VM
adds while running each (:func:`measure_vm_peak`, a fresh process per library).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

import numpy as np

from ..errors import GraphError

logger = logging.getLogger(__name__)


def planned_memory(mod, function: str = "main") -> float:
    """Bytes TVM allocates for ``function`` after ``tvm.compile``'s CPU passes and ``StaticPlanBlockMemory``:
    every planned storage plus every unplanned tensor, read exactly from the planned IR
    (:func:`release.graph.tvm_plan.planned_memory_exact`; this once parsed TVM's text report, which prints GiB at
    four significant digits)."""
    from .tvm_plan import planned_memory_exact

    return float(planned_memory_exact(mod, function).total)


_PEAK_SCRIPT = r"""
import gc, json, resource, sys
import numpy as np
import tvm
from tvm import relax
lib = tvm.runtime.load_module(sys.argv[1])
data = np.load(sys.argv[2])
xs = [tvm.runtime.tensor(data[f"arg{i}"]) for i in range(len(data.files))]
# warm-up in a VM with the naive allocator (frees every storage after use): thread pool and kernel
# workspaces exist before the measurement, so it sees the default (pooled) VM's storage only
relax.VirtualMachine(lib, tvm.cpu(), memory_cfg="naive")["main"](*xs)
vm = relax.VirtualMachine(lib, tvm.cpu())
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
gc.collect()
try:
    open("/proc/self/clear_refs", "w").write("5")  # reset the peak (VmHWM) to the current resident set
    reset = True
except OSError:
    reset = False
before = status("VmRSS")
vm["main"](*xs)
after = status("VmHWM") if reset else status("VmRSS")
print(json.dumps({"before_kib": before, "after_kib": after, "peak_reset": reset}))
"""


def measure_vm_peak(library_path, inputs, timeout: float = 300.0) -> int:
    """Peak memory the compiled VM adds while running ``main`` once, measured in a fresh process, bytes.

    The child loads the library (weights included) and the inputs, runs ``main`` once in a VM with TVM's naive
    allocator (which frees each storage after use) so that the thread pool and kernel workspaces exist, resets
    its peak resident set to the current one (Linux ``/proc/self/clear_refs``), runs ``main`` once and reads the peak (``VmHWM``); the difference is
    what the call allocated and touched (TVM's planned storages and unplanned tensors, kernel workspaces and
    allocator overhead), to a page. Without the reset (other systems) the current resident set after the call
    is used (the VM's pooled allocator keeps its storage).

    Parameters
    ----------
    library_path : str or Path
        A library written by ``tvm.compile(...).export_library``.
    inputs : list of ndarray
        Arguments of ``main``.

    Raises
    ------
    GraphError
        When the child process fails.
    """
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        npz = Path(d) / "inputs.npz"
        np.savez(npz, **{f"arg{i}": x for i, x in enumerate(inputs)})
        import os

        # a fixed mmap threshold: every large block is mapped on allocation and unmapped when freed (glibc would
        # otherwise raise the threshold after the warm-up frees and serve the measured run from retained heap)
        env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0")
        r = subprocess.run([sys.executable, "-c", _PEAK_SCRIPT, str(library_path), str(npz)], capture_output=True,
                           text=True, timeout=timeout, env=env)
    if r.returncode != 0:
        raise GraphError(f"running {library_path} in a child process failed: "
                         f"{(r.stderr.strip().splitlines() or ['?'])[-1][:300]}")
    import json

    d = json.loads(r.stdout.strip().splitlines()[-1])
    return int(d["after_kib"] - d["before_kib"]) * 1024


def random_inputs(mod, function: str = "main", seed: int = 0) -> list[np.ndarray]:
    """Random inputs (standard normal floats, small integers) matching ``function``'s static parameter shapes.

    Raises
    ------
    GraphError
        For a parameter without a static tensor shape.
    """
    rng = np.random.default_rng(seed)
    out = []
    for p in mod[function].params:
        ty = p.ty
        shape = getattr(ty, "shape", None)
        try:
            dims = [int(d) for d in shape.values]
        except Exception:
            raise GraphError(f"parameter {p.name} has no static tensor shape; give inputs explicitly") from None
        dtype = str(ty.dtype)
        if dtype.startswith("float"):
            out.append(rng.standard_normal(dims).astype(dtype))
        else:
            out.append(rng.integers(0, 4, size=dims).astype(dtype))
    return out


def compile_module(mod):
    """``tvm.compile`` for the CPU (llvm): the executable whose VM :func:`run_module` runs."""
    import tvm

    return tvm.compile(mod, target=tvm.target.Target({"kind": "llvm"}))


def run_module(mod, inputs, function: str = "main", executable=None) -> list[np.ndarray]:
    """Compile ``mod`` for the CPU (llvm) (or use ``executable``) and run ``function`` on ``inputs``; outputs as a
    flat list of arrays."""
    import tvm
    from tvm import relax

    ex = executable if executable is not None else compile_module(mod)
    vm = relax.VirtualMachine(ex, tvm.cpu())
    res = vm[function](*[tvm.runtime.tensor(x) for x in inputs])
    flat = []

    def walk(r):
        if hasattr(r, "numpy"):
            flat.append(r.numpy())
        else:
            for x in r:
                walk(x)

    walk(res)
    return flat


@dataclass
class ScheduleReport:
    """Outcome of :func:`apply_schedule`.

    Attributes
    ----------
    module : tvm.IRModule
        The reordered module.
    planned_before, planned_after : float
        TVM's planned memory (bytes) for the given and the reordered module.
    model_peak_before, model_peak_after : float
        The performance model's peak live bytes of the given order and of ``order``.
    outputs_identical : bool or None
        Whether every output is bitwise identical (None when not checked).
    max_abs_diff : float or None
        Largest absolute output difference (None when not checked).
    """

    module: object
    planned_before: float
    planned_after: float
    model_peak_before: float
    model_peak_after: float
    outputs_identical: bool | None = None
    max_abs_diff: float | None = None


def apply_schedule(mod, graph, order, check: bool = True, inputs=None, seed: int = 0,
                   function: str = "main") -> ScheduleReport:
    """Reorder ``mod``'s bindings to ``order`` and report outputs and TVM's memory plan before and after.

    Parameters
    ----------
    mod : tvm.IRModule
        The module ``graph`` was imported from (:func:`release.graph.relax_import.from_relax`).
    graph : ComputationGraph
    order : array_like of int, shape (n,)
        A topological order of ``graph`` (e.g. ``Solution.order`` from one device).
    check : bool, default True
        Compile and run both modules on the same inputs and compare outputs.
    inputs : list of ndarray, optional
        Inputs for the check (default :func:`random_inputs` with ``seed``).

    Raises
    ------
    GraphError
        When ``order`` is not a topological order of ``graph`` or the graph does not match ``mod``.
    """
    from .perf_model import PerformanceModel
    from .relax_import import reorder_bindings

    new = reorder_bindings(mod, graph, order, function)
    pm = PerformanceModel(graph, 1, "peak-memory")
    before = pm.decode(pm.given_order_chromosome()).peak_memory
    after = pm.decode(pm.chromosome(order)).peak_memory
    rep = ScheduleReport(new, planned_memory(mod, function), planned_memory(new, function), before, after)
    if check:
        xs = inputs if inputs is not None else random_inputs(mod, function, seed)
        a = run_module(mod, xs, function)
        b = run_module(new, xs, function)
        if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b)):
            rep.outputs_identical = False
            rep.max_abs_diff = float("inf")
        else:
            rep.outputs_identical = all(np.array_equal(x, y) for x, y in zip(a, b))
            rep.max_abs_diff = max((float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64))))
                                    for x, y in zip(a, b) if x.size), default=0.0)
        logger.info("apply_schedule: outputs identical %s (max diff %.3g)", rep.outputs_identical, rep.max_abs_diff)
    return rep


@dataclass
class ApplyReport:
    """Outcome of :func:`apply_order` (bytes; JSON-ready through :meth:`to_dict`).

    Attributes
    ----------
    planned_before, planned_after : int
        Bytes TVM plans for the given order and for the applied order (exact).
    improved : bool
        Whether the applied order is the candidate (TVM plans it strictly smaller); otherwise the given order.
    vm_peak_before, vm_peak_after : int or None
        Peak bytes the compiled VM added while running ``main`` once, measured: the median of
        :attr:`vm_peaks_before` / :attr:`vm_peaks_after` (None when not measured).
    outputs_identical : bool
        Every output bitwise identical on the same random inputs.
    order : list of int
        The applied order.
    files : dict
        Paths written (``module``: TVMScript of the reordered module, ``library``: its compiled library).
    vm_peaks_before, vm_peaks_after : list of int
        Every measured run (one fresh process each), given and applied library alternately; empty when
        not measured.
    """

    planned_before: int
    planned_after: int
    improved: bool
    vm_peak_before: int | None
    vm_peak_after: int | None
    outputs_identical: bool
    max_abs_diff: float
    order: list
    files: dict
    vm_peaks_before: list = field(default_factory=list)
    vm_peaks_after: list = field(default_factory=list)

    def to_dict(self) -> dict:
        """Plain dict for JSON."""
        from dataclasses import asdict

        return asdict(self)

    def vm_peak_change(self) -> str:
        """The measured peaks' change in words (:func:`measured_change`); "" when not measured."""
        return measured_change(self.vm_peaks_before, self.vm_peaks_after) if self.vm_peaks_before else ""


def measured_change(before, after) -> str:
    """How a repeatedly measured quantity changed, said only as far as the runs' spread allows.

    Parameters
    ----------
    before, after : sequence of float
        The runs of each (at least one each).

    Returns
    -------
    str
        ``"12.3% lower"`` or ``"12.3% higher"`` (medians) when every run of one is below every run of
        the other; ``"no measurable change (inside the runs' spread)"`` when their ranges overlap;
        with a single run of either, the change followed by ``"(one run: spread unknown)"``.
    """
    b, a = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    mb, ma = float(np.median(b)), float(np.median(a))
    pct = 100.0 * abs(ma - mb) / mb if mb else 0.0
    word = "lower" if ma < mb else "higher"
    if ma == mb:
        change = "no change"
    else:
        change = f"{pct:.1f}% {word}"
    if len(b) < 2 or len(a) < 2:
        return f"{change} (one run: spread unknown)"
    if a.max() < b.min() or a.min() > b.max():
        return change
    return "no measurable change (inside the runs' spread)"


def apply_order(mod, graph, order, out_dir, measure: bool = True, seed: int = 0, runs: int = 3) -> ApplyReport:
    """Hand ``order`` to TVM: keep it only if TVM plans it smaller, write the module and library, check outputs.

    Parameters
    ----------
    mod : tvm.IRModule
        The (fused) module ``graph`` was imported from.
    graph : ComputationGraph
    order : array_like of int, shape (n,)
        Candidate topological order.
    out_dir : str or Path
        Gets ``reordered.py`` (TVMScript) and ``reordered.so`` (compiled library; weights are embedded, so it can
        be large: 0.9 GB for the BERT-base layer at batch 8).
    measure : bool, default True
        Measure each library's VM peak in a child process (:func:`measure_vm_peak`).
    runs : int, default 3
        Measurements of each library's VM peak, given and applied alternately (a resident set moves
        by tens of KiB from run to run: the report says a change only when it is outside that spread,
        :func:`measured_change`).

    Returns
    -------
    ApplyReport
        Never an order TVM plans larger than (or equal to) the given one as an improvement.

    Raises
    ------
    GraphError
        When ``order`` is not a topological order of ``graph``.
    """
    from pathlib import Path

    from .relax_import import reorder_bindings
    from .tvm_plan import planned_memory_exact

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cand = reorder_bindings(mod, graph, order)
    before = planned_memory_exact(mod).total
    after = planned_memory_exact(cand).total
    improved = after < before
    if not improved:
        logger.info("apply_order: TVM plans the candidate at %d bytes, the given order at %d: keeping the given order",
                    after, before)
        cand, after, order = reorder_bindings(mod, graph, range(graph.n)), before, list(range(graph.n))
    xs = random_inputs(mod, seed=seed)
    ex_given, ex_new = compile_module(mod), compile_module(cand)
    a = run_module(mod, xs, executable=ex_given)
    b = run_module(cand, xs, executable=ex_new)
    same = len(a) == len(b) and all(x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a, b))
    diff = max((float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64)))) for x, y in zip(a, b)
                if x.shape == y.shape and x.size), default=0.0) if len(a) == len(b) else float("inf")
    files = {"module": str(out / "reordered.py"), "library": str(out / "reordered.so")}
    Path(files["module"]).write_text(cand.script())
    ex_new.export_library(files["library"])
    peaks_b: list = []
    peaks_a: list = []
    if measure:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:  # the given module's library is only measured, not kept
            given_lib = str(Path(tmp) / "given.so")
            ex_given.export_library(given_lib)
            for _ in range(max(1, int(runs))):
                peaks_b.append(measure_vm_peak(given_lib, xs))
                peaks_a.append(measure_vm_peak(files["library"], xs))
    peak_b = int(np.median(peaks_b)) if peaks_b else None
    peak_a = int(np.median(peaks_a)) if peaks_a else None
    return ApplyReport(int(before), int(after), bool(improved), peak_b, peak_a, bool(same), diff,
                       [int(v) for v in order], files, peaks_b, peaks_a)


@dataclass
class MemoryOrderReport:
    """What :func:`reorder_for_memory` did (bytes, seconds; JSON-ready through ``dataclasses.asdict``).

    Attributes
    ----------
    method : str
        ``"brkga"`` or ``"regal"`` (BRKGA biased by REGAL's policy trained on TVM's plan).
    planned_before, planned_after : int
        Bytes TVM plans for the module's own order and for the order kept (exact:
        :func:`release.graph.tvm_plan.planned_memory_exact`); equal when no order plans smaller.
    improved : bool
        Whether the module was reordered (TVM plans the found order strictly smaller).
    nodes, evaluations : int
        Operator calls of ``main`` and objective evaluations of the search.
    seconds : float
        Wall time of the import, the search and the check.
    order : list[int]
        The kernel order kept, as indices of ``main``'s operator calls in their given order
        (``range(nodes)`` when the given order is kept); :func:`apply_order` takes it.
    """

    method: str
    planned_before: int
    planned_after: int
    improved: bool
    nodes: int
    evaluations: int
    seconds: float
    order: list = field(default_factory=list, repr=False)

    def line(self) -> str:
        """One sentence for a command's output."""
        if not self.improved:
            return (f"TVM plans {self.planned_before:,} bytes in the given order; {self.method} found no order "
                    f"planned smaller ({self.nodes} kernels, {self.evaluations} evaluations, {self.seconds:.1f} s): "
                    "the given order is kept")
        pct = 100.0 * (self.planned_before - self.planned_after) / self.planned_before
        return (f"TVM plans {self.planned_after:,} bytes reordered by {self.method}, {pct:.1f}% lower than "
                f"{self.planned_before:,} in the given order ({self.nodes} kernels, {self.evaluations} evaluations, "
                f"{self.seconds:.1f} s)")


def reorder_for_memory(mod, method: str = "brkga", budget: int = 2000, seed: int = 0, function: str = "main"):
    """Reorder ``function``'s kernel calls so that TVM's ``StaticPlanBlockMemory`` plans fewer bytes.

    The module's operator calls become a graph (:func:`release.graph.relax_import.from_relax`), BRKGA
    searches op orders on the replay of TVM's planner (:class:`release.graph.tvm_plan.TVMPlanModel`,
    TVM's plan byte for byte), seeded with the given order and the greedy ones; with ``method="regal"``
    the search is biased by REGAL's policy trained on TVM's plan (the shipped checkpoint). The best order
    is applied only when TVM plans it strictly smaller (REGAL, Paliwal et al. ICLR 2020, Sec. 3; the
    check is ``release regal apply``'s). This is what ``tune-model --memory-order`` runs on the tuned
    model right before lowering (:func:`memory_order_pass`).

    Parameters
    ----------
    mod : tvm.IRModule
        A Relax module after fusion (each call one kernel), e.g. inside a build pipeline before lowering.
    method : str
        ``"brkga"`` (default) or ``"regal"``.
    budget : int
        Objective evaluations (default 2000: about a second for a few hundred kernels).
    seed : int

    Returns
    -------
    (tvm.IRModule, MemoryOrderReport)
        The reordered module (``mod`` itself when no order plans smaller) and the report.

    Raises
    ------
    GraphError
        An unknown ``method`` or a budget below 1.
    """
    import time

    from .baselines import run_method, seed_chromosomes
    from .perf_model import PerformanceModel
    from .relax_import import from_relax, reorder_bindings
    from .tvm_plan import TVMPlanModel, planned_memory_exact

    if method not in ("brkga", "regal"):
        raise GraphError(f"memory order method {method!r}: use brkga or regal")
    if int(budget) < 1:
        raise GraphError(f"memory order budget {budget}: give a positive number of evaluations")
    t0 = time.perf_counter()
    graph = from_relax(mod, name="model", function=function)
    plan = TVMPlanModel(mod, graph)
    before = int(planned_memory_exact(mod, function).total)
    model = PerformanceModel(graph, 1, "peak-memory", memory_plan=plan)
    seeds = seed_chromosomes(model)
    if method == "regal":
        from .brkga import brkga
        from .policy import load_policy, policy_action, policy_share, shipped_checkpoint

        policy, meta = load_policy(shipped_checkpoint("peak-memory", "tvm"))
        params = policy_action(policy, graph, budget=int(budget)).brkga_params(policy.cfg, 1)
        res = brkga(model, int(budget), seed=seed, initial=seeds,
                    policy_fraction=policy_share(policy, meta, int(budget)), **params)
    else:
        res = run_method("brkga", model, int(budget), seed, initial=seeds)
    order = PerformanceModel(graph, 1, "peak-memory").decode(res.best_chromosome).order.tolist()
    out, after = mod, before
    if plan.plan_bytes(order) < plan.given_order_bytes():
        new = reorder_bindings(mod, graph, order, function)
        got = int(planned_memory_exact(new, function).total)
        if got < before:
            out, after = new, got
    kept = [int(v) for v in order] if out is not mod else list(range(graph.n))
    rep = MemoryOrderReport(method, before, after, out is not mod, graph.n, int(res.evaluations),
                            time.perf_counter() - t0, kept)
    logger.info("reorder_for_memory: %s", rep.line())
    return out, rep


def memory_order_pass(method: str = "brkga", budget: int = 2000, reports: list | None = None, seed: int = 0):
    """:func:`reorder_for_memory` as a module function for ``release.relax.compile_model(before_lowering=)``:
    ``IRModule -> IRModule``, each :class:`MemoryOrderReport` appended to ``reports``."""
    def run(mod):
        new, rep = reorder_for_memory(mod, method, budget, seed)
        if reports is not None:
            reports.append(rep)
        return new

    return run
