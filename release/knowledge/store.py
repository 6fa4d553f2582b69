"""The knowledge base store: every record measured, across tasks, models and runs, in one folder.

Layout and guarantees
---------------------
The knowledge base is a folder of *shards*, JSON-lines files named ``<host>-<pid>-<uuid>.jsonl``.
Each :class:`KnowledgeBase` object that writes opens its own shard (created with ``O_EXCL``, so no
two writers ever share a file; a process forked from a writer opens its own on its first write)
and only ever appends to it. Its first line is a header
``{"release_knowledge": VERSION, ...}``; every other line is one :class:`release.measure.Record`
(the same JSON as a tuning log). Nothing is ever pickled or unpickled.

Concurrent writers (two ``release tune`` processes, Ray workers, threads of one process) are safe
without any lock: a shard has exactly one writer, and the writer appends each batch with
``os.write`` of complete lines on an ``O_APPEND`` descriptor followed by ``os.fsync``. (The
alternative, one shared file with whole-line ``O_APPEND`` writes under an ``fcntl`` lock, needs a
lock that NFS and some container filesystems do not honour, and one writer killed inside the lock
can leave a cut line that the next writer appends after; per-writer shards need neither.) A
process killed with SIGKILL mid-write can at most leave a cut *last* line in its own shard; readers
skip it with one warning, and no later write ever follows it (a new process opens a new shard).

Reading is one pass over every shard, line by line (time and memory linear in the folder's size).
Records are deduplicated by (workload, target, trace): the workload is the 16-hex digest of a
task's key (``sha1(structural_hash(mod) | ISA class)``, :class:`release.task.Task`; keys of older
releases hashed the whole target JSON and stay as written), so records of the same program imported
from a JSON log and from a MetaSchedule ``JSONDatabase`` (whose workload lines carry the same
structural hash) are recognised as one. The first copy read wins (shards in name order, lines in
file order). Records of every machine of an ISA class are read together (an AMD Zen 4's and an Intel
Xeon's AVX-512 records serve each other's tasks); each keeps its machine (``mcpu``, cores, CPU model).

Programs: beside the shards, ``programs/<digest>.json`` holds each workload's program (the task's
one-PrimFunc ``IRModule`` as TVM's JSON, ``tvm.ir.save_json``; name, key and target beside it),
written once per workload by :meth:`KnowledgeBase.add_program` (``log_to_knowledge`` does so for
every task it logs) through a temporary file and ``os.replace``, so concurrent writers of the same
workload leave one complete file. It lets the transfer cost model rebuild programs that no
registered workload name makes: tasks extracted from models, blocked layouts, users' own TE/TIR
(MetaSchedule's ``database_workload.json`` keeps workloads the same way). Loading uses
``tvm.ir.load_json`` (TVM's structural JSON, not a pickle).

Source: the shard-per-writer, append-only layout follows MetaSchedule's ``JSONDatabase``
(``src/s_tir/meta_schedule/database/json_database.cc``: one JSON line per record, appended) and
TenSet's per-task record files; the dedup key is MetaSchedule's (workload, trace) record identity
(:func:`release.knowledge.targets.record_identity`). Inputs other than a knowledge base (MetaSchedule
databases, release logs) are read by :mod:`release.knowledge.importers`; :func:`read_input` reads any of them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections import Counter, defaultdict
from typing import Iterable

from ..measure.records import Record
from .importers import (_HEADER_KEY, KnowledgeError, _header_version, _is_knowledge_folder, _is_shard, read_log,
                        read_ms_database)
from .index import ID_HEX, read_lines, shard_index
from .targets import _canon_target_text, _target_matcher, record_identity, target_class, workload_digest

logger = logging.getLogger(__name__)

#: format version written in every shard's header line
KNOWLEDGE_VERSION = 1
#: oldest shard format this release reads
MIN_READ_VERSION = 1
#: environment variable that chooses the folder (``off``, ``none``, ``0`` or ``false`` disable it)
ENV_VAR = "RELEASE_KNOWLEDGE"
_OFF = {"off", "none", "0", "false", "no"}
#: sub-folder of stored workload programs (``<digest>.json``)
PROGRAM_DIR = "programs"
_PROGRAM_KEY = "release_program"

__all__ = ["KNOWLEDGE_VERSION", "MIN_READ_VERSION", "ENV_VAR", "PROGRAM_DIR", "KnowledgeBase", "KnowledgeError",
           "knowledge_dir", "read_input"]


def knowledge_dir(path: str | os.PathLike | None = None) -> str | None:
    """The knowledge base folder to use.

    Parameters
    ----------
    path : str or PathLike, optional
        An explicit folder (``--knowledge DIR``); wins over everything else.

    Returns
    -------
    str or None
        ``path`` if given; else ``$RELEASE_KNOWLEDGE`` if set (None when it is ``off``, ``none``,
        ``0``, ``false`` or ``no``: knowledge disabled); else ``$XDG_CACHE_HOME/release-tvm/knowledge``;
        else ``~/.cache/release-tvm/knowledge``. The folder is not created here.
    """
    if path is not None:
        return os.path.abspath(os.fspath(path))
    env = os.environ.get(ENV_VAR)
    if env is not None and env.strip():
        if env.strip().lower() in _OFF:
            return None
        return os.path.abspath(os.path.expanduser(env.strip()))
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "release-tvm", "knowledge")


def read_input(path: str | os.PathLike) -> list[Record]:
    """Records of a release JSON-lines log, a MetaSchedule ``JSONDatabase`` folder, or another
    knowledge base (its folder or one shard; deduplicated, format version checked).

    Raises
    ------
    KnowledgeError
        ``path`` does not exist, is a folder that is not a MetaSchedule database, or is a non-empty
        file none of whose lines is a record (not a tuning log).
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise KnowledgeError(f"{path} does not exist; give a release tuning log (.jsonl) or a MetaSchedule "
                             "database folder")
    if os.path.isdir(path) and _is_knowledge_folder(path):
        return KnowledgeBase(path).records()  # another machine's or run's knowledge base
    if os.path.isdir(path):
        return read_ms_database(path)
    if _is_shard(path):
        kb = KnowledgeBase(os.path.dirname(os.path.abspath(path)))
        kb._files = [os.path.abspath(path)]
        return kb.records()
    return read_log(path)


class KnowledgeBase:
    """A folder of tuning records shared by every task, model and run on this machine.

    Parameters
    ----------
    path : str or PathLike, optional
        The folder; default :func:`knowledge_dir` (``$RELEASE_KNOWLEDGE`` or the user's cache).
        Created on the first :meth:`add`.
    read_once : bool
        :meth:`records` of one target class (all workloads) reads the folder on the first call
        only; later calls return those records plus the ones this object has added since. For a
        run that hands one base to many tuners (``tune_model``: every task; ``release tune``):
        one read, and a model's later tasks learn from its earlier ones. Default False: every
        call reads the folder again (sees other writers).
    index : bool
        Keep a per-shard index in ``index/`` (:mod:`release.knowledge.index`; default True), so
        :meth:`best_records` and the duplicate check of :meth:`add` parse only lines not indexed
        yet. False: nothing is written beside the shards (a read-only source: the shipped pack).

    Raises
    ------
    KnowledgeError
        ``path`` is an existing file, or knowledge is disabled (``RELEASE_KNOWLEDGE=off``) and no
        path was given.

    Examples
    --------
    >>> kb = KnowledgeBase("/tmp/kb")
    >>> kb.add_log("tune.jsonl")                      # a release log, or a MetaSchedule work_dir
    >>> recs = kb.records(target_kind=task.target_json, workload=task)
    """

    def __init__(self, path: str | os.PathLike | None = None, read_once: bool = False, index: bool = True):
        folder = knowledge_dir(path)
        if folder is None:
            raise KnowledgeError(f"knowledge is disabled ({ENV_VAR}={os.environ.get(ENV_VAR)}); pass a folder "
                                 f"or unset {ENV_VAR}")
        if os.path.exists(folder) and not os.path.isdir(folder):
            where = f" (from ${ENV_VAR})" if path is None and os.environ.get(ENV_VAR) else ""
            raise KnowledgeError(f"knowledge base {folder}{where} is a file, not a folder; pass a folder path "
                                 f"(--dir / --knowledge DIR, or ${ENV_VAR})")
        self.path = folder
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._pid = os.getpid()
        self._files: list[str] | None = None  # read only these shards (importing one shard)
        self._shard: str | None = None
        self._known: set[bytes] | None = None
        self._read_once = bool(read_once)
        self._read: dict[str, tuple] = {}  # records() of one target class, read once: label -> (matcher, list)
        self._index = bool(index)
        self._indexes: dict[str, dict] = {}  # shard path -> its index (release.knowledge.index), kept current
        self.stats: dict = {}

    # ------------------------------------------------------------------ writing
    @property
    def shard(self) -> str | None:
        """Path of this object's own shard (None until its first write)."""
        return self._shard

    def _open_shard(self) -> int:
        os.makedirs(self.path, exist_ok=True)
        name = f"{socket.gethostname().split('.')[0] or 'host'}-{os.getpid()}-{uuid.uuid4().hex[:12]}.jsonl"
        path = os.path.join(self.path, name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        from .. import __version__

        header = {_HEADER_KEY: KNOWLEDGE_VERSION, "created": time.time(), "host": socket.gethostname(),
                  "pid": os.getpid(), "release_version": __version__}
        _write_all(fd, (json.dumps(header, separators=(",", ":")) + "\n").encode())
        os.fsync(fd)
        try:  # make the new file's name durable too
            dfd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        except OSError:
            pass
        self._shard = path
        return fd

    def add(self, records: Iterable[Record]) -> int:
        """Append records not already held; returns how many were written.

        Parameters
        ----------
        records : iterable of Record
            Any tasks and targets. Those whose (workload, target, trace) the base already holds
            (read once, on the first call, in one pass) or that repeat within ``records`` are skipped.

        Returns
        -------
        int
            Records appended. They are on disk (``os.fsync``) when this returns: one ``os.write``
            of complete lines on this object's own shard.
        """
        with self._lock:
            if self._known is None:
                self._known = self._all_ids()
            lines = []
            for rec in records:
                ident = record_identity(rec).hex()[:ID_HEX]
                if ident in self._known:
                    continue
                self._known.add(ident)
                lines.append(rec.to_json() + "\n")
                for match, held in self._read.values():  # what this object has read stays current
                    if match is None or match(rec.target):
                        held.append(rec)
            if not lines:
                return 0
            if self._fd is not None and self._pid != os.getpid():  # a forked child: never share the parent's shard
                os.close(self._fd)  # the child's copy of the descriptor; the parent's stays open
                self._fd = None
            if self._fd is None:
                self._fd = self._open_shard()
                self._pid = os.getpid()
            _write_all(self._fd, "".join(lines).encode())
            os.fsync(self._fd)
            return len(lines)

    def add_program(self, task) -> bool:
        """Store ``task``'s program once (``programs/<digest>.json``); True when this call wrote it.

        Parameters
        ----------
        task : release.task.Task
            Any task (registered workload, model-extracted, a user's TE/TIR).

        Notes
        -----
        Written to a temporary file in the same folder, fsynced, then renamed over the final name
        (``os.replace`` is atomic): a reader sees no file or a whole one, and two writers of one
        workload write the same bytes. An existing file is never rewritten.
        """
        import tvm

        digest = workload_digest(task.key)
        folder = os.path.join(self.path, PROGRAM_DIR)
        path = os.path.join(folder, f"{digest}.json")
        if os.path.exists(path):
            return False
        os.makedirs(folder, exist_ok=True)
        data = {_PROGRAM_KEY: 1, "key": task.key, "name": task.name, "target": task.target_json,
                "layout_free": list(task.layout_free), "mod": tvm.ir.save_json(task.mod)}
        tmp = os.path.join(folder, f".{digest}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            _write_all(fd, json.dumps(data, separators=(",", ":")).encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        return True

    def program(self, key: str):
        """The :class:`release.task.Task` of a stored workload program, or None.

        Parameters
        ----------
        key : str
            A task key (``name/16-hex``) or its digest.

        Returns
        -------
        Task or None
            None when no program of that workload is stored, the file is unreadable (one warning),
            or the rebuilt program's key differs (a TVM whose structural hash changed: one warning).
        """
        import tvm

        digest = workload_digest(key)
        path = os.path.join(self.path, PROGRAM_DIR, f"{digest}.json")
        if not os.path.isfile(path):
            return None
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            if not isinstance(data, dict) or data.get(_PROGRAM_KEY) != 1:
                raise ValueError("not a release program file")
            from ..task import Task

            task = Task(tvm.ir.load_json(data["mod"]), data["target"], name=data["name"])
        except Exception as err:  # noqa: BLE001 - any damage to one file costs that workload only
            logger.warning("knowledge: stored program %s unusable (%s: %s); its records are not used",
                           path, type(err).__name__, err)
            return None
        if workload_digest(task.key) != digest and hashlib.sha1(
                f"{task.structural_hash}|{_canon_target_text(data['target'])}".encode()).hexdigest()[:16] != digest:
            logger.warning("knowledge: stored program %s rebuilds with another key (%s): TVM's structural hash "
                           "changed; its records are not used", path, task.key)
            return None
        return task

    def programs(self) -> list[str]:
        """Digests of the stored workload programs, sorted."""
        folder = os.path.join(self.path, PROGRAM_DIR)
        if not os.path.isdir(folder):
            return []
        return sorted(n[:-5] for n in os.listdir(folder) if n.endswith(".json") and not n.startswith("."))

    def add_log(self, path: str | os.PathLike) -> int:
        """Import a release JSON-lines log or a MetaSchedule ``JSONDatabase`` folder; returns records added.

        Raises
        ------
        KnowledgeError
            ``path`` does not exist, is a folder that is not a MetaSchedule database, or is a file
            that is not a tuning log.
        """
        return self.add(read_input(path))

    def close(self) -> None:
        """Close this object's shard (further :meth:`add` calls open a new one)."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # ------------------------------------------------------------------ reading
    def shards(self) -> list[str]:
        """Paths of the shard files, sorted by name."""
        if self._files is not None:
            return list(self._files)
        if not os.path.isdir(self.path):
            return []
        return [os.path.join(self.path, n) for n in sorted(os.listdir(self.path))
                if n.endswith(".jsonl") and os.path.isfile(os.path.join(self.path, n))]

    def _iter_records(self, log: bool = True):
        """Every record of every readable shard, in shard-name and line order (duplicates included).

        Sets ``self.stats`` (shards, lines, bad_lines, bad_shards). A shard whose header names a
        format version this release cannot read raises :class:`KnowledgeError`.
        """
        stats = {"shards": 0, "lines": 0, "bad_lines": 0, "bad_shards": 0}
        self.stats = stats
        for path in self.shards():
            try:
                f = open(path, encoding="utf-8", errors="replace")
            except OSError as err:
                stats["bad_shards"] += 1
                logger.warning("knowledge: skipped shard %s: %s", path, err)
                continue
            with f:
                if self._check_header(path, log)(f.readline()) is None:
                    stats["bad_shards"] += 1
                    continue
                stats["shards"] += 1
                bad = 0
                for line in f:
                    if not line.strip():
                        continue
                    stats["lines"] += 1
                    try:
                        rec = Record.from_json(line)
                    except (ValueError, TypeError):
                        bad += 1
                        continue
                    yield rec
                if bad:
                    stats["bad_lines"] += bad
                    if log:
                        logger.warning("knowledge: %s: skipped %d unreadable line(s) (a write cut by a crash "
                                       "leaves one at the end); the rest is used", path, bad)

    def _check_header(self, path: str, log: bool):
        """A function of a shard's first line: its version, None when not a shard (one warning), and
        :class:`KnowledgeError` for a format version this release cannot read."""
        def check(first: str):
            version = _header_version(first)
            if version is None:
                if first.strip() and log:
                    logger.warning("knowledge: skipped %s: not a knowledge shard (its first line is not a "
                                   "release_knowledge header); the other shards are used", path)
                return None
            if not MIN_READ_VERSION <= version <= KNOWLEDGE_VERSION:
                newer = version > KNOWLEDGE_VERSION
                raise KnowledgeError(
                    f"knowledge base {self.path}: shard {os.path.basename(path)} has format version {version}, "
                    f"this release reads {MIN_READ_VERSION}..{KNOWLEDGE_VERSION}; "
                    + ("upgrade release-tvm, or " if newer else "")
                    + "move the folder aside and pass --knowledge NEWDIR (re-import its logs with "
                      "`release knowledge add LOG...`)")
            return version
        return check

    def _shard_indexes(self, log: bool = True) -> list[tuple[str, dict]]:
        """``(shard path, index)`` of every readable shard, each index brought up to date (only lines
        not indexed yet are parsed: :func:`release.knowledge.index.shard_index`). Sets ``self.stats``
        (shards, lines, bad_lines, bad_shards, parsed)."""
        stats = {"shards": 0, "lines": 0, "bad_lines": 0, "bad_shards": 0, "parsed": 0}
        self.stats = stats
        out = []
        for path in self.shards():
            try:
                d, got = shard_index(self.path, path, self._check_header(path, log), record_identity, workload_digest,
                                     write=self._index, cache=self._indexes.get(path))
            except OSError as err:
                stats["bad_shards"] += 1
                logger.warning("knowledge: skipped shard %s: %s", path, err)
                continue
            if d is None:
                stats["bad_shards"] += 1
                continue
            self._indexes[path] = d
            stats["shards"] += 1
            stats["lines"] += d["lines"] + got["bad_tail"]
            stats["parsed"] += got["parsed"]
            bad = d["bad_lines"] + got["bad_tail"]
            if bad:
                stats["bad_lines"] += bad
                if log:
                    logger.warning("knowledge: %s: skipped %d unreadable line(s) (a write cut by a crash "
                                   "leaves one at the end); the rest is used", path, bad)
            out.append((path, d))
        return out

    def _all_ids(self) -> set:
        """Identities (first ``ID_HEX`` hex digits of :func:`record_identity`) of every record held."""
        if not self._index:
            return {record_identity(r).hex()[:ID_HEX] for r in self._iter_records(log=False)}
        return {e[0] for _, d in self._shard_indexes(log=False) for entries in d["groups"].values() for e in entries}

    def best_records(self, target_kind=None, per: int = 4, budget: int | None = None) -> tuple[list[Record], dict]:
        """Each workload's ``per`` fastest successful records per machine, read through the shard index.

        What a warm start needs (:func:`release.knowledge.use.knowledge_seeds`), at the cost of the
        lines returned plus the lines not indexed yet (:mod:`release.knowledge.index`), instead of a
        parse of the whole base (:meth:`records`: ~72 s for 64,764 records on a 2-core EPYC).

        Parameters
        ----------
        target_kind : str, dict or tvm.target.Target, optional
            As :meth:`records`: a kind, or a target whose ISA class the records must have (every CPU
            model of the class; other classes are counted in one warning line). Default: all.
        per : int
            Records kept per (workload, target, CPU model), fastest mean run time first (default 4).
        budget : int, optional
            About how many records in all: ``per`` is lowered to ``max(2, ceil(budget / groups))``
            over the groups with a successful record (a base of many workloads gives each its best
            two; one of few workloads gives each up to ``per``). Default None: ``per`` as given.

        Returns
        -------
        (list of Record, dict)
            The records (deduplicated as :meth:`records` does, the first copy read winning; in shard
            and line order; MetaSchedule imports named as :meth:`records` names them), and what the
            base holds of the class: ``{"records": n, "workloads": m, "machines": {machine: n}}``
            (distinct records, all of them, failed ones included; machines named by
            :func:`release.target.machine_of`).

        Raises
        ------
        KnowledgeError
            A shard written in a format version this release cannot read.
        ValueError
            ``per`` below 1.
        """
        from ..target import machine_of

        if int(per) < 1:
            raise ValueError(f"per={per}: give at least 1 record per workload")
        match = _target_matcher(target_kind)
        seen: set = set()
        others: Counter = Counter()
        machines: Counter = Counter()
        workloads: set = set()
        names: dict = {}
        ranked: dict[tuple, list] = {}
        label: dict[tuple, str] = {}  # group -> machine_of(target, CPU model), computed once per group
        for rank, (path, d) in enumerate(self._shard_indexes()):
            for digest, nm in d["names"].items():
                names.setdefault(digest, nm)
            flat = []
            for key, entries in d["groups"].items():
                if match is not None and not match(key[1]):
                    others[target_class(key[1])] += len(entries)
                    continue
                flat.extend((e[2], e, key) for e in entries)
            flat.sort(key=lambda t: t[0])  # line order: the first copy read wins, as in a full read
            for off, (ident, cost, _, n), key in flat:
                if ident in seen:
                    continue
                seen.add(ident)
                who = label.get(key)
                if who is None:
                    who = label[key] = machine_of(key[1], key[2])
                machines[who] += 1
                workloads.add(key[0])
                if cost is not None:
                    ranked.setdefault(key, []).append((cost, rank, off, path, n))
        if others:
            shown = ", ".join(f"{n} on {k}" for k, n in others.most_common(3)) + (" ..." if len(others) > 3 else "")
            logger.warning("knowledge: left out %d record(s) of other ISA classes (%s); using only %s",
                           sum(others.values()), shown, match.label)
        per = int(per)
        if budget is not None and ranked:
            per = min(per, max(2, -(-int(budget) // len(ranked))))
        spans: dict[str, list] = defaultdict(list)
        for key, lst in ranked.items():
            lst.sort(key=lambda t: (t[0], t[1], t[2]))
            for _cost, rank, off, path, n in lst[:per]:
                spans[path].append((rank, off, n))
        out = []
        for path, sp in spans.items():
            sp.sort()
            out.extend((r, off, rec) for (r, off, _), rec in zip(sp, read_lines(path, [(o, n) for _, o, n in sp])))
        out.sort(key=lambda t: (t[0], t[1]))
        recs = _name_ms_records([rec for _, _, rec in out], names)
        held = {"records": len(seen), "workloads": len(workloads), "machines": dict(machines.most_common())}
        return recs, held

    def records(self, target_kind=None, workload=None) -> list[Record]:
        """The deduplicated records, optionally of one target class and one workload.

        Parameters
        ----------
        target_kind : str, dict or tvm.target.Target, optional
            A kind (``"llvm"``, ``"cuda"``: every record of that kind) or a target (JSON text, dict
            or ``Target``: records of its ISA class, :func:`release.target.isa_class`, from any CPU
            model: a Zen 4's records reach a Xeon's AVX-512 task, AVX2 records never do). Records
            left out are counted in one warning line naming their classes. Default: all.
        workload : Task or str, optional
            A :class:`release.task.Task` (its program on any machine of its ISA class, keys of
            older releases migrated: :meth:`release.task.Task.owns`), a task key, its 16-hex
            digest, or a task name.

        Returns
        -------
        list of Record
            First copy of each (workload, target, trace), in shard-name then line order. Records
            imported from a MetaSchedule database get the ``name`` and ``flop`` of a release record
            of the same workload when the base holds one. Time and memory linear in the base's size.
            With ``read_once``, all workloads of one target class are read once per object (see
            the parameter).

        Raises
        ------
        KnowledgeError
            A shard written in a format version this release cannot read.
        """
        if workload is None and self._read_once:
            match = _target_matcher(target_kind)
            label = "*" if match is None else match.label
            with self._lock:
                held = self._read.get(label)
            if held is None:
                got = self._records(target_kind, None)
                with self._lock:
                    held = self._read.setdefault(label, (match, got))
            return list(held[1])
        return self._records(target_kind, workload)

    def _records(self, target_kind, workload) -> list[Record]:
        wkey = workload if hasattr(workload, "owns") else getattr(workload, "key", workload)
        names: dict[str, tuple[str, float]] = {}
        out: list[Record] = []
        pending: set[int] = set()
        for rec, maybe in self._scan(target_kind, wkey, names):
            out.append(rec)
            if maybe:
                pending.add(id(rec))
        _name_ms_records(out, names)
        if pending:
            name = wkey.name if hasattr(wkey, "owns") else wkey
            out = [r for r in out if id(r) not in pending or r.name == name]
        return out

    def _scan(self, target_kind, wkey, names: dict):
        """Yield ``(record, maybe)`` for the first copy of each record of ``target_kind`` and
        workload ``wkey`` in one pass; ``maybe``: a MetaSchedule record kept in case ``wkey`` is
        its name. Fills ``names`` (digest -> (name, flop) of the first release record) and
        ``self.stats``; logs the other-target line when the pass ends."""
        match = _target_matcher(target_kind)
        seen: set[bytes] = set()
        others: Counter = Counter()
        dups = 0
        for rec in self._iter_records():
            digest = workload_digest(rec.task)
            if rec.tuner != "ms-database" and digest not in names:
                names[digest] = (rec.name, rec.flop)
            maybe = False  # a MetaSchedule record's name is known only once a release record of it is read
            if hasattr(wkey, "owns"):  # a Task: its program on its ISA class, older keys migrated
                if not wkey.owns(rec):
                    continue
            elif wkey is not None and wkey not in (rec.task, digest, rec.name):
                if rec.tuner != "ms-database":
                    continue
                maybe = True
            if match is not None and not match(rec.target):
                others[target_class(rec.target)] += 1
                continue
            ident = record_identity(rec)
            if ident in seen:
                dups += 1
                continue
            seen.add(ident)
            yield rec, maybe
        self.stats["duplicates"] = dups
        self.stats["other_targets"] = sum(others.values())
        if others:
            shown = ", ".join(f"{n} on {k}" for k, n in others.most_common(3)) + (" ..." if len(others) > 3 else "")
            logger.warning("knowledge: left out %d record(s) of other ISA classes (%s); using only %s",
                           sum(others.values()), shown, match.label)

    def summary(self, target_kind=None) -> list[dict]:
        """Per ISA class, machine and workload: records, successful ones, best time and GFLOPS.

        Returns
        -------
        list of dict
            Keys ``target`` (the ISA class, :func:`target_class`), ``machine``
            (:func:`release.target.machine_of`: each machine's timings are its own, never ranked
            with another's), ``workload`` (task key), ``name``, ``records``,
            ``ok``, ``best_ms`` (fastest mean run time, ms; None without a success), ``best_gflops``
            (None when no FLOP count is known, e.g. only MetaSchedule records), ``tuners`` (sorted
            names). Sorted by ISA class, machine, then name.
        """
        rows: dict[tuple[str, str], dict] = {}
        tuners: dict[tuple[str, str], set] = defaultdict(set)
        names: dict[str, tuple[str, float]] = {}
        from ..target import machine_of

        for rec, _ in self._scan(target_kind, None, names):  # streamed: memory holds one record at a time
            tc = target_class(rec.target)
            machine = machine_of(rec.target, rec.machine)
            k = (tc, workload_digest(rec.task), machine)
            row = rows.get(k)
            if row is None:
                row = rows[k] = {"target": tc, "machine": machine, "workload": rec.task, "name": rec.name,
                                 "records": 0, "ok": 0, "best_ms": None, "best_gflops": None, "flop": 0.0}
            row["records"] += 1
            row["flop"] = max(row["flop"], rec.flop)
            tuners[k].add(rec.tuner or "?")
            if rec.ok:
                row["ok"] += 1
                ms = rec.mean_cost * 1e3
                if row["best_ms"] is None or ms < row["best_ms"]:
                    row["best_ms"] = ms
        for (tc, digest, machine), row in rows.items():
            row["tuners"] = sorted(tuners[(tc, digest, machine)])
            known = names.get(digest)
            if known is not None:  # MetaSchedule-only rows learn the name and FLOP count of their workload
                row["name"], row["workload"] = known[0], f"{known[0]}/{digest}"
                row["flop"] = row["flop"] or known[1]
            flop = row.pop("flop")
            if flop > 0 and row["best_ms"]:
                row["best_gflops"] = flop / (row["best_ms"] * 1e-3) / 1e9
        return sorted(rows.values(), key=lambda r: (r["target"], r["machine"], r["name"], r["workload"]))


def _name_ms_records(recs: list, names: dict) -> list:
    """Give records imported from a MetaSchedule database the name and FLOP count of a release record of
    the same workload (``names``: digest -> (name, flop)); returns ``recs``."""
    for rec in recs:
        if rec.tuner == "ms-database":
            got = names.get(workload_digest(rec.task))
            if got is not None:
                rec.name, rec.flop = got[0], got[1]
                rec.task = f"{got[0]}/{workload_digest(rec.task)}"
    return recs


def _write_all(fd: int, data: bytes) -> None:
    """``os.write`` until every byte is written (a regular file takes it in one call in practice)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
