"""``autotvm.callback``: ``log_to_file``, ``log_to_database``, ``progress_bar`` (a tqdm bar on a terminal,
a plain line every few trials or seconds elsewhere: :class:`release.tuners.callback.progress_bar`)."""

from ..tuners.callback import log_to_database, log_to_file, progress_bar

__all__ = ["log_to_file", "log_to_database", "progress_bar"]
