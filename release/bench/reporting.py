"""What every benchmark result carries and how its tables are written.

Machine facts (:func:`machine`: CPU, cores, library versions, date, code revision), the code label of
a record (:func:`code_label`) and the lines under a table (:func:`provenance_line`: logs measured by
more than one code revision; :func:`threads_line`: the thread counts of the figures), the table
formatting shared by both tiers (:func:`fmt`, :func:`reference_cell`, :func:`machine_line`) and
:func:`write_results` (``results.json``, ``table.md`` and plots under a tier's ``out``).
"""

from __future__ import annotations

import json
import logging
import math
import os
import platform

logger = logging.getLogger(__name__)


def machine() -> dict:
    """CPU model, cores, library versions, the date (UTC) and the code's version and git revision
    (:func:`release.measure.result.provenance`), for the results: every committed figure names its
    machine, date and code revision."""
    import datetime
    import importlib.metadata as md

    from ..measure.result import provenance

    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), cpu)
    except OSError:
        pass
    from ..target import host_cores, host_cpu

    vers = {}
    for pkg in ("apache-tvm", "apache-tvm-ffi", "torch", "xgboost", "scikit-learn", "numpy"):
        try:
            vers[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            vers[pkg] = None
    version, revision = provenance()
    return {"cpu": cpu, "llvm_mcpu": host_cpu(), "cores": host_cores(), "python": platform.python_version(),
            "versions": vers, "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
            "release": f"{version}@{revision or 'no-git'}"}


def write_results(out: str, result: dict, markdown, plot) -> None:
    """Write a tier's ``results.json`` (NaN as null), ``table.md`` (``markdown(result)``) and plots
    (``plot(result, out)``; a failing plot is a warning, not an error) under ``out``."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(result, f, indent=1, default=_nan_json)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(markdown(result))
    try:
        plot(result, out)
    except Exception as err:  # noqa: BLE001 - plots are a convenience
        logger.warning("plots not written: %s", err)


def _nan_json(o):
    return None


def fmt(x, nd: int = 2) -> str:
    """``x`` with ``nd`` decimals; ``"n/a"`` for None, NaN and infinities."""
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{nd}f}"


def code_label(rec) -> str:
    """``"<package version>@<git revision>"`` of the code that measured a record (its
    ``release_version`` and ``revision``); ``"unrecorded"`` for records written before they were kept."""
    if not rec.release_version and not rec.revision:
        return "unrecorded"
    return f"{rec.release_version or '?'}@{rec.revision or 'no-git'}"


def provenance_line(result: dict, workloads=None) -> list[str]:
    """One line under a table whose logs were measured by more than one code revision (else none).

    ``workloads``: the workloads the table covers (default all). Counts are records per
    :func:`code_label`, most first.
    """
    counts: dict = {}
    for w, labels in result.get("provenance", {}).items():
        if workloads is None or w in workloads:
            for label, n in labels.items():
                counts[label] = counts.get(label, 0) + n
    if len(counts) < 2:
        return []
    shown = "; ".join(f"{label}: {n}" for label, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return [f"**Mixed code:** the logs of this table were measured by {len(counts)} code revisions (records per "
            f"version@revision: {shown}); compare its figures with care, or rerun on one revision.", ""]


def threads_line(th: dict | int | None) -> str:
    """One line stating the thread counts a table's figures were measured with.

    ``th``: one count (every timing, tuning measurement and reference on it: the model tiers) or the
    operator tiers' ``{"logged": [..], "remeasured", "pytorch", "search"}``; None or empty: not recorded.
    """
    if isinstance(th, int) and not isinstance(th, bool):
        return f"Threads: every TVM timing, tuning measurement and reference on {th}"
    if not th:
        return "Threads: not recorded (results written before thread counts were set: TVM ran on 1 thread here)"
    logged = ", ".join("1 (TVM's default, half the cores; count not recorded)" if n == 0 else str(n)
                       for n in th.get("logged", [])) or "-"
    search = th.get("search")
    search = (f"; every tuner's search and cost model {search} (RELEASE_SEARCH_THREADS when reported)"
              if search else "; tuners' search threads not recorded")
    return (f"Threads: logged measurements {logged}; re-timed side by side {th.get('remeasured') or '-'}; "
            f"PyTorch reference {th.get('pytorch')}{search}")


def machine_line(mach: dict, libraries=(("TVM", "apache-tvm"),)) -> str:
    """``Machine: <cpu>, <cores> cores, TVM <version>[, <label> <version> ...]; <date>, release <revision>``
    (a Markdown line break at its end) from :func:`machine`'s dict; ``libraries``: ``(label, package)``
    pairs whose versions are named."""
    versions = ", ".join(f"{label} {mach['versions'].get(pkg)}" for label, pkg in libraries)
    return (f"Machine: {mach['cpu']}, {mach['cores']} cores, {versions}; {mach.get('date', 'date not recorded')}, "
            f"release {mach.get('release', 'revision not recorded')}  ")


def reference_cell(value, nd: int = 2, unit: str = "", unreliable: bool = False, note=None, error=None) -> str:
    """A reference's table cell: ``value`` with ``nd`` decimals and ``unit``, followed by
    ``(UNRELIABLE: note)`` when its timing was flagged; ``not timed: error`` when it failed
    (``error`` not None)."""
    if error is not None:
        return f"not timed: {error}"
    text = fmt(value, nd) + unit
    return f"{text} (UNRELIABLE: {note})" if unreliable else text
