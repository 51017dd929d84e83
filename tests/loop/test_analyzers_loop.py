"""Any analyzer in the loop, end to end: a user's script wired through `command`, scored beside
faultloop's analyzer and the baselines on real jobs; broken analyzers recorded per cell; editing
the user's script re-runs only its analysis and scoring.

One small real run (two fast crash cells, 1 node x 2 ranks) is shared by the tests of this module.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
from pathlib import Path
from xml.etree import ElementTree

import pytest

from conftest import BIN, REPO, copy_workflow, planned, snakemake

pytestmark = pytest.mark.slow

CONFIG = ("pool=SIGKILL:1:3:1 WORKLOAD_EXC:0:3:1", "gpus_per_node=2", "session=any")
SESSION = Path("results/fault_injection/any")
CELLS = ("n1_SIGKILL_r1_i3", "n1_WORKLOAD_EXC_r0_i3")
SCRIPT = Path("tools/my_analyzer.py")
SITE = """\
analyzers:
  mine: {kind: command, command: "python3 tools/my_analyzer.py {log}", watch: [tools/my_analyzer.py]}
  crashes:
    kind: command
    command: "python3 -c 'import sys; sys.exit(\\"no rank table in \\" + sys.argv[1])' {log}"
  garbage: {kind: command, command: "echo 'I think it was rank 1' # {log}"}
  hangs: {kind: command, command: "sleep 600 # {log}", timeout_s: 3}
"""
ANALYZERS = ["faultloop", "torchrun_root_cause", "first_error", "mine", "crashes", "garbage", "hangs"]
ALL = [*ANALYZERS, "combined", "fr:faultloop", "fr:torchfrtrace"]  # combined: faultloop's merged verdict


def rows(work: Path) -> list[dict[str, str]]:
    with open(work / SESSION / "scores.tsv") as handle:
        return list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))


def analysis_files(work: Path) -> dict[Path, tuple[int, bytes]]:
    """Every file an analyzer or its scoring wrote (the rules' declared outputs aside)."""
    out = {}
    for cell in CELLS:
        for path in (work / SESSION / cell / "analysis").rglob("*"):
            if path.is_file() and path.parent.name != "analysis" and path.name != "analyzers.json":
                out[path] = (path.stat().st_mtime_ns, path.read_bytes())
    return out


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workflow copy with the docs' example analyzer and three broken ones, after a full run."""
    work = copy_workflow(tmp_path_factory.mktemp("any"))
    (work / SCRIPT).parent.mkdir()
    shutil.copy(REPO / "docs" / "examples" / "my_analyzer.py", work / SCRIPT)
    (work / "config" / "site.yaml").write_text(SITE)
    snakemake(work, "--profile", "profiles/local", "--config", *CONFIG, timeout=1200)
    return work


def test_user_script_is_plain_python() -> None:
    source = (REPO / "docs" / "examples" / "my_analyzer.py").read_text()
    assert "faultloop" not in source.split('"""', 2)[2]  # no import: any executable will do
    assert len([line for line in source.splitlines() if line.strip()]) <= 25


def test_user_analyzer_scored_beside_builtin_and_baselines(work: Path) -> None:
    table = rows(work)
    assert [(r["CELL"], r["ANALYZER"]) for r in table] == [(c, a) for c in CELLS for a in ALL]
    mine = {r["CELL"]: r for r in table if r["ANALYZER"] == "mine"}
    assert all(r["STATUS"] == "scored" and not r["analyzer_error"] for r in mine.values())
    # the example names the first rank with a fatal line: the raiser of WORKLOAD_EXC
    assert mine["n1_WORKLOAD_EXC_r0_i3"]["rank_primary"] == "true"
    assert float(mine["n1_WORKLOAD_EXC_r0_i3"]["analyzer_wall_s"]) > 0
    assert float(mine["n1_WORKLOAD_EXC_r0_i3"]["fault_to_end_s"]) >= 0
    builtin = {r["CELL"]: r for r in table if r["ANALYZER"] == "faultloop"}
    assert all(r["restart_correct"] == "true" and r["rank_primary"] == "true" for r in builtin.values())
    root_cause = {r["CELL"]: r for r in table if r["ANALYZER"] == "torchrun_root_cause"}
    assert root_cause["n1_SIGKILL_r1_i3"]["primary_ranks"] == "1"  # torchrun is right on a crash
    report = (work / SESSION / "experiments_report.md").read_text()
    side = report.split("## Analyzers side by side")[1].split("\n## ")[0]
    for name in ANALYZERS:
        assert f"\n| {name} | `" in side, name
    assert "| faultloop | mine |" in side.split("### Paired counts")[1]
    fr = report.split("## Flight-recorder analyzers side by side")[1].split("\n## ")[0]
    assert "\n| faultloop | `" in fr and "\n| torchfrtrace | `" in fr
    suites = {s.get("name"): s for s in ElementTree.parse(work / SESSION / "junit.xml").iter("testsuite")}
    assert list(suites) == [*ALL, *(f"{name}.life" for name in [*ANALYZERS, "combined"])]
    assert [c.get("name") for c in suites["mine"].iter("testcase")] == list(CELLS)
    assert all(float(c.get("time")) > 0 for c in suites["mine"].iter("testcase"))
    html = (work / SESSION / "report.html").read_text()
    assert html.count('<tr class="analyzer-row" data-analyzer="mine"') == len(CELLS)
    assert html.count('<li class="life-row" data-analyzer="mine"') == len(CELLS)


def test_broken_analyzers_are_recorded_per_cell(work: Path) -> None:
    table = rows(work)
    errors = {(r["CELL"], r["ANALYZER"]): r["analyzer_error"] for r in table if r["analyzer_error"]}
    for cell in CELLS:
        assert errors.pop((cell, "crashes")) == "exited with status 1"
        assert "neither faultloop JSON nor upstream text" in errors.pop((cell, "garbage"))
        assert errors.pop((cell, "hangs")) == "timed out after 3 s"
        run = json.loads((work / SESSION / cell / "analysis" / "crashes" / "run.json").read_text())
        assert "no rank table in" in run["stderr_tail"] and cell not in run["stderr_tail"]  # a neutral path
    assert errors == {}, "every other analyzer gave a verdict on every cell"
    broken = [r for r in table if r["ANALYZER"] in ("crashes", "garbage", "hangs")]
    assert all(r["STATUS"] == "scored" and r["rank_primary"] == "false" for r in broken)  # a miss, not a gap
    failures = (work / SESSION / "experiments_report.md").read_text().split("## Analyzer failures")[1]
    assert failures.split("\n## ")[0].count("\n| ") == 1 + 3 * len(CELLS)  # the header and a row each
    assert "no rank table in" in failures


def test_analyzer_selection_limits_an_invocation(work: Path) -> None:
    listed = subprocess.run(
        [str(BIN / "faultloop"), "analyzers", "list", "analyzers=mine,faultloop"],
        cwd=work,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    log_rows = [line.split("\t")[:2] for line in listed.splitlines() if "\tlog\t" in line]
    assert log_rows == [["mine", "command"], ["faultloop", "faultloop"]]
    dry = snakemake(work, "-n", "--profile", "profiles/local", "--config", *CONFIG, "analyzers=mine")
    counts = planned(dry.stdout + dry.stderr)
    assert counts["logsage"] == 2 and "run_job" not in counts and "fr_analysis" not in counts
    # --forcerun logsage re-runs every analyzer of the forced cells, reusing none
    forced = snakemake(
        work,
        "-n",
        "-p",
        "--profile",
        "profiles/local",
        "--config",
        *CONFIG,
        f"cells={CELLS[0]}",
        "--forcerun",
        "logsage",
    )
    output = forced.stdout + forced.stderr
    assert planned(output)["logsage"] == 1 and "--fresh 1" in output


def test_editing_the_script_reruns_only_its_analysis(work: Path) -> None:
    before = analysis_files(work)
    jobs = {c: json.loads((work / SESSION / c / "job.json").read_text())["job_id"] for c in CELLS}
    script = work / SCRIPT
    script.write_text(script.read_text().replace("reported the first fatal error", "died first"))
    dry = snakemake(work, "-n", "--profile", "profiles/local", "--config", *CONFIG)
    counts = planned(dry.stdout + dry.stderr)
    assert counts["logsage"] == 2 and counts["judge_score"] == 2
    assert "run_job" not in counts and "fr_analysis" not in counts
    snakemake(work, "--profile", "profiles/local", "--config", *CONFIG, timeout=900)
    after = analysis_files(work)
    changed = {p.relative_to(work / SESSION) for p in before if after.get(p) != before[p]}
    assert {p.parts[2] for p in changed} == {"mine"}, changed
    assert {p.name for p in changed} >= {"verdict.json", "run.json", "score.json"}
    for cell in CELLS:
        log = (work / SESSION / "logs" / "logsage" / f"{cell}.log").read_text()
        assert (
            "faultloop (faultloop): reused" in log and "hangs (command): reused" in log and "mine (command): ok" in log
        )
        assert json.loads((work / SESSION / cell / "job.json").read_text())["job_id"] == jobs[cell]
    mine = [r for r in rows(work) if r["ANALYZER"] == "mine"]
    verdict = json.loads((work / SESSION / CELLS[0] / "analysis" / "mine" / "verdict.json").read_text())
    assert "died first" in verdict["explanation"] and len(mine) == len(CELLS)
