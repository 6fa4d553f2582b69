"""Ctrl-C (SIGINT to the process group, as a terminal sends it) and SIGTERM (as ``docker stop`` sends it)
while a measurement is in flight: exit 130 with one line, no worker left, the measurement in flight not
in the log, and a resumed run that completes.

The run is held on an event, not a sleep: the command runs under a small wrapper (``_HOLDS_A_RUN``) that,
on the first run of the second batch, gives MetaSchedule's real runner an evaluator that writes
``started`` from inside the run worker and then never returns. The test waits for that file, so the
signal always comes while a real measurement is in flight, whatever the machine's load.
"""

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
from conftest import release_here

FAST = ["--number", "1", "--repeat", "1", "--min-repeat-ms", "0", "--no-progress", "--seed", "3",
        "--timeout", "600"]  # the held run must not end by its own timeout

# the `release` CLI, with the first run of the second measured batch held inside the run worker.
# Before that run is submitted, the main process writes the batch's configs not yet reported (the one in
# flight first) to inflight.json; the worker writes `started` when the run begins.
_HOLDS_A_RUN = r"""
import json, os, sys
from release.cli import main
from release.measure import measurer, runner

marker = sys.argv[1]
state = {"batches": 0, "batch": [], "reported": [], "hold": False}

def held_evaluator(rt_mod, device, evaluator_config, repeated_args):
    import threading
    with open(os.path.join(marker, "started"), "w") as f:
        f.write(str(os.getpid()))
    threading.Event().wait()  # in flight until the worker is ended

measure = measurer.Measurer.measure
def held_measure(self, configs, on_result=None):
    state["batches"] += 1
    state["batch"] = [list(self.task.config_space.canonical(c)) for c in configs]
    state["reported"] = []
    state["hold"] = state["batches"] == 2
    def seen(r):
        state["reported"].append(list(r.config))
        if on_result is not None:
            on_result(r)
    return measure(self, configs, seen)
measurer.Measurer.measure = held_measure

class Held:
    # MetaSchedule's runner, whose evaluator is the held one for the run this hook holds
    def __init__(self, real):
        object.__setattr__(self, "real", real)
    def __getattr__(self, name):
        return getattr(self.real, name)
    def __setattr__(self, name, value):
        if name == "f_run_evaluator" and state["hold"]:
            value = held_evaluator
        setattr(self.real, name, value)
    def run(self, inputs):
        if state["hold"]:  # this run is held: the rest of the batch is not measured yet
            state["hold"] = False
            rest = [c for c in state["batch"] if c not in state["reported"]]
            with open(os.path.join(marker, "inflight.json"), "w") as f:
                json.dump(rest, f)
            if os.environ.get("HOLD_MAIN_IN_C"):
                # the main thread stuck in a C call that no signal interrupts (as in a long TVM compile),
                # the run going on in the worker: a locked mutex locked again
                import ctypes, threading
                threading.Thread(target=self.real.run, args=(inputs,), daemon=True).start()
                libc = ctypes.CDLL(None)
                mutex = ctypes.create_string_buffer(64)  # PTHREAD_MUTEX_INITIALIZER: zeros
                libc.pthread_mutex_lock(mutex)
                libc.pthread_mutex_lock(mutex)
        return self.real.run(inputs)

ms_runner = runner.LocalRunner._ms_runner
runner.LocalRunner._ms_runner = lambda self, threads=0: Held(ms_runner(self, threads))
sys.argv[1:] = sys.argv[2:]  # main() as the program runs it
sys.exit(main())
"""


def _records(log):
    if not os.path.exists(log):
        return []
    with open(log) as f:
        return [json.loads(line) for line in f if line.strip()]


def _group(pgid):
    """Live processes of process group ``pgid`` (zombies are already dead)."""
    out = []
    for p in psutil.process_iter():
        try:
            if os.getpgid(p.pid) == pgid and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p.pid)
        except (psutil.Error, ProcessLookupError, PermissionError):
            pass
    return out


def _interrupt_in_flight(tmp_path, cli, sig, env=None):
    """Run ``release CLI`` held on its second batch's first run, send ``sig`` to its process group once
    that run is in flight, and check what the issue asks; returns the records left in the log."""
    marker = tmp_path / "marker"
    marker.mkdir()
    err_path = tmp_path / "stderr.txt"
    # a terminal's foreground job: SIGINT at its default, also when this suite runs as a background job of a
    # non-interactive shell (`make test &`, nohup), which starts every child with SIGINT ignored
    with open(err_path, "w") as err:
        proc = subprocess.Popen([sys.executable, "-c", _HOLDS_A_RUN, str(marker), *cli], stdout=subprocess.DEVNULL,
                                stderr=err, start_new_session=True, env={**os.environ, **(env or {})},
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    started = marker / "started"
    deadline = time.time() + 600  # a hang guard only
    while not started.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert started.exists() and proc.poll() is None, err_path.read_text()
    held_pid = int(started.read_text() or 0) or None
    workers = [w.pid for w in psutil.Process(proc.pid).children(recursive=True)
               if "tvm.exec.popen_worker" in " ".join(w.cmdline())]
    assert workers and (held_pid is None or held_pid in workers), (workers, held_pid)
    os.killpg(proc.pid, sig)
    try:
        code = proc.wait(timeout=600)  # a hang guard only: how fast it stops is up to the machine's load
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    err = err_path.read_text()
    assert code == 130, err
    assert err.strip().splitlines()[-1:] == ["release: interrupted"], err
    assert "Traceback" not in err, err
    assert not [p for p in workers if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert _group(proc.pid) == [], "processes of the run's group are left"
    inflight = json.loads((marker / "inflight.json").read_text())
    assert inflight, "no run was in flight"
    recs = _records(cli[cli.index("--log") + 1])
    logged = [r["config"] for r in recs if not r.get("default")]
    assert logged, "the first batch was logged"
    assert not [c for c in inflight if c in logged], "a config in flight was logged"
    assert not [r for r in recs if r.get("error_kind") in ("run_error", "run_timeout")], recs
    return recs


def _resume(capsys, cli, before):
    """The same command again, in this process (a new interpreter's imports take a minute when loaded)."""
    p = release_here(capsys, *cli)
    assert p.returncode == 0, p.stdout + p.stderr
    log = cli[cli.index("--log") + 1]
    after = _records(log)
    assert after[:len(before)] == before  # nothing written before the signal is lost
    tuned = [r for r in after if not r.get("default")]
    assert not [r for r in after if r.get("error_kind") in ("run_error", "run_timeout")]
    assert len({tuple(r["config"]) for r in tuned}) == len(tuned)  # nothing measured twice
    return p, tuned


# each signal on each command; the default suite runs one of each kind (a subprocess start imports TVM and
# PyTorch: a minute on a loaded 2-core machine), make test-slow the others
@pytest.mark.parametrize("sig", [signal.SIGINT, pytest.param(signal.SIGTERM, marks=pytest.mark.slow)],
                         ids=["sigint", "sigterm"])
def test_tune_interrupted_in_flight_exits_130_and_resumes(tmp_path, capsys, sig):
    log = str(tmp_path / "t.jsonl")
    cli = ["tune", "--workload", "tiny.matmul.1", "--tuner", "random", "--n-trial", "8", "--n-parallel", "2",
           "--log", log, "--no-check", *FAST]
    before = _interrupt_in_flight(tmp_path, cli, sig)
    n_before = len([r for r in before if not r.get("default")])
    p, tuned = _resume(capsys, cli, before)
    assert f"resuming {n_before} records" in p.stdout, p.stdout
    assert len(tuned) == 8


def test_tune_interrupted_while_its_main_thread_is_stuck_in_c(tmp_path):
    """The main thread inside a C call that signals do not interrupt (as in a long TVM compile), a run in
    flight: the watcher thread still stops the run (exit 130, one line, no worker, nothing logged)."""
    log = str(tmp_path / "s.jsonl")
    cli = ["tune", "--workload", "tiny.matmul.1", "--tuner", "random", "--n-trial", "8", "--n-parallel", "2",
           "--log", log, "--no-check", *FAST]
    _interrupt_in_flight(tmp_path, cli, signal.SIGTERM, env={"HOLD_MAIN_IN_C": "1"})


@pytest.mark.parametrize("sig", [pytest.param(signal.SIGINT, marks=pytest.mark.slow), signal.SIGTERM],
                         ids=["sigint", "sigterm"])
def test_tune_model_interrupted_in_flight_exits_130(tmp_path, sig):
    log = str(tmp_path / "m.jsonl")
    cli = ["tune-model", "--model", "tiny-cnn", "--tuner", "random", "--n-trial", "8", "--n-parallel", "2",
           "--compare", "", "--log", log, *FAST]
    _interrupt_in_flight(tmp_path, cli, sig)


@pytest.mark.slow
def test_tune_model_resumes_after_interrupt(tmp_path, capsys):
    log = str(tmp_path / "m.jsonl")
    cli = ["tune-model", "--model", "tiny-cnn", "--tuner", "random", "--n-trial", "8", "--n-parallel", "2",
           "--compare", "", "--log", log, *FAST]
    before = _interrupt_in_flight(tmp_path, cli, signal.SIGINT)
    _, tuned = _resume(capsys, cli, before)
    assert len(tuned) >= 8
