"""eval-logs: scoring an analyzer on labelled logs; logsage on the real-log corpus in ../shared."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from conftest import REAL_LOG_CORPUS, REAL_LOGS, REAL_LOGS_B, REAL_LOGS_C, REAL_LOGS_HO, needs_real_logs
from faultloop.analyze import registry as analyzers
from faultloop.cli import eval_logs as eval_logs_cli
from faultloop.contracts import LogVerdict
from faultloop.faults import ERRORS_NOT_FOUND, RESTART, STOP
from faultloop.score import corpus as evallogs

ROOT = Path(__file__).resolve().parents[2]
HEADER = "case\tsource\troot_cause_rank\tfault_class\texpected_restart\tjustification\n"


def labelled_dir(tmp_path: Path, rows: list[tuple[str, str, str, str, str]]) -> Path:
    """A folder of tiny logs (text given per case) with one labels file."""
    lines = [HEADER]
    for case, text, rank, fault_class, restart in rows:
        (tmp_path / f"{case}.log").write_text(text)
        lines.append(f"{case}\thttps://example.invalid/{case}\t{rank}\t{fault_class}\t{restart}\twhy\n")
    (tmp_path / "labels_x.tsv").write_text("".join(lines))
    return tmp_path


def verdict(
    fault_category: str, restart: str, primary_ranks: list[int] | None = None, confidence: str = "low"
) -> LogVerdict:
    return LogVerdict(restart, primary_ranks or [], [], fault_category, None, "", "", [], False, confidence)


def fixed_analyzer(verdicts: dict[str, Mapping[str, Any]]) -> evallogs.Analyzer:
    """An analyzer that answers per log name: the evaluation must work with any analyzer."""
    return lambda path: verdict(**verdicts[path.stem])


def test_scores_any_analyzer_and_lists_misses(tmp_path: Path) -> None:
    directory = labelled_dir(
        tmp_path,
        [
            ("a", "0: [rank0]: x\n", "1", "crash_signal", "STOP"),
            ("b", "srun: error: n: task 2: Killed\n", "unknown", "hang", "RESTART"),
            ("c", "plain text\n", "unknown", "oom", "unknown"),
        ],
    )
    verdicts = {
        "a": {"fault_category": "crash", "restart": STOP, "primary_ranks": [1], "confidence": "high"},
        "b": {"fault_category": "hang", "restart": STOP, "primary_ranks": [2], "confidence": "high"},
        "c": {"fault_category": "crash", "restart": STOP, "primary_ranks": [], "confidence": "low"},
    }
    result = evallogs.evaluate(evallogs.load_cases(directory), fixed_analyzer(verdicts))
    overall = result.overall
    assert (overall.category.right, overall.category.total) == (2, 3)
    assert (overall.restart.right, overall.restart.total) == (1, 2)  # c's restart is unknown: not judged
    assert (overall.culprit.right, overall.culprit.total) == (1, 1)  # only a has a known culprit
    assert (overall.unknown_high.right, overall.unknown_high.total) == (1, 2)  # b names a rank with high confidence
    misses = {o.case.name: o.problems() for o in result.misses()}
    assert set(misses) == {"b", "c"}
    assert any("restart: expected RESTART, got STOP" in p for p in misses["b"])
    assert any("high confidence" in p for p in misses["b"])
    assert misses["c"] == ["category: expected oom, got crash"]
    failures = result.failures(evallogs.Thresholds())
    assert any(f.startswith("category") for f in failures) and any(f.startswith("high-confidence") for f in failures)
    summary = result.to_json(evallogs.Thresholds())
    assert summary["by_launcher"]["slurm"]["cases"] == 2 and summary["by_launcher"]["plain"]["cases"] == 1
    assert summary["by_category"]["hang"]["restart"] == {"right": 0, "total": 1, "rate": 0.0}


def test_an_analyzer_that_fails_on_one_log_loses_that_case_only(tmp_path: Path) -> None:
    directory = labelled_dir(
        tmp_path, [("ok", "x\n", "unknown", "none", "unknown"), ("bad", "y\n", "unknown", "none", "unknown")]
    )

    def analyzer(path: Path) -> LogVerdict:
        if path.stem == "bad":
            raise ValueError("cannot read")
        return verdict("none", RESTART, [])

    result = evallogs.evaluate(evallogs.load_cases(directory), analyzer)
    assert result.overall.category.right == 1
    (miss,) = result.misses()
    assert miss.case.name == "bad" and "analyzer error: ValueError: cannot read" in miss.problems()


@pytest.mark.parametrize(
    "row, message",
    [
        (("a", None, "1", "crash_signal", "STOP"), "no log file"),
        (("a", "x\n", "1", "segfaultish", "STOP"), "field fault_class: unknown 'segfaultish'"),
        (("a", "x\n", "one", "hang", "STOP"), "field root_cause_rank: 'one'"),
        (("a", "x\n", "1", "hang", "MAYBE"), "field expected_restart: 'MAYBE'"),
    ],
)
def test_bad_labels_name_the_file_row_and_field(tmp_path: Path, row: tuple[Any, ...], message: str) -> None:
    case, text, rank, fault_class, restart = row
    (tmp_path / "labels_x.tsv").write_text(HEADER + f"{case}\tsrc\t{rank}\t{fault_class}\t{restart}\twhy\n")
    if text is not None:
        (tmp_path / f"{case}.log").write_text(text)
    with pytest.raises(evallogs.EvalError, match=r"labels_x\.tsv, row 2"):
        evallogs.load_cases(tmp_path)
    with pytest.raises(evallogs.EvalError, match=message):
        evallogs.load_cases(tmp_path)


def test_a_folder_without_labels_is_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert eval_logs_cli.main([str(tmp_path)]) == 2
    assert "no labels_*.tsv" in capsys.readouterr().err


@pytest.mark.parametrize(
    "text, style",
    [
        ("3: [rank3]: Traceback\n", "slurm"),
        ("slurmstepd: error: *** STEP 1.0 ON n CANCELLED AT 2026 ***\n", "slurm"),
        ("10.0.0.2: Traceback (most recent call last):\n", "deepspeed"),
        (
            "[launch.py:434:sigkill_handler] ['python', '-u', 't.py', '--local_rank=1'] exits with return code = -9\n",
            "deepspeed",
        ),
        ('  File "/env/lib/python3.11/site-packages/accelerate/commands/launch.py", line 9, in main\n', "accelerate"),
        ("mpirun noticed that process rank 3 with PID 42 on node n1 exited on signal 9 (Killed).\n", "mpirun/horovod"),
        ("$ python -m torch.distributed.launch --nproc_per_node=2 t.py\n", "torch.distributed.launch"),
        ("E0101 api.py:869] failed (exitcode: -9) local_rank: 3 (pid: 7) of binary: python\n", "torchrun/elastic"),
        ("[default2]:loss 0.5\n", "torchrun/elastic"),
        ("[rank1]: ValueError: x\n", "torch [rankN] prefix"),
        ("epoch 1 loss 0.5\n", "plain"),
    ],
)
def test_launcher_style_from_prefixes_and_wording(tmp_path: Path, text: str, style: str) -> None:
    log = tmp_path / "x.log"
    log.write_text(text)
    assert evallogs.launcher_style(log) == style


# -- logsage on the real-log corpus ------------------------------------------------------------


@needs_real_logs
def test_logsage_meets_the_thresholds_on_real_logs() -> None:
    """The acceptance bar of issue 11, via the command users run (also registered in the CLI)."""
    proc = subprocess.run(
        [sys.executable, "-m", "faultloop.cli", "eval-logs", str(REAL_LOGS), "--format", "json", "--check"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    summary = json.loads(proc.stdout)
    overall, bar = summary["overall"], evallogs.Thresholds()
    report = json.dumps({k: summary[k] for k in ("overall", "misses")}, indent=1)
    assert summary["cases"] >= 60, report
    assert overall["category"]["rate"] >= bar.category, report
    assert overall["restart"]["rate"] >= bar.restart, report
    assert overall["culprit"]["rate"] >= bar.culprit, report
    assert overall["unknown_culprit_high_confidence"]["rate"] <= bar.unknown_high, report
    assert proc.returncode == 0 and summary["below_thresholds"] == [], report


@needs_real_logs
def test_text_report_has_the_tables_and_every_miss(capsys: pytest.CaptureFixture[str]) -> None:
    assert eval_logs_cli.main([str(REAL_LOGS)]) == 0
    text = capsys.readouterr().out
    assert "by labelled category" in text and "by launcher style" in text and "all thresholds met" in text
    builtin = analyzers.resolve("faultloop", {})
    evaluation = evallogs.evaluate(evallogs.load_cases(REAL_LOGS), builtin.analyze)
    for miss in evaluation.misses():
        assert f"  {miss.case.name:<8} [{miss.style}] " in text


@needs_real_logs
def test_any_configured_analyzer_is_graded_and_the_baseline_is_the_floor(tmp_path: Path) -> None:
    """`--analyzer NAME` grades a baseline, and a user's command analyzer from the site file, on
    the same corpus: logsage must beat torchrun's own root cause on every measure."""

    def run(*args: str, cwd: Path = ROOT) -> dict:
        proc = subprocess.run(
            [sys.executable, "-m", "faultloop.cli", "eval-logs", str(REAL_LOGS), "--format", "json", *args],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=cwd,
        )
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)["overall"]

    builtin, naive = run(), run("--analyzer", "torchrun_root_cause")
    for measure in ("category", "restart", "culprit"):
        assert naive[measure]["total"] == builtin[measure]["total"]
        assert naive[measure]["right"] < builtin[measure]["right"], (measure, naive, builtin)
    # a user's script wired through `command` in the site file: it says "rank 0, hang, restart" for every log
    script = tmp_path / "always_rank0.py"
    script.write_text(
        'import json\nprint(json.dumps({"restart": "RESTART IMMEDIATE", "primary_ranks": [0], '
        '"secondary_ranks": [], "fault_category": "hang", "fault_type": None}))\n'
    )
    workdir = tmp_path / "wf"
    (workdir / "config").mkdir(parents=True)
    (workdir / "config" / "config.yaml").write_text((ROOT / "config" / "config.yaml").read_text())
    (workdir / "config" / "site.yaml").write_text(
        f"analyzers:\n  mine: {{kind: command, command: '{sys.executable} {script} {{log}}'}}\n"
    )
    mine = run("--analyzer", "mine", cwd=workdir)
    hangs = sum(1 for case in evallogs.load_cases(REAL_LOGS) if "hang" in case.categories)
    assert mine["category"]["right"] == hangs


# Failure logs logsage still answers ERRORS NOT FOUND on, and why (each a template it cannot yet
# prefilter or read); the test fails once one is read, so that it leaves this list
NOT_FOUND_YET: dict[str, str] = {}


@needs_real_logs
def test_no_log_labelled_with_a_failure_is_errors_not_found() -> None:
    """A log whose only lines are plain failures is evidence, not `ERRORS NOT FOUND` (issue 20),
    in every corpus folder; the ones listed above are known and fail this test once they are read."""
    analyze = analyzers.resolve("faultloop", {}).analyze
    cases = evallogs.load_cases(*REAL_LOG_CORPUS)
    found_nothing = {
        case.name for case in cases if "none" not in case.categories and analyze(case.log).restart == ERRORS_NOT_FOUND
    }
    assert found_nothing == set(NOT_FOUND_YET) & {c.name for c in cases}


# The measured floors on the corpus, overall and per folder (real_logs and its gh/ part, real_logs_ho,
# real_logs_b, real_logs_c): what this version reaches, rounded down to a point, held so that a change cannot
# lose it unnoticed (the targets and where they stand: benchmarks/README.md). RESTART and
# STOP are the recalls of the two restart labels. (r4_01's RESTART, which its thread reports, went with
# its culprit: rank 0's `Saving latest checkpoint` is one-rank work, whose hang the convention reads STOP.)
FLOORS: dict[str, dict[str, float]] = {
    "overall": {"category": 0.94, "restart": 0.86, "culprit": 0.92, "RESTART": 0.76, "STOP": 0.90},
    "real_logs": {"category": 0.92, "restart": 0.94, "culprit": 0.94, "RESTART": 1.00, "STOP": 0.93},
    "real_logs/gh": {"category": 0.96, "restart": 0.94, "culprit": 1.00, "RESTART": 1.00, "STOP": 0.93},
    "real_logs_ho": {"category": 0.94, "restart": 0.91, "culprit": 0.94, "RESTART": 0.81, "STOP": 0.93},
    "real_logs_b": {"category": 0.93, "restart": 0.80, "culprit": 0.95, "RESTART": 0.75, "STOP": 0.84},
    "real_logs_c": {"category": 0.95, "restart": 0.82, "culprit": 0.85, "RESTART": 0.68, "STOP": 0.90},
}
CORPUS_CASES = 379


@needs_real_logs
@pytest.mark.skipif(len(REAL_LOG_CORPUS) < 4, reason=f"{REAL_LOGS_HO}, {REAL_LOGS_B} or {REAL_LOGS_C} not found")
def test_logsage_holds_its_floors_on_every_corpus_folder() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "faultloop.cli", "eval-logs", *map(str, REAL_LOG_CORPUS), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    summary = json.loads(proc.stdout)
    report = json.dumps({k: summary[k] for k in ("overall", "by_folder", "misses")}, indent=1)
    assert summary["cases"] == CORPUS_CASES, report
    assert set(summary["by_folder"]) == set(FLOORS) - {"overall"}, report
    for scope, floors in FLOORS.items():
        scores = summary["overall"] if scope == "overall" else summary["by_folder"][scope]
        for measure, floor in floors.items():
            tally = (
                scores[measure] if measure in ("category", "restart", "culprit") else scores["restart_recall"][measure]
            )
            assert tally["rate"] >= floor, (scope, measure, tally, report)
    overall = summary["overall"]
    assert overall["unknown_culprit_high_confidence"]["named_high"] == 0, report
    assert overall["errors_not_found_on_failure_logs"]["not_found"] <= len(NOT_FOUND_YET), report


@needs_real_logs
def test_short_excerpts_meet_their_own_floor() -> None:
    """The gh/ collection (one to ten lines, what people paste most) is scored on its own too."""
    evaluation = evallogs.evaluate(evallogs.load_cases(REAL_LOGS), analyzers.resolve("faultloop", {}).analyze)
    gh = evaluation.by_folder()["gh"]
    assert gh.cases == 31
    for tally in (gh.category, gh.restart, gh.culprit):
        assert tally.rate is not None and tally.rate >= evallogs.Thresholds().per_folder, gh.to_json()


def test_alternatives_and_subfolders(tmp_path: Path) -> None:
    """`a|b` accepts either reading; a subfolder's labels are read beside the folder's own."""
    labelled_dir(tmp_path, [("a", "x\n", "unknown", "oom|crash_signal", "unknown")])
    sub = tmp_path / "gh"
    sub.mkdir()
    labelled_dir(sub, [("b", "y\n", "unknown", "hang", "RESTART")])
    cases = evallogs.load_cases(tmp_path)
    assert [(c.name, c.folder, c.categories) for c in cases] == [("a", ".", ("oom", "crash")), ("b", "gh", ("hang",))]
    verdicts = {"a": {"fault_category": "crash", "restart": STOP}, "b": {"fault_category": "hang", "restart": STOP}}
    result = evallogs.evaluate(cases, fixed_analyzer(verdicts))
    assert result.overall.category.right == 2
    assert result.failures(evallogs.Thresholds()) == [
        "restart right 0/1 0% < 90%",
        "gh: restart right 0/1 0% < 80%",
    ]
    with pytest.raises(evallogs.EvalError, match="labelled twice: b"):
        evallogs.load_cases(tmp_path, sub)
