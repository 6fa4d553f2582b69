"""``import release.tvm_autotvm``: AutoTVM's import path on TVM 0.27, which has no ``tvm.autotvm``.

Installing the alias changes ``tvm`` for the whole process, so each test runs in a fresh interpreter.
"""

import subprocess
import sys
import textwrap


def _python(code: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout)


def test_readme_line_works_and_names_resolve_to_release():
    """The README's command (the first two lines), then AutoTVM's names through ``tvm.autotvm``, which are
    release's own objects."""
    p = _python("""
        import release.tvm_autotvm; from tvm.autotvm.tuner import ReleaseTuner
        import tvm
        import tvm.autotvm.measure
        from tvm import autotvm
        from tvm.autotvm.tuner import XGBTuner
        import release.autotvm, release.measure, release.tuners.xgb, release.tuners.release_tuner

        assert ReleaseTuner is release.tuners.release_tuner.ReleaseTuner
        assert tvm.autotvm.tuner.XGBTuner is XGBTuner is release.tuners.xgb.XGBTuner
        assert autotvm.measure_option is release.autotvm.measure_option
        assert tvm.autotvm.measure.LocalRunner is release.autotvm.LocalRunner  # AutoTVM's signature
        assert issubclass(release.autotvm.LocalRunner, release.measure.LocalRunner)
        from tvm.autotvm.record import load_from_file, pick_best, decode
        assert tvm.autotvm.record.load_from_file is release.autotvm.record.load_from_file
        with autotvm.apply_history_best([]) as ctx:  # a context manager (no log: no records)
            assert len(ctx) == 0
        assert autotvm.callback.log_to_file is release.autotvm.callback.log_to_file
        task = autotvm.task.create("tiny.matmul.1", target="llvm")
        print(type(XGBTuner(task)).__name__, task.name)
    """)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines()[-1] == "XGBTuner tiny.matmul.1"


def test_relay_only_names_raise_a_clear_error_others_stay_attribute_errors():
    p = _python("""
        import release.tvm_autotvm
        import tvm
        from release.errors import AliasError
        out = []
        for stmt in ["from tvm.autotvm.task import extract_from_program", "from tvm import autotvm; autotvm.template",
                     "import tvm.autotvm.graph_tuner", "from tvm.autotvm import register_topi_compute"]:
            try:
                exec(stmt)
                out.append("no error: " + stmt)
            except AliasError as err:
                assert isinstance(err, ImportError)
                out.append(str(err))
        print("\\n".join(out))
        from tvm import autotvm
        assert not hasattr(autotvm, "no_such_name")  # AttributeError, as for any module
        release.tvm_autotvm.uninstall()
        assert not hasattr(tvm, "autotvm")
        try:
            import tvm.autotvm
        except ModuleNotFoundError:
            print("gone")
    """)
    assert p.returncode == 0, p.stderr
    msgs = p.stdout.strip().splitlines()
    assert len(msgs) == 5 and msgs[4] == "gone"
    for name, msg in zip(["tvm.autotvm.task.extract_from_program", "tvm.autotvm.template",
                          "tvm.autotvm.graph_tuner", "tvm.autotvm.register_topi_compute"], msgs):
        assert msg.startswith(f"{name} is AutoTVM's Relay/template API"), msg
        assert "ReleaseTuner(task)" in msg


def test_refuses_to_install_over_tvms_own_autotvm():
    """A TVM with its own ``tvm.autotvm`` (before 0.20) keeps it: stand one in and import the alias."""
    p = _python("""
        import sys, types
        import tvm
        sys.modules["tvm.autotvm"] = tvm.autotvm = types.ModuleType("tvm.autotvm")
        try:
            import release.tvm_autotvm
        except ImportError as err:
            print(type(err).__name__, err)
    """)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("AliasError TVM "), p.stdout
    assert "has its own tvm.autotvm" in p.stdout and "from release import autotvm" in p.stdout
