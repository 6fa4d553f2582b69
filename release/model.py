"""Former path of :mod:`release.relax`, kept for existing scripts: ``from release import model as M``
and ``from release.model import tune_model`` still work.

Everything here is re-exported from :mod:`release.relax` (frontend -> layout -> extract -> tune ->
compile -> evaluate, one module each); new code imports from there.
"""

from .relax import (AUTO_LAYOUT, Model, TuneModelResult, blocked_conv2d_legalize, compile_model,
                    conv2d_blocked_layouts, default_chunk, default_layout, default_ms, default_prepack,
                    dtype_attr, evaluate, extract_tasks, from_onnx, from_pytorch, latency_shares,
                    layout_passes, load_model, model_layout, prepare, schedule_knobless, torch_latency_ms,
                    torch_reference, tune_model, tune_with_metaschedule)

__all__ = ["AUTO_LAYOUT", "Model", "TuneModelResult", "blocked_conv2d_legalize", "compile_model",
           "conv2d_blocked_layouts", "default_chunk", "default_layout", "default_ms", "default_prepack",
           "dtype_attr", "evaluate", "extract_tasks", "from_onnx", "from_pytorch", "latency_shares",
           "layout_passes", "load_model", "model_layout", "prepare", "schedule_knobless", "torch_latency_ms",
           "torch_reference", "tune_model", "tune_with_metaschedule"]
