"""Targets: aliases, JSON dicts, and the light registration of tensor intrinsics.

TVM 0.27 rejects string targets such as ``"llvm -mcpu=..."``; targets are JSON dicts
(``{"kind": "llvm", "mcpu": "znver3", "num-cores": 2}``). Without ``mcpu`` LLVM emits no AVX2,
so the ``llvm`` alias fills in the host CPU (``tvm.target.codegen.llvm_get_system_cpu()``) and
its core count. The ``cuda`` alias is an NVIDIA GPU with the attributes MetaSchedule needs
(``max_threads_per_block`` and friends, see shared/reference/tvm-0.27.md).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import os
import sys
import types
from typing import Any

from .errors import TargetError, error_line

logger = logging.getLogger(__name__)

# Attributes MetaSchedule's CUDA rules need; values of an H100 (TVM tag nvidia/nvidia-h100).
_CUDA_DEFAULTS = {
    "max_threads_per_block": 1024,
    "max_num_threads": 1024,
    "max_shared_memory_per_block": 49152,
    "thread_warp_size": 32,
    "registers_per_block": 65536,
}

_ALIASES = ("llvm", "cuda")


def host_cpu() -> str:
    """The host CPU name LLVM knows (``znver3``, ``emeraldrapids``, ...)."""
    import tvm

    return str(tvm.target.codegen.llvm_get_system_cpu())


def host_cores() -> int:
    """Cores usable by this process (``os.sched_getaffinity``), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def _target_dict(spec: Any) -> dict:
    if isinstance(spec, dict):
        return dict(spec)
    if not isinstance(spec, str) or not spec.strip():
        raise TargetError(
            f"target {spec!r} is not a target: give 'llvm', 'cuda', a TVM target tag such as "
            "'nvidia/nvidia-h100', or a JSON dict like '{\"kind\": \"llvm\", \"num-cores\": 2}'"
        )
    text = spec.strip()
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as err:
            raise TargetError(f"target {spec!r} is not valid JSON ({err.msg} at column {err.colno})") from None
        if not isinstance(value, dict):
            raise TargetError(f"target {spec!r} must be a JSON object with a 'kind' field")
        return value
    if text in _ALIASES:
        return {"kind": text}
    if "/" in text:
        return {"tag": text}
    raise TargetError(
        f"target {spec!r} is not known: use 'llvm' (this CPU), 'cuda' (an NVIDIA GPU), a TVM tag "
        "(tvm.target.list_tags()), or a JSON dict; TVM 0.27 does not accept 'llvm -mcpu=...' strings"
    )


def resolve_target(spec: Any):
    """Turn a target description into a ``tvm.target.Target``.

    Parameters
    ----------
    spec : str, dict or tvm.target.Target
        ``"llvm"`` (host CPU: ``mcpu`` detected, ``num-cores`` = usable cores), ``"cuda"`` (an
        NVIDIA GPU, ``arch`` sm_90 and H100 limits unless given), a TVM tag
        (``"nvidia/nvidia-h100"``), a JSON string, or a dict. LLVM dicts without ``mcpu`` get the
        host CPU (without it LLVM uses no AVX2); CUDA dicts get the limits MetaSchedule needs.

    Returns
    -------
    tvm.target.Target

    Raises
    ------
    TargetError
        Malformed JSON, unknown alias or tag, or a kind TVM does not know.
    """
    import tvm

    if isinstance(spec, tvm.target.Target):
        return spec
    d = _target_dict(spec)
    if "tag" in d and len(d) == 1:
        try:
            return tvm.target.Target(d["tag"])
        except Exception as err:  # noqa: BLE001 - TVM raises plain errors
            raise TargetError(f"target tag {d['tag']!r} is unknown to TVM ({error_line(err)}); "
                              "see tvm.target.list_tags()") from None
    kind = d.get("kind")
    if kind is None:
        raise TargetError(f"target {spec!r} has no 'kind' field (for example 'llvm' or 'cuda')")
    if kind == "llvm":
        d.setdefault("mcpu", host_cpu())
        d.setdefault("num-cores", host_cores())
    elif kind == "cuda":
        d.setdefault("arch", "sm_90")
        for key, value in _CUDA_DEFAULTS.items():
            d.setdefault(key, value)
    try:
        return tvm.target.Target(d)
    except Exception as err:  # noqa: BLE001
        raise TargetError(f"target {json.dumps(d)} is not a valid TVM target: {error_line(err)}") from None


def target_to_json(target) -> str:
    """A JSON string of ``target`` that :func:`resolve_target` accepts back (stable key order)."""
    d = {k: _jsonable(v) for k, v in dict(target.export()).items()}
    if not d.get("tag"):
        d.pop("tag", None)
    d.pop("keys", None)
    host = d.pop("host", None)
    if host:
        d["host"] = host
    return json.dumps(d, sort_keys=True)


def _jsonable(v):
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, dict) or hasattr(v, "items"):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)) or hasattr(v, "__len__"):
        return [_jsonable(x) for x in v]
    return str(v)


def device_type(target) -> str:
    """Runtime device name for a target: ``"cpu"`` for llvm, else the target kind (``"cuda"``)."""
    kind = target.kind.name
    return "cpu" if kind in ("llvm", "c") else kind




_INTRIN_PKG = "tvm.s_tir.tensor_intrin"


def ensure_tensor_intrinsics(target=None) -> None:
    """Register only the tensor intrinsics ``target`` can use, instead of all of them.

    ``import tvm.s_tir.tensor_intrin`` registers every backend's intrinsics and takes ~30-45 s
    on these machines (22 s of it CUDA). MetaSchedule's ``TuneContext`` and default builder do
    that import. This function installs a light package object for ``tvm.s_tir.tensor_intrin``
    (so those imports become no-ops) and imports only the submodule the target needs: ``x86``
    for an x86 llvm target (0.4 s), ``arm_cpu`` / ``riscv_cpu`` for those CPUs, ``cuda`` for CUDA
    (still ~20 s), ``rocm`` for ROCm. Other kinds import the full package. Idempotent.
    """
    import tvm  # noqa: F401

    if target is None:
        subs = ["x86"]
    else:
        kind = target.kind.name
        triple = str(target.attrs.get("mtriple", "")) + str(target.attrs.get("mcpu", ""))
        if kind == "llvm":
            if any(a in triple for a in ("aarch64", "arm", "neoverse", "cortex", "apple")):
                subs = ["arm_cpu"]
            elif "riscv" in triple:
                subs = ["riscv_cpu"]
            else:
                subs = ["x86"]
        elif kind == "cuda":
            subs = ["cuda"]
        elif kind == "rocm":
            subs = ["rocm"]
        elif kind == "c":
            subs = []
        else:
            importlib.import_module(_INTRIN_PKG)
            return
    pkg = sys.modules.get(_INTRIN_PKG)
    if pkg is None:
        spec = importlib.util.find_spec(_INTRIN_PKG)
        pkg = types.ModuleType(_INTRIN_PKG)
        pkg.__path__ = list(spec.submodule_search_locations)
        pkg.__spec__ = spec
        pkg.__file__ = spec.origin
        pkg.__package__ = _INTRIN_PKG
        sys.modules[_INTRIN_PKG] = pkg
        import tvm.s_tir as s_tir

        s_tir.tensor_intrin = pkg
    for sub in subs:
        name = f"{_INTRIN_PKG}.{sub}"
        if name not in sys.modules:
            logger.debug("registering tensor intrinsics %s", name)
            importlib.import_module(name)
