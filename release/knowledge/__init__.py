"""Tuning knowledge base: every record measured on this machine, across tasks, models and runs.

The map:

- :mod:`release.knowledge.store`: :class:`KnowledgeBase` and its on-disk layout (append-only JSON-lines
  shards, one per writer process, never pickled; stored programs) and guarantees, :func:`knowledge_dir`,
  the format constants, :func:`read_input` (any input: a log, a MetaSchedule database, another base).
- :mod:`release.knowledge.targets`: target classes and matching (:func:`target_class`), the workload
  digest and :func:`record_identity` (the dedup key).
- :mod:`release.knowledge.importers`: MetaSchedule databases (:func:`read_ms_database`), release logs and
  knowledge folders or shards as input, :func:`check_input`, :class:`KnowledgeError`.
- :mod:`release.knowledge.index`: the per-shard index behind :meth:`KnowledgeBase.best_records`.
- :mod:`release.knowledge.pack`: the knowledge base shipped inside the package.
- :mod:`release.knowledge.cli`: ``release knowledge show | add``.

:mod:`release.knowledge.use` is how tuning uses it: :func:`knowledge_records` (a tuner's
``knowledge=`` argument to records of the task's target) and the :class:`log_to_knowledge`
callback (``release tune`` adds it unless ``--no-knowledge``; from Python pass
``callbacks=[log_to_file(LOG), log_to_knowledge(DIR)]``).
"""

from .importers import KnowledgeError, check_input, read_ms_database
from .store import KNOWLEDGE_VERSION, KnowledgeBase, knowledge_dir, read_input
from .targets import record_identity, target_class
from .use import knowledge_programs, knowledge_records, knowledge_seeds, log_to_knowledge

__all__ = ["KNOWLEDGE_VERSION", "KnowledgeBase", "KnowledgeError", "check_input", "knowledge_dir", "read_input",
           "read_ms_database", "record_identity", "target_class", "knowledge_records", "knowledge_seeds", "knowledge_programs",
           "log_to_knowledge"]
