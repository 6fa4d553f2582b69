"""Tasks: one tensor program (TE compute, TIR PrimFunc or IRModule) plus a target.

A :class:`Task` is what a tuner tunes, the analogue of AutoTVM's ``autotvm.task.Task``: it owns
the program, the target, its FLOP count (TVM's ``estimate_tir_flops``), a stable key for
records, the knob space (built lazily from MetaSchedule's design space) and, for registered
workloads, a NumPy/PyTorch reference used to check tuned kernels.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any, Callable

import numpy as np

from .errors import ReleaseError, WorkloadError
from .target import ensure_tensor_intrinsics, resolve_target, target_to_json

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
                "extract operator tasks from a Relax model with release.model instead"
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

    Attributes
    ----------
    mod : tvm.IRModule
        One PrimFunc named ``main``.
    target : tvm.target.Target
    flop : float
        Floating-point operations of one run (TVM's ``estimate_tir_flops``).
    key : str
        ``<name>/<16 hex digits>``: stable over processes; the hash covers program and target.

    Raises
    ------
    WorkloadError, TargetError
        On a program or target that cannot be used.
    """

    def __init__(self, func: Any, target: Any = "llvm", name: str | None = None,
                 reference: Callable | None = None, weight: int = 1):
        import tvm_ffi
        from tvm.s_tir.analysis import estimate_tir_flops

        self.mod = _normalize_mod(func)
        self.target = resolve_target(target)
        self.target_json = target_to_json(self.target)
        digest = hashlib.sha1(
            f"{tvm_ffi.structural_hash(self.mod)}|{self.target_json}".encode()
        ).hexdigest()[:16]
        self.name = name or f"task-{digest[:8]}"
        self.key = f"{self.name}/{digest}"
        self.flop = float(estimate_tir_flops(self.mod))
        self.weight = int(weight)
        self._reference = reference
        self._space = None

    def __repr__(self) -> str:
        return f"Task({self.name!r}, target={self.target_json}, gflop={self.flop / 1e9:.4f})"

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


def run_module(lib, inputs: list[np.ndarray], out_shape: tuple[list[int], str], dev) -> np.ndarray:
    """Run ``lib['main']`` (or the module itself) on ``inputs`` and return the output array."""
    import tvm

    shape, dtype = out_shape
    args = [tvm.runtime.tensor(x, dev) for x in inputs]
    out = tvm.runtime.tensor(np.zeros(shape, dtype=dtype), dev)
    lib["main"](*args, out)
    return out.numpy()


def create_task(workload: Any, target: Any = "llvm") -> Task:
    """Make a :class:`Task` from a registered workload name or from a program.

    Parameters
    ----------
    workload : str | list[te.Tensor] | PrimFunc | IRModule
        A name from :mod:`release.workloads` (``resnet18.conv2d.2``) or a program.
    target : str | dict | Target
        See :func:`release.target.resolve_target`.

    Raises
    ------
    WorkloadError
        Unknown workload name.
    TargetError
        Bad target.
    """
    if isinstance(workload, str):
        from .workloads import get_workload

        w = get_workload(workload)
        tgt = resolve_target(target)
        return Task(w.build_te(), tgt, name=w.name, reference=w.reference)
    return Task(workload, target)
