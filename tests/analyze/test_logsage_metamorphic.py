"""The same log pasted another way keeps its verdict wherever the remaining lines still carry it
(tests/paste_styles.py: timestamps removed, another launcher's rank prefixes, the last 40 lines,
no traceback header, lines wrapped at 200 columns, ranks' lines interleaved differently), and
behind every prefix family of logsage's line grammar (framing.py) and two-layer combinations of
them: every case of both corpus folders and of the CPU corpus."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import pytest

from conftest import REAL_LOG_FOLDERS, TESTS, needs_real_logs
from faultloop.score import corpus as evallogs
from paste_styles import BROKEN, PREFIX_FAMILIES, TRANSFORMATIONS, TWO_LAYERS, survival, unchanged_behind

CPU_CORPUS = TESTS / "data" / "logs"

# (case, transformation) -> why the changed log no longer carries the verdict
NOT_CARRIED: dict[tuple[str, str], str] = {
    ("gh_27", "wrapped at 200"): "the gather's NumelOut, which states the world size, wraps onto the next line",
    ("tr_05", "interleaved"): "rank 3's cut-off traceback now starts before rank 2's first symptom: the order that "
    "decided is reversed",
    ("gh_28", "no timestamps"): "two agents' Root Cause sections name ranks 0 and 4; only their records' times, "
    "removed here, say which came first",
    ("case_18", "wrapped at 200"): "the launcher's command line naming --local_rank wraps away from its death line",
    (
        "r3_23",
        "wrapped at 200",
    ): "a traceback flattened onto one line wraps into pieces that read as a traceback cut off inside a collective",
    ("job_036.log.gz", "other prefixes"): "node labels as pdsh host names: torchrun's local_rank reports no longer "
    "say which node, so its record of local rank 1 names no global rank",
    ("job_051.log.gz", "other prefixes"): "node labels as pdsh host names: torchrun's local_rank reports no longer "
    "say which node, so its record of local rank 1 names no global rank",
}


def _cpu_cases() -> list[tuple[str, list[str]]]:
    with open(CPU_CORPUS / "cpu_gloo_truth.tsv") as f:
        files = [row["file"] for row in csv.DictReader(f, delimiter="\t")]
    return [
        (name, gzip.decompress((CPU_CORPUS / "cpu_gloo" / name).read_bytes()).decode().splitlines()) for name in files
    ]


def _real_cases() -> list[tuple[str, list[str]]]:
    return [
        (case.name, case.log.read_text(errors="replace").splitlines())
        for case in evallogs.load_cases(*REAL_LOG_FOLDERS)
    ]


def _check(cases: list[tuple[str, list[str]]]) -> None:
    broken = {
        (name, transformation): survived
        for name, lines in cases
        for transformation, survived in survival(lines).items()
    }
    unexplained = sorted(k for k, v in broken.items() if v == BROKEN and k not in NOT_CARRIED)
    assert not unexplained, unexplained
    names = {name for name, _ in cases}
    stale = sorted(k for k in NOT_CARRIED if k[0] in names and broken.get(k) != BROKEN)
    assert not stale, f"these now keep their verdict: drop them from NOT_CARRIED: {stale}"


def test_the_cpu_corpus_keeps_its_verdicts_however_it_is_pasted() -> None:
    _check(_cpu_cases())


@needs_real_logs
def test_real_logs_keep_their_verdicts_however_they_are_pasted() -> None:
    _check(_real_cases())


@pytest.mark.parametrize("name", TRANSFORMATIONS)
def test_every_transformation_changes_some_log(name: str) -> None:
    lines = ["0: [2026-12-01 10:00:00.000] [rank0]:Traceback (most recent call last):", "1: " + "x" * 450]
    lines += [f"{i % 2}: step {i}" for i in range(60)]
    assert TRANSFORMATIONS[name](lines) != lines


FAMILIES = {**PREFIX_FAMILIES, **TWO_LAYERS}


@needs_real_logs
def test_real_logs_keep_their_verdicts_behind_every_prefix_family() -> None:
    changed = {name: broken for name, lines in _real_cases() if (broken := unchanged_behind(lines, FAMILIES))}
    assert not changed, changed


def test_the_cpu_corpus_keeps_its_verdicts_behind_a_prefix_family_each() -> None:
    """Each CPU-corpus log behind one family (they take turns; the slow test below tries all)."""
    names = list(FAMILIES)
    changed = {
        name: broken
        for i, (name, lines) in enumerate(_cpu_cases())
        if (broken := unchanged_behind(lines, {names[i % len(names)]: FAMILIES[names[i % len(names)]]}))
    }
    assert not changed, changed


@pytest.mark.slow
def test_the_cpu_corpus_keeps_its_verdicts_behind_every_prefix_family() -> None:
    changed = {name: broken for name, lines in _cpu_cases() if (broken := unchanged_behind(lines, FAMILIES))}
    assert not changed, changed


@pytest.mark.parametrize("name", FAMILIES)
def test_every_prefix_family_changes_a_log(name: str) -> None:
    lines = ["[rank1]:Traceback (most recent call last):", '  File "train.py", line 3, in <module>', "RuntimeError: x"]
    assert FAMILIES[name](lines) != lines
