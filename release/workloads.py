"""Registry of real tuning workloads, named ``<network>.<op>.<n>`` (1-based, order of first appearance).

- ``alexnet.conv2d.1-5``, ``vgg16.conv2d.1-9``, ``resnet18.conv2d.1-12``: the 26 conv2d tasks of
  Chameleon's evaluation (batch 1, NCHW, float32; shapes in shared/reference/chameleon.md).
- ``bert-base.dense.1-3``: the unique dense layers of a BERT-base encoder at sequence length 128
  (768->768 for Q/K/V/attention output, 768->3072, 3072->768).
- ``mobilenet_v2.depthwise_conv2d.1-10``: the unique 3x3 depthwise convolutions of MobileNetV2 at
  224x224 (channel multiplier 1), NCHW or blocked (``depthwise_conv2d_NCHWc``).
- ``tiny.matmul.1``, ``tiny.conv2d.1``, ``tiny.depthwise_conv2d.1``: small workloads for tests and smoke runs.

Each workload is built with TVM's own operator library (``tvm.topi``) and carries a reference
implementation in NumPy or PyTorch that :func:`release.task.Task.check` compares against.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .errors import WorkloadError


@dataclass(frozen=True)
class Workload:
    """One registered workload.

    Attributes
    ----------
    name : str
        ``<network>.<op>.<n>``.
    op : str
        Operator kind (``conv2d``, ``depthwise_conv2d``, ``dense``, ``matmul``).
    params : dict
        Shape parameters (conv2d and depthwise_conv2d: ``n, c, h, w, k, r, s, stride, pad``, with
        ``k == c`` for a depthwise one; dense: ``m, k, n``).
    description : str
        Human-readable shape, e.g. ``64->64, 56x56, 3x3, s1, p1``.
    """

    name: str
    op: str
    params: dict = field(hash=False)
    description: str = ""

    def build_te(self, layout: str = "NCHW"):
        """Return the TE tensors ``[inputs..., output]`` of this workload (TVM topi).

        Parameters
        ----------
        layout : str
            conv2d only: ``"NCHW"`` (default, ``topi.nn.conv2d_nchw``) or a channel-blocked
            ``"NCHW{cb}c"`` / ``"NCHW{cb}c{kb}k"`` (see :func:`conv2d_nchwc_te`); depthwise_conv2d:
            ``"NCHW"`` (``topi.nn.depthwise_conv2d_nchw``) or ``"NCHW{b}c"`` (one block for input and
            output, :func:`depthwise_conv2d_nchwc_compute`); other ops take ``"NCHW"``.
        """
        from tvm import te, topi

        p = self.params
        layout, tile = split_winograd(layout)
        if tile is not None:
            self._check_winograd(tile)
            return conv2d_nchwc_winograd_te(p, *parse_blocked_layout(layout), tile)
        if layout != "NCHW":
            if self.op not in ("conv2d", "depthwise_conv2d"):
                raise WorkloadError(f"layout {layout!r} applies to conv2d workloads, not {self.op} ({self.name})")
            cb, kb = parse_blocked_layout(layout)
            if self.op == "depthwise_conv2d":
                return depthwise_conv2d_nchwc_te(p, cb, kb)
            return conv2d_nchwc_te(p, cb, kb)
        if self.op == "depthwise_conv2d":
            data = te.placeholder((p["n"], p["c"], p["h"], p["w"]), name="data", dtype="float32")
            kernel = te.placeholder((p["c"], 1, p["r"], p["s"]), name="kernel", dtype="float32")
            out = topi.nn.depthwise_conv2d_nchw(data, kernel, p["stride"], p["pad"], 1, out_dtype="float32")
            return [data, kernel, out]
        if self.op == "conv2d":
            data = te.placeholder((p["n"], p["c"], p["h"], p["w"]), name="data", dtype="float32")
            kernel = te.placeholder((p["k"], p["c"], p["r"], p["s"]), name="kernel", dtype="float32")
            out = topi.nn.conv2d_nchw(data, kernel, p["stride"], p["pad"], 1, out_dtype="float32")
            return [data, kernel, out]
        if self.op == "dense":
            data = te.placeholder((p["m"], p["k"]), name="data", dtype="float32")
            weight = te.placeholder((p["n"], p["k"]), name="weight", dtype="float32")
            out = topi.nn.dense(data, weight, out_dtype="float32")
            return [data, weight, out]
        if self.op == "matmul":
            a = te.placeholder((p["m"], p["k"]), name="A", dtype="float32")
            b = te.placeholder((p["k"], p["n"]), name="B", dtype="float32")
            kk = te.reduce_axis((0, p["k"]), name="kk")
            out = te.compute((p["m"], p["n"]), lambda i, j: te.sum(a[i, kk] * b[kk, j], axis=kk), name="C")
            return [a, b, out]
        raise AssertionError(self.op)

    def reference(self, inputs: list[np.ndarray], layout: str = "NCHW") -> np.ndarray:
        """Reference output for ``inputs`` (NumPy arrays in argument order), float32.

        conv2d uses ``torch.nn.functional.conv2d`` (blocked layouts are unpacked to NCHW/OIHW,
        convolved, and the output packed back); dense and matmul use NumPy.
        """
        p = self.params
        if split_winograd(layout)[1] is not None:
            return winograd_reference(inputs[0], inputs[1], p["pad"])
        if layout != "NCHW" and self.op == "depthwise_conv2d":
            data, kernel = inputs  # (N, C/b, H, W, b) and (C/b, 1, R, S, 1, b)
            n, c1, h, w, b = data.shape
            plain = self.reference([data.transpose(0, 1, 4, 2, 3).reshape(n, c1 * b, h, w),
                                    kernel.transpose(0, 5, 1, 4, 2, 3).reshape(c1 * b, 1, *kernel.shape[2:4])])
            _, _, oh, ow = plain.shape
            return np.ascontiguousarray(plain.reshape(n, c1, b, oh, ow).transpose(0, 1, 3, 4, 2))
        if layout != "NCHW":
            cb, kb = parse_blocked_layout(layout)
            data, kernel = inputs
            n, c1, h, w, _ = data.shape
            k1, _, r, s, _, _ = kernel.shape
            plain = self.reference([data.transpose(0, 1, 4, 2, 3).reshape(n, c1 * cb, h, w),
                                    kernel.transpose(0, 5, 1, 4, 2, 3).reshape(k1 * kb, c1 * cb, r, s)])
            _, _, oh, ow = plain.shape
            return np.ascontiguousarray(plain.reshape(n, k1, kb, oh, ow).transpose(0, 1, 3, 4, 2))
        if self.op in ("conv2d", "depthwise_conv2d"):
            import torch

            with torch.no_grad():
                out = torch.nn.functional.conv2d(
                    torch.from_numpy(inputs[0]), torch.from_numpy(inputs[1]), stride=p["stride"], padding=p["pad"],
                    groups=p["c"] if self.op == "depthwise_conv2d" else 1)
            return out.numpy()
        if self.op == "dense":
            return inputs[0] @ inputs[1].T
        if self.op == "matmul":
            return inputs[0] @ inputs[1]
        raise AssertionError(self.op)

    def _check_winograd(self, tile: int) -> None:
        p = self.params
        if self.op != "conv2d" or (p["r"], p["s"], p["stride"]) != (3, 3, 1):
            raise WorkloadError(f"Winograd applies to 3x3 stride-1 conv2d workloads, not {self.name} "
                                f"({self.op}, {self.description})")
        if tile not in WINOGRAD_TILES:
            raise WorkloadError(f"Winograd tile size {tile} is not offered: {', '.join(map(str, WINOGRAD_TILES))} "
                                "keep the FP32 error within 1e-5 of the output's range (docs/design/winograd.md)")


def split_winograd(layout: str | None) -> tuple[str | None, int | None]:
    """``"NCHW16c-winograd4"`` -> ``("NCHW16c", 4)``; a layout without the suffix -> ``(layout, None)``.

    The suffix ``-winograd{m}`` asks for a 3x3 stride-1 conv2d computed by Winograd F(m x m, 3 x 3) in that
    blocked layout (:func:`conv2d_nchwc_winograd_compute`).

    Raises
    ------
    WorkloadError
        The suffix on NCHW (Winograd tasks are blocked) or a suffix that is not ``-winograd`` and a number.
    """
    import re

    if not layout or "-" not in layout:
        return layout, None
    base, _, suffix = layout.partition("-")
    m = re.fullmatch(r"winograd(\d+)", suffix)
    if not m:
        raise WorkloadError(f"layout {layout!r}: {suffix!r} is not -winograd{{m}} (e.g. NCHWc-winograd4)")
    if base == "NCHW":
        raise WorkloadError(f"layout {layout!r}: Winograd tasks take a blocked layout: NCHWc-{suffix} "
                            "(or NCHW16c-...)")
    return base, int(m.group(1))


def parse_blocked_layout(layout: str) -> tuple[int, int]:
    """``"NCHW16c"`` -> (16, 16); ``"NCHW3c16k"`` -> (3, 16): input- and output-channel block sizes.

    Raises
    ------
    WorkloadError
        Anything else (the message gives the accepted forms).
    """
    import re

    m = re.fullmatch(r"NCHW(\d+)c(?:(\d+)k)?", layout or "")
    if not m or int(m.group(1)) < 1 or (m.group(2) and int(m.group(2)) < 1):
        raise WorkloadError(f"layout {layout!r} is not NCHW, NCHWc (channel blocks = the target's vector lanes) or a "
                            "blocked NCHW{cb}c (e.g. NCHW16c, or NCHW3c16k for another output-channel block)")
    cb = int(m.group(1))
    return cb, int(m.group(2) or cb)


def block_sizes(c: int, k: int, lanes: int) -> tuple[int, int]:
    """Channel blocks for a vector of ``lanes`` float32: the largest divisor of ``c`` (input) and of
    ``k`` (output channels) that is at most ``lanes`` (16 with AVX-512, 8 with AVX2; 3 for an RGB
    input)."""
    def block(x):
        return max(d for d in range(1, min(x, lanes) + 1) if x % d == 0)

    return block(c), block(k)


def conv2d_nchwc_te(p: dict, cb: int, kb: int):
    """A channel-blocked conv2d in TE, AutoTVM's x86 layout (oneDNN's ``nChw16c``).

    data (N, C/cb, H, W, cb), kernel (K/kb, C/cb, R, S, cb, kb), output (N, K/kb, OH, OW, kb);
    reduction over (C/cb, R, S, cb) as separate axes, so the vector dimension is the output
    channel block (shared/reference/kernel-quality.md: 1.04-1.11x PyTorch at 2 threads where NCHW
    stays at 0.8-0.95x). ``topi.nn.conv2d_NCHWc`` fuses the reduction into one axis with div/mod
    indexing; this form keeps the axes apart for MetaSchedule's tiling.

    Raises
    ------
    WorkloadError
        ``cb`` does not divide C or ``kb`` does not divide K.
    """
    from tvm import te

    n, c, h, w, k, r, s = (p[x] for x in ("n", "c", "h", "w", "k", "r", "s"))
    stride, pad = p["stride"], p["pad"]
    if c % cb or k % kb:
        raise WorkloadError(f"channel blocks {cb}c/{kb}k do not divide {c} input / {k} output channels; "
                            f"use block_sizes({c}, {k}, lanes)")
    data = te.placeholder((n, c // cb, h, w, cb), name="data", dtype="float32")
    kernel = te.placeholder((k // kb, c // cb, r, s, cb, kb), name="kernel", dtype="float32")
    return [data, kernel, conv2d_nchwc_compute(data, kernel, stride, pad)]


def depthwise_conv2d_nchwc_te(p: dict, cb: int, kb: int):
    """A channel-blocked depthwise conv2d in TE (AutoTVM's x86 ``depthwise_conv2d_NCHWc``).

    data (N, C/b, H, W, b), kernel (C/b, 1, R, S, 1, b), output (N, C/b, OH, OW, b), with
    :func:`depthwise_conv2d_nchwc_compute`: the form MobileNets' depthwise convolutions take inside
    blocked models, as an operator task.

    Raises
    ------
    WorkloadError
        Input and output blocks differ (a depthwise conv keeps each channel's block) or ``cb`` does
        not divide the channels.
    """
    from tvm import te

    c = p["c"]
    if cb != kb or c % cb:
        raise WorkloadError(f"a depthwise conv2d takes one channel block that divides its {c} channels, not "
                            f"{cb}c/{kb}k; use NCHWc (the target's lanes) or NCHW{{b}}c")
    data = te.placeholder((p["n"], c // cb, p["h"], p["w"], cb), name="data", dtype="float32")
    kernel = te.placeholder((c // cb, 1, p["r"], p["s"], 1, cb), name="kernel", dtype="float32")
    return [data, kernel, depthwise_conv2d_nchwc_compute(data, kernel, p["stride"], p["pad"])]


def conv2d_nchwc_winograd_te(p: dict, cb: int, kb: int, tile: int):
    """A channel-blocked 3x3 stride-1 conv2d by Winograd F(tile x tile, 3 x 3) in TE, on the transformed
    weight (the operator task; inside models the weight transform is done at compile time).

    data (N, C/cb, H, W, cb), weight (alpha, alpha, K/kb, C/cb, cb, kb) with alpha = tile + 2 (a random one
    in the task: :func:`winograd_reference` is its reference), output (N, K/kb, OH, OW, kb), with
    :func:`conv2d_nchwc_winograd_compute`.

    Raises
    ------
    WorkloadError
        ``cb`` does not divide C or ``kb`` does not divide K.
    """
    from tvm import te

    c, k, alpha = p["c"], p["k"], tile + 2
    if c % cb or k % kb:
        raise WorkloadError(f"channel blocks {cb}c/{kb}k do not divide {c} input / {k} output channels; "
                            f"use block_sizes({c}, {k}, lanes)")
    data = te.placeholder((p["n"], c // cb, p["h"], p["w"], cb), name="data", dtype="float32")
    weight = te.placeholder((alpha, alpha, k // kb, c // cb, cb, kb), name="weight", dtype="float32")
    return [data, weight, conv2d_nchwc_winograd_compute(data, weight, p["pad"])]


def padding4(padding) -> tuple[int, int, int, int]:
    """``(top, left, bottom, right)`` of a convolution's padding given as Relax's ``nn.conv2d`` attribute: an
    int, ``(h, w)`` or ``(top, left, bottom, right)``."""
    pv = [int(x) for x in padding] if hasattr(padding, "__len__") else [int(padding)]
    pt, pl, pb, pr = {1: pv * 4, 2: pv * 2, 4: pv}.get(len(pv), pv)
    return pt, pl, pb, pr


def _blocked_window(data, r: int, s: int, stride, padding, dilation):
    """The sliding window of a convolution over blocked data (N, C/b, H, W, b): ``(padded data, (stride h,
    w), (dilation h, w), OH, OW)``, with strides, dilations and paddings as Relax's ``nn.conv2d`` attributes
    give them (an int, (h, w), or padding (top, left, bottom, right)). The padding is ``topi.nn.pad``'s
    ``pad_temp``, left out when it is zero."""
    from tvm import topi

    def pair(v):
        v = [int(x) for x in v] if isinstance(v, (list, tuple)) or hasattr(v, "__len__") else [int(v)]
        return (v[0], v[0]) if len(v) == 1 else (v[0], v[1])

    sh, sw = pair(stride)
    dh, dw = pair(dilation)
    pt, pl, pb, pr = padding4(padding)
    h, w = int(data.shape[2]), int(data.shape[3])
    oh = (h + pt + pb - (r - 1) * dh - 1) // sh + 1
    ow = (w + pl + pr - (s - 1) * dw - 1) // sw + 1
    padded = (topi.nn.pad(data, [0, 0, pt, pl, 0], [0, 0, pb, pr, 0], name="pad_temp")
              if (pt, pl, pb, pr) != (0, 0, 0, 0) else data)
    return padded, (sh, sw), (dh, dw), oh, ow


def conv2d_nchwc_compute(data, kernel, stride=1, padding=0, dilation=1, out_dtype: str | None = None):
    """The channel-blocked conv2d of :func:`conv2d_nchwc_te` on given TE tensors (any shapes, strides,
    paddings, dilations): the compute that both operator tasks and blocked convolutions inside
    models (:func:`release.relax.blocked_conv2d_legalize`) are tuned on.

    Parameters
    ----------
    data : te.Tensor
        (N, C/cb, H, W, cb).
    kernel : te.Tensor
        (K/kb, C/cb, R, S, cb, kb), TVM's ``OIHW{cb}i{kb}o``.
    stride, dilation : int or (int, int)
        (height, width).
    padding : int, (int, int) or (top, left, bottom, right)
        As Relax's ``nn.conv2d`` attribute.
    out_dtype : str, optional
        Accumulation and output type (default: the data's).

    Returns
    -------
    te.Tensor
        (N, K/kb, OH, OW, kb), named ``conv2d_NCHWc``; reduction axes ``icc, kh, kw, icb`` kept apart.
    """
    from tvm import te

    out_dtype = out_dtype or data.dtype
    _, c1, _, _, cb = (int(x) for x in data.shape)
    k1, _, r, s, _, kb = (int(x) for x in kernel.shape)
    n = data.shape[0]
    padded, (sh, sw), (dh, dw), oh, ow = _blocked_window(data, r, s, stride, padding, dilation)
    icc = te.reduce_axis((0, c1), name="icc")
    kh = te.reduce_axis((0, r), name="kh")
    kw = te.reduce_axis((0, s), name="kw")
    icb = te.reduce_axis((0, cb), name="icb")
    rh = kh * dh if dh != 1 else kh  # keeps the operator tasks' expression (and key) for dilation 1
    rw = kw * dw if dw != 1 else kw

    def cast(x):
        return x if x.dtype == out_dtype else x.astype(out_dtype)

    return te.compute(
        (n, k1, oh, ow, kb),
        lambda b, occ, y, x, ocb: te.sum(
            cast(padded[b, icc, y * sh + rh, x * sw + rw, icb]) * cast(kernel[occ, icc, kh, kw, icb, ocb]),
            axis=[icc, kh, kw, icb]),
        name="conv2d_NCHWc")


def depthwise_conv2d_nchwc_compute(data, kernel, stride=1, padding=0, dilation=1, out_dtype: str | None = None):
    """A channel-blocked depthwise conv2d (channel multiplier 1) on given TE tensors: AutoTVM's x86
    ``depthwise_conv2d_NCHWc`` layout (``topi.nn.depthwise_conv2d_NCHWc``, whose compute TVM 0.27 no
    longer registers), the form MobileNets' depthwise convolutions take inside blocked models
    (:func:`release.relax.blocked_conv2d_legalize`), so they need no layout transform around them.

    Parameters
    ----------
    data : te.Tensor
        (N, C/b, H, W, b).
    kernel : te.Tensor
        (C/b, 1, R, S, 1, b), TVM's ``OIHW1i{b}o`` of a (C, 1, R, S) depthwise weight.
    stride, dilation : int or (int, int)
        (height, width).
    padding : int, (int, int) or (top, left, bottom, right)
        As Relax's ``nn.conv2d`` attribute.
    out_dtype : str, optional
        Accumulation and output type (default: the data's).

    Returns
    -------
    te.Tensor
        (N, C/b, OH, OW, b), named ``depthwise_conv2d_NCHWc``; reduction over the kernel taps.
    """
    from tvm import te

    out_dtype = out_dtype or data.dtype
    _, c1, _, _, b = (int(x) for x in data.shape)
    _, _, r, s, _, _ = (int(x) for x in kernel.shape)
    padded, (sh, sw), (dh, dw), oh, ow = _blocked_window(data, r, s, stride, padding, dilation)
    kh = te.reduce_axis((0, r), name="kh")
    kw = te.reduce_axis((0, s), name="kw")

    def cast(x):
        return x if x.dtype == out_dtype else x.astype(out_dtype)

    return te.compute(
        (data.shape[0], c1, oh, ow, b),
        lambda n, c, y, x, cb: te.sum(
            cast(padded[n, c, y * sh + kh * dh, x * sw + kw * dw, cb]) * cast(kernel[c, 0, kh, kw, 0, cb]),
            axis=[kh, kw]),
        name="depthwise_conv2d_NCHWc")


#: Winograd tile sizes offered: F(m x m, 3 x 3) for m in these (docs/design/winograd.md: the FP32 error per
#: tile size on the tier's layers; 6 and above exceed the tolerance)
WINOGRAD_TILES = (2, 4)


def winograd_matrices(tile: int, r: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The Winograd F(tile x tile, r x r) transform matrices ``(A, B, G)`` in float64, from TVM's Cook-Toom
    construction and interpolation points (``topi.nn.winograd_util``, Barabasz et al. 2018), the ones
    :func:`conv2d_nchwc_winograd_compute` uses in TE.

    Shapes: A (alpha, tile), B (alpha, alpha), G (alpha, r), with alpha = tile + r - 1; the convolution of a
    tile d (alpha x alpha) with a filter g (r x r) is ``A.T @ ((G @ g @ G.T) * (B.T @ d @ B)) @ A``.
    """
    from tvm.topi.nn.winograd_util import _cook_toom_convolution, _interpolation_points

    return _cook_toom_convolution(_interpolation_points(tile + r - 2), tile, r)


def winograd_weight_transform_nchwc(kernel, tile: int):
    """The Winograd weight transform ``U = G g G^T`` of a channel-blocked conv2d weight, in TE.

    Parameters
    ----------
    kernel : te.Tensor
        (K/kb, C/cb, 3, 3, cb, kb), TVM's ``OIHW{cb}i{kb}o``.
    tile : int
        The output tile m of F(m x m, 3 x 3).

    Returns
    -------
    te.Tensor
        (alpha, alpha, K/kb, C/cb, cb, kb) with alpha = m + 2, named ``winograd_weight``. Inside models the
        weight is a constant and this runs once, at compile time (Relax's ``FoldConstant``), as pre-packing does.
    """
    from tvm import te
    from tvm.topi.nn.winograd_util import winograd_transform_matrices

    k1, c1, r, s, cb, kb = (int(x) for x in kernel.shape)
    if r != s:
        raise WorkloadError(f"Winograd needs a square kernel, not {r}x{s}")
    alpha = tile + r - 1
    _, _, g = winograd_transform_matrices(tile, r, str(kernel.dtype))
    kh = te.reduce_axis((0, r), name="kh")
    kw = te.reduce_axis((0, r), name="kw")
    return te.compute((alpha, alpha, k1, c1, cb, kb),
                      lambda eps, nu, o, i, ci, co: te.sum(kernel[o, i, kh, kw, ci, co] * g[eps, kh] * g[nu, kw],
                                                           axis=[kh, kw]),
                      name="winograd_weight")


def conv2d_nchwc_winograd_compute(data, weight, padding=1, out_dtype: str | None = None):
    """A channel-blocked 3x3 stride-1 conv2d by Winograd F(m x m, 3 x 3) on given TE tensors: the blocked
    counterpart of ``topi.nn.conv2d_winograd_nchw_without_weight_transform`` (Lavin and Gray 2016), with the
    output-channel block innermost in the batched GEMM so it vectorizes as the direct
    :func:`conv2d_nchwc_compute` does.

    Stages: the data padded (bottom and right also to whole tiles), each alpha x alpha input tile transformed
    (``winograd_data``: (alpha, alpha, C/cb, P, cb), P = N x tiles), one GEMM per (eps, nu) over the input
    channels (``winograd_gemm``: (alpha, alpha, K/kb, P, kb)), the inverse transform (``winograd_inverse``) and
    the tiles laid out as the output. Multiplications: alpha^2 / (m^2 x 9) of the direct ones in the GEMM
    (1/2.25 for m = 2, 1/4 for m = 4) plus the transforms.

    Parameters
    ----------
    data : te.Tensor
        (N, C/cb, H, W, cb).
    weight : te.Tensor
        (alpha, alpha, K/kb, C/cb, cb, kb): :func:`winograd_weight_transform_nchwc` of the weight; the tile
        size is alpha - 2.
    padding : int, (int, int) or (top, left, bottom, right)
        As Relax's ``nn.conv2d`` attribute.
    out_dtype : str, optional
        Accumulation and output type (default: the data's).

    Returns
    -------
    te.Tensor
        (N, K/kb, OH, OW, kb), named ``conv2d_NCHWc_winograd``.

    Raises
    ------
    WorkloadError
        Input-channel blocks of data and weight differ, or a weight whose tile size is not in 2-8.
    """
    from tvm import te, topi
    from tvm.topi.nn.winograd_util import winograd_transform_matrices

    out_dtype = str(out_dtype or data.dtype)
    n, c1, h, w, cb = (int(x) for x in data.shape)
    alpha, _, k1, wc1, wcb, kb = (int(x) for x in weight.shape)
    r, m = 3, alpha - 2
    if (wc1, wcb) != (c1, cb):
        raise WorkloadError(f"Winograd weight of {wc1}x{wcb} input channels for data of {c1}x{cb}")
    if not 2 <= m <= 8:
        raise WorkloadError(f"Winograd weight of alpha {alpha}: tile size {m} is not in 2-8")
    pt, pl, pb, pr = padding4(padding)
    oh, ow = h + pt + pb - r + 1, w + pl + pr - r + 1
    nh, nw = (oh + m - 1) // m, (ow + m - 1) // m
    tiles = nh * nw
    # padded to whole tiles: the last tile reads rows nh*m .. nh*m + r - 2
    eb, er = nh * m + r - 1 - (h + pt + pb), nw * m + r - 1 - (w + pl + pr)
    padded = topi.nn.pad(data, [0, 0, pt, pl, 0], [0, 0, pb + eb, pr + er, 0], name="pad_temp")
    a_mat, b_mat, _ = winograd_transform_matrices(m, r, out_dtype)

    def cast(x):
        return x if x.dtype == out_dtype else x.astype(out_dtype)

    ra = te.reduce_axis((0, alpha), name="ra")
    rb = te.reduce_axis((0, alpha), name="rb")
    v = te.compute(
        (alpha, alpha, c1, n * tiles, cb),
        lambda eps, nu, c, p, ci: te.sum(
            cast(padded[p // tiles, c, (p % tiles) // nw * m + ra, p % nw * m + rb, ci]) * b_mat[ra, eps] * b_mat[rb, nu],
            axis=[ra, rb]),
        name="winograd_data", attrs={"schedule_rule": "release_winograd_data"})
    ic = te.reduce_axis((0, c1), name="ic")
    icb = te.reduce_axis((0, cb), name="icb")
    gemm = te.compute(
        (alpha, alpha, k1, n * tiles, kb),
        lambda eps, nu, k, p, co: te.sum(v[eps, nu, ic, p, icb] * cast(weight[eps, nu, k, ic, icb, co]),
                                         axis=[ic, icb]),
        name="winograd_gemm")
    sa = te.reduce_axis((0, alpha), name="sa")
    sb = te.reduce_axis((0, alpha), name="sb")
    inverse = te.compute(
        (k1, n * tiles, m, m, kb),
        lambda k, p, vh, vw, co: te.sum(gemm[sa, sb, k, p, co] * a_mat[sa, vh] * a_mat[sb, vw], axis=[sa, sb]),
        name="winograd_inverse", attrs={"schedule_rule": "release_winograd_inverse"})
    return te.compute(
        (n, k1, oh, ow, kb),
        lambda b, k, y, x, co: inverse[k, b * tiles + y // m * nw + x // m, y % m, x % m, co],
        name="conv2d_NCHWc_winograd")


def winograd_reference(data: np.ndarray, weight: np.ndarray, padding=1) -> np.ndarray:
    """:func:`conv2d_nchwc_winograd_compute` in NumPy float64 on the transformed weight (the operator
    task's reference: its inputs are random transformed weights, which no 3x3 weight need give), float32 out.

    ``data`` (N, C/cb, H, W, cb), ``weight`` (alpha, alpha, K/kb, C/cb, cb, kb) -> (N, K/kb, OH, OW, kb).
    """
    n, c1, h, w, cb = data.shape
    alpha, _, k1, _, _, kb = weight.shape
    m = alpha - 2
    a_mat, b_mat, _ = winograd_matrices(m)
    pt, pl, pb, pr = padding4(padding)
    oh, ow = h + pt + pb - 2, w + pl + pr - 2
    nh, nw = -(-oh // m), -(-ow // m)
    d = np.zeros((n, c1, nh * m + 2, nw * m + 2, cb))
    d[:, :, pt:pt + h, pl:pl + w] = data
    # tiles (n, c1, nh, nw, alpha, alpha, cb)
    idx_h = (np.arange(nh)[:, None] * m + np.arange(alpha)[None, :])
    idx_w = (np.arange(nw)[:, None] * m + np.arange(alpha)[None, :])
    t = d[:, :, idx_h[:, None, :, None], idx_w[None, :, None, :], :]
    v = np.einsum("ncyxabi,ae,bf->efncyxi", t, b_mat, b_mat)
    g = np.einsum("efncyxi,efkcio->efnkyxo", v, weight.astype(np.float64))
    y = np.einsum("efnkyxo,eu,fv->nkyuxvo", g, a_mat, a_mat).reshape(n, k1, nh * m, nw * m, kb)
    return np.ascontiguousarray(y[:, :, :oh, :ow]).astype(np.float32)


def _conv(name, c, k, hw, rs, stride, pad) -> Workload:
    params = dict(n=1, c=c, h=hw, w=hw, k=k, r=rs, s=rs, stride=stride, pad=pad)
    desc = f"{c}->{k}, {hw}x{hw}, {rs}x{rs}, s{stride}, p{pad}"
    return Workload(name, "conv2d", params, desc)


# (in_channels, out_channels, input HxW, kernel, stride, padding), shared/reference/chameleon.md
_CONV_TABLE = {
    "alexnet": [
        (3, 64, 224, 11, 4, 2), (64, 192, 27, 5, 1, 2), (192, 384, 13, 3, 1, 1),
        (384, 256, 13, 3, 1, 1), (256, 256, 13, 3, 1, 1),
    ],
    "vgg16": [
        (3, 64, 224, 3, 1, 1), (64, 64, 224, 3, 1, 1), (64, 128, 112, 3, 1, 1), (128, 128, 112, 3, 1, 1),
        (128, 256, 56, 3, 1, 1), (256, 256, 56, 3, 1, 1), (256, 512, 28, 3, 1, 1), (512, 512, 28, 3, 1, 1),
        (512, 512, 14, 3, 1, 1),
    ],
    "resnet18": [
        (3, 64, 224, 7, 2, 3), (64, 64, 56, 3, 1, 1), (64, 64, 56, 1, 1, 0), (64, 128, 56, 3, 2, 1),
        (64, 128, 56, 1, 2, 0), (128, 128, 28, 3, 1, 1), (128, 256, 28, 3, 2, 1), (128, 256, 28, 1, 2, 0),
        (256, 256, 14, 3, 1, 1), (256, 512, 14, 3, 2, 1), (256, 512, 14, 1, 2, 0), (512, 512, 7, 3, 1, 1),
    ],
}


def _dwconv(name, c, hw, rs, stride, pad) -> Workload:
    params = dict(n=1, c=c, h=hw, w=hw, k=c, r=rs, s=rs, stride=stride, pad=pad)
    return Workload(name, "depthwise_conv2d", params, f"{c} channels, {hw}x{hw}, {rs}x{rs}, s{stride}, p{pad}")


# (channels, input HxW, stride) of MobileNetV2's 3x3 depthwise convolutions at 224x224, first appearance order
_DEPTHWISE_TABLE = [(32, 112, 1), (96, 112, 2), (144, 56, 1), (144, 56, 2), (192, 28, 1), (192, 28, 2),
                    (384, 14, 1), (576, 14, 1), (576, 14, 2), (960, 7, 1)]


def _registry() -> dict[str, Workload]:
    reg: dict[str, Workload] = {}
    for net, rows in _CONV_TABLE.items():
        for i, row in enumerate(rows, start=1):
            w = _conv(f"{net}.conv2d.{i}", *row)
            reg[w.name] = w
    for i, (m, k, n) in enumerate([(128, 768, 768), (128, 768, 3072), (128, 3072, 768)], start=1):
        reg[f"bert-base.dense.{i}"] = Workload(
            f"bert-base.dense.{i}", "dense", dict(m=m, k=k, n=n), f"{m}x{k} @ ({n}x{k})^T"
        )
    reg["tiny.matmul.1"] = Workload("tiny.matmul.1", "matmul", dict(m=64, k=64, n=64), "64x64 @ 64x64")
    for i, (c, hw, stride) in enumerate(_DEPTHWISE_TABLE, start=1):
        reg[f"mobilenet_v2.depthwise_conv2d.{i}"] = _dwconv(f"mobilenet_v2.depthwise_conv2d.{i}", c, hw, 3, stride, 1)
    reg["tiny.conv2d.1"] = _conv("tiny.conv2d.1", 16, 16, 14, 3, 1, 1)
    reg["tiny.depthwise_conv2d.1"] = _dwconv("tiny.depthwise_conv2d.1", 32, 14, 3, 1, 1)
    return reg


WORKLOADS: dict[str, Workload] = _registry()


def list_workloads() -> list[Workload]:
    """All registered workloads, in registry order."""
    return list(WORKLOADS.values())


def get_workload(name: str) -> Workload:
    """Look up a workload by name.

    Raises
    ------
    WorkloadError
        If ``name`` is not registered; the message lists close names and ``release workloads``.
    """
    try:
        return WORKLOADS[name]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(name, WORKLOADS, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise WorkloadError(
            f"unknown workload {name!r}{hint}; `release workloads` lists the {len(WORKLOADS)} registered names"
        ) from None
