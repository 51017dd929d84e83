"""A new kind of analyzer is one module and one row of `registry.TABLE`: the two kinds below (a log
kind and an FR kind, defined in this module) are accepted by config validation, planning (the
specs the workflow hands its rules), running (the rules' own commands), scoring and the report
with no other change. The config schema's and the docs' kind lists are held to the table."""

from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

import fr_synth
from conftest import REPO, TESTS, cell_manifest
from faultloop.analyze import registry
from faultloop.analyze.analyzer import Answer, DumpsSource, Input, Kind, LogSource, Spec, checked, log_answer
from faultloop.analyze.fr import dumps
from faultloop.cli import analyzers as analyzers_cli
from faultloop.cli import fr_analyzers as fr_analyzers_cli
from faultloop.cli import report as report_cli
from faultloop.contracts import FrVerdict, Grade, read_score_tsv, write_score_tables
from faultloop.core import layout
from faultloop.core.cell import Cell
from faultloop.core.errors import ConfigError
from faultloop.faults import RESTART_DECISIONS
from faultloop.plan import config
from faultloop.score.cells import score_cell_dir
from faultloop.score.tables import gather

BASE = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
_RANK_RE = re.compile(r"\[rank(\d+)\]:")


class LastRank(Kind):
    """Blames the rank of the last `[rankN]:` line, with a restart decision of its own option."""

    name = "last_rank"
    input = Input.LOG
    summary = "test: the rank of the last `[rankN]:` line"
    options: ClassVar[Mapping[str, Any]] = {"decision": {"enum": list(RESTART_DECISIONS)}}

    def configure(self, entry: Mapping[str, Any], config: Mapping[str, Any], where: str) -> dict[str, Any]:
        return {"decision": entry.get("decision", RESTART_DECISIONS[0])}

    def run(self, spec: Spec, source: Any) -> Answer:
        assert isinstance(source, LogSource)
        ranks = [int(m.group(1)) for line in source.path.read_text().splitlines() if (m := _RANK_RE.search(line))]
        verdict = {"restart": spec.settings["decision"], "primary_ranks": ranks[-1:], "explanation": "last rank"}
        return log_answer(checked(verdict))


class ShortestBuffer(Kind):
    """Suspects the ranks whose dump ends at the lowest collective: they stopped first."""

    name = "shortest_buffer"
    input = Input.DUMPS
    summary = "test: the ranks whose flight recorder stopped first"

    def run(self, spec: Spec, source: Any) -> Answer:
        assert isinstance(source, DumpsSource)
        last = {}
        for path in dumps.find_dumps(source.fr_path):
            dump = dumps.load_dump(path)
            last[int(Path(path).name.rsplit("_", 1)[1])] = max(e["collective_seq_id"] for e in dump["entries"])
        low = min(last.values())
        suspects = sorted(r for r, seq in last.items() if seq == low and low < max(last.values()))
        verdict = FrVerdict(False, suspects, "rank" if suspects else "none", self.name, dumps_read=sorted(last))
        return Answer(verdict, f"suspects {suspects}\n")


@pytest.fixture
def new_kinds(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one row each new kind adds to the table."""
    monkeypatch.setattr(registry, "TABLE", (*registry.TABLE, LastRank(), ShortestBuffer()))


def site_config(tmp_path: Path, entries: dict[str, Any]) -> dict[str, Any]:
    """The configuration as the workflow resolves and validates it, with a site file's entries."""
    site = tmp_path / "site.yaml"
    site.write_text(yaml.safe_dump({"fr_analyzers": {"torchfrtrace": None}} | entries))
    return config.resolve(dict(BASE, site_file=str(site)), {}, check=True, analyzer_schema=registry.config_schema())


def judge_cell(session: Path, cell: Cell, resolved: dict[str, Any]) -> None:
    """What the logsage, fr_analysis and judge_score rules run for a cell, with the specs the
    workflow plans (JSON params)."""
    cell_dir = session / cell.name
    log_specs, fr_specs, merged = (registry.specs_json(registry.selected(resolved, i)) for i in Input)
    index = cell_dir / layout.LOGSAGE_INDEX
    log = ["run-cell", "--log", str(cell_dir / layout.STRIPPED_LOG), "--index", str(index), "--specs", log_specs]
    assert analyzers_cli.main(log) == 0
    fr_index = str(cell_dir / layout.FR_INDEX)
    manifest = str(cell_dir / layout.MANIFEST)
    assert fr_analyzers_cli.main(["--manifest", manifest, "--index", fr_index, "--specs", fr_specs]) == 0
    assert analyzers_cli.main(["merge", "--cell-dir", str(cell_dir), "--specs", merged]) == 0
    score_cell_dir(cell_dir, cell_dir / layout.SCORE_JSON, gpus_per_node=4, segment_size=32)


def report(session: Path, cell: Cell, names: list[str]) -> str:
    """The score and aggregate_report rules: scores.tsv and the report, as markdown."""
    write_score_tables(gather(session, [cell], names), session / layout.SCORES_TSV, session / layout.SCORE_RECORDS)
    assert report_cli.main(["--records", str(session / layout.SCORE_RECORDS), "--session-dir", str(session)]) == 0
    return (session / layout.REPORT_MD).read_text()


def junit_suites(session: Path) -> list[str]:
    return [s.get("name", "") for s in ET.parse(session / layout.JUNIT_XML).getroot().iter("testsuite")]


def test_a_new_log_kind_is_configured_planned_run_scored_and_reported(new_kinds: None, tmp_path: Path) -> None:
    entry = {"kind": "last_rank", "decision": "STOP - DONT RESTART IMMEDIATE"}
    resolved = site_config(tmp_path, {"analyzers": {"last": entry}})
    # its option is validated against the schema the table derives
    with pytest.raises(ConfigError, match=r"'analyzers\.last': .*MAYBE.* is not valid"):
        site_config(tmp_path, {"analyzers": {"last": {**entry, "decision": "MAYBE"}}})
    with pytest.raises(ConfigError, match="not an option of kind last_rank"):
        registry.spec_from_config(Input.LOG, "last", {**entry, "command": "x {log}"}, resolved)
    cell = Cell("SEGFAULT", 4, 5, 2)
    session = tmp_path / "session"
    (session / cell.name / layout.STRIPPED_LOG).parent.mkdir(parents=True)
    cell_manifest(cell).write(session / cell.name / layout.MANIFEST)
    shutil.copy(TESTS / "data" / "logs" / "torchrun_segfault_8r.log", session / cell.name / layout.STRIPPED_LOG)
    judge_cell(session, cell, resolved)
    names = [s.name for s in registry.selected(resolved, Input.LOG) + registry.selected(resolved, Input.VERDICTS)]
    assert names[-2:] == ["last", "combined"]
    md = report(session, cell, [*names, "fr:faultloop"])
    row = next(r for r in read_score_tsv(session / layout.SCORES_TSV) if r.analyzer == "last")
    # the last rank line is rank 7's, a victim's; its own option's decision is right for a segfault
    assert row.primary_ranks == [7] and row.grade("rank_primary") == Grade.FALSE and row.analyzer_version
    assert row.grade("restart_correct") == Grade.TRUE
    side = md.split("## Analyzers side by side")[1]
    assert re.search(r"^\| last \| `[0-9a-f]+` \|", side, re.M)
    assert "last" in junit_suites(session)


def test_a_new_fr_kind_is_configured_planned_run_scored_and_reported(new_kinds: None, tmp_path: Path) -> None:
    shortest = {"kind": "shortest_buffer", "timeout_s": 60}
    resolved = site_config(tmp_path, {"fr_analyzers": {"torchfrtrace": None, "shortest": shortest}})
    with pytest.raises(ConfigError, match="unknown kind 'shortest_buffer'"):  # an FR kind, not a log kind
        registry.spec_from_config(Input.LOG, "shortest", {"kind": "shortest_buffer"}, resolved)
    cell = Cell("GPU_SLEEP", 5, 5, 2)
    session = tmp_path / "session"
    cell_dir = session / cell.name
    (cell_dir / layout.STRIPPED_LOG).parent.mkdir(parents=True)
    cell_manifest(cell).write(cell_dir / layout.MANIFEST)
    (cell_dir / layout.STRIPPED_LOG).write_text("no error here\n")
    fr_synth.generate(str(cell_dir / "checkpoints"), 8, 16, {5}, set())
    judge_cell(session, cell, resolved)
    names = [s.name for s in registry.selected(resolved, Input.LOG) + registry.selected(resolved, Input.VERDICTS)]
    fr_names = [f"fr:{s.name}" for s in registry.selected(resolved, Input.DUMPS)]
    assert fr_names[-1] == "fr:shortest"
    md = report(session, cell, names + fr_names)
    row = next(r for r in read_score_tsv(session / layout.SCORES_TSV) if r.analyzer == "fr:shortest")
    assert row.fr_suspects == [5] and row.grade("fr_rank_correct") == Grade.RANK
    assert re.search(r"^\| shortest \| `[0-9a-f]+` \|", md.split("## Flight-recorder analyzers side by side")[1], re.M)
    assert "fr:shortest" in junit_suites(session)


def test_the_schema_file_and_the_docs_list_the_table() -> None:
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    derived = registry.config_schema()
    assert {key: schema["properties"][key] for key in derived} == derived
    assert analyzers_cli.kinds_table() in (REPO / "docs" / "analyzers.md").read_text()


def test_a_kind_outside_the_table_is_refused_by_the_derived_schema(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'analyzers\.last': .*last_rank.* is not valid"):
        site_config(tmp_path, {"analyzers": {"last": {"kind": "last_rank"}}})
