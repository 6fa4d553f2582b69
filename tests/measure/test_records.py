"""Tuning logs as files: what counts as a log, folders, and lines cut by a crash.

These tests use records as plain JSON (no TVM): the end-to-end versions through ``release tune`` are in
tests/test_cli.py.
"""

import json
import os

import pytest

from release.errors import RecordError
from release.measure.records import Record, _ends_mid_line, load_records, log_to_file


def _rec(i: int, task: str = "tiny.matmul.1/abc") -> str:
    return Record(task=task, name="tiny.matmul.1", target='{"kind": "llvm"}', config=[i, 0], costs=[1e-3]).to_json()


def test_a_file_none_of_whose_lines_is_a_record_is_refused_and_left_untouched(tmp_path):
    path = tmp_path / "setup.cfg"
    text = "[metadata]\nname = x\n\n{\"not\": \"a record\"}\n"
    path.write_text(text)
    with pytest.raises(RecordError, match="is not a tuning log"):
        load_records(path)
    with pytest.raises(RecordError, match="is not a tuning log"):
        log_to_file(path)
    assert path.read_text() == text


def test_a_log_with_some_bad_lines_still_loads_its_records(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(_rec(0) + "\ngarbage\n" + _rec(1) + "\n")
    assert [r.config for r in load_records(path)] == [(0, 0), (1, 0)]  # a config is a tuple (a JSON list on disk)


def test_a_log_whose_only_line_was_cut_by_a_crash_is_still_a_log(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(_rec(0)[:40])  # the first record, cut mid-write
    assert load_records(path) == []
    assert log_to_file(path).path == str(path)


@pytest.mark.parametrize("content", ["", "\n\n"])
def test_empty_files_are_empty_logs(tmp_path, content):
    path = tmp_path / "t.jsonl"
    path.write_text(content)
    assert load_records(path) == []


def test_a_folder_is_refused_by_reader_and_writer(tmp_path):
    for f in (load_records, log_to_file):
        with pytest.raises(RecordError, match="is a folder; give a file path such as"):
            f(tmp_path)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_a_folder_that_refuses_files_is_refused_before_any_work(tmp_path):
    """os.access says /proc is writable to root; the check tries a file there, and leaves none elsewhere."""
    from release.measure.records import check_log_path

    with pytest.raises(RecordError, match=r"log path /proc/r\.jsonl: cannot write a file in /proc"):
        check_log_path("/proc/r.jsonl")
    check_log_path(tmp_path / "ok.jsonl")
    existing = tmp_path / "old.jsonl"
    existing.write_text("x\n")
    check_log_path(existing)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.jsonl"] and existing.read_text() == "x\n"


@pytest.mark.parametrize("content,cut", [("", False), ("x\n", False), ("x", True), ('{"task": "a"', True)])
def test_ends_mid_line(tmp_path, content, cut):
    path = tmp_path / "t.jsonl"
    path.write_bytes(content.encode())
    assert _ends_mid_line(str(path)) is cut


def test_writer_starts_a_new_line_after_a_cut_one(tmp_path):
    """The record written after a cut line is readable (the cut line stays, skipped with a warning)."""
    from types import SimpleNamespace

    from release.measure import MeasureResult

    path = tmp_path / "t.jsonl"
    path.write_text(_rec(0) + "\n" + _rec(1)[:30])
    cb = log_to_file(path)
    task = SimpleNamespace(key="tiny.matmul.1/abc", name="tiny.matmul.1", target_json='{"kind": "llvm"}', flop=1.0)
    res = MeasureResult(config=[2, 0], costs=[1e-3])
    cb(SimpleNamespace(task=task, name="random"), None, [res])
    cb(SimpleNamespace(task=task, name="random"), None, [MeasureResult(config=[3, 0], costs=[1e-3])])
    assert [r.config for r in load_records(path)] == [(0, 0), (2, 0), (3, 0)]
    assert path.read_text().splitlines()[1] == _rec(1)[:30]
