"""Docker images without a Docker engine: the Dockerfiles parse and pass a small lint, and the
commands their entry point runs (tracker, server, status, tuner) work outside Docker. The images built and
run: test_docker_images.py."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import subprocess
import sys

import pytest

from .conftest import free_port, kill_tree, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCKER = os.path.join(ROOT, "docker")
ENTRY = os.path.join(DOCKER, "entrypoint.sh")
INSTRUCTIONS = {"FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME", "USER",
                "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL"}


def parse_dockerfile(path: str) -> list[tuple[str, str]]:
    """``[(INSTRUCTION, arguments)]``: comments dropped, ``\\`` continuations joined.

    Raises ValueError on an unknown instruction or a dangling continuation (what `docker build`
    rejects at parse time)."""
    out, buf = [], ""
    for n, raw in enumerate(open(path, encoding="utf-8"), start=1):
        line = raw.rstrip("\n")
        if not buf and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if buf and line.lstrip().startswith("#"):
            continue  # comment inside a continued instruction
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        full = (buf + line).strip()
        buf = ""
        word, _, rest = full.partition(" ")
        if word.upper() not in INSTRUCTIONS:
            raise ValueError(f"{path}:{n}: unknown instruction {word!r}")
        out.append((word.upper(), rest.strip()))
    if buf:
        raise ValueError(f"{path}: the last instruction ends with a continuation")
    return out


def _ignored(path: str, patterns: list[str]) -> bool:
    """Docker's .dockerignore rule: the last matching pattern wins (``!`` re-includes)."""
    ignored = False
    for p in patterns:
        neg = p.startswith("!")
        pat = p[1:] if neg else p
        if fnmatch.fnmatch(path, pat) or fnmatch.fnmatch(path, pat.rstrip("*").rstrip("/") + "/*") \
                or path == pat.rstrip("/*"):
            ignored = not neg
    return ignored


@pytest.mark.parametrize("name", ["Dockerfile.cpu", "Dockerfile.cuda"])
def test_dockerfile_lint(name):
    path = os.path.join(DOCKER, name)
    ins = parse_dockerfile(path)
    kinds = [k for k, _ in ins]
    # ARGs, then two stages on one base (a build argument): the official Python image by default
    first = kinds.index("FROM")
    assert set(kinds[:first]) <= {"ARG"} and kinds.count("FROM") == 2
    args = dict(a.split("=", 1) for k, a in ins[:first])
    froms = [a for k, a in ins if k == "FROM"]
    assert froms == ["${BASE_IMAGE} AS install", "${BASE_IMAGE}"], froms
    base = args["BASE_IMAGE"]
    assert base.startswith("python:3.11-") and "bookworm" in base and not base.endswith(":latest"), base
    runs = [a for k, a in ins if k == "RUN"]
    for r in runs:
        if "apt-get install" in r:
            assert "--no-install-recommends" in r and "rm -rf /var/lib/apt/lists/*" in r and "apt-get update" in r
            assert "apt-get clean" in r  # a base without docker-clean keeps the downloaded packages otherwise
            assert "g++" in r and "tini" in r  # servers link uploaded .tar kernels; tini reaps sessions
        for cmd in re.findall(r"pip install ([^&]*)", r):
            # from the wheelhouse only: the pins of pyproject.toml (requirements.txt, written by build.py) or
            # the project's own wheel without dependencies
            assert "--no-index" in cmd, f"pip install with an index in {name}: {cmd}"
            words = [w for w in cmd.split() if not w.startswith("-")]
            assert all(w.startswith("/wheelhouse") or w.startswith("/tmp/project/") for w in words), words
            if "/tmp/project/" in cmd:
                assert "--no-deps" in cmd
    stage1 = ins[first:kinds.index("FROM", first + 1)]
    assert any("-r /wheelhouse/requirements.txt" in a for k, a in stage1 if k == "RUN")
    final = ins[kinds.index("FROM", first + 1):]
    assert ("COPY", "--from=install /opt/venv /opt/venv") in final
    assert any("/tmp/project/*.whl" in a for k, a in final if k == "RUN")
    assert not any(k == "COPY" and "/wheelhouse" in a for k, a in final)  # the wheels stay in stage 1
    # COPY sources (relative to the context, docker/) pass docker/.dockerignore; the wheelhouse is
    # build.py's, every other source is in the repository
    ignore = [l.strip() for l in open(os.path.join(DOCKER, ".dockerignore")) if l.strip() and not l.startswith("#")]
    copies = [a.split() for k, a in ins if k == "COPY" and not a.startswith("--from")]
    for parts in copies:
        for src in parts[:-1]:
            probe = src.replace("*.whl", "x.whl") if "*" in src else (
                src + "/x.whl" if src.startswith("wheelhouse") and "." not in os.path.basename(src) else src)
            assert not _ignored(probe, ignore), f"{src} is excluded by docker/.dockerignore"
            if not src.startswith("wheelhouse"):
                assert os.path.exists(os.path.join(DOCKER, src)), src
    for other in ("build.py", ".build/cpu.log", "Dockerfile.cpu", "wheelhouse/x.tar.gz"):
        assert _ignored(other, ignore), other
    # exec-form ENTRYPOINT: tini, then the copied entry point script; CMD in exec form
    entry = json.loads(dict(ins)["ENTRYPOINT"])
    assert entry[0] == "/usr/bin/tini" and entry[-1] == "/usr/local/bin/release-entrypoint"
    assert ["entrypoint.sh", "/usr/local/bin/release-entrypoint"] in copies
    assert json.loads(dict(ins)["CMD"]) == ["help"]
    users = [a for k, a in ins if k == "USER"]
    assert users and users[-1] not in ("root", "0")
    assert kinds.index("USER") > max(i for i, k in enumerate(kinds) if k == "RUN")  # installs run as root
    env = " ".join(a for k, a in final if k == "ENV")
    assert "RELEASE_KNOWLEDGE=/work/knowledge" in env  # the knowledge base in the mounted folder
    if name == "Dockerfile.cuda":
        assert "TVM_CUDA_COMPILE_MODE=nvcc" in env and "/usr/local/cuda/bin" in env
        assert any("-r /wheelhouse-cuda/requirements.txt" in a for k, a in stage1 if k == "RUN")
        assert ["cuda_check.py", "/usr/local/share/release/cuda_check.py"] in copies


def test_cuda_wheels_are_one_toolkit():
    """docker/cuda-requirements.txt: exact pins of one CUDA release (13.0, whose libcudart.so.13 TVM's CUDA
    module links), the runtime and nvcc among them."""
    pins = dict(l.split("==") for l in (x.split("#")[0].strip() for x in open(os.path.join(DOCKER,
                "cuda-requirements.txt"))) if l)
    assert {"nvidia-cuda-runtime", "nvidia-cuda-nvcc", "nvidia-nvvm", "nvidia-cuda-crt"} <= set(pins)
    assert {v.split(".")[:2] == ["13", "0"] for v in pins.values()} == {True}, pins


def test_entrypoint_sends_every_release_command_to_release():
    """Each of release's commands is named in the entry point before the rule that runs a program of that
    name: Ray installs a `tune` program, which would otherwise win."""
    from release.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    text = open(ENTRY).read()
    line = next(l for l in text.splitlines() if "exec release \"$role\" \"$@\"" in l and "|" in l)
    named = set(line.split(")")[0].strip().split("|"))
    assert named == set(sub.choices), (named, set(sub.choices))
    assert text.index(line) < text.index("command -v")


def test_parser_rejects_bad_dockerfiles(tmp_path):
    p = tmp_path / "Dockerfile"
    p.write_text("FROM python:3.11-slim\nRUNN echo hi\n")
    with pytest.raises(ValueError, match="unknown instruction 'RUNN'"):
        parse_dockerfile(str(p))
    p.write_text("FROM python:3.11-slim\nRUN echo \\\n")
    with pytest.raises(ValueError, match="continuation"):
        parse_dockerfile(str(p))


def _env():
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


@pytest.mark.slow  # ~90 s under load: starts a tracker, a server and the CLI
def test_entrypoint_roles_outside_docker(tmp_path):
    """The entry point as the images run it: tracker, server, status, and the help of the tuner."""
    assert subprocess.run(["sh", "-n", ENTRY]).returncode == 0
    env = _env()
    p = subprocess.run(["sh", ENTRY, "help"], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0 and "tune-model" in p.stdout and "rpc" in p.stdout
    p = subprocess.run(["sh", ENTRY, "python", "-c", "print(6 * 7)"], capture_output=True, text=True, env=env)
    assert p.stdout.strip() == "42"
    port, sport = free_port(), free_port()
    tr = subprocess.Popen(["sh", ENTRY, "tracker", "--host", "127.0.0.1", "--port", str(port)], env=env,
                          stdout=open(tmp_path / "t.log", "w"), stderr=subprocess.STDOUT, start_new_session=True)
    sv = None
    try:
        wait_for(lambda: "tracker listening on 127.0.0.1:%d" % port in (tmp_path / "t.log").read_text(), 120,
                 "the tracker")
        sv = subprocess.Popen(["sh", ENTRY, "server", "--key", "box", "--tracker", f"127.0.0.1:{port}", "--host",
                               "127.0.0.1", "--port", str(sport), "--port-end", str(sport + 1)], env=env,
                              stdout=open(tmp_path / "s.log", "w"), stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(lambda: "registered at tracker" in (tmp_path / "s.log").read_text(), 120, "the server")
        st = subprocess.run(["sh", ENTRY, "status", "--tracker", f"127.0.0.1:{port}", "--key", "box"],
                            capture_output=True, text=True, env=env, timeout=120)
        assert st.returncode == 0, st.stderr
        row = [l for l in st.stdout.splitlines() if l.startswith("box")][0].split()
        assert row[1] == "1" and row[-1] == f"127.0.0.1:{sport}"
        # exec: the entry point's shell is replaced by release (signals reach it; tini reaps sessions)
        import psutil

        assert "release" in " ".join(psutil.Process(sv.pid).cmdline())
    finally:
        if sv is not None:
            kill_tree(sv)
        kill_tree(tr)
