"""Docker images without a Docker engine: the Dockerfiles parse and pass a small lint, and the
commands their entry point runs (tracker, server, status, tuner) work outside Docker."""

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


def _pyproject_pins() -> dict[str, str]:
    text = open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8").read()
    return dict(re.findall(r'"([A-Za-z0-9_.-]+)==([^";]+)"', text))


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


@pytest.mark.parametrize("name,base", [("Dockerfile.cpu", "python:"), ("Dockerfile.cuda", "nvidia/cuda:")])
def test_dockerfile_lint(name, base):
    path = os.path.join(DOCKER, name)
    ins = parse_dockerfile(path)
    kinds = [k for k, _ in ins]
    # ARGs, then exactly one FROM (single stage) on a pinned base of the right family
    first = kinds.index("FROM")
    assert set(kinds[:first]) <= {"ARG"} and kinds.count("FROM") == 1
    args = dict(a.split("=", 1) for k, a in ins[:first])
    image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], ins[first][1])
    assert image.startswith(base) and ":" in image and not image.endswith(":latest"), image
    if name == "Dockerfile.cuda":
        assert "-runtime-" in image  # an NVIDIA CUDA runtime base, as the issue asks
    runs = [a for k, a in ins if k == "RUN"]
    for r in runs:
        if "apt-get install" in r:
            assert "--no-install-recommends" in r and "rm -rf /var/lib/apt/lists/*" in r and "apt-get update" in r
            assert "g++" in r and "tini" in r  # servers link uploaded .tar kernels; tini reaps sessions
        for cmd in re.findall(r"pip install ([^&]*)", r):
            pkgs = [w for w in cmd.split() if not w.startswith("-") and not w.startswith("http")]
            for p in pkgs:
                assert "==" in p or p.startswith('".') or p.startswith("."), f"unpinned pip package {p} in {name}"
    # pins agree with pyproject (the image runs what the tests ran)
    pins = _pyproject_pins()
    for pkg, ver in re.findall(r"\b(torch|ray)==([\w.]+)", " ".join(runs)):
        assert pins[pkg] == ver, (pkg, ver, pins[pkg])
    assert any('pip install ".[ray]"' in r for r in runs)  # the package itself, with Ray
    # COPY sources exist and survive the Dockerfile's .dockerignore
    ignore = [l.strip() for l in open(path + ".dockerignore") if l.strip() and not l.startswith("#")]
    copies = [a.split() for k, a in ins if k == "COPY"]
    for parts in copies:
        for src in parts[:-1]:
            assert os.path.exists(os.path.join(ROOT, src)), src
            probe = src if os.path.isfile(os.path.join(ROOT, src)) else f"{src}/__init__.py"
            assert not _ignored(probe, ignore), f"{src} is excluded by {name}.dockerignore"
    assert _ignored(".venv/bin/python", ignore) and _ignored("runs/x.jsonl", ignore)
    # exec-form ENTRYPOINT: tini, then the copied entry point script; CMD in exec form
    entry = json.loads(dict(ins)["ENTRYPOINT"])
    assert entry[0] == "/usr/bin/tini" and entry[-1] == "/usr/local/bin/release-entrypoint"
    assert ["docker/entrypoint.sh", "/usr/local/bin/release-entrypoint"] in copies
    assert json.loads(dict(ins)["CMD"]) == ["help"]
    users = [a for k, a in ins if k == "USER"]
    assert users and users[-1] not in ("root", "0")
    assert kinds.index("USER") > max(i for i, k in enumerate(kinds) if k == "RUN")  # installs run as root


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
