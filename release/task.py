"""Tasks: one tensor program (TE compute, TIR PrimFunc or IRModule) plus a target.

A :class:`Task` is what a tuner tunes, the analogue of AutoTVM's ``autotvm.task.Task``: it owns
the program, the target, its FLOP count (TVM's ``estimate_tir_flops``), a stable key for
records, the knob space (built lazily from MetaSchedule's design space) and, for registered
workloads, a NumPy/PyTorch reference used to check tuned kernels.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any, Callable

import numpy as np

from .errors import ReleaseError, WorkloadError
from .target import (canonical_target_json, ensure_tensor_intrinsics, host_machine, isa_class, resolve_target,
                     same_machine, target_to_json)

logger = logging.getLogger(__name__)


def _normalize_mod(func_or_mod):
    """PrimFunc / IRModule / list of TE tensors -> IRModule with one ``main`` PrimFunc."""
    import tvm
    from tvm import te, tirx

    if isinstance(func_or_mod, (list, tuple)):
        if not func_or_mod or not all(isinstance(t, te.Tensor) for t in func_or_mod):
            raise WorkloadError("a TE workload must be a non-empty list of te.Tensor [inputs..., output]")
        func_or_mod = te.create_prim_func(list(func_or_mod))
    if isinstance(func_or_mod, tirx.PrimFunc):
        return tvm.IRModule({"main": func_or_mod.with_attr("global_symbol", "main")})
    if isinstance(func_or_mod, tvm.IRModule):
        funcs = [gv for gv, f in func_or_mod.functions.items() if isinstance(f, tirx.PrimFunc)]
        if len(funcs) != 1 or len(func_or_mod.functions) != 1:
            raise WorkloadError(
                f"an IRModule task must hold exactly one PrimFunc, got {len(func_or_mod.functions)} functions; "
                "extract operator tasks from a Relax model with release.relax instead"
            )
        gv = funcs[0]
        if gv.name_hint != "main":
            return tvm.IRModule({"main": func_or_mod[gv].with_attr("global_symbol", "main")})
        return func_or_mod
    raise WorkloadError(
        f"cannot make a task from {type(func_or_mod).__name__}: give a TE tensor list, a PrimFunc or an IRModule"
    )


class Task:
    """A tuning task.

    Parameters
    ----------
    func : list[te.Tensor] | tvm.tirx.PrimFunc | tvm.IRModule
        The program. TE tensors are ``[inputs..., output]`` as for ``te.create_prim_func``.
    target : str | dict | tvm.target.Target
        See :func:`release.target.resolve_target` (``"llvm"`` = this CPU with ``mcpu`` set).
    name : str, optional
        Human name used in logs and progress (default ``"task-<hash>"``).
    reference : callable, optional
        ``reference(inputs: list[np.ndarray]) -> np.ndarray`` giving the expected output; the
        default is TVM's own untuned build of the same program.
    weight : int
        How many times the task runs in its model (1 for a single operator).
    layout_free : sequence of int, optional
        Indices of the inputs that are constants (weights) whose layout the tuner may rewrite:
        they become the PrimFunc's ``layout_free_buffers`` attribute, so MetaSchedule's
        ``RewriteLayout`` postprocessor pre-packs them into the order the schedule reads
        (TVM's CPU recipe, ``relax.pipeline.static_shape_tuning_pipeline(cpu_weight_prepack=True)``).
        Measurement times the kernel on the packed weight; the compiled kernel (``compile_tir``)
        packs inside, so it takes the original weights (deploy: ``relax.transform.SplitLayoutRewritePreproc``
        moves the packing out, run once). Default None: the program's own attribute, if any.

    Attributes
    ----------
    mod : tvm.IRModule
        One PrimFunc named ``main``.
    target : tvm.target.Target
    flop : float
        Floating-point operations of one run (TVM's ``estimate_tir_flops``); for a function whose
        loops were padded (:mod:`release.relax.pad`), the count before padding (its
        ``release.flop`` attribute), so GFLOPS count useful work only.
    key : str
        ``<name>/<16 hex digits>``: stable over processes and machines; the hash covers the program
        and the target's ISA class (:func:`release.target.isa_class`), not the exact CPU, so records
        of any machine of the class match (:meth:`owns`).
    isa_class : str
        :func:`release.target.isa_class` of the target (``"llvm x86_64 avx512"``).
    machine : str
        CPU model name of this host when the target is this host's CPU, else "" (:func:`release.target.host_machine`).
    structural_hash : str
        TVM's structural hash of :attr:`mod`.
    layout_free : tuple of int
        The layout-free inputs (empty: every layout as written).

    Raises
    ------
    WorkloadError, TargetError
        On a program or target that cannot be used, ``layout_free`` naming no input, or an
        argument with a symbolic dimension (``te.var``): the knob space is built for static shapes
        (MetaSchedule's tile sizes factor each extent), so every config would be invalid.
    """

    def __init__(self, func: Any, target: Any = "llvm", name: str | None = None,
                 reference: Callable | None = None, weight: int = 1, layout_free=None):
        import tvm_ffi
        from tvm.s_tir.analysis import estimate_tir_flops

        self.mod = _normalize_mod(func)
        _refuse_symbolic_shapes(self.mod, name)
        if layout_free is not None:
            self.mod = _with_layout_free(self.mod, layout_free)
        attrs = self.mod["main"].attrs
        self.layout_free = tuple(int(i) for i in (attrs["layout_free_buffers"] if attrs is not None
                                                  and "layout_free_buffers" in attrs else ()))
        self.target = resolve_target(target)
        self.target_json = target_to_json(self.target)
        self.isa_class = isa_class(self.target_json)
        self.machine = host_machine(self.target_json)
        ensure_tensor_intrinsics(self.target)  # an entry point: knob space, features, MetaSchedule need them
        self.structural_hash = str(tvm_ffi.structural_hash(self.mod))
        digest = workload_digest_of(self.structural_hash, self.isa_class)
        self._legacy: dict[str, str] = {}  # record target text -> the digest an older release gave this program there
        self.name = name or f"task-{digest[:8]}"
        self.key = f"{self.name}/{digest}"
        unpadded = attrs["release.flop"] if attrs is not None and "release.flop" in attrs else None
        self.flop = float(unpadded.value if unpadded is not None else estimate_tir_flops(self.mod))
        self.weight = int(weight)
        self._reference = reference
        self._space = None

    def __repr__(self) -> str:
        return f"Task({self.name!r}, target={self.target_json}, gflop={self.flop / 1e9:.4f})"

    # ------------------------------------------------------------------ which records are this task's
    def owns(self, record) -> bool:
        """Whether ``record`` measured this task's program on a target of this task's ISA class.

        A record's ``task`` key is ``<name>/<digest>`` with the digest over the program and the
        target's ISA class (:func:`release.target.isa_class`), so records of the same program from
        any machine of the class match. Records written by releases that hashed the whole target
        (``mcpu`` and ``num-cores`` included) are migrated on read: their digest is recomputed from
        this task's program and the record's own target, and on a match the record's ``task`` is
        rewritten to :attr:`key` (so later lookups by key find it).

        Parameters
        ----------
        record : release.measure.Record

        Returns
        -------
        bool
        """
        key = record.task
        if key == self.key:
            return True
        digest = key.rsplit("/", 1)[-1]
        if digest == self.key.rsplit("/", 1)[-1]:
            return True
        legacy = self.legacy_digest(record.target)
        if digest != legacy or isa_class(record.target) != self.isa_class:
            return False
        record.task = self.key  # migration on read: the record now carries this release's key
        return True

    def legacy_digest(self, target: str | None = None) -> str:
        """The digest releases before ISA-class keys gave this program on ``target``:
        ``sha1(structural hash | canonical target JSON)[:16]``, the whole target (``mcpu`` and
        ``num-cores`` included). ``target``: a record's target JSON text; default this task's own
        (what an older release running here wrote: logs, agent checkpoints)."""
        target = self.target_json if target is None else target
        legacy = self._legacy.get(target)
        if legacy is None:
            try:
                canon = canonical_target_json(json.loads(target))
            except (ValueError, TypeError, AttributeError):
                canon = target
            legacy = self._legacy[target] = hashlib.sha1(f"{self.structural_hash}|{canon}".encode()).hexdigest()[:16]
        return legacy

    def tier(self, record) -> str:
        """``"machine"`` when ``record`` was measured on this task's machine (same ``mcpu``,
        ``num-cores`` and, where both are known, CPU model name: :func:`release.target.same_machine`),
        ``"isa"`` when on another machine of the same ISA class, ``"other"`` otherwise.
        Only ``"machine"`` records are trials and costs of this machine; ``"isa"`` records are
        seeds (measured here first), never costs."""
        if not record.target or record.target == self.target_json:
            return "machine" if not (record.machine and self.machine and record.machine != self.machine) else "isa"
        if isa_class(record.target) != self.isa_class:
            return "other"
        return "machine" if same_machine(record.target, record.machine, self.target_json, self.machine) else "isa"

    @property
    def config_space(self):
        """The :class:`release.space.KnobSpace` of this task (built on first use, ~0.1-2 s)."""
        if self._space is None:
            from .space import KnobSpace

            self._space = KnobSpace(self)
        return self._space

    # AutoTVM spelling
    space = config_space

    def arg_info(self) -> list[tuple[list[int], str]]:
        """``(shape, dtype)`` of every argument of ``main``, the output last (MetaSchedule ArgInfo)."""
        from tvm.s_tir.meta_schedule.arg_info import ArgInfo

        return [([int(s) for s in a.shape], str(a.dtype)) for a in ArgInfo.from_entry_func(self.mod)]

    def random_inputs(self, seed: int = 0) -> list[np.ndarray]:
        """Random inputs (uniform in [-1, 1)) for every argument but the last (the output)."""
        rng = np.random.default_rng(seed)
        return [rng.uniform(-1, 1, size=shape).astype(dtype) for shape, dtype in self.arg_info()[:-1]]

    def output_shape(self) -> tuple[list[int], str]:
        """Shape and dtype of the output (last) argument."""
        return self.arg_info()[-1]

    def reference(self, inputs: list[np.ndarray]) -> np.ndarray:
        """Expected output for ``inputs``: the task's reference, else TVM's untuned build."""
        if self._reference is not None:
            return self._reference(inputs)
        import tvm

        lib = tvm.compile(self.mod, target=resolve_target("llvm"))
        return run_module(lib, inputs, self.output_shape(), tvm.cpu(0))

    def check(self, lib, rtol: float = 1e-3, atol: float = 1e-3, seed: int = 0) -> float:
        """Run a built kernel on random inputs against :meth:`reference` (CPU targets only).

        Returns
        -------
        float
            The largest absolute error.

        Raises
        ------
        ReleaseError
            If outputs differ beyond ``rtol``/``atol`` (``np.testing.assert_allclose`` rules).
        """
        import tvm

        from .threads import thread_count, use_threads

        use_threads(thread_count(self.target))  # the target's num-cores, as the runner times it
        inputs = self.random_inputs(seed)
        got = run_module(lib, inputs, self.output_shape(), tvm.cpu(0))
        want = self.reference(inputs)
        err = float(np.max(np.abs(got - want))) if got.size else 0.0
        if not np.allclose(got, want, rtol=rtol, atol=atol):
            raise ReleaseError(f"tuned kernel of {self.name} is wrong: max abs error {err:.3g} "
                               f"(rtol {rtol}, atol {atol})")
        return err


def workload_digest_of(structural_hash: str, isa: str) -> str:
    """The 16-hex workload digest of a program (its TVM structural hash) on an ISA class: the part
    of :attr:`Task.key` after the ``/`` (also MetaSchedule database records' workload digest)."""
    return hashlib.sha1(f"{structural_hash}|{isa}".encode()).hexdigest()[:16]


def _refuse_symbolic_shapes(mod, name) -> None:
    """Raise :class:`WorkloadError` naming the first argument of ``main`` whose shape is not all integers."""
    from tvm.tirx import IntImm

    for param in mod["main"].params:
        shape = getattr(param.ty, "shape", None)  # a BufferType for buffer arguments (TVM 0.27)
        if shape is None:
            continue
        dims = [d for d in shape if not isinstance(d, IntImm)]
        if dims:
            raise WorkloadError(
                f"argument {param.name} of {name or 'the program'} has symbolic shape {[str(d) for d in shape]} "
                f"(dimension {dims[0]} is not a number): tuning needs static shapes; bind the variable to the size "
                "you will run (e.g. te.placeholder((32, 64)) instead of (te.var('n'), 64)) and tune one task per size")


def run_module(lib, inputs: list[np.ndarray], out_shape: tuple[list[int], str], dev) -> np.ndarray:
    """Run ``lib['main']`` (or the module itself) on ``inputs`` and return the output array."""
    import tvm

    shape, dtype = out_shape
    args = [tvm.runtime.tensor(x, dev) for x in inputs]
    out = tvm.runtime.tensor(np.zeros(shape, dtype=dtype), dev)
    lib["main"](*args, out)
    return out.numpy()


def _with_layout_free(mod, layout_free):
    """``mod`` with ``layout_free_buffers`` set on ``main`` (checked against its parameters)."""
    import tvm

    func = mod["main"]
    n_in = len(func.params) - 1  # the last parameter is the output
    try:
        idx = sorted({int(i) for i in layout_free})
    except (TypeError, ValueError):
        raise WorkloadError(f"layout_free={layout_free!r} must be input indices (integers)") from None
    bad = [i for i in idx if not 0 <= i < n_in]
    if bad:
        raise WorkloadError(f"layout_free indices {bad} name no input: the program has {n_in} inputs "
                            f"(indices 0-{n_in - 1}; the output cannot be layout-free)")
    func = func.with_attr("layout_free_buffers", idx) if idx else func.without_attr("layout_free_buffers")
    return tvm.IRModule({"main": func})


def vector_lanes(target) -> int:
    """float32 lanes of the target's widest vector unit: 16 with AVX-512, 8 with AVX/AVX2, 4
    otherwise (SSE, NEON); for a non-CPU target 16."""
    from tvm.target.codegen import target_has_features

    target = resolve_target(target)
    if target.kind.name != "llvm":
        return 16
    for feature, lanes in (("avx512f", 16), ("avx", 8)):
        try:
            if target_has_features(feature, target):
                return lanes
        except Exception:  # noqa: BLE001 - a non-x86 target has no such feature
            break
    return 4


def create_task(workload: Any, target: Any = "llvm", layout: str | None = None,
                prepack: bool | None = None, layout_free=None) -> Task:
    """Make a :class:`Task` from a registered workload name or from a program.

    Parameters
    ----------
    workload : str | list[te.Tensor] | PrimFunc | IRModule
        A name from :mod:`release.workloads` (``resnet18.conv2d.2``) or a program.
    target : str | dict | Target
        See :func:`release.target.resolve_target`.
    layout : str, optional
        Registered conv2d workloads: ``"NCHW"`` (default), ``"NCHWc"`` (channel blocks sized to the
        target's vector: 16 with AVX-512, 8 with AVX2; :func:`release.workloads.block_sizes`) or an
        explicit ``"NCHW16c"``. The task's name gets ``-NCHW16c`` appended; its reference takes
        and returns the blocked layout. A 3x3 stride-1 conv2d also takes ``"NCHWc-winograd4"`` (or
        ``-winograd2``): Winograd F(m x m, 3 x 3) on a transformed weight
        (:func:`release.workloads.conv2d_nchwc_winograd_te`).
    prepack : bool, optional
        Registered workloads: mark the weight (conv2d kernel, dense weight) layout-free so the
        tuner pre-packs it (see :class:`Task`). Default None = on for CPU (llvm) targets and
        conv2d/dense workloads, off otherwise. Programs: use ``layout_free``.
    layout_free : sequence of int, optional
        Programs only: indices of the layout-free (constant) inputs; see :class:`Task`.

    Raises
    ------
    WorkloadError
        Unknown workload name, a layout for a non-conv2d workload, channel blocks that do not
        divide the channels, ``layout_free`` naming no input or given with a workload name.
    TargetError
        Bad target.
    """
    if isinstance(workload, str):
        from .workloads import block_sizes, get_workload, split_winograd

        if layout_free is not None:
            raise WorkloadError("layout_free applies to programs; for a registered workload use prepack=True/False")
        w = get_workload(workload)
        tgt = resolve_target(target)
        layout, tile = split_winograd(layout or "NCHW")
        if layout == "NCHWc":
            if w.op not in ("conv2d", "depthwise_conv2d"):
                raise WorkloadError(f"layout 'NCHWc' applies to conv2d workloads, not {w.op} ({w.name})")
            cb, kb = block_sizes(w.params["c"], w.params["k"], vector_lanes(tgt))
            layout = f"NCHW{cb}c" if cb == kb else f"NCHW{cb}c{kb}k"
        layout = layout if tile is None else f"{layout}-winograd{tile}"
        if prepack is None:
            prepack = tgt.kind.name == "llvm" and w.op in ("conv2d", "depthwise_conv2d", "dense")
        name = w.name if layout == "NCHW" else f"{w.name}-{layout}"
        ref = w.reference if layout == "NCHW" else (lambda xs, w=w, layout=layout: w.reference(xs, layout))
        return Task(w.build_te(layout), tgt, name=name, reference=ref, layout_free=[1] if prepack else [])
    if layout is not None or prepack is not None:
        raise WorkloadError("layout and prepack apply to registered workload names; for a program give "
                            "layout_free=[input indices] and build the layout into the program")
    return Task(workload, target, layout_free=layout_free)


def fma_by_register(lib) -> dict[str, int]:
    """Count the vector FMA instructions of a compiled CPU kernel by register width.

    Parameters
    ----------
    lib : tvm.runtime.Executable or Module
        What ``tvm.compile`` returns for an LLVM target.

    Returns
    -------
    dict
        ``{"zmm": n512, "ymm": n256, "xmm": n128}``: ``vfmadd*``/``vfnmadd*`` instructions whose
        destination is a 512-, 256- or 128-bit register (AT&T syntax: the last operand). A kernel
        that uses the target's widest unit has its FMAs on zmm (AVX-512) or ymm (AVX2).
    """
    import re

    mod = getattr(lib, "mod", lib)
    asm = mod.inspect_source("asm")
    counts = {"zmm": 0, "ymm": 0, "xmm": 0}
    for m in re.finditer(r"^\s*v(?:fn?madd|fn?msub)\w*\s+[^\n]*%([xyz]mm)\d+\s*$", asm, re.M):
        counts[m.group(1)] += 1
    return counts
