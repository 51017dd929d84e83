"""A rule's fingerprint covers the code its command runs, found from its imports, never listed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO
from faultloop.fingerprint import code_files, imported_names, package_root


def loaded_modules(entry: str) -> set[Path]:
    """The files of the faultloop modules Python actually loads when it imports entry."""
    probe = (
        "import sys, importlib; importlib.import_module(sys.argv[1]); "
        "print('\\n'.join(m.__file__ for n, m in sys.modules.items() if n.startswith('faultloop')))"
    )
    out = subprocess.run([sys.executable, "-c", probe, entry], capture_output=True, text=True, check=True).stdout
    return {Path(line).resolve() for line in out.split()}


def test_the_files_cover_every_module_the_command_loads():
    for entry in ("faultloop.cli.score", "faultloop.cli.report"):
        covered = {p.resolve() for p in code_files(entry)}
        assert loaded_modules(entry) <= covered, entry
    report = {str(p.relative_to(package_root("faultloop"))) for p in code_files("faultloop.cli.report")}
    assert {"report/templates/report.md.j2", "report/templates/report.html.j2"} <= report
    assert not any(name.startswith("run/") for name in report), "the report's code runs no job"


def test_relative_and_from_imports_are_resolved(tmp_path):
    module = tmp_path / "pkg" / "sub" / "mod.py"
    module.parent.mkdir(parents=True)
    module.write_text("from . import sibling\nfrom ..other import thing\nimport os.path\n\ndef f():\n    import lazy\n")
    assert imported_names(module, "pkg.sub.mod") == {
        "pkg.sub",
        "pkg.sub.sibling",
        "pkg.other",
        "pkg.other.thing",
        "os.path",
        "lazy",
    }


def fingerprint_of(src: Path, *entries: str) -> str:
    probe = "import sys; from faultloop.fingerprint import code_fingerprint; print(code_fingerprint(*sys.argv[1:]))"
    env = dict(os.environ, PYTHONPATH=str(src))
    return subprocess.run(
        [sys.executable, "-c", probe, *entries], capture_output=True, text=True, check=True, env=env
    ).stdout.strip()


def test_a_patch_anywhere_in_the_code_changes_the_fingerprint_and_nowhere_else_does(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(REPO / "src" / "faultloop", src / "faultloop", ignore=shutil.ignore_patterns("__pycache__"))
    score, report = fingerprint_of(src, "faultloop.cli.score"), fingerprint_of(src, "faultloop.cli.report")
    with open(src / "faultloop" / "run" / "workload.py", "a") as handle:
        handle.write("# a patch to the workload\n")
    assert fingerprint_of(src, "faultloop.cli.score") == score
    with open(src / "faultloop" / "signals.py", "a") as handle:  # grading reads signal names through faults
        handle.write("# a patch two imports away\n")
    assert fingerprint_of(src, "faultloop.cli.score") != score
    with open(src / "faultloop" / "report" / "templates" / "report.md.j2", "a") as handle:
        handle.write("\n")
    assert fingerprint_of(src, "faultloop.cli.report") != report
