#!/usr/bin/env python3
"""CUDA on a lent GPU: tune, re-time against PyTorch, check outputs; or dry-run on a CPU.

One driver, called by ``benchmarks/cuda/run_device.sh`` step by step (each step under its own
``timeout``) so that a run cut short still leaves its partial results:

``env``
    Machine, driver, CUDA and library versions -> ``OUT/env.json``.
``dry-run``
    Every step up to the first CUDA launch, on any machine (no GPU needed): CUDA tasks, knob
    spaces, legality of sampled configs (MetaSchedule's GPU postprocessors: thread bindings,
    shared memory, ``VerifyGPUCode``), kernels generated as CUDA C and exported through the tuning
    build pool, each tuner's first proposals, the PyTorch reference operators (on the CPU)
    against each task's reference, and the runner's device check (where a machine without a GPU
    stops) -> ``OUT/dryrun.json``.
``tune``
    ``WORKLOADS x TUNERS`` at an equal trial budget through the local builder and runner, one
    log per run (``LOGS/<workload>.<tuner>.s<seed>.jsonl``, every measurement flushed as it
    completes), each run capped in wall time; all runs share one build pool (the CUDA tensor
    intrinsics are imported once per worker, not once per run) -> ``OUT/tune.json``.
``retime``
    Every run's best record compiled by TVM's ``compile_tir`` from its log, run on the GPU and
    checked against the task's reference, then timed side by side with PyTorch's operator on the
    same GPU (``conv2d``: cuDNN, ``linear``: cuBLAS; strict FP32, TF32 shown apart), all kernels of
    a workload interleaved over ``--rounds`` -> ``OUT/retime.json``.
``proposals``
    No GPU needed: each tuner's first trials (``--trials``) on each workload through a measurer that
    replays and checks every config as the real one does but builds and runs nothing (stand-in costs):
    the share of proposals MetaSchedule's verifier accepts and the wall time spent proposing per trial
    -> ``OUT/proposals.json``; with ``--seed-log``, the transfer-tuning seeds those logs give each workload.
``model``
    Optional (``RELEASE_CUDA_MODEL=1``): a short ``tune-model`` of ResNet-18 on CUDA, compiled
    with ``compile_relax``, checked and timed on the GPU against PyTorch CUDA eager ->
    ``OUT/model.json``.

Every figure written is measured by this script on the machine named in ``env.json``; a step
that cannot run (no GPU, no CUDA PyTorch) writes why instead of a figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from release.callback import Callback  # noqa: E402 - after the checkout is on the path

WORKLOADS = ["resnet18.conv2d.6", "bert-base.dense.2"]
TUNERS = ["xgb", "release+", "ms-evolutionary"]
#: tuners without rounds of a plan size (``get_tuner`` refuses ``plan_size`` for them)
NO_PLAN = ("random", "grid", "ga")
#: the CLI's ``cuda`` alias: sm_90 with the H100/H200 limits MetaSchedule needs (release.target)
TARGET = "cuda"


def log(msg: str) -> None:
    """Progress line with a wall-clock stamp (stdout, flushed: a killed step still shows it)."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def write_json(path: str, obj) -> None:
    """Write ``obj`` to ``path`` atomically (a kill mid-write leaves the previous version)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, default=str, allow_nan=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _cmd(argv: list[str], timeout: float = 30.0) -> str:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        return (p.stdout + p.stderr).strip()
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"unavailable: {err}"


def gpu_present() -> bool:
    """True if TVM's CUDA runtime sees device 0."""
    import tvm

    try:
        return bool(tvm.cuda(0).exist)
    except Exception:  # noqa: BLE001 - no CUDA runtime library at all
        return False


def cuda_compile_mode() -> str:
    """TVM's CUDA C -> GPU code backend as configured here (``TVM_CUDA_COMPILE_MODE``, default
    ``nvrtc``, which needs ``cuda-bindings``), and whether that backend is available.

    ``tvm.compile`` itself only generates CUDA C (the device module it exports holds the source,
    no PTX or cubin; on the project's machines neither nvcc nor NVRTC runs then): the binary is
    made when the module is loaded on a GPU.
    """
    mode = os.environ.get("TVM_CUDA_COMPILE_MODE", "nvrtc").lower()
    if mode == "nvcc":
        return "nvcc" if shutil.which("nvcc") else "nvcc (not on PATH)"
    try:
        import cuda.bindings.nvrtc  # noqa: F401

        return "nvrtc"
    except ImportError:
        return "nvrtc (cuda-bindings missing: set TVM_CUDA_COMPILE_MODE=nvcc)"


# ------------------------------------------------------------------------------------------- env
def cmd_env(args) -> int:
    import importlib.metadata as md

    info: dict = {"time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "python": sys.version,
                  "executable": sys.executable, "platform": platform.platform(), "cores": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            info["cpu"] = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        info["cpu"] = ""
    vers = {}
    for pkg in ("apache-tvm", "apache-tvm-ffi", "torch", "xgboost", "xgboost-cpu", "numpy", "scipy",
                "scikit-learn", "cuda-bindings", "tornado", "pytest", "release-tvm"):
        try:
            vers[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            vers[pkg] = None
    info["versions"] = vers
    info["nvidia_smi"] = _cmd(["nvidia-smi"])
    info["nvidia_smi_query"] = _cmd(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm,"
                                     "clocks.max.mem,power.limit", "--format=csv"])
    info["nvcc"] = _cmd(["nvcc", "--version"]) if shutil.which("nvcc") else "nvcc not on PATH"
    info["cuda_compile_mode"] = cuda_compile_mode()
    info["LD_LIBRARY_PATH"] = os.environ.get("LD_LIBRARY_PATH", "")
    import tvm

    from release.target import resolve_target, target_to_json

    info["tvm_cuda"] = {"exist": gpu_present()}
    if info["tvm_cuda"]["exist"]:
        dev = tvm.cuda(0)
        for attr in ("device_name", "compute_version", "multi_processor_count", "max_shared_memory_per_block",
                     "max_threads_per_block", "warp_size", "max_clock_rate"):
            try:
                info["tvm_cuda"][attr] = getattr(dev, attr)
            except Exception as err:  # noqa: BLE001 - an attribute this TVM does not have
                info["tvm_cuda"][attr] = f"unavailable: {err}"[:200]
    info["target"] = target_to_json(resolve_target(args.target))
    try:
        import torch

        info["torch"] = {"version": torch.__version__, "cuda_build": torch.version.cuda,
                         "cuda_available": torch.cuda.is_available()}
        if torch.cuda.is_available():
            info["torch"].update(device=torch.cuda.get_device_name(0),
                                 capability=list(torch.cuda.get_device_capability(0)),
                                 cudnn=torch.backends.cudnn.version())
    except Exception as err:  # noqa: BLE001
        info["torch"] = {"error": f"{type(err).__name__}: {err}"}
    write_json(os.path.join(args.out, "env.json"), info)
    log(f"env: tvm {vers['apache-tvm']}, torch {info['torch'].get('version')} (CUDA "
        f"{info['torch'].get('cuda_available')}), TVM sees GPU: {info['tvm_cuda']['exist']}, "
        f"CUDA compile: {info['cuda_compile_mode']}")
    return 0


# -------------------------------------------------------------------------------- torch reference
def torch_op(workload: str, inputs, device: str):
    """The PyTorch operator equal to ``workload`` on ``inputs`` (NumPy arrays in argument order).

    Returns ``(f, tensors)``: ``f()`` computes the output from the tensors already on ``device``
    (``conv2d``: ``torch.nn.functional.conv2d``, cuDNN on CUDA; ``dense``: ``linear``, cuBLAS;
    ``matmul``: ``@``).
    """
    import torch

    from release.workloads import get_workload

    w = get_workload(workload)
    p = w.params
    xs = [torch.from_numpy(x).to(device) for x in inputs]
    if w.op == "conv2d":
        def f():
            return torch.nn.functional.conv2d(xs[0], xs[1], stride=p["stride"], padding=p["pad"])
    elif w.op == "dense":
        def f():
            return torch.nn.functional.linear(xs[0], xs[1])
    else:
        def f():
            return xs[0] @ xs[1]
    return f, xs


def torch_cuda_ms(f, number: int = 50, repeat: int = 5) -> list[float]:
    """``repeat`` means (ms) of ``number`` back-to-back launches of ``f``, timed by CUDA events."""
    import torch

    with torch.no_grad():
        for _ in range(5):
            f()
        torch.cuda.synchronize()
        out = []
        for _ in range(repeat):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(number):
                f()
            b.record()
            torch.cuda.synchronize()
            out.append(a.elapsed_time(b) / number)
    return out


# -------------------------------------------------------------------------------------- dry run
def cmd_dry_run(args) -> int:
    """Every step up to the first CUDA launch (see the module docstring)."""
    import numpy as np
    import tvm

    from release.errors import MeasureError, ReleaseError
    from release.measure import LocalBuilder, LocalRunner
    from release.measure.measure import ErrorKind
    from release.task import create_task
    from release.tuners import get_tuner

    res: dict = {"target": args.target, "workloads": {}, "cuda_compile_mode": cuda_compile_mode(),
                 "gpu_present": gpu_present(), "ms_population": args.ms_population}
    path = os.path.join(args.out, "dryrun.json")
    builder = None if args.no_pool else LocalBuilder(n_parallel=args.n_parallel, timeout=120)
    ok = True
    try:
        for wname in args.workloads:
            r: dict = {}
            res["workloads"][wname] = r
            t0 = time.perf_counter()
            task = create_task(wname, args.target)
            sp = task.config_space
            r["space_s"] = round(time.perf_counter() - t0, 2)
            r.update(target=task.target_json, n_spaces=len(sp.spaces), n_knobs=sp.n_knobs, size=float(sp.size),
                     knob_kinds=sorted({k.kind for k in sp.knobs}), gflop=task.flop / 1e9)
            log(f"dry-run {wname}: {len(sp.spaces)} design spaces, {sp.n_knobs} knobs, {sp.size:.3g} configs "
                f"({r['space_s']} s)")
            # legality of random configs under the GPU postprocessors
            rng = np.random.default_rng(args.seed)
            t0 = time.perf_counter()
            valid, reasons, tried = [], {}, 0
            uniform = sp.canonicalize((rng.random((args.n_sample, sp.n_knobs)) * sp.dims).astype(np.int64))
            if hasattr(sp, "feasible"):  # the limits checked on the knobs: their share of uniform draws
                r["within_limits_share"] = round(float(sp.feasible(uniform).mean()), 4)
            for c in uniform:
                tried += 1
                good = verifier_accepts(sp, c)
                why = "" if good else sp.is_valid(c)[1]
                if good:
                    valid.append(tuple(int(x) for x in c))
                else:
                    key = why.split(":")[0][:80]
                    reasons[key] = reasons.get(key, 0) + 1
                if len(valid) >= args.n_build:
                    break
            r.update(sampled=tried, valid=len(valid), invalid_reasons=reasons,
                     sample_s=round(time.perf_counter() - t0, 2))
            log(f"dry-run {wname}: {len(valid)} valid of {tried} random configs; invalid: {reasons}")
            if not valid:
                ok = False
                continue
            # CUDA source of one kernel, then the tuning build pool (what `release tune` does)
            sch = sp.apply(valid[0])
            t0 = time.perf_counter()
            lib = tvm.compile(sch.mod, target=task.target)
            src = lib.mod.imports[0].inspect_source() if lib.mod.imports else ""
            r.update(compile_s=round(time.perf_counter() - t0, 2), cuda_source_chars=len(src),
                     has_global_kernel="__global__" in src)
            ok &= "__global__" in src
            log(f"dry-run {wname}: CUDA source {len(src)} chars (__global__: {'__global__' in src}), "
                f"compiled in {r['compile_s']} s")
            if builder is not None:
                t0 = time.perf_counter()
                built = builder.build([sp.apply(c).mod for c in valid], task.target_json)
                r["build_pool_s"] = round(time.perf_counter() - t0, 2)
                r["builds"] = [{"config": list(c), "ok": kind == ErrorKind.NONE, "error": msg[:200],
                                "bytes": os.path.getsize(p) if p and os.path.exists(p) else 0,
                                "build_s": round(s, 3)} for c, (p, s, kind, msg) in zip(valid, built)]
                n_ok = sum(b["ok"] for b in r["builds"])
                ok &= n_ok == len(valid)
                log(f"dry-run {wname}: {n_ok}/{len(valid)} built by the tuning build pool in {r['build_pool_s']} s")
            # each tuner's first proposals (search, no measurement)
            r["tuners"] = {}
            for tname in args.tuners:
                t0 = time.perf_counter()
                try:
                    kw = {"plan_size": args.plan_size} if args.plan_size and tname not in NO_PLAN else {}
                    if tname == "ms-evolutionary":
                        kw["population_size"] = args.ms_population
                    tuner = get_tuner(tname, task, seed=args.seed, **kw)
                    batch = tuner.next_batch(args.n_build)
                    good = sum(verifier_accepts(sp, c) for c in batch)
                    r["tuners"][tname] = {"proposed": len(batch), "valid": int(good),
                                          "seconds": round(time.perf_counter() - t0, 2)}
                except Exception as err:  # noqa: BLE001 - recorded, the dry run goes on
                    ok = False
                    r["tuners"][tname] = {"error": f"{type(err).__name__}: {err}"[:400]}
                log(f"dry-run {wname}: tuner {tname}: {r['tuners'][tname]}")
            # PyTorch's operator (on the CPU here) against the task's reference: the retime step's op is right
            inputs = task.random_inputs(0)
            f, _ = torch_op(wname, inputs, "cpu")
            import torch

            with torch.no_grad():
                got = f().numpy()
            want = task.reference(inputs)
            r["torch_ref_max_abs_err"] = float(np.max(np.abs(got - want)))
            ok &= bool(np.allclose(got, want, rtol=1e-3, atol=1e-3))
            # where a machine without a GPU stops: the runner's device check
            try:
                LocalRunner().check_device(task.target)
                r["device_check"] = "GPU present: runs would start here"
            except MeasureError as err:
                r["device_check"] = f"stops before the first CUDA launch: {err}"
            log(f"dry-run {wname}: torch reference max abs err {r['torch_ref_max_abs_err']:.2e}; {r['device_check']}")
            write_json(path, res)
    except ReleaseError as err:
        ok = False
        res["error"] = str(err)
    finally:
        if builder is not None:
            builder.close()
    res["ok"] = bool(ok)
    write_json(path, res)
    log(f"dry-run {'passed' if ok else 'FAILED'}: {path}")
    return 0 if ok else 1


# ------------------------------------------------------------------------------------ proposals
class DryMeasurer:
    """A measurer for a machine without the target's device: every config is replayed and checked by
    the task's knob space exactly as :class:`release.measure.Measurer` does (``KnobSpace.apply``: the
    limits checked on the knobs, then MetaSchedule's replay and postprocessors), nothing is built or
    run, and a valid config gets a stand-in cost.

    The stand-in cost (seconds) is a deterministic hash of the config (``1e-4 * (1 + crc32 % 1000 /
    1000)``), so the tuners' cost models fit and plan as they would, on made-up numbers: what it measures
    is the proposing and checking, never kernel quality.

    Attributes
    ----------
    batch_size : int
    replay_s, refused_s : float
        Seconds in ``apply`` for all configs, and for the refused ones only.
    asked, refused, prechecked : int
        Configs handed in, refused (by the limits or the postprocessors), refused by the limits alone.
    """

    def __init__(self, task, batch_size: int = 32):
        self.task, self.batch_size = task, int(batch_size)
        self.replay_s = self.refused_s = 0.0
        self.asked = self.refused = self.prechecked = 0
        self.configs: list[tuple] = []
        self.stats: dict = {}

    def measure(self, configs, on_result=None):
        import zlib

        from release.errors import InvalidConfigError
        from release.measure.measure import ErrorKind, MeasureResult

        space = self.task.config_space
        out = []
        for c in configs:
            c = space.canonical(c)
            self.asked += 1
            self.configs.append(c)
            r = MeasureResult(config=c).stamp(self.task)
            before = getattr(space, "prechecked", 0)
            t0 = time.perf_counter()
            try:
                space.apply(c)
                cost = 1e-4 * (1.0 + (zlib.crc32(repr(c).encode()) % 1000) / 1000.0)
                r.costs = [cost]
                ok = True
            except InvalidConfigError as err:
                r.error_kind, r.error_msg = ErrorKind.INVALID, err.reason
                ok = False
            dt = time.perf_counter() - t0
            self.replay_s += dt
            if not ok:
                self.refused += 1
                self.refused_s += dt
                self.prechecked += getattr(space, "prechecked", 0) - before
            r.measure_s = dt
            r.timestamp = time.time()
            if on_result is not None:
                on_result(r)
            out.append(r)
        return out

    def close(self):
        pass


def verifier_accepts(space, config) -> bool:
    """Whether MetaSchedule's replay and postprocessors alone accept ``config`` (no check on the knobs
    first; on a release without that check, ``is_valid`` is already the verifier alone)."""
    try:
        return bool(space.is_valid(config, precheck=False)[0])
    except TypeError:
        return bool(space.is_valid(config)[0])


def proposal_figures(task, tname: str, seed: int = 0, plan_size: int = 32, trials: int = 64,
                     batch: int = 32, max_rejected: int = 1000, ms_population: int = 64) -> dict:
    """One tuner's first ``trials`` trials on ``task`` through :class:`DryMeasurer`: how many configs
    it proposed, how many MetaSchedule's verifier accepts, and the wall time spent proposing.

    Returns
    -------
    dict
        ``proposed`` (configs handed to the measurer), ``accepted`` (of them, accepted by the verifier
        alone), ``valid_share``, ``measured`` (trials), ``refused`` / ``prechecked`` (refused in all / by
        the limits on the knobs, without a replay), ``search_s`` and ``fit_s`` (the session's), ``refused_s``
        (seconds replaying refused configs), ``propose_s`` (search + fit + refused replays),
        ``propose_s_per_trial``, ``wall_s``, ``stop_reason``, ``rounds``.
    """
    from release.tuners import get_tuner

    kw = {} if tname in NO_PLAN else {"plan_size": plan_size}
    if tname == "ms-evolutionary":
        kw["population_size"] = ms_population
    tuner = get_tuner(tname, task, seed=seed, **kw)
    m = DryMeasurer(task, batch)
    t0 = time.perf_counter()
    error = ""
    try:
        tuner.session.run(m, trials, max_rejected=max_rejected)
    except Exception as err:  # noqa: BLE001 - recorded (a TunerError when nothing valid was found)
        error = f"{type(err).__name__}: {err}"[:300]
    wall = time.perf_counter() - t0
    ses = tuner.session
    accepted = sum(verifier_accepts(task.config_space, c) for c in m.configs)
    propose = ses.time_search + ses.time_fit + m.refused_s
    return {"tuner": tname, "proposed": m.asked, "accepted": int(accepted),
            "valid_share": round(accepted / m.asked, 4) if m.asked else None,
            "measured": ses.trials, "refused": m.refused, "prechecked": m.prechecked,
            "search_s": round(ses.time_search, 3), "fit_s": round(ses.time_fit, 3),
            "refused_s": round(m.refused_s, 3), "replay_s": round(m.replay_s, 3),
            "propose_s": round(propose, 3),
            "propose_s_per_trial": round(propose / ses.trials, 4) if ses.trials else None,
            "wall_s": round(wall, 2), "stop_reason": ses.stop_reason, "rounds": int(tuner.rounds),
            "error": error}


def seed_figures(task, records, n: int = 16) -> dict:
    """Transfer-tuning seeds (``knowledge_seeds``) of ``task`` from ``records`` of other workloads:
    how many configs were carried over and how many the verifier alone accepts."""
    from release.knowledge.use import knowledge_seeds

    t0 = time.perf_counter()
    seeds = knowledge_seeds(task, records, n)
    dt = time.perf_counter() - t0
    acc = sum(verifier_accepts(task.config_space, c) for c in seeds)
    return {"seeds": len(seeds), "accepted": int(acc), "seconds": round(dt, 2)}


def cmd_proposals(args) -> int:
    """Each tuner's first trials on each workload through :class:`DryMeasurer` -> ``OUT/proposals.json``."""
    from release.task import create_task

    path = os.path.join(args.out, "proposals.json")
    res = {"target": args.target, "trials": args.trials, "plan_size": args.plan_size, "batch": args.batch,
           "seed": args.seed, "git": _git_rev(), "host": platform.node(), "cpu": _cpu_name(),
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "workloads": {}}
    records = None
    if args.seed_log:
        from release.measure.records import load_records

        records = [r for f in args.seed_log for r in load_records(f)]
    for wname in args.workloads:
        t0 = time.perf_counter()
        task = create_task(wname, args.target)
        task.config_space  # noqa: B018
        w = res["workloads"][wname] = {"task_s": round(time.perf_counter() - t0, 1), "tuners": {}}
        for tname in args.tuners:
            r = proposal_figures(task, tname, seed=args.seed, plan_size=args.plan_size, trials=args.trials,
                                 batch=args.batch, max_rejected=args.max_rejected, ms_population=args.ms_population)
            w["tuners"][tname] = r
            log(f"proposals {wname} {tname}: {r}")
            write_json(path, res)
        if records is not None:
            mine = [r for r in records if r.task != task.key]
            w["seeds"] = seed_figures(task, mine, args.n_seeds)
            log(f"proposals {wname} seeds: {w['seeds']}")
        write_json(path, res)
    return 0


def _git_rev() -> str:
    try:
        return _cmd(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]).strip()
    except Exception:  # noqa: BLE001
        return "?"


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


# ------------------------------------------------------------------------------------------ tune
class RunDeadline(Exception):
    """Raised by :class:`Deadline` to end one tuning run (its records are already in its log)."""


class Deadline(Callback):
    """Tuning callback that ends a run once ``seconds`` of wall time have passed since it started.

    The clock starts in ``on_start`` (``Tuner.tune`` calls it before the first round); it is
    checked in ``on_result``, after each measurement. Safe mid-batch: ``Measurer.measure`` calls
    callbacks after builds finished, between runs.
    """

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.t_end = float("inf")

    def on_start(self, tuner, n_trial) -> None:  # noqa: ARG002 - Tuner.tune's callback protocol
        self.t_end = time.time() + self.seconds

    def on_result(self, tuner, inputs, results) -> None:  # noqa: ARG002
        if time.time() > self.t_end:
            raise RunDeadline()


class Progress:
    """Tuning callback printing one line every ``every`` trials (a killed run shows how far it got)."""

    def __init__(self, prefix: str, every: int = 16):
        self.prefix, self.every, self.last = prefix, every, 0

    def __call__(self, tuner, inputs, results) -> None:  # noqa: ARG002
        if tuner.trials - self.last >= self.every:
            self.last = tuner.trials
            log(f"{self.prefix}: {tuner.trials} trials, best {tuner.best_gflops:.1f} GFLOPS")


def log_path(logs: str, workload: str, tuner: str, seed: int) -> str:
    return os.path.join(logs, f"{workload}.{tuner}.s{seed}.jsonl")


HARD_CAP_EXIT = 75  # tune's exit status when its watchdog ended a run whose search ran past the cap


def _run_summary(lp: str, wname: str, tname: str, tuner, wall: float, stopped: str, logs: str) -> dict:
    from release.measure import load_records

    recs = load_records(lp) if os.path.exists(lp) else []
    okr = [r for r in recs if r.ok]
    best = max(okr, key=lambda r: r.gflops) if okr else None
    errors: dict = {}
    for r in recs:
        if not r.ok:
            errors[r.error_kind] = errors.get(r.error_kind, 0) + 1

    def tsec(name):
        v = getattr(tuner, name, None) if tuner is not None else None
        return round(float(v), 2) if v is not None else None

    return {"workload": wname, "tuner": tname, "log": os.path.relpath(lp, logs), "records": len(recs),
            "trials": int(getattr(tuner, "trials", 0) or 0) if tuner is not None else len(okr), "ok": len(okr),
            "errors": errors, "best_gflops": best.gflops if best else None,
            "best_ms": best.mean_cost * 1e3 if best else None, "wall_s": round(wall, 1), "stopped_by": stopped,
            "time_search_s": tsec("time_search"), "time_fit_s": tsec("time_fit"),
            "time_measure_s": tsec("time_measure")}


def cmd_tune(args) -> int:
    """Tune every (workload, tuner); resumable: runs already in ``OUT/tune.json`` are skipped.

    A run ends at ``--trials`` or, checked after each measurement, at ``--run-seconds``. A search
    that runs past ``--run-seconds + --grace`` without returning (MetaSchedule's evolutionary
    search is one C++ call) is ended by a watchdog that records the run and exits with
    ``HARD_CAP_EXIT``; run_device.sh then calls ``tune`` again for the remaining runs.
    """
    import threading

    from release.measure import LocalBuilder, LocalRunner, log_to_file, measure_option
    from release.task import create_task
    from release.tuners import get_tuner

    os.makedirs(args.logs, exist_ok=True)
    path = os.path.join(args.out, "tune.json")
    summary = {"target": args.target, "n_trial": args.trials, "plan_size": args.plan_size,
               "run_seconds": args.run_seconds, "seed": args.seed, "cores": os.cpu_count(),
               "runner": dict(number=args.number, repeat=args.repeat, min_repeat_ms=args.min_repeat_ms),
               "runs": {}}
    if os.path.exists(path):
        prev = json.load(open(path))
        if all(prev.get(k) == summary[k] for k in ("target", "n_trial", "plan_size", "seed")):
            summary["runs"] = prev.get("runs", {})
    todo = [(w, t) for w in args.workloads for t in args.tuners if f"{w}|{t}" not in summary["runs"]]
    if not todo:
        log("tune: every run is already in tune.json")
        return 0
    current: dict = {}
    stop = threading.Event()

    def watchdog():
        while not stop.wait(min(1.0, max(0.05, args.grace / 4))):
            c = dict(current)
            if c and time.time() > c["t0"] + args.run_seconds + args.grace:
                summary["runs"][c["key"]] = _run_summary(
                    c["log"], c["workload"], c["tuner"], None, time.time() - c["t0"],
                    f"hard cap: no result for {args.grace:.0f} s past the {args.run_seconds:.0f} s cap "
                    "(a search that does not return); process ended", args.logs)
                write_json(path, summary)
                log(f"tune {c['key']}: ended by the watchdog")
                os._exit(HARD_CAP_EXIT)

    threading.Thread(target=watchdog, daemon=True).start()
    opt = measure_option(LocalBuilder(n_parallel=args.n_parallel, timeout=args.build_timeout),
                         LocalRunner(number=args.number, repeat=args.repeat, min_repeat_ms=args.min_repeat_ms,
                                     timeout=args.run_timeout))
    tasks: dict = {}
    try:
        for wname, tname in todo:
            if wname not in tasks:
                t0 = time.perf_counter()
                task = tasks[wname] = create_task(wname, args.target)
                opt["runner"].check_device(task.target)
                sp = task.config_space
                log(f"tune {wname}: {len(sp.spaces)} design spaces, {sp.n_knobs} knobs, {sp.size:.3g} configs, "
                    f"{task.flop / 1e9:.3f} GFLOP ({time.perf_counter() - t0:.1f} s)")
            task = tasks[wname]
            key = f"{wname}|{tname}"
            lp = log_path(args.logs, wname, tname, args.seed)
            # plan size = configs per round (ms-evolutionary: its generation, num_trials_per_iter);
            # ms-evolutionary searches on every core, as tune_tir does by default
            kw = {"plan_size": args.plan_size} if args.plan_size and tname not in NO_PLAN else {}
            if tname == "ms-evolutionary":
                kw["num_threads"] = os.cpu_count() or 1
            t0 = time.time()
            stopped = "budget"
            tuner = None
            current.update(key=key, t0=t0, log=lp, workload=wname, tuner=tname)
            try:
                tuner = get_tuner(tname, task, seed=args.seed, **kw)
                tuner.tune(args.trials, opt, callbacks=[log_to_file(lp), Progress(f"{wname} {tname}"),
                                                         Deadline(args.run_seconds)])
            except RunDeadline:
                stopped = f"time cap {args.run_seconds:.0f} s"
            except Exception as err:  # noqa: BLE001 - record it, go on with the next run
                stopped = f"error: {type(err).__name__}: {err}"[:500]
                traceback.print_exc()
            current.clear()
            summary["runs"][key] = _run_summary(lp, wname, tname, tuner, time.time() - t0, stopped, args.logs)
            write_json(path, summary)
            r = summary["runs"][key]
            log(f"tune {key}: {r['ok']} ok of {r['records']} records, best {(r['best_gflops'] or 0):.1f} GFLOPS, "
                f"{r['wall_s']:.0f} s, stopped by {stopped}")
    finally:
        stop.set()
        opt["builder"].close()
        opt["runner"].close()
    write_json(path, summary)
    return 0


# ---------------------------------------------------------------------------------------- retime
def _torch_cpu_ms(f, number: int = 20, repeat: int = 1) -> list[float]:
    """``repeat`` means (ms) of ``number`` calls of ``f`` on the CPU (wall clock)."""
    import torch

    with torch.no_grad():
        f()
        out = []
        for _ in range(repeat):
            t = time.perf_counter()
            for _ in range(number):
                f()
            out.append((time.perf_counter() - t) / number * 1e3)
    return out


def cmd_retime(args) -> int:
    """Re-time each run's best kernel beside PyTorch's operator, interleaved, after checking outputs.

    On a CUDA target the kernels and PyTorch run on GPU 0 (PyTorch timed by CUDA events, strict
    FP32 and TF32 apart); on an llvm target both run on this CPU (used by the tests here).
    """
    import numpy as np
    import tvm
    from tvm.s_tir.meta_schedule.tir_integration import compile_tir

    from release.measure import apply_history_best, load_records
    from release.target import resolve_target
    from release.task import create_task

    out = {"rounds": args.rounds, "workloads": {}}
    path = os.path.join(args.out, "retime.json")
    cuda = resolve_target(args.target).kind.name == "cuda"
    if cuda and not gpu_present():
        out["skipped"] = "no CUDA device visible to TVM: nothing re-timed"
        write_json(path, out)
        log(out["skipped"])
        return 0
    dev = tvm.cuda(0) if cuda else tvm.cpu(0)
    try:
        import torch

        torch_ok = torch.cuda.is_available() if cuda else True
        torch_why = "" if torch_ok else f"torch {torch.__version__} sees no CUDA device (a CPU build?): no reference"
    except Exception as err:  # noqa: BLE001
        torch_ok, torch_why = False, f"torch not importable: {err}"
    out["torch"] = {"device": "cuda" if cuda else "cpu", "ok": torch_ok, "why_not": torch_why}
    if torch_why:
        log(torch_why)
    for wname in args.workloads:
        task = create_task(wname, args.target)
        inputs = task.random_inputs(0)
        want = task.reference(inputs)
        shape, dtype = task.output_shape()
        w: dict = {"gflop": task.flop / 1e9, "kernels": {}}
        out["workloads"][wname] = w
        timers = {}
        for tname in args.tuners:
            lp = log_path(args.logs, wname, tname, args.seed)
            entry: dict = {}
            w["kernels"][tname] = entry
            recs = load_records(lp) if os.path.exists(lp) else []
            if not any(r.ok for r in recs):
                entry["error"] = "no successful record in the log"
                continue
            try:
                db = apply_history_best(lp).database([task])
                sch = compile_tir(db, task.mod, task.target)
                lib = tvm.compile(sch.mod, target=task.target)
                args_dev = [tvm.runtime.tensor(x, dev) for x in inputs]
                o = tvm.runtime.tensor(np.zeros(shape, dtype=dtype), dev)
                lib["main"](*args_dev, o)
                dev.sync()
                got = o.numpy()
                err = float(np.max(np.abs(got - want)))
                entry.update(max_abs_err=err, correct=bool(np.allclose(got, want, rtol=1e-3, atol=1e-3)),
                             logged_gflops=max(r.gflops for r in recs if r.ok))
                # tvm.compile gives an Executable; its jitted runtime module has the timer
                f = lib.jit().time_evaluator("main", dev, number=args.number, repeat=1,
                                             min_repeat_ms=args.min_repeat_ms)
                timers[tname] = (lambda f=f, a=args_dev, o=o: f(*a, o).mean * 1e3)
            except Exception as err:  # noqa: BLE001 - recorded; the other kernels are still timed
                entry["error"] = f"{type(err).__name__}: {err}"[:500]
        if torch_ok:
            for label, tf32 in ((("torch", False), ("torch-tf32", True)) if cuda else (("torch", False),)):
                ft, _ = torch_op(wname, inputs, "cuda" if cuda else "cpu")
                if cuda:
                    torch.backends.cuda.matmul.allow_tf32 = tf32
                    torch.backends.cudnn.allow_tf32 = tf32
                with torch.no_grad():
                    got = ft().cpu().numpy()
                err = float(np.max(np.abs(got - want)))
                w["kernels"][label] = {"max_abs_err": err, "tf32": tf32,
                                       "correct": bool(np.allclose(got, want, rtol=1e-3, atol=1e-3))}

                def tt(ft=ft, tf32=tf32):
                    if not cuda:
                        return float(np.mean(_torch_cpu_ms(ft, number=args.torch_number)))
                    torch.backends.cuda.matmul.allow_tf32 = tf32
                    torch.backends.cudnn.allow_tf32 = tf32
                    return float(np.mean(torch_cuda_ms(ft, number=args.torch_number, repeat=1)))
                timers[label] = tt
        # interleaved: every kernel once per round, in a shuffled order, so all see the same conditions
        rng = np.random.default_rng(args.seed)
        ms: dict = {k: [] for k in timers}
        names = list(timers)
        for _ in range(args.rounds):
            for i in rng.permutation(len(names)):
                ms[names[i]].append(timers[names[i]]())
        for k, v in ms.items():
            med = float(np.median(v))
            w["kernels"][k].update(ms_per_round=v, median_ms=med, gflops=task.flop / (med * 1e-3) / 1e9)
        if "torch" in ms:
            for k in ms:
                w["kernels"][k]["speedup_vs_torch_fp32"] = float(np.median(ms["torch"])) / float(np.median(ms[k]))
        write_json(path, out)
        for k, e in w["kernels"].items():
            log(f"retime {wname} {k}: " + (f"{e['median_ms']:.4f} ms, {e['gflops']:.1f} GFLOPS, max abs err "
                                           f"{e.get('max_abs_err', float('nan')):.1e}" if "median_ms" in e
                                           else e.get("error", "not timed")))
    write_json(path, out)
    return 0


# ----------------------------------------------------------------------------------------- model
def cmd_model(args) -> int:
    """Optional: ResNet-18 on CUDA, tuned briefly, compiled and checked, against PyTorch CUDA eager."""
    import numpy as np
    import tvm
    from tvm import relax

    from release import relax as M
    from release.measure import LocalBuilder, LocalRunner, apply_history_best, measure_option
    from release.relax.evaluation import _flatten

    out: dict = {"model": args.model, "tuner": args.tuner, "n_trial": args.trials}
    path = os.path.join(args.out, "model.json")
    if not gpu_present():
        out["skipped"] = "no CUDA device visible to TVM"
        write_json(path, out)
        return 0
    model = M.load_model(args.model)
    tasks = M.extract_tasks(model, args.target)
    out["tasks"] = len(tasks)
    log(f"model {args.model}: {len(tasks)} tasks")
    opt = measure_option(LocalBuilder(n_parallel=args.n_parallel, timeout=60),
                         LocalRunner(number=args.number, repeat=args.repeat, min_repeat_ms=args.min_repeat_ms))
    lp = os.path.join(args.logs, f"{args.model}.{args.tuner}.jsonl")
    try:
        res = M.tune_model(tasks, args.trials, lp, tuner=args.tuner, measure_option=opt, progress=False)
        out["tune_wall_s"] = res.wall_s
        out["table"] = res.table()
    finally:
        opt["builder"].close()
        opt["runner"].close()
    write_json(path, out)
    dev = tvm.cuda(0)
    ex = M.compile_model(model, args.target, apply_history_best(lp).database(tasks))
    vm = relax.VirtualMachine(ex, dev)
    xs = [tvm.runtime.tensor(x, dev) for x in model.inputs]
    got = _flatten(vm["main"](*xs))
    ref = model.reference()
    out["max_abs_err"] = max(float(np.max(np.abs(g - r))) for g, r in zip(got, ref))
    t = vm.time_evaluator("main", dev, number=20, repeat=5)(*xs)
    out["tvm_ms"] = float(np.median(t.results)) * 1e3
    import torch

    if torch.cuda.is_available():
        mod = model.torch_module.cuda().eval()
        ti = [torch.from_numpy(x).cuda() for x in model.inputs]
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        out["torch_ms"] = float(np.median(torch_cuda_ms(lambda: mod(*ti), number=20, repeat=5)))
    write_json(path, out)
    log(f"model {args.model}: TVM {out['tvm_ms']:.3f} ms, torch {out.get('torch_ms', float('nan')):.3f} ms, "
        f"max abs err {out['max_abs_err']:.1e}")
    return 0


def cmd_libdirs(args) -> int:  # noqa: ARG001
    """Print the folders (``:``-joined) holding CUDA 13's ``libcudart`` / ``libnvrtc``, which TVM's
    CUDA runtime links: the toolkit's, or the copies PyTorch's ``nvidia-*`` wheels installed."""
    import glob
    import site

    roots = ["/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib"] + site.getsitepackages()
    seen: list[str] = []
    for r in roots:
        for lib in ("libcudart.so.13*", "libnvrtc.so.13*"):
            for p in glob.glob(os.path.join(r, "**", lib), recursive=True)[:1]:
                if os.path.dirname(p) not in seen:
                    seen.append(os.path.dirname(p))
    print(":".join(seen))
    return 0


# ------------------------------------------------------------------------------------------- cli
def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)

    def common(q):
        q.add_argument("--out", default=os.environ.get("OUT", "runs/cuda"), help="results folder")
        q.add_argument("--logs", default=None, help="tuning logs (default OUT/work/logs)")
        q.add_argument("--target", default=TARGET, help="TVM target (CLI alias, tag or JSON dict)")
        q.add_argument("--workloads", nargs="*", default=WORKLOADS)
        q.add_argument("--tuners", nargs="*", default=TUNERS)
        q.add_argument("--seed", type=int, default=0)
        q.add_argument("--n-parallel", type=int, default=None, help="build workers (default: cores)")
        q.add_argument("--number", type=int, default=3)
        q.add_argument("--repeat", type=int, default=3)
        q.add_argument("--min-repeat-ms", type=int, default=20)

    q = sub.add_parser("env")
    common(q)
    q = sub.add_parser("dry-run")
    common(q)
    q.add_argument("--n-sample", type=int, default=200, help="random configs tried for legality")
    q.add_argument("--n-build", type=int, default=4, help="valid configs built per workload")
    q.add_argument("--ms-population", type=int, default=512,
                   help="ms-evolutionary's population for its first proposals (MetaSchedule: 512; its first "
                        "generation on CUDA took 4-6 min on one core of a loaded 2-core machine)")
    q.add_argument("--no-pool", action="store_true",
                   help="compile in this process only, not through the tuning build pool (its workers "
                        "each import TVM and the CUDA tensor intrinsics: ~1 min on 2 cores)")
    q.add_argument("--plan-size", type=int, default=32)
    q = sub.add_parser("tune")
    common(q)
    q.add_argument("--trials", type=int, default=128)
    q.add_argument("--plan-size", type=int, default=32)
    q.add_argument("--run-seconds", type=float, default=45.0, help="wall-time cap of one tuning run")
    q.add_argument("--grace", type=float, default=60.0,
                   help="seconds past --run-seconds before the watchdog ends a search that does not return")
    q.add_argument("--build-timeout", type=float, default=60.0)
    q.add_argument("--run-timeout", type=float, default=10.0)
    q = sub.add_parser("retime")
    common(q)
    q.add_argument("--rounds", type=int, default=5)
    q.add_argument("--torch-number", type=int, default=100)
    q = sub.add_parser("proposals")
    common(q)
    q.add_argument("--trials", type=int, default=64, help="trials (valid configs) per tuner")
    q.add_argument("--plan-size", type=int, default=32)
    q.add_argument("--batch", type=int, default=32, help="configs per measured batch (the build pool's size)")
    q.add_argument("--max-rejected", type=int, default=1000)
    q.add_argument("--ms-population", type=int, default=64)
    q.add_argument("--seed-log", nargs="*", default=None,
                   help="tuning logs whose records seed the workloads (transfer-tuning, other workloads' records)")
    q.add_argument("--n-seeds", type=int, default=16)
    sub.add_parser("libdirs")
    q = sub.add_parser("model")
    common(q)
    q.add_argument("--model", default="resnet18")
    q.add_argument("--tuner", default="release+")
    q.add_argument("--trials", type=int, default=256)
    args = p.parse_args(argv)
    if args.cmd == "libdirs":
        return cmd_libdirs(args)
    args.logs = args.logs or os.path.join(args.out, "work", "logs")
    os.makedirs(args.out, exist_ok=True)
    return {"env": cmd_env, "dry-run": cmd_dry_run, "tune": cmd_tune, "retime": cmd_retime,
            "model": cmd_model, "proposals": cmd_proposals}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
