"""Notes said once: a warning that several steps of one command reach (task extraction, the compile,
the comparisons each run a model's passes again) is logged the first time only.

Use :func:`warn_once` where a message would otherwise repeat; identical text from the same logger is
dropped for the rest of the process (:func:`forget` clears the memory, for tests and long-lived hosts).
"""

from __future__ import annotations

import logging

_SAID: set = set()


def warn_once(logger: logging.Logger, msg: str, *args) -> bool:
    """``logger.warning(msg, *args)`` unless the same text came from ``logger`` before in this process.

    Returns
    -------
    bool
        Whether it was logged now.
    """
    text = msg % args if args else msg
    key = (logger.name, text)
    if key in _SAID:
        return False
    _SAID.add(key)
    logger.warning("%s", text)
    return True


def forget() -> None:
    """Forget every note said (the next :func:`warn_once` of any text logs again)."""
    _SAID.clear()
