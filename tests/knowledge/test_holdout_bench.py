"""``benchmarks/knowledge/holdout.py``: which records a held-out layer's knowledge base may hold."""

import importlib.util
import json
import os

PATH = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "benchmarks", "knowledge", "holdout.py")


def _module():
    spec = importlib.util.spec_from_file_location("holdout", PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _log(path, task):
    path.write_text(json.dumps({"task": task, "config": [0]}) + "\n")
    return str(path)


def test_a_held_out_layer_is_never_in_its_own_base(tmp_path):
    h = _module()
    two = _log(tmp_path / "a.jsonl", "resnet18.conv2d.2-prepack/c1d1821c17444fee")
    six = _log(tmp_path / "b.jsonl", "resnet18.conv2d.6/0123456789abcdef")
    sources = [1, 2, 3, 6]
    # a layer outside the sources reads the base of every source and every extra log
    assert h.base_sources(4, sources, [two, six]) == ([1, 2, 3, 6], [two, six], "")
    # leave-one-out: a source held out reads a base of the others, without its own extra logs either
    assert h.base_sources(6, sources, [two, six]) == ([1, 2, 3], [two], "-no6")
    assert h.base_sources(2, sources, [two, six]) == ([1, 3, 6], [six], "-no2")
    # conv2d.1 is not conv2d.12's prefix match: names are compared whole
    twelve = _log(tmp_path / "c.jsonl", "resnet18.conv2d.12/fedcba9876543210")
    assert h.base_sources(1, [1, 12], [twelve]) == ([12], [twelve], "-no1")
