"""The command-line layer: one table of verbs, each parsing its own arguments, and the only layer
that parses any; bad paths are one line on stderr and exit status 2."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from conftest import REPO
from faultloop.cli import fr
from faultloop.cli import main as cli


@pytest.mark.parametrize("verb", sorted(cli.SUBCOMMANDS))
def test_every_verb_answers_help_under_its_own_name(verb, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main([verb, "--help"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: faultloop {verb}")


def test_the_verb_table_is_the_usage_and_an_unknown_verb_is_refused(capsys):
    assert cli.main([]) == 0
    usage = capsys.readouterr().out
    assert all(f"  {verb} " in usage for verb in cli.SUBCOMMANDS)
    assert cli.main(["adpot"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("faultloop: unknown command 'adpot'") and "  adopt " in err


def test_only_the_cli_parses_arguments():
    """argparse is imported by cli/ alone: command lines live there."""
    package = REPO / "src" / "faultloop"
    outside = []
    for path in package.rglob("*.py"):
        if path.is_relative_to(package / "cli"):
            continue
        for node in ast.walk(ast.parse(path.read_bytes())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            if "argparse" in names:
                outside.append(str(path.relative_to(package)))
    assert outside == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["logsage", "--log-path", "/no/such/run.log"], "faultloop logsage: no such log file: /no/such/run.log"),
        (["fr", "--fr-path", "/no/such/checkpoints"], "faultloop fr: no such dump folder: /no/such/checkpoints"),
    ],
)
def test_analyzer_commands_on_a_missing_path_fail_clearly(argv, message):
    proc = subprocess.run([sys.executable, "-m", "faultloop.cli", *argv], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.strip() == message and proc.stdout == ""


def test_fr_refuses_a_path_no_dump_can_be_in(tmp_path, capsys):
    """A file, or a prefix no file starts with, is refused like a missing folder: exit 2, one line."""
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "_dump_0").write_bytes(b"")
    for path, line in (
        (tmp_path / "checkpoints" / "_dump_0", "is a file, not a dump folder (nor a prefix such as DIR/_dump_)"),
        (tmp_path / "checkpoint", f"no such dump folder: {tmp_path / 'checkpoint'}"),
    ):
        assert fr.main(["--fr-path", str(path)]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.startswith("faultloop fr: ") and line in err and err.count("\n") == 1
    assert fr.bad_dump_path(str(tmp_path / "checkpoints"), fr.DEFAULT_PATTERN) is None
    assert fr.bad_dump_path(str(tmp_path / "checkpoints" / "_dump_"), fr.DEFAULT_PATTERN) is None


def test_where_names_the_session_of_a_configuration(capsys, tmp_path):
    assert cli.main(["where", f"base_experiments_dir={tmp_path}", "session=mine"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"session: {(tmp_path / 'fault_injection' / 'mine').resolve()}",
        f"report: {(tmp_path / 'fault_injection' / 'mine' / 'experiments_report.md').resolve()}",
    ]
    assert cli.main(["where", "sesion=mine"]) == 2
    assert "'sesion' is not a configuration key; did you mean 'session'?" in capsys.readouterr().err


def test_check_session_counts_the_cells_not_run_and_fails(capsys, tmp_path):
    argv = [
        "check-session",
        f"base_experiments_dir={tmp_path}",
        "session=empty",
        "pool=SIGKILL:1:3:1 SIGTERM:0:3:1@/srun",
    ]
    assert cli.main(argv) == 1
    out = capsys.readouterr().out
    assert "n1_SIGKILL_r1_i3: " not in out  # a cell not run is counted, not listed as failing
    assert out.splitlines()[-1] == "2 cells: 0 pass, 0 fail, 2 not run"
    assert "| cpu_gloo | srun | 1 | 0 |" in out
    assert cli.main(["check-session", "pool=SIGKILL:9:3:1"]) == 2
    assert "rank" in capsys.readouterr().err
