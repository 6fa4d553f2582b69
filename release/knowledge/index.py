"""A per-shard index of a knowledge base: warm starts read each workload's best records, not the whole base.

Why: a warm start needs the best few configs of each workload (:func:`release.knowledge.use.knowledge_seeds`
takes them round-robin, nearest workload first), but reading them used to parse every record of the base:
~72 s for 64,764 records (401 MB; each record's trace is ~6 KB of JSON), paid by every ``release tune``
before its first measurement, and once more by the first :meth:`KnowledgeBase.add` (its duplicate check).

What: beside the shards, ``index/<shard>.json`` holds, for one shard, per group (workload digest, target text
as written, CPU model name) each record's identity (:func:`release.knowledge.targets.record_identity`, first
:data:`ID_HEX` hex digits), mean run time (s; None for a failed measurement) and the byte offset and length of
its line; plus the shard's header line, the bytes covered and the first name and FLOP count seen per workload.
A reader ranks each group's records from the index and reads only the lines it returns (``seek`` to their
offsets); duplicates are dropped by identity, the first copy read winning (shards in name order, lines in file
order), exactly as a full read does.

Guarantees: shards are append-only, so an index stays valid for the bytes it covers. A reader brings an index
up to date by parsing only the shard's new complete lines (a writer's own shard grows while it tunes); a shard
whose first line differs from the index's (replaced), or that is shorter than the index says, is indexed again
from the start. Indexes are written to a temporary file and renamed (``os.replace``): a reader sees none or a
whole one; two readers indexing one shard write the same content. A damaged or unknown-version index is
rebuilt; a folder that cannot be written is still read (the index then lives in memory for that object). A
cut last line (a writer killed mid-write) is never covered, so it is looked at again on the next read.

Source: TenSet and MetaSchedule keep a tuning database's top-k per workload for the same reason
(``Database.get_top_k``, ``JSONDatabase`` holds every record but answers per-workload queries).
"""

from __future__ import annotations

import json
import logging
import os
import uuid

from ..measure.records import Record

logger = logging.getLogger(__name__)

#: sub-folder of a knowledge base holding the shard indexes
INDEX_DIR = "index"
#: format version of an index file (a different one is rebuilt)
INDEX_VERSION = 1
#: hex digits of a record's identity kept in the index (96 bits: no collision in any base that fits a disk)
ID_HEX = 24
_KEY = "release_knowledge_index"


def index_path(base: str, shard: str) -> str:
    """Where the index of ``shard`` (a shard's path) lives in the base folder ``base``."""
    return os.path.join(base, INDEX_DIR, os.path.basename(shard) + ".json")


def _load(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(d, dict) or d.get(_KEY) != INDEX_VERSION:
        return None
    try:
        d["groups"] = {(g[0], g[1], g[2]): [list(e) for e in g[3]] for g in d["groups"]}
        d["size"], d["lines"], d["bad_lines"] = int(d["size"]), int(d["lines"]), int(d["bad_lines"])
        if not isinstance(d.get("names"), dict) or not isinstance(d.get("header"), str):
            return None
    except (KeyError, TypeError, ValueError, IndexError):
        return None
    return d


def _save(path: str, d: dict) -> bool:
    """Write ``d`` as the index at ``path`` (temporary file + ``os.replace``); False when it cannot."""
    out = dict(d)
    out["groups"] = [[k[0], k[1], k[2], v] for k, v in d["groups"].items()]
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(out, f, separators=(",", ":"))
        os.replace(tmp, path)
        return True
    except OSError as err:
        logger.debug("knowledge: index %s not written (%s); the shard is read without it", path, err)
        try:
            os.unlink(tmp)
        except (OSError, UnboundLocalError):
            pass
        return False


def shard_index(base: str, shard: str, check_header, identity, digest, write: bool = True,
                cache: dict | None = None):
    """The up-to-date index of one shard, reading only the lines the stored index does not cover.

    Parameters
    ----------
    base : str
        The knowledge base folder.
    shard : str
        Path of one shard.
    check_header : callable
        ``check_header(first_line_text)`` returns the shard's format version, None when the file is not a
        shard, and raises :class:`release.knowledge.importers.KnowledgeError` for a version this release cannot read.
    identity, digest : callable
        A record's identity as bytes (:func:`release.knowledge.targets.record_identity`) and the workload
        digest of a task key (:func:`release.knowledge.targets.workload_digest`).
    write : bool
        Store the updated index (default True); False for read-only sources such as the shipped pack.
    cache : dict, optional
        An in-memory index of this shard from an earlier call (used before the file).

    Returns
    -------
    (dict or None, dict)
        The index (None when the file is not a shard) and this read's stats: ``parsed`` (lines parsed now),
        ``bad_tail`` (an unreadable last line without a newline: a write cut by a crash).
    """
    stats = {"parsed": 0, "bad_tail": 0}
    with open(shard, "rb") as f:
        first = f.readline()
        header = first.decode("utf-8", "replace")
        if check_header(header) is None:
            return None, stats
        size = os.fstat(f.fileno()).st_size
        d = cache
        if d is None or d.get("header") != header or d.get("size", 0) > size:
            d = _load(index_path(base, shard))
        if d is None or d.get("header") != header or d["size"] > size or d["size"] < len(first):
            d = {_KEY: INDEX_VERSION, "shard": os.path.basename(shard), "header": header, "size": len(first),
                 "lines": 0, "bad_lines": 0, "names": {}, "groups": {}}
        if d["size"] == size:
            return d, stats
        f.seek(d["size"])
        offset = d["size"]
        groups, names = d["groups"], d["names"]
        for raw in f:
            if not raw.endswith(b"\n"):  # a cut last line: never covered; looked at again next time
                if raw.strip():
                    stats["bad_tail"] += 1
                break
            start, offset = offset, offset + len(raw)
            if not raw.strip():
                continue
            d["lines"] += 1
            stats["parsed"] += 1
            try:
                rec = Record.from_json(raw.decode("utf-8", "replace"))
            except (ValueError, TypeError):
                d["bad_lines"] += 1
                continue
            wl = digest(rec.task)
            if rec.tuner != "ms-database" and wl not in names:
                names[wl] = [rec.name, rec.flop]
            cost = rec.mean_cost if rec.ok else None
            groups.setdefault((wl, rec.target, rec.machine), []).append(
                [identity(rec).hex()[:ID_HEX], cost, start, len(raw)])
        d["size"] = offset
    if write and stats["parsed"]:
        _save(index_path(base, shard), d)
    return d, stats


def read_lines(shard: str, spans: list[tuple[int, int]]) -> list[Record]:
    """The records at byte ``spans`` (offset, length) of ``shard``, in the order given."""
    out = []
    with open(shard, "rb") as f:
        for off, n in spans:
            f.seek(off)
            out.append(Record.from_json(f.read(n).decode("utf-8", "replace")))
    return out


__all__ = ["INDEX_DIR", "INDEX_VERSION", "ID_HEX", "index_path", "shard_index", "read_lines"]
