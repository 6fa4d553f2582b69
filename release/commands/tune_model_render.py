"""What ``release tune-model`` shows while it runs: :class:`TuneModelRenderer` (the steps
:func:`release.commands.tune_model.run_tune_model` reports; shows nothing) and
:class:`TuneModelPrinter` (the command's lines)."""

from __future__ import annotations

import os

from .common import plural


class TuneModelRenderer:
    """Receives each step of :func:`release.commands.tune_model.run_tune_model` as it happens; this
    base class shows nothing (a Python caller's default). Times are in seconds unless named ``_ms``."""

    def extracting(self, model: str) -> None:
        """The model ``--model`` names is about to be imported and its tasks extracted."""

    def extracted(self, model, tasks: list, seconds: float, layout: str) -> None:
        """``tasks`` extracted from ``model`` in ``seconds`` with the conv2d ``layout``."""

    def layout(self, summary) -> None:
        """How the model's convolutions came out of the blocked layout's passes
        (:class:`release.relax.layout.LayoutSummary`: blocked of all, layout transforms, each one unblocked and why)."""

    def tuner(self, name: str, n_trial: int) -> None:
        """The tuner every task runs (``--tuner``) and the run's trial budget."""

    def log_file(self, log: str, resuming: bool) -> None:
        """The shared log; ``resuming`` when it holds records already."""

    def budget_short(self, n_trial: int, chunk: int, tasks: list, covered: int) -> None:
        """``n_trial`` trials reach only the first ``covered`` tasks (``chunk`` trials each)."""

    def knowledge(self, config) -> None:
        """The knowledge base the run reads and writes (:class:`TuneModelConfig`'s ``knowledge``)."""

    def defaults(self) -> None:
        """TVM's default schedule of each task is about to be measured as a candidate."""

    def tuned_tasks(self, result, tasks: list, lost: list, chunk: int) -> None:
        """Tuning ended: ``result`` of :func:`release.relax.tune_model`; ``lost`` tasks keep TVM's default."""

    def in_model_ranked(self, result) -> None:
        """The in-model ranking ran after tuning (``--in-model-rank``): ``result`` is a
        :class:`release.relax.finish.FinishResult`."""

    def compiling(self, note: str | None) -> None:
        """The tuned model is about to be compiled; ``note`` is the log's report (None: nothing to say)."""

    def winograd(self, choice) -> None:
        """With a ``-winograd{m}`` layout: each eligible layer's form, chosen by measurement
        (:class:`release.relax.winograd.WinogradChoice`)."""

    def tuned_build(self, tuned: dict, config, result) -> None:
        """The tuned build timed (:func:`release.relax.evaluate`)."""

    def untuned_build(self, untuned: dict) -> None:
        """The untuned build timed."""

    def verdict(self, keep: str, why: str, lost: list) -> None:
        """``keep`` (``"tuned"`` or ``"untuned"``) is exported, for the reason ``why``."""

    def memory_planned(self, report) -> None:
        """``--memory-order``: TVM's planned bytes before and after the reorder (``report.line()``)."""

    def memory_outputs_differ(self) -> None:
        """``--memory-order``: the reordered build's outputs differ; the given order is exported."""

    def memory_peaks(self, given: int, reordered: int, change: str) -> None:
        """``--memory-order``: the VM's measured peaks (bytes, medians); the reordered build is exported."""

    def comparing(self, steps: list, n_trial: int, wall_s: float) -> None:
        """The comparisons ``steps`` (``ms``, ``torch``) start; the tuning took ``wall_s``."""

    def compared_ms(self, result: dict, n_trial: int, wall_s: float) -> None:
        """MetaSchedule's build timed; its tuning took ``wall_s``."""

    def compared_torch(self, reference) -> None:
        """PyTorch eager timed (:func:`release.relax.torch_reference`; None: no PyTorch module, an ONNX
        file, whose output is checked against ONNX Runtime instead)."""

    def compared_runtime(self, runtime: str, result: dict) -> None:
        """ONNX Runtime or OpenVINO timed (:func:`release.reference.time_onnx_runtime`; ``{"error": why}``: n/a)."""

    def compared(self) -> None:
        """The comparisons are done."""


class TuneModelPrinter(TuneModelRenderer):
    """``release tune-model``'s lines, each printed as its step happens; :meth:`finished` prints the
    deploy lines of the result. ``progress``: a bar over the comparisons (``--no-progress``: none)."""

    def __init__(self, progress: bool = True):
        self.progress = progress
        self._bar = None
        self._model = None

    def extracting(self, model: str) -> None:
        print(f"model    importing {model} and extracting its tasks (building each knob space)...", flush=True)

    def extracted(self, model, tasks: list, seconds: float, layout: str) -> None:
        self._model = model
        total = sum(t.flop * t.weight for t in tasks) or 1.0
        print(f"model    {model.name}: {len(tasks)} tunable tasks, {total / 1e9:.2f} GFLOP per inference "
              f"({seconds:.1f} s to extract); weights "
              + ("pre-packed (layout-free)" if any(t.layout_free for t in tasks) else "as written")
              + (f"; conv2d layout {layout} ({plural(sum('conv2d_NCHWc' in t.name for t in tasks), 'blocked conv2d task')})"
                 if layout != "NCHW" else ""))

    def layout(self, summary) -> None:
        for line in summary.lines():
            print(f"layout   {line}")

    def tuner(self, name: str, n_trial: int) -> None:
        from .tune import tuner_why

        print(f"tuner    {name}{tuner_why(name)}, {n_trial} trials over every task")

    def log_file(self, log: str, resuming: bool) -> None:
        print(f"log      {log}" + (" (resuming)" if resuming else ""))

    def budget_short(self, n_trial: int, chunk: int, tasks: list, covered: int) -> None:
        total = sum(t.flop * t.weight for t in tasks) or 1.0
        left = tasks[covered:]
        print(f"budget   {n_trial} trials cover one round ({chunk} trials) of {covered} of {len(tasks)} tasks; "
              f"{len(left)} tasks ({100 * sum(t.flop * t.weight for t in left) / total:.0f}% of the FLOPs) get no "
              f"trial and keep TVM's default schedule; --n-trial {chunk * len(tasks)} covers every task once")

    def knowledge(self, config) -> None:
        from ..tuners import MODEL_BASED

        kc, tuner = config.knowledge, config.tuner
        if kc.folder is None:
            print(kc.off_line())
            return
        print(f"knowledge {kc.folder}{' (a new folder)' if kc.new else ''}: "
              + (f"{tuner} starts each task from its records of this target ({config.knowledge_use or 'seeds'}; "
                 "a task with none of its kind starts cold); " if config.warm
                 else f"not used by {tuner} in tune-model; " if tuner not in MODEL_BASED
                 else f"not read by {tuner}, a baseline: it starts cold as its own tuner does (--knowledge to "
                      "start it warm); ")
              + ("this run's records are added to it" if not config.ray else
                 ("read by each Ray worker, " if config.warm else "") + "this run's records are not added (--ray)"))

    def defaults(self) -> None:
        print("default  TVM's default schedule of each task is measured once (not a trial) and kept where it beats "
              "the best tuned kernel", flush=True)

    def tuned_tasks(self, result, tasks: list, lost: list, chunk: int) -> None:
        # tasks in tuning order (largest share of the end-to-end latency first); "latency %" = weight x measured
        # best latency over the sum (tasks without a measurement estimated from their FLOPs: model.latency_shares)
        # "default ms": TVM's default schedule of the task (untuned), measured once as a candidate
        print(f"{'task':<48} {'weight':>6} {'FLOP %':>6} {'latency %':>9} {'trials':>6} {'best ms':>9} {'GFLOPS':>8} "
              f"{'default ms':>10}")
        for row in result.table():
            print(f"{row['task'][:48]:<48} {row['weight']:>6} {100 * row['flop_share']:>6.1f} "
                  f"{100 * row['latency_share']:>9.1f} {row['trials']:>6} {row['best_ms']:>9.4f} "
                  f"{row['gflops']:>8.2f} {row['default_ms']:>10.4f}")
        if lost:
            print(f"default  {plural(len(lost), 'task')} of {len(tasks)} keep TVM's default schedule, faster than "
                  f"their best tuned kernel: {', '.join(lost[:6])}{' ...' if len(lost) > 6 else ''}")
        untuned = sum(1 for row in result.table() if row["trials"] == 0)
        if untuned:
            print(f"budget   {untuned} of {len(tasks)} tasks got no trial (TVM's default schedule); "
                  f"--n-trial {chunk * len(tasks)} or more covers every task once")

    def in_model_ranked(self, result) -> None:
        names = list(dict.fromkeys(r["task"] for r in result.rows))
        print(f"in-model {len(names)} of the hottest tasks ranked inside the compiled model in {result.wall_s:.0f} s, "
              f"{len(result.changed)} changed (log {result.log})"
              + (f"; {len(result.resumed)} already ranked in that log" if result.resumed else ""), flush=True)
        for name in names:
            rows = [r for r in result.rows if r["task"] == name]
            first, kept = rows[0], next((r for r in rows if r["chosen"]), rows[0])
            print(f"         {name}: fastest alone {first['alone_ms']:.3f} ms, {first['in_model_ms']:.3f} ms in the "
                  f"model ({first['ratio']:.2f}x); kept candidate {kept['rank']} of {len(rows)}: "
                  f"{kept['alone_ms']:.3f} ms alone, {kept['in_model_ms']:.3f} ms in the model")
        for name, why in result.skipped.items():
            print(f"         {name}: not ranked ({why})")

    def compiling(self, note: str | None) -> None:
        print("compile  the tuned model (compile_relax with the log's best records)...", flush=True)
        if note:
            print(f"note     {note}")

    def winograd(self, choice) -> None:
        first, *rest = choice.lines()
        print(f"winograd {first}")
        for line in rest:
            print(f"         {line.strip()}")

    def tuned_build(self, tuned: dict, config, result) -> None:
        # fastest of the repeats, the statistic of the PyTorch reference (release.reference.time_torch)
        print(f"tuned    {tuned['fastest_ms']:.3f} ms end to end on {tuned['threads']} threads (fastest of "
              f"repeats; median {tuned['latency_ms']:.3f}) (ReLeASE {config.tuner}, {config.n_trial} trials, "
              f"{result.wall_s:.0f} s tuning); output matches {self._reference()}'s (max abs error "
              f"{tuned['max_abs_err']:.1e})")

    def _reference(self) -> str:
        """What the tuned build's output was checked against (:attr:`release.relax.Model.reference_name`)."""
        return self._model.reference_name if self._model is not None else "the reference"

    def untuned_build(self, untuned: dict) -> None:
        print(f"untuned  {untuned['fastest_ms']:.3f} ms on {untuned['threads']} threads (fastest of repeats; median "
              f"{untuned['latency_ms']:.3f}; TVM default schedules)", flush=True)

    def verdict(self, keep: str, why: str, lost: list) -> None:
        if keep == "untuned":
            print(f"verdict  {why}: the untuned build is exported instead"
                  + (f"; tasks whose tuned kernel lost to TVM's default: {', '.join(lost[:6])}" if lost else "")
                  + f"; more trials (--n-trial) may find faster kernels", flush=True)
        else:
            print(f"verdict  {why}", flush=True)

    def memory_planned(self, report) -> None:
        print(f"memory   {report.line()}", flush=True)

    def memory_outputs_differ(self) -> None:
        print("memory   the reordered build's outputs differ from the given order's: the given order is exported "
              "(please report this)", flush=True)

    def memory_peaks(self, given: int, reordered: int, change: str) -> None:
        print(f"memory   VM peak measured (child process, median of 3 runs each): given {given:,} "
              f"bytes, reordered {reordered:,} bytes ({change}); outputs "
              "identical; the reordered build is exported", flush=True)

    def comparing(self, steps: list, n_trial: int, wall_s: float) -> None:
        # the comparisons: a bar over them (elapsed, estimated time left), and each long one its own
        print(f"compare  {', '.join(steps)}" + (f" (ms: MetaSchedule tunes {n_trial} trials, as long as the "
                                              f"tuning above took, {wall_s:.0f} s, or longer)"
                                              if "ms" in steps else ""), flush=True)
        if self.progress:
            from ..progress import progress as make_progress  # a bar on a terminal, plain lines elsewhere

            self._bar = make_progress(len(steps), desc="compare", unit="step", every_n=1)

    def compared_ms(self, result: dict, n_trial: int, wall_s: float) -> None:
        print(f"ms       {result['fastest_ms']:.3f} ms on {result['threads']} threads (fastest of repeats; "
              f"MetaSchedule tune_relax, {n_trial} trials, {wall_s:.0f} s tuning)", flush=True)
        if self._bar is not None:
            self._bar.update(1)

    def compared_torch(self, reference) -> None:
        if reference is not None:
            print(f"torch    {reference.describe()} (PyTorch eager, same CPU)")
        else:
            name = self._model.name if self._model is not None else "the model"
            print(f"torch    n/a: {name} has no PyTorch module to time (an ONNX file); its output was checked "
                  f"against {self._reference()} (--compare onnxruntime times ONNX Runtime)")
        if self._bar is not None:
            self._bar.update(1)

    def compared_runtime(self, runtime: str, result: dict) -> None:
        from ..reference import reference_line

        print(reference_line(runtime, result) + ("" if "error" in result else
              f" (fastest of repeats, its own process; output checked, max abs error {result['max_abs_err']:.1e})"),
              flush=True)
        if self._bar is not None:
            self._bar.update(1)

    def compared(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def finished(self, result, tvm_output=None) -> int:
        """The closing lines of a :class:`release.commands.tune_model.TuneModelResult`: what TVM printed
        (counted; the text in files beside the log), the deploy lines (Python that loads the exported
        library and runs it on data of the model's input shapes), and the files the run keeps beside
        the log. ``tvm_output``: the run's :class:`release.stderr_capture.TvmOutput`. Returns 0."""
        lib, threads = result.library, result.threads
        captured = result.export_stderr
        if tvm_output is not None and (tvm_output.warnings or tvm_output.total.other):
            print(f"warnings TVM's and the frontends' stderr while importing, extracting and compiling: "
                  f"{tvm_output.summary()}")
        if captured is not None and (captured.warnings or captured.other):
            print(f"export   TVM's stderr while exporting: {captured.summary()}")
        for i, line in enumerate(deploy_lines(result.model, lib, threads)):
            print(("deploy   " if i == 0 else " " * 9) + line)
        for i, line in enumerate(kept_files(result.log, lib)):
            print(("files    " if i == 0 else " " * 9) + line)
        return 0


def deploy_lines(model, lib: str, threads: int) -> list[str]:
    """What ``release tune-model`` prints to deploy ``lib``: a line saying what it is and takes, then
    Python lines that run as printed: ``TVM_NUM_THREADS`` set to the ``threads`` it was tuned on, the
    library loaded (:func:`release.relax.load_library`), one array per input of ``model`` made
    (:meth:`release.relax.Model.input_specs`: random floats, zeros for integer inputs; the user's
    data goes in their place) with ``tvm.runtime.tensor`` (TVM 0.27's ``tvm.nd.array``), the model run
    and its outputs printed as NumPy arrays."""
    specs = model.input_specs()
    # a model whose weights are runtime inputs (an ONNX file exported without them) takes them at run time
    packed = ("weights packed in" if model.params
              else "weights not packed in: main takes them as inputs after the data")
    what = ", ".join(f"{name!r} {shape} {dtype}" for name, shape, dtype in specs)
    arrays = ", ".join(f"rng.standard_normal({shape}).astype({dtype!r})" if dtype.startswith(("float", "bfloat"))
                       else f"np.zeros({shape}, {dtype!r})" for _, shape, dtype in specs)
    return [
        f"{lib} ({packed}), on the {threads} threads it was tuned on; "
        f"{'input' if len(specs) == 1 else 'inputs'} {what} (random data below: put yours in its place):",
        f"import os; os.environ.setdefault('TVM_NUM_THREADS', '{threads}')  # before tvm starts its thread pool",
        "import numpy as np, tvm; from tvm import relax; from release.relax import load_library",
        f"vm = relax.VirtualMachine(load_library({lib!r}), tvm.cpu())  # tvm.runtime.load_module, minus TVM's "
        "'Scope Loaded' lines",
        f"rng = np.random.default_rng(0); inputs = [tvm.runtime.tensor(x) for x in [{arrays}]]",
        "out = vm['main'](*inputs); outs = [out] if hasattr(out, 'numpy') else list(out); "
        "print([o.numpy().shape for o in outs])",
    ]


def kept_files(log: str, lib: str) -> list[str]:
    """The files a ``release tune-model`` run keeps beside its log, each with what it is for: the log
    (resumed by the same command), the exported library, the PPO agents' folder (resumed with the
    log), TVM's captured output, the rejection summary. Remove them together to start afresh."""
    from ..optimizers.ppo import agents_folder
    from ..tuners.tuner import rejections_path

    lines = [f"{log}: every measurement (the same command resumes it)", f"{lib}: the exported model (deploy above)"]
    agents = agents_folder(log)
    if os.path.isdir(agents):
        n = sum(name.endswith(".agent.pt") for name in os.listdir(agents))
        lines.append(f"{agents}{os.sep}: {plural(n, 'PPO agent checkpoint')}, one per task tuned by a PPO tuner; "
                     "resumed with the log")
    for path, what in ((tvm_output_path(log), "what TVM and the model frontends printed while importing, "
                                              "extracting and compiling"),
                       (f"{lib}.export.log", "what TVM printed while exporting"),
                       (rejections_path(log), "the invalid configs, by reason")):
        if os.path.exists(path):
            lines.append(f"{path}: {what}")
    lines.append("(remove them with the log to start afresh)")
    return lines


def tvm_output_path(log: str) -> str:
    """``<log without .jsonl>.warnings.log``: where ``release tune-model`` keeps what TVM and the model
    frontends print while it imports, extracts and compiles (:func:`release.stderr_capture.tvm_output_to`)."""
    return os.path.splitext(log)[0] + ".warnings.log"
