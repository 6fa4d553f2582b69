"""Target classes and record identity: which records serve a task, and when two records are one.

- :func:`target_class`: a record's target as its instruction-set class (``llvm x86_64 avx512``,
  :func:`release.target.isa_class`); records of one class serve each other's tasks whatever the exact CPU.
- :func:`_target_matcher`: the predicate behind every ``target_kind=`` query of a knowledge base (a kind, or
  a target matched by its ISA class), with a ``label`` for the one warning line about records left out.
- :func:`workload_digest` and :func:`record_identity`: the dedup key of a record, sha1 of (workload digest,
  canonical target, trace), or of the config for a record without a trace.

Source: the identity is MetaSchedule's (workload, trace) record identity
(``src/s_tir/meta_schedule/database/json_database.cc``); traces are compared in one spelling, booleans as
0/1 as MetaSchedule's JSON writer stores them, so a record imported from a ``JSONDatabase`` and the same
record from a release log are one.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re

from ..measure.records import Record

#: target fields of a query by fields (``{"kind": "llvm"}``); a whole target is matched by its ISA class
_CLASS_FIELDS = ("kind", "mcpu", "mtriple", "arch", "mattr")

_JSON_STRING = re.compile(r'("(?:[^"\\]|\\.)*")')


def _canon_text(x) -> str:
    """Compact JSON of a trace in one spelling: booleans as 0/1, as MetaSchedule's JSON writer
    stores them (``true``/``false`` outside JSON strings are the literals; strings are untouched)."""
    parts = _JSON_STRING.split(json.dumps(x, separators=(",", ":"), sort_keys=True))
    parts[::2] = [p.replace("true", "1").replace("false", "0") for p in parts[::2]]
    return "".join(parts)


def _target_json(target) -> str:
    """Canonical target JSON (as :func:`release.target.target_to_json`) from a dict or JSON text."""
    from ..target import canonical_target_json

    return canonical_target_json(json.loads(target) if isinstance(target, str) else dict(target))


@functools.lru_cache(maxsize=1024)
def _canon_target_text(target: str) -> str:
    """:func:`_target_json` of a record's target text (the text itself when it is not JSON)."""
    try:
        return _target_json(target)
    except (ValueError, TypeError, AttributeError):
        return target


def target_class(target) -> str:
    """The instruction-set class of a record's target, e.g. ``llvm x86_64 avx512``
    (:func:`release.target.isa_class`): records of one class serve each other's tasks whatever
    the exact CPU; records of different classes are never mixed.

    Parameters
    ----------
    target : str or dict
        Target JSON (a record's ``target``) or its dict.
    """
    from ..target import isa_class

    try:
        d = json.loads(target) if isinstance(target, str) else dict(target)
    except (ValueError, TypeError):
        return str(target)
    if not isinstance(d, dict):
        return str(target)
    return isa_class(d)


def _target_matcher(query):
    """A predicate on a record's target JSON for ``records(target_kind=query)``."""
    if query is None:
        return None
    if hasattr(query, "export"):  # a tvm.target.Target
        from ..target import target_to_json

        query = target_to_json(query)
    if isinstance(query, str) and query.lstrip().startswith("{"):
        query = json.loads(query)
    cache: dict[str, bool] = {}
    if isinstance(query, str) or set(query) <= {"kind"}:  # a kind: every record of it
        want = {"kind": query.strip() if isinstance(query, str) else query["kind"]}

        def test(d: dict, text: str) -> bool:
            return d.get("kind") == want["kind"]

        label = f"kind={want['kind']}"
    else:  # a target: records of its ISA class, whatever the exact CPU
        want_class = target_class(query)

        def test(d: dict, text: str) -> bool:
            return target_class(d) == want_class if d else False

        label = want_class

    def match(target_json: str) -> bool:
        hit = cache.get(target_json)
        if hit is None:
            try:
                d = json.loads(target_json)
            except ValueError:
                d = {}
            hit = cache[target_json] = bool(isinstance(d, dict) and test(d, target_json))
        return hit

    match.label = label
    return match


def workload_digest(key: str) -> str:
    """The 16-hex workload digest of a task key ``name/digest`` (the key itself if it has no ``/``)."""
    return key.rsplit("/", 1)[-1]


def record_identity(rec: Record) -> bytes:
    """The dedup key of a record: sha1 of (workload digest, target, trace); config when no trace."""
    body = _canon_text(rec.trace) if rec.trace is not None else "config:" + json.dumps(rec.config)
    text = "\x1f".join((workload_digest(rec.task), _canon_target_text(rec.target), body))
    return hashlib.sha1(text.encode()).digest()
