"""Whole-model tuning: PyTorch or ONNX in, tasks extracted, tuned across tasks, a compiled model out.

One module per step of the pipeline, each TVM's own machinery::

    frontend -> layout -> extract -> tune -> compile -> evaluation

- :mod:`~release.relax.frontend`: :func:`load_model` (``torch.export`` +
  ``tvm.relax.frontend.torch.from_exported_program``, or ``tvm.relax.frontend.onnx.from_onnx``; a
  built-in name from :mod:`release.zoo`) gives a :class:`Model`: a Relax module with its weights
  detached as ``params``.
- :mod:`~release.relax.layout`: the decisions (pre-packed weights: :func:`default_prepack`; the conv2d
  layout: :func:`model_layout`, :func:`default_layout`, ``NCHWc`` blocks per convolution:
  :func:`conv2d_blocked_layouts`) and the Relax passes that carry them out (:func:`layout_passes`,
  :func:`blocked_conv2d_legalize`, and the passes ``compile_relax`` runs before applying a database).
- :mod:`~release.relax.extract`: :func:`extract_tasks` prepares the module as ``compile_relax``
  prepares it (:func:`prepare`: library dispatch, ``LegalizeOps``, ``AnnotateTIROpPattern``,
  ``FoldConstant``, ``FuseOps``, ``FuseTIR``), then MetaSchedule's ``extract_tasks`` gives the fused
  TIR functions with their weights (how many times each runs); each becomes a
  :class:`release.task.Task`. :func:`latency_shares`: each task's share of the end-to-end latency.
- :mod:`~release.relax.tune`: :func:`tune_model`, a task scheduler (:mod:`release.scheduler`) that
  splits the trial budget; each task has its own tuner; all records go to one log (resumable).
  :func:`tune_with_metaschedule`: MetaSchedule's own ``tune_relax`` with the same budget.
- :mod:`~release.relax.compile`: :func:`compile_model`, MetaSchedule's ``compile_relax`` with a
  database of each task's best record (:func:`schedule_knobless` for the functions without a knob).
- :mod:`~release.relax.winograd`: with a ``-winograd{m}`` layout (``"NCHWc-winograd4"``), every blocked 3x3
  stride-1 convolution also tuned in its Winograd form and built in the form measured faster, per layer
  (:func:`winograd_choice`, :class:`WinogradPlan`).
- :mod:`~release.relax.evaluation`: :func:`evaluate` checks outputs against PyTorch (or ONNX Runtime
  for an ONNX file: :attr:`Model.reference_name`) and times the VM; :func:`torch_reference` times PyTorch eager.
- :mod:`~release.relax.deploy`: :func:`load_library` loads an exported model library as
  ``tvm.runtime.load_module`` does, without TVM's per-constant ``Scope Loaded`` warnings.

Every public name is re-exported here (``from release.relax import tune_model``). TVM, PyTorch and
ONNX are imported inside the functions: importing this package imports none of them.
"""

from .compile import compile_model, schedule_knobless, winograd_choice
from .deploy import load_library
from .evaluation import evaluate, torch_latency_ms, torch_reference
from .extract import extract_tasks, latency_shares, prepare
from .frontend import Model, from_onnx, from_pytorch, load_model
from .layout import (AUTO_LAYOUT, blocked_conv2d_legalize, conv2d_blocked_layouts, default_layout,
                     default_prepack, dtype_attr, layout_passes, model_layout)
from .tune import TuneModelResult, default_chunk, default_ms, tune_model, tune_with_metaschedule
from .winograd import WinogradChoice, WinogradPlan, split_layout

__all__ = [
    # frontend
    "Model", "from_pytorch", "from_onnx", "load_model",
    # layout
    "default_prepack", "model_layout", "AUTO_LAYOUT", "default_layout", "conv2d_blocked_layouts",
    "blocked_conv2d_legalize", "dtype_attr", "layout_passes",
    # extract
    "prepare", "extract_tasks", "latency_shares",
    # tune
    "TuneModelResult", "default_chunk", "tune_model", "default_ms", "tune_with_metaschedule",
    # compile
    "schedule_knobless", "compile_model", "winograd_choice",
    # winograd
    "split_layout", "WinogradPlan", "WinogradChoice",
    # evaluation
    "evaluate", "torch_latency_ms", "torch_reference",
    # deploy
    "load_library",
]
