"""Reference timings (PyTorch) taken as carefully as our kernels, and flagged when they look wrong.

A PyTorch figure printed beside a tuned kernel is only worth printing if it was measured on the
same threads, after warm-up, as the fastest of repeats (the least disturbed on a shared machine),
and if a second measurement agrees with it. On a busy 2-core machine PyTorch's intra-op threads
spin and a single protocol can be off by 100x (a 0.026 ms model once printed as 16 ms): such a
figure is reported with ``reliable=False`` and the reason, never as a plain fact.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

#: a reference is flagged when its two methods, or its median and fastest repeat, differ by more
RELIABLE_SPREAD = 1.5


@dataclass
class ReferenceTiming:
    """One reference timing.

    Attributes
    ----------
    seconds : float
        Fastest of ``repeat`` means of ``number`` calls (s): the figure reported.
    median : float
        Median of the same repeats (s).
    second : float
        A second method: the median of ``torch.utils.benchmark.Timer.blocked_autorange`` (s),
        PyTorch's own timer (its own warm-up and block sizes).
    threads : int
        PyTorch intra-op threads during the timing.
    reliable : bool
        False when the median is over ``RELIABLE_SPREAD`` x the fastest repeat, or the two methods
        disagree by more than that: the machine was busy; do not trust the figure.
    note : str
        Why it is unreliable ("" when reliable).
    """

    seconds: float
    median: float
    second: float
    threads: int
    reliable: bool
    note: str = ""

    def describe(self, unit_ms: bool = True) -> str:
        """``"0.031 ms on 2 threads"``, with ``" (UNRELIABLE: ...)"`` appended when flagged."""
        text = f"{self.seconds * 1e3:.3f} ms on {self.threads} threads"
        return text if self.reliable else f"{text} (UNRELIABLE: {self.note})"


def time_torch(fn: Callable[[], object], threads: int | None = None, number: int = 10, repeat: int = 7,
               warmup: int = 3) -> ReferenceTiming:
    """Time a PyTorch callable the way kernels are timed: warm-up, fixed threads, fastest repeat,
    checked against a second method.

    Parameters
    ----------
    fn : callable
        Runs the operator or model once (no arguments); called under ``torch.no_grad()``.
    threads : int, optional
        ``torch.set_num_threads`` for the timing (give the target's ``num-cores``, as TVM's kernels
        run with); default None keeps PyTorch's count.
    number, repeat : int
        ``repeat`` means of ``number`` calls each (defaults 10 and 7).
    warmup : int
        Calls before timing (default 3: oneDNN picks and caches its kernels on the first calls).

    Returns
    -------
    ReferenceTiming
    """
    import torch
    import torch.utils.benchmark as tb

    if threads is not None:
        torch.set_num_threads(int(threads))
    with torch.no_grad():
        for _ in range(max(0, warmup)):
            fn()
        means = []
        for _ in range(max(1, repeat)):
            t0 = time.perf_counter()
            for _ in range(max(1, number)):
                fn()
            means.append((time.perf_counter() - t0) / max(1, number))
        second = float(tb.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
                       .blocked_autorange(min_run_time=0.2).median)
    fastest, median = float(np.min(means)), float(np.median(means))
    notes = []
    if median > RELIABLE_SPREAD * fastest:
        notes.append(f"median of repeats {median / fastest:.1f}x the fastest")
    ratio = max(second, fastest) / max(min(second, fastest), 1e-12)
    if ratio > RELIABLE_SPREAD:
        notes.append(f"torch.utils.benchmark gives {second * 1e3:.3f} ms, {ratio:.1f}x apart")
    return ReferenceTiming(fastest, median, second, torch.get_num_threads(), not notes,
                           "; ".join(notes) + ("; the machine looks busy" if notes else ""))


def onnx_exportable(module):
    """``module`` in a form ONNX's TorchScript exporter accepts, computing the same function.

    PyTorch runs ``nn.TransformerEncoderLayer`` in eval mode through its fused fast path
    (``aten::_transformer_encoder_layer_fwd``), which no ONNX opset has; with the fast path off, the
    attention's ``is_causal`` becomes a tensor under tracing and ``scaled_dot_product_attention``
    refuses it. Here every such layer (with one packed in-projection, as BERT's) is replaced by the
    same layer written with ``nn.Linear``/``LayerNorm`` modules and explicit attention
    (``softmax(Q K^T / sqrt(d)) V`` per head: the form BERT's own ONNX exports have, which ONNX
    Runtime fuses into its ``Attention`` kernel). The weights are shared, not copied.

    Parameters
    ----------
    module : torch.nn.Module
        In eval mode (dropout is left out: the layer's dropout is a no-op there).

    Returns
    -------
    torch.nn.Module
        ``module`` itself when it holds no such layer; else a copy with the layers replaced.
    """
    import copy

    from torch import nn

    def convertible(m) -> bool:
        return isinstance(m, nn.TransformerEncoderLayer) and m.self_attn._qkv_same_embed_dim

    if convertible(module):
        return _ExplicitEncoderLayer(module)
    if not any(convertible(m) for m in module.modules()):
        return module
    out = copy.copy(module)
    out._modules = dict(module._modules)
    for name, child in module._modules.items():
        if child is not None:
            out._modules[name] = onnx_exportable(child)
    return out


def _explicit_encoder_layer_class():
    import math

    import torch
    from torch import nn

    class ExplicitEncoderLayer(nn.Module):
        """``nn.TransformerEncoderLayer`` (no masks, eval mode) written with explicit attention."""

        def __init__(self, layer):
            super().__init__()
            self.layer = layer

        def _attention(self, x):
            a = self.layer.self_attn
            b, s, e = x.shape
            h = a.num_heads
            d = e // h
            q, k, v = torch.nn.functional.linear(x, a.in_proj_weight, a.in_proj_bias).split(e, dim=-1)
            q, k, v = (t.reshape(b, s, h, d).transpose(1, 2) for t in (q, k, v))
            w = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d), dim=-1)
            return a.out_proj(torch.matmul(w, v).transpose(1, 2).reshape(b, s, e))

        def _feed_forward(self, x):
            lay = self.layer
            return lay.linear2(lay.activation(lay.linear1(x)))

        def forward(self, src):
            lay = self.layer
            x = src if lay.self_attn.batch_first else src.transpose(0, 1)
            if lay.norm_first:
                x = x + self._attention(lay.norm1(x))
                x = x + self._feed_forward(lay.norm2(x))
            else:
                x = lay.norm1(x + self._attention(x))
                x = lay.norm2(x + self._feed_forward(x))
            return x if lay.self_attn.batch_first else x.transpose(0, 1)

    return ExplicitEncoderLayer


def _ExplicitEncoderLayer(layer):  # noqa: N802 - a class made lazily (torch is imported only when used)
    return _explicit_encoder_layer_class()(layer)
