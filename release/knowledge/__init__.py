"""Tuning knowledge base: every record measured on this machine, across tasks, models and runs.

See :mod:`release.knowledge.base` for the on-disk layout (append-only JSON-lines shards, one per
writer process, never pickled) and its guarantees. ``release knowledge show | add`` is the CLI.
:mod:`release.knowledge.use` is how tuning uses it: :func:`knowledge_records` (a tuner's
``knowledge=`` argument to records of the task's target) and the :class:`log_to_knowledge`
callback (``release tune`` adds it unless ``--no-knowledge``; from Python pass
``callbacks=[log_to_file(LOG), log_to_knowledge(DIR)]``).
"""

from .base import (KNOWLEDGE_VERSION, KnowledgeBase, KnowledgeError, check_input, knowledge_dir, read_input,
                   read_ms_database, record_identity, target_class)
from .use import knowledge_programs, knowledge_records, knowledge_seeds, log_to_knowledge

__all__ = ["KNOWLEDGE_VERSION", "KnowledgeBase", "KnowledgeError", "check_input", "knowledge_dir", "read_input",
           "read_ms_database", "record_identity", "target_class", "knowledge_records", "knowledge_seeds", "knowledge_programs",
           "log_to_knowledge"]
