"""The `release` command line: acceptance runs, kill-and-resume, and one-line errors on bad input.

The one-line-error cases run in this process (``release.cli.main([...])``, output captured): each
subprocess start imports TVM and PyTorch (10-96 s apiece on a loaded 2-core machine).
A few tests still start ``python -m release.cli`` as the real entry point: a folder as
``--log``, a log of another task, a file that is not a log, Ctrl-C, a killed run, a closed pipe.
"""

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from conftest import release_here

FAST = ["--number", "1", "--repeat", "1", "--min-repeat-ms", "0", "--no-progress"]


def release(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "release.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def lines(path, defaults=False):
    """The log's records: the tuned configs, or (``defaults``) the records of TVM's default schedule."""
    with open(path) as f:
        return [r for r in (json.loads(l) for l in f if l.strip()) if bool(r.get("default")) == defaults]


def assert_one_line_error(proc, *fragments):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = proc.stderr.strip().splitlines()
    assert "Traceback" not in proc.stderr
    assert err and err[-1].startswith("release: error:"), proc.stderr
    for frag in fragments:
        assert frag in err[-1], err[-1]


@pytest.mark.slow
@pytest.mark.parametrize("workload,n", [("resnet18.conv2d.2", 64)])
def test_tune_resnet18_conv2_64_random_trials_and_check(tmp_path, workload, n):
    """Foundation acceptance: 64 records, and the kernel compiled from them matches the reference."""
    _tune_and_check(tmp_path, workload, n)


def test_tune_8_random_trials_and_check(tmp_path):
    """The default suite's version of the acceptance run: tiny.matmul.1, 8 trials, the check."""
    _tune_and_check(tmp_path, "tiny.matmul.1", 8)


def _tune_and_check(tmp_path, workload, n):
    log = tmp_path / "r.jsonl"
    p = release("tune", "--workload", workload, "--tuner", "random", "--n-trial", str(n),
                "--log", str(log), *FAST)
    assert p.returncode == 0, p.stdout + p.stderr
    recs = lines(log)
    assert len(recs) == n
    assert len({tuple(r["config"]) for r in recs}) == n
    assert "matches the reference" in p.stdout
    assert "GFLOPS" in p.stdout
    from release.target import host_cores

    assert f"kernels timed on {host_cores()} threads" in p.stdout
    assert {r["threads"] for r in recs if r["costs"]} == {host_cores()}
    assert f"log      {log}" in p.stdout and "apply_history_best" in p.stdout
    _check_default_line(p.stdout, log)


def _check_default_line(out: str, log) -> None:
    """``release tune`` measured TVM's default schedule once (one ``default`` record: no config, no
    trace) and its ``default`` line says which is faster, as the printed timings say."""
    import re

    (dflt,) = lines(log, defaults=True)
    assert dflt["config"] == [] and dflt["trace"] is None and dflt["costs"], dflt
    best = float(re.search(r"^best +([0-9.]+) ms", out, re.M).group(1))
    line = next(ln for ln in out.splitlines() if ln.startswith("default  "))
    ms = float(re.search(r"default +([0-9.]+) ms", line).group(1))
    assert abs(ms - 1e3 * sum(dflt["costs"]) / len(dflt["costs"])) < 1e-3, (line, dflt["costs"])
    if ms > best:
        assert "the best tuned kernel is" in line and "x faster" in line, line
    elif ms < best:
        assert "FASTER than the best tuned kernel" in line, line


# `release tune` that writes 4 records and then waits (before writing a 5th) to be killed: the kill comes
# mid-run (the build workers busy with the next configs) at a point that does not depend on how fast
# the run goes, so the records before the kill are a count, not a race between this test and the run
_STOPS_AFTER_4_RECORDS = """
import sys, threading, time
from release.cli import main
from release.measure import records
write, lock, written = records.log_to_file.on_result, threading.Lock(), [0]
def on_result(self, tuner, inputs, results):
    with lock:
        while written[0] >= 4:
            time.sleep(60)
        write(self, tuner, inputs, results)
        written[0] += len(results)
records.log_to_file.on_result = on_result
sys.exit(main(sys.argv[1:]))
"""


def test_killed_run_resumes_without_measuring_twice(tmp_path):
    log = tmp_path / "k.jsonl"
    cli = ["tune", "--workload", "tiny.matmul.1", "--tuner", "random", "--n-trial", "12", "--log", str(log),
           "--seed", "3", *FAST]
    err = tmp_path / "stderr.txt"
    with open(err, "w") as f:
        proc = subprocess.Popen([sys.executable, "-c", _STOPS_AFTER_4_RECORDS, *cli], stdout=subprocess.DEVNULL,
                                stderr=f, start_new_session=True)
    deadline = time.time() + 600  # a hang guard only
    while time.time() < deadline and proc.poll() is None:
        if log.exists() and len(log.read_text().splitlines()) >= 4:
            break
        time.sleep(0.05)
    assert proc.poll() is None, err.read_text()  # still running: 4 of 12 records written
    os.killpg(proc.pid, signal.SIGKILL)  # the tuner and its build workers
    proc.wait()
    before = log.read_text()
    n_before = len(before.splitlines())
    assert n_before == 4
    args = [sys.executable, "-m", "release.cli", *cli]
    p = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    assert f"resuming {n_before} records" in p.stdout
    after = log.read_text()
    assert after.startswith(before)  # nothing completed before the kill is lost
    recs = lines(log)
    assert len(recs) == 12
    assert len({tuple(r["config"]) for r in recs}) == 12  # no config measured twice


def test_workloads_lists_names_and_gflop(capsys):
    p = release_here(capsys, "workloads")
    assert p.returncode == 0
    assert "resnet18.conv2d.2" in p.stdout and "bert-base.dense.3" in p.stdout
    row = next(l for l in p.stdout.splitlines() if l.startswith("resnet18.conv2d.2 "))
    assert "0.231" in row  # 2*64*56*56*64*9 FLOP


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("args,fragments", [
    (["--workload", "resnet18.conv2d.77"], ["unknown workload 'resnet18.conv2d.77'"]),
    (["--target", "{bad json"], ["not valid JSON"]),
    (["--target", "llvm -mcpu=znver3"], ["old string form", "'{\"kind\": \"llvm\", \"mcpu\": \"znver3\"}'"]),
    (["--target", '{"kind": "llvm", "mcpu": "notacpu"}'], ["mcpu 'notacpu' is not a CPU LLVM knows"]),
    # slow: the CUDA task's tensor intrinsics import for 20-45 s before the device check; the quick version:
    # test_a_target_without_its_device_is_refused_by_the_runner. On a machine with a CUDA device there is no error.
    pytest.param(["--target", "cuda"], ["no cuda device"], marks=[pytest.mark.slow, pytest.mark.skipif(
        "__import__('tvm').cuda(0).exist", reason="this machine has a CUDA device")]),
    (["--n-trial", "0"], ["--n-trial 0"]),
    (["--n-trial", "-5"], ["--n-trial -5"]),
    (["--tuner", "annealing-please"], ["unknown tuner 'annealing-please'"]),
])
def test_bad_input_gets_one_line(tmp_path, args, fragments, capsys):
    p = release_here(capsys, "tune", "--workload", "tiny.matmul.1", "--log", str(tmp_path / "x.jsonl"), *FAST, *args)
    assert_one_line_error(p, *fragments)


def test_a_target_without_its_device_is_refused_by_the_runner():
    """What `release tune --target cuda` checks before building the knob space (the slow CLI case above):
    the runner names the missing device and the fix in one line; where the device exists, no error."""
    import tvm

    from release.errors import MeasureError
    from release.measure import LocalRunner

    runner = LocalRunner(number=1, repeat=1, min_repeat_ms=0)
    assert runner.check_device(tvm.target.Target({"kind": "llvm"})) is None
    cuda = tvm.target.Target({"kind": "cuda", "arch": "sm_90"})
    if tvm.cuda(0).exist:
        assert runner.check_device(cuda) is None
    else:
        with pytest.raises(MeasureError, match="^no cuda device on this machine to run cuda kernels: measure "
                                               "through a TVM RPC tracker") as err:
            runner.check_device(cuda)
        assert "\n" not in str(err.value)
    runner.close()


@pytest.mark.parametrize("command", ["tune", "tune-model"])
def test_log_path_that_cannot_be_written_gets_one_line(tmp_path, command, capsys):
    """A --log whose folder cannot exist (an ancestor is a file) or cannot be written is refused in
    one line before any work, for tune and tune-model, and nothing is created."""
    afile = tmp_path / "t.jsonl"
    afile.write_text("")
    model = ["--model", "tiny-cnn"] if command == "tune-model" else ["--workload", "tiny.matmul.1"]
    p = release_here(capsys, command, *model, "--log", str(afile / "sub" / "x.jsonl"), *FAST)
    assert_one_line_error(p, f"{afile} is a file, not a folder")
    assert afile.read_text() == "" and sorted(os.listdir(tmp_path)) == ["t.jsonl"]
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if not os.access(locked, os.W_OK):  # root may write anywhere: only the first case then
            p = release_here(capsys, command, *model, "--log", str(locked / "x.jsonl"), *FAST)
            assert_one_line_error(p, "is not writable")
    finally:
        locked.chmod(0o700)


def test_unreachable_rpc_tracker(tmp_path, capsys, connection_attempts):
    from release.measure.tracker import QUERY_TIMEOUT

    port = _free_port()
    p = release_here(capsys, "tune", "--workload", "tiny.matmul.1", "--runner", "rpc", "--rpc-key", "k", "--rpc-port", str(port),
                "--log", str(tmp_path / "x.jsonl"), *FAST)
    assert_one_line_error(p, f"no RPC tracker answers at 127.0.0.1:{port}", "Connection refused")
    # in bounded time: one refused attempt with a finite timeout, no retry
    assert [t for p, t in connection_attempts if p == port] == [QUERY_TIMEOUT]


def test_log_written_for_another_task(tmp_path, capsys):
    log = tmp_path / "other.jsonl"
    log.write_text(json.dumps({"task": "resnet18.conv2d.6/0123", "name": "resnet18.conv2d.6",
                               "target": '{"kind": "llvm"}', "config": [0, 1]}) + "\n")
    p = release_here(capsys, "tune", "--workload", "tiny.matmul.1", "--log", str(log), *FAST)
    assert_one_line_error(p, "written for another task", "resnet18.conv2d.6")
    assert len(log.read_text().splitlines()) == 1  # untouched


@pytest.mark.parametrize("args,fragments", [
    (["--tuner", "random", "--plan-size", "4"], ["tuner 'random' takes no plan_size"]),
    (["--tuner", "xgb", "--feature-type", "pixels"], ["pixels"]),
    (["--tuner", "xgb", "--loss-type", "hinge"], ["hinge"]),
    (["--tuner", "xgb", "--plan-size", "0"], ["plan_size"]),
    (["--tuner", "xgb", "--warm-start", "a.agent.pt"], ["--warm-start applies to the PPO tuners", "'xgb'"]),
    (["--tuner", "release", "--warm-start", "missing.agent.pt"], ["missing.agent.pt does not exist"]),
    (["--early-stopping", "0"], ["--early-stopping 0 must be a positive number", "leave it out"]),
])
def test_bad_tuner_options_get_one_line(tmp_path, args, fragments, capsys):
    p = release_here(capsys, "tune", "--workload", "tiny.matmul.1", "--log", str(tmp_path / "x.jsonl"), *FAST, *args)
    assert_one_line_error(p, *fragments)


@pytest.mark.parametrize("args,fragments", [
    (["--tier", "huge"], ["unknown tier 'huge'"]),
    (["--tuners", "release", "random"], ["baseline 'xgb' is not among the tuners", "--baseline"]),
    (["--tuners", "xgb", "annealing-please"], ["unknown tuners ['annealing-please']"]),
    (["--n-trial", "0"], ["n_trial=0"]),
    (["--seeds"], ["--seeds was given without a value"]),
    (["--tuners"], ["--tuners was given without a value"]),
    (["--tuners", "random", "bogus", "--report-only"], ["unknown tuners ['bogus']"]),
    (["--workloads", "nope.matmul", "--report-only"], ["unknown workload 'nope.matmul'"]),
    (["--tier", "smoke", "--against", "bogus"], ["--against bogus: not among the tuners"]),
    (["--tier", "smoke", "--report-only"], ["no logs of these runs", "--logs"]),
])
def test_bad_bench_input_gets_one_line(tmp_path, args, fragments, capsys):
    p = release_here(capsys, "bench", "--workloads", "tiny.matmul.1", "--seeds", "0", "--out", str(tmp_path), "--no-progress", *args)
    assert_one_line_error(p, *fragments)
    assert not (tmp_path / "logs").exists() or not any((tmp_path / "logs").iterdir())  # nothing ran


@pytest.mark.slow
def test_bench_report_only_remeasures(tmp_path):
    out = str(tmp_path / "b")
    p = release("bench", "--tier", "smoke", "--n-trial", "2", "--out", out, "--no-progress")
    assert p.returncode == 0, p.stderr
    assert not os.path.exists(os.path.join(out, "remeasure.json"))
    p = release("bench", "--tier", "smoke", "--n-trial", "2", "--out", out, "--report-only", "--remeasure")
    assert p.returncode == 0, p.stderr
    with open(os.path.join(out, "remeasure.json")) as f:
        assert set(json.load(f)["gflops"]["tiny.matmul.1"]) == {"random|0", "grid|0"}


def test_piped_output_ends_quietly():
    # a reader that stops early (| head) is not an error: here the reader is gone before the first line
    proc = subprocess.Popen([sys.executable, "-m", "release.cli", "workloads"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err


@pytest.mark.slow
def test_log_cut_mid_line_loses_no_record_across_two_resumes(tmp_path):
    """A crash that cut the last line mid-write: the next record starts on a new line.
    Slow (three CLI runs); the default suite has the unit version,
    ``tests/measure/test_records.py::test_writer_starts_a_new_line_after_a_cut_one``."""
    log = tmp_path / "t.jsonl"
    base = ["tune", "--workload", "tiny.matmul.1", "--tuner", "random", "--log", str(log), "--no-check", *FAST]
    p = release(*base, "--n-trial", "4")
    assert p.returncode == 0, p.stderr
    text = log.read_text()
    full = text.splitlines()
    assert len(full) == 5 and json.loads(full[4])["default"]  # 4 configs, then TVM's default schedule
    log.write_text(text + full[2][: len(full[2]) // 2])  # half of line 3 appended, no newline
    p = release(*base, "--n-trial", "6")
    assert p.returncode == 0, p.stderr
    assert "resuming 4 records" in p.stdout
    p = release(*base, "--n-trial", "7")
    assert p.returncode == 0, p.stderr
    assert "resuming 6 records" in p.stdout  # the first record written after the cut line was kept
    raw = log.read_text().splitlines()
    assert raw[5] == full[2][: len(full[2]) // 2]  # the cut line is left in the file, on its own line
    recs = [json.loads(l) for i, l in enumerate(raw) if i != 5]
    assert sum(bool(r["default"]) for r in recs) == 1  # measured once, not again on resume
    recs = [r for r in recs if not r["default"]]
    assert len(recs) == 7
    assert len({tuple(r["config"]) for r in recs}) == 7


def test_log_that_is_not_a_tuning_log_is_refused_untouched(tmp_path, capsys):
    """A non-log file passed as --log: one line, exit 2, file unchanged."""
    log = tmp_path / "pyproject.toml"
    text = '[project]\nname = "x"\nversion = "0.1"\n'
    log.write_text(text)
    p = release_here(capsys, "tune", "--workload", "tiny.matmul.1", "--log", str(log), *FAST)
    assert_one_line_error(p, str(log), "is not a tuning log")
    assert log.read_text() == text


@pytest.mark.parametrize("command", ["tune", "tune-model"])
def test_log_naming_a_folder_gets_one_line(tmp_path, command):
    """``--log`` naming a directory."""
    extra = ["--workload", "tiny.matmul.1"] if command == "tune" else ["--model", "tiny-cnn", "--compare", ""]
    p = release(command, *extra, "--log", str(tmp_path), *FAST)
    assert_one_line_error(p, f"log path {tmp_path} is a folder", "tune.jsonl")


def test_ctrl_c_during_worker_start_up_prints_one_line(tmp_path):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) while the build workers are
    importing TVM: one line, no worker traceback, a prompt exit, no worker left."""
    import psutil

    args = [sys.executable, "-m", "release.cli", "tune", "--workload", "tiny.matmul.1", "--n-trial", "8",
            "--log", str(tmp_path / "i.jsonl"), *FAST]
    # a terminal's foreground job: SIGINT at its default, also when this suite runs as a background job of a
    # non-interactive shell (`make test &`, nohup), which starts every child with SIGINT ignored
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    workers, deadline = [], time.time() + 300
    while not workers and time.time() < deadline and proc.poll() is None:
        try:
            workers = [c for c in psutil.Process(proc.pid).children(recursive=True)
                       if "tvm.exec.popen_worker" in c.cmdline()]
        except psutil.Error:
            pass
        time.sleep(0.02)
    assert workers, "no build worker started"
    exits = _exit_events([w.pid for w in workers])  # opened while they run: each becomes readable at its exit
    os.killpg(proc.pid, signal.SIGINT)  # the workers are still starting (importing TVM takes seconds)
    # the timeout is a hang guard only: an exit that waited for the run would end by it, but how
    # many seconds a prompt exit takes is up to the machine's load
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, out + err
    assert err.strip().splitlines() == ["release: interrupted"], err
    # every worker's exit is an event (its pidfd turns readable, reaped or not): waited for, not slept on;
    # the timeout is a hang guard only (a worker left running fails the test after it)
    assert _wait_exits(exits, timeout=120) == [], "build workers left running"


def _exit_events(pids: list) -> dict:
    """``{pidfd: pid}`` for each process of ``pids`` still running (Linux ``pidfd_open``): a pidfd becomes
    readable when its process exits, whoever reaps it; a pid already gone has none."""
    fds = {}
    for pid in pids:
        try:
            fds[os.pidfd_open(pid)] = pid
        except ProcessLookupError:
            pass
    return fds


def _wait_exits(fds: dict, timeout: float) -> list:
    """Wait until every pidfd of ``fds`` (:func:`_exit_events`) is readable; returns the pids of those that
    were not within ``timeout`` seconds (a hang guard), and closes the pidfds."""
    import select

    poller, left = select.poll(), dict(fds)
    for fd in fds:
        poller.register(fd, select.POLLIN)
    deadline = time.monotonic() + timeout
    while left and time.monotonic() < deadline:
        for fd, _ in poller.poll(max(1, int(1000 * (deadline - time.monotonic())))):
            poller.unregister(fd)
            left.pop(fd, None)
    for fd in fds:
        os.close(fd)
    return sorted(left.values())


def test_help_gives_every_option_a_text_and_each_default_once():
    """Help texts: no option without help, no '(default: x) (default: y)'."""
    import argparse
    import re

    from release.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name in ("workloads", "tune", "tune-model", "bench"):
        p = sub.choices[name]
        formatter = p._get_formatter()
        for act in p._actions:
            if not act.option_strings or act.dest == "help":
                continue
            assert act.help, f"release {name} {act.option_strings[0]} has no help"
            shown = formatter._expand_help(act)  # as --help prints it
            assert len(re.findall(r"\(default\b", shown)) <= 1, f"release {name} {act.option_strings[0]}: {shown}"


def test_top_level_help_examples_parse():
    import shlex

    from release.cli import EXAMPLES, build_parser

    lines = [l.strip() for l in EXAMPLES.splitlines() if l.strip().startswith("release ")]
    assert len(lines) >= 4
    parser = build_parser()
    for line in lines:
        argv = shlex.split(line.split("  ")[0])[1:]
        if "--help" not in argv:
            assert parser.parse_args(argv).func, line
    assert "examples:" in parser.format_help()


@pytest.mark.slow  # the deploy tutorial's quick run (tests/test_tutorials.py) runs a tuned kernel as printed
def test_tune_blocked_layout_and_the_printed_usage_runs(tmp_path):
    """`--layout NCHWc` tunes the channel-blocked conv2d; the `use` lines it prints compile the best
    kernel when run as printed, on the target's threads."""
    log = tmp_path / "c.jsonl"
    p = release("tune", "--workload", "tiny.conv2d.1", "--layout", "NCHWc", "--tuner", "random", "--n-trial", "4",
                "--log", str(log), *FAST)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "tiny.conv2d.1-NCHW" in p.stdout and "matches the reference" in p.stdout
    lines = p.stdout.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("use      "))
    more = itertools.takewhile(lambda ln: ln.startswith(" " * 9), lines[start + 1:])  # the block's next lines
    use = [lines[start][9:]] + [ln[9:] for ln in more]
    # threads, the database, the compile, random inputs of the task's shapes, the run checked against the reference
    assert len(use) == 5 and "TVM_NUM_THREADS" in use[0], p.stdout
    code = "\n".join(x.strip().replace("; ", "\n") for x in use)  # exactly as printed
    code += "\nprint(type(lib).__name__); print('threads', tvm.runtime.num_threads())"
    env = {k: v for k, v in os.environ.items() if k != "TVM_NUM_THREADS"}  # a user's shell: none set
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, code + run.stderr
    # the kernel runs on the threads it was tuned on (TVM's runtime otherwise picks its own count: 1 here)
    threads = use[0].split("os.environ.setdefault('TVM_NUM_THREADS', '")[1].split("'")[0]
    assert f"threads {threads}" in run.stdout, run.stdout
    assert float(run.stdout.split("max abs error ")[1].split()[0]) < 1e-3, run.stdout  # the printed run's check


# slow: ~26 s; tune-model's CLI runs in make test through test_model_zoo's cli route
@pytest.mark.slow
def test_tune_model_says_what_the_budget_leaves_untuned_and_how_to_deploy(tmp_path):
    """Issue 16 item 3: a budget short of one round per task is named with the budget that covers
    every task; the per-task table shows each task's FLOP share; the exported library loads and runs
    as the printed deploy line says."""
    log = tmp_path / "m.jsonl"
    p = release("tune-model", "--model", "tiny-cnn", "--tuner", "random", "--n-trial", "8", "--compare", "",
                "--log", str(log), *FAST)
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout
    assert "FLOP %" in out and "resuming" not in out
    assert "conv2d layout NCHWc (1 blocked conv2d task)" in out  # --layout auto: blocked on a CPU target
    n_tasks = int(out.split("tunable tasks")[0].split()[-1])
    assert n_tasks >= 2
    assert f"of {n_tasks} tasks;" in out and "get no trial" in out
    assert f"--n-trial {8 * n_tasks} covers every task once" in out
    lib = str(log).replace(".jsonl", ".so")
    assert f"deploy   {lib} (weights packed in), on the " in out  # a built-in model's weights are constants
    deploy = next(ln for ln in out.splitlines() if ln.startswith("deploy   "))
    threads = out.split("os.environ.setdefault('TVM_NUM_THREADS', '")[1].split("'")[0]  # the deploy code's line
    assert f"on the {threads} threads it was tuned on" in deploy  # the printed code sets the target's threads
    code = ("import numpy as np, tvm\nfrom tvm import relax\nfrom release import relax as M\n"
            "m = M.load_model('tiny-cnn')\ninputs = [tvm.runtime.tensor(x) for x in m.inputs]\n"
            f"vm = relax.VirtualMachine(tvm.runtime.load_module({lib!r}), tvm.cpu()); out = vm['main'](*inputs)\n"
            "got = out.numpy() if hasattr(out, 'numpy') else out[0].numpy()\n"
            "assert np.allclose(got, m.reference()[0], rtol=1e-3, atol=1e-3)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]


def test_a_budget_within_the_random_warm_up_is_said(tmp_path, capsys):
    """Issue 19 item 15: with --n-trial <= plan_size a model-based tuner is random search; say so."""
    p = release_here(capsys, "tune", "--workload", "tiny.matmul.1", "--tuner", "xgb", "--n-trial", "4", "--log",
                str(tmp_path / "x.jsonl"), "--no-check", *FAST)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "note     xgb measures 64 random configs before its cost model guides a trial" in p.stdout
    assert "--n-trial 4 this run is random search" in p.stdout


def _all_commands(parser, prefix=()):
    """Every command path of the parser: ``("tune",)``, ``("regal", "optimize")``, ..."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*prefix, name)
                yield from _all_commands(sub, (*prefix, name))


def test_argparse_errors_are_one_line_for_every_command(capsys):
    """An unknown flag (argparse's own error) on any command: exit 2, one line naming the problem and
    where the options are listed, no usage block."""
    from release.cli import build_parser

    commands = list(_all_commands(build_parser()))
    assert ("tune",) in commands and ("regal", "optimize") in commands
    for path in [(), *commands]:
        r = release_here(capsys, *path, "--no-such-flag")
        err = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(err) == 1, (path, r.stderr)
        assert f"release{''.join(' ' + p for p in path)} --help" in err[0], err
        assert "--no-such-flag" in err[0] or "arguments are required" in err[0], err  # whichever argparse meets first
        assert "usage:" not in r.stderr
