"""In-model ranking: the top tuned candidates of a model's hottest tasks timed inside the compiled model.

A kernel's tuning-time cost is taken alone, back to back on the same hot buffers; inside the model the same
kernel finds its input just written by the previous kernel on both cores, its weights and output cold, and runs
1.2-1.8x slower, by different amounts for different schedules (``docs/design/in-model-ranking.md``: the
measurements). :func:`finish_model` is a finishing pass after tuning: it compiles the model from the log's best
records, then for each of the ``n_tasks`` tasks that take the most time in the model it builds the ``top_k``
fastest distinct configs of the log (this machine's records) and times each inside the running model. The VM's
instrument hook (:meth:`tvm.runtime.vm.VirtualMachine.set_instrument`) calls the candidate's own kernel on the
model's argument tensors in place of the compiled one and skips the original call
(``VMInstrumentReturnKind.SKIP_RUN``), so every candidate runs between the model's real neighbours, on the
buffers TVM's memory planner gave the call; no model is rebuilt per candidate. Candidates are interleaved
(each round times every candidate once, in a shuffled order) and ranked by their fastest round's time per call
(other work on the machine only slows a round down: the statistic of ``release.relax.evaluate``'s
``fastest_ms``). A candidate whose weights are pre-packed into another layout than the compiled kernel's gets a
persistent tensor of its own layout (random values: its output is wrong during the pass, the timing is not;
the chosen config's output is checked against the task's reference before it is kept).

Each task's candidates are written as records (``tuner`` ``"in-model"``, ``costs`` the per-round in-model
seconds per call, one ``timestamp`` for the task's pass) to the log's in-model sibling,
``<log stem>.in-model.jsonl`` (:func:`release.measure.records.in_model_path`), appended and flushed as each
task finishes: :func:`release.measure.apply_history_best` then applies the in-model choice of a task as long as
that pass still covers the task's best tuned config (more tuning that finds a new best makes the choice stale
until the pass runs again), and a pass run again on the same log skips the tasks whose candidates it already
timed (resumable). Tuners, cost models and knowledge bases never read the sibling.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import ModelError

logger = logging.getLogger(__name__)

#: defaults of :func:`finish_model`
N_TASKS, TOP_K, ROUNDS = 3, 4, 9


@dataclass
class FinishResult:
    """Outcome of :func:`finish_model`.

    Attributes
    ----------
    rows : list of dict
        One per timed candidate: ``task``, ``calls`` (kernel calls per inference), ``rank`` (0 = the log's
        fastest alone), ``config``, ``alone_ms`` (its logged mean cost), ``in_model_ms`` (median over rounds of
        its time per call inside the model), ``fastest_ms`` (its fastest round: the ranking's statistic), ``spread``
        (min and max over rounds, ms), ``ratio`` (in the model
        over the logged cost), ``alone_now_ms`` (median over rounds of the same kernel timed alone right after
        each inference: 5 calls back to back on the first call's tensors, their median), ``ratio_now`` (median
        over rounds of in the model over alone now), ``chosen`` (bool), ``wrong`` (why its output failed the
        check, or "").
    changed : list of str
        Tasks whose in-model choice differs from their fastest config alone.
    resumed : list of str
        Tasks skipped because the in-model log already holds this pass for their candidates.
    skipped : dict
        Task name -> why it was not ranked (a single candidate, an argument list that does not match, ...).
    in_model_ms : dict
        Task name -> the model's time per inference in the task's calls with the compiled (alone-best)
        kernel, before the pass (median of the profiled inferences).
    wall_s : float
        Seconds the pass took (compile, builds, timing).
    log : str
        The in-model log written.
    """

    rows: list = field(default_factory=list)
    changed: list = field(default_factory=list)
    resumed: list = field(default_factory=list)
    skipped: dict = field(default_factory=dict)
    in_model_ms: dict = field(default_factory=dict)
    wall_s: float = 0.0
    log: str = ""


def candidate_records(task, records, k: int) -> list:
    """The ``k`` fastest distinct configs of ``task`` among ``records`` timed on this machine
    (:meth:`release.task.Task.tier` ``"machine"``), fastest first: successful, fully timed (not ``cut_short``),
    not TVM's default schedule, not a config with a ``wrong_output`` record."""
    from ..measure.result import ErrorKind

    mine = [r for r in records if task.owns(r) and not r.default]
    wrong = {tuple(r.config) for r in mine if r.error_kind == ErrorKind.WRONG_OUTPUT}
    ok = [r for r in mine if r.ok and not r.cut_short and task.tier(r) == "machine" and tuple(r.config) not in wrong
          and r.trace is not None]
    best: dict = {}
    for r in ok:
        c = tuple(r.config)
        if c not in best or r.mean_cost < best[c].mean_cost:
            best[c] = r
    return sorted(best.values(), key=lambda r: r.mean_cost)[: max(0, int(k))]


def _symbol_task(symbol: str, by_name: dict):
    """The task a VM call symbol runs: the fused function's name, with TVM's pre-packing suffix dropped."""
    for suffix in ("", "_prepacked"):
        if suffix and not symbol.endswith(suffix):
            continue
        t = by_name.get(symbol[: len(symbol) - len(suffix)] if suffix else symbol)
        if t is not None:
            return t
    return None


def _build_candidate(task, config, target_json: str):
    """``(kernel function, [(shape, dtype) per argument])`` of ``config`` built as the tuner's builder builds
    it (:func:`release.measure._worker.build`: the weight-packing block removed, the weight taken packed)."""
    import tvm
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    from ..measure import _worker

    sch = task.config_space.apply(config)
    path, _ = _worker.build(sch.mod, target_json)
    lib = tvm.runtime.load_module(path)
    # the runner's arguments (MetaSchedule's ArgInfo without the packing block: the weight packed)
    sig = [(tuple(int(d) for d in a.shape), str(a.dtype)) for a in ArgInfo.from_entry_func(sch.mod, remove_preproc=True)]
    return lib[lib.entry_name], sig


def _call_args(model_args: list, sig: list, rng: np.random.Generator, dev) -> list | None:
    """The arguments a candidate is called with in place of the compiled kernel: the model's own tensors where
    shape and dtype agree, a persistent tensor of the candidate's shape elsewhere (a weight pre-packed into
    another layout; uniform in [-1, 1)). None when the argument counts differ."""
    import tvm

    tensors = [a for a in model_args if hasattr(a, "shape")]
    if len(tensors) != len(sig):
        return None
    out = []
    for a, (shape, dtype) in zip(tensors, sig):
        if tuple(int(d) for d in a.shape) == shape and str(a.dtype) == dtype:
            out.append(a)
        else:
            out.append(tvm.runtime.tensor(rng.uniform(-1, 1, shape).astype(dtype), dev))
    return out


def finish_model(model, tasks: list, log: str, target=None, layout: str | None = None, prepack: bool | None = None,
                 pad: bool = False, n_tasks: int = N_TASKS, top_k: int = TOP_K, rounds: int = ROUNDS,
                 seed: int = 0, check: bool = True, on_task=None) -> FinishResult:
    """Rank the top candidates of the model's hottest tasks inside the compiled model; keep the fastest there.

    Parameters
    ----------
    model : release.relax.Model
    tasks : list[Task]
        The model's tasks, extracted with the same ``layout``, ``prepack`` and ``pad``
        (:func:`~release.relax.extract.extract_tasks`).
    log : str
        The tuning log (read; its in-model sibling :func:`release.measure.records.in_model_path` is appended to).
    target : optional
        Default: the tasks' target.
    n_tasks : int
        Tasks ranked: those whose calls take the most time in the compiled model (default 3). A task with
        fewer than two candidates on this machine is passed over (the next one is taken).
    top_k : int
        Candidates per task: its fastest distinct configs alone (default 4; at least 2).
    rounds : int
        Interleaved rounds; each round runs one inference per candidate, in a shuffled order (default 9).
    seed : int
        Seed of the round orders and of the stand-in weights.
    check : bool
        Check the chosen config's output against the task's reference (:class:`release.check.OutputChecker`)
        when it is not the fastest alone; a wrong one is recorded as such and the next candidate taken.
        Default True.
    on_task : callable, optional
        ``on_task(task_name, rows)`` after each ranked task (progress lines).

    Returns
    -------
    FinishResult

    Raises
    ------
    ModelError
        ``top_k`` below 2, ``rounds`` below 1 or ``n_tasks`` below 1.

    Notes
    -----
    Source: the in-model measurements of ``docs/design/in-model-ranking.md``; TVM 0.27's Relax VM instrument
    hook (its ``SKIP_RUN`` return skips the call it is given). Cost: one model compile, one
    kernel build per candidate, ``rounds x top_k`` inferences per task.
    """
    import tvm
    from tvm import relax
    from tvm.runtime.vm import VMInstrumentReturnKind

    from ..measure.records import apply_history_best, in_model_pass, in_model_path, load_records, log_to_file
    from ..measure.result import ErrorKind, provenance
    from ..target import resolve_target
    from .compile import compile_model

    if int(top_k) < 2 or int(rounds) < 1 or int(n_tasks) < 1:
        raise ModelError(f"in-model ranking needs top_k >= 2, rounds >= 1 and n_tasks >= 1 (got top_k={top_k}, "
                         f"rounds={rounds}, n_tasks={n_tasks}); e.g. 4, 9 and 3")
    t_start = time.time()
    target = resolve_target(target if target is not None else tasks[0].target)
    records = load_records(log)
    side = in_model_path(log)
    db = apply_history_best(log).database(tasks)  # the log's choice, an earlier pass's in-model one included
    ex = compile_model(model, target, db, prepack=prepack, layout=layout, pad=pad)
    dev = tvm.cpu(0)
    vm = relax.VirtualMachine(ex, dev)
    inputs = [tvm.runtime.tensor(x, dev) for x in model.inputs]
    prefix = f"{model.name}."  # a task is named <model>.<fused function> (extract_tasks)
    by_name = {t.name[len(prefix):] if t.name.startswith(prefix) else t.name: t for t in tasks}
    st = {"mode": None, "seq": [], "times": [], "stack": [], "swap": {}}

    def hook(func, symbol, before, ret, *args):
        mode = st["mode"]
        if mode is None:
            return 0
        if mode == "capture":
            if before:
                st["seq"].append((symbol, list(args)))
            return 0
        if mode == "profile":
            if before:
                st["stack"].append(time.perf_counter_ns())
            else:
                st["times"][-1].append(time.perf_counter_ns() - st["stack"].pop())
            return 0
        # mode "swap": the candidate's kernel in place of the compiled one for the ranked task's calls
        if before:
            st["i"] += 1
            sub = st["swap"].get(st["i"] - 1)
            if sub is not None:
                fn, cargs = sub
                t0 = time.perf_counter_ns()
                fn(*cargs)
                st["acc"] += time.perf_counter_ns() - t0
                return int(VMInstrumentReturnKind.SKIP_RUN)
        return 0

    vm.set_instrument(hook)
    for _ in range(2):  # warm-up: the thread pool, the planner's storage
        vm["main"](*inputs)
    st["mode"] = "capture"
    vm["main"](*inputs)
    seq = st["seq"]
    st["mode"], st["times"] = "profile", []
    for _ in range(5):
        st["times"].append([])
        vm["main"](*inputs)
    st["mode"] = None
    n = min(len(t) for t in st["times"])
    per_call = np.median(np.asarray([t[:n] for t in st["times"]], dtype=np.float64), axis=0) / 1e6
    calls: dict = {}
    for i, (sym, _) in enumerate(seq[:n]):
        t = _symbol_task(sym, by_name)
        if t is not None:
            calls.setdefault(t.key, []).append(i)
    task_by_key = {t.key: t for t in tasks}
    in_model_ms = {k: float(sum(per_call[i] for i in ix)) for k, ix in calls.items()}
    hot = sorted(calls, key=lambda k: -in_model_ms[k])
    out = FinishResult(log=side, in_model_ms={task_by_key[k].name: in_model_ms[k] for k in hot})
    sink = log_to_file(side)
    rng_np = np.random.default_rng(seed)
    rng = random.Random(seed)
    target_json = tasks[0].target_json
    version, rev = provenance()
    ranked = 0
    for key in hot:
        if ranked >= int(n_tasks):
            break
        task = task_by_key[key]
        cands = candidate_records(task, records, top_k)
        if len(cands) < 2:
            out.skipped[task.name] = f"{len(cands)} candidate(s) timed on this machine"
            continue
        ranked += 1
        done = in_model_pass(sink.records(task), task)
        if done and {tuple(r.config) for r in cands} <= {tuple(r.config) for r in done}:
            out.resumed.append(task.name)
            continue
        built = []
        for rec in cands:
            try:
                fn, sig = _build_candidate(task, rec.config, target_json)
            except Exception as err:  # noqa: BLE001 - a candidate that no longer builds is left out
                logger.warning("%s: candidate %s left out of the in-model ranking: %s", task.name, list(rec.config),
                               err)
                continue
            per = {}
            for i in calls[key]:
                a = _call_args(seq[i][1], sig, rng_np, dev)
                if a is None:
                    per = None
                    break
                per[i] = (fn, a)
            if per is None:
                out.skipped[task.name] = "the compiled kernel's arguments do not match the task's"
                built = []
                break
            built.append((rec, per))
        if len(built) < 2:
            out.skipped.setdefault(task.name, "fewer than two candidates built")
            continue
        times = [[] for _ in built]
        alone = [[] for _ in built]  # the same kernel right after, alone: back to back on the same tensors
        st["mode"] = "swap"
        for j in range(len(built)):  # one untimed inference each: first touch of stand-in weights, code pages
            st["swap"], st["i"], st["acc"] = built[j][1], 0, 0
            vm["main"](*inputs)
        for _ in range(int(rounds)):
            order = list(range(len(built)))
            rng.shuffle(order)
            for j in order:
                st["swap"], st["i"], st["acc"] = built[j][1], 0, 0
                vm["main"](*inputs)
                times[j].append(st["acc"] / 1e9 / len(calls[key]))  # seconds per call
                fn, cargs = built[j][1][calls[key][0]]
                fn(*cargs)
                ts = []
                for _ in range(5):
                    t0 = time.perf_counter_ns()
                    fn(*cargs)
                    ts.append(time.perf_counter_ns() - t0)
                alone[j].append(float(np.median(ts)) / 1e9)
        st["mode"], st["swap"] = None, {}
        med = [float(np.median(t)) for t in times]
        fastest = [float(np.min(t)) for t in times]
        order = sorted(range(len(built)), key=lambda j: fastest[j])  # as in_model_choice ranks them
        chosen, bad = None, {}
        for j in order:
            rec = built[j][0]
            if not check or j == 0:
                chosen = j
                break
            from ..check import OutputChecker

            msg = OutputChecker(task)(rec.config) if OutputChecker.applies(task) else ""
            if not msg:
                chosen = j
                break
            bad[j] = msg
        stamp = time.time()
        new = []
        for j, (rec, _) in enumerate(built):
            r = replace(rec, costs=list(times[j]), tuner="in-model", timestamp=stamp, measure_s=0.0, search_s=0.0,
                        fit_s=0.0, cut_short=False, release_version=version, revision=rev,
                        error_kind=ErrorKind.WRONG_OUTPUT if j in bad else ErrorKind.NONE,
                        error_msg=bad.get(j, ""))
            new.append(r)
            out.rows.append({"task": task.name, "calls": len(calls[key]), "rank": j, "config": list(rec.config),
                             "alone_ms": rec.mean_cost * 1e3, "in_model_ms": med[j] * 1e3,
                             "spread": [float(np.min(times[j])) * 1e3, float(np.max(times[j])) * 1e3],
                             "fastest_ms": fastest[j] * 1e3, "ratio": med[j] / rec.mean_cost, "chosen": j == chosen, "wrong": bad.get(j, ""),
                             "alone_now_ms": float(np.median(alone[j])) * 1e3,
                             "ratio_now": float(np.median([a / b for a, b in zip(times[j], alone[j])]))})
        sink.append(new)
        if chosen not in (None, 0):
            out.changed.append(task.name)
        if on_task is not None:
            on_task(task.name, [r for r in out.rows if r["task"] == task.name])
    vm.set_instrument(lambda *a: 0)
    out.wall_s = time.time() - t_start
    return out
