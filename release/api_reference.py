"""The Python API reference (``docs/reference/api.md``), rendered from the docstrings themselves.

Every public name of :mod:`release` (the names ``import release`` gives, resolved lazily) and of its
public subpackages (:data:`PACKAGES`: each one's ``__all__``) is listed with its signature and its
docstring as written; a class also with its public methods and properties. An object exported under
several names is written out once, at its first name, and linked from the others. Regenerate the
committed file after changing a public signature or docstring::

    python -m release.api_reference > docs/reference/api.md

``tests/test_api_reference.py`` fails when the committed file differs from :func:`render`. (pdoc, the
maintained generator of this kind, writes HTML only; this module writes Markdown, as
:mod:`release.cli_reference` does for the commands.)
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys

REGENERATE = "python -m release.api_reference > docs/reference/api.md"

#: the packages documented, in order, each with what it is for (``release`` first: its lazy names)
PACKAGES = {
    "release": "Tasks, tuners, the AutoTVM drop-in, logs and the whole-model entry points.",
    "release.relax": "Whole-model tuning: import, extract, tune, compile, evaluate, deploy.",
    "release.measure": "Builders, runners, measurement records and logs (AutoTVM's `measure_option`).",
    "release.tuners": "The tuner registry and base class.",
    "release.knowledge": "The knowledge base: records and programs of earlier runs, used to start warm.",
    "release.graph": "Graph-level optimization (REGAL): computation graphs, the performance model, BRKGA.",
}


def python_version() -> str:
    """``major.minor`` of this Python: :mod:`inspect` renders signatures differently across versions."""
    return "%d.%d" % sys.version_info[:2]


def public_names(package: str) -> list[str]:
    """The public names of ``package``: ``__all__``; for :mod:`release`, the names its lazy
    ``__getattr__`` resolves (and ``autotvm``)."""
    mod = importlib.import_module(package)
    if package == "release":
        return list(mod._LAZY) + ["autotvm"]
    return list(getattr(mod, "__all__", []))


def _clean(text: str) -> str:
    """A signature or value without what changes from run to run (object addresses)."""
    return re.sub(r" at 0x[0-9a-fA-F]+", "", text)


def _signature(obj) -> str:
    try:
        return _clean(str(inspect.signature(obj)))
    except (TypeError, ValueError):
        return "(...)"


def _doc(obj) -> str:
    doc = inspect.getdoc(obj)
    return doc.strip() if doc else "(no docstring)"


def _anchor(qualified: str) -> str:
    return qualified.replace(".", "-").replace("_", "-").lower()


def _members(cls, public: dict) -> list[tuple[str, object]]:
    """A class's public methods and properties, in definition order: its own, and those it inherits
    from classes of this package that are not documented themselves (``public``: id -> qualified name
    of every documented object); a documented base's members are on that base's entry."""
    out, seen = [], set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith("release") or (klass is not cls and id(klass) in public):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_") or name in seen:
                continue
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            if inspect.isfunction(value) or isinstance(value, property):
                seen.add(name)
                out.append((name, value))
    return out


def _bases(cls, public: dict) -> list[str]:
    """The documented classes ``cls`` inherits from, as links."""
    return [f"[`{public[id(k)]}`](#{_anchor(public[id(k)])})" for k in cls.__mro__[1:] if id(k) in public]


def _entry(qualified: str, obj, public: dict) -> list[str]:
    """The Markdown of one documented object."""
    out = [f'<a id="{_anchor(qualified)}"></a>', "", f"### `{qualified}`", ""]
    defined = getattr(obj, "__module__", None)
    if inspect.ismodule(obj):
        out += [f"Module `{obj.__name__}`.", "", "```text", _doc(obj), "```", ""]
        return out
    if inspect.isclass(obj):
        out += ["```python", f"class {qualified.rsplit('.', 1)[1]}{_signature(obj)}", "```", ""]
    elif callable(obj):
        out += ["```python", f"{qualified.rsplit('.', 1)[1]}{_signature(obj)}", "```", ""]
    else:
        value = _clean(repr(obj))
        out += [f"A constant: `{value if len(value) <= 200 else value[:200] + ' ...'}`", ""]
        return out
    if defined:
        bases = _bases(obj, public) if inspect.isclass(obj) else []
        out += [f"Defined in `{defined}`" + (f"; inherits the members of {', '.join(bases)}." if bases else "."), ""]
    out += ["```text", _doc(obj), "```", ""]
    if inspect.isclass(obj):
        for name, member in _members(obj, public):
            if isinstance(member, property):
                head = f"property {name}"
                doc = _doc(member)
            else:
                head = f"{name}{_signature(member)}"
                doc = _doc(member)
            out += [f"- `{head}`", "", "  ```text", *[f"  {ln}" if ln else "" for ln in doc.splitlines()],
                    "  ```", ""]
    return out


def render() -> str:
    """The Markdown reference of every public name of :data:`PACKAGES`."""
    out = [
        "# Python API reference",
        "",
        f"<!-- Generated from the docstrings by `{REGENERATE}` (Python {python_version()}); do not edit by "
        "hand. -->",
        "",
        "Every public name of `release` and of its public subpackages, with its signature and docstring. "
        "How they fit together: [docs/ARCHITECTURE.md](../ARCHITECTURE.md); the commands: "
        "[the CLI reference](cli.md); worked examples: [the tutorials](../tutorials/).",
        "",
    ]
    documented: dict[int, str] = {}  # id -> the qualified name an object is documented at (its first)
    for package in PACKAGES:
        mod = importlib.import_module(package)
        for name in public_names(package):
            obj = getattr(mod, name)
            if inspect.isclass(obj) or callable(obj) or inspect.ismodule(obj):
                documented.setdefault(id(obj), f"{package}.{name}")
    body: list[str] = []
    for package, what in PACKAGES.items():
        mod = importlib.import_module(package)
        out.append(f"- [`{package}`](#{_anchor(package)}): {what}")
        body += [f'<a id="{_anchor(package)}"></a>', "", f"## `{package}`", "", what, ""]
        for name in public_names(package):
            obj = getattr(mod, name)
            qualified = f"{package}.{name}"
            first = documented.get(id(obj), qualified)
            if first != qualified:
                body += [f"### `{qualified}`", "", f"The same object as [`{first}`](#{_anchor(first)}).", ""]
                continue
            body += _entry(qualified, obj, documented)
    return "\n".join(out + [""] + body).rstrip("\n") + "\n"


def main() -> int:
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
