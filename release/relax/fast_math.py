"""Vectorizable exp and erf in the legalized model: GELU, erf, exp, sigmoid and softmax through TVM's fast forms.

TVM's LLVM code generation lowers ``T.erf`` and ``T.exp`` on float32 to calls of libm's ``erff`` and ``expf``,
one element at a time: a vectorized, parallel loop still makes one scalar call per element. A BERT-base layer's
GELU (128 x 3,072) took 1.1-2.5 ms that way, more than its 768 x 768 projection; softmax pays the same on ``exp``.
ONNX Runtime runs both with vectorized polynomial approximations (MLAS).

:data:`FAST_MATH_LEGALIZE` is a ``LegalizeOps`` ``customize_legalize_map`` that writes these operators with TVM's
own approximations (``topi.fast_erf``, ``topi.fast_exp``, ``topi.nn.fast_softmax``: rational and polynomial
forms, no call), which LLVM vectorizes: the GELU above takes 0.1 ms. Measured error on float32 (2026-12-03,
``tests/test_fast_math.py``): GELU within 1.2e-6 absolute of PyTorch's exact GELU on [-8, 8] (TVM's exact
form: 9.5e-7), exp within 3e-7 relative where the result is a normal float (results below ~1e-38 flush to 0),
softmax within 2.6e-6 absolute, as the exact form. The same approximations as Relay's ``FastMath`` pass and
Relax's ``FastMathTransform`` (which rewrites ``relax.exp``/``relax.erf`` but not ``relax.nn.gelu``, the
operator the PyTorch frontend emits).

Only float32 and float16 (computed in float32, as TVM's own GELU legalization does) are rewritten; other dtypes
keep TVM's legalization. Task extraction and compilation both legalize through
:func:`release.relax.layout._fuse_passes`, so tuned records and compiled functions agree.
"""

from __future__ import annotations

import math

FAST_DTYPES = ("float32", "float16")


def _default(name: str):
    """TVM's registered legalization of operator ``name``."""
    import tvm

    return tvm.ir.Op.get(name).get_attr("FLegalize")


def _in_float32(fn, x):
    """``fn`` computed in float32 for a float16 ``x``, as is for float32."""
    from tvm import topi

    if x.dtype == "float16":
        return topi.cast(fn(topi.cast(x, "float32")), "float16")
    return fn(x)


def _unary(name: str, te_fn, hint: str):
    def legalize(bb, call):
        x = call.args[0]
        if str(x.ty.dtype) not in FAST_DTYPES:
            return _default(name)(bb, call)
        return bb.call_te(lambda t: _in_float32(te_fn, t), x, primfunc_name_hint=hint)

    return legalize


def _gelu(x):
    from tvm import tirx, topi

    half = tirx.const(0.5, x.dtype)
    return x * (half + topi.fast_erf(x * tirx.const(math.sqrt(0.5), x.dtype)) * half)


def _sigmoid(x):
    from tvm import tirx, topi

    one = tirx.const(1.0, x.dtype)
    return one / (one + topi.fast_exp(-x))


def _softmax(bb, call):
    from tvm import topi

    x = call.args[0]
    if str(x.ty.dtype) not in FAST_DTYPES:
        return _default("relax.nn.softmax")(bb, call)
    axis = int(call.attrs.axis)
    return bb.call_te(lambda t: _in_float32(lambda u: topi.nn.fast_softmax(u, axis), t), x,
                      primfunc_name_hint="softmax")


def fast_math_legalize() -> dict:
    """``{operator name: legalization}`` for ``relax.transform.LegalizeOps(customize_legalize_map=...)``: GELU,
    erf, exp, sigmoid and softmax through ``topi.fast_erf``/``fast_exp``/``nn.fast_softmax`` on float32 and
    float16; other dtypes keep TVM's legalization. See the module docstring for the measured error."""
    from tvm import topi

    return {
        "relax.nn.gelu": _unary("relax.nn.gelu", _gelu, "gelu"),
        "relax.erf": _unary("relax.erf", topi.fast_erf, "erf"),
        "relax.exp": _unary("relax.exp", topi.fast_exp, "exp"),
        "relax.sigmoid": _unary("relax.sigmoid", _sigmoid, "sigmoid"),
        "relax.nn.softmax": _softmax,
    }
