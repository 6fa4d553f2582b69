"""Targets: aliases, JSON dicts, and the light registration of tensor intrinsics.

TVM 0.27 rejects string targets such as ``"llvm -mcpu=..."``; targets are JSON dicts
(``{"kind": "llvm", "mcpu": "znver3", "num-cores": 2}``). Without ``mcpu`` LLVM emits no AVX2,
so the ``llvm`` alias fills in the host CPU (``tvm.target.codegen.llvm_get_system_cpu()``) and
its core count. The ``cuda`` alias is an NVIDIA GPU with the attributes MetaSchedule needs
(``max_threads_per_block`` and friends, see shared/reference/tvm-0.27.md).

Every form (alias, tag, JSON string, dict, ``Target.export()`` map, ``tvm.target.Target``) goes
through the same checks: an ``mcpu`` LLVM does not know for the triple is refused with close
matches (LLVM would fall back to generic code with a warning per build), ``num-cores`` is filled,
and the old string form gets its JSON equivalent in the refusal.
"""

from __future__ import annotations

import difflib
import functools
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


@functools.lru_cache(maxsize=1)
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
    if isinstance(spec, dict) or (hasattr(spec, "items") and not isinstance(spec, str)):
        return _jsonable(spec)  # a dict, or the Map of ``Target.export()`` (keys as an FFI Array)
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
    if "/" in text and " " not in text:
        return {"tag": text}
    old = _old_string_form(text)
    if old is not None:
        raise TargetError(
            f"target {spec!r} is TVM's old string form, which TVM 0.27 no longer accepts; give the JSON dict "
            f"instead: '{json.dumps(old)}'"
        )
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
        (``"nvidia/nvidia-h100"``), a JSON string, a dict (also as ``Target.export()`` writes it,
        with ``tag`` and ``keys``), or a ``tvm.target.Target``, checked like its exported dict.
        LLVM targets for this machine's triple (no ``mtriple``, or the host's) without ``mcpu``
        get the host CPU (without it LLVM uses no AVX2), and ``"mcpu": "native"`` means the host
        CPU too; every LLVM target without ``num-cores`` gets the usable cores (MetaSchedule needs
        it); CUDA dicts get the limits MetaSchedule needs.

    Returns
    -------
    tvm.target.Target

    Raises
    ------
    TargetError
        Malformed JSON, unknown alias or tag, a kind TVM does not know, an ``mcpu`` LLVM does not
        know for the target's triple (the message names close matches), or TVM's old string form
        (``"llvm -mcpu=core-avx2"``; the message gives the JSON dict to type instead).
    """
    import tvm

    if isinstance(spec, tvm.target.Target):
        spec = spec.export()  # validated like a dict: a Target built by hand may lack num-cores or mcpu
    d = _target_dict(spec)
    if len(d) > 1 and not d.get("tag"):
        d.pop("tag", None)  # Target.export() writes "tag": "" for targets not made from a tag
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
        on_host = not d.get("mtriple") or str(d["mtriple"]) == _host_triple()
        if on_host and d.get("mcpu", "native") == "native":
            d["mcpu"] = host_cpu()
        d.setdefault("num-cores", host_cores())
        _check_mcpu(d)
    elif kind == "cuda":
        d.setdefault("arch", "sm_90")
        for key, value in _CUDA_DEFAULTS.items():
            d.setdefault(key, value)
    try:
        return tvm.target.Target(d)
    except Exception as err:  # noqa: BLE001
        raise TargetError(f"target {json.dumps(d)} is not a valid TVM target: {error_line(err)}") from None


@functools.lru_cache(maxsize=None)
def _host_triple() -> str:
    import tvm

    return str(tvm.target.codegen.llvm_get_system_triple())


@functools.lru_cache(maxsize=None)
def llvm_cpus(mtriple: str | None = None) -> tuple[str, ...] | None:
    """CPU names LLVM knows for ``mtriple`` (default: this machine's triple).

    Parameters
    ----------
    mtriple : str, optional
        An LLVM target triple such as ``"aarch64-linux-gnu"``.

    Returns
    -------
    tuple of str or None
        Sorted names from ``tvm.target.codegen.llvm_get_cpu_archlist``; None when the triple's
        architecture is not one this LLVM was built with (LLVM aborts on asking for those, so
        their ``mcpu`` is left unchecked).
    """
    import tvm
    from tvm.target import codegen

    d = {"kind": "llvm"}
    if mtriple:
        arch = mtriple.split("-", 1)[0]
        archs = [str(a) for a in codegen.llvm_get_targets()] + ["arm64", "i486", "i586", "i686", "amd64"]
        if not any(arch.startswith(a) for a in archs):
            return None
        d["mtriple"] = mtriple
    return tuple(sorted(str(c) for c in codegen.llvm_get_cpu_archlist(tvm.target.Target(d))))


def _check_mcpu(d: dict) -> None:
    """Refuse an ``mcpu`` LLVM does not know for the target's triple (it would build generic code)."""
    mcpu = d.get("mcpu")
    if not mcpu:
        return
    names = llvm_cpus(str(d["mtriple"]) if d.get("mtriple") else None)
    if names is None or str(mcpu) in names:
        return
    close = difflib.get_close_matches(str(mcpu), names, n=4, cutoff=0.6)
    triple = str(d["mtriple"]) if d.get("mtriple") else None
    if triple is None or triple == _host_triple():
        where, hint = "this machine's triple", f"; leave mcpu out for this machine's CPU ({host_cpu()})"
        listing = "{'kind': 'llvm'}"
    else:
        where, hint, listing = f"the triple {triple}", "", f"{{'kind': 'llvm', 'mtriple': '{triple}'}}"
    raise TargetError(
        f"target mcpu {mcpu!r} is not a CPU LLVM knows for {where}"
        + (f"; close matches: {', '.join(close)}" if close else "")
        + f"{hint}; the full list: tvm.target.codegen.llvm_get_cpu_archlist(tvm.target.Target({listing}))"
    )


def _old_string_form(text: str) -> dict | None:
    """The JSON dict of an old TVM target string (``"llvm -mcpu=core-avx2 -num-cores=4"``), or None."""
    tokens = text.split()
    if len(tokens) < 2 or not tokens[0].replace("_", "").isalnum() or not tokens[1].startswith("-"):
        return None
    out: dict = {"kind": tokens[0]}
    i = 1
    while i < len(tokens):
        tok = tokens[i].lstrip("-")
        if not tokens[i].startswith("-") or not tok:
            return None
        if "=" in tok:
            key, value = tok.split("=", 1)
        elif i + 1 < len(tokens) and not tokens[i + 1].startswith("-"):
            key, value = tok, tokens[i + 1]
            i += 1
        else:
            key, value = tok, True
        if isinstance(value, str):
            if key in ("mattr", "libs", "keys"):
                value = [v for v in value.split(",") if v]
            elif value.lstrip("-").isdigit():
                value = int(value)
        out[key] = value
        i += 1
    return out


def target_to_json(target) -> str:
    """A JSON string of ``target`` that :func:`resolve_target` accepts back (stable key order)."""
    return canonical_target_json({k: _jsonable(v) for k, v in dict(target.export()).items()})


def canonical_target_json(d: dict) -> str:
    """The canonical JSON of an exported target dict: no empty ``tag``, no ``keys``, sorted keys
    (the form records store; :func:`target_to_json` of a ``Target``)."""
    d = {str(k): v for k, v in d.items()}
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


#: x86 vector levels, widest first: (feature LLVM reports for the CPU, class name)
_X86_LEVELS = (("avx512f", "avx512"), ("avx2", "avx2"), ("avx", "avx"), ("sse4.2", "sse4"))


@functools.lru_cache(maxsize=256)
def _isa_class_of_json(text: str) -> str:
    import tvm
    from tvm.target.codegen import target_has_features

    try:
        d = json.loads(text)
    except ValueError:
        return text
    if not isinstance(d, dict):
        return text
    kind = str(d.get("kind", "?"))
    if kind == "cuda":
        return f"cuda {d.get('arch') or 'sm_?'}"
    if kind != "llvm":
        return " ".join([kind] + [f"{k}={d[k]}" for k in ("mtriple", "arch", "mcpu") if d.get(k)])
    triple = str(d.get("mtriple") or _host_triple())
    arch = triple.split("-", 1)[0]
    probe = {k: d[k] for k in ("kind", "mcpu", "mtriple", "mattr") if d.get(k)}
    try:
        target = tvm.target.Target(probe)
    except Exception:  # noqa: BLE001 - a CPU this LLVM does not know: its exact name is all we have
        return f"llvm {arch} mcpu={d.get('mcpu')}"

    def has(feature: str) -> bool:
        try:
            return bool(target_has_features(feature, target))
        except Exception:  # noqa: BLE001 - a feature the architecture does not have
            return False

    if arch in ("x86_64", "i386", "i686", "amd64") or arch.startswith("x86"):
        level = next((name for feature, name in _X86_LEVELS if has(feature)), "sse2")
    elif arch in ("aarch64", "arm64"):
        level = "sve" if has("sve") else "neon"
    elif arch.startswith("arm"):
        level = "neon" if has("neon") else "scalar"
    elif arch.startswith("riscv"):
        level = "rvv" if has("v") else "scalar"
    else:
        level = str(d.get("mcpu") or "generic")
    return f"llvm {arch} {level}"


def isa_class(target) -> str:
    """The instruction-set class of a target: what decides whether a schedule is valid and how it
    vectorizes, without the exact machine.

    Records are matched by program plus this class (``release.task.Task.key``), so a log or a
    knowledge base written on one CPU serves every CPU of the same class: an AMD Zen 4 and an Intel
    Xeon with AVX-512 share ``llvm x86_64 avx512``. The exact machine (``mcpu``, ``num-cores``, the
    CPU's model name on the record) stays on each record as provenance
    (:func:`machine_of`).

    Parameters
    ----------
    target : str, dict or tvm.target.Target
        A target JSON text (a record's ``target``), its dict, or a ``Target``.

    Returns
    -------
    str
        ``"llvm <arch> <vector level>"`` for CPUs (x86: ``avx512`` when LLVM reports ``avx512f``
        for the target's ``mcpu``/``mattr``, else ``avx2``, ``avx``, ``sse4``, ``sse2``; AArch64:
        ``sve`` or ``neon``); ``"cuda <arch>"`` (``sm_90``) for CUDA; other kinds their kind and
        ``mtriple``/``arch``/``mcpu``. An ``mcpu`` this LLVM does not know keeps its name
        (``llvm x86_64 mcpu=NAME``: matched only with itself). Cached per target text.

    Notes
    -----
    The class is the vector width codegen targets, not every extension: CPUs of one class that
    differ in VNNI, BF16 or AMX share float32 schedules; a schedule that tensorizes with an
    intrinsic one of them lacks fails its replay or build there and is skipped like any invalid
    config.
    """
    if hasattr(target, "export"):
        text = target_to_json(target)
    elif isinstance(target, str):
        text = target
    else:
        text = canonical_target_json(dict(target))
    return _isa_class_of_json(text)


def machine_of(target, machine: str = "") -> str:
    """A readable name of the exact machine behind a target: ``mcpu``, cores and CPU model.

    Parameters
    ----------
    target : str or dict
        Target JSON text (a record's ``target``) or its dict.
    machine : str
        The CPU model name stamped on a record (:func:`host_machine`), "" when unknown (records
        written before the field existed, remote devices).

    Returns
    -------
    str
        ``"<mcpu>/<cores>c"`` (``"znver4/2c"``), followed by ``" (<model name>)"`` when known; for
        GPUs the kind and arch.
    """
    try:
        d = json.loads(target) if isinstance(target, str) else dict(target)
    except (ValueError, TypeError):
        return str(target)
    if d.get("kind") == "llvm":
        name = f"{d.get('mcpu') or 'generic'}/{d.get('num-cores', '?')}c"
    else:
        name = " ".join(str(d[k]) for k in ("kind", "arch", "tag") if d.get(k))
    return f"{name} ({machine})" if machine else name


def same_machine(target_a, machine_a: str, target_b, machine_b: str) -> bool:
    """Whether two records' machines are the same: equal ISA class, ``mcpu`` and ``num-cores``,
    and equal CPU model names where both are known (one unknown name, as on records older than the
    field, does not split them)."""
    try:
        a = json.loads(target_a) if isinstance(target_a, str) else dict(target_a)
        b = json.loads(target_b) if isinstance(target_b, str) else dict(target_b)
    except (ValueError, TypeError):
        return target_a == target_b
    for k in ("kind", "mcpu", "mtriple", "arch", "num-cores"):
        if a.get(k) != b.get(k):
            return False
    return not (machine_a and machine_b and machine_a != machine_b)


@functools.lru_cache(maxsize=1)
def _cpu_model_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or ""


def host_machine(target) -> str:
    """The CPU model name to stamp on a record measured for ``target``: this machine's
    (``/proc/cpuinfo``'s ``model name``) when the target is this host's CPU (an LLVM target whose
    ``mcpu`` is the host's and whose triple is the host's); "" otherwise (a remote device through
    RPC with another CPU, a GPU), where only the target's fields name the machine."""
    try:
        d = json.loads(target) if isinstance(target, str) else dict(target)
    except (ValueError, TypeError):
        return ""
    if d.get("kind") != "llvm" or (d.get("mtriple") and str(d["mtriple"]) != _host_triple()):
        return ""
    return _cpu_model_name() if d.get("mcpu") == host_cpu() else ""


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

    This is process-wide state (``sys.modules`` and ``tvm.s_tir.tensor_intrin``), so it is set
    in one place per way into TVM, each an entry point; code that receives a
    :class:`release.task.Task` relies on the task's creation having called it:

    - task creation: :class:`release.task.Task` ``__init__`` (every task, also one a Ray worker
      rebuilds from JSON); the knob space, the program features and ``MSEvolutionaryTuner`` hold a task;
    - build workers: ``release.measure._worker.init_worker``, the initializer of
      :class:`release.measure.LocalBuilder`'s worker pool and of :func:`release.strategy.fast_builder`'s;
    - Relax model entry points that use MetaSchedule without a task: ``release.relax.extract.prepare``,
      ``release.relax.compile.compile_model`` (in its body, ``_compile_model``, inside the capture of TVM's
      output), ``release.relax.tune.tune_with_metaschedule``; and
      :func:`release.strategy.fast_builder` (``tune_tir`` / ``tune_relax`` users call it before
      MetaSchedule's ``TuneContext`` imports).

    ``tests/test_architecture.py`` asserts that the calls in ``release/`` are exactly these.

    Parameters
    ----------
    target : tvm.target.Target, optional
        Default None: an x86 CPU.
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


#: FMA instructions of the widest vector width each CPU family issues per cycle and core (fp32). Not
#: something a machine reports: from the vendors' optimization manuals. AMD Zen 4 runs AVX-512 on 256-bit
#: halves (one 512-bit FMA a cycle), Zen 5 server parts have two full 512-bit pipes; Intel's AVX-512 server
#: parts two ports (some Xeon Silver/Bronze one), its client parts with AVX-512 one; AVX2 cores two 256-bit.
FMA_UNITS = {"znver4": 1, "znver5": 2, "rocketlake": 1, "icelake-client": 1, "tigerlake": 1, "znver1": 1}
_FMA_UNITS_DEFAULT = 2
#: CPU flags only Intel's server parts have (Sapphire Rapids and later: AMX), which have two 512-bit FMA
#: ports. A VM may report another family's model number (KVM shows this class of Xeon as ``rocketlake``,
#: a client part with one port); the flags it passes through are the better witness.
_SERVER_FLAGS = ("amx_tile",)


def fma_units(mcpu: str, flags=()) -> tuple[int, str]:
    """FMA units a core issues per cycle at its widest vector width, and where that figure comes from.

    Parameters
    ----------
    mcpu : str
        LLVM's CPU name (``target.mcpu``).
    flags : iterable of str
        The CPU's flags (``/proc/cpuinfo``); only given for the host.

    Returns
    -------
    (int, str)
        :data:`FMA_UNITS` of ``mcpu`` (else 2), raised to 2 when ``flags`` show an Intel server part
        (:data:`_SERVER_FLAGS`) that the family's table entry would count as one.
    """
    units = FMA_UNITS.get(mcpu, _FMA_UNITS_DEFAULT)
    why = f"the CPU family {mcpu}" if mcpu in FMA_UNITS else f"assumed: {mcpu} not in the table"
    server = [f for f in _SERVER_FLAGS if f in set(flags)]
    if units < 2 and server and mcpu.startswith(("rocketlake", "icelake", "tigerlake")):
        units, why = 2, f"an Intel server part: flag {server[0]}, though LLVM names the CPU {mcpu}"
    return units, why


def _cpu_flags() -> list[str]:
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return []


def fma_peak(target=None) -> dict:
    """The CPU's fp32 FMA peak: vector lanes x FMA units x 2 FLOP x clock x cores.

    Parameters
    ----------
    target : str, dict or tvm.target.Target, optional
        An LLVM target (default this host's: :func:`resolve_target` of ``"llvm"``); its ISA class gives the
        lanes (AVX-512 16, AVX2/AVX 8, SSE/NEON 4), its ``mcpu`` the FMA units (:func:`fma_units`:
        :data:`FMA_UNITS`, else 2; for this host's CPU also its flags), its ``num-cores`` the cores.

    Returns
    -------
    dict
        ``lanes``, ``fma_units``, ``ghz`` (``cpu MHz`` of ``/proc/cpuinfo``: the clock the machine reports,
        nominal on most VMs, not the turbo clock), ``cores``, ``gflops`` (the peak, GFLOPS), ``mcpu``, and
        ``note`` saying where each factor comes from. ``gflops`` is None when the clock is unknown.
    """
    d = json.loads(target_to_json(resolve_target(target or "llvm")))
    cls = isa_class(d)
    lanes = 16 if cls.endswith("avx512") else 8 if cls.endswith(("avx2", "avx")) else 4
    mcpu = d.get("mcpu") or "generic"
    units, why = fma_units(mcpu, _cpu_flags() if mcpu == host_cpu() else ())
    cores = int(d.get("num-cores") or os.cpu_count() or 1)
    ghz = None
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("cpu MHz"):
                    ghz = float(line.split(":")[1]) / 1e3
                    break
    except (OSError, ValueError):
        pass
    peak = lanes * units * 2 * ghz * cores if ghz else None
    note = (f"{lanes} fp32 lanes ({cls}) x {units} FMA unit{'s' if units != 1 else ''} ({why}) "
            f"x 2 FLOP x {ghz:.3f} GHz (/proc/cpuinfo) x {cores} cores" if ghz else "clock unknown")
    return {"lanes": lanes, "fma_units": units, "ghz": ghz, "cores": cores, "gflops": peak, "mcpu": mcpu,
            "note": note}
