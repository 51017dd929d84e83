"""history/ is its own step (rule history, `faultloop history`) with a declared output, and
building the report writes nothing."""

from __future__ import annotations

import json
from pathlib import Path

from test_report import A, B, gather, good, put_cell, verdict

from conftest import planned_outputs, snakemake
from faultloop.cli import history
from faultloop.contracts import read_score_records
from faultloop.core import layout
from faultloop.faults import STOP
from faultloop.report.history import INDEX
from faultloop.report.model import build_report
from faultloop.report.render import render_html, render_markdown


def files(root: Path) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


def test_history_is_recorded_by_its_own_step_and_the_report_only_reads_it(tmp_path: Path) -> None:
    s = tmp_path / "session"
    put_cell(
        s,
        A,
        good(A, "v1"),
        [1],
        others={"first_error": verdict(STOP, [0], [], "crash", None, "b1")},
    )
    put_cell(s, B, good(B, "v1"), [0])
    records = gather(s, [A, B])
    history_dir = s / layout.HISTORY_DIR
    assert history.main(["--records", str(records), "--history-dir", str(history_dir)]) == 0
    index = json.loads((history_dir / INDEX).read_text())["analyzers"]
    assert index == {
        "builtin": [{"number": 1, "fingerprint": "v1", "file": "builtin/1_v1.tsv"}],
        "first_error": [{"number": 1, "fingerprint": "v1", "file": "first_error/1_v1.tsv"}],
    }
    before = files(s)
    rep = build_report(read_score_records(records), history_dir)
    assert render_markdown(rep) and render_html(rep, tmp_path / "no-heatmap.png")
    assert files(s) == before  # building and rendering the report wrote nothing
    assert [v.history[-1].path.name for v in rep.views] == ["1_v1.tsv", "1_v1.tsv"]


def test_the_workflow_declares_the_history_it_writes(workflow_copy: Path) -> None:
    result = snakemake(
        workflow_copy, "-n", "--profile", "profiles/local", "--config", "pool_file=config/pools/quick.tsv", "session=h"
    )
    output = result.stdout + result.stderr
    assert planned_outputs(output, "history") == [f"results/fault_injection/h/{layout.HISTORY_DIR}/{INDEX}"]
    assert not any(layout.HISTORY_DIR in p for p in planned_outputs(output, "aggregate_report"))
