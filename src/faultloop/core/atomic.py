"""Atomic writes: every file faultloop writes appears whole or not at all (temp file + rename), with
the permissions the team's umask gives, never mkstemp's private 0600."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

UMASK = os.umask(0o022)
os.umask(UMASK)


def write_atomic(path: str | Path, text: str) -> None:
    """Write a file so readers never see half of it (temp file in the same folder, then rename)."""
    write_lines_atomic(path, (text,))


def write_lines_atomic(path: str | Path, lines: Iterable[str]) -> None:
    """write_atomic for text that comes a piece at a time (a log copied line by line)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~UMASK)  # mkstemp's 0600 would hide results from the team
        with os.fdopen(fd, "w") as handle:
            handle.writelines(lines)
        os.replace(tmp, path)
    except OSError as error:
        Path(tmp).unlink(missing_ok=True)
        if error.filename is None:  # a failed write (a full disk) names no file: name the one written
            raise OSError(error.errno, error.strerror, str(path)) from error
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: str | Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


def emit_result(text: str, data: Any, *, text_path: str | None, json_path: str | None, stdout_format: str) -> None:
    """An analyzer's two output forms: write each where asked (atomically), print the chosen one."""
    as_json = json.dumps(data, indent=2) + "\n"
    if text_path:
        write_atomic(text_path, text)
    if json_path:
        write_atomic(json_path, as_json)
    sys.stdout.write(as_json if stdout_format == "json" else text)
