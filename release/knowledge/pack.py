"""The pretrained knowledge pack shipped with the package: best schedules per workload and machine.

A new user's knowledge base is empty, so a first tune would start cold. The pack is a small
knowledge base folder inside the package (``release/knowledge/pack/``: one shard ``pack.jsonl``
and ``manifest.json``), built by ``benchmarks/knowledge/build_pack.py`` from the committed tuning
logs of every CPU model they come from: for each workload and machine, the :data:`TOP_K` fastest
successful records with their traces. It is read like any base (records of the task's ISA class,
:func:`release.target.isa_class`) when the user's base holds nothing of that class
(:func:`release.knowledge.use.knowledge_records`); its records become transfer-tuning seeds, measured
on this machine first, never costs. ``--no-knowledge`` (or ``RELEASE_KNOWLEDGE=off``) turns it off
with the base; ``RELEASE_KNOWLEDGE_PACK=off`` turns off the pack alone. A pack that cannot be read
(damaged, or written in a newer format) is one warning line and a cold start.

Size: records only (traces are what seeds need; the transfer cost model rebuilds registered
workloads' programs from their names). ``release knowledge show --pack`` lists it.
"""

from __future__ import annotations

import json
import logging
import os

logger = logging.getLogger(__name__)

#: records kept per (workload, machine) when the pack is built
TOP_K = 4
#: environment variable that turns the pack off (``off``, ``0``, ``false``, ``no``, ``none``)
ENV_VAR = "RELEASE_KNOWLEDGE_PACK"
PACK_FILE = "pack.jsonl"
MANIFEST = "manifest.json"


def pack_dir() -> str | None:
    """The folder of the shipped pack (``$RELEASE_KNOWLEDGE_PACK`` may name another one, or ``off``).

    Returns
    -------
    str or None
        The folder; None when the pack is turned off.
    """
    env = os.environ.get(ENV_VAR, "").strip()
    if env.lower() in ("off", "0", "false", "no", "none"):
        return None
    if env:
        return os.path.abspath(os.path.expanduser(env))
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "pack")


def manifest(folder: str | None = None) -> dict:
    """The pack's manifest (sources, machines, counts, revision and date it was built from); {} if none."""
    folder = folder or pack_dir()
    if folder is None:
        return {}
    try:
        with open(os.path.join(folder, MANIFEST), encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def pack_records(target) -> list:
    """Records of the shipped pack of ``target``'s ISA class; [] when it is off, missing or unreadable.

    Parameters
    ----------
    target : str, dict or tvm.target.Target
        The task's target.

    Returns
    -------
    list of Record
        Never raises: a damaged or incompatible pack is one warning line and no records (a cold start).
    """
    from .store import KnowledgeBase

    folder = pack_dir()
    if folder is None or not os.path.isfile(os.path.join(folder, PACK_FILE)):
        return []
    from .importers import _header_version

    path = os.path.join(folder, PACK_FILE)
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            if _header_version(f.readline(65536)) is None:
                raise ValueError(f"{PACK_FILE} is not a knowledge shard (no release_knowledge header)")
        kb = KnowledgeBase(folder, index=False)  # read-only: nothing written inside the installed package
        kb._files = [path]
        recs = kb.records(target_kind=target)
    except Exception as err:  # noqa: BLE001 - the pack is a convenience: never the reason a run fails
        logger.warning("knowledge: the shipped pack %s is unusable (%s); starting cold", folder,
                       str(err).split("\n")[0])
        return []
    return recs


__all__ = ["TOP_K", "ENV_VAR", "pack_dir", "pack_records", "manifest"]
