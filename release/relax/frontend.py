"""Model frontend: a PyTorch module or an ONNX file in, a Relax :class:`Model` with detached weights out.

``torch.export`` + ``tvm.relax.frontend.torch.from_exported_program`` (:func:`from_pytorch`), or
``tvm.relax.frontend.onnx.from_onnx`` (:func:`from_onnx`); the weights are detached as ``params`` and
bound back (``BindParams``) by :func:`release.relax.extract.prepare` and
:func:`release.relax.compile.compile_model`. :func:`load_model` also takes a built-in model name
(:mod:`release.zoo`). PyTorch, ONNX and TVM are imported inside the functions, never at import.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..errors import ModelError, error_line


@dataclass
class Model:
    """A Relax model with detached weights.

    Attributes
    ----------
    name : str
    mod : tvm.IRModule
        Relax module; ``main`` takes the inputs then the weights (``attrs["num_input"]``).
    params : dict[str, tvm.runtime.Tensor]
        Weights by parameter name (for ``BindParams`` / ``compile_relax``).
    inputs : list[np.ndarray]
        Example inputs.
    torch_module : torch.nn.Module or None
        The source module (for reference outputs and PyTorch timing).
    """

    name: str
    mod: Any
    params: dict
    inputs: list
    torch_module: Any = None
    onnx_path: str | None = None

    def reference(self) -> list[np.ndarray]:
        """Outputs of the source model on :attr:`inputs`, computed by :attr:`reference_name`: the PyTorch
        module (eager, no grad), else ONNX Runtime on the ONNX file (CPU execution provider; onnx's own
        ``ReferenceEvaluator`` where ONNX Runtime is not installed).

        Raises
        ------
        ModelError
            No PyTorch module and no ONNX file.
        """
        if self.torch_module is not None:
            import torch

            with torch.no_grad():
                out = self.torch_module(*[torch.from_numpy(x) for x in self.inputs])
            outs = out if isinstance(out, (list, tuple)) else [out]
            return [o.detach().numpy() for o in outs]
        if self.onnx_path is not None:
            if _onnxruntime_installed():
                from ..reference import onnx_runner

                run, _ = onnx_runner("onnxruntime", self.onnx_path, self.inputs, threads=1)
                return [np.asarray(o) for o in run()]
            from onnx.reference import ReferenceEvaluator

            import onnx

            sess = ReferenceEvaluator(onnx.load(self.onnx_path))
            names = [i.name for i in sess.proto_.graph.input]
            return list(sess.run(None, dict(zip(names, self.inputs))))
        raise ModelError(f"model {self.name} has no reference implementation")

    @property
    def reference_name(self) -> str:
        """What :meth:`reference` runs: ``"PyTorch"`` (a built-in or PyTorch model), ``"ONNX Runtime"`` (an
        ONNX file), ``"onnx's ReferenceEvaluator"`` (an ONNX file where ONNX Runtime is not installed:
        ``pip install 'release-tvm[bench]'``) or ``"none"``."""
        if self.torch_module is not None:
            return "PyTorch"
        if self.onnx_path is not None:
            return "ONNX Runtime" if _onnxruntime_installed() else "onnx's ReferenceEvaluator"
        return "none"

    def input_specs(self) -> list[tuple[str, tuple, str]]:
        """``(name, shape, dtype)`` of each runtime input of ``main``, in order (the names as TVM's frontend
        gave them: ONNX's ``input.1`` is ``input_1``); what the exported library takes."""
        func = self.mod["main"]
        names = [v.name_hint if hasattr(v, "name_hint") else str(v) for v in func.params[:len(self.inputs)]]
        return [(n, tuple(int(d) for d in x.shape), str(x.dtype)) for n, x in zip(names, self.inputs)]


def _onnxruntime_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("onnxruntime") is not None


def _detach(mod, name: str) -> tuple[Any, dict]:
    from tvm import relax

    mod, params = relax.frontend.detach_params(mod)
    func = mod["main"]
    n_in = int(func.attrs["num_input"]) if func.attrs and "num_input" in func.attrs else 0
    weights = params.get("main", [])
    names = [v.name for v in func.params[n_in:]]
    if len(names) != len(weights):
        raise ModelError(f"model {name}: {len(weights)} weights for {len(names)} weight parameters")
    return mod, dict(zip(names, weights))


def struct_info(expr):
    """A Relax expression's struct info (``.ty`` in TVM 0.27, ``.struct_info`` before), or None."""
    return getattr(expr, "struct_info", None) or getattr(expr, "ty", None)


def bounded_takes(mod):
    """Gathers at constant indices made exact and quiet: ``take(x, const, mode="fast")`` becomes
    ``take(x, const % extent, mode="clip")`` when every index lies in ``[-extent, extent)`` of a static axis.

    TVM's frontends emit every gather as ``relax.op.take(..., mode="fast")``. Two things follow:

    - a negative constant is read out of bounds: PyTorch's ``x[:, -1]`` (the last token, the last time
      step) comes in as ``take(x, -1, axis=1, mode="fast")``, and ``topi.take``'s fast mode does not wrap
      negatives, so the compiled model returns garbage (max abs error 4.4e8 on a 4x8 slice);
    - ``topi.take`` logs "Fast mode segfaults when there are out-of-bounds indices" to stderr each time
      one is lowered (ViT's class-token select, ``x[:, 0]``, printed it once per extraction and compile).

    With the indices wrapped into ``[0, extent)``, ``clip`` computes PyTorch's elements and warns about
    nothing. Gathers by data (embedding lookups) keep ``fast`` and the warning, which then says something
    true; constants outside the axis are left as they are (``torch.export`` refuses them first).

    Parameters
    ----------
    mod : tvm.IRModule
        A Relax module as a frontend returns it.

    Returns
    -------
    tvm.IRModule
        ``mod`` with those calls rewritten (the same object when there is none).
    """
    import numpy as np
    import tvm
    from tvm import relax

    take = tvm.ir.Op.get("relax.take")

    @relax.expr_functor.mutator
    class _Bounded(relax.PyExprMutator):
        def __init__(self, m):
            super().__init__(m)
            self.changed = 0

        def visit_call_(self, call):
            call = super().visit_call_(call)
            if not call.op.same_as(take) or str(call.attrs.mode) != "fast" or call.attrs.axis is None:
                return call
            data, indices = call.args
            shape = getattr(struct_info(data), "shape", None)
            if not isinstance(indices, tvm.ir.expr.Constant) or not isinstance(shape, relax.ShapeExpr):
                return call
            axis = int(call.attrs.axis) % len(shape.values)
            extent = shape.values[axis]
            idx = indices.value.numpy()
            if (not isinstance(extent, tvm.tirx.IntImm) or not np.issubdtype(idx.dtype, np.integer) or idx.size == 0
                    or idx.min() < -int(extent) or idx.max() >= int(extent)):
                return call
            self.changed += 1
            if idx.min() < 0:
                indices = relax.const(np.mod(idx, int(extent)).astype(idx.dtype), str(idx.dtype))
            return relax.op.take(data, indices, axis, mode="clip")

    out = mod
    for gv, func in list(mod.functions.items()):
        if not isinstance(func, relax.Function):
            continue
        m = _Bounded(mod)
        new = m.visit_expr(func)
        if m.changed:
            if out is mod:
                out = tvm.IRModule(dict(mod.functions), attrs=mod.attrs)
            out[gv] = new
    return out


def from_pytorch(module, example_inputs: Sequence, name: str = "model") -> Model:
    """Import a PyTorch ``nn.Module`` through ``torch.export`` and TVM's Relax frontend.

    Raises
    ------
    ModelError
        ``torch.export`` fails, or TVM's frontend has no converter for an operator (named).
    """
    from ..stderr_capture import quiet

    with quiet("import"):  # inside `release tune-model`: what torch.export and TVM print goes to its file
        return _from_pytorch(module, example_inputs, name)


def _from_pytorch(module, example_inputs: Sequence, name: str) -> Model:
    import warnings

    import torch
    from tvm.relax.frontend.torch import from_exported_program

    module = module.eval()
    inputs = tuple(example_inputs)
    try:
        with torch.no_grad():
            ep = torch.export.export(module, inputs)
    except Exception as err:  # noqa: BLE001 - torch raises many kinds
        raise ModelError(f"model {name} does not export with torch.export: {error_line(err, first=True)}") from None
    try:
        with warnings.catch_warnings():
            # TVM's importer runs torch's run_decompositions, whose deepcopy of the module call graph uses a
            # deprecated pytree name (typing_extensions warns once per import): nothing the user can act on
            warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated",
                                    category=FutureWarning)
            mod = from_exported_program(ep, keep_params_as_input=True)
    except Exception as err:  # noqa: BLE001
        msg = error_line(err)
        raise ModelError(f"model {name} uses an operator TVM's Relax frontend does not support: {msg}") from None
    mod, params = _detach(bounded_takes(mod), name)
    return Model(name, mod, params, [x.detach().numpy() for x in inputs], torch_module=module)


def from_onnx(path: str, input_shapes: dict[str, Sequence[int]] | None = None, seed: int = 0) -> Model:
    """Import an ONNX file through ``tvm.relax.frontend.onnx``; inputs are random (seeded).

    Raises
    ------
    ModelError
        Missing file, a file that does not parse as ONNX, or an unsupported operator.
    """
    if not os.path.exists(path):
        raise ModelError(f"ONNX file {path} does not exist")
    try:
        import onnx
    except ImportError:  # pragma: no cover - onnx is a dependency
        raise ModelError("the onnx package is not installed: pip install onnx") from None
    try:
        proto = onnx.load(path)
        onnx.checker.check_model(proto)
    except Exception as err:  # noqa: BLE001
        raise ModelError(f"ONNX file {path} does not parse: {error_line(err)}") from None
    from ..stderr_capture import quiet

    with quiet("import"):  # inside `release tune-model`: the frontend's warnings ("Renaming name ...") go to its file
        return _from_onnx_proto(path, proto, input_shapes, seed)


def _from_onnx_proto(path: str, proto, input_shapes, seed: int) -> Model:
    import onnx
    from tvm.relax.frontend.onnx import from_onnx as tvm_from_onnx

    shapes = dict(input_shapes or {})
    init = {i.name for i in proto.graph.initializer}
    rng = np.random.default_rng(seed)
    inputs = []
    for inp in proto.graph.input:
        if inp.name in init:
            continue
        dims = shapes.get(inp.name) or [d.dim_value for d in inp.type.tensor_type.shape.dim]
        if not dims or any(int(d) <= 0 for d in dims):
            raise ModelError(f"ONNX input {inp.name} has a dynamic shape; give input_shapes={{'{inp.name}': [...]}}")
        shapes[inp.name] = [int(d) for d in dims]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(inp.type.tensor_type.elem_type)
        inputs.append(rng.standard_normal(shapes[inp.name]).astype(dtype))
    try:
        mod = tvm_from_onnx(proto, shape_dict=shapes, keep_params_in_input=True)
    except Exception as err:  # noqa: BLE001
        raise ModelError(f"ONNX file {path} uses an operator TVM's Relax frontend does not support: {error_line(err)}") from None
    mod, params = _detach(bounded_takes(mod), os.path.basename(path))
    return Model(os.path.basename(path), mod, params, inputs, onnx_path=path)


def load_model(spec, example_inputs: Sequence | None = None) -> Model:
    """A built-in model name (:mod:`release.zoo`), an ``.onnx`` path, or a PyTorch module + inputs."""
    if isinstance(spec, str):
        if spec.endswith(".onnx"):
            return from_onnx(spec)
        from .. import zoo

        module, inputs = zoo.build(spec)
        return from_pytorch(module, inputs, name=spec)
    if example_inputs is None:
        raise ModelError("a PyTorch module needs example_inputs")
    return from_pytorch(spec, example_inputs, name=type(spec).__name__)
