"""Atomic writes: a reader sees the whole file or none, with the team's permissions."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from faultloop.core import atomic
from faultloop.core.errors import no_space
from faultloop.workflow.invocation import full_filesystem, logged


def test_atomic_writes_are_readable_by_the_team(tmp_path):
    atomic.write_json_atomic(tmp_path / "sub" / "x.json", {"a": 1})
    assert (tmp_path / "sub" / "x.json").read_text() == '{\n  "a": 1\n}\n'
    assert os.stat(tmp_path / "sub" / "x.json").st_mode & 0o044 == 0o044, "group and others may read results"
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["x.json"], "no temp file left behind"


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs, made and removed here (root only), filled but for 4 KiB."""
    folder = tmp_path / "small"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"a small filesystem cannot be mounted here ({mounted.stderr.decode().strip()}): needs root")
    try:
        (folder / "kept.txt").write_text("the previous version\n")
        stat = os.statvfs(folder)
        with open(folder / "ballast", "wb") as handle:
            handle.write(b"\0" * (stat.f_bavail * stat.f_frsize - 4096))
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def test_a_full_disk_keeps_the_previous_file_and_names_the_one_written(full_disk):
    with pytest.raises(OSError) as raised:
        atomic.write_atomic(full_disk / "kept.txt", "x" * (64 << 10))
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == str(full_disk / "kept.txt")
    assert (full_disk / "kept.txt").read_text() == "the previous version\n"
    assert sorted(p.name for p in full_disk.iterdir()) == ["ballast", "kept.txt"], "no temp file left behind"
    assert no_space(raised.value, "faultloop score") == (
        f"faultloop score: No space left on device writing {full_disk / 'kept.txt'};"
        " free space and run the same command again"
    )
    assert no_space(OSError(errno.EACCES, "Permission denied"), "x") is None


def test_a_workflow_script_on_a_full_disk_ends_with_one_line(full_disk, tmp_path):
    log = tmp_path / "score.log"
    with pytest.raises(SystemExit) as ended, logged(log):
        atomic.write_atomic(full_disk / "scores.tsv", "y" * (64 << 10))
    assert ended.value.code == 1
    assert (
        log.read_text()
        == f"score: No space left on device writing {full_disk / 'scores.tsv'}; free space and run the same command again\n"
    )
    assert "is on a full filesystem" in (full_filesystem(full_disk / "fault_injection" / "s") or "")
    assert full_filesystem(tmp_path) is None
