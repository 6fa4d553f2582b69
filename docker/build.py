#!/usr/bin/env python3
"""Build the ReLeASE images: ``release:cpu`` (docker/Dockerfile.cpu) and ``release:cuda`` (docker/Dockerfile.cuda).

    python3 docker/build.py [cpu|cuda|all|wheelhouse] [--base IMAGE] [--local-base] [--offline]
                            [--wheelhouse DIR] [--tag-prefix NAME]

Steps (each failure is one line on stderr and exit status 2):

1. The engine: a ``docker`` client on PATH and a daemon that answers.
2. The wheelhouse (``docker/wheelhouse/``): the project's wheel, built from this checkout, and a wheel of every
   version ``pyproject.toml`` pins (the ``ray`` extra included) with their dependencies, downloaded with the
   host's pip for CPython 3.11 on glibc Linux x86-64; PyTorch is the CPU build (``RELEASE_TORCH_INDEX``, default
   https://download.pytorch.org/whl/cpu). ``docker/wheelhouse-cuda/`` adds NVIDIA's CUDA 13.0 wheels (runtime,
   nvcc) that ``docker/cuda-requirements.txt`` pins. The images install from these folders only (pip
   ``--no-index``), so a site without an index builds from a wheelhouse carried in (``--offline``).
3. The base (the Dockerfiles' ``BASE_IMAGE``, by default the official ``python:3.11-slim-bookworm``): used if
   the engine has it, else pulled; when no registry answers, a local base with the same Debian release and
   Python (``release-base:bookworm``) is made from Debian's packages with debootstrap, and one line says so.
4. ``docker build`` with the classic builder (``DOCKER_BUILDKIT=0``; BuildKit builds the same files), the full
   output in ``docker/.build/<image>.log``; then one line per image: build time and size.

``wheelhouse`` fills and checks the wheelhouse only (no engine needed): run it on a connected machine and
carry ``docker/wheelhouse*`` to one without an index.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

DOCKER_DIR = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(DOCKER_DIR)
BUILD_DIR = os.path.join(DOCKER_DIR, ".build")
WHEELHOUSE = os.path.join(DOCKER_DIR, "wheelhouse")
CUDA_REQUIREMENTS = os.path.join(DOCKER_DIR, "cuda-requirements.txt")
IMAGES = {"cpu": "Dockerfile.cpu", "cuda": "Dockerfile.cuda"}
LOCAL_BASE = "release-base:bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
# What the wheels must run on: the bases' CPython 3.11 and glibc 2.36 (Debian bookworm), x86-64.
PYTHON_TAG = "3.11"
PLATFORMS = [f"manylinux_2_{m}_x86_64" for m in range(36, 4, -1)] + [
    "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"]


class BuildError(Exception):
    """A failure the user can act on; its message is the one line printed."""


def normalize(name: str) -> str:
    """A distribution name as PEP 503 compares it (``Apache_TVM`` -> ``apache-tvm``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pyproject_pins(path: str = os.path.join(ROOT, "pyproject.toml")) -> list[str]:
    """The ``name==version`` pins an image holds: ``[project] dependencies`` and the ``ray`` extra.

    Parameters
    ----------
    path : str
        The project's ``pyproject.toml``.

    Returns
    -------
    list of str
        Pins in file order, e.g. ``["apache-tvm==0.27.0.post1", ..., "ray==2.60.0"]``.
    """
    text = open(path, encoding="utf-8").read()
    try:
        import tomllib

        project = tomllib.loads(text)["project"]
        deps = list(project["dependencies"]) + list(project.get("optional-dependencies", {}).get("ray", []))
    except ImportError:  # Python 3.10: the two arrays by pattern
        deps = re.findall(r'"([A-Za-z0-9_.-]+==[^";]+)"',
                          text.split("[project.optional-dependencies]")[0] + "\n".join(
                              l for l in text.splitlines() if l.strip().startswith("ray =")))
    return [d.replace(" ", "") for d in deps]


def build_requirements(path: str = os.path.join(ROOT, "pyproject.toml")) -> list[str]:
    """What building the project's wheel needs (``[build-system] requires``: setuptools, wheel)."""
    text = open(path, encoding="utf-8").read()
    block = re.search(r"^\[build-system\]\s*\n\s*requires\s*=\s*\[([^\]]*)\]", text, re.M)
    return re.findall(r'"([^"]+)"', block.group(1)) if block else []


def project_version(path: str = os.path.join(ROOT, "pyproject.toml")) -> str:
    """The project's version in ``pyproject.toml`` (``0.1.0``)."""
    return re.search(r'^version\s*=\s*"([^"]+)"', open(path, encoding="utf-8").read(), re.M).group(1)


def requirement_pins(path: str) -> list[str]:
    """The ``name==version`` lines of a requirements file (comments and blank lines left out)."""
    out = []
    for line in open(path, encoding="utf-8"):
        line = line.split("#", 1)[0].strip()
        if line:
            out.append(line)
    return out


def wheels(folder: str) -> dict[str, list[str]]:
    """``{normalized name: [versions]}`` of the ``.whl`` files in ``folder`` (empty if it does not exist)."""
    out: dict[str, list[str]] = {}
    if os.path.isdir(folder):
        for f in sorted(os.listdir(folder)):
            if f.endswith(".whl"):
                name, version = f[:-4].split("-")[:2]
                out.setdefault(normalize(name), []).append(version)
    return out


def missing_pins(folder: str, pins: list[str]) -> list[str]:
    """The pins of ``pins`` with no wheel of that name and version in ``folder``.

    A local version label counts as the pinned version (``torch-2.13.0+cpu`` is ``torch==2.13.0``), as pip's
    ``==`` does.
    """
    have = wheels(folder)
    out = []
    for pin in pins:
        name, version = pin.split("==")
        name = normalize(name.split("[")[0])
        if version not in [v.split("+")[0] for v in have.get(name, [])]:
            out.append(pin)
    return out


def _require_pins(folder: str, pins: list[str], source: str) -> None:
    """Raise :class:`BuildError`, one line saying what to do, when ``folder`` lacks a wheel of a pin of ``source``."""
    missing = missing_pins(folder, pins)
    if missing:
        more = f" with {len(missing) - 1} more" if len(missing) > 1 else ""
        raise BuildError(f"the wheelhouse {os.path.relpath(folder)} has no wheel of {missing[0]} (pinned in "
                         f"{source}{more}): run `python3 docker/build.py wheelhouse` where PyPI is reachable, or "
                         f"add it: pip download {missing[0]} --no-deps -d {os.path.relpath(folder)}")


def say(line: str) -> None:
    """One progress line on stdout, at once."""
    print(line, flush=True)


def run(cmd: list[str], what: str, log: str | None = None, env: dict | None = None,
        timeout: float | None = None) -> subprocess.CompletedProcess:
    """Run ``cmd``; on failure raise ``BuildError`` naming ``what`` and the last line of its output."""
    out = open(log, "a") if log else subprocess.PIPE
    try:
        p = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BuildError(f"{what} took over {timeout:g} s: {' '.join(cmd[:4])} ...") from None
    finally:
        if log:
            out.close()
    if p.returncode != 0:
        text = open(log).read() if log else p.stdout
        last = [l for l in text.strip().splitlines() if l.strip()][-1:] or ["(no output)"]
        where = f" (full output: {os.path.relpath(log)})" if log else ""
        raise BuildError(f"{what} failed: {last[0].strip()}{where}")
    return p


# ---------------------------------------------------------------------------------------------------- engine

def check_engine() -> None:
    """Raise ``BuildError`` unless a ``docker`` client is on PATH and its daemon answers."""
    if shutil.which("docker") is None:
        raise BuildError("no Docker engine on this machine: install one (Debian/Ubuntu: apt-get install docker.io; "
                         "elsewhere https://docs.docker.com/engine/install/), start it, and run this again")
    try:
        p = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True,
                           timeout=60)
    except subprocess.TimeoutExpired:
        raise BuildError("the Docker daemon does not answer within 60 s: check it (systemctl status docker)") from None
    if p.returncode != 0 or not p.stdout.strip():
        err = " ".join(p.stderr.split())
        if "permission denied" in err.lower():
            raise BuildError("the Docker daemon refuses this user (permission denied on its socket): run as root "
                             "or join the docker group (usermod -aG docker $USER, then log in again)")
        raise BuildError("the Docker engine is installed but its daemon is not running: start it "
                         "(systemctl start docker, or as root: dockerd &) and run this again"
                         + (f" [{err[:160]}]" if err else ""))


def image_exists(name: str) -> bool:
    """Whether the engine holds an image ``name``."""
    return subprocess.run(["docker", "image", "inspect", name], capture_output=True).returncode == 0


def image_size(name: str) -> int:
    """The size of image ``name`` in bytes, as ``docker images`` counts it (all its layers)."""
    return int(subprocess.run(["docker", "image", "inspect", "--format", "{{.Size}}", name], capture_output=True,
                              text=True, check=True).stdout.strip())


# ------------------------------------------------------------------------------------------------ wheelhouse

def _pip(args: list[str], what: str, log: str) -> None:
    run([sys.executable, "-m", "pip", "--disable-pip-version-check"] + args, what, log)


def _target_args() -> list[str]:
    args = ["--only-binary=:all:", "--python-version", PYTHON_TAG, "--implementation", "cp",
            "--abi", "cp" + PYTHON_TAG.replace(".", "")]
    for p in PLATFORMS:
        args += ["--platform", p]
    return args


def build_project_wheel(wheelhouse: str, log: str, offline: bool) -> str:
    """Build this checkout's wheel (``release_tvm-VERSION-py3-none-any.whl``) into ``wheelhouse/project``.

    The sources are copied to a temporary folder first, so the checkout gets no ``build/`` or ``*.egg-info``.
    The wheel's timestamps are fixed (``SOURCE_DATE_EPOCH``): the same sources give the same bytes, so the
    engine reuses the image's layers. The build backend (setuptools, wheel) comes from ``wheelhouse/build``,
    filled when online, so an offline build needs nothing of the host's Python but pip.
    """
    tools = os.path.join(wheelhouse, "build")
    if offline and not (os.path.isdir(tools) and any(f.endswith(".whl") for f in os.listdir(tools))):
        raise BuildError(f"the wheelhouse {os.path.relpath(wheelhouse)} has no build/ folder with "
                         f"{', '.join(build_requirements())} to build the project's wheel: run `python3 "
                         f"docker/build.py wheelhouse` where PyPI is reachable")
    folder = os.path.join(wheelhouse, "project")
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    with tempfile.TemporaryDirectory(prefix="release-wheel-") as tmp:
        for f in ("pyproject.toml", "README.md"):
            shutil.copy(os.path.join(ROOT, f), tmp)
        shutil.copytree(os.path.join(ROOT, "release"), os.path.join(tmp, "release"),
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        extra = ["--find-links", tools] + (["--no-index"] if offline else [])
        env = dict(os.environ, SOURCE_DATE_EPOCH="315532800")  # 1980-01-01, the earliest a zip holds
        run([sys.executable, "-m", "pip", "--disable-pip-version-check", "wheel", "--no-deps", "--quiet", "-w",
             folder] + extra + [tmp], "building the project's wheel", log, env=env)
    name = f"release_tvm-{project_version()}-py3-none-any.whl"
    if not os.path.exists(os.path.join(folder, name)):
        raise BuildError(f"building the project's wheel made no {name} in {folder}")
    return name


def fill_wheelhouse(wheelhouse: str, cuda: bool, offline: bool, log: str) -> None:
    """Make ``wheelhouse`` (and ``wheelhouse-cuda`` beside it if ``cuda``) hold every wheel an image installs.

    Downloads what is missing unless ``offline``; writes ``requirements.txt`` (what the Dockerfiles install) in
    each folder. Raises ``BuildError`` naming the first pin without a wheel, and when the PyTorch wheel is not the
    CPU build.
    """
    os.makedirs(wheelhouse, exist_ok=True)
    t0 = time.time()
    pins = pyproject_pins()
    if not offline:
        index = os.environ.get("RELEASE_TORCH_INDEX", TORCH_INDEX)
        torch = [p for p in pins if normalize(p.split("==")[0]) == "torch"]
        if torch and missing_pins(wheelhouse, torch):
            say(f"wheelhouse: PyTorch CPU build {torch[0]} from {index or 'the default index'}")
            _pip(["download", "--no-deps", "--quiet", "-d", wheelhouse] + _target_args()
                 + (["--extra-index-url", index] if index else []) + torch, "downloading PyTorch", log)
        _pip(["download", "--quiet", "-d", os.path.join(wheelhouse, "build"), "--only-binary=:all:"]
             + build_requirements(), "downloading the build backend", log)
        say(f"wheelhouse: {len(pins)} pins of pyproject.toml and their dependencies")
        _pip(["download", "--quiet", "-d", wheelhouse, "--find-links", wheelhouse] + _target_args() + pins,
             "downloading the pinned packages", log)
    _require_pins(wheelhouse, pins, "pyproject.toml")
    torch = wheels(wheelhouse).get("torch", [])
    if torch and not any(v.endswith("+cpu") for v in torch):
        raise BuildError(f"the wheelhouse holds PyTorch {torch[0]}, the CUDA build (with 3 GB of nvidia-* wheels): "
                         f"replace it with the CPU build: pip download torch=={torch[0]} --no-deps --index-url "
                         f"{TORCH_INDEX} -d {os.path.relpath(wheelhouse)}")
    wheel = build_project_wheel(wheelhouse, log, offline)
    with open(os.path.join(wheelhouse, "requirements.txt"), "w") as f:
        f.write("# written by docker/build.py: the pins of pyproject.toml (the project's wheel is in project/)\n")
        f.write("".join(p + "\n" for p in pins))
    n = len([w for w in os.listdir(wheelhouse) if w.endswith(".whl")])
    size = sum(os.path.getsize(os.path.join(wheelhouse, w)) for w in os.listdir(wheelhouse))
    say(f"wheelhouse: {n} wheels, {size / 1e9:.2f} GB in {os.path.relpath(wheelhouse)} (and project/{wheel}), "
        f"{time.time() - t0:.0f} s")
    if cuda:
        cuda_dir = wheelhouse + "-cuda"
        os.makedirs(cuda_dir, exist_ok=True)
        cuda_pins = requirement_pins(CUDA_REQUIREMENTS)
        if not offline and missing_pins(cuda_dir, cuda_pins):
            say(f"wheelhouse-cuda: {len(cuda_pins)} CUDA wheels of docker/cuda-requirements.txt")
            _pip(["download", "--quiet", "-d", cuda_dir, "--find-links", cuda_dir] + _target_args() + cuda_pins,
                 "downloading the CUDA wheels", log)
        _require_pins(cuda_dir, cuda_pins, "docker/cuda-requirements.txt")
        shutil.copy(CUDA_REQUIREMENTS, os.path.join(cuda_dir, "requirements.txt"))


# ------------------------------------------------------------------------------------------------------ base

def default_base(dockerfile: str) -> str:
    """The ``BASE_IMAGE`` a Dockerfile builds on unless told otherwise (its ``ARG BASE_IMAGE=...``)."""
    text = open(os.path.join(DOCKER_DIR, dockerfile), encoding="utf-8").read()
    return re.search(r"^ARG BASE_IMAGE=(\S+)", text, re.M).group(1)


def make_local_base(log: str) -> None:
    """Make ``release-base:bookworm`` from Debian's packages: a minimal bookworm with Python 3.11 and venv.

    The same Debian release and Python as ``python:3.11-slim-bookworm`` (whose Python is built from source into
    /usr/local instead). Needs root and debootstrap; about a minute with a near mirror.
    """
    if shutil.which("debootstrap") is None:
        raise BuildError("no registry is reachable and debootstrap is not installed to make a local base: install "
                         "it (apt-get install debootstrap, as root), or give --base IMAGE, a Debian bookworm image "
                         "with python3 that this engine holds")
    if os.geteuid() != 0:
        raise BuildError("no registry is reachable, and making a local base with debootstrap needs root: run this "
                         "as root once (the base is kept as release-base:bookworm), or give --base IMAGE")
    root = tempfile.mkdtemp(prefix="release-base-", dir="/var/tmp")
    try:
        t0 = time.time()
        run(["debootstrap", "--variant=minbase", "--include=python3,python3-venv,ca-certificates", "bookworm",
             root, DEBIAN_MIRROR], "debootstrap", log)
        with open(os.path.join(root, "etc/apt/sources.list"), "w") as f:
            f.write(f"deb {DEBIAN_MIRROR} bookworm main\ndeb {DEBIAN_MIRROR} bookworm-updates main\n"
                    "deb http://deb.debian.org/debian-security bookworm-security main\n")
        # as Debian's official images: apt keeps no downloaded packages in a layer
        with open(os.path.join(root, "etc/apt/apt.conf.d/docker-clean"), "w") as f:
            f.write('DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb '
                    '/var/cache/apt/*.bin || true"; };\n'
                    'APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb '
                    '/var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };\n'
                    'Dir::Cache::pkgcache ""; Dir::Cache::srcpkgcache "";\n')
        for d in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for f in os.listdir(os.path.join(root, d)):
                p = os.path.join(root, d, f)
                if os.path.isfile(p):
                    os.remove(p)
        for f in os.listdir(os.path.join(root, "var/cache/apt")):
            if f.endswith(".bin"):
                os.remove(os.path.join(root, "var/cache/apt", f))
        tar = subprocess.Popen(["tar", "-C", root, "--numeric-owner", "-c", "."], stdout=subprocess.PIPE)
        imp = subprocess.run(["docker", "import", "--change",
                              "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                              "--change", 'CMD ["python3"]', "-", LOCAL_BASE], stdin=tar.stdout,
                             capture_output=True, text=True)
        tar.stdout.close()
        tar.wait()
        if imp.returncode != 0 or tar.returncode != 0:
            raise BuildError(f"docker import of the local base failed: {(imp.stderr or '').strip()[:200]}")
        say(f"base: made {LOCAL_BASE} in {time.time() - t0:.0f} s, {image_size(LOCAL_BASE) / 1e6:.0f} MB")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def resolve_base(base: str | None, default: str, local: bool, log: str) -> str:
    """The base image to build on, present in the engine.

    ``base`` (``--base``) must be in the engine or pullable. Without it: ``default`` if present or pullable,
    else (and with ``local``) ``release-base:bookworm``, made once from Debian's packages.
    """
    if base:
        if image_exists(base):
            return base
        p = subprocess.run(["docker", "pull", base], capture_output=True, text=True, timeout=1800)
        if p.returncode != 0:
            err = " ".join(p.stderr.split())[:200]
            raise BuildError(f"cannot pull the base image {base} ({err}): give one this engine holds (docker "
                             f"images; docker load -i FILE brings one from a connected machine), or leave --base "
                             f"out to build on the official base or, with no registry, a local Debian one")
        return base
    if not local:
        if image_exists(default):
            return default
        p = subprocess.run(["docker", "pull", default], capture_output=True, text=True, timeout=1800)
        if p.returncode == 0:
            return default
        err = " ".join(p.stderr.split())
        reason = "no registry is reachable" if re.search(r"no such host|dial tcp|timeout|connection refused|"
                                                         r"network is unreachable", err, re.I) else err[:160]
        say(f"base: cannot pull {default} ({reason}): building on {LOCAL_BASE}, Debian bookworm with Python 3.11 "
            f"made here from Debian's packages")
    if not image_exists(LOCAL_BASE):
        say(f"base: making {LOCAL_BASE} with debootstrap from {DEBIAN_MIRROR} (about a minute)")
        make_local_base(log)
    return LOCAL_BASE


# ----------------------------------------------------------------------------------------------------- build

def build_image(kind: str, tag: str, base: str, log: str) -> tuple[float, int]:
    """``docker build`` one image with the classic builder; returns (seconds, size in bytes).

    The context is ``docker/`` (its ``.dockerignore`` keeps it to the wheelhouse and the entry point); the
    ``Step N/M`` lines are shown, the rest goes to ``log``.
    """
    cmd = ["docker", "build", "-f", os.path.join(DOCKER_DIR, IMAGES[kind]), "-t", tag,
           "--build-arg", f"BASE_IMAGE={base}", DOCKER_DIR]
    env = dict(os.environ, DOCKER_BUILDKIT="0")
    say(f"{tag}: " + " ".join(cmd[:2] + [os.path.relpath(c) if c.startswith(ROOT) else c for c in cmd[2:]])
        + f" (log: {os.path.relpath(log)})")
    t0 = time.time()
    with open(log, "w") as out:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        tail = []
        for line in p.stdout:
            out.write(line)
            out.flush()
            tail = (tail + [line.rstrip()])[-40:]
            if line.startswith("Step "):
                say(f"  [{time.time() - t0:5.0f} s] {line.rstrip()[:150]}")
        p.wait()
    if p.returncode != 0:
        nomatch = [l for l in tail if "No matching distribution found for" in l]
        if nomatch:
            pkg = nomatch[-1].split("found for", 1)[1].strip()
            raise BuildError(f"the wheelhouse has no wheel of {pkg}, which the image needs: run `python3 "
                             f"docker/build.py wheelhouse` where PyPI is reachable (full output: "
                             f"{os.path.relpath(log)})")
        last = [l for l in tail if l.strip()][-1:] or ["(no output)"]
        raise BuildError(f"docker build of {tag} failed: {last[0].strip()[:200]} (full output: "
                         f"{os.path.relpath(log)})")
    return time.time() - t0, image_size(tag)


def main(argv: list[str] | None = None) -> int:
    """Command line: see the module's docstring. Returns the exit status (2 with one line on bad input)."""
    ap = argparse.ArgumentParser(prog="docker/build.py", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", nargs="?", default="all", choices=["cpu", "cuda", "all", "wheelhouse"],
                    help="the image(s) to build, or only the wheelhouse (default: all)")
    ap.add_argument("--base", help="base image (default: the Dockerfiles' BASE_IMAGE, python:3.11-slim-bookworm, "
                                   "or a local Debian base when no registry is reachable)")
    ap.add_argument("--local-base", action="store_true",
                    help=f"build on {LOCAL_BASE} (made with debootstrap) without trying a registry")
    ap.add_argument("--offline", action="store_true", help="download nothing: the wheelhouse must be complete")
    ap.add_argument("--wheelhouse", default=WHEELHOUSE, help="wheel folder (default: docker/wheelhouse; "
                                                             "the CUDA wheels go to the same path + '-cuda')")
    ap.add_argument("--tag-prefix", default="release", help="images are PREFIX:cpu and PREFIX:cuda "
                                                            "(default: release)")
    args = ap.parse_args(argv)
    kinds = {"all": ["cpu", "cuda"], "wheelhouse": []}.get(args.what, [args.what])
    os.makedirs(BUILD_DIR, exist_ok=True)
    log = os.path.join(BUILD_DIR, "prepare.log")
    open(log, "w").close()
    try:
        if kinds:
            check_engine()
            if args.base:  # a base given by name is looked for before the wheelhouse's downloads
                resolve_base(args.base, args.base, False, log)
        wheelhouse = os.path.abspath(args.wheelhouse)
        if kinds and wheelhouse != WHEELHOUSE:
            raise BuildError("--wheelhouse other than docker/wheelhouse is for the `wheelhouse` step only: "
                             "the images build from docker/wheelhouse (copy or link it there)")
        fill_wheelhouse(wheelhouse, cuda=args.what in ("cuda", "all", "wheelhouse"), offline=args.offline, log=log)
        results, bases = [], {}
        for kind in kinds:
            default = default_base(IMAGES[kind])
            if default not in bases:  # both Dockerfiles name the same base: looked for once
                bases[default] = resolve_base(args.base, default, args.local_base, log)
            base = bases[default]
            tag = f"{args.tag_prefix}:{kind}"
            secs, size = build_image(kind, tag, base, os.path.join(BUILD_DIR, f"{kind}.log"))
            results.append(f"{tag}: built in {secs:.0f} s on {base}, {size / 1e9:.2f} GB")
            say(results[-1])
        if len(results) > 1:
            say("done: " + "; ".join(results))
    except BuildError as e:
        print(f"docker/build.py: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("docker/build.py: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
