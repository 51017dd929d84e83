"""Scoring a cell (rule judge_score): every analyzer its indexes list, graded from the typed
records the analysis rules wrote, each score reused while its inputs are unchanged, and each
carrying what the report shows of the cell (cited and missed lines, the files to open)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from faultloop.analyze.llm import LLMSettings
from faultloop.analyze.running import file_digest
from faultloop.contracts import (
    FR_PREFIX,
    OK,
    FileLink,
    FrVerdict,
    LogVerdict,
    Manifest,
    RecordError,
    RunRecord,
    ScoreRecord,
    read_index,
    write_cell_scores,
)
from faultloop.core import atomic, layout
from faultloop.core.cell import Cell
from faultloop.score.evidence import cell_evidence
from faultloop.score.grade import Truth, score_cell, score_fr
from faultloop.score.judge import JudgeInputs, judge, judge_log_tail

# A record's links to the analyzer's own files (the report's per-cell drill-down)
LOG_FILES = (layout.VERDICT_JSON, layout.VERDICT_TEXT, layout.RAW_OUTPUT, layout.RUN_JSON, layout.ANALYZER_SCORE)
FR_FILES = (layout.FR_JSON, layout.FR_TEXT, layout.RAW_OUTPUT, layout.RUN_JSON, layout.ANALYZER_SCORE)
DUMP_LINKS = 16


def _read_text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _log_verdict(path: Path) -> LogVerdict | None:
    try:
        return LogVerdict.read(path)
    except RecordError:
        return None


def _fr_verdict(path: Path) -> FrVerdict | None:
    try:
        return FrVerdict.read(path)
    except RecordError:
        return None


def _stored_score(path: Path, key: str) -> ScoreRecord | None:
    """The analyzer's stored score when it was computed from the same inputs (`key`)."""
    try:
        data = json.loads(path.read_text())
        return ScoreRecord.from_json(data) if isinstance(data, dict) and data.get("scored_from") == key else None
    except (OSError, ValueError):  # RecordError is a ValueError
        return None


def _reuse_key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _links(cell_dir: Path, folder: str, names: Iterable[str]) -> list[FileLink]:
    """The files of a cell that exist, as links relative to the session."""
    found = [layout.stored(cell_dir / folder, name).name for name in names if name]
    return [FileLink(name, f"{cell_dir.name}/{folder}{name}") for name in found if (cell_dir / folder / name).is_file()]


def cell_files(cell_dir: Path, job: Manifest | None) -> list[FileLink]:
    """The run's files a person opens first: manifest, main log, stripped log, the first dumps."""
    links = [
        FileLink(label, f"{cell_dir.name}/{path}")
        for label, path in (
            (layout.MANIFEST, layout.MANIFEST),
            ("main log", job.main_log if job else ""),
            ("stripped log", layout.STRIPPED_LOG),
        )
        if path and (cell_dir / path).is_file()
    ]
    dumps = sorted((cell_dir / layout.FR_DUMP_PREFIX).parent.glob("_dump_*"))
    folder = f"{cell_dir.name}/{layout.FR_DUMP_PREFIX.rsplit('/', 1)[0]}"
    links += [FileLink(d.name, f"{folder}/{d.name}") for d in dumps[:DUMP_LINKS]]
    if len(dumps) > DUMP_LINKS:
        links.append(FileLink(f"{len(dumps) - DUMP_LINKS} more dumps", f"{folder}/"))
    return links


def _stderr_end(run: RunRecord) -> str:
    lines = [line for line in run.stderr_tail.splitlines() if line.strip()]
    return lines[-1][-200:] if lines and run.status != OK else ""


def _describe(score: ScoreRecord, name: str, run: RunRecord, key: str) -> None:
    score.analyzer, score.analyzer_version, score.scored_from = name, run.fingerprint, key
    score.analyzer_wall_s, score.analyzer_stderr_end = run.wall_s, _stderr_end(run)


def score_analyzers(
    cell_dir: Path,
    truth: Truth,
    job: Manifest | None,
    *,
    judge_mode: str = "code",
    llm: LLMSettings | None = None,
    version: str = "",
    fresh: bool = False,
) -> list[ScoreRecord]:
    """Score every analyzer the cell's indexes list: the log analyzers and those whose verdicts
    were merged from others (the combined verdict, graded as log analyzers, with the first FR
    analyzer's verdict, as upstream's table is), then each FR analyzer on its own. A score whose
    inputs are unchanged is reused (its file untouched); the LLM judge runs on valid runs when
    the mode asks for it."""
    log_runs = read_index(cell_dir / layout.LOGSAGE_INDEX) + read_index(cell_dir / layout.MERGED_INDEX)
    fr_runs = read_index(cell_dir / layout.FR_INDEX)
    primary_fr = fr_runs[0] if fr_runs else None
    fr_primary = (
        _fr_verdict(cell_dir / layout.fr_analyzer_dir(primary_fr.analyzer) / layout.FR_JSON)
        if primary_fr and primary_fr.status == OK
        else None
    )
    common = (
        version,
        judge_mode,
        llm.model if llm else None,
        truth.gpus_per_node,
        truth.segment_size,
        file_digest(cell_dir / layout.MANIFEST),
        file_digest(cell_dir / layout.STRIPPED_LOG),
    )
    fr_key = primary_fr and asdict(primary_fr) | {"reused": None}
    files = cell_files(cell_dir, job)
    log_lines: list[str] | None = None
    scores = []
    for run in log_runs:
        folder = layout.analyzer_dir(run.analyzer)
        key = _reuse_key((*common, fr_key), asdict(run) | {"reused": None})
        score = None if fresh else _stored_score(cell_dir / folder / layout.ANALYZER_SCORE, key)
        if score is None:
            verdict = _log_verdict(layout.stored(cell_dir / folder, layout.VERDICT_JSON)) if run.status == OK else None
            score = score_cell(truth, job, verdict, fr_primary, failure=run.error if run.status != OK else None)
            _describe(score, run.analyzer, run, key)
            if score.scored:
                if log_lines is None:
                    log_lines = _read_text(cell_dir / layout.STRIPPED_LOG).splitlines()
                score.evidence = cell_evidence(truth.cell, log_lines, verdict)
            score.files, score.cell_files = _links(cell_dir, f"{folder}/", LOG_FILES), files
            if judge_mode in ("llm", "both") and score.scored:
                fr_text = (
                    _read_text(cell_dir / layout.fr_analyzer_dir(primary_fr.analyzer) / layout.FR_TEXT)
                    if primary_fr
                    else ""
                )
                inputs = JudgeInputs(
                    judge_log_tail(_read_text(cell_dir / layout.STRIPPED_LOG)),
                    _read_text(layout.stored(cell_dir / folder, layout.VERDICT_TEXT)),
                    fr_text,
                )
                judge(score, truth, judge_mode, llm, inputs)
            atomic.write_json_atomic(cell_dir / folder / layout.ANALYZER_SCORE, score.to_json())
        scores.append(score)
    for run in fr_runs:
        folder = layout.fr_analyzer_dir(run.analyzer)
        key = _reuse_key(common, asdict(run) | {"reused": None})
        score = None if fresh else _stored_score(cell_dir / folder / layout.ANALYZER_SCORE, key)
        if score is None:
            fr_verdict = _fr_verdict(cell_dir / folder / layout.FR_JSON) if run.status == OK else None
            score = score_fr(truth, job, fr_verdict, failure=run.error if run.status != OK else None)
            _describe(score, f"{FR_PREFIX}{run.analyzer}", run, key)
            score.files, score.cell_files = _links(cell_dir, f"{folder}/", FR_FILES), files
            atomic.write_json_atomic(cell_dir / folder / layout.ANALYZER_SCORE, score.to_json())
        scores.append(score)
    return scores


def score_cell_dir(
    cell_dir: Path,
    output: Path,
    *,
    gpus_per_node: int,
    segment_size: int,
    judge_mode: str = "code",
    llm: LLMSettings | None = None,
    version: str = "",
    fresh: bool = False,
) -> list[ScoreRecord]:
    """judge_score: grade every analyzer on the cell against the truth its job.json records,
    into `output` (the cell's score.json).
    ManifestError when job.json cannot be used."""
    job = Manifest.read(cell_dir / layout.MANIFEST)
    own = _own_placement(cell_dir)
    cell = Cell(job.fault_type, job.fault_rank, job.fault_iter, job.nodes, job.attempts, *own)
    truth = Truth(cell, gpus_per_node, segment_size)
    scores = score_analyzers(cell_dir, truth, job, judge_mode=judge_mode, llm=llm, version=version, fresh=fresh)
    write_cell_scores(scores, truth.cell.name, output)
    return scores


def _own_placement(run_dir: Path) -> tuple[str, str]:
    """The workload and launcher the cell's name carries ("" for the session's): job.json names
    what ran, the name tells cells of the same fault apart."""
    try:
        named = Cell.from_name(layout.cell_of_run(run_dir)[0].name)
    except ValueError:  # a folder named otherwise (an adopted session's)
        return "", ""
    return named.workload, named.launcher
