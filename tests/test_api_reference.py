"""docs/reference/api.md is what the docstrings say (``release.api_reference``), not a stale copy."""

import inspect
import os
import re

import pytest

from release import api_reference

DOC = os.path.join(os.path.dirname(__file__), os.pardir, "docs", "reference", "api.md")


def test_committed_api_reference_is_current():
    with open(DOC, encoding="utf-8") as f:
        committed = f.read()
    made_with = re.search(r"\(Python (\d+\.\d+)\); do not edit", committed)
    if made_with and made_with.group(1) != api_reference.python_version():
        pytest.skip(f"docs/reference/api.md was rendered with Python {made_with.group(1)}, this is "
                    f"{api_reference.python_version()} (inspect renders signatures differently across versions)")
    assert committed == api_reference.render(), (
        "docs/reference/api.md is stale (a public name, signature or docstring changed): regenerate it with "
        f"`{api_reference.REGENERATE}`")


def test_every_public_name_is_documented_with_a_docstring():
    """Each public name of ``release`` and of the documented subpackages has its entry, and each class or
    function one has a docstring of its own."""
    import importlib

    text = api_reference.render()
    missing = []
    for package in api_reference.PACKAGES:
        mod = importlib.import_module(package)
        for name in api_reference.public_names(package):
            assert f"\n### `{package}.{name}`\n" in text, f"{package}.{name} has no entry"
            obj = getattr(mod, name)
            if (inspect.isclass(obj) or inspect.isfunction(obj)) and not inspect.getdoc(obj):
                missing.append(f"{package}.{name}")
    assert not missing, f"public names without a docstring: {missing}"
    assert len(api_reference.public_names("release")) >= 20  # the lazy names of `import release`, autotvm
