"""Kinder where it is safe: `--config` values typed by the config schema (Snakemake hands nested
ones over as strings and reads `session=20261207_170000` as an integer), one line naming the key and
the type it wants where a value cannot be read, and a pool or tracking file exported from a
spreadsheet (byte-order mark, CRLF line ends, blank trailing columns) read. Planning is run for real
(`snakemake -n`: it writes nothing)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conftest import REPO, planned, planned_outputs, snakemake
from faultloop.adopt.tracking import read_tracking
from faultloop.core import layout
from faultloop.core.cell import Cell
from faultloop.core.errors import ConfigError
from faultloop.plan import config
from faultloop.plan.pool import read_pool_file, validate
from faultloop.workflow.invocation import config_texts

BASE = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
SPREADSHEET_POOL = (
    b"\xef\xbb\xbfFAULT_TYPE\tRANK\tITER\tNODES\t\t\r\nSIGKILL\t0\t5\t1\t\t\r\nGPU_SLEEP\t1\t5\t1\t\t\r\n\t\t\t\t\t\r\n"
)


def test_nested_and_guessed_config_values_are_typed_by_the_schema(workflow_copy: Path) -> None:
    """ITER 35 is past config.yaml's 30 iterations: the pool is planned only if `iterations: 40`,
    a string from Snakemake, is read as the integer it is; the session keeps its underscore."""
    result = snakemake(
        workflow_copy, "-n", "--profile", "profiles/local", "--config", "pool=SIGKILL:0:35:1",
        "session=20261207_170000", "run_job={iterations: 40, pg_timeout_s: '2.5'}", "rejudge=no",
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert planned(output)["run_job"] == 1
    assert any("fault_injection/20261207_170000/" in path for path in planned_outputs(output, "run_job"))
    assert not (workflow_copy / "results").exists()


def test_a_config_value_that_cannot_be_typed_is_named_in_one_line(workflow_copy: Path) -> None:
    result = snakemake(
        workflow_copy, "-n", "--profile", "profiles/local", "--config", "pool=SIGKILL:0:5:1",
        "run_job={iterations: forty}", "rejudge=maybe", check=False,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "Job stats" not in output
    assert "--config: config key 'rejudge': expected a boolean (true or false), got 'maybe'" in output
    assert "--config: config key 'run_job.iterations': expected an integer, got 'forty'" in output


def test_a_spreadsheet_pool_is_planned(workflow_copy: Path) -> None:
    pool = workflow_copy / "exported.tsv"
    pool.write_bytes(SPREADSHEET_POOL)
    result = snakemake(workflow_copy, "-n", "--profile", "profiles/local", "--config", f"pool_file={pool}")
    assert planned(result.stdout + result.stderr)["run_job"] == 2


def test_the_command_lines_texts_of_config_values() -> None:
    argv = ["snakemake", "-n", "--config", "session=2026_01", "pool=A:1:2:3 B:1:2:3", "-C", "x=", "--cores", "1"]
    assert config_texts([*argv, "--config=session=007"]) == {"session": "007", "pool": "A:1:2:3 B:1:2:3", "x": ""}


def test_typed_overrides() -> None:
    texts = {"session": "20261207_170000"}
    overrides = {"session": 20261207170000, "max_attempts": "3", "rejudge": "Yes", "fault_delay": "0.5"}
    overrides |= {"run_job": {"iterations": "40", "launcher": "srun"}, "logsage": {"llm": {"timeout_s": "30"}}}
    assert config.typed(overrides, config._schema(), texts) == {
        "session": "20261207_170000",
        "max_attempts": 3,
        "rejudge": True,
        "fault_delay": 0.5,
        "run_job": {"iterations": 40, "launcher": "srun"},
        "logsage": {"llm": {"timeout_s": 30}},
    }
    assert config.resolve(BASE, {"run_job": {"iterations": "40"}}, check=True)["run_job"]["iterations"] == 40


def test_dotted_overrides_set_nested_keys_and_bad_ones_are_named() -> None:
    assert config.parse_overrides(["run_job.iterations=40", "run_job.launcher=srun", "session=2026_01"]) == {
        "run_job": {"iterations": 40, "launcher": "srun"},
        "session": "2026_01",
    }
    for pair, message in (
        ("run_job.=4", "expected key=value (a dotted key for a nested one), got 'run_job.=4'"),
        ("gpus", "expected key=value"),
        ("run_job={", "--config run_job line 1 column 2: not valid YAML: expected the node content"),
    ):
        with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
            config.parse_overrides([pair])


def test_a_spreadsheet_pool_file_reads_as_the_plain_one(tmp_path: Path) -> None:
    (tmp_path / "exported.tsv").write_bytes(SPREADSHEET_POOL)
    rows = read_pool_file(tmp_path / "exported.tsv")
    cells = validate(rows, source="exported.tsv", gpus_per_node=4)
    assert cells == [Cell("SIGKILL", 0, 5, 1), Cell("GPU_SLEEP", 1, 5, 1)]
    assert rows[0].where.endswith("exported.tsv line 2")


def test_a_spreadsheet_tracking_file_is_read(tmp_path: Path) -> None:
    session = tmp_path / "fault_injection" / "20260401_120000"
    session.mkdir(parents=True)
    header = "\t".join(layout.TRACKING_COLUMNS)
    rows = ["51234\tSIGKILL\t1\t5\t2\tn2_SIGKILL_r1_i5\t\t", "51235\tGPU_SLEEP\t0\t5\t2\tn2_GPU_SLEEP_r0_i5"]
    (session / layout.TRACKING_TSV).write_bytes(("\ufeff" + "\r\n".join([header + "\t\t", *rows]) + "\r\n").encode())
    runs = read_tracking(session, gpus_per_node=4)
    assert [(run.cell, run.job_id, run.cell_dir.name) for run in runs] == [
        (Cell("SIGKILL", 1, 5, 2), "51234", "n2_SIGKILL_r1_i5"),
        (Cell("GPU_SLEEP", 0, 5, 2), "51235", "n2_GPU_SLEEP_r0_i5"),
    ]
