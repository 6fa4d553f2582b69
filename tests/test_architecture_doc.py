"""The examples of docs/ARCHITECTURE.md run (one namespace, in order): one per extension point."""

from __future__ import annotations

import os
import re

DOC = os.path.join(os.path.dirname(__file__), os.pardir, "docs", "ARCHITECTURE.md")


def blocks() -> list[str]:
    """The ```python blocks of the page, in order."""
    return re.findall(r"```python\n(.*?)```", open(DOC, encoding="utf-8").read(), flags=re.S)


def test_every_extension_point_has_an_example():
    text = "\n".join(blocks())
    for base in ("Tuner)", "CostModel)", "ModelOptimizer)", "Sampler)", "Callback)", "Runner)", "session.ask", "session.tell"):
        assert base in text, base


def test_architecture_examples_run():
    ns: dict = {"__name__": "architecture_doc"}
    for i, code in enumerate(blocks()):
        exec(compile(code, f"ARCHITECTURE.md block {i + 1}", "exec"), ns)  # noqa: S102 - our own doc
