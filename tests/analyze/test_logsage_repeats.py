"""Log floods: lines repeating a known template are counted, not analysed again, and the
verdict is the full scan's (tested against the scan with the memo turned off)."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from conftest import REAL_LOGS, TESTS, needs_real_logs
from faultloop.analyze.logsage import ranks, repeats, scan
from faultloop.analyze.logsage.engine import analyze_log
from faultloop.analyze.logsage.facts import Facts
from faultloop.analyze.logsage.rules import RULES


def _full_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(repeats.Repeats, "seen", lambda self, *args: None)


def _both(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[dict, dict]:
    with_memo = analyze_log(path).to_json()
    with monkeypatch.context() as patch:
        _full_scan(patch)
        without = analyze_log(path).to_json()
    return with_memo, without


def flood(
    path: Path, lines: int, *, culprit: int = 3, ranks: int = 8, first_seq: int = 100, op: str = "ALLREDUCE"
) -> Path:
    """Every rank but the culprit timing out again and again, with new numbers each time."""
    out = []
    numel_out = 4096 * ranks if op == "ALLGATHER" else 4096
    for i in range(lines):
        r = [x for x in range(ranks) if x != culprit][i % (ranks - 1)]
        out.append(
            f"{r}: [rank{r}]:[E1130 13:10:{i % 60:02d}.{i:06d} {4100 + r} ProcessGroupNCCL.cpp:632] [Rank {r}] "
            f"Watchdog caught collective operation timeout: WorkNCCL(SeqNum={first_seq + i // (ranks - 1)}, "
            f"OpType={op}, NumelIn=4096, NumelOut={numel_out}, Timeout(ms)=600000) ran for {600000 + i} milliseconds "
            "before timing out."
        )
    out.append(f"srun: error: node-001: task {culprit}: Killed")
    path.write_text("\n".join(out) + "\n")
    return path


def test_a_flood_is_counted_and_keeps_the_full_scans_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = flood(tmp_path / "flood.log", 5000)
    with_memo, without = _both(log, monkeypatch)
    assert with_memo == without
    assert with_memo["primary_ranks"] == [3]
    facts = Facts()
    ranks.census(log, facts)
    scan.scan(log, facts, "auto", 1)
    # every rank's first line read and one more (a shape is learnt when it comes back), the rest counted
    # (but for the few whose timestamp shares a number with the rank, whose template is learnt once more)
    assert 5000 - 7 - 1 - 20 <= facts.repeated_lines <= 5000 - 7 - 1
    assert sorted(e.rank for e in facts.evidence if e.kind == "collective_timeout") == [0, 1, 2, 4, 5, 6, 7]
    full = Facts()
    monkeypatch.setattr(repeats.Repeats, "seen", lambda self, *args: None)
    ranks.census(log, full)
    scan.scan(log, full, "auto", 1)
    assert full.repeated_lines == 0
    # every repeat's SeqNum counted in order: the (capped) collectives are the full scan's
    assert (facts.first_seq, facts.collectives) == (full.first_seq, full.collectives) and facts.first_seq == 100


def test_a_repeated_collective_reads_its_numbers_where_its_first_line_had_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The memo takes a repeat's SeqNum, op and sizes from the places its template's first line
    held them: SeqNums growing a digit (a new template) and a gather stating the group's size
    give the full scan's collectives, ranks per collective and world size."""
    log = flood(tmp_path / "flood.log", 700, first_seq=90, op="ALLGATHER")
    facts, full = Facts(), Facts()
    for into in (facts, full):
        with monkeypatch.context() as patch:
            if into is full:
                _full_scan(patch)
            ranks.census(log, into)
            scan.scan(log, into, "auto", 1)
    assert facts.repeated_lines > 600 and full.repeated_lines == 0
    assert facts.world_size == full.world_size == 8
    assert (facts.first_seq, facts.collectives, facts.collective_ranks) == (
        full.first_seq,
        full.collectives,
        full.collective_ranks,
    )


def test_templates_forgotten_when_full_change_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = flood(tmp_path / "flood.log", 400)
    expected = analyze_log(log).to_json()
    monkeypatch.setattr(repeats, "MAX_TEMPLATES", 2)
    assert analyze_log(log).to_json() == expected


def test_lines_whose_numbers_matter_are_each_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """srun's task lines, torchrun's exit records and pid lines differ only in their numbers and
    each says something of its own: they are never counted away."""
    lines = [f"{r}: training step 1" for r in range(4)]
    lines += [f"srun: error: node-00{r}: task {r}: Exited with exit code {r + 1}" for r in range(3)]
    lines += [
        f"[2026-11-30 12:00:0{r},000] torch.distributed.elastic.multiprocessing.api: [WARNING] Sending "
        f"process {4100 + r} closing signal SIGTERM"
        for r in range(3)
    ]
    log = tmp_path / "numbers.log"
    log.write_text("\n".join(lines) + "\n")
    with_memo, without = _both(log, monkeypatch)
    assert with_memo == without
    assert "srun_task" not in repeats.REPEATABLE and "launcher_close" not in repeats.REPEATABLE
    assert "nccl_watchdog_timeout" in repeats.REPEATABLE


def test_the_memo_reads_each_rows_named_groups_as_the_regex_engine_does() -> None:
    """REPEATABLE reads a row's named groups from its pattern's text (compiling the table costs a
    start a sixth of its time); the compiled regexes must name the same."""
    for rule in RULES:
        assert set(repeats._GROUP_NAME_RE.findall(rule.pattern)) == set(re.compile(rule.pattern).groupindex), rule.name


def test_the_cpu_corpus_keeps_its_verdicts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for gz in sorted((TESTS / "data" / "logs" / "cpu_gloo").glob("*.gz"))[:40]:
        log = tmp_path / gz.stem
        log.write_bytes(gzip.decompress(gz.read_bytes()))
        with_memo, without = _both(log, monkeypatch)
        assert with_memo == without, gz.name


@needs_real_logs
def test_the_real_corpora_keep_their_verdicts(monkeypatch: pytest.MonkeyPatch) -> None:
    logs = sorted(REAL_LOGS.glob("*.log")) + sorted((REAL_LOGS.parent / "real_logs_ho").glob("*.log"))
    assert logs
    for log in logs:
        with_memo, without = _both(log, monkeypatch)
        assert with_memo == without, log.name
