"""`faultloop fr --fr-path PATH ...`: faultloop's flight-recorder analyzer on a job's dumps.

A path that cannot hold dumps (a missing folder, a file, a prefix no file starts with) is refused
here with one line naming it, before anything is read. A dump folder without dumps, or torch's
dump prefix in one (`DIR/_dump_`), is a result ("no dumps found"): the job left none. The analysis
itself and its other options are faultloop.analyze.fr.analysis's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from faultloop.analyze.fr import analysis


def fr_path_problem(path: str) -> str | None:
    """Why `--fr-path` names nothing dumps could be in (a dump folder, or a prefix like DIR/_dump_)."""
    given = Path(path)
    if given.is_dir():
        return None
    if given.is_file():
        return f"{path} is a file; --fr-path takes a dump folder or a prefix like DIR/_dump_"
    if not given.parent.is_dir():
        return f"no such dump folder: {path}"
    if analysis.DEFAULT_PATTERN.startswith(given.name):
        return None  # torch's own dump prefix: a folder whose job left no dump is a result
    if not any(child.is_file() and child.name.startswith(given.name) for child in given.parent.iterdir()):
        return f"no such dump folder: {path} (nor a file in {given.parent} starting with {given.name!r})"
    return None


def main(argv: list[str]) -> int:
    paths = argparse.ArgumentParser(add_help=False)
    paths.add_argument("--fr-path")
    given, _ = paths.parse_known_args(argv)
    if given.fr_path is not None and (problem := fr_path_problem(given.fr_path)):
        print(f"faultloop fr: {problem}", file=sys.stderr)
        return 2
    return analysis.main(argv)
