"""NVRx's analyzers run for real, from a checkout named by NVRX_SRC (its interpreter: NVRX_PYTHON).
Skipped without one (CI has none): bring NVRx's public repository onto the machine, extract its
src/ outside the project, and export NVRX_SRC (docs/coming-from-nvrx.md)."""

from __future__ import annotations

import csv
import json
import os
import pickle
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import NVRX_FR, REPO, SHARED, copy_workflow, needs_nvrx_dumps, snakemake
from faultloop.analyze import nvrx, registry
from faultloop.analyze.analyzer import DumpsSource, Input, LogSource
from faultloop.analyze.kinds.nvrx_restart_agent import ATTEMPT_RECORDS
from faultloop.analyze.nvrx import outputs
from faultloop.analyze.running import Outcome
from faultloop.contracts import FrVerdict, LogVerdict
from faultloop.core import layout
from faultloop.faults import RESTART_DECISIONS
from faultloop.report import browser
from openai_server import OpenAIServer, Reply, openai_server
from planted_secrets import assert_nothing_leaked, planted_lines

SRC = os.environ.get(nvrx.SRC_ENV, "")
pytestmark = pytest.mark.skipif(
    not (SRC and (Path(SRC) / nvrx.PACKAGE / "attribution").is_dir()),
    reason="no NVRx checkout: set NVRX_SRC to a checkout's src/ (and NVRX_PYTHON to its interpreter) to run these",
)
BASE = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
CELLS = SHARED / "fixtures" / "nvrx_outputs" / "restart_agent" / "cpu_cells"


def test_restart_agent_live_matches_its_recorded_outputs(tmp_path: Path) -> None:
    analyzer = registry.resolve(nvrx.RESTART_AGENT, BASE)
    for log in sorted(CELLS.glob("*.log")):
        live = analyzer.analyze(log, staging=tmp_path)
        recorded = outputs.restart_agent_verdict(json.loads(log.with_suffix(".json").read_text()))
        assert live == recorded, log.name


def fr_attempt(dumps: Path, world_size: int) -> Outcome:
    spec = registry.spec_from_config(Input.DUMPS, nvrx.FR, None, BASE)
    return registry.attempt(spec, DumpsSource(str(dumps), world_size, 4, 32))


@needs_nvrx_dumps
@pytest.mark.parametrize("case", ["gpu_error_2nd", "lock_gil_1st"])
def test_nvrx_fr_names_ranks_9_and_14(case: str) -> None:
    outcome = fr_attempt(NVRX_FR / case, 16)
    assert isinstance(outcome.verdict, FrVerdict), outcome.error
    assert outcome.verdict.suspect_ranks == [9, 14] and outcome.verdict.scope == "segment"


class _Exploit:
    def __init__(self, sentinel: Path) -> None:
        self.sentinel = sentinel

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return os.system, (f"touch {self.sentinel}",)


@needs_nvrx_dumps
def test_nvrx_fr_never_unpickles_an_original(tmp_path: Path) -> None:
    dumps = tmp_path / "checkpoints"
    shutil.copytree(NVRX_FR / "gpu_error_2nd", dumps)
    sentinel = tmp_path / "pwned"
    (dumps / "_dump_3").write_bytes(pickle.dumps({"version": "2.9", "entries": [_Exploit(sentinel)]}))
    outcome = fr_attempt(dumps, 16)
    assert not sentinel.exists()
    # the refused dump is left out, so fr_attribution finds rank 3 missing too
    assert isinstance(outcome.verdict, FrVerdict) and outcome.verdict.suspect_ranks == [3, 9, 14]
    assert [s.file.rsplit("/", 1)[1] for s in outcome.verdict.skipped_files] == ["_dump_3"]


# ---- the LLM paths, against the loopback server ------------------------------------------------------


def endpoint(server: OpenAIServer, tmp_path: Path) -> dict[str, Any]:
    key = tmp_path / "key"
    key.write_text("test-key\n")
    return {"base_url": server.base_url, "model": "loopback-model", "api_key_file": str(key), "timeout_s": 20}


def test_restart_agent_l1_asks_the_endpoint(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.script(*[Reply("{}")] * 8)
    config = {**BASE, "analyzers": {"ra": {"kind": nvrx.RESTART_AGENT, "llm": endpoint(openai_server, tmp_path)}}}
    analyzer = registry.resolve("ra", config)
    outcome = analyzer.attempt(CELLS / "n2_SIGKILL_r1_i5.log", staging=tmp_path)
    assert openai_server.requests, "L1 sent no request"
    assert all(r.body.get("model") == "loopback-model" for r in openai_server.requests)
    assert all(r.headers.get("Authorization") == "Bearer test-key" for r in openai_server.requests)
    assert isinstance(outcome.verdict, LogVerdict), outcome.stderr_tail
    assert outcome.verdict.mode == f"{nvrx.RESTART_AGENT}+l1" and outcome.verdict.restart
    # "{}" is no L1 evidence: the agent says so and answers deterministically
    assert outcome.verdict.extra["l1_status"] == "failed"


def test_restart_agent_l1_is_sent_no_planted_secret(openai_server: OpenAIServer, tmp_path: Path) -> None:
    """With an endpoint the agent reads a redacted copy: secrets printed among the failure's lines
    (each shape of tests/planted_secrets.py, prefixed as the job's own lines) reach L1 as markers."""
    openai_server.script(*[Reply("{}")] * 8)
    lines = (CELLS / "n2_SIGKILL_r1_i5.log").read_text().splitlines()
    log = tmp_path / "cell" / layout.STRIPPED_LOG
    log.parent.mkdir(parents=True)
    log.write_text(
        "\n".join([*lines[:27], *(f"0: [rank0]: {line}" for line in planted_lines("test-key")), *lines[27:]])
    )
    config = {**BASE, "analyzers": {"ra": {"kind": nvrx.RESTART_AGENT, "llm": endpoint(openai_server, tmp_path)}}}
    (record,) = registry.run_cell(Input.LOG, [registry.resolve("ra", config).spec], LogSource(log), tmp_path / "cell")
    assert record.status == "ok", record.error
    assert_nothing_leaked(openai_server, "test-key")
    assert any(b"[REDACTED:" in request.raw for request in openai_server.requests)  # the lines were sent
    assert record.redactions["endpoint_key"] == 1 and record.redactions["private_key"] == 1


def test_nvrx_logsage_asks_the_endpoint(openai_server: OpenAIServer, tmp_path: Path) -> None:
    answer = "RESTART IMMEDIATE\nA peer died.\nAttribution: Primary issues: [1], Secondary issues: [0]\nnone\n"
    openai_server.script(*[Reply(answer)] * 20)
    config = {**BASE, "analyzers": {"ls": {"kind": nvrx.LOGSAGE, "llm": endpoint(openai_server, tmp_path)}}}
    outcome = registry.resolve("ls", config).attempt(CELLS / "n2_SIGKILL_r1_i5.log", staging=tmp_path)
    assert openai_server.requests, "nvrx_logsage sent no request"
    assert isinstance(outcome.verdict, LogVerdict), outcome.stderr_tail
    assert outcome.verdict.mode == nvrx.LOGSAGE and outcome.verdict.restart in (*RESTART_DECISIONS, "LLM FAILURE")


@needs_nvrx_dumps
def test_nvrx_combined_merges_through_the_endpoint(openai_server: OpenAIServer, tmp_path: Path) -> None:
    cell = tmp_path / "n4_GPU_ERROR_r9_i5"
    log = cell / layout.STRIPPED_LOG
    log.parent.mkdir(parents=True)
    shutil.copy(CELLS / "n2_SIGKILL_r1_i5.log", log)
    shutil.copytree(NVRX_FR / "gpu_error_2nd", cell / "checkpoints")
    merged = "- List of ranks to be excluded: 9,14\n- Proposed Solution with Ranks: STOP - DONT RESTART IMMEDIATE"
    openai_server.script(*[Reply(merged)] * 20)
    config = {**BASE, "analyzers": {"cb": {"kind": nvrx.COMBINED, "llm": endpoint(openai_server, tmp_path)}}}
    outcome = registry.resolve("cb", config).attempt(log, staging=tmp_path / "staging")
    assert openai_server.requests, "combined_log_fr sent no request"
    assert isinstance(outcome.verdict, LogVerdict), outcome.stderr_tail
    assert outcome.verdict.primary_ranks == [9, 14] and outcome.verdict.mode == nvrx.COMBINED
    assert outcome.verdict.restart == "STOP - DONT RESTART IMMEDIATE"


# ---- the quick pool, NVRx's analyzers beside the defaults -------------------------------------------

SESSION = Path("results/fault_injection/nvrx_live")
LOG_ANALYZERS = ["faultloop", "torchrun_root_cause", "first_error", nvrx.RESTART_AGENT, "combined"]
FR_ANALYZERS = ["faultloop", "torchfrtrace", nvrx.FR]


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = copy_workflow(tmp_path_factory.mktemp("nvrx"))
    snakemake(
        work,
        "--profile",
        "profiles/local",
        "--config",
        "pool_file=config/pools/quick.tsv",
        "session=nvrx_live",
        f"analyzers={','.join(LOG_ANALYZERS[:-1])}",
        f"fr_analyzers={','.join(FR_ANALYZERS)}",
        timeout=1500,
    )
    return work / SESSION


@pytest.mark.slow
def test_quick_pool_scores_nvrx_beside_the_defaults(pool: Path) -> None:
    with open(pool / "scores.tsv") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    names = list(dict.fromkeys(r["ANALYZER"] for r in rows))
    assert names == [*LOG_ANALYZERS, *(f"fr:{n}" for n in FR_ANALYZERS)]
    for row in rows:  # every cell scored, or its analyzer's failure recorded
        assert row["STATUS"] == "scored", row
    nvrx_fr = [r for r in rows if r["ANALYZER"] == f"fr:{nvrx.FR}"]
    assert all("KeyError" in r["analyzer_stderr_end"] for r in nvrx_fr if r["analyzer_error"])  # gloo's dumps
    ra = [r for r in rows if r["ANALYZER"] == nvrx.RESTART_AGENT]
    assert all(not r["analyzer_error"] for r in ra)
    report = (pool / "experiments_report.md").read_text()
    assert "## Restart decisions by policy" in report and "retry_budget.v1" in report
    assert "## The combined verdict against its inputs" in report


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed (make test installs it)")
def test_drilldown_shows_nvrx_verdicts_in_chromium(pool: Path) -> None:
    dom = browser.rendered_dom(pool / "report.html")

    class Rows(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.cells: dict[str, list[str]] = {}
            self.cell = ""

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            a = dict(attrs)
            if tag == "details" and a.get("class") == "cell":
                self.cell = (a.get("id") or "").removeprefix("cell-")
                self.cells[self.cell] = []
            elif tag == "tr" and a.get("class") == "analyzer-row" and self.cell:
                self.cells[self.cell].append(a.get("data-analyzer") or "")

    page = Rows()
    page.feed(dom)
    assert len(page.cells) == 7
    for cell, shown in page.cells.items():
        assert shown == [*LOG_ANALYZERS, *(f"fr:{n}" for n in FR_ANALYZERS)], cell
    drill = dom.split('id="cell-n2_SIGKILL_r1_i5"')[1].split("</details>")[0]
    assert "analysis/nvrx_restart_agent/verdict.json" in drill and "fr_attribution could not read" in drill


def test_restart_agent_keeps_its_own_history_over_a_jobs_attempts(tmp_path: Path) -> None:
    """Each attempt runs with the job's id, the attempt as its cycle and the records the attempt
    before kept; the agent's retry ledger then stops the same failure without progress on cycle 4
    (its general same-root ceiling of 3 retries)."""
    spec = registry.spec_from_config(Input.LOG, nvrx.RESTART_AGENT, None, BASE)
    log = CELLS / "n2_SIGKILL_r1_i5.log"
    logs: list[Path] = []
    decisions = []
    for attempt in range(1, 5):
        run = tmp_path / "n2_X" if attempt == 1 else tmp_path / "n2_X" / f"attempt_{attempt}"
        stripped = run / layout.STRIPPED_LOG
        stripped.parent.mkdir(parents=True)
        shutil.copyfile(log, stripped)
        source = LogSource(stripped, tmp_path / ".staging", tuple(logs), "local-3a19c5835f7f", attempt)
        (record,) = registry.run_cell(Input.LOG, [spec], source, run)
        assert (record.status, record.analyzer) == ("ok", spec.name), record.error
        folder = run / layout.analyzer_dir(spec.name)
        records = json.loads((folder / ATTEMPT_RECORDS).read_text())
        assert [(r["job_id"], r["cycle_id"]) for r in records] == [
            ("local-3a19c5835f7f", k) for k in range(1, attempt + 1)
        ]
        verdict = LogVerdict.read(folder / layout.VERDICT_JSON)
        decisions.append((verdict.restart, verdict.extra["policy"]["decision_basis"]))
        logs.append(stripped)
    assert decisions[0] == ("RESTART IMMEDIATE", "general_retry_available")
    assert decisions[-1] == ("STOP - DONT RESTART IMMEDIATE", "retry_budget_exhausted")
    # reused while neither its code nor the attempts it read changed; a changed earlier log re-runs it
    (again,) = registry.run_cell(Input.LOG, [spec], source, run)
    assert again.reused
    logs[0].write_text(logs[0].read_text() + "one more line\n")
    (changed,) = registry.run_cell(Input.LOG, [spec], source, run)
    assert not changed.reused
