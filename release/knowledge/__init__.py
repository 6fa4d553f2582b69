"""Tuning knowledge base: every record measured on this machine, across tasks, models and runs.

See :mod:`release.knowledge.base` for the on-disk layout (append-only JSON-lines shards, one per
writer process, never pickled) and its guarantees. ``release knowledge show | add`` is the CLI.
"""

from .base import (KNOWLEDGE_VERSION, KnowledgeBase, KnowledgeError, check_input, knowledge_dir, read_input,
                   read_ms_database, record_identity, target_class)

__all__ = ["KNOWLEDGE_VERSION", "KnowledgeBase", "KnowledgeError", "check_input", "knowledge_dir", "read_input",
           "read_ms_database", "record_identity", "target_class"]
