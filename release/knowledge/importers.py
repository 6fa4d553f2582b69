"""What a knowledge base imports: MetaSchedule databases, release logs, other knowledge bases as input.

- :func:`read_ms_database`: a MetaSchedule ``JSONDatabase`` folder read as text JSON (never unpickled), each
  tuning record a :class:`release.measure.Record` whose workload digest is the one a
  :class:`release.task.Task` of the same module and target has.
- :func:`read_log`: a release JSON-lines tuning log.
- :func:`check_input`: the cheap check ``release knowledge add`` runs on every input before importing any.
- Recognising a knowledge base given as input (its folder or one shard: the ``release_knowledge`` header
  line, :func:`_header_version`); :func:`release.knowledge.store.read_input` reads any of them.

:class:`KnowledgeError` is the one error of a knowledge base or of an input to it.

Source: the database layout is MetaSchedule's ``JSONDatabase``
(``python/tvm/s_tir/meta_schedule/database/json_database.py``: ``database_workload.json`` lines
``[structural hash, base64 module]``, ``database_tuning_record.json`` lines
``[workload index, [trace, run_secs, target, args]]``).
"""

from __future__ import annotations

import json
import logging
import os

from ..errors import RecordError
from ..measure.records import Record, load_records
from ..task import workload_digest_of
from .targets import _target_json, target_class

logger = logging.getLogger(__name__)

_HEADER_KEY = "release_knowledge"
#: MetaSchedule marks a failed measurement with run_secs of 1e10 s
_MS_FAILED_S = 1e9
MS_WORKLOAD_FILE = "database_workload.json"
MS_RECORD_FILE = "database_tuning_record.json"


class KnowledgeError(RecordError):
    """A knowledge base or an input to it that cannot be used (bad folder, unknown format version)."""



def read_ms_database(work_dir: str | os.PathLike) -> list[Record]:
    """Read a MetaSchedule ``JSONDatabase`` folder as text JSON (never unpickled).

    Parameters
    ----------
    work_dir : str or PathLike
        Folder holding ``database_workload.json`` (lines ``[structural hash, base64 module]``) and
        ``database_tuning_record.json`` (lines ``[workload index, [trace, run_secs, target, args]]``),
        as written by ``ms.database.JSONDatabase`` or :class:`release.measure.log_to_database`.

    Returns
    -------
    list of Record
        One per tuning record: ``task`` is ``task-<digest[:8]>/<digest>`` with the digest a
        :class:`release.task.Task` of the same module and target has, ``trace`` and ``costs``
        (``run_secs``, s) as stored, ``target`` canonical JSON, ``tuner="ms-database"``,
        ``config=[]``, ``flop=0`` (MetaSchedule stores no FLOP count; :meth:`KnowledgeBase.records`
        fills it from records of the same workload). A run_secs of 1e10 s (MetaSchedule's mark of
        a failed run) becomes ``error_kind="run_error"``.

    Raises
    ------
    KnowledgeError
        The folder lacks either file, or a non-empty file has no readable line.
    """
    work_dir = os.fspath(work_dir)
    wl_path = os.path.join(work_dir, MS_WORKLOAD_FILE)
    rec_path = os.path.join(work_dir, MS_RECORD_FILE)
    if not (os.path.isfile(wl_path) and os.path.isfile(rec_path)):
        raise KnowledgeError(f"{work_dir} is a folder but not a MetaSchedule database (it needs {MS_WORKLOAD_FILE} "
                             f"and {MS_RECORD_FILE}); give a release JSON-lines log or a JSONDatabase work_dir")
    shashes = []
    bad_wl = 0
    with open(wl_path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                w = json.loads(line)
                shashes.append(str(w[0]))
            except (ValueError, TypeError, IndexError, KeyError):
                shashes.append(None)  # keep indices aligned with MetaSchedule's
                bad_wl += 1
    out, bad = [], 0
    digests: dict[tuple[str, str], str] = {}
    with open(rec_path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                idx, (trace, run_secs, target, *_rest) = json.loads(line)
                shash = shashes[int(idx)]
                if shash is None:
                    raise ValueError("workload line unreadable")
                tj = _target_json(target)
                digest = digests.get((shash, tj))
                if digest is None:
                    digest = digests[(shash, tj)] = workload_digest_of(shash, target_class(tj))
                costs = [float(c) for c in (run_secs or [])]
            except (ValueError, TypeError, IndexError, KeyError, AttributeError):
                bad += 1
                continue
            failed = not costs or min(costs) >= _MS_FAILED_S
            out.append(Record(task=f"task-{digest[:8]}/{digest}", name=f"task-{digest[:8]}", target=tj, config=[],
                              trace=trace, costs=[] if failed else costs,
                              error_kind="run_error" if failed else "", tuner="ms-database"))
    if (bad or bad_wl) and not out:
        raise KnowledgeError(f"{work_dir}: none of its MetaSchedule database lines could be read "
                             f"({bad_wl} workload, {bad} record line(s) unreadable); is it a JSONDatabase work_dir?")
    if bad or bad_wl:
        logger.warning("%s: skipped %d unreadable MetaSchedule database line(s); the rest is used", work_dir,
                       bad + bad_wl)
    return out


def _is_shard(path: str) -> bool:
    """True when ``path`` is a file whose first line is a knowledge shard header."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return _header_version(f.readline(65536)) is not None
    except OSError:
        return False


def _is_knowledge_folder(path: str) -> bool:
    """True when ``path`` is a folder holding at least one knowledge shard."""
    return any(n.endswith(".jsonl") and _is_shard(os.path.join(path, n)) for n in sorted(os.listdir(path)))


def read_log(path: str | os.PathLike) -> list[Record]:
    """Records of a release JSON-lines tuning log (:func:`release.measure.records.load_records`).

    Raises
    ------
    KnowledgeError
        ``path`` is not a tuning log (the error names the path and what ``knowledge add`` takes), or is
        a non-empty file none of whose lines is a record.
    """
    path = os.fspath(path)
    try:
        recs = load_records(path)
    except RecordError as err:  # its advice names --log; say what `knowledge add` takes
        raise KnowledgeError(f"{str(err).split(';')[0]}; give a release tuning log (.jsonl) or a MetaSchedule "
                             "database folder") from None
    if not recs and os.path.getsize(path) > 0:
        raise KnowledgeError(f"{path} holds no tuning record; give a release tuning log or a MetaSchedule "
                             "database folder")
    return recs


def check_input(path: str | os.PathLike) -> None:
    """Cheap check that ``path`` can be imported, before anything is: it exists, and is a folder
    holding MetaSchedule's two files or a file with a line that starts as a release record does
    (a valid log passes on its first line; any other file is read once, as text).

    Raises
    ------
    KnowledgeError
        Otherwise, in one line naming the path and what to give instead.
    """
    path = os.fspath(path)
    what = "give a release tuning log (.jsonl) or a MetaSchedule database folder"
    if not os.path.exists(path):
        raise KnowledgeError(f"{path} does not exist; {what}")
    if os.path.isdir(path):
        if not (all(os.path.isfile(os.path.join(path, n)) for n in (MS_WORKLOAD_FILE, MS_RECORD_FILE))
                or _is_knowledge_folder(path)):
            raise KnowledgeError(f"{path} is a folder but neither a MetaSchedule database (it needs "
                                 f"{MS_WORKLOAD_FILE} and {MS_RECORD_FILE}) nor a knowledge base; {what}")
        return
    if _is_shard(path):
        return
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.lstrip().startswith('{"task":'):
                return
    if os.path.getsize(path) > 0:
        raise KnowledgeError(f"{path} is not a tuning log (none of its lines is a record); {what}")



def _header_version(line: str) -> int | None:
    """The format version of a shard's first line, or None when it is not a header."""
    try:
        d = json.loads(line)
    except ValueError:
        return None
    if not isinstance(d, dict) or _HEADER_KEY not in d:
        return None
    try:
        return int(d[_HEADER_KEY])
    except (TypeError, ValueError):
        return None
