"""Atomic writes: a reader sees the whole file or none, with the team's permissions."""

from __future__ import annotations

import os

from faultloop.core import atomic


def test_atomic_writes_are_readable_by_the_team(tmp_path):
    atomic.write_json_atomic(tmp_path / "sub" / "x.json", {"a": 1})
    assert (tmp_path / "sub" / "x.json").read_text() == '{\n  "a": 1\n}\n'
    assert os.stat(tmp_path / "sub" / "x.json").st_mode & 0o044 == 0o044, "group and others may read results"
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["x.json"], "no temp file left behind"
